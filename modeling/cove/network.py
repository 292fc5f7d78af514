"""`CoveNetwork`: CoVe's attentional translation model (McCann et al. 2017) from Keras layers.

    source ids [batch, S] --word vectors--> x [batch, S, E]
      encoder:  num_encoder_layers x BiLSTM (forward LSTM | backward LSTM,
                `hidden_size` units each), each layer reading the one below
                -> H [batch, S, 2 * hidden_size]      (the MT-LSTM: CoVe)
    target ids [batch, T] --word vectors--> z [batch, T, E]
      decoder:  num_decoder_layers x LSTM over z          -> h_t
                alpha_t = softmax_s(H (W1 h_t + b1))        over real source words
                c_t     = sum_s alpha_ts H_s
                h~_t    = tanh(W2 [c_t ; h_t] + b2)         (the attentional state)
                p(y_{t+1} | y_<=t, x) = softmax(W_out h~_t + b_out)
                (each decoder layer starts from the encoder's final states)

CoVe's downstream input is `features()`: `[x ; H]` per source word, `E + 2 *
hidden_size` wide (McCann et al. feed `[GloVe(w) ; CoVe(w)]`; here the word
vectors are the model's own, trained with it).

    >>> network = CoveNetwork.from_config_object(config)
    >>> outputs = network({"input_ids": src, "input_mask": src_mask,
    ...                    "target_ids": tgt})        # a batch of the "cove" pipeline
    >>> outputs["decoder_logits"]                      # [batch, T, target_vocab]
    >>> network.features(src, src_mask)                # [batch, S, E + 2H]

Position t of the decoder has read target words 0..t and scores word t + 1
(teacher forcing: the target sentence `<S> y_1 .. y_n </S>` is the input,
`modeling.cove.objective` shifts it). `translate()` decodes greedily.

Padding is at the end of each sentence (`input_mask`, `target_mask`). The
LSTMs are unidirectional Keras LSTMs with default activations (the cuDNN
kernel on a GPU) and no mask: the backward LSTM reads each sentence reversed
within its own length (`tf.reverse_sequence`), so no real position ever reads
a padded one; padded positions of `H` and of the features are zero, and
attention gives them weight 0.

Differences from McCann et al., on purpose: the decoder has no "input
feeding" (their decoder LSTM also reads the previous attentional state h~_{t-1},
which needs a step-by-step custom cell); here it reads the target words only,
so teacher-forced training runs every LSTM as one cuDNN-compatible layer
(Luong et al.'s global attention without input feeding). Each decoder layer
starts from `tanh(W_b [final forward ; final backward encoder state] + b_b)`
(`initial_decoder_states`; OpenNMT-py, which McCann et al. trained with,
also starts the decoder from the encoder's final states).

Initialisation: word vectors N(0, 1), softmax weights N(0, 1/H). With
Keras's defaults (small uniform vectors, Glorot softmax weights, which shrink
with the vocabulary) the first few hundred updates of the demo only learned
the targets' unigram frequencies.
"""

import keras
import tensorflow as tf

from modeling.cove.config import CoveWidths
from modeling.encoder import id_features
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["CoveNetwork"]

_CONFIG_FIELDS = ("vocab_size", "target_vocab_size", "embedding_size", "hidden_size",
                  "num_encoder_layers", "num_decoder_layers", "dropout")


