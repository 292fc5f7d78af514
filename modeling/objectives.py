"""Pre-training objectives: heads, losses and metric statistics, as parts.

A pre-training recipe is an encoder plus a list of objectives. Each objective
is a Keras layer with one contract, so recipes can recombine them (BERT =
MLM + NSP; RoBERTa = MLM; ALBERT = MLM + sentence order, which is the NSP
objective reading another label; SpanBERT = MLM + span-boundary objective):

    result = objective(encoder_outputs, features, training=...)
    result["losses"]   {name: float32 scalar}      summed into the total loss
                                                   (times `loss_weight`)
    result["metrics"]  {name: (sum, count)}        float32 scalars
    result["outputs"]  {name: tensor}              logits, for inspection

Metrics are (sum, count) pairs rather than ratios so that they aggregate
exactly: sum both parts over replicas (`strategy.reduce(SUM, ...)`) and over
steps, then divide. A ratio of ratios would weight a replica with three
masked tokens like one with eighty.

`BertPretrainer(encoder, objectives)` runs the encoder once and every
objective on its outputs. Its `compute_loss_and_metrics(features, training)`
returns `(total_loss, metrics)`; `metrics` maps each name to a (sum, count)
pair and, for BERT, holds Google's names:

    loss                    (total_loss, 1)               mean over steps
    masked_lm_loss          (sum w*CE, sum w)             weighted mean
    masked_lm_accuracy      (sum w*correct, sum w)        weighted accuracy
    next_sentence_loss      (sum CE, batch)               mean
    next_sentence_accuracy  (sum correct, batch)          accuracy

(Google's eval computes exactly these `tf.metrics.mean`/`accuracy` values;
the masked_lm_loss metric has no +1e-5 in its denominator, unlike the loss.)
The training losses themselves follow Google's `run_pretraining.py`:

    masked_lm_loss     = sum(w * CE) / (sum(w) + 1e-5)
    next_sentence_loss = mean(CE)
    total_loss         = masked_lm_loss + next_sentence_loss

Feature names (int32 unless noted): input_ids, input_mask, segment_ids
[batch, seq]; masked_lm_positions, masked_lm_ids [batch, P];
masked_lm_weights float32 [batch, P]; next_sentence_labels [batch] or
[batch, 1].

Heads and their google-research/bert checkpoint names ("(T)": Google stores
the transpose of the Keras kernel):

    MaskedLMHead.transform_dense.{kernel,bias}  cls/predictions/transform/dense
    MaskedLMHead.transform_layer_norm.{gamma,beta}
                                                cls/predictions/transform/LayerNorm
    MaskedLMHead.output_bias                    cls/predictions/output_bias
    (decoder weights: the encoder's embedding table, tied)
    NextSentenceHead.dense.kernel  (T)          cls/seq_relationship/output_weights
    NextSentenceHead.dense.bias                 cls/seq_relationship/output_bias

reached from a pretrainer as `pretrainer.get_objective("masked_lm").head...`
and `pretrainer.get_objective("next_sentence").head...` (or
`pretrainer.objectives[i].head`).

Logits and losses are float32 even under a mixed-precision policy.
"""

import keras
import tensorflow as tf

from modeling.bert import BertEncoder
from modeling.layers import (
    LAYER_NORM_EPSILON,
    get_activation,
    truncated_normal_initializer,
)

__all__ = [
    "BertPretrainer",
    "MaskedLMHead",
    "MaskedLMObjective",
    "NextSentenceHead",
    "NextSentenceObjective",
    "Objective",
    "build_bert_pretrainer",
    "masked_lm_loss",
    "next_sentence_loss",
]

_PACKAGE = "bert_family"


# ------------------------------------------------------------------ losses


