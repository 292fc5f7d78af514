"""Corpus BLEU by sacreBLEU (Papineni et al. 2002; Post 2018): the number MT papers report.

    >>> corpus_bleu(["面包很热。"], [["面包很软。"]], tokenize="zh").score

Why sacreBLEU itself and not a re-implementation: BLEU's corner cases
decide the numbers that papers compare -- an earlier home-made version here
smoothed every n-gram order that had no match, so a corpus without a single
matching token (`"the the the the"` against `"a cat sat down"`) scored 7.99
where sacreBLEU says 0.0 (it stops at zero when no n-gram of any order
matches). Calling `sacrebleu.metrics.BLEU.corpus_score` makes the score the
reference one by construction, and `BleuResult.signature` (sacreBLEU's
`nrefs:..|case:..|eff:..|tok:..|smooth:..|version:..`) says exactly which
one. The call is deterministic: a fixed tokenizer, no bootstrap, no
randomness.

Settings: sacreBLEU's corpus defaults -- max n-gram order 4, `smooth_method=
"exp"` (mteval's NIST smoothing of orders with no match, once any order
matches), closest reference length, mixed case, no effective order.

Tokenizers (`tokenize`, sacreBLEU's names and implementations):
    "zh"    sacreBLEU's Chinese tokenizer: every CJK character (ideographs,
            CJK punctuation, full-width forms) a token of its own, the rest
            split as "13a" -- character-level BLEU, what the en->zh
            translation demo (`modeling.mass.translation`) uses
    "13a"   sacreBLEU's default (mteval-v13a): punctuation and symbols split off
    "none"  whitespace split only
"""

import dataclasses
from typing import List

from sacrebleu.metrics import BLEU as _SacreBLEU

from data import tokenization

__all__ = ["BleuResult", "corpus_bleu", "tokenize_13a", "tokenize_zh", "TOKENIZERS"]

MAX_ORDER = 4

SMOOTH_METHODS = ("exp", "none")

# What the WordPiece tokenizer splits one character at a time (its CJK
# ranges) plus CJK punctuation and full-width forms: `_is_cjk` tells
# `modeling.mass.translation.detokenize` where no space goes between tokens.
# (BLEU's own "zh" tokenization is sacreBLEU's, with its own table.)
_CJK_CHAR_RANGES = tuple(tokenization.CJK_RANGES) + ((0x3000, 0x303F), (0xFF00, 0xFFEF))


def _is_cjk(char):
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_CHAR_RANGES)


def _sacrebleu_tokenizer(name):
    # The tokenizer object a BLEU with `tokenize=name` applies to every line.
    return _SacreBLEU(tokenize=name).tokenizer


def tokenize_13a(line):
    """sacreBLEU's mteval-v13a tokenization, as a string of space-separated tokens."""
    return _TOKENIZER_OBJECTS["13a"](line)


def tokenize_zh(line):
    """sacreBLEU's "zh" tokenization: every CJK character a token, then 13a for the rest."""
    return _TOKENIZER_OBJECTS["zh"](line)


def _tokenize_none(line):
    return _TOKENIZER_OBJECTS["none"](line)


_TOKENIZER_OBJECTS = {name: _sacrebleu_tokenizer(name) for name in ("13a", "zh", "none")}

TOKENIZERS = {"13a": tokenize_13a, "zh": tokenize_zh, "none": _tokenize_none}


@dataclasses.dataclass
class BleuResult:
    """A corpus BLEU score and its parts (sacreBLEU's names)."""

    score: float
    precisions: List[float]   # percentages, n = 1..4
    bp: float
    sys_len: int
    ref_len: int
    counts: List[int]         # correct n-grams
    totals: List[int]         # hypothesis n-grams
    signature: str = ""       # sacreBLEU's signature of the settings ("" for no sentences)

    def __str__(self):
        return "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %d ref_len = %d)" % (
            self.score, "/".join("%.1f" % p for p in self.precisions), self.bp,
            self.sys_len / self.ref_len if self.ref_len else 0.0, self.sys_len, self.ref_len)


def _reference_streams(references):
    """Per-sentence reference lists -> sacreBLEU's streams (`None` where a sentence has fewer)."""
    per_sentence = []
    for i, refs in enumerate(references):
        if isinstance(refs, str):
            refs = [refs]
        refs = list(refs)
        if not refs or not all(isinstance(ref, str) for ref in refs):
            raise ValueError("references[%d] must be a string or a non-empty list of strings, "
                             "got %r" % (i, refs))
        per_sentence.append(refs)
    width = max((len(refs) for refs in per_sentence), default=1)
    return [[refs[j] if j < len(refs) else None for refs in per_sentence]
            for j in range(width)]


def corpus_bleu(hypotheses, references, tokenize="13a", smooth_method="exp"):
    """Corpus BLEU of `hypotheses` against `references`, computed by sacreBLEU.

    Args:
        hypotheses: list of strings.
        references: list (one per hypothesis) of lists of reference strings
            (sentences may have different numbers of references), or a list
            of strings (one reference each).
        tokenize: a name of `TOKENIZERS` (sacreBLEU's tokenizer of that name).
        smooth_method: "exp" (sacreBLEU's default) or "none".

    Returns:
        A `BleuResult` (`score` in 0..100, `signature` sacreBLEU's).
    """
    if tokenize not in TOKENIZERS:
        raise ValueError("tokenize must be one of %s, got %r" % (", ".join(TOKENIZERS), tokenize))
    if smooth_method not in SMOOTH_METHODS:
        raise ValueError("smooth_method must be 'exp' or 'none', got %r" % (smooth_method,))
    hypotheses = list(hypotheses)
    references = list(references)
    if len(hypotheses) != len(references):
        raise ValueError("%d hypotheses but %d references" % (len(hypotheses), len(references)))
    if not all(isinstance(h, str) for h in hypotheses):
        raise ValueError("hypotheses must be strings")
    if not hypotheses:
        # sacreBLEU refuses an empty corpus (and has no signature before a
        # score); nothing translated scores 0.
        return BleuResult(score=0.0, precisions=[0.0] * MAX_ORDER, bp=0.0, sys_len=0,
                          ref_len=0, counts=[0] * MAX_ORDER, totals=[0] * MAX_ORDER)
    metric = _SacreBLEU(tokenize=tokenize, smooth_method=smooth_method)
    score = metric.corpus_score(hypotheses, _reference_streams(references))
    return BleuResult(score=float(score.score), precisions=[float(p) for p in score.precisions],
                      bp=float(score.bp), sys_len=int(score.sys_len),
                      ref_len=int(score.ref_len), counts=[int(c) for c in score.counts],
                      totals=[int(t) for t in score.totals],
                      signature=str(metric.get_signature()))
