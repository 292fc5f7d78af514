"""Pre-training TFRecords by an Apache Beam pipeline, byte-identical to `writer`'s.

`create_pretraining_data` makes the same files as
`data.pretraining.writer.create_pretraining_data` for the same corpus,
options and `documents_per_chunk`, on any Beam runner (DirectRunner on this
machine, Dataflow, Flink, Spark). That works because a chunk's examples
depend only on its index and its documents (`instances.chunk_rng`), so the
chunks may be processed anywhere, in any order, and the global order is
rebuilt from the chunk indices:

1. **Staging (launcher).** The launcher reads the corpus with
   `data.corpus.iter_document_chunks`, exactly as the local writer does, and
   writes each chunk to a staging directory beside the first output file
   (``.beam-staging.tmp-<host>-<pid>-<random>/chunk-00000042.tfrecord``, one
   `tf.train.Example` per document: its path, line numbers and raw lines),
   together with a copy of the vocabulary. The launcher holds one chunk at a
   time; pipeline elements are only ``(chunk index, staged path)``.
2. **Process (workers).** A DoFn builds one `ChunkProcessor` per worker in
   `setup()` and turns each chunk into its serialised examples (in slices of
   `SLICE_SIZE`) plus a small record of its counts and read statistics.
3. **Offsets.** The per-chunk instance counts are combined into prefix
   offsets (chunk k's first example has global index ``sum of counts before
   k``), a side input of the next step.
4. **Shards.** Each example's global index ``g`` picks its output file
   ``g % num_outputs``, Google's round-robin. A shard's writer sorts its
   slices by global index and writes them to the output's temporary (an
   attempt file renamed over it, so a retried bundle cannot interleave with
   an earlier attempt).
5. **Commit (launcher).** When the pipeline has finished, the launcher
   renames all temporaries into place at once, as the local writer does: a
   failed run leaves no file under a final name and replaces none.

The per-chunk records end in a summary file in the staging directory, from
which the launcher builds the same `writer.Summary` as a local run.

Trade-offs. Reading and staging the corpus stays serial on the launcher
(about one copy of the corpus written, no tokenization); the work that
scales -- tokenization, instance creation, masking, serialisation -- runs on
the workers. Staging instead of `beam.Create(chunks)` keeps the launcher's
memory at one chunk and the pipeline description small (Dataflow refuses job
graphs of more than a few MB, and `Create` embeds its elements in the graph).
Between steps 2 and 4 the runner holds every example (DirectRunner: in
memory; Dataflow: in its shuffle), and a shard's writer holds its shard: use
enough output files that one shard fits a worker's memory.

Paths. Only the launcher reads the corpus and the vocabulary (it copies the
vocabulary into the staging directory). The output files, and so the staging
directory beside the first of them, must be reachable by the launcher and by
every worker under the same name: on a cluster a shared file system or
object store, e.g. ``gs://bucket/...`` for Dataflow (TensorFlow's file
system layer reads and writes it on both sides).

Runners. ``DirectRunner`` is Beam's Python engine on this machine (see
`pipeline_options` for its options); the others receive Beam's own options
unchanged (project, region, temp_location, flink_master, ...), and their
workers need this repository's code (``--setup_file=./pyproject.toml``, or
a container image with it installed).
"""

import contextlib
import importlib
import io
import json
import logging
import os
import re
import shlex
import tempfile
import time

import tensorflow as tf

from data import atomic
from data import corpus as corpus_lib
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer

__all__ = ["RUNNERS", "SLICE_SIZE", "WORKER_NOISE", "BeamOptionsError", "create_pretraining_data",
           "pipeline_options", "read_staged_chunk", "stage_chunks"]


class _DropApitoolsNotice(logging.Filter):
    """Beam's Google Cloud BigQuery clients say on import that they are absent."""

    def filter(self, record):
        return "apitools not found" not in record.getMessage()


@contextlib.contextmanager
def _quiet_beam_import():
    # The notice is logged on the root logger at import time; with no handler
    # there, `logging.warning` would also install one (basicConfig). Beam's
    # own INFO notices about absent Google Cloud extras are held back too.
    beam_logger = logging.getLogger("apache_beam")
    beam_level = beam_logger.level
    beam_logger.setLevel(logging.WARNING)
    root = logging.getLogger()
    placeholder = None if root.handlers else logging.NullHandler()
    if placeholder is not None:
        root.addHandler(placeholder)
    notice = _DropApitoolsNotice()
    root.addFilter(notice)
    try:
        yield
    finally:
        root.removeFilter(notice)
        if placeholder is not None:
            root.removeHandler(placeholder)
        beam_logger.setLevel(beam_level)


