"""bilm-tf's released ELMo files (`options.json` + `weights.hdf5`) load with bilm-tf's outputs.

Each module fixture writes a tiny random biLM in bilm-tf's layout with h5py
(the dataset names and shapes of bilm-tf's `dump_weights`, written here
from its table, not from `modeling.elmo.bilm_tf`) and an options file as
AllenNLP publishes them (no `n_tokens_vocab`). The network loaded by
`modeling.elmo.bilm_tf.from_bilm_tf` must give, on every real word, the
layers of `tests/references/elmo_bilm_tf_numpy.py` (bilm-tf's graph in
float64 NumPy) within 1e-4: the token layer and each LSTM layer of both
directions. The weights are scaled up so that `cell_clip` and `proj_clip`
change many values (asserted).
"""

import json
import os
import shutil

import h5py
import numpy as np
import pytest

from data import word_vocab as vocabulary
from modeling.elmo import ElmoConfig
from modeling.elmo import ElmoConfigError
from modeling.elmo import ElmoNetwork
from modeling.elmo import bilm_tf
from references.elmo_bilm_tf_numpy import bilm_tf_forward

OPTIONS = {  # bilm-tf's keys only, as released
    "lstm": {"use_skip_connections": True, "projection_dim": 8, "cell_clip": 1.0,
             "proj_clip": 0.5, "dim": 16, "n_layers": 2},
    "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 4], [3, 8]], "n_highway": 2,
                 "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 12},
}
# No projections anywhere (filters count projection_dim, projection_dim = dim), tanh,
# no skip connections, one highway layer.
PLAIN = {
    "lstm": {"use_skip_connections": False, "projection_dim": 12, "cell_clip": 2.0,
             "proj_clip": 0.1, "dim": 12, "n_layers": 2},
    "char_cnn": {"activation": "tanh", "filters": [[1, 4], [2, 8]], "n_highway": 1,
                 "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 10},
}
SENTENCES = [["The", "baker", "opens", "the", "internationalisation", "shop", "."],
             ["面包", "o'clock", "!"]]


def bilm_tf_datasets(options, seed, scale=1.0):
    """Random arrays under bilm-tf's dataset names and shapes (its `dump_weights` output)."""
    rng = np.random.RandomState(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    d = cnn["embedding"]["dim"]
    n = sum(count for _, count in cnn["filters"])
    p, units = lstm["projection_dim"], lstm["dim"]

    def normal(*shape, std=1.0):
        return (rng.normal(size=shape) * std).astype(np.float32)

    out = {"char_embed": rng.uniform(-1, 1, size=(cnn["n_characters"] - 1, d)).astype(np.float32)}
    for i, (width, count) in enumerate(cnn["filters"]):
        out["CNN/W_cnn_%d" % i] = normal(1, width, d, count, std=0.5)
        out["CNN/b_cnn_%d" % i] = normal(count, std=0.1)
    for i in range(cnn.get("n_highway") or 0):
        out["CNN_high_%d/W_carry" % i] = normal(n, n, std=n ** -0.5)
        out["CNN_high_%d/b_carry" % i] = normal(n, std=0.5)
        out["CNN_high_%d/W_transform" % i] = normal(n, n, std=n ** -0.5)
        out["CNN_high_%d/b_transform" % i] = normal(n, std=0.1)
    if n != p:
        out["CNN_proj/W_proj"] = normal(n, p, std=n ** -0.5)
        out["CNN_proj/b_proj"] = normal(p, std=0.1)
    out_dim = p if p < units else units
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            root = "RNN_%d/RNN/MultiRNNCell/Cell%d/LSTMCell/" % (direction, layer)
            in_dim = p if layer == 0 else out_dim
            out[root + "W_0"] = normal(in_dim + out_dim, 4 * units, std=scale / in_dim ** 0.5)
            out[root + "B"] = normal(4 * units, std=0.5 * scale)
            if p < units:
                out[root + "W_P_0"] = normal(units, p, std=scale / units ** 0.5)
    return out


def write_folder(folder, options, arrays):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "options.json"), "w", encoding="utf-8") as f:
        json.dump(options, f)
    with h5py.File(os.path.join(folder, "weights.hdf5"), "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
    return folder


def batcher_ids(sentences, max_chars):
    """bilm-tf's `Batcher.batch_sentences`: <S> words </S>, character ids + 1, 0-padded."""
    words = max(len(s) for s in sentences) + 2
    ids = np.zeros([len(sentences), words, max_chars], np.int32)
    for row, sentence in enumerate(sentences):
        for t, word in enumerate([vocabulary.BOS] + sentence + [vocabulary.EOS]):
            ids[row, t] = vocabulary.word_char_ids(word, max_chars)
    return ids


def run(network, char_ids):
    outputs = network({"char_ids": char_ids}, training=False)
    return {"token": np.asarray(outputs["token_embeddings"]),
            "forward": [np.asarray(x) for x in outputs["forward_outputs"]],
            "backward": [np.asarray(x) for x in outputs["backward_outputs"]],
            "elmo_layers": [np.asarray(x) for x in outputs["elmo_layers"]]}


def assert_layers_match(ours, reference, lengths, atol=1e-4):
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(ours["token"][row, :n], reference["token"][row, :n],
                                   atol=atol, err_msg="token layer, sentence %d" % row)
        for direction in ("forward", "backward"):
            assert len(ours[direction]) == len(reference[direction])
            for layer, (a, b) in enumerate(zip(ours[direction], reference[direction])):
                np.testing.assert_allclose(a[row, :n], b[row, :n], atol=atol,
                                           err_msg="%s layer %d, sentence %d"
                                           % (direction, layer, row))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """(folder, arrays, network loaded from the folder)."""
    folder = str(tmp_path_factory.mktemp("elmo_bilm_tf"))
    arrays = bilm_tf_datasets(OPTIONS, seed=0, scale=3.0)
    write_folder(folder, OPTIONS, arrays)
    return folder, arrays, bilm_tf.from_bilm_tf(folder)


@pytest.fixture(scope="module")
def char_ids():
    return batcher_ids(SENTENCES, OPTIONS["char_cnn"]["max_characters_per_token"])


def test_every_layer_equals_bilm_tf_and_the_clips_bite(released, char_ids):
    folder, arrays, network = released
    assert (network.lstm_cell, network.char_pooling) == ("lstmp", "padded")
    assert (network.cell_clip, network.proj_clip, network.n_layers) == (1.0, 0.5, 2)
    reference = bilm_tf_forward(OPTIONS, arrays, char_ids)
    lengths = reference["lengths"]
    assert list(lengths) == [9, 5]
    ours = run(network, char_ids)
    assert_layers_match(ours, reference, lengths)
    # ELMo's layers: the token layer twice, then forward | backward of each layer.
    np.testing.assert_allclose(ours["elmo_layers"][0][0, :9, 8:], reference["token"][0, :9],
                               atol=1e-4)
    np.testing.assert_allclose(ours["elmo_layers"][2][1, :5, 8:],
                               reference["backward"][1][1, :5], atol=1e-4)
    # The clips changed many values, and without them the numbers are others.
    cells = sum(2 * 16 * n for n in lengths) * 2
    assert reference["clipped_cells"] > 0.1 * cells, reference["clipped_cells"]
    assert reference["clipped_projections"] > 0.1 * cells / 2, reference["clipped_projections"]
    unclipped = dict(OPTIONS, lstm=dict(OPTIONS["lstm"], cell_clip=None, proj_clip=None))
    free = bilm_tf_forward(unclipped, arrays, char_ids)
    for direction in ("forward", "backward"):
        for layer in range(2):
            gap = np.abs(free[direction][layer][0, :9] - reference[direction][layer][0, :9])
            assert gap.max() > 0.05, (direction, layer, gap.max())
    # Each clip alone moves the network's outputs (it is applied, not just configured).
    for changes in ({"cell_clip": None}, {"proj_clip": None}):
        other = ElmoNetwork.from_config_object(network.config_object(ElmoConfig).replace(
            **changes))
        for a, b in zip(other.weights, network.weights):
            a.assign(b)
        moved = run(other, char_ids)
        assert np.abs(moved["forward"][1][0, :9] - ours["forward"][1][0, :9]).max() > 1e-2, \
            changes


def test_without_projections_tanh_and_no_skip_connections(tmp_path, char_ids):
    arrays = bilm_tf_datasets(PLAIN, seed=1, scale=3.0)
    assert "CNN_proj/W_proj" not in arrays and not any(k.endswith("W_P_0") for k in arrays)
    folder = write_folder(str(tmp_path / "plain"), PLAIN, arrays)
    network = bilm_tf.from_bilm_tf(folder)
    assert network.char_encoder.projection is None
    assert all(lstm.projection is None for lstm in network.forward_lstms)
    ids = batcher_ids(SENTENCES, PLAIN["char_cnn"]["max_characters_per_token"])
    reference = bilm_tf_forward(PLAIN, arrays, ids)
    assert reference["clipped_cells"] > 0
    assert_layers_match(run(network, ids), reference, reference["lengths"])


def test_padding_characters_count_as_in_bilm_tf(released):
    """bilm-tf pools over the padding ids too: a longer max_characters_per_token changes a
    word's vector, and the network follows the reference on both."""
    folder, arrays, network = released
    wide_options = dict(OPTIONS, char_cnn=dict(OPTIONS["char_cnn"], max_characters_per_token=20))
    wide = bilm_tf.from_bilm_tf(write_folder(folder + "_wide", wide_options, arrays))
    ids = batcher_ids(SENTENCES, 20)
    reference = bilm_tf_forward(wide_options, arrays, ids)
    assert_layers_match(run(wide, ids), reference, reference["lengths"])
    narrow = run(network, batcher_ids(SENTENCES, 12))["token"]
    assert np.abs(narrow[0, :9] - reference["token"][0, :9]).max() > 1e-3


def test_written_files_are_the_read_ones(released, char_ids, tmp_path):
    folder, arrays, network = released
    out = bilm_tf.save_bilm_tf(network, str(tmp_path / "out"))
    with h5py.File(os.path.join(out, "weights.hdf5"), "r") as f:
        names = []
        f.visititems(lambda name, item: names.append(name) if hasattr(item, "shape") else None)
        assert sorted(names) == sorted(arrays)
        for name, array in arrays.items():
            np.testing.assert_array_equal(f[name][...], array, err_msg=name)
    written = json.loads(open(os.path.join(out, "options.json"), encoding="utf-8").read())
    for part in ("lstm", "char_cnn"):
        assert {k: written[part][k] for k in OPTIONS[part]} == OPTIONS[part]
        assert set(written[part]) == set(OPTIONS[part]) | (
            {"n_layers", "cell_clip", "proj_clip"} & set(written[part]))  # no project keys
    again = bilm_tf.from_bilm_tf(out)
    for a, b in zip(run(again, char_ids)["forward"], run(network, char_ids)["forward"]):
        np.testing.assert_array_equal(a, b)


def test_options_read_as_bilm_tf_reads_them(tmp_path):
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"lstm": {"dim": 16, "projection_dim": 8,
                                         "use_skip_connections": True},
                                "char_cnn": {"filters": [[1, 4]], "embedding": {"dim": 4},
                                             "n_characters": 262, "activation": "relu",
                                             "max_characters_per_token": 50}}))
    config = bilm_tf.read_bilm_tf_options(str(path), vocab_size=100)
    # bilm-tf's `.get` defaults: one layer, no highway, no clipping.
    assert (config.n_layers, config.n_highway, config.cell_clip, config.proj_clip) == (
        1, 0, None, None)
    assert config.vocab_size == 100 and bilm_tf.read_bilm_tf_options(str(tmp_path)).vocab_size == 3
    assert bilm_tf.is_bilm_tf_folder(str(tmp_path)) is False  # no weights beside it


