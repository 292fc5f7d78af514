"""`BertConfig`: the hyper-parameters of a BERT encoder, as in `bert_config.json`.

The field names, meanings and defaults are those of google-research/bert's
`modeling.BertConfig`, so every released `bert_config.json` (English, Chinese,
multilingual, the 24 small BERTs) loads unchanged and writes back unchanged.

Released configs carry keys that the encoder does not use (the Chinese and
multilingual ones have `directionality`, `pooler_fc_size`,
`pooler_num_attention_heads`, ...; Hugging Face exports add `model_type`,
`architectures`, ...). Such keys are kept in `BertConfig.extra` and written back
by `to_dict()` / `to_json_file()`, so a config survives a round trip through
this project byte-for-byte in content.

Files are checked against `BERT_SCHEMA` (`modeling.config_schema`) when read:
a key that is neither a field nor one of those known extra keys is an error
naming the closest known key (a misspelt `hiddensize` would otherwise leave
`hidden_size` at its default), and the structural fields (`vocab_size`,
`hidden_size`, `num_hidden_layers`, `num_attention_heads`,
`intermediate_size`) must be present. Configs built in Python keep the
defaults.

Values are validated when the config is made (types, positivity, probabilities
in [0, 1), `hidden_size` divisible by `num_attention_heads`, `hidden_act` known
to `modeling.layers.get_activation`) so a bad file fails
at load time with a message that names the file and the field, not deep inside
model construction.

A pruned model's config (`modeling.analysis.heads`, `run/prune_heads.py`)
has the optional key `num_attention_heads_per_layer`: one head count per
layer, each in [0, num_attention_heads] (the heads keep the width
`hidden_size // num_attention_heads`). It is written only when present, so
other configs are unchanged.

Presets: Google's 24 small BERTs ("Well-Read Students Learn Better",
Turc et al. 2019) are named `"L-{layers}_H-{hidden}"`; heads are `hidden / 64`
and the intermediate size is `4 * hidden`. The aliases `bert_tiny`, `bert_mini`,
`bert_small`, `bert_medium`, `bert_base` and `bert_large` name the usual sizes.

    >>> config = BertConfig.from_preset("bert_tiny", vocab_size=30522)
    >>> config.num_hidden_layers, config.hidden_size, config.num_attention_heads
    (2, 128, 2)
"""

import copy
import json
import os

from data import atomic
from modeling import config_schema
from modeling import hf_config

__all__ = [
    "BertConfig",
    "BertConfigError",
    "HEADS_PER_LAYER_KEY",
    "check_head_counts",
    "check_heads_per_layer",
    "list_presets",
    "load_bert_config",
]


class BertConfigError(ValueError):
    """A `bert_config.json` (or dict) has a missing, mistyped or invalid value."""


# The bert_config.json key of a pruned model's per-layer head counts.
HEADS_PER_LAYER_KEY = "num_attention_heads_per_layer"


def check_head_counts(counts, key, entries, entries_field, num_attention_heads):
    """The config value `key` (heads per layer, or per ALBERT group) as a list of ints:
    `entries` of them (the config's `entries_field`), each in [0, num_attention_heads];
    else `BertConfigError` naming what is wrong."""
    if isinstance(counts, (str, bytes)) or not hasattr(counts, "__len__"):
        raise BertConfigError(f"`{key}` must be a list of {entries} integers, got {counts!r}.")
    if len(counts) != entries:
        raise BertConfigError(f"`{key}` has {len(counts)} entries; {entries_field} is "
                              f"{entries}.")
    checked = []
    for i, count in enumerate(counts):
        if isinstance(count, bool) or not isinstance(count, (int, float)) \
                or (isinstance(count, float) and not count.is_integer()) \
                or not 0 <= count <= num_attention_heads:
            raise BertConfigError(f"`{key}`[{i}] = {count!r}: expected an integer in "
                                  f"[0, num_attention_heads={num_attention_heads}].")
        checked.append(int(count))
    return checked


