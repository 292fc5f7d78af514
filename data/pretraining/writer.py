"""Writes pre-training TFRecords from raw text: streaming, parallel, atomic.

`create_pretraining_data` reads the corpus as a stream of document chunks,
hands the chunks to worker processes (each builds the instances of its chunk,
see `data.pretraining.instances`) and writes their serialised examples in chunk
order, round-robin over the output files as Google's script does. Because
results are consumed in order and each chunk's randomness depends only on
(seed, chunk index), the output is byte-identical whatever `num_workers` is.

Memory is bounded: at most ``2 * num_workers`` chunks are in flight, and
`num_workers` is capped by the machine's cores and available memory (a
worker may import TensorFlow, see `cap_num_workers`). Records are framed by
`data.tfrecord_writer` (TensorFlow's writer only for remote paths).
Output files are written under temporary names and renamed into place only
when everything succeeded, so a failure or an interruption never leaves a
half-written file under the requested name.
"""

import collections
import concurrent.futures
import dataclasses
import logging
import multiprocessing
import os
import time
from typing import Optional

from data import atomic
from data import corpus as corpus_lib
from data import tfrecord_writer
from data.options import option
from data.pretraining import instances as pretraining_data
from data.pretraining import masking as masking_lib


class Summary(object):
    """What a run read and wrote; `describe()` gives the closing report."""

    def __init__(self):
        self.input_files = 0
        self.chunks = 0
        self.documents = 0
        self.instances = 0
        self.tokens = 0
        self.masked_tokens = 0
        self.random_next = 0
        self.stats = corpus_lib.ReadStats()
        self.output_files = []
        # Output files that received no instance (more files than instances).
        self.empty_output_files = []
        self.seconds = 0.0

    def add_chunk(self, result):
        """Counts one chunk: a `ChunkResult`, or anything with its count fields and `stats`.

        Chunks are added in chunk order, so the first locations kept by
        `stats` are the ones a reader meets first.
        """
        self.chunks += 1
        self.documents += result.num_documents
        self.instances += result.num_instances
        self.tokens += result.num_tokens
        self.masked_tokens += result.num_masked
        self.random_next += result.num_random_next
        self.stats.merge(result.stats)

    def finish(self, output_files, empty, start):
        """Records the outputs (`empty[k]`: file k got no instance) and the time since
        `start`, logs the empty-outputs warning, and returns the summary."""
        self.empty_output_files = [path for path, none in zip(output_files, empty) if none]
        self.output_files = list(output_files)
        self.seconds = time.time() - start
        warning = self.empty_outputs_warning()
        if warning:
            logging.warning("%s", warning)
        return self

    def empty_outputs_warning(self):
        """One line naming the output files without any instance, or None."""
        if not self.empty_output_files:
            return None
        return "warning: %d of %d output files hold no instance: %s" % (
            len(self.empty_output_files), len(self.output_files),
            ", ".join(self.empty_output_files))

    def describe(self):
        lines = [
            "input files:        %d" % self.input_files,
            "documents:          %d" % self.documents,
            "instances:          %d" % self.instances,
            "tokens:             %d" % self.tokens,
            "masked tokens:      %d (%.1f%% of tokens)" % (
                self.masked_tokens, 100.0 * self.masked_tokens / max(1, self.tokens)),
            "random-next pairs:  %d (%.1f%%)" % (
                self.random_next, 100.0 * self.random_next / max(1, self.instances)),
            "time:               %.1fs (%.0f instances/s)" % (
                self.seconds, self.instances / max(self.seconds, 1e-9)),
        ]
        skipped = self.stats.describe()
        if skipped:
            lines.append("skipped or repaired:")
            lines.extend("  " + line for line in skipped)
        else:
            lines.append("skipped or repaired: nothing")
        lines.append("output files:")
        lines.extend("  " + path for path in self.output_files)
        warning = self.empty_outputs_warning()
        if warning:
            lines.append(warning)
        return "\n".join(lines)


# The runners of data.pretraining.beam_pipeline (`RUNNERS`; that module imports Beam).
BEAM_RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")


