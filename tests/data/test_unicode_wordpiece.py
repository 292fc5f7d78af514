"""UnicodeWordPiece gives FullTokenizer's ids, line for line, for text of any script."""

import random
import sys
import unicodedata

import numpy as np
import pytest

from data import tokenization
from data.tokenizers import unicode_wordpiece

# Characters chosen to hit every rule of BasicTokenizer: ASCII letters, digits and
# punctuation; whitespace of every kind (tab, line ends, NBSP, ogham and ideographic
# spaces, the line and paragraph separators that only str.split() splits on); controls
# and format characters (NUL, U+FFFD, NEL, soft hyphen, zero-width space and joiner,
# byte-order mark, a tag character); accented letters precomposed and decomposed, lone
# combining marks (Mn), a variation selector; letters whose lower case or decomposition
# is ASCII or several characters (Kelvin sign, dotted capital I, n preceded by
# apostrophe, Hangul syllables, a title-case digraph, full-width letters); Greek capital
# sigma (final form when lower-cased) and small sigmas; combining characters that are
# not Mn (spacing marks, musical stems); CJK ideographs of the BMP, of plane 2 and
# compatibility ideographs (NFD maps them to other ideographs); punctuation outside
# ASCII (CJK, full-width, general, Greek question mark and varia whose NFD is ASCII);
# symbols, emoji with a joiner, private use, an unassigned code point, a lone
# surrogate; Arabic, Devanagari, Thai.
_POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
         list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + [" "] * 12 +
         ["\t", "\r", "\n", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u1680", "\u2009",
          "\u3000", "\u2028", "\u2029",
          "\x00", "\x1f", "\x7f", "\ufffd", "\u00ad", "\u200b", "\u200d", "\ufeff",
          "\U000e0041",
          "\u00e9", "\u00c9", "e\u0301", "\u0301", "\u0323\u0301", "\ufe0f", "\u00fc",
          "\u00f1", "\u00df", "\u0130", "\u212a", "\u0149", "\u01c5", "\uff21\uff42",
          "\ud55c\uad6d\uc5b4", "\u1100\u1161",
          "\u03a3", "\u0391\u03a3", "\u03c3", "\u03c2", "\u1f88",
          "\u0903", "\U0001d165", "\U0001d165\U0001d16e", "a\U0001d16d\U0001d165",
          "\u4e2d", "\u6587", "\U00020000", "\uf900", "\U0002f800",
          "\u3002", "\u201c", "\u2014", "\uff01", "\u00bf", "\u037e", "\u1fef", "\u00b4",
          "\u00a9", "\u20ac", "\U0001f600", "\U0001f469\u200d\U0001f4bb", "\ue000",
          "\u0378", "\ud800", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
          "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a",
          "caf\u00e9", "Caf\u00c9", "na\u00efve"])


def _expected(full, lines):
    return [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]


def _vocab_words(full, count=3000):
    words = [w for w in full.vocab if not w.startswith("[")]
    words = [w[2:] if w.startswith("##") else w for w in random.Random(3).sample(
        words, min(count, len(words)))]
    return words + [w.upper() for w in words[:300]] + [w.title() for w in words[300:600]]


def _random_lines(rng, count, words):
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 14)):
            roll = rng.random()
            if roll < 0.45:
                parts.append(rng.choice(words))
            elif roll < 0.8:
                parts.append(rng.choice(_POOL))
            elif roll < 0.9:
                parts.append(rng.choice(words) + rng.choice(_POOL) + rng.choice(words))
            else:
                parts.append("".join(rng.choice(words) for _ in range(rng.randint(2, 6))))
        joiner = rng.choice([" ", "", " ", "-"])
        lines.append(joiner.join(parts) + rng.choice(["", "\n", "\r\n"]))
    # Words longer than max_input_chars_per_word (200) become [UNK]; 200 exactly do
    # not; the length counts the characters lower casing and stripping give
    # (67 Hangul syllables are 201 jamo).
    lines += ["x" * 201 + " ok", "ab" * 100, "Ab" * 100 + "\u00e9", "e\u0301" * 200,
              "\ud55c" * 67, "\ud55c" * 66, "", "   \t  ", "\u4e2d" * 300]
    return lines


