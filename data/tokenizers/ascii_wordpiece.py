"""`FullTokenizer`'s ids for many lines at once, compiled, without TensorFlow.

Pre-training data is mostly plain text. For a line of printable ASCII
(characters 0x20-0x7E, plus tabs and the line end, which are whitespace as
the space is) every step of Google's `BasicTokenizer` is simple: no control
characters to drop, no Chinese characters to isolate, no accents to strip,
the only whitespace is the space, lower casing is ASCII lower casing, and
punctuation is every printable non-alphanumeric character (Google's
`_is_punctuation` takes all of 33-47, 58-64, 91-96 and 123-126). So such lines
are split and WordPiece-tokenized by one compiled function (numba) over the
bytes of all of them: words are runs of letters and digits, each punctuation
character is a word of its own, and Google's greedy longest-match-first
WordPiece becomes a walk down a trie of the vocabulary (the longest vocabulary
entry that is a prefix of the rest of the word is the first one Google's
shrinking loop finds), from the root for a word's first piece and from the
``##`` node for the others; a word that cannot be covered, or is longer than
``max_input_chars_per_word``, becomes one ``[UNK]``. With lower casing, a line
that becomes printable ASCII once lower-cased and stripped of accents
(``Café`` -> ``cafe``, Google's own steps, see `_plain_form`) goes the same
way. Every other line (CJK, controls, Unicode spaces or punctuation, ...) goes
through `unicode_wordpiece.UnicodeWordPiece` (compiled too, for any script,
with per-code-point tables) when there are enough of them to pay for building
its tables (``unicode_min_chars`` characters in one call; the tables take
about half a second once per process), else through the `fallback` given --
`FullTokenizer` itself, or the in-graph `BulkTokenizer` for large non-ASCII
corpora; the few lines `UnicodeWordPiece` leaves (a capital sigma when lower
casing, see there) go to the `fallback` too. So the ids are always
`FullTokenizer`'s (tests/data/test_ascii_wordpiece.py compares them on random text
made to hit every rule).

The trie is built from the `FullTokenizer`'s own vocabulary dict, so ids agree
even for vocabularies with repeated lines. It is an open-addressing hash
table of (node, byte) -> child. Without numba every line takes the fallback.
"""

import unicodedata

import numpy as np

from data import termination
from data.tokenizers import unicode_wordpiece

try:  # pragma: no cover - numba is in requirements.txt
    import numba
    _njit = numba.njit(cache=True, nogil=True)
except ImportError:  # pragma: no cover
    numba = None
    _njit = None

# Google's _is_punctuation over printable ASCII: every non-alphanumeric character.
_PUNCTUATION = np.zeros(128, np.bool_)
for _c in range(33, 127):
    _PUNCTUATION[_c] = not chr(_c).isalnum()
del _c

# Knuth's multiplicative hashing (2**32 / golden ratio). A key is below 256 times
# the vocabulary's bytes, so for vocabularies under _MAX_TRIE_BYTES the product
# fits an int64; its middle bits pick the slot.
_HASH_MULTIPLIER = 2654435761
_HASH_SHIFT = 15
_MAX_TRIE_BYTES = 1 << 22

# Characters of other lines in one call from which they go through
# UnicodeWordPiece: FullTokenizer takes about a microsecond per character, the
# tables about half a second once per process.
UNICODE_MIN_CHARS = 200000


