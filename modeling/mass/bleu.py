"""Corpus BLEU as sacrebleu computes it (Papineni et al. 2002; Post 2018), no dependency.

    >>> corpus_bleu(["面包很热。"], [["面包很软。"]], tokenize="zh").score

Why our own: the project runs offline and needs one function; this one
follows sacrebleu's `BLEU.corpus_score` defaults (max n-gram order 4,
`smooth_method="exp"`, closest reference length) so its numbers are
comparable with papers that report sacreBLEU.

Per n = 1..4, over the whole corpus:

    correct_n = sum over sentences of the hypothesis n-grams' counts,
                each clipped to its largest count in one reference
    total_n   = sum of the hypothesis n-gram counts
    p_n       = correct_n / total_n; when correct_n = 0, "exp" smoothing
                uses 1 / (2^j * total_n), j counting such orders (1, 2, ...);
                when total_n = 0 the order and the ones above it score 0
    BP        = 1 if hyp_len >= ref_len else exp(1 - ref_len / hyp_len)
                (0 for an empty output), ref_len summing, per sentence, the
                reference length closest to the hypothesis's (the shorter
                on a tie)
    BLEU      = 100 * BP * exp(mean_n log p_n)

Tokenizers (`tokenize`):
    "13a"   sacrebleu's default (mteval-v13a): punctuation and symbols split off
    "zh"    sacrebleu's Chinese tokenizer: every CJK character (ideographs,
            CJK punctuation, full-width forms) is a token of its own, the rest
            is split as "13a" -- character-level BLEU for Chinese
    "none"  whitespace split only
"""

import collections
import dataclasses
import math
import re
from typing import List

from data import tokenization

__all__ = ["BleuResult", "corpus_bleu", "tokenize_13a", "tokenize_zh", "TOKENIZERS"]

MAX_ORDER = 4

_13A_RULES = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]

# What sacrebleu's "zh" tokenizer separates: CJK ideographs (the ranges
# FullTokenizer splits), CJK symbols and punctuation, full-width forms.
_CJK_CHAR_RANGES = tuple(tokenization.CJK_RANGES) + ((0x3000, 0x303F), (0xFF00, 0xFFEF))


def tokenize_13a(line):
    """mteval-v13a tokenization (sacrebleu's default), as a string of space-separated tokens."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                .replace("&gt;", ">"))
    line = " %s " % line
    for pattern, replacement in _13A_RULES:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


def _is_cjk(char):
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_CHAR_RANGES)


def tokenize_zh(line):
    """Every CJK character a token of its own, then 13a for the rest."""
    line = "".join(" %s " % char if _is_cjk(char) else char for char in line.strip())
    return tokenize_13a(line)


TOKENIZERS = {"13a": tokenize_13a, "zh": tokenize_zh,
              "none": lambda line: " ".join(line.split())}


@dataclasses.dataclass
class BleuResult:
    """A corpus BLEU score and its parts (sacrebleu's names)."""

    score: float
    precisions: List[float]   # percentages, n = 1..4
    bp: float
    sys_len: int
    ref_len: int
    counts: List[int]         # correct n-grams
    totals: List[int]         # hypothesis n-grams

    def __str__(self):
        return "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %d ref_len = %d)" % (
            self.score, "/".join("%.1f" % p for p in self.precisions), self.bp,
            self.sys_len / self.ref_len if self.ref_len else 0.0, self.sys_len, self.ref_len)


def _ngrams(tokens, order):
    return collections.Counter(tuple(tokens[i:i + order])
                               for i in range(len(tokens) - order + 1))


def corpus_bleu(hypotheses, references, tokenize="13a", smooth_method="exp"):
    """Corpus BLEU of `hypotheses` against `references`.

    Args:
        hypotheses: list of strings.
        references: list (one per hypothesis) of lists of reference strings,
            or a list of strings (one reference each).
        tokenize: a name of `TOKENIZERS`.
        smooth_method: "exp" (sacrebleu's default) or "none".

    Returns:
        A `BleuResult` (`score` in 0..100).
    """
    if tokenize not in TOKENIZERS:
        raise ValueError("tokenize must be one of %s, got %r" % (", ".join(TOKENIZERS), tokenize))
    if smooth_method not in ("exp", "none"):
        raise ValueError("smooth_method must be 'exp' or 'none', got %r" % (smooth_method,))
    if len(hypotheses) != len(references):
        raise ValueError("%d hypotheses but %d references" % (len(hypotheses), len(references)))
    tokenizer = TOKENIZERS[tokenize]
    correct = [0] * MAX_ORDER
    total = [0] * MAX_ORDER
    sys_len = ref_len = 0
    for hypothesis, refs in zip(hypotheses, references):
        if isinstance(refs, str):
            refs = [refs]
        hyp_tokens = tokenizer(hypothesis).split()
        ref_tokens = [tokenizer(ref).split() for ref in refs]
        sys_len += len(hyp_tokens)
        # The closest reference length; the shorter one on a tie.
        ref_len += min((abs(len(r) - len(hyp_tokens)), len(r)) for r in ref_tokens)[1]
        for n in range(1, MAX_ORDER + 1):
            hyp_counts = _ngrams(hyp_tokens, n)
            best = collections.Counter()
            for tokens in ref_tokens:
                best |= _ngrams(tokens, n)  # element-wise max
            correct[n - 1] += sum(min(count, best[gram]) for gram, count in hyp_counts.items())
            total[n - 1] += sum(hyp_counts.values())
    precisions = [0.0] * MAX_ORDER
    smooth = 1.0
    for n in range(MAX_ORDER):
        if total[n] == 0:
            break
        if correct[n] == 0:
            if smooth_method == "exp":
                smooth *= 2
                precisions[n] = 100.0 / (smooth * total[n])
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    if min(precisions) <= 0.0:
        score = 0.0
    else:
        score = bp * math.exp(sum(math.log(p) for p in precisions) / MAX_ORDER)
    return BleuResult(score=score, precisions=precisions, bp=bp, sys_len=sys_len,
                      ref_len=ref_len, counts=correct, totals=total)
