"""`FullTokenizer`'s ids for many lines at once, without TensorFlow.

Pre-training data is mostly plain text. For a line of printable ASCII
(characters 0x20-0x7E, plus tabs and the line end, which are whitespace as
the space is) every step of Google's `BasicTokenizer` is simple: no control
characters to drop, no Chinese characters to isolate, no accents to strip,
the only whitespace is the space, lower casing is ASCII lower casing, and
punctuation is every printable non-alphanumeric character. HF `tokenizers`
(Rust) makes exactly that split with `BertPreTokenizer`, and Google's greedy
longest-match WordPiece with its `WordPiece` model (``##`` continuations,
``[UNK]`` for a word that cannot be covered or is longer than
``max_input_chars_per_word``, the `FullTokenizer`'s own). So such lines go
through `tokenizers`, in bulk. With lower casing, a line that becomes
printable ASCII once lower-cased and stripped of accents (``Café`` ->
``cafe``, Google's own steps, see `_plain_form`) goes the same way. Every
other line (CJK, controls, Unicode spaces or punctuation, ...) goes through
the `fallback` given -- `FullTokenizer` itself, or the in-graph
`BulkTokenizer` for large non-ASCII corpora -- so the ids are always
`FullTokenizer`'s (tests/test_ascii_wordpiece.py compares them on random
text made to hit every rule).

The model is built from the `FullTokenizer`'s own vocabulary dict, so ids
agree even for vocabularies with repeated lines.
"""

import unicodedata

import tokenizers
from tokenizers import models as tokenizer_models
from tokenizers import pre_tokenizers


class AsciiWordPiece(object):
    """Token ids of lines: printable-ASCII lines in Rust, the rest through `fallback`.

    Args:
      full_tokenizer: a `tokenization.FullTokenizer` (its vocabulary, case
        and unknown token are used).
      fallback: callable(list of lines) -> list of lists of token strings
        for the other lines; default: `full_tokenizer.tokenize` per line.
    """

    def __init__(self, full_tokenizer, fallback=None):
        self.full_tokenizer = full_tokenizer
        self.vocab = full_tokenizer.vocab
        self.do_lower_case = full_tokenizer.do_lower_case
        unk = full_tokenizer.wordpiece_tokenizer.unk_token
        if unk not in self.vocab:
            raise ValueError("The vocabulary has no %s token" % unk)
        model = tokenizer_models.WordPiece(
            vocab=dict(self.vocab), unk_token=unk,
            max_input_chars_per_word=full_tokenizer.wordpiece_tokenizer.max_input_chars_per_word)
        self._rust = tokenizers.Tokenizer(model)
        self._rust.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        self._fallback = fallback

    def ids(self, lines):
        """A list of id lists, one per line (FullTokenizer's ids, ``[UNK]`` included)."""
        plain = [_plain_form(line, self.do_lower_case) for line in lines]
        fast_index = [k for k, text in enumerate(plain) if text is not None]
        out = [None] * len(lines)
        if fast_index:
            encodings = self._rust.encode_batch_fast([plain[k] for k in fast_index],
                                                     add_special_tokens=False)
            for k, encoding in zip(fast_index, encodings):
                out[k] = encoding.ids
        if len(fast_index) < len(lines):
            slow_index = [k for k, text in enumerate(plain) if text is None]
            slow_lines = [lines[k] for k in slow_index]
            if self._fallback is not None:
                slow = self._fallback(slow_lines)
            else:
                slow = [self.full_tokenizer.tokenize(line) for line in slow_lines]
            vocab = self.vocab
            for k, tokens in zip(slow_index, slow):
                out[k] = [vocab[token] for token in tokens]
        return out


def _plain_form(line, do_lower_case):
    """The printable-ASCII text `BasicTokenizer` sees in `line`, or None if it is not one.

    Line ends and tabs are whitespace, as the space is. With lower casing,
    Google lower-cases, decomposes (NFD) and drops combining marks (Mn) before
    splitting; character by character, so it can be done to the whole line
    first: a line whose result is printable ASCII ("Café" -> "cafe") is then
    tokenized as that ASCII text. Anything else that BasicTokenizer treats
    specially (controls, Unicode spaces, CJK, punctuation outside ASCII)
    stays non-ASCII through these steps, so its line is left to the fallback.
    """
    text = line.rstrip("\r\n")
    if "\t" in text:
        text = text.replace("\t", " ")
    if text.isascii():
        if not text.isprintable():
            return None
        return text.lower() if do_lower_case else text
    if not do_lower_case:
        return None
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if c.isascii() or unicodedata.category(c) != "Mn")
    if text.isascii() and text.isprintable():
        return text
    return None
