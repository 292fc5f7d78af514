"""GPT-2's byte-level BPE: a Python tokenizer and the same ids in the TensorFlow graph.

Why byte level: every string is a sequence of UTF-8 bytes, so a vocabulary
whose base symbols are the 256 byte values can encode any text (English,
Chinese, emoji, control characters) without an unknown token. Radford et al.
(2019) learn BPE merges over those bytes; to keep the merge tables readable
text, each byte is shown as a printable Unicode character
(`bytes_to_unicode`: printable Latin-1 bytes stand for themselves, the
others -- space, control bytes, ... -- are moved to U+0100 and up, so a space
is "Ġ" and a newline "Ċ" in `vocab.json` and `merges.txt`).

Encoding (`ByteBPETokenizer.encode`), as OpenAI's encoder and HF's
`GPT2Tokenizer` do it:

1. special tokens (`<|endoftext|>`) written in the text are cut out and
   become their own id;
2. the rest is split into words by GPT-2's regular expression

       's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

   (contractions; letter, digit and other runs each taking one leading
   space; a whitespace run gives all but its last character when a word
   follows, so that the word keeps its leading space);
3. each word's UTF-8 bytes become byte symbols, and adjacent symbols are
   merged, lowest-rank pair of `merges.txt` first (every occurrence of that
   pair, left to right), until no pair of the word has a rank;
4. symbols are looked up in `vocab.json`.

`GraphByteBPETokenizer` gives the same ids inside `tf.data` and SavedModels.
RE2 (TensorFlow's regex engine) has no look-ahead, so step 2 is done in two
parts: an RE2 split with the look-ahead alternative replaced by a plain
`\\s+`, then the split points are moved where `\\s+(?!\\S)` puts them (the
last whitespace character before a word is split off, and joins the word
when it is a space). `\\s` is spelled out as Unicode's White_Space set
(RE2's `\\s` is ASCII only). Step 3 runs as a `tf.while_loop` over all
distinct words of a batch at once, applying the same merges in the same
order.

Known divergences of the graph tokenizer from the Python one (tested):
special tokens written in the text are encoded as plain text in the graph
(the pre-training pipeline inserts the end-of-text id itself, never as
text); invalid UTF-8 bytes are dropped in both, but a malformed sequence may
lose a different number of bytes; and RE2's and the `regex` package's
Unicode tables may classify characters assigned in the newest Unicode
versions differently (letter/number/other), which changes word boundaries
only around such characters.
"""

import os

import regex
import tensorflow as tf

from data.tokenizers import hf_files
from data.tokenizers import specials

__all__ = [
    "END_OF_TEXT",
    "ByteBPEError",
    "ByteBPETokenizer",
    "GPT2_SPLIT_PATTERN",
    "GraphByteBPETokenizer",
    "bytes_to_unicode",
    "check_merges",
    "load_merges",
    "load_vocab",
]

END_OF_TEXT = "<|endoftext|>"

GPT2_SPLIT_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                      r"""|\s+(?!\S)|\s+""")

# Unicode's White_Space property: what the `regex` package's `\s` matches
# in a str pattern (RE2's `\s` only knows ASCII whitespace).
WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
              + "\u2028\u2029\u202f\u205f\u3000")

_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


class ByteBPEError(ValueError):
    """A vocab.json / merges.txt that cannot be used; the message names the file."""


def bytes_to_unicode():
    """GPT-2's table from byte values (0-255) to the characters that show them.

    Bytes that are printable Latin-1 characters (`!`..`~`, `¡`..`¬`,
    `®`..`ÿ`) stand for themselves; the other 68 (controls, space, DEL,
    NBSP, soft hyphen) take U+0100, U+0101, ... in byte order.
    """
    printable = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    table = {b: chr(b) for b in printable}
    shifted = 0x100
    for b in range(256):
        if b not in table:
            table[b] = chr(shifted)
            shifted += 1
    return table


