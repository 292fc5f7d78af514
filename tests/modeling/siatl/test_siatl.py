"""SiATL (modeling/siatl): attention pooling, auxiliary LM loss, sequential unfreezing, the job.

Every model here is a tiny ULMFiT AWD-LSTM (modeling/ulmfit) with SiATL's
task head; the end-to-end test fine-tunes one, loaded from an LM
checkpoint written by the project's trainer, on a generated task.
"""

import dataclasses
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import registry
from modeling.checkpoints import object_based
from modeling.objectives.base import BertPretrainer
from modeling.siatl import job as siatl_job
from modeling.siatl import model as siatl_model
from modeling.training import distribute
from modeling.training import optimization
from modeling.training import trainer as trainer_lib
from modeling.ulmfit import AwdLstmConfig

FILLERS = ["w%d" % i for i in range(24)]
POSITIVE = ["good", "great", "nice"]
NEGATIVE = ["bad", "awful", "poor"]
WORDS = ["<S>", "</S>", "<UNK>"] + FILLERS + POSITIVE + NEGATIVE


def _config(dropout=0.0):
    return AwdLstmConfig(vocab_size=len(WORDS), embedding_size=16, hidden_size=24,
                         num_hidden_layers=2, embed_p=dropout, input_p=dropout,
                         weight_p=dropout, hidden_p=dropout, output_p=dropout)


def _model(num_labels=2, config=None, **kwargs):
    config = config or _config()
    family = registry.families.get("ulmfit")
    encoder = family.build_encoder(config)
    objective = registry.objectives.get("word_lm")(config, family)
    return siatl_model.SiatlClassifier(encoder, objective, num_labels=num_labels,
                                       hidden_size=8, **kwargs)


def _batch(lengths, seq=7, seed=0, labels=None):
    rng = np.random.RandomState(seed)
    ids = rng.randint(3, len(WORDS), size=(len(lengths), seq)).astype(np.int32)
    mask = (np.arange(seq)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
    ids[:, 0] = 0
    ids = ids * mask
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
            "label_ids": np.array(labels if labels is not None else [0] * len(lengths),
                                  np.int32),
            "is_real_example": np.ones(len(lengths), np.float32)}


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


# ----------------------------------------------------------- attention pooling

def test_attention_pooling_equals_numpy_and_ignores_padding():
    tf.random.set_seed(1)
    layer = siatl_model.AttentionPooling(5)
    layer.build((None, None, 6))
    x = np.random.RandomState(0).randn(3, 4, 6).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], np.int32)
    pooled, weights = layer(x, mask)
    kernel, bias = layer.projection.kernel.numpy(), layer.projection.bias.numpy()
    scores = np.tanh(x @ kernel + bias) @ layer.score_vector.numpy()
    expected_w = np.where(mask > 0, np.exp(scores - scores.max()), 0.0)
    expected_w /= expected_w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights.numpy(), expected_w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pooled.numpy(), np.einsum("bt,btd->bd", expected_w, x),
                               rtol=1e-5, atol=1e-6)
    assert np.all(weights.numpy()[mask == 0] == 0.0)
    # Anything at padded positions changes nothing.
    noisy = x.copy()
    noisy[mask == 0] = 100.0 * np.random.RandomState(1).randn(int((mask == 0).sum()), 6)
    pooled2, weights2 = layer(noisy, mask)
    np.testing.assert_array_equal(pooled2.numpy(), pooled.numpy())
    np.testing.assert_array_equal(weights2.numpy(), weights.numpy())