def _lengths(mask):
    return tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CoveNetwork(CoveWidths, ConfigFields, keras.Model):
    """CoVe's encoder-decoder (see the module docstring).

    Args: the fields of `CoveConfig`, and Keras `Model` arguments (`name`, `dtype`).

    Weights: `source_embeddings`, `forward_lstms[i]` / `backward_lstms[i]` (the
    encoder), `target_embeddings`, `bridge` (W_b, b_b), `decoder_lstms[i]`,
    `attention_query` (W1, b1), `attentional` (W2, b2), `output_projection`
    (W_out, b_out).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS

    def __init__(self, vocab_size, target_vocab_size=None, embedding_size=300,
                 hidden_size=300, num_encoder_layers=2, num_decoder_layers=2, dropout=0.2,
                 **kwargs):
        kwargs.setdefault("name", "cove")
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.target_vocab_size = int(target_vocab_size or vocab_size)
        self.embedding_size = int(embedding_size)
        self.hidden_size = int(hidden_size)
        self.num_encoder_layers = int(num_encoder_layers)
        self.num_decoder_layers = int(num_decoder_layers)
        self.dropout = float(dropout)
        policy = self.dtype_policy
        init = keras.initializers.RandomNormal(stddev=1.0)
        self.source_embeddings = keras.layers.Embedding(
            self.vocab_size, self.embedding_size, embeddings_initializer=init, dtype=policy,
            name="source_embeddings")
        self.target_embeddings = keras.layers.Embedding(
            self.target_vocab_size, self.embedding_size, embeddings_initializer=init,
            dtype=policy, name="target_embeddings")
        self.forward_lstms = [
            keras.layers.LSTM(self.hidden_size, return_sequences=True, dtype=policy,
                              name="encoder_forward_lstm_%d" % i)
            for i in range(self.num_encoder_layers)]
        self.backward_lstms = [
            keras.layers.LSTM(self.hidden_size, return_sequences=True, dtype=policy,
                              name="encoder_backward_lstm_%d" % i)
            for i in range(self.num_encoder_layers)]
        self.decoder_lstms = [
            keras.layers.LSTM(self.hidden_size, return_sequences=True, dtype=policy,
                              name="decoder_lstm_%d" % i)
            for i in range(self.num_decoder_layers)]
        # The decoder's initial (h, c) per layer from the encoder's final states.
        self.bridge = keras.layers.Dense(2 * self.num_decoder_layers * self.hidden_size,
                                         activation="tanh", dtype=policy, name="bridge")
        self.attention_query = keras.layers.Dense(2 * self.hidden_size, dtype=policy,
                                                  name="attention_query")
        self.attentional = keras.layers.Dense(self.hidden_size, activation="tanh",
                                              dtype=policy, name="attentional")
        # Softmax weights of scale 1/sqrt(H) (see the module docstring).
        self.output_projection = keras.layers.Dense(
            self.target_vocab_size, dtype=policy, name="output_projection",
            kernel_initializer=keras.initializers.RandomNormal(
                stddev=1.0 / self.hidden_size ** 0.5))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=policy)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.source_embeddings.build((None, None))
        self.target_embeddings.build((None, None))
        width = self.embedding_size
        for forward, backward in zip(self.forward_lstms, self.backward_lstms):
            forward.build((None, None, width))
            backward.build((None, None, width))
            width = 2 * self.hidden_size
        width = self.embedding_size
        for lstm in self.decoder_lstms:
            lstm.build((None, None, width))
            width = self.hidden_size
        self.bridge.build((None, 2 * self.hidden_size))
        self.attention_query.build((None, None, self.hidden_size))
        self.attentional.build((None, None, 3 * self.hidden_size))
        self.output_projection.build((None, None, self.hidden_size))
        self.built = True

    @property
    def embedding_table(self):
        """The source word vectors (the encoder contract's table; checkpoint loading finds
        the network by it)."""
        return self.source_embeddings.embeddings

    # -------------------------------------------------------------- encoder

    @staticmethod
    def _mask(source_ids, mask):
        if mask is None:
            return tf.ones(tf.shape(source_ids), tf.int32)
        return tf.cast(mask, tf.int32)

    def word_vectors(self, source_ids):
        """The source words' vectors `[batch, S, embedding_size]` (the embedding lookup)."""
        return self.source_embeddings(tf.cast(source_ids, tf.int32))

    def bilstm_layer(self, index, inputs, mask, training=None):
        """Encoder layer `index` over its inputs `[batch, S, d]`: `[batch, S, 2H]`, 0 at padding.

        Position s holds the forward LSTM's state after inputs 0..s, then the
        backward LSTM's after inputs s..end (of that sentence).
        """
        mask = tf.cast(mask, tf.int32)
        lengths = _lengths(mask)

        def flip(x):
            return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)

        inputs = self.dropout_layer(inputs, training=training)
        ahead = self.forward_lstms[index](inputs)
        behind = flip(self.backward_lstms[index](flip(inputs)))
        return tf.concat([ahead, behind], axis=-1) * tf.cast(mask, ahead.dtype)[:, :, None]

    def _encode_layers(self, vectors, mask, training):
        layers, hidden = [], vectors
        for index in range(self.num_encoder_layers):
            hidden = self.bilstm_layer(index, hidden, mask, training)
            layers.append(hidden)
        return layers

    def encode(self, source_ids, mask=None, training=None):
        """The encoder's top BiLSTM outputs `[batch, S, 2 * hidden_size]` (0 at padding).

        Each layer reads both halves of the layer below (a stacked BiLSTM,
        as McCann et al.'s MT-LSTM), so only the first layer's forward half
        is blind to later words; each layer is bidirectional over its input
        (`bilstm_layer`).
        """
        mask = self._mask(source_ids, mask)
        return self._encode_layers(self.word_vectors(source_ids), mask, training)[-1]

    def features(self, source_ids, mask=None, training=None):
        """CoVe's downstream input `[batch, S, E + 2H]`: [word vectors ; encode()], 0 at padding."""
        mask = self._mask(source_ids, mask)
        vectors = self.word_vectors(source_ids)
        top = self._encode_layers(vectors, mask, training)[-1]
        vectors = vectors * tf.cast(mask, vectors.dtype)[:, :, None]
        return tf.concat([vectors, top], axis=-1)

    # -------------------------------------------------------------- decoder

    def initial_decoder_states(self, encoder_outputs, source_mask):
        """`[[h, c]]` per decoder layer: tanh(W_b [forward state at the last word ;
        backward state at the first word] + b_b) of the encoder's top layer."""
        lengths = _lengths(source_mask)
        last = tf.gather(encoder_outputs, tf.maximum(lengths - 1, 0), axis=1, batch_dims=1)
        final = tf.concat([last[:, :self.hidden_size],
                           encoder_outputs[:, 0, self.hidden_size:]], axis=-1)
        flat = self.bridge(final)
        parts = tf.split(flat, 2 * self.num_decoder_layers, axis=-1)
        return [[parts[2 * i], parts[2 * i + 1]] for i in range(self.num_decoder_layers)]

    def decode(self, encoder_outputs, source_mask, target_ids, training=None):
        """Teacher-forced decoding: `{"logits", "attention_weights", "attentional_states"}`.

        Args:
            encoder_outputs: `encode()`'s `[batch, S, 2H]`.
            source_mask: `[batch, S]`, 1 for real source words.
            target_ids: `[batch, T]` target words read by the decoder.

        Returns:
            logits `[batch, T, target_vocab]` float32 (position t scores word t + 1),
            attention_weights `[batch, T, S]` float32 (rows sum to 1 over real
            source words), attentional_states `[batch, T, H]`.
        """
        hidden = self.target_embeddings(tf.cast(target_ids, tf.int32))
        states = self.initial_decoder_states(encoder_outputs, source_mask)
        for lstm, state in zip(self.decoder_lstms, states):
            hidden = lstm(self.dropout_layer(hidden, training=training), initial_state=state)
        query = self.attention_query(hidden)                             # [B, T, 2H]
        scores = tf.einsum("btd,bsd->bts", tf.cast(query, tf.float32),
                           tf.cast(encoder_outputs, tf.float32))
        real = tf.cast(source_mask, tf.bool)[:, None, :]
        scores = tf.where(real, scores, tf.constant(-1e9, tf.float32))
        weights = tf.nn.softmax(scores, axis=-1)
        weights = tf.where(real, weights, 0.0)  # a source of padding only attends to nothing
        context = tf.einsum("bts,bsd->btd", weights, tf.cast(encoder_outputs, tf.float32))
        state = self.attentional(tf.concat([tf.cast(context, hidden.dtype), hidden], axis=-1))
        logits = self.output_projection(self.dropout_layer(state, training=training))
        return {"logits": tf.cast(logits, tf.float32), "attention_weights": weights,
                "attentional_states": state}

    def call(self, inputs, training=None):
        features, source_ids = id_features(
            inputs, "input_ids", "CoveNetwork inputs need 'input_ids' ([batch, words] source "
            "word ids; 'input_mask', 'target_ids' optional)", ("batch", "words"))
        mask = self._mask(source_ids, features.get("input_mask"))
        vectors = self.word_vectors(source_ids)
        layers = self._encode_layers(vectors, mask, training)
        outputs = {
            "sequence_output": layers[-1],
            "encoder_outputs": layers,
            "embedding_output": vectors * tf.cast(mask, vectors.dtype)[:, :, None],
            "input_mask": mask,
        }
        outputs["cove_features"] = tf.concat([outputs["embedding_output"], layers[-1]], -1)
        if features.get("target_ids") is not None:
            decoded = self.decode(layers[-1], mask, features["target_ids"], training)
            outputs["decoder_logits"] = decoded["logits"]
            outputs["attention_weights"] = decoded["attention_weights"]
        return outputs

    def translate(self, source_ids, source_mask=None, max_length=32, bos_id=0, eos_id=1):
        """Greedy decoding: a list (one per sentence) of target id lists, without <S>/</S>.

        Each step re-reads the whole prefix with the teacher-forced decoder
        (quadratic in the length, exact, and small for a sanity check).
        """
        source_ids = tf.cast(source_ids, tf.int32)
        mask = self._mask(source_ids, source_mask)
        encoded = self.encode(source_ids, mask, training=False)
        batch = int(source_ids.shape[0])
        prefix = tf.fill([batch, 1], bos_id)
        done = tf.zeros([batch], tf.bool)
        for _ in range(max_length):
            logits = self.decode(encoded, mask, prefix, training=False)["logits"][:, -1]
            best = tf.argmax(logits, axis=-1, output_type=tf.int32)
            best = tf.where(done, eos_id, best)
            prefix = tf.concat([prefix, best[:, None]], axis=1)
            done = done | tf.equal(best, eos_id)
            if bool(tf.reduce_all(done)):
                break
        out = []
        for row in prefix.numpy()[:, 1:].tolist():
            out.append(row[:row.index(eos_id)] if eos_id in row else row)
        return out
