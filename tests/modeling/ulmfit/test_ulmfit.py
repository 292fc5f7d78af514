"""ULMFiT's parts: the AWD-LSTM's dropouts, the tied forward LM, concat pooling, layer groups.

Every check compares against values computed here (NumPy, or a plain Keras
LSTM given the same matrices) or against the same network on perturbed
input; tiny configs. The family's learning on held-out text, target-domain
fine-tuning and the classifier run are in `tests/modeling/ulmfit/test_ulmfit_recipe.py`.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import recipes
from modeling import registry
from modeling.training import finetuning_techniques
from modeling.training import optimization
from modeling.ulmfit import AwdLstm
from modeling.ulmfit import AwdLstmConfig
from modeling.ulmfit import AwdLstmConfigError
from modeling.ulmfit import WeightDropLSTM
from modeling.ulmfit import WordEmbedding
from modeling.ulmfit import load_awd_lstm_config
from modeling.ulmfit.classification import UlmfitClassifier
from modeling.ulmfit.classification import concat_pooling

V = 30


def tiny_config(**changes):
    values = dict(vocab_size=V, embedding_size=8, hidden_size=12, num_hidden_layers=3,
                  embed_p=0.0, input_p=0.0, weight_p=0.0, hidden_p=0.0, output_p=0.0,
                  initrange=0.5)
    values.update(changes)
    return AwdLstmConfig(**values)


def batch(rows, max_words=9, seed=0):
    """`input_ids`/`input_mask` of word-id rows; the padding holds random ids."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, V, size=(len(rows), max_words)).astype(np.int32)
    mask = np.zeros([len(rows), max_words], np.int32)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        mask[i, :len(row)] = 1
    return {"input_ids": ids, "input_mask": mask}


def numpy_lstm(x, kernel, recurrent, bias, h0=None, c0=None, final_cell=False):
    """A forward LSTM in NumPy (float64), Keras's gate order i, f, c, o (from zeros, or
    from `h0`, `c0`); with `final_cell`, also the last step's cell state."""
    def sigmoid(z):
        return 1 / (1 + np.exp(-z))
    units = recurrent.shape[0]
    h = np.zeros([x.shape[0], units]) if h0 is None else h0
    c = np.zeros([x.shape[0], units]) if c0 is None else c0
    outputs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = np.split(z, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return (np.stack(outputs, 1), c) if final_cell else np.stack(outputs, 1)


def test_weight_drop_masks_only_the_hidden_to_hidden_matrix_and_not_at_inference():
    keras.utils.set_random_seed(0)
    layer = WeightDropLSTM(6, weight_dropout=0.5, weight_dropout_seed=3,
                           return_sequences=True)
    layer.build((None, None, 4))
    x = np.random.RandomState(0).normal(size=(3, 5, 4)).astype(np.float32)
    kernel, recurrent, bias = [np.asarray(w, np.float64) for w in layer.get_weights()]

    # The mask of the next training call: drawn once for the whole [6, 24] matrix.
    state = np.asarray(layer.weight_seed_generator.state)
    dropped = np.asarray(layer.recurrent_kernel_for_call(True), np.float64)
    layer.weight_seed_generator.state.assign(state)
    trained = np.asarray(layer(x, training=True), np.float64)
    zero = dropped == 0
    assert 0.3 < zero.mean() < 0.7, zero.mean()
    np.testing.assert_allclose(dropped[~zero], 2.0 * recurrent[~zero], rtol=1e-6)  # 1/(1-p)
    # The call used exactly that matrix at every time step, with the input kernel
    # and the bias as they are: a plain LSTM given (kernel, dropped, bias) agrees.
    np.testing.assert_allclose(trained, numpy_lstm(x, kernel, dropped, bias), atol=1e-5)
    plain = keras.layers.LSTM(6, return_sequences=True)
    plain.build((None, None, 4))
    plain.set_weights([kernel, dropped, bias])
    np.testing.assert_allclose(trained, np.asarray(plain(x)), atol=1e-5)
    # The variables themselves are untouched, and the next call draws a new mask.
    for before, after in zip((kernel, recurrent, bias), layer.get_weights()):
        np.testing.assert_array_equal(before, np.asarray(after, np.float64))
    assert np.abs(np.asarray(layer(x, training=True)) - trained).max() > 1e-4
    # Gradients: the dropped entries of the recurrent matrix get none, the input
    # kernel gets one everywhere.
    layer.weight_seed_generator.state.assign(state)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(layer(x, training=True)))
    grad_kernel, grad_recurrent = tape.gradient(
        loss, [layer.cell.kernel, layer.cell.recurrent_kernel])
    grad_recurrent = np.asarray(grad_recurrent)
    assert np.all(grad_recurrent[zero] == 0) and np.all(grad_recurrent[~zero] != 0)
    assert np.all(np.asarray(grad_kernel) != 0)
    # Inference: deterministic, and the plain LSTM with the undropped weights.
    inferred = np.asarray(layer(x, training=False))
    np.testing.assert_array_equal(inferred, np.asarray(layer(x, training=False)))
    plain.set_weights([kernel, recurrent, bias])
    np.testing.assert_allclose(inferred, np.asarray(plain(x)), atol=1e-6)
    np.testing.assert_allclose(inferred, numpy_lstm(x, kernel, recurrent, bias), atol=1e-5)
    with pytest.raises(ValueError, match="recurrent_dropout must be 0"):
        WeightDropLSTM(4, weight_dropout=0.5, recurrent_dropout=0.1)


