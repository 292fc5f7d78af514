"""Parallel text: `source<TAB>target` files, one sentence pair a line.

`read_pairs(path)` yields `(line number, source, target)` with both sides
stripped, blank lines skipped; a line that is not UTF-8, has not exactly one
tab or has an empty side is a `ParallelFileError` naming the file and line.
`split_pairs` holds out every `eval_every`-th pair. CoVe's pre-training and
MASS's translation fine-tuning read their pairs so.
"""

from data import corpus as corpus_lib

__all__ = ["EVAL_EVERY", "ParallelFileError", "read_pairs", "split_pairs"]

EVAL_EVERY = 10


class ParallelFileError(ValueError):
    """A parallel file line that is not `source<TAB>target` (the message names file and line)."""


def read_pairs(path):
    """Yields `(line number, source, target)` of a `source<TAB>target` file; blank lines skipped.

    Raises:
        ParallelFileError: a line without exactly one tab, with an empty side,
            or not UTF-8 (naming the file and line).
    """
    with corpus_lib.open_file(path) as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise ParallelFileError("%s:%d: not UTF-8 (%s); expected source<TAB>target"
                                        % (path, lineno, e.reason)) from None
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise ParallelFileError(
                    "%s:%d: expected source<TAB>target (one tab, two non-empty sides), got "
                    "%d field(s): %r" % (path, lineno, len(parts), line[:80]))
            yield lineno, parts[0].strip(), parts[1].strip()


def split_pairs(pairs, eval_every=EVAL_EVERY):
    """`(train, held_out)`: every `eval_every`-th pair (the 10th, 20th, ...) held out."""
    if eval_every < 2:
        raise ValueError("eval_every must be at least 2, got %r" % (eval_every,))
    held_out = [p for i, p in enumerate(pairs) if i % eval_every == eval_every - 1]
    train = [p for i, p in enumerate(pairs) if i % eval_every != eval_every - 1]
    return train, held_out
