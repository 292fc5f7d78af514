"""Every encoder and every pre-training objective through the shared harness.

Encoders: BERT (google-research/bert's modeling_test.py sizes) and ALBERT in
each sharing mode, plus ALBERT's other structures (no projection when E = H,
several blocks per layer, several groups); each is compared with the float64
NumPy reference of tests/references/bert_numpy.py. Objectives: masked LM,
next sentence, sentence order and span boundary, on the encoders they are
trained with (ALBERT's factorised embeddings change the tied heads' shapes).
See tests/harness.py for what each check asserts.
"""

import pytest

import harness
from modeling import registry
from modeling.albert import AlbertEncoder
from modeling.bert import BertEncoder
from references import bert_numpy

# google-research/bert modeling_test.py: batch 13, seq 7, vocab 99, hidden 32,
# 5 layers, 4 heads, intermediate 37, 16 token types.
BERT_ARGS = dict(vocab_size=99, hidden_size=32, num_hidden_layers=5, num_attention_heads=4,
                 intermediate_size=37, type_vocab_size=16, max_position_embeddings=64)
ALBERT_ARGS = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                   num_attention_heads=2, intermediate_size=32, max_position_embeddings=16,
                   type_vocab_size=2, hidden_act="gelu_tanh")


def bert_factory(**kwargs):
    return BertEncoder(**dict(BERT_ARGS, **kwargs))


def albert_factory(**overrides):
    def factory(**kwargs):
        return AlbertEncoder(**dict(ALBERT_ARGS, **overrides, **kwargs))
    return factory


def bert_reference(encoder, inputs):
    return bert_numpy.forward(bert_numpy.params_from_bert(encoder), **inputs,
                              num_heads=encoder.num_attention_heads,
                              activation=encoder.hidden_act)


def albert_reference(encoder, inputs):
    return bert_numpy.forward(bert_numpy.params_from_albert(encoder), **inputs,
                              num_heads=encoder.num_attention_heads,
                              activation=encoder.hidden_act)


BERT_INPUTS = harness.random_encoder_inputs(99, batch=13, seq=7, seed=1,
                                            lengths=[7] * 9 + [6, 4, 3, 2])
ALBERT_INPUTS = harness.random_encoder_inputs(50, batch=3, seq=7, lengths=[7, 5, 2], seed=2)
FACTORIZED = {"factorized_embedding_output": (ALBERT_ARGS["embedding_size"],)}

ENCODER_CASES = [harness.EncoderCase("bert", bert_factory, BERT_INPUTS, bert_reference)]
ENCODER_CASES += [
    harness.EncoderCase(
        "albert_%s" % mode, albert_factory(share_parameters=mode), ALBERT_INPUTS,
        albert_reference, extra_outputs=FACTORIZED,
        # XLA and SavedModel tracing see the same operations in every mode;
        # "all" (one block everywhere) and BERT (a block per layer) are the
        # two extremes of variable reuse, and every mode saves through the
        # config and .keras checks.
        skip=() if mode == "all" else ("jit", "saved_model"))
    for mode in ("all", "attention", "ffn", "none")
]
# The other structures only change what the encoder computes, so they get the
# checks of the computation (ALBERT "all" above covers saving, precision, ...).
STRUCTURE_CHECKS = ("reference", "shapes", "padding", "gradients")
ENCODER_CASES += [
    harness.EncoderCase(
        name, albert_factory(**overrides), ALBERT_INPUTS, albert_reference,
        extra_outputs=extra, attention_maps=attention_maps,
        skip=[c for c in harness.ENCODER_CHECKS if c not in STRUCTURE_CHECKS])
    for name, overrides, extra, attention_maps in [
        # E == H: no projection (factorized_embedding_output = embedding_output).
        ("albert_no_projection", {"embedding_size": 16}, {"factorized_embedding_output": (16,)},
         None),
        # Two blocks applied in turn in every layer.
        ("albert_inner_groups", {"inner_group_num": 2}, FACTORIZED, 6),
        # Layers 0 and 1 share group 0's block, layer 2 has group 1's.
        ("albert_groups", {"num_hidden_groups": 2}, FACTORIZED, None),
    ]
]


@pytest.mark.parametrize("case, check", harness.parametrize(ENCODER_CASES))
def test_encoder(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


# ------------------------------------------------------------------ objectives

# Objectives and encoders are built the way recipes build them: the family's
# encoder from a config, the objective from the registry.
BERT_CONFIG = registry.families.get("bert").config_class(
    **dict(BERT_ARGS, num_hidden_layers=2))
ALBERT_CONFIG = registry.families.get("albert").config_class(
    **dict(ALBERT_ARGS, hidden_act="gelu"))  # the family maps "gelu" to ALBERT's tanh GELU


def objective_factory(name, family, config):
    def factory(**kwargs):
        return registry.objectives.get(name)(config, registry.families.get(family), **kwargs)
    return factory


def encoder_factory(family, config):
    def factory(**kwargs):
        return registry.families.get(family).build_encoder(config, **kwargs)
    return factory


BERT_FEATURES = harness.random_pretraining_features(99, batch=8, seq=12, predictions=4, seed=3)
ALBERT_FEATURES = harness.random_pretraining_features(50, batch=8, seq=12, predictions=4, seed=4)
BERT_ENCODER = encoder_factory("bert", BERT_CONFIG)
ALBERT_ENCODER = encoder_factory("albert", ALBERT_CONFIG)

OBJECTIVE_CASES = [
    harness.ObjectiveCase(
        "%s/%s" % (name, family), objective_factory(name, family, config), encoder, features,
        unread_encoder_variables=unread)
    for name, family, config, encoder, features, unread in [
        # Token-level objectives read sequence_output: the pooler gets no gradient.
        ("masked_lm", "bert", BERT_CONFIG, BERT_ENCODER, BERT_FEATURES, ("pooler",)),
        ("masked_lm", "albert", ALBERT_CONFIG, ALBERT_ENCODER, ALBERT_FEATURES, ("pooler",)),
        ("span_boundary", "bert", BERT_CONFIG, BERT_ENCODER, BERT_FEATURES, ("pooler",)),
        ("span_boundary", "albert", ALBERT_CONFIG, ALBERT_ENCODER, ALBERT_FEATURES,
         ("pooler",)),
        # Sentence-level objectives read pooled_output, hence every encoder variable.
        ("next_sentence", "bert", BERT_CONFIG, BERT_ENCODER, BERT_FEATURES, ()),
        ("sentence_order", "albert", ALBERT_CONFIG, ALBERT_ENCODER, ALBERT_FEATURES, ()),
    ]
]


@pytest.mark.parametrize("case, check", harness.parametrize(OBJECTIVE_CASES))
def test_objective(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)
