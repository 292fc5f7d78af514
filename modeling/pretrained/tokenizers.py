"""Tokenizers of published model folders, with HF's ids (special tokens and framing included).

`PretrainedTokenizer` is what `modeling.pretrained.from_pretrained` returns
beside the model: `encode(text, pair)` gives the ids and segment ids that
HF's tokenizer of the same folder gives (`tokenizer(text, pair)`'s
`input_ids` and `token_type_ids`), and `save(folder)` writes the files HF
reads back. A family's subclass supplies the piece tokenizer (`_pieces`),
the vocabulary and the framing (`build_inputs`); the base splits out
special tokens written in the text (HF matches them exactly, before any
normalisation) and truncates nothing: the caller decides lengths.

`WordPieceTokenizer` is BERT's (and DistilBERT's, mBERT's, Chinese
BERT/RoBERTa-wwm's): `vocab.txt`, `do_lower_case` from
`tokenizer_config.json`, `[CLS] A [SEP] B [SEP]`.
"""

import collections
import json
import os
import re

from data import atomic
from data import packing
from data import tokenization
from modeling.pretrained.formats import TokenizerFormatError

__all__ = ["Encoded", "PretrainedTokenizer", "WordPieceTokenizer", "read_json_file",
           "tokenizer_config"]

Encoded = collections.namedtuple("Encoded", ["input_ids", "segment_ids"])
Encoded.__doc__ = "One encoded text (or pair): ids and segment (token type) ids, equal lengths."


def read_json_file(path, what):
    """A JSON object from `path`, or `TokenizerFormatError` naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise TokenizerFormatError("%s: no such file (%s)" % (path, what)) from None
    except (OSError, ValueError, RecursionError) as e:
        raise TokenizerFormatError("%s: not a JSON file (%s): %s"
                                   % (path, what, str(e).splitlines()[0])) from None
    if not isinstance(value, dict):
        raise TokenizerFormatError("%s: expected a JSON object (%s), got %s"
                                   % (path, what, type(value).__name__))
    return value


def tokenizer_config(folder):
    """`tokenizer_config.json` of `folder` merged over `special_tokens_map.json` ({} if neither)."""
    values = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            values.update(read_json_file(path, "HF tokenizer settings"))
    for key, value in list(values.items()):
        # HF writes special tokens either as strings or as AddedToken dicts.
        if isinstance(value, dict) and "content" in value:
            values[key] = value["content"]
    return values


def require_file(folder, name, what):
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise TokenizerFormatError("%s: no such file (%s); the folder has: %s"
                                   % (path, what, ", ".join(sorted(os.listdir(folder))) or "nothing"))
    return path


class PretrainedTokenizer:
    """Base of the published folders' tokenizers (see the module docstring).

    Subclasses set `special_tokens` (role -> token: "cls", "sep", "pad",
    "mask", "unk", "bos", "eos" as the family has them) and `vocab`
    (token -> id), and implement `_pieces(text)` (pieces of text holding
    no special token), `build_inputs(ids_a, ids_b)` and `save(folder)`.
    """

    special_tokens = {}
    vocab = {}
    #: Where HF's tokenizer of the family pads (`padding_side`: XLNet's "left").
    padding_side = "right"
    #: The token type id of padding positions (HF's `pad_token_type_id`: XLNet's 3).
    pad_token_type_id = 0

    def __init__(self):
        self.inv_vocab = {i: t for t, i in self.vocab.items()}
        specials = sorted(set(self.special_tokens.values()), key=len, reverse=True)
        self._special_pattern = (re.compile("(%s)" % "|".join(re.escape(t) for t in specials))
                                 if specials else None)

    # ----------------------------------------------------------- subclass part

    def _pieces(self, text):
        raise NotImplementedError

    def build_inputs(self, ids_a, ids_b=None):
        """`Encoded` of one or two id lists with the family's special tokens."""
        raise NotImplementedError

    def save(self, folder):
        """Writes HF's tokenizer files into `folder`; returns the paths written."""
        raise NotImplementedError

    # ----------------------------------------------------------------- shared

    def token_id(self, role):
        """The id of the special token of `role` ("cls", "sep", "pad", ...)."""
        return self.vocab[self.special_tokens[role]]

    def cls_sep_inputs(self, ids_a, ids_b=None):
        """`Encoded` framed ``[CLS] a [SEP]`` (token type 0) ``b [SEP]`` (token type 1):
        the `build_inputs` of the WordPiece and SentencePiece encoders that frame so."""
        cls_id, sep_id = self.token_id("cls"), self.token_id("sep")
        ids = [cls_id] + list(ids_a) + [sep_id]
        segments = [0] * len(ids)
        if ids_b is not None:
            ids += list(ids_b) + [sep_id]
            segments += [1] * (len(ids_b) + 1)
        return Encoded(ids, segments)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def tokenize(self, text):
        """Pieces of `text`; special tokens written in it stay whole."""
        if self._special_pattern is None:
            return self._pieces(text)
        tokens = []
        for i, part in enumerate(self._special_pattern.split(text)):
            if i % 2:
                tokens.append(part)
            elif part:
                tokens.extend(self._pieces(self._strip_around_special(part)))
        return tokens

    def _strip_around_special(self, part):
        return part

    def convert_tokens_to_ids(self, tokens):
        unk = self.special_tokens.get("unk")
        unk_id = self.vocab.get(unk) if unk is not None else None
        out = []
        for token in tokens:
            index = self.vocab.get(token, unk_id)
            if index is None:
                raise KeyError("token %r is not in the vocabulary and there is no unknown token"
                               % token)
            out.append(index)
        return out

    def convert_ids_to_tokens(self, ids):
        return [self.inv_vocab[int(i)] for i in ids]

    @property
    def pad_id(self):
        """The padding id (the family's pad token; 0 for families without one, GPT's)."""
        return self.token_id("pad") if "pad" in self.special_tokens else 0

    def pack(self, text_a, text_b=None, max_seq_length=None):
        """`Encoded` of a text (or pair) framed with the family's special tokens, fitting
        `max_seq_length` (None: any length) with the special tokens included.

        The pieces are cut longest-first, one at a time from the end of the
        longer text (Google's `_truncate_seq_pair`, HF's `longest_first`), so
        the result equals HF's `tokenizer(a, b, truncation=True,
        max_length=max_seq_length)`.
        """
        ids_a = self.convert_tokens_to_ids(self.tokenize(text_a))
        ids_b = None if text_b is None else self.convert_tokens_to_ids(self.tokenize(text_b))
        if max_seq_length is not None:
            room = max(max_seq_length - len(
                self.build_inputs([], None if ids_b is None else []).input_ids), 0)
            if ids_b is None:
                ids_a = ids_a[:room]
            else:
                packing.truncate_seq_pair(ids_a, ids_b, room)
        return self.build_inputs(ids_a, ids_b)

    def word_pieces(self, word):
        """The pieces of one pre-split word, as HF's `is_split_into_words=True` reads it:
        after a space (RoBERTa's and GPT-2's `Ġword` with `add_prefix_space=True`,
        SentencePiece's `▁word`; WordPiece ignores it), the unknown token if
        it has no piece (only control characters), [] without one."""
        pieces = self.tokenize(" " + word)
        if not pieces and "unk" in self.special_tokens:
            pieces = [self.special_tokens["unk"]]
        return pieces

    def pad(self, encoded, max_seq_length):
        """`(input_ids, input_mask, segment_ids, offset)` of an `Encoded` padded to
        `max_seq_length` on the family's `padding_side` with its pad id and pad type id,
        as HF's `padding="max_length"`; `offset` is the number of pads put before it."""
        ids, segments = list(encoded.input_ids), list(encoded.segment_ids)
        extra = max_seq_length - len(ids)
        if extra < 0:
            raise ValueError("%d ids do not fit max_seq_length=%d" % (len(ids), max_seq_length))
        pads, types, mask = ([self.pad_id] * extra, [self.pad_token_type_id] * extra,
                             [0] * extra)
        if self.padding_side == "left":
            return pads + ids, mask + [1] * len(ids), types + segments, extra
        return ids + pads, [1] * len(ids) + mask, segments + types, 0

    def encode(self, text, pair=None, add_special_tokens=True):
        """`Encoded(input_ids, segment_ids)`, as HF's `tokenizer(text, pair)`."""
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None if pair is None else self.convert_tokens_to_ids(self.tokenize(pair))
        if add_special_tokens:
            return self.build_inputs(ids_a, ids_b)
        ids = ids_a + (ids_b or [])
        return Encoded(ids, [0] * len(ids_a) + [1] * len(ids_b or []))


