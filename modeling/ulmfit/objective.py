"""ULMFiT's objective: a forward word language model through the tied embedding ("word_lm").

    logits[:, t] = sequence_output[:, t] @ E^T + b     scores word t + 1

`E` is the network's embedding matrix (`AwdLstm.embedding_table`, tied as in
the AWD-LSTM: one variable), `b` the objective's own `output_bias` (fastai's
`out_bias`; none when the config says `out_bias: false`). A prediction counts
when both the position and its target are real words (`input_mask`); each
sentence of the "elmo" pipeline is `<S> w_1 .. w_n </S>`, so the model
predicts `w_1 .. </S>`.

    loss     = sum(w * CE) / (sum(w) + 1e-5)
    metrics  word_lm_loss      (sum w*CE, sum w)    nats per predicted word
             word_lm_accuracy  (sum w*correct, sum w)

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
from modeling.objectives.base import _per_example_cross_entropy
from modeling.objectives.base import _stat
from modeling.objectives.base import perplexities
from modeling.objectives.causal_lm import CausalLMObjective
from modeling.objectives.causal_lm import next_token_targets

__all__ = ["WordLMObjective"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WordLMObjective(CausalLMObjective):
    """Next-word prediction through the attached network's embedding matrix plus a bias.

    Args:
        vocab_size: rows of the embedding matrix (checked in `attach`).
        out_bias: whether the softmax has a bias (`output_bias` `[vocab]`).
        loss_weight: see `Objective`.

    Outputs: `<name>_logits` float32 `[batch, words, vocab]` (position t
    scores word t + 1). Losses and metrics: `<name>_loss`, `<name>_accuracy`.
    """

    def __init__(self, vocab_size, out_bias=True, loss_weight=1.0, **kwargs):
        kwargs.setdefault("name", "word_lm")
        self.out_bias = bool(out_bias)
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
        targets, weights = next_token_targets(input_ids, features.get("input_mask"))
        predictions = logits[:, :-1]
        per_token = _per_example_cross_entropy(predictions, targets)
        correct = tf.cast(tf.equal(tf.argmax(predictions, axis=-1, output_type=tf.int32),
                                   targets), tf.float32)
        total = tf.reduce_sum(weights * per_token)
        count = tf.reduce_sum(weights)
        return {
            "losses": {self.name + "_loss": total / (count + 1e-5)},
            "metrics": {
                self.name + "_loss": _stat(total, count),
                self.name + "_accuracy": _stat(tf.reduce_sum(weights * correct), count),
            },
            "outputs": outputs,
        }

    def derived_metrics(self, results):
        return perplexities(results, self.name, self.baseline_kind)

    def get_config(self):
        config = super().get_config()
        config["out_bias"] = self.out_bias
        return config


@registry.objectives.register("word_lm")
def _word_lm(config, family, **kwargs):
    del family  # the decoder is the network's own embedding matrix
    return WordLMObjective(vocab_size=config.vocab_size,
                           out_bias=getattr(config, "out_bias", True), **kwargs)
