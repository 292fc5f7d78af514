"""SpanBERT's span-boundary objective (SBO), Joshi et al. 2020.

Every token of a masked span is predicted a second time, from the span's
boundary alone: the encoder outputs just outside the span, x(s-1) and x(e+1),
plus an embedding of the token's position inside the span. This forces the
boundary representations to summarise the span's content, which is what
span-selection tasks (QA, coreference) read.

    h0 = [x(s-1); x(e+1); p(i - s)]       (p: `position_embedding_size` wide)
    h1 = LayerNorm(GELU(W1 h0))
    h2 = LayerNorm(GELU(W2 h1))
    logits = h2 @ embedding_table^T + bias        (tied output embedding)

The spans are recovered from the pre-training features themselves: the span
masking of `data/pretraining/masking.py` masks runs of consecutive positions, so a span
is a maximal run of consecutive `masked_lm_positions`. Two spans that happen
to touch are read as one, as facebookresearch/SpanBERT does too (its
`merge_intervals` joins touching spans before making the boundary targets);
spans are sampled without overlap, so this only merges neighbours and never
splits a span. No extra feature is needed, and the TFRecords keep Google's
feature names.

The relative position embedding is `hidden_size` wide by default, so that
the head scales with the model; the authors' code uses 200 for BERT-large
(`--pair-positional-embedding-size 200`): `position_embedding_size=200`
(in a recipe, ``"objective_options": {"span_boundary":
{"position_embedding_size": 200}}``).
"""

import keras
import tensorflow as tf

from modeling.layers import LAYER_NORM_EPSILON, get_activation, truncated_normal_initializer
from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields
from modeling.objectives.base import Objective, _Ref, tied_logits, token_scores
from modeling.objectives.base import head_kwargs


