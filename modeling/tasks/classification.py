"""`BertClassifier`: BERT fine-tuned for sequence (pair) classification or regression.

google-research/bert's `create_model` as a Keras 3 model: the encoder's
pooled output (tanh of the dense layer over `[CLS]`), dropout with the
config's `hidden_dropout_prob`, and one dense layer:

    logits = dropout(pooled_output) @ output_weights^T + output_bias

    >>> model = BertClassifier.from_config_object(bert_config, num_labels=2)
    >>> outputs = model({"input_ids": ids, "input_mask": mask, "segment_ids": seg})
    >>> outputs["probabilities"].shape     # [batch, 2]

Three task types (`task_type`):

    classification  softmax over `num_labels`; per-example loss = cross-entropy
                    of the integer `label_ids`. Outputs: logits, probabilities.
    multi_label     one sigmoid per label; `label_ids` is a multi-hot
                    `[batch, num_labels]` vector; per-example loss = mean over
                    labels of the sigmoid cross-entropy. Outputs: logits,
                    probabilities (independent, each in [0, 1]).
    regression      one output (`num_labels` = 1), float `label_ids`;
                    per-example loss = squared error. Outputs: logits
                    `[batch, 1]`, predictions `[batch]`.

`compute_loss_and_metrics(features, training)` follows the trainer contract
(`modeling.training.trainer`): it returns this replica's loss and `(sum, count)`
metrics. Examples are weighted by `is_real_example` (1 real, 0 padding) as
Google's eval metrics are, so padding added to fill the last batch changes
nothing:

    loss      = sum(w * per_example_loss) / sum(w)        (0 if sum(w) = 0)
    metrics   loss      (sum w * per_example_loss, sum w)
              accuracy  (sum w * correct, sum w)          classification,
                        multi_label (all labels right)
              label_accuracy (sum w * labels right, sum w * num_labels)
                                                          multi_label

Weights and their google-research/bert checkpoint names: the encoder as in
`modeling.bert` (attribute `encoder`, so `modeling.checkpoints
.init_from_checkpoint` loads a pre-trained BERT into it), and

    output_weights  [num_labels, hidden]   output_weights  (Google's layout)
    output_bias     [num_labels]           output_bias

`output_weights` is initialised with a truncated normal of stddev 0.02 (the
config's `initializer_range`), `output_bias` with zeros, as in Google's code.
Logits, probabilities and losses are float32 under mixed precision.

The module also has the numpy metrics `run_classifier.py` reports at eval
time (F1, Matthews correlation, Pearson, Spearman, ...): `compute_metrics`.
"""

import keras
import numpy as np
import tensorflow as tf

from modeling import registry
from modeling.layers import truncated_normal_initializer
from modeling.layers.encoder_models import EncoderModel

__all__ = [
    "BertClassifier",
    "task_loss_and_metrics",
    "TASK_TYPES",
    "accuracy",
    "compute_metrics",
    "f1_score",
    "matthews_corrcoef",
    "multi_label_f1",
    "pearson_correlation",
    "spearman_correlation",
]

CLASSIFICATION = "classification"
MULTI_LABEL = "multi_label"
REGRESSION = "regression"
TASK_TYPES = (CLASSIFICATION, MULTI_LABEL, REGRESSION)
# The sentence vector a classifier reads (`registry.Family.sentence_vector`):
# the encoder's pooled output (BERT, ALBERT, RoBERTa), or its first token
# through a ReLU layer (DistilBERT's `pre_classifier`: it has no pooler).
POOLED = "pooled"
FIRST_TOKEN = "first_token"
SENTENCE_VECTORS = (POOLED, FIRST_TOKEN)


def _stat(total, count):
    return (tf.cast(total, tf.float32), tf.cast(count, tf.float32))