with _quiet_beam_import():
    import apache_beam as beam  # pylint: disable=g-import-not-at-top,wrong-import-position
    from apache_beam.options import pipeline_options as beam_options  # pylint: disable=g-import-not-at-top,wrong-import-position
    from apache_beam.runners import runner as beam_runner  # pylint: disable=g-import-not-at-top,wrong-import-position

# Named in `writer`, whose settings offer them as --beam_runner without importing Beam.
RUNNERS = pretraining_writer.BEAM_RUNNERS
# Examples per element between the Process and Shards steps (about 1 MB at
# max_seq_length=128): big enough to amortise Beam's per-element cost, small
# enough for any runner's element limits.
SLICE_SIZE = 1000
# What a DirectRunner worker process (a fresh Python) prints on standard error
# besides TensorFlow's start-up notices: Python's default-format INFO lines,
# Beam's notices about absent extras and about the runner's own options, and
# their copies forwarded to the launcher's log (warnings and errors stay).
WORKER_NOISE = re.compile("|".join([
    r"^INFO:",
    r"apitools not found, and bigquery client libraries are not available",
    r"No semi_persistent_directory found",
    r"Discarding unparseable args: \[('--(pipeline_type_check|direct_runner_use_stacked_bundle)'"
    r"(, )?)+\]",
    r"Worker: severity: (DEBUG|INFO|WARN) .*message: \"(No semi_persistent_directory found|"
    r"Discarding unparseable args: \[(\\'--(pipeline_type_check|"
    r"direct_runner_use_stacked_bundle)\\'(, )?)+\])",
]))
_COUNTS = "counts"
_SUMMARY_NAME = "summary.json"
_VOCAB_NAME = "vocab.txt"
_ATTEMPT = ".attempt-"


class BeamOptionsError(ValueError):
    """A bad --beam_runner or --beam_pipeline_options."""


def _absolute(path):
    return path if corpus_lib.is_remote(path) else os.path.abspath(path)


# ---------------------------------------------------------------- options


def _parse_known(options, **kwargs):
    """`options.get_all_options(**kwargs)`, with argparse's exit turned into an error."""
    stderr = io.StringIO()
    quiet = logging.getLogger(beam_options.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # unknown options are reported below, as errors
    try:
        with contextlib.redirect_stderr(stderr):
            return options.get_all_options(**kwargs)
    except SystemExit:
        lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
        message = lines[-1] if lines else "cannot be parsed"
        message = message.split(": error: ", 1)[-1]
        raise BeamOptionsError("--beam_pipeline_options: %s" % message) from None
    finally:
        quiet.setLevel(level)


def pipeline_options(runner="DirectRunner", args=()):
    """Beam's `PipelineOptions` for `runner` from command-line style `args`.

    Args:
      runner: one of `RUNNERS`.
      args: Beam's own options, a string as typed on a command line
        (``"--direct_num_workers=2 --direct_running_mode=multi_processing"``,
        split as a shell would) or a list of such words. DirectRunner's:
        ``--direct_num_workers`` (0: one per core; default 1) and
        ``--direct_running_mode`` (``in_memory``, the default, runs in this
        process; ``multi_processing`` starts a Python process per worker).

    Raises:
      BeamOptionsError (one line) for an unknown runner, a runner whose
      extras are not installed, an option no Beam options class knows, a
      word that is not an option, a value of the wrong type or choice, or a
      ``--runner`` option (the runner is the `runner` argument).
    """
    if runner not in RUNNERS:
        raise BeamOptionsError("--beam_runner=%s: expected one of %s"
                               % (runner, ", ".join(RUNNERS)))
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as e:
            raise BeamOptionsError("--beam_pipeline_options: %s in %r" % (e, args)) from None
    args = list(args)
    previous_takes_value = False
    for word in args:
        if word.startswith("--") and len(word) > 2:
            name = word[2:].split("=", 1)[0]
            if name == "runner":
                raise BeamOptionsError(
                    "--beam_pipeline_options: choose the runner with --beam_runner, "
                    "not %s" % word)
            previous_takes_value = "=" not in word
        elif previous_takes_value:
            previous_takes_value = False
        else:
            raise BeamOptionsError(
                "--beam_pipeline_options: %r is not an option; expected words like "
                "--name=value, e.g. \"--direct_num_workers=2 "
                "--direct_running_mode=multi_processing\"" % word)
    if runner == "DataflowRunner":
        try:
            importlib.import_module("apache_beam.runners.dataflow.internal.apiclient")
        except ImportError:
            raise BeamOptionsError(
                "--beam_runner=DataflowRunner needs Beam's Google Cloud extras: "
                "pip install 'apache-beam[gcp]==%s'" % beam.__version__) from None
    # Importing the runner's module registers its options (FlinkRunnerOptions, ...).
    beam_runner.create_runner(runner)
    options = beam_options.PipelineOptions(args)
    known = _parse_known(options)
    everything = _parse_known(options, retain_unknown_options=True)
    unknown = sorted(set(everything) - set(known))
    if unknown:
        raise BeamOptionsError(
            "--beam_pipeline_options: unknown Beam option%s %s (for --beam_runner=%s)"
            % ("" if len(unknown) == 1 else "s", ", ".join("--" + u for u in unknown),
               runner))
    options.view_as(beam_options.StandardOptions).runner = runner
    return options


def _runner(name, options):
    """The runner object for `name`.

    DirectRunner is Beam's Python engine (`FnApiRunner`, set up as Beam's
    DirectRunner sets it up for a batch pipeline), never the Prism binary
    that Beam's DirectRunner would first download from GitHub and start: no
    network at run time, and the same engine on every machine.
    """
    if name != "DirectRunner":
        return beam_runner.create_runner(name)
    # pylint: disable=g-import-not-at-top
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability import portable_runner
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    encoded = portable_runner.JobServiceHandle.encode_pipeline_options(
        options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


# ---------------------------------------------------------------- staging


def _document_record(document):
    return tf.train.Example(features=tf.train.Features(feature={
        "path": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[document.path.encode("utf-8", "surrogateescape")])),
        "lineno": tf.train.Feature(int64_list=tf.train.Int64List(
            value=[lineno for lineno, _ in document.lines])),
        "line": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[raw for _, raw in document.lines])),
    })).SerializeToString()


