"""`AlbertConfig`: the hyper-parameters of an ALBERT encoder, as in `albert_config.json`.

google-research/albert's fields, order and defaults; a `BertConfig` subclass,
so validation, round trips and unknown keys behave as for BERT.
"""

import copy
import os

from modeling import config_schema
from modeling.bert.config import BertConfig
from modeling.bert.config import BertConfigError
from modeling.bert.config import _check_value
from modeling.bert.config import check_head_counts

__all__ = ["AlbertConfig", "ALBERT_VOCAB_SIZE", "HEADS_PER_GROUP_KEY", "check_heads_per_group",
           "list_albert_presets", "load_albert_config"]

# The albert_config.json key of a head-pruned ALBERT (`modeling.analysis.heads`,
# `run/prune_heads.py`): one head count per group of shared layers
# (`num_hidden_groups` entries; one for ALBERT's usual single shared layer).
# Every attention block of a group (all its depths, all `inner_group_num`
# blocks) has that many heads, each `hidden_size // num_attention_heads` wide.
# Written only when present, so other configs are unchanged.
HEADS_PER_GROUP_KEY = "num_attention_heads_per_group"


def check_heads_per_group(counts, num_hidden_groups, num_attention_heads):
    """`counts` as a list of ints, or `BertConfigError` naming what is wrong."""
    return check_head_counts(counts, HEADS_PER_GROUP_KEY, num_hidden_groups,
                             "num_hidden_groups", num_attention_heads)


# Field name -> (default, kind), in the order google-research/albert's
# `AlbertConfig.__init__` lists them. The defaults are ALBERT's own, which
# describe albert_xxlarge.
_ALBERT_FIELDS = (
    ("vocab_size", None, "int"),
    ("embedding_size", 128, "int"),
    ("hidden_size", 4096, "int"),
    ("num_hidden_layers", 12, "int"),
    ("num_hidden_groups", 1, "int"),
    ("num_attention_heads", 64, "int"),
    ("intermediate_size", 16384, "int"),
    ("inner_group_num", 1, "int"),
    ("down_scale_factor", 1, "positive_float"),
    ("hidden_act", "gelu", "activation"),
    ("hidden_dropout_prob", 0.0, "prob"),
    ("attention_probs_dropout_prob", 0.0, "prob"),
    ("max_position_embeddings", 512, "int"),
    ("type_vocab_size", 2, "int"),
    ("initializer_range", 0.02, "positive_float"),
    ("net_structure_type", 0, "int_or_zero"),
)
_ALBERT_FIELD_NAMES = tuple(name for name, _, _ in _ALBERT_FIELDS)

# What an albert_config.json / HF config.json may hold
# (`modeling.config_schema`): the fields; google-research/albert's unused
# `gap_size` and `num_memory_blocks`, and the Google BERT extras
# (`directionality`, `pooler_*`: unused, as in BERT); HF's ALBERT keys;
# `layer_norm_epsilon` (the encoders' name of the LayerNorm epsilon, read
# from the extras).
ALBERT_SCHEMA = config_schema.ConfigSchema(
    "ALBERT", _ALBERT_FIELD_NAMES,
    ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
     "num_attention_heads", "intermediate_size"),
    extra_keys=({"gap_size", "num_memory_blocks", "layer_norm_epsilon",
                 "classifier_dropout_prob", "layer_norm_eps", "position_embedding_type",
                 "ln_type", HEADS_PER_GROUP_KEY}
                | config_schema.GOOGLE_BERT_EXTRA_KEYS | config_schema.HF_COMMON_KEYS),
    model_types=("albert",))

# The four published sizes (Lan et al. 2019, Table 1; the released v2
# `albert_config.json` files: no dropout). All share E=128, 512 positions,
# 2 token types and a 30000-piece SentencePiece vocabulary.
_ALBERT_PRESETS = {
    "albert_base": dict(hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072),
    "albert_large": dict(hidden_size=1024, num_hidden_layers=24,
                         num_attention_heads=16, intermediate_size=4096),
    "albert_xlarge": dict(hidden_size=2048, num_hidden_layers=24,
                          num_attention_heads=16, intermediate_size=8192),
    "albert_xxlarge": dict(hidden_size=4096, num_hidden_layers=12,
                           num_attention_heads=64, intermediate_size=16384),
}
ALBERT_VOCAB_SIZE = 30000


