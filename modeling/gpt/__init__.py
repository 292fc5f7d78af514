"""GPT (Radford et al. 2018): config, network, checkpoint names; registers the family "gpt".

GPT is GPT-2's stack with post-LN blocks and no final LayerNorm
(`modeling.gpt.network`), so the family is only additions: it is trained by
the registered "causal_lm" objective on the "causal_lm" pipeline, named
together by the recipe `modeling/recipes/presets/gpt.json`, and fine-tuned
with the paper's input transformations through `run/run_classifier.py
--model_family=gpt` (`modeling.gpt.classification`).

    from modeling.gpt import GPTConfig, GPTNetwork
    network = GPTNetwork.from_config_object(GPTConfig.from_preset("gpt_tiny", 3000))
    modeling.checkpoints.init_from_checkpoint(network, "openai-gpt/model.safetensors")

The recipe's tokenizer is the byte-level BPE of the "causal_lm" pipeline
(`data/sample/gpt2/vocab.json`, `merges.txt` for the bundled corpus). GPT's
own release used a different BPE (ftfy + spaCy pre-tokenization,
lower-cased, `</w>` word ends, a 40,478-token vocabulary); its weights load
(`config.json` + `model.safetensors`), and its text goes through that BPE as
HF reads it (`data.tokenizers.gpt_bpe`, `modeling.gpt.hf_format`).
"""

from modeling import registry
from modeling.serving import generation
from modeling.gpt import checkpoint_names
from modeling.gpt import hf_format
from modeling.gpt.config import GPTConfig
from modeling.gpt.config import GPTConfigError
from modeling.gpt.config import list_presets
from modeling.gpt.config import load_gpt_config
from modeling.gpt.network import GPTNetwork

__all__ = ["GPTConfig", "GPTConfigError", "GPTNetwork", "list_presets", "load_gpt_config"]


def _demo_config(vocab_size):
    # GPT-2's demo shape (`modeling.gpt2._demo_config`): the bundled corpus
    # (~13K training tokens) is memorised by anything bigger, and a causal
    # LM predicts every token at every step. Width 32, one layer, dropout
    # 0.3 (0.1 on attention); 128 positions. The demo's step count (400, in
    # presets/gpt.json) was chosen on a validation split cut from the
    # *training* documents (every tenth of them), windows of 32, batch 32,
    # learning rate 1e-3: 400 steps 6.13 nats against the unigram 6.88, 800
    # steps 6.46, 1500 steps 6.99 (memorised: above the baseline).
    return GPTConfig(vocab_size=vocab_size, n_positions=128, n_embd=32, n_layer=1, n_head=2,
                     resid_pdrop=0.3, embd_pdrop=0.3, attn_pdrop=0.1)


FAMILY = registry.families.register("gpt", registry.network_family(
    "gpt", GPTNetwork, GPTConfig, load_gpt_config, _demo_config, "config.json",
    name_tables={"hf": checkpoint_names.HF}, head_activation=lambda config: config.hidden_act,
    has_pooler=False, hf=hf_format.HF_FORMAT, presets=list_presets))
# run/generate.py --recipe=gpt: the causal LM continues each prompt.
registry.decoders.register("gpt", generation.causal_lm_decoder("gpt"))
# run_classifier's --model_family=gpt: the paper's input transformations, `GPTClassifier`.
from modeling.gpt import classification  # noqa: E402,F401  pylint: disable=g-import-not-at-top
