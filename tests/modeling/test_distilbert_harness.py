"""DistilBERT through the shared harness (tests/harness.py): the encoder's checks (shapes,
config, .keras, padding, dropout flag, gradients, mixed precision, XLA, SavedModel,
a float64 NumPy reference) with a learned and with a fixed sinusoidal position table,
and the masked-LM objective built the way a recipe builds it. Parity with Hugging
Face's DistilBertModel and DistilBertForMaskedLM is checked in tests/modeling/distilbert/test_distilbert_hf.py.

The reference is BERT's NumPy forward (`references/bert_numpy.py`) with no
token-type term and no pooler: DistilBERT is BERT's encoder without both.
"""

import numpy as np
import pytest

import harness
from modeling import registry
from references import bert_numpy

# RoBERTa's harness size. Three layers, not two: the objective's bfloat16
# logits bound is 2u(layers + 2), and at two layers this size measured
# 0.016-0.033 over ten weight draws (BERT of the same size: 0.009-0.031)
# against 0.031, so passing would be luck; at three, 0.008-0.026 against 0.039.
DISTILBERT_ARGS = dict(vocab_size=60, dim=32, n_layers=3, n_heads=4, hidden_dim=37,
                       max_position_embeddings=24)
FAMILY = registry.families.get("distilbert")
CONFIG = FAMILY.config_class(**DISTILBERT_ARGS)
SINUSOIDAL_CONFIG = FAMILY.config_class(sinusoidal_pos_embds=True, **DISTILBERT_ARGS)


def distilbert_factory(**kwargs):
    return FAMILY.build_encoder(CONFIG, **kwargs)


def sinusoidal_factory(**kwargs):
    # The harness re-draws every weight, the frozen position table included,
    # which would leave nothing sinusoidal to check; this case re-draws the
    # others itself (randomize_scale=None below) and keeps the table the
    # encoder filled, which the reference recomputes from the formula.
    encoder = FAMILY.build_encoder(SINUSOIDAL_CONFIG, **kwargs)
    table = encoder.embeddings.position_embeddings
    filled = table.numpy()
    harness.randomize_weights(encoder)
    table.assign(filled)
    return encoder


def _inputs(batch, seq, lengths, seed):
    # No segment_ids: DistilBERT has no token types (test_segment_ids_are_ignored).
    return harness.random_encoder_inputs(DISTILBERT_ARGS["vocab_size"], batch=batch, seq=seq,
                                         lengths=lengths, segments=False, seed=seed)


def sinusoids(num_positions, width):
    """HF DistilBERT's fixed table in float64: position / 10000^(2*(j//2)/width),
    sin in even columns j, cos in odd ones."""
    angles = (np.arange(num_positions, dtype=np.float64)[:, None]
              / 10000.0 ** (2 * (np.arange(width) // 2) / width)[None, :])
    return np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))


def _forward(encoder, params, inputs):
    # The encoder has neither part: BERT's forward then adds no token-type
    # embeddings (the zero term) and returns no pooled_output.
    assert params["token_type_embeddings"] is None and params["pooler"] is None
    return bert_numpy.forward(params, **inputs, num_heads=encoder.num_attention_heads,
                              activation=encoder.hidden_act,
                              layer_norm_epsilon=encoder.layer_norm_epsilon)


def distilbert_reference(encoder, inputs):
    """BERT's NumPy forward without token types and pooler."""
    return _forward(encoder, bert_numpy.params_from_bert(encoder), inputs)


def sinusoidal_reference(encoder, inputs):
    """The same, with the position table computed here, not read from the encoder."""
    params = bert_numpy.params_from_bert(encoder)
    params["position_embeddings"] = sinusoids(encoder.max_position_embeddings,
                                              encoder.hidden_size)
    return _forward(encoder, params, inputs)


ENCODER_CASES = [
    harness.EncoderCase("distilbert", distilbert_factory,
                        _inputs(batch=4, seq=9, lengths=[9, 7, 4, 2], seed=11),
                        distilbert_reference),
    harness.EncoderCase("distilbert_sinusoidal", sinusoidal_factory,
                        _inputs(batch=3, seq=7, lengths=[7, 5, 2], seed=12),
                        sinusoidal_reference, randomize_scale=None),
]


@pytest.mark.parametrize("case, check", harness.parametrize(ENCODER_CASES))
def test_distilbert_encoder(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


def test_the_sinusoidal_table_is_frozen_and_the_learned_one_trained():
    learned, sinusoidal = (case.encoder for case in ENCODER_CASES)
    assert learned.embeddings.position_embeddings.trainable
    table = sinusoidal.embeddings.position_embeddings
    assert not table.trainable
    assert all(v is not table for v in sinusoidal.trainable_variables)


def test_segment_ids_are_ignored():
    case = ENCODER_CASES[0]
    inputs = dict(case.inputs)
    want = case.encoder(inputs, training=False)["sequence_output"]
    inputs["segment_ids"] = np.random.default_rng(3).integers(
        0, 2, size=inputs["input_ids"].shape).astype(np.int32)
    got = case.encoder(inputs, training=False)["sequence_output"]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _objective(**kwargs):
    return registry.objectives.get("masked_lm")(CONFIG, FAMILY, **kwargs)


def _features():
    features = harness.random_pretraining_features(DISTILBERT_ARGS["vocab_size"], batch=8,
                                                   seq=12, predictions=4, seed=13)
    features["segment_ids"] = np.zeros_like(features["segment_ids"])  # no token types
    return features


# No pooler: the masked LM reads sequence_output, and every encoder variable
# (the position table included) gets a gradient.
OBJECTIVE_CASES = [harness.ObjectiveCase(
    "masked_lm/distilbert", _objective, distilbert_factory, _features())]


@pytest.mark.parametrize("case, check", harness.parametrize(OBJECTIVE_CASES))
def test_distilbert_masked_lm(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


def test_the_masked_lm_head_is_distilberts():
    # HF's vocab_transform -> activation -> vocab_layer_norm (epsilon 1e-12).
    head = _objective().head
    assert head.hidden_act == "gelu" and head.layer_norm_epsilon == 1e-12
