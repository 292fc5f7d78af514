"""ELMo's parts: directions see only their side, the character CNN, the scalar mix, the tied softmax.

Every check compares against values computed here (NumPy) or against the
same network on perturbed input; tiny configs, inference mode (no dropout).
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data import corpus
from data import word_vocab as vocabulary
from modeling import recipes
from modeling import registry
from modeling.elmo import ElmoConfig
from modeling.elmo import ElmoConfigError
from modeling.elmo import ElmoNetwork
from modeling.elmo import ScalarMix
from modeling.elmo import load_elmo_config
from modeling.elmo.pipeline import ElmoPipeline
from modeling.elmo.pipeline import sentence_features
from modeling.recipes.pipelines.base import PipelineOptions

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "elmo", "vocab.txt")
WORDS = ["the", "baker", "opens", "shop", "at", "six", "in", "morning", "flour", "water",
         "salt", "yeast", "bowl", "oven", "面", "包", "a", "seven", "o'clock", "window"]


def tiny_config(**changes):
    values = dict(vocab_size=30, char_embedding_dim=8,
                  filters=[[1, 4], [2, 4], [3, 4], [4, 4], [5, 4], [6, 4], [7, 4]],
                  n_highway=1, max_characters_per_token=12, lstm_dim=16, projection_dim=8,
                  n_layers=2, proj_clip=3.0, dropout=0.0, char_pooling="word")
    values.update(changes)
    return ElmoConfig(**values)


def batch(rows, max_words=9, max_chars=12, seed=0):
    """Features for sentences given as word-index lists (indices into WORDS)."""
    rng = np.random.RandomState(seed)
    ids = np.zeros([len(rows), max_words], np.int32)
    mask = np.zeros([len(rows), max_words], np.int32)
    chars = np.zeros([len(rows), max_words, max_chars], np.int32)
    for i, row in enumerate(rows):
        for t, w in enumerate(row):
            ids[i, t] = 3 + w % 27
            mask[i, t] = 1
            chars[i, t] = vocabulary.word_char_ids(WORDS[w], max_chars)
        # Padded word slots hold garbage: the mask, not the ids, says they are padding.
        chars[i, len(row):] = rng.randint(1, 262, size=chars[i, len(row):].shape)
        ids[i, len(row):] = rng.randint(0, 30, size=max_words - len(row))
    return {"input_ids": ids, "input_mask": mask, "char_ids": chars}


@pytest.fixture(scope="module")
def model():
    import keras  # pylint: disable=g-import-not-at-top
    keras.utils.set_random_seed(1)
    return recipes.load_recipe("elmo").build_model(tiny_config())


def run(model, features):
    outputs = model.encoder(features, training=False)
    logits = model(features, training=False)
    return ({k: [np.asarray(x) for x in outputs[k]] for k in ("forward_outputs",
                                                            "backward_outputs")},
            np.asarray(logits["bidirectional_lm_forward_logits"]),
            np.asarray(logits["bidirectional_lm_backward_logits"]))


def test_forward_lm_never_sees_the_future_and_backward_lm_never_the_past(model):
    rows = [[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14]]
    base = batch(rows)
    states, fwd_logits, bwd_logits = run(model, base)
    for t in (1, 3, 5):
        # Words after t replaced: the forward LM at <= t is unchanged.
        future = batch([r[:t + 1] + [(w + 7) % 20 for w in r[t + 1:]] for r in rows])
        new_states, new_fwd, new_bwd = run(model, future)
        for layer, (a, b) in enumerate(zip(states["forward_outputs"],
                                           new_states["forward_outputs"])):
            np.testing.assert_allclose(a[:, :t + 1], b[:, :t + 1], atol=1e-6,
                                       err_msg="forward layer %d saw the future" % layer)
            assert np.abs(a[:, t + 1:] - b[:, t + 1:]).max() > 1e-3  # it does see the past
        np.testing.assert_allclose(fwd_logits[:, :t + 1], new_fwd[:, :t + 1], atol=1e-5)
        assert np.abs(bwd_logits[:, :t + 1] - new_bwd[:, :t + 1]).max() > 1e-3
        # Words before t replaced: the backward LM at >= t is unchanged.
        past = batch([[(w + 7) % 20 for w in r[:t]] + r[t:] for r in rows])
        new_states, new_fwd, new_bwd = run(model, past)
        for layer, (a, b) in enumerate(zip(states["backward_outputs"],
                                           new_states["backward_outputs"])):
            for i, row in enumerate(rows):
                np.testing.assert_allclose(a[i, t:len(row)], b[i, t:len(row)], atol=1e-6,
                                           err_msg="backward layer %d saw the past" % layer)
            assert np.abs(a[:, :t] - b[:, :t]).max() > 1e-3
        np.testing.assert_allclose(bwd_logits[0, t:], new_bwd[0, t:], atol=1e-5)
        assert np.abs(fwd_logits[:, t:6] - new_fwd[:, t:6]).max() > 1e-3


def test_padding_never_reaches_real_words(model):
    rows = [[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12]]
    states, fwd, bwd = run(model, batch(rows, seed=0))
    other, fwd2, bwd2 = run(model, batch(rows, seed=5))  # other garbage in the padding
    for key in states:
        for a, b in zip(states[key], other[key]):
            np.testing.assert_allclose(a[1, :4], b[1, :4], atol=1e-6, err_msg=key)
    np.testing.assert_allclose(bwd[1, :4], bwd2[1, :4], atol=1e-5)


def _numpy_char_encoder(layer, char_ids):
    """The character CNN in NumPy, from the layer's weights (float64)."""
    emb = np.asarray(layer.char_embeddings.embeddings, np.float64)
    flat = char_ids.reshape(-1, char_ids.shape[-1])
    x = emb[flat]
    length = np.array([list(row).index(vocabulary.END_OF_WORD) + 1 for row in flat])
    pooled = []
    for (width, _), conv in zip(layer.filters, layer.convolutions):
        kernel = np.asarray(conv.kernel, np.float64)          # [w, d, n]
        bias = np.asarray(conv.bias, np.float64)
        n_windows = x.shape[1] - width + 1
        out = np.stack([np.einsum("bwd,wdn->bn", x[:, i:i + width], kernel) + bias
                        for i in range(n_windows)], 1)
        out = np.maximum(out, 0.0)
        best = []
        for row, n in zip(out, length):
            last = max(n, width) - width                       # windows starting in the word
            best.append(row[:last + 1].max(0))
        pooled.append(np.stack(best))
    h = np.concatenate(pooled, -1)
    size = h.shape[-1]
    for highway in layer.highways:
        both = h @ np.asarray(highway.kernel, np.float64) + np.asarray(highway.bias, np.float64)
        gate = 1 / (1 + np.exp(-both[:, size:]))
        h = gate * np.maximum(both[:, :size], 0) + (1 - gate) * h
    out = h @ np.asarray(layer.projection.kernel, np.float64) + np.asarray(
        layer.projection.bias, np.float64)
    return out.reshape(char_ids.shape[:-1] + (-1,))


