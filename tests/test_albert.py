"""Tests of modeling/albert.py, AlbertConfig and load_albert_checkpoint."""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.albert import AlbertEncoder
from modeling.recipes import build_albert_pretrainer
from modeling.checkpoints import (
    CheckpointMismatchError,
    init_from_checkpoint,
    load_albert_checkpoint,
)
from modeling.albert.config import AlbertConfig, load_albert_config

V, E, H, L, HEADS, I, P, T = 50, 8, 16, 3, 2, 32, 16, 2


def tiny_config(**overrides):
    values = dict(vocab_size=V, embedding_size=E, hidden_size=H, num_hidden_layers=L,
                  num_attention_heads=HEADS, intermediate_size=I,
                  max_position_embeddings=P, type_vocab_size=T)
    values.update(overrides)
    return AlbertConfig(**values)


def random_inputs(batch=2, seq=7, seed=0, pad_last=2):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V, size=(batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    if pad_last:
        mask[1, -pad_last:] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[:, seq // 2:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


# ------------------------------------------------------------------ config


def test_config_json_round_trip_unknown_keys_and_presets(tmp_path):
    released = {  # albert_base v2's albert_config.json
        "attention_probs_dropout_prob": 0, "hidden_act": "gelu",
        "hidden_dropout_prob": 0, "embedding_size": 128, "hidden_size": 768,
        "initializer_range": 0.02, "intermediate_size": 3072,
        "max_position_embeddings": 512, "num_attention_heads": 12,
        "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0,
        "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1,
        "down_scale_factor": 1, "type_vocab_size": 2, "vocab_size": 30000,
    }
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(released))
    config = load_albert_config(tmp_path)
    assert config.embedding_size == 128 and config.hidden_size == 768
    assert config.extra == {"gap_size": 0, "num_memory_blocks": 0}
    assert config == AlbertConfig.from_preset("albert_base", gap_size=0,
                                              num_memory_blocks=0)
    out = tmp_path / "out.json"
    config.to_json_file(out)
    assert json.loads(out.read_text()) == released
    assert AlbertConfig.from_json_file(out) == config
    # ALBERT's own defaults are albert_xxlarge.
    assert AlbertConfig(vocab_size=30000) == AlbertConfig.from_preset("albert_xxlarge")
    sizes = {name: (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                    c.intermediate_size, c.embedding_size)
             for name in ("albert_base", "albert_large", "albert_xlarge",
                          "albert_xxlarge")
             for c in [AlbertConfig.from_preset(name)]}
    assert sizes == {"albert_base": (768, 12, 12, 3072, 128),
                     "albert_large": (1024, 24, 16, 4096, 128),
                     "albert_xlarge": (2048, 24, 16, 8192, 128),
                     "albert_xxlarge": (4096, 12, 64, 16384, 128)}
    with pytest.raises(ValueError):
        AlbertConfig(vocab_size=10, hidden_size=10, num_attention_heads=3)


# ------------------------------------------------------------ param counts


def _counts(v, e, h, inter, positions, types, layers):
    emb = v * e + positions * e + types * e + 2 * e
    proj = e * h + h if e != h else 0
    att = 4 * (h * h + h) + 2 * h
    ffn = h * inter + inter + inter * h + h + 2 * h
    pool = h * h + h
    base = emb + proj + pool
    return {"all": base + att + ffn, "attention": base + att + layers * ffn,
            "ffn": base + layers * att + ffn, "none": base + layers * (att + ffn)}


def test_albert_base_has_12m_parameters():
    config = AlbertConfig.from_preset("albert_base")
    encoder = AlbertEncoder.from_config_object(config)  # weights only, no call
    embeddings = 30000 * 128 + 512 * 128 + 2 * 128 + 2 * 128
    mapping = 128 * 768 + 768
    block = (4 * (768 * 768 + 768) + 2 * (2 * 768)
             + 768 * 3072 + 3072 + 3072 * 768 + 768)
    pooler = 768 * 768 + 768
    expected = embeddings + mapping + block + pooler
    assert expected == 11_683_584
    assert encoder.count_params() == expected
    assert 11.5e6 < encoder.count_params() < 12.5e6
    assert expected == _counts(30000, 128, 768, 3072, 512, 2, 12)["all"]


@pytest.mark.parametrize("mode", ["all", "attention", "ffn", "none"])
def test_sharing_modes_parameter_counts(mode):
    encoder = AlbertEncoder.from_config_object(tiny_config(), share_parameters=mode)
    assert encoder.count_params() == _counts(V, E, H, I, P, T, L)[mode]
    ids = {id(v) for v in encoder.weights}
    assert len(ids) == len(encoder.weights)          # each variable listed once
    paths = [v.path for v in encoder.weights]
    assert len(set(paths)) == len(paths)             # unique paths (checkpoints)
    expected_sublayers = {"all": (1, 1), "attention": (1, L), "ffn": (L, 1),
                          "none": (L, L)}[mode]
    assert (len(encoder.attention_sublayers), len(encoder.ffn_sublayers)) == \
        expected_sublayers


def test_groups_follow_albert_formula():
    encoder = AlbertEncoder.from_config_object(tiny_config(num_hidden_layers=4,
                                                           num_hidden_groups=2))
    assert [encoder.sublayer_indices(i) for i in range(4)] == [(0, 0), (0, 0),
                                                               (1, 1), (1, 1)]
    assert len(encoder.attention_sublayers) == 2
    with pytest.raises(ValueError):
        AlbertEncoder.from_config_object(tiny_config(num_hidden_groups=2),
                                         share_parameters="none")


# ----------------------------------------------------------------- behaviour


def test_output_shapes_and_contract():
    encoder = AlbertEncoder.from_config_object(tiny_config())
    outputs = encoder(random_inputs(), output_attention_probs=True)
    assert outputs["sequence_output"].shape == (2, 7, H)
    assert outputs["pooled_output"].shape == (2, H)
    assert len(outputs["encoder_outputs"]) == L
    assert outputs["embedding_output"].shape == (2, 7, H)
    assert outputs["factorized_embedding_output"].shape == (2, 7, E)
    assert len(outputs["attention_probs"]) == L
    assert outputs["attention_probs"][0].shape == (2, HEADS, 7, 7)
    assert tuple(encoder.embedding_table.shape) == (V, E)


def test_shared_layers_really_share():
    encoder = AlbertEncoder.from_config_object(tiny_config())
    outputs = encoder(random_inputs())
    layer_inputs = [outputs["embedding_output"]] + outputs["encoder_outputs"][:-1]
    mask = tf.cast(random_inputs()["input_mask"], tf.float32)[:, None, :]

    def run_layer(index, hidden):
        a, f = encoder.sublayer_indices(index)
        hidden, _ = encoder.attention_sublayers[a](hidden, attention_mask=mask)
        return encoder.ffn_sublayers[f](hidden)

    for i in range(L):  # replaying layer i on its input gives its output
        np.testing.assert_allclose(run_layer(i, layer_inputs[i]),
                                   outputs["encoder_outputs"][i], atol=1e-6)
    # One variable for all layers: changing it changes every layer's mapping.
    kernel = encoder.attention_sublayers[0].attention.value.kernel
    kernel.assign(kernel + np.random.default_rng(1).normal(0, 0.5, kernel.shape)
                  .astype(np.float32))
    for i in range(L):
        delta = np.abs(run_layer(i, layer_inputs[i]) - outputs["encoder_outputs"][i])
        assert delta.max() > 1e-3, f"layer {i} did not change"
    n_kernels = sum(1 for v in encoder.weights if v.path.endswith("value/kernel"))
    assert n_kernels == 1


def test_padding_invariance_at_real_positions():
    encoder = AlbertEncoder.from_config_object(tiny_config())
    inputs = random_inputs(batch=2, seq=7, pad_last=3)
    full = encoder(inputs)["sequence_output"].numpy()
    short = {k: v[1:2, :4] for k, v in inputs.items()}
    garbage = dict(inputs)
    garbage["input_ids"] = inputs["input_ids"].copy()
    garbage["input_ids"][1, 4:] = (garbage["input_ids"][1, 4:] + 7) % V
    np.testing.assert_allclose(encoder(short)["sequence_output"].numpy()[0],
                               full[1, :4], atol=1e-5)
    np.testing.assert_allclose(encoder(garbage)["sequence_output"].numpy()[1, :4],
                               full[1, :4], atol=1e-5)


def test_get_config_round_trip():
    encoder = AlbertEncoder.from_config_object(tiny_config(), share_parameters="ffn")
    clone = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(encoder))
    assert isinstance(clone, AlbertEncoder)
    assert clone.get_config() == encoder.get_config()
    clone.set_weights(encoder.get_weights())
    inputs = random_inputs()
    np.testing.assert_allclose(clone(inputs)["sequence_output"],
                               encoder(inputs)["sequence_output"], atol=1e-6)