def outputs_of_logits(logits, task_type):
    """A classifier head's outputs: `logits` plus `probabilities` (or `predictions` for regression)."""
    outputs = {"logits": logits}
    if task_type == CLASSIFICATION:
        outputs["probabilities"] = tf.nn.softmax(logits, axis=-1)
    elif task_type == MULTI_LABEL:
        outputs["probabilities"] = tf.sigmoid(logits)
    else:
        outputs["predictions"] = logits[:, 0]
    return outputs


def task_loss_and_metrics(outputs, features, task_type, num_labels):
    """`(loss, {name: (sum, count)})` of a classifier's `outputs` (see the module docstring).

    Shared by every classifier head (`BertClassifier`, GPT's
    `modeling.gpt.classification`): `outputs` holds `logits`
    (`[batch, num_labels]`) and, for regression, `predictions`; `features`
    `label_ids` and optionally `is_real_example`.
    """
    logits = outputs["logits"]
    batch = tf.shape(logits)[0]
    if "is_real_example" in features:
        weights = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])
    else:
        weights = tf.ones([batch], tf.float32)
    labels = features["label_ids"]
    metrics = {}
    if task_type == CLASSIFICATION:
        labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32),
                                   labels), tf.float32)
        metrics["accuracy"] = _stat(tf.reduce_sum(weights * correct), tf.reduce_sum(weights))
    elif task_type == MULTI_LABEL:
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1, num_labels])
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        per_example = tf.reduce_mean(per_label, axis=-1)
        right = tf.cast(tf.equal(tf.cast(logits > 0.0, tf.float32), labels), tf.float32)
        all_right = tf.reduce_min(right, axis=-1)
        metrics["accuracy"] = _stat(tf.reduce_sum(weights * all_right),
                                    tf.reduce_sum(weights))
        metrics["label_accuracy"] = _stat(
            tf.reduce_sum(weights[:, None] * right),
            tf.reduce_sum(weights) * float(num_labels))
    else:
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1])
        per_example = tf.square(outputs["predictions"] - labels)
    loss_sum = tf.reduce_sum(weights * per_example)
    weight_sum = tf.reduce_sum(weights)
    loss = tf.math.divide_no_nan(loss_sum, weight_sum)
    metrics["loss"] = _stat(loss_sum, weight_sum)
    return loss, metrics


