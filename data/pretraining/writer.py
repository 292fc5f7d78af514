"""Writes pre-training TFRecords from raw text: streaming, parallel, atomic.

`create_pretraining_data` reads the corpus as a stream of document chunks,
hands the chunks to worker processes (each builds the instances of its chunk,
see `data.pretraining.instances`) and writes their serialised examples in chunk
order, round-robin over the output files as Google's script does. Because
results are consumed in order and each chunk's randomness depends only on
(seed, chunk index), the output is byte-identical whatever `num_workers` is.

Memory is bounded: at most ``2 * num_workers`` chunks are in flight.
Output files are written under temporary names and renamed into place only
when everything succeeded, so a failure or an interruption never leaves a
half-written file under the requested name.
"""

import collections
import concurrent.futures
import logging
import multiprocessing
import os
import time

import tensorflow as tf

from data import corpus as corpus_lib
from data.pretraining import instances as pretraining_data


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
        self.seconds = 0.0

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
        return "\n".join(lines)


def _temp_name(path):
    return "%s.tmp-%d" % (path, os.getpid())


def _ordered_results(chunks, options, num_workers, log_first_instances):
    """Yields ChunkResults in chunk order, processing up to num_workers at once."""
    if num_workers <= 1:
        processor = pretraining_data.ChunkProcessor(
            options, keep_first_instances=log_first_instances)
        for index, chunk in enumerate(chunks):
            yield processor.process(index, chunk)
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
      num_workers: worker processes (1 = in this process).
      documents_per_chunk: documents processed together; the random next
        segment is drawn within a chunk, and memory grows with this number,
        not with the corpus.
      max_line_bytes: longer lines are skipped (and counted).
      progress_seconds: interval between progress log lines.
      log_first_instances: log this many instances of the first chunk.

    Returns:
      a `Summary`.

    Raises:
      corpus_lib.CorpusError / tokenization.VocabError / ValueError on bad
      input, before or during the run; in every case no output file is left
      behind under its final name by this run.
    """
    options.validate()
    if not output_files:
        raise ValueError("No output files given.")
    # Fail early (before any worker starts) on a bad vocabulary.
    pretraining_data.ChunkProcessor(options)
    summary = Summary()
    summary.input_files = len(input_files)
    start = time.time()
    last_report = start
    for path in output_files:
        directory = os.path.dirname(path)
        if directory:
            tf.io.gfile.makedirs(directory)
    temp_files = [_temp_name(path) for path in output_files]
    writers = [tf.io.TFRecordWriter(path) for path in temp_files]
    finished = False
    try:
        chunks = corpus_lib.iter_document_chunks(
            input_files, documents_per_chunk, summary.stats, max_line_bytes)
        writer_index = 0
        for result in _ordered_results(chunks, options, num_workers,
                                         log_first_instances):
            summary.chunks += 1
            summary.documents += result.num_documents
            summary.instances += result.num_instances
            summary.tokens += result.num_tokens
            summary.masked_tokens += result.num_masked
            summary.random_next += result.num_random_next
            summary.stats.merge(result.stats)
            for example in result.examples:
                writers[writer_index].write(example)
                writer_index = (writer_index + 1) % len(writers)
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
                "No pre-training instance could be made from %s: no document "
                "holds any token." % ", ".join(input_files))
        for writer in writers:
            writer.close()
        for temp, path in zip(temp_files, output_files):
            tf.io.gfile.rename(temp, path, overwrite=True)
        finished = True
    finally:
        if not finished:
            for writer in writers:
                try:
                    writer.close()
                except Exception:  # pylint: disable=broad-except
                    pass
            for temp in temp_files:
                if tf.io.gfile.exists(temp):
                    tf.io.gfile.remove(temp)
    summary.output_files = list(output_files)
    summary.seconds = time.time() - start
    return summary