def _single_line(excinfo):
    message = str(excinfo.value)
    assert "\n" not in message, message
    return message


def test_bad_files_are_one_line_errors(released, tmp_path):
    folder, arrays, _ = released

    def broken(name, arrays_changes=(), remove=(), options=OPTIONS):
        changed = {k: v for k, v in arrays.items() if k not in remove}
        changed.update(dict(arrays_changes))
        return write_folder(str(tmp_path / name), options, changed)

    with pytest.raises(bilm_tf.BilmTfError) as excinfo:
        bilm_tf.from_bilm_tf(broken("missing", remove=["CNN_high_1/W_carry"]))
    message = _single_line(excinfo)
    assert "missing" + os.sep + "weights.hdf5" in message
    assert "dataset CNN_high_1/W_carry is missing (expected shape [16, 16])" in message

    root = "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/"
    with pytest.raises(bilm_tf.BilmTfError) as excinfo:
        bilm_tf.from_bilm_tf(broken("shape", {root + "W_0": np.zeros((17, 64), np.float32)}))
    assert ("dataset %sW_0 has shape [17, 64], the options give [16, 64]" % root
            in _single_line(excinfo))

    deeper = {"RNN_0/RNN/MultiRNNCell/Cell2/LSTMCell/B": np.zeros(64, np.float32)}
    with pytest.raises(bilm_tf.BilmTfError) as excinfo:
        bilm_tf.from_bilm_tf(broken("deeper", deeper))
    assert "Cell2/LSTMCell/B [64] has no place in the network" in _single_line(excinfo)

    unknown = dict(OPTIONS, lstm=dict(OPTIONS["lstm"], num_proj=8))
    with pytest.raises(ElmoConfigError) as excinfo:
        bilm_tf.from_bilm_tf(broken("unknown", options=unknown))
    message = _single_line(excinfo)
    assert "unknown" + os.sep + "options.json" in message and "`num_proj`" in message

    # A failed load leaves the network as it was.
    network = ElmoNetwork.from_config_object(bilm_tf.read_bilm_tf_options(folder))
    before = [np.asarray(w) for w in network.weights]
    with pytest.raises(bilm_tf.BilmTfError):
        bilm_tf.load_bilm_tf_weights(network, os.path.join(str(tmp_path / "shape"),
                                                           "weights.hdf5"))
    for a, b in zip(before, network.weights):
        np.testing.assert_array_equal(a, np.asarray(b))

    dense = ElmoNetwork.from_config_object(bilm_tf.read_bilm_tf_options(folder).replace(
        lstm_cell="lstm_dense", cell_clip=None))
    with pytest.raises(bilm_tf.BilmTfError) as excinfo:
        bilm_tf.load_bilm_tf_weights(dense, os.path.join(folder, "weights.hdf5"))
    assert "not bilm-tf's (lstm.cell='lstm_dense'" in _single_line(excinfo)

    not_hdf5 = tmp_path / "junk"
    not_hdf5.mkdir()
    shutil.copy(os.path.join(folder, "options.json"), str(not_hdf5))
    (not_hdf5 / "weights.hdf5").write_text("not hdf5")
    with pytest.raises(bilm_tf.BilmTfError) as excinfo:
        bilm_tf.from_bilm_tf(str(not_hdf5))
    assert "not an HDF5 file" in _single_line(excinfo)


