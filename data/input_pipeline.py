"""tf.data input functions for the pre-training TFRecords.

`pretraining_dataset` reads the files written by `run/create_pretraining_data.py`
(Google's feature names and shapes) and is meant to be called once per input
pipeline under a `tf.distribute` strategy, through
``strategy.distribute_datasets_from_function``: given the `tf.distribute.InputContext`
it shards the input (by file when there are enough files, by record otherwise)
and batches with the per-replica batch size.

Training reads repeat forever with files shuffled and read in parallel
(interleaved), records shuffled in a buffer, and batches prefetched, so the
input pipeline stays ahead of the model. Evaluation reads files in order,
once (or repeated, for a fixed number of eval steps).

`data_service_input_fn` moves a training input function onto a tf.data
service (``--data_service_address``): the dataset it builds runs on the
service's workers, and the trainer only receives finished batches.
"""

import dataclasses
import re
import socket
import time
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import corpus as corpus_lib
from data.options import option


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """The `tf.io.parse_example` spec of Google's pre-training features."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def decode_batch(serialized, feature_spec):
    """Parses a batch of serialised Examples; int64 features become int32.

    TPUs and most kernels want int32 ids, and int32 halves the host-to-device
    traffic.
    """
    features = tf.io.parse_example(serialized, feature_spec)
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in features.items()}


def tfrecord_dataset(input_patterns, feature_spec, batch_size, is_training,
                     input_context=None, shuffle_buffer_size=1000,
                     cycle_length=4, seed=None, repeat=None,
                     drop_remainder=True):
    """A batched dataset of parsed features from TFRecord files.

    Args:
      input_patterns: comma-separated globs (or a list of them).
      feature_spec: dict for `tf.io.parse_example`.
      batch_size: the batch size of this input pipeline. Under a strategy,
        pass the global batch size together with `input_context`; the
        per-replica size is derived from it.
      is_training: shuffle files and records, interleave files.
      input_context: a `tf.distribute.InputContext`, or None.
      shuffle_buffer_size: records in the shuffle buffer (training).
      cycle_length: files read in parallel (training).
      seed: shuffling seed, for reproducible runs.
      repeat: repeat forever; defaults to `is_training`.
      drop_remainder: keep batch shapes static (required on TPUs).
    """
    files = corpus_lib.expand_file_patterns(input_patterns)
    if repeat is None:
        repeat = is_training
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines

    if is_training:
        d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
        if shard_by_file:
            d = d.shard(num_pipelines, pipeline_id)
        if repeat:
            d = d.repeat()
        d = d.shuffle(buffer_size=len(files), seed=seed)
        d = d.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(cycle_length, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        if num_pipelines > 1 and not shard_by_file:
            d = d.shard(num_pipelines, pipeline_id)
        d = d.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
    else:
        d = tf.data.TFRecordDataset(files)
        if num_pipelines > 1:
            d = d.shard(num_pipelines, pipeline_id)
        if repeat:
            d = d.repeat()
    # Batch first, then parse the whole batch in one op: much faster than
    # parsing record by record.
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    d = d.map(lambda s: decode_batch(s, feature_spec),
              num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def stream_dataset(generate, signature, streams_per_replica):
    """Batches of `generate()`'s examples in order, each one step of `streams_per_replica`
    consecutive streams (what a stream carries from step to step, an LSTM's state or
    XLNet's memory, stays on its row); `signature` maps feature names to `tf.TensorSpec`s.
    """
    d = tf.data.Dataset.from_generator(generate, output_signature=signature)
    d = d.batch(streams_per_replica, drop_remainder=True)
    return d.prefetch(tf.data.AUTOTUNE)


def pretraining_dataset(input_patterns, max_seq_length, max_predictions_per_seq,
                        batch_size, is_training, input_context=None, **kwargs):
    """Batches of Google's pre-training features (see `tfrecord_dataset`)."""
    return tfrecord_dataset(
        input_patterns,
        pretraining_feature_spec(max_seq_length, max_predictions_per_seq),
        batch_size, is_training, input_context=input_context, **kwargs)


def pretraining_input_fn_builder(input_files, max_seq_length, max_predictions_per_seq,
                                 is_training, batch_size, **kwargs):
    """Google-style builder: returns ``input_fn(input_context=None)``.

    The returned function can be handed directly to
    ``strategy.distribute_datasets_from_function``.
    """
    def input_fn(input_context=None):
        return pretraining_dataset(input_files, max_seq_length, max_predictions_per_seq,
                                   batch_size, is_training, input_context=input_context,
                                   **kwargs)
    return input_fn


# ---------------------------------------------------------------------------
# Training input from a tf.data service.
# ---------------------------------------------------------------------------

# "distributed_epoch" (the default): the dispatcher hands the source's splits
# (here: input files, one repetition at a time) to the service's workers,
# each split to one worker, so each repetition of the data is produced once
# however many workers there are, and fast workers take more splits. It is
# at most once: a worker that fails loses the files it was reading, and on
# finite data each worker drops its own last partial batch (training data
# repeats forever). "parallel_epochs": every worker runs the whole dataset,
# so N workers send each example N times (N identical streams when the
# pipeline is seeded); only for datasets whose source cannot be split.
DATA_SERVICE_PROCESSING_MODES = ("distributed_epoch", "parallel_epochs")
DEFAULT_DATA_SERVICE_PROCESSING_MODE = "distributed_epoch"
# The protocols of an open-source tf.data service dispatcher.
DATA_SERVICE_PROTOCOLS = ("grpc",)

_ADDRESS = re.compile(r"^(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://"
                      r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+):(?P<port>\d{1,5})$")


def check_data_service(address, job_name=None,
                       processing_mode=DEFAULT_DATA_SERVICE_PROCESSING_MODE):
    """Checks tf.data service settings; raises a one-line ValueError naming the flag.

    Args:
      address: the dispatcher, ``grpc://HOST:PORT`` (``--data_service_address``),
        or None/"" for local input.
      job_name: ``--data_service_job_name``, or None/"": consumers that give
        the same name share one job (each batch goes to one of them).
      processing_mode: one of `DATA_SERVICE_PROCESSING_MODES`.

    Returns:
      True when training input goes through a service, False otherwise.
    """
    if not address:
        if job_name:
            raise ValueError(
                "--data_service_job_name=%s needs --data_service_address (the tf.data "
                "service dispatcher, grpc://HOST:PORT)" % job_name)
        return False
    match = _ADDRESS.match(address)
    if not match:
        raise ValueError(
            "--data_service_address=%s: expected the dispatcher as PROTOCOL://HOST:PORT, "
            "e.g. grpc://localhost:5050" % address)
    if match.group("protocol") not in DATA_SERVICE_PROTOCOLS:
        raise ValueError("--data_service_address=%s: unknown protocol %r; expected %s"
                         % (address, match.group("protocol"),
                            " or ".join("%s://HOST:PORT" % p for p in DATA_SERVICE_PROTOCOLS)))
    if not 0 < int(match.group("port")) < 65536:
        raise ValueError("--data_service_address=%s: port %s is not in 1..65535"
                         % (address, match.group("port")))
    if job_name and job_name != job_name.strip():
        raise ValueError("--data_service_job_name=%r: expected a name without leading or "
                         "trailing blanks" % job_name)
    if processing_mode not in DATA_SERVICE_PROCESSING_MODES:
        raise ValueError("data service processing mode %r: expected one of %s"
                         % (processing_mode, ", ".join(DATA_SERVICE_PROCESSING_MODES)))
    return True


def distribute_through_service(dataset, address, job_name=None,
                               processing_mode=DEFAULT_DATA_SERVICE_PROCESSING_MODE):
    """`dataset`, produced by the tf.data service at `address` (see `check_data_service`).

    The dataset's definition is sent to the dispatcher and runs on the
    service's workers: everything it uses must be a TensorFlow op (no
    `py_function`), custom ops (tensorflow_text) must be loaded in the worker
    processes, and the files it names must be readable there under the same
    paths.
    """
    check_data_service(address, job_name, processing_mode)
    return dataset.apply(tf.data.experimental.service.distribute(
        processing_mode=processing_mode, service=address, job_name=job_name or None))


def data_service_input_fn(input_fn, address, job_name=None,
                          processing_mode=DEFAULT_DATA_SERVICE_PROCESSING_MODE):
    """Wraps ``input_fn(input_context)`` so its batches come from a tf.data service.

    The wrapped dataset is built as for ONE input pipeline (nothing sharded
    by `input_context`) with the per-replica batch size, so every training
    worker registers the same dataset; workers that share `job_name` then
    share one job, and the service divides the batches between them (what
    `input_context` sharding does locally). Several input pipelines
    (multi-worker training) therefore need a `job_name`: without one each
    would read the whole data set. The dispatcher knows a job by its name
    only: a consumer naming a job that exists reads that job's batches,
    whatever dataset it built itself. So give each training run a name of
    its own (another run reusing it while the dispatcher still holds the
    old job would silently read the old job's data).

    With the default "distributed_epoch" mode the order in which batches
    arrive depends on the service's workers; with one service worker and a
    seeded pipeline it is the local order. The trainer's resume (it skips the
    batches already trained on, `Trainer._skipping_input_fn`) skips them on
    the consumer side: from a new job this replays the local stream; a
    resumed run that rejoins a job the dispatcher still holds (same
    `job_name`, within the dispatcher's job_gc_timeout) continues that job's
    stream and skips as many batches again.

    Args:
      input_fn: ``fn(input_context=None) -> tf.data.Dataset`` of per-replica
        batches (what the pipelines' `input_fn` return).
      address, job_name, processing_mode: see `check_data_service`.

    Returns:
      ``fn(input_context=None) -> tf.data.Dataset`` for
      ``strategy.distribute_datasets_from_function``.
    """
    check_data_service(address, job_name, processing_mode)

    def service_input_fn(input_context=None):
        single = None
        if input_context is not None:
            if input_context.num_input_pipelines > 1 and not job_name:
                raise ValueError(
                    "--data_service_address with %d input pipelines (multi-worker "
                    "training) needs --data_service_job_name, so that they share one job "
                    "and each batch goes to one of them"
                    % input_context.num_input_pipelines)
            # The same dataset in every pipeline; batch size per replica.
            single = tf.distribute.InputContext(
                num_input_pipelines=1, input_pipeline_id=0,
                num_replicas_in_sync=input_context.num_replicas_in_sync)
        dataset = input_fn(single)
        logging.info("Training input from the tf.data service %s (job %s, %s)", address,
                     job_name or "anonymous", processing_mode)
        return distribute_through_service(dataset, address, job_name, processing_mode)

    return service_input_fn


@dataclasses.dataclass
class DataServiceServerSettings:
    """A tf.data service server (`start_data_service_server`); `run/data_service.py`'s flags."""

    role: Optional[str] = option(None, "Which server to run.",
                                 choices=("dispatcher", "worker"))
    port: int = option(0, "Port to listen on (0: any free port, printed at start).")
    dispatcher_address: Optional[str] = option(
        None, "worker: the dispatcher, grpc://HOST:PORT.")
    worker_address: Optional[str] = option(
        None, "worker: HOST:PORT under which trainers reach this worker (%port% is "
        "replaced by the port). Default localhost:%port%: same machine only.")
    work_dir: Optional[str] = option(
        None, "dispatcher: journal directory, so that a restarted dispatcher "
        "recovers its jobs.")
    dispatcher_wait_seconds: float = option(
        60.0, "worker: how long to wait for the dispatcher to accept connections before "
        "giving up with an error.", lower_bound=0)


def _check_port_free(port):
    """`--port` is free on this machine (0 always is), else a one-line error."""
    if not port:
        return
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("", port))
    except OSError as e:
        raise ValueError("--port=%d: already in use on this machine (%s); stop what listens "
                         "there or choose another port (0: any free one)"
                         % (port, e.strerror or e)) from None
    finally:
        probe.close()


