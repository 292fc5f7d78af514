"""RoBERTa's tokenizer of an HF folder: GPT-2's byte-level BPE, RoBERTa's framing.

The pieces are GPT-2's (`data.tokenizers.byte_bpe.ByteBPETokenizer` over
`vocab.json` + `merges.txt`); what RoBERTa adds, matched to HF's
`AutoTokenizer` (the fast `RobertaTokenizerFast`) of the same folder:

* framing `<s> A </s>` and `<s> A </s></s> B </s>` (fairseq's double
  separator between a pair), token type ids all 0;
* special tokens written in the text (`<s>` `<pad>` `</s>` `<unk>`
  `<mask>` and any other added token of `tokenizer_config.json`) stay
  whole. `<mask>` is lstrip: it takes the whitespace on its left with it,
  so "a <mask> b" is `a`, `<mask>`, `Ġb` -- the mask stands for a word
  *with* its leading space, as fairseq's masking of " word" pieces. Flags
  of the folder's `added_tokens_decoder` (or AddedToken dicts) win;
* `add_prefix_space` (`tokenizer_config.json`, default false): HF's
  byte-level pre-tokenizer prepends a space to every stretch of text
  between special tokens that does not start with one, so the first word
  is encoded as a word within a sentence;
* `merges.txt` is read as HF's `RobertaTokenizer` reads it: the first line
  is dropped as the `#version` header and the last as the empty line after
  the final newline, whatever they hold, so a file without the header loses
  its first merge in HF and here alike. `save` writes both, so what it
  writes reads back to the same merges;
* an empty second text is no pair at all, as in HF's fast tokenizers.
"""

import json
import os
import re

from data import atomic
from data.tokenizers.byte_bpe import WHITESPACE
from data.tokenizers.byte_bpe import ByteBPEError
from data.tokenizers.byte_bpe import ByteBPETokenizer
from data.tokenizers import specials
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import read_json_file
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["DEFAULT_SPECIAL_TOKENS", "RobertaTokenizer"]

# Role -> token, as RoBERTa's released vocabularies have them (ids 0..3 and the last).
DEFAULT_SPECIAL_TOKENS = {"bos": "<s>", "cls": "<s>", "pad": "<pad>", "eos": "</s>",
                          "sep": "</s>", "unk": "<unk>", "mask": "<mask>"}
# HF's default (lstrip, rstrip) of a special token: only <mask> strips.
_DEFAULT_STRIP = {"mask": (True, False)}
_MERGES_HEADER = "#version: 0.2"


def _hf_merges(merges_file):
    """`merges.txt` as HF's `RobertaTokenizer` reads it (see the module docstring)."""
    try:
        with open(merges_file, encoding="utf-8") as f:
            lines = f.read().split("\n")[1:-1]
    except (OSError, UnicodeDecodeError) as e:
        raise TokenizerFormatError("%s: not readable UTF-8 text (the BPE merges): %s"
                                   % (merges_file, e)) from None
    merges = []
    for number, line in enumerate(lines, 2):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise TokenizerFormatError("%s line %d: expected two symbols separated by a space, "
                                       "got %r" % (merges_file, number, line))
        merges.append(tuple(parts))
    return merges


