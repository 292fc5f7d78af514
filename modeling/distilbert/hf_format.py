"""DistilBERT's Hugging Face folder format: `model_type` "distilbert", its config and tokenizer.

The config needs no mapping: `DistilBertConfig` *is* HF's `config.json`
(HF's field names; `config_from_hf` checks it against the family's schema,
`config_to_hf` writes it back with `model_type`).

The tokenizer is BERT's WordPiece over `vocab.txt`, but HF's
`DistilBertTokenizer` lists only `input_ids` and `attention_mask` as model
inputs (`model_input_names`): it returns no `token_type_ids`, and the model
has no token-type embeddings. `DistilBertTokenizer` here is
`WordPieceTokenizer` with segment ids that are all 0 (what the encoder
ignores anyway, and what a caller feeding `segment_ids` should pass), and
it writes `tokenizer_class: DistilBertTokenizer` so that HF reads the
saved folder back as DistilBERT's tokenizer (without `token_type_ids`).

keras-hub presets (`DistilBertBackbone`) in: `config_from_keras_hub` (the
exact GELU, one dropout rate, learned positions) and
`tokenizer_from_keras_hub`, `KerasHubDistilBertTokenizer` over the preset's
`assets/tokenizer/vocabulary.txt` with keras-hub's settings from
`tokenizer.json`: `lowercase` (full case folding, keeping accents unless
`strip_accents` says otherwise, where BERT's lower-casing strips them) and
`special_tokens_in_strings` (False: `[MASK]` written in text is split like
any other text, as keras-hub does).
"""

import json
import os
import unicodedata

from data import atomic
from data import tokenization
from modeling import config_schema
from modeling.distilbert.checkpoint_names import PREFIX
from modeling.distilbert.config import DistilBertConfig
from modeling.distilbert.config import DistilBertConfigError
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import keras_hub_tokenizer_file
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import WordPieceTokenizer
from modeling.pretrained.tokenizers import read_json_file

__all__ = ["DistilBertTokenizer", "HF_FORMAT", "KERAS_HUB_BACKBONE",
           "KerasHubDistilBertTokenizer", "config_from_hf", "config_from_keras_hub",
           "config_to_hf", "load_keras_hub_config", "read_tokenizer",
           "tokenizer_from_keras_hub"]

KERAS_HUB_BACKBONE = "DistilBertBackbone"


def config_from_hf(values):
    """A `DistilBertConfig` from HF's parsed `config.json` (`DistilBertConfigError` if bad)."""
    return DistilBertConfig.SCHEMA.build(dict(values), DistilBertConfig.from_dict,
                                         DistilBertConfigError)


def config_to_hf(config, model_type="distilbert"):
    """HF's `config.json` content for a `DistilBertConfig` (its fields and extras)."""
    values = config.to_dict()
    values.pop("architectures", None)  # The writer names the model it writes.
    values["model_type"] = model_type
    return values


class DistilBertTokenizer(WordPieceTokenizer):
    """BERT's WordPiece tokenizer with HF DistilBERT's outputs: no token types (all 0)."""

    def build_inputs(self, ids_a, ids_b=None):
        encoded = super().build_inputs(ids_a, ids_b)
        return Encoded(encoded.input_ids, [0] * len(encoded.input_ids))

    def encode(self, text, pair=None, add_special_tokens=True):
        encoded = super().encode(text, pair, add_special_tokens)
        return Encoded(encoded.input_ids, [0] * len(encoded.input_ids))

    def save(self, folder):
        paths = super().save(folder)
        settings_path = os.path.join(folder, "tokenizer_config.json")
        settings = read_json_file(settings_path, "HF tokenizer settings")
        settings["tokenizer_class"] = "DistilBertTokenizer"
        atomic.write_text(settings_path, json.dumps(settings, indent=2) + "\n")
        return paths


def read_tokenizer(folder, config=None):
    del config  # The tokenizer is the folder's vocab.txt and settings alone.
    return DistilBertTokenizer.from_folder(folder)


