"""Tests for modeling.objectives: MLM/NSP heads, Google's losses, pretrainer.

The contract every objective meets (float32 losses and (sum, count) metrics,
aggregation over splits, gradients, mixed precision, round trips) is checked
by the shared harness in tests/modeling/test_encoders.py; here: Google's exact
definitions, the heads' numerics, the tied decoder, recombination.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from harness import randomize_weights
from modeling.bert import BertEncoder
from modeling.bert.config import BertConfig
from modeling.recipes import build_bert_pretrainer
from modeling.objectives import (
    BertPretrainer,
    MaskedLMObjective,
    NextSentenceObjective,
    masked_lm_loss,
    next_sentence_loss,
)

VOCAB, HIDDEN, SEQ, BATCH, PREDS = 99, 32, 9, 4, 3
CONFIG = BertConfig(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=32,
)


def make_features(rng, batch=BATCH):
    """A pre-training batch with Google's feature names and dtypes."""
    input_mask = np.ones((batch, SEQ), "int32")
    input_mask[0, 6:] = 0
    weights = np.ones((batch, PREDS), "float32")
    weights[0, 2] = 0.0  # A padding slot of masked_lm_positions.
    weights[1, 1:] = 0.0
    positions = np.stack(
        [rng.choice(np.arange(1, 6), PREDS, replace=False) for _ in range(batch)]
    ).astype("int32")
    positions[weights == 0] = 0
    return {
        "input_ids": rng.integers(1, VOCAB, size=(batch, SEQ)).astype("int32") * input_mask,
        "input_mask": input_mask,
        "segment_ids": np.concatenate(
            [np.zeros((batch, 4), "int32"), np.ones((batch, SEQ - 4), "int32")], axis=1
        ) * input_mask,
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(1, VOCAB, size=(batch, PREDS)).astype("int32")
        * (weights > 0),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, size=(batch, 1)).astype("int32"),
    }


@pytest.fixture(scope="module")
def pretrainer():
    model = build_bert_pretrainer(CONFIG)
    randomize_weights(model)
    return model


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


_erf = np.vectorize(math.erf)


# ------------------------------------------------------------------ losses


def test_masked_lm_loss_matches_numpy_and_ignores_zero_weights():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(BATCH, PREDS, VOCAB)).astype("float32")
    ids = rng.integers(0, VOCAB, size=(BATCH, PREDS)).astype("int32")
    weights = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0.5, 1, 1]], "float32")
    log_probs = np_log_softmax(logits.astype(np.float64))
    per_position = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    expected = (weights * per_position).sum() / (weights.sum() + 1e-5)
    got = masked_lm_loss(logits, ids, weights)
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # Changing the label or logits of a zero-weight slot changes nothing.
    ids2, logits2 = ids.copy(), logits.copy()
    ids2[0, 2] = (ids2[0, 2] + 1) % VOCAB
    logits2[1, 2] += 5.0
    np.testing.assert_allclose(masked_lm_loss(logits2, ids2, weights), got, rtol=1e-6)
    # No masked token at all: finite zero, thanks to the 1e-5.
    assert float(masked_lm_loss(logits, ids, np.zeros_like(weights))) == 0.0


def test_next_sentence_loss_is_mean_cross_entropy():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(BATCH, 2)).astype("float32")
    labels = np.array([[0], [1], [1], [0]], "int32")
    log_probs = np_log_softmax(logits.astype(np.float64))
    expected = -log_probs[np.arange(BATCH), labels[:, 0]].mean()
    np.testing.assert_allclose(next_sentence_loss(logits, labels), expected, rtol=1e-6)
    np.testing.assert_allclose(next_sentence_loss(logits, labels[:, 0]), expected, rtol=1e-6)


# ------------------------------------------------------------------- heads


def test_masked_lm_logits_match_numpy(pretrainer):
    rng = np.random.default_rng(2)
    features = make_features(rng)
    outputs = pretrainer(features)
    sequence = outputs["sequence_output"].numpy().astype(np.float64)
    head = pretrainer.get_objective("masked_lm").head
    get = lambda v: v.numpy().astype(np.float64)  # noqa: E731
    gathered = np.take_along_axis(
        sequence, features["masked_lm_positions"][..., None].astype(np.int64), 1
    )
    x = gathered @ get(head.transform_dense.kernel) + get(head.transform_dense.bias)
    x = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    x = np_layer_norm(x, get(head.transform_layer_norm.gamma), get(head.transform_layer_norm.beta))
    logits = x @ get(pretrainer.encoder.embedding_table).T + get(head.output_bias)
    assert outputs["masked_lm_logits"].dtype == tf.float32
    assert outputs["masked_lm_logits"].shape == (BATCH, PREDS, VOCAB)
    np.testing.assert_allclose(outputs["masked_lm_logits"], logits, rtol=1e-4, atol=1e-4)

    nsp = pretrainer.get_objective("next_sentence").head
    pooled = outputs["pooled_output"].numpy().astype(np.float64)
    expected = pooled @ get(nsp.dense.kernel) + get(nsp.dense.bias)
    np.testing.assert_allclose(outputs["next_sentence_logits"], expected, rtol=1e-5, atol=1e-5)


