"""`FullTokenizer`'s ids for many lines of any script at once, compiled, without TensorFlow.

Google's `BasicTokenizer` decides everything character by character, so its
steps become tables over all of Unicode (one entry per code point, built once
per process and casing from `data.tokenization`'s own classifier, so the two
cannot disagree):

* cleaning: NUL, U+FFFD and control/format characters are dropped;
  whitespace (Google's, and the line/paragraph separators that Python's
  ``str.split`` also splits on) ends a word;
* CJK ideographs (Google's ranges) are words of their own;
* with lower casing, ``lower()``, NFD and dropping the combining marks (Mn)
  map each remaining character to zero, one or several characters
  (``É`` -> ``e``, ``İ`` -> ``i``, a Hangul syllable -> its jamo, a lone
  accent -> nothing);
* each character that the mapping gives is then a letter of the current
  word, a punctuation character (a word of its own) or whitespace.

One compiled function (numba) then walks the UTF-8 bytes of all lines,
builds the words through the tables and WordPiece-tokenizes each as Google's
greedy longest-match-first loop does, by walking a trie of the vocabulary
over code points (the longest entry that is a prefix of the rest of the word
is the first one Google's shrinking loop finds): from the root for a word's
first piece, from the ``##`` node for the others. A word that cannot be
covered, or is longer than ``max_input_chars_per_word`` characters, is one
``[UNK]``.

Two things are not character by character, and lines that hold them go to
the `fallback` (`FullTokenizer.tokenize` unless another is given), so the ids
are always `FullTokenizer`'s:

* with lower casing, the capital sigma, whose lower case depends on its
  neighbours (final sigma);
* with lower casing, characters whose mapping holds a combining character
  that is not Mn (canonical reordering could move it past another).

Without numba every line takes the fallback.
tests/data/test_unicode_wordpiece.py compares the ids with `FullTokenizer`'s
on random text made to hit every rule, both casings, Google's English and
Chinese vocabularies.
"""

import threading
import unicodedata

import numpy as np

from data import termination
from data import tokenization

try:  # pragma: no cover - numba is in requirements.txt
    import numba
    _njit = numba.njit(cache=True, nogil=True)
except ImportError:  # pragma: no cover
    numba = None
    _njit = None

_CODE_POINTS = 0x110000

# What a code point of the text is (the `kind` table).
LETTER = 0    # becomes the one character `single[cp]` of the current word
DROP = 1      # vanishes (cleaned away, or maps to nothing)
SPACE = 2     # ends the current word
ALONE = 3     # the one character `single[cp]` as a word of its own
EXPAND = 4    # several characters: expansion `single[cp]` (with their own kinds)
FALLBACK = 5  # the whole line goes to the fallback

# Fibonacci hashing of the (node, code point) keys of the trie's deeper levels.
_HASH_MULTIPLIER = 0x9E3779B97F4A7C15


