# coding=utf-8
"""Vocabulary learning: Google's reserved layout, CJK characters, coverage."""

import os
import sys

import pytest

import script_runner
from data import corpus
from data import tokenization
from data import vocab_learning

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_learned_vocab_layout_and_coverage(tmp_path, sample_corpus_files):
    counts = vocab_learning.count_words(sample_corpus_files, do_lower_case=True)
    tokens = vocab_learning.learn_vocab(counts, vocab_size=1500)
    assert len(tokens) <= 1500
    assert len(set(tokens)) == len(tokens)
    # Google's reserved block.
    assert tokens[0] == "[PAD]"
    assert tokens[1:100] == ["[unused%d]" % i for i in range(99)]
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # Every CJK character of the corpus is a token of its own, never a ## piece.
    cjk = {w for w in counts if tokenization.is_cjk_char(w)}
    assert len(cjk) > 300
    assert cjk <= set(tokens)
    assert not [t for t in tokens if t.startswith("##") and tokenization.is_cjk_char(t[2:])]
    # The vocabulary is small, so English words must be split into pieces,
    # yet almost nothing of the corpus becomes [UNK].
    path = os.path.join(str(tmp_path), "vocab.txt")
    vocab_learning.write_vocab(tokens, path)
    assert os.listdir(str(tmp_path)) == ["vocab.txt"]
    tokenizer = tokenization.FullTokenizer(path, do_lower_case=True)
    pieces = []
    for document in corpus.iter_documents(sample_corpus_files):
        for _, raw in document.lines:
            pieces.extend(tokenizer.tokenize(raw))
    assert sum(p.startswith("##") for p in pieces) > 0.02 * len(pieces)
    assert pieces.count("[UNK]") < 0.002 * len(pieces)


def test_min_cjk_count_and_budget(sample_corpus_files):
    counts = vocab_learning.count_words(sample_corpus_files)
    tokens = vocab_learning.learn_vocab(counts, vocab_size=3000, min_cjk_count=5)
    rare = [w for w, n in counts.items() if tokenization.is_cjk_char(w) and n < 5]
    assert rare and not set(rare) & set(tokens)
    try:
        vocab_learning.learn_vocab(counts, vocab_size=200)
    except ValueError as e:
        assert "vocab_size=200" in str(e)
    else:
        raise AssertionError("a vocabulary too small for the CJK characters must be refused")


def test_bundled_vocab_is_what_the_tool_makes(tmp_path, sample_corpus_files, sample_vocab_file):
    """data/sample/vocab.txt is reproducible with run/create_vocab.py."""
    out = os.path.join(str(tmp_path), "vocab.txt")
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_vocab.py"),
         "--input_file=%s" % ",".join(sample_corpus_files), "--vocab_file=%s" % out,
         "--vocab_size=4000"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out, encoding="utf-8") as a, open(sample_vocab_file, encoding="utf-8") as b:
        assert a.read() == b.read()


# --- Bad input: empty corpus, vocabulary too small --------------------------------

def _characters(counts):
    return sorted({c for w in counts if not tokenization.is_cjk_char(w) for c in w})


def test_too_small_vocab_size_names_the_minimum(sample_corpus_files):
    counts = vocab_learning.count_words(sample_corpus_files)
    chars = _characters(counts)
    cjk = [w for w in counts if tokenization.is_cjk_char(w)]
    minimum = 104 + len(cjk) + 2 * len(chars)
    for too_small in (10, 200, minimum - 1):
        with pytest.raises(ValueError) as raised:
            vocab_learning.learn_vocab(counts, vocab_size=too_small)
        message = str(raised.value)
        assert message.startswith("--vocab_size=%d is too small" % too_small)
        assert "expected --vocab_size >= %d" % minimum in message and "\n" not in message
    # At the minimum, every character is there alone and as a ## piece (the
    # learner overshoots its budget here; what goes is a longer piece).
    tokens = vocab_learning.learn_vocab(counts, vocab_size=minimum)
    assert len(tokens) == minimum
    assert set(chars) | {"##" + c for c in chars} <= set(tokens)
    assert set(cjk) <= set(tokens)


def test_empty_input_is_refused(tmp_path):
    blank = os.path.join(str(tmp_path), "blank.txt")
    with open(blank, "w") as f:
        f.write("\n \n\t\n")
    with pytest.raises(corpus.CorpusError, match=r"^No words found in .*blank\.txt; "
                                                 r"expected UTF-8 text"):
        vocab_learning.count_words([blank])
    with pytest.raises(ValueError, match=r"^word_counts is empty"):
        vocab_learning.learn_vocab({}, vocab_size=4000)
    with pytest.raises(corpus.CorpusError, match=r"^No text found in .*blank\.txt; "
                                                 r"expected UTF-8 text"):
        vocab_learning.learn_byte_bpe(vocab_learning.byte_bpe_training_lines([blank]), 300)
    with pytest.raises(ValueError, match=r"^lines is empty"):
        vocab_learning.learn_byte_bpe(iter([]), 300)


def test_negative_num_unused_is_refused():
    with pytest.raises(ValueError, match=r"^--num_unused=-3: expected a number of \[unusedN\] "
                                         r"slots >= 0"):
        vocab_learning.learn_vocab({"the": 5, "cat": 3}, vocab_size=200, num_unused=-3)
    assert vocab_learning.reserved_tokens(0) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_byte_bpe_vocab_size_must_hold_the_bytes_and_specials():
    lines = ["hello world, hello there\n"] * 20
    for too_small in (10, 256):
        with pytest.raises(ValueError, match=r"^--vocab_size=%d is too small for byte-level "
                                             r"BPE.*expected --vocab_size >= 257$" % too_small):
            vocab_learning.learn_byte_bpe(iter(lines), too_small)
    vocab, merges = vocab_learning.learn_byte_bpe(iter(lines), 257)
    assert len(vocab) == 257 and not merges
    vocab, merges = vocab_learning.learn_byte_bpe(iter(lines), 260)
    assert len(vocab) == 260 and len(merges) == 3