def _per_example_cross_entropy(logits, labels):
    """-log softmax(logits)[label], in float32, for integer labels."""
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(labels, tf.int32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


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


def next_sentence_loss(logits, labels):
    """Google's NSP loss: mean cross-entropy over the batch.

    Args:
        logits: `[batch, 2]`; labels: int `[batch]` or `[batch, 1]`
            (0 = "B follows A", 1 = "B is random", Google's convention).
    """
    labels = tf.reshape(labels, [-1])
    return tf.reduce_mean(_per_example_cross_entropy(logits, labels))


# ------------------------------------------------------------------- heads


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(keras.layers.Layer):
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
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.embedding_size = embedding_size
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
        table = tf.cast(embedding_table, x.dtype)
        # One [batch * predictions, H] x [H, vocab] product: a batched
        # matmul of the 3-D activations against the 2-D table would
        # broadcast the table over the batch (measured 1.5x slower).
        flat = tf.reshape(x, [-1, tf.shape(x)[-1]])
        logits = tf.matmul(flat, table, transpose_b=True)
        logits = tf.reshape(
            logits, tf.concat([tf.shape(x)[:-1], tf.shape(table)[:1]], axis=0))
        logits = tf.cast(logits, tf.float32)
        return logits + tf.cast(self.output_bias, tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
            embedding_size=self.embedding_size,
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NextSentenceHead(keras.layers.Layer):
    """Classifies the pooled [CLS] vector: `logits = pooled @ W + b`.

    `dense.kernel` is `[hidden, num_classes]`; Google's
    `cls/seq_relationship/output_weights` is its transpose `[2, hidden]`.

    Returns float32 logits `[batch, num_classes]`.
    """

    def __init__(self, hidden_size, initializer_range=0.02, num_classes=2, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.num_classes = num_classes
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

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
            num_classes=self.num_classes,
        )
        return config


# -------------------------------------------------------------- objectives


class Objective(keras.layers.Layer):
    """Base class of pre-training objectives (see the module docstring).

    Subclasses implement `call(encoder_outputs, features, training=None)`
    returning `{"losses": ..., "metrics": ..., "outputs": ...}`.

    Args:
        loss_weight: multiplies this objective's losses in the total loss.

    Objectives that share weights with the encoder (the tied MLM decoder)
    get it through `attach(encoder)`, which `BertPretrainer` calls; the
    reference is not tracked as a sub-layer, so the shared weights belong to
    the encoder only.
    """

    def __init__(self, loss_weight=1.0, **kwargs):
        super().__init__(**kwargs)
        self.loss_weight = loss_weight

    def build(self, input_shape=None):
        """Builds `self.head` (if any) under this objective's name scope."""
        if self.built:
            return
        head = getattr(self, "head", None)
        if head is not None:
            head.build()

    def attach(self, encoder):
        """Gives the objective the encoder it is trained with (default: unused)."""

    def get_config(self):
        config = super().get_config()
        config["loss_weight"] = self.loss_weight
        return config


class _Ref:
    """Holds an object without Keras/TF tracking it as a dependency."""

    def __init__(self, value):
        self.value = value


def _stat(total, count):
    return (tf.cast(total, tf.float32), tf.cast(count, tf.float32))


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
        per_position = _per_example_cross_entropy(logits, label_ids)
        # Google's loss, sum(w * CE) / (sum(w) + 1e-5), from the same
        # cross-entropies as the metric (one softmax over the vocabulary).
        loss = tf.reduce_sum(weights * per_position) / (tf.reduce_sum(weights) + 1e-5)
        correct = tf.cast(
            tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), label_ids),
            tf.float32,
        )
        weight_sum = tf.reduce_sum(weights)
        return {
            "losses": {"masked_lm_loss": loss},
            "metrics": {
                "masked_lm_loss": _stat(tf.reduce_sum(weights * per_position), weight_sum),
                "masked_lm_accuracy": _stat(tf.reduce_sum(weights * correct), weight_sum),
            },
            "outputs": {"masked_lm_logits": logits},
        }

    def get_config(self):
        config = super().get_config()
        head = self.head
        config.update(
            vocab_size=head.vocab_size,
            hidden_size=head.hidden_size,
            hidden_act=head.hidden_act,
            initializer_range=head.initializer_range,
            layer_norm_epsilon=head.layer_norm_epsilon,
            embedding_size=head.embedding_size,
        )
        return config


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


