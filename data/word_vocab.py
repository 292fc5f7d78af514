"""Word vocabularies: words as ids and as character ids (ELMo, ULMFiT, CoVe, CVT).

The word-level families (`modeling.elmo`, `modeling.ulmfit`, `modeling.cove`,
`modeling.cvt`) and run_classifier's word input format
(`modeling.tasks.word_input_format`) read the same vocabulary file; it lives
in `data/` because it knows no model.

Words. ELMo reads whitespace-separated words; here a line of text is split
into words by `data.tokenization.BasicTokenizer` (punctuation split off,
every CJK character a word of its own, optional lower casing), so English
and Chinese text both give words. The word vocabulary is a text file, one
word per line, whose first three lines are ELMo's special words

    <S>     begins every sentence   (id 0)
    </S>    ends every sentence     (id 1)
    <UNK>   any word not listed     (id 2)

followed by the most frequent words of the training text
(`build_vocabulary`). Word ids are only the language model's targets: the
network never looks a word up, it reads the word's characters.

Characters (bilm-tf's / allennlp's `ELMoCharacterMapper`). A word becomes
`max_characters_per_token` ids: begin-of-word, the UTF-8 bytes of the word
(cut to `max_characters_per_token - 2`), end-of-word, then padding-character
ids. `<S>` and `</S>` are the one-"byte" words 256 and 257. As in allennlp
every id is shifted by one, so that 0 is free for padded *word* positions
(a word slot whose ids are all 0 is no word):

    byte b          b + 1          (1 .. 256)
    <S> / </S>      257 / 258
    begin-of-word   259
    end-of-word     260
    padding char    261            (so n_characters = 262)
"""

import collections

from data import atomic
from data import tokenization

__all__ = ["BOS", "EOS", "UNK", "SPECIAL_WORDS", "N_CHARACTERS", "BEGIN_OF_WORD",
           "END_OF_WORD", "PADDING_CHAR", "VocabularyError", "WordVocabulary",
           "build_vocabulary", "word_char_ids", "write_vocabulary"]

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
SPECIAL_WORDS = (BOS, EOS, UNK)

# Character ids, already shifted by one (0 = no word).
_BOS_CHAR, _EOS_CHAR = 256 + 1, 257 + 1
BEGIN_OF_WORD = 258 + 1
END_OF_WORD = 259 + 1
PADDING_CHAR = 260 + 1
N_CHARACTERS = 262


class VocabularyError(ValueError):
    """A word vocabulary file that is not one ELMo can use (the message names file and line)."""


def word_char_ids(word, max_characters_per_token=50):
    """The `max_characters_per_token` character ids of `word` (see the module docstring)."""
    if max_characters_per_token < 3:
        raise ValueError("max_characters_per_token must be at least 3 (begin, one character, "
                         "end), got %d" % max_characters_per_token)
    if word == BOS:
        codes = [_BOS_CHAR]
    elif word == EOS:
        codes = [_EOS_CHAR]
    else:
        codes = [b + 1 for b in word.encode("utf-8")[:max_characters_per_token - 2]]
    ids = [BEGIN_OF_WORD] + codes + [END_OF_WORD]
    return ids + [PADDING_CHAR] * (max_characters_per_token - len(ids))


class WordVocabulary:
    """A word vocabulary file (see the module docstring): `ids(words)`, `len()`."""

    def __init__(self, path):
        self.path = path
        words = []
        index = {}
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    word = line.rstrip("\r\n")
                    if not word.strip() or word != word.strip():
                        raise VocabularyError("%s:%d: expected one word per line without "
                                              "spaces, got %r" % (path, lineno, word))
                    if word in index:
                        raise VocabularyError("%s:%d: the word %r is listed twice (first at "
                                              "line %d)" % (path, lineno, word, index[word] + 1))
                    index[word] = len(words)
                    words.append(word)
        except UnicodeDecodeError as e:
            raise VocabularyError("%s: not UTF-8 text (%s); expected one word per line"
                                  % (path, e)) from None
        except OSError as e:
            raise VocabularyError("--vocab_file=%s: cannot read it (%s)" % (path, e)) from None
        if tuple(words[:3]) != SPECIAL_WORDS:
            raise VocabularyError("%s: the first three lines must be %s (ELMo's sentence "
                                  "begin, end and unknown word), got %s"
                                  % (path, " ".join(SPECIAL_WORDS), " ".join(words[:3])))
        self.words = words
        self.index = index
        self.unk_id = index[UNK]

    def __len__(self):
        return len(self.words)

    def ids(self, words):
        return [self.index.get(word, self.unk_id) for word in words]


def _words_of_files(files, do_lower_case):
    from data import corpus  # pylint: disable=g-import-not-at-top
    tokenizer = tokenization.BasicTokenizer(do_lower_case)
    stats = corpus.ReadStats()
    for document in corpus.iter_documents(corpus.expand_file_patterns(files), stats):
        for lineno, raw in document.lines:
            yield tokenizer.tokenize(corpus.decode_line(raw, document.path, lineno, stats))


def build_vocabulary(files, max_size=None, min_count=1, do_lower_case=True):
    """`SPECIAL_WORDS` + the training text's words by falling count (ties: alphabetical).

    Args:
        files: text files (one sentence per line) or comma-separated globs.
        max_size: at most this many words in all (special words included).
        min_count: words seen fewer times are left out (they become <UNK>).
        do_lower_case: as for the pipeline that will read the text.
    """
    counts = collections.Counter()
    for words in _words_of_files(files, do_lower_case):
        counts.update(w for w in words if w not in SPECIAL_WORDS)
    ranked = sorted((w for w, c in counts.items() if c >= min_count),
                    key=lambda w: (-counts[w], w))
    if max_size is not None:
        ranked = ranked[:max(0, max_size - len(SPECIAL_WORDS))]
    return list(SPECIAL_WORDS) + ranked


def write_vocabulary(words, path):
    """Writes a vocabulary file atomically (a temporary file renamed over `path`)."""
    atomic.write_text(path, "".join(word + "\n" for word in words))
