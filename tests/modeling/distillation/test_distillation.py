"""modeling/distillation: the losses, student initialisation, layer mapping and the models.

Every distillation loss is 0 when the student is a copy of the teacher (same
weights) and positive when one student weight moves; the soft cross-entropy
with a temperature matches a numpy reference; the every-other-layer
initialisation copies exactly teacher layers 0, 2, ...; the TinyBERT layer
maps (uniform and explicit) and the projection for a narrower student; and a
training step changes the student but never a teacher.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import registry
from modeling.bert import BertConfig
from modeling.distillation import job as distillation_job
from modeling.distillation import losses
from modeling.distillation import models
from modeling.distillation import students
from modeling.distillation.students import DistillationError
from modeling.objectives.base import BertPretrainer
from modeling.tasks.classification import BertClassifier

VOCAB = 40
SEQ = 8


def _config(hidden=32, layers=2, heads=2, initializer_range=0.02):
    return BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=2 * hidden,
                      max_position_embeddings=16, type_vocab_size=2,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      initializer_range=initializer_range)


def _classifier(config, name, seed):
    keras.utils.set_random_seed(seed)
    return BertClassifier.from_config_object(config, num_labels=3, name=name)


def _mlm(config, name, seed):
    keras.utils.set_random_seed(seed)
    family = registry.families.get("bert")
    return BertPretrainer(family.build_encoder(config),
                          [registry.objectives.get("masked_lm")(config, family)], name=name)


def _features(batch=4, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, VOCAB, size=(batch, SEQ)).astype(np.int32)
    mask = np.ones((batch, SEQ), np.int32)
    mask[0, 5:] = 0  # padding in the first example
    mask[1, 6:] = 0
    ids[mask == 0] = 0
    return {
        "input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
        "segment_ids": tf.zeros((batch, SEQ), tf.int32),
        "label_ids": tf.constant(rng.randint(0, 3, size=batch), tf.int32),
        "is_real_example": tf.ones((batch,), tf.int32),
        "masked_lm_positions": tf.constant([[1, 2]] * batch, tf.int32),
        "masked_lm_ids": tf.constant(rng.randint(5, VOCAB, size=(batch, 2)), tf.int32),
        "masked_lm_weights": tf.constant([[1.0, 1.0]] * (batch - 1) + [[1.0, 0.0]]),
    }


def _copy_classifier(source, target):
    students.copy_layers(source.encoder, target.encoder,
                         list(range(source.encoder.num_hidden_layers)))
    target.output_weights.assign(source.output_weights)
    target.output_bias.assign(source.output_bias)


def _nudge(encoder):
    """Moves the word embeddings and the last layer's output kernel (every output differs)."""
    kernel = encoder.transformer_layers[-1].ffn_sublayer.output_dense.kernel
    kernel.assign(kernel + 0.1)
    embeddings = encoder.embeddings.word_embeddings
    embeddings.assign(embeddings * 1.5)


# ------------------------------------------------------------------- losses


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_soft_cross_entropy_with_temperature_against_numpy():
    rng = np.random.RandomState(3)
    student = rng.randn(5, 4).astype(np.float32) * 3
    teachers = [rng.randn(5, 4).astype(np.float32) * 3 for _ in range(3)]
    weights = np.array([1, 1, 0, 1, 1], np.float32)
    temperature = 2.5
    p = np.mean([_softmax(t / temperature) for t in teachers], axis=0)
    np.testing.assert_allclose(losses.teacher_soft_targets(teachers, temperature).numpy(), p,
                               rtol=1e-5)
    log_q = np.log(_softmax(student / temperature))
    cross_entropy = -(p * log_q).sum(-1)
    entropy = -(p * np.log(p)).sum(-1)
    expected = ((cross_entropy - entropy) * weights).sum() / weights.sum()
    loss, (total, count) = losses.soft_cross_entropy(student, p, temperature, weights)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)
    assert count.numpy() == 4.0
    # Its gradient is the soft cross-entropy's: (q - p) / T per row.
    x = tf.constant(student)
    with tf.GradientTape() as tape:
        tape.watch(x)
        value, _ = losses.soft_cross_entropy(x, p, temperature)
    q = _softmax(student / temperature)
    np.testing.assert_allclose(tape.gradient(value, x).numpy(), (q - p) / temperature / 5,
                               atol=1e-6)


