"""XLNet (Yang et al. 2019): config, network, permutation LM; registers the family.

The family package holds every XLNet-specific part and registers them:

    family     "xlnet"            (`XLNetConfig`, `XLNetNetwork`, demo size)
    objective  "permutation_lm"   (`modeling.xlnet.objective`)
    pipeline   "xlnet"            (`modeling.xlnet.pipeline`: SentencePiece,
                                   memory-aligned streams, permutation masks)

named together by the recipe `modeling/recipes/presets/xlnet.json`.
Hugging Face XLNet folders and zihangdai/xlnet's TF1 checkpoints load through
`name_tables={"hf": ..., "google_tf1": ...}` (`modeling.xlnet.checkpoint_names`)
and `hf=` (`modeling.xlnet.hf_format`:
config mapping, `modeling.xlnet.tokenizer.XLNetTokenizer` over `spiece.model`).
Fine-tuning inputs in XLNet's layout (`A <sep> B <sep> <cls>`, left padded)
come from `modeling.xlnet.finetuning`; `modeling.xlnet.classification` registers them as
`run_classifier.py --model_family=xlnet`'s input format.

    from modeling.xlnet import XLNetConfig, XLNetNetwork
    network = XLNetNetwork.from_config_object(XLNetConfig(vocab_size=2000, d_model=64,
                                                          n_layer=2, n_head=2, d_inner=128))
"""

from modeling import registry
from modeling.xlnet import checkpoint_names
from modeling.xlnet import hf_format
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.config import XLNetConfigError
from modeling.xlnet.config import load_xlnet_config
from modeling.xlnet.network import XLNetNetwork
# Registered by import: the objective "permutation_lm" and the pipeline "xlnet".
from modeling.xlnet import objective  # noqa: F401  pylint: disable=unused-import
from modeling.xlnet import pipeline  # noqa: F401  pylint: disable=unused-import

__all__ = ["XLNetConfig", "XLNetConfigError", "XLNetNetwork", "load_xlnet_config"]


def _demo_config(vocab_size):
    # A tiny model for the bundled corpus (~25K SentencePiece tokens): width
    # 64, two layers, a memory of one 32-token segment.
    return XLNetConfig(vocab_size=vocab_size, d_model=64, n_layer=2, n_head=2, d_inner=128,
                       mem_len=32, dropout=0.1)


FAMILY = registry.families.register("xlnet", registry.network_family(
    "xlnet", XLNetNetwork, XLNetConfig, load_xlnet_config, _demo_config, "config.json",
    head_activation=lambda config: config.hidden_act, has_pooler=True,
    name_tables={"hf": checkpoint_names.HF, "google_tf1": checkpoint_names.GOOGLE_TF1},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    hf=hf_format.HF_FORMAT))
# run_classifier's --model_family=xlnet (`A <sep> B <sep> <cls>`, left padded).
from modeling.xlnet import classification  # noqa: E402,F401  pylint: disable=g-import-not-at-top
