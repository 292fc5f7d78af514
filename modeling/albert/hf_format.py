"""ALBERT's Hugging Face folder format: `model_type` "albert", its config and tokenizer.

HF's ALBERT `config.json` has google-research/albert's field names and
meanings (`embedding_size`, `num_hidden_groups`, `inner_group_num`, ...)
plus HF's own keys; `config_from_hf` reads it into an `AlbertConfig` and
`config_to_hf` writes one back. What differs, and why it is mapped:

* `layer_norm_eps` is the extra `layer_norm_epsilon` here (the encoders'
  argument name, read by `AlbertEncoder.from_config_object`).
* Activations. In this project an ALBERT config's "gelu" is
  google-research/albert's, the tanh approximation (`albert_activation`);
  HF's "gelu" is the exact erf GELU (HF's released ALBERTs say "gelu_new",
  the tanh one, but v1 configs say "gelu" and HF computes erf for them).
  So HF's "gelu" becomes `EXACT_GELU` ("gelu_erf", the exact function,
  `modeling.albert.encoder`) and comes back as "gelu"; HF's tanh spellings become
  "gelu_new" and this project's "gelu" / "gelu_tanh" are written as
  "gelu_new".
* What the encoder cannot compute is refused in one line rather than loaded
  into something else: relative `position_embedding_type`s; and
  `embedding_size == hidden_size`, because HF's `AlbertTransformer` always
  has an `embedding_hidden_mapping_in` projection while this encoder (like
  google-research/albert) has one only when the widths differ. Group
  layouts whose layer -> group rounding differs between HF and
  google-research/albert are refused by the name table
  (`checkpoint_names.HF`).

HF's ALBERT names (`albert.encoder.albert_layer_groups.{g}.albert_layers.{k}.`)
are `checkpoint_names.HF`; the tokenizer is `AlbertTokenizer` over
`spiece.model` (`modeling.albert.tokenizer`).

keras-hub presets (`AlbertBackbone`) in: `config_from_keras_hub` (the tanh
GELU, which is this project's ALBERT "gelu", one dropout rate, its groups
and inner repetitions; equal embedding and hidden widths are refused as for
HF, keras-hub projecting them all the same) and `tokenizer_from_keras_hub`:
`KerasHubAlbertTokenizer`, SentencePiece run on the raw text as keras-hub
does (its ids differ from HF's fast tokenizer's, which lower-cases and
strips accents first).
"""

import os

from modeling import config_schema
from modeling.albert import tokenizer as albert_tokenizer
from modeling.albert.config import HEADS_PER_GROUP_KEY
from modeling.albert.config import AlbertConfig
from modeling.albert.config import BertConfigError
from modeling.albert.encoder import EXACT_GELU
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import keras_hub_tokenizer_file

__all__ = ["EXACT_GELU", "HF_FORMAT", "KERAS_HUB_BACKBONE", "config_from_hf",
           "config_from_keras_hub", "config_to_hf", "load_keras_hub_config", "read_tokenizer",
           "tokenizer_from_keras_hub"]

KERAS_HUB_BACKBONE = "AlbertBackbone"

# HF's activation names -> an ALBERT config's.
_FROM_HF_ACTIVATION = {"gelu": EXACT_GELU, "gelu_python": EXACT_GELU, "gelu_new": "gelu_new",
                       "gelu_pytorch_tanh": "gelu_new", "gelu_fast": "gelu_new"}
# An ALBERT config's activation names -> HF's.
_TO_HF_ACTIVATION = {EXACT_GELU: "gelu", "gelu": "gelu_new", "gelu_new": "gelu_new",
                     "gelu_tanh": "gelu_new", "gelu_approximate": "gelu_new"}