def test_hidden_cosine_and_attention_losses_against_numpy_with_padding_masked():
    rng = np.random.RandomState(4)
    a, b = rng.randn(2, 3, 4).astype(np.float32), rng.randn(2, 3, 4).astype(np.float32)
    mask = np.array([[1, 1, 0], [1, 1, 1]], np.float32)
    real = mask.astype(bool)
    np.testing.assert_allclose(losses.hidden_mse(a, b, mask)[0].numpy(),
                               ((a - b) ** 2)[real].mean(), rtol=1e-5)
    cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    np.testing.assert_allclose(losses.cosine_embedding_loss(a, b, mask)[0].numpy(),
                               (1 - cos)[real].mean(), rtol=1e-5)
    s = _softmax(rng.randn(2, 2, 3, 3).astype(np.float32))
    t = _softmax(rng.randn(2, 2, 3, 3).astype(np.float32))
    per_query = ((s - t) ** 2).transpose(0, 2, 1, 3)  # [b, q, h, k]
    np.testing.assert_allclose(losses.attention_mse(s, t, mask)[0].numpy(),
                               per_query[real].mean(), rtol=1e-5)


def test_encoders_return_the_pre_softmax_scores_tinybert_matches():
    """`output_attention_scores`: q k^T / sqrt(d) of each layer's input through
    that layer's own query/key kernels, -10000 on padded keys; their softmax
    is the attention probabilities. ALBERT's shared layer too."""
    features = _features()
    encoder = _classifier(_config(initializer_range=0.5), "scores", 21).encoder
    out = encoder(features, training=False, output_attention_scores=True,
                  output_attention_probs=True)
    plain = encoder(features, training=False, output_attention_probs=True)
    mask = features["input_mask"].numpy()
    inputs = [out["embedding_output"]] + out["encoder_outputs"][:-1]
    for layer, (scores, x) in enumerate(zip(out["attention_scores"], inputs)):
        attention = encoder.transformer_layers[layer].attention_sublayer.attention
        q = attention.query(x).numpy().reshape(4, SEQ, 2, 16).transpose(0, 2, 1, 3)
        k = attention.key(x).numpy().reshape(4, SEQ, 2, 16).transpose(0, 2, 1, 3)
        expected = q @ k.transpose(0, 1, 3, 2) / 4.0 + (1 - mask[:, None, None, :]) * -10000.0
        np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(out["attention_probs"][layer].numpy(),
                                   plain["attention_probs"][layer].numpy(), atol=1e-6)
        np.testing.assert_allclose(_softmax(expected), plain["attention_probs"][layer].numpy(),
                                   atol=1e-5)
    np.testing.assert_allclose(out["sequence_output"].numpy(),
                               plain["sequence_output"].numpy(), atol=1e-6)
    albert = registry.families.get("albert")
    albert_encoder = albert.build_encoder(albert.config_class(
        vocab_size=VOCAB, embedding_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=16))
    a_out = albert_encoder(features, training=False, output_attention_scores=True,
                           output_attention_probs=True)
    assert len(a_out["attention_scores"]) == 2
    np.testing.assert_allclose(_softmax(a_out["attention_scores"][1].numpy()),
                               a_out["attention_probs"][1].numpy(), atol=1e-5)


def test_attention_score_loss_is_the_authors_masked_mse():
    rng = np.random.RandomState(5)
    mask = np.array([[1, 1, 0], [1, 1, 1]], np.float32)
    key_pad = (1 - mask[:, None, None, :]) * -10000.0
    s = rng.randn(2, 2, 3, 3).astype(np.float32) * 3 + key_pad
    t = rng.randn(2, 2, 3, 3).astype(np.float32) * 3 + key_pad
    # The authors: scores <= -100 (masked keys) become 0 on both sides.
    s0, t0 = np.where(s <= -1e2, 0, s), np.where(t <= -1e2, 0, t)
    per_query = ((s0 - t0) ** 2).transpose(0, 2, 1, 3)  # [b, q, h, k]
    got = losses.attention_score_mse(s, t, mask)[0].numpy()
    np.testing.assert_allclose(got, per_query[mask.astype(bool)].mean(), rtol=1e-5)
    assert got > 1.0  # scores, not probabilities: the -10000s add nothing


