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
"""

from modeling.pretrained.formats import HFFormat
from modeling.roberta import config as roberta_config
from modeling.roberta.tokenizer import RobertaTokenizer

__all__ = ["HF_FORMAT", "config_from_hf", "config_to_hf", "read_tokenizer"]

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
    # keras-hub presets out: keras-hub converts the HF folder (modeling.pretrained.export).
    keras_hub_backbone="RobertaBackbone",
    keras_hub_arrays=fold_token_type,
    # HF's head is dense -> tanh -> out_proj on <s>: this project's pooler and output layer.
    classifier_table=lambda: {"classifier.dense.weight": ("encoder.pooler.kernel", True),
                              "classifier.dense.bias": ("encoder.pooler.bias", False),
                              "classifier.out_proj.weight": ("output_weights", False),
                              "classifier.out_proj.bias": ("output_bias", False)},
)