def _wait_for_dispatcher(address, seconds):
    """Waits until something accepts TCP connections at `address` (grpc://HOST:PORT).

    A tf.data worker whose dispatcher is not there blocks in TensorFlow's C++
    registration loop, prints nothing and does not end on SIGTERM; checking
    first turns that into a message.
    """
    host, port = address.split("://", 1)[1].rsplit(":", 1)
    deadline = time.monotonic() + max(0.0, seconds)
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
            return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ValueError(
                    "--dispatcher_address=%s: no dispatcher accepts connections there (%s, "
                    "waited %gs, --dispatcher_wait_seconds); start run/data_service.py "
                    "--role=dispatcher first, or check the host and port"
                    % (address, e.strerror or e, seconds)) from None
            time.sleep(0.5)


def start_data_service_server(role, port=0, dispatcher_address=None, worker_address=None,
                              work_dir=None, dispatcher_wait_seconds=60.0):
    """Starts a tf.data service dispatcher or worker in this process.

    Args:
      role: "dispatcher" or "worker".
      port: the port to listen on (0: any free port).
      dispatcher_address: the worker's dispatcher, grpc://HOST:PORT.
      worker_address: the HOST:PORT under which trainers reach this worker
        ("%port%" is replaced by the port); TensorFlow's default,
        localhost:%port%, only serves trainers on the same machine.
      work_dir: the dispatcher's journal directory: with it, a restarted
        dispatcher recovers its jobs (fault-tolerant mode).
      dispatcher_wait_seconds: how long a worker waits for its dispatcher
        to accept connections (then a one-line ValueError).

    Returns:
      the started `DispatchServer` / `WorkerServer` (its ``target`` /
      ``_address`` say where it listens; ``stop()`` ends it).
    """
    service = tf.data.experimental.service
    if not 0 <= port < 65536:
        raise ValueError("--port=%d: expected 0 (any free port) to 65535" % port)
    if role == "dispatcher":
        if dispatcher_address or worker_address:
            raise ValueError("--dispatcher_address and --worker_address are worker "
                             "settings; a dispatcher takes --port and --work_dir")
        _check_port_free(port)
        return service.DispatchServer(service.DispatcherConfig(
            port=port, work_dir=work_dir, fault_tolerant_mode=bool(work_dir)))
    if role != "worker":
        raise ValueError("--role=%s: expected dispatcher or worker" % role)
    if not dispatcher_address:
        raise ValueError("--dispatcher_address is required for a worker (the dispatcher, "
                         "grpc://HOST:PORT)")
    if work_dir:
        raise ValueError("--work_dir is a dispatcher setting")
    # Reuse the address check of the trainers' flag, under this flag's name.
    try:
        check_data_service(dispatcher_address)
    except ValueError as e:
        raise ValueError(str(e).replace("--data_service_address", "--dispatcher_address",
                                        1)) from None
    try:
        # The ops of the raw-text pipelines (tokenizers, masking) must be
        # registered where the datasets run.
        import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    except ImportError:  # pragma: no cover - tensorflow_text is a requirement
        logging.warning("tensorflow_text is not installed: datasets that use its ops "
                        "cannot run on this worker")
    _check_port_free(port)
    _wait_for_dispatcher(dispatcher_address, dispatcher_wait_seconds)
    return service.WorkerServer(service.WorkerConfig(
        dispatcher_address=dispatcher_address.split("://", 1)[1], port=port,
        worker_address=worker_address))


