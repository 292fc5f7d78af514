"""Post-training quantization (TFLite) and magnitude pruning (modeling/analysis/compression.py)."""

import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from modeling import bert as config_lib
from modeling.analysis import compression
from modeling.tasks import classification
from modeling.training import optimization
from modeling.training import pruning

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LENGTH = 16
NUM_LABELS = 3


def _config():
    return config_lib.BertConfig(
        vocab_size=2577, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=32, type_vocab_size=2)


@pytest.fixture(scope="module")
def classifier():
    """A random-init classifier whose head has unit-variance weights (clear margins)."""
    keras.utils.set_random_seed(11)
    model = classification.BertClassifier.from_config_object(_config(), num_labels=NUM_LABELS)
    rng = np.random.RandomState(0)
    model.output_weights.assign(rng.normal(size=model.output_weights.shape).astype(np.float32) * 3)
    return model


def _examples(model, count=40, seed=1):
    """Random id rows of varied length; labels = the float model's argmax for 3/4 of them."""
    rng = np.random.RandomState(seed)
    examples = []
    for i in range(count):
        used = rng.randint(4, LENGTH + 1)
        ids = np.zeros([1, LENGTH], np.int32)
        ids[0, :used] = rng.randint(5, 2577, size=used)
        mask = (ids != 0).astype(np.int32)
        segments = np.zeros_like(ids)
        segments[0, used // 2:used] = 1
        features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
        logits = model({k: tf.constant(v) for k, v in features.items()}, training=False)["logits"]
        label = int(np.argmax(logits[0])) if i % 4 else int((np.argmax(logits[0]) + 1) % 3)
        examples.append((features, label))
    return examples


def _write_records(path, examples, padding=2):
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    with tf.io.TFRecordWriter(str(path)) as writer:
        rows = [(f, label, 1) for f, label in examples]
        rows += [({k: np.zeros([1, LENGTH], np.int32) for k in compression.FEATURES}, 0, 0)] * padding
        for features, label, real in rows:
            feature = {k: ints(features[k][0]) for k in compression.FEATURES}
            feature["label_ids"] = ints([label])
            feature["is_real_example"] = ints([real])
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())
    return str(path)


def test_quantized_models_agree_with_the_float_model_and_are_smaller(classifier):
    examples = _examples(classifier)
    labels = np.array([label for _, label in examples])
    report = compression.evaluate(classifier, examples, LENGTH, repeats=1)
    assert report["num_examples"] == len(examples)
    # Labels: the float argmax except every 4th example, so float accuracy is 3/4 exactly.
    assert report["float"]["accuracy"] == pytest.approx(np.mean(np.arange(len(labels)) % 4 != 0))
    variants = report["variants"]
    assert set(variants) == set(compression.VARIANTS)
    assert variants["float32"]["agreement_with_float"] == 1.0
    assert variants["float32"]["max_abs_logit_difference"] < 1e-4
    assert variants["float32"]["size_ratio_to_float32"] == 1.0
    for name in ("dynamic_int8", "float16"):
        assert variants[name]["agreement_with_float"] >= 0.9, (name, variants[name])
        assert variants[name]["max_abs_logit_difference"] > 0  # really quantized
    assert variants["float16"]["max_abs_logit_difference"] < 0.05
    assert variants["dynamic_int8"]["size_ratio_to_float32"] < 0.35, variants
    assert variants["float16"]["size_ratio_to_float32"] < 0.6, variants
    # About 4 bytes a parameter in the float32 file.
    assert 0.9 < report["float32_tflite_bytes"] / report["float"]["parameter_bytes"] < 1.2
    for row in list(variants.values()) + [report["float"]]:
        assert row["latency_ms_per_example"] > 0


def test_saved_model_source_gives_the_keras_logits(classifier, tmp_path):
    export_dir = str(tmp_path / "saved")
    compression.save_feature_model(classifier, export_dir, LENGTH)
    assert [n for n in os.listdir(str(tmp_path)) if n.startswith(".")] == []
    lite = compression.TFLiteClassifier(compression.convert(export_dir, "float32"))
    for features, _ in _examples(classifier, count=4, seed=7):
        want = classifier({k: tf.constant(v) for k, v in features.items()}, training=False)
        np.testing.assert_allclose(lite(features), want["logits"][0].numpy(), atol=1e-4)
    with pytest.raises(compression.CompressionError, match="not a SavedModel directory"):
        compression.convert(str(tmp_path / "missing"), "float16")
    with pytest.raises(compression.CompressionError, match=r"must be among .* got 'int4'"):
        compression.convert(export_dir, "int4")


