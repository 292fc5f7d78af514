"""XLNet's tokenizer of a published folder (`spiece.model`), with HF's ids.

HF has two XLNet tokenizers over the same `spiece.model`, and they do not
always agree, so both are reproduced (`use_fast`, as `AutoTokenizer`'s
argument of that name):

* `XLNetTokenizerFast` (`use_fast=True`, what `AutoTokenizer` gives for a
  folder: from its `tokenizer.json`, or converted from `spiece.model`).
  Its pipeline, rebuilt here piece by piece:
  normalise (```` `` ```` and `''` to `"`; NFKD and marks removed unless
  `keep_accents`; lower-cased if `do_lower_case`; the model's own
  character map, e.g. `nmt_nfkc`, applied through
  `sentencepiece.SentencePieceNormalizer` without its whitespace handling;
  runs of spaces to one), then Metaspace (spaces become `▁`, a `▁` is
  put in front, and the text is cut before every `▁`), then a Viterbi
  search over the model's pieces and scores *per word*, unknown
  characters one `<unk>` per run. HF's converter lowers the score of every
  piece ending in a digit and a comma (`1,`) by 100, so numbers such as
  `1,000` are not cut after their comma; the same penalty is applied here.
  Consequences worth knowing: a trailing space gives a `▁` piece, and so
  does the space before a special token (`A <sep>` is `▁A ▁ <sep>`).
* `XLNetTokenizer` (`use_fast=False`, HF's Python class): every text
  between special tokens is stripped and its whitespace runs joined
  (`remove_space`), normalised as above but without the character map, and
  encoded by SentencePiece itself; then a piece ending in digit + comma
  (`▁12,`) is re-encoded without its comma and the comma appended (XLNet's
  and ALBERT's original rule).

Both: special tokens written in the text (`<s> </s> <unk> <sep> <pad> <cls>
<mask> <eod> <eop>`) stay whole, `<mask>` swallowing the whitespace before
it (HF's `lstrip`); framing `A <sep> <cls>` and `A <sep> B <sep> <cls>`
with token type ids A = 0, B = 1, `<cls>` = 2 (HF pads on the left with
type id 3; padding is the caller's). `save(folder)` writes `spiece.model`,
`tokenizer_config.json` and `special_tokens_map.json`, which both HF
classes read back.
"""

import json
import os
import re
import unicodedata

from data import atomic
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["XLNetTokenizer", "SPIECE_UNDERLINE"]

SPIECE_UNDERLINE = "\u2581"

# role -> HF's default token.
_DEFAULT_SPECIALS = (("bos", "<s>"), ("eos", "</s>"), ("unk", "<unk>"), ("sep", "<sep>"),
                     ("pad", "<pad>"), ("cls", "<cls>"), ("mask", "<mask>"))
_ADDITIONAL = ("<eop>", "<eod>")
# Special tokens that take the whitespace on their left (HF's AddedToken lstrip).
_LSTRIP_ROLES = ("mask",)
# tokenizers' Unigram: an unknown character scores this much below the lowest piece.
_UNK_PENALTY = 10.0
# HF's XLNet converter: pieces ending in digit + comma score this much lower.
_NUMBER_COMMA_PENALTY = 100.0


def _is_number_comma(piece):
    return len(piece) >= 2 and piece[-1] == "," and piece[-2].isdigit()


