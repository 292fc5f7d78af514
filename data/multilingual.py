"""Several languages in one model: exponentially smoothed language sampling (mBERT).

Multilingual BERT learns one WordPiece vocabulary and one model from the
Wikipedias of many languages of very different sizes. Sampling each language
in proportion to its size would leave the small ones with a handful of
pieces and few updates; sampling them uniformly would overfit them. mBERT
smooths the proportions with an exponent alpha < 1 (0.7 in mBERT; XLM uses
0.5):

    p_i = n_i / sum_j n_j              (n_i: size of language i, here words)
    q_i = p_i^alpha / sum_j p_j^alpha  (the sampling probability)

alpha = 1 keeps the natural proportions, alpha = 0 makes them uniform. A
language's data is then used at the rate q_i / p_i relative to its size:
small languages are up-sampled, large ones down-sampled.

`language_sampling_probabilities` is the formula; `reweight_word_counts`
applies it to the word counts a vocabulary is learned from
(`run/create_vocab.py --language_sampling_alpha`); `resample_documents`
applies it to the pre-training text (`run/resample_languages.py`): it
writes a corpus of whole documents drawn language by language in the
smoothed proportions, which `create_pretraining_data.py` (or a pre-training
recipe's `--input_file`) then reads like any corpus.
"""

import collections
import dataclasses
import json
import math
import os
import random
from typing import Optional

from data import atomic
from data import corpus as corpus_lib
from data import tokenization
from data.options import option

__all__ = ["LanguageSamplingError", "ResampleSettings", "files_by_language",
           "language_sampling_probabilities", "language_sizes",
           "resample_documents", "reweight_word_counts"]


class LanguageSamplingError(ValueError):
    """Bad sampling settings or inputs, reported as one line."""


def _check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (
            0.0 <= alpha <= 1.0) or math.isnan(alpha):
        raise LanguageSamplingError(
            "--language_sampling_alpha=%r: expected a number in [0, 1] (mBERT: 0.7)" % (alpha,))


def language_sampling_probabilities(sizes, alpha):
    """{language: q_i} for {language: n_i} (see the module docstring)."""
    _check_alpha(alpha)
    if not sizes:
        raise LanguageSamplingError("no languages to sample from")
    for language, size in sizes.items():
        if size <= 0:
            raise LanguageSamplingError("language %s has no data (size %r)" % (language, size))
    total = float(sum(sizes.values()))
    smoothed = {language: (size / total) ** alpha for language, size in sizes.items()}
    norm = sum(smoothed.values())
    return {language: value / norm for language, value in smoothed.items()}


def files_by_language(input_patterns, languages=None):
    """{language: files} from comma-separated patterns, one language per pattern.

    `languages` names them in the same order (e.g. "en,zh"); by default each
    is named after its first file (``sample_en.txt`` -> ``sample_en``).
    """
    patterns = [p.strip() for p in input_patterns.split(",") if p.strip()]
    names = [n.strip() for n in languages.split(",")] if languages else None
    if names is not None and len(names) != len(patterns):
        raise LanguageSamplingError(
            "--languages names %d languages but --input_file has %d patterns (one per language)"
            % (len(names), len(patterns)))
    grouped = {}
    owners = {}
    for i, pattern in enumerate(patterns):
        files = corpus_lib.expand_file_patterns(pattern)
        name = names[i] if names else os.path.splitext(os.path.basename(files[0]))[0]
        if name in grouped:
            raise LanguageSamplingError("language %r is named twice (--languages)" % name)
        for path in files:
            key = os.path.realpath(path)
            if key in owners and owners[key][0] != name:
                raise LanguageSamplingError(
                    "--input_file: %s is a file of language %s and of language %s; each "
                    "file belongs to one language" % (path, owners[key][0], name))
            owners[key] = (name, path)
        grouped[name] = files
    return grouped


def language_sizes(files_by_language, do_lower_case=True):
    """{language: number of basic-tokenized words} of each language's files."""
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    sizes = {}
    for language, files in files_by_language.items():
        stats = corpus_lib.ReadStats()
        words = 0
        for document in corpus_lib.iter_documents(files, stats):
            for lineno, raw in document.lines:
                words += len(basic.tokenize(
                    corpus_lib.decode_line(raw, document.path, lineno, stats)))
        sizes[language] = words
    return sizes


