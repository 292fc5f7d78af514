"""What is particular to ALBERT: AlbertConfig, parameter sharing, checkpoints.

The encoder contract (shapes, NumPy reference in every sharing mode and
structure, padding, round trips, mixed precision, XLA, SavedModel) and the
MLM / sentence-order objectives are checked by the shared harness in
tests/modeling/test_encoders.py.
"""

import json

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from modeling.albert import AlbertEncoder
from modeling.recipes import build_albert_pretrainer
from modeling.checkpoints import (
    CheckpointFormatError,
    CheckpointMismatchError,
    init_from_checkpoint,
    load_albert_checkpoint,
    save_google_checkpoint,
)
from modeling.training import optimization
from modeling.training import trainer as trainer_lib
from modeling.albert.config import AlbertConfig, load_albert_config
from references import bert_numpy

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


def test_projection_only_when_widths_differ():
    # As in google-research/albert: no embedding_hidden_mapping_in when E == H.
    assert AlbertEncoder.from_config_object(tiny_config()).embedding_projection is not None
    same = AlbertEncoder.from_config_object(tiny_config(embedding_size=H))
    assert same.embedding_projection is None
    assert not any("embedding_hidden_mapping_in" in v.path for v in same.weights)
    assert same.count_params() == _counts(V, H, H, I, P, T, L)["all"]


# ------------------------------------------------------- NumPy reference


def reference_params(w, layers=L):
    """tests/references/bert_numpy params from google-research/albert names
    ("all" sharing, one group: the same block in every layer)."""
    g = "bert/encoder/transformer/group_0/inner_group_0/"

    def dense(name):
        return (w[name + "/kernel"], w[name + "/bias"])

    def norm(name):
        return (w[name + "/gamma"], w[name + "/beta"])

    block = {"query": dense(g + "attention_1/self/query"),
             "key": dense(g + "attention_1/self/key"),
             "value": dense(g + "attention_1/self/value"),
             "attention_output": dense(g + "attention_1/output/dense"),
             "attention_layer_norm": norm(g + "LayerNorm"),
             "intermediate": dense(g + "ffn_1/intermediate/dense"),
             "output": dense(g + "ffn_1/intermediate/output/dense"),
             "output_layer_norm": norm(g + "LayerNorm_1")}
    return {"word_embeddings": w["bert/embeddings/word_embeddings"],
            "position_embeddings": w["bert/embeddings/position_embeddings"],
            "token_type_embeddings": w["bert/embeddings/token_type_embeddings"],
            "embedding_layer_norm": norm("bert/embeddings/LayerNorm"),
            "embedding_projection": dense("bert/encoder/embedding_hidden_mapping_in"),
            "layers": [[block] for _ in range(layers)],
            "pooler": dense("bert/pooler/dense")}


def reference_forward(w, inputs):
    """ALBERT (tests/references/bert_numpy) reading google-research/albert names."""
    outputs = bert_numpy.forward(reference_params(w), **inputs, num_heads=HEADS,
                                 activation="gelu_tanh")
    return outputs["sequence_output"], outputs["pooled_output"]


def reference_mlm_logits(w, sequence, positions):
    gathered = np.take_along_axis(sequence, positions[..., None], axis=1)
    t = bert_numpy.gelu_tanh(gathered @ w["cls/predictions/transform/dense/kernel"]
                             + w["cls/predictions/transform/dense/bias"])
    t = bert_numpy.layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                              w["cls/predictions/transform/LayerNorm/beta"])
    return t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]


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



def _randomise(model, seed):
    """Every weight random (LayerNorm gammas around 1), so a round trip is not vacuous."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        centre = 1.0 if v.path.endswith("gamma") else 0.0
        v.assign((centre + rng.normal(0, 0.3, v.shape)).astype(np.float32))


def google_albert_names(groups=1, inner=1, projection=True):
    """google-research/albert's names for a layout, from albert_checkpoint_arrays."""
    g0 = "bert/encoder/transformer/group_0/inner_group_0/"
    names = set()
    for name in albert_checkpoint_arrays():
        if name.startswith(g0):
            names |= {name.replace(g0, f"bert/encoder/transformer/group_{g}/inner_group_{k}/")
                      for g in range(groups) for k in range(inner)}
        elif projection or "embedding_hidden_mapping_in" not in name:
            names.add(name)
    return names


