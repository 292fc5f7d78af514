"""RoBERTa's Hugging Face folder format: `model_type` "roberta", its config and tokenizer.

HF's RoBERTa `config.json` has BERT's field names (HF's `RobertaConfig`
is BERT's with other token ids), so `config_from_hf` reads it as BERT's
`hf_format` does (`layer_norm_eps` -> the extra `layer_norm_epsilon`,
activation spellings mapped, relative position embeddings refused), with
one difference that matters: keys the file leaves out take the defaults
of HF's `RobertaConfig` *class* -- BERT's 512 positions, 2 token types,
epsilon 1e-12 -- not those of the released checkpoints (514, 1, 1e-5)
that `RobertaConfig` here defaults to, because that is what
`transformers` builds for the same file. `config_to_hf` writes every key
out, so the file means the same thing to both.

Decoder configurations (`is_decoder`, `add_cross_attention`) are refused:
the encoder has no causal mask and no cross-attention.

The tokenizer is byte-level BPE over `vocab.json` + `merges.txt`
(`modeling.roberta.tokenizer.RobertaTokenizer`).

keras-hub presets (`RobertaBackbone`) in: `config_from_keras_hub` gives the
config of what the backbone computes (exact GELU, epsilon 1e-5, one dropout
rate, `max_sequence_length` positions counted from 0, no token types);
`weights_from_keras_hub` puts its position rows back past the padding id
(rows 0 and 1, which no real token reads, are zeros) and gives the one
token-type row keras-hub lacks as zeros, so this encoder computes the same
sums. The tokenizer is the preset's `assets/tokenizer/vocabulary.json` and
`merges.txt` read as keras-hub reads them (`tokenizer_from_keras_hub`).
"""

import json

import numpy as np

from modeling import config_schema
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import keras_hub_tokenizer_file
from modeling.roberta import config as roberta_config
from modeling.roberta.tokenizer import DEFAULT_SPECIAL_TOKENS
from modeling.roberta.tokenizer import RobertaTokenizer

__all__ = ["HF_FORMAT", "KERAS_HUB_BACKBONE", "config_from_hf", "config_from_keras_hub",
           "config_to_hf", "read_tokenizer", "tokenizer_from_keras_hub",
           "weights_from_keras_hub"]

KERAS_HUB_BACKBONE = "RobertaBackbone"
# keras-hub's RoBERTa position row i is HF's row i + pad_token_id + 1 (its converter's offset).
_KERAS_HUB_POSITION_OFFSET = roberta_config.PAD_TOKEN_ID + 1
_KERAS_HUB_POSITIONS = "embeddings/position_embedding/embeddings"
# The name the token-type row takes in the rewritten weights (keras-hub has none).
KERAS_HUB_TOKEN_TYPES = "token_type_embedding/embeddings"

# transformers' `RobertaConfig` defaults for the keys whose defaults differ
# from this project's `RobertaConfig` (see the module docstring).
_HF_CLASS_DEFAULTS = {"max_position_embeddings": 512, "type_vocab_size": 2,
                      "layer_norm_eps": 1e-12}
# Extras this project keeps that HF's file must not carry (written under HF's names).
_PROJECT_KEYS = ("layer_norm_epsilon", "architectures")


def config_from_hf(values):
    """A `RobertaConfig` from HF's parsed `config.json` (`RobertaConfigError` on bad values)."""
    if not isinstance(values, dict):
        raise roberta_config.RobertaConfigError(
            "expected a JSON object of RoBERTa config fields, got a JSON %s"
            % type(values).__name__)
    values = dict(values)
    model_type = values.get("model_type", "roberta")
    if model_type != "roberta":
        raise roberta_config.RobertaConfigError(
            f"model_type {model_type!r} is not RoBERTa; only model_type 'roberta' can be "
            "read as a RobertaConfig.")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise roberta_config.RobertaConfigError(
            f"position_embedding_type {position_type!r} is not supported; the RoBERTa "
            "encoder has absolute position embeddings only.")
    for key in ("is_decoder", "add_cross_attention"):
        if values.get(key):
            raise roberta_config.RobertaConfigError(
                f"{key} is true: a RoBERTa decoder is not supported (the encoder has no "
                "causal mask and no cross-attention).")
    for key, default in _HF_CLASS_DEFAULTS.items():
        values.setdefault(key, default)
    act = values.get("hidden_act", "gelu")
    if isinstance(act, str):
        values["hidden_act"] = roberta_config.HF_ACTIVATIONS.get(act.lower(), act)
    values["layer_norm_epsilon"] = values.pop("layer_norm_eps")
    build = roberta_config.RobertaConfig._from_file_values  # pylint: disable=protected-access
    return build(values)