class CharTables(object):
    """BasicTokenizer as per-code-point tables for one casing (see the module doc).

    kind uint8[0x110000] and single int32[0x110000] as above; an expansion e
    is exp_chars[exp_offsets[e]:exp_offsets[e + 1]] with exp_kinds (LETTER,
    SPACE or ALONE) for each of its characters.
    """

    def __init__(self, do_lower_case):
        self.do_lower_case = bool(do_lower_case)
        kind = np.zeros(_CODE_POINTS, np.uint8)
        single = np.arange(_CODE_POINTS, dtype=np.int32)
        for low, high in tokenization.CJK_RANGES:
            kind[low:high + 1] = ALONE
        expansions = []
        classify = tokenization._classify_char  # pylint: disable=protected-access
        category = unicodedata.category
        combining = unicodedata.combining
        for cp in range(_CODE_POINTS):
            char = chr(cp)
            cat = category(char)
            if cat == "Cn" or cat == "Co":
                # Unassigned and private use: no case, no decomposition, not a
                # control, space or punctuation; CJK if in Google's ranges.
                continue
            cls = classify(char)
            if cls == tokenization._DROP:  # pylint: disable=protected-access
                kind[cp] = DROP
                continue
            if cls == tokenization._SPACE or char.isspace():  # pylint: disable=protected-access
                kind[cp] = SPACE
                continue
            if not self.do_lower_case:
                if cls == tokenization._PUNCT:  # pylint: disable=protected-access
                    kind[cp] = ALONE
                # CJK was set above, everything else is a letter of itself.
                continue
            if cp == 0x3A3:  # capital sigma: final or not depends on its neighbours
                kind[cp] = FALLBACK
                continue
            if (cat != "Mn" and char.lower() == char
                    and unicodedata.is_normalized("NFD", char)):
                # Most characters: nothing to lower-case or strip.
                mapped = char
                if combining(char):
                    kind[cp] = FALLBACK
                    continue
            else:
                mapped = _lower_strip(char)
                if any(combining(c) for c in mapped):  # the Mn are gone already
                    kind[cp] = FALLBACK
                    continue
            if cls == tokenization._CJK:  # pylint: disable=protected-access
                # A word of its own: lower-cased and stripped as a whole.
                if mapped == char:
                    continue
                if len(mapped) == 1 and _mapped_kind(mapped) == LETTER:
                    single[cp] = ord(mapped)
                else:  # pragma: no cover - no such character so far
                    kind[cp] = FALLBACK
                continue
            if mapped == char and cls != tokenization._PUNCT:  # pylint: disable=protected-access
                continue
            if not mapped:
                kind[cp] = DROP
            elif len(mapped) == 1:
                kind[cp] = _mapped_kind(mapped)
                single[cp] = ord(mapped)
            else:
                kind[cp] = EXPAND
                single[cp] = len(expansions)
                expansions.append(mapped)
        self.kind = kind
        self.single = single
        self.exp_offsets = np.zeros(len(expansions) + 1, np.int32)
        np.cumsum([len(e) for e in expansions], out=self.exp_offsets[1:])
        text = "".join(expansions)
        self.exp_chars = np.array([ord(c) for c in text], np.int32)
        self.exp_kinds = np.array([_mapped_kind(c) for c in text], np.uint8)
        # The most characters one code point becomes.
        self.max_expansion = max([1] + [len(e) for e in expansions])


