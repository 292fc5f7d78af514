"""Reading raw text corpora in Google's pre-training input format.

The format: plain UTF-8 text, one sentence (or line of text) per line, and a
blank line between documents. Documents matter because next-sentence
prediction pairs a segment with the segment that really follows it in the same
document; the "random next" segment is drawn from another document.

Reading streams: documents are yielded one at a time (and grouped into chunks
by `iter_document_chunks`), so memory does not grow with the corpus.

A binary file given as corpus (a gzip, a TFRecord, an executable) is refused
with its file and line (`CorpusError`): a line holding a NUL byte, or mostly
invalid UTF-8, is not text. An occasional invalid byte in text is dropped and
counted in `ReadStats`, as Google's reader drops it.

Nothing here imports TensorFlow (files are opened through `open_file`, which
uses `tf.io.gfile` only for remote paths such as ``gs://``), so worker
processes can use it cheaply.
"""

import collections
import glob
import logging
import os

from data import atomic

# Lines longer than this (in bytes) are skipped: a pre-training "sentence"
# of this size is almost always a broken file (a minified dump, a missing
# newline conversion), and tokenizing it would only produce truncated noise.
DEFAULT_MAX_LINE_BYTES = 1_000_000

# A line is taken for binary data (a gzip, a TFRecord, an executable given as
# corpus) when it holds a NUL byte, or when at least this many of its bytes,
# and more than this fraction of them, are not valid UTF-8. Text with an
# occasional bad byte stays usable: its bad bytes are dropped and counted.
BINARY_MIN_INVALID_BYTES = 8
BINARY_INVALID_FRACTION = 0.2
_EXPECTED_TEXT = "expected UTF-8 text, one sentence per line"

# The `ReadStats` reason of lines skipped for their length (% max_line_bytes).
OVER_LONG_LINES = "lines over %d bytes skipped"


class CorpusError(ValueError):
    """Input files are missing, unreadable or hold no usable text."""


is_remote = atomic.is_remote


def expand_file_patterns(patterns):
    """Expands comma-separated glob patterns into a sorted, de-duplicated list.

    Args:
      patterns: a string of comma-separated globs, or a list of such strings.

    Raises:
      CorpusError naming the pattern that matched no file.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    files = []
    seen = set()
    for entry in patterns:
        for pattern in entry.split(","):
            pattern = pattern.strip()
            if not pattern:
                continue
            if is_remote(pattern):
                import tensorflow as tf  # pylint: disable=g-import-not-at-top
                matches = sorted(tf.io.gfile.glob(pattern))
            else:
                matches = sorted(p for p in glob.glob(os.path.expanduser(pattern))
                                 if os.path.isfile(p))
            if not matches:
                raise CorpusError("Input pattern %r matches no file." % pattern)
            for path in matches:
                if path not in seen:
                    seen.add(path)
                    files.append(path)
    if not files:
        raise CorpusError("No input files given.")
    return files


def open_file(path, mode="rb"):
    if is_remote(path):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        return tf.io.gfile.GFile(path, mode)
    return open(path, mode)


def text_lines(path, error):
    """`(number, line)` of every non-blank line of the UTF-8 text file `path` (numbers from
    1, line ends removed); a line that is not UTF-8 raises `error` ("FILE:N: not UTF-8 text").
    """
    with open_file(path) as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise error("%s:%d: not UTF-8 text" % (path, number)) from None
            if line.strip():
                yield number, line


class ReadStats(object):
    """Counts of what the reader skipped or repaired, with first locations."""

    MAX_EXAMPLES = 5

    def __init__(self):
        self.counts = collections.Counter()
        self.examples = collections.defaultdict(list)

    def add(self, reason, where=None, n=1):
        self.counts[reason] += n
        if where is not None and len(self.examples[reason]) < self.MAX_EXAMPLES:
            self.examples[reason].append(where)

    def merge(self, other):
        for reason, n in other.counts.items():
            self.counts[reason] += n
            room = self.MAX_EXAMPLES - len(self.examples[reason])
            if room > 0:
                self.examples[reason].extend(other.examples[reason][:room])

    def describe(self):
        lines = []
        for reason in sorted(self.counts):
            where = self.examples.get(reason) or []
            suffix = (" (first at %s)" % ", ".join(where)) if where else ""
            lines.append("%s: %d%s" % (reason, self.counts[reason], suffix))
        return lines


# A document travels between processes as its file's path and its lines as
# (line number, raw bytes) pairs, so any message can name file and line.
Document = collections.namedtuple("Document", ["path", "lines"])


def iter_documents(files, stats=None, max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Yields the documents of `files` in order, as `Document`s of raw lines.

    A blank line ends a document and so does the end of a file (a document
    never spans two files). Lines are kept as bytes: decoding, clean-up and
    tokenization happen in the (possibly parallel) consumers.

    Args:
      files: paths, read in the order given.
      stats: optional `ReadStats` collecting skipped lines and files.
      max_line_bytes: longer lines are skipped and counted.

    Raises:
      CorpusError if a file cannot be opened or read, or holds a NUL byte
      (binary data, not text).
    """
    stats = stats if stats is not None else ReadStats()
    for path in files:
        try:
            handle = open_file(path, "rb")
        except (OSError, IOError) as e:
            raise CorpusError("Cannot open input file %s: %s" % (path, e)) from e
        lines = []
        nonblank = 0
        over_long = 0
        with handle:
            lineno = 0
            while True:
                try:
                    raw = handle.readline()
                except (OSError, IOError) as e:
                    raise CorpusError("Cannot read input file %s after line %d: %s"
                                      % (path, lineno, e)) from e
                if not raw:
                    break
                lineno += 1
                if b"\0" in raw:
                    raise CorpusError(
                        "%s:%d: looks binary (NUL byte at byte %d of the line); %s"
                        % (path, lineno, raw.index(b"\0") + 1, _EXPECTED_TEXT))
                if len(raw) > max_line_bytes:
                    stats.add(OVER_LONG_LINES % max_line_bytes,
                              "%s:%d" % (path, lineno))
                    over_long += 1
                    continue
                if not raw.strip():
                    if lines:
                        yield Document(path, lines)
                        lines = []
                    continue
                nonblank += 1
                lines.append((lineno, raw))
        if lines:
            yield Document(path, lines)
        if nonblank == 0 and over_long:
            logging.warning("Input file %s: all %d non-blank line(s) are longer than "
                            "max_line_bytes=%d and were skipped.", path, over_long,
                            max_line_bytes)
        elif nonblank == 0:
            stats.add("input files without text", path)
            logging.warning("Input file %s holds no text; skipped.", path)


