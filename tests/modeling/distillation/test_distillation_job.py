"""modeling/distillation/job.py: run_distillation.py's run, in process.

The learning test (budget fixed before the first run, not tuned after it):
a generated sentiment-word task. Each sentence is 6 words: one sentiment
word out of 24 (12 positive, 12 negative; the label) among 5 neutral words
out of 20. The teacher (hidden 32, 2 layers) is fine-tuned by
`run_classifier`'s job on 480 labelled sentences for 10 epochs (150 steps,
batch 32, lr 2e-3). The student (hidden 16, 1 layer) gets only 16 labelled
sentences, so most sentiment words never appear with a label; the distilled
student also gets 480 unlabeled transfer sentences that the teacher labels
(T = 2, alpha = 0.9). Both students train for the same 150 steps (batch 32,
lr 2e-3, seed 7) and are evaluated on 200 held-out sentences: the distilled
one must be at least 15 points more accurate, and above 85%.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data import processors
from modeling import checkpoints
from modeling import registry
from modeling.bert import BertConfig
from modeling.distillation import job as distillation_job
from modeling.distillation.students import DistillationError
from modeling.objectives.base import BertPretrainer
from modeling.tasks import classifier_job

POSITIVE = ["good%d" % i for i in range(12)]
NEGATIVE = ["bad%d" % i for i in range(12)]
NEUTRAL = ["word%d" % i for i in range(20)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + POSITIVE + NEGATIVE + NEUTRAL
SEQ = 10
STEPS = 150


def _sentences(rng, n):
    rows = []
    for _ in range(n):
        label = int(rng.randint(2))
        words = list(rng.choice(NEUTRAL, 5))
        words.insert(int(rng.randint(6)), str(rng.choice(POSITIVE if label else NEGATIVE)))
        rows.append((" ".join(words), str(label)))
    return rows


def _write_tsv(path, rows):
    with open(path, "w") as f:
        f.write("sentence\tlabel\n")
        for text, label in rows:
            f.write("%s\t%s\n" % (text, label))


def _config(hidden, layers):
    return BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=2, intermediate_size=2 * hidden,
                      max_position_embeddings=16, type_vocab_size=2)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """The data, the configs and a teacher fine-tuned by run_classifier's job."""
    root = tmp_path_factory.mktemp("distill")
    rng = np.random.RandomState(0)
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    _write_tsv(root / "teacher_train.tsv", _sentences(rng, 480))
    _write_tsv(root / "few.tsv", _sentences(rng, 16))
    _write_tsv(root / "dev.tsv", _sentences(rng, 200))
    (root / "transfer.txt").write_text(
        "".join(text + "\n" for text, _ in _sentences(rng, 480)))
    _config(32, 2).to_json_file(str(root / "teacher_config.json"))
    _config(16, 1).to_json_file(str(root / "student_config.json"))
    teacher = classifier_job.run(classifier_job.ClassifierJob(
        task_name="generic", data_dir=str(root), train_file="teacher_train.tsv",
        dev_file="dev.tsv", labels=["0", "1"], vocab_file=str(root / "vocab.txt"),
        bert_config_file=str(root / "teacher_config.json"), output_dir=str(root / "teacher"),
        max_seq_length=SEQ, do_train=True, do_eval=True, train_batch_size=32,
        eval_batch_size=40, learning_rate=2e-3, num_train_epochs=10.0, log_steps=1000,
        steps_per_loop=50, seed=7))
    return root, teacher.eval_results["eval_accuracy"]


def _job(root, **overrides):
    values = dict(
        task_name="generic", data_dir=str(root), train_file="few.tsv", dev_file="dev.tsv",
        labels=["0", "1"], vocab_file=str(root / "vocab.txt"),
        teacher_config_file=str(root / "teacher_config.json"),
        teacher_checkpoints=[str(root / "teacher")],
        student_config_file=str(root / "student_config.json"), max_seq_length=SEQ,
        do_train=True, do_eval=True, train_batch_size=32, eval_batch_size=40,
        learning_rate=2e-3, num_train_steps=STEPS, log_steps=1000, steps_per_loop=50,
        latency_runs=2, seed=7)
    values.update(overrides)
    return distillation_job.DistillationJob(**values)


