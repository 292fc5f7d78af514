"""ELMo as features: run_classifier's --model_family=elmo and extract_features.

A tiny biLM is pre-trained once (`PretrainingJob.for_demo(recipe="elmo")`,
40 steps); the tests check the word records, the frozen biLM under the task
model, the checkpoint load, and the extracted vectors against the network.
"""

import dataclasses
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import processors as processors_lib
from data import word_vocab as vocab_lib
from modeling import checkpoints
from modeling.elmo import ElmoConfig
from modeling.elmo import ElmoNetwork
from modeling.elmo import features as elmo_features
from modeling.recipes import pretraining
from modeling.tasks import classifier_job
from modeling.tasks import input_formats
from modeling.tasks import word_input_format

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(ROOT, "data", "sample", "elmo", "vocab.txt")
TINY = dict(vocab_size=2275, char_embedding_dim=8, filters=[[1, 8], [2, 8], [3, 8]],
            n_highway=1, lstm_dim=32, projection_dim=16, n_layers=2, dropout=0.0)


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    """A pre-trained tiny biLM: (output_dir, options file)."""
    output_dir = str(tmp_path_factory.mktemp("elmo_bilm"))
    options = str(tmp_path_factory.mktemp("elmo_opts") / "elmo_options.json")
    ElmoConfig(**TINY).to_json_file(options)
    pretraining.run(pretraining.PretrainingJob.for_demo(
        recipe="elmo", output_dir=output_dir, bert_config_file=options, num_train_steps=40,
        num_warmup_steps=4, learning_rate=3e-3, train_batch_size=16, eval_batch_size=32,
        max_seq_length=16, save_checkpoints_steps=40, log_steps=40, steps_per_loop=20,
        seed=7, do_eval=False))
    return output_dir, options