class AlbertConfig(BertConfig):
    """Hyper-parameters of an ALBERT encoder, as in `albert_config.json`.

    A `BertConfig` subclass (so `from_dict`, `from_json_file`,
    `to_json_file`, `replace` and the validation work the same way) with
    ALBERT's extra fields and ALBERT's defaults (those of albert_xxlarge,
    as in google-research/albert):

        embedding_size (128)      E: width of the factorised embeddings;
                                  a dense `embedding_hidden_mapping_in`
                                  projects them to `hidden_size` when E != H.
        num_hidden_groups (1)     groups of layers sharing one set of
                                  parameters (1 = all layers share).
        inner_group_num (1)       attention+FFN blocks applied in turn
                                  inside every layer.
        down_scale_factor (1)     kept for compatibility; unused by ALBERT.
        net_structure_type (0)    kept for compatibility; only 0 exists.

    and `type_vocab_size` 2, dropouts 0 (v2 configs; v1 used 0.1).
    Unknown keys (`gap_size`, `num_memory_blocks`, HF keys, ...) are kept in
    `extra` and written back, as with `BertConfig`. A head-pruned ALBERT has
    `num_attention_heads_per_group` (`HEADS_PER_GROUP_KEY`) among them: one
    head count per group of shared layers, `num_attention_heads` still
    fixing the head width.

    Activation note: google-research/albert's "gelu" is the tanh
    approximation of GELU; the config keeps the word as written and
    `modeling.albert.AlbertEncoder.from_config_object` picks that function.

    Files are checked against `ALBERT_SCHEMA` (unknown keys, and the
    structural fields `vocab_size`, `embedding_size`, `hidden_size`,
    `num_hidden_layers`, `num_attention_heads`, `intermediate_size` must be
    given), as BERT's are.
    """

    SCHEMA = ALBERT_SCHEMA

    def __init__(self, vocab_size, **values):
        values["vocab_size"] = vocab_size
        for name, default, kind in _ALBERT_FIELDS:
            value = values.pop(name, default)
            if kind == "int_or_zero":
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or value < 0 or float(value) != int(value):
                    raise BertConfigError(
                        f"`{name}` must be a non-negative integer, got {value!r}.")
                value = int(value)
            else:
                value = _check_value(name, value, kind)
            setattr(self, name, value)
        if float(self.down_scale_factor).is_integer():
            self.down_scale_factor = int(self.down_scale_factor)
        if self.hidden_size % self.num_attention_heads:
            raise BertConfigError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_attention_heads` ({self.num_attention_heads})."
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise BertConfigError(
                f"`num_hidden_groups` ({self.num_hidden_groups}) cannot exceed "
                f"`num_hidden_layers` ({self.num_hidden_layers}).")
        if HEADS_PER_GROUP_KEY in values:
            # A head-pruned ALBERT: each group's shared attention has its own
            # head count; the weights' shapes follow it.
            values[HEADS_PER_GROUP_KEY] = check_heads_per_group(
                values[HEADS_PER_GROUP_KEY], self.num_hidden_groups, self.num_attention_heads)
        self.extra = copy.deepcopy(values)

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a parsed `albert_config.json` (see `BertConfig`)."""
        if not isinstance(json_object, dict):
            raise BertConfigError(
                "An ALBERT config must be a JSON object (dict), got "
                f"{type(json_object).__name__}.")
        if "vocab_size" not in json_object:
            raise BertConfigError("The config has no `vocab_size`.")
        return cls(**json_object)

    def to_dict(self):
        """The ALBERT fields (in google-research/albert's order), then extras."""
        output = {name: getattr(self, name) for name in _ALBERT_FIELD_NAMES}
        for key, value in self.extra.items():
            output[key] = copy.deepcopy(value)
        return output

    @classmethod
    def from_preset(cls, name, vocab_size=ALBERT_VOCAB_SIZE, **overrides):
        """`albert_base`, `albert_large`, `albert_xlarge` or `albert_xxlarge`.

        Args:
            name: preset name (see `list_albert_presets()`).
            vocab_size: default 30000, ALBERT's SentencePiece vocabulary.
            **overrides: other fields, e.g. `hidden_dropout_prob=0.1` for
                the v1 recipe.
        """
        if name not in _ALBERT_PRESETS:
            raise KeyError(f"Unknown ALBERT preset {name!r}; known presets: "
                           f"{', '.join(_ALBERT_PRESETS)}.")
        values = dict(_ALBERT_PRESETS[name], vocab_size=vocab_size,
                      embedding_size=128, max_position_embeddings=512,
                      type_vocab_size=2, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)
        values.update(overrides)
        return cls(**values)

    def __eq__(self, other):
        if not isinstance(other, BertConfig):
            return NotImplemented
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"AlbertConfig({fields})"


def list_albert_presets():
    """Returns the ALBERT preset names."""
    return list(_ALBERT_PRESETS)


def load_albert_config(path):
    """Reads an `albert_config.json` (a file, or a directory holding one), or a keras-hub
    preset's `config.json`.

    Returns:
        An `AlbertConfig`.

    Raises:
        FileNotFoundError, BertConfigError: as `BertConfig.from_json_file`.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        for name in ("albert_config.json", "config.json"):
            if os.path.isfile(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise FileNotFoundError(f"No albert_config.json in directory {path}")
    from modeling.albert import hf_format  # pylint: disable=import-outside-toplevel
    # A keras-hub preset's config.json: what its AlbertBackbone computes.
    keras_hub_config = hf_format.load_keras_hub_config(path)
    if keras_hub_config is not None:
        return keras_hub_config
    config = AlbertConfig.from_json_file(path)
    # brightmart/albert_zh's configs say which LayerNorm placement they use;
    # only the post-LN one of google-research/albert is implemented here.
    ln_type = config.extra.get("ln_type", "postln") if hasattr(config, "extra") else "postln"
    if ln_type != "postln":
        raise BertConfigError(
            f"{path}: ln_type={ln_type!r}; this ALBERT is post-LN (ln_type \"postln\"), "
            "a pre-LN albert_zh checkpoint would load but compute something else")
    return config