def test_registered_as_the_distillation_task():
    task_ = registry.tasks.get("distillation")
    assert task_.job_class is distillation_job.DistillationJob
    assert task_.run is distillation_job.run


@pytest.fixture(scope="module")
def baseline(task):
    """The student trained on the 16 labels alone, no teacher (alpha 0), STEPS steps."""
    root, _ = task
    return distillation_job.run(_job(
        root, teacher_checkpoints=None, alpha=0.0, output_dir=str(root / "baseline")))


def test_distilled_student_beats_the_same_student_without_teacher(task, baseline):
    root, teacher_accuracy = task
    assert teacher_accuracy > 0.95  # the teacher has learned the task
    distilled = distillation_job.run(_job(
        root, transfer_file=str(root / "transfer.txt"), temperature=2.0, alpha=0.9,
        output_dir=str(root / "distilled")))
    d = distilled.eval_results["eval_accuracy"]
    b = baseline.eval_results["eval_accuracy"]
    assert distilled.eval_results["global_step"] == baseline.eval_results["global_step"] == STEPS
    assert d >= b + 0.15 and d > 0.85, (d, b)
    # The table: the teacher's row is the fine-tuned teacher (its head loaded
    # from run_classifier's checkpoint: same dev accuracy), the student's the eval's.
    rows = {row["model"]: row for row in distilled.table}
    assert set(rows) == {"teacher", "student"}
    assert rows["teacher"]["accuracy"] == pytest.approx(teacher_accuracy)
    assert rows["student"]["accuracy"] == pytest.approx(d)
    assert rows["student"]["parameters"] < rows["teacher"]["parameters"]
    assert rows["teacher"]["examples"] == 200
    saved = json.loads((root / "distilled" / distillation_job.RESULTS_FILE).read_text())
    assert saved["rows"] == distilled.table and saved["style"] == "mtdnn"
    assert os.path.exists(root / "distilled" / "student" / "bert_model.ckpt.index")


def test_tinybert_student_beats_the_same_student_without_teacher(task, baseline):
    """TinyBERT style (layer-wise + prediction-layer losses, stage "both", T = 1,
    uniform layer map) on the same task, student, data and step budget as the
    MT-DNN-style test above, fixed before the first run: at least 15 points
    above the no-teacher student on the 200 held-out sentences, and above 85%."""
    root, _ = task
    distilled = distillation_job.run(_job(
        root, style="tinybert", stage="both", transfer_file=str(root / "transfer.txt"),
        output_dir=str(root / "tinybert")))
    d = distilled.eval_results["eval_accuracy"]
    b = baseline.eval_results["eval_accuracy"]
    assert distilled.eval_results["global_step"] == STEPS
    assert {"eval_attention_loss", "eval_hidden_loss", "eval_soft_loss"} <= set(
        distilled.eval_results)
    assert d >= b + 0.15 and d > 0.85, (d, b)


def test_tinybert_stages_and_an_ensemble(task):
    root, _ = task
    # Layer-wise stage with a narrower student (projection 16 -> 32).
    first = distillation_job.run(_job(
        root, style="tinybert", stage="intermediate", layer_map="0:1", num_train_steps=3,
        transfer_file=str(root / "transfer.txt"), output_dir=str(root / "tiny1")))
    assert {"eval_embedding_loss", "eval_attention_loss", "eval_hidden_loss"} <= set(
        first.eval_results)
    assert "eval_soft_loss" not in first.eval_results
    # Prediction stage from the first stage's student export.
    second = distillation_job.run(_job(
        root, style="tinybert", stage="prediction", num_train_steps=3,
        student_init_checkpoint=str(root / "tiny1" / "student"),
        output_dir=str(root / "tiny2"), do_train=False))
    # Without training the second run's student is the first's exactly.
    assert second.table[-1]["accuracy"] == pytest.approx(first.table[-1]["accuracy"])
    with pytest.raises(DistillationError, match="--layer_map=0:2: teacher layer 2 out of range"):
        distillation_job.run(_job(root, style="tinybert", layer_map="0:2",
                                  output_dir=str(root / "bad")))
    with pytest.raises(DistillationError, match="tinybert distils one teacher"):
        distillation_job.run(_job(root, style="tinybert",
                                  teacher_checkpoints=[str(root / "teacher")] * 2,
                                  output_dir=str(root / "bad")))


