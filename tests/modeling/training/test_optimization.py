"""Tests for modeling.training.optimization: Google's AdamW, LAMB, schedule, clipping,
gradient accumulation, and the tf.distribute contract."""

import json
import os
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from modeling.bert import BertEncoder
from modeling.training.optimization import (
    AdamWeightDecay,
    Lamb,
    LinearWarmupLinearDecay,
    create_optimizer,
)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class _WeightDecayProbe(keras.layers.Layer):
    """A Dense and a LayerNorm, so variable paths look like the encoder's."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3, name="dense")
        self.norm = keras.layers.LayerNormalization(name="LayerNorm")

    def build(self, input_shape=None):
        self.dense.build((None, 3))
        self.norm.build((None, 3))


def _probe(seed=0):
    layer = _WeightDecayProbe(name="probe")
    layer.build()
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32") + 0.5)
    return layer


def _zero_grads(variables):
    return [tf.zeros_like(v) for v in variables]


# ------------------------------------------------------------------ AdamW


def test_adamw_converges_like_googles_optimization_test():
    w = keras.Variable(np.zeros(3, "float32"), name="w")
    x = tf.constant([0.4, 0.2, -0.5])
    optimizer = AdamWeightDecay(learning_rate=0.2)
    for _ in range(100):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x - w))
        optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    np.testing.assert_allclose(w.numpy(), x.numpy(), atol=1e-2)
    assert int(optimizer.iterations) == 100


def test_weight_decay_skips_layer_norm_and_bias():
    layer = _probe()
    before = {w.path: w.numpy() for w in layer.weights}
    lr, wd = 0.1, 0.01
    optimizer = AdamWeightDecay(learning_rate=lr, weight_decay_rate=wd)
    optimizer.apply_gradients(zip(_zero_grads(layer.weights), layer.weights))
    after = {w.path: w.numpy() for w in layer.weights}
    kernel = "probe/dense/kernel"
    np.testing.assert_allclose(after[kernel], before[kernel] * (1 - lr * wd), rtol=1e-6)
    for path in ("probe/dense/bias", "probe/LayerNorm/gamma", "probe/LayerNorm/beta"):
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)


def test_weight_decay_exclusions_are_configurable():
    layer = _probe()
    before = {w.path: w.numpy() for w in layer.weights}
    optimizer = AdamWeightDecay(
        learning_rate=0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["kernel"]
    )
    optimizer.apply_gradients(zip(_zero_grads(layer.weights), layer.weights))
    after = {w.path: w.numpy() for w in layer.weights}
    np.testing.assert_array_equal(after["probe/dense/kernel"], before["probe/dense/kernel"])
    for path in ("probe/dense/bias", "probe/LayerNorm/gamma"):
        np.testing.assert_allclose(after[path], before[path] * (1 - 0.1 * 0.01), rtol=1e-6)


def test_weight_decay_on_a_bert_encoder_hits_exactly_the_right_variables():
    encoder = BertEncoder(
        vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=8, type_vocab_size=2,
    )
    for w in encoder.weights:
        w.assign(w.numpy() + 0.5)
    variables = encoder.trainable_variables
    before = [w.numpy() for w in variables]
    optimizer = create_optimizer(1.0, 10, 0, weight_decay_rate=0.1)
    optimizer.apply_gradients(zip(_zero_grads(variables), variables))
    decayed = sorted(
        w.path for w, b in zip(variables, before) if not np.array_equal(w.numpy(), b)
    )
    assert decayed == sorted([
        "bert_encoder/embeddings/word_embeddings",
        "bert_encoder/embeddings/position_embeddings",
        "bert_encoder/embeddings/token_type_embeddings",
        "bert_encoder/layer_0/attention_sublayer/attention/query/kernel",
        "bert_encoder/layer_0/attention_sublayer/attention/key/kernel",
        "bert_encoder/layer_0/attention_sublayer/attention/value/kernel",
        "bert_encoder/layer_0/attention_sublayer/attention/output_dense/kernel",
        "bert_encoder/layer_0/ffn_sublayer/intermediate/kernel",
        "bert_encoder/layer_0/ffn_sublayer/output_dense/kernel",
        "bert_encoder/pooler/kernel",
    ])


def test_first_step_has_no_bias_correction():
    w0 = np.array([1.0, -2.0, 0.5], "float32")
    g = np.array([0.5, -3.0, 1e-3], "float32")
    lr, wd, eps = 0.1, 0.01, 1e-6
    w = keras.Variable(w0, name="kernel")
    optimizer = AdamWeightDecay(learning_rate=lr, weight_decay_rate=wd, epsilon=eps)
    optimizer.apply_gradients([(tf.constant(g), w)])
    g64, w64 = g.astype(np.float64), w0.astype(np.float64)
    m, v = 0.1 * g64, 0.001 * g64**2
    expected = w64 - lr * (m / (np.sqrt(v) + eps) + wd * w64)
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6, atol=1e-7)
    # Bias-corrected Adam would move each weight by about lr; Google's
    # uncorrected one by about lr * 0.1 / sqrt(0.001) = 3.16 * lr.
    step = np.abs(w.numpy() - w0)[:2]
    assert np.all(step > 3.0 * lr)


# --------------------------------------------------------------- schedule


def test_schedule_values():
    schedule = LinearWarmupLinearDecay(1.0, num_train_steps=100, num_warmup_steps=10)
    expected = {0: 0.0, 5: 0.5, 9: 0.9, 10: 0.9, 55: 0.45, 99: 0.01, 100: 0.0, 150: 0.0}
    for step, value in expected.items():
        np.testing.assert_allclose(float(schedule(step)), value, atol=1e-6, err_msg=step)
    no_warmup = LinearWarmupLinearDecay(2e-5, num_train_steps=1000)
    np.testing.assert_allclose(float(no_warmup(0)), 2e-5, rtol=1e-6)
    np.testing.assert_allclose(float(no_warmup(250)), 1.5e-5, rtol=1e-6)
    clone = LinearWarmupLinearDecay.from_config(schedule.get_config())
    assert clone.get_config() == {
        "peak_learning_rate": 1.0, "num_train_steps": 100, "num_warmup_steps": 10,
    }
    with pytest.raises(ValueError):
        LinearWarmupLinearDecay(1.0, num_train_steps=0)


def test_optimizer_follows_the_schedule_in_update_steps():
    w = keras.Variable(np.ones(2, "float32"), name="kernel")
    optimizer = create_optimizer(1.0, num_train_steps=100, num_warmup_steps=10,
                                 gradient_accumulation_steps=2)
    grad = [(tf.constant([1.0, 1.0]), w)]
    # Update 0 runs at lr = schedule(0) = 0: Google's first step is a no-op.
    optimizer.apply_gradients(grad)
    optimizer.apply_gradients(grad)
    np.testing.assert_array_equal(w.numpy(), [1.0, 1.0])
    for _ in range(4):
        optimizer.apply_gradients(grad)
    assert int(optimizer.iterations) == 3 and int(optimizer.micro_steps) == 6
    np.testing.assert_allclose(float(optimizer.learning_rate), 0.3, rtol=1e-6)
    assert np.all(w.numpy() < 1.0)


# ---------------------------------------------------------------- clipping


def _numpy_adamw(w, grads_per_step, lr, wd, clip_norm, decay_mask, eps=1e-6):
    """Reference: Google's clip_by_global_norm + AdamWeightDecayOptimizer."""
    w = [x.astype(np.float64) for x in w]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    for grads in grads_per_step:
        grads = [g.astype(np.float64) for g in grads]
        if clip_norm is not None:
            norm = np.sqrt(sum((g**2).sum() for g in grads))
            grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g**2
            update = m[i] / (np.sqrt(v[i]) + eps)
            if decay_mask[i]:
                update = update + wd * w[i]
            w[i] = w[i] - lr * update
    return w


