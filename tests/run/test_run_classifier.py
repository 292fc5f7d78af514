"""run/run_classifier.py end to end: a Google-format checkpoint fine-tuned on a pair task,
a user's own processor (the example of docs/fine-tuning.md) learning a sentence task, regression
learning a count, and bad-input errors.

The learning tests fix their data, step budget and threshold in their docstrings; the
dev files hold sentences the training files do not.
"""

import os
import random
import re
import sys

import keras
import numpy as np
import pytest

import script_runner
from modeling import checkpoints
from modeling import bert as config_lib
from modeling import objectives
from modeling import recipes

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_classifier.py")
GROUP_A = ["apple", "banana", "cherry", "grape", "lemon", "mango"]
GROUP_B = ["olive", "peach", "pear", "plum", "kiwi", "lime"]
# Words that carry no label: the context the label-carrying word sits in.
FILLERS = ["the", "a", "box", "of", "with", "fresh", "ripe", "some"]
VOCAB = (["[PAD]"] + ["[unused%d]" % i for i in range(4)] +
         ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + GROUP_A + GROUP_B + [".", ","] + FILLERS)


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def _run(args, timeout=240):
    return script_runner.run([sys.executable, SCRIPT] + args, capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _read_results(path):
    results = {}
    with open(path) as f:
        for line in f:
            key, value = line.strip().split(" = ")
            results[key] = float(value)
    return results


def _read_rows(path):
    with open(path) as f:
        return [[float(v) for v in line.rstrip("\n").split("\t")] for line in f]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny BERT released the way Google releases them: bert_config.json,
    vocab.txt and a TF1 bert_model.ckpt (a freshly built pretrainer)."""
    path = tmp_path_factory.mktemp("tiny_bert")
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = config_lib.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, type_vocab_size=2)
    config.to_json_file(str(path / "bert_config.json"))
    keras.utils.set_random_seed(0)
    checkpoints.save_google_checkpoint(recipes.build_bert_pretrainer(config),
                                       str(path / "bert_model.ckpt"))
    return path


def _model_flags(bert_dir, output_dir):
    return ["--vocab_file=%s" % (bert_dir / "vocab.txt"),
            "--bert_config_file=%s" % (bert_dir / "bert_config.json"),
            "--init_checkpoint=%s" % (bert_dir / "bert_model.ckpt"),
            "--output_dir=%s" % output_dir, "--max_seq_length=16", "--seed=3"]


def _disjoint_splits(make, sizes, rng):
    """`make(rng, i)` for rows i = 0..n-1 of each split; no text repeated within or
    across splits (a repeat is drawn again)."""
    seen, splits = set(), {}
    for name, n in sizes:
        rows = []
        while len(rows) < n:
            row = make(rng, len(rows))
            if row[0] not in seen:
                seen.add(row[0])
                rows.append(row)
        splits[name] = rows
    return splits


def _pair(rng):
    """Label 1 iff text_a names a group-A fruit AND text_b a group-B one: the
    label depends on both segments (and on which is which)."""
    a = rng.choice(GROUP_A) if rng.random() < 0.707 else rng.choice(GROUP_B)
    b = rng.choice(GROUP_B) if rng.random() < 0.707 else rng.choice(GROUP_A)
    return a, b, int(a in GROUP_A and b in GROUP_B)


def test_fine_tunes_a_google_checkpoint_on_a_pair_task(tmp_path, bert_dir):
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(1)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    test_labels = []
    test_pairs = []
    for name, n in (("train", 2000), ("dev", 200), ("test", 37)):
        lines = [header]
        for i in range(n):
            a, b, label = _pair(rng)
            if name == "test":
                test_labels.append(label)
                test_pairs.append((a.capitalize() + ".", b))
            # MRPC's layout: the test file's first column is an index.
            lines.append("%d\t%d\t%d\t%s\t%s" % (i if name == "test" else label, 2 * i,
                                                 2 * i + 1, a.capitalize() + ".", b))
        (data / ("%s.tsv" % name)).write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = _run(["--task_name=MRPC", "--data_dir=%s" % data, "--do_train", "--do_eval",
                   "--do_predict", "--learning_rate=5e-4", "--num_train_epochs=10",
                   "--log_steps=100", "--export_dir=%s" % (tmp_path / "serving")]
                  + _model_flags(bert_dir, out))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Loaded 39 variables" in output  # the encoder came from the Google checkpoint

    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "eval_results.txt",
                 "test_results.tsv", "checkpoint", "ckpt-625.index"):
        assert (out / name).exists(), name
    assert os.listdir(out / "train") and os.listdir(out / "eval")  # TensorBoard
    results = _read_results(out / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"}
    assert results["global_step"] == 625  # int(2000 / 32 * 10)
    assert results["eval_accuracy"] > 0.9, results
    assert results["eval_f1"] > 0.9 and results["eval_loss"] < 0.3

    rows = np.array(_read_rows(out / "test_results.tsv"))
    assert rows.shape == (37, 2)  # 40 predicted (padded to 5 batches of 8), 3 dropped
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)
    # Rows are in the order of test.tsv: they predict its (hidden) labels.
    assert np.mean(rows.argmax(axis=1) == np.array(test_labels)) > 0.9

    # The exported SavedModel, fed the raw test strings, gives the same rows.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    served = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_pair"](
        text_a=tf.constant([a for a, _ in test_pairs]),
        text_b=tf.constant([b for _, b in test_pairs]))
    np.testing.assert_allclose(served["probabilities"].numpy(), rows, atol=1e-4)


def _docs_processor():
    """The complete DataProcessor example of the docs' Fine-tuning page."""
    with open(os.path.join(REPO_ROOT, "docs", "fine-tuning.md"), encoding="utf-8") as f:
        page = f.read()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    (code,) = [b for b in blocks if "class MyProcessor(processors.DataProcessor)" in b]
    return code


def test_users_own_processor_file_as_in_the_docs(tmp_path, bert_dir):
    """The docs' processor learns a sentence task and generalises to new sentences.

    A review is four filler words and one fruit at a random position; it is
    "positive" iff the fruit is from GROUP_A. Train: 640 reviews, labels
    alternating (balanced); dev: 200 other reviews (majority class 50%).
    Budget, fixed beforehand: batch 32, 10 epochs = 200 steps, lr 1e-3 (10%
    warmup), from the tiny random "pre-trained" checkpoint. Threshold: dev
    accuracy >= 0.9.
    """
    project = tmp_path / "my_project"
    project.mkdir()
    (project / "my_task.py").write_text(_docs_processor())
    data = project / "reviews"
    data.mkdir()
    rng = random.Random(2)

    def review(rng, index):
        positive = index % 2 == 0
        words = [rng.choice(FILLERS) for _ in range(4)]
        words.insert(rng.randrange(5), rng.choice(GROUP_A if positive else GROUP_B))
        return " ".join(words), "positive" if positive else "negative"

    splits = _disjoint_splits(review, (("train", 640), ("dev", 200), ("test", 5)), rng)
    for name in ("train", "dev"):
        (data / ("%s.tsv" % name)).write_text(
            "".join("%s\t%s\n" % (label, text) for text, label in splits[name]))
    (data / "test.tsv").write_text(
        "".join("r%d\t%s\n" % (i, text) for i, (text, _) in enumerate(splits["test"])))
    dev_labels = [label for _, label in splits["dev"]]
    assert dev_labels.count("positive") == 100  # majority class: 50%
    out = tmp_path / "out"
    flags = ["--processor=%s:MyProcessor" % (project / "my_task.py"), "--data_dir=%s" % data,
             "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=10",
             "--train_batch_size=32", "--learning_rate=1e-3"] + _model_flags(bert_dir, out)
    result = _run(flags)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = _read_results(out / "eval_results.txt")
    assert results["global_step"] == 200
    assert results["eval_accuracy"] >= 0.9, results
    rows = np.array(_read_rows(out / "test_results.tsv"))
    assert rows.shape == (5, 2)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)

    # A label outside get_labels() stops the run before training, naming file and line.
    with open(data / "dev.tsv", "a") as f:
        f.write("neutral\tplum kiwi lime\n")
    result = _run(flags + ["--output_dir=%s" % (tmp_path / "out2")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("%s:201: label 'neutral' is not one of the labels of this task: 'negative', "
            "'positive'" % (data / "dev.tsv")) in result.stderr
    assert not (tmp_path / "out2" / "checkpoint").exists()


def test_regression_with_the_generic_processor(tmp_path, bert_dir):
    """Regression (generic csv processor, sentence pairs) learns a count.

    Each of text_a and text_b is three fruits, each from GROUP_A or GROUP_B
    with probability 1/2; the score is the fraction of GROUP_A fruits in the
    pair (count / 6, in [0, 1], variance 1/24). Train: 640 pairs; dev: 200
    other pairs. Budget, fixed beforehand: batch 32, 10 epochs = 200 steps,
    lr 1e-3 (as the classification test). Thresholds: dev Pearson >= 0.7 (an
    unrelated predictor has |r| ~ 1/sqrt(200) = 0.07) and dev MSE (eval_loss)
    at most half the dev scores' variance (R^2 >= 0.5: better than
    predicting the mean).

    (A first design scored the raw count, 0..6: the 32-unit tanh pooler
    saturated reaching the mean of 3, and the model predicted that constant.
    STS-B-like scores on a scale the tiny model's output can reach keep the
    test about learning the count.)
    """
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(3)

    def pair(rng, index):
        del index
        words = [rng.choice(GROUP_A if rng.random() < 0.5 else GROUP_B) for _ in range(6)]
        score = sum(word in GROUP_A for word in words) / 6.0
        return (" ".join(words[:3]), " ".join(words[3:])), score

    splits = _disjoint_splits(pair, (("train", 640), ("dev", 200), ("test", 5)), rng)
    for name, rows in splits.items():
        lines = ["sentence1,sentence2,score"]
        lines += ["%s,%s,%.4f" % (a, b, score) for (a, b), score in rows]
        (data / ("%s.csv" % name)).write_text("\n".join(lines) + "\n")
    dev_scores = np.array([score for _, score in splits["dev"]], np.float64)
    out = tmp_path / "out"
    result = _run(["--task_name=generic", "--file_format=csv", "--text_a_column=sentence1",
                   "--text_b_column=sentence2", "--label_column=score",
                   "--task_type=regression", "--data_dir=%s" % data, "--do_train", "--do_eval",
                   "--do_predict", "--num_train_epochs=10", "--train_batch_size=32",
                   "--learning_rate=1e-3"] + _model_flags(bert_dir, out))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = _read_results(out / "eval_results.txt")
    assert {"eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"} <= set(results)
    assert "eval_accuracy" not in results and results["global_step"] == 200
    assert results["eval_pearson"] >= 0.7, results
    assert results["eval_loss"] <= 0.5 * dev_scores.var(), (results, dev_scores.var())
    rows = _read_rows(out / "test_results.tsv")
    assert len(rows) == 5 and all(len(r) == 1 for r in rows)


def test_bad_inputs_are_refused_before_training(tmp_path, bert_dir):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("h\th\th\th\th\n1\t1\t2\tapple\tpear\n")

    # A vocabulary that does not belong to the config.
    small_vocab = tmp_path / "vocab.txt"
    small_vocab.write_text("\n".join(VOCAB[:-2]) + "\n")
    result = _run(["--task_name=mrpc", "--data_dir=%s" % data, "--do_train"] +
                  _model_flags(bert_dir, tmp_path / "o1") + ["--vocab_file=%s" % small_vocab])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d"
            % (small_vocab, len(VOCAB) - 2, bert_dir / "bert_config.json", len(VOCAB))
            ) in result.stderr

    # Sequences longer than the position table.
    result = _run(["--task_name=mrpc", "--data_dir=%s" % data, "--do_train"] +
                  _model_flags(bert_dir, tmp_path / "o2") + ["--max_seq_length=64"])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Cannot use sequence length 64" in result.stderr and "to sequence length 32" in result.stderr

    # Casing that contradicts a released checkpoint's name.
    result = _run(["--task_name=mrpc", "--data_dir=%s" % data, "--do_train"] +
                  _model_flags(bert_dir, tmp_path / "o4") + [
                      "--do_lower_case=False",
                      "--init_checkpoint=%s" % (tmp_path / "uncased_L-12_H-768_A-12" / "bert_model.ckpt")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "`--do_lower_case=False`" in result.stderr and "uncased model" in result.stderr

    # A malformed row.
    (data / "train.tsv").write_text("h\th\th\th\th\n1\t1\t2\tapple\tpear\n0\t3\tplum\n")
    result = _run(["--task_name=mrpc", "--data_dir=%s" % data, "--do_train"] +
                  _model_flags(bert_dir, tmp_path / "o3"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("%s:3: expected 5 columns: Quality, #1 ID, #2 ID, #1 String, #2 String, but the "
            "row has 3 column(s)" % (data / "train.tsv")) in result.stderr
    assert not (tmp_path / "o3" / "train.tf_record").exists()