def test_weight_drop_training_on_a_masked_batch_keeps_the_state_of_the_last_real_step():
    """The `tf.scan` recurrence with a right-padded mask (BPTT stream rows): the real
    steps are the LSTM's from the given initial state, and the state returned is the
    one after each row's last real step (a masked step keeps it)."""
    keras.utils.set_random_seed(0)
    layer = WeightDropLSTM(5, weight_dropout=0.5, weight_dropout_seed=3,
                           return_sequences=True, return_state=True)
    layer.build((None, None, 4))
    rng = np.random.RandomState(1)
    x = rng.normal(size=(2, 6, 4)).astype(np.float32)
    h0, c0 = [rng.normal(size=(2, 5)).astype(np.float32) for _ in range(2)]
    lengths = [6, 3]
    mask = np.arange(6)[None, :] < np.array(lengths)[:, None]
    kernel, _, bias = [np.asarray(w, np.float64) for w in layer.get_weights()]
    state = np.asarray(layer.weight_seed_generator.state)
    dropped = np.asarray(layer.recurrent_kernel_for_call(True), np.float64)
    layer.weight_seed_generator.state.assign(state)
    outputs, h, c = layer(x, initial_state=[h0, c0], mask=mask, training=True)
    for row, n in enumerate(lengths):
        expected, cell = numpy_lstm(x[row:row + 1, :n], kernel, dropped, bias,
                                    h0[row:row + 1], c0[row:row + 1], final_cell=True)
        np.testing.assert_allclose(np.asarray(outputs)[row, :n], expected[0], atol=1e-5)
        np.testing.assert_allclose(np.asarray(h)[row], expected[0, -1], atol=1e-5)
        np.testing.assert_allclose(np.asarray(c)[row], cell[0], atol=1e-5)


def test_embedding_dropout_zeroes_whole_words():
    keras.utils.set_random_seed(0)
    layer = WordEmbedding(V, 8, embed_p=0.4, seed=7)
    layer.build()
    table = np.asarray(layer.embeddings)
    ids = np.array([[3, 4, 5, 3, 4, 6, 7, 8], [5, 3, 9, 9, 10, 11, 12, 4]], np.int32)
    out = np.asarray(layer(ids, training=True))
    dropped, kept = set(), set()
    for (i, t), word in np.ndenumerate(ids):
        if np.all(out[i, t] == 0):
            dropped.add(word)
        else:
            np.testing.assert_allclose(out[i, t], table[word] / 0.6, rtol=1e-6)
            kept.add(word)
    # A word is dropped at every position of the batch or at none.
    assert dropped and kept and not dropped & kept, (dropped, kept)
    np.testing.assert_array_equal(np.asarray(layer(ids, training=False)), table[ids])


