"""GPT's (Radford et al. 2018, `openai-gpt`) BPE: words ending in `</w>`, lower-cased text.

Why its own tokenizer: GPT's release is not GPT-2's byte-level BPE. Its
`vocab.json` + `merges.txt` merge *characters* of lower-cased words, the last
character of each word carrying the end-of-word mark `</w>` (`the</w>`,
`ing</w>`), with `<unk>` for characters the vocabulary lacks. OpenAI split
words with ftfy + spaCy; Hugging Face's tokenizer of such a folder
(`OpenAIGPTTokenizerFast`, what `AutoTokenizer` gives, and the Python
`OpenAIGPTTokenizer` when ftfy or spaCy is missing) splits them BERT's way
instead, and that is what this class reproduces, so that ids equal HF's:

1. special tokens (`<unk>`) written in the text are cut out whole;
2. normalise as HF's `BertNormalizer(lowercase=True)`: drop NUL, U+FFFD and
   every character of Unicode category C (controls, format, unassigned)
   except tab/newline/CR, turn whitespace into spaces, put spaces around
   CJK ideographs, decompose (NFD) and drop non-spacing marks, lower-case
   each character on its own (HF's Python tokenizer, through `str.lower`,
   writes a final sigma; the fast one does not, and neither does this);
3. split as `BertPreTokenizer`: on whitespace, and every punctuation
   character (Unicode P*, and ASCII symbols such as `$`) is a word;
4. each word's characters become symbols, the last one with `</w>`; a
   symbol the vocabulary lacks is `<unk>` (one per character, it merges
   with nothing); adjacent symbols are merged, lowest-rank pair of
   `merges.txt` first, while the merged symbol is in the vocabulary.

`merges.txt` is read as HF reads it: its first line is a header (`#version:
0.2`) and is skipped whatever it holds, and so is everything after the last
newline (so the file must end with one).
"""

import os
import unicodedata

from data.tokenizers import hf_files
from data.tokenizers import specials

__all__ = ["END_OF_WORD", "GPTBPEError", "GPTBPETokenizer", "UNK_TOKEN", "basic_words",
           "load_merges", "load_vocab"]

END_OF_WORD = "</w>"
UNK_TOKEN = "<unk>"

# BERT's CJK ideograph ranges (the characters that become words of their own).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


class GPTBPEError(ValueError):
    """A vocab.json / merges.txt that cannot be used; the message names the file."""


def load_vocab(vocab_file):
    """Reads `vocab.json` (token -> id); raises `GPTBPEError` naming the file."""
    return hf_files.read_vocab_json(vocab_file, GPTBPEError)


def load_merges(merges_file):
    """`[(left, right), ...]` in rank order, read as HF's `OpenAIGPTTokenizer` reads them."""
    merges_file = os.fspath(merges_file)
    # HF skips the first line (the header) and what follows the last newline.
    lines = hf_files.read_merges_lines(merges_file, GPTBPEError)[1:-1]
    merges = []
    for number, line in enumerate(lines, 2):
        parts = line.split()
        if len(parts) != 2:
            raise GPTBPEError("merges file %s line %d: expected two symbols separated by a "
                              "space, got %r" % (merges_file, number, line))
        merges.append((parts[0], parts[1]))
    return merges


def _is_cjk(char):
    cp = ord(char)
    return any(low <= cp <= high for low, high in _CJK)


def _is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def normalize(text):
    """HF's `BertNormalizer(lowercase=True)` (step 2 of the module docstring)."""
    out = []
    for char in text:
        if char in "\t\n\r":
            out.append(" ")
            continue
        if char in ("\x00", "\ufffd") or unicodedata.category(char).startswith("C"):
            continue
        if char.isspace():
            out.append(" ")
        elif _is_cjk(char):
            out.append(" %s " % char)
        else:
            out.append(char)
    text = unicodedata.normalize("NFD", "".join(out))
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    # Character by character, as the Rust normaliser (no final-sigma rule: "ΣΑΣ" is "σασ").
    return "".join(c.lower() for c in text)