def test_tf1_write_uses_googles_names_and_round_trips(tmp_path):
    keras.utils.set_random_seed(11)
    source = build_albert_pretrainer(tiny_config())
    _randomise(source, seed=12)
    prefix = save_google_checkpoint(source, str(tmp_path / "albert" / "model.ckpt-9"),
                                    global_step=9)

    listed = dict(tf.train.list_variables(prefix))
    expected = {name: list(a.shape) for name, a in albert_checkpoint_arrays().items()}
    expected["global_step"] = []
    assert listed == expected
    for name in ("bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel",
                 "bert/encoder/embedding_hidden_mapping_in/kernel",
                 "cls/predictions/transform/dense/kernel",
                 "cls/seq_relationship/output_weights"):
        assert name in listed

    # The names mean what google-research/albert means by them: the stored
    # arrays, through the reference written from the paper, give the
    # source model's outputs.
    reader = tf.train.load_checkpoint(prefix)
    w = {n: reader.get_tensor(n).astype(np.float64) for n in albert_checkpoint_arrays()}
    inputs = random_inputs()
    positions = np.array([[1, 3], [0, 4]], np.int32)
    features = dict(inputs, masked_lm_positions=positions)
    outputs = source(features, training=False)
    sequence, pooled = reference_forward(w, inputs)
    np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=1e-5)
    np.testing.assert_allclose(outputs["masked_lm_logits"],
                               reference_mlm_logits(w, sequence, positions), atol=1e-4)
    sop = pooled @ w["cls/seq_relationship/output_weights"].T \
        + w["cls/seq_relationship/output_bias"]
    np.testing.assert_allclose(outputs["sentence_order_logits"], sop, atol=1e-5)

    # Read back into a fresh pretrainer: identical outputs.
    keras.utils.set_random_seed(13)
    target = build_albert_pretrainer(tiny_config())
    report = init_from_checkpoint(target, prefix)
    assert report.format == "google_tf1"
    assert sorted(report.loaded) == sorted(albert_checkpoint_arrays())
    again = target(features, training=False)
    for key in ("sequence_output", "pooled_output", "masked_lm_logits",
                "sentence_order_logits"):
        np.testing.assert_array_equal(again[key], outputs[key])


@pytest.mark.parametrize("overrides", [
    dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    dict(embedding_size=H),                     # no embedding projection
])
def test_tf1_write_round_trips_other_layouts(tmp_path, overrides):
    config = tiny_config(**overrides)
    keras.utils.set_random_seed(21)
    source = build_albert_pretrainer(config)
    _randomise(source, seed=22)
    prefix = save_google_checkpoint(source, str(tmp_path / "model.ckpt"))
    names = {name for name, _ in tf.train.list_variables(prefix)}
    assert names == google_albert_names(config.num_hidden_groups, config.inner_group_num,
                                        projection=config.embedding_size != H)
    encoder = AlbertEncoder.from_config_object(config)   # a bare encoder: heads skipped
    report = load_albert_checkpoint(encoder, prefix)
    assert ("cls/predictions/output_bias", "head not in the model") in report.skipped
    inputs = random_inputs()
    np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                  source.encoder(inputs)["sequence_output"])


def test_formats_without_albert_names_are_refused(tmp_path):
    unshared = AlbertEncoder.from_config_object(tiny_config(), share_parameters="none")
    with pytest.raises(CheckpointFormatError, match="share_parameters='none'"):
        save_google_checkpoint(unshared, str(tmp_path / "out" / "model.ckpt"))
    assert not (tmp_path / "out").exists()
    # HF's names are read too (tests/modeling/albert/test_albert_hf.py): a safetensors file
    # holding only the word table is a mismatch listing what it lacks.
    safetensors.numpy.save_file({"embeddings.word_embeddings.weight":
                                 np.zeros((V, E), np.float32)},
                                str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointMismatchError) as error:
        init_from_checkpoint(AlbertEncoder.from_config_object(tiny_config()), str(tmp_path))
    assert "embeddings.position_embeddings.weight" in [n for n, _ in error.value.missing]


