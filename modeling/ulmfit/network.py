"""`AwdLstm`: the ASGD weight-dropped LSTM of Merity et al. (2017), ULMFiT's language model.

    input_ids [batch, words]
      -> embeddings     word vectors [batch, words, emb_sz]; in training whole
                        rows of the embedding matrix (word types) are dropped
                        (embed_p) and the rest scaled by 1 / (1 - embed_p)
      -> input dropout  variational (input_p): one mask per sequence, the same
                        at every time step
      -> layer_0 .. layer_{n-1}
                        LSTMs (n_hid units, the last one emb_sz) whose
                        hidden-to-hidden matrix is weight-dropped (weight_p,
                        DropConnect: one mask per forward pass, off at
                        inference); variational dropout (hidden_p) between
                        layers
      -> output dropout variational (output_p) on the last layer's output

    >>> network = AwdLstm.from_config_object(config)     # an AwdLstmConfig
    >>> outputs = network({"input_ids": ids}, training=False)
    >>> outputs["sequence_output"]      # [batch, words, emb_sz], read by the tied softmax

Outputs:
    sequence_output   [batch, words, emb_sz]  the last layer's output after the
                      output dropout (what the language model's softmax reads)
    layers            list of [batch, words, units], each LSTM layer's output
                      (before any dropout; the classifier pools `layers[-1]`)
    embedding_output  [batch, words, emb_sz]  the word vectors (after embedding
                      dropout, before the input dropout)
    input_mask        [batch, words]  1 for a word, 0 for padding

The LSTMs are forward-only: padding is at the end of each sequence, so no
real position ever reads a padded one, and a call without `state_reset`
starts every row from a zero state and runs unmasked. The embedding matrix
is `embedding_table` (the tied softmax of `modeling.ulmfit.objective`).

The hidden state carried across batches (AWD-LSTM's truncated BPTT): when
the features carry `state_reset` (int `[batch]`, 1 where the row starts a
text stream; the "ulmfit" pipeline's stream rows, row i of every batch
continuing row i of the previous one), each layer starts from the (h, c) it
ended the previous call with, kept in non-trainable per-replica variables
(`tf.VariableSynchronization.ON_READ`: each replica its own rows), one set
for training calls and one for inference calls, so an evaluation never
disturbs the training streams. Rows with `state_reset` 1, and every row of
a batch of another size than the one kept, start from zeros. The LSTMs then
run masked by `input_mask`, so the state kept is the state after the row's
last real word, and it is kept with its gradient stopped: backpropagation
is truncated at the batch boundary. The variables are no part of the
model's weights or checkpoint: a resumed run starts from zero states. The
trainer runs its steps one after the other in a graph loop, so reads and
writes follow the order of the batches.

Variable paths (every layer is created under the network's name, `awd_lstm`
by default):

    awd_lstm/embeddings/embeddings                 [vocab, emb_sz]
    awd_lstm/layer_<i>/lstm_cell/kernel            [in, 4 * units]  (Keras gate order i, f, c, o)
    awd_lstm/layer_<i>/lstm_cell/recurrent_kernel  [units, 4 * units]
    awd_lstm/layer_<i>/lstm_cell/bias              [4 * units]

so `modeling.training.finetuning_techniques` sees the groups `embeddings`,
`layer_0` .. `layer_{n-1}` (discriminative rates, gradual unfreezing).
"""

import keras
import tensorflow as tf

from modeling.encoder import id_features
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["AwdLstm", "WeightDropLSTM", "WordEmbedding"]

_CONFIG_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                  "embed_p", "input_p", "weight_p", "hidden_p", "output_p", "initrange")


