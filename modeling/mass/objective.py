"""MASS's objective: the decoder predicts the masked fragment, registered as "mass".

The encoder saw the sentence with one contiguous fragment replaced by
[MASK]; the decoder, fed the fragment shifted right (its first input a
[MASK]), predicts every token of the fragment (`modeling.mass.pipeline`
builds the features). The loss is the cross-entropy of those predictions
through the network's tied output layer (`MassNetwork.logits`), so the
objective has no weights of its own. The same objective trains the
translation fine-tune (`modeling.mass.translation`), where the "fragment" is
the whole target sentence.

Features (from the pipeline):
    decoder_target_ids      int   [batch, dec]  the fragment's tokens
    decoder_target_weights  float [batch, dec]  1 for a real target, 0 padding

    loss     = sum(w * CE) / (sum(w) + 1e-5)           (as the masked-LM loss)
    metrics  <name>_loss      (sum w*CE, sum w)         nats per predicted token
             <name>_accuracy  (sum w*correct, sum w)

`<name>` is the objective's name ("mass"; "translation" when fine-tuning).
Baseline: the targets themselves (`baseline_targets`), so the generic
unigram baseline is the best a model can do that ignores the sentence;
`derived_metrics` adds both perplexities.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import TokenTableObjective
from modeling.objectives.base import _Ref
from modeling.objectives.base import token_scores

__all__ = ["MassObjective"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MassObjective(TokenTableObjective):
    """Fragment (or target sentence) prediction by the attached `MassNetwork`'s decoder.

    Args: `vocab_size`, `loss_weight`, as `TokenTableObjective`.

    Losses: `<name>_loss`. Metrics: `<name>_loss`, `<name>_accuracy`.
    Outputs: `<name>_logits` float32 `[batch, dec, vocab]`.
    """

    _DEFAULT_NAME = "mass"

    def attach(self, encoder):
        self.check_table(encoder)
        if not hasattr(encoder, "logits"):
            raise ValueError("The %s objective needs an encoder-decoder network with a "
                             "`logits` method (MassNetwork), got %s"
                             % (self.name, type(encoder).__name__))
        self._network = _Ref(encoder)

    def call(self, encoder_outputs, features, training=None):
        if self._network is None:
            raise ValueError("MassObjective needs its network: call attach(network) first "
                             "(the Pretrainer does this).")
        if "decoder_sequence_output" not in encoder_outputs:
            raise ValueError("The %s objective needs the decoder's output: the features "
                             "lack 'decoder_input_ids'." % self.name)
        logits = self._network.value.logits(encoder_outputs["decoder_sequence_output"])
        outputs = {self.name + "_logits": logits}
        if "decoder_target_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        targets = tf.cast(features["decoder_target_ids"], tf.int32)
        weights = tf.cast(features["decoder_target_weights"], tf.float32)
        losses, metrics = token_scores(self.name, logits, targets, weights)
        return {"losses": losses, "metrics": metrics, "outputs": outputs}

    # ------------------------------------------------------------- baseline

    def baseline_targets(self, features):
        return features["decoder_target_ids"][features["decoder_target_weights"] > 0]


@registry.objectives.register("mass")
def _mass(config, family, **kwargs):
    del family  # the output layer is the network's own tied table
    return MassObjective(vocab_size=config.vocab_size, **kwargs)