def _casefold(text):
    """Unicode's NFKC_Casefold, as keras-hub's lower-casing (`tf_text.case_fold_utf8`)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


class KerasHubDistilBertTokenizer(DistilBertTokenizer):
    """keras-hub's `DistilBertTokenizer` ids over a preset's vocabulary (see the module docstring).

    Text is cleaned and split as BERT's (whitespace, punctuation, CJK
    characters), accents are removed only with `strip_accents`, and each
    word is case-folded when `lowercase`; the WordPiece step is BERT's.
    Framing and segment ids are `DistilBertTokenizer`'s, which are those of
    keras-hub's classifier preprocessor (`[CLS] A [SEP] B [SEP]`).
    """

    def __init__(self, vocab_file, lowercase=False, strip_accents=False,
                 special_tokens_in_strings=False):
        super().__init__(vocab_file, do_lower_case=bool(lowercase))
        self.strip_accents = bool(strip_accents)
        self._split = tokenization.BasicTokenizer(do_lower_case=False)
        if not special_tokens_in_strings:
            self._special_pattern = None  # keras-hub splits them as any text

    def _pieces(self, text):
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text)
                           if unicodedata.category(c) != "Mn")
        pieces = []
        for word in self._split.tokenize(text):
            if self.do_lower_case:
                word = _casefold(word)
            pieces.extend(self._full.wordpiece_tokenizer.tokenize(word))
        return pieces


def config_from_keras_hub(values):
    """A `DistilBertConfig` for keras-hub's `DistilBertBackbone` config (one-line errors)."""
    if not isinstance(values, dict):
        raise DistilBertConfigError("a keras-hub DistilBertBackbone config must be a JSON "
                                    "object, got %s" % type(values).__name__)
    dropout = float(values.get("dropout", 0.1))
    try:
        return DistilBertConfig(
            vocab_size=values["vocabulary_size"], dim=values["hidden_dim"],
            n_layers=values["num_layers"], n_heads=values["num_heads"],
            hidden_dim=values["intermediate_dim"],
            max_position_embeddings=values.get("max_sequence_length", 512),
            dropout=dropout, attention_dropout=dropout, activation="gelu")
    except KeyError as e:
        raise DistilBertConfigError("the keras-hub DistilBertBackbone config has no %s"
                                    % e) from None


def tokenizer_from_keras_hub(folder, values, config=None):
    """`KerasHubDistilBertTokenizer` over a preset's `assets/tokenizer/vocabulary.txt`."""
    del config
    vocab_file = keras_hub_tokenizer_file(folder, "vocabulary.txt", "WordPiece vocabulary")
    for key, expected in (("suffix_indicator", "##"), ("oov_token", "[UNK]"), ("split", True)):
        if values.get(key, expected) != expected:
            raise TokenizerFormatError("%s: %s=%r; only keras-hub's default %r is read"
                                       % (os.path.join(folder, "tokenizer.json"), key,
                                          values[key], expected))
    return KerasHubDistilBertTokenizer(
        vocab_file, lowercase=values.get("lowercase", False),
        strip_accents=values.get("strip_accents", False),
        special_tokens_in_strings=values.get("special_tokens_in_strings", False))


def load_keras_hub_config(path):
    """The `DistilBertConfig` of a preset's `config.json` at `path`, or None if it is not one."""
    return config_schema.keras_hub_preset_config(path, KERAS_HUB_BACKBONE, config_from_keras_hub,
                                                 DistilBertConfigError, "DistilBERT")


HF_FORMAT = HFFormat(
    model_types=("distilbert",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "DistilBertModel", "masked_lm": "DistilBertForMaskedLM",
                   "classifier": "DistilBertForSequenceClassification"},
    with_prefix=PREFIX,
    # keras-hub presets out (keras-hub converts the HF folder, modeling.pretrained.export)
    # and in (modeling.pretrained.keras_hub, the "keras_hub" name table).
    keras_hub_backbone=KERAS_HUB_BACKBONE,
    keras_hub_config=config_from_keras_hub,
    keras_hub_tokenizer=tokenizer_from_keras_hub,
    # `BertClassifier(sentence_vector="first_token")`: HF's pre_classifier and classifier.
    classifier_table=lambda: {"pre_classifier.weight": ("pre_classifier.kernel", True),
                              "pre_classifier.bias": ("pre_classifier.bias", False),
                              "classifier.weight": ("output_weights", False),
                              "classifier.bias": ("output_bias", False)},
)