def _lower_strip(char):
    """Google's lower casing and accent stripping of one character."""
    text = unicodedata.normalize("NFD", char.lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _mapped_kind(char):
    """What a character that lower casing and stripping gave is in its word."""
    if char.isspace():  # the final whitespace split
        return SPACE
    if tokenization._classify_char(char) == tokenization._PUNCT:  # pylint: disable=protected-access
        return ALONE
    return LETTER


_TABLES = {}
_TABLES_LOCK = threading.Lock()


def char_tables(do_lower_case):
    """The `CharTables` of a casing, built once per process (about half a second)."""
    key = bool(do_lower_case)
    with _TABLES_LOCK:
        if key not in _TABLES:
            _TABLES[key] = CharTables(key)
        return _TABLES[key]


if numba is not None:

    @_njit
    def _slot(keys, shift, key):
        """The slot of `key` in the table, or of the empty slot where it would go."""
        mask = len(keys) - 1
        h = np.int64((np.uint64(key) * np.uint64(_HASH_MULTIPLIER)) >> np.uint64(shift))
        while keys[h] != -1 and keys[h] != key:
            h = (h + 1) & mask
        return h

    @_njit
    def _build_trie(chars, offsets, ids, table_bits):
        """The trie of the code-point strings chars[offsets[k]:offsets[k + 1]] with ids[k].

        Returns (first, keys, children, terminal): first[cp] the child of the
        root along cp (or -1), keys[h] = node * 0x110000 + cp (-1 for an empty
        slot) and children[h] its child for every deeper edge; terminal[node]
        the id of the entry ending at node, or -1. Node 0 is the root.
        Entries are distinct (the vocabulary dict's keys) and not empty.
        """
        shift = 64 - table_bits
        first = np.full(_CODE_POINTS, -1, np.int32)
        keys = np.full(1 << table_bits, -1, np.int64)
        children = np.zeros(1 << table_bits, np.int32)
        terminal = np.full(len(chars) + 1, -1, np.int32)
        nodes = 1
        for k in range(len(offsets) - 1):
            cp = chars[offsets[k]]
            node = first[cp]
            if node < 0:
                node = nodes
                first[cp] = node
                nodes += 1
            for p in range(offsets[k] + 1, offsets[k + 1]):
                key = np.int64(node) * _CODE_POINTS + chars[p]
                h = _slot(keys, shift, key)
                if keys[h] == -1:
                    keys[h] = key
                    children[h] = nodes
                    nodes += 1
                node = children[h]
            terminal[node] = ids[k]
        return first, keys, children, terminal[:nodes].copy()

    @_njit
    def _child(keys, children, shift, node, cp):
        key = np.int64(node) * _CODE_POINTS + cp
        h = _slot(keys, shift, key)
        return children[h] if keys[h] == key else -1

    @_njit
    def _continuation_first(first, keys, children, shift):
        """first[] of the "##" node: its child along each code point, or -1 (all
        -1 if no entry starts with "##")."""
        out = np.full(_CODE_POINTS, -1, np.int32)
        node = first[35]  # '#'
        if node >= 0:
            node = _child(keys, children, shift, node, 35)
        if node < 0:
            return out
        for h in range(len(keys)):
            key = keys[h]
            if key >= 0 and key // _CODE_POINTS == node:
                out[key % _CODE_POINTS] = children[h]
        return out

    @_njit
    def _word_pieces(word, length, out, n, first, cont_first, keys, children, shift,
                     terminal, unk_id, max_chars):
        """Appends the WordPiece ids of word[:length] to out[n:]; returns the new n."""
        if length > max_chars:
            out[n] = unk_id
            return n + 1
        word_first = n
        start = 0
        while start < length:
            node = first[word[start]] if start == 0 else cont_first[word[start]]
            best_end = -1
            best_id = -1
            p = start + 1
            while node >= 0:
                if terminal[node] >= 0:
                    best_end = p
                    best_id = terminal[node]
                if p >= length:
                    break
                node = _child(keys, children, shift, node, word[p])
                p += 1
            if best_end < 0:
                out[word_first] = unk_id
                return word_first + 1
            out[n] = best_id
            n += 1
            start = best_end
        return n

    @_njit
    def _tokenize(text, char_counts, capacity, kind, single, exp_offsets, exp_chars, exp_kinds,
                  first, cont_first, keys, children, shift, terminal, unk_id, max_chars):
        """WordPiece ids of the lines of `text` (UTF-8; line k has char_counts[k]
        code points).

        Returns (ids int32, counts int64 per line, fallback uint8 per line):
        a line marked for the fallback has no ids here. `capacity` bounds the
        number of ids: each covers at least one of the characters that the
        tables give (the output array is allocated once; growing it inside the
        loop would cost the loop a reference count per write, 2.5x the time).
        """
        out = np.empty(capacity, np.int32)
        counts = np.zeros(len(char_counts), np.int64)
        fallback = np.zeros(len(char_counts), np.uint8)
        word = np.empty(max_chars + 1, np.int32)
        n = 0
        i = 0
        for line in range(len(char_counts)):
            line_first = n
            length = 0
            skip = False
            remaining = char_counts[line]
            while remaining > 0:
                remaining -= 1
                b = text[i]
                if b < 0x80:
                    cp = np.int64(b)
                    i += 1
                elif b < 0xE0:
                    cp = ((np.int64(b) & 0x1F) << 6) | (np.int64(text[i + 1]) & 0x3F)
                    i += 2
                elif b < 0xF0:
                    cp = (((np.int64(b) & 0x0F) << 12) | ((np.int64(text[i + 1]) & 0x3F) << 6)
                          | (np.int64(text[i + 2]) & 0x3F))
                    i += 3
                else:
                    cp = (((np.int64(b) & 0x07) << 18) | ((np.int64(text[i + 1]) & 0x3F) << 12)
                          | ((np.int64(text[i + 2]) & 0x3F) << 6) | (np.int64(text[i + 3]) & 0x3F))
                    i += 4
                if skip:
                    continue
                k = kind[cp]
                if k == 0:  # LETTER
                    if length <= max_chars:
                        word[length] = single[cp]
                    length += 1
                    continue
                if k == 1:  # DROP
                    continue
                if k == 5:  # FALLBACK
                    skip = True
                    continue
                if k == 4:  # EXPAND: each character by its own kind
                    e = single[cp]
                    for q in range(exp_offsets[e], exp_offsets[e + 1]):
                        ek = exp_kinds[q]
                        if ek == 0:
                            if length <= max_chars:
                                word[length] = exp_chars[q]
                            length += 1
                            continue
                        if length > 0:
                            n = _word_pieces(word, length, out, n, first, cont_first, keys,
                                             children, shift, terminal, unk_id, max_chars)
                            length = 0
                        if ek == 3:
                            word[0] = exp_chars[q]
                            n = _word_pieces(word, 1, out, n, first, cont_first, keys,
                                             children, shift, terminal, unk_id, max_chars)
                    continue
                # SPACE or ALONE: the end of the current word.
                if length > 0:
                    n = _word_pieces(word, length, out, n, first, cont_first, keys,
                                     children, shift, terminal, unk_id, max_chars)
                    length = 0
                if k == 3:  # ALONE: a word of one character
                    node = first[single[cp]]
                    piece = terminal[node] if node >= 0 else -1
                    out[n] = piece if piece >= 0 else unk_id
                    n += 1
            if length > 0 and not skip:
                n = _word_pieces(word, length, out, n, first, cont_first, keys, children,
                                 shift, terminal, unk_id, max_chars)
            if skip:
                n = line_first
                fallback[line] = 1
            counts[line] = n - line_first
        return out[:n].copy(), counts, fallback


def available():
    """True if the compiled path can run (numba is installed)."""
    return numba is not None


class CompiledWordPiece(object):
    """What the compiled tokenizers share: a `FullTokenizer`'s vocabulary, case, unknown
    token and longest word, and the fallback for the lines they do not take."""

    def __init__(self, full_tokenizer, fallback=None):
        self.full_tokenizer = full_tokenizer
        self.vocab = full_tokenizer.vocab
        self.do_lower_case = full_tokenizer.do_lower_case
        wordpiece = full_tokenizer.wordpiece_tokenizer
        unk = wordpiece.unk_token
        if unk not in self.vocab:
            raise ValueError("The vocabulary has no %s token" % unk)
        self._unk_id = self.vocab[unk]
        self._max_chars = int(wordpiece.max_input_chars_per_word)
        self._fallback = fallback

    def _fallback_tokens(self, lines):
        """The fallback's (default: `FullTokenizer`'s) token strings of each of `lines`."""
        if self._fallback is not None:
            return self._fallback(lines)
        return [self.full_tokenizer.tokenize(line) for line in lines]


class UnicodeWordPiece(CompiledWordPiece):
    """`FullTokenizer`'s token ids of many lines, any script, compiled.

    Args:
      full_tokenizer: a `tokenization.FullTokenizer` (its vocabulary, case,
        unknown token and longest word are used).
      fallback: callable(list of lines) -> list of lists of token strings
        for the few lines the tables cannot take (see the module doc);
        default: `full_tokenizer.tokenize` per line.
    """

    def __init__(self, full_tokenizer, fallback=None):
        super().__init__(full_tokenizer, fallback)
        self._compiled = None
        self._id_objects = np.array(list(range(max(self.vocab.values()) + 1)), dtype=object)
        if numba is None:
            return
        tables = char_tables(self.do_lower_case)
        entries = [(token, index) for token, index in self.vocab.items() if token]
        chars = np.frombuffer("".join(e[0] for e in entries).encode("utf-32-le"), np.uint32)
        chars = chars.astype(np.int32)
        offsets = np.zeros(len(entries) + 1, np.int64)
        np.cumsum([len(e[0]) for e in entries], out=offsets[1:])
        ids = np.array([e[1] for e in entries], np.int32)
        table_bits = max(10, int(2 * len(chars) + 1).bit_length())
        with termination.graceful():
            first, keys, children, terminal = _build_trie(chars, offsets, ids, table_bits)
            shift = 64 - table_bits
            cont_first = _continuation_first(first, keys, children, shift)
        self._max_expansion = tables.max_expansion
        self._compiled = (tables.kind, tables.single, tables.exp_offsets, tables.exp_chars,
                          tables.exp_kinds, first, cont_first, keys, children, shift, terminal)

    @classmethod
    def from_vocab_file(cls, vocab_file, do_lower_case=True, fallback=None):
        return cls(tokenization.FullTokenizer(vocab_file, do_lower_case), fallback=fallback)

    def _fallback_ids(self, lines):
        tokens = self._fallback_tokens(lines)
        vocab = self.vocab
        return [[vocab[token] for token in line_tokens] for line_tokens in tokens]

    def _compiled_arrays(self, lines):
        """(ids, counts, fallback mask) of the compiled pass over `lines` (str)."""
        try:
            text = "".join(lines)
        except TypeError:
            lines = [tokenization.convert_to_unicode(line) for line in lines]
            text = "".join(lines)
        data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        char_counts = np.fromiter(map(len, lines), np.int64, count=len(lines))
        # np.empty leaves the pages of the unused part untouched.
        capacity = len(text) * self._max_expansion + 16
        with termination.graceful():
            ids, counts, fallback = _tokenize(data, char_counts, capacity, *self._compiled,
                                              self._unk_id, self._max_chars)
        return lines, ids, counts, fallback

    def id_arrays(self, lines):
        """(ids int32, counts int64): every line's ids (FullTokenizer's, ``[UNK]``
        included), concatenated in line order, and how many each line has."""
        lines = list(lines)
        if self._compiled is None:
            slow = self._fallback_ids(lines)
            ids = np.fromiter((i for row in slow for i in row), np.int32)
            return ids, np.fromiter(map(len, slow), np.int64, count=len(slow))
        lines, ids, counts, fallback = self._compiled_arrays(lines)
        slow_index = np.flatnonzero(fallback)
        if not len(slow_index):
            return ids, counts
        slow = self._fallback_ids([lines[k] for k in slow_index])
        counts[slow_index] = [len(row) for row in slow]
        pieces = []
        fast_ends = np.cumsum(np.where(fallback, 0, counts))
        done = 0
        for k, row in zip(slow_index.tolist(), slow):
            end = int(fast_ends[k])
            pieces.append(ids[done:end])
            pieces.append(np.array(row, np.int32))
            done = end
        pieces.append(ids[done:])
        return np.concatenate(pieces), counts

    def ids(self, lines):
        """A list of id lists, one per line (FullTokenizer's ids, ``[UNK]`` included)."""
        lines = list(lines)
        if self._compiled is None:
            return self._fallback_ids(lines)
        lines, ids, counts, fallback = self._compiled_arrays(lines)
        # The Python ints of the ids are the vocabulary's, made once: gathering
        # them is several times faster than making millions of new ones (tolist).
        objects = self._id_objects[ids]
        ends = np.cumsum(counts).tolist()
        out = [objects[start:end].tolist() for start, end in zip([0] + ends[:-1], ends)]
        slow_index = np.flatnonzero(fallback).tolist()
        if slow_index:
            for k, row in zip(slow_index, self._fallback_ids([lines[k] for k in slow_index])):
                out[k] = row
        return out

    __call__ = ids


def warm_up():
    """Compiles (or loads from numba's on-disk cache) the kernels; see
    `compiled_nsp.warm_up`."""
    if numba is None:
        return
    chars = np.array([97, 98, 35, 35, 99], np.int32)
    first, keys, children, terminal = _build_trie(
        chars, np.array([0, 2, 5], np.int64), np.array([1, 2], np.int32), 10)
    cont_first = _continuation_first(first, keys, children, 54)
    kind = np.zeros(_CODE_POINTS, np.uint8)
    single = np.arange(_CODE_POINTS, dtype=np.int32)
    _tokenize(np.frombuffer(b"abc ab.", np.uint8), np.array([7], np.int64), 16, kind, single,
              np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0, np.uint8), first,
              cont_first, keys, children, 54, terminal, 0, 200)
