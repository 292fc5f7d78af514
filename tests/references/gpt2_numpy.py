"""GPT-2 in float64 NumPy, from plain arrays.

Written from the GPT-2 paper (Radford et al. 2019: GPT's decoder with
LayerNorm moved to the input of each sub-block, a final LayerNorm after the
last block) and OpenAI's `model.py`, not from this project's layers: the
forward pass reads nothing but the arrays of a `params` structure.

    params = {
        "wte":    [vocab, E],            token embeddings (and the LM head)
        "wpe":    [positions, E],
        "blocks": [block, ...],
        "ln_f":   (gamma [E], beta [E]),
    }
    block = {
        "ln_1", "ln_2":                           (gamma [E], beta [E]),
        "query", "key", "value", "attention_output": (kernel [E, E], bias [E]),
        "fc":                                     (kernel [E, I], bias [I]),
        "proj":                                   (kernel [I, E], bias [E]),
    }

`params_from_gpt2(network)` reads a `GPT2Network`'s variables at their
documented paths. Kernels are `[in, out]` (a dense layer is `x @ kernel +
bias`). Masking: a query sees the keys at or before it that are real; the
others get -10000 added before the softmax, the library's (and
google-research/bert's) finite adder, so that padded query rows stay
defined.
"""

import math

import numpy as np

__all__ = ["forward", "gelu_new", "layer_norm", "logits", "params_from_gpt2"]

MASK_ADDER = -10000.0


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, gamma, beta, epsilon=1e-5):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _dense(x, kernel_and_bias):
    kernel, bias = kernel_and_bias
    return x @ kernel + bias


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def params_from_gpt2(network):
    """The `params` structure of a `GPT2Network`, as float64 arrays."""
    def arr(variable):
        return np.asarray(variable.numpy(), np.float64)

    def dense(layer):
        return arr(layer.kernel), arr(layer.bias)

    def norm(layer):
        return arr(layer.gamma), arr(layer.beta)

    blocks = []
    for block in network.transformer_layers:
        attention = block.attention_sublayer.attention
        ffn = block.ffn_sublayer
        blocks.append({
            "ln_1": norm(block.attention_sublayer.layer_norm),
            "query": dense(attention.query), "key": dense(attention.key),
            "value": dense(attention.value), "attention_output": dense(attention.output_dense),
            "ln_2": norm(ffn.layer_norm), "fc": dense(ffn.intermediate),
            "proj": dense(ffn.output_dense),
        })
    return {"wte": arr(network.embeddings.wte), "wpe": arr(network.embeddings.wpe),
            "blocks": blocks, "ln_f": norm(network.ln_f)}


def forward(params, input_ids, input_mask=None, position_ids=None, *, num_heads,
            activation=gelu_new, layer_norm_epsilon=1e-5, **unused_features):
    """GPT-2's forward pass (inference: no dropout).

    Returns `{sequence_output (after ln_f), encoder_outputs (each block's
    output), embedding_output, attention_probs (one per block)}`.
    """
    input_ids = np.asarray(input_ids)
    batch, seq = input_ids.shape
    if input_mask is None:
        input_mask = np.ones((batch, seq))
    if position_ids is None:
        position_ids = np.arange(seq)[None]
    eps = layer_norm_epsilon
    x = params["wte"][input_ids] + params["wpe"][np.asarray(position_ids)]
    outputs = {"embedding_output": x}
    hidden = x.shape[-1]
    size = hidden // num_heads
    allowed = (np.tril(np.ones((seq, seq)))[None, None]
               * np.asarray(input_mask, np.float64)[:, None, None, :])
    adder = (1.0 - allowed) * MASK_ADDER

    def heads(t):
        return t.reshape(batch, seq, num_heads, size).transpose(0, 2, 1, 3)

    encoder_outputs, attention_probs = [], []
    for block in params["blocks"]:
        h = layer_norm(x, *block["ln_1"], epsilon=eps)
        q, k, v = (heads(_dense(h, block[name])) for name in ("query", "key", "value"))
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        x = x + _dense(context, block["attention_output"])
        h = layer_norm(x, *block["ln_2"], epsilon=eps)
        x = x + _dense(activation(_dense(h, block["fc"])), block["proj"])
        encoder_outputs.append(x)
        attention_probs.append(probs)
    outputs.update(sequence_output=layer_norm(x, *params["ln_f"], epsilon=eps),
                   encoder_outputs=encoder_outputs, attention_probs=attention_probs)
    return outputs


def logits(params, sequence_output):
    """Next-token logits through the tied token table."""
    return sequence_output @ params["wte"].T
