"""BERT-shaped encoders (BERT, ALBERT) in float64 NumPy, from plain arrays.

Written from the papers and google-research/bert's `modeling.py` (ALBERT:
google-research/albert's `modeling.py`), not from this project's layers: the
forward pass reads nothing but the arrays of a `params` structure, so it can
check any implementation whose weights can be put into that structure.

    params = {
        "word_embeddings":        [vocab, E],
        "position_embeddings":    [max_positions, E],
        "token_type_embeddings":  [types, E] or None,
        "embedding_layer_norm":   (gamma [E], beta [E]),
        "embedding_projection":   (kernel [E, H], bias [H]) or None,
        "layers":                 [[block, ...], ...],
        "pooler":                 (kernel [H, H], bias [H]) or None,
    }
    block = {
        "query", "key", "value", "attention_output":  (kernel [H, H], bias [H]),
        "attention_layer_norm":                      (gamma [H], beta [H]),
        "intermediate":                              (kernel [H, I], bias [I]),
        "output":                                    (kernel [I, H], bias [H]),
        "output_layer_norm":                         (gamma [H], beta [H]),
    }

BERT is `embedding_projection=None` (E = H) and one distinct block per layer.
`token_type_embeddings=None` is an encoder without token types (DistilBERT):
no segment term in the embedding sum.
ALBERT differs in data only: E < H with a projection after the embedding
LayerNorm, and the same block dict appearing in several layers (cross-layer
sharing); `layers[i]` lists the blocks layer i applies in turn (ALBERT's
`inner_group_num`). `params_from_bert` / `params_from_albert` read a Keras
encoder's variables at their documented attribute paths into this structure;
the ALBERT one derives which block each layer uses from the paper's sharing
modes and google-research/albert's group formula itself.

Kernels are `[in, out]`, so a dense layer is `x @ kernel + bias`.
"""

import math

import numpy as np

__all__ = [
    "albert_block_indices",
    "forward",
    "gelu",
    "gelu_tanh",
    "layer_norm",
    "params_from_albert",
    "params_from_bert",
    "softmax",
]

MASK_ADDER = -10000.0  # google-research/bert's additive mask value

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """Exact GELU, x * Phi(x) (google-research/bert's "gelu")."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """The tanh approximation (GPT-2, google-research/albert's "gelu")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "gelu_new": gelu_tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
}


