"""The trainer: learning, resume, distribution, accumulation, TensorBoard."""

import glob
import json
import re
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import tf_example as example_proto
from data import input_pipeline
from modeling import bert as config_lib
from modeling import objectives
from modeling import recipes
from modeling.training import optimization
from modeling.training import pruning
from modeling.training import trainer as trainer_lib

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SEQ, PRED, VOCAB = 16, 3, 60


def _tiny_config(vocab_size=VOCAB):
    return config_lib.BertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _write_synthetic(path, n, seed=0):
    """Records with a fixed number of masked positions (3) per example, so a
    weighted mean over any split of a batch equals the mean over the whole."""
    rng = np.random.RandomState(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(n):
            length = rng.randint(8, SEQ + 1)
            ids = [2] + rng.randint(5, VOCAB, size=length - 2).tolist() + [3]
            positions = sorted(rng.choice(np.arange(1, length - 1), PRED, replace=False).tolist())
            writer.write(example_proto.serialize_example(
                {"input_ids": ids + [0] * (SEQ - length), "input_mask": [1] * length + [0] * (SEQ - length),
                 "segment_ids": [0] * (length // 2) + [1] * (length - length // 2) + [0] * (SEQ - length),
                 "masked_lm_positions": positions,
                 "masked_lm_ids": [ids[p] for p in positions],
                 "next_sentence_labels": [int(rng.randint(2))]},
                {"masked_lm_weights": [1.0] * PRED}))
    return path


@pytest.fixture(scope="module")
def synthetic_file(tmp_path_factory):
    return _write_synthetic(str(tmp_path_factory.mktemp("synthetic") / "data.tfrecord"), 64)


def _input_fn(path, batch_size, is_training=True, seed=7):
    return input_pipeline.pretraining_input_fn_builder(
        path, SEQ, PRED, is_training=is_training, batch_size=batch_size, seed=seed,
        shuffle_buffer_size=64)


def _make_trainer(model_dir, strategy=None, steps=4, accumulation=1, batch_size=8,
                  save_every=2, lr=1e-3, weights=None, log_steps=1, weight_pruning=None):
    strategy = strategy or tf.distribute.OneDeviceStrategy("/cpu:0")

    def model_fn():
        keras.utils.set_random_seed(1)
        model = recipes.build_bert_pretrainer(_tiny_config())
        if weights is not None:
            model.set_weights(weights)
        return model

    return trainer_lib.Trainer(
        strategy, model_fn,
        lambda: optimization.create_optimizer(lr, steps, 0,
                                              gradient_accumulation_steps=accumulation),
        model_dir=str(model_dir), train_batch_size=batch_size, num_train_steps=steps,
        save_checkpoints_steps=save_every, log_steps=log_steps,
        gradient_accumulation_steps=accumulation, weight_pruning=weight_pruning)


def _optimizer_state(trainer):
    return [v.numpy().copy() for v in trainer.optimizer.variables]


def _weights(trainer):
    return [w.copy() for w in trainer.model.get_weights()]


def test_resume_after_interruption_is_exact(tmp_path, synthetic_file):
    """A run "killed" after update 3 and resumed ends where the uninterrupted run
    ends. With magnitude pruning on (Zhu & Gupta inside the training loop: masks
    every 2 updates up to update 4, sparsity 0.6 there), so the masks' restore is
    covered too: the logged sparsity follows the schedule, pruned weights stay
    zero after update 4, the resumed run has the interrupted run's masks."""
    schedule = pruning.PruningSchedule(0.6, begin_step=0, end_step=4, frequency=2)
    straight = _make_trainer(tmp_path / "straight", steps=6, save_every=3,
                             weight_pruning=schedule)
    straight.train(_input_fn(synthetic_file, 8))
    logged = {step: m["weight_sparsity"] for step, m in straight.history}
    # Masks at updates 2 (s = 0.6 * (1 - 0.5**3)) and 4 (0.6), kept at 5 and 6.
    assert logged[1] == 0.0
    assert logged[2] == pytest.approx(0.6 * (1 - 0.5 ** 3), abs=2e-3)
    assert logged[3] == pytest.approx(logged[2], abs=2e-3)
    for step in (4, 5, 6):
        assert logged[step] == pytest.approx(0.6, abs=2e-3)
    for variable, mask in zip(straight.pruner.variables, straight.pruner.masks):
        value = variable.numpy()
        assert np.sum(value == 0) == round(0.6 * value.size)
        np.testing.assert_array_equal(value == 0, mask.numpy() == 0)

    interrupted = _make_trainer(tmp_path / "resumed", steps=6, save_every=3,
                                weight_pruning=schedule)
    interrupted.num_train_steps = 3  # "killed" right after the step-3 checkpoint
    interrupted.train(_input_fn(synthetic_file, 8))
    assert os.path.exists(str(tmp_path / "resumed" / "ckpt-3.index"))

    resumed = _make_trainer(tmp_path / "resumed", steps=6, save_every=3,
                            weight_pruning=schedule)
    assert resumed.restore_or_initialize() is not None
    assert resumed.current_step() == 3
    # Optimizer state and pruning masks right after restore equal the interrupted run's.
    for a, b in zip(_optimizer_state(resumed), _optimizer_state(interrupted)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(resumed.pruner.masks, interrupted.pruner.masks):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert min(float(np.min(m.numpy())) for m in resumed.pruner.masks) == 0.0
    # Pruning flags on a run whose checkpoints have no masks: one clear line.
    plain = _make_trainer(tmp_path / "plain", steps=1)
    plain.train(_input_fn(synthetic_file, 8))
    with pytest.raises(ValueError, match="holds no pruning masks: it was written without "
                                         "--target_sparsity"):
        _make_trainer(tmp_path / "plain", steps=2, weight_pruning=schedule).restore_or_initialize()
    resumed.train(_input_fn(synthetic_file, 8))
    assert resumed.current_step() == 6
    # ... and it ends where the uninterrupted run ended: same data, same updates.
    for a, b in zip(_weights(resumed), _weights(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(_optimizer_state(resumed), _optimizer_state(straight)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_mirrored_two_devices_equals_one_device(tmp_path, synthetic_file):
    """Also with magnitude pruning: the masks are computed in cross-replica
    context, so both replicas' copies hold the same zeros as one device's."""
    keras.utils.set_random_seed(1)
    initial = recipes.build_bert_pretrainer(_tiny_config()).get_weights()
    results = {}
    schedule = pruning.PruningSchedule(0.5, begin_step=0, end_step=1, frequency=1)
    for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                           ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        trainer = _make_trainer(tmp_path / name, strategy=strategy, steps=1, weights=initial,
                                weight_pruning=schedule)
        metrics = trainer.train(_input_fn(synthetic_file, 8, is_training=False))
        results[name] = (_weights(trainer), metrics)
        assert metrics["weight_sparsity"] == pytest.approx(0.5, abs=1e-3)
    kernels = trainer.pruner.variables
    assert len(kernels) >= 12  # q, k, v, output, intermediate, output per layer
    for variable in kernels:
        copies = [c.numpy() for c in getattr(variable, "value", variable).values]
        assert len(copies) == 2
        np.testing.assert_array_equal(copies[0] == 0, copies[1] == 0)
        assert np.sum(copies[1] == 0) == round(0.5 * copies[1].size)
    assert results["mirrored"][1]["loss"] == pytest.approx(results["one"][1]["loss"], rel=1e-5)
    changed = 0
    for a, b, w0 in zip(results["one"][0], results["mirrored"][0], initial):
        np.testing.assert_allclose(a, b, atol=1e-5)
        changed += int(not np.allclose(a, w0))
    assert changed > 10  # the step really updated the weights


def test_accumulated_micro_batches_equal_one_large_batch(tmp_path, synthetic_file):
    keras.utils.set_random_seed(1)
    initial = recipes.build_bert_pretrainer(_tiny_config()).get_weights()
    big = _make_trainer(tmp_path / "big", steps=1, batch_size=8, weights=initial)
    big.train(_input_fn(synthetic_file, 8, is_training=False))
    small = _make_trainer(tmp_path / "small", steps=1, batch_size=4, accumulation=2,
                          weights=initial)
    small.train(_input_fn(synthetic_file, 4, is_training=False))
    assert small.current_step() == 1 and trainer_lib._as_int(small.optimizer.micro_steps) == 2
    for a, b in zip(_weights(big), _weights(small)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_short_pretraining_run_lowers_losses_and_logs_scalars(tmp_path, sample_vocab_file,
                                                              sample_corpus_files):
    from data.pretraining import instances as pretraining_data, writer as pretraining_writer  # pylint: disable=g-import-not-at-top
    from data import tokenization  # pylint: disable=g-import-not-at-top
    data = str(tmp_path / "sample.tfrecord")
    pretraining_writer.create_pretraining_data(
        sample_corpus_files, [data], pretraining_data.InstanceOptions(
            vocab_file=sample_vocab_file, do_lower_case=True, max_seq_length=32,
            max_predictions_per_seq=5, random_seed=1, dupe_factor=1, masked_lm_prob=0.15,
            short_seq_prob=0.1, do_whole_word_mask=False))
    vocab_size = len(tokenization.load_vocab(sample_vocab_file))
    config = config_lib.BertConfig(
        vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64, type_vocab_size=2)
    model_dir = str(tmp_path / "model")
    keras.utils.set_random_seed(2)
    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: recipes.build_bert_pretrainer(config),
        lambda: optimization.create_optimizer(2e-3, 150, 15),
        model_dir=model_dir, train_batch_size=32, num_train_steps=150,
        save_checkpoints_steps=150, log_steps=25)
    trainer.train(input_pipeline.pretraining_input_fn_builder(
        data, 32, 5, is_training=True, batch_size=32, seed=3))
    first, last = trainer.history[0][1], trainer.history[-1][1]
    # From the first 25 steps' mean (~7, already below uniform's ln 2577 =
    # 7.85) to the unigram level (~6) and beyond.
    assert last["masked_lm_loss"] < first["masked_lm_loss"] - 0.6
    assert last["next_sentence_loss"] < first["next_sentence_loss"]
    assert last["masked_lm_accuracy"] > first["masked_lm_accuracy"]

    results = trainer.evaluate(input_pipeline.pretraining_input_fn_builder(
        data, 32, 5, is_training=False, batch_size=32, repeat=True), max_steps=5)
    for key in ("loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                "next_sentence_loss", "global_step"):
        assert key in results
    assert results["global_step"] == 150
    path = os.path.join(model_dir, "eval_results.txt")
    trainer_lib.write_eval_results(results, path)
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines == sorted(lines) and "global_step = 150" in lines

    tags = set()
    for event_file in glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(event_file):
            event = tf.compat.v1.Event.FromString(record.numpy())
            tags.update(v.tag for v in event.summary.value)
    for tag in ("loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
                "next_sentence_accuracy", "learning_rate", "examples_per_second",
                "gradient_norm"):
        assert tag in tags, tags
    assert glob.glob(os.path.join(model_dir, "eval", "events.out.tfevents.*"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_multi_worker_trains_and_resumes(tmp_path, synthetic_file):
    worker = os.path.join(REPO_ROOT, "tests", "modeling", "training", "multi_worker_job.py")
    model_dir = str(tmp_path / "mw")

    def run(steps):
        ports = [_free_port(), _free_port()]
        cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
        procs = []
        for index in range(2):
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                       TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": index}}))
            procs.append(script_runner.Popen(
                [sys.executable, worker, model_dir, synthetic_file, str(steps)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs = []
        try:
            for proc in procs:
                out, _ = proc.communicate(timeout=240)
                outputs.append(out)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        for proc, out in zip(procs, outputs):
            assert proc.returncode == 0, out[-3000:]
        return outputs

    outputs = run(4)
    assert all("FINAL_STEP 4" in out for out in outputs)
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-4")
    outputs = run(6)
    assert all("RESUMED_FROM_STEP 4" in out and "FINAL_STEP 6" in out for out in outputs)
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-6")


def _start_workers(model_dir, synthetic_file, steps, weights=None):
    worker = os.path.join(REPO_ROOT, "tests", "modeling", "training", "multi_worker_job.py")
    cluster = {"worker": ["127.0.0.1:%d" % p for p in (_free_port(), _free_port())]}
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                   TF_CONFIG=json.dumps({"cluster": cluster,
                                         "task": {"type": "worker", "index": index}}))
        args = [sys.executable, worker, model_dir, synthetic_file, str(steps)]
        if weights:
            args.append(weights)
        procs.append(script_runner.Popen(args, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True))
    return procs


def _finish(procs, timeout=240):
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [proc.returncode for proc in procs], outputs


def test_sigterm_to_one_worker_saves_the_same_step_on_both_and_resumes_exactly(
        tmp_path, synthetic_file):
    """Preemption of one of two MultiWorkerMirroredStrategy workers: both save
    the same step and exit 143; the same command resumes both, and the run ends
    with the weights of an uninterrupted one."""
    steps = 60  # the signal comes right after the first checkpoint (step 2)
    reference = str(tmp_path / "reference.npz")
    codes, outputs = _finish(_start_workers(str(tmp_path / "whole"), synthetic_file, steps,
                                            reference))
    assert codes == [0, 0], outputs[0][-3000:]
    model_dir = str(tmp_path / "preempted")
    procs = _start_workers(model_dir, synthetic_file, steps)
    deadline = time.time() + 180
    while tf.train.latest_checkpoint(model_dir) is None:  # training is under way
        assert time.time() < deadline and all(p.poll() is None for p in procs), "no checkpoint"
        time.sleep(0.05)
    procs[1].send_signal(signal.SIGTERM)
    codes, outputs = _finish(procs)
    assert codes == [143, 143], [out[-2000:] for out in outputs]
    stopped = [int(re.search(r"TERMINATED_AT_STEP (\d+)", out).group(1)) for out in outputs]
    assert stopped[0] == stopped[1] < steps, stopped
    assert "of another worker" in outputs[0] and "of another worker" not in outputs[1]
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-%d" % stopped[0])
    resumed = str(tmp_path / "resumed.npz")
    codes, outputs = _finish(_start_workers(model_dir, synthetic_file, steps, resumed))
    assert codes == [0, 0], outputs[0][-3000:]
    assert all("RESUMED_FROM_STEP %d" % stopped[0] in out and "FINAL_STEP %d" % steps in out
               for out in outputs)
    with np.load(reference) as want, np.load(resumed) as got:
        assert len(want.files) == len(got.files) > 10
        for name in want.files:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_xla_step_matches_the_plain_step(tmp_path, synthetic_file):
    keras.utils.set_random_seed(1)
    initial = recipes.build_bert_pretrainer(_tiny_config()).get_weights()
    weights = {}
    for xla in (False, True):
        trainer = _make_trainer(tmp_path / ("xla%d" % xla), steps=2, weights=initial)
        trainer.use_xla = xla
        trainer.train(_input_fn(synthetic_file, 8, is_training=False))
        weights[xla] = _weights(trainer)
    for a, b, w0 in zip(weights[False], weights[True], initial):
        np.testing.assert_allclose(a, b, atol=2e-5)
    assert not np.allclose(weights[True][0], initial[0])


def test_steps_per_loop_equals_one_step_per_call(tmp_path, synthetic_file):
    """Seven updates run 4 per graph loop (the loops stop at the logging
    boundary, step 3, and at the checkpoint, step 6) end where seven separate
    calls end, and log the same metrics at the same steps."""
    keras.utils.set_random_seed(1)
    initial = recipes.build_bert_pretrainer(_tiny_config()).get_weights()
    runs = {}
    for loop in (1, 4):
        trainer = _make_trainer(tmp_path / ("loop%d" % loop), steps=7, save_every=6,
                                weights=initial, log_steps=3)
        trainer.steps_per_loop = loop
        trainer.train(_input_fn(synthetic_file, 8))
        runs[loop] = trainer
    assert [n for n, _ in runs[4].history] == [3, 6, 7] == [n for n, _ in runs[1].history]
    for (_, a), (_, b) in zip(runs[1].history, runs[4].history):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    for a, b in zip(_weights(runs[1]), _weights(runs[4])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "loop4" / "ckpt-*.index"))) \
        == ["ckpt-6.index", "ckpt-7.index"]
    lengths = []
    step = 0
    while step < 7:
        lengths.append(runs[4]._loop_length(step))  # pylint: disable=protected-access
        step += lengths[-1]
    assert lengths == [3, 3, 1]
    with pytest.raises(ValueError, match="--steps_per_loop"):
        trainer_lib.Trainer(
            tf.distribute.get_strategy(), lambda: None, lambda: None, model_dir="/tmp/unused",
            train_batch_size=1, num_train_steps=1, steps_per_loop=0)


@pytest.fixture(scope="module")
def heldout_file(tmp_path_factory):
    """Other sentences of the same distribution (seed 1): 32 examples, 4 batches of 8."""
    return _write_synthetic(str(tmp_path_factory.mktemp("heldout") / "data.tfrecord"), 32,
                            seed=1)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_with_loss_scaling_for_float16(tmp_path, synthetic_file,
                                                              heldout_file, policy):
    """Ten half-precision updates (lr 1e-2, no warmup) change every weight and
    lower the masked-LM loss on held-out batches by at least 0.05 nats.

    The synthetic masked positions keep their token in input_ids, so the
    target can be read off the input (a copy task) and held-out examples are
    predictable; ten steps leave room for the first float16 updates being
    skipped while dynamic loss scaling finds its scale.
    """
    keras.mixed_precision.set_global_policy(policy)
    try:
        trainer = _make_trainer(tmp_path / policy, steps=10, save_every=10, lr=1e-2)
        assert trainer.loss_scale == (policy == "mixed_float16")
        assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer) == (
            policy == "mixed_float16")
        initial = _weights(trainer)
        heldout = _input_fn(heldout_file, 8, is_training=False)
        before = trainer.evaluate(heldout, max_steps=4, restore=False)
        metrics = trainer.train(_input_fn(synthetic_file, 8))
        assert trainer.current_step() == 10
        assert np.isfinite(metrics["loss"]) and metrics["loss"] > 0
        # Weights stay float32, and every one of them was trained.
        assert all(w.dtype == np.float32 for w in trainer.model.get_weights())
        unchanged = [v.path for v, w0 in zip(trainer.model.weights, initial)
                     if np.array_equal(v.numpy(), w0)]
        assert not unchanged, unchanged
        after = trainer.evaluate(heldout, max_steps=4)
        assert after["masked_lm_loss"] < before["masked_lm_loss"] - 0.05, (before, after)
        # The computation ran in half precision.
        out = trainer.model.encoder({"input_ids": tf.ones([1, 4], tf.int32),
                                     "input_mask": tf.ones([1, 4], tf.int32),
                                     "segment_ids": tf.zeros([1, 4], tf.int32)})
        assert out["sequence_output"].dtype == policy.split("_")[1]
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_pruning_flags_reach_the_trainer():
    """--target_sparsity & co. (every training script's trainer flags) become the
    trainer's schedule; without them the trainer gets no pruning argument."""
    from modeling.training import settings  # pylint: disable=g-import-not-at-top
    assert "weight_pruning" not in settings.TrainerSettings().trainer_options()
    options = settings.TrainerSettings(target_sparsity=0.5, pruning_begin_step=3,
                                       pruning_end_step=40, pruning_frequency=5).trainer_options()
    assert options["weight_pruning"] == pruning.PruningSchedule(0.5, 3, 40, 5)
    # Default end: three quarters of the run, leaving a recovery period.
    assert pruning.PruningSchedule(0.5).resolved_end_step(1000) == 750
    with pytest.raises(pruning.PruningError, match="--pruning_end_step"):
        pruning.PruningSchedule(0.5, begin_step=800).pruner([tf.Variable([1.0])], 1000)
