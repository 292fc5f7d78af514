# coding=utf-8
"""WordPiece tokenization with the behaviour of Google's BERT.

Two tokenizers live here and produce the same ids for the same text:

* ``FullTokenizer`` -- pure Python, Google's API (``FullTokenizer(vocab_file,
  do_lower_case)``, ``tokenize``, ``convert_tokens_to_ids``, ...). It does not
  import TensorFlow, so the data-generation worker processes stay light.
* ``GraphTokenizer`` -- a batched, in-graph tokenizer built on
  tensorflow-text's ``BasicTokenizer`` and ``FastWordpieceTokenizer``. It runs
  inside ``tf.data`` pipelines and SavedModels.

What Google's tokenizer does, in order:

1. Decode bytes as UTF-8, silently dropping invalid bytes.
2. Clean up: delete NUL, U+FFFD and every control/format character
   (categories Cc and Cf) except tab, newline and carriage return; turn every
   whitespace character (space, \\t, \\n, \\r and category Zs) into a space.
3. Put spaces around every CJK ideograph so each becomes its own word.
4. Split on whitespace. For uncased models lower-case each word (Python's
   full Unicode ``str.lower``), decompose it (NFD) and drop the combining marks
   (category Mn), i.e. strip accents.
5. Split every punctuation character off as its own word (ASCII symbols count
   as punctuation even where Unicode says otherwise, e.g. ``$`` and ``^``).
6. WordPiece each word by greedy longest-match-first against the vocabulary,
   continuation pieces prefixed with ``##``. A word with any unmatchable part,
   or longer than 200 characters, becomes ``[UNK]`` as a whole.

The in-graph tokenizer has to work around three differences of
tensorflow-text (it would otherwise give other ids for some inputs):
its lower-casing is NFKC case folding (full-width ``ＡＢＣ`` becomes ``abc``,
``ß`` becomes ``ss``), it turns control characters into spaces instead of
deleting them, and its ``\\s`` only knows ASCII whitespace. ``GraphTokenizer``
therefore normalises the text itself with plain string ops (steps 1, 2, the
lower-casing and accent stripping of 4) and hands tensorflow-text a string on
which only splitting remains to be done.
"""

import re
import unicodedata

# The vocabulary file, its special tokens and the character ranges both
# tokenizers share (re-exported: Google's names, `tokenization.load_vocab`, ...).
from data.wordpiece_vocab import CJK_RANGES
from data.wordpiece_vocab import CLS_TOKEN  # noqa: F401
from data.wordpiece_vocab import MASK_TOKEN  # noqa: F401
from data.wordpiece_vocab import MAX_INPUT_CHARS_PER_WORD
from data.wordpiece_vocab import PAD_TOKEN  # noqa: F401
from data.wordpiece_vocab import REQUIRED_SPECIAL_TOKENS  # noqa: F401
from data.wordpiece_vocab import SEP_TOKEN  # noqa: F401
from data.wordpiece_vocab import UNK_TOKEN
from data.wordpiece_vocab import VocabError  # noqa: F401
from data.wordpiece_vocab import check_vocab_special_tokens
from data.wordpiece_vocab import load_vocab
from data.wordpiece_vocab import read_vocab_list  # noqa: F401

# Released checkpoints whose casing is known, to catch the classic mistake of
# fine-tuning an uncased model with do_lower_case=False (or the reverse).
_UNCASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Raises ValueError when `do_lower_case` contradicts a known checkpoint.

    Only the names of Google's released checkpoints are recognised (the folder
    that holds ``bert_model.ckpt``); any other path is accepted as it is.
    """
    if not init_checkpoint:
        return
    match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _UNCASED_MODELS and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "uncased", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise ValueError(
        "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. The "
        "checkpoint `%s` is a %s model, so it was pre-trained with "
        "`--do_lower_case=%s`; fine-tuning with the other casing feeds it tokens "
        "it has never seen. If you really mean it, rename the checkpoint folder."
        % (actual_flag, init_checkpoint, model_name, case_name, opposite_flag))


def convert_to_unicode(text):
    """Returns `text` as str, decoding bytes as UTF-8 and dropping bad bytes."""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s (expected str or bytes)"
                     % type(text).__name__)


def printable_text(text):
    """Returns `text` as a str suitable for printing or logging."""
    return convert_to_unicode(text)


def convert_by_vocab(vocab, items):
    """Maps a sequence of tokens (or ids) through `vocab`."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Strips `text` and splits it on runs of whitespace."""
    text = text.strip()
    if not text:
        return []
    return text.split()