# Keys HF's config carries beside the fields, with HF's defaults: written
# when the config does not already hold them (a folder read from HF does).
_HF_DEFAULTS = {"classifier_dropout_prob": 0.1, "position_embedding_type": "absolute",
                "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
# Extras of this project or of other releases that HF's file must not carry.
_NOT_HF_KEYS = ("layer_norm_epsilon", "ln_type")


def config_from_hf(values):
    """An `AlbertConfig` from HF's parsed `config.json` (a `BertConfigError`, one line)."""
    if not isinstance(values, dict):
        raise BertConfigError("an HF ALBERT config must be a JSON object, got %s"
                              % type(values).__name__)
    values = dict(values)
    model_type = values.get("model_type", "albert")
    if model_type != "albert":
        raise BertConfigError("model_type %r is not ALBERT; expected model_type 'albert'"
                              % (model_type,))
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise BertConfigError("position_embedding_type %r is not supported; the ALBERT encoder "
                              "has absolute position embeddings only" % (position_type,))
    act = values.get("hidden_act", "gelu_new")  # HF's default
    if isinstance(act, str):
        act = _FROM_HF_ACTIVATION.get(act.lower(), act)
    values["hidden_act"] = act
    if "layer_norm_eps" in values:
        values["layer_norm_epsilon"] = float(values.pop("layer_norm_eps"))
    config = AlbertConfig._from_file_values(values)  # pylint: disable=protected-access
    if config.embedding_size == config.hidden_size:
        raise BertConfigError(
            "embedding_size == hidden_size (%d): HF's ALBERT then still projects the "
            "embeddings (embedding_hidden_mapping_in), this encoder has no projection for "
            "equal widths" % config.hidden_size)
    return config


def config_to_hf(config, model_type="albert"):
    """HF's `config.json` content for an `AlbertConfig` (fields, extras, HF's keys)."""
    if config.embedding_size == config.hidden_size:
        raise BertConfigError(
            "embedding_size == hidden_size (%d): HF's ALBERT would add an "
            "embedding_hidden_mapping_in projection this model does not have"
            % config.hidden_size)
    if HEADS_PER_GROUP_KEY in (getattr(config, "extra", None) or {}):
        raise BertConfigError("a head-pruned ALBERT (%s) has no HF config.json; HF's "
                              "AlbertModel has the same heads in every block" % HEADS_PER_GROUP_KEY)
    values = config.to_dict()
    extra = dict(getattr(config, "extra", {}) or {})
    for key in _NOT_HF_KEYS:
        values.pop(key, None)
    act = values["hidden_act"]
    values["hidden_act"] = _TO_HF_ACTIVATION.get(act.lower(), act) if isinstance(act, str) \
        else act
    values["layer_norm_eps"] = float(extra.get("layer_norm_epsilon", 1e-12))
    values["model_type"] = model_type
    for key, default in _HF_DEFAULTS.items():
        values.setdefault(key, default)
    return values


def read_tokenizer(folder, config=None):
    del config  # The tokenizer is the folder's spiece.model and settings alone.
    return albert_tokenizer.AlbertTokenizer.from_folder(folder)


def config_from_keras_hub(values):
    """An `AlbertConfig` for keras-hub's `AlbertBackbone` config (a `BertConfigError`, one line)."""
    if not isinstance(values, dict):
        raise BertConfigError("a keras-hub AlbertBackbone config must be a JSON object, got %s"
                              % type(values).__name__)
    dropout = float(values.get("dropout", 0.0))
    try:
        layers, groups = int(values["num_layers"]), int(values.get("num_groups", 1))
        config = AlbertConfig(
            vocab_size=values["vocabulary_size"], embedding_size=values["embedding_dim"],
            hidden_size=values["hidden_dim"], num_hidden_layers=layers,
            num_hidden_groups=groups, inner_group_num=values.get("num_inner_repetitions", 1),
            num_attention_heads=values["num_heads"], intermediate_size=values["intermediate_dim"],
            hidden_act="gelu", hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
            max_position_embeddings=values.get("max_sequence_length", 512),
            type_vocab_size=values.get("num_segments", 2))
    except KeyError as e:
        raise BertConfigError("the keras-hub AlbertBackbone config has no %s" % e) from None
    if layers % groups:
        raise BertConfigError("num_layers=%d is not a multiple of num_groups=%d (keras-hub "
                              "refuses it too)" % (layers, groups))
    if config.embedding_size == config.hidden_size:
        raise BertConfigError(
            "embedding_dim == hidden_dim (%d): keras-hub's ALBERT then still projects the "
            "embeddings (embedding_projection), this encoder has no projection for equal widths"
            % config.hidden_size)
    return config


def tokenizer_from_keras_hub(folder, values, config=None):
    """`KerasHubAlbertTokenizer` over a preset's `assets/tokenizer/vocabulary.spm`."""
    del config
    model_file = keras_hub_tokenizer_file(folder, "vocabulary.spm", "SentencePiece model")
    for key in ("add_bos", "add_eos"):
        if values.get(key):
            raise TokenizerFormatError("%s: %s is true; ALBERT's framing adds [CLS] and [SEP] "
                                       "only" % (os.path.join(folder, "tokenizer.json"), key))
    return albert_tokenizer.KerasHubAlbertTokenizer(model_file)


def load_keras_hub_config(path):
    """The `AlbertConfig` of a preset's `config.json` at `path`, or None if it is not one."""
    return config_schema.keras_hub_preset_config(path, KERAS_HUB_BACKBONE, config_from_keras_hub,
                                                 BertConfigError, "ALBERT")


HF_FORMAT = HFFormat(
    model_types=("albert",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "AlbertModel", "masked_lm": "AlbertForMaskedLM",
                   "pretraining": "AlbertForPreTraining",
                   "classifier": "AlbertForSequenceClassification"},
    with_prefix="albert.",
    # keras-hub presets out (keras-hub converts the HF folder, modeling.pretrained.export)
    # and in (modeling.pretrained.keras_hub, the "keras_hub" name table).
    keras_hub_backbone=KERAS_HUB_BACKBONE,
    keras_hub_config=config_from_keras_hub,
    keras_hub_tokenizer=tokenizer_from_keras_hub,
)
