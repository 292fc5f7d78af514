"""Configs that *are* a Hugging Face `config.json` (GPT, GPT-2, XLNet).

These families read and write HF's file unchanged: the known fields in HF's
order, then every other key (`extra`), kept and written back. `HFConfig`
holds what such a class needs besides its own checks and BERT-style
aliases: the field values checked by kind (`check_field`), the refusal of
another family's `model_type` and of HF options the network does not
compute, the dict/JSON round trip, atomic writing, equality and repr.

A subclass sets `FIELDS` (`(name, default, kind)` in HF's order), `ERROR`
(its config error class), `SCHEMA` (its `modeling.config_schema.ConfigSchema`),
`WHAT` ("a GPT-2 config", for the not-an-object error), `MODEL_TYPE`
(HF's `model_type` of the family) and `REFUSED` (`{key: (the only value
allowed, what another value would compute)}`).

`HFConfig(**values)` keeps the extras, lets `_prepare` read other names
(OpenAI's `n_ctx`, ...), sets and checks the fields, checks that `MULTIPLE`'s
width is a multiple of its head count and `ACTIVATION`'s name is known
(`hidden_act` is then this project's name of it), and refuses what
`_check_extras` refuses, in that order.
"""

import copy
import json

from data import atomic

__all__ = ["HF_ACTIVATIONS", "HFConfig", "OpenAIConfig", "check_field"]

# HF's activation names (BERT's and DistilBERT's) -> this project's
# (`modeling.layers.get_activation`). HF's "gelu" is the exact erf GELU, the
# same function as Google's "gelu"; "gelu_new", "gelu_pytorch_tanh" and
# "gelu_fast" are all the tanh approximation, written differently.
HF_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "gelu_fast": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "swish": "swish",
    "tanh": "tanh",
    "linear": "linear",
}

_OPTIONAL_KINDS = ("optional_int", "optional_id", "optional_count")
_INTEGER_KINDS = ("int", "optional_int", "optional_id", "count", "optional_count",
                  "signed_int")


def check_field(name, value, kind, error, raw_in_errors=False):
    """`value` normalised to its kind, or `error` naming the field.

    Kinds: "int" (> 0), "optional_int" (None or > 0), "optional_id" and
    "optional_count" (None or >= 0), "count" (>= 0), "signed_int", "bool",
    "str" (non-empty), "prob" (in [0, 1)), "positive_float"; any other kind
    is a number. `raw_in_errors`: the positive-integer error shows the value
    as given (GPT's message) rather than as an int.
    """
    if kind in _OPTIONAL_KINDS and value is None:
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise error("`%s` must be true or false, got %r" % (name, value))
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise error("`%s` must be a non-empty string, got %r" % (name, value))
        return value
    if kind in _INTEGER_KINDS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise error("`%s` must be an integer, got %r" % (name, value))
        number = int(value)
        if kind in ("int", "optional_int") and number <= 0:
            raise error("`%s` must be positive, got %r"
                        % (name, value if raw_in_errors else number))
        if kind in ("optional_id", "count", "optional_count") and number < 0:
            raise error("`%s` must be >= 0, got %d" % (name, number))
        return number
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error("`%s` must be a number, got %r" % (name, value))
    value = float(value)
    if kind == "prob" and not 0.0 <= value < 1.0:
        raise error("`%s` must be in [0, 1), got %s" % (name, value))
    if kind == "positive_float" and not value > 0.0:
        raise error("`%s` must be positive, got %s" % (name, value))
    return value


