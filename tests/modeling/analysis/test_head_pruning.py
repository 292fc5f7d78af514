"""Head masks, head importance and head pruning (modeling/analysis/heads.py, run/prune_heads.py).

A tiny BERT (hidden 16, 2 layers, 4 heads of width 4) with a large initializer
range, so that heads matter: masking one head changes the outputs, masking none
is bit-identical to no mask; removing heads gives what masking them gives
(1e-5), layers left with no head included; Michel et al.'s importance equals
central finite differences of the loss; the pruned checkpoint and config load
through init_from_checkpoint (Google TF1 and this project's object-based
format) and reproduce the pruned model; the script runs end to end and
rejects bad LAYER:HEAD values in one line. No learning is claimed here.
"""

import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from modeling import checkpoints
from modeling.analysis import heads
from modeling.bert import BertConfig
from modeling.bert import BertEncoder
from modeling.bert import load_bert_config
from modeling.tasks.classification import BertClassifier

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "prune_heads.py")
WORDS = ["red", "blue", "green", "cat", "dog", "fish", "big", "small", "the", "a"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def _config(**changes):
    values = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=32, max_position_embeddings=32,
                  type_vocab_size=2, initializer_range=0.3)
    values.update(changes)
    return BertConfig(**values)


def _features(batch=4, seq=8, seed=0, labels=True):
    rng = np.random.default_rng(seed)
    mask = np.ones([batch, seq], np.int32)
    mask[0, 5:] = 0
    features = {"input_ids": tf.constant(rng.integers(1, len(VOCAB), [batch, seq]), tf.int32),
                "input_mask": tf.constant(mask),
                "segment_ids": tf.constant(np.zeros([batch, seq], np.int32))}
    if labels:
        features["label_ids"] = tf.constant(rng.integers(0, 2, [batch]), tf.int32)
    return features


def _classifier(seed=1, config=None):
    keras.utils.set_random_seed(seed)
    return BertClassifier.from_config_object(config or _config(), num_labels=2)


def _mask(drop, counts=(4, 4)):
    mask = [np.ones([n], np.float32) for n in counts]
    for layer, head in drop:
        mask[layer][head] = 0.0
    return mask


def test_head_mask_none_vs_ones_vs_dropped():
    model = _classifier()
    encoder = model.encoder
    features = _features(labels=False)
    plain = encoder(features, training=False)["sequence_output"].numpy()
    ones = encoder(features, training=False,
                   head_mask=tf.ones([2, 4]))["sequence_output"].numpy()
    np.testing.assert_array_equal(plain, ones)  # bit-identical
    dropped = encoder(dict(features, head_mask=tf.constant(np.stack(_mask([(1, 2)])))),
                      training=False)["sequence_output"].numpy()
    assert np.abs(dropped - plain).max() > 1e-3
    # Layer 0's outputs do not see a layer-1 mask; a layer-0 mask changes them.
    out = encoder(features, training=False, head_mask=tf.constant(np.stack(_mask([(1, 2)]))))
    np.testing.assert_array_equal(out["encoder_outputs"][0].numpy(),
                                  encoder(features, training=False)["encoder_outputs"][0])
    out0 = encoder(features, training=False, head_mask=_mask([(0, 0)]))
    assert np.abs(out0["encoder_outputs"][0].numpy() - plain).max() > 0
    with pytest.raises(ValueError, match="num_hidden_layers=2"):
        encoder(features, head_mask=tf.ones([3, 4]))


def test_pruned_model_equals_masked_model():
    """All of layer 0's heads but one and two of layer 1's; then layer 0 with none."""
    model = _classifier()
    features = _features()
    for drop in ([(0, 0), (0, 1), (0, 3), (1, 1), (1, 2)], [(0, 0), (0, 1), (0, 2), (0, 3),
                                                            (1, 0)]):
        masked = model(dict(features, head_mask=_mask(drop)), training=False)
        smaller = heads.prune_heads(model, drop)
        assert heads.head_counts(smaller) == [4 - sum(l == 0 for l, _ in drop),
                                              4 - sum(l == 1 for l, _ in drop)]
        kept0 = heads.head_counts(smaller)[0]
        attention = smaller.encoder.transformer_layers[0].attention_sublayer.attention
        assert tuple(attention.query.kernel.shape) == (16, 4 * kept0)
        assert tuple(attention.output_dense.kernel.shape) == (4 * kept0, 16)
        pruned = smaller(features, training=False)
        np.testing.assert_allclose(pruned["logits"].numpy(), masked["logits"].numpy(),
                                   atol=1e-5)
        np.testing.assert_allclose(
            smaller.encoder(features, training=False)["sequence_output"].numpy(),
            model.encoder(features, training=False, head_mask=_mask(drop))[
                "sequence_output"].numpy(), atol=1e-5)
        assert heads.count_parameters(smaller.encoder) == (
            heads.count_parameters(model.encoder) - len(drop) * (3 * (16 * 4 + 4) + 4 * 16))
    # Pruning a pruned model again: indices are into the current heads.
    twice = heads.prune_heads(heads.prune_heads(model, [(1, 0)]), [(1, 0)])
    np.testing.assert_allclose(
        twice(features, training=False)["logits"].numpy(),
        model(dict(features, head_mask=_mask([(1, 0), (1, 1)])), training=False)[
            "logits"].numpy(), atol=1e-5)