def test_gradients_are_clipped_by_global_norm():
    rng = np.random.default_rng(0)
    w0 = [rng.normal(size=(3, 2)).astype("float32"), rng.normal(size=(2,)).astype("float32")]
    steps = [[rng.normal(size=x.shape).astype("float32") * s for x in w0] for s in (10, 0.01, 5)]
    assert np.sqrt(sum((g**2).sum() for g in steps[0])) > 1.0
    kernel = keras.Variable(w0[0], name="kernel")
    bias = keras.Variable(w0[1], name="bias")
    optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay_rate=0.01, clip_norm=1.0)
    for grads in steps:
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], [kernel, bias]))
    clipped = _numpy_adamw(w0, steps, 0.1, 0.01, 1.0, [True, False])
    unclipped = _numpy_adamw(w0, steps, 0.1, 0.01, None, [True, False])
    np.testing.assert_allclose(kernel.numpy(), clipped[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.numpy(), clipped[1], rtol=1e-5, atol=1e-6)
    # Clipping really changed the trajectory.
    assert np.abs(clipped[0] - unclipped[0]).max() > 1e-3
    # The reported norm is the last update's, before clipping.
    last_norm = np.sqrt(sum((g**2).sum() for g in steps[-1]))
    assert last_norm > 1.0
    np.testing.assert_allclose(optimizer.gradient_norm.numpy(), last_norm, rtol=1e-5)


# ------------------------------------------------------------ accumulation


def _regression_problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(8, 4)).astype("float32") * 3.0
    y = rng.normal(size=(8, 2)).astype("float32") * 3.0
    return x, y


