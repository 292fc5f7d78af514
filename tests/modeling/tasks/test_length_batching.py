"""Length-aware batching (`data.input_pipeline`, `modeling.tasks.length_batching`).

Trimmed batches give the untrimmed numbers (losses, logits, predictions to
1e-5) in every task; batch widths are the buckets; predictions grouped by
length come back in input order; training grouped by length is deterministic
under a seed and a resumed stream continues where the first stopped. Dropout
is 0 in the job runs, so that trimmed and untrimmed runs train the same model.
"""

import json
import random

import numpy as np
import pytest
import tensorflow as tf

from data import input_pipeline
from data import processors
from modeling import bert as config_lib
from modeling import registry
from modeling.serving import inference
from modeling.tasks import classification
from modeling.tasks import classifier_job
from modeling.tasks import length_batching
from modeling.tasks import multitask_job
from modeling.tasks import ner_job
from modeling.tasks import siamese_job
from modeling.tasks import squad_job

SEQ = 64
WORDS = ["red", "blue", "cat", "dog", "the", "big", "old", "house", "river", "park"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "which", "animal", "has", "a",
          "colour", "?", ".", "paris", "john", "lives", "in"] + WORDS)


# ---------------------------------------------------------------- the functions


def test_buckets_are_a_small_fixed_set_ending_at_max_seq_length():
    assert input_pipeline.length_buckets(48) == (16, 32, 48)
    assert input_pipeline.length_buckets(50) == (16, 32, 48, 50)
    assert input_pipeline.length_buckets(256) == (16, 32, 48, 64, 80, 96, 112, 128, 160, 192,
                                                  224, 256)
    assert len(input_pipeline.length_buckets(512)) == 16
    with pytest.raises(ValueError, match="max_seq_length=0"):
        input_pipeline.length_buckets(0)


def _mask(lengths, width, left=False):
    rows = [[1] * n + [0] * (width - n) for n in lengths]
    return tf.constant([row[::-1] for row in rows] if left else rows, tf.int32)


@pytest.mark.parametrize("left", [False, True])
def test_trim_cuts_every_group_on_its_padding_side_to_a_bucket(left):
    mask = _mask([3, 17, 0], SEQ, left)
    features = {"input_ids": mask * 7, "input_mask": mask, "segment_ids": mask * 0,
                "label_ids": tf.constant([1, 2, 3]), "b_input_mask": _mask([2, 1, 1], SEQ)}
    groups = input_pipeline.STANDARD_SEQUENCE_FEATURES + (("b_input_mask", ("b_input_mask",)),)
    out = input_pipeline.trim_batch(features, SEQ, groups)
    assert out["input_ids"].shape == (3, 32) and out["b_input_mask"].shape == (3, 16)
    assert out["label_ids"] is features["label_ids"]
    kept = mask[:, SEQ - 32:] if left else mask[:, :32]
    np.testing.assert_array_equal(out["input_mask"], kept)  # every real token kept
    assert int(tf.reduce_sum(out["input_mask"])) == 20
    np.testing.assert_array_equal(input_pipeline.example_length(features), [3, 17, 0])


def _stream(lengths, batch):
    """A finite input_fn of batches of `[batch, SEQ]` features, row i of length lengths[i]."""
    mask = _mask(lengths, SEQ).numpy()
    ids = mask * (np.arange(len(lengths))[:, None] + 5)

    def input_fn(input_context=None):
        return tf.data.Dataset.from_tensor_slices(
            {"input_ids": ids, "input_mask": mask, "segment_ids": mask * 0,
             "label_ids": np.arange(len(lengths))}).batch(batch)

    return input_fn


def test_prediction_grouped_by_length_keeps_input_order():
    rng = np.random.RandomState(0)
    lengths = rng.randint(1, SEQ + 1, size=37)
    grouped = input_pipeline.length_batched_input_fn(
        _stream(lengths, 4), SEQ, 4, is_training=False, group_by_length=True, keep_order=True)
    batches = list(grouped())
    buckets = input_pipeline.length_buckets(SEQ)
    for b in batches:  # one bucket per batch, its width
        widths = {buckets[np.searchsorted(buckets, n)] for n in b["input_mask"].numpy().sum(1)}
        assert widths == {b["input_ids"].shape[1]}
    assert sum(len(b["label_ids"]) for b in batches) == 37
    outputs = input_pipeline.restore_input_order(
        {name: np.concatenate([b[name].numpy() for b in batches])
         for name in ("label_ids", input_pipeline.ORDER_FEATURE)})
    np.testing.assert_array_equal(outputs["label_ids"], np.arange(37))


