"""`ElmoNetwork`: ELMo's biLM (Peters et al. 2018) from Keras layers.

    char_ids [batch, words, chars]
      -> CharacterEncoder: character embeddings, one convolution per filter
         width (1..7), max-pooled over the word, highway layers, a linear
         projection to `projection_dim` (none when the filters already
         count `projection_dim`, as bilm-tf)                 (token layer)
      -> forward LM:  n_layers x LSTMP (an LSTM cell whose clipped
         projection is its recurrent state), each layer after the first
         adding its input (residual); in training, `dropout` on each
         layer's input, the residual adding the dropped-out input (bilm-tf's
         `DropoutWrapper(ResidualWrapper(cell))`)
      -> backward LM: the same stack, own weights, over the words in reverse
         order (each sentence reversed within its length, so padding stays
         at the end)

    >>> network = ElmoNetwork.from_config_object(config)
    >>> outputs = network({"char_ids": char_ids})     # a batch of the "elmo" pipeline
    >>> outputs["forward_outputs"][-1]                 # [batch, words, projection_dim]

Position t of the forward LM has read words 0..t and predicts word t + 1;
position t of the backward LM has read words t..end and predicts word t - 1
(`modeling.elmo.objective`). No mask reaches the LSTMs: padding is at the
end of each sentence, and the backward stack reverses each sentence within
its own length, so no real position ever reads a padded one.

The LSTM (`lstm_cell`, `modeling.elmo.config`): "lstmp" is bilm-tf's
`tf.nn.rnn_cell.LSTMCell(lstm_dim, num_proj=projection_dim, cell_clip,
proj_clip)` (`ProjectedLSTM`), its weights in bilm-tf's layout, so
`weights.hdf5` loads without reshuffling (`modeling.elmo.bilm_tf`);
"lstm_dense" is a Keras LSTM (the cuDNN kernel on a GPU) followed by a Dense
projection outside the recurrence.

Character pooling (`char_pooling`): "padded" max-pools each filter over
every window of the `max_characters_per_token` ids, padding included, as
bilm-tf. "word" takes only the windows that lie inside the word (its
begin-of-word .. first end-of-word ids), or the first window when the word
is shorter than the filter, so that a word's vector does not depend on
`max_characters_per_token`.

Outputs (the encoder contract of `modeling/encoder.py`, at width
2 x `projection_dim`, forward then backward):
    embedding_output   [batch, words, 2P]  the token layer, twice (ELMo's layer 0)
    encoder_outputs    list of [batch, words, 2P], one per biLSTM layer
    sequence_output    the last of them
    elmo_layers        [embedding_output] + encoder_outputs (what ScalarMix mixes)
    forward_outputs, backward_outputs   lists of [batch, words, P], one per layer
    token_embeddings   [batch, words, P]
    input_mask         [batch, words]  1 for a word, 0 for padding
"""

import keras
import tensorflow as tf

from data import word_vocab as vocabulary
from modeling.encoder import id_features
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["CharacterEncoder", "ElmoNetwork", "ProjectedLSTM"]

_CONFIG_FIELDS = ("vocab_size", "char_embedding_dim", "filters", "n_highway",
                  "max_characters_per_token", "n_characters", "activation", "lstm_dim",
                  "projection_dim", "n_layers", "cell_clip", "proj_clip",
                  "use_skip_connections", "dropout", "lstm_cell", "char_pooling")
FORGET_BIAS = 1.0  # added to the forget gate inside the cell, as TF's LSTMCell