def _train(x, y, micro_batches, accumulation_steps, updates):
    layer = keras.layers.Dense(2, name="dense")
    layer.build((None, 4))
    layer.kernel.assign(np.full((4, 2), 0.3, "float32"))
    layer.bias.assign(np.array([0.1, -0.2], "float32"))
    optimizer = create_optimizer(
        0.1, num_train_steps=100, num_warmup_steps=0, weight_decay_rate=0.01,
        clip_norm=1.0, gradient_accumulation_steps=accumulation_steps,
    )
    optimizer.build(layer.trainable_variables)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(layer(xb) - yb))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
        return tf.linalg.global_norm(grads)

    size = len(x) // micro_batches
    history, norms = [], []
    for _ in range(updates):
        for i in range(micro_batches):
            norms.append(float(step(x[i * size:(i + 1) * size], y[i * size:(i + 1) * size])))
            history.append(layer.kernel.numpy().copy())
    return layer, optimizer, history, norms


def test_gradient_norm_reports_the_accumulated_mean():
    x, y = _regression_problem()
    _, optimizer, _, norms = _train(x, y, micro_batches=1, accumulation_steps=1, updates=1)
    np.testing.assert_allclose(optimizer.gradient_norm.numpy(), norms[0], rtol=1e-5)
    _, accumulating, _, _ = _train(x, y, micro_batches=2, accumulation_steps=2, updates=1)
    # Two halves of the batch accumulated: the mean gradient is the full batch's.
    np.testing.assert_allclose(accumulating.gradient_norm.numpy(), norms[0], rtol=1e-5)


def test_accumulated_micro_batches_equal_one_big_batch():
    x, y = _regression_problem()
    big, big_opt, _, norms = _train(x, y, micro_batches=1, accumulation_steps=1, updates=3)
    assert norms[0] > 1.0  # Clipping is active.
    acc, acc_opt, history, _ = _train(x, y, micro_batches=4, accumulation_steps=4, updates=3)
    np.testing.assert_allclose(acc.kernel.numpy(), big.kernel.numpy(), atol=1e-6)
    np.testing.assert_allclose(acc.bias.numpy(), big.bias.numpy(), atol=1e-6)
    assert int(acc_opt.iterations) == int(big_opt.iterations) == 3
    assert int(acc_opt.micro_steps) == 12
    # Weights only move on every 4th micro-batch.
    np.testing.assert_array_equal(history[0], np.full((4, 2), 0.3, "float32"))
    np.testing.assert_array_equal(history[2], np.full((4, 2), 0.3, "float32"))
    assert not np.array_equal(history[3], history[2])
    np.testing.assert_array_equal(history[4], history[3])


# ------------------------------------------------------------------- LAMB


def test_lamb_reduces_a_simple_loss_and_uses_the_trust_ratio():
    x, y = _regression_problem(1)
    layer = keras.layers.Dense(2, name="dense")
    layer.build((None, 4))
    layer.kernel.assign(np.full((4, 2), 0.5, "float32"))
    optimizer = create_optimizer(
        0.05, num_train_steps=1000, num_warmup_steps=0, optimizer_type="lamb",
        weight_decay_rate=0.0,
    )
    assert isinstance(optimizer, Lamb)

    def loss_fn():
        return tf.reduce_mean(tf.square(layer(x) - y))

    initial = float(loss_fn())
    for step in range(60):
        kernel_before, bias_before = layer.kernel.numpy(), layer.bias.numpy()
        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
        if step == 0:
            # Trust ratio: the kernel's step has norm lr * ||w||.
            lr = float(LinearWarmupLinearDecay(0.05, 1000)(0))
            np.testing.assert_allclose(
                np.linalg.norm(layer.kernel.numpy() - kernel_before),
                lr * np.linalg.norm(kernel_before), rtol=1e-4,
            )
            # The bias is excluded: a bias-corrected first step of size lr.
            np.testing.assert_allclose(
                np.abs(layer.bias.numpy() - bias_before), lr, rtol=1e-3
            )
    assert float(loss_fn()) < 0.5 * initial


