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

import math

import keras
import tensorflow as tf

from data.pretraining.baselines import unigram_statistics
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.encoder_models import EncoderModel

__all__ = ["BertPretrainer", "Objective", "PerplexityObjective", "Pretrainer",
           "TokenTableObjective", "head_kwargs", "perplexities", "sparse_cross_entropy"]


# Below this probability of the label, -log(p) from a float32 softmax loses
# precision (denormals below ~1e-38); such rows take the exact log-sum-exp.
_TINY_PROBABILITY = 1e-30


def sparse_cross_entropy(logits, labels):
    """-log softmax(logits)[label] per row, in float32, for integer labels.

    The value and gradient of `tf.nn.sparse_softmax_cross_entropy_with_logits`
    (`softmax - one_hot` back), computed from one softmax: on CPUs that is
    oneDNN's vectorised kernel, while TensorFlow's fused cross-entropy kernel
    is scalar Eigen code, several times slower over a 30,522-word vocabulary,
    where it was a large part of a BERT-tiny pre-training step (docs/speed.md).
    Losses agree with the fused kernel to float32 rounding (about 1e-7
    absolute); a label whose probability is below 1e-30 (loss > 69) is scored
    with the exact log-sum-exp instead. Labels out of range raise, as there.

    Args:
        logits: `[..., classes]`, any float dtype (computed in float32).
        labels: int `[...]`.
    Returns:
        float32 `[...]`.
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(labels, tf.int32)
    shape = tf.shape(labels)
    flat_logits = tf.reshape(logits, [-1, tf.shape(logits)[-1]])
    flat_labels = tf.reshape(labels, [-1])
    return tf.reshape(_flat_cross_entropy(flat_logits, flat_labels), shape)


def _flat_cross_entropy(logits, labels):
    rows = tf.range(tf.shape(labels)[0])
    indices = tf.stack([rows, labels], axis=1)

    @tf.custom_gradient
    def cross_entropy(logits):
        probs = tf.nn.softmax(logits)
        picked = tf.gather_nd(probs, indices)
        tiny = picked < _TINY_PROBABILITY

        def exact():
            exact_loss = tf.reduce_logsumexp(logits, axis=-1) - tf.gather_nd(logits, indices)
            return tf.where(tiny, exact_loss, -tf.math.log(tf.maximum(picked, _TINY_PROBABILITY)))

        loss = tf.cond(tf.reduce_any(tiny), exact, lambda: -tf.math.log(picked))

        def grad(upstream):
            # upstream * (softmax - one_hot), the scatter in place on the product.
            scaled = upstream[:, tf.newaxis] * probs
            return tf.tensor_scatter_nd_sub(scaled, indices, upstream)

        return loss, grad

    return cross_entropy(logits)


# The name the objectives import.
_per_example_cross_entropy = sparse_cross_entropy


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

    # ------------------------------------------------- context-free baseline
    #
    # Every objective says what a model that ignores context would score on
    # the same held-out data, so that an evaluation can tell learning from
    # frequency counting. The default baseline is "unigram": the objective
    # names its targets in a batch (`baseline_targets`), the training
    # targets' frequencies make an add-one smoothed distribution, and the
    # baseline's loss is its cross-entropy on the evaluation targets (its
    # accuracy: always predicting the most frequent training target).

    #: the baseline's name in metric keys: `<kind>_baseline_<objective>_loss`.
    baseline_kind = "unigram"

    def baseline_targets(self, features):
        """The targets of one NumPy feature batch as a 1-D int array, or None."""
        del features
        return None

    def baseline_num_classes(self):
        """Size of the target space (for the add-one smoothing)."""
        return None

    def context_free_baseline(self, train_batches, eval_batches):
        """`{<kind>_baseline_<name>_loss: ..., ..._accuracy: ...}` or {}.

        Args:
            train_batches / eval_batches: iterables of NumPy feature dicts
                (what the input pipeline yields), read once each.
        """
        if self.baseline_targets is Objective.baseline_targets:
            return {}
        stats = unigram_statistics(
            (self.baseline_targets(batch) for batch in train_batches),
            (self.baseline_targets(batch) for batch in eval_batches),
            num_classes=self.baseline_num_classes(), what=self.name)
        prefix = "%s_baseline_%s" % (self.baseline_kind, self.name)
        result = {prefix + "_accuracy": stats.accuracy}
        if stats.cross_entropy is not None:
            result[prefix + "_loss"] = stats.cross_entropy
        return result

    def derived_metrics(self, results):
        """Values computed from evaluation results (e.g. a perplexity), or {}.

        Args:
            results: the evaluation results so far (this objective's metrics
                and its baseline's), name -> float.
        """
        del results
        return {}

    def get_config(self):
        config = super().get_config()
        config["loss_weight"] = self.loss_weight
        return config


class PerplexityObjective(Objective):
    """An objective predicting the tokens of a vocabulary, reporting the
    perplexities of its loss and of its baseline's (`derived_metrics`).

    `_VOCAB`: the attribute (and config key) of the vocabulary's size, the
    baseline's classes; `_METRIC`: the metrics' prefix when fixed
    (`causal_lm_loss`), None: the objective's name.
    """

    _VOCAB = "vocab_size"
    _METRIC = None

    def baseline_num_classes(self):
        return getattr(self, self._VOCAB)

    def derived_metrics(self, results):
        return perplexities(results, self._METRIC or self.name, self.baseline_kind)

    def get_config(self):
        config = super().get_config()
        config[self._VOCAB] = getattr(self, self._VOCAB)
        return config


class TokenTableObjective(PerplexityObjective):
    """A `PerplexityObjective` over the attached network's token table, whose
    `vocab_size` rows `attach` checks (the causal LM, XLNet's permutation LM, MASS).

    Args:
        vocab_size: rows of the network's embedding table (checked in `attach`).
        loss_weight: see `Objective`.

    `_DEFAULT_NAME`: the layer's name unless one is given; `_PREDICTOR`: what
    the row-count error says predicts (``{name}``: the layer's name). `attach`
    keeps the network in `_network`, untracked.
    """

    _DEFAULT_NAME = None
    _PREDICTOR = "the {name} objective"

    def __init__(self, vocab_size, loss_weight=1.0, **kwargs):
        kwargs.setdefault("name", self._DEFAULT_NAME)
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.vocab_size = vocab_size
        self._network = None
        self.build()

    def check_table(self, network):
        """The network's embedding table has `vocab_size` rows (else one-line ValueError)."""
        rows = int(network.embedding_table.shape[0])
        if rows != self.vocab_size:
            raise ValueError("The network's embedding table has %d rows but %s predicts %d "
                             "tokens." % (rows, self._PREDICTOR.format(name=self.name),
                                          self.vocab_size))

    def attach(self, encoder):
        self.check_table(encoder)
        self._network = _Ref(encoder)


def perplexities(results, metric, baseline_kind="unigram"):
    """`{<metric>_perplexity, <kind>_baseline_<metric>_perplexity}` from the losses (nats).

    For the language-model objectives' `derived_metrics`: the number papers
    quote, for the model and for its context-free baseline, where `results`
    holds their `_loss` values (capped at e^700 rather than overflowing).
    """
    derived = {}
    for prefix in (metric, "%s_baseline_%s" % (baseline_kind, metric)):
        loss = results.get(prefix + "_loss")
        if loss is not None:
            derived[prefix + "_perplexity"] = math.exp(min(float(loss), 700.0))
    return derived


def head_kwargs(config):
    """The arguments every tied-vocabulary head takes from a family config."""
    kwargs = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  initializer_range=config.initializer_range)
    embedding_size = getattr(config, "embedding_size", None)
    if embedding_size and embedding_size != config.hidden_size:
        kwargs["embedding_size"] = embedding_size
    return kwargs


class _Ref:
    """Holds an object without Keras/TF tracking it as a dependency."""

    def __init__(self, value):
        self.value = value


def _stat(total, count):
    return (tf.cast(total, tf.float32), tf.cast(count, tf.float32))


def tied_logits(hidden, table):
    """float32 `hidden @ table^T` (`[..., vocab]`): one 2-D product against
    the embedding table, no broadcast of the table over the batch."""
    table = tf.cast(table, hidden.dtype)
    flat = tf.reshape(hidden, [-1, tf.shape(hidden)[-1]])
    logits = tf.matmul(flat, table, transpose_b=True)
    shape = tf.concat([tf.shape(hidden)[:-1], tf.shape(table)[:1]], 0)
    return tf.cast(tf.reshape(logits, shape), tf.float32)


def token_scores(name, logits, targets, weights):
    """`(losses, metrics)` of predicting int `targets` from `logits`, weighted.

    `<name>_loss` is Google's masked-LM loss `sum(w * CE) / (sum(w) + 1e-5)`;
    the metrics are the statistics of `<name>_loss` and `<name>_accuracy`.
    """
    per_token = _per_example_cross_entropy(logits, targets)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), targets),
                      tf.float32)
    total = tf.reduce_sum(weights * per_token)
    count = tf.reduce_sum(weights)
    losses = {name + "_loss": total / (count + 1e-5)}
    metrics = {
        name + "_loss": _stat(total, count),
        name + "_accuracy": _stat(tf.reduce_sum(weights * correct), count),
    }
    return losses, metrics


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPretrainer(EncoderModel, keras.Model):
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
        outputs = {"sequence_output": encoder_outputs["sequence_output"]}
        if "pooled_output" in encoder_outputs:
            outputs["pooled_output"] = encoder_outputs["pooled_output"]
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
        return self.encoder_model_config(objectives=[
            keras.saving.serialize_keras_object(objective) for objective in self.objectives])

    @classmethod
    def from_config(cls, config):
        objectives = [keras.saving.deserialize_keras_object(objective)
                      for objective in config["objectives"]]
        return super().from_config(dict(config, objectives=objectives))


# The generic name: an encoder/network trained by a list of objectives.
Pretrainer = BertPretrainer
