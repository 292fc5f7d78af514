"""Building blocks shared by BERT and the encoders derived from it.

Every block here is a small Keras 3 layer whose constructor arguments are
plain values mirrored by `get_config()`, so any model built from them saves
and loads. The blocks follow google-research/bert numerically (same
initialiser, same LayerNorm epsilon, same -10000 attention-mask adder, same
post-LayerNorm residual order), which is what lets Google's checkpoints load
and give identical outputs.

* `get_activation(name)`: "gelu" (exact, erf), "gelu_new"/"gelu_tanh"
  (tanh approximation, GPT-2), "relu", "swish"/"silu", "tanh", "linear".
* `BertEmbeddings`: word + position + token-type embeddings, LayerNorm,
  dropout.
* `MultiHeadSelfAttention`: scaled dot-product attention with separate
  query/key/value projections and an output projection. What may attend to
  what is *data*: an `attention_mask` tensor (1/True = may attend), built with
  `padding_attention_mask`, `causal_attention_mask` or by hand (UNILM
  seq-to-seq, XLNet streams, ...), and/or an additive `attention_bias`.
* `AttentionSublayer`: attention -> dropout -> residual -> LayerNorm.
* `FeedForwardSublayer`: dense -> activation -> dense -> dropout -> residual
  -> LayerNorm.
* `TransformerBlock`: the two sublayers in turn ("post-LN", as in BERT).

Mixed precision: layers follow their Keras dtype policy (e.g.
`"mixed_float16"`: float32 variables, float16 compute). Attention scores get
their mask and softmax in float32, and `keras.layers.LayerNormalization`
normalises in float32, so the 1e-12 epsilon and the -10000 adder stay
meaningful in half precision.
"""

import math

import keras
import tensorflow as tf

__all__ = [
    "AttentionSublayer",
    "BertEmbeddings",
    "FeedForwardSublayer",
    "MultiHeadSelfAttention",
    "TransformerBlock",
    "causal_attention_mask",
    "gelu",
    "gelu_tanh",
    "get_activation",
    "padding_attention_mask",
    "truncated_normal_initializer",
]

_PACKAGE = "bert_family"
# What google-research/bert adds to the scores of masked positions. A finite
# adder (rather than -inf) keeps fully-masked rows finite (uniform) and is
# representable in float16.
MASK_ADDER = -10000.0
LAYER_NORM_EPSILON = 1e-12


# --------------------------------------------------------------- activations


def gelu(x):
    """Exact GELU: `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`.

    This is what google-research/bert calls "gelu" (its released checkpoints
    were trained with it).
    """
    x = tf.convert_to_tensor(x)
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def gelu_tanh(x):
    """Tanh approximation of GELU (GPT/GPT-2, Hugging Face "gelu_new").

    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`
    """
    x = tf.convert_to_tensor(x)
    c = tf.cast(math.sqrt(2.0 / math.pi), x.dtype)
    return 0.5 * x * (1.0 + tf.tanh(c * (x + 0.044715 * tf.pow(x, 3))))


def _linear(x):
    return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_tanh": gelu_tanh,
    "gelu_approximate": gelu_tanh,
    "relu": tf.nn.relu,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
    "tanh": tf.tanh,
    "linear": _linear,
}


def get_activation(name):
    """Maps an activation name (as in `bert_config.json`) to a function.

    Args:
        name: A name (case-insensitive; see the module docstring), `None` or
            "" for the identity, or a callable (returned unchanged).

    Raises:
        ValueError: the name is unknown.
    """
    if name is None or name == "":
        return _linear
    if callable(name):
        return name
    if not isinstance(name, str):
        raise ValueError(f"Activation must be a name or callable, got {name!r}.")
    key = name.lower()
    if key not in _ACTIVATIONS:
        raise ValueError(
            f"Unsupported activation {name!r}; known: {', '.join(_ACTIVATIONS)}."
        )
    return _ACTIVATIONS[key]