def test_trainer_checkpoint_loads_into_albert(tmp_path):
    # This project's own (object-based) checkpoints load into every family.
    rng = np.random.default_rng(1)
    features = dict(random_inputs(pad_last=0),
                    masked_lm_positions=np.array([[1, 3], [0, 4]], np.int32),
                    masked_lm_ids=rng.integers(0, V, (2, 2)).astype(np.int32),
                    masked_lm_weights=np.ones((2, 2), np.float32),
                    next_sentence_labels=np.array([[0], [1]], np.int32))
    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: build_albert_pretrainer(tiny_config()),
        lambda: optimization.create_optimizer(1e-2, 1, 0),
        model_dir=str(tmp_path), train_batch_size=2, num_train_steps=1,
        save_checkpoints_steps=1, log_steps=1)
    trainer.train(lambda input_context: tf.data.Dataset.from_tensors(features).repeat())
    keras.utils.set_random_seed(5)
    target = build_albert_pretrainer(tiny_config())
    report = init_from_checkpoint(target, str(tmp_path))
    assert report.format == "object_based"
    assert len(report.loaded) == len(target.weights)
    for a, b in zip(trainer.model.weights, target.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


# ------------------------------------------------------- schema of the files

ALBERT_BASE_V2 = {  # albert_base v2's albert_config.json
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0,
    "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
    "type_vocab_size": 2, "vocab_size": 30000,
}


def _albert_load_error(tmp_path, values):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError) as info:
        load_albert_config(str(path))
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    return message


@pytest.mark.parametrize("field", ["vocab_size", "embedding_size", "hidden_size",
                                   "num_hidden_layers", "num_attention_heads",
                                   "intermediate_size"])
def test_config_file_without_a_structural_field_is_refused(tmp_path, field):
    values = {k: v for k, v in ALBERT_BASE_V2.items() if k != field}
    message = _albert_load_error(tmp_path, values)
    assert "Invalid ALBERT config file" in message
    assert "missing required ALBERT field `%s`" % field in message


def test_config_file_unknown_keys_activation_and_model_type_are_refused(tmp_path):
    message = _albert_load_error(tmp_path, dict(ALBERT_BASE_V2, embeding_size=64))
    assert "unknown ALBERT config key `embeding_size` (did you mean `embedding_size`?)" \
        in message
    message = _albert_load_error(tmp_path, dict(ALBERT_BASE_V2, hidden_act="nonsense"))
    assert "`hidden_act` 'nonsense' is not a known activation; known: gelu" in message
    message = _albert_load_error(tmp_path, dict(ALBERT_BASE_V2, model_type="bert"))
    assert "`model_type` is 'bert', not 'albert'" in message


def test_hf_albert_config_json_loads_and_round_trips(tmp_path):
    import transformers  # pylint: disable=g-import-not-at-top
    transformers.AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=H,
                              num_hidden_layers=L, num_attention_heads=HEADS,
                              intermediate_size=I, max_position_embeddings=P
                              ).save_pretrained(str(tmp_path))
    config = load_albert_config(str(tmp_path))
    assert (config.embedding_size, config.hidden_act) == (E, "gelu_new")
    assert config.extra["model_type"] == "albert"
    out = tmp_path / "out" / "albert_config.json"
    config.to_json_file(str(out))
    assert load_albert_config(str(out)) == config
    # A typo in such a file is found too.
    hf = json.loads((tmp_path / "config.json").read_text())
    message = _albert_load_error(tmp_path, dict(hf, num_hidden_group=2))
    assert "`num_hidden_group` (did you mean `num_hidden_groups`?)" in message


def test_albert_zh_config_loads_post_ln_and_refuses_pre_ln(tmp_path):
    """brightmart/albert_zh configs carry `ln_type`; pre-LN would compute something else."""
    from modeling.albert.config import load_albert_config
    from modeling.bert.config import BertConfigError
    values = {"attention_probs_dropout_prob": 0.0, "directionality": "bidi",
              "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": 312,
              "embedding_size": 128, "initializer_range": 0.02, "intermediate_size": 1248,
              "max_position_embeddings": 512, "num_attention_heads": 12,
              "num_hidden_layers": 4, "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
              "pooler_num_fc_layers": 3, "pooler_size_per_head": 128,
              "pooler_type": "first_token_transform", "type_vocab_size": 2,
              "vocab_size": 21128, "ln_type": "postln"}
    post = tmp_path / "albert_config.json"
    post.write_text(json.dumps(values))
    assert load_albert_config(str(post)).hidden_size == 312
    pre = tmp_path / "pre.json"
    pre.write_text(json.dumps(dict(values, ln_type="preln")))
    with pytest.raises(BertConfigError, match="ln_type='preln'"):
        load_albert_config(str(pre))