class FullTokenizer(object):
    """Basic tokenization followed by WordPiece, end to end."""

    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab_file = vocab_file
        self.vocab = load_vocab(vocab_file)
        check_vocab_special_tokens(self.vocab, vocab_file, required=(UNK_TOKEN,))
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text):
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
        return split_tokens

    def convert_tokens_to_ids(self, tokens):
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)


# Per-character classification is the hot loop of the Python tokenizer; the
# answers never change, so they are memoised per character.
_CHAR_CLASS_CACHE = {}
_KEEP, _DROP, _SPACE, _CJK, _PUNCT = range(5)


def _classify_char(char):
    kind = _CHAR_CLASS_CACHE.get(char)
    if kind is None:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            kind = _DROP
        elif _is_whitespace(char):
            kind = _SPACE
        elif _is_chinese_char(cp):
            kind = _CJK
        elif _is_punctuation(char):
            kind = _PUNCT
        else:
            kind = _KEEP
        _CHAR_CLASS_CACHE[char] = kind
    return kind


class BasicTokenizer(object):
    """Cleans text, splits CJK characters and punctuation, optionally lower-cases."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        text = convert_to_unicode(text)
        text = self._clean_text(text)
        # CJK characters become words of their own. Multilingual and Chinese
        # vocabularies hold them as single characters; for English models
        # this changes nothing since they barely occur there.
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = self._run_strip_accents(token.lower())
            split_tokens.extend(self._run_split_on_punc(token))
        return whitespace_tokenize(" ".join(split_tokens))

    def _run_strip_accents(self, text):
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _run_split_on_punc(self, text):
        pieces = []
        current = []
        for char in text:
            if _classify_char(char) == _PUNCT:
                if current:
                    pieces.append("".join(current))
                    current = []
                pieces.append(char)
            else:
                current.append(char)
        if current:
            pieces.append("".join(current))
        return pieces

    def _tokenize_chinese_chars(self, text):
        output = []
        for char in text:
            if _classify_char(char) == _CJK:
                output.append(" ")
                output.append(char)
                output.append(" ")
            else:
                output.append(char)
        return "".join(output)

    def _clean_text(self, text):
        output = []
        for char in text:
            kind = _classify_char(char)
            if kind == _DROP:
                continue
            output.append(" " if kind == _SPACE else char)
        return "".join(output)


class WordpieceTokenizer(object):
    """Greedy longest-match-first WordPiece."""

    def __init__(self, vocab, unk_token=UNK_TOKEN,
                 max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        """Splits already basic-tokenized text into word pieces.

        For example ``"unaffable"`` becomes ``["un", "##aff", "##able"]``
        given a vocabulary holding those pieces.
        """
        output_tokens = []
        vocab = self.vocab
        for token in whitespace_tokenize(convert_to_unicode(text)):
            length = len(token)
            if length > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            pieces = []
            start = 0
            while start < length:
                end = length
                piece = None
                while start < end:
                    candidate = token[start:end]
                    if start > 0:
                        candidate = "##" + candidate
                    if candidate in vocab:
                        piece = candidate
                        break
                    end -= 1
                if piece is None:
                    pieces = None
                    break
                pieces.append(piece)
                start = end
            if pieces is None:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(pieces)
        return output_tokens


def _is_whitespace(char):
    """Space, tab, newline, carriage return and Unicode space separators (Zs)."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Control and format characters (Cc, Cf), except tab/newline/return."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Unicode punctuation (P*) plus every non-alphanumeric printable ASCII char."""
    cp = ord(char)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    for low, high in CJK_RANGES:
        if low <= cp <= high:
            return True
    return False


def is_cjk_char(char):
    """True for a single CJK ideograph (as the tokenizer splits them)."""
    return len(char) == 1 and _is_chinese_char(ord(char))


def __getattr__(name):
    # The in-graph tokenizer needs TensorFlow; import it only when asked for,
    # so `from data import tokenization` stays cheap in worker processes.
    if name == "GraphTokenizer":
        from data.tokenizers.wordpiece import GraphTokenizer  # pylint: disable=g-import-not-at-top
        return GraphTokenizer
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