def _cudnn_lstm(layer, sequences, initial_state, mask, kernel, recurrent_kernel, bias):
    """Keras's own cuDNN LSTM call with the given matrices, or None where it does not apply.

    The same backend call `keras.layers.LSTM` makes (it raises
    NotImplementedError without a GPU, or for settings cuDNN cannot run).
    """
    if keras.backend.backend() != "tensorflow" or layer.use_cudnn is False:
        return None
    try:
        from keras.src import backend as keras_backend  # pylint: disable=g-import-not-at-top
        return keras_backend.lstm(
            sequences, initial_state[0], initial_state[1], mask, kernel=kernel,
            recurrent_kernel=recurrent_kernel, bias=bias, activation=layer.cell.activation,
            recurrent_activation=layer.cell.recurrent_activation,
            return_sequences=layer.return_sequences, go_backwards=layer.go_backwards,
            unroll=layer.unroll)
    except (NotImplementedError, ImportError, AttributeError):
        return None


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WeightDropLSTM(keras.layers.LSTM):
    """A `keras.layers.LSTM` whose hidden-to-hidden matrix is weight-dropped while training.

    In a training call with `weight_dropout` p > 0 one DropConnect mask is
    drawn for the whole recurrent kernel `[units, 4 * units]` (every entry
    kept with probability 1 - p and scaled by 1 / (1 - p), the same at every
    time step and for every sequence of the batch); the input kernel and the
    bias are used as they are. Otherwise (inference, or p = 0) the layer IS
    the plain Keras LSTM (the cuDNN kernel on a GPU).

    The training recurrence with a dropped matrix runs Keras's cuDNN call on a
    GPU, and elsewhere a `tf.scan` over time of the LSTM step (the input
    projection of all time steps computed first). A `mask=` there must be
    right-padded (real steps first, as Keras's cuDNN path wants): a masked
    step keeps the state, as Keras's LSTM does. `go_backwards` is not
    supported on that path.

    Args:
        units: as `keras.layers.LSTM`.
        weight_dropout: p, the DropConnect probability of the recurrent kernel.
        weight_dropout_seed: seed of the masks' generator (None: random).
        **kwargs: `keras.layers.LSTM` arguments (default activations;
            `recurrent_dropout` must stay 0).
    """

    def __init__(self, units, weight_dropout=0.0, weight_dropout_seed=None, **kwargs):
        if kwargs.get("recurrent_dropout"):
            raise ValueError("WeightDropLSTM drops the recurrent weights (weight_dropout); "
                             "recurrent_dropout must be 0, got %r" % kwargs["recurrent_dropout"])
        super().__init__(units, **kwargs)
        if isinstance(weight_dropout, bool) or not 0 <= float(weight_dropout) < 1:
            raise ValueError("weight_dropout must be in [0, 1), got %r" % (weight_dropout,))
        self.weight_dropout = float(weight_dropout)
        self.weight_dropout_seed = weight_dropout_seed
        self.weight_seed_generator = keras.random.SeedGenerator(
            weight_dropout_seed, name="weight_drop_seed_generator")

    def compute_mask(self, inputs, mask=None):
        # No Keras mask on the outputs: the AWD-LSTM's readers take `input_mask`
        # from the features (a mask attached to a tensor would reach the objective).
        return None

    def recurrent_kernel_for_call(self, training):
        """The hidden-to-hidden matrix one call uses: weight-dropped in training, else as is.

        Each training call draws a new mask (the generator's state advances).
        """
        kernel = self.cell.recurrent_kernel
        if not training or self.weight_dropout == 0.0:
            return kernel
        return keras.random.dropout(kernel, self.weight_dropout,
                                    seed=self.weight_seed_generator)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if not training or self.weight_dropout == 0.0:
            return super().inner_loop(sequences, initial_state, mask, training=training)
        if self.go_backwards:
            raise ValueError("WeightDropLSTM trains with weight drop on forward sequences "
                             "only")
        if self.dropout:
            raise ValueError("WeightDropLSTM: use variational dropout outside the layer; "
                             "its own input dropout must be 0, got %r" % self.dropout)
        cell = self.cell
        dtype = sequences.dtype
        kernel = tf.cast(cell.kernel, dtype)
        bias = tf.cast(cell.bias, dtype) if cell.use_bias else None
        recurrent = tf.cast(self.recurrent_kernel_for_call(True), dtype)
        out = _cudnn_lstm(self, sequences, initial_state, mask, kernel, recurrent, bias)
        if out is not None:
            return out
        # [time, batch, 4 * units]: the input projection of every step at once.
        projected = tf.einsum("btd,dg->tbg", sequences, kernel)
        if bias is not None:
            projected += bias
        activation, recurrent_activation = cell.activation, cell.recurrent_activation

        def step(state, z_input):
            h, c = state
            z = z_input + tf.matmul(h, recurrent)
            i, f, g, o = tf.split(z, 4, axis=-1)
            c = recurrent_activation(f) * c + recurrent_activation(i) * activation(g)
            h = recurrent_activation(o) * activation(c)
            return h, c

        def masked_step(state, elements):
            z_input, keep = elements  # keep: [batch, 1], 1 on a real step
            h, c = step(state, z_input)
            return keep * h + (1 - keep) * state[0], keep * c + (1 - keep) * state[1]

        h0 = tf.cast(initial_state[0], dtype)
        c0 = tf.cast(initial_state[1], dtype)
        if mask is None:
            hs, cs = tf.scan(step, projected, initializer=(h0, c0))
        else:
            keep = tf.transpose(tf.cast(mask, dtype))[:, :, None]  # [time, batch, 1]
            hs, cs = tf.scan(masked_step, (projected, keep), initializer=(h0, c0))
        outputs = tf.transpose(hs, [1, 0, 2])
        return hs[-1], outputs, [hs[-1], cs[-1]]

    def get_config(self):
        config = super().get_config()
        config.update(weight_dropout=self.weight_dropout,
                      weight_dropout_seed=self.weight_dropout_seed)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WordEmbedding(keras.layers.Layer):
    """Word ids -> vectors, with embedding dropout (whole word types) in training.

    In a training call each row of the matrix (a word of the vocabulary) is
    kept with probability 1 - p and scaled by 1 / (1 - p), or zeroed: a
    dropped word is zero at every position of the batch (Gal & Ghahramani
    2016; AWD-LSTM's `embedded_dropout`). The matrix is `embeddings`
    `[vocab_size, output_dim]`.
    """

    def __init__(self, vocab_size, output_dim, embed_p=0.0, initrange=0.1, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.initrange = float(initrange)
        self.vocab_size = int(vocab_size)
        self.output_dim = int(output_dim)
        self.embed_p = float(embed_p)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed, name="embed_drop_seed_generator")

    def build(self, input_shape=None):
        if self.built:
            return
        # fastai's initialisation of the AWD-LSTM embedding: uniform(-initrange, initrange).
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.output_dim),
            initializer=keras.initializers.RandomUniform(-self.initrange, self.initrange))
        self.built = True

    def row_scale(self, training):
        """`[vocab_size]`: each word's factor in this call (0 or 1 / (1 - p); 1 at inference)."""
        ones = tf.ones([self.vocab_size], self.compute_dtype)
        if not training or self.embed_p == 0.0:
            return ones
        return keras.random.dropout(ones, self.embed_p, seed=self.seed_generator)

    def call(self, input_ids, training=None):
        input_ids = tf.cast(input_ids, tf.int32)
        vectors = tf.gather(tf.cast(self.embeddings, self.compute_dtype), input_ids)
        if training and self.embed_p > 0.0:
            vectors = vectors * tf.gather(self.row_scale(True), input_ids)[..., None]
        return vectors

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, output_dim=self.output_dim,
                      embed_p=self.embed_p, initrange=self.initrange, seed=self.seed)
        return config


