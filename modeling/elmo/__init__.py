"""ELMo (Peters et al. 2018): a character-CNN biLM whose layers feed downstream models.

The family package holds every ELMo-specific part and registers them:

    family     "elmo"              (`ElmoConfig` in bilm-tf's options.json names,
                                    `ElmoNetwork`, the demo size)
    objective  "bidirectional_lm"  (`modeling.elmo.objective`: forward and backward
                                    LM losses through one shared softmax)
    pipeline   "elmo"              (`modeling.elmo.pipeline`: sentences of raw text
                                    as word ids and character ids)

named together by the recipe `modeling/recipes/presets/elmo.json`
(`run/run_pretraining.py --recipe=elmo`). `ScalarMix` (`modeling.elmo.scalar_mix`)
is ELMo's feature use: a softmax-weighted, gamma-scaled sum of the network's
`elmo_layers`, trained with a downstream model over the frozen biLM.
`modeling.elmo.bilm_tf` reads (and writes) the original ELMo release,
bilm-tf's `options.json` + `weights.hdf5`, with bilm-tf's outputs:

    network = bilm_tf.from_bilm_tf("elmo_folder/")   # or (options.json, weights.hdf5)

    from modeling.elmo import ElmoConfig, ElmoNetwork, ScalarMix
    network = ElmoNetwork.from_config_object(ElmoConfig(
        vocab_size=2000, filters=[[1, 8], [2, 8], [3, 16]], lstm_dim=64, projection_dim=32))
    outputs = network({"char_ids": char_ids})
    features = ScalarMix(len(outputs["elmo_layers"]))(outputs["elmo_layers"])
"""

from modeling import registry
from modeling.elmo import bilm_tf  # bilm-tf's released files  # noqa: F401
from modeling.elmo import objective  # registers "bidirectional_lm"  # noqa: F401
from modeling.elmo import pipeline  # registers "elmo"  # noqa: F401
from modeling.elmo.config import ElmoConfig
from modeling.elmo.config import ElmoConfigError
from modeling.elmo.config import load_elmo_config
from modeling.elmo.network import CharacterEncoder
from modeling.elmo.network import ElmoNetwork
from modeling.elmo.network import ProjectedLSTM
from modeling.elmo.objective import BidirectionalLMObjective
from modeling.elmo.scalar_mix import ScalarMix

__all__ = ["BidirectionalLMObjective", "CharacterEncoder", "ElmoConfig", "ElmoConfigError",
           "ElmoNetwork", "ProjectedLSTM", "ScalarMix", "bilm_tf", "demo_config",
           "load_elmo_config"]


def demo_config(vocab_size):
    """The demo's biLM: ELMo's shape at toy size (filters 1..7, 2 layers, LSTM 128 -> 64)."""
    return ElmoConfig(vocab_size=vocab_size, char_embedding_dim=16,
                      filters=[[1, 16], [2, 16], [3, 32], [4, 32], [5, 32], [6, 32], [7, 32]],
                      n_highway=1, max_characters_per_token=50, lstm_dim=128,
                      projection_dim=64, n_layers=2, proj_clip=3.0, dropout=0.1)


# run_classifier's --model_family=elmo (frozen biLM features + a task model).
from modeling.elmo import features  # noqa: E402,F401  pylint: disable=g-import-not-at-top
FAMILY = registry.families.register("elmo", registry.network_family(
    "elmo", ElmoNetwork, ElmoConfig, load_elmo_config, demo_config, "elmo_options.json",
    has_pooler=False, frozen_features=True, feature_extractor=features.features_from_files))
