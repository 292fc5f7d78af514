"""AsciiWordPiece gives FullTokenizer's ids, line for line, whichever path a line takes."""

import random

import numpy as np
import pytest

from data import tokenization
from data.tokenizers import ascii_wordpiece

# Characters chosen to hit every rule of BasicTokenizer: ASCII letters, digits and
# punctuation; whitespace of every kind (tab, line ends, vertical tab, form feed,
# NBSP, ideographic space); controls and format characters (NUL, U+FFFD, soft hyphen,
# zero-width joiner); accented letters precomposed and decomposed; letters whose
# lower case or decomposition is ASCII (Kelvin sign, dotted capital I, Greek question
# mark and varia); Greek sigma (final form when lower-cased); CJK; non-ASCII
# punctuation; an emoji.
_POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
         list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + [" "] * 12 +
         ["\t", "\r", "\n", "\x0b", "\x0c", "\x00", "\x1f", "\x7f", "\ufffd", "\u00a0",
          "\u3000", "\u00ad", "\u200d", "\u00e9", "\u00c9", "e\u0301", "\u0301", "\u00fc",
          "\u00f1", "\u00df", "\u0130", "\u212a", "\u037e", "\u1fef", "\u03a3", "\u03c3",
          "\u4e2d", "\u6587", "\u3002", "\u201c", "\u2014", "\U0001f600", "caf\u00e9"])


def _random_lines(rng, count, words):
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 14)):
            roll = rng.random()
            if roll < 0.5:
                parts.append(rng.choice(words))
            elif roll < 0.9:
                parts.append(rng.choice(_POOL))
            else:
                parts.append("".join(rng.choice(words) for _ in range(rng.randint(2, 6))))
        joiner = rng.choice([" ", "", " ", "-"])
        lines.append(joiner.join(parts) + rng.choice(["", "\n", "\r\n"]))
    # Words longer than max_input_chars_per_word (200) become [UNK]; 200 exactly do not.
    lines.append("x" * 201 + " ok")
    lines.append("ab" * 100)
    lines.append("Ab" * 100 + "\u00e9")
    lines.append("")
    lines.append("   \t  ")
    return lines


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("vocab", ["sample", "english"])
def test_ids_equal_full_tokenizer(do_lower_case, vocab, sample_vocab_file,
                                  english_uncased_vocab_file):
    vocab_file = sample_vocab_file if vocab == "sample" else english_uncased_vocab_file
    full = tokenization.FullTokenizer(vocab_file, do_lower_case)
    words = [w for w in full.vocab if not w.startswith("[")][:3000]
    words = [w[2:] if w.startswith("##") else w for w in words]
    words = words + [w.upper() for w in words[:300]] + [w.title() for w in words[300:600]]
    rng = random.Random(7 if do_lower_case else 8)
    lines = _random_lines(rng, 3000, words)
    fallback_lines = []

    def fallback(batch):
        fallback_lines.extend(batch)
        return [full.tokenize(line) for line in batch]

    fast = ascii_wordpiece.AsciiWordPiece(full, fallback=fallback)
    got = fast.ids(lines)
    for line, ids in zip(lines, got):
        assert ids == full.convert_tokens_to_ids(full.tokenize(line)), repr(line)
    # Both paths were taken; accented lines take the compiled one only with lower casing.
    assert 0.2 * len(lines) < len(fallback_lines) < 0.9 * len(lines)
    accented = "Caf\u00e9 au lait, s'il vous pla\u00eet."
    fallback_lines.clear()
    assert fast.ids([accented]) == [full.convert_tokens_to_ids(full.tokenize(accented))]
    assert fallback_lines == ([] if do_lower_case else [accented])


def test_default_fallback_and_unknown_words(sample_vocab_file):
    full = tokenization.FullTokenizer(sample_vocab_file, True)
    fast = ascii_wordpiece.AsciiWordPiece(full)
    lines = ["The baker opens the shop.", "zzqxj qqq", "\u4e2d\u6587 and more", "y" * 500]
    assert fast.ids(lines) == [full.convert_tokens_to_ids(full.tokenize(line))
                               for line in lines]
    assert fast.ids(["y" * 500]) == [[full.vocab["[UNK]"]]]


def _vocab_file(tmp_path, tokens):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


