"""Tests for modeling.layers and modeling.bert (the BERT encoder).

The central check is `test_forward_matches_numpy_reference`: an independent
NumPy implementation of BERT's forward pass (written from the paper and
google-research/bert's modeling.py, reading only the weights) must give the
same outputs. The weights are re-drawn with a large scale first so that a
wrong mask, scale, residual or LayerNorm order cannot hide in the noise.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.bert import BertEncoder
from modeling.bert.config import BertConfig
from modeling.layers import (
    MultiHeadSelfAttention,
    TransformerBlock,
    causal_attention_mask,
    gelu,
    gelu_tanh,
    get_activation,
    padding_attention_mask,
)

# google-research/bert modeling_test.py sizes.
BATCH, SEQ, VOCAB, HIDDEN, LAYERS, HEADS, INTERMEDIATE, TYPES = 13, 7, 99, 32, 5, 4, 37, 16


def google_test_config(**changes):
    values = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        type_vocab_size=TYPES,
        max_position_embeddings=64,
    )
    values.update(changes)
    return BertConfig(**values)


def make_inputs(rng, batch=BATCH, seq=SEQ, pad_from=None):
    input_ids = rng.integers(1, VOCAB, size=(batch, seq)).astype("int32")
    input_mask = np.ones((batch, seq), "int32")
    if pad_from is not None:
        # Row b has pad_from[b] real tokens.
        for b, n in enumerate(pad_from):
            input_mask[b, n:] = 0
            input_ids[b, n:] = 0
    segment_ids = rng.integers(0, 2, size=(batch, seq)).astype("int32") * input_mask
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def randomize_weights(model, seed=0, scale=0.3):
    """Large random values everywhere (LayerNorm gammas around 1)."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        values = rng.normal(0.0, scale, size=w.shape)
        if w.path.endswith("gamma"):
            values += 1.0
        w.assign(values.astype("float32"))


@pytest.fixture(scope="module")
def encoder():
    model = BertEncoder.from_config_object(google_test_config())
    randomize_weights(model)
    return model


# ----------------------------------------------------------- NumPy reference

_erf = np.vectorize(math.erf)


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def numpy_bert(model, input_ids, input_mask, segment_ids):
    """BERT forward pass in float64 NumPy from the model's weights."""
    get = lambda v: np.asarray(v.numpy(), dtype=np.float64)  # noqa: E731
    emb = model.embeddings
    batch, seq = input_ids.shape
    x = get(emb.word_embeddings)[input_ids]
    x = x + get(emb.position_embeddings)[:seq][None]
    x = x + get(emb.token_type_embeddings)[segment_ids]
    x = np_layer_norm(x, get(emb.layer_norm.gamma), get(emb.layer_norm.beta))
    embedding_output = x

    heads = model.num_attention_heads
    size = model.hidden_size // heads
    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0

    def dense(layer, h):
        return h @ get(layer.kernel) + get(layer.bias)

    def split(h):
        return h.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    layers, probs_all = [], []
    for block in model.transformer_layers:
        att = block.attention_sublayer.attention
        q, k, v = split(dense(att.query, x)), split(dense(att.key, x)), split(dense(att.value, x))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
        probs = np_softmax(scores)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        ln = block.attention_sublayer.layer_norm
        a = np_layer_norm(dense(att.output_dense, context) + x, get(ln.gamma), get(ln.beta))
        inter = np_gelu(dense(block.ffn_sublayer.intermediate, a))
        ln = block.ffn_sublayer.layer_norm
        x = np_layer_norm(dense(block.ffn_sublayer.output_dense, inter) + a, get(ln.gamma), get(ln.beta))
        layers.append(x)
        probs_all.append(probs)
    pooled = np.tanh(dense(model.pooler, x[:, 0]))
    return {
        "sequence_output": x,
        "pooled_output": pooled,
        "encoder_outputs": layers,
        "embedding_output": embedding_output,
        "attention_probs": probs_all,
    }


# --------------------------------------------------------------------- tests