def truncated_normal_initializer(initializer_range=0.02):
    """BERT's initialiser: normal(0, stddev) re-drawn beyond 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


# --------------------------------------------------------------------- masks


def padding_attention_mask(input_mask, dtype="float32"):
    """Turns a `[batch, seq]` 1-real/0-pad mask into an attention mask.

    Returns `[batch, 1, seq]`: every query position may attend to every real
    key position. It broadcasts against `[batch, seq_q, seq_k]` masks, so
    `padding_attention_mask(m) * causal_attention_mask(t)` combines both.
    """
    mask = tf.cast(input_mask, dtype)
    return mask[:, tf.newaxis, :]


def causal_attention_mask(seq_length, dtype="float32"):
    """A `[1, seq, seq]` lower-triangular mask: position i sees j <= i.

    Args:
        seq_length: Python int or scalar tensor.
    """
    ones = tf.ones([seq_length, seq_length], dtype=dtype)
    return tf.linalg.band_part(ones, -1, 0)[tf.newaxis, :, :]


# ----------------------------------------------------------------- embeddings


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbeddings(keras.layers.Layer):
    """Word + position + token-type embeddings, then LayerNorm and dropout.

    Weights (Google name in brackets):
        `word_embeddings` [vocab, hidden] (bert/embeddings/word_embeddings),
        `position_embeddings` [max_positions, hidden]
        (bert/embeddings/position_embeddings),
        `token_type_embeddings` [type_vocab, hidden]
        (bert/embeddings/token_type_embeddings),
        `layer_norm.gamma` / `.beta` (bert/embeddings/LayerNorm/gamma|beta).

    Call args:
        input_ids: int `[batch, seq]`.
        segment_ids: int `[batch, seq]` token type ids, default all 0.
        position_ids: int `[batch, seq]` or `[seq]`, default `0..seq-1`.
        training: enables dropout.

    Returns:
        `[batch, seq, hidden]` in the layer's compute dtype.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        hidden_dropout_prob=0.1,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.hidden_dropout_prob = hidden_dropout_prob
        self.layer_norm_epsilon = layer_norm_epsilon
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout = keras.layers.Dropout(
            hidden_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape=None):
        if self.built:
            return
        init = truncated_normal_initializer(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=init,
        )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init,
        )
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            shape=(self.type_vocab_size, self.hidden_size),
            initializer=init,
        )
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, input_ids, segment_ids=None, position_ids=None, training=None):
        input_ids = tf.convert_to_tensor(input_ids)
        seq_length = tf.shape(input_ids)[1]
        static_length = input_ids.shape[1]
        if static_length is not None and static_length > self.max_position_embeddings:
            raise ValueError(
                f"Sequence length {static_length} exceeds "
                f"max_position_embeddings={self.max_position_embeddings}."
            )
        embeddings = tf.gather(self.word_embeddings, input_ids)
        if position_ids is None:
            # [seq, hidden], broadcast over the batch.
            positions = self.position_embeddings[:seq_length]
        else:
            positions = tf.gather(self.position_embeddings, position_ids)
        embeddings = embeddings + positions
        if segment_ids is None:
            segment_ids = tf.zeros_like(input_ids)
        embeddings = embeddings + tf.gather(self.token_type_embeddings, segment_ids)
        embeddings = self.layer_norm(embeddings)
        return self.dropout(embeddings, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            initializer_range=self.initializer_range,
            hidden_dropout_prob=self.hidden_dropout_prob,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


# ------------------------------------------------------------------ attention


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a data-driven mask.

    The projections are four ordinary `Dense(hidden_size)` layers with
    `[hidden, hidden]` kernels, exactly the shapes of Google's checkpoint:

        `query`, `key`, `value`  -> .../attention/self/{query,key,value}
        `output_dense`           -> .../attention/output/dense

    Call args:
        hidden_states: `[batch, seq, hidden]`.
        attention_mask: optional, broadcastable to `[batch, seq_q, seq_k]`
            (or `[batch, heads, seq_q, seq_k]`); bool or 0/1 numbers,
            1/True meaning "may attend". Masked scores get -10000 added,
            as in google-research/bert.
        attention_bias: optional additive float bias broadcastable to
            `[batch, heads, seq_q, seq_k]` (relative positions, custom
            masks already in additive form).
        training: enables dropout on the attention probabilities.

    Returns:
        `(output [batch, seq, hidden], probs [batch, heads, seq_q, seq_k])`;
        `probs` are the softmax before dropout (what probing analyses want).
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of "
                f"num_attention_heads ({num_attention_heads})."
            )
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_size,
                kernel_initializer=truncated_normal_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense")
        self.dropout = keras.layers.Dropout(
            attention_probs_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape=None):
        if self.built:
            return
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))

    def _split_heads(self, x, batch_size):
        # [batch, seq, hidden] -> [batch, heads, seq, head_size]
        x = tf.reshape(x, [batch_size, -1, self.num_attention_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None
    ):
        batch_size = tf.shape(hidden_states)[0]
        query = self._split_heads(self.query(hidden_states), batch_size)
        key = self._split_heads(self.key(hidden_states), batch_size)
        value = self._split_heads(self.value(hidden_states), batch_size)

        # Scale the query rather than the scores: same result, smaller tensor.
        query = query * tf.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        scores = tf.matmul(query, key, transpose_b=True)
        # Mask and softmax in float32: -10000 and exp() are unsafe in float16.
        scores = tf.cast(scores, "float32")
        if attention_mask is not None:
            mask = tf.cast(attention_mask, "float32")
            if mask.shape.rank == 3:
                mask = mask[:, tf.newaxis, :, :]
            scores += (1.0 - mask) * MASK_ADDER
        if attention_bias is not None:
            scores += tf.cast(attention_bias, "float32")
        probs = tf.nn.softmax(scores, axis=-1)
        probs = tf.cast(probs, self.compute_dtype)
        dropped = self.dropout(probs, training=training)

        context = tf.matmul(dropped, value)  # [batch, heads, seq, head_size]
        context = tf.transpose(context, [0, 2, 1, 3])
        context = tf.reshape(context, [batch_size, -1, self.hidden_size])
        return self.output_dense(context), probs

    def compute_output_shape(self, input_shape):
        batch, seq = input_shape[0], input_shape[1]
        return (
            (batch, seq, self.hidden_size),
            (batch, self.num_attention_heads, seq, seq),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
        )
        return config


# ---------------------------------------------------------------- transformer


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AttentionSublayer(keras.layers.Layer):
    """`LayerNorm(x + Dropout(MultiHeadSelfAttention(x)))`: a block's first half.

    `TransformerBlock` is this followed by a `FeedForwardSublayer`; ALBERT
    shares each half across layers on its own.

    Sub-layers: `attention` (`MultiHeadSelfAttention`), `layer_norm`.

    Call args: `hidden_states` `[batch, seq, hidden]`, `attention_mask`,
    `attention_bias`, `training` (see `MultiHeadSelfAttention`).

    Returns:
        `(output [batch, seq, hidden], attention_probs)`.
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        policy = self.dtype_policy
        self.attention = MultiHeadSelfAttention(
            hidden_size,
            num_attention_heads,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            initializer_range=initializer_range,
            dtype=policy,
            name="attention",
        )
        self.dropout = keras.layers.Dropout(
            hidden_dropout_prob, dtype=policy, name="dropout"
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="LayerNorm"
        )

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.layer_norm.build(shape)

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None
    ):
        output, probs = self.attention(
            hidden_states,
            attention_mask=attention_mask,
            attention_bias=attention_bias,
            training=training,
        )
        output = self.dropout(output, training=training)
        return self.layer_norm(output + hidden_states), probs

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class FeedForwardSublayer(keras.layers.Layer):
    """`LayerNorm(x + Dropout(Dense_out(act(Dense_in(x)))))`: a block's second half.

    Sub-layers: `intermediate` (`Dense(intermediate_size)`), `output_dense`
    (`Dense(hidden_size)`), `layer_norm`.
    """

    def __init__(
        self,
        hidden_size,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self._activation = get_activation(hidden_act)
        policy = self.dtype_policy
        init = truncated_normal_initializer(initializer_range)
        self.intermediate = keras.layers.Dense(
            intermediate_size, kernel_initializer=init, dtype=policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="output_dense"
        )
        self.dropout = keras.layers.Dropout(
            hidden_dropout_prob, dtype=policy, name="dropout"
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="LayerNorm"
        )

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build(shape)

    def call(self, hidden_states, training=None):
        output = self.output_dense(self._activation(self.intermediate(hidden_states)))
        output = self.dropout(output, training=training)
        return self.layer_norm(output + hidden_states)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm Transformer encoder block, as in BERT.

        a = LayerNorm(x + Dropout(Attention(x, mask)))      AttentionSublayer
        y = LayerNorm(a + Dropout(Dense_out(act(Dense_in(a)))))  FeedForwardSublayer

    Sub-layers (Google name under bert/encoder/layer_N/ in brackets):
        `attention_sublayer.attention` (`MultiHeadSelfAttention`:
        attention/self/*, attention/output/dense),
        `attention_sublayer.layer_norm` (attention/output/LayerNorm),
        `ffn_sublayer.intermediate` (intermediate/dense),
        `ffn_sublayer.output_dense` (output/dense),
        `ffn_sublayer.layer_norm` (output/LayerNorm).

    `hidden_act` is an activation name (see `get_activation`), so that the
    block's config stays serialisable.

    Call args: `hidden_states`, `attention_mask`, `attention_bias`,
    `training` as for `MultiHeadSelfAttention`.

    Returns:
        `(output [batch, seq, hidden], attention_probs)`.
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        common = dict(
            hidden_size=hidden_size,
            hidden_dropout_prob=hidden_dropout_prob,
            initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
        )
        self.attention_sublayer = AttentionSublayer(
            num_attention_heads=num_attention_heads,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            name="attention_sublayer",
            **common,
        )
        self.ffn_sublayer = FeedForwardSublayer(
            intermediate_size=intermediate_size,
            hidden_act=hidden_act,
            name="ffn_sublayer",
            **common,
        )

    def build(self, input_shape=None):
        if self.built:
            return
        hidden_shape = (None, None, self.hidden_size)
        self.attention_sublayer.build(hidden_shape)
        self.ffn_sublayer.build(hidden_shape)

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None
    ):
        hidden, probs = self.attention_sublayer(
            hidden_states,
            attention_mask=attention_mask,
            attention_bias=attention_bias,
            training=training,
        )
        return self.ffn_sublayer(hidden, training=training), probs

    def compute_output_shape(self, input_shape):
        return self.attention_sublayer.attention.compute_output_shape(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config