def test_variational_dropout_masks_are_constant_over_time():
    keras.utils.set_random_seed(0)
    features = batch([[1, 2, 3, 4, 5, 6, 7, 8, 9], [9, 8, 7, 6, 5, 4, 3, 2, 1]])
    # Output dropout only: sequence_output / the last layer is one mask per row and
    # feature, the same at every word.
    network = AwdLstm.from_config_object(tiny_config(output_p=0.5))
    outputs = network(features, training=True)
    ratio = np.asarray(outputs["sequence_output"]) / np.asarray(outputs["layers"][-1])
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :1], ratio.shape), atol=1e-5)
    assert set(np.round(np.unique(ratio), 5)) == {0.0, 2.0}
    assert np.abs(ratio[0, 0] - ratio[1, 0]).max() > 0  # each sequence its own mask
    # The input and between-layer dropouts are the same kind of layer.
    network = AwdLstm.from_config_object(tiny_config(input_p=0.5, hidden_p=0.5))
    for layer in [network.input_dropout] + network.hidden_dropouts:
        dropped = np.asarray(layer(np.ones([2, 9, 12], np.float32), training=True))
        np.testing.assert_array_equal(dropped, np.broadcast_to(dropped[:, :1], dropped.shape))
        assert set(np.unique(dropped)) == {0.0, 2.0}


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(1)
    return recipes.load_recipe("ulmfit").build_model(tiny_config())


def test_tied_softmax_is_the_embedding_variable_and_the_loss_is_next_word_cross_entropy(model):
    objective = model.get_objective("word_lm")
    table = model.encoder.embedding_table
    shaped = [v for v in model.trainable_variables if tuple(v.shape) == (V, 8)]
    assert len(shaped) == 1 and shaped[0] is table
    assert table.path == "awd_lstm/embeddings/embeddings"
    features = batch([[0, 5, 6, 7, 8, 9, 10, 11, 1], [0, 12, 13, 1]])
    hidden = np.asarray(model.encoder(features, training=False)["sequence_output"], np.float64)
    logits = np.asarray(model(features, training=False)["word_lm_logits"], np.float64)
    bias = np.asarray(objective.output_bias, np.float64)
    np.testing.assert_allclose(logits, hidden @ np.asarray(table, np.float64).T + bias,
                               atol=1e-5)

    def ce(row, target):
        row = row - row.max()
        return np.log(np.exp(row).sum()) - row[target]

    ids, mask = features["input_ids"], features["input_mask"]
    losses = [ce(logits[i, t], ids[i, t + 1]) for i in range(2)
              for t in range(mask[i].sum() - 1)]
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    assert float(metrics["word_lm_loss"][1]) == len(losses) == 8 + 3
    np.testing.assert_allclose(float(loss), np.mean(losses), rtol=1e-5)
    # The input side reads the same variable: changing it moves the hidden states.
    before = np.asarray(model.encoder(features, training=False)["layers"][0])
    saved = np.asarray(table)
    try:
        table.assign(saved * 0.5)
        after = np.asarray(model.encoder(features, training=False)["layers"][0])
        assert np.abs(after - before).max() > 1e-4
    finally:
        table.assign(saved)


def stream_batch(lengths, width=7, seed=0):
    """A BPTT stream batch: random words, `lengths[i]` real positions in row i."""
    rng = np.random.RandomState(seed)
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
    return {"input_ids": rng.randint(0, V, size=(len(lengths), width)).astype(np.int32),
            "target_ids": rng.randint(0, V, size=(len(lengths), width)).astype(np.int32),
            "input_mask": mask}


def numpy_ar_tar(dropped, raw, mask):
    """AWD-LSTM's AR (mean square of the dropped last layer) and TAR (mean square step
    of the raw one) over the real positions, by loops."""
    squares, steps = [], []
    for i in range(mask.shape[0]):
        for t in range(mask.shape[1]):
            if mask[i, t]:
                squares.extend(dropped[i, t] ** 2)
                if t + 1 < mask.shape[1] and mask[i, t + 1]:
                    steps.extend((raw[i, t + 1] - raw[i, t]) ** 2)
    return np.mean(squares), np.mean(steps)