def _write_mlm_records(path, rng, n, text=None):
    """`n` masked-LM records of SEQ tokens, two masked; `text(rng)`: the SEQ - 2 ids
    between [CLS] and [SEP] (default uniform random ids)."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(n):
            body = list(rng.randint(5, len(VOCAB), SEQ - 2)) if text is None else text(rng)
            ids = [2] + body + [3]
            positions = sorted(rng.choice(range(1, SEQ - 1), 2, replace=False))
            labels = [ids[p] for p in positions]
            for p in positions:
                ids[p] = 4
            feature = {
                "input_ids": ids, "input_mask": [1] * SEQ, "segment_ids": [0] * SEQ,
                "masked_lm_positions": positions, "masked_lm_ids": labels,
                "next_sentence_labels": [0]}
            example = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
                       for k, v in feature.items()}
            example["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0, 1.0]))
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=example)).SerializeToString())


def test_distilbert_student_from_every_other_teacher_layer(tmp_path):
    rng = np.random.RandomState(1)
    _write_mlm_records(tmp_path / "train.tfrecord", rng, 64)
    _write_mlm_records(tmp_path / "dev.tfrecord", rng, 16)
    config = _config(32, 4)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    family = registry.families.get("bert")
    teacher = BertPretrainer(family.build_encoder(config),
                             [registry.objectives.get("masked_lm")(config, family)])
    checkpoints.save_google_checkpoint(teacher, str(tmp_path / "teacher" / "bert_model.ckpt"))
    common = dict(style="distilbert", teacher_config_file=str(tmp_path / "bert_config.json"),
                  teacher_checkpoints=str(tmp_path / "teacher"),
                  input_file=str(tmp_path / "train.tfrecord"),
                  eval_input_file=str(tmp_path / "dev.tfrecord"), max_seq_length=SEQ,
                  max_predictions_per_seq=2, eval_batch_size=8, train_batch_size=16,
                  temperature=2.0, latency_runs=2, seed=3, log_steps=1000)
    # Evaluation only: the student is the initialisation, teacher layers 0 and 2.
    result = distillation_job.run(distillation_job.DistillationJob(
        do_eval=True, output_dir=str(tmp_path / "init"), **common))
    student_dir = tmp_path / "init" / "student"
    saved = json.loads((student_dir / "bert_config.json").read_text())
    assert (saved["num_hidden_layers"], saved["hidden_size"]) == (2, 32)
    reader = tf.train.load_checkpoint(str(student_dir / "bert_model.ckpt"))
    teacher_reader = tf.train.load_checkpoint(str(tmp_path / "teacher" / "bert_model.ckpt"))
    for s, t in ((0, 0), (1, 2)):
        name = "bert/encoder/layer_%d/attention/self/query/kernel"
        np.testing.assert_array_equal(reader.get_tensor(name % s),
                                      teacher_reader.get_tensor(name % t))
    for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
        np.testing.assert_array_equal(reader.get_tensor(name), teacher_reader.get_tensor(name))
    rows = {row["model"]: row for row in result.table}
    assert rows["teacher"]["examples"] == rows["student"]["examples"] == 32
    assert rows["student"]["parameters"] < rows["teacher"]["parameters"]
    # The dev loss has every term (training steps: tests/modeling/distillation/test_distillation.py).
    assert {"eval_soft_loss", "eval_cos_loss", "eval_masked_lm_loss",
            "eval_masked_lm_accuracy", "eval_teacher_masked_lm_accuracy"} <= set(
                result.eval_results)
    assert result.eval_results["eval_teacher_masked_lm_accuracy"] == pytest.approx(
        rows["teacher"]["accuracy"])


def test_bad_settings_are_one_line_errors(task, tmp_path):
    root, _ = task
    with pytest.raises(DistillationError, match="--style=nope: expected one of"):
        distillation_job.run(_job(root, style="nope", output_dir=str(tmp_path)))
    with pytest.raises(DistillationError, match="--model_family=gpt2: distillation needs"):
        distillation_job.run(_job(root, model_family="gpt2", output_dir=str(tmp_path)))
    with pytest.raises(DistillationError, match="only --alpha=0 .* makes sense"):
        distillation_job.run(_job(root, teacher_checkpoints=None, output_dir=str(tmp_path)))
    with pytest.raises(DistillationError, match="--teacher_config_file=.*nope.json: no such"):
        distillation_job.run(_job(root, teacher_config_file=str(root / "nope.json"),
                                  output_dir=str(tmp_path)))
    (tmp_path / "bad_transfer.txt").write_text("one\ttwo\tthree\n")
    with pytest.raises(DistillationError, match=r"bad_transfer.txt:1: expected text_a"):
        distillation_job.run(_job(root, transfer_file=str(tmp_path / "bad_transfer.txt"),
                                  output_dir=str(tmp_path / "o")))
    # A pre-trained encoder without a classifier head is no teacher.
    encoder_only = tmp_path / "encoder" / "bert_model.ckpt"
    family = registry.families.get("bert")
    checkpoints.save_google_checkpoint(family.build_encoder(_config(32, 2)), str(encoder_only))
    with pytest.raises(DistillationError, match="no classifier head"):
        distillation_job.run(_job(root, teacher_checkpoints=[str(encoder_only.parent)],
                                  output_dir=str(tmp_path / "p")))


def test_tinybert_general_distillation_on_unlabelled_text_then_the_task(task, tmp_path):
    """TinyBERT's first stage: a random student learns a pre-trained teacher's
    embeddings, attention scores and hidden states on masked-LM records (no
    labels); the held-out layer-wise loss falls, and its export starts the
    task stage."""
    root, _ = task
    rng = np.random.RandomState(2)
    _write_mlm_records(tmp_path / "train.tfrecord", rng, 256)
    _write_mlm_records(tmp_path / "dev.tfrecord", rng, 32)
    config = _config(32, 2)
    family = registry.families.get("bert")
    teacher = BertPretrainer(family.build_encoder(config),
                             [registry.objectives.get("masked_lm")(config, family)])
    checkpoints.save_google_checkpoint(teacher, str(tmp_path / "teacher" / "bert_model.ckpt"))
    common = dict(style="tinybert", stage="general",
                  teacher_config_file=str(root / "teacher_config.json"),
                  teacher_checkpoints=str(tmp_path / "teacher"),
                  student_config_file=str(root / "student_config.json"), layer_map="0:1",
                  input_file=str(tmp_path / "train.tfrecord"),
                  eval_input_file=str(tmp_path / "dev.tfrecord"), max_seq_length=SEQ,
                  max_predictions_per_seq=2, eval_batch_size=8, train_batch_size=16,
                  learning_rate=5e-3, latency_runs=2, seed=3, log_steps=1000)
    untrained = distillation_job.run(distillation_job.DistillationJob(
        do_eval=True, output_dir=str(tmp_path / "untrained"), **common))
    trained = distillation_job.run(distillation_job.DistillationJob(
        do_train=True, do_eval=True, num_train_steps=60, output_dir=str(tmp_path / "general"),
        **common))
    assert "eval_soft_loss" not in trained.eval_results
    for name in ("eval_embedding_loss", "eval_attention_loss", "eval_hidden_loss"):
        assert trained.eval_results[name] < 0.7 * untrained.eval_results[name], name
    assert all(row["accuracy"] is None for row in trained.table)
    saved = json.loads((tmp_path / "general" / distillation_job.RESULTS_FILE).read_text())
    assert saved["metric"] is None and saved["style"] == "tinybert"
    # Task distillation starts from the general student's encoder.
    task_run = distillation_job.run(_job(
        root, style="tinybert", stage="intermediate", layer_map="0:1", do_train=False,
        student_init_checkpoint=str(tmp_path / "general" / "student"),
        output_dir=str(tmp_path / "task")))
    general = tf.train.load_checkpoint(str(tmp_path / "general" / "student" / "bert_model.ckpt"))
    task_student = tf.train.load_checkpoint(
        str(tmp_path / "task" / "student" / "bert_model.ckpt"))
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    np.testing.assert_array_equal(task_student.get_tensor(name), general.get_tensor(name))
    assert task_run.eval_results["eval_hidden_loss"] > 0


def _successor(token):
    """The generated masked-LM task's rule: each content token is its left
    neighbour's successor (44 content ids, step 7)."""
    first = 5
    return first + (token - first + 7) % (len(VOCAB) - first)