if numba is not None:

    @_njit
    def _slot(keys, mask, key):
        """The slot of `key` in the table, or of the empty slot where it would go."""
        h = ((key * _HASH_MULTIPLIER) >> _HASH_SHIFT) & mask
        while keys[h] != -1 and keys[h] != key:
            h = (h + 1) & mask
        return h

    @_njit
    def _child(keys, children, mask, node, byte):
        """The child of `node` along `byte`, or -1."""
        key = node * 256 + byte
        h = _slot(keys, mask, key)
        return children[h] if keys[h] == key else -1

    @_njit
    def _build_trie(data, offsets, ids, table_size):
        """The trie of the byte strings data[offsets[k]:offsets[k + 1]] with ids[k].

        Returns (keys, children, terminal, continuation): keys[h] = node * 256
        + byte (or -1 for an empty slot) and children[h] the child it leads
        to; terminal[node] the id of the entry ending at node, or -1;
        continuation the node of "##" (-1 if no entry starts with it). Node 0
        is the root. Entries are distinct (the vocabulary dict's keys).
        """
        mask = table_size - 1
        keys = np.full(table_size, -1, np.int64)
        children = np.zeros(table_size, np.int32)
        terminal = np.full(len(data) + 1, -1, np.int32)
        nodes = 1
        for k in range(len(offsets) - 1):
            node = 0
            for p in range(offsets[k], offsets[k + 1]):
                key = node * 256 + data[p]
                h = _slot(keys, mask, key)
                if keys[h] == -1:
                    keys[h] = key
                    children[h] = nodes
                    nodes += 1
                node = children[h]
            terminal[node] = ids[k]
        continuation = _child(keys, children, mask, 0, 35)  # '#'
        if continuation >= 0:
            continuation = _child(keys, children, mask, continuation, 35)
        return keys, children, terminal[:nodes].copy(), continuation

    @_njit
    def _tokenize(text, line_offsets, keys, children, terminal, punctuation,
                  continuation, unk_id, max_chars):
        """WordPiece ids of the printable-ASCII lines text[line_offsets[k]:line_offsets[k + 1]].

        Returns (ids int32, counts int64 per line). `continuation` is the
        trie node of "##" (-1 if no entry starts with it).
        """
        mask = len(keys) - 1
        out = np.empty(len(text) + 1, np.int32)  # a piece covers >= 1 byte
        counts = np.zeros(len(line_offsets) - 1, np.int64)
        n = 0
        for line in range(len(line_offsets) - 1):
            first = n
            i = line_offsets[line]
            end = line_offsets[line + 1]
            while i < end:
                c = text[i]
                if c == 32:
                    i += 1
                    continue
                if punctuation[c]:
                    j = i + 1
                else:
                    j = i + 1
                    while j < end and text[j] != 32 and not punctuation[text[j]]:
                        j += 1
                # The word text[i:j].
                if j - i > max_chars:
                    out[n] = unk_id
                    n += 1
                    i = j
                    continue
                word_first = n
                start = i
                while start < j:
                    node = 0 if start == i else continuation
                    best_end = -1
                    best_id = -1
                    p = start
                    while node >= 0 and p < j:
                        node = _child(keys, children, mask, node, text[p])
                        if node < 0:
                            break
                        p += 1
                        if terminal[node] >= 0:
                            best_end = p
                            best_id = terminal[node]
                    if best_end < 0:
                        n = word_first
                        out[n] = unk_id
                        n += 1
                        break
                    out[n] = best_id
                    n += 1
                    start = best_end
                i = j
            counts[line] = n - first
        return out[:n].copy(), counts


def warm_up():
    """Compiles (or loads from numba's on-disk cache) the two kernels; see
    `compiled_nsp.warm_up`."""
    if numba is None:
        return
    data = np.frombuffer(b"ab##c", np.uint8)
    trie = _build_trie(data, np.array([0, 2, 5], np.int64), np.array([1, 2], np.int32), 1024)
    _tokenize(np.frombuffer(b"abc ab.", np.uint8), np.array([0, 7], np.int64), trie[0],
              trie[1], trie[2], _PUNCTUATION, trie[3], 0, 200)


