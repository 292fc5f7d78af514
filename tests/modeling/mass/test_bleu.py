"""Corpus BLEU (`modeling.mass.bleu`): sacreBLEU's numbers, on hand-computed cases and random corpora.

The module calls sacreBLEU itself; these tests pin what its callers rely on
(the `BleuResult` fields, the tokenizer names, per-sentence reference lists
of different lengths) and would catch a return to a home-made BLEU: the
corner case that one got wrong -- a corpus in which no n-gram of any order
matches scored 7.99 instead of 0 -- is here by name, and the random corpora
hold many zero-match ones.
"""

import math

import numpy as np
import pytest
import sacrebleu

from modeling.mass import bleu

# English words, punctuation that 13a splits off, and Chinese characters that
# "zh" splits one by one.
_WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "down", "big", "red", "is", "ran",
          "Hello,", "world.", "it's", "(yes)", "3.5", "A-1", "&", "面包", "很", "热", "软",
          "今天", "早上", "冷", "。", "，", "城里"]


def _sacrebleu(hypotheses, references, tokenize, smooth_method="exp"):
    """sacreBLEU's corpus score, references given per sentence (padded with None)."""
    width = max(len(refs) for refs in references)
    streams = [[refs[j] if j < len(refs) else None for refs in references]
               for j in range(width)]
    return sacrebleu.metrics.BLEU(tokenize=tokenize, smooth_method=smooth_method).corpus_score(
        hypotheses, streams)


def _sentence(rng, words, max_len=10):
    return " ".join(rng.choice(words, size=rng.integers(0, max_len + 1)))


def _random_corpus(rng):
    """A random corpus: 1..6 sentences, 1..3 references each; a third of the
    corpora draw hypotheses and references from disjoint words (no match at
    any order), the rest from a small shared vocabulary (many partial matches)."""
    n = int(rng.integers(1, 7))
    if rng.random() < 1 / 3:
        split = int(rng.integers(1, len(_WORDS)))
        order = rng.permutation(_WORDS)
        hyp_words, ref_words = list(order[:split]), list(order[split:])
    else:
        hyp_words = ref_words = list(rng.choice(_WORDS, size=int(rng.integers(2, 8)),
                                                replace=False))
    hypotheses = [_sentence(rng, hyp_words) for _ in range(n)]
    references = [[_sentence(rng, ref_words) for _ in range(int(rng.integers(1, 4)))]
                  for _ in range(n)]
    return hypotheses, references


def _assert_same(result, reference):
    assert result.score == pytest.approx(reference.score, rel=1e-12, abs=1e-12)
    assert result.counts == list(reference.counts)
    assert result.totals == list(reference.totals)
    assert result.precisions == pytest.approx(list(reference.precisions), rel=1e-12, abs=1e-12)
    assert result.bp == pytest.approx(reference.bp, rel=1e-12, abs=1e-12)
    assert (result.sys_len, result.ref_len) == (reference.sys_len, reference.ref_len)


def test_no_match_at_any_order_scores_zero():
    result = bleu.corpus_bleu(["the the the the"], [["a cat sat down"]], tokenize="zh")
    assert result.score == 0.0
    assert result.counts == [0, 0, 0, 0] and result.totals == [4, 3, 2, 1]
    _assert_same(result, _sacrebleu(["the the the the"], [["a cat sat down"]], "zh"))
    for tokenize in bleu.TOKENIZERS:
        assert bleu.corpus_bleu(["the the the the"], ["a cat sat down"],
                                tokenize=tokenize).score == 0.0


def test_random_corpora_match_sacrebleu():
    rng = np.random.default_rng(20261202)
    zero_match = partial = 0
    for trial in range(150):
        hypotheses, references = _random_corpus(rng)
        tokenize = list(bleu.TOKENIZERS)[trial % len(bleu.TOKENIZERS)]
        smooth = "exp" if trial % 5 else "none"
        result = bleu.corpus_bleu(hypotheses, references, tokenize=tokenize,
                                  smooth_method=smooth)
        _assert_same(result, _sacrebleu(hypotheses, references, tokenize, smooth))
        assert "tok:%s" % tokenize in result.signature
        assert "smooth:%s" % smooth in result.signature
        zero_match += result.totals[0] > 0 and not any(result.counts)
        partial += result.counts[0] > 0 and 0 in result.counts
    # The draw covers the corner cases: corpora with no match at all, and
    # corpora where some orders match and others do not (smoothing).
    assert zero_match >= 20 and partial >= 20, (zero_match, partial)


