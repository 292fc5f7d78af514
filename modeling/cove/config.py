"""`CoveConfig`: the hyper-parameters of CoVe's translation model, as a flat JSON file.

    {"vocab_size": 2275, "target_vocab_size": 2275, "embedding_size": 300,
     "hidden_size": 300, "num_encoder_layers": 2, "num_decoder_layers": 2,
     "dropout": 0.2}

`vocab_size` is the source (encoder) vocabulary's size, `target_vocab_size`
the decoder's softmax (the same as `vocab_size` when left out: the bundled
word vocabulary holds English words and Chinese characters, so one file
serves both sides). `embedding_size` is the width of the word vectors of both
sides, `hidden_size` the units of every LSTM (each direction of the
encoder's BiLSTM, so the encoder's outputs are `2 * hidden_size` wide, and
the decoder's LSTMs and attentional state). McCann et al. (2017) used 300-d
GloVe vectors and 300 units per direction: CoVe vectors of 600 dimensions.

Saved as `cove_config.json` by the pre-training job. Every bad value is a
`CoveConfigError` of one line naming the key (and the file, when read from
one).
"""


from modeling import json_config

__all__ = ["CONFIG_FILE_NAME", "CoveConfig", "CoveConfigError", "CoveWidths", "load_cove_config"]

CONFIG_FILE_NAME = "cove_config.json"

_FIELDS = ("vocab_size", "target_vocab_size", "embedding_size", "hidden_size",
           "num_encoder_layers", "num_decoder_layers", "dropout")


class CoveConfigError(ValueError):
    """A CoVe config (file or dict) with a missing, unknown or invalid value."""


def _int(name, value, minimum=1):
    return json_config.check_int(name, value, minimum, CoveConfigError)


class CoveWidths:
    """CoVe's derived sizes, of `embedding_size`, `hidden_size` and
    `num_encoder_layers` (a `CoveConfig`'s and a `CoveNetwork`'s)."""

    @property
    def output_size(self):
        """Width of the encoder's outputs (forward and backward side by side)."""
        return 2 * self.hidden_size

    @property
    def feature_size(self):
        """Width of CoVe's downstream input: [word vectors ; encoder outputs]."""
        return self.embedding_size + 2 * self.hidden_size

    @property
    def num_hidden_layers(self):
        return self.num_encoder_layers


class CoveConfig(CoveWidths, json_config.JsonConfig):
    """CoVe's sizes (see the module docstring).

    Args:
        vocab_size: source words (at least 3: `<S>`, `</S>`, `<UNK>`).
        target_vocab_size: target words; None: `vocab_size`.
        embedding_size: word vectors of both sides.
        hidden_size: units of each LSTM (per direction in the encoder).
        num_encoder_layers: BiLSTM layers of the encoder (CoVe's: 2).
        num_decoder_layers: LSTM layers of the decoder (CoVe's: 2).
        dropout: on every LSTM's input and on the attentional state, in [0, 1).
    """

    KIND = "CoVe config"
    ERROR = CoveConfigError
    FILE_NAME = CONFIG_FILE_NAME

    def __init__(self, vocab_size, target_vocab_size=None, embedding_size=300,
                 hidden_size=300, num_encoder_layers=2, num_decoder_layers=2, dropout=0.2):
        self.vocab_size = _int("vocab_size", vocab_size, 3)
        self.target_vocab_size = _int(
            "target_vocab_size", vocab_size if target_vocab_size is None else target_vocab_size,
            3)
        self.embedding_size = _int("embedding_size", embedding_size)
        self.hidden_size = _int("hidden_size", hidden_size)
        self.num_encoder_layers = _int("num_encoder_layers", num_encoder_layers)
        self.num_decoder_layers = _int("num_decoder_layers", num_decoder_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (
                0 <= dropout < 1):
            raise CoveConfigError("`dropout` must be a number in [0, 1), got %r" % (dropout,))
        self.dropout = float(dropout)

    # ------------------------------------------------------- generic names

    @property
    def hidden_dropout_prob(self):
        return self.dropout

    # ---------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, values):
        cls.check_object(values, _FIELDS, required=("vocab_size",))
        return cls(**values)

    def to_dict(self):
        return {name: getattr(self, name) for name in _FIELDS}

    def replace(self, **changes):
        values = self.to_dict()
        values.update(changes)
        return type(self)(**values)


def load_cove_config(path):
    """Reads a CoVe config file, or `cove_config.json` in a model folder."""
    return CoveConfig.load(path)