def _successor_chain(rng):
    chain = [int(rng.randint(5, len(VOCAB)))]
    while len(chain) < SEQ - 2:
        chain.append(_successor(chain[-1]))
    return chain


def test_distilbert_student_beats_the_same_student_without_teacher(tmp_path):
    """DistilBERT style on a generated masked-LM task (each token the successor of
    the one before; two of eight masked), budgets fixed before the first run: a
    4-layer width-32 teacher pre-trained for 400 steps (batch 32, lr 3e-3), then
    for 100 steps each (batch 16, lr 2e-3, seed 3) the half-depth student
    initialised from teacher layers 0 and 2 with DistilBERT's losses, and the
    same student from random weights on the masked-LM loss alone. On 64
    held-out sequences the distilled student's masked-LM accuracy must be at
    least 0.2 above the other's. (First run: teacher 0.82, distilled 0.84; the
    student without a teacher stays at the uniform loss, ln 44, accuracy 0.)"""
    rng = np.random.RandomState(4)
    _write_mlm_records(tmp_path / "train.tfrecord", rng, 2048, _successor_chain)
    _write_mlm_records(tmp_path / "dev.tfrecord", rng, 64, _successor_chain)
    config = _config(32, 4)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    family = registry.families.get("bert")
    tf.keras.utils.set_random_seed(5)
    teacher = BertPretrainer(family.build_encoder(config),
                             [registry.objectives.get("masked_lm")(config, family)])
    from data import input_pipeline  # pylint: disable=g-import-not-at-top
    batches = input_pipeline.pretraining_input_fn_builder(
        [str(tmp_path / "train.tfrecord")], SEQ, 2, True, 32, seed=5)()
    optimizer = tf.keras.optimizers.Adam(3e-3)

    @tf.function
    def step(features):
        with tf.GradientTape() as tape:
            loss, _ = teacher.compute_loss_and_metrics(features, training=True)
        grads = tape.gradient(loss, teacher.trainable_variables)
        optimizer.apply_gradients(zip(grads, teacher.trainable_variables))
        return loss

    for features, _ in zip(batches, range(400)):
        step(features)
    checkpoints.save_google_checkpoint(teacher, str(tmp_path / "teacher" / "bert_model.ckpt"))
    # The baseline student: half depth, random weights, exported as a start point.
    student_config = config.replace(num_hidden_layers=2)
    student_config.to_json_file(str(tmp_path / "student_config.json"))
    random_student = BertPretrainer(family.build_encoder(student_config),
                                    [registry.objectives.get("masked_lm")(student_config,
                                                                          family)])
    checkpoints.save_google_checkpoint(random_student,
                                       str(tmp_path / "random" / "bert_model.ckpt"))
    common = dict(style="distilbert", teacher_config_file=str(tmp_path / "bert_config.json"),
                  teacher_checkpoints=str(tmp_path / "teacher"),
                  student_config_file=str(tmp_path / "student_config.json"),
                  input_file=str(tmp_path / "train.tfrecord"),
                  eval_input_file=str(tmp_path / "dev.tfrecord"), max_seq_length=SEQ,
                  max_predictions_per_seq=2, eval_batch_size=16, train_batch_size=16,
                  learning_rate=2e-3, num_train_steps=100, temperature=2.0, latency_runs=2,
                  seed=3, log_steps=1000, do_train=True, do_eval=True)
    distilled = distillation_job.run(distillation_job.DistillationJob(
        output_dir=str(tmp_path / "distilled"), **common))
    alone = distillation_job.run(distillation_job.DistillationJob(
        output_dir=str(tmp_path / "alone"), student_init_checkpoint=str(tmp_path / "random"),
        soft_loss_weight=0.0, cos_loss_weight=0.0, mlm_loss_weight=1.0, **common))
    d = distilled.eval_results["eval_masked_lm_accuracy"]
    b = alone.eval_results["eval_masked_lm_accuracy"]
    teacher_accuracy = distilled.eval_results["eval_teacher_masked_lm_accuracy"]
    print("distilbert: teacher %.3f, distilled %.3f, alone %.3f" % (teacher_accuracy, d, b))
    assert teacher_accuracy > 0.5  # the teacher has learned the rule
    assert d >= b + 0.2, (d, b, teacher_accuracy)
