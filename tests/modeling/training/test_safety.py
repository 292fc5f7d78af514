"""Nothing lost, nothing half-written: atomic outputs, the run lock, SIGTERM, NaN policy."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from data import atomic
from data import termination
from modeling.training import optimization
from modeling.training import run_lock
from modeling.training import trainer as trainer_lib

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _listing(directory):
    return sorted(os.listdir(directory))


# ------------------------------------------------------------------ atomic


def test_atomic_output_leaves_the_old_file_on_error(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic.atomic_output(str(target)) as f:
            f.write("half of the new")
            raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert _listing(tmp_path) == ["out.txt"]
    assert atomic.live_temporaries() == []


def test_atomic_output_replaces_with_ordinary_permissions(tmp_path):
    target = tmp_path / "out.txt"
    atomic.write_text(str(target), "new\n")
    assert target.read_text() == "new\n"
    umask = os.umask(0)
    os.umask(umask)
    assert (os.stat(target).st_mode & 0o777) == (0o666 & ~umask)
    assert _listing(tmp_path) == ["out.txt"]


def test_temporary_outputs_commit_all_or_nothing(tmp_path):
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    outputs = atomic.TemporaryOutputs(paths)
    for temp in outputs.temporaries:
        with open(temp, "w") as f:
            f.write("x")
    assert sorted(os.path.basename(p) for p in os.listdir(tmp_path)) == sorted(
        os.path.basename(t) for t in outputs.temporaries)
    outputs.discard()
    assert _listing(tmp_path) == []
    outputs = atomic.TemporaryOutputs(paths)
    for temp in outputs.temporaries:
        with open(temp, "w") as f:
            f.write("y")
    outputs.commit()
    outputs.discard()  # a no-op after commit
    assert _listing(tmp_path) == ["a", "b"]


def test_temporaries_are_removed_when_the_process_gets_sigterm(tmp_path):
    """A child writing through `atomic` is sent SIGTERM mid-write: no temporary stays."""
    code = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, %r)
        from data import atomic, termination
        termination.install()
        with atomic.atomic_output(%r) as f:
            f.write("partial")
            f.flush()
            print("writing", flush=True)
            time.sleep(60)
    """ % (REPO_ROOT, str(tmp_path / "out.txt")))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    assert any(".tmp-" in name for name in os.listdir(tmp_path))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == termination.EXIT_STATUS
    assert _listing(tmp_path) == []