def config_to_hf(config, model_type="roberta"):
    """HF's `config.json` content for a `RobertaConfig` (fields, token ids, HF's own keys)."""
    values = config.to_dict()
    extra = dict(getattr(config, "extra", {}) or {})
    for key in _PROJECT_KEYS:
        values.pop(key, None)
    values["layer_norm_eps"] = float(extra.get("layer_norm_epsilon",
                                               roberta_config.ROBERTA_LAYER_NORM_EPSILON))
    for key, default in (("pad_token_id", roberta_config.PAD_TOKEN_ID),
                         ("bos_token_id", roberta_config.BOS_TOKEN_ID),
                         ("eos_token_id", roberta_config.EOS_TOKEN_ID)):
        values[key] = int(extra.get(key, default))
    values["model_type"] = model_type
    values.setdefault("position_embedding_type", "absolute")
    return values


def read_tokenizer(folder, config=None):
    del config  # The folder's vocab.json, merges.txt and settings say it all.
    return RobertaTokenizer.from_folder(folder)


def config_from_keras_hub(values):
    """A `RobertaConfig` for keras-hub's `RobertaBackbone` config (a `RobertaConfigError`, one line).

    keras-hub's RoBERTa computes the exact GELU with LayerNorm epsilon 1e-5
    and one dropout rate; its `max_sequence_length` position rows start at
    the first token, HF's (and this encoder's) two rows later.
    """
    if not isinstance(values, dict):
        raise roberta_config.RobertaConfigError(
            "a keras-hub RobertaBackbone config must be a JSON object, got %s"
            % type(values).__name__)
    dropout = float(values.get("dropout", 0.1))
    try:
        return roberta_config.RobertaConfig(
            vocab_size=values["vocabulary_size"], hidden_size=values["hidden_dim"],
            num_hidden_layers=values["num_layers"], num_attention_heads=values["num_heads"],
            intermediate_size=values["intermediate_dim"], hidden_act="gelu",
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
            max_position_embeddings=int(values.get("max_sequence_length", 512))
            + _KERAS_HUB_POSITION_OFFSET, type_vocab_size=1)
    except KeyError as e:
        raise roberta_config.RobertaConfigError(
            "the keras-hub RobertaBackbone config has no %s" % e) from None


def weights_from_keras_hub(arrays):
    """keras-hub's RoBERTa weights in this encoder's layout (see the module docstring)."""
    arrays = dict(arrays)
    positions = arrays.get(_KERAS_HUB_POSITIONS)
    if positions is not None:
        arrays[_KERAS_HUB_POSITIONS] = np.concatenate(
            [np.zeros((_KERAS_HUB_POSITION_OFFSET, positions.shape[1]), positions.dtype),
             positions])
        arrays[KERAS_HUB_TOKEN_TYPES] = np.zeros((1, positions.shape[1]), positions.dtype)
    return arrays


def _keras_hub_merges(merges_file):
    """keras-hub's reading of `merges.txt`: every line a merge, `#version` lines skipped."""
    try:
        with open(merges_file, encoding="utf-8") as f:
            lines = [line.rstrip() for line in f]
    except (OSError, UnicodeDecodeError) as e:
        raise TokenizerFormatError("%s: not readable UTF-8 text (the BPE merges): %s"
                                   % (merges_file, e)) from None
    merges = []
    for number, line in enumerate(lines, 1):
        if "#version:" in line.lstrip():
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise TokenizerFormatError("%s line %d: expected two symbols separated by a space, "
                                       "got %r" % (merges_file, number, line))
        merges.append(tuple(parts))
    return merges


