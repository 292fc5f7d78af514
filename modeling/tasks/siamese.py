"""Siamese sentence matching (a bi-encoder): one shared encoder, two texts, one score.

The FAQ-bot set-up of the articles (Sentence-BERT, Reimers & Gurevych 2019):
both texts go through the SAME encoder on their own, each becomes one vector
by pooling, and the score of the pair is the similarity of the two vectors.
Stored questions are then encoded once (`modeling.serving.matching`), and a
query costs one encoder call plus one matrix product, where a cross-encoder
(the pair through BERT, `BertClassifier`) needs one encoder call per stored
question.

    >>> model = BiEncoder.from_config_object(bert_config, pooling="mean",
    ...                                      similarity="cosine", loss="in_batch")
    >>> u = model.encode({"input_ids": ids, "input_mask": mask, "segment_ids": seg})
    >>> outputs = model(features)      # a_* and b_* features: u, v, score

Pooling (`pooling`), over the encoder's `sequence_output` ``[batch, seq, hidden]``
and `input_mask`:

    cls    the vector at position 0 ([CLS]); no pooler dense layer. With
           ``cls_position="last"`` the last real token's (XLNet's `<cls>`
           ends its framing), wherever the padding is
    mean   sum of the real tokens' vectors / their number (padding ignored)
    max    element-wise maximum over the real tokens (padding ignored)

Similarity (`similarity`): ``cosine`` (u.v / |u||v|) or ``dot`` (u.v).

Losses (`loss`), each returned per example and weighted by `is_real_example`:

    in_batch   multiple-negatives ranking (Henderson et al. 2017; SBERT's
               MultipleNegativesRankingLoss): a batch of (query, positive)
               pairs; query i's logits are ``scale * sim(u_i, v_j)`` over the
               batch's positives j, the target is j = i: cross-entropy of a
               softmax over the batch. `scale` is 1 / temperature (SBERT uses
               20 with cosine). Padding rows are neither queries nor
               negatives.
    softmax    SBERT's classification objective: logits = W [u; v; |u - v|] + b,
               softmax cross-entropy over `num_labels` (NLI or paraphrase
               labels). W is ``output_weights [num_labels, 3 * hidden]``.
    cosine     regression: ``(cos(u, v) - label)^2`` with a float label (e.g.
               STS scores scaled to [0, 1]); always the cosine, whatever
               `similarity` says.

Features: ``a_input_ids``, ``a_input_mask``, ``a_segment_ids`` (the query or
first text), the same with ``b_`` (the stored question or second text), and
``label_ids`` (int for softmax, float for cosine; absent or ignored for
in_batch), ``is_real_example``. `compute_loss_and_metrics` follows the
trainer's contract: ``(loss, {name: (sum, count)})`` with metrics `loss` and,
for in_batch and softmax, `accuracy` (the right positive ranked first among
the batch's / the right label).

Under a distribution strategy the in-batch negatives are those of the
replica's own batch (no cross-replica gather).

The encoder is the attribute `encoder`, so `modeling.checkpoints
.init_from_checkpoint` loads Google TF1, HF safetensors (e.g.
all-MiniLM-L6-v2) or this project's checkpoints into it.
"""

import keras
import numpy as np
import tensorflow as tf

from modeling import registry
from modeling.layers.encoder_models import EncoderModel

__all__ = ["BiEncoder", "POOLINGS", "SIMILARITIES", "LOSSES", "pool", "pairwise_similarity",
           "similarity_matrix", "in_batch_negatives_loss", "softmax_pair_logits",
           "cosine_regression_loss", "split_features", "FEATURE_NAMES", "CLS_POSITIONS"]

POOLINGS = ("cls", "mean", "max")
SIMILARITIES = ("cosine", "dot")
LOSSES = ("in_batch", "softmax", "cosine")
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
DEFAULT_SCALE = 20.0


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError("%s (--%s) must be one of %s, got %r"
                         % (name, name, ", ".join(choices), value))


CLS_POSITIONS = ("first", "last")


