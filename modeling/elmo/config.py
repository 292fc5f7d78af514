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

A file means what it means to bilm-tf (`bilm/model.py`), so that the
published `options.json` + `weights.hdf5` load with equal outputs
(`modeling.elmo.bilm_tf`): a key missing from `lstm` or `char_cnn` takes
bilm-tf's default, not this class's constructor default (`n_layers` 1,
`n_highway` 0, `cell_clip` and `proj_clip` null). The published files have
no `n_tokens_vocab` (their softmax is not released); `modeling.elmo.bilm_tf`
fills it in. Training-loop keys of bilm-tf's files (`batch_size`,
`n_epochs`, `n_train_tokens`, `unroll_steps`, `all_clip_norm`) are kept as
extras: this project's trainer flags set those.

Two keys of this project's own, written only when they are not bilm-tf's
(so a file of bilm-tf's model is bilm-tf's file):

    lstm.cell         "lstmp" (default): bilm-tf's projected LSTM cell
                      (`tf.nn.rnn_cell.LSTMCell(dim, num_proj=projection_dim,
                      cell_clip, proj_clip)`): the clipped projection is the
                      recurrent state, the cell state is clipped inside the
                      recurrence.
                      "lstm_dense": a Keras LSTM of `dim` units followed by a
                      Dense projection outside the recurrence. It stays
                      because Keras runs that LSTM with the cuDNN kernel on a
                      GPU (several times faster to pre-train at ELMo's 4096
                      units than a cell written out step by step), and because
                      checkpoints trained with it before LSTMP existed keep
                      loading. It cannot clip the cell (`cell_clip` must be
                      null); `proj_clip` clips the Dense output. Not bilm-tf's
                      network: its weights do not load from `weights.hdf5`.
    char_cnn.pooling  "padded" (default): as bilm-tf, each filter is
                      max-pooled over every window of the
                      `max_characters_per_token` ids, padding ids included.
                      "word": only windows that start inside the word (a
                      word's vector then does not depend on
                      `max_characters_per_token` or on what follows its
                      end-of-word id; `modeling.elmo.network`).

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
             "n_characters", "n_highway", "pooling")
_LSTM = ("cell", "cell_clip", "dim", "n_layers", "proj_clip", "projection_dim",
         "use_skip_connections")
_EXTRA_TOP = ("batch_size", "n_epochs", "n_train_tokens", "unroll_steps", "all_clip_norm")
ACTIVATIONS = ("relu", "tanh")
LSTM_CELLS = ("lstmp", "lstm_dense")
CHAR_POOLINGS = ("padded", "word")
# bilm-tf's values of keys a file leaves out (`options['lstm'].get('n_layers', 1)`, ...).
BILM_TF_DEFAULTS = {"n_layers": 1, "n_highway": 0, "cell_clip": None, "proj_clip": None}


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
    return json_config.check_int(name, value, minimum, ElmoConfigError)


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
        cell_clip: `lstm.cell_clip`, or None; clips the LSTM cell state at every
            step ("lstmp" only; must be None for "lstm_dense").
        proj_clip: `lstm.proj_clip`, or None; clips each step's projection
            (with "lstmp" only when there is one: `projection_dim` < `lstm_dim`).
        use_skip_connections: `lstm.use_skip_connections` (residual between layers).
        dropout: on every LSTM layer's input and on the top outputs before the
            softmax, while training (bilm-tf).
        n_negative_samples_batch: 0 for the full softmax, else sampled softmax.
        bidirectional: must be True (ELMo's two language models).
        lstm_cell: `lstm.cell`, "lstmp" or "lstm_dense" (see the module docstring).
        char_pooling: `char_cnn.pooling`, "padded" or "word" (see the module docstring).
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
                 bidirectional=True, lstm_cell="lstmp", char_pooling="padded", **extra):
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
        if lstm_cell not in LSTM_CELLS:
            raise ElmoConfigError("`lstm.cell` must be one of %s, got %r"
                                  % (", ".join(LSTM_CELLS), lstm_cell))
        self.lstm_cell = lstm_cell
        if char_pooling not in CHAR_POOLINGS:
            raise ElmoConfigError("`char_cnn.pooling` must be one of %s, got %r"
                                  % (", ".join(CHAR_POOLINGS), char_pooling))
        self.char_pooling = char_pooling
        if lstm_cell == "lstm_dense" and cell_clip is not None:
            raise ElmoConfigError(
                "`lstm.cell_clip` must be null with lstm.cell \"lstm_dense\": the Keras "
                "(cuDNN-compatible) LSTM cannot clip its cell state inside the recurrence "
                "(use \"lstmp\"), got %r" % (cell_clip,))
        if lstm_cell == "lstmp" and self.projection_dim > self.lstm_dim:
            raise ElmoConfigError(
                "`lstm.projection_dim` (%d) must not exceed `lstm.dim` (%d) with lstm.cell "
                "\"lstmp\": bilm-tf's cell only projects down" % (self.projection_dim,
                                                                  self.lstm_dim))
        self.cell_clip = _optional_positive("lstm.cell_clip", cell_clip)
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
        for key, value in BILM_TF_DEFAULTS.items():
            args.setdefault(key, value)
        if args["n_highway"] is None:  # bilm-tf: null is no highway layer
            args["n_highway"] = 0
        if "cell" in lstm:
            args["lstm_cell"] = lstm["cell"]
        if "pooling" in char_cnn:
            args["char_pooling"] = char_cnn["pooling"]
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
        if self.lstm_cell != "lstmp":
            out["lstm"]["cell"] = self.lstm_cell
        if self.char_pooling != "padded":
            out["char_cnn"]["pooling"] = self.char_pooling
        out.update(copy.deepcopy(self.extra))
        return out

    def replace(self, **changes):
        values = {name: getattr(self, name) for name in (
            "vocab_size", "char_embedding_dim", "filters", "n_highway",
            "max_characters_per_token", "n_characters", "activation", "lstm_dim",
            "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections",
            "dropout", "n_negative_samples_batch", "lstm_cell", "char_pooling")}
        values.update(self.extra)
        values.update(changes)
        return type(self)(**values)


def load_elmo_config(path):
    """Reads an ELMo options file, or `elmo_options.json` in a model folder."""
    return ElmoConfig.load(path)
