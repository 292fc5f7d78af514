"""Transformer blocks: post-LN (BERT, GPT) and pre-LN (GPT-2) from the same two halves.

* `AttentionSublayer`: post-LN `LayerNorm(x + Dropout(Attention(x)))`, or with
  `norm_first=True` pre-LN `x + Dropout(Attention(LayerNorm(x)))`.
* `FeedForwardSublayer`: the same with `Dense_out(act(Dense_in(.)))`.
* `TransformerBlock`: the two in turn; `norm_first` picks the order.
* `CrossAttentionSublayer`: post-LN `LayerNorm(x + Dropout(Attention(x, memory)))`,
  queries from `x`, keys and values from an encoder's output `memory`.
* `TransformerDecoderBlock`: self-attention, cross-attention, feed-forward
  (the decoder block of "Attention Is All You Need", post-LN; MASS).

The variable paths do not depend on `norm_first` (the LayerNorm of a half is
`<half>/LayerNorm` in both orders), so a family's checkpoint name table only
says where its own names go.
"""

import keras

from modeling.layers.activations import get_activation
from modeling.layers.activations import truncated_normal_initializer
from modeling.layers.attention import MultiHeadSelfAttention
from modeling.layers.common import LAYER_NORM_EPSILON
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields

__all__ = ["AttentionSublayer", "CrossAttentionSublayer", "FeedForwardSublayer",
           "TransformerBlock", "TransformerDecoderBlock"]


# The arguments both halves of a block take, around each half's own.
_HALF_TAIL = ("initializer_range", "layer_norm_epsilon", "norm_first",
              "output_initializer_range")
# Arguments that are a block's own, not a BERT-shaped encoder's.
_BLOCK_ONLY = ("norm_first", "output_initializer_range")


class _OfEncoder:
    """`of_encoder`: a block or half from a BERT-shaped encoder's attributes."""

    @classmethod
    def of_encoder(cls, encoder, name, **changed):
        """This layer of `encoder` (its attributes of the argument names and its
        dtype policy) called `name`; `changed`: other arguments (a pruned
        layer's `num_attention_heads` and `head_size`)."""
        args = {field: getattr(encoder, field) for field in cls._FIELDS
                if field not in _BLOCK_ONLY}
        args.update(changed)
        return cls(**args, dtype=encoder.dtype_policy, name=name)