def test_importance_equals_finite_differences():
    """granularity="batch": |d(mean loss of a batch)/dm| averaged over batches (HF's
    run_bertology)."""
    model = _classifier(seed=3)
    batches = [_features(seed=10), _features(seed=11)]
    scores = heads.head_importance(model, batches, granularity="batch")
    assert scores.shape == (2, 4)
    eps = 1e-2
    expected = np.zeros([2, 4])
    for batch in batches:
        for layer in range(2):
            for head in range(4):
                losses = []
                for sign in (1.0, -1.0):
                    mask = _mask([])
                    mask[layer][head] += sign * eps
                    loss, _ = model.compute_loss_and_metrics(dict(batch, head_mask=mask),
                                                             training=False)
                    losses.append(float(loss))
                expected[layer, head] += abs((losses[0] - losses[1]) / (2 * eps)) / len(batches)
    assert expected.max() > 1e-2  # the heads matter on this model
    np.testing.assert_allclose(scores, expected, rtol=2e-2, atol=5e-4)
    normalized = heads.head_importance(model, batches, normalize_layers=True,
                                       granularity="batch")
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(normalized,
                               scores / np.linalg.norm(scores, axis=1, keepdims=True),
                               rtol=1e-6)


def test_importance_is_the_mean_over_examples_of_each_examples_sensitivity():
    """Michel et al.'s I_h = E_x |dL(x)/dm_h| (the default): central finite differences
    of each real example's own loss (the example alone in a batch), their absolute
    values averaged over the real examples of every batch; a padding example
    (is_real_example 0) counts for nothing. The per-batch form is another number."""
    model = _classifier(seed=3)
    batches = [_features(seed=10), _features(seed=11)]
    batches[1]["is_real_example"] = tf.constant([1, 1, 0, 1], tf.int32)
    scores = heads.head_importance(model, batches)
    eps = 1e-2
    total, count = np.zeros([2, 4]), 0
    for batch in batches:
        real = batch.get("is_real_example", tf.ones([4], tf.int32)).numpy()
        for row in np.nonzero(real)[0]:
            one = {k: v[row:row + 1] for k, v in batch.items()}
            for layer in range(2):
                for head in range(4):
                    losses = []
                    for sign in (1.0, -1.0):
                        mask = _mask([])
                        mask[layer][head] += sign * eps
                        loss, _ = model.compute_loss_and_metrics(dict(one, head_mask=mask),
                                                                 training=False)
                        losses.append(float(loss))
                    total[layer, head] += abs((losses[0] - losses[1]) / (2 * eps))
            count += 1
    assert count == 7
    expected = total / count
    assert expected.max() > 1e-2
    np.testing.assert_allclose(scores, expected, rtol=2e-2, atol=5e-4)
    per_batch = heads.head_importance(model, batches, granularity="batch")
    assert np.abs(per_batch - scores).max() > 1e-3
    with pytest.raises(ValueError, match="granularity must be one of example, batch"):
        heads.head_importance(model, batches, granularity="token")