class HFConfig:
    """Base of a config stored as HF's `config.json` (see the module docstring)."""

    FIELDS = ()
    ERROR = ValueError
    SCHEMA = None
    WHAT = "a config"
    MODEL_TYPE = None
    REFUSED = {}
    RAW_IN_ERRORS = False  # `check_field`'s `raw_in_errors`
    MULTIPLE = None  # (width field, heads field): the width is a multiple of the heads
    # (field, {HF's name: this project's name}, whether HF reads the name in any case)
    ACTIVATION = None

    def __init__(self, **values):
        extra = self._extras(values)
        self._prepare(values, extra)
        self._set_fields(values)
        self._check_multiple(*self.MULTIPLE)
        self._check_activation()
        self._check_extras(extra)
        self.extra = copy.deepcopy(extra)

    def _prepare(self, values, extra):
        """Reads or refuses other names of fields in `values` (nothing here)."""

    def _activation_key(self):
        field, names, any_case = self.ACTIVATION
        value = getattr(self, field)
        return field, names, value.lower() if any_case else value

    def _check_activation(self):
        field, names, key = self._activation_key()
        if key not in names:
            raise self.ERROR("`%s` %r is not supported; known: %s"
                             % (field, getattr(self, field), ", ".join(names)))

    @property
    def hidden_act(self):
        """This project's name of the activation (`modeling.layers.get_activation`)."""
        _, names, key = self._activation_key()
        return names[key]

    @classmethod
    def _extras(cls, values):
        """The keys of `values` that are not fields."""
        names = {name for name, _, _ in cls.FIELDS}
        return {k: v for k, v in values.items() if k not in names}

    def _set_fields(self, values):
        """Every field from `values` (its default when absent), checked."""
        for name, default, kind in self.FIELDS:
            setattr(self, name, check_field(name, values.get(name, default), kind, self.ERROR,
                                            self.RAW_IN_ERRORS))

    def _check_multiple(self, width, heads):
        if getattr(self, width) % getattr(self, heads):
            raise self.ERROR("`%s` (%d) must be a multiple of `%s` (%d)"
                             % (width, getattr(self, width), heads, getattr(self, heads)))

    def _check_extras(self, extra):
        """Refuses another family's `model_type` and the `REFUSED` options' other values."""
        model_type = extra.get("model_type")
        if model_type is not None and model_type != self.MODEL_TYPE:
            raise self.ERROR("`model_type` is %r, not %r" % (model_type, self.MODEL_TYPE))
        for key, (default, what) in self.REFUSED.items():
            if key in extra and extra[key] != default:
                raise self.ERROR("`%s`=%r (%s) is not supported by this %s network"
                                 % (key, extra[key], what, self.SCHEMA.family))

    # ------------------------------------------------- BERT-style aliases

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def num_attention_heads(self):
        return self.n_head

    # ---------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, values):
        if not isinstance(values, dict):
            raise cls.ERROR("%s must be a JSON object, got %s" % (cls.WHAT, type(values).__name__))
        return cls(**values)

    def to_dict(self):
        """The known fields in HF's order, then the extras."""
        out = {name: getattr(self, name) for name, _, _ in self.FIELDS}
        out.update(copy.deepcopy(self.extra))
        return out

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_hf(cls, values):
        """The config of HF's parsed `config.json`, checked against `SCHEMA` (`ERROR` if bad)."""
        return cls.SCHEMA.build(values, cls.from_dict, cls.ERROR)

    def to_hf(self, model_type=None):
        """HF's `config.json` content: the config's own dict with `model_type`
        (default `MODEL_TYPE`) and no `architectures` (the writer names its model)."""
        values = self.to_dict()
        values.pop("architectures", None)
        values["model_type"] = self.MODEL_TYPE if model_type is None else model_type
        return values

    def replace(self, **changes):
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)

    # ---------------------------------------------------------------- files

    @classmethod
    def from_json_file(cls, path):
        """Reads the family's `config.json` (HF's or this project's: the same format)."""
        return cls.SCHEMA.read_file(path, cls.from_dict, cls.ERROR)

    def to_json_file(self, path):
        """Writes the config atomically (a temporary file renamed over `path`)."""
        atomic.write_text(path, self.to_json_string())

    def __eq__(self, other):
        if not isinstance(other, type(self)):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % kv for kv in self.to_dict().items()))


class OpenAIConfig(HFConfig):
    """GPT's and GPT-2's shared names: `n_embd`, `n_positions` (OpenAI's and
    old HF configs' `n_ctx`), `n_layer`, `n_head`."""

    MULTIPLE = ("n_embd", "n_head")
    #: The family's named sizes (`_preset`): name -> field values.
    PRESETS = {}

    @classmethod
    def _preset(cls, name, **values):
        """The config of the preset `name`'s sizes with `values` over them (`KeyError`
        naming the known presets for another name)."""
        if name not in cls.PRESETS:
            raise KeyError("Unknown %s preset %r; known: %s"
                           % (cls.SCHEMA.family, name, ", ".join(cls.PRESETS)))
        return cls(**dict(cls.PRESETS[name], **values))

    def _prepare(self, values, extra):
        if "n_ctx" in extra and "n_positions" not in values:
            # OpenAI's hparams and old HF configs: n_ctx is the context.
            values["n_positions"] = extra["n_ctx"]

    # ------------------------------------------------- BERT-style aliases

    @property
    def hidden_size(self):
        return self.n_embd

    @property
    def max_position_embeddings(self):
        return self.n_positions
