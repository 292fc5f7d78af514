"""`MultiTaskModel`: MT-DNN, one shared encoder and one head per task.

Liu et al. (2019), "Multi-Task Deep Neural Networks for Natural Language
Understanding": the lower layers (here a registered encoder family, BERT or
ALBERT) are shared by every task, and each task has its own output layer:

    classification  the stochastic answer network over the pair's premise and
                    hypothesis (``"classifier": "san"``, `modeling.tasks.san`:
                    MT-DNN's output layer of pairwise classification), or a
                    dense layer on the pooled output (``"classifier":
                    "dense"``, the default here); softmax over num_labels
    regression      dense on the pooled output, one score, squared error
    ranking         dense on the pooled output, one score per (query,
                    candidate) row; softmax over each query's C candidates
                    (C consecutive rows), cross-entropy of the right one
                    (MT-DNN's QNLI formulation)
    span_qa         dense on the sequence output: start and end logits,
                    Google's run_squad loss (mean of the two cross-entropies)
    tagging         dense on the sequence output: per-token softmax over the
                    tags, on the first word piece of each word (label_mask)

Each dense head mirrors the single-task model's layout and loss
(`classification.BertClassifier` and `task_loss_and_metrics`,
`tagging.BertTagger` without CRF, `span_qa.BertSpanQA`): `output_weights`
``[outputs, hidden]`` and `output_bias`, dropout of the config's
`hidden_dropout_prob` on the pooled (classification, regression, ranking)
or sequence output (tagging), none for span QA. So a task's loss here equals
the single-task model's loss on the same batch with the same weights. A SAN
head reads the undropped sequence output (its own dropout inside, at the
same rate) and gives ``logits`` = log of its averaged step probabilities,
so the same cross-entropy is -log P(gold). Every head lives under the
layer name ``head_<task>`` (a SAN's variables are listed in
`modeling.tasks.san`).

Batches carry the union of all tasks' features plus ``task_id`` per row
(`data.multitask`). Why masks and not `tf.switch_case` over the task: the
encoder runs once on the batch, then EVERY head computes its outputs on it
(cheap next to the encoder: one dense layer each, a SAN K small attention
and GRU steps; a SAN stays finite on rows without a hypothesis) and its loss
with every row weighted by ``(task_id == t) * is_real_example``. A row of task A thus
contributes exactly zero to task B's loss and gradient; there is no control
flow in the step (XLA compiles it, and the step stays one fixed graph);
replicas of a distributed step may each draw a different task; and a batch
mixing tasks (the dev sets read one after another) is still scored right.
The total loss is ``sum_t weight_t * loss_t``; a task absent from the batch
has loss 0 and metrics (0, 0).

`compute_loss_and_metrics(features, training)` follows the trainer contract
(`modeling.training.trainer`); metrics are named ``<task>/loss``,
``<task>/accuracy`` (classification, ranking: queries whose right candidate
scores highest; tagging: labelled tokens), ``<task>/start_accuracy`` and
``<task>/end_accuracy`` (span QA), plus ``loss`` (the weighted total). Outputs
of `call` are named ``<task>/<output>``: ``logits`` and ``probabilities``
(classification), ``predictions`` (regression), ``scores`` (ranking),
``logits`` and ``predicted_ids`` (tagging), ``start_logits`` and
``end_logits`` (span QA).

The encoder is the attribute `encoder`, so `modeling.checkpoints
.init_from_checkpoint` loads a pre-trained BERT into it, and a multi-task
checkpoint's encoder loads into any single-task model (`run_classifier.py`,
`run_squad.py`, `run_ner.py` with ``--init_checkpoint``).
"""

import keras
import tensorflow as tf

from data.multitask import CLASSIFICATION, HEADS, RANKING, REGRESSION, SPAN_QA, TAGGING
from data.multitask import SOFT_TARGET_WEIGHT, SOFT_TARGETS
from modeling import registry
from modeling.layers.encoder_models import EncoderModel
from modeling.layers.encoder_models import add_output_weights
from modeling.tasks import classification as classifier_lib
from modeling.tasks import san as san_lib

__all__ = ["MultiTaskModel", "TaskHead", "HEADS", "CLASSIFIERS", "ranking_loss"]

# The heads (CLASSIFICATION, ..., HEADS) are the task list's (`data.multitask`).
SAN = "san"
DENSE = "dense"
CLASSIFIERS = (SAN, DENSE)  # a classification task's output layer
_POOLED = (CLASSIFICATION, REGRESSION, RANKING)
ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _num_outputs(head, num_labels):
    if head == CLASSIFICATION or head == TAGGING:
        if not num_labels or int(num_labels) < 1:
            raise ValueError("a %s head needs num_labels >= 1, got %r" % (head, num_labels))
        return int(num_labels)
    return 2 if head == SPAN_QA else 1


