"""BertClassifier (shapes, losses vs NumPy, config), eval metrics, Trainer.predict."""

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import processors
from data import tf_example
from modeling import checkpoints
from modeling.tasks import classification as classifier_lib
from modeling import bert as config_lib
from modeling import objectives
from modeling import recipes
from modeling.training import optimization
from modeling.training import trainer as trainer_lib

SEQ, VOCAB = 8, 30


def _config(dropout=0.0):
    return config_lib.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=16, type_vocab_size=2,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def _features(batch=4, seed=0, task_type="classification", num_labels=3):
    rng = np.random.RandomState(seed)
    lengths = rng.randint(3, SEQ + 1, size=batch)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    features = {
        "input_ids": (rng.randint(5, VOCAB, size=(batch, SEQ)) * mask).astype(np.int32),
        "input_mask": mask,
        "segment_ids": ((np.arange(SEQ)[None, :] >= 2) * mask).astype(np.int32),
        "is_real_example": np.array([1] * (batch - 1) + [0], np.int32),
    }
    if task_type == "classification":
        features["label_ids"] = rng.randint(0, num_labels, size=batch).astype(np.int32)
    elif task_type == "multi_label":
        features["label_ids"] = rng.randint(0, 2, size=(batch, num_labels)).astype(np.int32)
    else:
        features["label_ids"] = rng.uniform(0, 5, size=batch).astype(np.float32)
    return {k: tf.constant(v) for k, v in features.items()}


def _np_logits(model, features):
    pooled = model.encoder(features, training=False)["pooled_output"].numpy()
    return pooled @ model.output_weights.numpy().T + model.output_bias.numpy()


def test_classification_outputs_loss_and_metrics_match_numpy():
    keras.utils.set_random_seed(0)
    model = classifier_lib.BertClassifier.from_config_object(_config(), num_labels=3)
    assert tuple(model.output_weights.shape) == (3, 32) and tuple(model.output_bias.shape) == (3,)
    assert {w.path for w in model.weights} >= {"bert_classifier/output_weights",
                                                "bert_classifier/output_bias"}
    # Google's initialiser: truncated normal, stddev 0.02.
    assert np.abs(model.output_weights.numpy()).max() <= 0.04 + 1e-6
    model.output_bias.assign([0.3, -0.2, 0.1])
    features = _features()
    outputs = model(features, training=False)
    logits = _np_logits(model, features)
    np.testing.assert_allclose(outputs["logits"].numpy(), logits, rtol=1e-5, atol=1e-5)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probs, rtol=1e-5, atol=1e-6)

    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    labels, weights = features["label_ids"].numpy(), features["is_real_example"].numpy()
    per_example = -np.log(probs[np.arange(4), labels])
    expected = np.sum(weights * per_example) / weights.sum()
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["loss"][0]) == pytest.approx(np.sum(weights * per_example), rel=1e-5)
    assert float(metrics["loss"][1]) == 3.0
    correct = (probs.argmax(-1) == labels).astype(float)
    assert float(metrics["accuracy"][0]) == pytest.approx(np.sum(weights * correct))
    assert float(metrics["accuracy"][1]) == 3.0

    # All padding: loss 0, not NaN.
    padding = dict(features, is_real_example=tf.zeros([4], tf.int32))
    assert float(model.compute_loss_and_metrics(padding)[0]) == 0.0


def test_multi_label_uses_sigmoid_cross_entropy():
    keras.utils.set_random_seed(1)
    model = classifier_lib.BertClassifier.from_config_object(_config(), num_labels=4,
                                                             task_type="multi_label")
    features = _features(task_type="multi_label", num_labels=4)
    outputs = model(features)
    logits = _np_logits(model, features)
    np.testing.assert_allclose(outputs["probabilities"].numpy(), 1 / (1 + np.exp(-logits)),
                               rtol=1e-5, atol=1e-6)
    loss, metrics = model.compute_loss_and_metrics(features)
    y, w = features["label_ids"].numpy(), features["is_real_example"].numpy()
    p = 1 / (1 + np.exp(-logits))
    per_example = np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p)), axis=-1)
    assert float(loss) == pytest.approx(np.sum(w * per_example) / w.sum(), rel=1e-5)
    right = ((logits > 0) == y)
    assert float(metrics["accuracy"][0]) == pytest.approx(np.sum(w * right.all(-1)))
    assert float(metrics["label_accuracy"][0]) == pytest.approx(np.sum(w[:, None] * right))
    assert float(metrics["label_accuracy"][1]) == 12.0


def test_regression_uses_squared_error():
    keras.utils.set_random_seed(2)
    model = classifier_lib.BertClassifier.from_config_object(_config(), task_type="regression")
    assert model.num_labels == 1
    features = _features(task_type="regression")
    outputs = model(features)
    assert outputs["predictions"].shape == (4,) and outputs["logits"].shape == (4, 1)
    pred = _np_logits(model, features)[:, 0]
    y, w = features["label_ids"].numpy(), features["is_real_example"].numpy()
    loss, metrics = model.compute_loss_and_metrics(features)
    assert float(loss) == pytest.approx(np.sum(w * (pred - y) ** 2) / w.sum(), rel=1e-5)
    assert set(metrics) == {"loss"}
    with pytest.raises(ValueError, match="one output"):
        classifier_lib.BertClassifier.from_config_object(_config(), num_labels=3,
                                                         task_type="regression")