def pool(sequence_output, input_mask, pooling, cls_position="first"):
    """One vector per row of `sequence_output` ``[batch, seq, hidden]`` (float32).

    `input_mask` ``[batch, seq]`` is 1 on real tokens; padding never changes
    "mean" or "max". A row without any real token pools to zeros.
    `cls_position`: where "cls" reads, position 0 ("first") or the last real
    token ("last", padding on either side).
    """
    _check_choice("pooling", pooling, POOLINGS)
    _check_choice("cls_position", cls_position, CLS_POSITIONS)
    sequence_output = tf.cast(sequence_output, tf.float32)
    if pooling == "cls":
        if cls_position == "first":
            return sequence_output[:, 0, :]
        positions = tf.range(tf.shape(input_mask)[1])[None, :]
        last = tf.reduce_max(tf.where(tf.cast(input_mask, tf.bool), positions, 0), axis=1)
        return tf.gather(sequence_output, last, axis=1, batch_dims=1)
    mask = tf.cast(input_mask, tf.float32)[:, :, None]
    if pooling == "mean":
        total = tf.reduce_sum(sequence_output * mask, axis=1)
        count = tf.reduce_sum(mask, axis=1)
        return total / tf.maximum(count, 1.0)
    lowest = tf.constant(np.finfo(np.float32).min, tf.float32)
    masked = tf.where(mask > 0, sequence_output, lowest)
    pooled = tf.reduce_max(masked, axis=1)
    has_tokens = tf.reduce_sum(mask, axis=1) > 0
    return tf.where(has_tokens, pooled, tf.zeros_like(pooled))


def _normalize(x):
    return tf.math.l2_normalize(x, axis=-1, epsilon=1e-12)


def pairwise_similarity(u, v, similarity):
    """``[batch]`` scores of row i of `u` with row i of `v`."""
    _check_choice("similarity", similarity, SIMILARITIES)
    if similarity == "cosine":
        u, v = _normalize(u), _normalize(v)
    return tf.reduce_sum(u * v, axis=-1)


def similarity_matrix(u, v, similarity):
    """``[len(u), len(v)]`` scores of every row of `u` with every row of `v`."""
    _check_choice("similarity", similarity, SIMILARITIES)
    if similarity == "cosine":
        u, v = _normalize(u), _normalize(v)
    return tf.matmul(u, v, transpose_b=True)


def in_batch_negatives_loss(u, v, similarity="cosine", scale=DEFAULT_SCALE, weights=None):
    """Multiple-negatives ranking loss; returns ``(per_example_loss, correct)``.

    Row i of `u` (query) has row i of `v` as its positive and every other row
    of `v` as a negative: cross-entropy of ``softmax_j(scale * sim(u_i, v_j))``
    at j = i. `weights` (``[batch]``, 0 for padding) removes padding rows
    from the negatives (their columns get -inf); their own loss is still
    computed, to be weighted away by the caller. `correct` is 1 where the
    positive scores highest.
    """
    logits = float(scale) * similarity_matrix(u, v, similarity)
    batch = tf.shape(logits)[0]
    if weights is not None:
        real = tf.cast(weights, tf.float32)[None, :] > 0
        keep = tf.logical_or(real, tf.eye(batch, dtype=tf.bool))
        logits = tf.where(keep, logits, tf.constant(-1e9, logits.dtype))
    labels = tf.range(batch)
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                      tf.float32)
    return per_example, correct


def softmax_pair_logits(u, v, output_weights, output_bias):
    """SBERT's classifier input ``[u; v; |u - v|]`` times ``output_weights^T`` plus bias."""
    features = tf.concat([u, v, tf.abs(u - v)], axis=-1)
    return tf.matmul(features, tf.cast(output_weights, features.dtype),
                     transpose_b=True) + tf.cast(output_bias, features.dtype)


def cosine_regression_loss(u, v, labels):
    """``(cos(u_i, v_i) - label_i)^2`` per example; returns ``(per_example_loss, cosines)``."""
    cosines = pairwise_similarity(u, v, "cosine")
    labels = tf.reshape(tf.cast(labels, tf.float32), [-1])
    return tf.square(cosines - labels), cosines


def split_features(features, prefix):
    """``{input_ids, input_mask, segment_ids}`` of the ``a_`` or ``b_`` text of a pair batch."""
    out = {}
    for name in FEATURE_NAMES:
        key = prefix + name
        if key in features:
            out[name] = features[key]
    if "input_ids" not in out:
        raise ValueError("pair features need %sinput_ids; got %s"
                         % (prefix, ", ".join(sorted(features))))
    if "input_mask" not in out:
        out["input_mask"] = tf.ones_like(out["input_ids"])
    if "segment_ids" not in out:
        out["segment_ids"] = tf.zeros_like(out["input_ids"])
    return out


def _stat(total, count):
    return (tf.cast(total, tf.float32), tf.cast(count, tf.float32))


