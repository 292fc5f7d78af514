"""MASS (Song et al. 2019): masked sequence-to-sequence pre-training; registers the family.

The family is only additions on the shared parts: the network
(`modeling.mass.network.MassNetwork`) is BERT's post-LN blocks as an
encoder and the library's `TransformerDecoderBlock` (a cross-attention
half between BERT's two) as a decoder over one shared embedding layer; the
"mass" objective (`modeling.mass.objective`) and the "mass" pipeline
(`modeling.mass.pipeline`: raw text in `tf.data`, one masked fragment per
sentence) register from here, and the recipe
`modeling/recipes/presets/mass.json` names the three.

After pre-training, `modeling.mass.translation` fine-tunes the model as a
translator on parallel text (`run/run_translation.py`), decoding with
`modeling.mass.decoding` (greedy or beam search) and scoring with
`modeling.mass.bleu` (corpus BLEU by sacreBLEU).

    from modeling.mass import MassConfig, MassNetwork
    network = MassNetwork.from_config_object(MassConfig(vocab_size=2577, hidden_size=64,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=256))
"""

from modeling import registry
from modeling.mass import objective  # registers "mass"  # pylint: disable=unused-import
from modeling.mass import pipeline  # registers "mass"  # pylint: disable=unused-import
from modeling.mass.config import MassConfig
from modeling.mass.config import MassConfigError
from modeling.mass.config import load_mass_config
from modeling.mass.network import MassNetwork
from modeling.mass.objective import MassObjective

__all__ = ["MassConfig", "MassConfigError", "MassNetwork", "MassObjective",
           "load_mass_config"]


def _demo_config(vocab_size):
    # BERT's demo width (64, 2 heads) with one encoder and one decoder block:
    # the bundled corpus has ~1,000 sentences, and every sentence is one
    # example of the objective.
    return MassConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=1,
                      num_decoder_layers=1, num_attention_heads=2, intermediate_size=256,
                      max_position_embeddings=128, type_vocab_size=2)


FAMILY = registry.families.register("mass", registry.network_family(
    "mass", MassNetwork, MassConfig, load_mass_config, _demo_config, "mass_config.json",
    has_pooler=False))