def test_tinybert_matches_scores_by_default_and_probabilities_on_request():
    features = _features()
    config = _config(initializer_range=0.5)
    teacher = _classifier(config, "teacher", 22)
    student = _classifier(config, "student", 23)
    s_out = student.encoder(features, output_attention_scores=True)
    t_out = teacher.encoder(features, output_attention_scores=True)
    mask = tf.cast(features["input_mask"], tf.float32)
    results = {}
    for attention in models.ATTENTION_TARGETS:
        model = models.TinyBertDistiller(student, teacher, [(0, 0), (1, 1)],
                                         stage="intermediate", attention=attention)
        _, metrics = model.compute_loss_and_metrics(features, training=False)
        total, count = metrics["attention_loss"]
        results[attention] = float(total) / float(count)
    expected = np.mean([float(losses.attention_score_mse(
        s_out["attention_scores"][i], t_out["attention_scores"][i], mask)[0]) for i in (0, 1)])
    np.testing.assert_allclose(results["scores"], expected, rtol=1e-4)
    assert results["probs"] < 1.0 < results["scores"]
    with pytest.raises(DistillationError, match="--tinybert_attention=logits: expected one of"):
        models.TinyBertDistiller(student, teacher, [(0, 0)], attention="logits")


def test_every_loss_is_zero_for_a_copied_student_and_positive_otherwise():
    features = _features()
    # Weights of std 0.5: peaked attention and large logits, so that moving a
    # weight moves every output clearly (std 0.02 gives near-uniform maps).
    config = _config(initializer_range=0.5)
    teacher = _classifier(config, "teacher", 1)
    student = _classifier(config, "student", 2)
    _copy_classifier(teacher, student)
    mtdnn = models.ClassifierDistiller(student, [teacher], temperature=2.0, alpha=1.0)
    tiny = models.TinyBertDistiller(student, teacher, [(0, 0), (1, 1)], stage="both")
    mlm_teacher, mlm_student = _mlm(config, "t", 3), _mlm(config, "s", 4)
    students.copy_layers(mlm_teacher.encoder, mlm_student.encoder, [0, 1])
    students._copy(mlm_teacher.get_objective("masked_lm").head,
                   mlm_student.get_objective("masked_lm").head, "head")
    distil = models.MaskedLMDistiller(mlm_student, mlm_teacher, temperature=2.0)

    def values():
        _, m = mtdnn.compute_loss_and_metrics(features, training=False)
        _, t = tiny.compute_loss_and_metrics(features, training=False)
        _, d = distil.compute_loss_and_metrics(features, training=False)
        pairs = {"mtdnn soft": m["soft_loss"], "tinybert soft": t["soft_loss"],
                 "embedding": t["embedding_loss"], "attention": t["attention_loss"],
                 "hidden": t["hidden_loss"], "distilbert soft": d["soft_loss"],
                 "cosine": d["cos_loss"]}
        return {k: float(s) / float(c) for k, (s, c) in pairs.items()}

    equal = values()
    for name in ("embedding", "attention", "hidden"):
        assert equal[name] == 0.0, (name, equal[name])
    for name in ("mtdnn soft", "tinybert soft", "distilbert soft", "cosine"):
        assert abs(equal[name]) < 1e-6, (name, equal[name])  # float32 log/softmax rounding
    _nudge(student.encoder)
    _nudge(mlm_student.encoder)
    moved = values()
    for name, value in moved.items():
        assert value > 1e-5, (name, value)  # well above the rounding of the equal case


# ----------------------------------------------------------------- students


def test_every_other_layer_initialisation_copies_exactly_teacher_layers_0_2():
    teacher_config = _config(layers=4)
    student_config = students.half_depth_config(teacher_config)
    assert (student_config.num_hidden_layers, student_config.hidden_size) == (2, 32)
    assert students.every_other_layer(5) == [0, 2, 4]
    teacher = _mlm(teacher_config, "teacher", 5).encoder
    student = _mlm(student_config, "student", 6).encoder
    assert students.copy_every_other_layer(teacher, student) == [0, 2]

    def same(a, b):
        return all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.weights, b.weights))

    assert same(student.embeddings, teacher.embeddings) and same(student.pooler, teacher.pooler)
    for s, t in ((0, 0), (1, 2)):
        assert same(student.transformer_layers[s], teacher.transformer_layers[t])
        assert not same(student.transformer_layers[s], teacher.transformer_layers[t + 1])
    narrow = _mlm(_config(hidden=16, layers=2), "narrow", 7).encoder
    with pytest.raises(DistillationError, match="must have the teacher's width"):
        students.copy_every_other_layer(teacher, narrow)