class RobertaTokenizer(PretrainedTokenizer):
    """RoBERTa's tokenizer (see the module docstring).

    Args:
        vocab_file, merges_file: `vocab.json` and `merges.txt`.
        add_prefix_space: prepend a space to text that does not start with one.
        special_tokens: role -> token (default `DEFAULT_SPECIAL_TOKENS`).
        strip: token -> (lstrip, rstrip) of the tokens that take adjacent
            whitespace (default: `<mask>` lstrip).
        added_tokens: other tokens kept whole in text (the folder's
            non-role added tokens).
        model_max_length: written back in `tokenizer_config.json`.
        merges: the merges as `(a, b)` pairs, when the file is not read as
            HF reads it (a keras-hub preset's: every line a merge but the
            `#version` header); None: HF's reading.
        whole_tokens: the tokens kept whole when written in text (a
            keras-hub preset's `unsplittable_tokens`); None: the special
            and added tokens, as HF.
    """

    def __init__(self, vocab_file, merges_file, add_prefix_space=False, special_tokens=None,
                 strip=None, added_tokens=(), model_max_length=512, merges=None,
                 whole_tokens=None):
        self.vocab_file = os.fspath(vocab_file)
        self.merges_file = os.fspath(merges_file)
        self.add_prefix_space = bool(add_prefix_space)
        self.model_max_length = model_max_length
        try:
            self._bpe = ByteBPETokenizer(self.vocab_file, self.merges_file, special_tokens=[])
        except ByteBPEError as e:
            raise TokenizerFormatError(str(e)) from None
        merges = _hf_merges(self.merges_file) if merges is None else [tuple(m) for m in merges]
        self._bpe.merges = merges
        self._bpe.ranks = {pair: rank for rank, pair in reversed(list(enumerate(merges)))}
        self.vocab = self._bpe.encoder
        self.special_tokens = dict(special_tokens or DEFAULT_SPECIAL_TOKENS)
        for role, token in self.special_tokens.items():
            if token not in self.vocab:
                raise TokenizerFormatError("%s: the %s token %r is not in the vocabulary"
                                           % (self.vocab_file, role, token))
        self.added_tokens = [t for t in added_tokens if t not in self.special_tokens.values()]
        for token in self.added_tokens:
            if token not in self.vocab:
                raise TokenizerFormatError("%s: the added token %r is not in the vocabulary"
                                           % (self.vocab_file, token))
        if strip is None:
            strip = {self.special_tokens[role]: flags for role, flags in _DEFAULT_STRIP.items()
                     if role in self.special_tokens}
        self.strip = dict(strip)
        super().__init__()
        if whole_tokens is None:
            whole_tokens = set(self.special_tokens.values()) | set(self.added_tokens)
        # No token: a pattern that never matches (the split is the text alone).
        self._special_pattern = specials.pattern(set(whole_tokens)) or re.compile("(?!)")

    @classmethod
    def from_folder(cls, folder):
        """The tokenizer of an HF RoBERTa folder (`vocab.json`, `merges.txt`, settings)."""
        folder = os.fspath(folder)
        vocab_file = require_file(folder, "vocab.json", "the byte-level BPE vocabulary")
        merges_file = require_file(folder, "merges.txt", "the byte-level BPE merges")
        settings = tokenizer_config(folder)
        specials = {role: settings.get(role + "_token", default)
                    for role, default in DEFAULT_SPECIAL_TOKENS.items()}
        strip = {specials[role]: flags for role, flags in _DEFAULT_STRIP.items()}
        added = []
        raw = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                raw.update(read_json_file(path, "HF tokenizer settings"))
        # AddedToken dicts carry their own flags; `added_tokens_decoder` (newer
        # transformers) lists every added token with them.
        flagged = [v for v in raw.values() if isinstance(v, dict) and "content" in v]
        decoder = raw.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            flagged += [v for v in decoder.values() if isinstance(v, dict) and "content" in v]
            added += [v["content"] for v in decoder.values()
                      if isinstance(v, dict) and "content" in v]
        for extra in raw.get("additional_special_tokens") or ():
            added.append(extra["content"] if isinstance(extra, dict) else extra)
            if isinstance(extra, dict) and "content" in extra:
                flagged.append(extra)
        for token in flagged:
            strip[token["content"]] = (bool(token.get("lstrip")), bool(token.get("rstrip")))
        return cls(vocab_file, merges_file, add_prefix_space=settings.get("add_prefix_space",
                                                                          False),
                   special_tokens=specials, strip=strip, added_tokens=added,
                   model_max_length=settings.get("model_max_length", 512))

    # ------------------------------------------------------------ the pieces

    def _pieces(self, text):
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        tokens = []
        for word in self._bpe.split_words(text):
            tokens.extend(self._bpe.word_tokens(word))
        return tokens

    def tokenize(self, text):
        """Pieces of `text`; special and added tokens stay whole, stripping as flagged."""
        parts = self._special_pattern.split(text)
        # parts: text, token, text, token, ..., text. A token's lstrip eats the
        # whitespace ending the text before it; rstrip that starting the one after.
        for i in range(1, len(parts), 2):
            lstrip, rstrip = self.strip.get(parts[i], (False, False))
            if lstrip:
                parts[i - 1] = parts[i - 1].rstrip(WHITESPACE)
            if rstrip:
                parts[i + 1] = parts[i + 1].lstrip(WHITESPACE)
        return specials.tokens_of(parts, self._pieces)

    def encode(self, text, pair=None, add_special_tokens=True):
        """`Encoded(input_ids, segment_ids)`, as HF's fast `tokenizer(text, pair)`.

        An empty `pair` is no pair: HF's fast tokenizers test it for truth
        (`<s> A </s>`, not `<s> A </s></s></s>`).
        """
        return super().encode(text, pair or None, add_special_tokens=add_special_tokens)

    def build_inputs(self, ids_a, ids_b=None):
        cls_id, sep_id = self.token_id("cls"), self.token_id("sep")
        ids = [cls_id] + list(ids_a) + [sep_id]
        if ids_b is not None:
            ids += [sep_id] + list(ids_b) + [sep_id]
        return Encoded(ids, [0] * len(ids))

    def decode(self, ids, skip_special_tokens=False):
        """The text of `ids` (special tokens as written, or left out)."""
        specials = set(self.special_tokens.values()) | set(self.added_tokens)
        out, run = [], []
        for token in self.convert_ids_to_tokens(ids):
            if token in specials:
                out.append(self._bpe.decode([self.vocab[t] for t in run]))
                run = []
                if not skip_special_tokens:
                    out.append(token)
            else:
                run.append(token)
        out.append(self._bpe.decode([self.vocab[t] for t in run]))
        return "".join(out)

    # ----------------------------------------------------------------- files

    def _added_token(self, token):
        lstrip, rstrip = self.strip.get(token, (False, False))
        return {"content": token, "lstrip": lstrip, "normalized": False, "rstrip": rstrip,
                "single_word": False, "special": True}

    def save(self, folder):
        """Writes `vocab.json`, `merges.txt`, `tokenizer_config.json`, `special_tokens_map.json`."""
        os.makedirs(folder, exist_ok=True)
        vocab_path = os.path.join(folder, "vocab.json")
        ordered = dict(sorted(self.vocab.items(), key=lambda item: item[1]))
        atomic.write_text(vocab_path, json.dumps(ordered, ensure_ascii=False) + "\n")
        merges_path = os.path.join(folder, "merges.txt")
        atomic.write_text(merges_path, _MERGES_HEADER + "\n"
                          + "".join("%s %s\n" % pair for pair in self._bpe.merges))
        whole = list(dict.fromkeys(list(self.special_tokens.values()) + self.added_tokens))
        settings = {"add_prefix_space": self.add_prefix_space,
                    "added_tokens_decoder": {str(self.vocab[t]): self._added_token(t)
                                             for t in sorted(whole, key=self.vocab.get)},
                    "errors": "replace", "model_max_length": self.model_max_length,
                    "tokenizer_class": "RobertaTokenizer", "trim_offsets": True}
        settings.update({role + "_token": token for role, token in self.special_tokens.items()})
        if self.added_tokens:
            settings["additional_special_tokens"] = list(self.added_tokens)
        settings_path = os.path.join(folder, "tokenizer_config.json")
        atomic.write_text(settings_path, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
        special_map = {role + "_token": self._added_token(token)
                       for role, token in self.special_tokens.items()}
        if self.added_tokens:
            special_map["additional_special_tokens"] = [self._added_token(t)
                                                        for t in self.added_tokens]
        map_path = os.path.join(folder, "special_tokens_map.json")
        atomic.write_text(map_path, json.dumps(special_map, indent=2, ensure_ascii=False) + "\n")
        return [vocab_path, merges_path, settings_path, map_path]
