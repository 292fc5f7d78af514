"""mBERT's exponentially smoothed language sampling (data.multilingual)."""

import collections
import json
import math
import os
import re
import sys

import pytest

import script_runner
from data import multilingual

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_sampling_probabilities_follow_the_formula():
    q = multilingual.language_sampling_probabilities({"en": 900, "zh": 100}, 0.7)
    # p = (0.9, 0.1); p^0.7 = (0.92889, 0.19953); q = p^0.7 / sum.
    assert q["en"] == pytest.approx(0.9 ** 0.7 / (0.9 ** 0.7 + 0.1 ** 0.7))
    assert (q["en"], q["zh"]) == pytest.approx((0.82318, 0.17682), abs=1e-5)
    three = multilingual.language_sampling_probabilities({"a": 5, "b": 3, "c": 2}, 0.5)
    norm = sum(math.sqrt(x / 10) for x in (5, 3, 2))
    assert three == pytest.approx({k: math.sqrt(n / 10) / norm
                                   for k, n in {"a": 5, "b": 3, "c": 2}.items()})
    assert multilingual.language_sampling_probabilities({"en": 3, "zh": 1}, 1.0) == \
        pytest.approx({"en": 0.75, "zh": 0.25})
    assert multilingual.language_sampling_probabilities({"en": 3, "zh": 1}, 0.0) == \
        pytest.approx({"en": 0.5, "zh": 0.5})
    with pytest.raises(multilingual.LanguageSamplingError, match=r"alpha=1.5: expected a number"):
        multilingual.language_sampling_probabilities({"en": 1}, 1.5)
    with pytest.raises(multilingual.LanguageSamplingError, match="language zh has no data"):
        multilingual.language_sampling_probabilities({"en": 1, "zh": 0}, 0.7)


def test_word_counts_are_scaled_by_q_over_p():
    counts = {"en": collections.Counter({"the": 600, "cat": 300}),
              "zh": collections.Counter({"猫": 80, "的": 20})}
    merged, report = multilingual.reweight_word_counts(counts, 0.7)
    q = multilingual.language_sampling_probabilities({"en": 900, "zh": 100}, 0.7)
    assert report["factors"]["zh"] == pytest.approx(q["zh"] / 0.1)
    assert merged["猫"] == round(80 * q["zh"] / 0.1) and merged["the"] == round(600 * q["en"] / 0.9)
    assert sum(merged.values()) == pytest.approx(1000, abs=2)  # the total is kept


def _write_language(path, word, documents, words_per_document):
    with open(path, "w", encoding="utf-8") as f:
        for d in range(documents):
            f.write(" ".join("%s%d" % (word, d) for _ in range(words_per_document)) + "\n\n")


def test_resampling_writes_whole_documents_in_the_smoothed_shares(tmp_path):
    _write_language(tmp_path / "big.txt", "b", 40, 10)     # 400 words
    _write_language(tmp_path / "small.txt", "s", 4, 10)    # 40 words
    groups = multilingual.files_by_language(
        "%s,%s" % (tmp_path / "big.txt", tmp_path / "small.txt"), "big,small")
    report = multilingual.resample_documents(groups, 0.5, str(tmp_path / "out"),
                                             total_words=1000, seed=3)
    q = multilingual.language_sampling_probabilities({"big": 400, "small": 40}, 0.5)
    assert report["q"] == pytest.approx(q)
    for language, prefix in (("big", "b"), ("small", "s")):
        text = (tmp_path / "out" / ("%s.txt" % language)).read_text(encoding="utf-8")
        documents = [d.split() for d in text.strip().split("\n\n")]
        assert all(len(d) == 10 and len(set(d)) == 1 and d[0].startswith(prefix)
                   for d in documents)  # whole documents of that language only
        words = sum(len(d) for d in documents)
        assert q[language] * 1000 <= words < q[language] * 1000 + 10
        assert report["written"][language]["words"] == words
    # The small language is up-sampled: its 4 documents are repeated.
    assert report["written"]["small"]["documents"] > 4
    saved = json.loads((tmp_path / "out" / "sampling.json").read_text())
    assert saved["q"] == pytest.approx(q)
    again = multilingual.resample_documents(groups, 0.5, str(tmp_path / "again"),
                                            total_words=1000, seed=3)
    assert (tmp_path / "again" / "small.txt").read_text() == \
        (tmp_path / "out" / "small.txt").read_text() and again["written"]["big"]["words"] == \
        report["written"]["big"]["words"]
    with pytest.raises(multilingual.LanguageSamplingError, match="names 1 languages but"):
        multilingual.files_by_language("%s,%s" % (tmp_path / "big.txt", tmp_path / "small.txt"),
                                       "big")