def load_vocab(vocab_file):
    """Reads `vocab.json` (token -> id); raises `ByteBPEError` naming the file."""
    vocab = hf_files.read_vocab_json(vocab_file, ByteBPEError)
    vocab_file = os.fspath(vocab_file)
    if len(set(vocab.values())) != len(vocab):
        raise ByteBPEError("vocab file %s gives the same id to several tokens" % vocab_file)
    missing = [c for c in bytes_to_unicode().values() if c not in vocab]
    if missing:
        raise ByteBPEError("vocab file %s lacks %d of the 256 byte symbols (e.g. %r): not a "
                           "byte-level BPE vocabulary" % (vocab_file, len(missing), missing[0]))
    return vocab


def load_merges(merges_file):
    """Reads `merges.txt`: `[(left, right), ...]` in rank order.

    A first line starting with `#version` is a header; blank lines are
    skipped. Every other line must be two symbols separated by one space.
    """
    merges_file = os.fspath(merges_file)
    lines = hf_files.read_merges_lines(merges_file, ByteBPEError)
    merges = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ByteBPEError("merges file %s line %d: expected two symbols separated by one "
                               "space, got %r" % (merges_file, number, line))
        merges.append((parts[0], parts[1]))
    return merges


def check_merges(vocab, merges, vocab_file, merges_file):
    """Raises `ByteBPEError` naming `merges_file` when it cannot go with `vocab`.

    A merges file of no merge (empty, or only its `#version` header) leaves
    every word as single byte symbols: fine for a vocabulary of just the
    256 byte symbols and special tokens (`<...>`), but beside a vocabulary
    of merged tokens it is the wrong or a truncated file, and the text
    would be encoded byte by byte into ids the model never saw.
    """
    if merges:
        return
    symbols = set(bytes_to_unicode().values())
    merged = [t for t in vocab if t not in symbols and not (t.startswith("<") and t.endswith(">"))]
    if merged:
        raise ByteBPEError(
            "merges file %s holds no merges (it is empty or only a '#version' header) but "
            "vocab file %s has %d merged tokens (e.g. %r); expected the merges.txt of this "
            "vocabulary, one merge 'left right' per line"
            % (os.fspath(merges_file), os.fspath(vocab_file), len(merged),
               min(merged, key=vocab.get)))


def _merge_word(symbols, ranks):
    """Applies BPE merges to a tuple of symbols (lowest rank first, all occurrences)."""
    word = list(symbols)
    while len(word) > 1:
        best = None
        best_rank = None
        for pair in zip(word, word[1:]):
            rank = ranks.get(pair)
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = pair, rank
        if best is None:
            break
        merged = []
        i = 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == best[0] and word[i + 1] == best[1]:
                merged.append(best[0] + best[1])
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word