@keras.saving.register_keras_serializable(package="bert_family")
class BiEncoder(EncoderModel, keras.Model):
    """One shared encoder applied to two texts; pooled vectors; a similarity; a loss.

    Args:
        encoder: a BERT-shaped encoder (`bert`, `albert`, ...: called with a
            feature dict, returns `sequence_output`).
        pooling: "cls", "mean" or "max".
        cls_position: where "cls" pooling reads: "first" ([CLS] first) or
            "last" (the last real token: a framing that ends with it, XLNet's).
        similarity: "cosine" or "dot" (the score, and the in-batch logits).
        loss: "in_batch", "softmax" or "cosine".
        scale: multiplies the in-batch similarities (1 / temperature).
        num_labels: labels of the softmax loss (its classifier only exists
            with loss="softmax").
        initializer_range: stddev of the softmax classifier's initialiser.
        **kwargs: Keras `Model` arguments.
    """

    def __init__(self, encoder, pooling="mean", similarity="cosine", loss="in_batch",
                 scale=DEFAULT_SCALE, num_labels=None, initializer_range=None,
                 cls_position="first", **kwargs):
        kwargs.setdefault("name", "bi_encoder")
        super().__init__(**kwargs)
        _check_choice("pooling", pooling, POOLINGS)
        _check_choice("similarity", similarity, SIMILARITIES)
        _check_choice("loss", loss, LOSSES)
        _check_choice("cls_position", cls_position, CLS_POSITIONS)
        if not float(scale) > 0:
            raise ValueError("scale (--scale) must be positive, got %r" % (scale,))
        if loss == "softmax" and (not num_labels or int(num_labels) < 2):
            raise ValueError("loss=softmax needs num_labels >= 2, got %r" % (num_labels,))
        self.encoder = encoder
        self.pooling = pooling
        self.cls_position = cls_position
        self.similarity = similarity
        self.loss_type = loss
        self.scale = float(scale)
        self.num_labels = int(num_labels) if num_labels else None
        self.set_head_rates(initializer_range)
        self.output_weights = self.output_bias = None
        if loss == "softmax":
            self.add_output_weights(self.num_labels, 3 * encoder.hidden_size)
        self.build()

    @classmethod
    def from_config_object(cls, config, family=registry.DEFAULT_FAMILY, dtype=None, **kwargs):
        """A bi-encoder over a fresh encoder of `family` (a registered name) for `config`."""
        model_kwargs = {} if dtype is None else {"dtype": dtype}
        encoder = registry.build_encoder(config, family, **model_kwargs)
        kwargs.setdefault("initializer_range", getattr(config, "initializer_range", 0.02))
        return cls(encoder, **model_kwargs, **kwargs)

    # ------------------------------------------------------------------ call

    def encode(self, features, training=None):
        """Pooled float32 vectors ``[batch, hidden]`` of one text per row."""
        outputs = self.encoder(dict(features), training=training)
        return pool(outputs["sequence_output"], features["input_mask"], self.pooling,
                    self.cls_position)

    def call(self, features, training=None):
        """``u``, ``v`` (pooled vectors of a and b), ``score`` (their similarity);
        ``logits`` and ``probabilities`` with the softmax loss; ``cosine`` always."""
        u = self.encode(split_features(features, "a_"), training=training)
        v = self.encode(split_features(features, "b_"), training=training)
        outputs = {"u": u, "v": v, "score": pairwise_similarity(u, v, self.similarity),
                   "cosine": pairwise_similarity(u, v, "cosine")}
        if self.loss_type == "softmax":
            logits = softmax_pair_logits(u, v, self.output_weights, self.output_bias)
            outputs["logits"] = logits
            outputs["probabilities"] = tf.nn.softmax(logits, axis=-1)
        return outputs

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (see the module docstring)."""
        outputs = self(features, training=training)
        u, v = outputs["u"], outputs["v"]
        batch = tf.shape(u)[0]
        if "is_real_example" in features:
            weights = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])
        else:
            weights = tf.ones([batch], tf.float32)
        metrics = {}
        if self.loss_type == "in_batch":
            per_example, correct = in_batch_negatives_loss(u, v, self.similarity, self.scale,
                                                           weights)
            metrics["accuracy"] = _stat(tf.reduce_sum(weights * correct), tf.reduce_sum(weights))
        elif self.loss_type == "softmax":
            labels = tf.reshape(tf.cast(features["label_ids"], tf.int32), [-1])
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=outputs["logits"])
            correct = tf.cast(tf.equal(tf.argmax(outputs["logits"], axis=-1,
                                                 output_type=tf.int32), labels), tf.float32)
            metrics["accuracy"] = _stat(tf.reduce_sum(weights * correct), tf.reduce_sum(weights))
        else:
            per_example, _ = cosine_regression_loss(u, v, features["label_ids"])
        loss_sum = tf.reduce_sum(weights * per_example)
        weight_sum = tf.reduce_sum(weights)
        metrics["loss"] = _stat(loss_sum, weight_sum)
        return tf.math.divide_no_nan(loss_sum, weight_sum), metrics

    # ---------------------------------------------------------------- config

    def get_config(self):
        return self.encoder_model_config(
            pooling=self.pooling, similarity=self.similarity, loss=self.loss_type,
            scale=self.scale, num_labels=self.num_labels,
            initializer_range=self.initializer_range, cls_position=self.cls_position)