# ---------------------------------------------------------------------------
# Length-aware batching: per-batch padding and grouping by length.
# ---------------------------------------------------------------------------

# The feature groups of Google's layout: each mask with the features padded
# alongside it (every one of them `[batch, max_seq_length]`).
STANDARD_SEQUENCE_FEATURES = (("input_mask", ("input_ids", "input_mask", "segment_ids")),)
# The feature a grouped prediction stream carries so that outputs can be put
# back in input order (`restore_input_order`).
ORDER_FEATURE = "example_order"


@dataclasses.dataclass
class LengthBatchingSettings:
    """How fine-tuning jobs pad and group their batches (the jobs' flags)."""

    trim_batches: bool = option(
        True, "Pad each batch only to its longest row, rounded up to a length bucket "
        "(length_buckets: multiples of 16 to 128, of 32 to 256, of 64 beyond), instead "
        "of to --max_seq_length; padding is masked, so results are the same. Predictions "
        "are also grouped by length (outputs in input order). --notrim_batches: Google's "
        "fixed-length batches.")
    group_by_length: bool = option(
        False, "Training: batch examples of similar length together (HF's group_by_length; "
        "from the shuffled stream, deterministic under --seed, so resume stays exact). "
        "Changes which examples share a batch, so numbers differ from Google's. Needs "
        "--trim_batches.")