def test_classifier_init_checkpoint_reads_the_release(released, char_ids):
    """run_classifier / extract_features `--init_checkpoint`: the folder or its .hdf5."""
    from modeling.elmo import features  # pylint: disable=import-outside-toplevel
    folder, arrays, network = released
    for source in (folder, os.path.join(folder, "weights.hdf5")):
        fresh = ElmoNetwork.from_config_object(bilm_tf.read_bilm_tf_options(folder))
        assert features.load_elmo_weights(fresh, source) == len(arrays)
        np.testing.assert_array_equal(run(fresh, char_ids)["backward"][1],
                                      run(network, char_ids)["backward"][1])


def test_the_lstm_dense_variant_still_runs(char_ids):
    """The Keras-LSTM-then-Dense cell (cuDNN on a GPU) stays as an option, not bilm-tf's."""
    config = ElmoConfig.from_dict(dict(OPTIONS, n_tokens_vocab=10, lstm=dict(
        OPTIONS["lstm"], cell="lstm_dense", cell_clip=None)))
    assert config.to_dict()["lstm"]["cell"] == "lstm_dense"
    network = ElmoNetwork.from_config_object(config)
    assert len(network.forward_projections) == 2
    outputs = run(network, char_ids)
    assert outputs["forward"][0].shape == (2, 9, 8)
    assert np.abs(outputs["forward"][0]).max() <= 0.5 + 1e-6  # proj_clip on the Dense output
    assert ElmoNetwork.from_config(network.get_config()).lstm_cell == "lstm_dense"