def test_hand_computed_values():
    # 6 tokens each; matches: 1-grams 5/6, 2-grams 3/5, 3-grams 1/4, 4-grams 0/3,
    # which "exp" smoothing scores 1 / (2 * 3).
    result = bleu.corpus_bleu(["the cat sat on the mat"], [["the cat is on the mat"]])
    expected = 100 * math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(1 / 4)
                               + math.log(1 / 6)) / 4)
    assert result.score == pytest.approx(expected, rel=1e-12)
    assert result.counts == [5, 3, 1, 0] and result.totals == [6, 5, 4, 3]
    # Without smoothing an order without a match makes the score 0.
    assert bleu.corpus_bleu(["the cat sat on the mat"], [["the cat is on the mat"]],
                            smooth_method="none").score == 0.0
    # Chinese, character level ("zh", what run_translation.py uses), with a
    # brevity penalty: the hypothesis has 7 characters (the full stop is one),
    # the reference 9. 1-grams 7/7; 2-grams 5/6 (all but 上很); 3-grams 3/5
    # (今天早, 天早上, 很冷。); 4-grams 1/4 (今天早上).
    hyp, ref = "今天早上很冷。", "今天早上城里很冷。"
    assert bleu.tokenize_zh(hyp).split() == list(hyp)
    result = bleu.corpus_bleu([hyp], [ref], tokenize="zh")
    bp = math.exp(1 - 9 / 7)
    expected = 100 * bp * math.exp((math.log(7 / 7) + math.log(5 / 6) + math.log(3 / 5)
                                    + math.log(1 / 4)) / 4)
    assert result.counts == [7, 5, 3, 1] and result.totals == [7, 6, 5, 4]
    assert result.bp == pytest.approx(bp) and result.score == pytest.approx(expected)
    # Corpus level: counts add up over sentences before the ratio is taken;
    # clipping: "the the the" matches "the" at most twice.
    result = bleu.corpus_bleu(["the the the", "a b c d e"], ["the cat the", "a b c d e"])
    assert result.counts == [2 + 5, 0 + 4, 0 + 3, 0 + 2]
    assert result.totals == [3 + 5, 2 + 4, 1 + 3, 0 + 2]
    assert result.sys_len == 8 and result.ref_len == 8
    # Several references, of different numbers per sentence: clipped to the
    # best one, the closest length counted.
    result = bleu.corpus_bleu(["a b c d", "x y z w"], [["a b c d e f", "a b c d"], ["x y z w"]],
                              tokenize="none")
    assert result.score == pytest.approx(100) and result.ref_len == 8
    assert result.signature.startswith("nrefs:var|")
    # 13a splits punctuation off; an empty output scores 0 (BP 0).
    assert bleu.tokenize_13a("Hello, world.") == "Hello , world ."
    assert bleu.corpus_bleu(["Hello, world."], ["Hello , world ."]).score == pytest.approx(100)
    empty = bleu.corpus_bleu([""], ["a b c d"])
    assert empty.score == 0.0 and empty.bp == 0.0
    assert bleu.corpus_bleu([], []).score == 0.0


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu.corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="tokenize must be one of 13a, zh, none, got 'intl2'"):
        bleu.corpus_bleu(["a"], ["a"], tokenize="intl2")
    with pytest.raises(ValueError, match="smooth_method must be 'exp' or 'none'"):
        bleu.corpus_bleu(["a"], ["a"], smooth_method="floor")
    with pytest.raises(ValueError, match=r"references\[0\] must be a string or a non-empty list"):
        bleu.corpus_bleu(["a"], [[]])