# ------------------------------------------------------- NumPy reference


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def reference_forward(w, inputs, layers=L, heads=HEADS):
    """ALBERT written from the paper, reading google-research/albert names."""
    ids, mask, seg = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    seq = ids.shape[1]
    x = (w["bert/embeddings/word_embeddings"][ids]
         + w["bert/embeddings/position_embeddings"][:seq][None]
         + w["bert/embeddings/token_type_embeddings"][seg])
    x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"],
                    w["bert/embeddings/LayerNorm/beta"])
    h = (x @ w["bert/encoder/embedding_hidden_mapping_in/kernel"]
         + w["bert/encoder/embedding_hidden_mapping_in/bias"])
    g = "bert/encoder/transformer/group_0/inner_group_0/"
    b, d = h.shape[0], h.shape[-1]
    size = d // heads
    adder = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0

    def proj(t, name):
        return t @ w[g + name + "/kernel"] + w[g + name + "/bias"]

    def split(t):
        return t.reshape(b, seq, heads, size).transpose(0, 2, 1, 3)

    for _ in range(layers):
        q = split(proj(h, "attention_1/self/query"))
        k = split(proj(h, "attention_1/self/key"))
        v = split(proj(h, "attention_1/self/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, seq, d)
        a = _layer_norm(proj(context, "attention_1/output/dense") + h,
                        w[g + "LayerNorm/gamma"], w[g + "LayerNorm/beta"])
        inter = _gelu_tanh(proj(a, "ffn_1/intermediate/dense"))
        h = _layer_norm(proj(inter, "ffn_1/intermediate/output/dense") + a,
                        w[g + "LayerNorm_1/gamma"], w[g + "LayerNorm_1/beta"])
    pooled = np.tanh(h[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return h, pooled


def reference_mlm_logits(w, sequence, positions):
    gathered = np.take_along_axis(sequence, positions[..., None], axis=1)
    t = _gelu_tanh(gathered @ w["cls/predictions/transform/dense/kernel"]
                   + w["cls/predictions/transform/dense/bias"])
    t = _layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                    w["cls/predictions/transform/LayerNorm/beta"])
    return t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]


def model_weights_by_name(encoder):
    """The encoder's weights under ALBERT's names, read by hand."""
    att, ffn = encoder.attention_sublayers[0], encoder.ffn_sublayers[0]
    g = "bert/encoder/transformer/group_0/inner_group_0/"
    pairs = {
        "bert/embeddings/word_embeddings": encoder.embeddings.word_embeddings,
        "bert/embeddings/position_embeddings": encoder.embeddings.position_embeddings,
        "bert/embeddings/token_type_embeddings": encoder.embeddings.token_type_embeddings,
        "bert/embeddings/LayerNorm/gamma": encoder.embeddings.layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": encoder.embeddings.layer_norm.beta,
        "bert/encoder/embedding_hidden_mapping_in/kernel": encoder.embedding_projection.kernel,
        "bert/encoder/embedding_hidden_mapping_in/bias": encoder.embedding_projection.bias,
        g + "LayerNorm/gamma": att.layer_norm.gamma,
        g + "LayerNorm/beta": att.layer_norm.beta,
        g + "ffn_1/intermediate/dense/kernel": ffn.intermediate.kernel,
        g + "ffn_1/intermediate/dense/bias": ffn.intermediate.bias,
        g + "ffn_1/intermediate/output/dense/kernel": ffn.output_dense.kernel,
        g + "ffn_1/intermediate/output/dense/bias": ffn.output_dense.bias,
        g + "LayerNorm_1/gamma": ffn.layer_norm.gamma,
        g + "LayerNorm_1/beta": ffn.layer_norm.beta,
        "bert/pooler/dense/kernel": encoder.pooler.kernel,
        "bert/pooler/dense/bias": encoder.pooler.bias,
    }
    for name, layer in (("query", att.attention.query), ("key", att.attention.key),
                        ("value", att.attention.value)):
        pairs[g + f"attention_1/self/{name}/kernel"] = layer.kernel
        pairs[g + f"attention_1/self/{name}/bias"] = layer.bias
    pairs[g + "attention_1/output/dense/kernel"] = att.attention.output_dense.kernel
    pairs[g + "attention_1/output/dense/bias"] = att.attention.output_dense.bias
    return {k: np.asarray(v.numpy(), np.float64) for k, v in pairs.items()}


def test_matches_numpy_reference():
    encoder = AlbertEncoder.from_config_object(tiny_config())
    # Non-trivial LayerNorm and bias values.
    rng = np.random.default_rng(3)
    for v in encoder.weights:
        if v.path.endswith(("gamma", "beta", "bias")):
            v.assign(rng.normal(0.5 if v.path.endswith("gamma") else 0.0, 0.2,
                                v.shape).astype(np.float32))
    inputs = random_inputs()
    outputs = encoder(inputs)
    sequence, pooled = reference_forward(model_weights_by_name(encoder), inputs)
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-5)


# ---------------------------------------------------------------- checkpoint


def albert_checkpoint_arrays(seed=7):
    rng = np.random.default_rng(seed)
    g = "bert/encoder/transformer/group_0/inner_group_0/"
    shapes = {
        "bert/embeddings/word_embeddings": (V, E),
        "bert/embeddings/position_embeddings": (P, E),
        "bert/embeddings/token_type_embeddings": (T, E),
        "bert/embeddings/LayerNorm/gamma": (E,), "bert/embeddings/LayerNorm/beta": (E,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (E, H),
        "bert/encoder/embedding_hidden_mapping_in/bias": (H,),
        g + "LayerNorm/gamma": (H,), g + "LayerNorm/beta": (H,),
        g + "ffn_1/intermediate/dense/kernel": (H, I),
        g + "ffn_1/intermediate/dense/bias": (I,),
        g + "ffn_1/intermediate/output/dense/kernel": (I, H),
        g + "ffn_1/intermediate/output/dense/bias": (H,),
        g + "LayerNorm_1/gamma": (H,), g + "LayerNorm_1/beta": (H,),
        "bert/pooler/dense/kernel": (H, H), "bert/pooler/dense/bias": (H,),
        "cls/predictions/transform/dense/kernel": (H, E),
        "cls/predictions/transform/dense/bias": (E,),
        "cls/predictions/transform/LayerNorm/gamma": (E,),
        "cls/predictions/transform/LayerNorm/beta": (E,),
        "cls/predictions/output_bias": (V,),
        "cls/seq_relationship/output_weights": (2, H),
        "cls/seq_relationship/output_bias": (2,),
    }
    for name in ("query", "key", "value"):
        shapes[g + f"attention_1/self/{name}/kernel"] = (H, H)
        shapes[g + f"attention_1/self/{name}/bias"] = (H,)
    shapes[g + "attention_1/output/dense/kernel"] = (H, H)
    shapes[g + "attention_1/output/dense/bias"] = (H,)
    arrays = {}
    for name, shape in shapes.items():
        centre = 1.0 if name.endswith("gamma") else 0.0
        arrays[name] = (centre + rng.normal(0, 0.3, shape)).astype(np.float32)
    return arrays


def write_tf1_checkpoint(arrays, prefix, slots=True):
    """Writes a name-based checkpoint the way google-research/albert does."""
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in arrays.items():
            variables.append(tf.compat.v1.get_variable(
                name, initializer=tf.constant(value)))
            if slots:
                for slot in ("adam_m", "adam_v"):
                    variables.append(tf.compat.v1.get_variable(
                        f"{name}/{slot}", initializer=tf.zeros_like(value)))
        variables.append(tf.compat.v1.train.get_or_create_global_step())
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, prefix, write_meta_graph=False)


def test_tf1_checkpoint_loads_and_matches_reference(tmp_path):
    arrays = albert_checkpoint_arrays()
    prefix = write_tf1_checkpoint(arrays, str(tmp_path / "model.ckpt-5"))
    pretrainer = build_albert_pretrainer(tiny_config())
    report = init_from_checkpoint(pretrainer, prefix)   # the --init_checkpoint path
    assert len(report.loaded) == len(arrays)
    assert any(reason == "optimizer state" for _, reason in report.skipped)

    inputs = random_inputs()
    positions = np.array([[1, 3], [0, 4]], np.int32)
    features = dict(inputs, masked_lm_positions=positions)
    outputs = pretrainer(features)
    w = {k: v.astype(np.float64) for k, v in arrays.items()}
    sequence, pooled = reference_forward(w, inputs)
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-5)
    np.testing.assert_allclose(outputs["masked_lm_logits"],
                               reference_mlm_logits(w, sequence, positions), atol=1e-4)
    sop = pooled @ w["cls/seq_relationship/output_weights"].T \
        + w["cls/seq_relationship/output_bias"]
    np.testing.assert_allclose(outputs["sentence_order_logits"], sop, atol=1e-5)

    # The bare encoder loads the same checkpoint, skipping the heads.
    encoder = AlbertEncoder.from_config_object(tiny_config())
    report = load_albert_checkpoint(encoder, prefix)
    assert ("cls/predictions/output_bias", "head not in the model") in report.skipped
    np.testing.assert_allclose(encoder(inputs)["sequence_output"], sequence, atol=1e-5)