class AsciiWordPiece(unicode_wordpiece.CompiledWordPiece):
    """Token ids of lines: printable-ASCII lines compiled, the rest through `fallback`.

    Args:
      full_tokenizer: a `tokenization.FullTokenizer` (its vocabulary, case,
        unknown token and longest word are used).
      fallback: callable(list of lines) -> list of lists of token strings
        for the other lines; default: `full_tokenizer.tokenize` per line.
      unicode_min_chars: the other lines of a call go through
        `UnicodeWordPiece` instead when they have at least this many
        characters (and from then on always); None: never.
    """

    def __init__(self, full_tokenizer, fallback=None, unicode_min_chars=UNICODE_MIN_CHARS):
        super().__init__(full_tokenizer, fallback)
        self._unicode_min_chars = unicode_min_chars
        self._unicode = None
        self._trie = None
        entries = [(token.encode("ascii"), index) for token, index in self.vocab.items()
                   if token.isascii() and token]
        data = np.frombuffer(b"".join(e[0] for e in entries), np.uint8)
        if numba is not None and len(data) < _MAX_TRIE_BYTES:
            offsets = np.zeros(len(entries) + 1, np.int64)
            np.cumsum([len(e[0]) for e in entries], out=offsets[1:])
            ids = np.array([e[1] for e in entries], np.int32)
            table_size = 1 << max(10, int(2 * len(data) + 1).bit_length())
            with termination.graceful():
                keys, children, terminal, continuation = _build_trie(
                    data, offsets, ids, table_size)
            self._trie = (keys, children, terminal, int(continuation))

    def id_arrays(self, lines):
        """(ids int32, counts int64): every line's ids (FullTokenizer's, ``[UNK]``
        included), concatenated in line order, and how many each line has."""
        # Once UnicodeWordPiece is in use, lines that are not ASCII go to it
        # as they are (lower casing and stripping them here first would cost more).
        strip = self._unicode is None
        plain = ([_plain_form(line, self.do_lower_case, strip) for line in lines]
                 if self._trie is not None else [None] * len(lines))
        fast_index = [k for k, text in enumerate(plain) if text is not None]
        counts = np.zeros(len(lines), np.int64)
        fast_ids = np.zeros(0, np.int32)
        if fast_index:
            fast_text = [plain[k] for k in fast_index]
            text = np.frombuffer("".join(fast_text).encode("ascii"), np.uint8)
            offsets = np.zeros(len(fast_text) + 1, np.int64)
            np.cumsum(np.fromiter(map(len, fast_text), np.int64, count=len(fast_text)),
                      out=offsets[1:])
            keys, children, terminal, continuation = self._trie
            with termination.graceful():
                fast_ids, fast_counts = _tokenize(
                    text, offsets, keys, children, terminal, _PUNCTUATION, continuation,
                    self._unk_id, self._max_chars)
            if len(fast_index) == len(lines):
                return fast_ids, fast_counts
            counts[fast_index] = fast_counts
        slow_index = [k for k, text in enumerate(plain) if text is None]
        slow_lines = [lines[k] for k in slow_index]
        if self._unicode_path(slow_lines):
            slow_ids, slow_counts = self._unicode.id_arrays(slow_lines)
            if len(fast_index) == 0:
                return slow_ids, slow_counts
        else:
            slow = self._fallback_tokens(slow_lines)
            vocab = self.vocab
            slow_ids = np.array([vocab[token] for tokens in slow for token in tokens],
                                np.int32)
            slow_counts = np.fromiter(map(len, slow), np.int64, count=len(slow))
        counts[slow_index] = slow_counts
        # Each token's place in the merged output: its line's start there plus
        # its rank within the line.
        starts = np.zeros(len(lines), np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        merged = np.empty(int(counts.sum()), np.int32)
        for index, part_ids, part_counts in ((fast_index, fast_ids, counts[fast_index]),
                                             (slow_index, slow_ids, slow_counts)):
            if not len(part_ids):
                continue
            part_starts = np.zeros(len(part_counts), np.int64)
            np.cumsum(part_counts[:-1], out=part_starts[1:])
            shift = np.repeat(starts[index] - part_starts, part_counts)
            merged[np.arange(len(part_ids)) + shift] = part_ids
        return merged, counts

    def _unicode_path(self, lines):
        """Whether `lines` (the other lines of a call) go through UnicodeWordPiece."""
        if self._unicode is None:
            if (self._unicode_min_chars is None or not unicode_wordpiece.available()
                    or sum(map(len, lines)) < self._unicode_min_chars):
                return False
            self._unicode = unicode_wordpiece.UnicodeWordPiece(self.full_tokenizer,
                                                               fallback=self._fallback)
        return True

    def ids(self, lines):
        """A list of id lists, one per line (FullTokenizer's ids, ``[UNK]`` included)."""
        ids, counts = self.id_arrays(lines)
        ends = np.cumsum(counts).tolist()
        flat = ids.tolist()
        return [flat[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _plain_form(line, do_lower_case, strip=True):
    """The printable-ASCII text `BasicTokenizer` sees in `line`, or None if it is not one.

    Line ends and tabs are whitespace, as the space is. With lower casing,
    Google lower-cases, decomposes (NFD) and drops combining marks (Mn) before
    splitting; character by character, so it can be done to the whole line
    first: a line whose result is printable ASCII ("Café" -> "cafe") is then
    tokenized as that ASCII text. Anything else that BasicTokenizer treats
    specially (controls, Unicode spaces, CJK, punctuation outside ASCII)
    stays non-ASCII through these steps, so its line is left to the fallback.
    With `strip` False, a line that is not ASCII is None at once.
    """
    text = line.rstrip("\r\n")
    if "\t" in text:
        text = text.replace("\t", " ")
    if text.isascii():
        if not text.isprintable():
            return None
        return text.lower() if do_lower_case else text
    if not do_lower_case or not strip:
        return None
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if c.isascii() or unicodedata.category(c) != "Mn")
    if text.isascii() and text.isprintable():
        return text
    return None
