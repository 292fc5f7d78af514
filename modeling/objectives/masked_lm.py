"""BERT's masked-LM objective: a transform, the tied decoder, weighted cross-entropy.

Google's checkpoint names: `cls/predictions/transform/dense`,
`cls/predictions/transform/LayerNorm`, `cls/predictions/output_bias`; the
decoder weights are the encoder's embedding table. Loss (Google's
`run_pretraining.py`): `sum(w * CE) / (sum(w) + 1e-5)`; metrics
`masked_lm_loss` and `masked_lm_accuracy` as (sum, count) pairs.
"""

import keras
import tensorflow as tf

from modeling.layers import LAYER_NORM_EPSILON
from modeling.layers import get_activation
from modeling.layers import truncated_normal_initializer
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields
from modeling import registry
from modeling.objectives.base import Objective
from modeling.objectives.base import head_kwargs
from modeling.objectives.base import _per_example_cross_entropy
from modeling.objectives.base import _Ref
from modeling.objectives.base import tied_logits
from modeling.objectives.base import token_scores

__all__ = ["MaskedLMHead", "MaskedLMObjective", "masked_lm_loss"]


def masked_lm_loss(logits, label_ids, label_weights):
    """Google's MLM loss: `sum(w * CE) / (sum(w) + 1e-5)`.

    Args:
        logits: `[batch, P, vocab]`.
        label_ids: int `[batch, P]`, the original token at each masked slot.
        label_weights: `[batch, P]`, 1.0 for real predictions, 0.0 for the
            padding slots of `masked_lm_positions` (they are ignored).

    The 1e-5 keeps a batch without any masked token finite (loss 0).
    """
    per_position = _per_example_cross_entropy(logits, label_ids)
    weights = tf.cast(label_weights, tf.float32)
    return tf.reduce_sum(weights * per_position) / (tf.reduce_sum(weights) + 1e-5)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(LayerFields, keras.layers.Layer):
    """Predicts the tokens at masked positions, with a tied decoder.

    `logits = LayerNorm(act(dense(h[positions]))) @ embedding_table^T + bias`

    The decoder matrix is not a weight of this layer: the word-embedding table
    is passed at call time, so that the prediction and the input embedding
    share parameters (as in BERT) and nothing is saved twice.

    Args:
        vocab_size: rows of the embedding table (size of `output_bias`).
        hidden_size: width of the encoder output.
        hidden_act: activation of the transform (BERT: config `hidden_act`).
        initializer_range: stddev of the transform kernel initialiser.
        layer_norm_epsilon: 1e-12 as in BERT.
        embedding_size: width of the embedding table when it differs from
            `hidden_size` (ALBERT's factorised embeddings); default hidden.

    Call args:
        sequence_output: `[batch, seq, hidden]`.
        masked_positions: int `[batch, P]`.
        embedding_table: `[vocab, embedding_size]` tensor or variable.

    Returns:
        float32 logits `[batch, P, vocab]`.
    """

    _FIELDS = ("vocab_size", "hidden_size", "hidden_act", "initializer_range",
               "layer_norm_epsilon", "embedding_size")

    def __init__(
        self,
        vocab_size,
        hidden_size,
        hidden_act="gelu",
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        embedding_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_fields(locals())
        self._activation = get_activation(hidden_act)
        self.transform_dense = keras.layers.Dense(
            embedding_size or hidden_size,
            kernel_initializer=truncated_normal_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
            name="transform_LayerNorm",
        )

    def build(self, input_shape=None):
        if self.built:
            return
        self.transform_dense.build((None, None, self.hidden_size))
        self.transform_layer_norm.build((None, None, self.embedding_size or self.hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )

    def call(self, sequence_output, masked_positions, embedding_table):
        gathered = tf.gather(
            sequence_output, tf.cast(masked_positions, tf.int32), batch_dims=1
        )
        x = self._activation(self.transform_dense(gathered))
        x = self.transform_layer_norm(x)
        # One [batch * predictions, H] x [H, vocab] product: a batched
        # matmul of the 3-D activations against the 2-D table would
        # broadcast the table over the batch (measured 1.5x slower).
        logits = tied_logits(x, embedding_table)
        return logits + tf.cast(self.output_bias, tf.float32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMObjective(Objective):
    """Masked-LM: predict `masked_lm_ids` at `masked_lm_positions`.

    Losses: `masked_lm_loss`. Metrics: `masked_lm_loss`, `masked_lm_accuracy`
    (both weighted by `masked_lm_weights`). Outputs: `masked_lm_logits`.
    The head (`.head`, a `MaskedLMHead`) decodes with the attached encoder's
    `embedding_table`.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        hidden_act="gelu",
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        embedding_size=None,
        loss_weight=1.0,
        **kwargs,
    ):
        kwargs.setdefault("name", "masked_lm")
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.head = MaskedLMHead(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            hidden_act=hidden_act,
            initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon,
            embedding_size=embedding_size,
            dtype=self.dtype_policy,
            name="predictions",
        )
        self._encoder = None
        self.build()

    @classmethod
    def from_config_object(cls, bert_config, **kwargs):
        """The BERT MLM objective for a `BertConfig`."""
        return cls(
            vocab_size=bert_config.vocab_size,
            hidden_size=bert_config.hidden_size,
            hidden_act=bert_config.hidden_act,
            initializer_range=bert_config.initializer_range,
            **kwargs,
        )

    def baseline_targets(self, features):
        return features["masked_lm_ids"][features["masked_lm_weights"] > 0]

    def baseline_num_classes(self):
        return self.head.vocab_size

    def attach(self, encoder):
        table = encoder.embedding_table
        if tuple(table.shape)[0] != self.head.vocab_size:
            raise ValueError(
                f"The encoder's embedding table has {table.shape[0]} rows but "
                f"the masked-LM head predicts {self.head.vocab_size} tokens."
            )
        self._encoder = _Ref(encoder)

    def call(self, encoder_outputs, features, training=None):
        if self._encoder is None:
            raise ValueError(
                "MaskedLMObjective needs the encoder's embedding table: call "
                "attach(encoder) first (BertPretrainer does this)."
            )
        logits = self.head(
            encoder_outputs["sequence_output"],
            features["masked_lm_positions"],
            self._encoder.value.embedding_table,
        )
        if "masked_lm_ids" not in features:
            # Inference (e.g. fill-mask): predictions only, nothing to score.
            return {"losses": {}, "metrics": {}, "outputs": {"masked_lm_logits": logits}}
        label_ids = tf.cast(features["masked_lm_ids"], tf.int32)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        # Google's loss, sum(w * CE) / (sum(w) + 1e-5), from the same
        # cross-entropies as the metric (one softmax over the vocabulary).
        losses, metrics = token_scores("masked_lm", logits, label_ids, weights)
        return {"losses": losses, "metrics": metrics, "outputs": {"masked_lm_logits": logits}}

    def get_config(self):
        config = super().get_config()
        config.update({field: getattr(self.head, field) for field in MaskedLMHead._FIELDS})
        return config


@registry.objectives.register("masked_lm")
def _masked_lm(config, family, **kwargs):
    # The head's LayerNorm has the encoder's epsilon when the config names one
    # (HF's `layer_norm_eps`: RoBERTa's 1e-5); BERT's 1e-12 otherwise.
    epsilon = (getattr(config, "extra", None) or {}).get("layer_norm_epsilon")
    if epsilon is not None:
        kwargs.setdefault("layer_norm_epsilon", float(epsilon))
    return MaskedLMObjective(hidden_act=family.activation(config), **head_kwargs(config), **kwargs)