def test_odd_vocabularies(tmp_path):
    """Repeated lines (the dict's later id wins), no "##" entries at all (every
    word longer than one piece is [UNK]), an entry that is a prefix of another,
    non-ASCII entries, and the longest match winning over shorter ones."""
    tokens = ["[PAD]", "[UNK]", "a", "ab", "abc", "b", "c", "ab", "xé", ".", "abcab"]
    full = tokenization.FullTokenizer(_vocab_file(tmp_path, tokens), True)
    assert full.vocab["ab"] == 7  # the repeated line's id
    fast = ascii_wordpiece.AsciiWordPiece(full)
    lines = ["ab abc abcab abca. b", "abd x c", "ABC.", ""]
    expected = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
    assert fast.ids(lines) == expected
    assert expected[0] == [7, 4, 10, 1, 9, 5] and expected[1] == [1, 1, 6]
    with_continuations = tokens + ["##a", "##b", "##ca", "##d"]
    full = tokenization.FullTokenizer(_vocab_file(tmp_path, with_continuations), True)
    fast = ascii_wordpiece.AsciiWordPiece(full)
    expected = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
    assert fast.ids(lines) == expected
    assert expected[0][:4] == [7, 4, 10, 4]  # "abca" -> abc ##a


def test_id_arrays_keep_line_order_across_paths(sample_vocab_file):
    full = tokenization.FullTokenizer(sample_vocab_file, True)
    fast = ascii_wordpiece.AsciiWordPiece(full)
    lines = ["\u4e2d\u6587", "The baker.", "", "\u9762\u5305 bread", "opens the shop", "\u4e2d"]
    ids, counts = fast.id_arrays(lines)
    expected = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
    assert counts.tolist() == [len(e) for e in expected]
    assert ids.dtype == np.int32 and ids.tolist() == [i for e in expected for i in e]
    ids, counts = fast.id_arrays([])
    assert len(ids) == 0 and len(counts) == 0


def test_vocabulary_too_large_for_the_trie_takes_the_fallback(sample_vocab_file, monkeypatch):
    monkeypatch.setattr(ascii_wordpiece, "_MAX_TRIE_BYTES", 10)
    full = tokenization.FullTokenizer(sample_vocab_file, True)
    seen = []

    def fallback(batch):
        seen.extend(batch)
        return [full.tokenize(line) for line in batch]

    fast = ascii_wordpiece.AsciiWordPiece(full, fallback=fallback)
    lines = ["The baker opens the shop.", "\u4e2d\u6587 and more", ""]
    assert fast.ids(lines) == [full.convert_tokens_to_ids(full.tokenize(line))
                               for line in lines]
    assert seen == lines


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_other_lines_through_unicode_wordpiece(do_lower_case, chinese_vocab_file):
    """Enough non-ASCII text in one call goes through the compiled UnicodeWordPiece
    (only its capital-sigma lines reach the fallback), in line order with the ASCII
    lines, and keeps doing so for later calls however small."""
    full = tokenization.FullTokenizer(chinese_vocab_file, do_lower_case)
    words = [w for w in full.vocab if not w.startswith("[")][:3000]
    words = [w[2:] if w.startswith("##") else w for w in words]
    words = words + [w.upper() for w in words[:300]] + [w.title() for w in words[300:600]]
    lines = _random_lines(random.Random(9), 2000, words)
    seen = []

    def fallback(batch):
        seen.extend(batch)
        return [full.tokenize(line) for line in batch]

    fast = ascii_wordpiece.AsciiWordPiece(full, fallback=fallback, unicode_min_chars=20000)
    assert fast.ids(lines) == [full.convert_tokens_to_ids(full.tokenize(line))
                               for line in lines]
    sigma = [line for line in lines if "\u03a3" in line]
    assert sigma and seen == (sigma if do_lower_case else [])
    seen.clear()
    few = ["Caf\u00e9 \u4e2d\u6587", "plain text", "\u03a3\u03bf\u03c6\u03af\u03b1"]
    ids, counts = fast.id_arrays(few)
    expected = [full.convert_tokens_to_ids(full.tokenize(line)) for line in few]
    assert counts.tolist() == [len(e) for e in expected]
    assert ids.tolist() == [i for e in expected for i in e]
    assert seen == ([few[2]] if do_lower_case else [])
    # Below the threshold, and with it switched off, the fallback takes them all.
    for fresh in (ascii_wordpiece.AsciiWordPiece(full, fallback=fallback),
                  ascii_wordpiece.AsciiWordPiece(full, fallback=fallback,
                                                 unicode_min_chars=None)):
        seen.clear()
        assert fresh.ids(few) == expected
        assert seen == [few[0], few[2]]