@keras.saving.register_keras_serializable(package="bert_family")
class BertClassifier(EncoderModel, keras.Model):
    """An encoder plus a dense layer on its pooled output.

    Args:
        encoder: a `BertEncoder` (or a model with the same input/output dict
            contract and a `hidden_size`).
        num_labels: number of classes (labels for multi-label; 1 for
            regression, the default there).
        task_type: "classification", "multi_label" or "regression".
        dropout_rate: dropout on the pooled output; default the encoder's
            `hidden_dropout_prob` (Google uses 0.1 during training).
        initializer_range: stddev of the truncated normal of
            `output_weights`; default the encoder's `initializer_range`.
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    def __init__(self, encoder, num_labels=None, task_type=CLASSIFICATION, dropout_rate=None,
                 initializer_range=None, sentence_vector=POOLED, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(**kwargs)
        if task_type not in TASK_TYPES:
            raise ValueError("task_type must be one of %s, not %r." % (", ".join(TASK_TYPES),
                                                                        task_type))
        if task_type == REGRESSION:
            if num_labels not in (None, 1):
                raise ValueError("A regression head has one output, not num_labels=%r."
                                 % num_labels)
            num_labels = 1
        if not num_labels or int(num_labels) < 1:
            raise ValueError("num_labels must be a positive integer, got %r." % (num_labels,))
        self.encoder = encoder
        self.num_labels = int(num_labels)
        self.task_type = task_type
        self.set_head_rates(initializer_range, dropout_rate)
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy,
                                            name="dropout")
        hidden_size = encoder.hidden_size
        if sentence_vector not in SENTENCE_VECTORS:
            raise ValueError("sentence_vector must be one of %s, not %r."
                             % (", ".join(SENTENCE_VECTORS), sentence_vector))
        self.sentence_vector = sentence_vector
        self.pre_classifier = None
        if sentence_vector == FIRST_TOKEN:
            # DistilBERT's head (no pooler): ReLU(dense(first token)), then the output layer.
            self.pre_classifier = keras.layers.Dense(
                hidden_size, activation="relu", dtype=self.dtype_policy, name="pre_classifier",
                kernel_initializer=truncated_normal_initializer(self.initializer_range))
            self.pre_classifier.build((None, hidden_size))
        self.add_output_weights(self.num_labels, hidden_size)
        self.build()

    @classmethod
    def from_config_object(cls, bert_config, num_labels=None, task_type=CLASSIFICATION,
                           dtype=None, family=registry.DEFAULT_FAMILY, **encoder_kwargs):
        """A classifier over a fresh encoder of `family` (a registered name) for its config.

        Dropout and the head's initialiser follow the config
        (`hidden_dropout_prob`, `initializer_range`).
        """
        kwargs = {} if dtype is None else {"dtype": dtype}
        encoder = registry.build_encoder(bert_config, family, **kwargs, **encoder_kwargs)
        family_object = registry.families.get(family) if isinstance(family, str) else family
        return cls(encoder, num_labels=num_labels, task_type=task_type,
                   dropout_rate=bert_config.hidden_dropout_prob,
                   initializer_range=bert_config.initializer_range,
                   sentence_vector=family_object.sentence_vector, **kwargs)

    # ------------------------------------------------------------------ call

    def call(self, features, training=None):
        """Returns `logits` plus `probabilities` (or `predictions` for regression)."""
        outputs = self.encoder(features, training=training)
        if self.pre_classifier is None:
            pooled = outputs["pooled_output"]
        else:
            pooled = self.pre_classifier(outputs["sequence_output"][:, 0])
        pooled = self.dropout(pooled, training=training)
        logits = tf.matmul(pooled, tf.cast(self.output_weights, pooled.dtype), transpose_b=True)
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        return outputs_of_logits(logits, self.task_type)

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (see the module docstring)."""
        outputs = self(features, training=training)
        return task_loss_and_metrics(outputs, features, self.task_type, self.num_labels)

    # ---------------------------------------------------------------- config

    def get_config(self):
        extra = {} if self.sentence_vector == POOLED else {"sentence_vector": self.sentence_vector}
        return self.encoder_model_config(num_labels=self.num_labels, task_type=self.task_type,
                                         dropout_rate=self.dropout_rate,
                                         initializer_range=self.initializer_range, **extra)


# ------------------------------------------------------------------ metrics
#
# Plain numpy over the real (non-padding) examples of a whole eval set:
# F1, Matthews correlation and correlations are not means of per-batch
# values, so they cannot be (sum, count) metrics.


def accuracy(predictions, labels):
    """Fraction of equal entries."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.size == 0:
        return 0.0
    return float(np.mean(predictions == labels))


def f1_score(predictions, labels, positive_label=1):
    """Binary F1 of `positive_label`: 2 TP / (2 TP + FP + FN); 0 when undefined."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    predicted, actual = predictions == positive_label, labels == positive_label
    tp = float(np.sum(predicted & actual))
    fp = float(np.sum(predicted & ~actual))
    fn = float(np.sum(~predicted & actual))
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def matthews_corrcoef(predictions, labels):
    """Matthews correlation coefficient (any number of classes; 0 when undefined).

    With the confusion matrix C (rows true, columns predicted), s examples,
    c correct, t_k true and p_k predicted counts of class k:
    (c s - sum_k p_k t_k) / sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)),
    which for two classes is (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
    """
    predictions, labels = np.asarray(predictions).ravel(), np.asarray(labels).ravel()
    classes = np.union1d(predictions, labels)
    if classes.size == 0:
        return 0.0
    p = np.array([np.sum(predictions == k) for k in classes], dtype=np.float64)
    t = np.array([np.sum(labels == k) for k in classes], dtype=np.float64)
    s = float(labels.size)
    c = float(np.sum(predictions == labels))
    denominator = np.sqrt((s * s - np.dot(p, p)) * (s * s - np.dot(t, t)))
    if denominator == 0:
        return 0.0
    return float((c * s - np.dot(p, t)) / denominator)