def test_classifier_ignores_padded_positions():
    model = _model(num_labels=3)
    features = _batch([4, 7, 2], seed=3)
    outputs = model(features, training=False)
    noisy = dict(features)
    noisy["input_ids"] = np.where(features["input_mask"] > 0, features["input_ids"],
                                  np.random.RandomState(5).randint(3, len(WORDS),
                                                                   features["input_ids"].shape))
    outputs2 = model(noisy, training=False)
    np.testing.assert_allclose(outputs2["logits"].numpy(), outputs["logits"].numpy(),
                               rtol=1e-6, atol=1e-6)
    assert outputs["logits"].shape == (3, 3)
    weights = outputs["attention_weights"].numpy()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(weights[features["input_mask"] == 0] == 0.0)
    # A real word does change the result (the test above is not vacuous).
    changed = dict(features)
    changed["input_ids"] = features["input_ids"].copy()
    changed["input_ids"][0, 2] = 3 if changed["input_ids"][0, 2] != 3 else 4
    assert not np.allclose(model(changed, training=False)["logits"].numpy()[0],
                           outputs["logits"].numpy()[0])


# ------------------------------------------------------ auxiliary LM weight

def test_aux_lm_weight_schedule():
    def gamma(step, **kwargs):
        return float(siatl_model.aux_lm_weight(step, 100, **kwargs))

    # Exponential (the default): 0.2 * 0.5 ** (step / 100).
    assert gamma(0) == pytest.approx(0.2)
    assert gamma(50) == pytest.approx(0.2 / np.sqrt(2.0), rel=1e-6)
    assert gamma(25) == pytest.approx(0.2 * 0.5 ** 0.25, rel=1e-6)
    assert gamma(100) == pytest.approx(0.1)
    assert gamma(1000) == pytest.approx(0.1)
    # Linear: 0.2 - 0.1 * step / 100.
    assert gamma(50, decay="linear") == pytest.approx(0.15)
    assert gamma(25, decay="linear") == pytest.approx(0.175)
    assert gamma(100, decay="linear") == pytest.approx(0.1)
    # The model reads offset + the bound counter (a stage's optimizer iterations).
    model = _model(gamma_decay_steps=100)
    assert float(model.aux_lm_weight()) == pytest.approx(0.2)  # unbound: gamma_start
    counter = tf.Variable(0, dtype=tf.int64)
    model.bind_step(counter, offset=40)
    assert float(model.aux_lm_weight()) == pytest.approx(0.2 * 0.5 ** 0.4, rel=1e-6)
    counter.assign(10)
    assert float(model.aux_lm_weight()) == pytest.approx(0.2 * 0.5 ** 0.5, rel=1e-6)
    with pytest.raises(ValueError, match="gamma_decay"):
        _model(gamma_decay="cosine")


def test_total_loss_is_task_loss_plus_gamma_times_lm_loss():
    model = _model(num_labels=2, gamma_decay_steps=10, gamma_decay="linear")
    model.bind_step(tf.Variable(5, dtype=tf.int64))  # gamma = 0.15
    features = _batch([5, 3, 7], seed=7, labels=[1, 0, 1])
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    # By hand: the task cross-entropy and the LM's next-word cross-entropy.
    logits = model(features, training=False)["logits"].numpy()
    task = -np.mean(_log_softmax(logits)[np.arange(3), features["label_ids"]])
    hidden = model.encoder(features, training=False)["sequence_output"].numpy()
    table = model.encoder.embedding_table.numpy()
    lm_logits = hidden @ table.T + model.lm_objective.output_bias.numpy()
    log_probs = _log_softmax(lm_logits)
    total_ce, count = 0.0, 0
    for b in range(3):
        for t in range(6):
            if features["input_mask"][b, t] and features["input_mask"][b, t + 1]:
                total_ce -= log_probs[b, t, features["input_ids"][b, t + 1]]
                count += 1
    assert count == 4 + 2 + 6
    lm = total_ce / count
    assert float(loss) == pytest.approx(task + 0.15 * lm, rel=1e-4)
    assert float(metrics["loss"][0] / metrics["loss"][1]) == pytest.approx(task, rel=1e-4)
    assert float(metrics["word_lm_loss"][0]) == pytest.approx(total_ce, rel=1e-4)
    assert float(metrics["word_lm_loss"][1]) == count
    assert float(metrics["aux_lm_weight"][0]) == pytest.approx(0.15)
    assert float(metrics["total_loss"][0]) == pytest.approx(float(loss))


# --------------------------------------------------- sequential unfreezing

