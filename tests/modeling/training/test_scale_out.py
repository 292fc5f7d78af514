"""Scale-out on existing engines: training input from a tf.data service.

An in-process `DispatchServer` and `WorkerServer` stand in for the service:
the batches that arrive through it are the local pipeline's (order where
the processing mode keeps it), several consumers sharing a job split the
data between them, what a resumed run skips is what the local pipeline
would skip, and a short pre-training job reads from it and learns.
"""

import collections
import gc
import glob
import math
import os
import re
import signal
import subprocess
import sys
import time
import types

import pytest
import tensorflow as tf

import script_runner
from data import input_pipeline
from data import tokenization
from modeling.recipes import pretraining
from modeling.tasks import classifier_job
from modeling.training import trainer as trainer_lib

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPEC = {"x": tf.io.FixedLenFeature([1], tf.int64)}
FILES, PER_FILE, BATCH = 3, 40, 4  # whole batches per file: nothing dropped anywhere


def _start_service(num_workers):
    dispatcher = tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(port=0))
    host_port = dispatcher.target.split("://", 1)[1]
    workers = [tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(dispatcher_address=host_port))
        for _ in range(num_workers)]
    return dispatcher, workers


def _stop_service(dispatcher, workers):
    # Consumers still referenced from cycles (a trainer's iterator) end first,
    # while the servers can still answer them.
    gc.collect()
    for worker in workers:
        worker.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def service():
    """One dispatcher with one worker: (address, worker)."""
    dispatcher, workers = _start_service(1)
    yield dispatcher.target, workers[0]
    _stop_service(dispatcher, workers)


@pytest.fixture(scope="module")
def record_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    paths = []
    for f in range(FILES):
        path = str(directory / ("part-%d.tfrecord" % f))
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(PER_FILE):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[f * 1000 + i]))})).SerializeToString())
        paths.append(path)
    return paths


def _input_fn(files, repeat, batch_size=BATCH):
    """The training reader (files shuffled and interleaved, records shuffled), seeded."""
    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(files, SPEC, batch_size, is_training=True,
                                               input_context=input_context, seed=7,
                                               repeat=repeat)
    return input_fn


def _batches(dataset, limit=None):
    out = []
    for batch in dataset:
        out.append(tuple(batch["x"].numpy().ravel().tolist()))
        if limit is not None and len(out) >= limit:
            break
    return out


def _records(batches):
    return collections.Counter(x for batch in batches for x in batch)


# ----------------------------------------------------------------- bad values

def test_bad_data_service_values_are_one_line_errors(tmp_path):
    check = input_pipeline.check_data_service
    assert check(None) is False and check("") is False
    assert check("grpc://localhost:5050", "job") is True
    assert check("grpc://[::1]:5050") is True
    cases = [
        (("localhost:5050",), "--data_service_address=localhost:5050: expected"),
        (("grpc://localhost",), "--data_service_address=grpc://localhost: expected"),
        (("http://localhost:5050",), "unknown protocol 'http'"),
        (("grpc://localhost:70000",), "port 70000 is not in 1..65535"),
        ((None, "shared"), "--data_service_job_name=shared needs --data_service_address"),
        (("grpc://localhost:5050", " shared"), "--data_service_job_name=' shared'"),
        (("grpc://localhost:5050", None, "sharded"), "processing mode 'sharded'"),
    ]
    for args, expected in cases:
        with pytest.raises(ValueError) as error:
            check(*args)
        assert expected in str(error.value) and "\n" not in str(error.value)

    # Jobs refuse them before anything is built or written.
    out = tmp_path / "pretraining"
    with pytest.raises(ValueError, match="--data_service_address=localhost:5050"):
        pretraining.run(pretraining.PretrainingJob(
            output_dir=str(out), input_file="unused", do_train=True,
            data_service_address="localhost:5050"))
    with pytest.raises(classifier_job.ClassifierJobError,
                       match="--data_service_job_name=j needs --data_service_address"):
        classifier_job.run(classifier_job.ClassifierJob(
            data_dir=str(tmp_path), bert_config_file=str(tmp_path / "none.json"),
            output_dir=str(tmp_path / "classifier"), task_name="mrpc", do_train=True,
            data_service_job_name="j"))
    assert not out.exists() and not (tmp_path / "classifier").exists()


