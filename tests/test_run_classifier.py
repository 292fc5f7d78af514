"""run/run_classifier.py end to end: a Google-format checkpoint fine-tuned on a pair task,
a user's own processor (the README's example), regression, and bad-input errors."""

import os
import random
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from modeling import checkpoints
from modeling import bert as config_lib
from modeling import objectives
from modeling import recipes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_classifier.py")
GROUP_A = ["apple", "banana", "cherry", "grape", "lemon", "mango"]
GROUP_B = ["olive", "peach", "pear", "plum", "kiwi", "lime"]
VOCAB = (["[PAD]"] + ["[unused%d]" % i for i in range(4)] +
         ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + GROUP_A + GROUP_B + [".", ","])


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def _run(args, timeout=240):
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True,
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


def _readme_processor():
    """The complete DataProcessor example of the README's Fine-tuning section."""
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (code,) = [b for b in blocks if "class MyProcessor(processors.DataProcessor)" in b]
    return code


def test_users_own_processor_file_as_in_the_readme(tmp_path, bert_dir):
    project = tmp_path / "my_project"
    project.mkdir()
    (project / "my_task.py").write_text(_readme_processor())
    data = project / "reviews"
    data.mkdir()
    rng = random.Random(2)

    def review():
        words = [rng.choice(GROUP_A + GROUP_B) for _ in range(3)]
        return " ".join(words), "positive" if words[0] in GROUP_A else "negative"

    for name, n in (("train", 64), ("dev", 10)):
        (data / ("%s.tsv" % name)).write_text(
            "".join("%s\t%s\n" % (label, text) for text, label in (review() for _ in range(n))))
    (data / "test.tsv").write_text("".join("r%d\t%s\n" % (i, review()[0]) for i in range(5)))
    out = tmp_path / "out"
    flags = ["--processor=%s:MyProcessor" % (project / "my_task.py"), "--data_dir=%s" % data,
             "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1",
             "--train_batch_size=16"] + _model_flags(bert_dir, out)
    result = _run(flags)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = _read_results(out / "eval_results.txt")
    assert results["global_step"] == 4 and 0.0 <= results["eval_accuracy"] <= 1.0
    rows = _read_rows(out / "test_results.tsv")
    assert len(rows) == 5 and all(len(r) == 2 for r in rows)

    # A label outside get_labels() stops the run before training, naming file and line.
    with open(data / "dev.tsv", "a") as f:
        f.write("neutral\tplum kiwi lime\n")
    result = _run(flags + ["--output_dir=%s" % (tmp_path / "out2")])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("%s:11: label 'neutral' is not one of the labels of this task: 'negative', "
            "'positive'" % (data / "dev.tsv")) in result.stderr
    assert not (tmp_path / "out2" / "checkpoint").exists()


def test_regression_with_the_generic_processor(tmp_path, bert_dir):
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(3)
    for name, n in (("train", 48), ("dev", 12), ("test", 5)):
        lines = ["sentence1,sentence2,score"]
        for _ in range(n):
            a, b = rng.choice(GROUP_A + GROUP_B), rng.choice(GROUP_A + GROUP_B)
            lines.append("%s,%s,%.2f" % (a, b, rng.uniform(0, 5)))
        (data / ("%s.csv" % name)).write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = _run(["--task_name=generic", "--file_format=csv", "--text_a_column=sentence1",
                   "--text_b_column=sentence2", "--label_column=score",
                   "--task_type=regression", "--data_dir=%s" % data, "--do_train", "--do_eval",
                   "--do_predict", "--num_train_epochs=1", "--train_batch_size=16"]
                  + _model_flags(bert_dir, out))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = _read_results(out / "eval_results.txt")
    assert {"eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"} <= set(results)
    assert "eval_accuracy" not in results and results["global_step"] == 3
    assert -1.0 <= results["eval_pearson"] <= 1.0
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
