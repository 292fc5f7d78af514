"""The causal (left-to-right) language-model objective of GPT/GPT-2, registered as "causal_lm".

Every position predicts the next token: `logits[:, t]` scores `input_ids[:,
t + 1]`, so a window of T tokens gives T - 1 predictions and no masking
scheme is needed (the attention mask keeps each position from seeing its
future; `modeling.gpt2`). The decoder is the network's token embedding table
(tied, as in GPT-2: `logits = h @ wte^T`), so the objective has no weights of
its own.

Padding: a prediction counts only when both the position and its target are
real (`input_mask` 1), so packed windows padded at the end of a file add
nothing. Without `input_mask` every position counts.

    loss     = sum(w * CE) / (sum(w) + 1e-5)         (as the masked-LM loss)
    metrics  causal_lm_loss      (sum w*CE, sum w)   nats per predicted token
             causal_lm_accuracy  (sum w*correct, sum w)

Baseline: the next-token targets themselves (`baseline_targets`), so the
generic unigram baseline applies: its loss is the cross-entropy of the
training tokens' add-one smoothed frequencies, the best a model that ignores
context can do. `derived_metrics` turns both losses into perplexities
(`causal_lm_perplexity`, `unigram_baseline_causal_lm_perplexity`), the
number language-model papers quote.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import TokenTableObjective
from modeling.objectives.base import tied_logits
from modeling.objectives.base import token_scores

__all__ = ["CausalLMObjective", "next_token_targets"]


def next_token_targets(input_ids, input_mask=None):
    """`(targets [batch, seq-1], weights [batch, seq-1] float32)` of a batch.

    Works on tensors and NumPy arrays alike (`baseline_targets` uses it on
    NumPy batches).
    """
    targets = input_ids[:, 1:]
    if input_mask is None:
        weights = tf.ones(tf.shape(targets), tf.float32)
    else:
        mask = tf.cast(input_mask, tf.float32)
        weights = mask[:, 1:] * mask[:, :-1]
    return targets, weights


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CausalLMObjective(TokenTableObjective):
    """Next-token prediction through the attached network's embedding table.

    Args: `vocab_size`, `loss_weight`, as `TokenTableObjective`.

    Losses: `causal_lm_loss`. Metrics: `causal_lm_loss`,
    `causal_lm_accuracy`. Outputs: `causal_lm_logits` float32
    `[batch, seq, vocab]` (position t scores token t + 1).
    """

    _METRIC = "causal_lm"
    _DEFAULT_NAME = "causal_lm"
    _PREDICTOR = "the causal LM"

    def logits(self, sequence_output):
        """`sequence_output @ embedding_table^T` as float32 `[..., vocab]`."""
        if self._network is None:
            raise ValueError("CausalLMObjective needs the network's embedding table: call "
                             "attach(network) first (the Pretrainer does this).")
        return tied_logits(sequence_output, self._network.value.embedding_table)

    def call(self, encoder_outputs, features, training=None):
        logits = self.logits(encoder_outputs["sequence_output"])
        outputs = {"causal_lm_logits": logits}
        if "input_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        input_ids = tf.cast(features["input_ids"], tf.int32)
        targets, weights = next_token_targets(input_ids, features.get("input_mask"))
        losses, metrics = token_scores("causal_lm", logits[:, :-1], targets, weights)
        return {"losses": losses, "metrics": metrics, "outputs": outputs}

    # ------------------------------------------------------------- baseline

    def baseline_targets(self, features):
        ids = features["input_ids"]
        mask = features.get("input_mask")
        if mask is None:
            return ids[:, 1:].reshape(-1)
        keep = (mask[:, 1:] > 0) & (mask[:, :-1] > 0)
        return ids[:, 1:][keep]


@registry.objectives.register("causal_lm")
def _causal_lm(config, family, **kwargs):
    del family  # the decoder is the network's own table: nothing family-specific
    return CausalLMObjective(vocab_size=config.vocab_size, **kwargs)