def read_staged_chunk(path):
    """The documents of a chunk file written by `stage_chunks`, as `corpus.Document`s."""
    documents = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        feature = tf.train.Example.FromString(record).features.feature
        documents.append(corpus_lib.Document(
            feature["path"].bytes_list.value[0].decode("utf-8", "surrogateescape"),
            list(zip(feature["lineno"].int64_list.value, feature["line"].bytes_list.value))))
    return documents


def stage_chunks(input_files, staging_dir, documents_per_chunk, stats,
                 max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES):
    """Writes the corpus's chunks to `staging_dir`, one TFRecord file per chunk.

    Chunks are `corpus.iter_document_chunks`'s (the local writer's); what the
    reader skips is counted in `stats`.

    Returns:
      [(chunk index, staged path)], in chunk order.
    """
    elements = []
    for index, chunk in enumerate(corpus_lib.iter_document_chunks(
            input_files, documents_per_chunk, stats, max_line_bytes)):
        path = "%s/chunk-%08d.tfrecord" % (staging_dir.rstrip("/"), index)
        with tf.io.TFRecordWriter(path) as records:
            for document in chunk:
                records.write(_document_record(document))
        elements.append((index, path))
    return elements


# ---------------------------------------------------------------- workers


def _write_then_rename(path, write):
    """Calls `write(attempt)` for a fresh attempt file beside `path`, then renames it over `path`.

    Retried bundles each write their own attempt, so two attempts never mix;
    the attempt's name starts with `path` (a temporary name of `data.atomic`),
    so the launcher and later sweeps recognise what a killed worker left.
    """
    attempt = "%s%s%s" % (path, _ATTEMPT, os.urandom(4).hex())
    try:
        write(attempt)
        tf.io.gfile.rename(attempt, path, overwrite=True)
    except BaseException:
        try:
            if tf.io.gfile.exists(attempt):
                tf.io.gfile.remove(attempt)
        except Exception:  # pylint: disable=broad-except
            pass
        raise