def test_iterative_pruning_curve(tmp_path):
    model = _classifier(seed=3)
    score = [_features(seed=20), _features(seed=21)]
    dev = [_features(seed=22)]
    curve = heads.iterative_pruning(model, score, dev, step_fraction=0.25, max_fraction=0.75,
                                    keep_fraction=0.5)
    assert [s["heads_left"] for s in curve["steps"]] == [8, 6, 4, 2]
    assert curve["pruned"] == curve["order"][:4]
    first = heads.head_importance(model, score, normalize_layers=True)
    lowest = sorted((first[l, h], l, h) for l in range(2) for h in range(4))[:2]
    assert sorted(curve["order"][:2]) == sorted((l, h) for _, l, h in lowest)
    mask = _mask(curve["order"][:2])
    assert curve["steps"][1]["accuracy"] == heads.evaluate(model, dev, mask)["accuracy"]
    png = heads.plot_pruning_curve(curve["steps"], str(tmp_path / "curve.png"))
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_pruning_without_rescoring_follows_the_first_ranking():
    """rescore=False (Michel et al.'s BERT scripts, without --exact_pruning): the heads
    are masked in the ascending order of the scores at m = 1."""
    model = _classifier(seed=3)
    score = [_features(seed=20), _features(seed=21)]
    dev = [_features(seed=22)]
    curve = heads.iterative_pruning(model, score, dev, step_fraction=0.125, max_fraction=0.75,
                                    rescore=False)
    first = heads.head_importance(model, score, normalize_layers=True)
    ranking = [(l, h) for _, l, h in sorted((first[l, h], l, h)
                                            for l in range(2) for h in range(4))]
    assert curve["order"] == ranking[:6]
    assert [s["heads_left"] for s in curve["steps"]] == [8, 7, 6, 5, 4, 3, 2]
    # Re-scoring with the mask in place (the default) masks another set on this model.
    rescored = heads.iterative_pruning(model, score, dev, step_fraction=0.125,
                                       max_fraction=0.75)
    assert rescored["order"] != curve["order"]


def test_pruned_checkpoint_and_config_load(tmp_path):
    model = _classifier()
    features = _features()
    smaller = heads.prune_heads(model, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3)])
    expected = smaller(features, training=False)["logits"].numpy()
    config = _config(layer_norm_epsilon=1e-12)
    prefix, config_path = heads.save_pruned(smaller, str(tmp_path / "out"), config)
    loaded_config = load_bert_config(config_path)
    assert loaded_config.extra["num_attention_heads_per_layer"] == [0, 3]
    assert loaded_config.extra["layer_norm_epsilon"] == 1e-12  # other keys kept
    with open(config_path) as f:
        assert json.load(f)["num_attention_heads_per_layer"] == [0, 3]
    # Google TF1, loaded as every script loads --init_checkpoint=DIR.
    fresh = BertClassifier.from_config_object(loaded_config, num_labels=2)
    checkpoints.init_from_checkpoint(fresh, str(tmp_path / "out"))
    assert heads.load_classifier_head(fresh, str(tmp_path / "out"))
    np.testing.assert_allclose(fresh(features, training=False)["logits"].numpy(), expected,
                               atol=1e-6)
    # This project's own (trainer-style, object-based) checkpoint.
    optimizer = keras.optimizers.Adam()
    optimizer.build(smaller.trainable_variables)
    own = tf.train.Checkpoint(model=smaller, optimizer=optimizer).save(
        str(tmp_path / "own" / "ckpt"))
    again = BertClassifier.from_config_object(loaded_config, num_labels=2)
    checkpoints.init_from_checkpoint(again, own)
    assert heads.load_classifier_head(again, own)
    np.testing.assert_allclose(again(features, training=False)["logits"].numpy(), expected,
                               atol=1e-6)
    # An encoder alone, and a wrong head count refused by shape.
    encoder = BertEncoder.from_config_object(loaded_config)
    checkpoints.init_from_checkpoint(encoder, prefix)
    wrong = BertEncoder.from_config_object(config)
    with pytest.raises(checkpoints.CheckpointMismatchError):
        checkpoints.init_from_checkpoint(wrong, prefix)


def test_config_and_heads_validation():
    with pytest.raises(ValueError, match=r"num_attention_heads_per_layer.*\[1\] = 5"):
        _config(num_attention_heads_per_layer=[4, 5])
    with pytest.raises(ValueError, match="has 3 entries"):
        _config(num_attention_heads_per_layer=[4, 4, 4])
    counts = [4, 4]
    assert heads.parse_heads("1:3, 0:0", counts) == [(0, 0), (1, 3)]
    for spec, message in [("2:0", "layer 2 is out of range"), ("0:4", "head 4 is out of range"),
                          ("0:1,0:1", "given twice"), ("0-1", "not LAYER:HEAD"),
                          (",".join(f"{l}:{h}" for l in range(2) for h in range(4)),
                           "all 8 heads")]:
        with pytest.raises(ValueError, match=message):
            heads.parse_heads(spec, counts)


def _env():
    return dict(os.environ, CUDA_VISIBLE_DEVICES="")


def _two_word_task(tmp_path):
    """A toy two-label task of two-word texts: train.tsv and dev.tsv (other words) in tmp_path/data."""
    data = tmp_path / "data"
    data.mkdir()
    for name, offset in (("train.tsv", 0), ("dev.tsv", 5)):
        rows = ["text\tlabel"] + ["%s %s\t%s" % (WORDS[(i + offset) % 10],
                                                  WORDS[(3 * i + offset) % 10], "ab"[i % 2])
                                  for i in range(16)]
        (data / name).write_text("\n".join(rows) + "\n")
    return data


