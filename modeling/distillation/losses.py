"""Distillation losses: soft targets, hidden-state and attention matching.

Every loss here is a plain function of tensors (no weights), is exactly 0
when the student's outputs equal the teacher's and positive otherwise, and
takes an optional mask so padding never counts:

    soft_cross_entropy(student_logits, teacher_probs, T)
        -sum_k p_k log softmax(z_s / T)_k, MINUS the teacher's entropy
        -sum_k p_k log p_k, i.e. KL(p || softmax(z_s / T)). The entropy
        does not depend on the student, so its gradients are those of the
        cross-entropy of Hinton et al. (2015); subtracting it makes the loss
        0 exactly when the student's tempered distribution is the teacher's
        (the cross-entropy itself is then the teacher's entropy, > 0).
    teacher_soft_targets([teacher_logits...], T)
        mean over teachers of softmax(z_t / T): MT-DNN's ensemble targets.
    cosine_embedding_loss(student_hidden, teacher_hidden, mask)
        mean over real tokens of 1 - cos(h_s, h_t) (DistilBERT's L_cos with
        target 1).
    hidden_mse(student_hidden, teacher_hidden, mask)
        mean over real tokens and units of (h_s - h_t)^2 (TinyBERT's
        embedding and hidden-state losses, after the student's projection).
    attention_score_mse(student_scores, teacher_scores, mask)
        TinyBERT's attention loss: the same mean of squared differences of
        the attention scores before the softmax, masked keys (-10000) set
        to 0 on both sides as in the authors' `task_distill.py`.
    attention_mse(student_probs, teacher_probs, mask)
        mean over heads, real query tokens and keys of the squared
        difference of the attention probabilities (the form TextBrewer's
        `att_mse` offers; `--tinybert_attention=probs`).

The temperature-scaled soft loss of Hinton et al. is multiplied by T^2 by
the caller (so its gradients keep their size as T changes).
"""

import tensorflow as tf

__all__ = [
    "attention_mse",
    "attention_score_mse",
    "cosine_embedding_loss",
    "hidden_mse",
    "soft_cross_entropy",
    "teacher_soft_targets",
]


def _f32(x):
    return tf.cast(x, tf.float32)


def teacher_soft_targets(teacher_logits, temperature=1.0):
    """The mean over teachers of softmax(logits / T).

    Args:
        teacher_logits: a list of `[..., classes]` logits, one per teacher
            (a single tensor is one teacher).
        temperature: T > 0.

    Returns:
        float32 `[..., classes]` probabilities.
    """
    if not isinstance(teacher_logits, (list, tuple)):
        teacher_logits = [teacher_logits]
    if not teacher_logits:
        raise ValueError("teacher_soft_targets needs at least one teacher's logits.")
    probs = [tf.nn.softmax(_f32(z) / temperature, axis=-1) for z in teacher_logits]
    return tf.add_n(probs) / float(len(probs))


def soft_cross_entropy(student_logits, teacher_probs, temperature=1.0, weights=None):
    """KL(teacher_probs || softmax(student_logits / T)), weighted mean over examples.

    Args:
        student_logits: `[..., classes]`.
        teacher_probs: `[..., classes]`, rows summing to 1 (already tempered,
            e.g. from `teacher_soft_targets` with the same T).
        temperature: T > 0 applied to the student's logits.
        weights: optional `[...]` weights of the rows (0 = ignore, e.g.
            padding); default 1.

    Returns:
        `(mean, (weighted sum, sum of weights))`: the scalar loss and the
        pair the trainer's metrics add up. The mean is 0 when all weights
        are 0.
    """
    log_q = tf.nn.log_softmax(_f32(student_logits) / temperature, axis=-1)
    p = _f32(teacher_probs)
    # p log p with 0 log 0 = 0.
    log_p = tf.math.log(tf.where(p > 0, p, tf.ones_like(p)))
    per_row = tf.reduce_sum(p * (log_p - log_q), axis=-1)
    return _weighted_mean(per_row, weights)


