"""RoBERTa through the shared harness (tests/harness.py): the encoder's checks (shapes,
config, .keras, padding, dropout flag, gradients, mixed precision, XLA, SavedModel,
a float64 NumPy reference) with and without the pooler, and the masked-LM objective
built the way a recipe builds it. Parity with Hugging Face's RobertaModel and
RobertaForMaskedLM is checked in tests/modeling/roberta/test_roberta.py."""

import numpy as np
import pytest

import harness
from modeling import registry
from references import bert_numpy

ROBERTA_ARGS = dict(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=37, max_position_embeddings=24)
PAD = 1
FAMILY = registry.families.get("roberta")
CONFIG = FAMILY.config_class(**ROBERTA_ARGS)


def roberta_factory(**overrides):
    def factory(**kwargs):
        return FAMILY.build_encoder(CONFIG, **dict(overrides, **kwargs))
    return factory


def _inputs(batch, seq, lengths, seed):
    # The harness pads with id 0 (RoBERTa's <s>, not its pad id 1), so every
    # token counts and each row's positions are PAD + 1, PAD + 2, ...; real ids
    # avoid 1, which would hold its own position back.
    inputs = harness.random_encoder_inputs(ROBERTA_ARGS["vocab_size"], batch=batch, seq=seq,
                                           lengths=lengths, segments=False, seed=seed)
    inputs["input_ids"] = np.where(inputs["input_ids"] == PAD, 5, inputs["input_ids"])
    return inputs


def roberta_reference(encoder, inputs):
    """BERT's NumPy forward with the position table read from row PAD + 1 on."""
    assert not (np.asarray(inputs["input_ids"]) == PAD).any()
    params = bert_numpy.params_from_bert(encoder)
    params["position_embeddings"] = params["position_embeddings"][PAD + 1:]
    return bert_numpy.forward(params, **inputs, num_heads=encoder.num_attention_heads,
                              activation=encoder.hidden_act,
                              layer_norm_epsilon=encoder.layer_norm_epsilon)


ENCODER_CASES = [
    harness.EncoderCase("roberta", roberta_factory(),
                        _inputs(batch=4, seq=9, lengths=[9, 7, 4, 2], seed=11),
                        roberta_reference),
    harness.EncoderCase("roberta_no_pooler", roberta_factory(add_pooling_layer=False),
                        _inputs(batch=3, seq=7, lengths=[7, 5, 2], seed=12),
                        # The reference reads a pooler: the case above checks the numbers.
                        skip=("mixed_precision", "jit", "saved_model")),
]


@pytest.mark.parametrize("case, check", harness.parametrize(ENCODER_CASES))
def test_roberta_encoder(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


def _objective(**kwargs):
    return registry.objectives.get("masked_lm")(CONFIG, FAMILY, **kwargs)


def _features():
    features = harness.random_pretraining_features(ROBERTA_ARGS["vocab_size"], batch=8, seq=12,
                                                   predictions=4, seed=13)
    features["segment_ids"] = np.zeros_like(features["segment_ids"])  # one token type
    return features


OBJECTIVE_CASES = [harness.ObjectiveCase(
    "masked_lm/roberta", _objective, roberta_factory(), _features(),
    # The masked LM reads sequence_output: the pooler gets no gradient.
    unread_encoder_variables=("pooler",))]


@pytest.mark.parametrize("case, check", harness.parametrize(OBJECTIVE_CASES))
def test_roberta_masked_lm(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


def test_the_masked_lm_head_is_robertas():
    head = _objective().head
    assert head.hidden_act == "gelu" and head.layer_norm_epsilon == 1e-5