def _script_flags(tmp_path, model_dir, config_name, files):
    """run/prune_heads.py's model and data flags: a toy two-label task in `files`."""
    data = tmp_path / "data"
    data.mkdir()
    rows = ["text\tlabel"] + ["%s %s %s\t%s" % (WORDS[i % 10], WORDS[(3 * i) % 10],
                                                 WORDS[(7 * i) % 10], "ab"[i % 2])
                              for i in range(12)]
    for name in files:
        (data / name).write_text("\n".join(rows) + "\n")
    return ["--init_checkpoint=%s" % model_dir,
            "--bert_config_file=%s" % (model_dir / config_name),
            "--vocab_file=%s" % (model_dir / "vocab.txt"), "--max_seq_length=8",
            "--task_name=generic", "--data_dir=%s" % data, "--labels=a,b",
            "--latency_repeats=2"]


def test_script_end_to_end_and_bad_values(tmp_path):
    model = _classifier()
    model_dir = tmp_path / "model"
    heads.save_pruned(model, str(model_dir), _config())
    _config().to_json_file(str(model_dir / "bert_config.json"))  # an unpruned release
    (model_dir / "vocab.txt").write_text("".join(w + "\n" for w in VOCAB))
    common = _script_flags(tmp_path, model_dir, "bert_config.json", ("train.tsv", "dev.tsv"))
    out = tmp_path / "pruned"
    result = script_runner.run([sys.executable, SCRIPT] + common + [
        "--heads_to_prune=0:1,1:0,1:3", "--output_dir=%s" % out],
        capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "pruning.json").read_text())
    assert report["heads_removed"] == [[0, 1], [1, 0], [1, 3]]
    assert report["heads_per_layer_after"] == [3, 2]
    assert report["classifier_head_loaded"] is True
    assert report["parameters_after"] == report["parameters_before"] - 3 * (3 * 68 + 64)
    assert report["latency"]["before_seconds"] > 0 and report["latency"]["after_seconds"] > 0
    assert len(report["importance"]) == 2
    # The written model is the in-process pruned one.
    config = load_bert_config(str(out / "bert_config.json"))
    fresh = BertClassifier.from_config_object(config, num_labels=2)
    checkpoints.init_from_checkpoint(fresh, str(out))
    assert heads.load_classifier_head(fresh, str(out))
    features = _features()
    np.testing.assert_allclose(
        fresh(features, training=False)["logits"].numpy(),
        heads.prune_heads(model, [(0, 1), (1, 0), (1, 3)])(features, training=False)[
            "logits"].numpy(), atol=1e-6)
    bad = script_runner.run([sys.executable, SCRIPT] + common + [
        "--heads_to_prune=0:1,0:9", "--output_dir=%s" % (tmp_path / "bad")],
        capture_output=True, text=True, timeout=120, env=_env())
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert lines[-1] == ("prune_heads: error: --heads_to_prune: 0:9: head 9 is out of range "
                         "(layer 0 has heads 0..3)"), bad.stderr[-2000:]
    assert not (tmp_path / "bad" / "pruning.json").exists()


def test_albert_head_mask():
    from modeling.albert import AlbertConfig
    from modeling.albert import AlbertEncoder
    keras.utils.set_random_seed(4)
    encoder = AlbertEncoder.from_config_object(AlbertConfig(
        vocab_size=len(VOCAB), embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=32, max_position_embeddings=32,
        initializer_range=0.3))
    features = _features(labels=False)
    plain = encoder(features, training=False)["sequence_output"].numpy()
    np.testing.assert_array_equal(
        plain, encoder(features, head_mask=tf.ones([2, 4]), training=False)[
            "sequence_output"].numpy())
    dropped = encoder(features, head_mask=np.stack(_mask([(0, 2)])), training=False)
    assert np.abs(dropped["sequence_output"].numpy() - plain).max() > 1e-3