def test_training_grouped_by_length_is_deterministic_and_resumes_exactly():
    lengths = np.random.RandomState(1).randint(1, SEQ + 1, size=64)
    mask = _mask(lengths, SEQ).numpy()

    def base(input_context=None):  # a shuffled, repeated training stream, as the tasks'
        return tf.data.Dataset.from_tensor_slices(
            {"input_ids": mask * 3, "input_mask": mask, "segment_ids": mask * 0,
             "label_ids": np.arange(64)}).repeat().shuffle(32, seed=5).batch(4, True)

    def run(skip=0, take=12):
        fn = input_pipeline.length_batched_input_fn(base, SEQ, 4, is_training=True,
                                                    group_by_length=True)
        return [b["label_ids"].numpy().tolist() for b in fn().skip(skip).take(take)]

    first = run()
    assert first == run()  # the same seed, the same batches
    assert run(skip=5, take=7) == first[5:]  # the trainer's resume: skip what was trained on
    for b in input_pipeline.length_batched_input_fn(base, SEQ, 4, is_training=True,
                                                    group_by_length=True)().take(12):
        assert b["input_ids"].shape[0] == 4  # whole batches in training
        assert b["input_ids"].shape[1] in input_pipeline.length_buckets(SEQ)


# ----------------------------------------------------- families take short inputs


@pytest.mark.parametrize("family", ["bert", "albert", "roberta", "distilbert", "xlnet"])
def test_every_classifier_family_gives_the_same_outputs_on_trimmed_batches(family):
    config = registry.families.get(family).demo_config(len(VOCAB))  # dropout off: inference
    model = classification.BertClassifier.from_config_object(config, num_labels=3,
                                                             family=family)
    left = family == "xlnet"  # XLNet's records are padded on the left
    mask = _mask([5, 12, 3, 9], SEQ, left)
    ids = tf.where(mask > 0, tf.random.stateless_uniform(mask.shape, [1, 2], 5, len(VOCAB),
                                                          tf.int32), 0)
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": mask * 0,
                "label_ids": tf.constant([0, 1, 2, 1])}
    trimmed = input_pipeline.trim_batch(features, SEQ)
    assert trimmed["input_ids"].shape == (4, 16)
    full, cut = model(features, training=False), model(trimmed, training=False)
    np.testing.assert_allclose(cut["probabilities"], full["probabilities"], atol=1e-5)
    loss_full = model.compute_loss_and_metrics(features, training=False)[0]
    loss_cut = model.compute_loss_and_metrics(trimmed, training=False)[0]
    np.testing.assert_allclose(loss_cut, loss_full, atol=1e-5)


# ------------------------------------------------------------- the jobs, end to end


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("length_batching")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=SEQ, type_vocab_size=2,
                          hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0).to_json_file(
                              str(directory / "bert_config.json"))
    return directory


def _files(directory, **kwargs):
    return dict(bert_config_file=str(directory / "bert_config.json"),
                vocab_file=str(directory / "vocab.txt"), seed=1, log_steps=1000, **kwargs)