def check_length_batching(settings, error=ValueError):
    """A one-line `error` unless `settings`' trim_batches / group_by_length go together."""
    if getattr(settings, "group_by_length", False) and not getattr(settings, "trim_batches",
                                                                     True):
        raise error("--group_by_length needs --trim_batches (grouping only saves time when "
                    "each batch is padded to its own length); drop --notrim_batches or "
                    "--group_by_length")


def length_buckets(max_seq_length):
    """The padded lengths a trimmed batch can have: a small fixed set ending at max_seq_length.

    Multiples of 16 up to 128, of 32 up to 256, of 64 beyond (at most a
    quarter of a batch's width is padding above its longest row): 16
    lengths at 512, 14 at 384, 12 at 256, 8 at 128, 3 at 48.
    """
    if max_seq_length < 1:
        raise ValueError("max_seq_length=%r: expected a positive length" % (max_seq_length,))
    buckets, length = [], 0
    while length < max_seq_length:
        length += 16 if length < 128 else 32 if length < 256 else 64
        buckets.append(min(length, max_seq_length))
    return tuple(buckets)


def _row_lengths(mask):
    """`(right, left)` `[batch]` int32: the real width of each row padded on the right
    (last real position + 1) and on the left (width - first real position)."""
    real = tf.cast(tf.not_equal(mask, 0), tf.int32)
    width = tf.shape(mask)[1]
    positions = tf.range(1, width + 1)[None, :]
    right = tf.reduce_max(real * positions, axis=1)
    left = tf.reduce_max(real * (width + 1 - positions), axis=1)
    return right, left


