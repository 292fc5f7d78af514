"""`XLNetConfig`: XLNet's hyper-parameters under Hugging Face's `config.json` names.

XLNet checkpoints people have (`xlnet-base-cased`, `xlnet-large-cased`, the
Chinese `chinese_xlnet_*` releases and their fine-tunes) come as HF folders,
so this config reads and writes HF's `config.json` (`d_model`, `n_layer`,
`n_head`, `d_inner`, `ff_activation`, `untie_r`, `mem_len`, `reuse_len`,
`bi_data`, `clamp_len`, `dropout`, `layer_norm_eps`, `initializer_range`,
`vocab_size`, ...). zihangdai/xlnet's own `xlnet_config.json` differs only
in `n_token` (read as `vocab_size`) and `d_head` (checked against
`d_model / n_head`). Keys the network does not use (`summary_*` of HF's
heads, `start_n_top`, token ids, ...) are kept in `extra` and written back.

Values are validated when the config is made, and a file is checked against
`XLNET_SCHEMA` (an unknown key names the closest known one; `d_model`,
`n_layer`, `n_head` and `vocab_size` must be given). `attn_type="uni"` (the
left-to-right variant) and `same_length=True` are refused rather than
ignored: this network computes the bidirectional permutation model only.

`hidden_size`, `num_hidden_layers`, ... give the BERT-style names generic
code asks for; there is no `max_position_embeddings` (positions are
relative: any length works).
"""

import copy

from modeling import config_schema
from modeling import hf_config

__all__ = ["XLNetConfig", "XLNetConfigError", "load_xlnet_config"]


class XLNetConfigError(ValueError):
    """An XLNet `config.json` (or dict) has a missing, mistyped or invalid value."""


# Field -> (default, kind), HF's defaults (xlnet-large-cased's shapes).
_FIELDS = (
    ("vocab_size", 32000, "int"),
    ("d_model", 1024, "int"),
    ("n_layer", 24, "int"),
    ("n_head", 16, "int"),
    ("d_inner", 4096, "int"),
    ("ff_activation", "gelu", "str"),
    ("untie_r", True, "bool"),
    ("mem_len", 0, "count"),
    ("reuse_len", None, "optional_count"),
    ("bi_data", False, "bool"),
    ("clamp_len", -1, "signed_int"),
    ("dropout", 0.1, "prob"),
    ("layer_norm_eps", 1e-12, "positive_float"),
    ("initializer_range", 0.02, "positive_float"),
)
_FIELD_NAMES = tuple(name for name, _, _ in _FIELDS)

# Options whose other values would make HF's model compute something else.
_REFUSED = {
    "attn_type": ("bi", "the left-to-right attention variant"),
    "same_length": (False, "same-length attention over the memory"),
}

XLNET_SCHEMA = config_schema.ConfigSchema(
    "XLNet", _FIELD_NAMES, ("vocab_size", "d_model", "n_layer", "n_head"),
    extra_keys=({"n_token", "d_head", "use_mems_eval", "use_mems_train", "summary_type",
                 "summary_use_proj", "summary_activation", "summary_last_dropout",
                 "start_n_top", "end_n_top", "pad_token_id", "bos_token_id",
                 "eos_token_id"} | set(_REFUSED) | config_schema.HF_COMMON_KEYS),
    model_types=("xlnet",),
    alternatives={"vocab_size": ("n_token",)})

# HF's activation names -> this project's (`modeling.layers.get_activation`).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "relu": "relu",
                  "swish": "swish", "silu": "silu", "tanh": "tanh"}


class XLNetConfig(hf_config.HFConfig):
    """XLNet's hyper-parameters (HF `XLNetConfig` field names).

    Args:
        vocab_size: rows of the word embedding table (32000 for XLNet's
            SentencePiece model).
        d_model: width of the model.
        n_layer: Transformer-XL blocks.
        n_head: attention heads; must divide `d_model` (`d_head = d_model /
            n_head`).
        d_inner: feed-forward width.
        ff_activation: HF activation name ("gelu" is the exact erf GELU).
        untie_r: every layer has its own u/v/segment biases (`r_w_bias`,
            `r_r_bias`, `r_s_bias`); False shares one set across layers.
        mem_len: tokens of segment-level recurrence memory kept per layer
            (0: no memory).
        reuse_len: of each segment, the first `reuse_len` positions are
            cached as memory (None: the whole segment).
        bi_data: half of the batch uses forward and half backward relative
            positions (XLNet's bidirectional data pipeline; batch even).
        clamp_len: relative distances are clipped to `[-clamp_len,
            clamp_len]` (-1: never).
        dropout: dropout on embeddings, attention probabilities, each
            sub-layer's output and the feed-forward activation.
        layer_norm_eps: LayerNorm epsilon.
        initializer_range: std of the truncated-normal initialiser.
        **extra: other keys, kept and written back.
    """

    FIELDS = _FIELDS
    ERROR = XLNetConfigError
    SCHEMA = XLNET_SCHEMA
    WHAT = "an XLNet config"
    MODEL_TYPE = "xlnet"
    REFUSED = _REFUSED
    ACTIVATION = ("ff_activation", HF_ACTIVATIONS, True)

    def __init__(self, **values):
        extra = self._extras(values)
        if "n_token" in extra and "vocab_size" not in values:
            values["vocab_size"] = extra.pop("n_token")  # zihangdai/xlnet's name
        if values.get("mem_len") is None:
            values["mem_len"] = 0  # HF writes null for "no memory"
        self._set_fields(values)
        self._check_multiple("d_model", "n_head")
        d_head = extra.get("d_head")
        if d_head is not None and d_head != self.d_model // self.n_head:
            raise XLNetConfigError("`d_head` is %r but `d_model` / `n_head` is %d"
                                   % (d_head, self.d_model // self.n_head))
        self._check_activation()
        self._check_extras(extra)
        if self.reuse_len is not None and self.mem_len == 0:
            raise XLNetConfigError("`reuse_len` is %d but `mem_len` is 0 (no memory to reuse "
                                   "into)" % self.reuse_len)
        self.extra = copy.deepcopy(extra)

    # ------------------------------------------------- BERT-style aliases

    @property
    def hidden_size(self):
        return self.d_model

    @property
    def intermediate_size(self):
        return self.d_inner

    @property
    def hidden_dropout_prob(self):
        """The dropout rate under BERT's name (what fine-tuning heads read)."""
        return self.dropout

    @property
    def d_head(self):
        return self.d_model // self.n_head


def load_xlnet_config(path):
    """Reads an XLNet `config.json`, or the one in a model folder.

    Raises:
        FileNotFoundError: no such file (or no config.json in the folder).
        XLNetConfigError: invalid JSON or values; the message names the file.
    """
    return XLNetConfig.from_json_file(config_schema.config_file_in(path))
