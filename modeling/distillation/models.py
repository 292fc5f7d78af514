"""Teacher + student models for the one trainer (`compute_loss_and_metrics`).

Each model holds frozen teachers (`trainable = False`: the trainer updates
`model.trainable_variables` only, so teacher weights never change) and a
student, runs the teachers' forward passes inside the training step
(inference mode, no dropout, under `tf.stop_gradient`) and returns
`(loss, {name: (sum, count)})`. Called as a Keras model, each returns the
student's outputs, so evaluation and prediction see the student.

    ClassifierDistiller   MT-DNN (Liu et al. 2019, "Improving multi-task deep
                          neural networks via knowledge distillation"): an
                          ensemble of fine-tuned `BertClassifier`s, their
                          tempered probabilities averaged; the student on
                          alpha T^2 soft + (1 - alpha) hard cross-entropy.
    MaskedLMDistiller     DistilBERT: soft MLM targets (T), hard MLM loss and
                          the cosine loss between the last hidden states.
    TinyBertDistiller     TinyBERT: embedding, attention and hidden-state MSE
                          over a layer mapping, through a learned projection
                          when the student is narrower; prediction-layer soft
                          cross-entropy.

Why the teachers run in the step rather than their soft targets being
precomputed into the TFRecords: TinyBERT needs every hidden state and
attention map of the teacher (far too large to store), DistilBERT's targets
are over the whole vocabulary at each masked position, and an in-step
teacher keeps one TFRecord format for every style and any dynamic input
(shuffled transfer examples, any temperature). The price is one teacher
forward pass per step (no backward pass), which is small next to the
student's forward and backward for the teacher sizes a CPU run uses.

Extra feature: `hard_label_weight` (float `[batch]`, default 1): 0 for
transfer examples without a label (the teacher labels them; they count in
the soft loss only).
"""

import keras
import tensorflow as tf

from modeling.distillation import losses
from modeling.distillation.students import DistillationError

__all__ = ["ClassifierDistiller", "MaskedLMDistiller", "TinyBertDistiller",
           "classifier_logits", "ATTENTION_TARGETS", "STAGES"]

STAGES = ("intermediate", "prediction", "both", "general")
# "general": TinyBERT's general distillation, the layer-wise losses on
# unlabelled text between pre-trained (masked-LM) models, no task head.
# What TinyBERT's attention loss compares: the scores before the softmax
# (the paper and its code) or the probabilities.
ATTENTION_TARGETS = ("scores", "probs")


def _stat(total, count):
    return (tf.cast(total, tf.float32), tf.cast(count, tf.float32))


def _freeze(model):
    model.trainable = False
    return model


def classifier_logits(classifier, pooled, training):
    """`BertClassifier`'s head on a pooled output (its call, without the encoder)."""
    pooled = classifier.dropout(pooled, training=training)
    logits = tf.matmul(pooled, tf.cast(classifier.output_weights, pooled.dtype),
                       transpose_b=True)
    return tf.cast(logits, tf.float32) + tf.cast(classifier.output_bias, tf.float32)


def _example_weights(features, batch):
    if "is_real_example" in features:
        real = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])
    else:
        real = tf.ones([batch], tf.float32)
    hard = real
    if "hard_label_weight" in features:
        hard = real * tf.reshape(tf.cast(features["hard_label_weight"], tf.float32), [-1])
    return real, hard


def _hard_loss_and_accuracy(logits, features, weights, metrics, prefix=""):
    labels = tf.reshape(tf.cast(features["label_ids"], tf.int32), [-1])
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    mean, stat = losses._weighted_mean(per_example, weights)  # pylint: disable=protected-access
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    metrics[prefix + "accuracy"] = _stat(tf.reduce_sum(weights * correct),
                                         tf.reduce_sum(weights))
    return mean, stat