def _bucket_of(length, buckets):
    """The smallest bucket >= `length` (a scalar or vector of int32)."""
    boundaries = tf.constant(buckets, tf.int32)
    index = tf.searchsorted(boundaries, tf.reshape(length, [-1]), side="left")
    index = tf.minimum(index, len(buckets) - 1)
    return tf.reshape(tf.gather(boundaries, index), tf.shape(length))


def example_length(features, groups=STANDARD_SEQUENCE_FEATURES):
    """`[batch]` int32: each example's unpadded length (its longest group's), either side."""
    lengths = []
    for mask_name, _ in groups:
        right, left = _row_lengths(features[mask_name])
        lengths.append(tf.minimum(right, left))
    return tf.reduce_max(tf.stack(lengths), axis=0)


def trim_batch(features, max_seq_length, groups=STANDARD_SEQUENCE_FEATURES):
    """`features` with each group's sequence features cut to the batch's bucketed length.

    For every ``(mask_name, names)`` of `groups`, the batch's longest row by
    the mask (padding on the right as Google's packing puts it, or on the
    left as XLNet's: the side is read from the mask) is rounded up to a
    `length_buckets` length, and every feature of `names` (`[batch,
    max_seq_length]`) is cut to it on the padding side. Other features pass
    unchanged. The padding cut off is masked, so a model gives the same
    losses and the same outputs at every real position.
    """
    buckets = length_buckets(max_seq_length)
    trimmed = dict(features)
    for mask_name, names in groups:
        right, left = _row_lengths(features[mask_name])
        longest_right, longest_left = tf.reduce_max(right), tf.reduce_max(left)
        on_left = longest_left < longest_right
        full = tf.shape(features[mask_name])[1]
        width = tf.minimum(_bucket_of(tf.minimum(longest_right, longest_left), buckets), full)
        start = tf.where(on_left, full - width, 0)
        for name in names:
            value = features[name]
            trimmed[name] = value[:, start:start + width]
    return trimmed