@dataclasses.dataclass
class PretrainingDataSettings:
    """A `create_pretraining_data` run; the fields are `run/create_pretraining_data.py`'s flags.

    Google's fields and defaults come first; `instance_options()` gives the
    `InstanceOptions` of the workers, `input_files()` / `output_files()` the
    comma-separated lists (globs expanded). ``runner="beam"`` runs the same
    work as an Apache Beam pipeline (`data.pretraining.beam_pipeline`).
    """

    input_file: Optional[str] = option(
        None, "Input raw text file (or comma-separated list of files/globs).")
    output_file: Optional[str] = option(
        None, "Output TF example file (or comma-separated list of files).")
    vocab_file: Optional[str] = option(
        None, "The vocabulary file that the BERT model was trained on.")
    do_lower_case: bool = option(
        True, "Whether to lower case the input text. Should be True for uncased "
        "models and False for cased models.")
    do_whole_word_mask: bool = option(
        False, "Whether to use whole word masking rather than per-WordPiece masking "
        "(an alias of --masking=whole_word).")
    max_seq_length: int = option(128, "Maximum sequence length.")
    max_predictions_per_seq: int = option(
        20, "Maximum number of masked LM predictions per sequence.")
    random_seed: int = option(12345, "Random seed for data generation.")
    dupe_factor: int = option(
        10, "Number of times to duplicate the input data (with different masks).")
    masked_lm_prob: float = option(0.15, "Masked LM probability.")
    short_seq_prob: float = option(
        0.1, "Probability of creating sequences which are shorter than the "
        "maximum length.")
    # Beyond Google's script.
    num_workers: int = option(
        1, "Worker processes. The output does not depend on this number.")
    documents_per_chunk: int = option(
        10000, "Documents processed together (memory is bounded by this, not by "
        "the corpus size); the random next segment comes from the same chunk.")
    max_line_bytes: int = option(
        corpus_lib.DEFAULT_MAX_LINE_BYTES,
        "Input lines longer than this are skipped and reported.")
    log_examples: int = option(5, "Instances of the first chunk to log.")
    runner: str = option(
        "local", "local: this machine's processes (--num_workers); beam: an Apache Beam "
        "pipeline (--beam_runner, --beam_pipeline_options), the same output.",
        choices=("local", "beam"))
    beam_runner: str = option("DirectRunner", "--runner=beam: the Beam runner.",
                              choices=BEAM_RUNNERS)
    beam_pipeline_options: str = option(
        "", "--runner=beam: Beam's own options, as on a command line (split as a "
        "shell would), e.g. \"--direct_num_workers=2 "
        "--direct_running_mode=multi_processing\" or \"--project=P --region=R "
        "--temp_location=gs://B/tmp --setup_file=./pyproject.toml\".")
    masking: str = option(
        "token", "Which positions are predicted: token (Google's, per WordPiece), "
        "whole_word (--do_whole_word_mask), span (SpanBERT), ngram (ALBERT).",
        choices=tuple(masking_lib.MASKING_STRATEGIES))
    sentence_objective: str = option(
        "nsp", "nsp: next sentence prediction (Google's); sop: sentence order "
        "prediction (ALBERT; next_sentence_labels 1 = swapped); none: one "
        "segment of consecutive sentences (next_sentence_labels 0).",
        choices=tuple(pretraining_data.SENTENCE_OBJECTIVES))
    chinese_word_segmentation: bool = option(
        False, "Segment each sentence with jieba and use its words as the units of "
        "whole_word/span/ngram masking (Chinese whole-word masking); tokens "
        "stay single characters.")
    span_geometric_p: float = option(
        0.2, "span masking: p of the geometric distribution of span lengths (words).")
    max_span_length: int = option(
        10, "span masking: longest span, in words (the distribution is truncated "
        "here and renormalised, as SpanBERT does).")
    max_ngram: int = option(3, "ngram masking: longest n-gram, in words.")
    replace_per_unit: Optional[bool] = option(
        None, "Decide 80/10/10 ([MASK]/keep/random) once per masked unit (word, span, "
        "n-gram) instead of per word piece. Unset: per span for span masking, "
        "per word piece otherwise.")

    def instance_options(self):
        """The `InstanceOptions` every worker builds its chunks' instances with."""
        return pretraining_data.InstanceOptions(
            vocab_file=self.vocab_file, do_lower_case=self.do_lower_case,
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq,
            random_seed=self.random_seed, dupe_factor=self.dupe_factor,
            masked_lm_prob=self.masked_lm_prob, short_seq_prob=self.short_seq_prob,
            do_whole_word_mask=self.do_whole_word_mask, masking=self.masking,
            sentence_objective=self.sentence_objective,
            chinese_word_segmentation=self.chinese_word_segmentation,
            span_geometric_p=self.span_geometric_p, max_span_length=self.max_span_length,
            max_ngram=self.max_ngram, replace_per_unit=self.replace_per_unit)

    def input_files(self):
        """The corpus files of `input_file` (comma-separated files and globs)."""
        return corpus_lib.expand_file_patterns(self.input_file)

    def output_files(self):
        """The paths of `output_file` (comma-separated)."""
        return [p.strip() for p in self.output_file.split(",") if p.strip()]


