"""CoVe's objective: next target word, teacher forced ("translation").

The network's decoder has read the target sentence `<S> y_1 .. y_n </S>` (its
`target_ids`) and scores at position t the word t + 1 (`decoder_logits`).
A prediction counts when its target word is real (`target_mask`; padding is
at the end, so its input word is real too):

    loss     = sum w * CE / (sum w + 1e-5)
    metrics  <name>_loss       (sum w*CE, sum w)      nats per target word
             <name>_accuracy   (sum w*correct, sum w)

Baseline: the unigram model of the training targets (`y_1 .. </S>`, add-one
smoothed over the target vocabulary), scored on the held-out targets: what a
"translation" that ignores both the source and the target prefix gets.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.objectives.base import PerplexityObjective
from modeling.objectives.base import token_scores
from modeling.objectives.causal_lm import next_token_targets

__all__ = ["TranslationObjective"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TranslationObjective(PerplexityObjective):
    """Teacher-forced target-word cross-entropy of an encoder-decoder (`CoveNetwork`).

    Args:
        target_vocab_size: words of the decoder's softmax (for the baseline).
        loss_weight: see `Objective`.
    """

    _VOCAB = "target_vocab_size"

    def __init__(self, target_vocab_size, loss_weight=1.0, **kwargs):
        kwargs.setdefault("name", "translation")
        super().__init__(loss_weight=loss_weight, **kwargs)
        self.target_vocab_size = int(target_vocab_size)
        self.build()

    def build(self, input_shape=None):
        self.built = True

    def call(self, encoder_outputs, features, training=None):
        del training
        if "decoder_logits" not in encoder_outputs:
            raise ValueError("The %s objective needs the network's 'decoder_logits' (a "
                             "CoveNetwork given 'target_ids')" % self.name)
        logits = encoder_outputs["decoder_logits"]
        outputs = {self.name + "_logits": logits}
        if "target_ids" not in features:
            return {"losses": {}, "metrics": {}, "outputs": outputs}
        target_ids = tf.cast(features["target_ids"], tf.int32)
        # Position t predicts target word t + 1 when both are real.
        targets, weights = next_token_targets(target_ids, features.get("target_mask"))
        losses, metrics = token_scores(self.name, logits[:, :-1], targets, weights)
        return {"losses": losses, "metrics": metrics, "outputs": outputs}

    # ------------------------------------------------------------- baseline

    def baseline_targets(self, features):
        ids = features["target_ids"]
        mask = features.get("target_mask")
        if mask is None:
            return ids[:, 1:].reshape(-1).tolist()
        keep = (mask[:, 1:] > 0) & (mask[:, :-1] > 0)
        return ids[:, 1:][keep].tolist()


@registry.objectives.register("translation")
def _translation(config, family, **kwargs):
    del family
    return TranslationObjective(target_vocab_size=config.target_vocab_size, **kwargs)
