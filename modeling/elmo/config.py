"""`ElmoConfig`: ELMo's hyper-parameters under the names of its `options.json`.

The file is bilm-tf's / allennlp's options file (nested as there):

    {"bidirectional": true,
     "char_cnn": {"activation": "relu", "embedding": {"dim": 16},
                  "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                              [7, 1024]],
                  "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
     "dropout": 0.1,
     "lstm": {"cell_clip": null, "dim": 4096, "n_layers": 2, "proj_clip": 3,
              "projection_dim": 512, "use_skip_connections": true},
     "n_tokens_vocab": 793471, "n_negative_samples_batch": 0}

`n_tokens_vocab` is the word vocabulary's size (the softmax's), and
`n_negative_samples_batch` > 0 trains with a sampled softmax of that many
negative words per batch (0: the full softmax; evaluation always uses the
full softmax). `n_characters` counts character ids with allennlp's shift by
one (262; `data.word_vocab`).

Differences from bilm-tf, on purpose: the LSTMs are Keras LSTMs (the cuDNN
kernel on a GPU), so the projection follows the LSTM instead of feeding back
into its recurrence, and `cell_clip` (clipping the cell state inside the
recurrence, which the cuDNN kernel cannot do) must be null; `proj_clip`
clips the projections. Training-loop keys of bilm-tf's files (`batch_size`,
`n_epochs`, `n_train_tokens`, `unroll_steps`, `all_clip_norm`) are kept as
extras: this project's trainer flags set those.

Accessors with BERT's names (`vocab_size`, `hidden_size` = 2 x
`projection_dim`, the width of every ELMo layer, `num_hidden_layers`) serve
generic code.
"""

import copy
import difflib

from data import word_vocab as vocabulary
from modeling import json_config

__all__ = ["ElmoConfig", "ElmoConfigError", "load_elmo_config"]

_TOP = ("bidirectional", "char_cnn", "dropout", "lstm", "n_tokens_vocab",
        "n_negative_samples_batch")
_CHAR_CNN = ("activation", "embedding", "filters", "max_characters_per_token",
             "n_characters", "n_highway")
_LSTM = ("cell_clip", "dim", "n_layers", "proj_clip", "projection_dim",
         "use_skip_connections")
_EXTRA_TOP = ("batch_size", "n_epochs", "n_train_tokens", "unroll_steps", "all_clip_norm")
ACTIVATIONS = ("relu", "tanh")


class ElmoConfigError(ValueError):
    """An ELMo options file (or dict) with a missing, unknown or invalid value."""


def _unknown(values, known, where):
    unknown = [k for k in values if k not in known]
    if unknown:
        parts = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
            parts.append("`%s`%s" % (key, " (did you mean `%s`?)" % close[0] if close else ""))
        raise ElmoConfigError("unknown ELMo option%s %s in %s; known: %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(parts), where, ", ".join(sorted(known))))


def _int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()) or value < minimum:
        raise ElmoConfigError("`%s` must be an integer >= %d, got %r" % (name, minimum, value))
    return int(value)


def _optional_positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ElmoConfigError("`%s` must be a positive number or null, got %r" % (name, value))
    return float(value)


