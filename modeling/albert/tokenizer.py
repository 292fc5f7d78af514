"""ALBERT's tokenizer of a published folder (`spiece.model`), with HF's ids.

`AlbertTokenizer.encode(text, pair)` gives the ids and token type ids that
`transformers.AutoTokenizer` of the same folder gives: HF's fast
`AlbertTokenizerFast`, which it converts from `spiece.model` (or reads from
`tokenizer.json`). That tokenizer is not SentencePiece run on the text, and
not quite HF's slow `AlbertTokenizer` either, so its steps are reproduced
here rather than calling `SentencePieceProcessor.encode`:

1. Added tokens are split out of the raw text first (before any
   normalisation, exactly as written): the special tokens `[CLS] [SEP]
   <pad> <unk> [MASK]`, and also every control and user-defined piece of
   the model (ALBERT's `(`, `)`, `"`, `-`, `.`, ...; the converter adds them
   as tokens), or the `added_tokens` of a folder's `tokenizer.json`.
   `[MASK]` eats the whitespace on its left (`lstrip`), so that "a [MASK]"
   gives the same ids as "a[MASK]".
2. Each piece of text between them is normalised: `` and '' to ",
   NFKD and marks dropped (unless `keep_accents`), lower case (per
   character, as HF's `Lowercase`; unless `do_lower_case` is False), the
   model's own SentencePiece character map (NFKC-like: full-width forms,
   ligatures, tabs to spaces), runs of spaces to one.
3. Spaces become "▁", one is put in front, and the text is cut into words
   before every "▁" -- so trailing whitespace leaves a word "▁" of its own,
   which is a token (SentencePiece would strip it).
4. Each word is segmented by unigram Viterbi over the model's pieces and
   scores, where pieces ending in a digit and a comma ("▁9,") score 100
   less (HF's converter does that to follow google-research/albert's
   `9,9` rule); an unknown character costs `min score - 10` and a run of
   them is one `<unk>`. Ties go as in HF's `tokenizers` (the earliest
   split).

HF's slow `AlbertTokenizer` differs from the fast one (and so from this
class) on whitespace before a special token or at the end of a text (the
slow one drops it, the fast one gives "▁"), after a user-defined symbol
(the fast one starts a new word there), and on "digit," pieces (the slow
one re-splits them after segmentation instead of scoring them down);
`AutoTokenizer` returns the fast one, so that is the one matched.

The framing is BERT's: `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, token
type 0 up to the first `[SEP]` and 1 after it. `save(folder)` writes
`spiece.model`, `tokenizer_config.json` and `special_tokens_map.json`,
which `AutoTokenizer` reads back to the same ids.

The model file is read with a few lines of protobuf wire-format decoding
(pieces, scores, types) instead of `sentencepiece`'s generated
`sentencepiece_model_pb2`, whose generated code needs a newer protobuf
runtime than TensorFlow allows in this environment; `sentencepiece` itself
(>= 0.2, `SentencePieceNormalizer`) applies the model's character map.
"""

import json
import os
import re
import struct
import unicodedata

from data import atomic
from data.tokenizers import specials
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import read_json_file
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["AlbertTokenizer", "DEFAULT_SPECIAL_TOKENS", "KerasHubAlbertTokenizer",
           "read_spiece_pieces"]

# ALBERT's special tokens (google-research/albert's spiece.model: <pad>=0,
# <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4).
DEFAULT_SPECIAL_TOKENS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "<pad>", "unk": "<unk>",
                          "mask": "[MASK]"}
_SPACE = "\u2581"  # "▁", SentencePiece's whitespace mark.
# SentencePiece piece types (sentencepiece_model.proto).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
# tokenizers' Unigram: an unknown character costs this much below the lowest score.
_UNK_PENALTY = 10.0
# HF's AlbertConverter scores "digit," pieces this much lower.
_NUMBER_COMMA_PENALTY = 100.0


# ---------------------------------------------------------- spiece.model