# -------------------------------------------------------------- pretrainer


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPretrainer(keras.Model):
    """An encoder trained by a list of objectives.

    Args:
        encoder: a `BertEncoder` (or any model with the same input/output
            dict contract and an `embedding_table`).
        objectives: list of `Objective`s; their names must be unique, and so
            must the loss/metric names they produce.

    `call(features, training)` returns the encoder's `sequence_output` and
    `pooled_output` plus every objective's outputs (e.g. `masked_lm_logits`,
    `next_sentence_logits`). `compute_loss_and_metrics(features, training)`
    returns `(total_loss, metrics)` (see the module docstring).
    """

    def __init__(self, encoder, objectives, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        objectives = list(objectives)
        if not objectives:
            raise ValueError("BertPretrainer needs at least one objective.")
        names = [objective.name for objective in objectives]
        if len(set(names)) != len(names):
            raise ValueError(f"Objective names must be unique, got {names}.")
        self.encoder = encoder
        self.objectives = objectives
        for objective in self.objectives:
            objective.attach(encoder)
        # The parts create their weights when constructed; nothing depends
        # on the input shape.
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.encoder.build()
        for objective in self.objectives:
            objective.build()

    def get_objective(self, name):
        """Returns the objective called `name` (e.g. "masked_lm")."""
        for objective in self.objectives:
            if objective.name == name:
                return objective
        raise KeyError(
            f"No objective named {name!r}; have "
            f"{[objective.name for objective in self.objectives]}."
        )

    def _run(self, features, training):
        encoder_outputs = self.encoder(features, training=training)
        results = [
            objective(encoder_outputs, features, training=training)
            for objective in self.objectives
        ]
        return encoder_outputs, results

    def call(self, features, training=None):
        encoder_outputs, results = self._run(features, training)
        outputs = {
            "sequence_output": encoder_outputs["sequence_output"],
            "pooled_output": encoder_outputs["pooled_output"],
        }
        for result in results:
            outputs.update(result["outputs"])
        return outputs

    def compute_loss_and_metrics(self, features, training=None):
        """Runs the model and returns `(total_loss, metrics)`.

        `total_loss` is a float32 scalar: the sum over objectives of
        `loss_weight * loss`. It is the loss of this replica's batch; under
        a `tf.distribute` strategy whose optimizer sums gradients across
        replicas, differentiate `total_loss / num_replicas_in_sync`.
        `metrics` maps names to (sum, count) float32 pairs (including
        `"loss": (total_loss, 1)`); reduce them with SUM across replicas.
        """
        _, results = self._run(features, training)
        total_loss = tf.constant(0.0, tf.float32)
        metrics = {}
        for objective, result in zip(self.objectives, results):
            for loss in result["losses"].values():
                total_loss += tf.cast(objective.loss_weight, tf.float32) * loss
            for name, stat in result["metrics"].items():
                if name in metrics:
                    raise ValueError(f"Two objectives report the metric {name!r}.")
                metrics[name] = stat
        metrics["loss"] = _stat(total_loss, 1.0)
        return total_loss, metrics

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "objectives": [
                keras.saving.serialize_keras_object(objective)
                for objective in self.objectives
            ],
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        config["objectives"] = [
            keras.saving.deserialize_keras_object(objective)
            for objective in config["objectives"]
        ]
        return cls(**config)


def build_bert_pretrainer(bert_config, dtype=None, **encoder_kwargs):
    """BERT as Google pre-trains it: encoder + masked LM + next sentence.

    Args:
        bert_config: a `modeling.config.BertConfig`.
        dtype: optional Keras dtype policy (e.g. "mixed_float16") for all
            parts; default: the global policy.
        **encoder_kwargs: passed to `BertEncoder.from_config_object`.
    """
    kwargs = {} if dtype is None else {"dtype": dtype}
    encoder = BertEncoder.from_config_object(bert_config, **kwargs, **encoder_kwargs)
    objectives = [
        MaskedLMObjective.from_config_object(bert_config, **kwargs),
        NextSentenceObjective.from_config_object(bert_config, **kwargs),
    ]
    return BertPretrainer(encoder, objectives, **kwargs)
