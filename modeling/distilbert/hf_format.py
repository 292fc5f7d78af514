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
"""

import json
import os

from data import atomic
from modeling.distilbert.checkpoint_names import PREFIX
from modeling.distilbert.config import DistilBertConfig
from modeling.distilbert.config import DistilBertConfigError
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import WordPieceTokenizer
from modeling.pretrained.tokenizers import read_json_file

__all__ = ["DistilBertTokenizer", "HF_FORMAT", "config_from_hf", "config_to_hf",
           "read_tokenizer"]


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


HF_FORMAT = HFFormat(
    model_types=("distilbert",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "DistilBertModel", "masked_lm": "DistilBertForMaskedLM",
                   "classifier": "DistilBertForSequenceClassification"},
    with_prefix=PREFIX,
    # keras-hub presets out: keras-hub converts the HF folder (modeling.pretrained.export).
    keras_hub_backbone="DistilBertBackbone",
    # `BertClassifier(sentence_vector="first_token")`: HF's pre_classifier and classifier.
    classifier_table=lambda: {"pre_classifier.weight": ("pre_classifier.kernel", True),
                              "pre_classifier.bias": ("pre_classifier.bias", False),
                              "classifier.weight": ("output_weights", False),
                              "classifier.bias": ("output_bias", False)},
)
