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
from modeling.serving import generation
from modeling.gpt2 import checkpoint_names
from modeling.gpt2 import hf_format
from modeling.gpt2.config import GPT2Config
from modeling.gpt2.config import GPT2ConfigError
from modeling.gpt2.config import list_presets
from modeling.gpt2.config import load_gpt2_config
from modeling.gpt2.network import GPT2Embeddings
from modeling.gpt2.network import GPT2Network

__all__ = ["GPT2Config", "GPT2ConfigError", "GPT2Embeddings", "GPT2Network",
           "list_presets", "load_gpt2_config"]


def _demo_config(vocab_size):
    # The bundled corpus has ~13K training tokens, and a causal LM predicts
    # every one of them at every step, so the demo's 2,000 steps are ~150
    # epochs: bigger models memorise it and their held-out loss climbs above
    # the unigram baseline's. Of three shapes trained for 1,500 steps on a
    # validation split cut from the *training* documents (2x128 with dropout
    # 0.5 / 0.1 attention: 8.95 nats against the unigram 6.88; 2x64 with
    # dropout 0.3: 7.92; 1x32 with dropout 0.3 / 0.1 attention: 6.78), the
    # smallest was the only one below the baseline, so it is the demo's.
    # <|endoftext|> is the last id of the bundled vocabulary.
    return GPT2Config(vocab_size=vocab_size, n_positions=128, n_embd=32, n_layer=1,
                      n_head=2, resid_pdrop=0.3, embd_pdrop=0.3, attn_pdrop=0.1)


FAMILY = registry.families.register("gpt2", registry.network_family(
    "gpt2", GPT2Network, GPT2Config, load_gpt2_config, _demo_config, "config.json",
    name_tables={"hf": checkpoint_names.HF, "keras_hub": checkpoint_names.KERAS_HUB}, head_activation=lambda config: config.hidden_act,
    # GPT's network (`modeling.gpt`) is a GPT2Network subclass of its own family.
    is_encoder=lambda model: isinstance(model, GPT2Network) and model.family_name == "gpt2",
    has_pooler=False, hf=hf_format.HF_FORMAT, presets=list_presets))
# run/generate.py --recipe=gpt2: the causal LM continues each prompt.
registry.decoders.register("gpt2", generation.causal_lm_decoder("gpt2"))
# run_classifier's GPT-2 folders: HF's GPT2ForSequenceClassification, `GPT2Classifier`.
from modeling.gpt2 import classification  # noqa: E402,F401  pylint: disable=g-import-not-at-top