class ShortTexts(processors.DataProcessor):
    """Texts of 1 to 9 words: every batch fits a 16-token bucket of SEQ = 64."""

    def _examples(self, n, set_type):
        return [processors.InputExample("%s-%d" % (set_type, i),
                                        " ".join(WORDS[(i + k) % 10] for k in range(1 + i % 9)),
                                        label=str(i % 3)) for i in range(n)]

    def get_train_examples(self, data_dir):
        return self._examples(24, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(10, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(11, "test")

    def get_labels(self):
        return ["0", "1", "2"]


def _classifier_job(model_files, name, **kwargs):
    values = dict(processor=ShortTexts(), data_dir=str(model_files),
                  output_dir=str(model_files / name), max_seq_length=SEQ, do_train=True,
                  do_eval=True, do_predict=True, train_batch_size=4, eval_batch_size=4,
                  predict_batch_size=3, num_train_epochs=1.0, steps_per_loop=3,
                  learning_rate=1e-2)
    values.update(kwargs)
    return classifier_job.ClassifierJob(**_files(model_files, **values))


@pytest.fixture(scope="module")
def classifier_runs(model_files):
    return {trim: classifier_job.run(_classifier_job(model_files, "cls%d" % trim,
                                                     trim_batches=trim))
            for trim in (True, False)}


def test_classifier_trimmed_equals_untrimmed(classifier_runs):
    trimmed, full = classifier_runs[True], classifier_runs[False]
    for key in ("eval_loss", "eval_accuracy", "global_step"):
        np.testing.assert_allclose(trimmed.eval_results[key], full.eval_results[key],
                                   atol=1e-5)
    assert trimmed.test_predictions.shape == (11, 3)  # grouped by length, in input order
    np.testing.assert_allclose(trimmed.test_predictions, full.test_predictions, atol=1e-5)


def test_classifier_trimmed_under_mirrored_strategy_equals_one_device(model_files,
                                                                     classifier_runs):
    """Two replicas (conftest's two logical CPUs), a graph loop of 3 updates, each replica's
    batch cut to its own width: the one-device numbers."""
    # Prediction batches split between the replicas: 4, not the one-device job's 3.
    mirrored = classifier_job.run(_classifier_job(model_files, "cls_mirrored",
                                                  distribution_strategy="mirrored",
                                                  predict_batch_size=4))
    one = classifier_runs[True]
    np.testing.assert_allclose(mirrored.eval_results["eval_loss"], one.eval_results["eval_loss"],
                               atol=1e-5)
    np.testing.assert_allclose(mirrored.test_predictions, one.test_predictions, atol=1e-5)


def test_classifier_batches_are_cut_to_the_buckets(model_files):
    runner = classifier_job.ClassifierRunner(_classifier_job(model_files, "shapes"))
    runner.check()
    runner.prepare()
    train = runner.train_input_fn()()
    assert train.element_spec["input_ids"].shape.as_list() == [4, None]
    assert {b["input_ids"].shape[1] for b in train.take(6)} == {16}
    predict = runner._input_fn(runner.predict_file, 3, False, length_batching.PREDICT)
    assert predict.keeps_order and input_pipeline.ORDER_FEATURE in next(iter(predict()))
    off = classifier_job.ClassifierRunner(_classifier_job(model_files, "shapes_off",
                                                          trim_batches=False))
    off.check()
    off.prepare()
    assert next(iter(off.train_input_fn()()))["input_ids"].shape == (4, SEQ)


class _StoppedAfter3(classifier_job.ClassifierRunner):
    """A run "killed" right after update 3 (its checkpoint written), schedule unchanged."""

    def build_trainer(self, **overrides):
        trainer = super().build_trainer(**overrides)
        trainer.num_train_steps = 3
        return trainer


def test_classifier_grouped_training_resumes_where_it_stopped(model_files):
    """6 updates in one run == 3 updates, then a resumed run to 6 (the stream skips 3)."""
    whole = classifier_job.run(_classifier_job(model_files, "resume_whole", group_by_length=True,
                                               do_predict=False))
    _StoppedAfter3(_classifier_job(model_files, "resume_parts", group_by_length=True,
                                   do_eval=False, do_predict=False)).run()
    resumed = classifier_job.run(_classifier_job(model_files, "resume_parts",
                                                 group_by_length=True, do_predict=False))
    assert resumed.eval_results["global_step"] == whole.eval_results["global_step"] == 6
    np.testing.assert_allclose(resumed.eval_results["eval_loss"],
                               whole.eval_results["eval_loss"], atol=1e-5)


def test_flag_errors_are_one_line(model_files):
    with pytest.raises(classifier_job.ClassifierJobError) as error:
        classifier_job.run(_classifier_job(model_files, "bad", trim_batches=False,
                                           group_by_length=True))
    assert "\n" not in str(error.value) and "--group_by_length needs --trim_batches" in str(
        error.value)
    job = multitask_job.MultitaskJob(**_files(
        model_files, task_list_file=str(model_files / "tasks.json"),
        output_dir=str(model_files / "mt"), do_train=True, group_by_length=True))
    with pytest.raises(multitask_job.MultitaskJobError, match="^--group_by_length: "):
        multitask_job.run(job)


def _conll(path, n, seed):
    rng = random.Random(seed)
    lines = ["-DOCSTART- O", ""]
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 8))]
        lines += ["john B-PER", "lives O", "in O"] + ["%s O" % w for w in words]
        lines += ["paris B-LOC", ""]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def ner_runs(model_files):
    data = model_files / "ner"
    data.mkdir()
    for name, n, seed in (("train.txt", 16, 0), ("dev.txt", 7, 1), ("test.txt", 5, 2)):
        _conll(data / name, n, seed)
    return {trim: ner_job.run(ner_job.NerJob(**_files(
        model_files, data_dir=str(data), output_dir=str(model_files / ("ner%d" % trim)),
        max_seq_length=SEQ, do_train=True, do_eval=True, do_predict=True, train_batch_size=4,
        eval_batch_size=3, predict_batch_size=2, num_train_epochs=1.0, learning_rate=1e-2,
        trim_batches=trim))) for trim in (True, False)}