def test_character_cnn_equals_numpy_and_ignores_the_padding_of_char_ids(model):
    layer = model.encoder.char_encoder
    words = ["a", "bakery", "面包", "o'clock", "internationalisation"]
    wide = np.array([[vocabulary.word_char_ids(w, 30) for w in words]], np.int32)
    out = np.asarray(layer(wide))
    np.testing.assert_allclose(out, _numpy_char_encoder(layer, wide), atol=1e-5)
    # The same words with less padding (12 characters: the long word is cut at 10
    # bytes either way, so compare the words that fit).
    narrow = np.array([[vocabulary.word_char_ids(w, 12) for w in words[:4]]], np.int32)
    np.testing.assert_allclose(np.asarray(layer(narrow)), out[:, :4], atol=1e-6)
    # Garbage after the first window that may hold padding changes nothing...
    noisy = wide.copy()
    rng = np.random.RandomState(0)
    for j, w in enumerate(words):
        start = max(len(w.encode("utf-8")) + 2, 7)
        noisy[0, j, start:] = rng.randint(1, 262, size=30 - start)
    np.testing.assert_allclose(np.asarray(layer(noisy)), out, atol=1e-6)
    # ... while a real character does change the word's vector.
    changed = wide.copy()
    changed[0, 1, 2] += 1
    assert np.abs(np.asarray(layer(changed))[0, 1] - out[0, 1]).max() > 1e-4


