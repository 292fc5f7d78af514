"""WordPiece vocabulary files, and what both WordPiece tokenizers share.

`data.tokenization` (Google's pure-Python `FullTokenizer`) and
`data.tokenizers.wordpiece` (the in-graph `GraphTokenizer`) read the same
vocabulary file and split the same words, so both import this module (and
neither imports the other's code at import time). `data.tokenization`
re-exports every name here, Google's API unchanged
(`tokenization.load_vocab`, `tokenization.VocabError`, ...).
"""

import collections
import os
import unicodedata

__all__ = ["CJK_RANGES", "CLS_TOKEN", "MASK_TOKEN", "MAX_INPUT_CHARS_PER_WORD", "PAD_TOKEN",
           "REQUIRED_SPECIAL_TOKENS", "SEP_TOKEN", "UNK_TOKEN", "VocabError",
           "check_vocab_special_tokens", "load_vocab", "read_vocab_list"]

# Words longer than this many characters become [UNK] (Google's default).
MAX_INPUT_CHARS_PER_WORD = 200

# Special tokens every BERT vocabulary is expected to contain.
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
PAD_TOKEN = "[PAD]"
REQUIRED_SPECIAL_TOKENS = (UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


class VocabError(ValueError):
    """A vocabulary file is missing, empty or lacks required tokens."""


def load_vocab(vocab_file):
    """Loads a vocabulary file (one token per line) into an ordered dict.

    The id of a token is its 0-based line number. As in Google's code,
    surrounding whitespace is stripped and a token listed twice maps to its
    last line.
    """
    if not os.path.isfile(vocab_file):
        raise VocabError("Vocabulary file %s does not exist." % vocab_file)
    vocab = collections.OrderedDict()
    with open(vocab_file, "rb") as reader:
        for index, raw in enumerate(reader):
            # Stricter than Google (which drops invalid bytes): a damaged
            # vocabulary would silently give other ids to the same text.
            try:
                token = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise VocabError("%s:%d: not valid UTF-8 (byte 0x%02x at column %d); a "
                                 "vocabulary is UTF-8 text, one token per line"
                                 % (vocab_file, index + 1, raw[e.start], e.start + 1)) from None
            for column, char in enumerate(token):
                if unicodedata.category(char) == "Cc":
                    raise VocabError("%s:%d: control character U+%04X at column %d; a "
                                     "vocabulary token holds no control characters (is "
                                     "the file damaged?)" % (vocab_file, index + 1,
                                                             ord(char), column + 1))
            vocab[token] = index
    if not vocab:
        raise VocabError("Vocabulary file %s is empty." % vocab_file)
    return vocab


def check_vocab_special_tokens(vocab, vocab_file="<vocab>",
                               required=REQUIRED_SPECIAL_TOKENS):
    """Raises VocabError naming the file if a required special token is absent."""
    missing = [token for token in required if token not in vocab]
    if missing:
        raise VocabError(
            "Vocabulary file %s lacks the special token(s) %s; a BERT vocabulary "
            "needs %s (each on a line of its own)."
            % (vocab_file, ", ".join(missing), ", ".join(required)))


# The CJK Unified Ideographs blocks (and compatibility blocks) that Google's
# tokenizer treats as single-character words. Hiragana, Katakana and Hangul
# are deliberately absent: those scripts are written with spaces or are
# handled by WordPiece like any other letters.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def read_vocab_list(vocab_file):
    """Returns the vocabulary as a list, index = id (None for a line whose
    token is listed again later or is blank; see `load_vocab`)."""
    vocab = load_vocab(vocab_file)
    tokens = [None] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        if token:
            tokens[index] = token
    return tokens