def test_scripts_name_the_bad_flag_on_one_line(tmp_path):
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "run_pretraining.py"),
         "--output_dir=%s" % (tmp_path / "o"), "--data_service_address=localhost:5050"],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        "run_pretraining: error: --data_service_address=localhost:5050: expected")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------- same elements

@pytest.mark.parametrize("mode", input_pipeline.DATA_SERVICE_PROCESSING_MODES)
def test_one_worker_gives_the_local_batches_in_order(service, record_files, mode):
    address, _ = service
    local = _batches(_input_fn(record_files, repeat=False)())
    served = _batches(input_pipeline.data_service_input_fn(
        _input_fn(record_files, repeat=False), address, processing_mode=mode)())
    assert len(local) == FILES * PER_FILE // BATCH
    assert served == local
    # The training stream (repeated forever): the same first batches.
    local = _batches(_input_fn(record_files, repeat=True)(), limit=45)
    served = _batches(input_pipeline.data_service_input_fn(
        _input_fn(record_files, repeat=True), address, processing_mode=mode)(), limit=45)
    assert served == local


def test_two_workers_distributed_epoch_reads_each_record_once(record_files):
    """Why "distributed_epoch" is the default: "parallel_epochs" doubles the data."""
    dispatcher, workers = _start_service(2)
    try:
        local = _records(_batches(_input_fn(record_files, repeat=False)()))
        assert len(local) == FILES * PER_FILE and set(local.values()) == {1}
        served = {}
        for mode in input_pipeline.DATA_SERVICE_PROCESSING_MODES:
            served[mode] = _records(_batches(input_pipeline.data_service_input_fn(
                _input_fn(record_files, repeat=False), dispatcher.target,
                processing_mode=mode)()))
        assert served["distributed_epoch"] == local
        # Each worker runs the whole (identically seeded) dataset.
        assert served["parallel_epochs"] == collections.Counter(
            {x: 2 for x in local})
    finally:
        _stop_service(dispatcher, workers)


def test_input_pipelines_sharing_a_job_split_the_data(service, record_files):
    """Multi-worker training: each batch goes to one of the pipelines."""
    address, _ = service
    input_fn = input_pipeline.data_service_input_fn(
        _input_fn(record_files, repeat=False, batch_size=2 * BATCH), address,
        job_name="shared-%d" % os.getpid())
    contexts = [tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                           num_replicas_in_sync=2) for i in range(2)]
    iterators = [iter(input_fn(context)) for context in contexts]
    received = [[], []]
    live = [0, 1]
    while live:
        for i in list(live):
            try:
                batch = next(iterators[i])
            except StopIteration:
                live.remove(i)
                continue
            # The per-replica batch size, as locally.
            assert batch["x"].shape == (BATCH, 1)
            received[i].append(tuple(batch["x"].numpy().ravel().tolist()))
    local = _records(_batches(_input_fn(record_files, repeat=False)()))
    assert _records(received[0]) + _records(received[1]) == local
    assert received[0] and received[1]

    # Without a job name each pipeline would read everything: refused.
    anonymous = input_pipeline.data_service_input_fn(
        _input_fn(record_files, repeat=False), address)
    with pytest.raises(ValueError, match="needs --data_service_job_name"):
        anonymous(contexts[0])