class _ProcessChunks(beam.DoFn):
    """(chunk index, staged path) -> slices of serialised examples, and the chunk's counts."""

    def __init__(self, options, vocab_file, log_first_instances):
        super().__init__()
        self._options = options
        self._vocab_file = vocab_file
        self._log_first_instances = log_first_instances
        self._local_vocab = None
        self._processor = None

    def setup(self):
        vocab = self._vocab_file
        if corpus_lib.is_remote(vocab):
            # The tokenizer reads local files; one copy per worker process.
            handle, self._local_vocab = tempfile.mkstemp(suffix="-vocab.txt")
            os.close(handle)
            tf.io.gfile.copy(vocab, self._local_vocab, overwrite=True)
            vocab = self._local_vocab
        self._processor = pretraining_data.ChunkProcessor(
            self._options._replace(vocab_file=vocab),
            keep_first_instances=self._log_first_instances)

    def teardown(self):
        if self._local_vocab:
            try:
                os.remove(self._local_vocab)
            except OSError:
                pass

    def process(self, element):
        index, path = element
        documents = read_staged_chunk(path)
        try:
            result = self._processor.process(index, documents)
        except ValueError as e:
            # Bad input (a line that is not text, ...): reported by the launcher
            # in chunk order, as the local writer would, instead of failing the
            # bundle (a runner would retry it, and the error would arrive
            # wrapped in the runner's own message).
            yield beam.pvalue.TaggedOutput(_COUNTS, {"index": index, "error": str(e)})
            return
        yield beam.pvalue.TaggedOutput(_COUNTS, {
            "index": index, "error": None,
            "documents": result.num_documents, "instances": result.num_instances,
            "tokens": result.num_tokens, "masked": result.num_masked,
            "random_next": result.num_random_next,
            "stat_counts": dict(result.stats.counts),
            "stat_examples": {k: list(v) for k, v in result.stats.examples.items()},
            "first_instances": [str(instance) for instance in result.first_instances],
        })
        examples = result.examples
        for start in range(0, len(examples), SLICE_SIZE):
            yield index, start, examples[start:start + SLICE_SIZE]


def _prefix_offsets(counts):
    """{chunk index: global index of its first example}, or None after an error."""
    if any(record["error"] is not None for record in counts):
        return None
    offsets = {}
    total = 0
    for record in sorted(counts, key=lambda r: r["index"]):
        offsets[record["index"]] = total
        total += record["instances"]
    return offsets


def _to_shards(element, offsets, num_outputs):
    """A slice of examples -> (shard, (global index of its first example there, examples))."""
    if offsets is None:
        return
    index, start, examples = element
    first = offsets[index] + start
    for skip in range(min(num_outputs, len(examples))):
        yield (first + skip) % num_outputs, (first + skip, examples[skip::num_outputs])


def _write_shard(element, temporaries):
    """Writes one output file's examples, in global order, to its temporary."""
    shard, parts = element
    parts = sorted((part for part in parts if part is not None), key=lambda part: part[0])

    def write(path):
        with tf.io.TFRecordWriter(path) as records:
            for _, examples in parts:
                for example in examples:
                    records.write(example)

    _write_then_rename(temporaries[shard], write)
    yield shard, sum(len(examples) for _, examples in parts)


def _write_summary(counts, path):
    text = json.dumps(sorted(counts, key=lambda r: r["index"]))

    def write(attempt):
        with tf.io.gfile.GFile(attempt, "w") as handle:
            handle.write(text)

    _write_then_rename(path, write)


def _build(pipeline, elements, options, vocab_file, temporaries, summary_path,
           log_first_instances):
    num_outputs = len(temporaries)
    processed = (
        pipeline
        | "Chunks" >> beam.Create(elements)
        | "Process" >> beam.ParDo(_ProcessChunks(options, vocab_file, log_first_instances))
        .with_outputs(_COUNTS, main="examples"))
    counts = processed[_COUNTS] | "AllCounts" >> beam.combiners.ToList()
    _ = counts | "WriteSummary" >> beam.Map(_write_summary, summary_path)
    offsets = counts | "Offsets" >> beam.Map(_prefix_offsets)
    keyed = processed.examples | "ToShards" >> beam.FlatMap(
        _to_shards, beam.pvalue.AsSingleton(offsets), num_outputs)
    # Every output file is written, also one that gets no example.
    every_shard = pipeline | "EveryShard" >> beam.Create(
        [(shard, None) for shard in range(num_outputs)])
    _ = ((keyed, every_shard)
         | "Flatten" >> beam.Flatten()
         | "ByShard" >> beam.GroupByKey()
         | "WriteShards" >> beam.FlatMap(_write_shard, temporaries))


# ---------------------------------------------------------------- launcher


class _ChunkCounts(object):
    """A chunk's record from the summary file, with `ChunkResult`'s count fields."""

    def __init__(self, record):
        self.num_documents = record["documents"]
        self.num_instances = record["instances"]
        self.num_tokens = record["tokens"]
        self.num_masked = record["masked"]
        self.num_random_next = record["random_next"]
        self.stats = corpus_lib.ReadStats()
        self.stats.counts.update(record["stat_counts"])
        for reason, where in record["stat_examples"].items():
            self.stats.examples[reason] = list(where)
        self.first_instances = record["first_instances"]


