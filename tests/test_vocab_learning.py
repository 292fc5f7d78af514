# coding=utf-8
"""Vocabulary learning: Google's reserved layout, CJK characters, coverage."""

import os
import subprocess
import sys

from data import corpus
from data import tokenization
from data import vocab_learning

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_vocab.py"),
         "--input_file=%s" % ",".join(sample_corpus_files), "--vocab_file=%s" % out,
         "--vocab_size=4000"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out, encoding="utf-8") as a, open(sample_vocab_file, encoding="utf-8") as b:
        assert a.read() == b.read()