def test_resampling_refuses_its_inputs_folder_a_shared_file_and_no_words(tmp_path):
    from data import atomic  # pylint: disable=g-import-not-at-top
    _write_language(tmp_path / "en.txt", "e", 4, 10)
    _write_language(tmp_path / "zh.txt", "z", 4, 10)
    before = {name: (tmp_path / name).read_bytes() for name in ("en.txt", "zh.txt")}
    groups = multilingual.files_by_language(
        "%s,%s" % (tmp_path / "en.txt", tmp_path / "zh.txt"), "en,zh")
    # Its own folder: en.txt and zh.txt would be replaced by their resampled versions.
    with pytest.raises(atomic.OutputConflictError, match=r"--output_dir=%s is the folder of "
                       r"--input_file=%s, an input" % (re.escape(str(tmp_path)),
                                                      re.escape(str(tmp_path / "en.txt")))):
        multilingual.resample_documents(groups, 0.7, str(tmp_path))
    for total_words in (0, -5):
        with pytest.raises(multilingual.LanguageSamplingError,
                           match=r"--total_words=%d: expected a positive number" % total_words):
            multilingual.resample_documents(groups, 0.7, str(tmp_path / "out"), total_words)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert sorted(os.listdir(tmp_path)) == ["en.txt", "zh.txt"]
    # One file given as two languages, also through another spelling or a pattern.
    for patterns in ("%s,%s" % (tmp_path / "en.txt", tmp_path / "en.txt"),
                     "%s,%s" % (tmp_path / "en.txt", tmp_path / "." / "en.txt"),
                     "%s,%s" % (tmp_path / "zh.txt", tmp_path / "*.txt")):
        with pytest.raises(multilingual.LanguageSamplingError,
                           match=r"--input_file: .* is a file of language a and of language b"):
            multilingual.files_by_language(patterns, "a,b")


def test_scripts_on_the_bundled_english_and_chinese_halves(tmp_path):
    inputs = ",".join(os.path.join(ROOT, "data", "sample", name)
                      for name in ("sample_en.txt", "sample_zh.txt"))
    script_runner.run([sys.executable, os.path.join(ROOT, "run", "resample_languages.py"),
                    "--input_file=" + inputs, "--languages=en,zh",
                    "--output_dir=%s" % (tmp_path / "corpus")], check=True, cwd=ROOT,
                   capture_output=True)
    report = json.loads((tmp_path / "corpus" / "sampling.json").read_text())
    assert os.path.getsize(tmp_path / "corpus" / "sampling.png") > 0  # --plot (default)
    sizes = report["sizes"]
    assert report["q"] == pytest.approx(
        multilingual.language_sampling_probabilities(sizes, 0.7))
    # The smaller half gains share: q moves towards uniform.
    small = min(sizes, key=sizes.get)
    assert report["p"][small] < report["q"][small] < 0.5
    out = script_runner.run([sys.executable, os.path.join(ROOT, "run", "create_vocab.py"),
                          "--input_file=" + inputs, "--languages=en,zh",
                          "--language_sampling_alpha=0.7", "--vocab_size=1500",
                          "--vocab_file=%s" % (tmp_path / "vocab.txt")], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert "zh:" in out.stdout and "q=" in out.stdout
    assert len((tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()) <= 1500


def test_xnli_can_train_on_english_and_evaluate_on_chinese(tmp_path):
    from data import processors
    os.makedirs(tmp_path / "multinli")
    (tmp_path / "multinli" / "multinli.train.en.tsv").write_text(
        "premise\thypo\tlabel\nA cat sits.\tA cat.\tentailment\n", encoding="utf-8")
    (tmp_path / "xnli.dev.tsv").write_text(
        "language\tgold_label\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2\n"
        "en\tneutral\t\t\t\t\tThe cat.\tA cat.\nzh\tneutral\t\t\t\t\t猫\t一只猫\n",
        encoding="utf-8")
    p = processors.XnliProcessor("zh", train_language="en")
    assert [e.text_a for e in p.get_train_examples(str(tmp_path))] == ["A cat sits."]
    assert [e.text_a for e in p.get_dev_examples(str(tmp_path))] == ["猫"]


def test_time_of_day_task_holds_out_translations_of_unseen_pairs(tmp_path):
    from modeling.experiments import zero_shot
    paths, sizes = zero_shot.build_time_of_day_task(str(tmp_path))
    read = {k: [l.split("\t") for l in open(p, encoding="utf-8").read().splitlines()[1:]]
            for k, p in paths.items()}
    assert sizes["dev_en"] == sizes["dev_zh"] >= 20 and sizes["train_en"] >= 3 * sizes["dev_en"]
    assert [label for _, label in read["dev_en"]] == [label for _, label in read["dev_zh"]]
    # The Chinese side says the same time of day; no held-out sentence is trained on.
    for text, label in read["dev_zh"]:
        assert ("早" in text) == (label == "morning") and ("晚" in text) == (label == "evening")
    assert not {t for t, _ in read["dev_en"]} & {t for t, _ in read["train_en"]}


def test_zero_shot_run_reports_both_models_on_both_languages(tmp_path):
    """Plumbing only (a few steps): the models' numbers are in the README."""
    from modeling.experiments import zero_shot
    rows = zero_shot.run(zero_shot.ZeroShotJob(output_dir=str(tmp_path), pretrain_steps=4,
                                               num_train_epochs=0.3))
    assert [r["model"] for r in rows] == ["multilingual", "english_only"]
    assert rows[1]["pretraining_text"] == "sample_en.txt"
    assert rows[0]["pretraining_text"] == "en.txt, zh.txt"
    for row in rows:
        assert 0.0 <= row["english_accuracy"] <= 1.0
        assert 0.0 <= row["chinese_zero_shot_accuracy"] <= 1.0
    # The multilingual model's corpus was resampled with alpha 0.7 before pre-training.
    saved = json.loads((tmp_path / "zero_shot.json").read_text(encoding="utf-8"))
    sampling = saved["sampling"]
    small = min(sampling["p"], key=sampling["p"].get)  # Chinese characters count as words
    assert sampling["alpha"] == 0.7 and sampling["q"][small] > sampling["p"][small]
    text = (tmp_path / "pretrain_multilingual" / "data" / "text" / "train" / "zh.txt")
    assert text.exists()  # the demo split the resampled files, not the bundled ones