def test_google_modeling_test_shapes(encoder):
    rng = np.random.default_rng(1)
    outputs = encoder(make_inputs(rng), output_attention_probs=True)
    assert outputs["sequence_output"].shape == (BATCH, SEQ, HIDDEN)
    assert outputs["pooled_output"].shape == (BATCH, HIDDEN)
    assert outputs["embedding_output"].shape == (BATCH, SEQ, HIDDEN)
    assert len(outputs["encoder_outputs"]) == LAYERS
    assert all(o.shape == (BATCH, SEQ, HIDDEN) for o in outputs["encoder_outputs"])
    assert len(outputs["attention_probs"]) == LAYERS
    for probs in outputs["attention_probs"]:
        assert probs.shape == (BATCH, HEADS, SEQ, SEQ)
        np.testing.assert_allclose(tf.reduce_sum(probs, -1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(
        outputs["sequence_output"], outputs["encoder_outputs"][-1]
    )
    # Attention probabilities are only returned on request.
    assert "attention_probs" not in encoder(make_inputs(rng))


def test_forward_matches_numpy_reference(encoder):
    rng = np.random.default_rng(2)
    lengths = rng.integers(2, SEQ + 1, size=BATCH)
    inputs = make_inputs(rng, pad_from=lengths)
    got = encoder(inputs, output_attention_probs=True)
    want = numpy_bert(encoder, **inputs)
    for key in ("sequence_output", "pooled_output", "embedding_output"):
        np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=1e-5, err_msg=key)
    for i in range(LAYERS):
        np.testing.assert_allclose(
            got["encoder_outputs"][i], want["encoder_outputs"][i], atol=1e-5, rtol=1e-5
        )
        np.testing.assert_allclose(
            got["attention_probs"][i], want["attention_probs"][i], atol=1e-5
        )
    # Padded keys get no attention.
    probs = got["attention_probs"][0].numpy()
    for b, n in enumerate(lengths):
        assert probs[b, :, :, n:].max(initial=0.0) < 1e-4


def test_appending_padding_does_not_change_real_positions(encoder):
    rng = np.random.default_rng(3)
    inputs = make_inputs(rng)
    extra = 5
    padded = {
        key: np.concatenate(
            [value, rng.integers(1, VOCAB, size=(BATCH, extra)).astype("int32")
             if key == "input_ids" else np.zeros((BATCH, extra), "int32")],
            axis=1,
        )
        for key, value in inputs.items()
    }
    short = encoder(inputs)
    long = encoder(padded)
    np.testing.assert_allclose(
        long["sequence_output"][:, :SEQ], short["sequence_output"], atol=1e-5
    )
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)
    for a, b in zip(long["encoder_outputs"], short["encoder_outputs"]):
        np.testing.assert_allclose(a[:, :SEQ], b, atol=1e-5)


def test_input_forms_and_defaults_agree(encoder):
    rng = np.random.default_rng(4)
    inputs = make_inputs(rng)
    ids, mask, segments = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    reference = encoder(inputs)["sequence_output"]
    np.testing.assert_array_equal(encoder([ids, mask, segments])["sequence_output"], reference)
    np.testing.assert_array_equal(encoder(ids, mask, segments)["sequence_output"], reference)
    # Extra features in the dict are ignored.
    with_labels = dict(inputs, next_sentence_labels=np.zeros((BATCH, 1), "int32"))
    np.testing.assert_array_equal(encoder(with_labels)["sequence_output"], reference)
    # Missing mask = all real; missing segments = all zero.
    full = encoder({"input_ids": ids, "input_mask": np.ones_like(mask),
                    "segment_ids": np.zeros_like(segments)})
    np.testing.assert_array_equal(encoder(ids)["sequence_output"], full["sequence_output"])
    # Segment ids matter.
    with_segments = encoder(ids, None, segments)["sequence_output"]
    assert np.abs(encoder(ids)["sequence_output"] - with_segments).max() > 1e-3