def check_heads_per_layer(counts, num_hidden_layers, num_attention_heads):
    """`counts` as a list of ints, or ValueError naming what is wrong."""
    return check_head_counts(counts, HEADS_PER_LAYER_KEY, num_hidden_layers,
                             "num_hidden_layers", num_attention_heads)


# Field name -> (default, kind). `None` default means "required".
# Order matters: it is the order Google writes the fields in and the order
# `to_dict()` emits them in.
_FIELDS = (
    ("vocab_size", None, "int"),
    ("hidden_size", 768, "int"),
    ("num_hidden_layers", 12, "int"),
    ("num_attention_heads", 12, "int"),
    ("intermediate_size", 3072, "int"),
    ("hidden_act", "gelu", "activation"),
    ("hidden_dropout_prob", 0.1, "prob"),
    ("attention_probs_dropout_prob", 0.1, "prob"),
    ("max_position_embeddings", 512, "int"),
    ("type_vocab_size", 16, "int"),
    ("initializer_range", 0.02, "positive_float"),
)
_FIELD_NAMES = tuple(name for name, _, _ in _FIELDS)

# The fields that fix the shapes of the weights: a file must give them.
_REQUIRED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "intermediate_size")

# Keys of Hugging Face's BERT config.json beyond the shared ones.
HF_BERT_KEYS = frozenset({"classifier_dropout", "layer_norm_eps",
                          "position_embedding_type"})

# What a bert_config.json / config.json may hold (`modeling.config_schema`):
# the fields, Google's and HF's extra keys, and `layer_norm_epsilon` (this
# project's extra for HF's `layer_norm_eps`, written back by `to_json_file`).
BERT_SCHEMA = config_schema.ConfigSchema(
    "BERT", _FIELD_NAMES, _REQUIRED_FIELDS,
    extra_keys=(config_schema.GOOGLE_BERT_EXTRA_KEYS | config_schema.HF_COMMON_KEYS
                | HF_BERT_KEYS | {"layer_norm_epsilon", HEADS_PER_LAYER_KEY}),
    model_types=("bert",))


def _check_value(name, value, kind):
    """Returns `value` normalised to its kind, or raises `BertConfigError`."""
    if kind == "int":
        # bool is an int subclass; `"hidden_size": true` is a mistake.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BertConfigError(
                f"`{name}` must be a positive integer, got {value!r} "
                f"({type(value).__name__})."
            )
        if isinstance(value, float):
            if not value.is_integer():
                raise BertConfigError(
                    f"`{name}` must be a positive integer, got {value!r}."
                )
            value = int(value)
        if value <= 0:
            raise BertConfigError(f"`{name}` must be positive, got {value}.")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise BertConfigError(
                f"`{name}` must be a non-empty string, got {value!r} "
                f"({type(value).__name__})."
            )
        return value
    if kind == "activation":
        value = _check_value(name, value, "str")
        # Imported here: the registry is TensorFlow code, and sees the
        # activations users registered before the config is read.
        from modeling.layers import activations  # pylint: disable=g-import-not-at-top
        known = activations.activation_names()
        if value.lower() not in known:
            raise BertConfigError(
                f"`{name}` {value!r} is not a known activation; known: "
                f"{', '.join(known)} (modeling.layers.register_activation adds one)."
            )
        return value
    # Floats.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BertConfigError(
            f"`{name}` must be a number, got {value!r} ({type(value).__name__})."
        )
    value = float(value)
    if kind == "prob" and not 0.0 <= value < 1.0:
        raise BertConfigError(f"`{name}` must be in [0, 1), got {value}.")
    if kind == "positive_float" and not value > 0.0:
        raise BertConfigError(f"`{name}` must be positive, got {value}.")
    return value


def _small_bert_presets():
    presets = {}
    for layers in (2, 4, 6, 8, 10, 12):
        for hidden in (128, 256, 512, 768):
            presets[f"L-{layers}_H-{hidden}"] = dict(
                num_hidden_layers=layers,
                hidden_size=hidden,
                num_attention_heads=hidden // 64,
                intermediate_size=4 * hidden,
            )
    return presets