def reweight_word_counts(counts_by_language, alpha):
    """One word-count table with each language's counts scaled by q_i / p_i.

    Sizes are the languages' total counts; the total stays the same. Counts
    are rounded, and a word seen at all keeps a count of at least 1.
    Returns `(counts, report)` with the report's p, q and factors.
    """
    sizes = {language: sum(counts.values()) for language, counts in counts_by_language.items()}
    q = language_sampling_probabilities(sizes, alpha)
    total = float(sum(sizes.values()))
    merged = collections.Counter()
    factors = {}
    for language, counts in counts_by_language.items():
        factor = q[language] / (sizes[language] / total)
        factors[language] = factor
        for word, count in counts.items():
            merged[word] += max(1, int(round(count * factor)))
    report = {"alpha": alpha, "sizes": sizes,
              "p": {k: v / total for k, v in sizes.items()}, "q": q, "factors": factors}
    return merged, report


def _documents(files):
    """Each document of `files` as its raw lines (bytes, newline-terminated)."""
    for document in corpus_lib.iter_documents(files):
        yield [raw if raw.endswith(b"\n") else raw + b"\n" for _, raw in document.lines]


@dataclasses.dataclass
class ResampleSettings:
    """A `resample_documents` run from file patterns; `run/resample_languages.py`'s flags."""

    input_file: Optional[str] = option(None, "Comma-separated patterns, one language each.")
    languages: Optional[str] = option(
        None, "The languages' names, in the patterns' order (en,zh).")
    language_sampling_alpha: float = option(0.7, "The smoothing exponent (mBERT: 0.7).")
    output_dir: Optional[str] = option(
        None, "Where <language>.txt and sampling.json are written.")
    total_words: Optional[int] = option(
        None, "Words in all (default: the input's own size).", lower_bound=1)
    seed: int = option(12345, "Seed of the document order.")
    do_lower_case: bool = option(
        True, "Lower-case when counting words (as the tokenizer will).")
    plot: bool = option(
        True, "Also write sampling.png into --output_dir (and as a TensorBoard image in "
        "--output_dir/tensorboard).")


def resample_documents(files_by_language, alpha, output_dir, total_words=None, seed=12345,
                       do_lower_case=True):
    """Writes `output_dir/<language>.txt` in the smoothed proportions; returns the report.

    Language i gets about ``q_i * total_words`` words (default total: the
    corpus's own size): its documents in a seeded shuffled order, repeated
    as often as needed (up-sampling) or cut (down-sampling), whole documents
    only, separated by blank lines. `output_dir/sampling.json` records
    sizes, p, q and what was written. Every file is written atomically.
    """
    if total_words is not None and (isinstance(total_words, bool) or not isinstance(
            total_words, int) or total_words < 1):
        raise LanguageSamplingError("--total_words=%r: expected a positive number of words "
                                    "(or none: the input's own size)" % (total_words,))
    # <language>.txt would replace an input of that name, and a later
    # --input_file=OUTPUT_DIR/*.txt would read the inputs again.
    atomic.check_outputs(
        [], [("--input_file", path) for files in files_by_language.values() for path in files],
        [("--output_dir", output_dir)])
    sizes = language_sizes(files_by_language, do_lower_case)
    q = language_sampling_probabilities(sizes, alpha)
    total = int(total_words or sum(sizes.values()))
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    rng = random.Random(seed)
    written = {}
    for language in sorted(files_by_language):
        documents = list(_documents(files_by_language[language]))
        lengths = [sum(len(basic.tokenize(line.decode("utf-8", "replace"))) for line in doc)
                   for doc in documents]
        target = q[language] * total
        path = os.path.join(output_dir, "%s.txt" % language)
        words = count = 0
        with atomic.atomic_output(path, "wb") as out:
            while words < target:
                order = list(range(len(documents)))
                rng.shuffle(order)
                for index in order:
                    if words >= target:
                        break
                    out.write(b"".join(documents[index]) + b"\n")
                    words += lengths[index]
                    count += 1
        written[language] = {"file": path, "words": words, "documents": count}
    report = {"alpha": alpha, "sizes": sizes,
              "p": {k: v / float(sum(sizes.values())) for k, v in sizes.items()}, "q": q,
              "total_words": total, "written": written}
    with atomic.atomic_output(os.path.join(output_dir, "sampling.json")) as out:
        out.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return report
