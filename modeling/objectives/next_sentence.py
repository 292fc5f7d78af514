"""Next-sentence prediction (BERT) and sentence-order prediction (ALBERT).

A two-way classifier on the pooled output (`cls/seq_relationship`); ALBERT's
sentence order is the same head reading `next_sentence_labels` with label 1 =
swapped segments, reported as `sentence_order_*`.
"""

import keras
import tensorflow as tf

from modeling.layers import truncated_normal_initializer
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields
from modeling import registry
from modeling.objectives.base import Objective
from modeling.objectives.base import _per_example_cross_entropy
from modeling.objectives.base import _stat

__all__ = ["NextSentenceHead", "NextSentenceObjective", "next_sentence_loss"]


def next_sentence_loss(logits, labels):
    """Google's NSP loss: mean cross-entropy over the batch.

    Args:
        logits: `[batch, 2]`; labels: int `[batch]` or `[batch, 1]`
            (0 = "B follows A", 1 = "B is random", Google's convention).
    """
    labels = tf.reshape(labels, [-1])
    return tf.reduce_mean(_per_example_cross_entropy(logits, labels))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NextSentenceHead(LayerFields, keras.layers.Layer):
    """Classifies the pooled [CLS] vector: `logits = pooled @ W + b`.

    `dense.kernel` is `[hidden, num_classes]`; Google's
    `cls/seq_relationship/output_weights` is its transpose `[2, hidden]`.

    Returns float32 logits `[batch, num_classes]`.
    """

    _FIELDS = ("hidden_size", "initializer_range", "num_classes")

    def __init__(self, hidden_size, initializer_range=0.02, num_classes=2, **kwargs):
        super().__init__(**kwargs)
        self._set_fields(locals())
        self.dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=truncated_normal_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, input_shape=None):
        if self.built:
            return
        self.dense.build((None, self.hidden_size))

    def call(self, pooled_output):
        return tf.cast(self.dense(pooled_output), tf.float32)



@keras.saving.register_keras_serializable(package=_PACKAGE)
class NextSentenceObjective(Objective):
    """Sentence-pair classification on the pooled output (BERT's NSP).

    Reads `label_feature` (default `next_sentence_labels`) and reports
    `{prefix}_loss` / `{prefix}_accuracy` with `prefix` = `metric_prefix`
    (default `next_sentence`). ALBERT's sentence-order prediction is this
    objective with `label_feature="sentence_order_labels"`,
    `metric_prefix="sentence_order"`.
    """

    def __init__(
        self,
        hidden_size,
        initializer_range=0.02,
        num_classes=2,
        label_feature="next_sentence_labels",
        metric_prefix="next_sentence",
        loss_weight=1.0,
        **kwargs,
    ):
        kwargs.setdefault("name", metric_prefix)
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.label_feature = label_feature
        self.metric_prefix = metric_prefix
        self.head = NextSentenceHead(
            hidden_size=hidden_size,
            initializer_range=initializer_range,
            num_classes=num_classes,
            dtype=self.dtype_policy,
            name="seq_relationship",
        )
        self.build()

    # A model that ignores the text predicts the training labels' prior: the
    # unigram distribution of the labels (`unigram_baseline_<name>_*`).

    def baseline_targets(self, features):
        return features[self.label_feature].reshape(-1)

    def baseline_num_classes(self):
        return self.head.num_classes

    @classmethod
    def from_config_object(cls, bert_config, **kwargs):
        """The BERT NSP objective for a `BertConfig`."""
        return cls(
            hidden_size=bert_config.hidden_size,
            initializer_range=bert_config.initializer_range,
            **kwargs,
        )

    def call(self, encoder_outputs, features, training=None):
        logits = self.head(encoder_outputs["pooled_output"])
        prefix = self.metric_prefix
        if self.label_feature not in features:
            return {"losses": {}, "metrics": {}, "outputs": {f"{prefix}_logits": logits}}
        labels = tf.reshape(tf.cast(features[self.label_feature], tf.int32), [-1])
        per_example = _per_example_cross_entropy(logits, labels)
        correct = tf.cast(
            tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
            tf.float32,
        )
        count = tf.cast(tf.size(labels), tf.float32)
        return {
            "losses": {f"{prefix}_loss": tf.reduce_mean(per_example)},
            "metrics": {
                f"{prefix}_loss": _stat(tf.reduce_sum(per_example), count),
                f"{prefix}_accuracy": _stat(tf.reduce_sum(correct), count),
            },
            "outputs": {f"{prefix}_logits": logits},
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.head.hidden_size,
            initializer_range=self.head.initializer_range,
            num_classes=self.head.num_classes,
            label_feature=self.label_feature,
            metric_prefix=self.metric_prefix,
        )
        return config


@registry.objectives.register("next_sentence")
def _next_sentence(config, family, **kwargs):
    del family
    return NextSentenceObjective(hidden_size=config.hidden_size,
                                 initializer_range=config.initializer_range, **kwargs)


@registry.objectives.register("sentence_order")
def _sentence_order(config, family, **kwargs):
    # ALBERT stores the sentence-order label as `next_sentence_labels`.
    del family
    return NextSentenceObjective(
        hidden_size=config.hidden_size, initializer_range=config.initializer_range,
        label_feature="next_sentence_labels", metric_prefix="sentence_order",
        name="sentence_order", **kwargs)