@keras.saving.register_keras_serializable(package="bert_family")
class TaskHead(keras.layers.Layer):
    """One task's output layer: ``x @ output_weights^T + output_bias`` in float32."""

    def __init__(self, num_outputs, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = int(num_outputs)
        self.hidden_size = int(hidden_size)
        self.initializer_range = float(initializer_range)
        add_output_weights(self, self.num_outputs, self.hidden_size, self.initializer_range)
        self.built = True

    def call(self, x):
        logits = tf.einsum("...h,kh->...k", x, tf.cast(self.output_weights, x.dtype))
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, hidden_size=self.hidden_size,
                      initializer_range=self.initializer_range)
        return config


def ranking_loss(scores, gold, weights, num_choices):
    """Per-query softmax cross-entropy over groups of `num_choices` consecutive rows.

    Args:
      scores: ``[rows]`` float32, one per (query, candidate) row.
      gold: ``[rows]`` 1 on each query's right candidate, else 0.
      weights: ``[rows]`` row weights (equal within a query; 0 drops it).
      num_choices: C.

    Returns:
      (loss_sum, query_count, correct_sum): sums over the weighted queries.
    """
    rows = tf.shape(scores)[0]
    groups = tf.range(rows) // num_choices
    num_groups = (rows + num_choices - 1) // num_choices
    top = tf.math.unsorted_segment_max(scores, groups, num_groups)
    top = tf.stop_gradient(top)
    log_z = tf.math.log(tf.math.unsorted_segment_sum(
        tf.exp(scores - tf.gather(top, groups)), groups, num_groups)) + top
    gold = tf.cast(gold, tf.float32)
    gold_score = tf.math.unsorted_segment_sum(scores * gold, groups, num_groups)
    query_weights = tf.math.unsorted_segment_max(weights, groups, num_groups)
    per_query = log_z - gold_score
    # Right when the gold candidate has the top score (ties count as right).
    correct = tf.cast(gold_score >= top, tf.float32)
    return (tf.reduce_sum(query_weights * per_query), tf.reduce_sum(query_weights),
            tf.reduce_sum(query_weights * correct))


