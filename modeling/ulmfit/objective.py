"""ULMFiT's objective: a forward word language model through the tied embedding ("word_lm").

    logits[:, t] = sequence_output[:, t] @ E^T + b     scores word t + 1

`E` is the network's embedding matrix (`AwdLstm.embedding_table`, tied as in
the AWD-LSTM: one variable), `b` the objective's own `output_bias` (fastai's
`out_bias`; none when the config says `out_bias: false`).

Targets: rows of the "ulmfit" pipeline's BPTT streams carry their own
`target_ids` (the stream's next word at every position), and every real
position (`input_mask`) is scored. Without `target_ids` (one sentence per
example, `<S> w_1 .. w_n </S>`) position t predicts word t + 1, counted when
both are real words, so the model predicts `w_1 .. </S>`.

    loss     = sum(w * CE) / (sum(w) + 1e-5)
               + alpha * AR + beta * TAR                  (training only)
    metrics  word_lm_loss      (sum w*CE, sum w)    nats per predicted word
             word_lm_accuracy  (sum w*correct, sum w)
             word_lm_ar        (alpha * AR, 1)      training only, when alpha > 0
             word_lm_tar       (beta * TAR, 1)      training only, when beta > 0

AWD-LSTM's activation regularisation (Merity et al. 2017, section 4.6):

    AR  = mean of sequence_output ** 2          the last layer's output after
                                                the output dropout (what the
                                                softmax reads)
    TAR = mean of (h_t+1 - h_t) ** 2            h = layers[-1], the last
                                                layer's output before dropout

means over the real positions (and consecutive pairs of them) and the
features, as `dropped_rnn_hs[-1].pow(2).mean()` and
`(rnn_hs[-1][1:] - rnn_hs[-1][:-1]).pow(2).mean()` in the authors' code.
The recipe sets the paper's alpha 2, beta 1 (`objective_options`); the
objective's own defaults are 0 (SiATL's auxiliary LM loss has neither).

Baseline: the next-word targets (`baseline_targets`), so the unigram
baseline (`unigram_baseline_word_lm_loss`) is the cross-entropy of the
training words' add-one smoothed frequencies on the held-out targets;
`derived_metrics` adds both perplexities. It is GPT's `causal_lm` objective
with the output bias and its own name.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import _stat
from modeling.objectives.base import token_scores
from modeling.objectives.causal_lm import CausalLMObjective
from modeling.objectives.causal_lm import next_token_targets

__all__ = ["WordLMObjective", "activation_regularization",
           "temporal_activation_regularization"]


def activation_regularization(outputs, input_mask):
    """AR: the mean of `outputs ** 2` over the real positions and the features (float32).

    Args:
        outputs: `[batch, time, dim]`.
        input_mask: `[batch, time]`, 1 for a real position.
    """
    outputs = tf.cast(outputs, tf.float32)
    mask = tf.cast(input_mask, tf.float32)
    count = tf.reduce_sum(mask) * tf.cast(tf.shape(outputs)[-1], tf.float32)
    return tf.reduce_sum(tf.square(outputs) * mask[:, :, None]) / tf.maximum(count, 1.0)


def temporal_activation_regularization(outputs, input_mask):
    """TAR: the mean of `(outputs[:, t + 1] - outputs[:, t]) ** 2` over pairs of real positions.

    Args: as `activation_regularization`.
    """
    outputs = tf.cast(outputs, tf.float32)
    mask = tf.cast(input_mask, tf.float32)
    pairs = mask[:, 1:] * mask[:, :-1]
    count = tf.reduce_sum(pairs) * tf.cast(tf.shape(outputs)[-1], tf.float32)
    steps = tf.square(outputs[:, 1:] - outputs[:, :-1])
    return tf.reduce_sum(steps * pairs[:, :, None]) / tf.maximum(count, 1.0)


def _coefficient(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError("word_lm: %s must be a number >= 0, got %r" % (name, value))
    return float(value)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WordLMObjective(CausalLMObjective):
    """Next-word prediction through the attached network's embedding matrix plus a bias.

    Args:
        vocab_size: rows of the embedding matrix (checked in `attach`).
        out_bias: whether the softmax has a bias (`output_bias` `[vocab]`).
        alpha: weight of AR in training (AWD-LSTM: 2; 0 = none).
        beta: weight of TAR in training (AWD-LSTM: 1; 0 = none).
        loss_weight: see `Objective`.

    Outputs: `<name>_logits` float32 `[batch, words, vocab]` (position t
    scores word t + 1). Losses and metrics: `<name>_loss`, `<name>_accuracy`,
    and in training `<name>_ar`, `<name>_tar` (module docstring).
    """

    _METRIC = None  # its metrics carry its name (`word_lm_loss`)

    def __init__(self, vocab_size, out_bias=True, alpha=0.0, beta=0.0, loss_weight=1.0,
                 **kwargs):
        kwargs.setdefault("name", "word_lm")
        self.out_bias = bool(out_bias)
        self.alpha = _coefficient("alpha", alpha)
        self.beta = _coefficient("beta", beta)
        super().__init__(vocab_size=vocab_size, loss_weight=loss_weight, **kwargs)

    def build(self, input_shape=None):
        if self.built:
            return
        self.output_bias = None
        if self.out_bias:
            self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                               initializer="zeros")
        self.built = True

    def logits(self, sequence_output):
        logits = super().logits(sequence_output)
        if self.output_bias is not None:
            logits += tf.cast(self.output_bias, tf.float32)
        return logits

    def call(self, encoder_outputs, features, training=None):
        logits = self.logits(encoder_outputs["sequence_output"])
        outputs = {self.name + "_logits": logits}
        if "input_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        input_ids = tf.cast(features["input_ids"], tf.int32)
        input_mask = features.get("input_mask")
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if "target_ids" in features:  # a BPTT stream row: its own next words
            targets = tf.cast(features["target_ids"], tf.int32)
            weights = tf.cast(input_mask, tf.float32)
            predictions = logits
        else:
            targets, weights = next_token_targets(input_ids, input_mask)
            predictions = logits[:, :-1]
        losses, metrics = token_scores(self.name, predictions, targets, weights)
        if training:
            terms = ((self.alpha, "_ar", activation_regularization,
                      encoder_outputs["sequence_output"]),
                     (self.beta, "_tar", temporal_activation_regularization,
                      encoder_outputs["layers"][-1] if "layers" in encoder_outputs else None))
            for weight, suffix, regularizer, hidden in terms:
                if weight and hidden is not None:
                    term = weight * regularizer(hidden, input_mask)
                    losses[self.name + suffix] = term
                    metrics[self.name + suffix] = _stat(term, 1.0)
        return {"losses": losses, "metrics": metrics, "outputs": outputs}

    def baseline_targets(self, features):
        if "target_ids" not in features:
            return super().baseline_targets(features)
        mask = features.get("input_mask")
        targets = features["target_ids"]
        return targets.reshape(-1) if mask is None else targets[mask > 0]

    def get_config(self):
        config = super().get_config()
        config.update(out_bias=self.out_bias, alpha=self.alpha, beta=self.beta)
        return config


@registry.objectives.register("word_lm")
def _word_lm(config, family, alpha=0.0, beta=0.0, **kwargs):
    """Recipe options (`objective_options`): `alpha` (AR) and `beta` (TAR)."""
    del family  # the decoder is the network's own embedding matrix
    return WordLMObjective(vocab_size=config.vocab_size,
                           out_bias=getattr(config, "out_bias", True), alpha=alpha, beta=beta,
                           **kwargs)