def test_ar_and_tar_are_numpys_and_join_the_loss_in_training_only():
    keras.utils.set_random_seed(4)
    model = recipes.load_recipe("ulmfit").build_model(tiny_config(output_p=0.5))
    objective = model.get_objective("word_lm")
    assert (objective.alpha, objective.beta) == (2.0, 1.0)  # the recipe's, AWD-LSTM's
    features = stream_batch([7, 4, 1])
    outputs = model.encoder(features, training=True)
    dropped = np.asarray(outputs["sequence_output"], np.float64)
    raw = np.asarray(outputs["layers"][-1], np.float64)
    assert np.abs(dropped - raw).max() > 0.5 * np.abs(raw).max()  # the output dropout acted
    ar, tar = numpy_ar_tar(dropped, raw, features["input_mask"])
    result = objective(outputs, features, training=True)
    np.testing.assert_allclose(float(result["losses"]["word_lm_ar"]), 2 * ar, rtol=1e-5)
    np.testing.assert_allclose(float(result["losses"]["word_lm_tar"]), 1 * tar, rtol=1e-5)
    np.testing.assert_allclose([float(t) for t in result["metrics"]["word_lm_ar"]],
                               [2 * ar, 1.0], rtol=1e-5)
    # Not the raw output's AR, nor the dropped output's TAR.
    other_ar, other_tar = numpy_ar_tar(raw, dropped, features["input_mask"])
    assert abs(other_ar - ar) > 0.1 * ar and abs(other_tar - tar) > 0.1 * tar
    # Not in evaluation: no terms, no metrics.
    evaluated = objective(outputs, features, training=False)
    assert set(evaluated["losses"]) == {"word_lm_loss"}
    assert set(evaluated["metrics"]) == {"word_lm_loss", "word_lm_accuracy"}

    # The total training loss: cross-entropy on the stream's own targets + 2 AR + TAR
    # (no dropout, so the model's call and this one see the same outputs).
    keras.utils.set_random_seed(4)
    model = recipes.load_recipe("ulmfit").build_model(tiny_config())
    outputs = model.encoder(features, training=True)
    hidden = np.asarray(outputs["sequence_output"], np.float64)
    ar, tar = numpy_ar_tar(hidden, np.asarray(outputs["layers"][-1], np.float64),
                           features["input_mask"])
    table = np.asarray(model.encoder.embedding_table, np.float64)
    logits = hidden @ table.T + np.asarray(model.get_objective("word_lm").output_bias)
    logits -= logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    mask = features["input_mask"]
    ce = -np.sum(np.take_along_axis(log_probs, features["target_ids"][..., None], -1)[..., 0]
                 * mask) / mask.sum()
    loss, metrics = model.compute_loss_and_metrics(features, training=True)
    np.testing.assert_allclose(float(loss), ce + 2 * ar + tar, rtol=1e-4)
    assert float(metrics["word_lm_loss"][1]) == 12
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    np.testing.assert_allclose(float(loss), ce, rtol=1e-4)
    assert "word_lm_ar" not in metrics
    # The objective's own defaults: no AR, no TAR (SiATL's auxiliary LM loss).
    plain = registry.objectives.get("word_lm")(tiny_config(), None)
    assert (plain.alpha, plain.beta) == (0.0, 0.0)
    with pytest.raises(ValueError, match="word_lm: alpha must be a number >= 0, got -1"):
        registry.objectives.get("word_lm")(tiny_config(), None, alpha=-1)


def test_forward_lm_never_sees_the_future_nor_the_padding(model):
    rows = [[0, 5, 6, 7, 8, 9, 10, 11, 1], [0, 12, 13, 14, 15, 1]]
    base = model(batch(rows), training=False)["word_lm_logits"].numpy()
    for t in (1, 3, 4):
        future = [r[:t + 1] + [(w + 7) % V for w in r[t + 1:]] for r in rows]
        changed = model(batch(future), training=False)["word_lm_logits"].numpy()
        np.testing.assert_allclose(base[:, :t + 1], changed[:, :t + 1], atol=1e-6)
        assert np.abs(base[:, t + 1:6] - changed[:, t + 1:6]).max() > 1e-4
    # Other ids in the padding: the real positions and the loss do not change.
    other = model(batch(rows, seed=5), training=False)["word_lm_logits"].numpy()
    np.testing.assert_allclose(base[1, :6], other[1, :6], atol=1e-6)
    loss_a, _ = model.compute_loss_and_metrics(batch(rows, seed=0), training=False)
    loss_b, _ = model.compute_loss_and_metrics(batch(rows, seed=5), training=False)
    assert float(loss_a) == pytest.approx(float(loss_b), abs=1e-6)