def iter_document_chunks(files, documents_per_chunk, stats=None,
                         max_line_bytes=DEFAULT_MAX_LINE_BYTES):
    """Groups `iter_documents` into lists of at most `documents_per_chunk`."""
    if documents_per_chunk < 1:
        raise ValueError("documents_per_chunk must be >= 1, got %d" % documents_per_chunk)
    chunk = []
    for document in iter_documents(files, stats, max_line_bytes):
        chunk.append(document)
        if len(chunk) >= documents_per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def decode_line(raw, path, lineno, stats):
    """Decodes one raw line as UTF-8, dropping invalid bytes as Google does.

    Invalid bytes are counted in `stats` with the line's location, so a
    corrupt file shows in the run's summary instead of vanishing silently.

    Raises:
      CorpusError naming file and line when the line is mostly not UTF-8
      (`BINARY_MIN_INVALID_BYTES`, `BINARY_INVALID_FRACTION`): binary data
      or text in another encoding, which repairing would turn into noise.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = raw.decode("utf-8", "ignore")
        invalid = len(raw) - len(text.encode("utf-8"))
        if (invalid >= BINARY_MIN_INVALID_BYTES
                and invalid > BINARY_INVALID_FRACTION * len(raw)):
            raise CorpusError(
                "%s:%d: looks binary or not UTF-8 (%d of %d bytes invalid, the first "
                "0x%02x at byte %d of the line); %s"
                % (path, lineno, invalid, len(raw), raw[e.start], e.start + 1,
                   _EXPECTED_TEXT)) from None
        stats.add("lines with invalid UTF-8 (bad bytes dropped)", "%s:%d" % (path, lineno))
        return text


def split_documents(files, output_dir, eval_every=10):
    """Writes a train and a held-out copy of each file, split by whole documents.

    Every `eval_every`-th document of each file (the 1st, the 11th, ...) goes
    to `output_dir/eval/<name>`, the others to `output_dir/train/<name>`, so
    an evaluation on the eval copies scores text that training never saw.
    Files are written under temporary names and renamed when complete; an
    existing split is reused.

    Returns:
      (train_files, eval_files): lists of paths, in the order of `files`.
    """
    if eval_every < 2:
        raise ValueError("eval_every must be >= 2, got %d" % eval_every)
    outputs = {"train": [], "eval": []}
    for path in files:
        name = os.path.basename(path)
        targets = {split: os.path.join(output_dir, split, name) for split in outputs}
        for split, target in targets.items():
            outputs[split].append(target)
        if all(os.path.exists(t) for t in targets.values()):
            continue
        splits = list(targets)
        temporaries = atomic.TemporaryOutputs([targets[split] for split in splits])
        handles = {}
        try:
            for split, temp in zip(splits, temporaries.temporaries):
                handles[split] = open(temp, "wb")
            for index, document in enumerate(iter_documents([path])):
                handle = handles["eval" if index % eval_every == 0 else "train"]
                handle.write(b"".join(raw if raw.endswith(b"\n") else raw + b"\n"
                                      for _, raw in document.lines) + b"\n")
            for handle in handles.values():
                handle.close()
            temporaries.commit()
        finally:
            for handle in handles.values():
                handle.close()
            temporaries.discard()
    return outputs["train"], outputs["eval"]