class ClassifierDistiller(keras.Model):
    """MT-DNN-style distillation of a teacher ensemble into a student classifier.

    loss = alpha T^2 KL(mean_i softmax(z_i / T) || softmax(z_s / T))
           + (1 - alpha) CE(labels, z_s)

    The soft term averages over every real example (transfer examples
    too), the hard term over the labelled ones (`hard_label_weight` 1). The
    KL differs from the soft cross-entropy by the teachers' entropy only, a
    constant for the student (same gradients; 0 when the student matches).
    With no teachers (or alpha = 0) this is plain fine-tuning on the labels:
    the baseline a distilled student is compared with.

    Metrics: loss, accuracy (student, labelled examples), hard_loss,
    soft_loss, teacher_accuracy (the ensemble's average probabilities).

    Args:
        student: a `BertClassifier` (classification task type).
        teachers: `BertClassifier`s with the student's number of labels.
        temperature: T > 0.
        alpha: weight of the soft term, in [0, 1].
    """

    def __init__(self, student, teachers=(), temperature=1.0, alpha=0.5, **kwargs):
        kwargs.setdefault("name", "classifier_distiller")
        super().__init__(**kwargs)
        if not temperature > 0:
            raise DistillationError("--temperature must be positive, got %r" % (temperature,))
        if not 0.0 <= alpha <= 1.0:
            raise DistillationError("--alpha must be in [0, 1], got %r" % (alpha,))
        teachers = list(teachers)
        for i, teacher in enumerate(teachers):
            if teacher.num_labels != student.num_labels:
                raise DistillationError("teacher %d has %d labels but the student has %d"
                                        % (i, teacher.num_labels, student.num_labels))
        self.student = student
        self.teachers = [_freeze(t) for t in teachers]
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.student.build()
        for teacher in self.teachers:
            teacher.build()
        self.built = True

    def call(self, features, training=None):
        return self.student(features, training=training)

    def teacher_probabilities(self, features):
        """The ensemble's averaged tempered probabilities (no gradient)."""
        logits = [t(features, training=False)["logits"] for t in self.teachers]
        return tf.stop_gradient(losses.teacher_soft_targets(logits, self.temperature))

    def compute_loss_and_metrics(self, features, training=None):
        logits = self.student(features, training=training)["logits"]
        real, hard_weights = _example_weights(features, tf.shape(logits)[0])
        metrics = {}
        hard, metrics["hard_loss"] = _hard_loss_and_accuracy(logits, features, hard_weights,
                                                             metrics)
        loss = hard
        if self.teachers and self.alpha > 0:
            targets = self.teacher_probabilities(features)
            soft, metrics["soft_loss"] = losses.soft_cross_entropy(
                logits, targets, self.temperature, real)
            loss = (self.alpha * self.temperature ** 2 * soft + (1.0 - self.alpha) * hard)
            labels = tf.reshape(tf.cast(features["label_ids"], tf.int32), [-1])
            teacher_correct = tf.cast(tf.equal(
                tf.argmax(targets, -1, output_type=tf.int32), labels), tf.float32)
            metrics["teacher_accuracy"] = _stat(tf.reduce_sum(hard_weights * teacher_correct),
                                                tf.reduce_sum(hard_weights))
        count = tf.reduce_sum(real)
        metrics["loss"] = _stat(loss * count, count)
        return loss, metrics


class _OneTeacherDistiller(keras.Model):
    """A student and one frozen teacher (`student`, `teacher`), built together; called,
    the student's outputs."""

    def build(self, input_shape=None):
        if self.built:
            return
        self.student.build()
        self.teacher.build()
        self.built = True

    def call(self, features, training=None):
        return self.student(features, training=training)