def test_run_with_prune_fraction(tmp_path):
    """`heads.run` (the script's library call) by importance: the curve, the PNG, and the
    removed model scoring what the masked one scored at the same point."""
    from modeling.tasks.classifier_job import ClassifierJob
    model = _classifier(seed=5)
    model_dir = tmp_path / "model"
    heads.save_pruned(model, str(model_dir), _config())
    _config().to_json_file(str(model_dir / "bert_config.json"))
    (model_dir / "vocab.txt").write_text("".join(w + "\n" for w in VOCAB))
    data = _two_word_task(tmp_path)
    job = ClassifierJob(bert_config_file=str(model_dir / "bert_config.json"),
                        init_checkpoint=str(model_dir), vocab_file=str(model_dir / "vocab.txt"),
                        output_dir=str(tmp_path / "out"), task_name="generic",
                        data_dir=str(data), labels=["a", "b"], max_seq_length=8)
    report = heads.run(job, prune_fraction=0.5, prune_step_fraction=0.25, curve_fraction=0.75,
                       batch_size=8, latency_repeats=2)
    assert [s["heads_left"] for s in report["curve"]] == [8, 6, 4, 2]
    assert sum(report["heads_per_layer_after"]) == 4
    assert sorted(map(tuple, report["heads_removed"])) == sorted(
        map(tuple, report["pruning_order"][:4]))
    assert report["accuracy_after"] == pytest.approx(report["curve"][2]["accuracy"], abs=1e-9)
    assert os.path.exists(tmp_path / "out" / "pruning_curve.png")
    with open(tmp_path / "out" / "pruning.json") as f:
        assert json.load(f)["heads_removed"] == report["heads_removed"]
    with pytest.raises(ValueError, match="exactly one of"):
        heads.run(job, heads_to_prune="0:0", prune_fraction=0.5)
    with pytest.raises(ValueError, match=r"--prune_fraction=1.0: expected a fraction"):
        heads.run(job, prune_fraction=1.0)


# ------------------------------------------------------------------ ALBERT
#
# ALBERT's layers share one attention block, so a head is removed at every
# depth: the unit of pruning is a head of the shared block (a column of the
# [layers, heads] mask). Tiny ALBERT: E=8, hidden 16, 3 layers, 4 heads of
# width 4, a large initializer range so heads matter. No learning claimed.

def _albert_config(**changes):
    from modeling.albert import AlbertConfig
    values = dict(vocab_size=len(VOCAB), embedding_size=8, hidden_size=16,
                  num_hidden_layers=3, num_attention_heads=4, intermediate_size=32,
                  max_position_embeddings=32, initializer_range=0.3)
    values.update(changes)
    return AlbertConfig(**values)


def _albert_classifier(seed=1, config=None):
    keras.utils.set_random_seed(seed)
    return BertClassifier.from_config_object(config or _albert_config(), num_labels=2,
                                             family="albert")


def _column_mask(layers, drop, heads_per_layer=4):
    """`[layers, heads]` with the columns `drop` zeroed (a head gone at every depth)."""
    mask = np.ones([layers, heads_per_layer], np.float32)
    mask[:, list(drop)] = 0.0
    return mask


def test_albert_removed_shared_heads_equal_masked_at_every_depth():
    model = _albert_classifier()
    features = _features()
    plain = model.encoder(features, training=False)
    masked = model.encoder(features, training=False, head_mask=_column_mask(3, [1, 3]))
    assert np.abs(masked["sequence_output"].numpy()
                  - plain["sequence_output"].numpy()).max() > 1e-3  # the heads matter
    for spec in ([1, 3], "1,*:3", "0:1,1:1,2:1,3", [(0, 3), (0, 1)]):
        smaller = heads.prune_heads(model, spec)
        assert heads.head_units(smaller).counts == [2]
        assert heads.head_counts(smaller) == [2, 2, 2]
        attention = smaller.encoder.attention_sublayers[0].attention
        assert tuple(attention.query.kernel.shape) == (16, 8)  # 2 heads of width 4
        assert tuple(attention.output_dense.kernel.shape) == (8, 16)
        out = smaller.encoder(features, training=False)
        for depth in range(3):  # every depth, not only the last
            np.testing.assert_allclose(out["encoder_outputs"][depth].numpy(),
                                       masked["encoder_outputs"][depth].numpy(), atol=1e-5)
        np.testing.assert_allclose(
            smaller(features, training=False)["logits"].numpy(),
            model(dict(features, head_mask=_column_mask(3, [1, 3])), training=False)[
                "logits"].numpy(), atol=1e-5)
        assert heads.count_parameters(smaller.encoder) == (
            heads.count_parameters(model.encoder) - 2 * (3 * (16 * 4 + 4) + 4 * 16))
    # Two groups of two layers, two inner blocks each: (group, head) is removed from
    # both inner blocks of its group, at both of its depths.
    config = _albert_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    model = _albert_classifier(seed=2, config=config)
    smaller = heads.prune_heads(model, "0:2,1:2,2:0,3:0,2:3,3:3")
    assert heads.head_units(smaller).counts == [3, 2]
    assert heads.head_counts(smaller) == [3, 3, 2, 2]
    mask = np.ones([4, 4], np.float32)
    mask[0:2, 2] = mask[2:4, 0] = mask[2:4, 3] = 0.0
    np.testing.assert_allclose(
        smaller(features, training=False)["logits"].numpy(),
        model(dict(features, head_mask=mask), training=False)["logits"].numpy(), atol=1e-5)


