"""CoVe (McCann et al. 2017): contextual word vectors from a translation encoder.

The family package holds every CoVe-specific part and registers them:

    family     "cove"         (`CoveConfig`, `CoveNetwork`: a two-layer BiLSTM
                               encoder over word vectors and an attentional
                               LSTM decoder, the demo size)
    objective  "translation"  (`modeling.cove.objective`: the next target word,
                               teacher forced)
    pipeline   "cove"         (`modeling.cove.pipeline`: `source<TAB>target`
                               lines as word ids of one word vocabulary)

named together by the recipe `modeling/recipes/presets/cove.json`
(`run/run_pretraining.py --recipe=cove`: English -> Chinese on the bundled
`data/sample/parallel_en_zh.tsv`). CoVe's feature use is
`CoveNetwork.features()`: `[word vectors ; encoder outputs]` per word, the
input of a downstream model over the frozen encoder
(`modeling.cove.classification`: `run_classifier.py --model_family=cove`).

    from modeling.cove import CoveConfig, CoveNetwork
    network = CoveNetwork.from_config_object(CoveConfig(vocab_size=2275, embedding_size=64,
                                                        hidden_size=64))
    vectors = network.features(input_ids, input_mask)   # [batch, words, 64 + 128]
"""

from modeling import registry
from modeling.cove import objective  # registers "translation"  # noqa: F401
from modeling.cove import pipeline  # registers "cove"  # noqa: F401
from modeling.cove.config import CONFIG_FILE_NAME
from modeling.cove.config import CoveConfig
from modeling.cove.config import CoveConfigError
from modeling.cove.config import load_cove_config
from modeling.cove.network import CoveNetwork
from modeling.cove.objective import TranslationObjective

__all__ = ["CoveConfig", "CoveConfigError", "CoveNetwork", "TranslationObjective",
           "demo_config", "load_cove_config"]


def demo_config(vocab_size):
    """The demo's translation model: CoVe's shape at toy size (2 x BiLSTM 128, decoder 2 x 128)."""
    return CoveConfig(vocab_size=vocab_size, target_vocab_size=vocab_size, embedding_size=64,
                      hidden_size=128, num_encoder_layers=2, num_decoder_layers=2, dropout=0.1)


# run_classifier's --model_family=cove (frozen CoVe features + a task model).
from modeling.cove import classification  # noqa: E402,F401  pylint: disable=g-import-not-at-top
FAMILY = registry.families.register("cove", registry.network_family(
    "cove", CoveNetwork, CoveConfig, load_cove_config, demo_config, CONFIG_FILE_NAME,
    has_pooler=False, frozen_features=True))
