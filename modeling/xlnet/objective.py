"""XLNet's permutation language model, registered as the objective "permutation_lm".

Each predicted position (a row of `target_mapping`, the last 1/K of a
factorisation order; `modeling.xlnet.permutation`) is scored from the query
stream of the network at that position, which knows the position but not the
token, and the content of the tokens before it in the order:

    logits[b, m] = query_output[b, m] @ word_embedding^T + lm_bias

The decoder is the network's word embedding table (tied, as in XLNet); the
objective's own weight is the output bias `lm_bias` `[vocab]` (HF's
`lm_loss.bias`).

Features: `target_ids` int `[batch, num_predict]`, `target_weights` float
`[batch, num_predict]` (0 for unused rows) and what the network reads
(`perm_mask`, `target_mapping`, ...).

    loss     = sum(w * CE) / (sum(w) + 1e-5)
    metrics  permutation_lm_loss      (sum w*CE, sum w)   nats per predicted token
             permutation_lm_accuracy  (sum w*correct, sum w)

Baseline: the predicted tokens themselves (`baseline_targets`), so the
generic unigram baseline applies (what a model that ignores context scores
on the same targets); `derived_metrics` gives both perplexities.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import TokenTableObjective
from modeling.objectives.base import tied_logits
from modeling.objectives.base import token_scores

__all__ = ["LMBiasHead", "PermutationLMObjective"]


class LMBiasHead:
    """The permutation LM's one weight seen as a checkpoint head (root "lm").

    Checkpoint name tables find a pretrainer's heads as `objective.head`
    (`modeling.checkpoints.targets.find_head`); this objective's head is
    only its output bias, the decoder being the tied embedding table. A
    plain object, not a layer: Keras neither tracks nor saves it twice.
    """

    def __init__(self, objective):
        self.lm_bias = objective.lm_bias


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PermutationLMObjective(TokenTableObjective):
    """Permutation LM through the attached network's query stream and embedding table.

    Args: `vocab_size`, `loss_weight`, as `TokenTableObjective`.

    Losses: `permutation_lm_loss`. Metrics: `permutation_lm_loss`,
    `permutation_lm_accuracy`. Outputs: `permutation_lm_logits` float32
    `[batch, num_predict, vocab]`.
    """

    _METRIC = "permutation_lm"
    _DEFAULT_NAME = "permutation_lm"
    _PREDICTOR = "the permutation LM"

    def build(self, input_shape=None):
        if self.built:
            return
        self.lm_bias = self.add_weight(name="lm_bias", shape=(self.vocab_size,),
                                       initializer="zeros")

    @property
    def head(self):
        """The checkpoint root "lm" (`LMBiasHead`: HF's `lm_loss.bias` is its `lm_bias`)."""
        return LMBiasHead(self)

    def logits(self, query_output):
        """`query_output @ embedding_table^T + lm_bias` as float32 `[..., vocab]`."""
        if self._network is None:
            raise ValueError("PermutationLMObjective needs the network's embedding table: "
                             "call attach(network) first (the Pretrainer does this).")
        logits = tied_logits(query_output, self._network.value.embedding_table)
        return logits + tf.cast(self.lm_bias, tf.float32)

    def call(self, encoder_outputs, features, training=None):
        if "query_output" not in encoder_outputs:
            raise ValueError("permutation_lm needs the query stream: the features must hold "
                             "perm_mask and target_mapping (the 'xlnet' pipeline's)")
        logits = self.logits(encoder_outputs["query_output"])
        outputs = {"permutation_lm_logits": logits}
        if "target_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        targets = tf.cast(features["target_ids"], tf.int32)
        weights = tf.cast(features["target_weights"], tf.float32)
        losses, metrics = token_scores("permutation_lm", logits, targets, weights)
        return {"losses": losses, "metrics": metrics, "outputs": outputs}

    # ------------------------------------------------------------- baseline

    def baseline_targets(self, features):
        return features["target_ids"][features["target_weights"] > 0]


@registry.objectives.register("permutation_lm")
def _permutation_lm(config, family, **kwargs):
    del family  # the decoder is the network's own table
    return PermutationLMObjective(vocab_size=config.vocab_size, **kwargs)