@keras.saving.register_keras_serializable(package="bert_family")
class MultiTaskModel(EncoderModel, keras.Model):
    """A shared encoder and one `TaskHead` per task (see the module docstring).

    Args:
      encoder: a registered family's encoder (pooled and sequence outputs).
      tasks: list of dicts ``{"name", "head", "num_labels" (classification,
        tagging), "num_choices" (ranking), "weight" (default 1)}``, in
        task-id order; a classification task's ``"classifier"`` is "san" or
        "dense" (the default), a SAN's ``"san_steps"`` (K, default 5) and
        ``"san_step_dropout"`` (default 0.1) its settings.
      dropout_rate, initializer_range: default the encoder's.
      soft_target_weight: multi-task distillation (batches with
        ``soft_targets``, `data.multitask.write_soft_targets`): a
        classification task's loss is ``(1 - w) * CE(labels) + w * CE(soft
        targets)`` on its rows that have soft targets; 0.5, the average of
        the two, as in Liu et al. (2019), "Improving Multi-Task Deep Neural
        Networks via Knowledge Distillation for Natural Language
        Understanding".
    """

    def __init__(self, encoder, tasks, dropout_rate=None, initializer_range=None,
                 soft_target_weight=0.5, **kwargs):
        kwargs.setdefault("name", "multitask_model")
        super().__init__(**kwargs)
        if not tasks:
            raise ValueError("a multi-task model needs at least one task")
        if not 0.0 <= float(soft_target_weight) <= 1.0:
            raise ValueError("soft_target_weight must be in [0, 1], got %r"
                             % (soft_target_weight,))
        self.soft_target_weight = float(soft_target_weight)
        self.encoder = encoder
        self.set_head_rates(initializer_range, dropout_rate)
        self.tasks = []
        heads = []
        for task in tasks:
            task = dict(task)
            if task.get("head") not in HEADS:
                raise ValueError("task %r: head must be one of %s, not %r"
                                 % (task.get("name"), ", ".join(HEADS), task.get("head")))
            if task["head"] == RANKING and int(task.get("num_choices") or 0) < 2:
                raise ValueError("task %r: a ranking head needs num_choices >= 2"
                                 % task["name"])
            task.setdefault("weight", 1.0)
            task["weight"] = float(task["weight"])
            self.tasks.append(task)
            heads.append(self._head(task, encoder.hidden_size))
        self.heads = heads
        self.pooled_dropout = keras.layers.Dropout(self.dropout_rate, name="pooled_dropout")
        self.sequence_dropout = keras.layers.Dropout(self.dropout_rate,
                                                     name="sequence_dropout")
        self.build()

    def _head(self, task, hidden_size):
        """The task's output layer, ``head_<task>``: a `TaskHead`, or a SAN."""
        name, kind = "head_%s" % task["name"], task["head"]
        classifier = task.get("classifier")
        if classifier is not None and kind != CLASSIFICATION:
            raise ValueError("task %r: \"classifier\" is a setting of classification tasks, "
                             "not of a %s task" % (task["name"], kind))
        if classifier not in (None,) + CLASSIFIERS:
            raise ValueError("task %r: classifier must be one of %s, not %r"
                             % (task["name"], ", ".join(CLASSIFIERS), classifier))
        if classifier == SAN:
            return san_lib.StochasticAnswerNetwork(
                _num_outputs(kind, task.get("num_labels")), hidden_size,
                num_steps=task.get("san_steps", san_lib.DEFAULT_STEPS),
                step_dropout=task.get("san_step_dropout", san_lib.DEFAULT_STEP_DROPOUT),
                dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
                name=name)
        return TaskHead(_num_outputs(kind, task.get("num_labels")), hidden_size,
                        self.initializer_range, name=name)

    @classmethod
    def from_config_object(cls, bert_config, tasks, family=registry.DEFAULT_FAMILY,
                           soft_target_weight=0.5, **encoder_kwargs):
        """A model over a fresh encoder of `family` (a registered name) for `bert_config`."""
        encoder = registry.build_encoder(bert_config, family, **encoder_kwargs)
        return cls(encoder, tasks, dropout_rate=bert_config.hidden_dropout_prob,
                   initializer_range=bert_config.initializer_range,
                   soft_target_weight=soft_target_weight)

    # ------------------------------------------------------------------ call

    def call(self, features, training=None):
        """Every head's outputs on the batch, named ``<task>/<output>``."""
        inputs = {name: features[name] for name in ENCODER_INPUTS}
        encoded = self.encoder(inputs, training=training)
        pooled = self.pooled_dropout(encoded["pooled_output"], training=training)
        sequence = encoded["sequence_output"]
        dropped_sequence = self.sequence_dropout(sequence, training=training)
        outputs = {}
        for task, head in zip(self.tasks, self.heads):
            name, kind = task["name"], task["head"]
            if isinstance(head, san_lib.StochasticAnswerNetwork):
                probabilities = head(sequence, features["input_mask"], features["segment_ids"],
                                     training=training)["probabilities"]
                outputs[name + "/logits"] = head.logits_of(probabilities)
                outputs[name + "/probabilities"] = probabilities
            elif kind in _POOLED:
                logits = head(pooled)
                if kind == CLASSIFICATION:
                    outputs[name + "/logits"] = logits
                    outputs[name + "/probabilities"] = tf.nn.softmax(logits, axis=-1)
                elif kind == REGRESSION:
                    outputs[name + "/predictions"] = logits[:, 0]
                else:
                    outputs[name + "/scores"] = logits[:, 0]
            elif kind == TAGGING:
                logits = head(dropped_sequence)
                outputs[name + "/logits"] = logits
                outputs[name + "/predicted_ids"] = tf.argmax(logits, axis=-1,
                                                             output_type=tf.int32)
            else:
                logits = head(sequence)
                mask = tf.cast(features["input_mask"], tf.float32)
                logits += (1.0 - mask)[:, :, None] * -10000.0
                outputs[name + "/start_logits"] = logits[:, :, 0]
                outputs[name + "/end_logits"] = logits[:, :, 1]
        return outputs

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (see the module docstring)."""
        features = {name: tf.convert_to_tensor(value) for name, value in features.items()}
        outputs = self(features, training=training)
        task_ids = tf.reshape(tf.cast(features["task_id"], tf.int32), [-1])
        real = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])
        total = tf.constant(0.0, tf.float32)
        metrics = {}
        for index, task in enumerate(self.tasks):
            in_task = tf.equal(task_ids, index)
            loss, task_metrics = self._task_loss(task, outputs, features, in_task,
                                                 real * tf.cast(in_task, tf.float32))
            total += task["weight"] * loss
            for key, value in task_metrics.items():
                metrics["%s/%s" % (task["name"], key)] = (tf.cast(value[0], tf.float32),
                                                          tf.cast(value[1], tf.float32))
        metrics["loss"] = (total, tf.constant(1.0, tf.float32))
        return total, metrics

    def _task_loss(self, task, outputs, features, in_task, weights):
        """(loss, metrics) of one task over the rows with `weights` > 0."""
        name, kind = task["name"], task["head"]

        def own(key):
            # Other tasks' rows hold other tasks' labels (maybe out of this
            # head's range): zero them; their weight is 0 anyway.
            value = features[key] if key == "tag_ids" else tf.reshape(features[key], [-1])
            condition = in_task if value.shape.rank == 1 else in_task[:, None]
            return tf.where(condition, value, tf.zeros_like(value))

        if kind == CLASSIFICATION:
            loss, metrics = classifier_lib.task_loss_and_metrics(
                {"logits": outputs[name + "/logits"]},
                {"label_ids": own("label_ids"), "is_real_example": weights},
                CLASSIFICATION, task["num_labels"])
            if SOFT_TARGETS in features:
                loss, metrics = self._with_soft_targets(task, outputs[name + "/logits"],
                                                        features, weights, loss, metrics)
            return loss, metrics
        if kind == REGRESSION:
            predictions = outputs[name + "/predictions"]
            return classifier_lib.task_loss_and_metrics(
                {"logits": predictions[:, None], "predictions": predictions},
                {"label_ids": own("label_values"), "is_real_example": weights},
                REGRESSION, 1)
        if kind == RANKING:
            loss_sum, count, correct = ranking_loss(outputs[name + "/scores"],
                                                    own("label_ids"), weights,
                                                    int(task["num_choices"]))
            return (tf.math.divide_no_nan(loss_sum, count),
                    {"loss": (loss_sum, count), "accuracy": (correct, count)})
        if kind == TAGGING:
            logits = outputs[name + "/logits"]
            labels = own("tag_ids")
            token_weights = tf.cast(features["label_mask"], tf.float32) * weights[:, None]
            per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits)
            loss_sum = tf.reduce_sum(token_weights * per_token)
            count = tf.reduce_sum(token_weights)
            correct = tf.cast(tf.equal(outputs[name + "/predicted_ids"], labels), tf.float32)
            return (tf.math.divide_no_nan(loss_sum, count),
                    {"loss": (loss_sum, count),
                     "accuracy": (tf.reduce_sum(correct * token_weights), count)})
        # span_qa: Google's loss, rows weighted.
        starts, ends = own("start_positions"), own("end_positions")
        start_logits, end_logits = outputs[name + "/start_logits"], outputs[name + "/end_logits"]
        start_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=starts,
                                                                    logits=start_logits)
        end_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ends,
                                                                  logits=end_logits)
        loss_sum = tf.reduce_sum(weights * (start_loss + end_loss) / 2.0)
        count = tf.reduce_sum(weights)

        def correct(logits, labels):
            predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return tf.reduce_sum(weights * tf.cast(tf.equal(predicted, labels), tf.float32))

        return (tf.math.divide_no_nan(loss_sum, count),
                {"loss": (loss_sum, count),
                 "start_accuracy": (correct(start_logits, starts), count),
                 "end_accuracy": (correct(end_logits, ends), count)})

    def _with_soft_targets(self, task, logits, features, weights, loss, metrics):
        """The hard-label loss mixed with the cross-entropy against the soft targets."""
        soft = features[SOFT_TARGETS][:, :task["num_labels"]]
        soft_weights = weights * tf.reshape(features[SOFT_TARGET_WEIGHT], [-1])
        # A SAN's logits are log-probabilities already: log_softmax leaves them as they are.
        per_row = -tf.reduce_sum(soft * tf.nn.log_softmax(logits, axis=-1), axis=-1)
        soft_sum, soft_count = tf.reduce_sum(soft_weights * per_row), tf.reduce_sum(soft_weights)
        soft_loss = tf.math.divide_no_nan(soft_sum, soft_count)
        w = self.soft_target_weight
        mixed = tf.where(soft_count > 0, (1.0 - w) * loss + w * soft_loss, loss)
        return mixed, dict(metrics, soft_target_loss=(soft_sum, soft_count))

    # ---------------------------------------------------------------- config

    def get_config(self):
        return self.encoder_model_config(
            with_dtype=False, tasks=[dict(t) for t in self.tasks],
            dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
            soft_target_weight=self.soft_target_weight)
