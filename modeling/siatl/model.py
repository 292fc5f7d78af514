"""`SiatlClassifier`: a pre-trained LSTM language model fine-tuned for classification, SiATL style.

Chronopoulou et al. (2019), "An Embarrassingly Simple Approach for Transfer
Learning from Pretrained Language Models" (SiATL), put a task model on top of
a pre-trained LSTM LM (here ULMFiT's AWD-LSTM, `modeling.ulmfit`) and keep
the LM's own loss as an auxiliary loss while fine-tuning:

    h        = LM(<S> words </S>)                 [batch, words, emb]  (the LM's last layer)
    u        = BiLSTM_task(h)                     [batch, words, 2 x hidden_size]
    e_t      = v . tanh(W u_t + b)                one score per word (a learned scoring
                                                  vector v over a tanh layer, Bahdanau-style)
    a        = softmax(e) over the real words     padding gets weight exactly 0
    r        = sum_t a_t u_t                      [batch, 2 x hidden_size]
    logits   = dense(dropout(r))

    loss     = task_loss + gamma(step) * lm_loss

`task_loss` is run_classifier's (`modeling.tasks.classification
.task_loss_and_metrics`: cross-entropy, multi-label or regression, weighted
by `is_real_example`); `lm_loss` is the pre-trained LM objective's own loss
(next-word cross-entropy per predicted word) on the same task text, through
the same (tied) softmax it was pre-trained with; padding predicts nothing.

The auxiliary weight gamma decays from `gamma_start` (0.2) to `gamma_end`
(0.1) over `gamma_decay_steps` optimizer updates, then stays at `gamma_end`
(`aux_lm_weight`). With f = min(step / gamma_decay_steps, 1):

    exponential (the default; the paper decays gamma exponentially):
        gamma = gamma_start * (gamma_end / gamma_start) ** f
    linear:
        gamma = gamma_start + (gamma_end - gamma_start) * f

so with 0.2 -> 0.1 exponential: 0.2 at step 0, 0.2 / sqrt(2) = 0.1414 half
way, 0.1 at the end. The step is read from a counter the job binds
(`bind_step(optimizer.iterations, offset)`): the optimizer's update count,
which every checkpoint holds, plus the updates of the earlier unfreezing
stages (each stage has a fresh optimizer), so a resumed run continues with
the same gamma. Unbound (a model used on its own), gamma is `gamma_start`.

Sequential unfreezing (`set_trainable_parts`), cumulative as in the paper
(the new layers for the first epochs, then also the pre-trained LSTM, then
also the embeddings) and in the authors' code (alexandra-chron/siatl,
`ClfTrainer`: the task layers' optimizer steps from the start, the
LSTM-and-decoder optimizer from epoch `unfreeze_rnn` on, the embedding
optimizer from `unfreeze_embed` on):

    "new"                 the new layers (task BiLSTM, attention, output layer)
    "all_but_embeddings"  the new layers + the pre-trained LM's network and its
                          LM objective's weights (the decoder), except the
                          network's word embeddings (`embedding_variables`)
    "all"                 everything, the embeddings too

The new layers never stop training: a stage that froze them would fit the
pre-trained LM to a task head that no longer adapts. The LM objective here
is tied (its softmax matrix is the embedding matrix, as ULMFiT's AWD-LSTM is
pre-trained), so stage 2 trains the decoder's own bias and leaves that
shared matrix frozen with the embeddings, as the paper says; the authors'
classifier config unties the two (`tie_weights: False`) and so also trains
a decoder matrix in stage 2. `modeling.siatl.job` runs one trainer per
stage, each with its own optimizer.

Outputs of `call`: `logits` [batch, num_labels] float32, `probabilities`
(softmax; sigmoid for multi-label) or `predictions` (regression),
`attention_weights` [batch, words] float32.

Metrics of `compute_loss_and_metrics` (`(sum, count)`): the classifier's
(`loss` = the task loss, `accuracy`, ...), the LM objective's own
(`<objective>_loss`, `<objective>_accuracy`, ...), `aux_lm_weight` (gamma)
and `total_loss` (what is minimised).

Variable names of the new layers (`task_bilstm`, `attention_pooling`,
`output`) contain no `layer_N`, `lstm_N` or `emb` component, so
`modeling.training.finetuning_techniques` puts them in the top group.
"""

