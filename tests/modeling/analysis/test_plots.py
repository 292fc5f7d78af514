"""Pictures of the analyses (modeling/analysis/plots.py) and the scripts' --plot flag.

Every picture is drawn from a hand-made result; the test reads the PNG back
(size, not blank, no temporary left beside it) and checks that the bars,
points and curves the figure holds are the numbers it was given, so a plot
that drew the wrong column, order or formula fails here.
"""

import json
import os
import sys

from matplotlib import image as mpimg
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from modeling.analysis import plots

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _read_png(path, width, height):
    """The picture at `path`: `width` x `height` pixels at plots.DPI, more than a blank page."""
    assert sorted(os.listdir(os.path.dirname(path))) == [os.path.basename(path)]  # no temporaries
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(path)
    assert pixels.shape[:2] == (height, width)
    rgb = pixels[..., :3].reshape(-1, 3)
    # Mostly white background, but bars / points / text in several colours.
    assert (rgb.min(axis=1) < 0.9).mean() > 0.02
    assert len(np.unique(np.round(rgb, 2), axis=0)) > 20
    return pixels


COMPRESSION = {
    "num_examples": 200, "max_seq_length": 128, "float32_tflite_bytes": 983900,
    "float": {"accuracy": 0.9, "latency_ms_per_example": 1.86, "parameter_bytes": 962056},
    "variants": {
        "float16": {"size_bytes": 517428, "size_ratio_to_float32": 0.526,
                    "latency_ms_per_example": 0.10, "accuracy": 0.875,
                    "agreement_with_float": 0.95},
        "float32": {"size_bytes": 983900, "size_ratio_to_float32": 1.0,
                    "latency_ms_per_example": 0.04, "accuracy": 0.9,
                    "agreement_with_float": 1.0},
        "dynamic_int8": {"size_bytes": 292344, "size_ratio_to_float32": 0.297,
                         "latency_ms_per_example": 0.08, "accuracy": 0.85,
                         "agreement_with_float": 0.9},
    },
}


def test_compression_picture_shows_every_variant_in_order(tmp_path):
    path = str(tmp_path / "compression.png")
    drawn = plots.plot_compression(COMPRESSION, path)
    _read_png(path, 1100, 360)
    # Rows in a fixed order whatever the dict's order; float has no agreement bar.
    assert drawn == {
        "rows": ["float (TF)", "float32", "dynamic int8", "float16"],
        "size_bytes": [962056, 983900, 292344, 517428],
        "latency_ms": [1.86, 0.04, 0.08, 0.10],
        "accuracy": [0.9, 0.9, 0.85, 0.875],
        "agreement": [1.0, 0.9, 0.95],
    }
    only = dict(COMPRESSION, variants={"dynamic_int8": COMPRESSION["variants"]["dynamic_int8"]})
    drawn = plots.plot_compression(only, str(tmp_path / "other.png"))
    assert drawn["rows"] == ["float (TF)", "dynamic int8"]
    assert drawn["size_bytes"] == [962056, 292344]
    with pytest.raises(ValueError, match="no float row and no variants"):
        plots.plot_compression({"variants": {}}, str(tmp_path / "none.png"))
    assert not os.path.exists(tmp_path / "none.png")


def test_cloze_picture_has_each_relation_and_all(tmp_path):
    report = {"num_facts": 5, "precision_at_1": 0.4, "precision_at_10": 0.8,
              "mean_reciprocal_rank": 0.5, "skipped": [{"line": 3}],
              "per_relation": {"physics": {"num_facts": 2, "precision_at_1": 0.5,
                                           "precision_at_10": 1.0},
                               "animals": {"num_facts": 3, "precision_at_1": 1 / 3.,
                                           "precision_at_10": 2 / 3.}}}
    path = str(tmp_path / "cloze.png")
    drawn = plots.plot_cloze(report, path)
    _read_png(path, 500, 360)
    assert drawn["groups"] == ["animals", "physics", "all"]
    assert drawn["precision_at_1"] == pytest.approx([1 / 3., 0.5, 0.4])
    assert drawn["precision_at_10"] == pytest.approx([2 / 3., 1.0, 0.8])


def test_cue_picture_places_every_cue_and_labels_the_top(tmp_path):
    # A ranked report as cue_statistics returns it (two-choice data, chance 1/2).
    cues = [{"cue": "not", "order": 1, "productivity": 0.9, "coverage": 0.5},
            {"cue": "is not", "order": 2, "productivity": 0.8, "coverage": 0.25},
            {"cue": "a", "order": 1, "productivity": 0.6, "coverage": 0.75},
            {"cue": "the cat", "order": 2, "productivity": 0.5, "coverage": 0.125},
            {"cue": "do", "order": 1, "productivity": 0.25, "coverage": 0.5}]
    report = {"kind": "choice", "n": 8, "chance": 0.5, "cues": cues}
    path = str(tmp_path / "cues.png")
    drawn = plots.plot_cues(report, path, top=3)
    _read_png(path, 840, 420)
    assert drawn["coverage"] == [0.5, 0.25, 0.75, 0.125, 0.5]
    assert drawn["productivity"] == [0.9, 0.8, 0.6, 0.5, 0.25]
    assert drawn["labelled"] == ["not", "is not", "a"]
    assert drawn["labelled_xy"] == [(0.5, 0.9), (0.25, 0.8), (0.75, 0.6)]
    assert drawn["chance"] == 0.5
    drawn = plots.plot_cues(dict(report, chance=None), str(tmp_path / "n" / "c.png"), top=0)
    assert drawn["labelled"] == [] and drawn["chance"] is None