class _ResidualHalf(_OfEncoder, LayerFields, keras.layers.Layer):
    """What a block's two halves share: `dropout` and `layer_norm` (made after
    the half's own sub-layers), the residual sum around them, their config."""

    def _make_residual_layers(self):
        policy = self.dtype_policy
        self.dropout = keras.layers.Dropout(
            self.hidden_dropout_prob, dtype=policy, name="dropout"
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="LayerNorm"
        )

    def _normed_input(self, hidden_states):
        return self.layer_norm(hidden_states) if self.norm_first else hidden_states

    def _residual(self, output, hidden_states, training):
        """Dropout of `output` plus `hidden_states`, normalised after the sum when post-LN."""
        output = self.dropout(output, training=training) + hidden_states
        return output if self.norm_first else self.layer_norm(output)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AttentionSublayer(_ResidualHalf):
    """`LayerNorm(x + Dropout(MultiHeadSelfAttention(x)))`: a block's first half.

    `TransformerBlock` is this followed by a `FeedForwardSublayer`; ALBERT
    shares each half across layers on its own.

    Sub-layers: `attention` (`MultiHeadSelfAttention`), `layer_norm`.

    Call args: `hidden_states` `[batch, seq, hidden]`, `attention_mask`,
    `attention_bias`, `training` (see `MultiHeadSelfAttention`).

    Returns:
        `(output [batch, seq, hidden], attention_probs)`.
    """

    _FIELDS = ("hidden_size", "num_attention_heads", "hidden_dropout_prob",
               "attention_probs_dropout_prob") + _HALF_TAIL
    # A pruned layer's head width (see `MultiHeadSelfAttention`).
    _OPTIONAL_FIELDS = ("head_size",)

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        norm_first=False,
        output_initializer_range=None,
        head_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_fields(locals())
        self.attention = MultiHeadSelfAttention(
            hidden_size,
            num_attention_heads,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            initializer_range=initializer_range,
            dtype=self.dtype_policy,
            name="attention",
            **({} if head_size is None else {"head_size": head_size}),
        )
        if output_initializer_range is not None:
            # GPT-2: residual projections scaled by 1/sqrt(2 x layers).
            self.attention.output_dense.kernel_initializer = truncated_normal_initializer(
                output_initializer_range)
        self._make_residual_layers()

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.layer_norm.build(shape)

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None,
        cache=None, return_cache=False, key_value_states=None, head_mask=None,
        return_scores=False,
    ):
        outputs = self.attention(
            self._normed_input(hidden_states),
            attention_mask=attention_mask,
            attention_bias=attention_bias,
            training=training,
            cache=cache,
            return_cache=return_cache,
            key_value_states=key_value_states,
            **({} if head_mask is None else {"head_mask": head_mask}),
            **({"return_scores": True} if return_scores else {}),
        )
        return (self._residual(outputs[0], hidden_states, training),) + tuple(outputs[1:])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class FeedForwardSublayer(_ResidualHalf):
    """`LayerNorm(x + Dropout(Dense_out(act(Dense_in(x)))))`: a block's second half.

    Sub-layers: `intermediate` (`Dense(intermediate_size)`), `output_dense`
    (`Dense(hidden_size)`), `layer_norm`.
    """

    _FIELDS = ("hidden_size", "intermediate_size", "hidden_act",
               "hidden_dropout_prob") + _HALF_TAIL

    def __init__(
        self,
        hidden_size,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        norm_first=False,
        output_initializer_range=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_fields(locals())
        self._activation = get_activation(hidden_act)
        policy = self.dtype_policy
        init = truncated_normal_initializer(initializer_range)
        self.intermediate = keras.layers.Dense(
            intermediate_size, kernel_initializer=init, dtype=policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=truncated_normal_initializer(
                output_initializer_range if output_initializer_range is not None
                else initializer_range),
            dtype=policy, name="output_dense"
        )
        self._make_residual_layers()

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build(shape)

    def call(self, hidden_states, training=None):
        inputs = self._normed_input(hidden_states)
        output = self.output_dense(self._activation(self.intermediate(inputs)))
        return self._residual(output, hidden_states, training)


# The arguments of both blocks, in the order of their configs.
_BLOCK_FIELDS = ("hidden_size", "num_attention_heads", "intermediate_size", "hidden_act",
                 "hidden_dropout_prob", "attention_probs_dropout_prob",
                 "initializer_range", "layer_norm_epsilon")


class _Block(_OfEncoder, LayerFields, keras.layers.Layer):
    """What both blocks share: their halves' arguments and the halves made from them."""

    _FIELDS = _BLOCK_FIELDS

    def _half_arguments(self, **block_only):
        """The arguments every half of this block takes (`block_only`: the block's own)."""
        return dict(
            hidden_size=self.hidden_size,
            hidden_dropout_prob=self.hidden_dropout_prob,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
            **block_only,
            dtype=self.dtype_policy,
        )

    def _attention_half(self, layer_class, name, common, **extra):
        return layer_class(
            num_attention_heads=self.num_attention_heads,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            name=name,
            **extra,
            **common,
        )

    def _ffn_half(self, common):
        return FeedForwardSublayer(
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            name="ffn_sublayer",
            **common,
        )


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerBlock(_Block):
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

    `norm_first=True` gives the pre-LN block of GPT-2:

        a = x + Dropout(Attention(LayerNorm(x), mask))
        y = a + Dropout(Dense_out(act(Dense_in(LayerNorm(a)))))

    `output_initializer_range` (GPT-2: 0.02 / sqrt(2 x layers)) initialises the
    two residual output projections; `None` uses `initializer_range`.

    `hidden_act` is an activation name (see `get_activation`), so that the
    block's config stays serialisable.

    Call args: `hidden_states`, `attention_mask`, `attention_bias`,
    `training`, `head_mask` as for `MultiHeadSelfAttention`.

    `head_size` (default `hidden_size // num_attention_heads`) is given for
    a block pruned to fewer heads (`modeling.analysis.heads`).

    Returns:
        `(output [batch, seq, hidden], attention_probs)`.
    """

    _FIELDS = _BLOCK_FIELDS + ("norm_first", "output_initializer_range")
    _OPTIONAL_FIELDS = ("head_size",)

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
        norm_first=False,
        output_initializer_range=None,
        head_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_fields(locals())
        common = self._half_arguments(
            norm_first=norm_first, output_initializer_range=output_initializer_range)
        self.attention_sublayer = self._attention_half(
            AttentionSublayer, "attention_sublayer", common,
            **({} if head_size is None else {"head_size": head_size}))
        self.ffn_sublayer = self._ffn_half(common)

    def build(self, input_shape=None):
        if self.built:
            return
        hidden_shape = (None, None, self.hidden_size)
        self.attention_sublayer.build(hidden_shape)
        self.ffn_sublayer.build(hidden_shape)

    def call(
        self, hidden_states, attention_mask=None, attention_bias=None, training=None,
        cache=None, return_cache=False, head_mask=None, return_scores=False,
    ):
        outputs = self.attention_sublayer(
            hidden_states,
            attention_mask=attention_mask,
            attention_bias=attention_bias,
            training=training,
            cache=cache,
            return_cache=return_cache,
            **({} if head_mask is None else {"head_mask": head_mask}),
            **({"return_scores": True} if return_scores else {}),
        )
        return (self.ffn_sublayer(outputs[0], training=training),) + tuple(outputs[1:])

    def compute_output_shape(self, input_shape):
        return self.attention_sublayer.attention.compute_output_shape(input_shape)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CrossAttentionSublayer(AttentionSublayer):
    """`LayerNorm(x + Dropout(Attention(queries=x, keys/values=memory)))`.

    A decoder block's middle half: every decoder position reads the
    encoder's output. It is `AttentionSublayer` (same sub-layers `attention`
    and `layer_norm`, same arguments) with the keys and values taken from
    `memory` (`MultiHeadSelfAttention`'s `key_value_states`).

    Call args:
        hidden_states: `[batch, seq_q, hidden]` (the decoder side).
        memory: `[batch, seq_k, hidden]` (the encoder's output).
        attention_mask: optional, broadcastable to `[batch, seq_q, seq_k]`
            (usually `padding_attention_mask(encoder input_mask)`).
        training: enables dropout.

    Returns:
        `(output [batch, seq_q, hidden], attention_probs [batch, heads, seq_q, seq_k])`.
    """

    def call(self, hidden_states, memory, attention_mask=None, training=None):
        return super().call(hidden_states, attention_mask=attention_mask, training=training,
                            key_value_states=memory)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerDecoderBlock(_Block):
    """One post-LN encoder-decoder block: self-attention, cross-attention, feed-forward.

        a = LayerNorm(x + Dropout(SelfAttention(x, self_mask)))      AttentionSublayer
        c = LayerNorm(a + Dropout(Attention(a, memory, memory_mask))) CrossAttentionSublayer
        y = LayerNorm(c + Dropout(Dense_out(act(Dense_in(c)))))       FeedForwardSublayer

    The first and last halves are `TransformerBlock`'s, so a decoder block
    is a BERT block with a cross-attention half in the middle (Vaswani et
    al. 2017; the decoder of MASS). `self_attention_mask` is usually causal
    times padding; the block itself knows no mask kind.

    Sub-layers: `attention_sublayer`, `cross_attention_sublayer`,
    `ffn_sublayer`.

    Call args:
        hidden_states: `[batch, seq_q, hidden]`.
        memory: `[batch, seq_k, hidden]` (the encoder's output).
        self_attention_mask: broadcastable to `[batch, seq_q, seq_q]`.
        memory_mask: broadcastable to `[batch, seq_q, seq_k]`.
        training: enables dropout.

    Returns:
        `(output [batch, seq_q, hidden], self_attention_probs, cross_attention_probs)`.
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
        self._set_fields(locals())
        common = self._half_arguments()
        self.attention_sublayer = self._attention_half(
            AttentionSublayer, "attention_sublayer", common)
        self.cross_attention_sublayer = self._attention_half(
            CrossAttentionSublayer, "cross_attention_sublayer", common)
        self.ffn_sublayer = self._ffn_half(common)

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (None, None, self.hidden_size)
        self.attention_sublayer.build(shape)
        self.cross_attention_sublayer.build(shape)
        self.ffn_sublayer.build(shape)

    def call(self, hidden_states, memory, self_attention_mask=None, memory_mask=None,
             training=None):
        hidden, self_probs = self.attention_sublayer(
            hidden_states, attention_mask=self_attention_mask, training=training)
        hidden, cross_probs = self.cross_attention_sublayer(
            hidden, memory, attention_mask=memory_mask, training=training)
        return self.ffn_sublayer(hidden, training=training), self_probs, cross_probs