def test_scalar_mix_is_the_softmax_weighted_sum_times_gamma():
    rng = np.random.RandomState(0)
    layers = [rng.normal(size=(2, 5, 6)).astype(np.float32) for _ in range(3)]
    mix = ScalarMix(3, initial_scalars=[0.5, -1.0, 2.0], initial_gamma=1.7)
    s = np.array([0.5, -1.0, 2.0])
    w = np.exp(s) / np.exp(s).sum()
    expected = 1.7 * sum(wi * layer for wi, layer in zip(w, layers))
    np.testing.assert_allclose(np.asarray(mix([tf.constant(x) for x in layers])), expected,
                               rtol=1e-6, atol=1e-6)
    # Default: the plain average, gamma 1; both are trained.
    plain = ScalarMix(3)
    np.testing.assert_allclose(np.asarray(plain(layers)), sum(layers) / 3, atol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(plain(layers) * layers[2])
    grads = tape.gradient(loss, plain.trainable_variables)
    assert len(grads) == 2 and all(np.abs(np.asarray(g)).max() > 0 for g in grads)
    assert ScalarMix.from_config(mix.get_config()).initial_gamma == 1.7
    with pytest.raises(ValueError, match="built for 3 layers but got 2"):
        mix(layers[:2])


def test_scalar_mix_layer_norm_and_l2_as_bilm_tf():
    """do_layer_norm: bilm-tf's `_do_ln`, one mean and variance per layer over the real
    positions' values (padding ignored); l2_coef: lambda * sum(s^2) in the task loss."""
    rng = np.random.RandomState(1)
    layers = [(rng.normal(size=(2, 5, 6)) * (i + 1) + i).astype(np.float32) for i in range(3)]
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], np.int32)
    for layer in layers:
        layer[1, 2:] = 1e3  # padding: must not move the statistics
    s = np.array([0.3, -0.2, 0.9])
    mix = ScalarMix(3, initial_scalars=list(s), initial_gamma=0.8, do_layer_norm=True,
                    l2_coef=0.25)
    weights = np.exp(s) / np.exp(s).sum()
    expected = 0.0
    for w, layer in zip(weights, layers):
        values = layer.astype(np.float64)[mask.astype(bool)]       # [real words, dim]
        mean, var = values.mean(), values.var()
        expected = expected + w * (layer - mean) / np.sqrt(var + 1e-12)
    got = np.asarray(mix([tf.constant(x) for x in layers], mask=tf.constant(mask)))
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], 0.8 * expected[real], rtol=1e-4, atol=1e-5)
    assert float(mix.regularization_loss()) == pytest.approx(0.25 * (s ** 2).sum(), rel=1e-6)
    assert float(ScalarMix(3).regularization_loss()) == 0.0
    restored = ScalarMix.from_config(mix.get_config())
    assert restored.do_layer_norm and restored.l2_coef == 0.25
    # Through the classifier: the penalty is added to the task loss.
    from modeling.elmo.features import build_elmo_classifier  # pylint: disable=g-import-not-at-top
    classifier = build_elmo_classifier(tiny_config(), 2, "classification", l2_coef=0.5)
    classifier.combiner.scalars.assign([1.0, -1.0, 2.0])
    features = batch([[0, 1, 2], [3, 4]])
    features = {"input_ids": features["input_ids"], "input_mask": features["input_mask"],
                "char_ids": features["char_ids"], "label_ids": np.array([0, 1], np.int32)}
    loss, metrics = classifier.compute_loss_and_metrics(features, training=False)
    task = float(metrics["loss"][0]) / float(metrics["loss"][1])
    assert float(loss) == pytest.approx(task + 0.5 * 6.0, rel=1e-5)


def test_scalar_mix_over_the_network_layers(model):
    outputs = model.encoder(batch([[0, 1, 2]]), training=False)
    layers = outputs["elmo_layers"]
    assert len(layers) == 3 and all(int(x.shape[-1]) == 16 for x in layers)
    # Layer 0 is the token layer twice: ELMo's forward and backward halves of it.
    np.testing.assert_array_equal(np.asarray(layers[0])[..., :8], np.asarray(layers[0])[..., 8:])
    mixed = ScalarMix(3, initial_scalars=[0.0, 0.0, 50.0])(layers)  # ~ the top layer
    np.testing.assert_allclose(np.asarray(mixed), np.asarray(layers[2]), atol=1e-5)


