"""CoVe: the translation model's directions and attention, its recipe's learning, its features.

The network checks compare the network with itself on perturbed input, or
with the embedding lookup and the objective's formula computed here (NumPy);
tiny configs, inference mode (no dropout).

Learning budget, fixed before the run (the suite's time limit, not tuning):
`PretrainingJob.for_demo(recipe="cove")` -- the bundled
`data/sample/parallel_en_zh.tsv`, every tenth pair held out, English ->
Chinese, the bundled word vocabulary (2,275 words and characters) on both
sides, the recipe's LAMB optimizer -- with a smaller model than the demo's
(`SMALL`: word vectors 32, two BiLSTM layers of 48 units per direction, two
decoder LSTM layers of 48) for 100 steps of 32 pairs of at most 20 words,
learning rate 2e-2, 20 warm-up steps. The held-out `translation_loss` (nats
per target word, teacher forced) must beat the unigram model of the training
targets by 0.5 nats, and be worse by 0.1 nats when each target is paired with
another pair's source (the decoder uses the encoder).
"""


import os

import numpy as np
import pytest
import tensorflow as tf

from data import processors as processors_lib
from modeling import checkpoints
from modeling import recipes
from modeling import registry
from modeling.cove import CoveConfig
from modeling.cove import CoveConfigError
from modeling.cove import CoveNetwork
from modeling.cove import TranslationObjective
from modeling.cove import load_cove_config
from modeling.cove import pipeline as cove_pipeline
from modeling.cove.classification import CoveInputFormat
from modeling.cove.classification import build_cove_classifier
from modeling.cove.classification import cove_features
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.tasks import classifier_job
from modeling.tasks import input_formats
from modeling.tasks import word_input_format as wif

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "elmo", "vocab.txt")

STEPS = 100
SMALL = dict(vocab_size=2275, target_vocab_size=2275, embedding_size=32, hidden_size=48,
             num_encoder_layers=2, num_decoder_layers=2, dropout=0.1)


def tiny_network(**changes):
    values = dict(vocab_size=40, target_vocab_size=30, embedding_size=6, hidden_size=5,
                  num_encoder_layers=2, num_decoder_layers=2, dropout=0.0)
    values.update(changes)
    tf.keras.utils.set_random_seed(3)
    return CoveNetwork.from_config_object(CoveConfig(**values))