class MaskedLMDistiller(_OneTeacherDistiller):
    """DistilBERT-style distillation of a masked-LM teacher.

    loss = soft_weight T^2 KL(softmax(t / T) || softmax(s / T))   masked positions
           + mlm_weight  MLM cross-entropy (Google's masked_lm_loss)
           + cos_weight  mean_{real tokens} (1 - cos(h_s, h_t))      last layer

    Args:
        student, teacher: `BertPretrainer`s with a "masked_lm" objective and
            the same width (the cosine loss compares hidden states).
        temperature: T (DistilBERT: 2.0).
        soft_weight, mlm_weight, cos_weight: DistilBERT's 5.0 / 2.0 / 1.0.

    Metrics: loss, masked_lm_loss, masked_lm_accuracy (student), soft_loss,
    cos_loss, teacher_masked_lm_accuracy.
    """

    def __init__(self, student, teacher, temperature=2.0, soft_weight=5.0, mlm_weight=2.0,
                 cos_weight=1.0, **kwargs):
        kwargs.setdefault("name", "masked_lm_distiller")
        super().__init__(**kwargs)
        if not temperature > 0:
            raise DistillationError("--temperature must be positive, got %r" % (temperature,))
        for name, value in (("soft_loss_weight", soft_weight), ("mlm_loss_weight", mlm_weight),
                            ("cos_loss_weight", cos_weight)):
            if value < 0:
                raise DistillationError("--%s must be >= 0, got %r" % (name, value))
        if student.encoder.hidden_size != teacher.encoder.hidden_size:
            raise DistillationError(
                "DistilBERT's cosine loss needs the teacher's width: student hidden_size %d, "
                "teacher %d" % (student.encoder.hidden_size, teacher.encoder.hidden_size))
        self.student = student
        self.teacher = _freeze(teacher)
        self.temperature = float(temperature)
        self.soft_weight = float(soft_weight)
        self.mlm_weight = float(mlm_weight)
        self.cos_weight = float(cos_weight)
        self.build()

    @staticmethod
    def _forward(pretrainer, features, training):
        encoded = pretrainer.encoder(features, training=training)
        result = pretrainer.get_objective("masked_lm")(encoded, features, training=training)
        return encoded, result

    def compute_loss_and_metrics(self, features, training=None):
        s_encoded, s_mlm = self._forward(self.student, features, training)
        t_encoded, t_mlm = self._forward(self.teacher, features, False)
        t_logits = tf.stop_gradient(t_mlm["outputs"]["masked_lm_logits"])
        t_hidden = tf.stop_gradient(t_encoded["sequence_output"])
        s_logits = s_mlm["outputs"]["masked_lm_logits"]
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        metrics = dict(s_mlm["metrics"])
        mlm = s_mlm["losses"]["masked_lm_loss"]
        soft, metrics["soft_loss"] = losses.soft_cross_entropy(
            s_logits, tf.nn.softmax(t_logits / self.temperature, axis=-1), self.temperature,
            weights)
        mask = features.get("input_mask")
        cos, metrics["cos_loss"] = losses.cosine_embedding_loss(
            s_encoded["sequence_output"], t_hidden, mask)
        loss = (self.soft_weight * self.temperature ** 2 * soft + self.mlm_weight * mlm
                + self.cos_weight * cos)
        t_correct = tf.cast(tf.equal(tf.argmax(t_logits, -1, output_type=tf.int32),
                                     tf.cast(features["masked_lm_ids"], tf.int32)), tf.float32)
        metrics["teacher_masked_lm_accuracy"] = _stat(tf.reduce_sum(weights * t_correct),
                                                      tf.reduce_sum(weights))
        batch = tf.cast(tf.shape(weights)[0], tf.float32)
        metrics["loss"] = _stat(loss * batch, batch)
        return loss, metrics


