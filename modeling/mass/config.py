"""`MassConfig`: a BERT config plus the decoder's depth, saved as `mass_config.json`.

MASS (Song et al. 2019) is an encoder-decoder built from BERT's parts: the
encoder is BERT's stack of post-LN blocks, the decoder the same blocks with a
cross-attention half, and both read one shared embedding layer (tokens,
positions, languages). So its hyper-parameters are `bert_config.json`'s,
with the same names, defaults and checks (`modeling.bert.config.BertConfig`),
and one more:

    num_decoder_layers   decoder blocks (default: `num_hidden_layers`)

`type_vocab_size` counts the languages: the segment ids are language ids
(the demo's English 0 and Chinese 1), as XLM's and MASS's language
embeddings. A file is checked like a BERT one (unknown keys name the
closest known one; the structural fields must be given).
"""

import copy
import os

from modeling import config_schema
from modeling.bert.config import BertConfig
from modeling.bert.config import BertConfigError

__all__ = ["MassConfig", "MassConfigError", "load_mass_config"]

MassConfigError = BertConfigError

_BERT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "hidden_dropout_prob",
                "attention_probs_dropout_prob", "max_position_embeddings",
                "type_vocab_size", "initializer_range")

MASS_SCHEMA = config_schema.ConfigSchema(
    "MASS", _BERT_FIELDS + ("num_decoder_layers",),
    ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
     "intermediate_size"),
    extra_keys={"layer_norm_epsilon"})


class MassConfig(BertConfig):
    """BERT's fields (see `BertConfig`) and `num_decoder_layers`.

    Args:
        num_decoder_layers: decoder blocks; None (or absent) means as many
            as the encoder's `num_hidden_layers`.
        Other arguments: as `BertConfig`.
    """

    SCHEMA = MASS_SCHEMA

    def __init__(self, vocab_size, num_decoder_layers=None, **values):
        super().__init__(vocab_size, **values)
        if num_decoder_layers is None:
            num_decoder_layers = self.num_hidden_layers
        if isinstance(num_decoder_layers, bool) or not isinstance(
                num_decoder_layers, (int, float)) or num_decoder_layers <= 0 or (
                    isinstance(num_decoder_layers, float)
                    and not num_decoder_layers.is_integer()):
            raise MassConfigError("`num_decoder_layers` must be a positive integer, got %r"
                                  % (num_decoder_layers,))
        self.num_decoder_layers = int(num_decoder_layers)

    def to_dict(self):
        output = {name: getattr(self, name) for name in _BERT_FIELDS}
        output["num_decoder_layers"] = self.num_decoder_layers
        for key, value in self.extra.items():
            output[key] = copy.deepcopy(value)
        return output

    def __eq__(self, other):
        if not isinstance(other, MassConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self):
        return "MassConfig(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


def load_mass_config(path):
    """Reads a `mass_config.json` (a file, or a directory holding one)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "mass_config.json")
        if not os.path.isfile(candidate):
            raise FileNotFoundError("No mass_config.json in directory %s" % path)
        path = candidate
    return MassConfig.from_json_file(path)