def batch(lengths, width=8, vocab=40, seed=0):
    """Source ids/mask with the given real lengths; padded slots hold garbage ids."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(3, vocab, size=(len(lengths), width)).astype(np.int32)
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
    return ids, mask


@pytest.fixture(scope="module")
def network():
    return tiny_network()


def test_features_are_the_word_vectors_then_the_bilstm_outputs(network):
    ids, mask = batch([8, 5, 3])
    features = network.features(ids, mask).numpy()
    assert features.shape == (3, 8, 6 + 2 * 5) and network.feature_size == 16
    table = network.source_embeddings.embeddings.numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(features[:, :, :6][real], table[ids][real], rtol=1e-6)
    np.testing.assert_allclose(features[:, :, 6:], network.encode(ids, mask).numpy(), rtol=1e-6)
    # The top layer is what call() returns as sequence_output, and padding is zero.
    outputs = network({"input_ids": ids, "input_mask": mask})
    np.testing.assert_allclose(outputs["sequence_output"].numpy(), features[:, :, 6:],
                               rtol=1e-6)
    assert len(outputs["encoder_outputs"]) == 2
    assert np.all(features[~real] == 0)
    assert np.abs(features[:, :, 6:][real]).min() > 0


def _direction_deltas(before, after, hidden=5):
    forward = np.abs(after[:, :, :hidden] - before[:, :, :hidden]).max(axis=(0, 2))
    backward = np.abs(after[:, :, hidden:] - before[:, :, hidden:]).max(axis=(0, 2))
    return forward, backward


def test_forward_half_never_sees_later_words_and_backward_half_never_earlier(network):
    ids, mask = batch([8, 8, 6], seed=1)
    base = network({"input_ids": ids, "input_mask": mask})["encoder_outputs"]
    for k in (0, 2, 5):
        changed = ids.copy()
        changed[:, k] = (changed[:, k] + 7) % 37 + 3
        new = network({"input_ids": changed, "input_mask": mask})["encoder_outputs"]
        forward, backward = _direction_deltas(base[0].numpy(), new[0].numpy())
        # First layer: forward at t < k read words 0..t only; backward at t > k read t..end.
        assert np.all(forward[:k] == 0), (k, forward)
        assert np.all(backward[k + 1:] == 0), (k, backward)
        # ... and the word reaches both halves from k on (resp. up to k).
        assert np.all(forward[k:6] > 1e-7), (k, forward)
        assert np.all(backward[:k + 1] > 1e-7), (k, backward)
        # The top layer reads both halves of the first: every position sees word k.
        assert np.all(np.abs(new[1].numpy() - base[1].numpy()).max(axis=(0, 2))[:6] > 1e-7)
    # The second layer is bidirectional over ITS input in the same way.
    inputs = np.random.RandomState(2).normal(size=(3, 8, 10)).astype(np.float32)
    before = network.bilstm_layer(1, inputs, mask).numpy()
    for k in (1, 4):
        changed = inputs.copy()
        changed[:, k] += 1.0
        forward, backward = _direction_deltas(before, network.bilstm_layer(1, changed, mask)
                                              .numpy())
        assert np.all(forward[:k] == 0) and np.all(forward[k:6] > 1e-7), (k, forward)
        assert np.all(backward[k + 1:] == 0) and np.all(backward[:k + 1] > 1e-7), (k, backward)


def test_attention_sums_to_one_over_real_source_words_and_padding_changes_nothing(network):
    ids, mask = batch([8, 4, 2], seed=2)
    target = np.random.RandomState(5).randint(3, 30, size=(3, 6)).astype(np.int32)
    outputs = network({"input_ids": ids, "input_mask": mask, "target_ids": target})
    weights = outputs["attention_weights"].numpy()
    assert weights.shape == (3, 6, 8)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert np.all(weights[np.broadcast_to(mask[:, None, :] == 0, weights.shape)] == 0)
    assert np.all(weights[np.broadcast_to(mask[:, None, :] == 1, weights.shape)] > 0)
    # Other ids in the padded source slots: the same logits, bit for bit.
    padded = ids.copy()
    padded[mask == 0] = np.random.RandomState(9).randint(0, 40, size=(mask == 0).sum())
    again = network({"input_ids": padded, "input_mask": mask, "target_ids": target})
    np.testing.assert_array_equal(again["decoder_logits"].numpy(),
                                  outputs["decoder_logits"].numpy())
    # A real source word does change every target position's logits.
    real = ids.copy()
    real[:, 1] = (real[:, 1] + 5) % 37 + 3
    moved = network({"input_ids": real, "input_mask": mask, "target_ids": target})
    delta = np.abs(moved["decoder_logits"].numpy() - outputs["decoder_logits"].numpy())
    assert np.all(delta.max(axis=-1) > 1e-7)


def test_decoder_at_t_never_sees_later_target_words(network):
    ids, mask = batch([7, 5], seed=3)
    target = np.random.RandomState(6).randint(3, 30, size=(2, 7)).astype(np.int32)
    base = network({"input_ids": ids, "input_mask": mask, "target_ids": target})
    for k in (1, 4):
        changed = target.copy()
        changed[:, k] = (changed[:, k] + 3) % 27 + 3
        new = network({"input_ids": ids, "input_mask": mask, "target_ids": changed})
        delta = np.abs(new["decoder_logits"].numpy()
                       - base["decoder_logits"].numpy()).max(axis=(0, 2))
        assert np.all(delta[:k] == 0), (k, delta)
        assert np.all(delta[k:] > 1e-7), (k, delta)


def test_translation_loss_is_the_masked_next_word_cross_entropy(network):
    ids, mask = batch([8, 3], seed=4)
    target = np.array([[0, 5, 9, 12, 1, 0], [0, 7, 1, 0, 0, 0]], np.int32)
    target_mask = (np.arange(6)[None, :] < np.array([[5], [3]])).astype(np.int32)
    features = {"input_ids": ids, "input_mask": mask, "target_ids": target,
                "target_mask": target_mask}
    result = TranslationObjective(30)(network(features), features)
    logits = network(features)["decoder_logits"].numpy().astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    # Predictions: row 0 words 5, 9, 12, </S> (from positions 0..3); row 1: 7, </S>.
    expected = [-log_p[0, t, target[0, t + 1]] for t in range(4)]
    expected += [-log_p[1, t, target[1, t + 1]] for t in range(2)]
    total, count = (float(v) for v in result["metrics"]["translation_loss"])
    assert count == 6
    assert total == pytest.approx(sum(expected), rel=1e-5)
    assert float(result["losses"]["translation_loss"]) == pytest.approx(
        sum(expected) / (6 + 1e-5), rel=1e-5)
    assert TranslationObjective(30).baseline_targets(
        {"target_ids": target, "target_mask": target_mask}) == [5, 9, 12, 1, 7, 1]


def test_greedy_translation_follows_the_teacher_forced_argmax(network):
    ids, mask = batch([6, 4], seed=5)
    translations = network.translate(ids, mask, max_length=5, bos_id=0, eos_id=1)
    assert len(translations) == 2
    for row, words in enumerate(translations):
        assert 1 <= len(words) <= 5 and 1 not in words
        prefix = np.array([[0] + words[:-1]], np.int32)
        logits = network.decode(network.encode(ids[row:row + 1], mask[row:row + 1]),
                                mask[row:row + 1], prefix)["logits"].numpy()[0]
        assert logits.argmax(-1).tolist() == words


def test_config_file_round_trip_and_one_line_errors(tmp_path):
    config = CoveConfig(**SMALL)
    path = tmp_path / "cove_config.json"
    config.to_json_file(str(path))
    assert load_cove_config(str(path)) == config
    assert load_cove_config(str(tmp_path)) == config  # a model folder
    assert CoveConfig(vocab_size=50).target_vocab_size == 50
    for values, message in (
            ({"vocab_size": 50, "hiden_size": 8}, "did you mean `hidden_size`"),
            ({"vocab_size": 2}, "`vocab_size` must be an integer >= 3"),
            ({"vocab_size": 50, "dropout": 1.0}, r"`dropout` must be a number in \[0, 1\)"),
            ({"vocab_size": 50, "num_encoder_layers": 1.5}, "num_encoder_layers"),
            ({"hidden_size": 8}, "missing CoVe config key `vocab_size`")):
        with pytest.raises(CoveConfigError, match=message):
            CoveConfig.from_dict(values)
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 50, "dropout": 2}')
    with pytest.raises(CoveConfigError) as error:
        load_cove_config(str(bad))
    assert "bad.json" in str(error.value) and "\n" not in str(error.value)


def test_pipeline_reads_parallel_lines_and_names_a_bad_one(tmp_path):
    good = tmp_path / "pairs.tsv"
    good.write_text("The baker eats bread.\t面包师吃面包。\n\nGood morning\t早上好\n",
                    encoding="utf-8")
    pipeline = cove_pipeline.CovePipeline({}, PipelineOptions(
        vocab_file=VOCAB, max_seq_length=7, seed=1))
    pipeline.check_inputs(str(good))
    batch_ = next(iter(pipeline.input_fn(str(good), False, 8)()))
    vocab = pipeline.vocabulary()
    source = vocab.ids(["<S>", "the", "baker", "eats", "bread", ".", "</S>"])
    target = vocab.ids(["<S>", "面", "包", "师", "吃", "面", "包"])  # cut at 7
    np.testing.assert_array_equal(batch_["input_ids"].numpy()[0], source)
    np.testing.assert_array_equal(batch_["target_ids"].numpy()[0], target)
    np.testing.assert_array_equal(batch_["input_mask"].numpy()[1], [1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(batch_["target_mask"].numpy()[1], [1, 1, 1, 1, 1, 0, 0])
    assert 2 not in source + target  # no <UNK>: the vocabulary has both languages
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\tuno\ntwo without a tab\n", encoding="utf-8")
    with pytest.raises(cove_pipeline.ParallelFileError, match=r"bad.tsv:2: expected "
                       r"source<TAB>target"):
        pipeline.check_inputs(str(bad))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("cove_demo"))
    config_file = str(tmp_path_factory.mktemp("cove_config") / "cove_config.json")
    CoveConfig(**SMALL).to_json_file(config_file)
    settings = dict(recipe="cove", output_dir=output_dir, bert_config_file=config_file,
                    num_train_steps=STEPS, num_warmup_steps=20, optimizer="lamb",
                    learning_rate=2e-2,
                    train_batch_size=32, eval_batch_size=32, max_seq_length=20,
                    save_checkpoints_steps=STEPS, log_steps=50, steps_per_loop=50, seed=12345)
    results = pretraining.run(pretraining.PretrainingJob.for_demo(**settings))
    return output_dir, settings, results


def test_cove_recipe_parts():
    recipe = recipes.load_recipe("cove")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == (
        "cove", ("translation",), "cove")
    config = recipe.demo_config(2275)
    assert config.num_encoder_layers == 2 and config.vocab_size == 2275
    assert registry.families.get("cove").config_file_name == "cove_config.json"


def test_cove_recipe_beats_the_unigram_baseline_on_held_out_pairs(trained):
    output_dir, _, results = trained
    data_dir = os.path.join(output_dir, "data")
    train = open(os.path.join(data_dir, "train.tsv"), encoding="utf-8").read().splitlines()
    held_out = open(os.path.join(data_dir, "eval.tsv"), encoding="utf-8").read().splitlines()
    bundled = [line for line in open(os.path.join(REPO_ROOT, "data", "sample",
                                                  "parallel_en_zh.tsv"), encoding="utf-8")
               .read().splitlines() if line.strip()]
    assert held_out == bundled[9::10] and len(train) + len(held_out) == len(bundled)
    assert not set(held_out) & set(train)
    assert results["global_step"] == STEPS
    loss = results["translation_loss"]
    baseline = results["unigram_baseline_translation_loss"]
    print("cove after %d steps: held-out translation loss %.3f (perplexity %.1f, accuracy "
          "%.3f), unigram %.3f (%.1f, %.3f)" % (
              STEPS, loss, results["translation_perplexity"], results["translation_accuracy"],
              baseline, results["unigram_baseline_translation_perplexity"],
              results["unigram_baseline_translation_accuracy"]))
    assert loss < baseline - 0.5, (loss, baseline)
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        text = f.read()
    assert "translation_loss = " in text and "unigram_baseline_translation_loss = " in text
    assert os.path.isfile(os.path.join(output_dir, "cove_config.json"))


def test_a_checkpoints_network_loads_for_features(trained):
    """The network alone, loaded from the run's checkpoint, scores held-out pairs as the run did."""
    output_dir, settings, results = trained
    config = load_cove_config(output_dir)
    network = CoveNetwork.from_config_object(config)
    fresh = network.features(np.array([[0, 5, 9, 1]]), np.array([[1, 1, 1, 1]])).numpy()
    assert wif.load_network_weights(network, output_dir) == len(network.weights)
    # --init_checkpoint's loader finds the same weights.
    again = CoveNetwork.from_config_object(config)
    checkpoints.init_from_checkpoint(again, output_dir)
    for a, b in zip(network.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    pipeline = cove_pipeline.CovePipeline({}, PipelineOptions(
        vocab_file=VOCAB, max_seq_length=settings["max_seq_length"], seed=1))
    objective = TranslationObjective(config.target_vocab_size)
    total = count = other_total = 0.0
    for features in pipeline.input_fn(os.path.join(output_dir, "data", "eval.tsv"), False,
                                      64)():
        stat = objective(network(features), features)["metrics"]["translation_loss"]
        total, count = total + float(stat[0]), count + float(stat[1])
        # Each target with another pair's source: the translation uses its source.
        other = dict(features, input_ids=tf.roll(features["input_ids"], 1, 0),
                     input_mask=tf.roll(features["input_mask"], 1, 0))
        other_total += float(objective(network(other), other)["metrics"]["translation_loss"][0])
    assert total / count == pytest.approx(results["translation_loss"], rel=1e-4)
    print("held-out loss %.3f with the right sources, %.3f with others" % (
        total / count, other_total / count))
    assert other_total / count > total / count + 0.1
    loaded = network.features(np.array([[0, 5, 9, 1]]), np.array([[1, 1, 1, 1]])).numpy()
    assert loaded.shape == (1, 4, 32 + 2 * 48)
    assert np.abs(loaded - fresh).max() > 1e-3


class TimeOfDay(processors_lib.DataProcessor):
    """Does it happen in the morning (1) or in the evening (0)? Dev: other people and frames."""

    TRAIN_PEOPLE = ["baker", "teacher", "farmer", "cook"]
    DEV_PEOPLE = ["carpenter", "students"]
    TRAIN = ["the {p} reads a book in the {t} .", "the {p} sells bread at the market every {t} .",
             "in the {t} the {p} walks to the river ."]
    DEV = ["the {p} likes making bread in the {t} .", "every {t} the {p} reads a letter ."]

    def _examples(self, people, frames, set_type):
        out = []
        for person in people:
            for k, frame in enumerate(frames):
                for label, time in (("1", "morning"), ("0", "evening")):
                    out.append(processors_lib.InputExample(
                        "%s-%s-%d-%s" % (set_type, person, k, label),
                        frame.format(p=person, t=time), label=label))
        return out

    def get_train_examples(self, data_dir):
        return self._examples(self.TRAIN_PEOPLE, self.TRAIN, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(self.DEV_PEOPLE, self.DEV, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(self.DEV_PEOPLE, self.DEV, "test")

    def get_labels(self):
        return ["0", "1"]


def test_cove_features_feed_run_classifier_with_the_network_frozen(trained, tmp_path):
    """Budget fixed in advance: 15 epochs of 24 sentences (45 steps of 8, learning rate
    3e-3) of a task model over the translation run's frozen CoVe features; the 8 dev
    sentences have people and frames never trained on: accuracy must be at least 0.75."""
    output_dir, _, _ = trained
    assert input_formats.format_class_for("cove", None) is CoveInputFormat
    job = classifier_job.ClassifierJob(
        model_family="cove", processor=TimeOfDay(),
        bert_config_file=os.path.join(output_dir, "cove_config.json"), vocab_file=VOCAB,
        init_checkpoint=output_dir, output_dir=str(tmp_path / "cls"), data_dir=str(tmp_path),
        max_seq_length=16, do_train=True, do_eval=True, train_batch_size=8,
        eval_batch_size=8, learning_rate=3e-3, num_train_epochs=15.0, warmup_proportion=0.1,
        save_checkpoints_steps=1000, seed=3)
    result = classifier_job.run(job)
    print("cove features classifier:", result.eval_results)
    assert result.eval_results["eval_accuracy"] >= 0.75, result.eval_results
    # The classifier's checkpoint holds the pre-trained network unchanged.
    config = load_cove_config(output_dir)
    pretrained = CoveNetwork.from_config_object(config)
    after_training = CoveNetwork.from_config_object(config)
    n = wif.load_network_weights(pretrained, output_dir)
    assert wif.load_network_weights(after_training, str(tmp_path / "cls")) == n
    assert n == len(pretrained.weights)
    for a, b in zip(pretrained.weights, after_training.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # A text's features in the classifier are the pre-trained network's.
    model = build_cove_classifier(config, 2, "classification")
    wif.load_network_weights(model.encoder, output_dir)
    ids = np.array([[0, 5, 9, 1, 0]], np.int32)
    mask = np.array([[1, 1, 1, 1, 0]], np.int32)
    np.testing.assert_allclose(
        cove_features(model.encoder, {"input_ids": ids, "input_mask": mask}).numpy(),
        pretrained.features(ids, mask).numpy(), rtol=1e-6)
    assert not model.encoder.trainable