def test_decoder_is_tied_to_the_embedding_table():
    model = build_bert_pretrainer(CONFIG)
    randomize_weights(model, seed=3)
    features = make_features(np.random.default_rng(3))
    head = model.get_objective("masked_lm").head
    # The head owns no decoder matrix: only transform, LayerNorm, bias.
    assert sorted(w.path.split("/", 2)[-1] for w in head.weights) == sorted([
        "output_bias",
        "transform_dense/kernel",
        "transform_dense/bias",
        "transform_LayerNorm/gamma",
        "transform_LayerNorm/beta",
    ])
    # The table is counted once among the trainable variables.
    table = model.encoder.embedding_table
    assert sum(v is table for v in model.trainable_variables) == 1
    # Changing the table (only the decoder side: the encoder output is held
    # fixed by feeding the same sequence_output) changes the logits.
    objective = model.get_objective("masked_lm")
    encoder_outputs = model.encoder(features)
    before = objective(encoder_outputs, features)["outputs"]["masked_lm_logits"]
    table.assign(table.numpy() * 2.0)
    after = objective(encoder_outputs, features)["outputs"]["masked_lm_logits"]
    assert np.abs(after.numpy() - before.numpy()).max() > 1e-2
    # And the MLM loss has a gradient w.r.t. rows that are never inputs.
    with tf.GradientTape() as tape:
        result = objective(encoder_outputs, features)
    grad = tf.convert_to_tensor(tape.gradient(result["losses"]["masked_lm_loss"], table))
    unused_rows = np.setdiff1d(np.arange(VOCAB), features["input_ids"])
    assert np.abs(grad.numpy()[unused_rows]).max() > 0.0
    # A pretrainer rebuilt from its config decodes with its own encoder's table.
    clone = BertPretrainer.from_config(model.get_config())
    assert clone.get_objective("masked_lm")._encoder.value is clone.encoder


def test_mlm_requires_an_attached_encoder():
    objective = MaskedLMObjective.from_config_object(CONFIG)
    encoder = BertEncoder.from_config_object(CONFIG)
    features = make_features(np.random.default_rng(4))
    with pytest.raises(ValueError, match="attach"):
        objective(encoder(features), features)
    wrong = BertEncoder.from_config_object(CONFIG.replace(vocab_size=50))
    with pytest.raises(ValueError, match="50 rows"):
        objective.attach(wrong)


# ------------------------------------------------------- loss and metrics