class TinyBertDistiller(_OneTeacherDistiller):
    """TinyBERT-style layer-wise and prediction-layer distillation.

    intermediate = MSE(E_s W, E_t)                                  embeddings
                   + sum_{(s, t) in layer_map} [ MSE(A_s, A_t)      attention scores
                                                 + MSE(H_s W, H_t) ] hidden states
    prediction   = KL(softmax(z_t / T) || softmax(z_s / T))        task logits
    loss         = intermediate, prediction, or their sum (`stage` "both")

    W is one learned projection (a dense layer with bias, TinyBERT's
    `fit_dense`) shared by the embeddings and every hidden state, present
    only when the student is narrower than the teacher (`projection`); with
    equal widths the states are compared directly. A are the attention
    scores before the softmax, as in the paper and its code (`attention`
    "scores"; "probs" compares the probabilities instead), compared head
    by head, so the student needs the teacher's number of
    heads. Padding is masked out of every term.

    Args:
        student, teacher: `BertClassifier`s (the teacher fine-tuned; frozen).
        layer_map: `[(student_layer, teacher_layer), ...]`, 0-based
            (`students.parse_layer_map`).
        stage: "intermediate", "prediction" or "both" (task distillation:
            student and teacher `BertClassifier`s), or "general" (TinyBERT's
            general distillation: the intermediate losses on unlabelled
            text, student and teacher any models with an `encoder`, e.g.
            masked-LM pretrainers; the teacher a pre-trained BERT).
        temperature: T of the prediction-layer loss (TinyBERT: 1).

    Metrics: loss, accuracy (student), and per stage embedding_loss,
    attention_loss, hidden_loss (sums over the mapped layers) and soft_loss.
    """

    def __init__(self, student, teacher, layer_map, stage="both", temperature=1.0,
                 attention="scores", **kwargs):
        kwargs.setdefault("name", "tinybert_distiller")
        super().__init__(**kwargs)
        if stage not in STAGES:
            raise DistillationError("--stage=%s: expected one of %s" % (stage, ", ".join(STAGES)))
        if attention not in ATTENTION_TARGETS:
            raise DistillationError("--tinybert_attention=%s: expected one of %s"
                                    % (attention, ", ".join(ATTENTION_TARGETS)))
        self.attention = attention
        if not temperature > 0:
            raise DistillationError("--temperature must be positive, got %r" % (temperature,))
        s_enc, t_enc = student.encoder, teacher.encoder
        if stage != "prediction" and s_enc.num_attention_heads != t_enc.num_attention_heads:
            raise DistillationError(
                "attention maps are matched head by head: the student has %d attention heads, "
                "the teacher %d; give the student num_attention_heads=%d"
                % (s_enc.num_attention_heads, t_enc.num_attention_heads,
                   t_enc.num_attention_heads))
        if stage != "general" and student.num_labels != teacher.num_labels:
            raise DistillationError("the teacher has %d labels but the student has %d"
                                    % (teacher.num_labels, student.num_labels))
        for s, t in layer_map:
            if not (0 <= s < s_enc.num_hidden_layers and 0 <= t < t_enc.num_hidden_layers):
                raise DistillationError("layer map entry %d:%d out of range (student %d, "
                                        "teacher %d layers)" % (s, t, s_enc.num_hidden_layers,
                                                                t_enc.num_hidden_layers))
        self.student = student
        self.teacher = _freeze(teacher)
        self.layer_map = [(int(s), int(t)) for s, t in layer_map]
        self.stage = stage
        self.temperature = float(temperature)
        self.projection = None
        if s_enc.hidden_size != t_enc.hidden_size and stage != "prediction":
            self.projection = keras.layers.Dense(
                t_enc.hidden_size, name="fit_dense",
                kernel_initializer=keras.initializers.TruncatedNormal(
                    stddev=getattr(s_enc, "initializer_range", 0.02)))
            self.projection.build((None, None, s_enc.hidden_size))
        self.build()

    def _project(self, hidden):
        return hidden if self.projection is None else self.projection(hidden)

    def compute_loss_and_metrics(self, features, training=None):
        need_layers = self.stage != "prediction"
        scores = need_layers and self.attention == "scores"
        maps = "attention_scores" if scores else "attention_probs"
        s_out = self.student.encoder(features, training=training,
                                     output_attention_probs=need_layers and not scores,
                                     output_attention_scores=scores)
        t_out = self.teacher.encoder(features, training=False,
                                     output_attention_probs=need_layers and not scores,
                                     output_attention_scores=scores)
        attention_loss = losses.attention_score_mse if scores else losses.attention_mse
        metrics = {}
        if self.stage == "general":  # unlabelled text: no head, every sequence real
            real = tf.ones([tf.shape(s_out["sequence_output"])[0]], tf.float32)
        else:
            logits = classifier_logits(self.student, s_out["pooled_output"], training)
            real, hard_weights = _example_weights(features, tf.shape(logits)[0])
            if "label_ids" in features:
                _hard_loss_and_accuracy(logits, features, hard_weights, metrics)
        mask = features.get("input_mask")
        if mask is not None:
            mask = tf.cast(mask, tf.float32) * real[:, None]
        loss = tf.constant(0.0)
        if need_layers:
            emb, metrics["embedding_loss"] = losses.hidden_mse(
                self._project(s_out["embedding_output"]),
                tf.stop_gradient(t_out["embedding_output"]), mask)
            att_total = hid_total = tf.constant(0.0)
            att_stats, hid_stats = [], []
            for s, t in self.layer_map:
                att, att_stat = attention_loss(
                    s_out[maps][s], tf.stop_gradient(t_out[maps][t]), mask)
                hid, hid_stat = losses.hidden_mse(
                    self._project(s_out["encoder_outputs"][s]),
                    tf.stop_gradient(t_out["encoder_outputs"][t]), mask)
                att_total += att
                hid_total += hid
                att_stats.append(att_stat)
                hid_stats.append(hid_stat)
            # Shown per layer on average: (sum over layers of sums, counts).
            metrics["attention_loss"] = tuple(tf.add_n(list(x)) for x in zip(*att_stats))
            metrics["hidden_loss"] = tuple(tf.add_n(list(x)) for x in zip(*hid_stats))
            loss += emb + att_total + hid_total
        if self.stage in ("prediction", "both"):
            t_logits = classifier_logits(self.teacher, t_out["pooled_output"], False)
            targets = tf.stop_gradient(tf.nn.softmax(t_logits / self.temperature, axis=-1))
            soft, metrics["soft_loss"] = losses.soft_cross_entropy(
                logits, targets, self.temperature, real)
            loss += soft
        count = tf.reduce_sum(real)
        metrics["loss"] = _stat(loss * count, count)
        return loss, metrics