def pearson_correlation(x, y):
    """Pearson's r; NaN when either input is constant."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    if x.size < 2:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    if denominator == 0:
        return float("nan")
    return float(np.dot(dx, dy) / denominator)


def _average_ranks(values):
    """1-based ranks, ties sharing the mean of the ranks they span."""
    values = np.asarray(values, np.float64).ravel()
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(values.size, np.float64)
    start = 0
    while start < values.size:
        end = start
        while end + 1 < values.size and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman_correlation(x, y):
    """Spearman's rho: Pearson's r of the average ranks (ties averaged)."""
    return pearson_correlation(_average_ranks(x), _average_ranks(y))


def multi_label_f1(predictions, labels, average="micro"):
    """F1 of multi-hot `[examples, labels]` arrays; "micro" pools all labels,
    "macro" averages the per-label F1s."""
    predictions = np.asarray(predictions).astype(bool)
    labels = np.asarray(labels).astype(bool)
    if average == "micro":
        return f1_score(predictions.ravel().astype(int), labels.ravel().astype(int))
    if average == "macro":
        if labels.shape[-1] == 0:
            return 0.0
        return float(np.mean([f1_score(predictions[:, k].astype(int), labels[:, k].astype(int))
                              for k in range(labels.shape[-1])]))
    raise ValueError("average must be 'micro' or 'macro', not %r." % average)


METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman", "micro_f1", "macro_f1")


def compute_metrics(names, outputs, labels, task_type=CLASSIFICATION, is_real_example=None):
    """Computes named metrics over a whole eval set.

    Args:
        names: metric names, any of `METRICS` ("f1" is the binary F1 of
            label id 1, e.g. MRPC's and QQP's "is paraphrase/duplicate").
        outputs: `[examples, num_labels]` probabilities (classification,
            multi-label) or `[examples]` predictions (regression).
        labels: `[examples]` label ids or scores, or multi-hot
            `[examples, num_labels]`.
        task_type: "classification", "multi_label" or "regression".
        is_real_example: optional `[examples]` 0/1; zeros (padding) are left out.

    Returns:
        dict name -> float.
    """
    outputs, labels = np.asarray(outputs), np.asarray(labels)
    if is_real_example is not None:
        keep = np.asarray(is_real_example).reshape(-1).astype(bool)
        outputs, labels = outputs[keep], labels[keep]
    if task_type == CLASSIFICATION:
        predictions = np.argmax(outputs, axis=-1)
        labels = labels.reshape(-1)
    elif task_type == MULTI_LABEL:
        predictions = (outputs > 0.5).astype(np.int64)
    else:
        predictions = outputs.reshape(-1)
        labels = labels.reshape(-1)
    results = {}
    for name in names:
        if name == "accuracy" and task_type == MULTI_LABEL:
            value = float(np.mean(np.all(predictions == labels, axis=-1))) if labels.size else 0.0
        elif name == "accuracy":
            value = accuracy(predictions, labels)
        elif name == "f1":
            value = f1_score(predictions, labels)
        elif name == "mcc":
            value = matthews_corrcoef(predictions, labels)
        elif name == "pearson":
            value = pearson_correlation(predictions, labels)
        elif name == "spearman":
            value = spearman_correlation(predictions, labels)
        elif name in ("micro_f1", "macro_f1"):
            value = multi_label_f1(predictions, labels, average=name.split("_")[0])
        else:
            raise ValueError("Unknown metric %r; known: %s." % (name, ", ".join(METRICS)))
        results[name] = value
    return results