def test_one_softmax_serves_both_directions_and_the_loss_is_their_mean(model):
    objective = model.get_objective("bidirectional_lm")
    shaped = [v for v in model.trainable_variables if tuple(v.shape) == (30, 8)]
    assert len(shaped) == 1 and shaped[0].path == objective.softmax_weights.path
    features = batch([[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12]])
    states, fwd, bwd = run(model, features)
    w = np.asarray(objective.softmax_weights, np.float64)
    b = np.asarray(objective.softmax_bias, np.float64)
    np.testing.assert_allclose(fwd, states["forward_outputs"][-1] @ w.T + b, atol=1e-4)
    np.testing.assert_allclose(bwd, states["backward_outputs"][-1] @ w.T + b, atol=1e-4)
    # The loss: forward t predicts word t+1, backward t predicts word t-1, real pairs only.
    ids, mask = features["input_ids"], features["input_mask"]

    def ce(logits, target):
        logits = logits - logits.max()
        return np.log(np.exp(logits).sum()) - logits[target]

    losses = []
    for i in range(2):
        n = mask[i].sum()
        losses += [ce(fwd[i, t], ids[i, t + 1]) for t in range(n - 1)]
        losses += [ce(bwd[i, t], ids[i, t - 1]) for t in range(1, n)]
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    np.testing.assert_allclose(float(loss), np.mean(losses), rtol=1e-4)
    total, count = metrics["bidirectional_lm_loss"]
    assert float(count) == len(losses) == 2 * (8 + 3)
    # A change of the shared weights moves both directions; the backward loss alone
    # trains the very variable the forward LM reads.
    with tf.GradientTape() as tape:
        _, metrics = model.compute_loss_and_metrics(features, training=False)
        backward_only = metrics["bidirectional_lm_backward_loss"][0]
    grad = tape.gradient(backward_only, objective.softmax_weights)
    assert np.abs(np.asarray(grad)).max() > 0
    saved = np.asarray(objective.softmax_weights)
    try:
        objective.softmax_weights.assign(saved * 0.5)
        _, fwd2, bwd2 = run(model, features)
        assert np.abs(fwd2 - fwd).max() > 1e-3 and np.abs(bwd2 - bwd).max() > 1e-3
    finally:
        objective.softmax_weights.assign(saved)


def test_residual_adds_the_dropped_out_input_as_bilm_tf():
    """bilm-tf's DropoutWrapper(ResidualWrapper(cell)): with layer 2's projection zeroed
    (its LSTMP outputs 0), layer 2 in training is exactly dropout(layer 1): each value
    is 0 or layer 1's / (1 - p), some of each (the clean input would give layer 1 itself)."""
    import keras  # pylint: disable=g-import-not-at-top
    keras.utils.set_random_seed(3)
    rate = 0.5
    network = ElmoNetwork.from_config_object(tiny_config(dropout=rate))
    for lstm in (network.forward_lstms[1], network.backward_lstms[1]):
        lstm.projection.assign(np.zeros(lstm.projection.shape, np.float32))
    features = batch([[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11]])
    outputs = network(features, training=True)
    for direction in ("forward_outputs", "backward_outputs"):
        first, second = (np.asarray(x) for x in outputs[direction])
        real = features["input_mask"].astype(bool)
        first, second = first[real], second[real]
        dropped = np.isclose(second, 0.0, atol=1e-7)
        kept = np.isclose(second, first / (1 - rate), rtol=1e-5, atol=1e-6)
        assert np.all(dropped | kept), direction
        assert 0.2 < dropped.mean() < 0.8, dropped.mean()
    # Inference: no dropout, the residual adds layer 1 unchanged.
    outputs = network(features, training=False)
    np.testing.assert_allclose(np.asarray(outputs["forward_outputs"][1]),
                               np.asarray(outputs["forward_outputs"][0]), atol=1e-6)


