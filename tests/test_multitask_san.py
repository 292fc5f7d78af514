"""MT-DNN's stochastic answer network (modeling/tasks/san.py) and its use as the output
layer of pairwise classification tasks in the multi-task model and job.

Unit tests: shapes and masking (padding, and which segment is premise or hypothesis),
stochastic prediction dropout in training against the average at inference, and a
NumPy reference of the layer (summary, bilinear attention, GRU update, per-step
predictions) given the same weights.
"""

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert as config_lib
from modeling.tasks import multitask as model_lib
from modeling.tasks import san as san_lib

H, L, LABELS = 8, 7, 3


def _inputs(rng, rows, premise=3, hypothesis=2):
    """Random memories; positions [0, premise) segment 0, then `hypothesis` of segment 1,
    the rest padding (input_mask 0, segment 0)."""
    sequence = rng.normal(size=(rows, L, H)).astype(np.float32)
    mask = np.zeros((rows, L), np.int32)
    mask[:, :premise + hypothesis] = 1
    segments = np.zeros((rows, L), np.int32)
    segments[:, premise:premise + hypothesis] = 1
    return sequence, mask, segments


def _layer(num_steps=5, step_dropout=0.1, dropout_rate=0.0, seed=0):
    layer = san_lib.StochasticAnswerNetwork(LABELS, H, num_steps=num_steps,
                                            step_dropout=step_dropout,
                                            dropout_rate=dropout_rate, seed=seed)
    rng = np.random.RandomState(seed + 100)
    for weight in layer.weights:   # non-zero biases and O(1) weights, so slips would show
        if "seed_generator" not in weight.path:
            weight.assign(rng.normal(scale=0.5, size=weight.shape).astype(np.float32))
    return layer


def _run(layer, sequence, mask, segments, training=False):
    return {k: v.numpy() for k, v in layer(tf.constant(sequence), tf.constant(mask),
                                           tf.constant(segments), training=training).items()}


# ------------------------------------------------------------- numpy reference


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _weights(layer):
    return {w.path.split("/")[-1]: w.numpy().astype(np.float64) for w in layer.weights}


def _attend_np(w, state, memory, premise):
    """beta = softmax over the premise of M_j . (W_2 s + b_2); x = sum_j beta_j M_j."""
    query = state @ w["attention_kernel"] + w["attention_bias"]
    scores = np.einsum("bld,bd->bl", memory, query)
    scores = np.where(premise, scores, -np.inf)
    beta = _softmax(scores)
    return np.einsum("bl,bld->bd", beta, memory)


def _gru_np(w, read, state):
    """torch.nn.GRUCell(read, state), gates (reset, update, new)."""
    gi = read @ w["gru_input_kernel"] + w["gru_input_bias"]
    gh = state @ w["gru_recurrent_kernel"] + w["gru_recurrent_bias"]
    r = _sigmoid(gi[:, :H] + gh[:, :H])
    z = _sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * state


def _san_np(w, memory, mask, segments, num_steps):
    """The whole layer at inference: [b, K, n] step probabilities and their average."""
    memory = memory.astype(np.float64)
    premise = (mask > 0) & (segments == 0)
    hypothesis = (mask > 0) & (segments == 1)
    alpha = _softmax(np.where(hypothesis, memory @ w["summary_weights"], -np.inf))
    state = np.einsum("bl,bld->bd", alpha, memory)
    steps = []
    for _ in range(num_steps):
        read = _attend_np(w, state, memory, premise)
        features = np.concatenate([state, read, np.abs(state - read), state * read], axis=1)
        steps.append(_softmax(features @ w["output_weights"].T + w["output_bias"]))
        state = _gru_np(w, read, state)
    steps = np.stack(steps, axis=1)
    return steps, steps.mean(axis=1)


