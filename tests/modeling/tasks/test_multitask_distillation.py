"""Multi-task knowledge distillation (Liu et al. 2019, "Improving Multi-Task Deep Neural
Networks via Knowledge Distillation for Natural Language Understanding"): an ensemble of
multi-task teachers gives each classification task soft targets (the average of the
teachers' class probabilities), and one multi-task student learns every task from them
and its labels.

Unit tests: the student's loss against a NumPy reference of (1 - w) CE(labels) + w
CE(soft targets), for dense and SAN heads, and rows without soft targets left to their
labels; the soft targets written by the job equal the average of the teachers' own
probabilities on each training record. A learning test whose data, budget and threshold
are fixed in its docstring: teachers that learnt the opposite of the labels make a
student with w = 1 follow them on held-out sentences, while w = 0 learns the labels.
The refusals are one-line errors that write nothing.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import test_multitask as multitask_tests
import test_multitask_san as san_tests
from data import multitask as data_lib
from modeling.checkpoints import object_based
from modeling.tasks import multitask as model_lib
from modeling.tasks import multitask_job

bert_files = san_tests.bert_files
_task_list = multitask_tests._task_list
_job = san_tests._job
SINGLE_ENTRY = san_tests.SINGLE_ENTRY


# ------------------------------------------------------------------ the loss


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _with_soft(batch, soft, weight, width=3):
    soft = np.pad(soft, [[0, 0], [0, width - soft.shape[1]]]).astype(np.float32)
    return dict(batch, **{data_lib.SOFT_TARGETS: soft,
                          data_lib.SOFT_TARGET_WEIGHT: np.asarray(weight, np.float32)})


@pytest.mark.parametrize("task_id", [0, 1], ids=["san", "dense"])
def test_the_loss_is_the_labels_and_soft_targets_cross_entropies_mixed(task_id):
    """Task `task_id` of san_tests.TASKS (a SAN over 3 labels, a dense head over 2): with
    soft targets on 4 of 5 rows (one row's weight 0) and w = 0.3, the task loss is
    0.7 * mean over the 5 rows of -log p(label) + 0.3 * mean over the 4 rows of
    -sum_k q_k log p_k, p the model's own probabilities; ``soft_target_loss`` reports the
    second mean; w = 0 or a batch without soft targets gives the label loss alone."""
    tf.random.set_seed(3)
    rng = np.random.RandomState(11)
    num_labels = san_tests.TASKS[task_id]["num_labels"]
    model = model_lib.MultiTaskModel.from_config_object(san_tests._config(), san_tests.TASKS,
                                                        soft_target_weight=0.3)
    assert model.get_config()["soft_target_weight"] == 0.3
    batch = san_tests._pair_batch(rng, 5, task_id=task_id)
    batch["label_ids"] %= num_labels
    soft = rng.dirichlet(np.ones(num_labels), size=5)
    weight = [1, 1, 0, 1, 1]
    fed = _with_soft(batch, soft, weight)

    name = san_tests.TASKS[task_id]["name"]
    outputs = model(fed, training=False)
    log_p = np.log(outputs[name + "/probabilities"].numpy().astype(np.float64))
    if task_id == 1:  # the dense head's probabilities are the softmax of its logits
        np.testing.assert_allclose(log_p, _log_softmax(
            outputs[name + "/logits"].numpy().astype(np.float64)), atol=1e-5)
    hard = -log_p[np.arange(5), batch["label_ids"]].mean()
    kept = np.asarray(weight, bool)
    soft_ce = -(soft * log_p).sum(axis=1)[kept].mean()

    loss, metrics = model.compute_loss_and_metrics(fed, training=False)
    assert float(loss) == pytest.approx(0.7 * hard + 0.3 * soft_ce, rel=1e-5)
    total, count = (float(v) for v in metrics[name + "/soft_target_loss"])
    assert count == 4 and total / count == pytest.approx(soft_ce, rel=1e-5)
    assert float(metrics[name + "/loss"][0]) == pytest.approx(5 * hard, rel=1e-5)

    plain, plain_metrics = model.compute_loss_and_metrics(batch, training=False)
    assert float(plain) == pytest.approx(hard, rel=1e-5)
    assert name + "/soft_target_loss" not in plain_metrics
    model.soft_target_weight = 0.0
    assert float(model.compute_loss_and_metrics(fed, training=False)[0]) == pytest.approx(
        hard, rel=1e-5)
    # No row of the batch with soft targets: the label loss, not a division by zero.
    model.soft_target_weight = 0.3
    none = _with_soft(batch, soft, [0] * 5)
    assert float(model.compute_loss_and_metrics(none, training=False)[0]) == pytest.approx(
        hard, rel=1e-5)


def test_a_weight_outside_0_1_is_refused():
    with pytest.raises(ValueError, match=r"soft_target_weight must be in \[0, 1\], got 1.5"):
        model_lib.MultiTaskModel.from_config_object(san_tests._config(), san_tests.TASKS,
                                                    soft_target_weight=1.5)


# ------------------------------------------------------------------- the job


def _flipped(source, target):
    """`source`'s jsonl files with every label flipped (0 <-> 1)."""
    import json  # pylint: disable=g-import-not-at-top
    os.makedirs(target, exist_ok=True)
    for name in ("train.jsonl", "dev.jsonl"):
        with open(os.path.join(source, name)) as f, \
                open(os.path.join(target, name), "w") as out:
            for line in f:
                row = json.loads(line)
                row["label"] = str(1 - int(row["label"]))
                out.write(json.dumps(row) + "\n")


def _dev_labels(directory):
    import json  # pylint: disable=g-import-not-at-top
    with open(os.path.join(directory, "dev.jsonl")) as f:
        return [int(json.loads(line)["label"]) for line in f]


STEPS = 150  # every run of the learning test, fixed before its first run


@pytest.fixture(scope="module")
def teachers(tmp_path_factory, bert_files):
    """Two teachers (seeds 1 and 2, STEPS updates each) trained on the 'colour' task with
    flipped labels (1 iff NO colour is named): 128 training and 48 dev sentences."""
    root = tmp_path_factory.mktemp("mtkd")
    san_tests._write_sentences(str(root / "colour"), 128, 48, seed=40)
    _flipped(str(root / "colour"), str(root / "teacher_data" / "colour"))
    teacher_list = _task_list(root / "teacher_data", [SINGLE_ENTRY])
    dirs = []
    for seed in (1, 2):
        out = root / ("teacher%d" % seed)
        result = multitask_job.run(_job(bert_files, teacher_list, out, do_train=True,
                                        do_eval=True, num_train_steps=STEPS, seed=seed))
        # Teachers learnt the flipped task (their own dev set, flipped too).
        assert result.eval_results["colour/eval_accuracy"] >= 0.9, result.eval_results
        dirs.append(str(out))
    student_list = _task_list(root, [SINGLE_ENTRY])
    return root, student_list, dirs


def _teacher_probabilities(bert_files, teacher_dir, train_file):
    """A teacher's own probabilities on `train_file` (a plain restore of its model)."""
    model = model_lib.MultiTaskModel.from_config_object(
        san_tests._bert_config(bert_files),
        [{"name": "colour", "head": "classification", "num_labels": 2}])
    spec = multitask_job_spec()
    rows = []
    for record in tf.data.TFRecordDataset(train_file).batch(16):
        features = tf.io.parse_example(record, spec)
        features = {k: tf.cast(v, tf.int32) for k, v in features.items()}
        features["task_id"] = tf.zeros_like(features["label_ids"])
        if not rows:  # once the model is built: every weight by its Keras path
            model(features, training=False)
            prefix = tf.train.latest_checkpoint(teacher_dir)
            reader = tf.train.load_checkpoint(prefix)
            keys = object_based.model_variable_keys(reader, prefix)
            for variable in model.weights:
                if "seed_generator" not in variable.path:
                    variable.assign(reader.get_tensor(keys[variable.path]))
        rows.append(model(features, training=False)["colour/probabilities"].numpy())
    return np.concatenate(rows)


def multitask_job_spec():
    seq = san_tests.SEQ
    return {"input_ids": tf.io.FixedLenFeature([seq], tf.int64),
            "input_mask": tf.io.FixedLenFeature([seq], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([seq], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}


def test_students_follow_the_teachers_soft_targets_on_held_out_sentences(teachers, bert_files):
    """Budget fixed in advance: a 1-layer BERT (hidden 32) from random weights, STEPS
    updates of batches of 16 at lr 1e-3 per run. Teachers: `teachers` (flipped labels).
    Students on the true labels, dev = 48 other sentences with true labels: with w = 1 (soft
    targets only) the student follows the teachers, dev accuracy <= 0.2; with w = 0 it
    learns the labels, dev accuracy >= 0.8. The soft targets written for the student are
    the average of the two teachers' own probabilities on each training record (1e-5), and
    they agree with the flipped labels."""
    root, student_list, dirs = teachers
    follower = multitask_job.run(_job(bert_files, student_list, root / "student_w1",
                                      do_train=True, do_eval=True, num_train_steps=STEPS,
                                      teacher_dirs=",".join(dirs), soft_target_weight=1.0))
    task = follower.tasks[0]
    assert task.teachers == tuple(dirs)
    soft_file = str(root / "student_w1" / "colour" / "train_soft.tf_record")
    assert task.train_file == soft_file
    plain_file = str(root / "student_w1" / "colour" / "train.tf_record")
    spec = dict(multitask_job_spec(), **{
        data_lib.SOFT_TARGETS: tf.io.FixedLenFeature([2], tf.float32)})
    written = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(soft_file)]
    soft = np.stack([w[data_lib.SOFT_TARGETS].numpy() for w in written])
    labels = np.asarray([int(w["label_ids"]) for w in written])
    assert len(soft) == 128
    expected = np.mean([_teacher_probabilities(bert_files, d, plain_file) for d in dirs], axis=0)
    np.testing.assert_allclose(soft, expected, atol=1e-5)
    assert np.mean(soft.argmax(axis=1) != labels) >= 0.9  # the teachers say the opposite
    # The copies keep every other feature of the records as they were.
    plain = [tf.io.parse_single_example(r, multitask_job_spec())
             for r in tf.data.TFRecordDataset(plain_file)]
    for a, b in zip(plain, written):
        for key in multitask_job_spec():
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())

    learner = multitask_job.run(_job(bert_files, student_list, root / "student_w0",
                                     do_train=True, do_eval=True, num_train_steps=STEPS,
                                     teacher_dirs=",".join(dirs), soft_target_weight=0.0))
    assert _dev_labels(str(root / "colour")).count(1) not in (0, 48)
    assert follower.eval_results["colour/eval_accuracy"] <= 0.2, follower.eval_results
    assert learner.eval_results["colour/eval_accuracy"] >= 0.8, learner.eval_results


def _refusal(bert_files, root, output, **kwargs):
    before = sorted(os.listdir(root))
    with pytest.raises(multitask_job.MultitaskJobError) as info:
        multitask_job.run(_job(bert_files, _task_list(root, [SINGLE_ENTRY]), output, **kwargs))
    message = str(info.value)
    assert "\n" not in message, message
    assert not os.path.exists(output) or not os.listdir(output), os.listdir(output)
    assert sorted(os.listdir(root)) == sorted(set(before) | {"tasks.json"} |
                                              ({os.path.basename(output)}
                                               if os.path.exists(output) else set()))
    return message


def test_bad_teachers_are_refused_before_anything_is_written(teachers, bert_files, tmp_path):
    root, _, dirs = teachers
    data = tmp_path / "colour"
    san_tests._write_sentences(str(data), 8, 4, seed=41)
    empty = tmp_path / "empty_teacher"
    empty.mkdir()
    out = tmp_path / "out"
    message = _refusal(bert_files, tmp_path, out, do_train=True, num_train_steps=2,
                       teacher_dirs=str(empty))
    assert message == ("--teacher_dirs=%s: no checkpoint there (expected the --output_dir "
                       "of a finished run_multitask run)" % empty)
    message = _refusal(bert_files, tmp_path, out, do_train=True, num_train_steps=2,
                       teacher_dirs="%s,%s" % (dirs[0], out))
    assert message == ("--teacher_dirs=%s is the --output_dir; a teacher is an earlier "
                       "run's directory" % out)
    message = _refusal(bert_files, tmp_path, out, do_eval=True, teacher_dirs=dirs[0])
    assert message.startswith("--teacher_dirs is given without --do_train")
    message = _refusal(bert_files, tmp_path, out, do_train=True, num_train_steps=2,
                       teacher_dirs=dirs[0], soft_target_weight=1.5)
    assert message == "--soft_target_weight=1.5: expected a number from 0 to 1"
    # A teacher's own directory as the student's output: refused, the teacher untouched.
    before = {name: os.path.getmtime(os.path.join(dirs[0], name))
              for name in os.listdir(dirs[0])}
    with pytest.raises(multitask_job.MultitaskJobError, match="is the --output_dir"):
        multitask_job.run(_job(bert_files, _task_list(tmp_path, [SINGLE_ENTRY]), dirs[0],
                               do_train=True, num_train_steps=2, teacher_dirs=dirs[0]))
    assert {name: os.path.getmtime(os.path.join(dirs[0], name))
            for name in os.listdir(dirs[0])} == before