def test_dropout_only_in_training_and_config_round_trip(tmp_path):
    keras.utils.set_random_seed(3)
    model = classifier_lib.BertClassifier.from_config_object(_config(dropout=0.5), num_labels=2)
    assert model.dropout_rate == 0.5
    features = _features(num_labels=2)
    a = model(features, training=False)["logits"].numpy()
    np.testing.assert_allclose(a, model(features, training=False)["logits"].numpy())
    assert not np.allclose(a, model(features, training=True)["logits"].numpy())

    config = model.get_config()
    clone = classifier_lib.BertClassifier.from_config(config)
    assert clone.get_config() == config and clone.num_labels == 2
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(features)["logits"].numpy(), a, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(features)["logits"].numpy(), a, rtol=1e-5, atol=1e-6)


def test_mixed_precision_keeps_outputs_and_loss_in_float32():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = classifier_lib.BertClassifier.from_config_object(_config(), num_labels=3)
        outputs = model(_features())
        assert outputs["logits"].dtype == tf.float32
        assert outputs["probabilities"].dtype == tf.float32
        loss, _ = model.compute_loss_and_metrics(_features())
        assert loss.dtype == tf.float32 and np.isfinite(float(loss))
        assert model.output_weights.dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_init_from_google_checkpoint_loads_the_encoder_only(tmp_path):
    keras.utils.set_random_seed(4)
    pretrainer = recipes.build_bert_pretrainer(_config())
    prefix = checkpoints.save_google_checkpoint(pretrainer, str(tmp_path / "bert_model.ckpt"))
    model = classifier_lib.BertClassifier.from_config_object(_config(), num_labels=2)
    head = model.output_weights.numpy().copy()
    checkpoints.init_from_checkpoint(model, prefix)
    for a, b in zip(model.encoder.get_weights(), pretrainer.encoder.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.output_weights.numpy(), head)


# ------------------------------------------------------------------ metrics