def test_one_step_attention_and_gru_update_match_numpy():
    """Given a state, the layer's bilinear attention over the premise memory and its GRU
    update equal the NumPy formulas with the same weights."""
    rng = np.random.RandomState(0)
    layer = _layer()
    sequence, mask, segments = _inputs(rng, 4)
    state = rng.normal(size=(4, H)).astype(np.float32)
    premise = (mask > 0) & (segments == 0)
    read = layer.attend(tf.constant(state), tf.constant(sequence), tf.constant(premise),
                        training=False).numpy()
    w = _weights(layer)
    np.testing.assert_allclose(read, _attend_np(w, state.astype(np.float64),
                                                sequence.astype(np.float64), premise),
                               rtol=1e-5, atol=1e-5)
    updated = layer.gru(tf.constant(read), tf.constant(state)).numpy()
    np.testing.assert_allclose(updated, _gru_np(w, read.astype(np.float64),
                                                state.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)
    # The read is a convex mix of premise vectors only (hypothesis and padding excluded).
    assert not np.allclose(read, sequence[:, :3].mean(axis=1))


@pytest.mark.parametrize("num_steps", [1, 5])
def test_the_layer_matches_a_numpy_reference(num_steps):
    """Summary of the hypothesis, K steps of attention, prediction and GRU update, and the
    average of the K predictions at inference: the NumPy reference with the same weights."""
    rng = np.random.RandomState(1)
    layer = _layer(num_steps=num_steps, dropout_rate=0.1)
    sequence, mask, segments = _inputs(rng, 5)
    got = _run(layer, sequence, mask, segments)
    steps, average = _san_np(_weights(layer), sequence, mask, segments, num_steps)
    assert got["step_probabilities"].shape == (5, num_steps, LABELS)
    assert got["probabilities"].shape == (5, LABELS)
    np.testing.assert_allclose(got["step_probabilities"], steps, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["probabilities"], average, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got["step_mask"], np.ones((5, num_steps)))
    if num_steps > 1:   # the steps differ: the state moves
        assert np.abs(steps[:, 0] - steps[:, -1]).max() > 1e-3


# ---------------------------------------------------------------------- masking


def test_padding_is_ignored_and_the_segments_are_premise_and_hypothesis():
    """Changing the padded positions (their vectors and segment ids) leaves every output
    unchanged; changing one premise or one hypothesis vector changes the prediction;
    swapping the segments changes it too (the two memories play different parts)."""
    rng = np.random.RandomState(2)
    layer = _layer(dropout_rate=0.1)
    sequence, mask, segments = _inputs(rng, 4, premise=3, hypothesis=2)
    base = _run(layer, sequence, mask, segments)
    noisy, noisy_segments = sequence.copy(), segments.copy()
    noisy[:, 5:] = rng.normal(scale=100.0, size=noisy[:, 5:].shape)
    noisy_segments[:, 5:] = 1
    changed = _run(layer, noisy, mask, noisy_segments)
    for key in base:
        np.testing.assert_array_equal(changed[key], base[key])

    for position in (1, 4):   # a premise, then a hypothesis position
        other = sequence.copy()
        other[:, position] += 1.0
        assert np.abs(_run(layer, other, mask, segments)["probabilities"]
                      - base["probabilities"]).max() > 1e-4, position
    swapped = np.where(mask > 0, 1 - segments, 0)
    assert np.abs(_run(layer, sequence, mask, swapped)["probabilities"]
                  - base["probabilities"]).max() > 1e-4


def test_a_row_without_hypothesis_stays_finite_with_finite_gradients():
    """Other tasks' rows (one segment only) pass through every head: finite outputs and
    gradients, so their zero loss weight gives an exactly zero gradient."""
    rng = np.random.RandomState(3)
    layer = _layer(dropout_rate=0.1)
    sequence, mask, _ = _inputs(rng, 3)
    segments = np.zeros_like(mask)
    with tf.GradientTape() as tape:
        out = layer(tf.constant(sequence), tf.constant(mask), tf.constant(segments),
                    training=True)
        loss = 0.0 * tf.reduce_sum(layer.logits_of(out["probabilities"]))
    grads = tape.gradient(loss, layer.trainable_variables)
    assert np.isfinite(out["probabilities"].numpy()).all()
    for grad in grads:
        grad = tf.convert_to_tensor(grad).numpy()
        assert np.isfinite(grad).all() and not grad.any()


# --------------------------------------------------------------- step dropout


def test_step_dropout_averages_the_kept_steps_in_training_and_all_at_inference():
    """Training (the layer's other dropout off, so the K predictions are the inference
    ones): the answer is the average of the kept steps' predictions; every row keeps at
    least one step; a step is kept with probability 1/K + (1 - 1/K)(1 - p) (one step drawn
    per row always kept, the others with 1 - p), checked on 4000 rows within 0.03; the
    masks are redrawn per call. Inference: every step, and no randomness."""
    rng = np.random.RandomState(4)
    rows, steps, p = 4000, 5, 0.5
    layer = _layer(num_steps=steps, step_dropout=p, dropout_rate=0.0)
    sequence, mask, segments = _inputs(rng, rows)
    train = _run(layer, sequence, mask, segments, training=True)
    infer = _run(layer, sequence, mask, segments, training=False)
    kept = train["step_mask"]
    assert set(np.unique(kept)) == {0.0, 1.0}
    assert kept.sum(axis=1).min() >= 1
    assert abs(kept.mean() - (1 / steps + (1 - 1 / steps) * (1 - p))) < 0.03
    np.testing.assert_allclose(train["step_probabilities"], infer["step_probabilities"],
                               rtol=1e-6, atol=1e-7)
    expected = ((train["step_probabilities"] * kept[:, :, None]).sum(axis=1)
                / kept.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(train["probabilities"], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(infer["probabilities"],
                               infer["step_probabilities"].mean(axis=1), rtol=1e-5, atol=1e-7)
    assert np.abs(train["probabilities"] - infer["probabilities"]).max() > 1e-3
    again = _run(layer, sequence, mask, segments, training=True)
    assert not np.array_equal(again["step_mask"], kept)
    np.testing.assert_array_equal(_run(layer, sequence, mask, segments)["probabilities"],
                                  infer["probabilities"])

    # A high rate still keeps one step per row; rate 0 averages every step in training.
    heavy = _run(_layer(num_steps=steps, step_dropout=0.95), sequence, mask, segments,
                 training=True)["step_mask"]
    assert heavy.sum(axis=1).min() == 1 and (heavy.sum(axis=1) == 1).mean() > 0.5
    none = _run(_layer(num_steps=steps, step_dropout=0.0), sequence, mask, segments,
                training=True)
    np.testing.assert_array_equal(none["step_mask"], np.ones((rows, steps)))


def test_dropout_inside_the_layer_acts_in_training_only():
    rng = np.random.RandomState(5)
    layer = _layer(step_dropout=0.0, dropout_rate=0.3)
    sequence, mask, segments = _inputs(rng, 6)
    infer = _run(layer, sequence, mask, segments)
    train = _run(layer, sequence, mask, segments, training=True)
    assert np.abs(train["probabilities"] - infer["probabilities"]).max() > 1e-4
    np.testing.assert_array_equal(_run(layer, sequence, mask, segments)["probabilities"],
                                  infer["probabilities"])


def test_bad_settings_are_refused():
    for kwargs, message in (({"num_steps": 0}, "num_steps must be an integer >= 1"),
                            ({"num_steps": 2.5}, "num_steps must be an integer >= 1"),
                            ({"step_dropout": 1.0}, "step_dropout must be in")):
        with pytest.raises(ValueError, match=message):
            san_lib.StochasticAnswerNetwork(2, H, **kwargs)


# ------------------------------------------------------------ multi-task model


def _config():
    return config_lib.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=16, type_vocab_size=2)


def _pair_batch(rng, rows, task_id=0, seq=12):
    ids = rng.randint(5, 30, size=(rows, seq)).astype(np.int32)
    mask = np.zeros((rows, seq), np.int32)
    mask[:, :9] = 1
    segments = np.zeros((rows, seq), np.int32)
    segments[:, 5:9] = 1
    ids[mask == 0] = 0
    zeros = np.zeros((rows, seq), np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "task_id": np.full([rows], task_id, np.int32),
            "is_real_example": np.ones([rows], np.int32),
            "label_ids": rng.randint(0, 3, size=rows).astype(np.int32),
            "label_values": np.zeros([rows], np.float32), "tag_ids": zeros,
            "label_mask": zeros, "start_positions": np.zeros([rows], np.int32),
            "end_positions": np.zeros([rows], np.int32)}


TASKS = [{"name": "nli", "head": "classification", "num_labels": 3, "classifier": "san",
          "san_steps": 4},
         {"name": "sst", "head": "classification", "num_labels": 2},
         {"name": "sts", "head": "regression"}]


def test_the_model_uses_san_on_the_sequence_output_and_keeps_dense_heads_as_they_were():
    """A "san" classification task gets a SAN under ``head_<task>`` fed with the encoder's
    sequence output (its probabilities are the layer's own on that output, and the loss is
    -log of them); a task without "classifier" keeps today's dense head and variable names;
    ids changed under the padding change nothing; the config round-trips."""
    tf.random.set_seed(0)
    rng = np.random.RandomState(6)
    model = model_lib.MultiTaskModel.from_config_object(_config(), TASKS)
    san, dense = model.heads[0], model.heads[1]
    assert isinstance(san, san_lib.StochasticAnswerNetwork) and san.num_steps == 4
    assert isinstance(dense, model_lib.TaskHead)
    paths = {v.path: tuple(v.shape) for v in model.weights}
    assert paths["head_sst/output_weights"] == (2, 16) and "head_sst/output_bias" in paths
    assert paths["head_nli/output_weights"] == (3, 64)
    assert paths["head_nli/attention_kernel"] == (16, 16)
    assert paths["head_nli/gru_recurrent_kernel"] == (16, 48)

    batch = _pair_batch(rng, 5)
    outputs = model(batch, training=False)
    encoded = model.encoder({k: batch[k] for k in model_lib.ENCODER_INPUTS}, training=False)
    own = san(encoded["sequence_output"], batch["input_mask"], batch["segment_ids"],
              training=False)["probabilities"].numpy()
    np.testing.assert_allclose(outputs["nli/probabilities"].numpy(), own, rtol=1e-5)
    np.testing.assert_allclose(np.exp(outputs["nli/logits"].numpy()), own, rtol=1e-5)
    _, metrics = model.compute_loss_and_metrics(batch, training=False)
    nll = -np.log(own[np.arange(5), batch["label_ids"]]).sum()
    assert float(metrics["nli/loss"][0]) == pytest.approx(nll, rel=1e-5)
    assert [float(v) for v in metrics["sst/loss"]] == [0.0, 0.0]

    padded = dict(batch, input_ids=np.where(batch["input_mask"] > 0, batch["input_ids"], 7))
    np.testing.assert_allclose(model(padded, training=False)["nli/probabilities"].numpy(),
                               outputs["nli/probabilities"].numpy(), rtol=1e-6, atol=1e-7)

    clone = model_lib.MultiTaskModel.from_config(model.get_config())
    assert isinstance(clone.heads[0], san_lib.StochasticAnswerNetwork)
    assert clone.heads[0].num_steps == 4 and isinstance(clone.heads[1], model_lib.TaskHead)


def test_a_batch_of_another_task_leaves_the_san_head_a_zero_gradient():
    tf.random.set_seed(1)
    rng = np.random.RandomState(7)
    model = model_lib.MultiTaskModel.from_config_object(_config(), TASKS)
    batch = _pair_batch(rng, 4, task_id=1)
    batch["label_ids"] %= 2
    with tf.GradientTape() as tape:
        loss, _ = model.compute_loss_and_metrics(batch, training=True)
    variables = model.heads[0].trainable_variables
    for variable, grad in zip(variables, tape.gradient(loss, variables)):
        assert grad is None or not tf.convert_to_tensor(grad).numpy().any(), variable.path


def test_the_model_refuses_a_bad_classifier():
    with pytest.raises(ValueError, match="classifier must be one of san, dense, not 'sam'"):
        model_lib.MultiTaskModel.from_config_object(
            _config(), [{"name": "a", "head": "classification", "num_labels": 2,
                         "classifier": "sam"}])
    with pytest.raises(ValueError, match="a setting of classification tasks, not of a "
                                         "regression task"):
        model_lib.MultiTaskModel.from_config_object(
            _config(), [{"name": "a", "head": "regression", "classifier": "san"}])
