"""bilm-tf's ELMo biLM in float64 NumPy, from its options dict and `weights.hdf5` arrays.

Written from allenai/bilm-tf's `bilm/model.py` (`BidirectionalLanguageModelGraph`:
`_build_word_char_embeddings`, `_build_lstms`) and TF1's
`tf.nn.rnn_cell.LSTMCell` / `ResidualWrapper` / `dynamic_rnn`, not from this
project's layers: it reads nothing but the options and the arrays under
their names in the file, so it checks any loader of those files.

    layers = bilm_tf_forward(options, arrays, char_ids)
    layers["token"]                 [batch, words, projection_dim]
    layers["forward"][l], layers["backward"][l]   [batch, words, out] per LSTM layer
    layers["clipped_cells"], layers["clipped_projections"]  how many values the
                                    clips changed (real positions only)

`char_ids` are the Batcher's (character ids + 1, 0 = a padded word slot);
`arrays["char_embed"]` is the file's (no row for id 0: bilm-tf prepends zeros).
Positions past a sentence's length are zeros, as `dynamic_rnn` leaves them.
"""

import numpy as np

__all__ = ["bilm_tf_forward"]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _char_cnn(options, arrays, char_ids):
    cnn = options["char_cnn"]
    projection_dim = options["lstm"]["projection_dim"]
    act = {"relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh}[cnn["activation"]]
    table = np.asarray(arrays["char_embed"], np.float64)
    table = np.concatenate([np.zeros((1, table.shape[1])), table], 0)   # id 0: zeros
    batch, words, chars = char_ids.shape
    x = table[char_ids.reshape(-1, chars)]                                # [N, chars, d]
    pooled = []
    for i, (width, _) in enumerate(cnn["filters"]):
        w = np.asarray(arrays["CNN/W_cnn_%d" % i], np.float64)[0]         # [width, d, n]
        b = np.asarray(arrays["CNN/b_cnn_%d" % i], np.float64)
        windows = np.stack([np.einsum("nwd,wdk->nk", x[:, k:k + width], w) + b
                            for k in range(chars - width + 1)], 1)
        pooled.append(act(windows.max(axis=1)))       # max_pool over all windows, then act
    h = np.concatenate(pooled, -1)
    n_filters = h.shape[-1]
    for i in range(cnn.get("n_highway") or 0):
        get = lambda name, i=i: np.asarray(arrays["CNN_high_%d/%s" % (i, name)], np.float64)
        carry = _sigmoid(h @ get("W_carry") + get("b_carry"))
        transform = np.maximum(h @ get("W_transform") + get("b_transform"), 0.0)
        h = carry * transform + (1.0 - carry) * h
    if n_filters != projection_dim:
        h = h @ np.asarray(arrays["CNN_proj/W_proj"], np.float64) + np.asarray(
            arrays["CNN_proj/b_proj"], np.float64)
    return h.reshape(batch, words, -1)


def _reverse(x, lengths):
    out = x.copy()
    for row, n in enumerate(lengths):
        out[row, :n] = x[row, :n][::-1]
    return out


def _lstm_layer(x, lengths, kernel, bias, projection, cell_clip, proj_clip, residual, counts):
    """`dynamic_rnn(LSTMCell(...))` from zero state; past a row's length: zeros, state kept."""
    batch, steps, _ = x.shape
    units = bias.shape[0] // 4
    out_dim = units if projection is None else projection.shape[1]
    c = np.zeros((batch, units))
    m = np.zeros((batch, out_dim))
    outputs = np.zeros((batch, steps, out_dim))
    for t in range(steps):
        live = (t < lengths)[:, None]
        z = np.concatenate([x[:, t], m], 1) @ kernel + bias
        i, j, f, o = np.split(z, 4, axis=1)
        new_c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)     # forget_bias=1.0
        if cell_clip is not None:
            counts[0] += int((live & (np.abs(new_c) > cell_clip)).sum())
            new_c = np.clip(new_c, -cell_clip, cell_clip)
        new_m = _sigmoid(o) * np.tanh(new_c)
        if projection is not None:
            new_m = new_m @ projection
            if proj_clip is not None:
                counts[1] += int((live & (np.abs(new_m) > proj_clip)).sum())
                new_m = np.clip(new_m, -proj_clip, proj_clip)
        out = new_m + x[:, t] if residual else new_m                 # ResidualWrapper
        outputs[:, t] = np.where(live, out, 0.0)
        c = np.where(live, new_c, c)
        m = np.where(live, new_m, m)
    return outputs


def bilm_tf_forward(options, arrays, char_ids):
    """bilm-tf's layers for `char_ids` `[batch, words, max_characters_per_token]` (see above)."""
    char_ids = np.asarray(char_ids)
    lstm = options["lstm"]
    lengths = (char_ids > 0).any(axis=2).sum(axis=1)
    token = _char_cnn(options, arrays, char_ids)
    counts = [0, 0]
    result = {"token": token, "forward": [], "backward": []}
    for direction, d in (("forward", 0), ("backward", 1)):
        layer_input = token if d == 0 else _reverse(token, lengths)
        for layer in range(lstm.get("n_layers", 1)):
            root = "RNN_%d/RNN/MultiRNNCell/Cell%d/LSTMCell/" % (d, layer)
            projection = None
            if lstm["projection_dim"] < lstm["dim"]:
                projection = np.asarray(arrays[root + "W_P_0"], np.float64)
            output = _lstm_layer(
                layer_input, lengths, np.asarray(arrays[root + "W_0"], np.float64),
                np.asarray(arrays[root + "B"], np.float64), projection, lstm.get("cell_clip"),
                lstm.get("proj_clip"), lstm["use_skip_connections"] and layer > 0, counts)
            result[direction].append(output if d == 0 else _reverse(output, lengths))
            layer_input = output
    result["clipped_cells"], result["clipped_projections"] = counts
    result["lengths"] = lengths
    return result