def test_the_lstm_state_is_carried_from_batch_to_batch_per_row_and_reset(model):
    """Rows with `state_reset` 0 continue from the state the previous call ended with
    (after each row's last real word), rows with 1 start from zeros; a batch of another
    size starts every row from zeros; training and inference calls keep their own states;
    the states are no weights (a resumed or new network starts from zeros)."""
    network = model.encoder
    rng = np.random.RandomState(3)
    stream = rng.randint(3, V, size=(2, 12)).astype(np.int32)
    whole = np.asarray(network({"input_ids": stream}, training=False)["layers"][-1])

    def features_of(ids, real, reset):
        width = 7
        padded = rng.randint(0, V, size=(len(ids), width)).astype(np.int32)  # padding
        padded[:, :real] = ids[:, :real]
        return {"input_ids": padded, "target_ids": np.roll(padded, -1, axis=1),
                "input_mask": (np.arange(width) < real).astype(np.int32)[None].repeat(
                    len(ids), 0),
                "state_reset": np.array(reset, np.int32)}

    def step(ids, real, reset, training=False, net=network):
        features = features_of(ids, real, reset)
        return np.asarray(net(features, training=training)["layers"][-1])[:, :real]

    # Batch 1: the first 5 words (2 padded positions); batch 2: the next 7. Carried,
    # batch 2 is the whole stream's continuation; the padding of batch 1 did not count.
    first = step(stream[:, :5], 5, [1, 1])
    np.testing.assert_allclose(first, whole[:, :5], atol=1e-5)
    second = step(stream[:, 5:], 7, [0, 0])
    np.testing.assert_allclose(second, whole[:, 5:], atol=1e-5)
    alone = np.asarray(network({"input_ids": stream[:, 5:]}, training=False)["layers"][-1])
    assert np.abs(second - alone).max() > 1e-4
    # The loss on batch t + 1 after batch t differs from a reset model's on it.
    second_features = features_of(stream[:, 5:], 7, [0, 0])
    step(stream[:, :5], 5, [1, 1])
    carried_loss, _ = model.compute_loss_and_metrics(second_features, training=False)
    reset_loss, _ = model.compute_loss_and_metrics(
        dict(second_features, state_reset=np.ones([2], np.int32)), training=False)
    assert abs(float(carried_loss) - float(reset_loss)) > 1e-4
    # Per row: row 0 resets (batch 2 alone), row 1 carries on from batch 1.
    step(stream[:, :5], 5, [1, 1])
    mixed = step(stream[:, 5:], 7, [1, 0])
    np.testing.assert_allclose(mixed[0], alone[0], atol=1e-5)
    np.testing.assert_allclose(mixed[1], whole[1, 5:], atol=1e-5)
    # Another batch size: every row from zeros.
    three = np.concatenate([stream[:, 5:], stream[:1, 5:]])
    other = step(three, 7, [0, 0, 0])
    np.testing.assert_allclose(other[:2], alone, atol=1e-5)
    # Training calls keep their own state: inference calls in between leave it alone.
    step(stream[:, :5], 5, [1, 1], training=True)
    step(stream[:, 5:], 7, [1, 1])
    trained = step(stream[:, 5:], 7, [0, 0], training=True)
    np.testing.assert_allclose(trained, whole[:, 5:], atol=1e-5)  # no dropout in tiny_config
    # No weights: a new network with the same weights (a resumed run) starts from zeros.
    assert len(network.weights) == 10 and not any("state" in v.path for v in network.weights)
    fresh = AwdLstm.from_config_object(tiny_config())
    fresh.set_weights(network.get_weights())
    resumed = step(stream[:, 5:], 7, [0, 0], net=fresh)
    np.testing.assert_allclose(resumed, alone, atol=1e-5)


def test_concat_pooling_equals_numpy_on_a_padded_batch():
    rng = np.random.RandomState(0)
    hidden = rng.normal(size=(3, 6, 4)).astype(np.float32)
    lengths = [3, 6, 1]
    mask = np.array([[1] * n + [0] * (6 - n) for n in lengths], np.int32)
    hidden[0, 3:] = 50.0  # padding that would win the max and move the mean
    hidden[2, 1:] = 50.0
    expected = np.stack([np.concatenate([hidden[i, n - 1], hidden[i, :n].max(0),
                                         hidden[i, :n].mean(0)])
                         for i, n in enumerate(lengths)])
    np.testing.assert_allclose(np.asarray(concat_pooling(hidden, mask)), expected, rtol=1e-6)
    # By hand for the one-word row: last = max = mean = that word.
    np.testing.assert_allclose(np.asarray(concat_pooling(hidden, mask))[2],
                               np.tile(hidden[2, 0], 3), rtol=1e-6)


