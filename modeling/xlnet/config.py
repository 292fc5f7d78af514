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
import json

from data import atomic
from modeling import config_schema

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
_DEFAULTS = {name: default for name, default, _ in _FIELDS}

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


def _check(name, value, kind):
    """`value` normalised to its kind, or `XLNetConfigError` naming the field."""
    if kind == "optional_count" and value is None:
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise XLNetConfigError("`%s` must be true or false, got %r" % (name, value))
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise XLNetConfigError("`%s` must be a non-empty string, got %r" % (name, value))
        return value
    if kind in ("int", "count", "optional_count", "signed_int"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise XLNetConfigError("`%s` must be an integer, got %r" % (name, value))
        value = int(value)
        if kind == "int" and value <= 0:
            raise XLNetConfigError("`%s` must be positive, got %d" % (name, value))
        if kind in ("count", "optional_count") and value < 0:
            raise XLNetConfigError("`%s` must be >= 0, got %d" % (name, value))
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise XLNetConfigError("`%s` must be a number, got %r" % (name, value))
    value = float(value)
    if kind == "prob" and not 0.0 <= value < 1.0:
        raise XLNetConfigError("`%s` must be in [0, 1), got %s" % (name, value))
    if kind == "positive_float" and not value > 0.0:
        raise XLNetConfigError("`%s` must be positive, got %s" % (name, value))
    return value


class XLNetConfig:
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

    def __init__(self, **values):
        extra = {k: v for k, v in values.items() if k not in _DEFAULTS}
        if "n_token" in extra and "vocab_size" not in values:
            values["vocab_size"] = extra.pop("n_token")  # zihangdai/xlnet's name
        if values.get("mem_len") is None:
            values["mem_len"] = 0  # HF writes null for "no memory"
        for name, default, kind in _FIELDS:
            setattr(self, name, _check(name, values.get(name, default), kind))
        if self.d_model % self.n_head:
            raise XLNetConfigError("`d_model` (%d) must be a multiple of `n_head` (%d)"
                                   % (self.d_model, self.n_head))
        d_head = extra.get("d_head")
        if d_head is not None and d_head != self.d_model // self.n_head:
            raise XLNetConfigError("`d_head` is %r but `d_model` / `n_head` is %d"
                                   % (d_head, self.d_model // self.n_head))
        if self.ff_activation.lower() not in HF_ACTIVATIONS:
            raise XLNetConfigError("`ff_activation` %r is not supported; known: %s"
                                   % (self.ff_activation, ", ".join(HF_ACTIVATIONS)))
        model_type = extra.get("model_type")
        if model_type is not None and model_type != "xlnet":
            raise XLNetConfigError("`model_type` is %r, not 'xlnet'" % (model_type,))
        for key, (default, what) in _REFUSED.items():
            if key in extra and extra[key] != default:
                raise XLNetConfigError("`%s`=%r (%s) is not supported by this XLNet network"
                                       % (key, extra[key], what))
        if self.reuse_len is not None and self.mem_len == 0:
            raise XLNetConfigError("`reuse_len` is %d but `mem_len` is 0 (no memory to reuse "
                                   "into)" % self.reuse_len)
        self.extra = copy.deepcopy(extra)

    # ------------------------------------------------- BERT-style aliases

    @property
    def hidden_size(self):
        return self.d_model

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def num_attention_heads(self):
        return self.n_head

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

    @property
    def hidden_act(self):
        """This project's name of the activation (`modeling.layers.get_activation`)."""
        return HF_ACTIVATIONS[self.ff_activation.lower()]

    # ---------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, values):
        if not isinstance(values, dict):
            raise XLNetConfigError("an XLNet config must be a JSON object, got %s"
                                   % type(values).__name__)
        return cls(**values)

    def to_dict(self):
        """The known fields in HF's order, then the extras."""
        out = {name: getattr(self, name) for name in _FIELD_NAMES}
        out.update(copy.deepcopy(self.extra))
        return out

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def replace(self, **changes):
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)

    @classmethod
    def from_json_file(cls, path):
        """Reads an XLNet `config.json` (HF's) or `xlnet_config.json` (zihangdai/xlnet's)."""
        return XLNET_SCHEMA.read_file(path, cls.from_dict, XLNetConfigError)

    def to_json_file(self, path):
        """Writes the config atomically (a temporary file renamed over `path`)."""
        atomic.write_text(path, self.to_json_string())

    def __eq__(self, other):
        if not isinstance(other, XLNetConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self):
        return "XLNetConfig(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


def load_xlnet_config(path):
    """Reads an XLNet `config.json`, or the one in a model folder.

    Raises:
        FileNotFoundError: no such file (or no config.json in the folder).
        XLNetConfigError: invalid JSON or values; the message names the file.
    """
    return XLNetConfig.from_json_file(config_schema.config_file_in(path))
