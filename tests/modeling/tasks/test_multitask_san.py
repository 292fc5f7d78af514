"""MT-DNN's stochastic answer network (modeling/tasks/san.py) and its use as the output
layer of pairwise classification tasks in the multi-task model and job.

Unit tests: shapes and masking (padding, and which segment is premise or hypothesis),
stochastic prediction dropout in training against the average at inference, and a
NumPy reference of the layer (summary, bilinear attention, GRU update, per-step
predictions) given the same weights. Job tests: the default classifier of pair and
single-sentence tasks, the refusals, and a learning test whose data, budget and threshold
are fixed in its docstring (dev pairs drawn apart from the training ones).
"""

import json
import os
import random
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
import test_multitask as multitask_tests
from data import multitask as data_lib
from data import tokenization
from modeling import bert as config_lib
from modeling import checkpoints
from modeling.tasks import classification
from modeling.tasks import multitask as model_lib
from modeling.tasks import multitask_job
from modeling.tasks import san as san_lib

_task_list = multitask_tests._task_list
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

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


def test_a_model_with_a_san_head_round_trips_through_a_keras_file(tmp_path):
    tf.random.set_seed(2)
    model = model_lib.MultiTaskModel.from_config_object(_config(), TASKS)
    batch = _pair_batch(np.random.RandomState(8), 3)
    expected = model(batch, training=False)["nli/probabilities"].numpy()
    model.save(str(tmp_path / "mtdnn.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "mtdnn.keras"))
    assert isinstance(loaded.heads[0], san_lib.StochasticAnswerNetwork)
    np.testing.assert_array_equal(loaded(batch, training=False)["nli/probabilities"].numpy(),
                                  expected)


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


# -------------------------------------------------------------------- the job

COLOURS = ["red", "blue", "green", "yellow", "pink", "brown"]
ANIMALS = ["cat", "dog", "bird", "fish", "cow", "horse"]
FILLERS = ["the", "a", "saw", "near", "big", "small", "old", "man", "house", "tree"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + COLOURS + ANIMALS + FILLERS
SEQ = 16
SCRIPT = os.path.join(REPO_ROOT, "run", "run_multitask.py")


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_bert_san")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=SEQ,
                          type_vocab_size=2).to_json_file(str(directory / "bert_config.json"))
    return directory


def _pairs(n, seed, avoid=()):
    """(premise, hypothesis, label): label "same" iff the hypothesis names the premise's
    colour; half the pairs of each kind. Premise: 4-6 words holding one colour; hypothesis:
    3-4 words holding one colour."""
    rng, seen, out = random.Random(seed), set(avoid), []
    while len(out) < n:
        same = len(out) % 2 == 0
        colour = rng.choice(COLOURS)
        other = colour if same else rng.choice([c for c in COLOURS if c != colour])
        premise = [rng.choice(FILLERS + ANIMALS) for _ in range(rng.randint(4, 6))]
        premise[rng.randrange(len(premise))] = colour
        hypothesis = [rng.choice(FILLERS + ANIMALS) for _ in range(rng.randint(3, 4))]
        hypothesis[rng.randrange(len(hypothesis))] = other
        key = " ".join(premise) + " | " + " ".join(hypothesis)
        if key not in seen:
            seen.add(key)
            out.append((" ".join(premise), " ".join(hypothesis), "same" if same else "other"))
    rng.shuffle(out)
    return out


def _write_pairs(directory, train, dev):
    os.makedirs(directory, exist_ok=True)
    for name, rows in (("train.jsonl", train), ("dev.jsonl", dev)):
        with open(os.path.join(directory, name), "w") as f:
            for premise, hypothesis, label in rows:
                f.write(json.dumps({"premise": premise, "hypothesis": hypothesis,
                                    "label": label}) + "\n")


def _write_sentences(directory, n_train, n_dev, seed):
    """Single sentences: label 1 iff a colour is named."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    seen = set()
    for name, n in (("train.jsonl", n_train), ("dev.jsonl", n_dev)):
        with open(os.path.join(directory, name), "w") as f:
            written = 0
            while written < n:
                words = [rng.choice(FILLERS + ANIMALS) for _ in range(rng.randint(4, 7))]
                if rng.random() < 0.5:
                    words[rng.randrange(len(words))] = rng.choice(COLOURS)
                if " ".join(words) in seen:
                    continue
                seen.add(" ".join(words))
                label = int(any(w in COLOURS for w in words))
                f.write(json.dumps({"text": " ".join(words), "label": str(label)}) + "\n")
                written += 1


PAIR_ENTRY = {"name": "same", "processor": "generic", "data_dir": "same",
              "head": "classification",
              "options": {"file_format": "jsonl", "text_a_column": "premise",
                          "text_b_column": "hypothesis", "label_column": "label"}}
SINGLE_ENTRY = {"name": "colour", "processor": "generic", "data_dir": "colour",
                "head": "classification",
                "options": {"file_format": "jsonl", "text_a_column": "text",
                            "label_column": "label"}}


def _job(bert_files, task_list, output_dir, **kwargs):
    """test_multitask's job (batches of 16, lr 1e-3, seed 1) over pairs of SEQ pieces."""
    return multitask_tests._job(bert_files, task_list, output_dir,
                                **dict(dict(max_seq_length=SEQ), **kwargs))


def _with_options(entry, **options):
    return dict(entry, options=dict(entry["options"], **options))


def test_san_learns_a_pair_task_on_held_out_pairs_and_its_checkpoint_is_reused(
        tmp_path, bert_files):
    """Budget and threshold fixed before the first run: a 1-layer BERT (hidden 32) from
    random weights, trained with MT-DNN on two tasks at once, 'same' (sentence pairs: does
    the hypothesis name the premise's colour; 256 training pairs, half of each label; no
    "classifier" given, so the SAN, K = 5, step dropout 0.1) and 'colour' (single sentences:
    is a colour named; 96 sentences; the dense head by default), batches of 16 drawn with
    T=1, 400 updates at lr 1e-3. Dev: 64 other pairs (disjoint from training). 'same' must
    reach dev accuracy >= 0.8 (its majority class is 0.5). Then: a do_eval run on the same
    output_dir restores the SAN head and scores the same accuracy and F1 (the latter from
    the predicted probabilities); asking for a dense head
    there is refused in one line; the encoder loads into run_classifier's BertClassifier."""
    train = _pairs(256, 20)
    dev = _pairs(64, 21, avoid=["%s | %s" % (p, h) for p, h, _ in train])
    _write_pairs(str(tmp_path / "same"), train, dev)
    _write_sentences(str(tmp_path / "colour"), 96, 32, seed=22)
    # F1 too: the processor's extra metrics come from the predicted probabilities.
    pair = _with_options(PAIR_ENTRY, eval_metrics=["accuracy", "f1"])
    path = _task_list(tmp_path, [pair, SINGLE_ENTRY])
    out = tmp_path / "out"
    result = multitask_job.run(_job(bert_files, path, out, do_train=True, do_eval=True,
                                    num_train_steps=400))
    assert [t.classifier for t in result.tasks] == ["san", "dense"]
    assert isinstance(result.model.heads[0], san_lib.StochasticAnswerNetwork)
    assert result.model.heads[0].num_steps == 5 and result.model.heads[0].step_dropout == 0.1
    assert isinstance(result.model.heads[1], model_lib.TaskHead)
    results = result.eval_results
    assert results["global_step"] == 400
    labels = [label for _, _, label in dev]
    majority = max(labels.count("same"), labels.count("other")) / len(labels)
    assert majority == 0.5
    assert results["same/eval_accuracy"] >= 0.8 > majority, results
    assert 0.0 < results["same/eval_f1"] <= 1.0, results

    again = multitask_job.run(_job(bert_files, path, out, do_eval=True))
    assert again.eval_results["same/eval_accuracy"] == pytest.approx(
        results["same/eval_accuracy"])
    assert again.eval_results["same/eval_loss"] == pytest.approx(
        results["same/eval_loss"], rel=1e-5)
    assert again.eval_results["same/eval_f1"] == pytest.approx(results["same/eval_f1"])

    dense = _task_list(tmp_path, [_with_options(pair, classifier="dense"), SINGLE_ENTRY])
    before = sorted(os.listdir(out))
    with pytest.raises(multitask_job.MultitaskJobError) as info:
        multitask_job.run(_job(bert_files, dense, out, do_eval=True))
    message = str(info.value)
    assert "\n" not in message and message.startswith(dense + ": entry 0 ('same'): field "
                                                      "'options': classifier=\"dense\", but "
                                                      "the checkpoint "), message
    assert message.endswith("holds a \"san\" classifier for this task; set \"classifier\": "
                            "\"san\" or use a new --output_dir"), message
    assert sorted(os.listdir(out)) == before

    trained = result.model.encoder.get_weights()
    single = classification.BertClassifier.from_config_object(_bert_config(bert_files),
                                                              num_labels=2)
    checkpoints.init_from_checkpoint(single, str(out))
    for a, b in zip(single.encoder.get_weights(), trained):
        np.testing.assert_array_equal(a, b)


def _bert_config(bert_files):
    return config_lib.BertConfig.from_json_file(str(bert_files / "bert_config.json"))


@pytest.fixture()
def small_tasks(tmp_path):
    _write_pairs(str(tmp_path / "same"), _pairs(8, 30), _pairs(4, 31))
    _write_sentences(str(tmp_path / "colour"), 8, 4, seed=32)
    return tmp_path


def _prepared(bert_files, root, entries, **kwargs):
    job = _job(bert_files, _task_list(root, entries), root / "out", **kwargs)
    os.makedirs(job.output_dir, exist_ok=True)
    tokenizer = tokenization.FullTokenizer(job.vocab_file, True)
    return multitask_job.prepare_tasks(job, data_lib.read_task_list(job.task_list_file),
                                       tokenizer, len(VOCAB))


def test_the_classifier_defaults_to_san_for_pairs_and_dense_for_single_sentences(
        small_tasks, bert_files):
    entries = [PAIR_ENTRY, SINGLE_ENTRY,
               dict(_with_options(PAIR_ENTRY, classifier="dense"), name="same_dense"),
               dict(_with_options(PAIR_ENTRY, san_steps=3, san_step_dropout=0.0),
                    name="same_k3")]
    tasks = _prepared(bert_files, small_tasks, entries, do_train=True, do_eval=True)
    assert [t.classifier for t in tasks] == ["san", "dense", "dense", "san"]
    model_tasks = [t.model_task() for t in tasks]
    assert model_tasks[0]["san_steps"] == 5 and model_tasks[0]["san_step_dropout"] == 0.1
    assert "san_steps" not in model_tasks[1] and "san_steps" not in model_tasks[2]
    assert model_tasks[3]["san_steps"] == 3 and model_tasks[3]["san_step_dropout"] == 0.0
    model = model_lib.MultiTaskModel.from_config_object(_bert_config(bert_files), model_tasks)
    assert [type(h).__name__ for h in model.heads] == [
        "StochasticAnswerNetwork", "TaskHead", "TaskHead", "StochasticAnswerNetwork"]
    assert model.heads[3].num_steps == 3


@pytest.mark.parametrize("options,message", [
    ({"classifier": "sam"}, "classifier=\"sam\": expected \"san\" (the stochastic answer "
                            "network, for sentence pairs) or \"dense\""),
    ({"san_steps": 0}, "san_steps=0: expected an integer >= 1"),
    ({"san_step_dropout": 1}, "san_step_dropout=1: expected a number in [0, 1)"),
    ({"san_step_dropout": "0.1"}, "san_step_dropout=\"0.1\": expected a number in [0, 1)"),
    ({"classifier": "dense", "san_steps": 3}, "san_steps is a setting of the \"san\" "
                                              "classifier; this task's classifier is \"dense\""),
])
def test_bad_classifier_options_are_refused_before_anything_is_written(
        small_tasks, bert_files, options, message):
    path = _task_list(small_tasks, [_with_options(PAIR_ENTRY, **options)])
    out = small_tasks / "out"
    with pytest.raises(multitask_job.MultitaskJobError) as info:
        multitask_job.run(_job(bert_files, path, out, do_train=True, num_train_steps=1))
    assert str(info.value) == "%s: entry 0 ('same'): field 'options': %s" % (path, message)
    assert not os.path.exists(out / "same")


def test_san_is_refused_for_single_sentences_and_for_other_heads(small_tasks, bert_files):
    path = _task_list(small_tasks, [_with_options(SINGLE_ENTRY, classifier="san")])
    out = small_tasks / "out"
    with pytest.raises(multitask_job.MultitaskJobError) as info:
        multitask_job.run(_job(bert_files, path, out, do_train=True, num_train_steps=1))
    assert str(info.value) == (
        "%s: entry 0 ('colour'): field 'options': classifier=\"san\" reads sentence pairs, "
        "but training example 'train-1' has no second text (text_b); use \"dense\" for "
        "single sentences" % path)
    assert not os.path.exists(out / "colour" / "train.tf_record")
    stsb = dict(SINGLE_ENTRY, head="regression",
                options={"file_format": "jsonl", "text_a_column": "text",
                         "label_column": "label", "classifier": "san"})
    path = _task_list(small_tasks, [stsb])
    with pytest.raises(multitask_job.MultitaskJobError,
                       match="'classifier' is not an option of a regression task"):
        multitask_job.run(_job(bert_files, path, out, do_train=True, num_train_steps=1))


def test_script_reports_san_on_single_sentences_in_one_line(small_tasks, bert_files):
    path = _task_list(small_tasks, [_with_options(SINGLE_ENTRY, classifier="san")])
    proc = script_runner.run(
        [sys.executable, SCRIPT, "--task_list_file=" + path, "--do_train",
         "--vocab_file=%s" % (bert_files / "vocab.txt"),
         "--bert_config_file=%s" % (bert_files / "bert_config.json"),
         "--max_seq_length=%d" % SEQ, "--output_dir=%s" % (small_tasks / "out")],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("run_multitask: error: %s: entry 0 ('colour'): field "
                                "'options': classifier=\"san\" reads sentence pairs" % path)
    assert "Traceback" not in proc.stderr
