"""run/compare_models.py's task and table (modeling.experiments.comparison)."""

import collections
import json
import os
import random

import numpy as np
import pytest

from data import tokenization
from modeling.elmo import load_elmo_config
from modeling.elmo import features as elmo_features
from modeling.experiments import comparison


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return comparison.build_word_order_task(str(tmp_path_factory.mktemp("order_task")), seed=5)


def _rows(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header == ["sentence", "label"]
        return [tuple(line.rstrip("\n").split("\t")) for line in f]


def test_shuffled_keeps_the_words_and_the_final_mark_and_always_moves_something():
    rng = random.Random(0)
    words = "the farmer opens the gate .".split()
    for _ in range(50):
        other = comparison.shuffled(words, rng)
        assert other[-1] == "." and sorted(other) == sorted(words) and other != words
    assert comparison.shuffled(["a", "a", "."], rng) is None  # nothing to reorder


def test_the_task_pairs_every_sentence_with_its_shuffle_and_holds_out_documents(task):
    paths, counts = task
    train, dev = _rows(paths["train"]), _rows(paths["dev"])
    assert (len(train), len(dev)) == (counts["train"], counts["dev"])
    assert counts["dev"] >= 100 and counts["train"] >= 10 * counts["dev"] // 2
    for rows in (train, dev):
        bags = collections.Counter()
        for text, label in rows:
            assert label in ("0", "1") and "  " not in text
            bags[(tuple(sorted(text.split())), label)] += 1
        # Each bag of words once in order and once shuffled: a bag of words is at chance.
        originals = collections.Counter({b: n for (b, l), n in bags.items() if l == "1"})
        shuffles = collections.Counter({b: n for (b, l), n in bags.items() if l == "0"})
        assert originals == shuffles
    # Held-out sentences come from documents training never saw.
    train_originals = {text for text, label in train if label == "1"}
    dev_originals = [text for text, label in dev if label == "1"]
    assert sum(text in train_originals for text in dev_originals) <= len(dev_originals) // 10
    # Chinese is in both splits (characters as words).
    assert any(tokenization._is_chinese_char(ord(t[0])) for t, _ in dev)


def test_compare_writes_a_table_with_the_fine_tuned_models_parameters(tmp_path):
    job = comparison.CompareJob(output_dir=str(tmp_path), models=["elmo"], pretrain_steps=8,
                                num_train_epochs=0.1, max_seq_length=24)
    rows = comparison.compare(job)
    assert [r["model"] for r in rows] == ["elmo"]
    row = rows[0]
    assert 0.0 <= row["eval_accuracy"] <= 1.0 and row["pretrain_seconds"] > 0
    config = load_elmo_config(str(tmp_path / "pretrain_elmo" / "elmo_options.json"))
    model = elmo_features.build_elmo_classifier(config, 2, "classification")
    expected = sum(int(np.prod(v.shape)) for v in model.weights if "seed" not in v.path)
    assert row["parameters"] == expected
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert saved["rows"] == rows and saved["task"]["chance"] == 0.5
    table = (tmp_path / "comparison.txt").read_text()
    assert table.splitlines()[2].startswith("| elmo | frozen biLM features |")
    with pytest.raises(ValueError, match="--models: unknown model"):
        comparison.compare(comparison.CompareJob(output_dir=str(tmp_path), models=["gpt9"]))
