"""ELMo's objective: a forward and a backward LM through one softmax ("bidirectional_lm").

    forward:   h_fwd[t] (words 0..t)      predicts word t + 1
    backward:  h_bwd[t] (words t..end)    predicts word t - 1
    p(word | h) = softmax(h W^T + b)      ONE (W, b) for both directions

(Peters et al. 2018, eq. 2: the token representation and the softmax are
shared by the two directions, the LSTMs are not.) `W` is `[vocab,
projection_dim]`. A prediction counts when both the position and its target
are real words (`input_mask`); each sentence is `<S> w_1 .. w_n </S>`, so
the forward LM predicts `w_1 .. </S>` and the backward LM `<S> .. w_n`.

    loss     = sum over both directions of w * CE / (their count + 1e-5)
               (the mean of the two directions' losses: they count the same
               predictions)
    metrics  <name>_loss            (sum w*CE, sum w)  both directions
             <name>_accuracy        (sum w*correct, sum w)
             <name>_forward_loss, <name>_backward_loss

In training, `dropout` (the options file's, as bilm-tf) is applied to each
direction's top-layer outputs before the softmax, as bilm-tf's
`lstm_output_flat = tf.nn.dropout(...)`; the network's outputs (what ELMo's
features read) are the undropped ones.

With `n_negative_samples` > 0 training uses a sampled softmax (that many
negative words per batch, log-uniform by frequency rank: the vocabulary is
sorted by count) on the same `W`, `b`; evaluation always uses the full
softmax, so losses are comparable. Baseline: the targets of both
directions, so the unigram baseline's cross-entropy is that of the
training words' add-one smoothed frequencies on the held-out targets.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import PerplexityObjective
from modeling.objectives.base import _per_example_cross_entropy
from modeling.objectives.base import _stat

__all__ = ["BidirectionalLMObjective", "direction_targets"]


def direction_targets(input_ids, input_mask=None):
    """`(forward targets, backward targets, weights)`, each `[batch, words - 1]`.

    The forward LM at position t predicts `forward[:, t]` = word t + 1; the
    backward LM at position t + 1 predicts `backward[:, t]` = word t; the
    weight is 1 when both words are real. Works on tensors and NumPy arrays.
    """
    forward, backward = input_ids[:, 1:], input_ids[:, :-1]
    if input_mask is None:
        weights = tf.ones(tf.shape(forward), tf.float32)
    else:
        mask = tf.cast(input_mask, tf.float32)
        weights = mask[:, 1:] * mask[:, :-1]
    return forward, backward, weights


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BidirectionalLMObjective(PerplexityObjective):
    """Forward and backward next-word prediction with one shared softmax.

    Args:
        vocab_size: words of the softmax.
        projection_dim: width of each direction's top layer.
        n_negative_samples: 0 for the full softmax; else sampled softmax in training.
        dropout: dropout on the top-layer outputs before the softmax (training only).
        loss_weight: see `Objective`.

    Weights: `softmax_weights` `[vocab, projection_dim]`, `softmax_bias` `[vocab]`.
    Outputs: `<name>_forward_logits`, `<name>_backward_logits` float32
    `[batch, words, vocab]` (position t scores word t + 1, resp. t - 1).
    """

    def __init__(self, vocab_size, projection_dim, n_negative_samples=0, dropout=0.0,
                 loss_weight=1.0, **kwargs):
        kwargs.setdefault("name", "bidirectional_lm")
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.vocab_size = int(vocab_size)
        self.projection_dim = int(projection_dim)
        self.n_negative_samples = int(n_negative_samples)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError("dropout must be in [0, 1), got %r" % (dropout,))
        self.dropout = float(dropout)
        self.output_dropout = keras.layers.Dropout(self.dropout, name="output_dropout")
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.softmax_weights = self.add_weight(
            name="softmax_weights", shape=(self.vocab_size, self.projection_dim),
            initializer=keras.initializers.RandomNormal(
                stddev=1.0 / self.projection_dim ** 0.5))
        self.softmax_bias = self.add_weight(name="softmax_bias", shape=(self.vocab_size,),
                                            initializer="zeros")
        self.built = True

    def logits(self, hidden):
        """`hidden @ W^T + b` as float32 `[..., vocab]` (either direction)."""
        hidden = tf.cast(hidden, tf.float32)
        flat = tf.reshape(hidden, [-1, self.projection_dim])
        logits = tf.matmul(flat, tf.cast(self.softmax_weights, tf.float32), transpose_b=True)
        logits += tf.cast(self.softmax_bias, tf.float32)
        return tf.reshape(logits, tf.concat([tf.shape(hidden)[:-1], [self.vocab_size]], 0))

    def _sampled(self, hidden, targets):
        hidden = tf.reshape(tf.cast(hidden, tf.float32), [-1, self.projection_dim])
        labels = tf.reshape(tf.cast(targets, tf.int64), [-1, 1])
        per_token = tf.nn.sampled_softmax_loss(
            weights=tf.cast(self.softmax_weights, tf.float32),
            biases=tf.cast(self.softmax_bias, tf.float32), labels=labels, inputs=hidden,
            num_sampled=self.n_negative_samples, num_classes=self.vocab_size,
            remove_accidental_hits=True)
        return tf.reshape(per_token, tf.shape(targets))

    def call(self, encoder_outputs, features, training=None):
        if "forward_outputs" not in encoder_outputs or "backward_outputs" not in encoder_outputs:
            raise ValueError("The %s objective needs a bidirectional LM's 'forward_outputs' and "
                             "'backward_outputs' (ElmoNetwork)" % self.name)
        forward_hidden = encoder_outputs["forward_outputs"][-1]
        backward_hidden = encoder_outputs["backward_outputs"][-1]
        if training and self.dropout > 0:  # bilm-tf: dropout on the LSTM outputs
            forward_hidden = self.output_dropout(forward_hidden, training=True)
            backward_hidden = self.output_dropout(backward_hidden, training=True)
        sampled = bool(training) and self.n_negative_samples > 0
        outputs = {}
        if not sampled:
            forward_logits = self.logits(forward_hidden)
            backward_logits = self.logits(backward_hidden)
            outputs = {self.name + "_forward_logits": forward_logits,
                       self.name + "_backward_logits": backward_logits}
        if "input_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        input_ids = tf.cast(features["input_ids"], tf.int32)
        forward_targets, backward_targets, weights = direction_targets(
            input_ids, features.get("input_mask"))
        metrics = {}
        totals, corrects = [], []
        for direction, targets, hidden, logits in (
                ("forward", forward_targets, forward_hidden[:, :-1],
                 None if sampled else forward_logits[:, :-1]),
                ("backward", backward_targets, backward_hidden[:, 1:],
                 None if sampled else backward_logits[:, 1:])):
            if sampled:
                per_token = self._sampled(hidden, targets)
                correct = tf.zeros_like(per_token)
            else:
                per_token = _per_example_cross_entropy(logits, targets)
                correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32),
                                           targets), tf.float32)
            total = tf.reduce_sum(weights * per_token)
            metrics["%s_%s_loss" % (self.name, direction)] = _stat(total, tf.reduce_sum(weights))
            totals.append(total)
            corrects.append(tf.reduce_sum(weights * correct))
        count = 2.0 * tf.reduce_sum(weights)
        total = totals[0] + totals[1]
        metrics[self.name + "_loss"] = _stat(total, count)
        if not sampled:
            metrics[self.name + "_accuracy"] = _stat(corrects[0] + corrects[1], count)
        return {"losses": {self.name + "_loss": total / (count + 1e-5)},
                "metrics": metrics, "outputs": outputs}

    # ------------------------------------------------------------- baseline

    def baseline_targets(self, features):
        ids = features["input_ids"]
        mask = features.get("input_mask")
        if mask is None:
            keep = ids[:, 1:] == ids[:, 1:]
        else:
            keep = (mask[:, 1:] > 0) & (mask[:, :-1] > 0)
        return ids[:, 1:][keep].tolist() + ids[:, :-1][keep].tolist()

    def get_config(self):
        config = super().get_config()
        config.update(projection_dim=self.projection_dim,
                      n_negative_samples=self.n_negative_samples, dropout=self.dropout)
        return config


@registry.objectives.register("bidirectional_lm")
def _bidirectional_lm(config, family, **kwargs):
    del family
    return BidirectionalLMObjective(
        vocab_size=config.vocab_size, projection_dim=config.projection_dim,
        n_negative_samples=getattr(config, "n_negative_samples_batch", 0),
        dropout=getattr(config, "dropout", 0.0), **kwargs)
