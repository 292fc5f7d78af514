"""GPT through the shared harness (tests/harness.py): the network's encoder checks
(shapes, config, .keras, padding, dropout flag, gradients, mixed precision, XLA,
SavedModel, a float64 NumPy reference written here) and the causal-LM objective's
checks, built the way the gpt recipe builds them.

The reference is GPT's forward pass from the paper and OpenAI's `model.py`
(post-LN: `n = LN(x + attn(x))`, `h = LN(n + mlp(n))`, no final LayerNorm,
tanh-approximated GELU), reading nothing but the network's arrays; the
helpers (LayerNorm, GELU) are those of the GPT-2 reference.
"""

import math

import numpy as np
import pytest

import harness
from modeling import registry
from modeling.gpt import GPTNetwork
from references import gpt2_numpy

GPT_ARGS = dict(vocab_size=50, n_positions=16, n_embd=16, n_layer=3, n_head=2)


def gpt_factory(**kwargs):
    return GPTNetwork(**dict(GPT_ARGS, **kwargs))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gpt_reference(network, inputs):
    """GPT's forward pass in float64 NumPy (inference: no dropout)."""
    def arr(variable):
        return np.asarray(variable.numpy(), np.float64)

    def dense(x, layer):
        return x @ arr(layer.kernel) + arr(layer.bias)

    def norm(x, layer):
        return gpt2_numpy.layer_norm(x, arr(layer.gamma), arr(layer.beta),
                                     network.layer_norm_epsilon)

    ids = np.asarray(inputs["input_ids"])
    batch, seq = ids.shape
    mask = np.asarray(inputs.get("input_mask", np.ones((batch, seq))), np.float64)
    x = arr(network.embeddings.wte)[ids] + arr(network.embeddings.wpe)[np.arange(seq)][None]
    outputs = {"embedding_output": x}
    heads, size = network.n_head, network.n_embd // network.n_head
    allowed = np.tril(np.ones((seq, seq)))[None, None] * mask[:, None, None, :]
    adder = (1.0 - allowed) * gpt2_numpy.MASK_ADDER

    def split(t):
        return t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    encoder_outputs, attention_probs = [], []
    for block in network.transformer_layers:
        attention = block.attention_sublayer.attention
        q, k, v = (split(dense(x, layer)) for layer in
                   (attention.query, attention.key, attention.value))
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        n = norm(x + dense(context, attention.output_dense), block.attention_sublayer.layer_norm)
        ffn = block.ffn_sublayer
        x = norm(n + dense(gpt2_numpy.gelu_new(dense(n, ffn.intermediate)), ffn.output_dense),
                 ffn.layer_norm)
        encoder_outputs.append(x)
        attention_probs.append(probs)
    outputs.update(sequence_output=x, encoder_outputs=encoder_outputs,
                   attention_probs=attention_probs)
    return outputs


ENCODER_CASES = [harness.EncoderCase(
    "gpt", gpt_factory,
    harness.random_encoder_inputs(vocab_size=50, batch=3, seq=7, lengths=[7, 5, 2],
                                  segments=False, seed=5),
    gpt_reference)]


@pytest.mark.parametrize("case, check", harness.parametrize(ENCODER_CASES))
def test_gpt_network(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)


FAMILY = registry.families.get("gpt")
CONFIG = FAMILY.config_class(**GPT_ARGS)


def _objective(**kwargs):
    return registry.objectives.get("causal_lm")(CONFIG, FAMILY, **kwargs)


def _network(**kwargs):
    return FAMILY.build_encoder(CONFIG, **kwargs)


FEATURES = harness.random_pretraining_features(50, batch=8, seq=12, predictions=4, seed=6)
OBJECTIVE_CASES = [harness.ObjectiveCase(
    "causal_lm/gpt", _objective, _network, FEATURES,
    # The LM head is the tied token table: no weights of the objective's own
    # for the harness's gradient check (as for GPT-2, tests/modeling/test_gpt2_harness.py).
    skip=("gradients",))]


@pytest.mark.parametrize("case, check", harness.parametrize(OBJECTIVE_CASES))
def test_causal_lm_objective_on_gpt(case, check, tmp_path):
    case.run([check], tmp_dir=tmp_path)