def test_tinybert_layer_maps_uniform_and_explicit():
    assert students.uniform_layer_map(2, 6) == [(0, 2), (1, 5)]
    assert students.uniform_layer_map(4, 12) == [(0, 2), (1, 5), (2, 8), (3, 11)]
    assert students.uniform_layer_map(3, 4) == [(0, 0), (1, 1), (2, 3)]
    assert students.parse_layer_map(None, 2, 4) == [(0, 1), (1, 3)]
    assert students.parse_layer_map(" 1:3, 0:0 ", 2, 4) == [(0, 0), (1, 3)]
    for spec, message in (("0:4", "teacher layer 4 out of range"),
                          ("2:1", "student layer 2 out of range"),
                          ("0:1,0:2", "mapped twice"), ("0-1", "not student:teacher")):
        with pytest.raises(DistillationError, match="--layer_map=%s: .*%s" % (spec, message)):
            students.parse_layer_map(spec, 2, 4)


def test_tinybert_projection_for_a_narrower_student_and_the_head_check():
    features = _features()
    teacher = _classifier(_config(hidden=32, layers=4), "teacher", 8)
    student = _classifier(_config(hidden=16, layers=2), "student", 9)
    model = models.TinyBertDistiller(student, teacher,
                                     students.parse_layer_map("", 2, 4), stage="intermediate")
    assert tuple(model.projection.kernel.shape) == (16, 32)
    assert model.layer_map == [(0, 1), (1, 3)]
    with tf.GradientTape() as tape:
        loss, metrics = model.compute_loss_and_metrics(features, training=True)
    assert "soft_loss" not in metrics and float(loss) > 0
    grads = tape.gradient(loss, model.trainable_variables)
    by_path = {v.path: g for v, g in zip(model.trainable_variables, grads)}
    assert float(tf.norm(by_path[model.projection.kernel.path])) > 0
    # Equal widths: no projection, states compared directly.
    same_width = _classifier(_config(hidden=32, layers=2), "same", 10)
    assert models.TinyBertDistiller(same_width, teacher, [(0, 1)]).projection is None
    three_heads = _classifier(_config(hidden=24, layers=2, heads=3), "heads", 11)
    with pytest.raises(DistillationError, match="student has 3 attention heads, the teacher 2"):
        models.TinyBertDistiller(three_heads, teacher, [(0, 1)])


def test_the_student_head_equals_the_classifiers_own_logits():
    classifier = _classifier(_config(), "c", 12)
    features = _features()
    pooled = classifier.encoder(features, training=False)["pooled_output"]
    np.testing.assert_allclose(models.classifier_logits(classifier, pooled, False).numpy(),
                               classifier(features, training=False)["logits"].numpy(), atol=1e-6)


def _step(model, features):
    optimizer = keras.optimizers.Adam(1e-2)
    with tf.GradientTape() as tape:
        loss, _ = model.compute_loss_and_metrics(features, training=True)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))


def _unchanged_teachers_changed_student(model, teachers, student, features):
    teacher_ids = {id(v) for t in teachers for v in t.weights}
    assert not teacher_ids & {id(v) for v in model.trainable_variables}
    before = [[v.numpy().copy() for v in t.weights] for t in teachers]
    student_before = [v.numpy().copy() for v in student.trainable_variables]
    _step(model, features)
    for t, saved in zip(teachers, before):
        assert all(np.array_equal(v.numpy(), s) for v, s in zip(t.weights, saved))
    changed = [not np.array_equal(v.numpy(), s)
               for v, s in zip(student.trainable_variables, student_before)]
    assert sum(changed) > len(changed) // 2


def test_a_training_step_changes_the_student_never_the_teachers(tmp_path):
    features = _features()
    config = _config()
    teachers = [_classifier(config, "teacher_%d" % i, 20 + i) for i in range(2)]
    student = _classifier(_config(hidden=16, layers=1), "student", 22)
    model = models.ClassifierDistiller(student, teachers, temperature=2.0, alpha=0.7)
    _unchanged_teachers_changed_student(model, teachers, student, features)
    tiny = models.TinyBertDistiller(student, teachers[0], [(0, 1)], stage="both")
    _unchanged_teachers_changed_student(tiny, [teachers[0]], student, features)
    mlm_teacher = _mlm(_config(layers=2), "t", 24)
    mlm_student = _mlm(_config(layers=1), "s", 25)
    distil = models.MaskedLMDistiller(mlm_student, mlm_teacher)
    _unchanged_teachers_changed_student(distil, [mlm_teacher], mlm_student, features)
    # The student export (Google TF1 names + output_weights) loads back as a teacher.
    prefix = distillation_job.save_student(student, str(tmp_path), _config(hidden=16, layers=1))
    again = _classifier(_config(hidden=16, layers=1), "again", 23)
    assert distillation_job.load_classifier(again, prefix)
    np.testing.assert_array_equal(again(features, training=False)["logits"].numpy(),
                                  student(features, training=False)["logits"].numpy())