# ------------------------------------------------------------- config etc.


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_xla_fused_update_equals_the_op_by_op_update(optimizer_type):
    # Variables with and without decay (kernel / bias / LayerNorm), several
    # steps, so that moments, decay, trust ratios and the schedule all count.
    keras.utils.set_random_seed(4)
    encoder = BertEncoder(
        vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=8, type_vocab_size=2,
    )
    initial = [w.numpy() for w in encoder.trainable_variables]
    rng = np.random.RandomState(0)
    grads = [[rng.normal(size=w.shape).astype("float32") for w in initial] for _ in range(3)]
    results = {}
    for jit in (True, False):
        for w, value in zip(encoder.trainable_variables, initial):
            w.assign(value)
        optimizer = create_optimizer(1e-2, 10, 2, optimizer_type=optimizer_type)
        optimizer.jit_update = jit
        optimizer.build(encoder.trainable_variables)

        # In a tf.function, as the trainer runs it: there a nested function
        # given variables would bind the first call's ones (many variables
        # share a shape here).
        @tf.function
        def step(step_grads, optimizer=optimizer):
            optimizer.apply_gradients(zip(step_grads, encoder.trainable_variables))

        for step_grads in grads:
            step([tf.constant(g) for g in step_grads])
        results[jit] = [w.numpy() for w in encoder.trainable_variables]
    for fused, plain, before in zip(results[True], results[False], initial):
        assert not np.allclose(fused, before)
        np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_half_precision_variables_are_updated_in_their_dtype(optimizer_type, jit):
    w = keras.Variable(np.array([1.0, -2.0], "float32"), dtype="bfloat16", name="kernel")
    optimizer = create_optimizer(0.1, 10, 0, optimizer_type=optimizer_type, jit_update=jit)
    optimizer.apply_gradients([(tf.constant([0.5, -1.0], "bfloat16"), w)])
    assert w.dtype == "bfloat16"
    moved = np.abs(np.asarray(w.numpy(), "float32") - [1.0, -2.0])
    assert np.all(moved > 0.01) and np.all(moved < 1.0)


def test_optimizer_config_round_trip_and_argument_checks():
    optimizer = create_optimizer(3e-4, 1000, 100, optimizer_type="adamw",
                                 gradient_accumulation_steps=4)
    config = optimizer.get_config()
    assert config["weight_decay_rate"] == 0.01
    assert config["clip_norm"] == 1.0
    assert config["gradient_accumulation_steps"] == 4
    assert config["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]
    assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.999, 1e-6)
    assert config["jit_update"] is True
    clone = AdamWeightDecay.from_config(config)
    assert clone.get_config() == config
    assert isinstance(clone._learning_rate, LinearWarmupLinearDecay)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, AdamWeightDecay) and restored.get_config() == config

    with pytest.raises(ValueError, match="optimizer_type"):
        create_optimizer(1e-4, 10, 1, optimizer_type="sgd")
    with pytest.raises(ValueError, match="global_clipnorm"):
        AdamWeightDecay(learning_rate=0.1, global_clipnorm=1.0)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        AdamWeightDecay(learning_rate=0.1, gradient_accumulation_steps=0)


def test_loss_scale_optimizer_wraps_adamw_for_float16():
    w = keras.Variable(np.ones(3, "float32"), name="kernel")
    optimizer = keras.optimizers.LossScaleOptimizer(
        AdamWeightDecay(learning_rate=0.1, clip_norm=1.0)
    )
    with tf.GradientTape() as tape:
        # float16 forward; the scaled gradient (2/3 * 2**15) stays finite.
        loss = tf.reduce_mean(tf.cast(tf.cast(w, tf.float16) ** 2, tf.float32))
        scaled = optimizer.scale_loss(loss)
    grads = tape.gradient(scaled, [w])
    optimizer.apply_gradients(zip(grads, [w]))
    assert int(optimizer.iterations) == 1
    # Unscaled gradient 2/3 per entry, clipped to 1/sqrt(3): no bias
    # correction, so each weight moves by ~3.16 * lr.
    np.testing.assert_allclose(w.numpy(), 1.0 - 0.1 * 0.1 / (np.sqrt(0.001) + 1e-6 * np.sqrt(3)),
                               rtol=1e-4)


# ------------------------------------------------------------ tf.distribute