# The variable groups of the model, by path (a tiny AWD-LSTM under SiATL's head).
GROUPS = ("new", "lstm", "decoder", "embeddings")
# What each stage trains, cumulative as in Chronopoulou et al. (2019) and
# their code: the new layers; + the pre-trained LSTMs and the LM's decoder;
# + the embeddings.
STAGE_GROUPS = {1: {"new"}, 2: {"new", "lstm", "decoder"}, 3: set(GROUPS)}


def _group(path):
    if path.startswith("siatl_classifier/"):
        return "new"
    if path.startswith("awd_lstm/layer_"):
        return "lstm"
    if path.startswith("word_lm/"):
        return "decoder"
    if path.startswith("awd_lstm/embeddings/"):
        return "embeddings"
    raise AssertionError("a variable of no known group: %s" % path)


def _snapshot(model):
    return {v.path: v.numpy().copy() for v in model.weights if "seed_generator" not in v.path}


def test_sequential_unfreezing_is_cumulative(tmp_path):
    """Each stage of the job's plan trains exactly its groups, with a fresh optimizer.

    Three updates per stage (a new Adam each time, as the job's trainer per
    stage): every variable of a trained group changes, every other one is
    bit-identical; and `trainable_variables` is exactly the trained groups.
    """
    keras.utils.set_random_seed(2)
    stages = siatl_job.stage_plan(siatl_job.SiatlJob(output_dir=str(tmp_path)), 3, 3)
    assert [stage.parts for stage in stages] == list(siatl_job.STAGE_PARTS)
    model = _model(num_labels=2)
    assert {_group(p) for p in _snapshot(model)} == set(GROUPS)
    assert [v.path for v in model.embedding_variables] == ["awd_lstm/embeddings/embeddings"]
    features = _batch([5, 7, 3, 6], seed=4, labels=[1, 0, 1, 0])
    for stage in stages:
        model.set_trainable_parts(stage.parts)
        expected = STAGE_GROUPS[stage.number]
        assert {_group(v.path) for v in model.trainable_variables} == expected, stage
        assert {_group(v.path) for v in model.non_trainable_weights
                if "seed_generator" not in v.path} == set(GROUPS) - expected, stage
        optimizer = keras.optimizers.Adam(1e-2)
        before = _snapshot(model)
        for _ in range(3):
            with tf.GradientTape() as tape:
                loss, _ = model.compute_loss_and_metrics(features, training=True)
            variables = model.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        assert int(optimizer.iterations) == 3
        after = _snapshot(model)
        for path, value in after.items():
            if _group(path) in expected:
                assert not np.array_equal(value, before[path]), (stage.number, path)
            else:
                np.testing.assert_array_equal(value, before[path], err_msg=path)


def test_set_trainable_parts_from_any_state():
    """The parts do not depend on what was set before (Keras skips a no-op assignment)."""
    model = _model()
    for parts, number in (("all", 3), ("all_but_embeddings", 2), ("all", 3), ("new", 1),
                          ("all_but_embeddings", 2), ("new", 1), ("all", 3)):
        model.set_trainable_parts(parts)
        assert {_group(v.path) for v in model.trainable_variables} == STAGE_GROUPS[number], \
            parts
    with pytest.raises(ValueError, match="parts must be one of new, all_but_embeddings, all"):
        model.set_trainable_parts("pretrained")


# ----------------------------------------------------------------- the job

def _sentence(rng, label):
    words = [rng.choice(FILLERS) for _ in range(rng.randint(3, 7))]
    words.insert(rng.randint(0, len(words) + 1),
                 rng.choice(POSITIVE if label == "pos" else NEGATIVE))
    return " ".join(words)


def _write_task(data_dir, rng):
    os.makedirs(data_dir)
    for name, n in (("train", 128), ("dev", 64), ("test", 8)):
        rows = ["text\tlabel"]
        for i in range(n):
            label = "pos" if i % 2 == 0 else "neg"
            rows.append("%s\t%s" % (_sentence(rng, label), label))
        with open(os.path.join(data_dir, name + ".tsv"), "w") as f:
            f.write("\n".join(rows) + "\n")