class ElmoConfig(json_config.JsonConfig):
    """ELMo's options (see the module docstring); flat attributes, nested file.

    Args:
        vocab_size: `n_tokens_vocab`, words of the softmax.
        char_embedding_dim: `char_cnn.embedding.dim`.
        filters: `char_cnn.filters`, `[[width, count], ...]`.
        n_highway: `char_cnn.n_highway`.
        max_characters_per_token: `char_cnn.max_characters_per_token`.
        n_characters: `char_cnn.n_characters` (at least 262).
        activation: `char_cnn.activation` ("relu" or "tanh").
        lstm_dim: `lstm.dim`, units of each LSTM.
        projection_dim: `lstm.projection_dim`, also the token vectors' width.
        n_layers: `lstm.n_layers` per direction.
        cell_clip: `lstm.cell_clip`; must be None (see the module docstring).
        proj_clip: `lstm.proj_clip`, or None.
        use_skip_connections: `lstm.use_skip_connections` (residual between layers).
        dropout: on every LSTM layer's input while training.
        n_negative_samples_batch: 0 for the full softmax, else sampled softmax.
        bidirectional: must be True (ELMo's two language models).
        **extra: bilm-tf's training-loop keys, kept and written back.
    """

    KIND = "ELMo options"
    ERROR = ElmoConfigError
    FILE_NAME = "elmo_options.json"

    def __init__(self, vocab_size, char_embedding_dim=16,
                 filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
                 n_highway=2, max_characters_per_token=50,
                 n_characters=vocabulary.N_CHARACTERS, activation="relu", lstm_dim=4096,
                 projection_dim=512, n_layers=2, cell_clip=None, proj_clip=3.0,
                 use_skip_connections=True, dropout=0.1, n_negative_samples_batch=0,
                 bidirectional=True, **extra):
        _unknown(extra, _EXTRA_TOP, "the options")
        self.vocab_size = _int("n_tokens_vocab", vocab_size, len(vocabulary.SPECIAL_WORDS))
        self.char_embedding_dim = _int("char_cnn.embedding.dim", char_embedding_dim)
        if not isinstance(filters, (list, tuple)) or not filters:
            raise ElmoConfigError("`char_cnn.filters` must be a non-empty list of [width, "
                                  "count] pairs, got %r" % (filters,))
        checked = []
        for i, pair in enumerate(filters):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ElmoConfigError("`char_cnn.filters[%d]` must be [width, count], got %r"
                                      % (i, pair))
            checked.append([_int("char_cnn.filters[%d] width" % i, pair[0]),
                            _int("char_cnn.filters[%d] count" % i, pair[1])])
        self.filters = checked
        self.n_highway = _int("char_cnn.n_highway", n_highway, 0)
        self.max_characters_per_token = _int("char_cnn.max_characters_per_token",
                                             max_characters_per_token, 3)
        widest = max(width for width, _ in checked)
        if widest > self.max_characters_per_token:
            raise ElmoConfigError("a char_cnn filter is %d wide but max_characters_per_token "
                                  "is %d" % (widest, self.max_characters_per_token))
        self.n_characters = _int("char_cnn.n_characters", n_characters,
                                 vocabulary.N_CHARACTERS)
        if activation not in ACTIVATIONS:
            raise ElmoConfigError("`char_cnn.activation` must be one of %s, got %r"
                                  % (", ".join(ACTIVATIONS), activation))
        self.activation = activation
        self.lstm_dim = _int("lstm.dim", lstm_dim)
        self.projection_dim = _int("lstm.projection_dim", projection_dim)
        self.n_layers = _int("lstm.n_layers", n_layers)
        if cell_clip is not None:
            raise ElmoConfigError(
                "`lstm.cell_clip` must be null: the Keras (cuDNN-compatible) LSTM cannot clip "
                "its cell state inside the recurrence, got %r" % (cell_clip,))
        self.cell_clip = None
        self.proj_clip = _optional_positive("lstm.proj_clip", proj_clip)
        if not isinstance(use_skip_connections, bool):
            raise ElmoConfigError("`lstm.use_skip_connections` must be true or false, got %r"
                                  % (use_skip_connections,))
        self.use_skip_connections = use_skip_connections
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (
                0 <= dropout < 1):
            raise ElmoConfigError("`dropout` must be in [0, 1), got %r" % (dropout,))
        self.dropout = float(dropout)
        self.n_negative_samples_batch = _int("n_negative_samples_batch",
                                             n_negative_samples_batch, 0)
        if self.n_negative_samples_batch >= self.vocab_size:
            raise ElmoConfigError("`n_negative_samples_batch` (%d) must be smaller than "
                                  "n_tokens_vocab (%d)" % (self.n_negative_samples_batch,
                                                           self.vocab_size))
        if bidirectional is not True:
            raise ElmoConfigError("`bidirectional` must be true: ELMo is a forward and a "
                                  "backward language model, got %r" % (bidirectional,))
        self.bidirectional = True
        self.extra = copy.deepcopy(extra)

    # ------------------------------------------------------- generic names

    @property
    def hidden_size(self):
        """Width of every ELMo layer: forward and backward projections side by side."""
        return 2 * self.projection_dim

    @property
    def num_hidden_layers(self):
        return self.n_layers

    @property
    def hidden_dropout_prob(self):
        return self.dropout

    # ---------------------------------------------------------------- dicts

    @classmethod
    def from_dict(cls, values):
        """Reads the nested options (see the module docstring)."""
        if not isinstance(values, dict):
            raise ElmoConfigError("ELMo options must be a JSON object, got %s"
                                  % type(values).__name__)
        _unknown(values, _TOP + _EXTRA_TOP, "the options")
        for key in ("n_tokens_vocab", "char_cnn", "lstm"):
            if key not in values:
                raise ElmoConfigError("missing ELMo option `%s`" % key)
        char_cnn, lstm = values["char_cnn"], values["lstm"]
        for name, part, known in (("char_cnn", char_cnn, _CHAR_CNN), ("lstm", lstm, _LSTM)):
            if not isinstance(part, dict):
                raise ElmoConfigError("`%s` must be a JSON object, got %r" % (name, part))
            _unknown(part, known, "`%s`" % name)
        for name, part, required in (("char_cnn", char_cnn, ("filters", "embedding")),
                                     ("lstm", lstm, ("dim", "projection_dim"))):
            for key in required:
                if key not in part:
                    raise ElmoConfigError("missing ELMo option `%s.%s`" % (name, key))
        embedding = char_cnn["embedding"]
        if not isinstance(embedding, dict) or set(embedding) != {"dim"}:
            raise ElmoConfigError("`char_cnn.embedding` must be {\"dim\": N}, got %r"
                                  % (embedding,))
        args = dict(vocab_size=values["n_tokens_vocab"],
                    char_embedding_dim=embedding["dim"], filters=char_cnn["filters"],
                    lstm_dim=lstm["dim"], projection_dim=lstm["projection_dim"])
        for key in ("n_highway", "max_characters_per_token", "n_characters", "activation"):
            if key in char_cnn:
                args[key] = char_cnn[key]
        for key in ("n_layers", "cell_clip", "proj_clip", "use_skip_connections"):
            if key in lstm:
                args[key] = lstm[key]
        for key in ("dropout", "n_negative_samples_batch", "bidirectional") + _EXTRA_TOP:
            if key in values:
                args[key] = values[key]
        return cls(**args)

    def to_dict(self):
        out = {
            "bidirectional": True,
            "char_cnn": {"activation": self.activation,
                         "embedding": {"dim": self.char_embedding_dim},
                         "filters": [list(pair) for pair in self.filters],
                         "max_characters_per_token": self.max_characters_per_token,
                         "n_characters": self.n_characters, "n_highway": self.n_highway},
            "dropout": self.dropout,
            "lstm": {"cell_clip": self.cell_clip, "dim": self.lstm_dim,
                     "n_layers": self.n_layers, "proj_clip": self.proj_clip,
                     "projection_dim": self.projection_dim,
                     "use_skip_connections": self.use_skip_connections},
            "n_negative_samples_batch": self.n_negative_samples_batch,
            "n_tokens_vocab": self.vocab_size,
        }
        out.update(copy.deepcopy(self.extra))
        return out

    def replace(self, **changes):
        values = {name: getattr(self, name) for name in (
            "vocab_size", "char_embedding_dim", "filters", "n_highway",
            "max_characters_per_token", "n_characters", "activation", "lstm_dim",
            "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections",
            "dropout", "n_negative_samples_batch")}
        values.update(self.extra)
        values.update(changes)
        return type(self)(**values)


def load_elmo_config(path):
    """Reads an ELMo options file, or `elmo_options.json` in a model folder."""
    return ElmoConfig.load(path)