def basic_words(text):
    """The words of `text`: normalised, split on whitespace and punctuation (steps 2-3)."""
    words = []
    for chunk in normalize(text).split():
        start = 0
        for i, char in enumerate(chunk):
            if _is_punctuation(char):
                if i > start:
                    words.append(chunk[start:i])
                words.append(char)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class GPTBPETokenizer:
    """GPT's BPE tokenizer in Python (see the module docstring).

    Args:
        vocab_file: `vocab.json` (token -> id).
        merges_file: `merges.txt` (a header line, then one merge per line).
        unk_token: the unknown token (`<unk>`); also kept whole in text.
        special_tokens: other tokens kept whole when written in the text.
    """

    def __init__(self, vocab_file, merges_file, unk_token=UNK_TOKEN, special_tokens=()):
        self.vocab_file = os.fspath(vocab_file)
        self.merges_file = os.fspath(merges_file)
        self.encoder = load_vocab(vocab_file)
        self.decoder = {i: t for t, i in self.encoder.items()}
        self.merges = load_merges(merges_file)
        self.ranks = {}
        for rank, pair in enumerate(self.merges):
            self.ranks.setdefault(pair, rank)
        self.unk_token = unk_token
        self.unk_id = self.encoder.get(unk_token)
        self.special_tokens = [t for t in [unk_token, *special_tokens] if t in self.encoder]
        self._special_split = specials.pattern(self.special_tokens)
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.encoder)

    def word_tokens(self, word):
        """The BPE symbols of one word (`</w>` on the last)."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        symbols = list(word[:-1]) + [word[-1] + END_OF_WORD]
        # A symbol the vocabulary lacks is <unk> and takes part in no merge.
        known = [s in self.encoder for s in symbols]
        while len(symbols) > 1:
            best, best_rank = None, None
            for i in range(len(symbols) - 1):
                if not (known[i] and known[i + 1]):
                    continue
                rank = self.ranks.get((symbols[i], symbols[i + 1]))
                if rank is not None and (best_rank is None or rank < best_rank) \
                        and symbols[i] + symbols[i + 1] in self.encoder:
                    best, best_rank = i, rank
            if best is None:
                break
            pair = (symbols[best], symbols[best + 1])
            merged, merged_known, i = [], [], 0
            while i < len(symbols):
                if (i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair
                        and known[i] and known[i + 1]):
                    merged.append(pair[0] + pair[1])
                    merged_known.append(True)
                    i += 2
                else:
                    merged.append(symbols[i])
                    merged_known.append(known[i])
                    i += 1
            symbols, known = merged, merged_known
        tokens = [s if k else self.unk_token for s, k in zip(symbols, known)]
        if len(self._cache) < 100000:
            self._cache[word] = tokens
        return tokens

    def tokenize_plain(self, text):
        """Symbols of `text` holding no special token."""
        tokens = []
        for word in basic_words(text):
            tokens.extend(self.word_tokens(word))
        return tokens

    def tokenize(self, text):
        """Symbols of `text`; special tokens written in it stay whole."""
        if self._special_split is None:
            return self.tokenize_plain(text)
        return specials.tokens_of(self._special_split.split(text), self.tokenize_plain)

    def convert_tokens_to_ids(self, tokens):
        ids = []
        for token in tokens:
            i = self.encoder.get(token, self.unk_id)
            if i is None:
                raise GPTBPEError("symbol %r is not in %s and it has no %s"
                                  % (token, self.vocab_file, self.unk_token))
            ids.append(i)
        return ids

    def encode(self, text):
        """Token ids of `text`."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def decode(self, ids):
        """Text of `ids`: symbols joined, `</w>` read as a space (lower-cased, as encoded)."""
        tokens = []
        for i in ids:
            token = self.decoder.get(int(i))
            if token is None:
                raise GPTBPEError("id %d is not in %s (%d tokens)"
                                  % (int(i), self.vocab_file, len(self.encoder)))
            tokens.append(token)
        return "".join(tokens).replace(END_OF_WORD, " ").strip()