import keras
import tensorflow as tf

from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.encoder_models import EncoderModel
from modeling.tasks import classification
from modeling.training import finetuning_techniques

__all__ = ["AttentionPooling", "GAMMA_DECAYS", "SiatlClassifier", "aux_lm_weight"]

EXPONENTIAL = "exponential"
LINEAR = "linear"
GAMMA_DECAYS = (EXPONENTIAL, LINEAR)

NEW = "new"
ALL_BUT_EMBEDDINGS = "all_but_embeddings"
ALL = "all"
TRAINABLE_PARTS = (NEW, ALL_BUT_EMBEDDINGS, ALL)


def aux_lm_weight(step, decay_steps, start=0.2, end=0.1, decay=EXPONENTIAL):
    """gamma at update `step` (see the module docstring); tensors or Python numbers.

    Returns a float32 tensor. `decay_steps` <= 0 means no decay (gamma = start).
    """
    if decay not in GAMMA_DECAYS:
        raise ValueError("gamma decay must be one of %s, got %r" % (", ".join(GAMMA_DECAYS),
                                                                    decay))
    step = tf.cast(step, tf.float32)
    start = tf.constant(float(start), tf.float32)
    end = tf.constant(float(end), tf.float32)
    if decay_steps <= 0:
        return start + 0.0 * step
    fraction = tf.clip_by_value(step / float(decay_steps), 0.0, 1.0)
    if decay == LINEAR:
        return start + (end - start) * fraction
    return start * tf.pow(end / start, fraction)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AttentionPooling(keras.layers.Layer):
    """Self-attention pooling over the real positions of a sequence.

        e_t = v . tanh(W x_t + b),  a = softmax(e) over mask == 1,  output = sum_t a_t x_t

    Masked positions get weight exactly 0 (a row without any real position
    pools to zeros). Returns `(pooled [batch, dim], weights [batch, length])`.

    Args:
        attention_size: units of the tanh layer (W: [dim, attention_size]).
    """

    def __init__(self, attention_size, **kwargs):
        super().__init__(**kwargs)
        self.attention_size = int(attention_size)
        self.projection = keras.layers.Dense(self.attention_size, activation="tanh",
                                             dtype=self.dtype_policy, name="projection")
        # The mask is an argument (the BiLSTM's output carries one too).
        self.supports_masking = True

    def build(self, input_shape):
        self.projection.build(input_shape)
        self.score_vector = self.add_weight(
            name="score_vector", shape=(self.attention_size,),
            initializer=keras.initializers.RandomNormal(
                stddev=1.0 / self.attention_size ** 0.5))
        self.built = True

    def call(self, inputs, mask):
        energy = tf.cast(self.projection(inputs), tf.float32)
        scores = tf.linalg.matvec(energy, tf.cast(self.score_vector, tf.float32))
        mask = tf.cast(mask, tf.bool)
        # Subtract the row's max over real positions, so exp never overflows;
        # padded positions are then zeroed exactly (not just made small).
        floor = tf.fill(tf.shape(scores), tf.constant(-1e30, tf.float32))
        masked = tf.where(mask, scores, floor)
        shifted = masked - tf.stop_gradient(tf.reduce_max(masked, axis=1, keepdims=True))
        exp = tf.where(mask, tf.exp(shifted), tf.zeros_like(scores))
        weights = tf.math.divide_no_nan(exp, tf.reduce_sum(exp, axis=1, keepdims=True))
        pooled = tf.einsum("bt,btd->bd", weights, tf.cast(inputs, tf.float32))
        return tf.cast(pooled, inputs.dtype), weights

    def compute_mask(self, inputs, mask=None):
        return None  # the pooled vector has no time axis

    def get_config(self):
        config = super().get_config()
        config.update(attention_size=self.attention_size)
        return config