def test_hans_picture_orders_heuristics_and_subcases(tmp_path):
    result = {
        "overall": {"accuracy": 0.55, "correct": 11, "count": 20},
        "by_heuristic": {
            "constituent": {"entailment": {"accuracy": 0.75}},  # no non-entailed pairs
            "lexical_overlap": {"entailment": {"accuracy": 1.0},
                                "non-entailment": {"accuracy": 0.0}},
            "subsequence": {"entailment": {"accuracy": 0.5},
                            "non-entailment": {"accuracy": 0.25}}},
        "by_subcase": {"ce_adverb": {"accuracy": 0.75}, "le_passive": {"accuracy": 1.0},
                       "ln_passive": {"accuracy": 0.0}, "se_adjective": {"accuracy": 0.5},
                       "sn_NP/S": {"accuracy": 0.25}},
    }
    path = str(tmp_path / "hans.png")
    drawn = plots.plot_hans(result, path)
    _read_png(path, 1100, 360)
    assert drawn["heuristics"] == ["lexical_overlap", "subsequence", "constituent"]
    assert drawn["labels"] == ["entailment", "non-entailment"]
    assert drawn["accuracy"] == {"entailment": [1.0, 0.5, 0.75],
                                 "non-entailment": [0.0, 0.25, None]}
    assert drawn["subcases"] == ["le_passive", "ln_passive", "se_adjective", "sn_NP/S",
                                 "ce_adverb"]
    assert drawn["subcase_accuracy"] == [1.0, 0.0, 0.5, 0.25, 0.75]
    plain = str(tmp_path / "plain" / "hans.png")
    drawn = plots.plot_hans(result, plain, subcases=False)
    _read_png(plain, 600, 360)
    assert drawn["subcases"] == [] and drawn["subcase_accuracy"] == []


def test_language_sampling_picture_follows_the_formula(tmp_path):
    # p = (0.8, 0.2); q at alpha 0.5: sqrt(p) / sum sqrt(p) = (2/3, 1/3).
    report = {"alpha": 0.5, "sizes": {"zh": 200, "en": 800}, "p": {"en": 0.8, "zh": 0.2},
              "q": {"en": 2 / 3., "zh": 1 / 3.}, "total_words": 1000,
              "written": {"en": {"words": 650}, "zh": {"words": 350}}}
    path = str(tmp_path / "sampling.png")
    drawn = plots.plot_language_sampling(report, path, points=5)
    _read_png(path, 1000, 380)
    assert drawn["languages"] == ["en", "zh"]
    assert drawn["p"] == pytest.approx([0.8, 0.2])
    assert drawn["q"] == pytest.approx([2 / 3., 1 / 3.])
    assert drawn["written"] == pytest.approx([0.65, 0.35])
    assert drawn["alpha"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    # q_en(a) = 0.8^a / (0.8^a + 0.2^a): 1/2 at 0, 2/3 at 0.5, p at 1.
    expected = [0.5, 0.8 ** 0.25 / (0.8 ** 0.25 + 0.2 ** 0.25), 2 / 3.,
                0.8 ** 0.75 / (0.8 ** 0.75 + 0.2 ** 0.75), 0.8]
    assert drawn["curves"]["en"] == pytest.approx(expected)
    assert drawn["curves"]["zh"] == pytest.approx([1 - v for v in expected])
    bare = {k: v for k, v in report.items() if k not in ("p", "written")}
    drawn = plots.plot_language_sampling(bare, str(tmp_path / "b" / "s.png"), points=3)
    assert drawn["p"] == pytest.approx([0.8, 0.2]) and drawn["written"] is None


def test_cue_script_writes_its_picture_by_default(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(
        "sentence\tlabel\nit is not good\tneg\nnot a fine day\tneg\na good day\tpos\n"
        "it is fine\tpos\n")
    out = tmp_path / "cues"
    done = script_runner.run(
        [sys.executable, os.path.join(ROOT, "run", "analyze_shortcuts.py"), "--mode=arct_cues",
         "--task_name=generic", "--data_dir=%s" % data, "--ngram_orders=1",
         "--output_dir=%s" % out], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["cues.json", "cues.png", "cues.tsv", "tensorboard"]
    # The picture is also a TensorBoard image, pixel for pixel.
    from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
    events = event_accumulator.EventAccumulator(str(out / "tensorboard"),
                                                size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    tensor = events.Tensors("cues")[0].tensor_proto
    stored = tf.io.decode_png(tensor.string_val[2], channels=4).numpy()
    drawn = tf.io.decode_png((out / "cues.png").read_bytes(), channels=4).numpy()
    np.testing.assert_array_equal(stored, drawn)
    report = json.loads((out / "cues.json").read_text())
    assert report["cues"][0] == dict(report["cues"][0], cue="not", productivity=1.0,
                                     coverage=0.5, label="neg")
    mpimg.imread(str(out / "cues.png"))
