"""XLNet through the shared harness (tests/harness.py): the network's encoder checks
(shapes, config, .keras, padding, dropout flag, gradients, mixed precision, XLA,
SavedModel) and the permutation-LM objective's checks, built the way the xlnet
recipe builds them. The network's numbers are checked against Hugging Face's
XLNetModel in tests/modeling/xlnet/test_xlnet_network.py (its float64 reference)."""

import numpy as np
import pytest
import tensorflow as tf

import harness
from modeling import registry
from modeling.xlnet import XLNetNetwork
from modeling.xlnet import permutation

XLNET_ARGS = dict(vocab_size=50, d_model=16, n_layer=2, n_head=2, d_inner=24)


def xlnet_factory(**kwargs):
    return XLNetNetwork(**dict(XLNET_ARGS, **kwargs))


ENCODER_CASES = [
    harness.EncoderCase(
        "xlnet", xlnet_factory,
        harness.random_encoder_inputs(vocab_size=50, batch=3, seq=7, lengths=[7, 5, 2],
                                      seed=5),
        # `mask_emb` starts the query stream, which the harness's plain
        # inputs do not ask for: test_gradients_reach_every_variable below
        # runs both streams.
        skip=("gradients",)),
    harness.EncoderCase(
        "xlnet_shared_biases_clamped", lambda **kw: xlnet_factory(untie_r=False, clamp_len=3,
                                                                  **kw),
        harness.random_encoder_inputs(vocab_size=50, batch=2, seq=6, lengths=[6, 3], seed=6),
        skip=("mixed_precision", "saved_model", "keras_file", "gradients")),
]


@pytest.mark.parametrize("case, check", harness.parametrize(ENCODER_CASES))
def test_xlnet_network(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


FAMILY = registry.families.get("xlnet")
CONFIG = FAMILY.config_class(**XLNET_ARGS)


def _objective(**kwargs):
    return registry.objectives.get("permutation_lm")(CONFIG, FAMILY, **kwargs)


def _network(**kwargs):
    return FAMILY.build_encoder(CONFIG, **kwargs)


def _features(batch=8, seq=12, seed=6):
    """A permutation-LM batch as the xlnet pipeline makes it, rows of several lengths."""
    rng = np.random.default_rng(seed)
    inputs = harness.random_encoder_inputs(50, batch, seq, lengths=[seq - (b % 4)
                                                                    for b in range(batch)],
                                           segments=False, seed=seed)
    num_predict = permutation.num_predict_for(seq, 3)
    rows = [permutation.sample_permutation(rng, inputs["input_ids"][b], inputs["input_mask"][b],
                                           num_predict, k=3) for b in range(batch)]
    features = {k: np.stack([row[k] for row in rows]) for k in rows[0]}
    features.update(inputs)
    return features


FEATURES = _features()
OBJECTIVE_CASES = [harness.ObjectiveCase(
    "permutation_lm/xlnet", _objective, _network, FEATURES,
    # The summary dense layer is fine-tuning's, not the permutation LM's.
    unread_encoder_variables=("sequence_summary",))]


@pytest.mark.parametrize("case, check", harness.parametrize(OBJECTIVE_CASES))
def test_permutation_lm_objective(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


@pytest.mark.parametrize("case", ENCODER_CASES, ids=lambda case: case.name)
def test_gradients_reach_every_variable(case):
    """The harness's gradient check with both streams running: every variable,
    `mask_emb` (the query stream's start) and the summary included."""
    network = case.encoder
    inputs = _features(batch=4, seq=8, seed=7)
    with tf.GradientTape() as tape:
        outputs = network(inputs, training=False)
        target = (tf.reduce_sum(outputs["query_output"] * 0.3)
                  + tf.reduce_sum(tf.sin(outputs["sequence_output"]))
                  + tf.reduce_sum(outputs["pooled_output"] * 0.7))
    grads = tape.gradient(target, network.trainable_variables)
    dead = [v.path for v, g in zip(network.trainable_variables, grads)
            if g is None or float(tf.norm(tf.convert_to_tensor(g))) == 0.0]
    assert not dead, dead