def _set_trainable(layer, value):
    """`layer.trainable = value` for `layer`, every layer inside it and their variables.

    Keras's own assignment is not enough: under the TensorFlow backend
    setting an attribute to the value it already has does nothing
    (`KerasAutoTrackable.__setattr__`), so `layer.trainable = True` on a
    layer that is trainable would leave a variable frozen on its own (the
    embeddings of stage 2) frozen in stage 3.
    """
    for sublayer in layer._flatten_layers(include_self=True):  # pylint: disable=protected-access
        keras.layers.Layer.trainable.fset(sublayer, value)


class _StepSource:
    """The training step gamma follows: `offset` + a counter variable (not tracked by Keras)."""

    def __init__(self, counter, offset):
        self.counter = counter
        self.offset = int(offset)

    def value(self):
        return tf.cast(tf.convert_to_tensor(self.counter), tf.float32) + float(self.offset)


class _CheckpointedWeights(tf.Module):
    """Holds every weight of the model so that TensorFlow checkpoints reach all of them.

    Under Keras 3 a `tf.train.Checkpoint(model=...)` only follows attributes
    that are layers or variables, not lists of layers (the AWD-LSTM's
    `lstms`): the trainer's checkpoints get those weights only through the
    optimizer's list of trainable variables, so the weights of a frozen part
    (stage 1 freezes the whole LM) would be missing from a checkpoint, from
    its resume and from the next stage's start. A `tf.Module`'s list is
    tracked; Keras does not see this one, so `model.weights` is unchanged.
    """

    def __init__(self, weights):
        super().__init__(name="checkpointed_weights")
        self.weights_list = list(weights)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SiatlClassifier(EncoderModel, keras.Model):
    """A pre-trained LM + task BiLSTM + self-attention pooling + dense (see the module docstring).

    Args:
        encoder: the pre-trained LM's network (e.g. `modeling.ulmfit.AwdLstm`):
            `encoder(features, training)` returns a dict with
            `sequence_output` [batch, words, dim].
        lm_objective: the LM's pre-training objective (a
            `modeling.objectives.base.Objective`: `objective(encoder_outputs,
            features, training)` -> `{"losses", "metrics", "outputs"}`); it is
            attached to `encoder` here (tied softmax).
        num_labels: classes (1 for regression).
        task_type: "classification", "multi_label" or "regression".
        hidden_size: units of each direction of the task BiLSTM.
        attention_size: units of the attention's tanh layer (default
            2 x hidden_size).
        dropout_rate: dropout on the pooled vector (the LM's states have the
            LM's own output dropout).
        gamma_start, gamma_end, gamma_decay, gamma_decay_steps: the
            auxiliary LM loss weight (`aux_lm_weight`).
    """

    NESTED = ("encoder", "lm_objective")

    def __init__(self, encoder, lm_objective, num_labels, task_type=classification.CLASSIFICATION,
                 hidden_size=64, attention_size=None, dropout_rate=0.2, gamma_start=0.2,
                 gamma_end=0.1, gamma_decay=EXPONENTIAL, gamma_decay_steps=0, **kwargs):
        kwargs.setdefault("name", "siatl_classifier")
        super().__init__(**kwargs)
        if task_type not in classification.TASK_TYPES:
            raise ValueError("task_type must be one of %s, not %r"
                             % (", ".join(classification.TASK_TYPES), task_type))
        if task_type == classification.REGRESSION:
            num_labels = 1
        if not num_labels or int(num_labels) < 1:
            raise ValueError("num_labels must be a positive integer, got %r" % (num_labels,))
        if gamma_decay not in GAMMA_DECAYS:
            raise ValueError("gamma_decay must be one of %s, got %r"
                             % (", ".join(GAMMA_DECAYS), gamma_decay))
        for name, value in (("gamma_start", gamma_start), ("gamma_end", gamma_end)):
            if not value >= 0:
                raise ValueError("%s must be >= 0, got %r" % (name, value))
        if gamma_decay == EXPONENTIAL and (gamma_start == 0) != (gamma_end == 0):
            raise ValueError("an exponential decay cannot reach or leave 0 (gamma_start=%r, "
                             "gamma_end=%r); use gamma_decay=linear" % (gamma_start, gamma_end))
        if int(hidden_size) < 1:
            raise ValueError("hidden_size must be positive, got %r" % (hidden_size,))
        self.encoder = encoder
        self.lm_objective = lm_objective
        self.lm_objective.attach(encoder)
        self.num_labels = int(num_labels)
        self.task_type = task_type
        self.hidden_size = int(hidden_size)
        self.attention_size = int(attention_size or 2 * self.hidden_size)
        self.dropout_rate = float(dropout_rate)
        self.gamma_start = float(gamma_start)
        self.gamma_end = float(gamma_end)
        self.gamma_decay = gamma_decay
        self.gamma_decay_steps = int(gamma_decay_steps)
        self._step_source = None
        policy = self.dtype_policy
        self.task_bilstm = keras.layers.Bidirectional(
            keras.layers.LSTM(self.hidden_size, return_sequences=True, dtype=policy,
                              name="task_lstm"), dtype=policy, name="task_bilstm")
        self.attention_pooling = AttentionPooling(self.attention_size, dtype=policy,
                                                  name="attention_pooling")
        self.output_dropout = keras.layers.Dropout(self.dropout_rate, dtype=policy,
                                                   name="output_dropout")
        self.output_layer = keras.layers.Dense(self.num_labels, dtype=policy, name="output")
        self.build()
        # Every weight, reachable from the model in TensorFlow's checkpoint graph.
        self._checkpointed_weights = _CheckpointedWeights(self.weights)

    def build(self, input_shape=None):
        if self.built:
            return
        self.encoder.build()
        self.lm_objective.build()
        width = self._encoder_width()
        self.task_bilstm.build((None, None, width))
        self.attention_pooling.build((None, None, 2 * self.hidden_size))
        self.output_layer.build((None, 2 * self.hidden_size))
        self.built = True

    def _encoder_width(self):
        """The width of the network's `sequence_output` (from a one-sentence dry run)."""
        ids = tf.constant([[0, 1]], tf.int32)
        probe = self.encoder({"input_ids": ids, "input_mask": tf.ones_like(ids),
                              "segment_ids": tf.zeros_like(ids)}, training=False)
        return int(probe["sequence_output"].shape[-1])

    # -------------------------------------------------------------- parts

    @property
    def new_layers(self):
        """The layers SiATL adds (every stage trains them; stage 1 only them)."""
        return [self.task_bilstm, self.attention_pooling, self.output_layer]

    @property
    def pretrained_layers(self):
        """The pre-trained LM: its network and its objective's own weights."""
        return [self.encoder, self.lm_objective]

    @property
    def embedding_variables(self):
        """The network's word embeddings, which only the last stage trains.

        Found by path as `modeling.training.finetuning_techniques` finds its
        "embeddings" group (a path component containing "emb" and no layer
        index: the AWD-LSTM's `awd_lstm/embeddings/embeddings`), plus the
        network's `embedding_table` if it has one under another name.
        """
        found = [v for v in self.encoder.weights
                 if finetuning_techniques.group_of_path(v.path)[1]
                 == finetuning_techniques.EMBEDDINGS]
        table = getattr(self.encoder, "embedding_table", None)
        if table is not None and not any(v is table for v in found):
            found.append(table)
        return found

    def set_trainable_parts(self, parts):
        """Makes `parts` trainable and freezes the rest (see the module docstring)."""
        if parts not in TRAINABLE_PARTS:
            raise ValueError("parts must be one of %s, got %r" % (", ".join(TRAINABLE_PARTS),
                                                                  parts))
        for layer in self.new_layers:
            _set_trainable(layer, True)
        # A layer's flag sets its variables' too, so the embeddings are
        # frozen after their layers are unfrozen.
        for layer in self.pretrained_layers:
            _set_trainable(layer, parts != NEW)
        if parts == ALL_BUT_EMBEDDINGS:
            embeddings = self.embedding_variables
            if not embeddings:
                raise ValueError("parts=%s: the pre-trained network %r has no embedding "
                                 "variables (a path component with 'emb') to keep frozen"
                                 % (parts, self.encoder.name))
            for variable in embeddings:
                variable.trainable = False

    # -------------------------------------------------------------- gamma

    def bind_step(self, counter, offset=0):
        """gamma follows `offset + counter` (the optimizer's `iterations`; see the docstring)."""
        self._step_source = _StepSource(counter, offset)

    def current_step(self):
        if self._step_source is None:
            return tf.constant(0.0, tf.float32)
        return self._step_source.value()

    def aux_lm_weight(self, step=None):
        """gamma at `step` (default: the bound counter's step)."""
        if step is None:
            step = self.current_step()
        return aux_lm_weight(step, self.gamma_decay_steps, self.gamma_start, self.gamma_end,
                             self.gamma_decay)

    # --------------------------------------------------------------- call

    def _run(self, features, training):
        encoder_outputs = self.encoder(features, training=training)
        hidden = encoder_outputs["sequence_output"]
        mask = tf.cast(features["input_mask"], tf.bool)
        hidden = tf.cast(hidden, self.compute_dtype)
        states = self.task_bilstm(hidden, mask=mask, training=training)
        pooled, weights = self.attention_pooling(states, mask)
        pooled = self.output_dropout(pooled, training=training)
        logits = tf.cast(self.output_layer(pooled), tf.float32)
        outputs = classification.outputs_of_logits(logits, self.task_type)
        outputs["attention_weights"] = weights
        return outputs, encoder_outputs

    def call(self, features, training=None):
        outputs, _ = self._run(features, training)
        return outputs

    def lm_loss_and_metrics(self, encoder_outputs, features, training=None):
        """`(lm_loss, metrics)`: the LM objective's weighted loss and its own metrics."""
        result = self.lm_objective(encoder_outputs, features, training=training)
        lm_loss = tf.constant(0.0, tf.float32)
        for loss in result["losses"].values():
            lm_loss += tf.cast(loss, tf.float32)
        return lm_loss * float(self.lm_objective.loss_weight), dict(result["metrics"])

    def compute_loss_and_metrics(self, features, training=None):
        """`(task_loss + gamma * lm_loss, metrics)` (see the module docstring)."""
        outputs, encoder_outputs = self._run(features, training)
        task_loss, metrics = classification.task_loss_and_metrics(
            outputs, features, self.task_type, self.num_labels)
        lm_loss, lm_metrics = self.lm_loss_and_metrics(encoder_outputs, features, training)
        for name, stat in lm_metrics.items():
            if name in metrics:
                raise ValueError("The LM objective reports %r, a name the classifier uses"
                                 % name)
            metrics[name] = stat
        gamma = self.aux_lm_weight()
        total = task_loss + gamma * lm_loss
        metrics["aux_lm_weight"] = (gamma, tf.constant(1.0, tf.float32))
        metrics["total_loss"] = (total, tf.constant(1.0, tf.float32))
        return total, metrics

    def get_config(self):
        return self.encoder_model_config(
            lm_objective=keras.saving.serialize_keras_object(self.lm_objective),
            num_labels=self.num_labels, task_type=self.task_type,
            hidden_size=self.hidden_size, attention_size=self.attention_size,
            dropout_rate=self.dropout_rate, gamma_start=self.gamma_start,
            gamma_end=self.gamma_end, gamma_decay=self.gamma_decay,
            gamma_decay_steps=self.gamma_decay_steps)