def test_metrics_against_hand_computed_values():
    pred = [1, 1, 0, 1, 0, 0, 1, 0]
    gold = [1, 0, 0, 1, 1, 0, 1, 0]
    # TP=3, FP=1, FN=1, TN=3.
    assert classifier_lib.accuracy(pred, gold) == 0.75
    assert classifier_lib.f1_score(pred, gold) == pytest.approx(6 / 8)
    assert classifier_lib.matthews_corrcoef(pred, gold) == pytest.approx((9 - 1) / 16)
    # TP=1, FP=2, FN=0, TN=1: (1*1 - 2*0) / sqrt(3 * 1 * 3 * 1) = 1/3.
    assert classifier_lib.matthews_corrcoef([1, 1, 1, 0], [1, 0, 0, 0]) == pytest.approx(1 / 3)
    assert classifier_lib.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # undefined
    assert classifier_lib.f1_score([0, 0], [0, 0]) == 0.0
    # Three classes, one error: C = [[1,0,0],[0,1,1],[0,0,1]], s=4, c=3,
    # p = (1,1,2), t = (1,2,1): (12 - 5) / sqrt((16 - 6) * (16 - 6)) = 0.7.
    assert classifier_lib.matthews_corrcoef([0, 1, 2, 2], [0, 1, 1, 2]) == pytest.approx(0.7)

    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 4.0]
    # mean 2.5/3.75; dx=(-1.5,-.5,.5,1.5), dy=(-1.75,.25,1.25,.25): 3.5/sqrt(5*4.75).
    assert classifier_lib.pearson_correlation(x, y) == pytest.approx(3.5 / np.sqrt(5 * 4.75))
    # ranks of y with the tie averaged: (1, 2.5, 4, 2.5); dy = (-1.5, 0, 1.5, 0):
    # r = (2.25 + 0.75) / sqrt(5 * 4.5).
    assert classifier_lib.spearman_correlation(x, y) == pytest.approx(3.0 / np.sqrt(5 * 4.5))
    assert classifier_lib.spearman_correlation([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)
    assert np.isnan(classifier_lib.pearson_correlation([1, 1, 1], [1, 2, 3]))

    preds = [[1, 0, 1], [0, 1, 0]]
    gold = [[1, 1, 0], [0, 1, 0]]
    # micro: TP=2, FP=1, FN=1 -> 4/6.
    assert classifier_lib.multi_label_f1(preds, gold, "micro") == pytest.approx(4 / 6)
    # label 0: TP1 -> 1; label 1: TP1 FN1 -> 2/3; label 2: FP1 -> 0.
    assert classifier_lib.multi_label_f1(preds, gold, "macro") == pytest.approx((1 + 2 / 3) / 3)


def test_compute_metrics_drops_padding():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    labels = np.array([0, 1, 1, 0])
    real = np.array([1, 1, 1, 0])
    results = classifier_lib.compute_metrics(["accuracy", "f1", "mcc"], probs, labels,
                                             is_real_example=real)
    # Real: pred (0, 1, 0) vs gold (0, 1, 1): TP=1, FN=1, TN=1.
    assert results["accuracy"] == pytest.approx(2 / 3)
    assert results["f1"] == pytest.approx(2 / 3)
    assert results["mcc"] == pytest.approx(1 / np.sqrt(2 * 1 * 1 * 2) * 1)
    reg = classifier_lib.compute_metrics(["pearson", "spearman"], [1.0, 2.0, 3.0], [1.0, 3.0, 2.0],
                                         task_type="regression")
    assert reg["pearson"] == pytest.approx(0.5) and reg["spearman"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="Unknown metric 'auc'"):
        classifier_lib.compute_metrics(["auc"], probs, labels)


# ------------------------------------------------------------------ predict


def _write_records(path, n, num_labels=3):
    rng = np.random.RandomState(7)
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(n):
            length = rng.randint(3, SEQ + 1)
            ids = rng.randint(5, VOCAB, size=length).tolist()
            writer.write(tf_example.serialize_example({
                "input_ids": ids + [0] * (SEQ - length),
                "input_mask": [1] * length + [0] * (SEQ - length),
                "segment_ids": [0] * SEQ,
                "label_ids": [i % num_labels],
                "is_real_example": [1]}))
    return path


@pytest.mark.parametrize("strategy_name", ["default", "mirrored"])
def test_trainer_predict_returns_outputs_in_input_order(tmp_path, strategy_name):
    strategy = (tf.distribute.get_strategy() if strategy_name == "default" else
                tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    path = _write_records(str(tmp_path / "p.tf_record"), 11)
    keras.utils.set_random_seed(5)
    trainer = trainer_lib.Trainer(
        strategy, lambda: classifier_lib.BertClassifier.from_config_object(_config(), num_labels=3),
        lambda: optimization.create_optimizer(1e-3, 1, 0), model_dir=str(tmp_path / "m"),
        train_batch_size=4, num_train_steps=0)
    # 11 examples in batches of 4 (the last one partial; with two replicas
    # the last step has one batch of 3 and an empty one).
    input_fn = processors.file_based_input_fn_builder(path, SEQ, False, False, batch_size=4)
    out = trainer.predict(input_fn, ["probabilities", "label_ids", "is_real_example"])
    assert list(out) == ["probabilities", "label_ids", "is_real_example"]
    assert out["probabilities"].shape == (11, 3)
    np.testing.assert_array_equal(out["label_ids"], [i % 3 for i in range(11)])
    # Same numbers as running the model on the whole set at once.
    everything = next(iter(processors.file_based_input_fn_builder(
        path, SEQ, False, False, batch_size=11)()))
    expected = trainer.model(everything, training=False)["probabilities"].numpy()
    np.testing.assert_allclose(out["probabilities"], expected, rtol=1e-5, atol=1e-6)
    # All model outputs by default.
    assert set(trainer.predict(input_fn)) == {"logits", "probabilities"}
    with pytest.raises(ValueError, match="'nope' is neither a model output"):
        trainer.predict(input_fn, ["nope"])


_PREDICT_WORKER = """
import json, sys
import keras
import tensorflow as tf
from data import processors
from modeling import bert as config
from modeling.tasks import classification as classifier
from modeling.training import distribute, optimization, trainer as trainer_lib

strategy = distribute.get_strategy("multi_worker_mirrored")
cfg = config.BertConfig(vocab_size=%d, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=16, type_vocab_size=2)

def model_fn():
    keras.utils.set_random_seed(5)
    return classifier.BertClassifier.from_config_object(cfg, num_labels=3)

trainer = trainer_lib.Trainer(strategy, model_fn, lambda: optimization.create_optimizer(1e-3, 1, 0),
                              model_dir=sys.argv[2], train_batch_size=4, num_train_steps=0)
out = trainer.predict(processors.file_based_input_fn_builder(sys.argv[1], %d, False, False,
                                                             batch_size=4),
                      ["probabilities", "label_ids"])
print("RESULT " + json.dumps({k: v.tolist() for k, v in out.items()}), flush=True)
""" % (VOCAB, SEQ)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trainer_predict_under_two_workers_gives_every_worker_all_outputs_in_order(tmp_path):
    path = _write_records(str(tmp_path / "p.tf_record"), 11)
    script = tmp_path / "predict_worker.py"
    script.write_text(_PREDICT_WORKER)
    cluster = {"worker": ["127.0.0.1:%d" % _free_port(), "127.0.0.1:%d" % _free_port()]}
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        procs.append(script_runner.Popen([sys.executable, str(script), path, str(tmp_path / "m")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    results = []
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-3000:]
        (line,) = [l for l in out.splitlines() if l.startswith("RESULT ")]
        results.append(json.loads(line[len("RESULT "):]))
    for result in results:
        assert result["label_ids"] == [i % 3 for i in range(11)]
        assert np.array(result["probabilities"]).shape == (11, 3)
    np.testing.assert_allclose(results[0]["probabilities"], results[1]["probabilities"], atol=1e-6)
