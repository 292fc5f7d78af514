"""XLNet's Hugging Face folder format: `model_type` "xlnet", its config and tokenizer.

`XLNetConfig` is HF's `config.json` already (`modeling.xlnet.config`), so
the mapping is nearly the identity. Two things differ:

* `untie_r`: HF's `XLNetModel` has its own u/v/segment biases in every
  layer whatever the file says (the flag only matters to HF's TF-checkpoint
  converter), so an HF folder is read as `untie_r=True`, the network that
  computes what HF's does; the value is written back as True.
* `mem_len` 0 (no memory) is HF's `null`, and written explicitly: HF's
  default is 512.

Which of HF's call options the project's `XLNetNetwork` call is (the
encoder path, no permutation): `attn_type="bi"` and `same_length=False`
(the config refuses others), `bi_data` and `clamp_len` as in the config,
`mems=None` (the network's own memory starts empty, masked out), no
`perm_mask` and no `target_mapping` (no query stream). Inputs: HF's
`input_ids` -> `input_ids`, `token_type_ids` -> `segment_ids` (any ids:
only "same segment or not" matters, so `<cls>`'s 2 and padding's 3 work),
`attention_mask` (1 = real) -> `input_mask` (the same convention; HF's own
`input_mask` is its complement). Outputs at real positions equal HF's
`last_hidden_state`; a padded position attends to nothing here but to
itself in HF, so padded rows differ (and are never read).

The tokenizer is `modeling.xlnet.tokenizer.XLNetTokenizer` over
`spiece.model` with `AutoTokenizer`'s (fast) ids.
"""

from modeling.pretrained.formats import HFFormat
from modeling.pretrained.tokenizers import tokenizer_config
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.tokenizer import XLNetTokenizer

__all__ = ["HF_FORMAT", "config_from_hf", "config_to_hf", "read_tokenizer"]


def config_from_hf(values):
    """An `XLNetConfig` from HF's parsed `config.json` (an `XLNetConfigError` on bad values)."""
    if isinstance(values, dict):
        values = dict(values, untie_r=True)  # HF's XLNetModel always has per-layer biases.
    return XLNetConfig.SCHEMA.build(values, XLNetConfig.from_dict, XLNetConfig.ERROR)


def config_to_hf(config, model_type="xlnet"):
    """HF's `config.json` content for an `XLNetConfig`."""
    values = config.to_dict()
    values.pop("architectures", None)
    values["model_type"] = model_type
    values["untie_r"] = True
    values["mem_len"] = config.mem_len or None
    values["d_head"] = config.d_head
    values.setdefault("attn_type", "bi")
    values.setdefault("same_length", False)
    values.setdefault("pad_token_id", 5)
    values.setdefault("bos_token_id", 1)
    values.setdefault("eos_token_id", 2)
    return values


def read_tokenizer(folder, config=None):
    del config  # the folder's spiece.model and settings are the whole tokenizer
    tokenizer = XLNetTokenizer.from_folder(folder)
    # HF's XLNet tokenizers pad on the left, with token type 3 (the `<cls>`
    # summary stays at the last position); a folder's settings may say otherwise.
    tokenizer.padding_side = tokenizer_config(folder).get("padding_side", "left")
    tokenizer.pad_token_type_id = 3
    return tokenizer


HF_FORMAT = HFFormat(
    model_types=("xlnet",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    # A permutation-LM pretrainer (checkpoint root "lm") is HF's XLNetLMHeadModel,
    # which HF maps both as the pre-training and as the causal-LM class of "xlnet".
    architectures={"encoder": "XLNetModel", "pretraining": "XLNetLMHeadModel",
                   "causal_lm": "XLNetLMHeadModel",
                   "classifier": "XLNetForSequenceClassification"},
    with_prefix="transformer.",
)