def test_compute_loss_and_metrics_matches_googles_definitions(pretrainer):
    rng = np.random.default_rng(5)
    features = make_features(rng)
    outputs = pretrainer(features)
    # Labels do not change the logits: make some predictions right, among
    # them zero-weight slots (which must not count) and some NSP examples.
    predicted = outputs["masked_lm_logits"].numpy().argmax(-1)
    right = np.zeros((BATCH, PREDS), bool)
    right[0, 1:] = right[1, :] = right[3, 0] = True  # [0, 2], [1, 1:] weigh 0.
    features["masked_lm_ids"] = np.where(right, predicted, features["masked_lm_ids"])
    features["masked_lm_ids"] = features["masked_lm_ids"].astype("int32")
    nsp_predicted = outputs["next_sentence_logits"].numpy().argmax(-1)
    features["next_sentence_labels"] = np.array(
        [[nsp_predicted[0]], [nsp_predicted[1]], [1 - nsp_predicted[2]], [1 - nsp_predicted[3]]],
        "int32",
    )
    total, metrics = pretrainer.compute_loss_and_metrics(features, training=False)
    assert set(metrics) == {
        "loss", "masked_lm_loss", "masked_lm_accuracy",
        "next_sentence_loss", "next_sentence_accuracy",
    }

    mlm_logits = outputs["masked_lm_logits"].numpy().astype(np.float64)
    ids, weights = features["masked_lm_ids"], features["masked_lm_weights"]
    per_position = -np.take_along_axis(np_log_softmax(mlm_logits), ids[..., None], -1)[..., 0]
    mlm_loss = (weights * per_position).sum() / (weights.sum() + 1e-5)
    mlm_correct = (mlm_logits.argmax(-1) == ids).astype(np.float64)

    nsp_logits = outputs["next_sentence_logits"].numpy().astype(np.float64)
    labels = features["next_sentence_labels"][:, 0]
    nsp_per_example = -np_log_softmax(nsp_logits)[np.arange(BATCH), labels]
    nsp_correct = (nsp_logits.argmax(-1) == labels).astype(np.float64)
    assert (weights * mlm_correct).sum() == 3.0 and mlm_correct.sum() >= 5
    assert nsp_correct.sum() == 2.0

    np.testing.assert_allclose(total, mlm_loss + nsp_per_example.mean(), rtol=1e-5)
    expected = {
        "masked_lm_loss": ((weights * per_position).sum(), weights.sum()),
        "masked_lm_accuracy": ((weights * mlm_correct).sum(), weights.sum()),
        "next_sentence_loss": (nsp_per_example.sum(), BATCH),
        "next_sentence_accuracy": (nsp_correct.sum(), BATCH),
        "loss": (mlm_loss + nsp_per_example.mean(), 1.0),
    }
    for name, (total_value, count) in expected.items():
        got_sum, got_count = metrics[name]
        assert got_sum.dtype == tf.float32 and got_count.dtype == tf.float32
        np.testing.assert_allclose(got_sum, total_value, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(got_count, count, err_msg=name)


def test_loss_weight_and_recombined_objectives():
    """Objectives are parts: an ALBERT-style sentence-order objective is the
    NSP objective reading another label, and loss weights scale the total."""
    encoder = BertEncoder.from_config_object(CONFIG)
    mlm = MaskedLMObjective.from_config_object(CONFIG)
    sop = NextSentenceObjective.from_config_object(
        CONFIG,
        label_feature="sentence_order_labels",
        metric_prefix="sentence_order",
        loss_weight=0.5,
    )
    model = BertPretrainer(encoder, [mlm, sop])
    features = make_features(np.random.default_rng(7))
    features["sentence_order_labels"] = features.pop("next_sentence_labels")[:, 0]
    total, metrics = model.compute_loss_and_metrics(features)
    assert "sentence_order_accuracy" in metrics and "next_sentence_loss" not in metrics
    sop_loss = metrics["sentence_order_loss"][0] / metrics["sentence_order_loss"][1]
    mlm_loss = metrics["masked_lm_loss"][0] / (metrics["masked_lm_loss"][1] + 1e-5)
    np.testing.assert_allclose(total, mlm_loss + 0.5 * sop_loss, rtol=1e-5)
    with pytest.raises(ValueError, match="unique"):
        BertPretrainer(encoder, [mlm, MaskedLMObjective.from_config_object(CONFIG)])


def test_head_weights_reachable_at_documented_paths(pretrainer):
    mlm = pretrainer.get_objective("masked_lm").head
    nsp = pretrainer.get_objective("next_sentence").head
    assert pretrainer.objectives[0].head is mlm
    assert tuple(mlm.transform_dense.kernel.shape) == (HIDDEN, HIDDEN)
    assert tuple(mlm.transform_layer_norm.gamma.shape) == (HIDDEN,)
    assert tuple(mlm.output_bias.shape) == (VOCAB,)
    # Google's cls/seq_relationship/output_weights is [2, hidden]: transpose.
    assert tuple(nsp.dense.kernel.shape) == (HIDDEN, 2)
    assert tuple(nsp.dense.bias.shape) == (2,)


def test_sparse_cross_entropy_equals_the_fused_kernel_in_value_and_gradient():
    """One softmax instead of TensorFlow's fused kernel: same losses, same gradients.

    float64 references; rows whose label is very unlikely (loss > 69) take
    the exact log-sum-exp branch; shapes [batch, P, vocab] and bf16 logits.
    """
    from modeling.objectives import sparse_cross_entropy
    rng = np.random.RandomState(7)
    logits = rng.randn(3, 5, 50).astype("float32") * 4
    labels = rng.randint(0, 50, size=(3, 5)).astype("int32")
    logits[0, 0, labels[0, 0]] = -200.0  # p(label) ~ e^-200: the exact branch
    logits[1, 2, :] = 0.0                # uniform row
    logits[2, 4, labels[2, 4]] = 60.0    # p(label) ~ 1
    weights = rng.rand(3, 5).astype("float32")

    def reference(x):
        x = x.astype("float64")
        lse = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)
        loss = lse - np.take_along_axis(x, labels[..., None], -1)[..., 0]
        probs = np.exp(x - lse[..., None])
        onehot = np.eye(50)[labels]
        return loss, weights[..., None] * (probs - onehot)

    want_loss, want_grad = reference(logits)
    for compile_mode in (False, True):
        @tf.function(jit_compile=compile_mode)
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = sparse_cross_entropy(x, labels)
                total = tf.reduce_sum(weights * loss)
            return loss, tape.gradient(total, x)
        loss, grad = run(tf.constant(logits))
        assert loss.dtype == tf.float32 and loss.shape == (3, 5)
        np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-6, atol=2e-6)
        assert loss.numpy()[0, 0] > 190  # not clipped at -log(1e-30)
        np.testing.assert_allclose(grad.numpy(), want_grad, atol=1e-6)
        fused = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        np.testing.assert_allclose(loss.numpy(), fused.numpy(), rtol=1e-6, atol=2e-6)
    # bf16 logits are scored in float32.
    bf16 = tf.cast(tf.constant(logits), tf.bfloat16)
    loss = sparse_cross_entropy(bf16, labels)
    assert loss.dtype == tf.float32
    np.testing.assert_allclose(
        loss.numpy(), reference(tf.cast(bf16, tf.float32).numpy())[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError):
        sparse_cross_entropy(tf.constant(logits), np.full((3, 5), 50, "int32"))