def test_records_reader_keeps_real_examples(classifier, tmp_path):
    examples = _examples(classifier, count=5, seed=3)
    path = _write_records(tmp_path / "eval.tf_record", examples, padding=3)
    read = compression.read_labelled_records(path, LENGTH)
    assert len(read) == 5
    for (got, label), (want, want_label) in zip(read, examples):
        assert label == want_label
        for name in compression.FEATURES:
            np.testing.assert_array_equal(got[name], want[name])
    with pytest.raises(compression.CompressionError, match="no such records file"):
        compression.read_labelled_records(str(tmp_path / "none.tf_record"), LENGTH)
    with pytest.raises(compression.CompressionError, match="not classifier records of "
                       "--max_seq_length=12"):
        compression.read_labelled_records(path, 12)


def test_sparsity_schedule_equals_the_formula():
    # s_t = s_f + (s_i - s_f)(1 - (t - t0)/(n dt))^3 with s_i=0.1, s_f=0.8, t0=10, n dt=40, dt=10.
    expected = {0: 0.1, 9: 0.1, 10: 0.1, 19: 0.1,
                20: 0.8 - 0.7 * 0.75 ** 3,      # 0.5046875
                25: 0.8 - 0.7 * 0.75 ** 3,      # masks change only every dt steps
                30: 0.8 - 0.7 * 0.5 ** 3,       # 0.7125
                40: 0.8 - 0.7 * 0.25 ** 3,      # 0.7890625
                50: 0.8, 1000: 0.8}
    pruner = pruning.MagnitudePruner([tf.Variable([1.0])], 0.8, 10, 50, frequency=10,
                                     initial_sparsity=0.1)
    for step, value in expected.items():
        assert compression.polynomial_sparsity(step, 0.8, 10, 50, initial_sparsity=0.1,
                                               frequency=10) == pytest.approx(value, abs=1e-12)
        # The same schedule as TensorFlow ops (what the training loop runs).
        assert float(pruner._scheduled(tf.constant(step))[0]) == pytest.approx(value, abs=1e-12)
    due = [step for step in range(70) if pruner.is_mask_update_step(step)]
    assert due == [10, 20, 30, 40, 50]
    assert compression.polynomial_sparsity(20, 0.8, 10, 50, frequency=1) == pytest.approx(
        0.8 - 0.8 * 0.75 ** 3)
    with pytest.raises(pruning.PruningError, match="--target_sparsity"):
        compression.polynomial_sparsity(0, 1.0, 0, 10)
    with pytest.raises(pruning.PruningError, match="--pruning_begin_step"):
        compression.polynomial_sparsity(0, 0.5, 10, 10)


def test_pruning_reaches_the_target_and_pruned_weights_stay_zero():
    """Budget: 12 Adam updates of a tiny classifier; masks every 2 steps from 0 to 8."""
    keras.utils.set_random_seed(2)
    config = config_lib.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=16, type_vocab_size=2)
    model = classification.BertClassifier.from_config_object(config, num_labels=2)
    kernels = compression.encoder_dense_kernels(model)
    paths = [v.path for v in kernels]
    assert any("intermediate" in p or "ffn" in p or "dense" in p for p in paths), paths
    assert not any("embedding" in p for p in paths)
    pruner = compression.MagnitudePruner(kernels, 0.75, begin_step=0, end_step=8, frequency=2)
    optimizer = keras.optimizers.Adam(0.01)
    rng = np.random.RandomState(0)
    features = {"input_ids": tf.constant(rng.randint(1, 50, size=(4, 8)), tf.int32),
                "input_mask": tf.ones([4, 8], tf.int32), "segment_ids": tf.zeros([4, 8], tf.int32)}
    labels = tf.constant([0, 1, 1, 0])

    def update():
        with tf.GradientTape() as tape:
            logits = model(features, training=False)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    sparsities = []
    for step in range(9):
        update()
        pruner.step(step)
        sparsities.append(pruner.measured_sparsity())
    assert sparsities[0] == pytest.approx(0.0, abs=1e-3)
    assert sparsities == sorted(sparsities)
    for variable in kernels:  # each kernel on its own at the target
        assert np.mean(variable.numpy() == 0) == pytest.approx(0.75, abs=0.5 / variable.numpy().size)
    pruned = [v.numpy() == 0 for v in kernels]
    moved = 0
    for step in range(9, 12):
        update()
        # Adam's moments push the pruned weights away from zero ...
        moved += sum(int(np.sum(v.numpy()[z] != 0)) for v, z in zip(kernels, pruned))
        pruner.step(step)
        # ... and the masks put them back: the same weights are zero.
        for variable, zero in zip(kernels, pruned):
            assert np.all(variable.numpy()[zero] == 0)
            assert np.mean(variable.numpy() == 0) == pytest.approx(
                0.75, abs=0.5 / variable.numpy().size)
    assert moved > 0