def tokenizer_from_keras_hub(folder, values, config=None):
    """RoBERTa's tokenizer over a preset's `assets/tokenizer/` files, as keras-hub's reads them.

    keras-hub's `RobertaTokenizer` keeps its `unsplittable_tokens` whole in
    text, strips no whitespace around them and frames as fairseq (`<s> A
    </s></s> B </s>`, its classifier preprocessor); a vocabulary whose
    `<pad>` is not the config's padding id would put positions elsewhere,
    and is refused.
    """
    vocab_file = keras_hub_tokenizer_file(folder, "vocabulary.json", "byte-level BPE vocabulary")
    merges_file = keras_hub_tokenizer_file(folder, "merges.txt", "byte-level BPE merges")
    try:
        with open(vocab_file, encoding="utf-8") as f:
            vocab = json.load(f)
    except (OSError, ValueError) as e:
        raise TokenizerFormatError("%s: not a JSON vocabulary: %s"
                                   % (vocab_file, str(e).splitlines()[0])) from None
    specials = {role: token for role, token in DEFAULT_SPECIAL_TOKENS.items()
                if role != "unk" or token in vocab}
    whole = values.get("unsplittable_tokens")
    tokenizer = RobertaTokenizer(
        vocab_file, merges_file, add_prefix_space=bool(values.get("add_prefix_space", False)),
        special_tokens=specials, strip={}, merges=_keras_hub_merges(merges_file),
        whole_tokens=None if whole is None else [t for t in whole if isinstance(t, str)])
    pad = config.pad_token_id if config is not None else roberta_config.PAD_TOKEN_ID
    if tokenizer.token_id("pad") != pad:
        raise TokenizerFormatError(
            "%s: <pad> is id %d, the encoder counts positions from padding id %d"
            % (vocab_file, tokenizer.token_id("pad"), pad))
    return tokenizer


def load_keras_hub_config(path):
    """The `RobertaConfig` of a preset's `config.json` at `path`, or None if it is not one."""
    return config_schema.keras_hub_preset_config(path, KERAS_HUB_BACKBONE, config_from_keras_hub,
                                                 roberta_config.RobertaConfigError, "RoBERTa")


def fold_token_type(arrays):
    """RoBERTa's one token-type row added to every position row (keras-hub has no token types).

    HF adds `token_type_embeddings[0]` to every token; keras-hub's RoBERTa
    converter drops it (released RoBERTa checkpoints hold zeros there), so a
    model whose row is not zero (fine-tuned here) would lose it. Adding it
    to each position row computes the same sums.
    """
    arrays = dict(arrays)
    types = next((n for n in arrays if n.endswith("embeddings.token_type_embeddings.weight")), None)
    if types is None:
        return arrays
    positions = types.replace("token_type_embeddings", "position_embeddings")
    arrays[positions] = arrays[positions] + arrays[types][0]
    arrays[types] = arrays[types] * 0.0
    return arrays


HF_FORMAT = HFFormat(
    model_types=("roberta",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "RobertaModel", "masked_lm": "RobertaForMaskedLM",
                   "classifier": "RobertaForSequenceClassification"},
    with_prefix="roberta.",
    # keras-hub presets out (keras-hub converts the HF folder, modeling.pretrained.export)
    # and in (modeling.pretrained.keras_hub, the "keras_hub" name table).
    keras_hub_backbone=KERAS_HUB_BACKBONE,
    keras_hub_arrays=fold_token_type,
    keras_hub_config=config_from_keras_hub,
    keras_hub_tokenizer=tokenizer_from_keras_hub,
    keras_hub_weights=weights_from_keras_hub,
    # HF's head is dense -> tanh -> out_proj on <s>: this project's pooler and output layer.
    classifier_table=lambda: {"classifier.dense.weight": ("encoder.pooler.kernel", True),
                              "classifier.dense.bias": ("encoder.pooler.bias", False),
                              "classifier.out_proj.weight": ("output_weights", False),
                              "classifier.out_proj.bias": ("output_bias", False)},
)