def _varint(data, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data):
    """(field number, wire type, value) of a protobuf message (bytes for LEN fields)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if pos > len(data):
            raise ValueError("truncated field %d" % number)
        yield number, wire, value


def read_spiece_pieces(proto):
    """`([(piece, score, type)], byte_fallback)` of a serialized SentencePiece `ModelProto`."""
    pieces, byte_fallback = [], False
    for number, wire, value in _fields(proto):
        if number == 1 and wire == 2:  # repeated SentencePiece pieces
            piece, score, kind = "", 0.0, _NORMAL
            for n, w, v in _fields(value):
                if n == 1 and w == 2:
                    piece = v.decode("utf-8")
                elif n == 2 and w == 5:
                    score = struct.unpack("<f", v)[0]
                elif n == 3 and w == 0:
                    kind = v
            pieces.append((piece, score, kind))
        elif number == 2 and wire == 2:  # TrainerSpec
            for n, w, v in _fields(value):
                if n == 35 and w == 0:
                    byte_fallback = bool(v)
    return pieces, byte_fallback


def _number_comma(piece):
    # HF's check_number_comma, negated: "▁9," is a piece to avoid.
    return len(piece) >= 2 and piece[-1] == "," and piece[-2].isdigit()


# ------------------------------------------------------------- tokenizer


class AlbertTokenizer(PretrainedTokenizer):
    """ALBERT's tokenizer over a `spiece.model` (see the module docstring).

    Args:
        model_file: the SentencePiece model (`spiece.model`).
        do_lower_case: lower-case the text (HF's default True).
        keep_accents: keep accents and other marks (HF's default False).
        remove_space: HF's slow tokenizer's setting, kept for `save`; the
            fast tokenizer (matched here) collapses spaces whatever it says.
        special_tokens: role -> token (`DEFAULT_SPECIAL_TOKENS`).
        added_tokens: `[(content, lstrip, rstrip)]` split out of the raw
            text, or None for what HF's converter adds (the special tokens,
            `[MASK]` with lstrip, and the model's control and user-defined
            pieces).
    """

    def __init__(self, model_file, do_lower_case=True, keep_accents=False, remove_space=True,
                 special_tokens=None, added_tokens=None):
        self.model_file = os.fspath(model_file)
        self.do_lower_case = bool(do_lower_case)
        self.keep_accents = bool(keep_accents)
        self.remove_space = bool(remove_space)
        try:
            with open(self.model_file, "rb") as f:
                self._proto = f.read()
        except OSError as e:
            raise TokenizerFormatError("%s: cannot read the SentencePiece model (%s)"
                                       % (self.model_file, e.strerror or e)) from None
        try:
            pieces, byte_fallback = read_spiece_pieces(self._proto)
        except (ValueError, UnicodeDecodeError, struct.error) as e:
            raise TokenizerFormatError("%s: not a SentencePiece model (%s)"
                                       % (self.model_file, e)) from None
        if not pieces:
            raise TokenizerFormatError("%s: not a SentencePiece model (no pieces)"
                                       % self.model_file)
        if byte_fallback:
            raise TokenizerFormatError("%s: a byte-fallback SentencePiece model; ALBERT's "
                                       "tokenizer has none" % self.model_file)
        self._normalizer = self._make_normalizer()
        self.vocab = {}
        for index, (piece, _, _) in enumerate(pieces):
            self.vocab.setdefault(piece, index)
        self._pieces_info = pieces
        self.special_tokens = dict(special_tokens or DEFAULT_SPECIAL_TOKENS)
        for role, token in self.special_tokens.items():
            if token not in self.vocab:
                raise TokenizerFormatError("%s: the %s token %r is not a piece of the model"
                                           % (self.model_file, role, token))
        scores = {}
        for piece, score, _ in pieces:
            scores.setdefault(piece, score - _NUMBER_COMMA_PENALTY if _number_comma(piece)
                              else score)
        self._scores = scores
        self._max_piece = max(len(p) for p in scores)
        self._unk_score = min(scores.values()) - _UNK_PENALTY
        if added_tokens is None:
            added_tokens = self._converter_added_tokens(pieces)
        self.added_tokens = [(str(c), bool(l), bool(r)) for c, l, r in added_tokens if c]
        super().__init__()
        self._strip = {content: (lstrip, rstrip) for content, lstrip, rstrip in self.added_tokens}
        self._added_pattern = specials.pattern(self._strip)

    def _make_normalizer(self):
        try:
            import sentencepiece  # pylint: disable=g-import-not-at-top
            return sentencepiece.SentencePieceNormalizer(
                model_proto=self._proto, add_dummy_prefix=False, escape_whitespaces=False,
                remove_extra_whitespaces=False)
        except (ImportError, AttributeError):
            raise TokenizerFormatError(
                "%s: reading ALBERT's tokenizer needs sentencepiece >= 0.2 "
                "(SentencePieceNormalizer)" % self.model_file) from None
        except Exception as e:  # sentencepiece raises RuntimeError/OSError variants
            raise TokenizerFormatError("%s: not a SentencePiece model (%s)"
                                       % (self.model_file, str(e).splitlines()[0] if str(e)
                                          else type(e).__name__)) from None

    def _converter_added_tokens(self, pieces):
        # HF's converter: the special tokens (the mask token with lstrip), then
        # the model's control and user-defined pieces.
        mask = self.special_tokens.get("mask")
        added = [(t, t == mask, False) for t in self.special_tokens.values()]
        added += [(p, p == mask, False) for p, _, kind in pieces
                  if kind in (_CONTROL, _USER_DEFINED)]
        seen, unique = set(), []
        for item in added:
            if item[0] not in seen:
                seen.add(item[0])
                unique.append(item)
        return unique

    # ------------------------------------------------------------ folders

    @classmethod
    def from_folder(cls, folder):
        """The tokenizer of an HF ALBERT folder (`spiece.model`, optional settings files)."""
        folder = os.fspath(folder)
        model_file = require_file(folder, "spiece.model", "ALBERT's SentencePiece model")
        settings = tokenizer_config(folder)
        specials = {role: settings.get(role + "_token", default)
                    for role, default in DEFAULT_SPECIAL_TOKENS.items()}
        added = None
        tokenizer_json = os.path.join(folder, "tokenizer.json")
        if os.path.isfile(tokenizer_json):
            # What AutoTokenizer reads instead of converting spiece.model.
            entries = read_json_file(tokenizer_json, "HF fast tokenizer").get("added_tokens")
            if isinstance(entries, list):
                added = [(e.get("content"), e.get("lstrip", False), e.get("rstrip", False))
                         for e in entries if isinstance(e, dict)
                         and not e.get("normalized", False)]
        return cls(model_file, do_lower_case=settings.get("do_lower_case", True),
                   keep_accents=settings.get("keep_accents", False),
                   remove_space=settings.get("remove_space", True),
                   special_tokens=specials, added_tokens=added)

    def save(self, folder):
        """Writes `spiece.model`, `tokenizer_config.json`, `special_tokens_map.json`."""
        os.makedirs(folder, exist_ok=True)
        model_path = os.path.join(folder, "spiece.model")
        with atomic.atomic_output(model_path, "wb") as f:
            f.write(self._proto)
        mask = self.special_tokens.get("mask")
        decoder = {}
        for token in self.special_tokens.values():
            decoder[str(self.vocab[token])] = {
                "content": token, "lstrip": token == mask, "normalized": False,
                "rstrip": False, "single_word": False, "special": True}
        settings = {
            "added_tokens_decoder": dict(sorted(decoder.items(), key=lambda kv: int(kv[0]))),
            "do_lower_case": self.do_lower_case, "keep_accents": self.keep_accents,
            "remove_space": self.remove_space, "tokenizer_class": "AlbertTokenizer",
            "model_max_length": 512, "clean_up_tokenization_spaces": False,
            "bos_token": self.special_tokens.get("cls"),
            "eos_token": self.special_tokens.get("sep"),
        }
        settings.update({role + "_token": token for role, token in self.special_tokens.items()})
        special_map = {role + "_token": token for role, token in self.special_tokens.items()}
        special_map.update(bos_token=self.special_tokens.get("cls"),
                           eos_token=self.special_tokens.get("sep"))
        if mask is not None:
            special_map["mask_token"] = {"content": mask, "lstrip": True, "normalized": False,
                                         "rstrip": False, "single_word": False}
        settings_path = os.path.join(folder, "tokenizer_config.json")
        atomic.write_text(settings_path, json.dumps(settings, indent=2) + "\n")
        map_path = os.path.join(folder, "special_tokens_map.json")
        atomic.write_text(map_path, json.dumps(special_map, indent=2) + "\n")
        return [model_path, settings_path, map_path]

    # ----------------------------------------------------------- pipeline

    def tokenize(self, text):
        """Pieces of `text`; added tokens written in it stay whole (step 1)."""
        if self._added_pattern is None:
            return self._pieces(text)
        parts = self._added_pattern.split(text)
        for i in range(1, len(parts), 2):  # odd parts are added tokens
            lstrip, rstrip = self._strip[parts[i]]
            if lstrip:
                parts[i - 1] = parts[i - 1].rstrip()
            if rstrip:
                parts[i + 1] = parts[i + 1].lstrip()
        return specials.tokens_of(parts, self._pieces)

    def normalize(self, text):
        """Step 2 of the module docstring: the text the pieces are cut from."""
        text = text.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = "".join(c for c in unicodedata.normalize("NFKD", text)
                           if not unicodedata.category(c).startswith("M"))
        if self.do_lower_case:
            text = "".join(c.lower() for c in text)  # per character, as HF's Lowercase
        text = self._normalizer.normalize(text)
        return re.sub(" {2,}", " ", text)

    def _pieces(self, text):
        text = self.normalize(text).replace(" ", _SPACE)
        if not text:
            return []
        if not text.startswith(_SPACE):
            text = _SPACE + text
        pieces = []
        for word in re.findall(_SPACE + "[^" + _SPACE + "]*", text):
            pieces.extend(self._viterbi(word))
        return pieces

    def _viterbi(self, word):
        """Step 4: the best-scoring segmentation of one word."""
        n = len(word)
        best = [None] * (n + 1)  # end -> (score, start, piece or None for unknown)
        best[0] = (0.0, 0, None)
        scores, longest = self._scores, self._max_piece
        for start in range(n):
            if best[start] is None:
                continue
            base = best[start][0]
            single = False
            for end in range(start + 1, min(n, start + longest) + 1):
                piece = word[start:end]
                score = scores.get(piece)
                if score is None:
                    continue
                if best[end] is None or base + score > best[end][0]:
                    best[end] = (base + score, start, piece)
                single |= end == start + 1
            if not single and (best[start + 1] is None
                               or base + self._unk_score > best[start + 1][0]):
                best[start + 1] = (base + self._unk_score, start, None)
        pieces, end = [], n
        unk = self.special_tokens["unk"]
        while end > 0:
            _, start, piece = best[end]
            if piece is None:
                if not (pieces and pieces[-1] is None):
                    pieces.append(None)  # a run of unknown characters is one <unk>
            else:
                pieces.append(piece)
            end = start
        return [unk if p is None else p for p in reversed(pieces)]

    def build_inputs(self, ids_a, ids_b=None):
        return self.cls_sep_inputs(ids_a, ids_b)


class KerasHubAlbertTokenizer(AlbertTokenizer):
    """keras-hub's `AlbertTokenizer` ids over a preset's SentencePiece model.

    keras-hub runs SentencePiece itself on the raw text (the model's own
    normaliser, no lower-casing or accent stripping of HF's, special tokens
    written in the text split as any text: SentencePiece never produces a
    control piece) and frames as BERT (`[CLS] A [SEP] B [SEP]`, its
    classifier preprocessor, token types 0 then 1), so the pieces are
    `SentencePieceProcessor`'s and the framing is `AlbertTokenizer`'s.
    """

    def __init__(self, model_file, special_tokens=None):
        super().__init__(model_file, do_lower_case=False, keep_accents=True,
                         special_tokens=special_tokens, added_tokens=())
        try:
            import sentencepiece  # pylint: disable=g-import-not-at-top
            self._processor = sentencepiece.SentencePieceProcessor(model_proto=self._proto)
        except Exception as e:  # sentencepiece raises RuntimeError/OSError variants
            raise TokenizerFormatError("%s: not a SentencePiece model (%s)"
                                       % (self.model_file, str(e).splitlines()[0] if str(e)
                                          else type(e).__name__)) from None

    def tokenize(self, text):
        return self.convert_ids_to_tokens(self._processor.encode(text))
