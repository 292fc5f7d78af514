"""GPT-2 (Radford et al. 2019): config, network, checkpoint names; registers the family.

The family is only additions: the network is the shared pre-LN
`TransformerBlock` with a causal mask, trained by the registered "causal_lm"
objective (`modeling.objectives.causal_lm`) on the "causal_lm" pipeline
(`modeling.recipes.pipelines.causal_lm`), named together by the recipe
`modeling/recipes/presets/gpt2.json`.

    from modeling.gpt2 import GPT2Config, GPT2Network
    network = GPT2Network.from_config_object(GPT2Config.from_preset("gpt2_tiny", 3000))
    modeling.checkpoints.init_from_checkpoint(network, "gpt2/model.safetensors")
"""

from modeling import registry
from modeling.gpt2 import checkpoint_names
from modeling.gpt2.config import GPT2Config
from modeling.gpt2.config import GPT2ConfigError
from modeling.gpt2.config import list_presets
from modeling.gpt2.config import load_gpt2_config
from modeling.gpt2.network import GPT2Embeddings
from modeling.gpt2.network import GPT2Network

__all__ = ["GPT2Config", "GPT2ConfigError", "GPT2Embeddings", "GPT2Network",
           "list_presets", "load_gpt2_config"]


def _demo_config(vocab_size):
    # Two pre-LN blocks of width 128; <|endoftext|> is the last id of the
    # bundled vocabulary (data/sample/gpt2/vocab.json).
    return GPT2Config.from_preset("gpt2_tiny", vocab_size=vocab_size)


registry.encoders.register("gpt2", GPT2Network)
FAMILY = registry.families.register("gpt2", registry.Family(
    name="gpt2",
    config_class=GPT2Config,
    load_config=load_gpt2_config,
    build_encoder=GPT2Network.from_config_object,
    demo_config=_demo_config,
    config_file_name="config.json",
    name_tables={"hf": checkpoint_names.HF},
    head_activation=lambda config: config.hidden_act,
    is_encoder=lambda model: isinstance(model, GPT2Network),
))