class _CarriedState:
    """The (h, c) of every layer kept across calls, for one kind of call (see the module
    docstring); a plain holder, so neither Keras nor checkpoints track the variables."""

    def __init__(self, layer_sizes, name):
        on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.layers = [
            tuple(tf.Variable(tf.zeros([0, units]), shape=tf.TensorShape([None, units]),
                              name="%s_%s_%d" % (name, part, i), **on_read)
                  for part in ("h", "c"))
            for i, units in enumerate(layer_sizes)]
        # The rows kept, a variable of its own: the graph optimiser may read a
        # variable's shape out of order with its assignment, its value never.
        self.rows = tf.Variable(0, dtype=tf.int32, name="%s_rows" % name, **on_read)

    def read(self, batch_size, state_reset, dtype):
        """Each layer's `[h, c]` for a batch: zeros for rows that reset or a new batch size."""
        kept = tf.where(tf.equal(self.rows.read_value(), batch_size), batch_size, 0)
        keep = 1.0 - tf.cast(tf.reshape(state_reset, [-1]), tf.float32)
        states = []
        for layer in self.layers:
            parts = []
            for variable in layer:
                value = tf.pad(variable.read_value()[:kept], [[0, batch_size - kept], [0, 0]])
                parts.append(tf.cast(value * keep[:, None], dtype))
            states.append(parts)
        return states

    def write(self, states):
        """Keeps each layer's final `[h, c]` (gradients stopped: truncated BPTT)."""
        for layer, parts in zip(self.layers, states):
            for variable, value in zip(layer, parts):
                variable.assign(tf.stop_gradient(tf.cast(value, tf.float32)))
        self.rows.assign(tf.shape(states[0][0])[0])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AwdLstm(ConfigFields, keras.Model):
    """The AWD-LSTM network (see the module docstring).

    Args: the fields of `AwdLstmConfig` (`vocab_size`, `embedding_size`,
    `hidden_size`, `num_hidden_layers`, the five dropouts, `initrange`), and Keras
    `Model` arguments (`name`, `dtype`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS

    def __init__(self, vocab_size, embedding_size=400, hidden_size=1150, num_hidden_layers=3,
                 embed_p=0.02, input_p=0.25, weight_p=0.2, hidden_p=0.15, output_p=0.1,
                 initrange=0.1, **kwargs):
        kwargs.setdefault("name", "awd_lstm")
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.embedding_size = int(embedding_size)
        self.hidden_size = int(hidden_size)
        self.num_hidden_layers = int(num_hidden_layers)
        self.embed_p, self.input_p, self.weight_p = float(embed_p), float(input_p), float(weight_p)
        self.hidden_p, self.output_p = float(hidden_p), float(output_p)
        self.initrange = float(initrange)
        policy = self.dtype_policy
        self.embedding = WordEmbedding(vocab_size, embedding_size, embed_p, initrange,
                                       dtype=policy, name="embeddings")
        sizes = [hidden_size] * (num_hidden_layers - 1) + [embedding_size]
        self.lstms = [WeightDropLSTM(units, weight_dropout=weight_p, return_sequences=True,
                                     return_state=True, dtype=policy, name="layer_%d" % i)
                      for i, units in enumerate(sizes)]
        # Training and inference calls each carry their own streams' states.
        self._training_state = _CarriedState(sizes, "awd_lstm_training_state")
        self._inference_state = _CarriedState(sizes, "awd_lstm_inference_state")
        # Variational dropout: one mask per sequence and feature, the same at every step.
        self.input_dropout = keras.layers.SpatialDropout1D(input_p, dtype=policy,
                                                           name="input_dropout")
        self.hidden_dropouts = [keras.layers.SpatialDropout1D(hidden_p, dtype=policy,
                                                              name="hidden_dropout_%d" % i)
                                for i in range(num_hidden_layers - 1)]
        self.output_dropout = keras.layers.SpatialDropout1D(output_p, dtype=policy,
                                                            name="output_dropout")
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embedding.build((None, None))
        width = self.embedding_size
        for lstm in self.lstms:
            lstm.build((None, None, width))
            width = lstm.units
        self.built = True

    @property
    def embedding_table(self):
        """The `[vocab_size, emb_sz]` word matrix (the tied softmax's weights)."""
        return self.embedding.embeddings

    @property
    def layer_sizes(self):
        return [lstm.units for lstm in self.lstms]

    def call(self, inputs, training=None):
        features, input_ids = id_features(
            inputs, "input_ids", "AwdLstm inputs need an 'input_ids' entry ([batch, words] "
            "word ids)", ("batch", "words"))
        input_mask = features.get("input_mask")
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        input_mask = tf.cast(input_mask, tf.int32)
        embedded = self.embedding(input_ids, training=training)
        hidden = self.input_dropout(embedded, training=training)
        carried = None
        if features.get("state_reset") is not None:
            carried = self._training_state if training else self._inference_state
            initial = carried.read(tf.shape(input_ids)[0], features["state_reset"],
                                   self.compute_dtype)
            mask = tf.cast(input_mask, tf.bool)
        layers, final = [], []
        for i, lstm in enumerate(self.lstms):
            if carried is None:
                hidden, h, c = lstm(hidden, training=training)
            else:
                hidden, h, c = lstm(hidden, initial_state=initial[i], mask=mask,
                                    training=training)
            layers.append(hidden)
            final.append([h, c])
            if i < len(self.hidden_dropouts):
                hidden = self.hidden_dropouts[i](hidden, training=training)
        if carried is not None:
            carried.write(final)
        return {
            "sequence_output": self.output_dropout(layers[-1], training=training),
            "layers": layers,
            "embedding_output": embedded,
            "input_mask": input_mask,
        }
