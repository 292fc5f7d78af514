"""SpanBERT's span-boundary objective."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import bert as config_lib
from modeling import objectives
from modeling.objectives import span_boundary
from modeling.bert import BertEncoder


def test_span_boundaries_from_runs_of_masked_positions():
    positions = tf.constant([[2, 3, 4, 7, 9, 10, 0, 0], [1, 5, 6, 0, 0, 0, 0, 0]])
    weights = tf.constant([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]], tf.float32)
    left, right, offset = span_boundary.span_boundaries(positions, weights, 11)
    assert left.numpy()[0, :6].tolist() == [1, 1, 1, 6, 8, 8]
    assert right.numpy()[0, :6].tolist() == [5, 5, 5, 8, 10, 10]  # 11 clipped to 10
    assert offset.numpy()[0, :6].tolist() == [0, 1, 2, 0, 0, 1]
    assert left.numpy()[1, :3].tolist() == [0, 4, 4]
    assert right.numpy()[1, :3].tolist() == [2, 7, 7]
    assert offset.numpy()[1, :3].tolist() == [0, 0, 1]


def _gelu(x):
    from math import erf  # pylint: disable=g-import-not-at-top
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("position_size", [None, 3])
def test_objective_matches_numpy(position_size):
    # position_size 3: the authors' separate width (200 for BERT-large) of p(i - s).
    keras.utils.set_random_seed(2)
    vocab, hidden = 23, 8
    objective = span_boundary.SpanBoundaryObjective(vocab_size=vocab, hidden_size=hidden,
                                                    max_span_length=5,
                                                    position_embedding_size=position_size)
    table = np.random.RandomState(0).normal(size=(vocab, hidden)).astype("float32")

    class FakeEncoder:
        embedding_table = tf.constant(table)

    objective.attach(FakeEncoder())
    seq = np.random.RandomState(1).normal(size=(2, 9, hidden)).astype("float32")
    features = {"masked_lm_positions": tf.constant([[3, 4, 6, 0], [1, 2, 3, 4]]),
                "masked_lm_weights": tf.constant([[1, 1, 1, 0], [1, 1, 1, 1]], tf.float32),
                "masked_lm_ids": tf.constant([[5, 6, 7, 0], [1, 2, 3, 4]])}
    result = objective({"sequence_output": tf.constant(seq)}, features)
    head = objective.head
    pos_emb = head.position_embeddings.numpy()
    assert pos_emb.shape == (5, position_size or hidden)
    assert head.dense_1.kernel.shape == (2 * hidden + (position_size or hidden), hidden)
    w1, b1 = head.dense_1.kernel.numpy(), head.dense_1.bias.numpy()
    w2, b2 = head.dense_2.kernel.numpy(), head.dense_2.bias.numpy()
    g1, be1 = head.layer_norm_1.gamma.numpy(), head.layer_norm_1.beta.numpy()
    g2, be2 = head.layer_norm_2.gamma.numpy(), head.layer_norm_2.beta.numpy()
    bias = head.output_bias.numpy()
    spans = {0: [(3, 2, 5, 0), (4, 2, 5, 1), (6, 5, 7, 0)],
             1: [(1, 0, 5, 0), (2, 0, 5, 1), (3, 0, 5, 2), (4, 0, 5, 3)]}
    losses, weights_sum, expected_logits = 0.0, 0.0, np.zeros((2, 4, vocab), "float32")
    for b, items in spans.items():
        for j, (_, left, right, off) in enumerate(items):
            h = np.concatenate([seq[b, left], seq[b, right], pos_emb[off]])
            h = _layer_norm(_gelu(h @ w1 + b1), g1, be1)
            h = _layer_norm(_gelu(h @ w2 + b2), g2, be2)
            logits = h @ table.T + bias
            expected_logits[b, j] = logits
            label = features["masked_lm_ids"].numpy()[b, j]
            log_probs = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
            losses += -log_probs[label]
            weights_sum += 1
    got = result["outputs"]["span_boundary_logits"].numpy()
    np.testing.assert_allclose(got[0, :3], expected_logits[0, :3], atol=1e-4)
    np.testing.assert_allclose(got[1], expected_logits[1], atol=1e-4)
    np.testing.assert_allclose(result["losses"]["span_boundary_loss"].numpy(),
                               losses / (weights_sum + 1e-5), rtol=1e-4)


def test_spanbert_pretrainer_learns_spans():
    """MLM + SBO on sequences where each span repeats its left boundary token."""
    keras.utils.set_random_seed(4)
    config = config_lib.BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=64,
                                   max_position_embeddings=32, type_vocab_size=2,
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    encoder = BertEncoder.from_config_object(config)
    model = objectives.BertPretrainer(encoder, [
        objectives.MaskedLMObjective.from_config_object(config),
        span_boundary.SpanBoundaryObjective.from_config_object(config)])
    rng = np.random.RandomState(0)
    batch, seq = 16, 16

    def make_batch():
        ids = rng.randint(5, 40, size=(batch, seq)).astype("int32")
        ids[:, 0] = 2
        positions = np.zeros((batch, 3), "int32")
        labels = np.zeros((batch, 3), "int32")
        for b in range(batch):
            start = rng.randint(2, seq - 4)
            ids[b, start:start + 3] = ids[b, start - 1]   # the span copies its boundary
            positions[b] = [start, start + 1, start + 2]
            labels[b] = ids[b, start:start + 3]
            ids[b, start:start + 3] = 4                    # [MASK]
        return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
                "masked_lm_positions": positions, "masked_lm_ids": labels,
                "masked_lm_weights": np.ones((batch, 3), "float32")}

    optimizer = keras.optimizers.Adam(3e-3)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            loss, metrics = model.compute_loss_and_metrics(features, training=True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return metrics

    history = []
    for _ in range(150):
        metrics = step({k: tf.constant(v) for k, v in make_batch().items()})
        history.append({k: float(s / c) for k, (s, c) in metrics.items()})
    first, last = history[0], history[-1]
    assert "span_boundary_loss" in last and "masked_lm_loss" in last
    assert last["span_boundary_loss"] < first["span_boundary_loss"] - 1.0
    # Predicting from the boundary alone works once the head learned to copy it.
    assert np.mean([h["span_boundary_accuracy"] for h in history[-10:]]) > 0.5


def test_position_embedding_size_from_a_recipe_and_a_keras_config():
    import dataclasses  # pylint: disable=import-outside-toplevel
    from modeling import recipes  # pylint: disable=import-outside-toplevel
    recipe = dataclasses.replace(recipes.load_recipe("spanbert"), objective_options={
        "span_boundary": {"position_embedding_size": 6}})
    model = recipe.build_model(recipe.demo_config(vocab_size=50))
    head = model.get_objective("span_boundary").head
    assert tuple(head.position_embeddings.shape)[1] == 6
    again = span_boundary.SpanBoundaryObjective.from_config(
        model.get_objective("span_boundary").get_config())
    assert again.head.position_embedding_size == 6
    with pytest.raises(ValueError, match="position_embedding_size must be a positive"):
        span_boundary.SpanBoundaryObjective(vocab_size=5, hidden_size=4,
                                            position_embedding_size=0)