def _remove_attempts(temporaries):
    """Removes attempt files that killed workers left beside the temporaries."""
    for temp in temporaries:
        try:
            leftovers = tf.io.gfile.glob(temp + _ATTEMPT + "*")
        except tf.errors.OpError:
            continue
        for path in leftovers:
            atomic.discard(path)


def create_pretraining_data(input_files, output_files, options, runner="DirectRunner",
                            pipeline_args=(), documents_per_chunk=10000,
                            max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES,
                            log_first_instances=0):
    """`writer.create_pretraining_data` as a Beam pipeline; the same output bytes.

    Args:
      input_files: corpus paths (read by this process, see the module doc).
      output_files: TFRecord paths; examples go round-robin over them. On a
        cluster they must be writable by the workers (e.g. ``gs://``).
      options: `pretraining_data.InstanceOptions`.
      runner: one of `RUNNERS`.
      pipeline_args: Beam's options (see `pipeline_options`), or a
        `PipelineOptions` already made by it.
      documents_per_chunk: documents processed together (as for the local
        writer: the same value gives the same files).
      max_line_bytes: longer lines are skipped (and counted).
      log_first_instances: log this many instances of the first chunk.

    Returns:
      a `writer.Summary`, as the local writer's.

    Raises:
      BeamOptionsError, corpus_lib.CorpusError, tokenization.VocabError or
      ValueError on bad input; a failed pipeline raises what the runner
      raises. In every case no output file is left under its final name by
      this run, and none is replaced.
    """
    options.validate()
    if not output_files:
        raise ValueError("No output files given.")
    if isinstance(pipeline_args, beam_options.PipelineOptions):
        beam_pipeline_options = pipeline_args
    else:
        beam_pipeline_options = pipeline_options(runner, pipeline_args)
    # Fail early (before staging or any worker) on a bad vocabulary.
    pretraining_data.ChunkProcessor(options)
    summary = pretraining_writer.Summary()
    summary.input_files = len(input_files)
    start = time.time()
    outputs = None
    staging = None
    try:
        outputs = atomic.TemporaryOutputs([_absolute(p) for p in output_files])
        staging = atomic.temporary_name(
            _join(_dirname(_absolute(output_files[0])), "beam-staging"))
        tf.io.gfile.makedirs(staging)
        vocab_file = _join(staging, _VOCAB_NAME)
        tf.io.gfile.copy(options.vocab_file, vocab_file, overwrite=True)
        elements = stage_chunks(input_files, staging, documents_per_chunk, summary.stats,
                                max_line_bytes)
        logging.info("Staged %d chunk(s) in %s", len(elements), staging)
        if not elements:
            raise corpus_lib.CorpusError(pretraining_writer.no_instance_message(
                input_files, summary.stats, max_line_bytes))
        summary_path = _join(staging, _SUMMARY_NAME)
        runner_name = (beam_pipeline_options.view_as(beam_options.StandardOptions).runner
                       or runner)
        pipeline = beam.Pipeline(runner=_runner(runner_name, beam_pipeline_options),
                                 options=beam_pipeline_options)
        _build(pipeline, elements, options, vocab_file, outputs.temporaries, summary_path,
               log_first_instances)
        state = pipeline.run().wait_until_finish()
        if state is not None and state != beam_runner.PipelineState.DONE:
            raise RuntimeError("The Beam pipeline ended in state %s" % state)
        with tf.io.gfile.GFile(summary_path, "r") as handle:
            records = json.load(handle)
        for record in records:
            if record["error"] is not None:
                raise corpus_lib.CorpusError(record["error"])
            chunk = _ChunkCounts(record)
            summary.add_chunk(chunk)
            for instance in chunk.first_instances:
                logging.info("*** Example ***\n%s", instance)
        if summary.instances == 0:
            raise corpus_lib.CorpusError(pretraining_writer.no_instance_message(
                input_files, summary.stats, max_line_bytes))
        outputs.commit()
    finally:
        if outputs is not None:
            outputs.discard()
            _remove_attempts(outputs.temporaries)
        if staging is not None:
            atomic.discard(staging)
    # Round-robin from global index 0: file k gets an example iff k < instances.
    return summary.finish(output_files, [shard >= summary.instances
                                         for shard in range(len(output_files))], start)


def _join(directory, name):
    if corpus_lib.is_remote(directory):
        return directory.rstrip("/") + "/" + name
    return os.path.join(directory, name)


def _dirname(path):
    if corpus_lib.is_remote(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(path)