_DISTRIBUTED_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from modeling.training.optimization import create_optimizer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 4)).astype("float32") * 3
    Y = rng.normal(size=(8, 2)).astype("float32") * 3

    def run(strategy, k, build=True, loss_scale=False):
        with strategy.scope():
            layer = keras.layers.Dense(2, name="dense")
            layer.build((None, 4))
            layer.kernel.assign(np.full((4, 2), 0.3, "float32"))
            optimizer = create_optimizer(0.1, 100, 0, weight_decay_rate=0.01,
                                         clip_norm=1.0,
                                         gradient_accumulation_steps=k)
            if loss_scale:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            if build:
                optimizer.build(layer.trainable_variables)
        replicas = strategy.num_replicas_in_sync

        @tf.function
        def train_step(x, y):
            def step_fn(x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(layer(x) - y)) / replicas
                    if loss_scale:
                        loss = optimizer.scale_loss(loss)
                grads = tape.gradient(loss, layer.trainable_variables)
                optimizer.apply_gradients(zip(grads, layer.trainable_variables))
            strategy.run(step_fn, args=(x, y))

        size = 8 // k
        for _ in range(2):
            for i in range(k):
                x, y = X[i * size:(i + 1) * size], Y[i * size:(i + 1) * size]
                if replicas > 1:
                    half = size // replicas
                    x, y = strategy.experimental_distribute_values_from_function(
                        lambda ctx: (
                            x[ctx.replica_id_in_sync_group * half:][:half],
                            y[ctx.replica_id_in_sync_group * half:][:half]))
                train_step(x, y)
        return {"kernel": layer.kernel.numpy().tolist(),
                "bias": layer.bias.numpy().tolist(),
                "iterations": int(optimizer.iterations.numpy())}

    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {
        "one_k1": run(one, 1), "two_k1": run(two, 1),
        "one_k2": run(one, 2), "two_k2": run(two, 2),
        "two_k2_loss_scale": run(two, 2, loss_scale=True),
    }
    try:
        run(two, 1, build=False)
        results["unbuilt_error"] = ""
    except ValueError as e:
        results["unbuilt_error"] = str(e)
    print("RESULTS" + json.dumps(results))
    """
)


def test_mirrored_strategy_matches_single_device():
    """Two replicas (and accumulation on top, and a LossScaleOptimizer
    wrapper for float16 training) give the one-device update."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = script_runner.run(
        [sys.executable, "-c", _DISTRIBUTED_SCRIPT], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS")][-1]
    results = json.loads(line[len("RESULTS"):])
    reference = results["one_k1"]
    assert reference["iterations"] == 2
    for key in ("two_k1", "one_k2", "two_k2", "two_k2_loss_scale"):
        assert results[key]["iterations"] == 2, key
        np.testing.assert_allclose(
            results[key]["kernel"], reference["kernel"], atol=1e-6, err_msg=key
        )
        np.testing.assert_allclose(results[key]["bias"], reference["bias"], atol=1e-6, err_msg=key)
    assert "optimizer.build" in results["unbuilt_error"]


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_checkpoint_resumes_mid_accumulation(tmp_path, optimizer_type):
    """Slots, accumulators and both counters are saved and restored."""
    x, y = _regression_problem(2)

    def make():
        layer = keras.layers.Dense(2, name="dense")
        layer.build((None, 4))
        layer.kernel.assign(np.full((4, 2), 0.3, "float32"))
        optimizer = create_optimizer(0.1, 100, 0, gradient_accumulation_steps=2,
                                     optimizer_type=optimizer_type)
        optimizer.build(layer.trainable_variables)
        return layer, optimizer

    def step(layer, optimizer, i):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(layer(x[i::4]) - y[i::4]))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))

    layer, optimizer = make()
    for i in range(3):  # One update, then half of the next.
        step(layer, optimizer, i)
    path = tf.train.Checkpoint(model=layer, optimizer=optimizer).save(str(tmp_path / "ckpt"))
    step(layer, optimizer, 3)

    restored_layer, restored_optimizer = make()
    tf.train.Checkpoint(model=restored_layer, optimizer=restored_optimizer).restore(
        path
    ).assert_consumed()
    assert int(restored_optimizer.iterations) == 1
    assert int(restored_optimizer.micro_steps) == 3
    step(restored_layer, restored_optimizer, 3)
    np.testing.assert_array_equal(restored_layer.kernel.numpy(), layer.kernel.numpy())
    np.testing.assert_array_equal(restored_layer.bias.numpy(), layer.bias.numpy())
    assert int(restored_optimizer.iterations) == 2