def test_tf1_checkpoint_mismatch_lists_everything(tmp_path):
    arrays = albert_checkpoint_arrays()
    g = "bert/encoder/transformer/group_0/inner_group_0/"
    del arrays[g + "LayerNorm_1/beta"]
    arrays["bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma"] = \
        np.ones(H, np.float32)
    arrays["bert/pooler/dense/bias"] = np.zeros(H + 1, np.float32)
    prefix = write_tf1_checkpoint(arrays, str(tmp_path / "bad.ckpt"), slots=False)
    encoder = AlbertEncoder.from_config_object(tiny_config())
    before = [v.numpy().copy() for v in encoder.weights]
    with pytest.raises(CheckpointMismatchError) as error:
        load_albert_checkpoint(encoder, prefix)
    assert [n for n, _ in error.value.missing] == [g + "LayerNorm_1/beta"]
    assert [n for n, _ in error.value.unexpected] == [
        "bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma"]
    assert error.value.mismatched == [("bert/pooler/dense/bias", (H + 1,), (H,))]
    for old, v in zip(before, encoder.weights):   # nothing was assigned
        np.testing.assert_array_equal(old, v.numpy())
    with pytest.raises(ValueError):
        load_albert_checkpoint(
            AlbertEncoder.from_config_object(tiny_config(), share_parameters="none"),
            prefix)