def test_resume_skips_what_the_local_pipeline_skips(service, record_files):
    """The trainer's resume (skip the consumed batches) on a new job replays the stream."""
    address, _ = service
    owner = types.SimpleNamespace(strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
    consumed = 35  # micro-steps already trained on: past the first repetition

    def resumed(input_fn):
        skipping = trainer_lib.Trainer._skipping_input_fn(owner, input_fn, consumed)
        return _batches(skipping(None), limit=10)

    local = resumed(_input_fn(record_files, repeat=True))
    served = resumed(input_pipeline.data_service_input_fn(
        _input_fn(record_files, repeat=True), address, job_name="resume-%d" % os.getpid()))
    assert served == local
    assert served == _batches(_input_fn(record_files, repeat=True)(),
                              limit=consumed + 10)[consumed:]


def _start_server_script(tmp_path, name, *args):
    log = tmp_path / ("%s.log" % name)
    proc = script_runner.Popen(
        [sys.executable, os.path.join(REPO_ROOT, "run", "data_service.py")] + list(args),
        stdout=open(str(log), "w"), stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    return proc, log


def _listening_address(proc, log, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log.read_text()
        match = re.search(r"listening on (\S+)", text)
        if match:
            return match.group(1)
        assert proc.poll() is None, text[-2000:]
        time.sleep(0.2)
    raise AssertionError("no server address within %ds: %s" % (timeout, log.read_text()))


def test_server_script_serves_other_processes(tmp_path, record_files):
    """run/data_service.py: a dispatcher and a worker process, stopped by SIGTERM."""
    procs = []
    try:
        dispatcher, log = _start_server_script(tmp_path, "dispatcher", "--role=dispatcher")
        procs.append(dispatcher)
        address = _listening_address(dispatcher, log)
        assert address.startswith("grpc://")
        worker, log = _start_server_script(tmp_path, "worker", "--role=worker",
                                           "--dispatcher_address=%s" % address)
        procs.append(worker)
        _listening_address(worker, log)
        served = _batches(input_pipeline.data_service_input_fn(
            _input_fn(record_files, repeat=False), address)())
        assert served == _batches(_input_fn(record_files, repeat=False)())
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 143
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with pytest.raises(ValueError, match="--dispatcher_address=localhost:1: expected"):
        input_pipeline.start_data_service_server("worker", dispatcher_address="localhost:1")
    with pytest.raises(ValueError, match="--dispatcher_address is required"):
        input_pipeline.start_data_service_server("worker")


# ---------------------------------------------------------------- end to end

def test_pretraining_job_trains_from_the_service(service, tmp_path, monkeypatch,
                                                 sample_vocab_file, sample_corpus_files):
    from data.pretraining import instances, writer  # pylint: disable=g-import-not-at-top
    address, worker = service
    data = str(tmp_path / "train.tfrecord")
    writer.create_pretraining_data(sample_corpus_files, [data], instances.InstanceOptions(
        vocab_file=sample_vocab_file, do_lower_case=True, max_seq_length=32,
        max_predictions_per_seq=5, random_seed=1, dupe_factor=1, masked_lm_prob=0.15,
        short_seq_prob=0.1))
    vocab_size = len(tokenization.load_vocab(sample_vocab_file))
    config = tmp_path / "bert_config.json"
    config.write_text('{"vocab_size": %d, "hidden_size": 32, "num_hidden_layers": 1, '
                      '"num_attention_heads": 2, "intermediate_size": 64, '
                      '"max_position_embeddings": 32}' % vocab_size)

    calls = []
    distribute = tf.data.experimental.service.distribute

    def recording_distribute(**kwargs):
        calls.append(kwargs)
        return distribute(**kwargs)

    monkeypatch.setattr(tf.data.experimental.service, "distribute", recording_distribute)
    out = str(tmp_path / "run")
    results = pretraining.run(pretraining.PretrainingJob(
        input_file=data, output_dir=out, bert_config_file=str(config),
        vocab_file=sample_vocab_file, max_seq_length=32, max_predictions_per_seq=5,
        do_train=True, do_eval=True, train_batch_size=16, eval_batch_size=16,
        learning_rate=3e-3, num_train_steps=60, num_warmup_steps=5,
        save_checkpoints_steps=60, max_eval_steps=4, log_steps=10, seed=1,
        data_service_address=address, data_service_job_name="e2e-%d" % os.getpid()))

    # Training (only) read through the service, which ran the job's tasks.
    assert [(c["service"], c["processing_mode"], c["job_name"]) for c in calls] == [
        (address, "distributed_epoch", "e2e-%d" % os.getpid())]
    assert worker._num_tasks() >= 1  # pylint: disable=protected-access

    losses = []
    for event_file in glob.glob(os.path.join(out, "train", "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(event_file):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "masked_lm_loss":
                    losses.append((event.step, float(tf.make_ndarray(value.tensor))))
    losses = [loss for _, loss in sorted(losses)]
    assert len(losses) == 6 and all(math.isfinite(loss) for loss in losses)
    # It learns: from about a uniform guess over the vocabulary to clearly below it.
    assert losses[-1] < losses[0] - 0.5
    assert results["masked_lm_loss"] < math.log(vocab_size) - 0.5
    assert results["global_step"] == 60