def test_ner_trimmed_equals_untrimmed(ner_runs):
    trimmed, full = ner_runs[True], ner_runs[False]
    np.testing.assert_allclose(trimmed.eval_results["eval_loss"], full.eval_results["eval_loss"],
                               atol=1e-5)
    assert trimmed.eval_results == pytest.approx(full.eval_results, abs=1e-5)
    assert trimmed.test_predictions == full.test_predictions
    assert len(trimmed.test_predictions) == 5


def _squad(path, n, seed):
    rng = random.Random(seed)
    paragraphs = []
    for k in range(n):
        words = [rng.choice(WORDS[4:]) for _ in range(rng.randint(2, 12))]
        position = rng.randint(0, len(words))
        words[position:position] = ["red", "cat"]
        context = " ".join(words) + "."
        start = len(" ".join(words[:position])) + (1 if position else 0)
        paragraphs.append({"context": context, "qas": [
            {"id": "q%d" % k, "question": "which animal has a colour?",
             "answers": [{"text": "red cat", "answer_start": start}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "t", "paragraphs": paragraphs}]}))
    return str(path)


@pytest.fixture(scope="module")
def squad_runs(model_files):
    train = _squad(model_files / "squad_train.json", 12, 0)
    dev = _squad(model_files / "squad_dev.json", 7, 1)
    return {trim: squad_job.run(squad_job.SquadJob(**_files(
        model_files, train_file=train, predict_file=dev,
        output_dir=str(model_files / ("squad%d" % trim)), max_seq_length=SEQ, doc_stride=16,
        max_query_length=8, do_train=True, do_predict=True, train_batch_size=4,
        predict_batch_size=3, num_train_epochs=1.0, learning_rate=1e-2,
        trim_batches=trim))) for trim in (True, False)}


def test_squad_trimmed_equals_untrimmed(squad_runs):
    trimmed, full = squad_runs[True], squad_runs[False]
    assert trimmed.predictions == full.predictions
    for question, entries in full.nbest.items():
        got = trimmed.nbest[question]
        assert [e["text"] for e in got] == [e["text"] for e in entries]
        np.testing.assert_allclose([e["start_logit"] for e in got],
                                   [e["start_logit"] for e in entries], atol=1e-5)
        np.testing.assert_allclose([e["probability"] for e in got],
                                   [e["probability"] for e in entries], atol=1e-5)


@pytest.fixture(scope="module")
def siamese_runs(model_files):
    data = model_files / "pairs"
    data.mkdir()
    rng = random.Random(0)
    lines = ["%s\t%s" % (" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))),
                         " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))))
             for _ in range(20)]
    (data / "train.tsv").write_text("\n".join(lines[:12]) + "\n")
    (data / "dev.tsv").write_text("\n".join(lines[12:]) + "\n")
    return {trim: siamese_job.run(siamese_job.SiameseJob(**_files(
        model_files, data_dir=str(data), output_dir=str(model_files / ("siamese%d" % trim)),
        max_seq_length=SEQ, do_train=True, do_eval=True, train_batch_size=4,
        eval_batch_size=3, num_train_epochs=1.0, learning_rate=1e-2, pooling="max",
        trim_batches=trim))) for trim in (True, False)}


def test_siamese_trimmed_equals_untrimmed(siamese_runs):
    trimmed, full = siamese_runs[True].eval_results, siamese_runs[False].eval_results
    assert set(trimmed) == set(full) and "eval_loss" in full
    assert trimmed == pytest.approx(full, abs=1e-5)


# ------------------------------------------------------------------- inference


def test_extract_features_grouped_by_length_keeps_order_and_values(model_files):
    from data import tokenization  # pylint: disable=import-outside-toplevel
    tokenizer = tokenization.FullTokenizer(str(model_files / "vocab.txt"), True)
    config = config_lib.BertConfig.from_json_file(str(model_files / "bert_config.json"))
    encoder = registry.build_encoder(config, "bert")
    texts = [" ".join(WORDS[:1 + (7 * i) % 10]) + (" ||| big cat" if i % 3 == 0 else "")
             for i in range(9)]
    grouped = list(inference.extract_features(encoder, tokenizer, texts, layers=[-1],
                                              max_seq_length=SEQ, batch_size=2))
    plain = list(inference.extract_features(encoder, tokenizer, texts, layers=[-1],
                                            max_seq_length=SEQ, batch_size=2,
                                            group_by_length=False))
    assert [g["linex_index"] for g in grouped] == list(range(9))
    for got, want in zip(grouped, plain):
        assert [t["token"] for t in got["features"]] == [t["token"] for t in want["features"]]
        np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(
            [v for t in got["features"] for v in t["layers"][0]["values"]],
            [v for t in want["features"] for v in t["layers"][0]["values"]], atol=1e-5)