# ---------------------------------------------------------------- training


def test_pretrainer_mlm_sop_loss_falls():
    keras.utils.set_random_seed(0)
    config = tiny_config()
    pretrainer = build_albert_pretrainer(config)
    rng = np.random.default_rng(0)
    batch, seq, preds = 8, 12, 3
    features = random_inputs(batch=batch, seq=seq, pad_last=0)
    features.update(
        masked_lm_positions=rng.integers(1, seq, (batch, preds)).astype(np.int32),
        masked_lm_ids=rng.integers(0, V, (batch, preds)).astype(np.int32),
        masked_lm_weights=np.ones((batch, preds), np.float32),
        next_sentence_labels=rng.integers(0, 2, (batch, 1)).astype(np.int32),
    )
    optimizer = keras.optimizers.Adam(learning_rate=1e-2)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss, metrics = pretrainer.compute_loss_and_metrics(features, training=True)
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        optimizer.apply_gradients(zip(grads, pretrainer.trainable_variables))
        return loss, metrics

    first, metrics = step()
    assert {"masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss",
            "sentence_order_accuracy", "loss"} <= set(metrics)
    for _ in range(30):
        last, _ = step()
    assert float(last) < 0.6 * float(first)


@pytest.mark.parametrize("overrides,mode", [
    ({}, "attention"), ({}, "ffn"), ({}, "none"),
    ({"embedding_size": H}, "all"),              # no projection when E == H
    ({"inner_group_num": 2}, "all"),
])
def test_other_structures_run(overrides, mode):
    encoder = AlbertEncoder.from_config_object(tiny_config(**overrides),
                                               share_parameters=mode)
    assert (encoder.embedding_projection is None) == (encoder.embedding_size == H)
    outputs = encoder(random_inputs(), output_attention_probs=True)
    assert outputs["sequence_output"].shape == (2, 7, H)
    assert len(outputs["encoder_outputs"]) == L
    assert len(outputs["attention_probs"]) == L * encoder.inner_group_num
    assert np.all(np.isfinite(outputs["sequence_output"]))