def _write_lm_checkpoint(lm_dir, config, rng, steps=60):
    """A tiny AWD-LSTM LM trained by the project's trainer on text with a fixed word order.

    Each word has one successor (a permutation of the 30 words), so the LM
    learns to tell every word apart, the sentiment words included.
    """
    os.makedirs(lm_dir)
    config.to_json_file(os.path.join(lm_dir, "ulmfit_config.json"))
    family = registry.families.get("ulmfit")
    content = len(WORDS) - 3

    def sentence():
        ids, word = [0], rng.randrange(content)
        for _ in range(8):
            ids.append(3 + word)
            word = (7 * word + 1) % content
        return ids + [1]

    ids = np.array([sentence() for _ in range(32)], np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids)}
    trainer = trainer_lib.Trainer(
        distribute.get_strategy("one_device"),
        lambda: BertPretrainer(family.build_encoder(config),
                               [registry.objectives.get("word_lm")(config, family)]),
        lambda: optimization.create_optimizer(1e-2, steps, 0, jit_update=False),
        model_dir=lm_dir, train_batch_size=32, num_train_steps=steps,
        save_checkpoints_steps=steps, log_steps=steps)
    last = trainer.train(lambda _=None: tf.data.Dataset.from_tensors(features).repeat())
    return trainer.model, last


def _stored(model_dir, step=None):
    prefix = (os.path.join(model_dir, "ckpt-%d" % step) if step
              else tf.train.latest_checkpoint(model_dir))
    reader = tf.train.load_checkpoint(prefix)
    return {path: reader.get_tensor(key)
            for path, key in object_based.model_variable_keys(reader, prefix).items()
            if "seed_generator" not in path}