class XLNetTokenizer(PretrainedTokenizer):
    """HF's XLNet tokenizer (fast or Python, see the module docstring) over `spiece.model`.

    Args:
        model_file: the SentencePiece model.
        do_lower_case, remove_space, keep_accents: HF's settings (defaults
            False, True, False: XLNet's cased models).
        special_tokens: role -> token (`bos eos unk sep pad cls mask`), HF's
            defaults when None.
        additional_special_tokens: other tokens kept whole (`<eop> <eod>`).
        use_fast: True: `XLNetTokenizerFast`'s ids (`AutoTokenizer`'s);
            False: the Python `XLNetTokenizer`'s.
    """

    def __init__(self, model_file, do_lower_case=False, remove_space=True, keep_accents=False,
                 special_tokens=None, additional_special_tokens=_ADDITIONAL, use_fast=True):
        import sentencepiece  # pylint: disable=g-import-not-at-top

        self.model_file = os.fspath(model_file)
        try:
            with open(self.model_file, "rb") as f:
                self._proto = f.read()
            self._sp = sentencepiece.SentencePieceProcessor(model_proto=self._proto)
        except FileNotFoundError:
            raise TokenizerFormatError("%s: no such file (the SentencePiece model)"
                                       % self.model_file) from None
        except Exception as e:  # sentencepiece raises RuntimeError/OSError variants
            raise TokenizerFormatError("%s: not a SentencePiece model (%s)"
                                       % (self.model_file, str(e).splitlines()[0] if str(e)
                                          else type(e).__name__)) from None
        self.do_lower_case = bool(do_lower_case)
        self.remove_space = bool(remove_space)
        self.keep_accents = bool(keep_accents)
        self.use_fast = bool(use_fast)
        size = self._sp.get_piece_size()
        self.vocab = {self._sp.id_to_piece(i): i for i in range(size)}
        self.special_tokens = dict(special_tokens or _DEFAULT_SPECIALS)
        self.additional_special_tokens = list(additional_special_tokens or ())
        for index, token in enumerate(self.additional_special_tokens):
            self.special_tokens.setdefault(token.strip("<>") or "extra_%d" % index, token)
        for role, token in self.special_tokens.items():
            if token not in self.vocab:
                raise TokenizerFormatError("%s: the %s token %r is not a piece of the model"
                                           % (self.model_file, role, token))
        self._lstrip = {self.special_tokens[r] for r in _LSTRIP_ROLES if r in self.special_tokens}
        self._unk_id = self.vocab[self.special_tokens["unk"]] if "unk" in self.special_tokens \
            else self._sp.unk_id()
        if self.use_fast:
            self._normalizer = sentencepiece.SentencePieceNormalizer(
                model_proto=self._proto, add_dummy_prefix=False, escape_whitespaces=False,
                remove_extra_whitespaces=False)
            scores = {}
            for i in range(size):
                piece = self._sp.id_to_piece(i)
                score = float(self._sp.get_score(i))
                if _is_number_comma(piece):
                    score -= _NUMBER_COMMA_PENALTY
                scores[piece] = (i, score)
            self._scores = scores
            self._max_piece = max(len(p) for p in scores)
            self._unk_score = min(s for _, s in scores.values()) - _UNK_PENALTY
            self._word_cache = {}
        super().__init__()

    @classmethod
    def from_folder(cls, folder, use_fast=True):
        """The tokenizer of an HF XLNet folder (`spiece.model`, optional settings files)."""
        model_file = require_file(folder, "spiece.model", "XLNet's SentencePiece model")
        settings = tokenizer_config(folder)
        specials = {role: settings.get(role + "_token", default)
                    for role, default in _DEFAULT_SPECIALS}
        additional = settings.get("additional_special_tokens", list(_ADDITIONAL))
        additional = [t["content"] if isinstance(t, dict) else t for t in additional or ()]
        return cls(model_file, do_lower_case=settings.get("do_lower_case", False),
                   remove_space=settings.get("remove_space", True),
                   keep_accents=settings.get("keep_accents", False),
                   special_tokens=specials, additional_special_tokens=additional,
                   use_fast=use_fast)

    # ------------------------------------------------------------ splitting

    def tokenize(self, text):
        """Pieces of `text`; special tokens stay whole, `<mask>` takes the space before it."""
        if self.do_lower_case and not self.use_fast:
            # HF's Python tokenizer lower-cases around the special tokens first.
            text = "".join(part if i % 2 else part.lower()
                           for i, part in enumerate(self._special_pattern.split(text)))
        parts = self._special_pattern.split(text)
        tokens = []
        for i, part in enumerate(parts):
            if i % 2:
                tokens.append(part)
                continue
            if i + 1 < len(parts) and parts[i + 1] in self._lstrip:
                part = part.rstrip()
            if part:
                tokens.extend(self._pieces(part))
        return tokens

    def _pieces(self, text):
        return self._fast_pieces(text) if self.use_fast else self._python_pieces(text)

    # ------------------------------------------------------- the fast one

    def fast_normalize(self, text):
        """The text `XLNetTokenizerFast`'s normaliser makes of `text` (before Metaspace)."""
        text = text.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = unicodedata.normalize("NFKD", text)
            # tokenizers' StripAccents drops every mark (Mn, Mc, Me).
            text = "".join(c for c in text if not unicodedata.category(c).startswith("M"))
        if self.do_lower_case:
            text = "".join(c.lower() for c in text)  # per character: no final sigma, as Rust
        text = self._normalizer.normalize(text)
        return re.sub(" {2,}", " ", text)

    def _fast_pieces(self, text):
        text = self.fast_normalize(text)
        if not text:
            return []
        text = text.replace(" ", SPIECE_UNDERLINE)
        if not text.startswith(SPIECE_UNDERLINE):
            text = SPIECE_UNDERLINE + text
        pieces = []
        for word in re.findall("%s[^%s]*" % (SPIECE_UNDERLINE, SPIECE_UNDERLINE), text):
            cached = self._word_cache.get(word)
            if cached is None:
                cached = self._viterbi(word)
                if len(self._word_cache) < 100000:
                    self._word_cache[word] = cached
            pieces.extend(cached)
        return pieces

    def _viterbi(self, word):
        """The best-scoring pieces of `word` (tokenizers' Unigram: ties keep the first found)."""
        n = len(word)
        best = [None] * (n + 1)  # (score, start, piece or None for unknown)
        best[0] = (0.0, -1, None)
        for start in range(n):
            if best[start] is None:
                continue
            base = best[start][0]
            single = False
            for end in range(start + 1, min(n, start + self._max_piece) + 1):
                piece = word[start:end]
                entry = self._scores.get(piece)
                if entry is None:
                    continue
                score = base + entry[1]
                if best[end] is None or score > best[end][0]:
                    best[end] = (score, start, piece)
                single = single or end == start + 1
            if not single:
                score = base + self._unk_score
                if best[start + 1] is None or score > best[start + 1][0]:
                    best[start + 1] = (score, start, None)
        pieces = []
        end = n
        while end > 0:
            _, start, piece = best[end]
            pieces.append(piece)
            end = start
        pieces.reverse()
        unk = self.inv_vocab[self._unk_id]
        out = []
        for piece in pieces:
            is_unk = piece is None or self._scores[piece][0] == self._unk_id
            if is_unk and out and out[-1] is None:
                continue  # consecutive unknowns are one <unk>
            out.append(None if is_unk else piece)
        return [unk if p is None else p for p in out]

    # ----------------------------------------------------- the Python one

    def _preprocess(self, text):
        if self.remove_space:
            text = " ".join(text.strip().split())
        text = text.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = unicodedata.normalize("NFKD", text)
            text = "".join(c for c in text if not unicodedata.combining(c))
        if self.do_lower_case:
            text = text.lower()
        return text

    def _python_pieces(self, text):
        pieces = self._sp.encode(self._preprocess(text), out_type=str)
        out = []
        for piece in pieces:
            if _is_number_comma(piece):
                # XLNet's rule: `▁12,` is `▁12` then `,` (numbers keep their digits).
                parts = self._sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
                if piece[0] != SPIECE_UNDERLINE and parts and parts[0][0] == SPIECE_UNDERLINE:
                    if len(parts[0]) == 1:
                        parts = parts[1:]
                    else:
                        parts[0] = parts[0][1:]
                out.extend(parts)
                out.append(piece[-1])
            else:
                out.append(piece)
        return out

    # ----------------------------------------------------------- framing

    def encode(self, text, pair=None, add_special_tokens=True):
        if self.use_fast and pair == "":
            pair = None  # HF's fast tokenizers take an empty pair for no pair (`if text_pair`)
        return super().encode(text, pair, add_special_tokens)

    def build_inputs(self, ids_a, ids_b=None):
        sep, cls = self.token_id("sep"), self.token_id("cls")
        ids = list(ids_a) + [sep]
        segments = [0] * len(ids)
        if ids_b is not None:
            ids += list(ids_b) + [sep]
            segments += [1] * (len(ids_b) + 1)
        return Encoded(ids + [cls], segments + [2])

    def save(self, folder):
        os.makedirs(folder, exist_ok=True)
        model_path = os.path.join(folder, "spiece.model")
        with atomic.atomic_output(model_path, "wb") as f:
            f.write(self._proto)
        specials = {role + "_token": self.special_tokens[role]
                    for role, _ in _DEFAULT_SPECIALS if role in self.special_tokens}
        specials["additional_special_tokens"] = list(self.additional_special_tokens)
        settings = {"tokenizer_class": "XLNetTokenizer", "do_lower_case": self.do_lower_case,
                    "remove_space": self.remove_space, "keep_accents": self.keep_accents,
                    "padding_side": "left"}
        settings.update(specials)
        settings_path = os.path.join(folder, "tokenizer_config.json")
        atomic.write_text(settings_path, json.dumps(settings, indent=2) + "\n")
        map_path = os.path.join(folder, "special_tokens_map.json")
        atomic.write_text(map_path, json.dumps(specials, indent=2) + "\n")
        return [model_path, settings_path, map_path]