def test_albert_heads_to_prune_rules():
    units = heads.head_units_of_config(_albert_config(), "albert")
    assert units.unit_of_layer == [0, 0, 0] and units.counts == [4] and units.shared
    assert heads.parse_shared_heads("3, *:1", units) == [(0, 1), (0, 3)]
    assert heads.parse_shared_heads("0:2,2:2,1:2", units) == [(0, 2)]
    for spec, message in [
            ("0:1", r"^--heads_to_prune: 0:1: the layer is shared \(all ALBERT layers use "
                    r"one attention layer\), so head 1 goes at every depth: list it for "
                    r"layers 1,2 too, or give it once as 1 or \*:1$"),
            ("0:1,2:1", "list it for layer 1 too"),
            ("4", r"head 4 is out of range \(the shared layer has heads 0..3\)"),
            ("1,*:1", "head 1 is given twice"), ("1:x", "is not HEAD, \\*:HEAD or LAYER:HEAD"),
            ("0,1,2,3", "removes all 4 heads of the shared attention"),
            ("5:0", "layer 5 is out of range")]:
        with pytest.raises(ValueError, match=message):
            heads.parse_shared_heads(spec, units)
    grouped = heads.head_units_of_config(
        _albert_config(num_hidden_layers=4, num_hidden_groups=2), "albert")
    assert grouped.unit_of_layer == [0, 0, 1, 1]
    assert heads.parse_shared_heads("2:1,3:1", grouped) == [(1, 1)]
    with pytest.raises(ValueError, match="ALBERT layers 2..3 use one attention layer"):
        heads.parse_shared_heads("3:1", grouped)
    with pytest.raises(ValueError, match="num_hidden_groups=2"):
        heads.parse_shared_heads("1", grouped)
    # The config field is checked like BERT's per-layer counts.
    with pytest.raises(ValueError, match=r"num_attention_heads_per_group.*\[0\] = 5"):
        _albert_config(num_attention_heads_per_group=[5])
    with pytest.raises(ValueError, match="has 2 entries; num_hidden_groups is 1"):
        _albert_config(num_attention_heads_per_group=[2, 2])


def test_albert_shared_importance_is_sum_over_depths():
    """The reference is computed here: one gradient tape over a [layers, heads] mask,
    |dL_b/dm_{l,h}| per batch, averaged over batches (granularity="batch"), summed over
    depths."""
    model = _albert_classifier(seed=3)
    batches = [_features(seed=30), _features(seed=31)]
    reference, one_gate = np.zeros([3, 4]), np.zeros([4])
    for batch in batches:
        mask = tf.Variable(tf.ones([3, 4]))
        with tf.GradientTape() as tape:
            loss, _ = model.compute_loss_and_metrics(dict(batch, head_mask=mask),
                                                     training=False)
        gradient = tape.gradient(loss, mask).numpy()
        reference += np.abs(gradient) / len(batches)
        one_gate += np.abs(gradient.sum(0)) / len(batches)  # one gate shared by all depths
    per_depth = heads.head_importance(model, batches, granularity="batch")
    np.testing.assert_allclose(per_depth, reference, rtol=1e-4, atol=1e-7)
    shared = heads.shared_head_importance(model, batches, granularity="batch")
    assert shared.shape == (1, 4) and reference.sum(0).max() > 1e-3
    np.testing.assert_allclose(shared[0], reference.sum(0), rtol=1e-4, atol=1e-7)
    # Not the sensitivity to one gate shared by all depths (|sum| < sum |.| for a head
    # whose depths pull in opposite directions, as here).
    assert np.abs(shared[0] - one_gate).max() > 1e-3
    normalized = heads.shared_head_importance(model, batches, normalize=True,
                                              granularity="batch")
    np.testing.assert_allclose(normalized[0], reference.sum(0) / np.linalg.norm(
        reference.sum(0)), rtol=1e-4)
    # Iterative pruning removes whole shared heads, the lowest sum first.
    dev = [_features(seed=32)]
    curve = heads.iterative_pruning(model, batches, dev, step_fraction=0.25,
                                    max_fraction=0.5, granularity="batch")
    assert [s["heads_left"] for s in curve["steps"]] == [4, 3, 2]
    assert curve["order"][0] == (0, int(np.argmin(reference.sum(0))))
    assert all(group == 0 for group, _ in curve["pruned"])
    assert curve["steps"][2]["accuracy"] == heads.evaluate(
        model, dev, list(_column_mask(3, [h for _, h in curve["pruned"]])))["accuracy"]