class ByteBPETokenizer:
    """GPT-2's byte-level BPE tokenizer in Python (see the module docstring).

    Args:
        vocab_file: `vocab.json` (token -> id).
        merges_file: `merges.txt` (one merge per line, rank order).
        special_tokens: tokens cut out of the text before the split and
            encoded as their own id; default `<|endoftext|>` when the
            vocabulary has it.
        errors: how `decode` treats byte sequences that are not UTF-8
            ("replace" as in HF's `GPT2Tokenizer`).
    """

    def __init__(self, vocab_file, merges_file, special_tokens=None, errors="replace"):
        self.vocab_file = os.fspath(vocab_file)
        self.merges_file = os.fspath(merges_file)
        self.encoder = load_vocab(vocab_file)
        self.decoder = {i: t for t, i in self.encoder.items()}
        self.merges = load_merges(merges_file)
        check_merges(self.encoder, self.merges, vocab_file, merges_file)
        self.ranks = {pair: rank for rank, pair in reversed(list(enumerate(self.merges)))}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        if special_tokens is None:
            special_tokens = [END_OF_TEXT] if END_OF_TEXT in self.encoder else []
        unknown = [t for t in special_tokens if t not in self.encoder]
        if unknown:
            raise ByteBPEError("special token %r is not in %s" % (unknown[0], self.vocab_file))
        self.special_tokens = list(special_tokens)
        self._special_split = specials.pattern(self.special_tokens)
        self._pattern = regex.compile(GPT2_SPLIT_PATTERN)
        self.errors = errors
        # HF's GPT2Tokenizer maps a symbol missing from the vocabulary to
        # its unknown token, <|endoftext|>; learned vocabularies never
        # produce one.
        self.unk_id = self.encoder.get(END_OF_TEXT)
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.encoder)

    @property
    def eos_id(self):
        """The id of `<|endoftext|>` (None if the vocabulary lacks it)."""
        return self.encoder.get(END_OF_TEXT)

    def split_words(self, text):
        """GPT-2's pre-tokenization of `text` (no special-token handling)."""
        return self._pattern.findall(text)

    def word_tokens(self, word):
        """The BPE symbols of one pre-tokenized word."""
        cached = self._cache.get(word)
        if cached is None:
            symbols = tuple(self.byte_encoder[b] for b in word.encode("utf-8"))
            cached = _merge_word(symbols, self.ranks)
            if len(self._cache) < 100000:
                self._cache[word] = cached
        return cached

    def tokenize(self, text):
        """The BPE symbols (strings) of `text`."""
        pieces = self._special_split.split(text) if self._special_split else [text]
        return specials.tokens_of(pieces, self._text_tokens)

    def _text_tokens(self, text):
        return [token for word in self.split_words(text) for token in self.word_tokens(word)]

    def convert_tokens_to_ids(self, tokens):
        ids = []
        for token in tokens:
            i = self.encoder.get(token, self.unk_id)
            if i is None:
                raise ByteBPEError("symbol %r is not in %s and it has no %s"
                                   % (token, self.vocab_file, END_OF_TEXT))
            ids.append(i)
        return ids

    def encode(self, text):
        """Token ids of `text` (a str)."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def decode(self, ids, skip_special_tokens=False):
        """The text of `ids`; byte sequences that are not UTF-8 follow `errors`."""
        special = set(self.special_tokens) if skip_special_tokens else set()
        out = bytearray()
        for i in ids:
            token = self.decoder.get(int(i))
            if token is None:
                raise ByteBPEError("id %d is not in %s (%d tokens)"
                                   % (int(i), self.vocab_file, len(self.encoder)))
            if token in special:
                continue
            if token in self.special_tokens:
                out.extend(token.encode("utf-8"))
                continue
            out.extend(self.byte_decoder[c] for c in token)
        return out.decode("utf-8", errors=self.errors)


# ------------------------------------------------------------------ graph


def _re2_class(chars):
    """An RE2 character-class body for `chars` (\\x{...} escapes)."""
    return "".join("\\x{%X}" % ord(c) for c in chars)


_WS = _re2_class(WHITESPACE)
# GPT-2's pattern without the look-ahead alternative (see the module docstring).
_RE2_SPLIT = ("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^%s\\p{L}\\p{N}]+|[%s]+"
              % (_WS, _WS))
_RE2_ALL_SPACE = "[%s]+" % _WS
_RE2_CONTRACTION = "|".join(_CONTRACTIONS)


class GraphByteBPETokenizer(tf.Module):
    """`ByteBPETokenizer`'s ids, computed with TensorFlow ops (tf.data, SavedModel).

    A `tf.Module`: its lookup tables are tracked, so a SavedModel holding
    it carries the vocabulary and merges.

    >>> tokenizer = GraphByteBPETokenizer("vocab.json", "merges.txt")
    >>> tokenizer.tokenize(tf.constant(["Hello world", "你好"]))  # RaggedTensor of ids

    Special tokens written in the text are not recognised (they are encoded
    as text); see the module docstring for the other, rarer divergences.

    Args:
        vocab_file, merges_file: as for `ByteBPETokenizer`.
        max_word_bytes: symbols of a word merge only within chunks of this
            many bytes (the merge loop is quadratic in a word's length, which
            matters on pathological input such as a long run without
            spaces). The Python tokenizer has no such limit, so ids may
            differ on words longer than this.
    """

    def __init__(self, vocab_file, merges_file, max_word_bytes=1000, name=None):
        super().__init__(name=name)
        vocab = load_vocab(vocab_file)
        merges = load_merges(merges_file)
        check_merges(vocab, merges, vocab_file, merges_file)
        self.vocab_file = os.fspath(vocab_file)
        self.merges_file = os.fspath(merges_file)
        self.vocab_size = len(vocab)
        self.eos_id = vocab.get(END_OF_TEXT)
        self.max_word_bytes = int(max_word_bytes)
        unk = vocab.get(END_OF_TEXT, -1)
        byte_table = bytes_to_unicode()
        init = tf.lookup.KeyValueTensorInitializer
        self._bytes = tf.lookup.StaticHashTable(
            init(tf.constant([bytes([b]) for b in range(256)]),
                 tf.constant([byte_table[b].encode("utf-8") for b in range(256)])), b"")
        keys, ranks, seen = [], [], set()
        for rank, (left, right) in enumerate(merges):
            if (left, right) not in seen:  # the first line of a duplicate wins
                seen.add((left, right))
                keys.append(left + " " + right)
                ranks.append(rank)
        self._no_rank = len(merges) + 1
        if keys:
            self._ranks = tf.lookup.StaticHashTable(
                init(tf.constant(keys), tf.constant(ranks, tf.int32)), self._no_rank)
        else:
            self._ranks = None
        tokens = sorted(vocab, key=vocab.get)
        self._vocab = tf.lookup.StaticHashTable(
            init(tf.constant(tokens), tf.constant([vocab[t] for t in tokens], tf.int32)),
            unk)

    # --------------------------------------------------------- pre-tokenize

    def split_words(self, texts):
        """GPT-2's pre-tokenization of a 1-D string tensor: `[batch, (words)]`."""
        import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top

        texts = tf.strings.unicode_transcode(
            tf.convert_to_tensor(texts, tf.string), "UTF-8", "UTF-8", errors="ignore")
        # tensorflow-text's split stops at a NUL byte; it is split as \x01
        # (the same kind of character: neither space, letter nor digit) and
        # the pieces are cut from the original text.
        visible = tf.strings.regex_replace(texts, "\\x00", "\x01")
        pieces, begins, ends = tf_text.regex_split_with_offsets(visible, _RE2_SPLIT, _RE2_SPLIT)
        row_ids = pieces.value_rowids()
        words = pieces.flat_values
        begin = begins.flat_values
        end = ends.flat_values
        # next_in_row[t]: token t+1 exists and is in the same text.
        same_next = tf.concat([tf.equal(row_ids[1:], row_ids[:-1]), [False]], 0)
        is_space = tf.strings.regex_full_match(words, _RE2_ALL_SPACE)
        last_char = tf.strings.regex_replace(words, "(?s)^.*(.)$", "\\1")
        last_len = tf.cast(tf.strings.length(last_char), tf.int64)
        # A whitespace run followed by a word: `\s+(?!\S)` leaves out its
        # last character, which starts a new piece...
        run_before_word = tf.logical_and(is_space, same_next)
        split_at = end - last_len
        inner_space = tf.logical_and(run_before_word, split_at > begin)
        # ...and joins the word when it is a space (" ?\p{L}+" etc.).
        joins_next = tf.logical_and(run_before_word, tf.equal(last_char, " "))
        joined = tf.concat([[False], joins_next[:-1]], 0)  # t's begin is dropped
        # A contraction ('s, 't, ...) that got that space: Python matches
        # " '" (a space and an other-character run), then the letters that
        # follow the apostrophe, continued by a letter run right after.
        is_contraction = tf.strings.regex_full_match(words, _RE2_CONTRACTION)
        spaced_contraction = tf.logical_and(joined, is_contraction)
        starts_letter = tf.strings.regex_full_match(words, "(?s)\\p{L}.*")
        continues = tf.logical_and(
            tf.concat([[False], spaced_contraction[:-1]], 0),
            tf.logical_and(starts_letter, tf.concat([[False], same_next[:-1]], 0)))
        keep_begin = tf.logical_not(tf.logical_or(joined, continues))
        inner = tf.where(spaced_contraction, begin + 1, split_at)
        keep_inner = tf.logical_or(inner_space, spaced_contraction)
        cuts = tf.reshape(tf.stack([begin, inner], 1), [-1])
        keep = tf.reshape(tf.stack([keep_begin, keep_inner], 1), [-1])
        cut_rows = tf.reshape(tf.stack([row_ids, row_ids], 1), [-1])
        cuts = tf.boolean_mask(cuts, keep)
        cut_rows = tf.boolean_mask(cut_rows, keep)
        # Each piece runs to the next cut of its text, or to the text's end.
        text_len = tf.cast(tf.strings.length(texts), tf.int64)
        next_same = tf.concat([tf.equal(cut_rows[1:], cut_rows[:-1]), [False]], 0)
        next_cut = tf.concat([cuts[1:], [tf.constant(0, tf.int64)]], 0)
        stop = tf.where(next_same, next_cut, tf.gather(text_len, cut_rows))
        values = tf.strings.substr(tf.gather(texts, cut_rows), cuts, stop - cuts)
        return tf.RaggedTensor.from_value_rowids(
            values, cut_rows, nrows=tf.shape(texts, out_type=tf.int64)[0])

    # ---------------------------------------------------------------- merge

    def _merge(self, words):
        """BPE symbols of a 1-D tensor of words: `[words, (symbols)]` strings."""
        chars = tf.strings.bytes_split(words)
        values = self._bytes.lookup(chars.flat_values)
        row_ids = chars.value_rowids()
        nrows = tf.shape(words, out_type=tf.int64)[0]
        if self._ranks is None:
            return tf.RaggedTensor.from_value_rowids(values, row_ids, nrows=nrows)
        # Symbols of a word's max_word_bytes-byte chunks never merge across
        # chunks (see __init__).
        position = tf.range(tf.shape(values, out_type=tf.int64)[0]) - tf.gather(
            chars.row_splits, row_ids)
        chunk = row_ids * (2 ** 31) + position // self.max_word_bytes
        no_rank = self._no_rank

        def step(values, row_ids, chunk, _):
            n = tf.shape(values)[0]
            same = tf.equal(chunk[1:], chunk[:-1])
            keys = tf.strings.join([values[:-1], values[1:]], separator=" ")
            ranks = tf.where(same, self._ranks.lookup(keys), no_rank)
            pair_rows = row_ids[:-1]
            best = tf.math.unsorted_segment_min(ranks, pair_rows, nrows)
            hit = tf.logical_and(ranks < no_rank, tf.equal(ranks, tf.gather(best, pair_rows)))
            # Overlapping hits (a pair of two equal symbols, "a a a") are
            # merged left to right: in each run of consecutive hits, every
            # other one starting with the first.
            index = tf.range(n - 1)
            run_start = tf.logical_and(hit, tf.logical_not(
                tf.concat([[False], hit[:-1]], 0)))
            # (one extra entry keeps the gather valid when nothing was hit)
            starts = tf.concat([tf.boolean_mask(index, run_start), [0]], 0)
            run_id = tf.cumsum(tf.cast(run_start, tf.int32)) - 1
            first = tf.gather(starts, tf.maximum(run_id, 0))
            merge = tf.logical_and(hit, tf.equal((index - first) % 2, 0))
            merge = tf.concat([merge, [False]], 0)
            following = tf.concat([values[1:], [""]], 0)
            values = tf.where(merge, tf.strings.join([values, following]), values)
            keep = tf.logical_not(tf.concat([[False], merge[:-1]], 0))
            return (tf.boolean_mask(values, keep), tf.boolean_mask(row_ids, keep),
                    tf.boolean_mask(chunk, keep), tf.reduce_any(merge))

        values, row_ids, _, _ = tf.while_loop(
            lambda v, r, c, more: more, step,
            (values, row_ids, chunk, tf.constant(True)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([None]), tf.TensorShape([])))
        return tf.RaggedTensor.from_value_rowids(values, row_ids, nrows=nrows)

    def tokenize(self, texts):
        """Ids of a 1-D string tensor (or list of str): int32 `[batch, (ids)]`."""
        texts = tf.convert_to_tensor(texts, tf.string)
        scalar = texts.shape.rank == 0
        if scalar:
            texts = texts[tf.newaxis]
        words = self.split_words(texts)
        # Each distinct word of the batch is merged once.
        unique, index = tf.unique(words.flat_values)
        symbols = self._merge(unique)
        ids = symbols.with_flat_values(self._vocab.lookup(symbols.flat_values))
        per_word = tf.gather(ids, index)
        splits = tf.gather(per_word.row_splits, words.row_splits)
        out = tf.RaggedTensor.from_row_splits(per_word.flat_values, splits)
        return out[0] if scalar else out