def word_lengths(char_ids, end_of_word):
    """Characters of each word up to and including its first end-of-word id.

    A row without one (a padded word slot) counts as its full width.
    """
    is_end = tf.equal(char_ids, end_of_word)
    first_end = tf.argmax(tf.cast(is_end, tf.int32), axis=-1, output_type=tf.int32)
    width = tf.shape(char_ids)[-1]
    return tf.where(tf.reduce_any(is_end, axis=-1), first_end + 1, width)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CharacterEncoder(keras.layers.Layer):
    """Character ids of words -> token vectors (see the module docstring).

    Args:
        n_characters, char_embedding_dim, filters, n_highway, activation,
        projection_dim: as in `ElmoConfig`.
        end_of_word: the end-of-word character id (`vocabulary.END_OF_WORD`).
        pooling: `ElmoConfig.char_pooling`, "padded" (bilm-tf) or "word".

    Weights: `char_embeddings` `[n_characters, d]` (row 0, the padded word
    slot, is never read: such slots give 0), `convolutions[i]` (Conv1D,
    kernel `[width, d, count]`), `highways[i]` (one Dense `[n, 2n]`:
    transform | gate; the gate multiplies the transform, as bilm-tf's
    `W_carry`), `projection` (Dense `[n, projection_dim]`; None when `n`
    is already `projection_dim`, as bilm-tf).
    """

    def __init__(self, n_characters, char_embedding_dim, filters, n_highway, activation,
                 projection_dim, end_of_word=vocabulary.END_OF_WORD, pooling="padded",
                 **kwargs):
        super().__init__(**kwargs)
        self.n_characters = n_characters
        self.char_embedding_dim = char_embedding_dim
        self.filters = [list(pair) for pair in filters]
        self.n_highway = n_highway
        self.activation = activation
        self.projection_dim = projection_dim
        self.end_of_word = end_of_word
        if pooling not in ("padded", "word"):
            raise ValueError("pooling must be 'padded' or 'word', got %r" % (pooling,))
        self.pooling = pooling
        policy = self.dtype_policy
        self.char_embeddings = keras.layers.Embedding(
            n_characters, char_embedding_dim, embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0),
            dtype=policy, name="char_embed")
        self.convolutions = [
            keras.layers.Conv1D(count, width, padding="valid", dtype=policy, name="cnn_%d" % i)
            for i, (width, count) in enumerate(self.filters)]
        self.num_filters = sum(count for _, count in self.filters)
        # Highway: [transform | gate] from one product; gate bias starts at -2
        # (carry the input), as bilm-tf.
        self.highways = [
            keras.layers.Dense(2 * self.num_filters, dtype=policy, name="highway_%d" % i,
                               bias_initializer=keras.initializers.Constant(
                                   [0.0] * self.num_filters + [-2.0] * self.num_filters))
            for i in range(n_highway)]
        self.projection = None
        if self.num_filters != projection_dim:
            self.projection = keras.layers.Dense(projection_dim, dtype=policy,
                                                 name="char_projection")
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.char_embeddings.build((None, None))
        for conv in self.convolutions:
            conv.build((None, None, self.char_embedding_dim))
        for highway in self.highways:
            highway.build((None, self.num_filters))
        if self.projection is not None:
            self.projection.build((None, self.num_filters))
        self.built = True

    def call(self, char_ids):
        char_ids = tf.cast(char_ids, tf.int32)
        shape = tf.shape(char_ids)
        flat = tf.reshape(char_ids, [-1, shape[-1]])              # [words, chars]
        lengths = word_lengths(flat, self.end_of_word)
        embedded = self.char_embeddings(flat)                     # [words, chars, d]
        act = tf.nn.relu if self.activation == "relu" else tf.tanh
        pooled = []
        for (width, _), conv in zip(self.filters, self.convolutions):
            windows = act(conv(embedded))                          # [words, chars-w+1, n]
            if self.pooling == "word":
                # Windows that start inside the word (at least the first one).
                last_start = tf.maximum(lengths, width) - width
                valid = tf.range(tf.shape(windows)[1])[None, :] <= last_start[:, None]
                floor = tf.cast(windows.dtype.min, windows.dtype)
                windows = tf.where(valid[:, :, None], windows, floor)
            # (bilm-tf pools before its activation; relu and tanh are monotone,
            # so the order does not change the numbers.)
            pooled.append(tf.reduce_max(windows, axis=1))
        hidden = tf.concat(pooled, axis=-1)
        n = self.num_filters
        for highway in self.highways:
            both = highway(hidden)
            transform, gate = tf.nn.relu(both[:, :n]), tf.sigmoid(both[:, n:])
            hidden = gate * transform + (1.0 - gate) * hidden
        tokens = hidden if self.projection is None else self.projection(hidden)
        is_word = tf.cast(tf.not_equal(flat[:, 0], 0), tokens.dtype)[:, None]
        tokens = tokens * is_word                                  # padded word slots: 0
        return tf.reshape(tokens, tf.concat([shape[:-1], [self.projection_dim]], 0))

    def get_config(self):
        config = super().get_config()
        config.update(n_characters=self.n_characters,
                      char_embedding_dim=self.char_embedding_dim, filters=self.filters,
                      n_highway=self.n_highway, activation=self.activation,
                      projection_dim=self.projection_dim, end_of_word=self.end_of_word,
                      pooling=self.pooling)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ProjectedLSTM(keras.layers.Layer):
    """bilm-tf's LSTMP over a sequence: `tf.nn.rnn_cell.LSTMCell(units, num_proj, cell_clip,
    proj_clip)` run from a zero state (`[batch, time, input_dim]` -> `[batch, time, out]`).

    One step, with `[x; m]` the input beside the previous output:

        i, j, f, o = split([x; m] @ kernel + bias, 4)      (bilm-tf's gate order)
        c = sigmoid(f + 1.0) * c + sigmoid(i) * tanh(j)     (forget bias 1.0 in the cell)
        c = clip(c, -cell_clip, cell_clip)                 (when cell_clip is set)
        m = sigmoid(o) * tanh(c) @ projection              (when projection_dim < units)
        m = clip(m, -proj_clip, proj_clip)                 (with a projection, when set)

    The clipped projection `m` is both the output and the state fed back,
    which is why this is not a Keras LSTM followed by a Dense layer. Without
    a projection (`projection_dim` = `units`) `proj_clip` does nothing, as in
    TF's cell. The weights are bilm-tf's, as stored in `weights.hdf5`:
    `kernel` `[input_dim + out, 4 units]` (`W_0`), `bias` `[4 units]` (`B`,
    without the 1.0), `projection` `[units, projection_dim]` (`W_P_0`).

    Args:
        units: the cell's size (`lstm.dim`).
        projection_dim: the output's size; `units` for no projection.
        input_dim: the input's last dimension.
        cell_clip, proj_clip: None or a positive bound.
    """

    def __init__(self, units, projection_dim, input_dim, cell_clip=None, proj_clip=None,
                 **kwargs):
        super().__init__(**kwargs)
        if projection_dim > units:
            raise ValueError("ProjectedLSTM projects down: projection_dim %d > units %d"
                             % (projection_dim, units))
        self.units = int(units)
        self.projection_dim = int(projection_dim)
        self.input_dim = int(input_dim)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.proj_clip = None if proj_clip is None else float(proj_clip)
        self.has_projection = self.projection_dim < self.units
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.kernel = self.add_weight(
            name="kernel", shape=(self.input_dim + self.projection_dim, 4 * self.units),
            initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection = None
        if self.has_projection:
            self.projection = self.add_weight(
                name="projection", shape=(self.units, self.projection_dim),
                initializer="glorot_uniform")
        self.built = True

    def call(self, inputs):
        dtype = self.compute_dtype
        inputs = tf.cast(inputs, dtype)
        kernel = tf.cast(self.kernel, dtype)
        projection = None if self.projection is None else tf.cast(self.projection, dtype)
        # The input's share of the gates for every step at once; the loop adds m's.
        from_inputs = tf.einsum("btd,dg->btg", inputs, kernel[:self.input_dim])
        from_inputs += tf.cast(self.bias, dtype)
        recurrent = kernel[self.input_dim:]
        units, cell_clip, proj_clip = self.units, self.cell_clip, self.proj_clip

        def step(state, gates):
            c, m = state
            gates = gates + tf.matmul(m, recurrent)
            i, j, f = gates[:, :units], gates[:, units:2 * units], gates[:, 2 * units:3 * units]
            o = gates[:, 3 * units:]
            c = tf.sigmoid(f + FORGET_BIAS) * c + tf.sigmoid(i) * tf.tanh(j)
            if cell_clip is not None:
                c = tf.clip_by_value(c, -cell_clip, cell_clip)
            m = tf.sigmoid(o) * tf.tanh(c)
            if projection is not None:
                m = tf.matmul(m, projection)
                if proj_clip is not None:
                    m = tf.clip_by_value(m, -proj_clip, proj_clip)
            return c, m

        batch = tf.shape(inputs)[0]
        initial = (tf.zeros([batch, units], dtype), tf.zeros([batch, self.projection_dim], dtype))
        _, outputs = tf.scan(step, tf.transpose(from_inputs, [1, 0, 2]), initializer=initial)
        return tf.transpose(outputs, [1, 0, 2])

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      input_dim=self.input_dim, cell_clip=self.cell_clip,
                      proj_clip=self.proj_clip)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ElmoNetwork(ConfigFields, keras.Model):
    """ELMo's character-CNN biLM (see the module docstring).

    Args: the fields of `ElmoConfig` (`vocab_size` is recorded for the
    objective; the network itself never looks a word up), and Keras `Model`
    arguments (`name`, `dtype`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS

    def __init__(self, vocab_size, char_embedding_dim=16,
                 filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
                 n_highway=2, max_characters_per_token=50, n_characters=262, activation="relu",
                 lstm_dim=4096, projection_dim=512, n_layers=2, cell_clip=None, proj_clip=3.0,
                 use_skip_connections=True, dropout=0.1, lstm_cell="lstmp",
                 char_pooling="padded", **kwargs):
        kwargs.setdefault("name", "elmo")
        super().__init__(**kwargs)
        if lstm_cell not in ("lstmp", "lstm_dense"):
            raise ValueError("lstm_cell must be 'lstmp' or 'lstm_dense', got %r" % (lstm_cell,))
        if lstm_cell == "lstm_dense" and cell_clip is not None:
            raise ValueError("cell_clip needs lstm_cell='lstmp' (a Keras LSTM cannot clip "
                             "its cell state)")
        self._set_fields(locals(), filters=[list(pair) for pair in filters])
        policy = self.dtype_policy
        self.char_encoder = CharacterEncoder(
            n_characters, char_embedding_dim, self.filters, n_highway, activation,
            projection_dim, pooling=char_pooling, dtype=policy, name="char_encoder")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)
        self.forward_projections, self.backward_projections = [], []
        if lstm_cell == "lstmp":
            out = min(projection_dim, lstm_dim)
            self.forward_lstms, self.backward_lstms = [
                [ProjectedLSTM(lstm_dim, out, projection_dim if i == 0 else out,
                               cell_clip=cell_clip, proj_clip=proj_clip, dtype=policy,
                               name="%s_lstm_%d" % (direction, i)) for i in range(n_layers)]
                for direction in ("forward", "backward")]
        else:
            stacks = {}
            for direction in ("forward", "backward"):
                stacks[direction] = [
                    (keras.layers.LSTM(lstm_dim, return_sequences=True, dtype=policy,
                                       name="%s_lstm_%d" % (direction, i)),
                     keras.layers.Dense(projection_dim, use_bias=False, dtype=policy,
                                        name="%s_projection_%d" % (direction, i)))
                    for i in range(n_layers)]
            self.forward_lstms = [lstm for lstm, _ in stacks["forward"]]
            self.forward_projections = [proj for _, proj in stacks["forward"]]
            self.backward_lstms = [lstm for lstm, _ in stacks["backward"]]
            self.backward_projections = [proj for _, proj in stacks["backward"]]
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        if self.lstm_cell == "lstm_dense":
            for lstm, proj in zip(self.forward_lstms + self.backward_lstms,
                                  self.forward_projections + self.backward_projections):
                lstm.build((None, None, self.projection_dim))
                proj.build((None, None, self.lstm_dim))
        self.built = True

    @property
    def num_hidden_layers(self):
        return self.n_layers

    @property
    def hidden_size(self):
        return 2 * self.projection_dim

    def _stack(self, tokens, lstms, projections, training):
        outputs, hidden = [], tokens
        for i, lstm in enumerate(lstms):
            # bilm-tf wraps each cell as DropoutWrapper(ResidualWrapper(cell)):
            # the dropout is applied to the layer's input, and the residual adds
            # that dropped-out input (not the clean one) to the cell's output.
            dropped = self.dropout_layer(hidden, training=training)
            new = lstm(dropped)
            if projections:  # "lstm_dense": the projection and its clip follow the LSTM
                new = projections[i](new)
                if self.proj_clip is not None:
                    new = tf.clip_by_value(new, -self.proj_clip, self.proj_clip)
            if i > 0 and self.use_skip_connections:  # bilm-tf's ResidualWrapper
                new = new + dropped
            hidden = new
            outputs.append(hidden)
        return outputs

    def call(self, inputs, training=None):
        features, char_ids = id_features(
            inputs, "char_ids", "ElmoNetwork inputs need a 'char_ids' entry ([batch, words, "
            "max_characters_per_token] character ids).", ("batch", "words", "characters"))
        input_mask = features.get("input_mask")
        if input_mask is None:
            input_mask = tf.cast(tf.not_equal(char_ids[:, :, 0], 0), tf.int32)
        input_mask = tf.cast(input_mask, tf.int32)
        lengths = tf.reduce_sum(input_mask, axis=1)
        tokens = self.char_encoder(char_ids)
        forward = self._stack(tokens, self.forward_lstms, self.forward_projections, training)

        def flip(x):
            return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)

        backward = [flip(h) for h in self._stack(
            flip(tokens), self.backward_lstms, self.backward_projections, training)]
        embedding_output = tf.concat([tokens, tokens], axis=-1)
        layers = [tf.concat([f, b], axis=-1) for f, b in zip(forward, backward)]
        return {
            "sequence_output": layers[-1],
            "encoder_outputs": layers,
            "embedding_output": embedding_output,
            "elmo_layers": [embedding_output] + layers,
            "forward_outputs": forward,
            "backward_outputs": backward,
            "token_embeddings": tokens,
            "input_mask": input_mask,
        }