def span_boundaries(masked_lm_positions, masked_lm_weights, seq_length):
    """Left/right boundary positions and in-span offsets of every prediction.

    Args:
      masked_lm_positions: int `[batch, P]`, sorted ascending over the real
        predictions (as the pre-training data writes them).
      masked_lm_weights: `[batch, P]`, 1 for real predictions, 0 for padding.
      seq_length: sequence length (boundaries are clipped into it).

    Returns:
      (left, right, offset), each int32 `[batch, P]`: left = s - 1 and
      right = e + 1 for the run [s, e] holding the prediction, offset = i - s.
    """
    positions = tf.cast(masked_lm_positions, tf.int32)
    real = tf.cast(masked_lm_weights, tf.float32) > 0
    num = tf.shape(positions)[1]
    index = tf.range(num)
    # Prediction j belongs to the run of prediction i iff both are real and
    # position_i - position_j == i - j (positions are sorted and distinct, so
    # equal distances in both means every position in between is masked).
    same_run = tf.equal(positions[:, :, None] - positions[:, None, :],
                        (index[:, None] - index[None, :])[None])
    same_run &= real[:, :, None] & real[:, None, :]
    big = tf.int32.max
    start = tf.reduce_min(tf.where(same_run, positions[:, None, :], big), axis=-1)
    end = tf.reduce_max(tf.where(same_run, positions[:, None, :], -1), axis=-1)
    start = tf.where(real, start, positions)
    end = tf.where(real, end, positions)
    left = tf.clip_by_value(start - 1, 0, seq_length - 1)
    right = tf.clip_by_value(end + 1, 0, seq_length - 1)
    return left, right, positions - start


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SpanBoundaryHead(LayerFields, keras.layers.Layer):
    """Two-layer GELU + LayerNorm network from boundary states to tokens."""

    _FIELDS = ("vocab_size", "hidden_size", "max_span_length", "hidden_act",
               "initializer_range", "layer_norm_epsilon", "embedding_size",
               "position_embedding_size")

    def __init__(self, vocab_size, hidden_size, max_span_length=32, hidden_act="gelu",
                 initializer_range=0.02, layer_norm_epsilon=LAYER_NORM_EPSILON,
                 embedding_size=None, position_embedding_size=None, **kwargs):
        super().__init__(**kwargs)
        if position_embedding_size is not None and (
                isinstance(position_embedding_size, bool)
                or not isinstance(position_embedding_size, int) or position_embedding_size < 1):
            raise ValueError("span_boundary position_embedding_size must be a positive "
                             "integer or None (hidden_size), got %r" % (position_embedding_size,))
        self._set_fields(locals())
        width = position_embedding_size or hidden_size
        self._activation = get_activation(hidden_act)
        init = truncated_normal_initializer(initializer_range)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(max_span_length, width), initializer=init)
        self.dense_1 = keras.layers.Dense(hidden_size, kernel_initializer=init,
                                          dtype=self.dtype_policy, name="dense_1")
        self.layer_norm_1 = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm_1")
        self.dense_2 = keras.layers.Dense(embedding_size or hidden_size, kernel_initializer=init,
                                          dtype=self.dtype_policy, name="dense_2")
        self.layer_norm_2 = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm_2")
        self.output_bias = self.add_weight(name="output_bias", shape=(vocab_size,),
                                           initializer="zeros")
        self.dense_1.build((None, 2 * hidden_size + width))
        self.layer_norm_1.build((None, hidden_size))
        self.dense_2.build((None, hidden_size))
        self.layer_norm_2.build((None, embedding_size or hidden_size))
        self.built = True

    def build(self, input_shape=None):
        """All weights are created in the constructor (shapes are known)."""
        self.built = True

    def call(self, sequence_output, left, right, offset, embedding_table):
        x_left = tf.gather(sequence_output, left, batch_dims=1)
        x_right = tf.gather(sequence_output, right, batch_dims=1)
        offset = tf.clip_by_value(offset, 0, self.max_span_length - 1)
        rel = tf.cast(tf.gather(self.position_embeddings, offset), x_left.dtype)
        h = tf.concat([x_left, x_right, rel], axis=-1)
        h = self.layer_norm_1(self._activation(self.dense_1(h)))
        h = self.layer_norm_2(self._activation(self.dense_2(h)))
        return tied_logits(h, embedding_table) + tf.cast(self.output_bias, tf.float32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SpanBoundaryObjective(Objective):
    """Predicts `masked_lm_ids` from span boundaries (see the module docstring).

    Losses: `span_boundary_loss` (weighted by `masked_lm_weights`, as the MLM
    loss). Metrics: `span_boundary_loss`, `span_boundary_accuracy`.
    """

    def __init__(self, vocab_size, hidden_size, max_span_length=32, hidden_act="gelu",
                 initializer_range=0.02, layer_norm_epsilon=LAYER_NORM_EPSILON,
                 embedding_size=None, position_embedding_size=None, loss_weight=1.0, **kwargs):
        kwargs.setdefault("name", "span_boundary")
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.head = SpanBoundaryHead(
            vocab_size=vocab_size, hidden_size=hidden_size, max_span_length=max_span_length,
            hidden_act=hidden_act, initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon, embedding_size=embedding_size,
            position_embedding_size=position_embedding_size,
            dtype=self.dtype_policy, name="span_boundary_head")
        self._encoder = None
        self.build()

    @classmethod
    def from_config_object(cls, bert_config, **kwargs):
        return cls(vocab_size=bert_config.vocab_size, hidden_size=bert_config.hidden_size,
                   hidden_act=bert_config.hidden_act,
                   initializer_range=bert_config.initializer_range, **kwargs)

    def baseline_targets(self, features):
        # The span tokens, each predicted from its boundary alone.
        return features["masked_lm_ids"][features["masked_lm_weights"] > 0]

    def baseline_num_classes(self):
        return self.head.vocab_size

    def attach(self, encoder):
        self._encoder = _Ref(encoder)

    def call(self, encoder_outputs, features, training=None):
        sequence_output = encoder_outputs["sequence_output"]
        weights = tf.cast(features.get("masked_lm_weights",
                                       tf.ones_like(features["masked_lm_positions"])),
                          tf.float32)
        left, right, offset = span_boundaries(features["masked_lm_positions"], weights,
                                              tf.shape(sequence_output)[1])
        logits = self.head(sequence_output, left, right, offset,
                           self._encoder.value.embedding_table)
        if "masked_lm_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": {"span_boundary_logits": logits}}
        labels = tf.cast(features["masked_lm_ids"], tf.int32)
        losses, metrics = token_scores("span_boundary", logits, labels, weights)
        return {"losses": losses, "metrics": metrics,
                "outputs": {"span_boundary_logits": logits}}

    def get_config(self):
        config = super().get_config()
        config.update({field: getattr(self.head, field) for field in SpanBoundaryHead._FIELDS})
        return config


@registry.objectives.register("span_boundary")
def _span_boundary(config, family, position_embedding_size=None, **kwargs):
    return SpanBoundaryObjective(hidden_act=family.activation(config), **head_kwargs(config),
                                 position_embedding_size=position_embedding_size, **kwargs)