def test_causal_mask_is_just_data(encoder):
    """With a causal attention mask, position i ignores tokens after i."""
    rng = np.random.default_rng(5)
    ids = rng.integers(1, VOCAB, size=(2, SEQ)).astype("int32")
    changed = ids.copy()
    changed[:, 4:] = (changed[:, 4:] + 7) % VOCAB
    mask = causal_attention_mask(SEQ)
    a = encoder({"input_ids": ids, "attention_mask": tf.tile(mask, [2, 1, 1])})
    b = encoder({"input_ids": changed, "attention_mask": tf.tile(mask, [2, 1, 1])})
    np.testing.assert_allclose(a["sequence_output"][:, :4], b["sequence_output"][:, :4], atol=1e-5)
    assert np.abs(a["sequence_output"][:, 4:] - b["sequence_output"][:, 4:]).max() > 1e-2
    # Without the mask, later tokens do change earlier positions.
    c, d = encoder(ids), encoder(changed)
    assert np.abs(c["sequence_output"][:, :4] - d["sequence_output"][:, :4]).max() > 1e-2


def test_mask_helpers_and_additive_bias_equivalence():
    np.testing.assert_array_equal(
        causal_attention_mask(3)[0], [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    )
    input_mask = np.array([[1, 1, 0]], "int32")
    padding = padding_attention_mask(input_mask)
    assert padding.shape == (1, 1, 3)
    combined = padding * causal_attention_mask(3)
    np.testing.assert_array_equal(combined[0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])

    layer = MultiHeadSelfAttention(16, 2, attention_probs_dropout_prob=0.0)
    x = tf.random.stateless_normal([1, 3, 16], seed=[1, 2])
    out_mask, probs_mask = layer(x, attention_mask=combined)
    bias = (1.0 - combined[:, None]) * -10000.0
    out_bias, probs_bias = layer(x, attention_bias=bias)
    np.testing.assert_allclose(out_mask, out_bias, atol=1e-6)
    np.testing.assert_allclose(probs_mask[0, :, 0, 1:], 0.0, atol=1e-4)


def test_gelu_variants_match_their_formulas_and_differ():
    x = np.linspace(-5.0, 5.0, 201)
    exact = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    approx = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    xt = tf.constant(x, tf.float64)
    np.testing.assert_allclose(gelu(xt), exact, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gelu_tanh(xt), approx, rtol=1e-6, atol=1e-9)
    assert np.abs(exact - approx).max() > 1e-4
    np.testing.assert_allclose(get_activation("gelu")(xt), exact, rtol=1e-6, atol=1e-9)
    for name in ("gelu_new", "gelu_tanh", "GELU_NEW"):
        np.testing.assert_allclose(get_activation(name)(xt), approx, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(get_activation("relu")(xt), np.maximum(x, 0.0))
    for name in ("swish", "silu"):
        np.testing.assert_allclose(
            get_activation(name)(xt), x / (1 + np.exp(-x)), rtol=1e-6, atol=1e-9
        )
    np.testing.assert_allclose(get_activation("tanh")(xt), np.tanh(x))
    np.testing.assert_allclose(get_activation("linear")(xt), x)
    with pytest.raises(ValueError, match="mish"):
        get_activation("mish")


def test_hidden_act_is_used_by_the_feed_forward_layer():
    rng = np.random.default_rng(6)
    inputs = make_inputs(rng, batch=2)
    base = BertEncoder.from_config_object(google_test_config(num_hidden_layers=2))
    randomize_weights(base)
    other = BertEncoder.from_config_object(
        google_test_config(num_hidden_layers=2, hidden_act="relu")
    )
    other.set_weights(base.get_weights())
    assert np.abs(base(inputs)["sequence_output"] - other(inputs)["sequence_output"]).max() > 1e-3


def test_config_round_trip_gives_identical_outputs(encoder):
    rng = np.random.default_rng(7)
    inputs = make_inputs(rng, pad_from=[SEQ] * (BATCH - 1) + [3])
    config = encoder.get_config()
    clone = BertEncoder.from_config(config)
    assert clone.get_config() == config
    assert len(clone.weights) == len(encoder.weights)
    clone.set_weights(encoder.get_weights())
    np.testing.assert_array_equal(
        clone(inputs)["sequence_output"], encoder(inputs)["sequence_output"]
    )
    # The BertConfig view round-trips too.
    assert encoder.bert_config() == google_test_config()
    assert BertEncoder.from_config_object(encoder.bert_config()).get_config() == config


def test_keras_file_round_trip(encoder, tmp_path):
    rng = np.random.default_rng(8)
    inputs = make_inputs(rng)
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertEncoder)
    np.testing.assert_array_equal(
        loaded(inputs)["pooled_output"], encoder(inputs)["pooled_output"]
    )


def test_layers_config_round_trip():
    block = TransformerBlock(16, 2, 24, hidden_act="gelu_new", name="layer_0")
    clone = TransformerBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config()
    x = tf.random.stateless_normal([2, 3, 16], seed=[3, 4])
    out, _ = block(x)
    clone(x)
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(clone(x)[0], out)


def test_weights_reachable_at_documented_paths(encoder):
    """The attribute paths documented for the Google checkpoint name map."""
    emb = encoder.embeddings
    assert encoder.embedding_table is emb.word_embeddings
    assert tuple(emb.word_embeddings.shape) == (VOCAB, HIDDEN)
    assert tuple(emb.position_embeddings.shape) == (64, HIDDEN)
    assert tuple(emb.token_type_embeddings.shape) == (TYPES, HIDDEN)
    expected = {
        id(emb.word_embeddings), id(emb.position_embeddings),
        id(emb.token_type_embeddings), id(emb.layer_norm.gamma), id(emb.layer_norm.beta),
        id(encoder.pooler.kernel), id(encoder.pooler.bias),
    }
    assert len(encoder.transformer_layers) == LAYERS
    for block in encoder.transformer_layers:
        att = block.attention_sublayer.attention
        for dense in (att.query, att.key, att.value, att.output_dense):
            assert tuple(dense.kernel.shape) == (HIDDEN, HIDDEN)
            expected |= {id(dense.kernel), id(dense.bias)}
        assert tuple(block.ffn_sublayer.intermediate.kernel.shape) == (HIDDEN, INTERMEDIATE)
        assert tuple(block.ffn_sublayer.output_dense.kernel.shape) == (INTERMEDIATE, HIDDEN)
        for layer in (block.ffn_sublayer.intermediate, block.ffn_sublayer.output_dense):
            expected |= {id(layer.kernel), id(layer.bias)}
        for ln in (block.attention_sublayer.layer_norm, block.ffn_sublayer.layer_norm):
            expected |= {id(ln.gamma), id(ln.beta)}
    # The documented attributes cover every weight exactly once.
    assert expected == {id(w) for w in encoder.weights}
    assert len(encoder.weights) == 7 + 16 * LAYERS
    # LayerNorm and bias variables carry those words in their paths (weight
    # decay exclusion matches on them).
    paths = [w.path for w in encoder.weights]
    assert sum("LayerNorm" in p for p in paths) == 2 + 4 * LAYERS


def test_dropout_only_in_training(encoder):
    rng = np.random.default_rng(9)
    inputs = make_inputs(rng, batch=2)
    a = encoder(inputs, training=False)["sequence_output"]
    b = encoder(inputs, training=False)["sequence_output"]
    c = encoder(inputs, training=True)["sequence_output"]
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_too_long_sequence_is_rejected():
    model = BertEncoder.from_config_object(google_test_config(num_hidden_layers=1))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(np.ones((1, 65), "int32"))


@pytest.mark.parametrize(
    "policy, compute_dtype, atol",
    [("mixed_float16", tf.float16, 0.05), ("mixed_bfloat16", tf.bfloat16, 0.3)],
)
def test_mixed_precision_policy(encoder, policy, compute_dtype, atol):
    """Compute in half precision, variables in float32, outputs in the
    compute dtype, and close to the float32 result."""
    rng = np.random.default_rng(10)
    inputs = make_inputs(rng, pad_from=[SEQ] * (BATCH - 1) + [4])
    model = BertEncoder.from_config_object(google_test_config(), dtype=policy)
    model.set_weights(encoder.get_weights())
    assert all(w.dtype == "float32" for w in model.weights)
    outputs = model(inputs, output_attention_probs=True)
    for key in ("sequence_output", "pooled_output", "embedding_output"):
        assert outputs[key].dtype == compute_dtype, key
    assert outputs["encoder_outputs"][0].dtype == compute_dtype
    assert outputs["attention_probs"][0].dtype == compute_dtype
    reference = encoder(inputs)
    for key in ("sequence_output", "pooled_output"):
        value = tf.cast(outputs[key], tf.float32).numpy()
        assert np.isfinite(value).all()
        np.testing.assert_allclose(value, reference[key], atol=atol, err_msg=key)