def test_training_drops_the_top_outputs_before_the_softmax():
    """bilm-tf drops the LSTM outputs before the softmax: in training the loss is the
    NumPy loss of dropout(h) (mask read off the zero gradients), in evaluation of h."""
    from modeling.elmo.objective import BidirectionalLMObjective  # pylint: disable=g-import-not-at-top
    import keras  # pylint: disable=g-import-not-at-top
    keras.utils.set_random_seed(4)
    rate, vocab, dim = 0.4, 11, 6
    objective = BidirectionalLMObjective(vocab, dim, dropout=rate)
    assert BidirectionalLMObjective.from_config(objective.get_config()).dropout == rate
    rng = np.random.RandomState(0)
    hidden = {d: tf.Variable(rng.normal(size=(2, 7, dim)).astype(np.float32))
              for d in ("forward", "backward")}
    ids = rng.randint(0, vocab, size=(2, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int32)
    features = {"input_ids": ids, "input_mask": mask}
    encoder_outputs = {"forward_outputs": [hidden["forward"]],
                       "backward_outputs": [hidden["backward"]]}
    w = np.asarray(objective.softmax_weights, np.float64)
    b = np.asarray(objective.softmax_bias, np.float64)

    def numpy_loss(h):
        total, count = 0.0, 0
        for i in range(2):
            n = mask[i].sum()
            for t in range(n - 1):
                for logits, target in ((h["forward"][i, t] @ w.T + b, ids[i, t + 1]),
                                       (h["backward"][i, t + 1] @ w.T + b, ids[i, t])):
                    top = logits.max()
                    total += np.log(np.exp(logits - top).sum()) + top - logits[target]
                    count += 1
        return total / count

    with tf.GradientTape() as tape:
        result = objective(encoder_outputs, features, training=True)
        loss = result["losses"]["bidirectional_lm_loss"]
    grads = tape.gradient(loss, [hidden["forward"], hidden["backward"]])
    dropped_h = {}
    for (name, variable), grad in zip(hidden.items(), grads):
        keep = np.asarray(grad) != 0.0
        dropped_h[name] = np.asarray(variable, np.float64) * keep / (1 - rate)
    used = np.asarray(grads[0])[:, :-1][mask[:, 1:].astype(bool)]
    assert 0.2 < (used == 0).mean() < 0.7  # some units of the counted positions dropped
    assert float(loss) == pytest.approx(numpy_loss(dropped_h), rel=1e-4)
    evaluated = objective(encoder_outputs, features, training=False)
    clean = {k: np.asarray(v, np.float64) for k, v in hidden.items()}
    assert float(evaluated["losses"]["bidirectional_lm_loss"]) == pytest.approx(
        numpy_loss(clean), rel=1e-4)
    assert abs(float(loss) - numpy_loss(clean)) > 1e-3


def test_sampled_softmax_trains_and_evaluation_uses_the_full_softmax():
    import keras  # pylint: disable=g-import-not-at-top
    keras.utils.set_random_seed(2)
    config = tiny_config(n_negative_samples_batch=5)
    sampled = recipes.load_recipe("elmo").build_model(config)
    full = recipes.load_recipe("elmo").build_model(config.replace(n_negative_samples_batch=0))
    for a, b in zip(full.variables, sampled.variables):
        a.assign(b)
    features = batch([[0, 1, 2, 3, 4, 5], [6, 7, 8]])
    eval_sampled, _ = sampled.compute_loss_and_metrics(features, training=False)
    eval_full, _ = full.compute_loss_and_metrics(features, training=False)
    np.testing.assert_allclose(float(eval_sampled), float(eval_full), rtol=1e-6)
    objective = sampled.get_objective("bidirectional_lm")
    with tf.GradientTape() as tape:
        train_sampled, metrics = sampled.compute_loss_and_metrics(features, training=True)
    grad = tape.gradient(train_sampled, objective.softmax_weights)
    # 5 sampled negatives (with the log-uniform correction) instead of all 30 words:
    # another, finite loss, whose gradient reaches the shared softmax.
    assert np.isfinite(float(train_sampled))
    assert abs(float(train_sampled) - float(eval_full)) > 1e-4
    assert np.abs(np.asarray(tf.convert_to_tensor(grad))).max() > 0
    assert "bidirectional_lm_accuracy" not in metrics


def test_config_file_round_trip_and_one_line_errors(tmp_path):
    config = tiny_config()
    path = tmp_path / "elmo_options.json"
    config.to_json_file(str(path))
    values = json.loads(path.read_text())
    assert values["char_cnn"]["filters"][6] == [7, 4] and values["lstm"]["n_layers"] == 2
    assert values["n_tokens_vocab"] == 30 and values["lstm"]["cell_clip"] is None
    assert load_elmo_config(str(tmp_path)) == config
    values["lstm"]["projection_dm"] = 8
    path.write_text(json.dumps(values))
    with pytest.raises(ElmoConfigError, match=r"elmo_options.json.*`projection_dm` \(did you "
                                              r"mean `projection_dim`\?\)"):
        load_elmo_config(str(path))
    del values["lstm"]["projection_dm"]
    values["lstm"]["cell_clip"] = 3
    values["lstm"]["cell"] = "lstm_dense"
    path.write_text(json.dumps(values))
    with pytest.raises(ElmoConfigError, match="cell_clip.*must be null"):
        load_elmo_config(str(path))
    with pytest.raises(ElmoConfigError, match="filter is 7 wide but max_characters"):
        tiny_config(max_characters_per_token=5)
    network = ElmoNetwork.from_config_object(config)
    assert ElmoNetwork.from_config(network.get_config()).get_config() == network.get_config()
    assert registry.families.get("elmo").config_file_name == "elmo_options.json"


def test_character_ids_are_elmos():
    assert vocabulary.word_char_ids("a", 6) == [259, 98, 260, 261, 261, 261]
    assert vocabulary.word_char_ids("<S>", 5) == [259, 257, 260, 261, 261]
    assert vocabulary.word_char_ids("</S>", 5) == [259, 258, 260, 261, 261]
    assert vocabulary.word_char_ids("面", 6) == [259, 0xe9 + 1, 0x9d + 1, 0xa2 + 1, 260, 261]
    assert len(vocabulary.word_char_ids("x" * 80)) == 50
    assert vocabulary.word_char_ids("x" * 80)[-1] == 260  # cut, but still ends the word


def test_bundled_vocabulary_is_the_training_split_words(tmp_path):
    texts = sorted(os.path.join(REPO_ROOT, "data", "sample", name)
                   for name in ("sample_en.txt", "sample_zh.txt"))
    train, _ = corpus.split_documents(texts, str(tmp_path))
    with open(VOCAB, encoding="utf-8") as f:
        bundled = f.read().split("\n")[:-1]
    assert bundled == vocabulary.build_vocabulary(train)
    bad = tmp_path / "bad.txt"
    bad.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nthe\n", encoding="utf-8")
    with pytest.raises(vocabulary.VocabularyError, match=r"bad.txt:6: the word 'the' is "
                                                         r"listed twice \(first at line 4\)"):
        vocabulary.WordVocabulary(str(bad))
    bad.write_text("the\n<S>\n</S>\n<UNK>\n", encoding="utf-8")
    with pytest.raises(vocabulary.VocabularyError, match="first three lines must be"):
        vocabulary.WordVocabulary(str(bad))


def test_pipeline_features(tmp_path):
    vocab = vocabulary.WordVocabulary(VOCAB)
    features = sentence_features(["the", "baker", "zzyzx"], vocab, 8, 10)
    the, baker = vocab.ids(["the", "baker"])
    np.testing.assert_array_equal(features["input_ids"], [0, the, baker, 2, 1, 0, 0, 0])
    np.testing.assert_array_equal(features["input_mask"], [1, 1, 1, 1, 1, 0, 0, 0])
    assert features["char_ids"][5:].max() == 0
    assert list(features["char_ids"][0]) == vocabulary.word_char_ids("<S>", 10)
    text = tmp_path / "t.txt"
    text.write_text("The baker opens the shop.\n\n面包师开门。\n", encoding="utf-8")
    pipeline = ElmoPipeline({"max_characters_per_token": 10},
                            PipelineOptions(vocab_file=VOCAB, max_seq_length=8, seed=1))
    batches = list(pipeline.input_fn(str(text), False, 4)(None))
    assert len(batches) == 1 and batches[0]["char_ids"].shape == (2, 8, 10)
    ids = batches[0]["input_ids"].numpy()
    np.testing.assert_array_equal(ids[0], [0] + vocab.ids(
        ["the", "baker", "opens", "the", "shop", "."]) + [1])
    np.testing.assert_array_equal(ids[1, :7], [0] + vocab.ids(list("面包师开门。")))
    with pytest.raises(ValueError, match="max_characters_per_token must be an integer"):
        ElmoPipeline({"max_characters_per_token": "50"}, PipelineOptions(vocab_file=VOCAB))
