"""`AwdLstmConfig`: the AWD-LSTM's hyper-parameters (ULMFiT's language model).

The file (`ulmfit_config.json`) uses fastai's names (`awd_lstm_lm_config`)
where there is one:

    {"vocab_size": 60000, "emb_sz": 400, "n_hid": 1150, "n_layers": 3,
     "embed_p": 0.02, "input_p": 0.25, "weight_p": 0.2, "hidden_p": 0.15,
     "output_p": 0.1, "tie_weights": true, "out_bias": true, "initrange": 0.1}

    vocab_size  words of the embedding and of the (tied) softmax
    emb_sz      embedding width, also the width of the last LSTM layer
                (whose output the tied softmax reads)
    n_hid       units of every other LSTM layer (the paper: 1150)
    n_layers    LSTM layers (3)
    embed_p     embedding dropout: whole rows of the embedding matrix
                (word types) dropped, the rest scaled by 1 / (1 - p)
    input_p     variational dropout on the embedding output (one mask per
                sequence, the same at every time step)
    weight_p    DropConnect on each LSTM's hidden-to-hidden matrix (one
                mask per forward pass; off at inference)
    hidden_p    variational dropout between LSTM layers
    output_p    variational dropout on the last layer's output (what the LM
                softmax reads)
    tie_weights must be true: the softmax is the embedding matrix
    out_bias    the softmax has a bias of its own (fastai's default)
    initrange   the embedding matrix starts uniform in [-initrange, initrange]
                (fastai's 0.1; the toy-sized demo model learns much faster
                from 0.5: its 64-wide tied softmax needs larger word vectors)

The defaults are fastai's LM configuration (the paper's sizes; fastai's
`n_hid` is 1152). Accessors with BERT's names (`embedding_size`,
`hidden_size` = `n_hid`, `num_hidden_layers`) serve generic code.
"""


from data import word_vocab as vocabulary
from modeling import json_config

__all__ = ["AwdLstmConfig", "AwdLstmConfigError", "load_awd_lstm_config", "CONFIG_FILE_NAME"]

CONFIG_FILE_NAME = "ulmfit_config.json"
# JSON key -> attribute.
_FIELDS = (("vocab_size", "vocab_size"), ("emb_sz", "embedding_size"),
           ("n_hid", "hidden_size"), ("n_layers", "num_hidden_layers"),
           ("embed_p", "embed_p"), ("input_p", "input_p"), ("weight_p", "weight_p"),
           ("hidden_p", "hidden_p"), ("output_p", "output_p"),
           ("tie_weights", "tie_weights"), ("out_bias", "out_bias"),
           ("initrange", "initrange"))
DROPOUTS = ("embed_p", "input_p", "weight_p", "hidden_p", "output_p")


class AwdLstmConfigError(ValueError):
    """An AWD-LSTM config file (or dict) with a missing, unknown or invalid value."""


def _int(name, value, minimum=1):
    return json_config.check_int(name, value, minimum, AwdLstmConfigError)


def _probability(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise AwdLstmConfigError("`%s` must be a dropout probability in [0, 1), got %r"
                                 % (name, value))
    return float(value)


def _bool(name, value):
    if not isinstance(value, bool):
        raise AwdLstmConfigError("`%s` must be true or false, got %r" % (name, value))
    return value


class AwdLstmConfig(json_config.JsonConfig):
    """The AWD-LSTM's configuration (see the module docstring).

    Args:
        vocab_size: words (at least `<S> </S> <UNK>`).
        embedding_size: `emb_sz`.
        hidden_size: `n_hid`.
        num_hidden_layers: `n_layers`.
        embed_p, input_p, weight_p, hidden_p, output_p: dropout probabilities.
        tie_weights: must be True.
        out_bias: the LM softmax has a bias.
        initrange: the embedding matrix's initial uniform range.
    """

    KIND = "AWD-LSTM config"
    ERROR = AwdLstmConfigError
    FILE_NAME = CONFIG_FILE_NAME

    def __init__(self, vocab_size, embedding_size=400, hidden_size=1150, num_hidden_layers=3,
                 embed_p=0.02, input_p=0.25, weight_p=0.2, hidden_p=0.15, output_p=0.1,
                 tie_weights=True, out_bias=True, initrange=0.1):
        self.vocab_size = _int("vocab_size", vocab_size, len(vocabulary.SPECIAL_WORDS))
        self.embedding_size = _int("emb_sz", embedding_size)
        self.hidden_size = _int("n_hid", hidden_size)
        self.num_hidden_layers = _int("n_layers", num_hidden_layers)
        self.embed_p = _probability("embed_p", embed_p)
        self.input_p = _probability("input_p", input_p)
        self.weight_p = _probability("weight_p", weight_p)
        self.hidden_p = _probability("hidden_p", hidden_p)
        self.output_p = _probability("output_p", output_p)
        if tie_weights is not True:
            raise AwdLstmConfigError("`tie_weights` must be true: the AWD-LSTM's softmax is its "
                                     "embedding matrix, got %r" % (tie_weights,))
        self.tie_weights = True
        self.out_bias = _bool("out_bias", out_bias)
        if isinstance(initrange, bool) or not isinstance(initrange, (int, float)) or not (
                0 < initrange <= 10):
            raise AwdLstmConfigError("`initrange` must be a number in (0, 10], got %r"
                                     % (initrange,))
        self.initrange = float(initrange)

    def layer_sizes(self):
        """Units of each LSTM layer, bottom to top (the last one is `emb_sz`)."""
        return [self.hidden_size] * (self.num_hidden_layers - 1) + [self.embedding_size]

    # ---------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, values):
        cls.check_object(values, [key for key, _ in _FIELDS], required=("vocab_size",),
                         article="an")
        return cls(**{attr: values[key] for key, attr in _FIELDS if key in values})

    def to_dict(self):
        return {key: getattr(self, attr) for key, attr in _FIELDS}

    def replace(self, **changes):
        values = {attr: getattr(self, attr) for _, attr in _FIELDS}
        values.update(changes)
        return type(self)(**values)


def load_awd_lstm_config(path):
    """Reads an AWD-LSTM config file, or `ulmfit_config.json` in a model folder."""
    return AwdLstmConfig.load(path)