class WordPieceTokenizer(PretrainedTokenizer):
    """BERT's tokenizer of a folder with `vocab.txt` (Google's or HF's)."""

    def __init__(self, vocab_file, do_lower_case=True, special_tokens=None):
        self.vocab_file = os.fspath(vocab_file)
        self.do_lower_case = do_lower_case
        self._full = tokenization.FullTokenizer(self.vocab_file, do_lower_case=do_lower_case)
        self.vocab = self._full.vocab
        self.special_tokens = dict(special_tokens or {
            "unk": "[UNK]", "sep": "[SEP]", "pad": "[PAD]", "cls": "[CLS]", "mask": "[MASK]"})
        for role, token in self.special_tokens.items():
            if token not in self.vocab:
                raise TokenizerFormatError("%s: the %s token %r is not in the vocabulary"
                                           % (self.vocab_file, role, token))
        super().__init__()

    @classmethod
    def from_folder(cls, folder, do_lower_case=None):
        """The tokenizer of an HF or Google folder (`vocab.txt`, optional `tokenizer_config.json`)."""
        vocab_file = require_file(folder, "vocab.txt", "the WordPiece vocabulary")
        settings = tokenizer_config(folder)
        if do_lower_case is None:
            do_lower_case = settings.get("do_lower_case")
        if do_lower_case is None:
            # Google's folders have no settings file: their names say the case.
            do_lower_case = "cased" not in os.path.basename(os.path.abspath(folder)).lower() \
                or "uncased" in os.path.basename(os.path.abspath(folder)).lower()
        specials = {role: settings.get(role + "_token", default) for role, default in (
            ("unk", "[UNK]"), ("sep", "[SEP]"), ("pad", "[PAD]"), ("cls", "[CLS]"),
            ("mask", "[MASK]"))}
        return cls(vocab_file, do_lower_case=bool(do_lower_case), special_tokens=specials)

    def _pieces(self, text):
        return self._full.tokenize(text)

    def build_inputs(self, ids_a, ids_b=None):
        return self.cls_sep_inputs(ids_a, ids_b)

    def save(self, folder):
        vocab_path = os.path.join(folder, "vocab.txt")
        tokens = [self.inv_vocab[i] for i in range(len(self.inv_vocab))]
        atomic.write_text(vocab_path, "".join(t + "\n" for t in tokens))
        settings = {"do_lower_case": self.do_lower_case, "tokenize_chinese_chars": True,
                    "strip_accents": None, "tokenizer_class": "BertTokenizer",
                    "model_max_length": 512}
        settings.update({role + "_token": token for role, token in self.special_tokens.items()})
        settings_path = os.path.join(folder, "tokenizer_config.json")
        atomic.write_text(settings_path, json.dumps(settings, indent=2) + "\n")
        return [vocab_path, settings_path]