def _weighted_mean(values, weights):
    values = _f32(values)
    if weights is None:
        weights = tf.ones_like(values)
    weights = tf.broadcast_to(_f32(weights), tf.shape(values))
    total = tf.reduce_sum(weights * values)
    count = tf.reduce_sum(weights)
    return tf.math.divide_no_nan(total, count), (total, count)


def cosine_embedding_loss(student_hidden, teacher_hidden, mask=None):
    """Mean over the masked-in tokens of 1 - cos(student, teacher).

    Args:
        student_hidden, teacher_hidden: `[batch, seq, hidden]` of the same
            width.
        mask: `[batch, seq]` 1 for real tokens (the input mask); default all.

    Returns:
        `(mean, (sum, count))` as `soft_cross_entropy`.
    """
    s = tf.math.l2_normalize(_f32(student_hidden), axis=-1, epsilon=1e-12)
    t = tf.math.l2_normalize(_f32(teacher_hidden), axis=-1, epsilon=1e-12)
    per_token = 1.0 - tf.reduce_sum(s * t, axis=-1)
    return _weighted_mean(per_token, mask)


def hidden_mse(student_hidden, teacher_hidden, mask=None):
    """Mean squared difference over the masked-in tokens and all units.

    Args:
        student_hidden: `[batch, seq, hidden]` (already projected to the
            teacher's width when narrower).
        teacher_hidden: `[batch, seq, hidden]`.
        mask: `[batch, seq]` 1 for real tokens; default all.

    Returns:
        `(mean, (sum, count))`; count is tokens x units.
    """
    diff = tf.square(_f32(student_hidden) - _f32(teacher_hidden))
    per_token = tf.reduce_sum(diff, axis=-1)
    width = tf.cast(tf.shape(diff)[-1], tf.float32)
    mean, (total, count) = _weighted_mean(per_token, mask)
    return tf.math.divide_no_nan(mean, width), (total, count * width)


def attention_mse(student_probs, teacher_probs, mask=None):
    """Mean squared difference of attention maps over heads, real queries and keys.

    On probabilities (after the softmax, before dropout) padded keys are 0
    on both sides, so only padded queries need the mask. TinyBERT itself
    matches the scores before the softmax: `attention_score_mse`.

    Args:
        student_probs, teacher_probs: `[batch, heads, seq, seq]` with the
            same number of heads.
        mask: `[batch, seq]` 1 for real tokens (queries); default all.

    Returns:
        `(mean, (sum, count))`; count is heads x real queries x keys.
    """
    s, t = _f32(student_probs), _f32(teacher_probs)
    diff = tf.square(s - t)                         # [b, h, q, k]
    per_query = tf.reduce_sum(diff, axis=[1, 3])    # [b, q]
    size = tf.cast(tf.shape(diff)[1] * tf.shape(diff)[3], tf.float32)
    mean, (total, count) = _weighted_mean(per_query, mask)
    return tf.math.divide_no_nan(mean, size), (total, count * size)


def attention_score_mse(student_scores, teacher_scores, mask=None):
    """TinyBERT's attention loss: MSE of the scores before the softmax.

    Scores of masked keys carry the -10000 of the additive mask; as in the
    authors' code (`torch.where(att <= -1e2, 0, att)`) they are set to 0 on
    both sides, so they add nothing, and padded queries are left out by
    `mask`. The mean is over heads, real queries and all keys, as
    `attention_mse`'s.

    Args:
        student_scores, teacher_scores: `[batch, heads, seq, seq]` float
            scores (`output_attention_scores=True` of the encoders).
        mask: `[batch, seq]` 1 for real tokens (queries); default all.
    """
    def clean(scores):
        scores = _f32(scores)
        return tf.where(scores <= _MASKED_SCORE, tf.zeros_like(scores), scores)

    return attention_mse(clean(student_scores), clean(teacher_scores), mask)


# Below this a score is a masked key's (the additive mask is -10000).
_MASKED_SCORE = -1e2
