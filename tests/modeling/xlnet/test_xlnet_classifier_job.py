"""XLNet through run_classifier's job (`--model_family=xlnet`): its packing in Google's
records, and a tiny XLNet that learns a task on held-out sentences.

Budget fixed before the first run: a width-32, two-layer XLNet from random
weights, 3 epochs of 240 training sentences (batch 16, learning rate 1e-3)
telling an English sentence from a Chinese one; held-out accuracy on 60 other
sentences of the bundled corpus must exceed 0.9 (chance 0.5).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from data.tokenizers.sentencepiece import SentencePieceTokenizer
from modeling.tasks import classifier_job
from modeling.xlnet import XLNetConfig
from modeling.xlnet import finetuning

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPIECE = os.path.join(REPO_ROOT, "data", "sample", "xlnet", "spiece.model")
SAMPLE = os.path.join(REPO_ROOT, "data", "sample")


def _sentences(name):
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
        return [line.strip().replace("\t", " ") for line in f if line.strip()]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("xlnet_cls")
    english, chinese = _sentences("sample_en.txt"), _sentences("sample_zh.txt")
    rng = np.random.default_rng(4)
    rows = [(s, "en") for s in english[:150]] + [(s, "zh") for s in chinese[:150]]
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    data_dir = root / "data"
    data_dir.mkdir()
    for name, part in (("train.tsv", rows[:240]), ("dev.tsv", rows[240:])):
        (data_dir / name).write_text("sentence\tlabel\n" + "".join(
            "%s\t%s\n" % row for row in part), encoding="utf-8")
    vocab_size = SentencePieceTokenizer(SPIECE).vocab_size()
    XLNetConfig(vocab_size=vocab_size, d_model=32, n_layer=2, n_head=2, d_inner=64,
                dropout=0.1).to_json_file(str(root / "config.json"))
    job = classifier_job.ClassifierJob(
        model_family="xlnet", task_name="generic", data_dir=str(data_dir),
        train_file="train.tsv", dev_file="dev.tsv", text_a_column="sentence",
        label_column="label", bert_config_file=str(root / "config.json"),
        vocab_file=SPIECE, output_dir=str(root / "out"), max_seq_length=32,
        do_train=True, do_eval=True, train_batch_size=16, eval_batch_size=20,
        learning_rate=1e-3, num_train_epochs=3.0, log_steps=15, seed=3)
    return job, rows, classifier_job.run(job)


def test_records_hold_xlnets_packing(task):
    job, rows, _ = task
    tokenizer = SentencePieceTokenizer(SPIECE)
    dataset = tf.data.TFRecordDataset(os.path.join(job.output_dir, "eval.tf_record"))
    for record, (sentence, _) in zip(dataset.take(5), rows[240:]):
        example = tf.train.Example.FromString(record.numpy())
        got = {k: list(example.features.feature[k].int64_list.value)
               for k in ("input_ids", "input_mask", "segment_ids")}
        want = finetuning.pack_text_pair(tokenizer, sentence, None, job.max_seq_length)
        for key, values in got.items():
            assert values == want[key].tolist(), key
        assert got["input_ids"][-2:] == [tokenizer.special_ids()["<sep>"],
                                         tokenizer.special_ids()["<cls>"]]


def test_xlnet_fine_tunes_through_the_job_on_held_out_sentences(task):
    _, _, result = task
    assert result.eval_results["global_step"] == 45
    assert result.eval_results["eval_accuracy"] > 0.9, result.eval_results


def test_xlnet_format_refuses_a_wordpiece_vocabulary_and_export(task, tmp_path):
    job, _, _ = task
    import dataclasses  # pylint: disable=g-import-not-at-top
    bad = dataclasses.replace(job, vocab_file=os.path.join(SAMPLE, "vocab.txt"),
                              output_dir=str(tmp_path / "a"))
    with pytest.raises(classifier_job.ClassifierJobError, match="--vocab_file=.*vocab.txt"):
        classifier_job.run(bad)
    export = dataclasses.replace(job, do_train=False, output_dir=str(tmp_path / "b"),
                                 export_dir=str(tmp_path / "export"))
    with pytest.raises(classifier_job.ClassifierJobError, match="--export_dir"):
        classifier_job.run(export)
