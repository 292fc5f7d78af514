"""`ElmoNetwork`: ELMo's biLM (Peters et al. 2018) from Keras layers.

    char_ids [batch, words, chars]
      -> CharacterEncoder: character embeddings, one convolution per filter
         width (1..7), max-pooled over the word, highway layers, a linear
         projection to `projection_dim`                      (token layer)
      -> forward LM:  n_layers x (LSTM -> linear projection), each layer
         after the first adding its input (residual)
      -> backward LM: the same stack, own weights, over the words in reverse
         order (each sentence reversed within its length, so padding stays
         at the end)

    >>> network = ElmoNetwork.from_config_object(config)
    >>> outputs = network({"char_ids": char_ids})     # a batch of the "elmo" pipeline
    >>> outputs["forward_outputs"][-1]                 # [batch, words, projection_dim]

Position t of the forward LM has read words 0..t and predicts word t + 1;
position t of the backward LM has read words t..end and predicts word t - 1
(`modeling.elmo.objective`). The LSTMs are unidirectional Keras LSTMs with
default activations (the cuDNN kernel on a GPU) and no mask: padding is at
the end of each sentence, and the backward stack reverses each sentence
within its own length, so no real position ever reads a padded one.

A word's vector does not depend on how many padding characters follow it:
max-pooling takes only the windows that lie inside the word (its
begin-of-word .. first end-of-word ids), or the first window when the word
is shorter than the filter. (bilm-tf pools over the padding too, which makes a
word's vector depend on `max_characters_per_token`.)

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
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["CharacterEncoder", "ElmoNetwork"]

_CONFIG_FIELDS = ("vocab_size", "char_embedding_dim", "filters", "n_highway",
                  "max_characters_per_token", "n_characters", "activation", "lstm_dim",
                  "projection_dim", "n_layers", "proj_clip", "use_skip_connections", "dropout")


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
    """

    def __init__(self, n_characters, char_embedding_dim, filters, n_highway, activation,
                 projection_dim, end_of_word=vocabulary.END_OF_WORD, **kwargs):
        super().__init__(**kwargs)
        self.n_characters = n_characters
        self.char_embedding_dim = char_embedding_dim
        self.filters = [list(pair) for pair in filters]
        self.n_highway = n_highway
        self.activation = activation
        self.projection_dim = projection_dim
        self.end_of_word = end_of_word
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
            # Windows that start inside the word (at least the first one).
            last_start = tf.maximum(lengths, width) - width
            valid = tf.range(tf.shape(windows)[1])[None, :] <= last_start[:, None]
            floor = tf.cast(windows.dtype.min, windows.dtype)
            pooled.append(tf.reduce_max(tf.where(valid[:, :, None], windows, floor), axis=1))
        hidden = tf.concat(pooled, axis=-1)
        n = self.num_filters
        for highway in self.highways:
            both = highway(hidden)
            transform, gate = tf.nn.relu(both[:, :n]), tf.sigmoid(both[:, n:])
            hidden = gate * transform + (1.0 - gate) * hidden
        tokens = self.projection(hidden)
        is_word = tf.cast(tf.not_equal(flat[:, 0], 0), tokens.dtype)[:, None]
        tokens = tokens * is_word                                  # padded word slots: 0
        return tf.reshape(tokens, tf.concat([shape[:-1], [self.projection_dim]], 0))

    def get_config(self):
        config = super().get_config()
        config.update(n_characters=self.n_characters,
                      char_embedding_dim=self.char_embedding_dim, filters=self.filters,
                      n_highway=self.n_highway, activation=self.activation,
                      projection_dim=self.projection_dim, end_of_word=self.end_of_word)
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
                 lstm_dim=4096, projection_dim=512, n_layers=2, proj_clip=3.0,
                 use_skip_connections=True, dropout=0.1, **kwargs):
        kwargs.setdefault("name", "elmo")
        super().__init__(**kwargs)
        self._set_fields(locals(), filters=[list(pair) for pair in filters])
        policy = self.dtype_policy
        self.char_encoder = CharacterEncoder(
            n_characters, char_embedding_dim, self.filters, n_highway, activation,
            projection_dim, dtype=policy, name="char_encoder")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)
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
        for i, (lstm, proj) in enumerate(zip(lstms, projections)):
            new = proj(lstm(self.dropout_layer(hidden, training=training)))
            if self.proj_clip is not None:
                new = tf.clip_by_value(new, -self.proj_clip, self.proj_clip)
            if i > 0 and self.use_skip_connections:
                new = new + hidden
            hidden = new
            outputs.append(hidden)
        return outputs

    def call(self, inputs, training=None):
        features = inputs if isinstance(inputs, dict) else {"char_ids": inputs}
        if "char_ids" not in features:
            raise ValueError("ElmoNetwork inputs need a 'char_ids' entry ([batch, words, "
                             "max_characters_per_token] character ids).")
        char_ids = tf.cast(features["char_ids"], tf.int32)
        if char_ids.shape.rank != 3:
            raise ValueError("char_ids must be [batch, words, characters], got shape %s"
                             % char_ids.shape)
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
