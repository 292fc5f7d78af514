"""Tests for modeling.layers and what is particular to modeling.bert.

The encoder contract (shapes, NumPy reference, padding, round trips, mixed
precision, XLA, SavedModel) is checked for every family by the shared
harness in tests/modeling/test_encoders.py; here: the input forms, masks as data,
activations, the BertConfig view, documented weight paths, limits.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from harness import randomize_weights
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


def make_inputs(rng, batch=BATCH, seq=SEQ):
    input_ids = rng.integers(1, VOCAB, size=(batch, seq)).astype("int32")
    input_mask = np.ones((batch, seq), "int32")
    segment_ids = rng.integers(0, 2, size=(batch, seq)).astype("int32") * input_mask
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


@pytest.fixture(scope="module")
def encoder():
    model = BertEncoder.from_config_object(google_test_config())
    randomize_weights(model)
    return model


_erf = np.vectorize(math.erf)


# --------------------------------------------------------------------- tests


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


def test_bert_config_view_round_trips(encoder):
    assert encoder.bert_config() == google_test_config()
    rebuilt = BertEncoder.from_config_object(encoder.bert_config())
    assert rebuilt.get_config() == encoder.get_config()


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


def test_too_long_sequence_is_rejected():
    model = BertEncoder.from_config_object(google_test_config(num_hidden_layers=1))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(np.ones((1, 65), "int32"))