class Negation(processors_lib.DataProcessor):
    """Does the sentence say "not" (1) or not (0)? Dev sentences: other nouns and frames."""

    TRAIN_NOUNS = ["cow", "horse", "dog", "cat", "hammer", "knife", "rope", "bucket"]
    DEV_NOUNS = ["sheep", "goat", "saw", "spade"]
    TRAIN = ["the {} is {} in the barn .", "she did {} see the {} near the river .",
             "my father has {} bought a {} in town ."]
    DEV = ["we have {} found the {} behind the house .", "the {} was {} in the garden ."]

    def _examples(self, nouns, frames, set_type):
        out = []
        for noun in nouns:
            for k, frame in enumerate(frames):
                for label, word in (("1", "not"), ("0", "")):
                    args = (noun, word) if frame.index("{}") < 6 else (word, noun)
                    text = " ".join(frame.format(*args).split())
                    out.append(processors_lib.InputExample(
                        "%s-%s-%d-%s" % (set_type, noun, k, label), text, label=label))
        return out

    def get_train_examples(self, data_dir):
        return self._examples(self.TRAIN_NOUNS, self.TRAIN, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(self.DEV_NOUNS, self.DEV, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(self.DEV_NOUNS, self.DEV, "test")

    def get_labels(self):
        return ["0", "1"]


def _tokenizer():
    return word_input_format.WordTokenizer(vocab_lib.WordVocabulary(VOCAB))


def test_word_records_frame_pairs_as_in_pre_training():
    tokenizer = _tokenizer()
    ids, mask, segments, chars = word_input_format.word_features(
        ["the", "cow"], ["a", "zebroid"], tokenizer, 8, 10)
    vocab = tokenizer.vocab
    assert ids == vocab.ids(["<S>", "the", "cow", "</S>", "a", "zebroid", "</S>"]) + [0]
    assert ids[5] == vocab.ids(["<UNK>"])[0]  # unknown to the vocabulary...
    np.testing.assert_array_equal(chars[5], vocab_lib.word_char_ids("zebroid", 10))  # ...not to ELMo
    assert mask == [1] * 7 + [0] and segments == [0, 0, 0, 0, 1, 1, 1, 0]
    assert not chars[7].any()
    # A long pair is cut by Google's truncate_seq_pair (longer side first).
    ids, mask, _ = word_input_format.word_features(["a"] * 3, ["b"] * 9, tokenizer, 8)
    assert sum(mask) == 8 and ids.count(vocab.ids(["a"])[0]) == 3  # b: 9 -> 2 words


def test_elmo_is_registered_and_frozen_under_a_trainable_scalar_mix():
    assert input_formats.format_class_for("elmo", None) is elmo_features.ElmoInputFormat
    model = elmo_features.build_elmo_classifier(ElmoConfig(**TINY), 2, "classification")
    chars = np.stack([word_input_format.word_features(["the", "cow", "is", "here"], None,
                                                      _tokenizer(), 8, 50)[3]] * 2)
    features = {"char_ids": tf.constant(chars, tf.int32),
                "input_mask": tf.constant([[1] * 6 + [0] * 2] * 2, tf.int32),
                "label_ids": tf.constant([0, 1])}
    with tf.GradientTape() as tape:
        loss, _ = model.compute_loss_and_metrics(features, training=True)
    trainable = {v.path for v in model.trainable_variables}
    assert not any(v.path in trainable for v in model.encoder.weights)
    assert {"scalars", "gamma"} <= {p.split("/")[-1] for p in trainable}
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    # Padding never changes the prediction.
    noisy = dict(features, char_ids=tf.tensor_scatter_nd_update(
        features["char_ids"], [[0, 7, 0], [1, 6, 3]], [77, 99]))
    np.testing.assert_allclose(model(features)["logits"], model(noisy)["logits"], atol=1e-5)


def test_classifier_loads_the_bilm_trains_only_the_task_model_and_learns(bilm, tmp_path):
    """Budget fixed in advance: 40 epochs of 48 sentences (240 steps of 8, learning rate
    3e-3); the 16 dev sentences have nouns and frames never trained on: accuracy must
    beat chance (0.5) by 0.2."""
    output_dir, options = bilm
    job = classifier_job.ClassifierJob(
        features="elmo", processor=Negation(), bert_config_file=options,
        vocab_file=VOCAB, init_checkpoint=output_dir, output_dir=str(tmp_path / "cls"),
        data_dir=str(tmp_path),
        max_seq_length=12, do_train=True, do_eval=True, do_predict=True, train_batch_size=8,
        eval_batch_size=8, learning_rate=3e-3, num_train_epochs=40.0, warmup_proportion=0.1,
        save_checkpoints_steps=1000, seed=3)
    result = classifier_job.run(job)
    assert result.eval_results["eval_loss"] < np.log(2.0) - 0.03, result.eval_results
    labels = np.array([int(e.label) for e in Negation().get_test_examples(None)])
    scores = result.test_predictions[:, 1]
    pairs = [(p, n) for p in scores[labels == 1] for n in scores[labels == 0]]
    auc = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs])
    assert auc >= 0.8, (auc, result.eval_results)
    # An evaluation-only run restores the frozen biLM with the task model from the
    # classifier's own checkpoint (not from --init_checkpoint): the same numbers.
    again = classifier_job.run(dataclasses.replace(job, do_train=False, do_predict=False,
                                                   init_checkpoint=None))
    assert again.eval_results == pytest.approx(result.eval_results, abs=1e-5)
    # The classifier's checkpoint holds the pre-trained biLM unchanged.
    pretrained = ElmoNetwork.from_config_object(ElmoConfig(**TINY))
    after_training = ElmoNetwork.from_config_object(ElmoConfig(**TINY))
    n = word_input_format.load_network_weights(pretrained, output_dir)
    assert word_input_format.load_network_weights(after_training, str(tmp_path / "cls")) == n
    assert n == len(pretrained.weights) > 20
    for a, b in zip(pretrained.weights, after_training.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_features_flag_names_the_family_and_refuses_another(tmp_path):
    job = classifier_job.ClassifierJob(features="elmo", model_family="albert", do_train=True,
                                       data_dir=str(tmp_path), output_dir=str(tmp_path),
                                       bert_config_file="x.json", processor=Negation())
    with pytest.raises(classifier_job.ClassifierJobError,
                       match="--features=elmo reads the elmo network; leave --model_family"):
        classifier_job.run(job)
    with pytest.raises(classifier_job.ClassifierJobError, match="--features=gpt: expected one"):
        classifier_job.run(dataclasses.replace(job, features="gpt", model_family="bert"))
    assert job.model_family == "albert"  # the caller's job is not changed


def test_a_checkpoint_of_another_shape_is_refused_in_one_message(bilm):
    output_dir, _ = bilm
    network = ElmoNetwork.from_config_object(ElmoConfig(**dict(TINY, lstm_dim=48)))
    with pytest.raises(checkpoints.CheckpointMismatchError, match="lstm"):
        word_input_format.load_network_weights(network, output_dir)


def test_extract_features_match_the_network(bilm, tmp_path):
    output_dir, options = bilm
    network = ElmoNetwork.from_config_object(ElmoConfig(**TINY))
    assert word_input_format.load_network_weights(network, output_dir) == len(network.weights)
    texts = ["The cow walks to the river.", "A dog ||| barks loudly"]
    records = list(elmo_features.extract_features(network, _tokenizer(), texts,
                                                  layers=[0, -1], max_seq_length=16))
    assert [f["token"] for f in records[1]["features"]] == [
        "<S>", "a", "dog", "</S>", "barks", "loudly", "</S>"]
    chars = word_input_format.word_features(
        ["the", "cow", "walks", "to", "the", "river", "."], None, _tokenizer(), 9, 50)[3]
    layers = network({"char_ids": tf.constant(chars[None], tf.int32)})["elmo_layers"]
    first = records[0]["features"]
    np.testing.assert_allclose([f["layers"][1]["values"] for f in first], layers[-1][0],
                               atol=1e-5)
    assert first[2]["layers"][0]["index"] == 0
    np.testing.assert_allclose(first[2]["elmo_average"],
                               np.mean([l[0, 2] for l in layers], axis=0), atol=1e-5)
    with pytest.raises(ValueError, match="--layers has 3"):
        list(elmo_features.extract_features(network, _tokenizer(), texts, layers=[3]))

    # The script: --model_family=elmo, default layers (all three).
    inputs = tmp_path / "in.txt"
    inputs.write_text("the cow walks .\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    script_runner.run([sys.executable, os.path.join(ROOT, "run", "extract_features.py"),
                    "--model_family=elmo", "--input_file=%s" % inputs,
                    "--output_file=%s" % out, "--vocab_file=%s" % VOCAB,
                    "--bert_config_file=%s" % options, "--init_checkpoint=%s" % output_dir,
                    "--max_seq_length=8"], check=True, cwd=ROOT, capture_output=True)
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert [l["index"] for l in record["features"][1]["layers"]] == [0, 1, 2]
    assert len(record["features"][1]["elmo_average"]) == 2 * TINY["projection_dim"]