# What one worker process may cost: with TensorFlow imported (other recipes
# than Google's defaults, or many non-ASCII lines) about 550 MB resident,
# plus its chunks.
WORKER_MEMORY_BYTES = 600 * 1000 ** 2


def machine_resources(meminfo_path="/proc/meminfo"):
    """(cores this process may run on, available memory in bytes or None).

    Memory is ``MemAvailable`` of `meminfo_path` (Linux); None where that
    file or field does not exist.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    available = None
    try:
        with open(meminfo_path) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    fields = line.split()
                    available = int(fields[1]) * (1024 if fields[2:3] == ["kB"] else 1)
                    break
    except (OSError, ValueError, IndexError):
        available = None
    return cores, available


def cap_num_workers(num_workers, cores, available_bytes,
                    bytes_per_worker=WORKER_MEMORY_BYTES):
    """Caps worker processes at the cores and at the memory they need.

    Args:
      num_workers: the number asked for (``--num_workers``).
      cores: usable cores (see `machine_resources`).
      available_bytes: available memory, or None when unknown (no memory cap).
      bytes_per_worker: what one worker process needs.

    Returns:
      (workers, warning): the number to start (at least 1 when
      `num_workers` >= 1; `num_workers` itself when it is <= 1) and a
      one-line warning when it was capped, else None.
    """
    if num_workers <= 1:
        return num_workers, None
    limit = max(1, cores)
    if available_bytes is not None:
        limit = min(limit, max(1, available_bytes // bytes_per_worker))
    if num_workers <= limit:
        return num_workers, None
    memory = ("%.1f GB available" % (available_bytes / 1e9)
              if available_bytes is not None else "available memory unknown")
    warning = "--num_workers=%d capped to %d (%d core%s, %s, ~%.1f GB per worker)" % (
        num_workers, limit, cores, "" if cores == 1 else "s", memory,
        bytes_per_worker / 1e9)
    return limit, warning


def no_instance_message(input_files, stats, max_line_bytes):
    """The error when no instance was made, saying which lines were skipped."""
    skipped = []
    over_long = stats.counts.get(corpus_lib.OVER_LONG_LINES % max_line_bytes, 0)
    if over_long:
        skipped.append("%d line(s) longer than --max_line_bytes=%d were skipped"
                       % (over_long, max_line_bytes))
    for reason, label in (
            ("lines without any token (only controls/whitespace)",
             "%d line(s) held no token (only controls/whitespace)"),
            ("lines with invalid UTF-8 (bad bytes dropped)",
             "%d line(s) had invalid UTF-8 dropped")):
        if stats.counts.get(reason, 0):
            skipped.append(label % stats.counts[reason])
    message = ("No pre-training instance could be made from %s: no document holds "
               "any token" % ", ".join(input_files))
    if skipped:
        message += " (%s)" % "; ".join(skipped)
    return message + "."


def _ordered_results(chunks, options, num_workers, log_first_instances, processor=None):
    """Yields ChunkResults in chunk order, processing up to num_workers at once.

    With one worker, `processor` (a ChunkProcessor for `options` keeping
    `log_first_instances`) is used when given.
    """
    if num_workers <= 1:
        if processor is None:
            processor = pretraining_data.ChunkProcessor(
                options, keep_first_instances=log_first_instances)
        # The next chunk is read and tokenized in a thread while this one's
        # instances are made and written (see ChunkProcessor.prepare).
        numbered = enumerate(chunks)

        def prepare_next():
            for index, chunk in numbered:
                return processor.prepare(index, chunk)
            return None

        ahead = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="prepare_chunk")
        try:
            pending = ahead.submit(prepare_next)
            while True:
                prepared = pending.result()
                if prepared is None:
                    return
                pending = ahead.submit(prepare_next)
                yield processor.finish(prepared)
        finally:
            ahead.shutdown(wait=False, cancel_futures=True)
        return
    # "spawn": workers start clean, without the parent's TensorFlow threads.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=num_workers, mp_context=context,
            initializer=pretraining_data.init_worker, initargs=(options, log_first_instances)) as pool:
        pending = collections.deque()
        max_in_flight = 2 * num_workers
        try:
            for index, chunk in enumerate(chunks):
                pending.append(pool.submit(pretraining_data.process_chunk_in_worker,
                                           index, chunk))
                while len(pending) >= max_in_flight:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def create_pretraining_data(input_files, output_files, options, num_workers=1,
                            documents_per_chunk=10000,
                            max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES,
                            progress_seconds=30.0, log_first_instances=0):
    """Creates pre-training TFRecords from raw text files.

    Args:
      input_files: list of corpus paths (see `data.corpus`).
      output_files: list of TFRecord paths; examples go round-robin over them.
      options: `pretraining_data.InstanceOptions`.
      num_workers: worker processes (1 = in this process); capped by
        `cap_num_workers` at the cores and available memory, with a warning.
      documents_per_chunk: documents processed together; the random next
        segment is drawn within a chunk, and memory grows with this number,
        not with the corpus.
      max_line_bytes: longer lines are skipped (and counted).
      progress_seconds: interval between progress log lines.
      log_first_instances: log this many instances of the first chunk.

    Returns:
      a `Summary`. Output files that got no instance (more files than
      instances) are still written, empty, and named in a warning (logged,
      and in `Summary.describe()`).

    Raises:
      corpus_lib.CorpusError / tokenization.VocabError / ValueError on bad
      input, before or during the run; in every case no output file is left
      behind under its final name by this run.
    """
    options.validate()
    if not output_files:
        raise ValueError("No output files given.")
    num_workers, warning = cap_num_workers(num_workers, *machine_resources())
    if warning:
        logging.warning("%s", warning)
    # Fail early (before any worker starts) on a bad vocabulary; with one
    # worker this is the processor.
    processor = pretraining_data.ChunkProcessor(options,
                                                keep_first_instances=log_first_instances)
    summary = Summary()
    summary.input_files = len(input_files)
    start = time.time()
    last_report = start
    # Temporaries beside the outputs, removed on every exit path (SIGTERM
    # and interpreter exit included; see data.atomic) unless committed.
    outputs = None
    writers = []
    try:
        outputs = atomic.TemporaryOutputs(output_files)
        for temp in outputs.temporaries:
            writers.append(tfrecord_writer.open_writer(temp))
        records = [0] * len(writers)
        chunks = corpus_lib.iter_document_chunks(
            input_files, documents_per_chunk, summary.stats, max_line_bytes)
        writer_index = 0
        for result in _ordered_results(chunks, options, num_workers,
                                         log_first_instances, processor):
            summary.add_chunk(result)
            framed = (result.tfrecord_bytes()
                      if len(writers) == 1 and hasattr(writers[0], "write_framed") else None)
            if framed is not None:
                # One output: the chunk's records, already framed, in one write.
                writers[0].write_framed(framed)
                records[0] += result.num_instances
            else:
                # Round-robin over the outputs, continuing where the last chunk ended.
                examples = result.examples
                count = len(writers)
                for k in range(count):
                    target = (writer_index + k) % count
                    mine = examples[k::count]
                    writers[target].write_all(mine)
                    records[target] += len(mine)
                writer_index = (writer_index + len(examples)) % count
            for instance in result.first_instances:
                logging.info("*** Example ***\n%s", instance)
            now = time.time()
            if now - last_report >= progress_seconds:
                last_report = now
                logging.info("progress: %d chunks, %d documents, %d instances "
                             "(%.0f instances/s)", summary.chunks, summary.documents,
                             summary.instances, summary.instances / (now - start))
        if summary.instances == 0:
            raise corpus_lib.CorpusError(
                no_instance_message(input_files, summary.stats, max_line_bytes))
        for writer in writers:
            writer.close()
        outputs.commit()
    finally:
        if outputs is not None and not outputs.committed:
            for writer in writers:
                try:
                    writer.close()
                except Exception:  # pylint: disable=broad-except
                    pass
            outputs.discard()
    return summary.finish(output_files, [n == 0 for n in records], start)