def test_job_fine_tunes_in_three_stages_from_an_lm_checkpoint(tmp_path):
    """End to end: LM checkpoint -> three stages -> held-out accuracy.

    Sequential unfreezing (cumulative) is checked on the stages'
    checkpoints: through stage 1 the LM's weights are the LM checkpoint's
    while the new layers change; stage 2 changes the new layers, the LSTMs
    and the decoder and leaves the embeddings as the LM checkpoint's; stage
    3 changes everything; each stage's checkpoints count its own updates (a
    fresh optimizer) and gamma runs on over the stages.

    Budget fixed before the run: 128 training sentences (3-6 filler words
    and one positive or negative word), batch 16, stages of 32, 16 and 96
    updates at learning rate 1e-2; the 64 dev sentences (never trained on)
    must be classified with accuracy >= 0.8 (chance: 0.5).
    """
    keras.utils.set_random_seed(0)
    rng = random.Random(0)
    data_dir, lm_dir = str(tmp_path / "data"), str(tmp_path / "lm")
    _write_task(data_dir, rng)
    config = _config(dropout=0.1)
    lm, lm_metrics = _write_lm_checkpoint(lm_dir, config, rng)
    assert lm_metrics["word_lm_accuracy"] > 0.2, lm_metrics  # chance: 1/30
    vocab_file = str(tmp_path / "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("\n".join(WORDS) + "\n")
    job = siatl_job.SiatlJob(
        task_name="generic", text_a_column="text", label_column="label", data_dir=data_dir,
        vocab_file=vocab_file, bert_config_file=os.path.join(lm_dir, "ulmfit_config.json"),
        init_checkpoint=lm_dir, output_dir=str(tmp_path / "out"), max_seq_length=12,
        do_train=True, do_eval=True, do_predict=True, train_batch_size=16,
        eval_batch_size=16, predict_batch_size=8, learning_rate=1e-2,
        stage_1_steps=32, stage_2_steps=16, stage_3_steps=96, save_checkpoints_steps=16,
        keep_checkpoint_max=10, task_hidden_size=16, seed=1, log_steps=16,
        xla_optimizer_update=False)
    result = siatl_job.run(job)
    results = result.eval_results
    assert results["eval_accuracy"] >= 0.8, results
    assert results["global_step"] == 144
    # gamma reached its end value over the three stages' 144 updates.
    assert results["eval_aux_lm_weight"] == pytest.approx(0.1)
    assert "eval_word_lm_loss" in results
    with open(os.path.join(job.output_dir, "eval_results.txt")) as f:
        assert "eval_accuracy = %s" % results["eval_accuracy"] in f.read()
    assert result.test_predictions.shape == (8, 2)

    # Each stage's optimizer started at 0: its checkpoints count its own updates.
    out = job.output_dir
    for number, steps in ((1, 32), (2, 16), (3, 96)):
        assert tf.train.latest_checkpoint(os.path.join(out, "stage_%d" % number)).endswith(
            "ckpt-%d" % steps)
    lm_weights = {v.path: v.numpy() for v in lm.weights}
    s1_first, s1 = _stored(os.path.join(out, "stage_1"), 16), _stored(os.path.join(out, "stage_1"))
    s2, s3 = _stored(os.path.join(out, "stage_2")), _stored(os.path.join(out, "stage_3"))

    def is_lm(path):
        return path.startswith("awd_lstm/") or path.startswith("word_lm/")

    lm_paths = [p for p in s1 if is_lm(p)]
    assert len(lm_paths) == len(lm_weights)
    assert {_group(p) for p in s1} == set(GROUPS)
    for path in lm_paths:
        # Stage 1: the LM is the checkpoint's, untouched (every weight stored).
        np.testing.assert_array_equal(s1[path], lm_weights[path])
        np.testing.assert_array_equal(s1_first[path], lm_weights[path])
    for path in s1:
        group = _group(path)
        if group == "new":  # stage 1 trains the new layers (between its two checkpoints)
            assert not np.array_equal(s1_first[path], s1[path]), path
        if group in STAGE_GROUPS[2]:  # stage 2: new layers, LSTMs, decoder
            assert not np.array_equal(s2[path], s1[path]), path
        else:                         # not the embeddings: still the LM checkpoint's
            np.testing.assert_array_equal(s2[path], s1[path], err_msg=path)
            np.testing.assert_array_equal(s2[path], lm_weights[path], err_msg=path)
        assert not np.array_equal(s3[path], s2[path]), path  # stage 3: everything
    assert [(s.number, s.parts, s.steps, s.offset) for s in result.stages] == [
        (1, "new", 32, 0), (2, "all_but_embeddings", 16, 32), (3, "all", 96, 48)]

    # Run again: every stage is done, nothing trains, the same results; and
    # evaluation alone finds the last stage's weights and the stages' lengths.
    for again_job in (job, dataclasses.replace(job, do_train=False, do_predict=False)):
        again = siatl_job.run(again_job).eval_results
        assert again["eval_accuracy"] == results["eval_accuracy"]
        assert again["global_step"] == 144
        assert again["eval_aux_lm_weight"] == pytest.approx(0.1)


def test_job_errors_name_the_flag(tmp_path):
    base = dict(task_name="generic", data_dir=str(tmp_path), vocab_file="v.txt",
                bert_config_file="c.json", output_dir=str(tmp_path / "o"), do_train=True)
    with pytest.raises(siatl_job.SiatlJobError, match="--stage_2_steps must be >= 0"):
        siatl_job.run(siatl_job.SiatlJob(stage_2_steps=-1, **base))
    with pytest.raises(siatl_job.SiatlJobError, match="--unfreeze_steps"):
        siatl_job.run(siatl_job.SiatlJob(unfreeze_steps=5, **base))
    with pytest.raises(siatl_job.SiatlJobError, match="--aux_lm_weight_decay=cosine"):
        siatl_job.run(siatl_job.SiatlJob(aux_lm_weight_decay="cosine", **base))
    with pytest.raises(siatl_job.SiatlJobError, match="--lm_objective"):
        siatl_job.run(siatl_job.SiatlJob(lm_objective="nope", **base))
    assert registry.tasks.get("siatl").job_class is siatl_job.SiatlJob