def layer_norm(x, gamma, beta, epsilon=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _dense(x, kernel_and_bias):
    kernel, bias = kernel_and_bias
    return x @ kernel + bias


def forward(params, input_ids, input_mask=None, segment_ids=None, *, num_heads,
            activation="gelu", layer_norm_epsilon=1e-12):
    """The encoder's forward pass (inference: no dropout).

    Args:
        params: see the module docstring (float64 arrays recommended).
        input_ids: int `[batch, seq]`.
        input_mask: `[batch, seq]`, 1 real / 0 padding; default all real.
        segment_ids: int `[batch, seq]`; default all 0.
        num_heads: attention heads.
        activation: name in `ACTIVATIONS` (the feed-forward activation).

    Returns:
        `{sequence_output, encoder_outputs (one per layer), embedding_output
        (the first layer's input), attention_probs (one per block applied),
        pooled_output (when params has a pooler), factorized_embedding_output
        (when params has a projection)}`.
    """
    input_ids = np.asarray(input_ids)
    batch, seq = input_ids.shape
    if input_mask is None:
        input_mask = np.ones((batch, seq))
    if segment_ids is None:
        segment_ids = np.zeros((batch, seq), np.int64)
    act = ACTIVATIONS[activation]
    eps = layer_norm_epsilon

    x = params["word_embeddings"][input_ids] + params["position_embeddings"][:seq][None]
    if params.get("token_type_embeddings") is not None:
        x = x + params["token_type_embeddings"][np.asarray(segment_ids)]
    x = layer_norm(x, *params["embedding_layer_norm"], epsilon=eps)
    outputs = {}
    if params.get("embedding_projection") is not None:
        outputs["factorized_embedding_output"] = x
        x = _dense(x, params["embedding_projection"])
    outputs["embedding_output"] = x

    hidden = x.shape[-1]
    size = hidden // num_heads
    # Every query may attend to every real key; padded keys get -10000.
    adder = (1.0 - np.asarray(input_mask, np.float64))[:, None, None, :] * MASK_ADDER

    def heads(t):  # [batch, seq, hidden] -> [batch, heads, seq, size]
        return t.reshape(batch, seq, num_heads, size).transpose(0, 2, 1, 3)

    encoder_outputs, attention_probs = [], []
    for blocks in params["layers"]:
        for block in blocks:
            q = heads(_dense(x, block["query"]))
            k = heads(_dense(x, block["key"]))
            v = heads(_dense(x, block["value"]))
            probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
            a = layer_norm(_dense(context, block["attention_output"]) + x,
                           *block["attention_layer_norm"], epsilon=eps)
            f = _dense(act(_dense(a, block["intermediate"])), block["output"])
            x = layer_norm(f + a, *block["output_layer_norm"], epsilon=eps)
            attention_probs.append(probs)
        encoder_outputs.append(x)

    outputs.update(sequence_output=x, encoder_outputs=encoder_outputs,
                   attention_probs=attention_probs)
    if params.get("pooler") is not None:
        outputs["pooled_output"] = np.tanh(_dense(x[:, 0], params["pooler"]))
    return outputs


# ------------------------------------------------------- reading a Keras model


def _np(variable):
    return np.asarray(variable.numpy(), np.float64)


def _pair(dense):
    return (_np(dense.kernel), _np(dense.bias))


def _norm(layer_norm_layer):
    return (_np(layer_norm_layer.gamma), _np(layer_norm_layer.beta))


def _embeddings(encoder):
    emb = encoder.embeddings
    return {
        "word_embeddings": _np(emb.word_embeddings),
        "position_embeddings": _np(emb.position_embeddings),
        "token_type_embeddings": (None if emb.token_type_embeddings is None
                                  else _np(emb.token_type_embeddings)),
        "embedding_layer_norm": _norm(emb.layer_norm),
    }


def _attention_part(sublayer):
    att = sublayer.attention
    return {"query": _pair(att.query), "key": _pair(att.key), "value": _pair(att.value),
            "attention_output": _pair(att.output_dense),
            "attention_layer_norm": _norm(sublayer.layer_norm)}


def _ffn_part(sublayer):
    return {"intermediate": _pair(sublayer.intermediate),
            "output": _pair(sublayer.output_dense),
            "output_layer_norm": _norm(sublayer.layer_norm)}


def params_from_bert(encoder):
    """`params` of a `BertEncoder` (paths as documented in modeling/bert/encoder.py).

    A subclass without token types or pooler (DistilBERT) gets None for them.
    """
    params = _embeddings(encoder)
    params["embedding_projection"] = None
    params["layers"] = [
        [dict(_attention_part(block.attention_sublayer), **_ffn_part(block.ffn_sublayer))]
        for block in encoder.transformer_layers
    ]
    params["pooler"] = None if encoder.pooler is None else _pair(encoder.pooler)
    return params


def albert_block_indices(layer, inner, *, num_layers, num_groups, inner_group_num, sharing):
    """`(attention index, ffn index)` of layer `layer`'s inner block `inner`.

    "all": google-research/albert's groups, layer i in group
    `int(i / num_layers * num_groups)` (float division), each group holding
    `inner_group_num` blocks; "attention"/"ffn": that half is one module
    per inner position, the other half one per (layer, inner position);
    "none": nothing shared.
    """
    grouped = int(layer / num_layers * num_groups) * inner_group_num + inner
    own = layer * inner_group_num + inner
    attention = {"all": grouped, "attention": inner}.get(sharing, own)
    ffn = {"all": grouped, "ffn": inner}.get(sharing, own)
    return attention, ffn


def params_from_albert(encoder):
    """`params` of an `AlbertEncoder` (paths as documented in modeling/albert/encoder.py)."""
    params = _embeddings(encoder)
    projection = encoder.embedding_projection
    params["embedding_projection"] = None if projection is None else _pair(projection)
    attention = [_attention_part(s) for s in encoder.attention_sublayers]
    ffn = [_ffn_part(s) for s in encoder.ffn_sublayers]
    layers = []
    for i in range(encoder.num_hidden_layers):
        blocks = []
        for k in range(encoder.inner_group_num):
            a, f = albert_block_indices(
                i, k, num_layers=encoder.num_hidden_layers,
                num_groups=encoder.num_hidden_groups,
                inner_group_num=encoder.inner_group_num, sharing=encoder.share_parameters)
            blocks.append(dict(attention[a], **ffn[f]))
        layers.append(blocks)
    params["layers"] = layers
    params["pooler"] = _pair(encoder.pooler)
    return params