_PRESETS = _small_bert_presets()
_PRESETS["L-24_H-1024"] = dict(
    num_hidden_layers=24,
    hidden_size=1024,
    num_attention_heads=16,
    intermediate_size=4096,
)
_ALIASES = {
    "bert_tiny": "L-2_H-128",
    "bert_mini": "L-4_H-256",
    "bert_small": "L-4_H-512",
    "bert_medium": "L-8_H-512",
    "bert_base": "L-12_H-768",
    "bert_large": "L-24_H-1024",
}

# The vocabulary of Google's English uncased/cased releases and the small BERTs.
DEFAULT_VOCAB_SIZE = 30522


def list_presets():
    """Returns the preset names (`"L-2_H-128"`, ...) followed by the aliases."""
    return list(_PRESETS) + list(_ALIASES)


def _read_text(path):
    """A local config file's text; `BertConfigError` naming it if not UTF-8."""
    try:
        with open(path, "r", encoding="utf-8") as reader:
            return reader.read()
    except UnicodeDecodeError as e:
        raise BertConfigError(f"BERT config file {path} is not UTF-8 text: {e}") from e


def _one_line(error):
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)


class BertConfig:
    """Hyper-parameters of a BERT encoder (google-research/bert compatible).

    Args:
        vocab_size: Size of the WordPiece vocabulary (rows of the word
            embedding table).
        hidden_size: Width of the encoder (embeddings, attention, outputs).
        num_hidden_layers: Number of Transformer blocks.
        num_attention_heads: Attention heads per block; must divide
            `hidden_size`.
        intermediate_size: Width of the feed-forward ("intermediate") layer.
        hidden_act: Activation of the feed-forward layer and of the MLM
            transform; see `modeling.layers.get_activation`.
        hidden_dropout_prob: Dropout on embeddings and on every sub-layer
            output before its residual connection.
        attention_probs_dropout_prob: Dropout on the attention probabilities.
        max_position_embeddings: Longest sequence the position table covers.
        type_vocab_size: Number of segment (token type) ids.
        initializer_range: Standard deviation of the truncated-normal
            initialiser of all kernels and embedding tables.
        **extra: Any other keys (kept, written back, otherwise ignored).

    Raises:
        BertConfigError: a value has the wrong type or range, `hidden_act`
            is not in the activations registry, or `hidden_size` is not a
            multiple of `num_attention_heads`.
    """

    #: The keys a config file may and must hold (checked by `from_json_file`).
    SCHEMA = BERT_SCHEMA

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        **extra,
    ):
        values = dict(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            hidden_act=hidden_act,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
        )
        for name, _, kind in _FIELDS:
            setattr(self, name, _check_value(name, values[name], kind))
        if self.hidden_size % self.num_attention_heads:
            raise BertConfigError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_attention_heads` ({self.num_attention_heads})."
            )
        if HEADS_PER_LAYER_KEY in extra:
            # A pruned model (modeling.analysis.heads): layer l has its own
            # head count; the weights' shapes follow it.
            extra[HEADS_PER_LAYER_KEY] = check_heads_per_layer(
                extra[HEADS_PER_LAYER_KEY], self.num_hidden_layers, self.num_attention_heads)
        self.extra = copy.deepcopy(extra)

    @property
    def attention_head_size(self):
        """Width of one attention head (`hidden_size // num_attention_heads`)."""
        return self.hidden_size // self.num_attention_heads

    # ------------------------------------------------------------------ dicts

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict such as a parsed `bert_config.json`.

        Missing known fields take their defaults (`vocab_size` is required);
        unknown keys are kept in `extra`.
        """
        if not isinstance(json_object, dict):
            raise BertConfigError(
                "A BERT config must be a JSON object (dict), got "
                f"{type(json_object).__name__}."
            )
        if "vocab_size" not in json_object:
            raise BertConfigError("The config has no `vocab_size`.")
        return cls(**json_object)

    def to_dict(self):
        """Returns the known fields (in Google's order) followed by the extras."""
        output = {name: getattr(self, name) for name in _FIELD_NAMES}
        for key, value in self.extra.items():
            output[key] = copy.deepcopy(value)
        return output

    def to_json_string(self):
        """Serialises to a JSON string (2-space indent, key order kept)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def replace(self, **changes):
        """Returns a copy with some fields (or extras) changed."""
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)

    # ------------------------------------------------------------------ files

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a `bert_config.json`.

        Local paths are read with plain Python; paths with a scheme
        (`gs://...`) go through `tf.io.gfile`.

        Raises:
            FileNotFoundError: the file does not exist.
            BertConfigError: the file is not valid JSON, has an invalid
                value, an unknown key or lacks a structural field (see
                `SCHEMA`); the message names the file.
        """
        json_file = os.fspath(json_file)
        if atomic.is_remote(json_file):
            import tensorflow as tf  # Only needed for remote file systems.

            if not tf.io.gfile.exists(json_file):
                raise FileNotFoundError(f"BERT config file not found: {json_file}")
            with tf.io.gfile.GFile(json_file, "r") as reader:
                text = reader.read()
        else:
            if not os.path.isfile(json_file):
                raise FileNotFoundError(f"BERT config file not found: {json_file}")
            text = _read_text(json_file)
        try:
            parsed = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise BertConfigError(
                f"BERT config file {json_file} is not valid JSON: {_one_line(e)}"
            ) from e
        try:
            return cls._from_file_values(parsed)
        except (BertConfigError, TypeError) as e:
            raise BertConfigError(
                f"Invalid {cls.SCHEMA.family} config file {json_file}: {e}") from e

    @classmethod
    def _from_file_values(cls, values):
        """`from_dict` for a parsed file, checked against the class's `SCHEMA`
        first (unknown keys, missing structural fields; see
        `modeling.config_schema`)."""
        return cls.SCHEMA.build(values, cls.from_dict, BertConfigError)

    def to_json_file(self, json_file):
        """Writes the config as JSON, atomically.

        The text goes to a temporary file in the same directory which then
        replaces `json_file`, so a reader never sees a half-written config and
        a crash never leaves one behind (`data.atomic`).
        """
        atomic.write_text(json_file, self.to_json_string())

    # ---------------------------------------------------------------- presets

    @classmethod
    def from_preset(cls, name, vocab_size=DEFAULT_VOCAB_SIZE, **overrides):
        """Builds the config of a named model size.

        Args:
            name: One of `list_presets()`: `"L-{2,4,...,12}_H-{128,...,768}"`,
                `"L-24_H-1024"`, or an alias (`bert_tiny`, `bert_mini`,
                `bert_small`, `bert_medium`, `bert_base`, `bert_large`).
            vocab_size: Vocabulary size (30522 = Google's English vocab; use
                21128 for `chinese_L-12_H-768_A-12`).
            **overrides: Other fields to change (e.g. `hidden_dropout_prob`).
        """
        key = _ALIASES.get(name, name)
        if key not in _PRESETS:
            raise KeyError(
                f"Unknown BERT preset {name!r}; known presets: "
                f"{', '.join(list_presets())}."
            )
        values = dict(_PRESETS[key], vocab_size=vocab_size)
        values.update(overrides)
        return cls(**values)

    # ------------------------------------------------------------------ misc

    def __eq__(self, other):
        if not isinstance(other, BertConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"BertConfig({fields})"


# ------------------------------------------------------- Google or HF config

# Keys only Hugging Face's `config.json` has; any one of them marks the file
# as an HF export rather than Google's `bert_config.json`.
_HF_MARKER_KEYS = ("model_type", "architectures", "layer_norm_eps", "transformers_version")

# HF activation names -> this project's names (`modeling.layers.get_activation`).
_HF_ACTIVATIONS = hf_config.HF_ACTIVATIONS


def _hf_to_google_dict(hf):
    """Maps a parsed HF BERT `config.json` onto Google's field names.

    The BERT fields have the same names and meanings in both formats; what
    differs is the LayerNorm epsilon (HF `layer_norm_eps`, implicit 1e-12 at
    Google; kept as the extra `layer_norm_epsilon`, the encoder's argument
    name), activation spellings, and features this encoder does not have
    (relative position embeddings), which are refused rather than silently
    ignored, since the weights would then compute something else.
    """
    model_type = hf.get("model_type")
    if model_type is not None and model_type != "bert":
        raise BertConfigError(
            f"model_type {model_type!r} is not BERT; only BERT configs "
            "(model_type 'bert') can be read as a BertConfig."
        )
    position_type = hf.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise BertConfigError(
            f"position_embedding_type {position_type!r} is not supported; the "
            "BERT encoder has absolute position embeddings only."
        )
    values = dict(hf)
    act = values.get("hidden_act", "gelu")
    if isinstance(act, str):
        values["hidden_act"] = _HF_ACTIVATIONS.get(act.lower(), act)
    if "layer_norm_eps" in values:
        values["layer_norm_epsilon"] = float(values.pop("layer_norm_eps"))
    return values


def load_bert_config(path):
    """Reads Google's `bert_config.json` or Hugging Face's `config.json`.

    Scripts take `--bert_config_file` from either kind of release (Google's
    TF1 folders or an HF model folder next to a `model.safetensors`), so
    this one entry point tells them apart: a file with any of the keys
    `model_type`, `architectures`, `layer_norm_eps` or
    `transformers_version` is read as HF's format, anything else as
    Google's.

    For HF files the BERT fields are taken as they are (same names and
    meanings), `hidden_act` spellings are mapped ("gelu_pytorch_tanh" ->
    "gelu_new", ...), `layer_norm_eps` becomes the extra key
    `layer_norm_epsilon` (pass it to `BertEncoder(layer_norm_epsilon=...)`
    when it is not BERT's 1e-12), and every other key is kept in
    `BertConfig.extra` as with Google's files. A non-BERT `model_type` or a
    relative `position_embedding_type` is an error.

    Args:
        path: the JSON file, or a directory holding `bert_config.json`
            (preferred) or `config.json`. Paths with a scheme (`gs://`) are
            read with `tf.io.gfile`.

    Returns:
        A `BertConfig`.

    Raises:
        FileNotFoundError: no such file (or no config in the directory).
        BertConfigError: invalid JSON or values; the message names the file.
    """
    path = os.fspath(path)
    if atomic.is_remote(path):
        import tensorflow as tf  # Only needed for remote file systems.

        isdir, isfile, join = tf.io.gfile.isdir, tf.io.gfile.exists, os.path.join
    else:
        isdir, isfile, join = os.path.isdir, os.path.isfile, os.path.join
    if isdir(path):
        for name in ("bert_config.json", "config.json"):
            if isfile(join(path, name)):
                path = join(path, name)
                break
        else:
            raise FileNotFoundError(
                f"No bert_config.json or config.json in directory {path}"
            )
    if not isfile(path):
        raise FileNotFoundError(f"BERT config file not found: {path}")
    if atomic.is_remote(path):
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "r") as reader:
            text = reader.read()
    else:
        text = _read_text(path)
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise BertConfigError(
            f"BERT config file {path} is not valid JSON: {_one_line(e)}") from e
    if isinstance(parsed, dict) and str(parsed.get("module", "")).startswith("keras_hub"):
        # A keras-hub preset's config.json: what its BertBackbone computes.
        from modeling.bert import hf_format  # pylint: disable=import-outside-toplevel
        try:
            return hf_format.config_from_keras_hub(parsed.get("config", {}))
        except (KeyError, TypeError, ValueError) as e:
            raise BertConfigError(f"Invalid keras-hub BERT config {path}: {e}") from e
    try:
        if isinstance(parsed, dict) and any(k in parsed for k in _HF_MARKER_KEYS):
            parsed = _hf_to_google_dict(parsed)
        return BertConfig._from_file_values(parsed)  # pylint: disable=protected-access
    except (BertConfigError, TypeError, ValueError) as e:
        raise BertConfigError(f"Invalid BERT config file {path}: {e}") from e