def test_num_labels_is_the_heads_and_a_contradicting_one_is_blamed(tmp_path):
    module = tf.Module()
    module.output_weights = tf.Variable(tf.zeros([3, 8]))
    prefix = tf.train.Checkpoint(model=module).write(str(tmp_path / "ckpt-1"))
    assert compression.checkpoint_num_labels(prefix) == 3
    assert compression.checkpoint_num_labels(prefix, 3) == 3
    with pytest.raises(compression.CompressionError) as error:
        compression.checkpoint_num_labels(prefix, 2)
    assert str(error.value) == ("--num_labels=2, but the classifier head of %s has 3 labels; "
                                "expected --num_labels=3 (or leave it out)" % prefix)
    headless = tf.train.Checkpoint(model=tf.Module()).write(str(tmp_path / "other-1"))
    with pytest.raises(compression.CompressionError, match="has no classifier head"):
        compression.checkpoint_num_labels(headless)
    assert compression.checkpoint_num_labels(headless, 4) == 4


def test_compress_classifier_script(classifier, tmp_path):
    model_dir = tmp_path / "finetuned"
    model_dir.mkdir()
    _config().to_json_file(str(model_dir / "bert_config.json"))
    # The trainer's layout: the encoder is reachable only through the optimizer.
    optimizer = optimization.create_optimizer(1e-4, 10, 0)
    optimizer.build(classifier.trainable_variables)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=classifier, optimizer=optimizer),
                               str(model_dir), 1, checkpoint_name="ckpt").save()
    prefix = tf.train.latest_checkpoint(str(model_dir))
    # restore_classifier loads every weight, encoder included ...
    keras.utils.set_random_seed(99)
    copy = classification.BertClassifier.from_config_object(_config(), num_labels=NUM_LABELS)
    assert compression.restore_classifier(copy, prefix) == len(
        [w for w in copy.weights if not w.path.endswith("seed_generator_state")])
    for mine, theirs in zip(copy.weights, classifier.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    # ... and refuses another head.
    other = classification.BertClassifier.from_config_object(_config(), num_labels=2)
    with pytest.raises(compression.CompressionError, match=r"output_weights has shape \[3, 64\]"):
        compression.restore_classifier(other, prefix)
    examples = _examples(classifier, count=8, seed=5)
    _write_records(model_dir / "eval.tf_record", examples)
    out = tmp_path / "compression.json"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "compress_classifier.py"),
         "--bert_config_file=%s" % (model_dir / "bert_config.json"),
         "--model_dir=%s" % model_dir, "--max_seq_length=%d" % LENGTH,
         "--variants=dynamic_int8", "--repeats=1", "--output_file=%s" % out,
         "--tflite_dir=%s" % (tmp_path / "tflite")],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out) as f:
        report = json.load(f)
    assert report["num_examples"] == 8
    assert os.path.getsize(tmp_path / "compression.png") > 0  # --plot (default) beside the JSON
    assert list(report["variants"]) == ["dynamic_int8"]
    labels = np.array([label for _, label in examples])
    assert report["float"]["accuracy"] == pytest.approx(np.mean(np.arange(8) % 4 != 0))
    assert report["variants"]["dynamic_int8"]["agreement_with_float"] >= 7 / 8
    assert os.listdir(str(tmp_path / "tflite")) == ["model_dynamic_int8.tflite"]
    assert os.path.getsize(str(tmp_path / "tflite" / "model_dynamic_int8.tflite")) == \
        report["variants"]["dynamic_int8"]["size_bytes"]
    del labels
