"""BERT's Hugging Face folder format: `model_type` "bert", its config and tokenizer.

HF's BERT `config.json` has Google's field names plus HF's own keys;
`config_from_hf` reads it as `load_bert_config` does (`layer_norm_eps` ->
the extra `layer_norm_epsilon`, activation spellings mapped, relative
position embeddings refused) and `config_to_hf` writes it back, with HF's
keys for what Google's file leaves implicit. The tokenizer is WordPiece
over `vocab.txt` (`modeling.pretrained.tokenizers.WordPieceTokenizer`).
"""


from modeling.bert import config as bert_config
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import keras_hub_tokenizer_file
from modeling.pretrained.tokenizers import WordPieceTokenizer

__all__ = ["HF_FORMAT", "config_from_hf", "config_to_hf"]

# HF's activation names for this project's.
_TO_HF_ACTIVATION = {"gelu": "gelu", "gelu_new": "gelu_new", "relu": "relu", "silu": "silu",
                     "swish": "swish", "tanh": "tanh", "linear": "linear"}
# Extras this project keeps that HF's file must not carry.
_PROJECT_KEYS = ("layer_norm_epsilon",)


def config_from_hf(values):
    """A `BertConfig` from HF's parsed `config.json` (a `BertConfigError` on bad values)."""
    parsed = bert_config._hf_to_google_dict(dict(values))  # pylint: disable=protected-access
    return bert_config.BertConfig._from_file_values(parsed)  # pylint: disable=protected-access


def config_to_hf(config, model_type="bert"):
    """HF's `config.json` content for a `BertConfig` (fields, then HF's own keys)."""
    values = config.to_dict()
    extra = dict(getattr(config, "extra", {}) or {})
    for key in _PROJECT_KEYS:
        values.pop(key, None)
    values["hidden_act"] = _TO_HF_ACTIVATION.get(values["hidden_act"], values["hidden_act"])
    values["layer_norm_eps"] = float(extra.get("layer_norm_epsilon", 1e-12))
    values["model_type"] = model_type
    values.setdefault("pad_token_id", 0)
    values.setdefault("position_embedding_type", "absolute")
    return values


def read_tokenizer(folder, config=None):
    del config  # BERT's tokenizer is the folder's vocab.txt and settings alone.
    return WordPieceTokenizer.from_folder(folder)


def config_from_keras_hub(values):
    """A `BertConfig` for keras-hub's `BertBackbone` config.

    keras-hub's BERT computes the tanh approximation of GELU whatever the
    release used (`keras_hub.src.utils.keras_utils.gelu_approximate`), and
    one dropout rate; the config says what the preset computes.
    """
    dropout = float(values.get("dropout", 0.1))
    return bert_config.BertConfig(
        vocab_size=values["vocabulary_size"], hidden_size=values["hidden_dim"],
        num_hidden_layers=values["num_layers"], num_attention_heads=values["num_heads"],
        intermediate_size=values["intermediate_dim"], hidden_act="gelu_new",
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
        max_position_embeddings=values.get("max_sequence_length", 512),
        type_vocab_size=values.get("num_segments", 2))


def tokenizer_from_keras_hub(folder, values, config=None):
    """WordPiece over the preset's `assets/tokenizer/vocabulary.txt`, cased as its `lowercase`."""
    del config
    vocab_file = keras_hub_tokenizer_file(folder, "vocabulary.txt", "vocabulary")
    return WordPieceTokenizer(vocab_file, do_lower_case=bool(values.get("lowercase", True)))


HF_FORMAT = HFFormat(
    model_types=("bert",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "BertModel", "masked_lm": "BertForMaskedLM",
                   "pretraining": "BertForPreTraining",
                   "classifier": "BertForSequenceClassification"},
    with_prefix="bert.",
    # Google's `output_weights` is [num_labels, hidden], as PyTorch's Linear.
    classifier_table=lambda: {"classifier.weight": ("output_weights", False),
                              "classifier.bias": ("output_bias", False)},
    keras_hub_backbone="BertBackbone",
    keras_hub_config=config_from_keras_hub,
    keras_hub_tokenizer=tokenizer_from_keras_hub,
)