def test_sigterm_ends_a_process_stuck_in_native_code(tmp_path):
    """Python runs handlers between bytecodes only; the watchdog ends a stuck process."""
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        from data import atomic, termination
        termination.install()
        termination.GRACE_SECONDS = 1.0
        outputs = atomic.TemporaryOutputs([%r])
        open(outputs.temporaries[0], "w").write("partial")
        import tensorflow as tf
        # The hang run_pretraining had on empty inputs: a repeating input
        # that never yields, spinning in C++ (with the GIL released).
        files = tf.data.Dataset.from_tensor_slices(["a"]).repeat()
        spinning = files.interleave(lambda name: tf.data.Dataset.range(0), cycle_length=1)
        iterator = iter(spinning)
        print("stuck", flush=True)
        next(iterator)
    """ % (REPO_ROOT, str(tmp_path / "out.tfrecord")))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.stdout.readline().strip() == "stuck"
    time.sleep(1.0)
    assert any(".tmp-" in name for name in os.listdir(tmp_path))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == termination.EXIT_STATUS
    assert "main thread was stuck" in proc.stderr.read()
    assert _listing(tmp_path) == []


def test_sweep_removes_only_temporaries_of_dead_processes(tmp_path):
    host = atomic._host()  # pylint: disable=protected-access
    dead = ".data.tfrecord.tmp-%s-%d-abcdef" % (host, _dead_pid())
    live = ".data.tfrecord.tmp-%s-%d-abcdef" % (host, os.getppid())
    other_host = ".data.tfrecord.tmp-elsewhere-%d-abcdef" % _dead_pid()
    shard = ".model.ckpt.tmp-%s-%d-0a1b2c.index" % (host, _dead_pid())
    user_file = "notes.tmp-123"
    for name in (dead, live, other_host, shard, user_file):
        (tmp_path / name).write_text("x")
    removed = atomic.sweep_stale_temporaries(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == sorted([dead, shard])
    assert _listing(tmp_path) == sorted([live, other_host, user_file])


def test_check_outputs_refuses_an_input_or_a_repeated_output(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n")
    link = tmp_path / "link.txt"
    os.symlink(corpus, link)
    with pytest.raises(atomic.OutputConflictError, match="--output_file=.*also an input "
                                                         r"\(--input_file\)"):
        atomic.check_outputs([("--output_file", str(link))], [("--input_file", str(corpus))])
    with pytest.raises(atomic.OutputConflictError, match="twice"):
        atomic.check_outputs([("--output_file", str(tmp_path / "a")),
                              ("--output_file", str(tmp_path / "." / "a"))])
    atomic.check_outputs([("--output_file", str(tmp_path / "new"))],
                         [("--input_file", str(corpus))])
    assert corpus.read_text() == "text\n"


def _tiny_checkpoint(directory):
    """A TensorFlow checkpoint folder (`ckpt-1`, its shards, `checkpoint`) and a config."""
    module = tf.Module()
    module.v = tf.Variable([1.0, 2.0])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=module), str(directory), 3)
    prefix = manager.save(checkpoint_number=1)
    (directory / "bert_config.json").write_text("{}\n")
    (directory / "notes.txt").write_text("the user's notes\n")
    return prefix


def test_check_outputs_counts_every_file_of_an_input_checkpoint(tmp_path):
    folder = tmp_path / "model"
    prefix = _tiny_checkpoint(folder)
    data = [n for n in os.listdir(folder) if ".data-" in n]
    assert data and os.path.exists(prefix + ".index")
    for output in [prefix + ".index", str(folder / data[0]), str(folder / "checkpoint"),
                   str(folder / "bert_config.json")]:
        for given in (prefix, str(folder)):
            with pytest.raises(atomic.OutputConflictError,
                               match=r"--output_file=%s is also an input \(a file of "
                               r"--init_checkpoint=%s\)" % (re.escape(output),
                                                            re.escape(given))):
                atomic.check_outputs([("--output_file", output)],
                                     [("--init_checkpoint", given)])
    # What is not the checkpoint's: a new file beside it, the user's other files.
    for output in [str(folder / "generated.jsonl"), str(folder / "notes.txt")]:
        atomic.check_outputs([("--output_file", output)], [("--init_checkpoint", prefix)])
    # A prefix is only its own shards, not another checkpoint's of the folder.
    other = tf.train.Checkpoint(v=tf.Variable(1.0)).write(str(folder / "other"))
    atomic.check_outputs([("--output_file", other + ".index")], [("--init_checkpoint", prefix)])
    assert atomic.input_files("") == [] and atomic.input_files(str(tmp_path / "none")) == []


def test_check_outputs_refuses_an_output_dir_that_holds_an_input(tmp_path):
    folder = tmp_path / "pretraining"
    prefix = _tiny_checkpoint(folder)
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    corpus = corpora / "en.txt"
    corpus.write_text("text\n")
    for flag, given in (("--init_checkpoint", prefix), ("--init_checkpoint", str(folder)),
                        ("--input_file", str(corpus))):
        directory = os.path.dirname(given) if given != str(folder) else given
        for spelt in (directory, directory + "/", os.path.join(directory, ".")):
            with pytest.raises(atomic.OutputConflictError,
                               match=r"--output_dir=%s is the folder of %s=%s, an input" % (
                                   re.escape(spelt), flag, re.escape(given))):
                atomic.check_outputs([], [(flag, given)], [("--output_dir", spelt)])
    # A folder of its own, a sub-folder, one not yet made, and no input at all: fine.
    for directory in (tmp_path / "out", folder / "pruned", corpora / "resampled"):
        atomic.check_outputs([], [("--init_checkpoint", prefix), ("--input_file", str(corpus)),
                                  ("--vocab_file", None)],
                             [("--output_dir", str(directory))])
        directory.mkdir()
        atomic.check_outputs([], [("--init_checkpoint", prefix), ("--input_file", str(corpus))],
                             [("--output_dir", str(directory))])
    atomic.check_outputs([], [("--init_checkpoint", str(tmp_path / "missing"))],
                         [("--output_dir", str(tmp_path))])


# -------------------------------------------------------------------- lock


def _write_lock(directory, pid, host=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, run_lock.LOCK_NAME), "w") as f:
        json.dump({"pid": pid, "host": host or socket.gethostname(),
                   "started": "2026-01-01T00:00:00", "command": "run_pretraining.py"}, f)


def test_lock_refused_while_the_owner_lives_and_taken_over_after(tmp_path):
    out = str(tmp_path / "run")
    _write_lock(out, os.getppid())
    with pytest.raises(run_lock.RunLockError, match=r"in use by another run \(pid %d"
                       % os.getppid()):
        run_lock.OutputDirLock(out).acquire()
    _write_lock(out, _dead_pid())
    lock = run_lock.OutputDirLock(out).acquire()
    with open(os.path.join(out, run_lock.LOCK_NAME)) as f:
        assert json.load(f)["pid"] == os.getpid()
    lock.release()
    assert _listing(out) == []


def test_lock_of_another_host_is_refused_and_says_which_file(tmp_path):
    out = str(tmp_path / "run")
    _write_lock(out, 12, host="some-other-host")
    with pytest.raises(run_lock.RunLockError, match="some-other-host.*delete .*\\.run\\.lock"):
        run_lock.OutputDirLock(out).acquire()


def test_lock_sweeps_what_a_killed_run_left(tmp_path):
    out = tmp_path / "run"
    (out / "ckpt-7_temp").mkdir(parents=True)
    (out / "ckpt-7_temp" / "part-00000-of-00001.data-00000-of-00001").write_text("x")
    stale = ".eval_results.txt.tmp-%s-%d-abcdef" % (atomic._host(), _dead_pid())  # pylint: disable=protected-access
    (out / stale).write_text("x")
    (out / "ckpt-6.index").write_text("kept")
    with run_lock.OutputDirLock(str(out)):
        assert _listing(out) == [".run.lock", "ckpt-6.index"]
    assert _listing(out) == ["ckpt-6.index"]


def test_output_dir_that_is_a_file_is_one_clear_error(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(run_lock.RunLockError, match="is a file, expected a directory"):
        run_lock.OutputDirLock(str(path)).acquire()
    assert path.read_text() == "x"


# ------------------------------------------------------------- termination


def test_sigterm_inside_graceful_is_a_request_outside_an_exception():
    termination.install()
    try:
        # Inside: only a flag, which the loop acts on (here: raises itself).
        with pytest.raises(termination.Terminated, match="stopping"):
            with termination.graceful():
                os.kill(os.getpid(), signal.SIGTERM)
                assert termination.requested()
                raise termination.Terminated("stopping")
        assert not termination.requested()
        # A block that ends without acting on the request raises at its end.
        with pytest.raises(termination.Terminated):
            with termination.graceful():
                os.kill(os.getpid(), signal.SIGTERM)
        # Outside: an exception at once.
        with pytest.raises(termination.Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
        # Not strict (an in-process user): a caught Terminated is over.
        assert not termination.requested() and termination.dropped() is None
        with termination.graceful():
            pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


_DROPPING_SCRIPT = '''
import os, signal, sys, time
sys.path.insert(0, %(run_dir)r)
import script
from data import termination


def drop_the_exit():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100000):  # the handler runs here, between bytecodes
            pass
    except BaseException:  # what a careless library might do
        pass
    print("went on", flush=True)


class Finalized:
    def __del__(self):  # SIGTERM's handler runs inside a finalizer (TensorFlow has many)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100000):
            pass


def main(argv):
    mode = argv[1]
    if mode == "in_del":
        termination.GRACE_SECONDS = 1.0
        value = Finalized()
        del value
        print("went on", flush=True)
        return
    if mode == "request_then_error":
        try:
            with termination.graceful():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(100000):
                    pass
                raise ValueError("an error a caller handles")
        except ValueError:
            print("went on", flush=True)
        return
    termination.GRACE_SECONDS = 1.0
    if mode == "slow_cleanup":  # not dropped: on its way up, slower than the grace time
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100000):
                pass
        finally:
            time.sleep(3)
            print("cleaned up", flush=True)
    drop_the_exit()
    if mode == "graceful":  # where a training loop starts
        with termination.graceful():
            print("trained", flush=True)
    elif mode == "busy":
        time.sleep(60)
    elif mode == "user_error":
        raise ValueError("bad input found later")
    print("finished", flush=True)


if __name__ == "__main__":
    script.run(main)
'''


@pytest.mark.parametrize("mode", ["return", "graceful", "busy", "user_error",
                                  "request_then_error", "slow_cleanup", "in_del"])
def test_a_script_ends_with_143_even_if_sigterm_exit_was_dropped(tmp_path, mode):
    """A run script that got SIGTERM ends with status 143 whatever caught the exception.

    The exit that SIGTERM raises is caught and dropped by the script's own
    code here; the run must still stop: when `main` returns (also with a bad
    input error found later), at the next `graceful()` block (a training
    loop's start), or by the watchdog when it goes on with other work. A stop
    requested inside a `graceful()` block survives an error that block ends
    with. The message names where the dropped exception was raised. An exit
    that is not dropped but slow on its way up (a clean-up longer than the
    grace time) is not cut short.
    """
    import script_runner  # pylint: disable=import-outside-toplevel
    path = tmp_path / "dropping.py"
    path.write_text(_DROPPING_SCRIPT % {"run_dir": os.path.join(REPO_ROOT, "run")})
    result = script_runner.run([sys.executable, str(path), mode], capture_output=True,
                               text=True, timeout=120, cwd=REPO_ROOT)
    assert result.returncode == termination.EXIT_STATUS, (result.stdout, result.stderr)
    assert "trained" not in result.stdout
    assert ("finished" in result.stdout) == (mode == "return")
    # An exit dropped inside a finalizer is not reported as Python's
    # "Exception ignored ... Traceback": the script's own line says it.
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, \
        result.stderr
    if mode == "request_then_error":
        # The caller's `except ValueError` never sees it: the stop wins.
        assert "went on" not in result.stdout
        assert ("dropping: terminated by SIGTERM (the stop it asked for came with "
                "ValueError: an error a caller handles)\n") in result.stderr, result.stderr
    elif mode == "slow_cleanup":
        assert result.stdout == "cleaned up\n"
        assert "dropping: terminated by SIGTERM\n" in result.stderr, result.stderr
        assert "dropped" not in result.stderr.replace("dropping", "")
    else:
        if mode == "user_error":
            assert "dropping: error: bad input found later\n" in result.stderr
        assert "went on" in result.stdout
        assert "was caught and dropped" in result.stderr, result.stderr
        assert "%s:" % path in result.stderr
        assert ("in __del__" if mode == "in_del" else "in drop_the_exit") in result.stderr


# -------------------------------------------------------------- NaN policy


class Blowup(keras.Model):
    """A linear regression whose loss becomes NaN from optimizer step `bad_step` on."""

    def __init__(self, bad_step):
        super().__init__()
        self.dense = keras.layers.Dense(1, kernel_initializer="ones")
        self.bad_step = bad_step
        self.clock = types.SimpleNamespace(step=None)  # the optimizer's iterations

    def call(self, features, training=False):
        return self.dense(features["x"])

    def compute_loss_and_metrics(self, features, training):
        error = self(features, training=training)[:, 0] - features["y"]
        loss = tf.reduce_mean(tf.square(error))
        poison = tf.where(self.clock.step >= self.bad_step, np.float32(np.nan), np.float32(1.0))
        loss = loss * poison  # NaN in the loss and in every gradient
        return loss, {"loss": (loss, tf.constant(1.0))}


def _nan_trainer(model_dir, policy, bad_step=3, steps=6, steps_per_loop=1, save_every=1):
    holder = {}

    def model_fn():
        model = Blowup(bad_step)
        model(({"x": tf.zeros([1, 2])}))
        holder["model"] = model
        return model

    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"), model_fn,
        lambda: optimization.create_optimizer(0.1, steps, 0),
        model_dir=str(model_dir), train_batch_size=4, num_train_steps=steps,
        save_checkpoints_steps=save_every, log_steps=save_every, nan_policy=policy,
        steps_per_loop=steps_per_loop)
    holder["model"].clock.step = trainer.optimizer.iterations
    return trainer


def _nan_input_fn(input_context=None):
    x = np.random.RandomState(0).randn(64, 2).astype("float32")
    y = x.sum(axis=1).astype("float32") * 0.5
    return tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).repeat().batch(4)


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = _nan_trainer(tmp_path, "stop")
    with pytest.raises(trainer_lib.NonFiniteLossError,
                       match=r"step 4: the loss or its gradient became NaN.*Last good "
                             r"checkpoint: .*ckpt-3.*--nan_policy=skip"):
        trainer.train(_nan_input_fn)
    assert os.path.basename(tf.train.latest_checkpoint(str(tmp_path))) == "ckpt-3"
    # The poisoned update was not applied: the weights are finite.
    assert all(np.isfinite(w).all() for w in trainer.model.get_weights())
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-3"))
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.isfinite(value).all(), name


def test_nan_policy_skip_goes_on_without_touching_the_weights(tmp_path):
    trainer = _nan_trainer(tmp_path / "skip", "skip")
    trainer.train(_nan_input_fn)
    assert trainer.current_step() == 6
    assert int(trainer.optimizer.nonfinite_updates.numpy()) == 3
    weights = trainer.model.get_weights()
    assert all(np.isfinite(w).all() for w in weights)
    assert not np.allclose(weights[0], 1.0)  # steps 1-3 did learn
    # Steps 4-6 were skipped: the weights are those after step 3, which is
    # what a "stop" run holds when it stops at step 4.
    stopped = _nan_trainer(tmp_path / "stop", "stop")
    with pytest.raises(trainer_lib.NonFiniteLossError):
        stopped.train(_nan_input_fn)
    for mine, theirs in zip(weights, stopped.model.get_weights()):
        np.testing.assert_array_equal(mine, theirs)


def test_a_nan_evaluation_loss_stops_before_it_is_reported(tmp_path):
    """A NaN eval loss is an error naming the checkpoint (nothing written to eval/);
    --nan_policy=skip reports it with a warning."""
    stopped = _nan_trainer(tmp_path / "stop", "stop", bad_step=0)
    with pytest.raises(trainer_lib.NonFiniteLossError,
                       match=r"evaluation of the model at step 0 over 2 "
                             r"batch\(es\) gave loss = nan .*no eval results.*--nan_policy=skip"):
        stopped.evaluate(lambda context: _nan_input_fn().take(2), max_steps=None)
    assert not (tmp_path / "stop" / "eval").exists()
    # A saved checkpoint is named as the one evaluated.
    stopped._make_manager()[1].save()  # pylint: disable=protected-access
    with pytest.raises(trainer_lib.NonFiniteLossError, match=r"the checkpoint .*ckpt-1 "):
        stopped.evaluate(lambda context: _nan_input_fn().take(2), max_steps=None)
    skipped = _nan_trainer(tmp_path / "skip", "skip", bad_step=0)
    results = skipped.evaluate(lambda context: _nan_input_fn().take(2), max_steps=None)
    assert np.isnan(results["loss"])
    # A finite evaluation is untouched by the check.
    finite = _nan_trainer(tmp_path / "finite", "stop", bad_step=10 ** 9)
    assert np.isfinite(finite.evaluate(lambda context: _nan_input_fn().take(2),
                                       max_steps=None)["loss"])


def test_nan_stops_a_graph_loop_at_the_bad_update(tmp_path):
    """With 10 updates per call, the loop itself ends at the first NaN update."""
    looped = _nan_trainer(tmp_path / "loop", "stop", steps=10, steps_per_loop=10,
                          save_every=10)
    with pytest.raises(trainer_lib.NonFiniteLossError,
                       match=r"step 4: .*Last good checkpoint: none"):
        looped.train(_nan_input_fn)
    assert looped.current_step() == 4
    assert int(looped.optimizer.nonfinite_updates.numpy()) == 1
    stepped = _nan_trainer(tmp_path / "steps", "stop", steps=10)
    with pytest.raises(trainer_lib.NonFiniteLossError):
        stepped.train(_nan_input_fn)
    for mine, theirs in zip(looped.model.get_weights(), stepped.model.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)


def test_sigterm_stops_a_graph_loop_after_the_current_update(tmp_path):
    """A loop of 10,000 updates (one call into TensorFlow) ends soon after
    SIGTERM, with a checkpoint of the step it reached."""
    trainer = _nan_trainer(tmp_path, "stop", bad_step=10 ** 9, steps=10000,
                           steps_per_loop=10000, save_every=10000)
    termination.install()

    def kill_when_started():
        while int(trainer.optimizer.iterations.numpy()) < 5:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    try:
        killer.start()
        with pytest.raises(termination.Terminated, match="terminated by SIGTERM at step"):
            trainer.train(_nan_input_fn)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        killer.join()
    step = trainer.current_step()
    assert 5 <= step < 10000
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert os.path.basename(latest) == "ckpt-%d" % step


def test_bad_nan_policy_and_learning_rates_are_named():
    with pytest.raises(ValueError, match="--nan_policy"):
        trainer_lib.Trainer(tf.distribute.get_strategy(), lambda: None, lambda: None,
                            model_dir="/tmp/unused", train_batch_size=1, num_train_steps=1,
                            nan_policy="ignore")
    for bad in (float("nan"), float("inf"), -1e-4):
        with pytest.raises(ValueError, match="--learning_rate"):
            optimization.create_optimizer(bad, 10, 0)


def test_export_never_replaces_a_directory_that_is_not_a_savedmodel(tmp_path):
    from modeling.serving import export
    from modeling.tasks import classifier_job
    precious = tmp_path / "run"
    precious.mkdir()
    (precious / "ckpt-1.index").write_text("checkpoint")
    with pytest.raises(ValueError, match="is not a SavedModel: refusing to replace"):
        export.export_text_model(None, str(precious), "vocab.txt", True, 8)
    assert (precious / "ckpt-1.index").read_text() == "checkpoint"
    job = classifier_job.ClassifierJob(
        task_name="mrpc", data_dir=str(tmp_path / "data"), output_dir=str(precious),
        bert_config_file="unused.json", export_dir=str(tmp_path), do_train=True)
    with pytest.raises(classifier_job.ClassifierJobError,
                       match="--export_dir=.* would replace --output_dir"):
        classifier_job._check_job(job)  # pylint: disable=protected-access