def test_albert_pruned_checkpoint_loads_everywhere(tmp_path):
    from modeling.albert import load_albert_config
    from modeling.tasks import classifier_job
    model = _albert_classifier(seed=4)
    features = _features()
    smaller = heads.prune_heads(model, [0, 2])
    expected = smaller(features, training=False)["logits"].numpy()
    out = tmp_path / "out"
    prefix, config_path = heads.save_pruned(smaller, str(out),
                                            _albert_config(layer_norm_epsilon=1e-12))
    assert os.path.basename(config_path) == "albert_config.json"
    assert os.path.basename(prefix) == "model.ckpt"
    with open(config_path) as f:
        written = json.load(f)
    assert written["num_attention_heads_per_group"] == [2]
    assert written["num_attention_heads"] == 4 and written["layer_norm_epsilon"] == 1e-12
    names = dict(tf.train.list_variables(prefix))
    assert names["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/"
                 "kernel"] == [16, 8]
    # A fresh classifier from the written config, loaded as every script loads it.
    config = load_albert_config(config_path)
    fresh = BertClassifier.from_config_object(config, num_labels=2, family="albert")
    checkpoints.init_from_checkpoint(fresh, str(out))
    assert heads.load_classifier_head(fresh, str(out))
    np.testing.assert_allclose(fresh(features, training=False)["logits"].numpy(), expected,
                               atol=1e-6)
    # run_classifier's path: --model_family=albert --bert_config_file=DIR/albert_config.json
    # --init_checkpoint=DIR builds the pruned encoder and loads it.
    (tmp_path / "vocab.txt").write_text("".join(w + "\n" for w in VOCAB))
    job = classifier_job.ClassifierJob(
        model_family="albert", bert_config_file=config_path, init_checkpoint=str(out),
        vocab_file=str(tmp_path / "vocab.txt"), output_dir=str(tmp_path / "cls"),
        task_name="generic", data_dir=str(tmp_path), labels=["a", "b"], max_seq_length=8,
        do_eval=True)
    _, input_format = classifier_job._check_job(job)  # pylint: disable=protected-access
    built = input_format.build_model(2, "classification")
    input_format.init_model(built, job.init_checkpoint)
    np.testing.assert_allclose(
        built.encoder(features, training=False)["pooled_output"].numpy(),
        smaller.encoder(features, training=False)["pooled_output"].numpy(), atol=1e-6)
    # The unpruned config refuses the smaller weights by shape.
    with pytest.raises(checkpoints.CheckpointMismatchError):
        checkpoints.init_from_checkpoint(_albert_classifier(), str(out))


def test_albert_script_end_to_end_and_partial_entry(tmp_path):
    """`run/prune_heads.py --model_family=albert`: explicit shared heads with labelled
    dev data, written and reloaded; then a partial LAYER:HEAD entry refused in one line."""
    model = _albert_classifier(seed=5)
    model_dir = tmp_path / "model"
    heads.save_pruned(model, str(model_dir), _albert_config())  # unpruned: 4 heads
    _albert_config().to_json_file(str(model_dir / "albert_config.json"))
    (model_dir / "vocab.txt").write_text("".join(w + "\n" for w in VOCAB))
    common = ["--model_family=albert"] + _script_flags(tmp_path, model_dir, "albert_config.json",
                                                        ("dev.tsv",))
    out = tmp_path / "pruned"
    result = script_runner.run([sys.executable, SCRIPT] + common + [
        "--heads_to_prune=*:3,1", "--output_dir=%s" % out],
        capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "pruning.json").read_text())
    assert report["heads_removed"] == [[0, 1], [0, 3]]
    assert report["shared_heads_before"] == [4] and report["shared_heads_after"] == [2]
    assert report["heads_per_layer_after"] == [2, 2, 2]
    assert report["parameters_after"] == report["parameters_before"] - 2 * (3 * 68 + 64)
    assert np.asarray(report["importance_per_layer"]).shape == (3, 4)
    np.testing.assert_allclose(np.asarray(report["importance"]).shape, (1, 4))
    config = json.loads((out / "albert_config.json").read_text())
    assert config["num_attention_heads_per_group"] == [2]
    from modeling.albert import load_albert_config
    fresh = BertClassifier.from_config_object(load_albert_config(out / "albert_config.json"),
                                              num_labels=2, family="albert")
    checkpoints.init_from_checkpoint(fresh, str(out))
    assert heads.load_classifier_head(fresh, str(out))
    features = _features()
    np.testing.assert_allclose(
        fresh(features, training=False)["logits"].numpy(),
        model(dict(features, head_mask=_column_mask(3, [1, 3])), training=False)[
            "logits"].numpy(), atol=1e-5)
    # A partial entry: the script's library call refuses it in one line (script.run
    # prints a ValueError as `prune_heads: error: <message>`, see the BERT test above)
    # before any model is built or anything written.
    from modeling.tasks.classifier_job import ClassifierJob
    job = ClassifierJob(model_family="albert",
                        bert_config_file=str(model_dir / "albert_config.json"),
                        init_checkpoint=str(model_dir), output_dir=str(tmp_path / "bad"))
    with pytest.raises(ValueError) as error:
        heads.run(job, heads_to_prune="0:1,1:1")
    assert str(error.value) == (
        "--heads_to_prune: 0:1: the layer is shared (all ALBERT layers use one attention "
        "layer), so head 1 goes at every depth: list it for layer 2 too, or give it once "
        "as 1 or *:1")
    assert not (tmp_path / "bad").exists()