@pytest.fixture(scope="module")
def vocab_files(sample_vocab_file, english_uncased_vocab_file, chinese_vocab_file):
    return {"sample": sample_vocab_file, "english": english_uncased_vocab_file,
            "chinese": chinese_vocab_file}


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("vocab", ["sample", "english", "chinese"])
def test_ids_equal_full_tokenizer(do_lower_case, vocab, vocab_files):
    full = tokenization.FullTokenizer(vocab_files[vocab], do_lower_case)
    rng = random.Random("%s-%s" % (vocab, do_lower_case))  # str seeds are not salted
    lines = _random_lines(rng, 2500, _vocab_words(full))
    seen = []

    def fallback(batch):
        seen.extend(batch)
        return [full.tokenize(line) for line in batch]

    fast = unicode_wordpiece.UnicodeWordPiece(full, fallback=fallback)
    got = fast.ids(lines)
    for line, ids, expected in zip(lines, got, _expected(full, lines)):
        assert ids == expected, repr(line)
    assert all(type(i) is int for row in got for i in row)
    # Only lower-cased lines with a capital sigma or a combining character that
    # is not Mn (the musical stems) need the fallback.
    special = [line for line in lines if "\u03a3" in line or any(
        unicodedata.combining(c) and unicodedata.category(c) != "Mn"
        for c in unicodedata.normalize("NFD", line))]
    assert special and seen == (special if do_lower_case else [])
    ids, counts = fast.id_arrays(lines)
    assert ids.dtype == np.int32 and counts.tolist() == [len(row) for row in got]
    assert ids.tolist() == [i for row in got for i in row]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_every_code_point_between_words(do_lower_case, chinese_vocab_file):
    """Each assigned code point (and some unassigned ones) once, glued between two
    vocabulary words, so that whether it is dropped, a space, a word of its own, or
    part of the word (and as what) shows in the ids."""
    full = tokenization.FullTokenizer(chinese_vocab_file, do_lower_case)
    words = [w for w in full.vocab if w.isascii() and w.isalpha()]
    rng = random.Random(11)
    points = [cp for cp in range(sys.maxunicode + 1)
              if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs") or cp % 4099 == 0]
    rng.shuffle(points)
    segments = [rng.choice(words) + chr(cp) + rng.choice(words).title() for cp in points]
    lines = [" ".join(segments[i:i + 24]) for i in range(0, len(segments), 24)]
    fast = unicode_wordpiece.UnicodeWordPiece(full)
    got = fast.ids(lines)
    expected = _expected(full, lines)
    bad = [line for line, a, b in zip(lines, got, expected) if a != b]
    assert not bad, repr(bad[:3])


def test_bytes_lines_and_default_fallback(chinese_vocab_file):
    full = tokenization.FullTokenizer(chinese_vocab_file, True)
    fast = unicode_wordpiece.UnicodeWordPiece(full)
    lines = ["\u4e2d\u6587 and MORE \u03a3\u03bf\u03c6\u03af\u03b1", b"caf\xc3\xa9 \xe4\xb8\xad",
             b"bad \xff byte", "ok"]
    assert fast.ids(lines) == _expected(full, lines)
    assert fast(["x" * 500]) == [[full.vocab["[UNK]"]]]


def _vocab_file(tmp_path, tokens):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


def test_odd_vocabularies(tmp_path):
    """Repeated lines (the dict's later id wins), no "##" entries at all (every word
    longer than one piece is [UNK]), entries that are prefixes of others, non-ASCII
    and CJK entries, and the longest match winning over shorter ones."""
    tokens = ["[PAD]", "[UNK]", "a", "ab", "abc", "b", "c", "ab", "x\u00e9", ".", "abcab",
              "\u4e2d", "\u00e9", "\u00e9t\u00e9"]
    for extra in ([], ["##a", "##b", "##ca", "##d", "##\u00e9", "##t\u00e9", "##\u4e2d"]):
        for do_lower_case in (True, False):
            full = tokenization.FullTokenizer(_vocab_file(tmp_path, tokens + extra),
                                              do_lower_case)
            assert full.vocab["ab"] == 7  # the repeated line's id
            fast = unicode_wordpiece.UnicodeWordPiece(full)
            lines = ["ab abc abcab abca. b", "abd x c", "ABC.", "", "x\u00e9 \u00e9t\u00e9x",
                     "\u00c9T\u00c9 ab\u4e2d\u4e2dab", "xe\u0301t\u00e9"]
            assert fast.ids(lines) == _expected(full, lines), (extra, do_lower_case)


def test_id_arrays_keep_line_order_around_fallback_lines(sample_vocab_file):
    full = tokenization.FullTokenizer(sample_vocab_file, True)
    fast = unicode_wordpiece.UnicodeWordPiece(full)
    lines = ["\u03a3", "The baker.", "", "\u9762\u5305 bread \u03a3x", "opens the shop",
             "\u03a3\u03a3 the"]
    ids, counts = fast.id_arrays(lines)
    expected = _expected(full, lines)
    assert counts.tolist() == [len(e) for e in expected]
    assert ids.tolist() == [i for e in expected for i in e]
    ids, counts = fast.id_arrays([])
    assert len(ids) == 0 and len(counts) == 0
    assert fast.ids([]) == []


def test_without_numba_every_line_takes_the_fallback(sample_vocab_file, monkeypatch):
    monkeypatch.setattr(unicode_wordpiece, "numba", None)
    full = tokenization.FullTokenizer(sample_vocab_file, True)
    seen = []

    def fallback(batch):
        seen.extend(batch)
        return [full.tokenize(line) for line in batch]

    fast = unicode_wordpiece.UnicodeWordPiece(full, fallback=fallback)
    lines = ["The baker opens the shop.", "\u4e2d\u6587 and more", ""]
    assert fast.ids(lines) == _expected(full, lines)
    ids, counts = fast.id_arrays(lines)
    assert ids.tolist() == [i for e in _expected(full, lines) for i in e]
    assert seen == lines + lines


def test_tables_agree_with_the_classifier():
    """Spot checks of the tables themselves (the ids tests cover them all)."""
    lower = unicode_wordpiece.char_tables(True)
    cased = unicode_wordpiece.char_tables(False)
    assert unicode_wordpiece.char_tables(True) is lower
    u = unicode_wordpiece
    for cp, kind_lower, kind_cased in ((0x41, u.LETTER, u.LETTER), (0x20, u.SPACE, u.SPACE),
                                       (0x2028, u.SPACE, u.SPACE), (0x00, u.DROP, u.DROP),
                                       (0x200B, u.DROP, u.DROP), (0x0301, u.DROP, u.LETTER),
                                       (0x4E2D, u.ALONE, u.ALONE), (0x3002, u.ALONE, u.ALONE),
                                       (0x1FEF, u.ALONE, u.LETTER), (0xAC00, u.EXPAND, u.LETTER),
                                       (0x03A3, u.FALLBACK, u.LETTER)):
        assert (lower.kind[cp], cased.kind[cp]) == (kind_lower, kind_cased), hex(cp)
    assert lower.single[0x41] == 0x61 and cased.single[0x41] == 0x41
    assert lower.single[0xF900] == ord(unicodedata.normalize("NFD", "\uf900"))
    assert lower.single[0x1FEF] == 0x60
