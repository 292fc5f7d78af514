"""Multi-head scaled dot-product attention; what may attend to what is data.

Self-attention by default; given `key_value_states`, the same layer is
cross-attention (an encoder-decoder's decoder attending to the encoder).
"""

import math

import keras
import tensorflow as tf

from modeling.layers.activations import truncated_normal_initializer
from modeling.layers.common import MASK_ADDER
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields

__all__ = ["MultiHeadSelfAttention"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultiHeadSelfAttention(LayerFields, keras.layers.Layer):
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
        cache: optional `(key, value)` of earlier positions, each
            `[batch, heads, past, head_size]` (incremental decoding): the new
            positions' keys and values are appended to them, and the mask
            then covers `[seq_q, past + seq_q]`.
        return_cache: also return the `(key, value)` of all positions seen.
        head_mask: optional float `[heads]` (or `[batch, heads]`), 1 keep /
            0 drop: multiplies each head's attention probabilities (after
            dropout) before the product with the values, as in Michel et
            al. 2019 and Hugging Face; gradients with respect to it are the
            heads' importance scores. The returned `probs` are not masked.
        key_value_states: optional `[batch, seq_k, hidden]`: keys and values
            are projected from these instead of `hidden_states`
            (cross-attention; the mask then covers `[seq_q, seq_k]`). Not
            combined with `cache`.

    Returns:
        `(output [batch, seq, hidden], probs [batch, heads, seq_q, seq_k])`;
        `probs` are the softmax before dropout (what probing analyses want).
        With `return_cache=True`, `(output, probs, (key, value))`.
        `return_scores=True` returns instead of `probs` the float32 scores
        before the softmax (scaled dot products, masked keys with -10000
        added, `attention_bias` included), what TinyBERT distils.
    """

    _FIELDS = ("hidden_size", "num_attention_heads", "attention_probs_dropout_prob",
               "initializer_range")

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        head_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if head_size is None and hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of "
                f"num_attention_heads ({num_attention_heads})."
            )
        self._set_fields(locals())
        # A pruned layer (Michel et al. 2019) keeps fewer heads of the
        # original width: `head_size` given, the query/key/value kernels are
        # `[hidden, heads * head_size]` and the output kernel
        # `[heads * head_size, hidden]`. With 0 heads the layer outputs the
        # output bias alone (the sublayer then adds it to its input).
        self._explicit_head_size = head_size
        self.head_size = hidden_size // num_attention_heads if head_size is None \
            else int(head_size)
        self.all_head_size = (hidden_size if head_size is None
                              else num_attention_heads * self.head_size)

        def dense(name, units=self.all_head_size):
            layer = keras.layers.Dense(
                max(units, 1),
                kernel_initializer=truncated_normal_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )
            # Keras refuses Dense(0); a layer pruned to no heads keeps
            # zero-width projections (`[hidden, 0]` kernels), which are never
            # called but keep the checkpoint's names and shapes.
            layer.units = units
            return layer

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output_dense", hidden_size)
        self.dropout = keras.layers.Dropout(
            attention_probs_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape=None):
        if self.built:
            return
        for layer in (self.query, self.key, self.value):
            layer.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.all_head_size))

    def _split_heads(self, x, batch_size):
        # [batch, seq, hidden] -> [batch, heads, seq, head_size]
        x = tf.reshape(x, [batch_size, -1, self.num_attention_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None,
        cache=None, return_cache=False, key_value_states=None, head_mask=None,
        return_scores=False,
    ):
        batch_size = tf.shape(hidden_states)[0]
        if self.num_attention_heads == 0:
            return self._no_heads(hidden_states, key_value_states, return_cache)
        if key_value_states is not None and cache is not None:
            raise ValueError("MultiHeadSelfAttention: `cache` is for self-attention; "
                             "cross-attention (`key_value_states`) takes none.")
        source = hidden_states if key_value_states is None else key_value_states
        query = self._split_heads(self.query(hidden_states), batch_size)
        key = self._split_heads(self.key(source), batch_size)
        value = self._split_heads(self.value(source), batch_size)
        if cache is not None:
            key = tf.concat([tf.cast(cache[0], key.dtype), key], axis=2)
            value = tf.concat([tf.cast(cache[1], value.dtype), value], axis=2)

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
        if head_mask is not None:
            head_mask = tf.cast(head_mask, dropped.dtype)
            head_mask = tf.reshape(head_mask, [-1, self.num_attention_heads, 1, 1]) \
                if head_mask.shape.rank == 2 else \
                tf.reshape(head_mask, [1, self.num_attention_heads, 1, 1])
            dropped = dropped * head_mask

        context = tf.matmul(dropped, value)  # [batch, heads, seq, head_size]
        context = tf.transpose(context, [0, 2, 1, 3])
        context = tf.reshape(context, [batch_size, -1, self.all_head_size])
        # TinyBERT matches the scores before the softmax (masked keys -10000).
        maps = scores if return_scores else probs
        if return_cache:
            return self.output_dense(context), maps, (key, value)
        return self.output_dense(context), maps

    def _no_heads(self, hidden_states, key_value_states, return_cache):
        """A layer whose heads were all pruned: the output bias, no probabilities."""
        source = hidden_states if key_value_states is None else key_value_states
        shape = tf.shape(hidden_states)
        output = tf.zeros([shape[0], shape[1], self.hidden_size], self.compute_dtype)
        output += tf.cast(self.output_dense.bias, self.compute_dtype)
        probs = tf.zeros([shape[0], 0, shape[1], tf.shape(source)[1]], self.compute_dtype)
        if return_cache:
            empty = tf.zeros([shape[0], 0, tf.shape(source)[1], self.head_size],
                             self.compute_dtype)
            return output, probs, (empty, empty)
        return output, probs

    def compute_output_shape(self, input_shape):
        batch, seq = input_shape[0], input_shape[1]
        return (
            (batch, seq, self.hidden_size),
            (batch, self.num_attention_heads, seq, seq),
        )

    def get_config(self):
        config = super().get_config()
        if self._explicit_head_size is not None:
            config["head_size"] = self._explicit_head_size
        return config
