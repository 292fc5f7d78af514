"""RoBERTa (Liu et al. 2019): BERT's encoder with RoBERTa's positions; registers the family.

The family is only additions over BERT's parts: `RobertaEncoder`
subclasses `BertEncoder` (position ids counted past the padding id, one
token type, LayerNorm epsilon 1e-5), `RobertaConfig` subclasses
`BertConfig` (with `pad_token_id`/`bos_token_id`/`eos_token_id`), the HF
name table reuses BERT's encoder rows with RoBERTa's `lm_head`, and the
tokenizer is GPT-2's byte-level BPE with RoBERTa's framing. It reads and
writes HF folders of `model_type` "roberta" (`hf_format.HF_FORMAT`).

    from modeling.roberta import RobertaConfig, RobertaEncoder
    encoder = RobertaEncoder.from_config_object(config)
    modeling.checkpoints.init_from_checkpoint(encoder, "roberta-base/")

Not registered (yet): Google TF1 names (RoBERTa was released by fairseq,
and HF's folders are what is published), head pruning (it writes the
pruned model as a Google TF1 checkpoint) and attention maps
(`run/analyze_attention.py` tokenizes with a WordPiece `vocab.txt`, not
RoBERTa's byte-level BPE).
"""

from modeling import registry
from modeling.roberta import checkpoint_names
from modeling.roberta import hf_format
from modeling.roberta.config import RobertaConfig
from modeling.roberta.config import RobertaConfigError
from modeling.roberta.config import load_roberta_config
from modeling.roberta.encoder import RobertaEncoder
from modeling.roberta.encoder import roberta_position_ids
from modeling.roberta.tokenizer import RobertaTokenizer

__all__ = ["RobertaConfig", "RobertaConfigError", "RobertaEncoder", "RobertaTokenizer",
           "load_roberta_config", "roberta_position_ids"]


def _demo_config(vocab_size):
    # The BERT demo's size (2 layers, hidden 64) with RoBERTa's positions:
    # 128 tokens need 130 rows.
    return RobertaConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=256,
                         max_position_embeddings=130)


FAMILY = registry.families.register("roberta", registry.network_family(
    "roberta", RobertaEncoder, RobertaConfig, load_roberta_config, _demo_config, "config.json",
    name_tables={"hf": checkpoint_names.HF, "keras_hub": checkpoint_names.KERAS_HUB},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    # HF's RobertaLMHead applies the exact GELU whatever `hidden_act` says.
    head_activation=lambda config: "gelu",
    hf=hf_format.HF_FORMAT,
))