def length_batched_input_fn(input_fn, max_seq_length, batch_size, *, is_training,
                            groups=STANDARD_SEQUENCE_FEATURES, trim=True,
                            group_by_length=False, keep_order=False):
    """Wraps a task's ``input_fn(input_context)`` with length-aware batching.

    The records and the wrapped function stay as they are (Google's layout,
    `max_seq_length` wide); on top of them:

    * ``trim``: every batch cut to its bucketed longest row (`trim_batch`).
    * ``group_by_length`` (needs ``trim``): the batches are unbatched and
      examples of the same length bucket batched together
      (`tf.data.Dataset.group_by_window` over the wrapped stream, which for
      training is already shuffled; deterministic when it is). Training
      keeps whole batches (``drop_remainder``); an inference stream flushes
      each bucket's last partial batch at its end.
    * ``keep_order``: each example carries its position in the wrapped
      stream as `ORDER_FEATURE` (int64 `[batch]`), for `restore_input_order`.

    Args:
      input_fn: ``fn(input_context=None) -> tf.data.Dataset`` of batches of
        `max_seq_length`-wide features.
      batch_size: the global batch size given to `input_fn` (the
        per-replica size is derived from the `input_context`).
      groups: ``(mask_name, feature_names)`` pairs (`trim_batch`).

    Returns:
      ``fn(input_context=None) -> tf.data.Dataset``, or `input_fn` itself when
      there is nothing to do.
    """
    if group_by_length and not trim:
        raise ValueError("--group_by_length needs --trim_batches")
    if not (trim or keep_order):
        return input_fn
    buckets = length_buckets(max_seq_length)

    def wrapped(input_context=None):
        dataset = input_fn(input_context)
        per_replica = (input_context.get_per_replica_batch_size(batch_size)
                       if input_context is not None else batch_size)
        if keep_order or group_by_length:
            dataset = dataset.unbatch()
            if keep_order:
                dataset = dataset.enumerate().map(
                    lambda i, features: dict(features, **{ORDER_FEATURE: i}))
            if group_by_length:
                def key(features):
                    length = example_length(
                        tf.nest.map_structure(lambda t: t[None], features), groups)[0]
                    return tf.cast(tf.searchsorted(tf.constant(buckets, tf.int32),
                                                   length[None])[0], tf.int64)

                dataset = dataset.group_by_window(
                    key_func=key, window_size=per_replica,
                    reduce_func=lambda _, window: window.batch(
                        per_replica, drop_remainder=is_training))
            else:
                dataset = dataset.batch(per_replica, drop_remainder=is_training)
        if trim:
            dataset = dataset.map(lambda features: trim_batch(features, max_seq_length, groups),
                                  num_parallel_calls=tf.data.AUTOTUNE,
                                  deterministic=True)
        return dataset.prefetch(tf.data.AUTOTUNE)

    wrapped.keeps_order = keep_order
    return wrapped


def restore_input_order(outputs, order_name=ORDER_FEATURE):
    """Prediction outputs (dict name -> array over examples) put back in input order.

    `outputs[order_name]` holds each row's position in the input (what
    `length_batched_input_fn(keep_order=True)` adds); it is dropped.
    """
    outputs = dict(outputs)
    order = np.asarray(outputs.pop(order_name))
    inverse = np.argsort(order, kind="stable")
    return {name: np.asarray(value)[inverse] for name, value in outputs.items()}


def pad_sequence_outputs(outputs, names, max_seq_length, value=0.0):
    """`outputs` with the `[batch, length, ...]` tensors of `names` padded back to
    `max_seq_length` on axis 1 with `value`, so batches of different widths stack."""
    padded = dict(outputs)
    for name in names:
        tensor = outputs[name]
        extra = max_seq_length - tf.shape(tensor)[1]
        paddings = [[0, 0], [0, extra]] + [[0, 0]] * (tensor.shape.rank - 2)
        padded[name] = tf.pad(tensor, paddings, constant_values=tf.cast(value, tensor.dtype))
    return padded