def test_albert_run_with_prune_fraction(tmp_path):
    """`heads.run` by importance for ALBERT: whole shared heads go, and the removed model
    scores what the masked one scored at that point of the curve."""
    from modeling.tasks.classifier_job import ClassifierJob
    model = _albert_classifier(seed=6)
    model_dir = tmp_path / "model"
    heads.save_pruned(model, str(model_dir), _albert_config())
    (model_dir / "vocab.txt").write_text("".join(w + "\n" for w in VOCAB))
    data = _two_word_task(tmp_path)
    job = ClassifierJob(model_family="albert",
                        bert_config_file=str(model_dir / "albert_config.json"),
                        init_checkpoint=str(model_dir), vocab_file=str(model_dir / "vocab.txt"),
                        output_dir=str(tmp_path / "out"), task_name="generic",
                        data_dir=str(data), labels=["a", "b"], max_seq_length=8)
    report = heads.run(job, prune_fraction=0.5, prune_step_fraction=0.25, batch_size=8,
                       latency_repeats=2)
    assert [s["heads_left"] for s in report["curve"]] == [4, 3, 2]
    assert report["shared_heads_after"] == [2] and report["heads_per_layer_after"] == [2, 2, 2]
    assert sorted(map(tuple, report["heads_removed"])) == sorted(
        map(tuple, report["pruning_order"][:2]))
    assert report["accuracy_after"] == pytest.approx(report["curve"][2]["accuracy"], abs=1e-9)
    assert os.path.exists(tmp_path / "out" / "pruning_curve.png")
    with pytest.raises(ValueError, match="--model_family=gpt2: head pruning supports bert "
                                         "and albert"):
        heads.run(ClassifierJob(model_family="gpt2", bert_config_file="x",
                                init_checkpoint="x", output_dir="x"), heads_to_prune="1")


def test_hf_safetensors_input_pruned_equals_masked(tmp_path, minilm_model_dir):
    """The real all-MiniLM-L6-v2 (HF safetensors, config.json) as --init_checkpoint:
    explicit heads removed; the written Google checkpoint + bert_config.json give the
    encoder outputs of the HF weights with those heads masked."""
    from modeling.tasks.classifier_job import ClassifierJob  # pylint: disable=g-import-not-at-top
    config_file = os.path.join(minilm_model_dir, "config.json")
    out = str(tmp_path / "pruned")
    report = heads.run(ClassifierJob(bert_config_file=config_file,
                                     init_checkpoint=minilm_model_dir,
                                     vocab_file=os.path.join(minilm_model_dir, "vocab.txt"),
                                     output_dir=out, max_seq_length=16),
                       heads_to_prune="0:1,0:11,5:3", latency_repeats=1)
    assert report["heads_per_layer_after"] == [10, 12, 12, 12, 12, 11]
    config = load_bert_config(config_file)
    rng = np.random.RandomState(0)
    features = {"input_ids": tf.constant(rng.randint(1000, 5000, size=(2, 12)), tf.int32),
                "input_mask": tf.constant([[1] * 12, [1] * 9 + [0] * 3], tf.int32),
                "segment_ids": tf.zeros([2, 12], tf.int32)}
    full = BertEncoder.from_config_object(config)
    checkpoints.init_from_checkpoint(full, minilm_model_dir)
    mask = np.ones([6, 12], np.float32)
    mask[0, 1] = mask[0, 11] = mask[5, 3] = 0.0
    expected = full(dict(features, head_mask=tf.constant(mask)), training=False)
    pruned = BertEncoder.from_config_object(load_bert_config(os.path.join(out, "bert_config.json")))
    checkpoints.init_from_checkpoint(pruned, out)
    got = pruned(features, training=False)
    np.testing.assert_allclose(got["sequence_output"].numpy(),
                               expected["sequence_output"].numpy(), atol=1e-4)
    assert not np.allclose(full(features, training=False)["sequence_output"].numpy(),
                           got["sequence_output"].numpy(), atol=1e-3)