def test_layer_groups_discriminative_rates_and_gradual_unfreezing():
    keras.utils.set_random_seed(0)
    classifier = UlmfitClassifier(AwdLstm.from_config_object(tiny_config()), num_labels=2)
    groups = finetuning_techniques.variable_groups(classifier)
    assert [name for name, _ in groups] == ["embeddings", "layer_0", "layer_1", "layer_2",
                                            "top"]
    assert [len(members) for _, members in groups] == [1, 3, 3, 3, 8]  # top: 2 batch norms, 2 dense
    paths = [v.path for v in classifier.trainable_variables]
    rates = finetuning_techniques.LayerwiseLearningRates(layer_lr_decay=2.6)
    by_path = dict(zip(paths, rates.factors(paths)))
    assert by_path["awd_lstm/embeddings/embeddings"] == pytest.approx(2.6 ** -4)
    assert by_path["awd_lstm/layer_0/lstm_cell/kernel"] == pytest.approx(2.6 ** -3)
    assert by_path["awd_lstm/layer_2/lstm_cell/recurrent_kernel"] == pytest.approx(2.6 ** -1)
    assert by_path[classifier.output_layer.kernel.path] == 1.0
    # Gradual unfreezing, one group per 2 updates: updates 0-1 train the head only,
    # 2-3 add layer_2, 4-5 layer_1.
    optimizer = optimization.create_optimizer(1e-2, 100, 0, layer_lr_decay=2.6,
                                              unfreeze_steps=2, jit_update=False)
    optimizer.build(classifier.trainable_variables)
    features = dict(batch([[0, 5, 6, 1], [0, 7, 8, 9, 1]], max_words=6),
                    label_ids=np.array([0, 1], np.int32))

    def update():
        with tf.GradientTape() as tape:
            loss, _ = classifier.compute_loss_and_metrics(features, training=True)
        grads = tape.gradient(loss, classifier.trainable_variables)
        optimizer.apply_gradients(zip(grads, classifier.trainable_variables))

    def snapshot():
        return {name: [np.asarray(v).copy() for v in members] for name, members in groups}

    def moved(before, after):
        return [name for name in before
                if any(np.abs(a - b).max() > 0 for a, b in zip(before[name], after[name]))]

    start = snapshot()
    update(), update()
    stage_1 = snapshot()
    assert moved(start, stage_1) == ["top"]
    update(), update()
    stage_2 = snapshot()
    assert moved(stage_1, stage_2) == ["layer_2", "top"]
    update(), update()
    assert moved(stage_2, snapshot()) == ["layer_1", "layer_2", "top"]


def test_config_file_round_trip_and_one_line_errors(tmp_path):
    config = tiny_config(weight_p=0.5)
    path = tmp_path / "ulmfit_config.json"
    config.to_json_file(str(path))
    values = json.loads(path.read_text())
    assert values == {"vocab_size": V, "emb_sz": 8, "n_hid": 12, "n_layers": 3,
                      "embed_p": 0.0, "input_p": 0.0, "weight_p": 0.5, "hidden_p": 0.0,
                      "output_p": 0.0, "tie_weights": True, "out_bias": True,
                      "initrange": 0.5}
    assert load_awd_lstm_config(str(tmp_path)) == config
    assert config.layer_sizes() == [12, 12, 8]
    values["n_hdi"] = values.pop("n_hid")
    path.write_text(json.dumps(values))
    with pytest.raises(AwdLstmConfigError, match=r"ulmfit_config.json.*`n_hdi` \(did you "
                                                 r"mean `n_hid`\?\)"):
        load_awd_lstm_config(str(path))
    for change, message in ((dict(weight_p=1.0), "`weight_p` must be a dropout probability"),
                            (dict(tie_weights=False), "`tie_weights` must be true"),
                            (dict(num_hidden_layers=0), "`n_layers` must be an integer >= 1"),
                            (dict(vocab_size=2), "`vocab_size` must be an integer >= 3")):
        with pytest.raises(AwdLstmConfigError, match=message):
            tiny_config(**change)
    network = AwdLstm.from_config_object(config)
    assert AwdLstm.from_config(network.get_config()).get_config() == network.get_config()
    assert [lstm.weight_dropout for lstm in network.lstms] == [0.5, 0.5, 0.5]
    family = registry.families.get("ulmfit")
    assert family.config_file_name == "ulmfit_config.json" and not family.has_pooler
