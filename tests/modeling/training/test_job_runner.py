"""`modeling.training.job.JobRunner`: the one job shape (order of the steps, shared checks)."""

import dataclasses
import os
import re
from typing import Optional

import pytest

from data.processors.base import DataError
from modeling.training import job as job_lib
from modeling.training import run_lock
from modeling.training import settings
from modeling.training.options import option


class _Error(ValueError):
    pass


@dataclasses.dataclass
class _Job(settings.TrainerSettings):
    output_dir: Optional[str] = option(None, "Output.")
    do_train: bool = option(False, "Train.")
    do_eval: bool = option(False, "Evaluate.")
    do_predict: bool = option(False, "Predict.")
    train_batch_size: int = option(4, "Batch.")
    num_train_epochs: float = option(2.0, "Epochs.")
    warmup_proportion: float = option(0.25, "Warm-up.")
    learning_rate: float = option(1e-3, "Rate.")
    save_checkpoints_steps: int = option(100, "Checkpoints.")
    init_checkpoint: Optional[str] = option(None, "Init.")
    examples: int = option(10, "Training examples prepare() reports.")
    fail_in: Optional[str] = option(None, "Hook that raises.")
    seed: Optional[int] = option(None, "Seed.")


class _FakeTrainer:
    def __init__(self, calls):
        self.calls = calls

    def train(self, input_fn):
        self.calls.append(("train", input_fn))

    def restore_or_initialize(self):
        self.calls.append(("restore",))


class _Runner(job_lib.JobRunner):
    error = _Error

    def __init__(self, job):
        super().__init__(job)
        self.calls = []

    def _maybe_fail(self, hook):
        if self.job.fail_in == hook:
            raise DataError("bad data in %s" % hook)

    def check(self):
        self.calls.append(("check", os.path.exists(self.job.output_dir)))
        super().check()

    def prepare(self):
        self.calls.append(("prepare", os.path.isdir(self.job.output_dir)))
        self._maybe_fail("prepare")
        return self.job.examples

    def build_trainer(self, **overrides):
        self.calls.append(("trainer", self.num_train_steps, self.num_warmup_steps))
        return _FakeTrainer(self.calls)

    def train_input_fn(self):
        return "train-input"

    def evaluate(self, trainer):
        self.calls.append(("evaluate",))
        return {"eval_accuracy": 1.0}

    def predict(self, trainer):
        self.calls.append(("predict",))
        return ["p"]

    def finish(self, trainer, eval_results, predictions):
        self.calls.append(("finish", eval_results, predictions))
        return "result"


def test_steps_run_in_order_with_googles_step_arithmetic(tmp_path):
    output_dir = str(tmp_path / "out")
    runner = _Runner(_Job(output_dir=output_dir, do_train=True, do_eval=True, do_predict=True))
    assert runner.run() == "result"
    # 10 examples / batch 4 * 2 epochs = 5 updates, a quarter of them warm-up.
    assert runner.calls == [
        ("check", False), ("prepare", True), ("trainer", 5, 1), ("train", "train-input"),
        ("evaluate",), ("predict",), ("finish", {"eval_accuracy": 1.0}, ["p"])]
    # The output directory's lock is released at the end.
    assert not os.path.exists(os.path.join(output_dir, run_lock.LOCK_NAME))


def test_without_training_the_latest_checkpoint_is_restored(tmp_path):
    runner = _Runner(_Job(output_dir=str(tmp_path), do_eval=True))
    runner.run()
    assert [call[0] for call in runner.calls] == ["check", "prepare", "trainer", "restore",
                                                  "evaluate", "finish"]


@pytest.mark.parametrize("values, message", [
    ({}, "At least one of `do_train`, `do_eval` or `do_predict` must be True."),
    ({"do_train": True, "learning_rate": 0.0}, "learning_rate"),
    ({"do_train": True, "nan_policy": "ignore"}, "--nan_policy=ignore: expected one of stop, skip"),
])
def test_a_bad_setting_is_refused_before_anything_is_written(tmp_path, values, message):
    output_dir = tmp_path / "out"
    runner = _Runner(_Job(output_dir=str(output_dir), **values))
    with pytest.raises(ValueError, match=re.escape(message)):
        runner.run()
    assert not output_dir.exists()
    assert [call[0] for call in runner.calls] == ["check"]


def test_data_errors_become_the_jobs_error_and_too_few_examples_make_no_step(tmp_path):
    runner = _Runner(_Job(output_dir=str(tmp_path), do_train=True, fail_in="prepare"))
    with pytest.raises(_Error, match="bad data in prepare"):
        runner.run()
    runner = _Runner(_Job(output_dir=str(tmp_path), do_train=True, examples=1))
    with pytest.raises(_Error, match="1 training examples, --train_batch_size=4 and "
                                     "--num_train_epochs=2.0 make no training step."):
        runner.run()


def test_shared_field_checks_name_the_flag(tmp_path):
    runner = _Runner(_Job(output_dir=None, train_batch_size=0))
    with pytest.raises(_Error, match=r"^--output_dir is required\.$"):
        runner.check_required("output_dir")
    with pytest.raises(_Error, match=r"^--train_batch_size must be positive\.$"):
        runner.check_positive("train_batch_size")
    assert job_lib.eval_results_from({"global_step": 7, "loss": 0.5, "accuracy": 0.9}) == {
        "global_step": 7, "eval_loss": 0.5, "eval_accuracy": 0.9, "loss": 0.5}


def test_an_output_dir_that_holds_the_init_checkpoint_is_refused_first(tmp_path):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    folder = tmp_path / "pretraining"
    module = tf.Module()
    module.v = tf.Variable([1.0])
    prefix = tf.train.CheckpointManager(tf.train.Checkpoint(model=module), str(folder),
                                        1).save(checkpoint_number=7)
    listing = sorted(os.listdir(folder))
    for init_checkpoint in (str(folder), prefix):
        runner = _Runner(_Job(output_dir=str(folder), init_checkpoint=init_checkpoint,
                              do_train=True))
        with pytest.raises(_Error, match=r"^--output_dir=%s is the folder of "
                           r"--init_checkpoint=%s, an input: refusing to write there \(the run "
                           r"would overwrite or resume from what it reads\); choose another "
                           r"--output_dir$"
                           % (re.escape(str(folder)), re.escape(init_checkpoint))):
            runner.run()
        assert runner.calls == [], "checked after the job's own checks"
        assert sorted(os.listdir(folder)) == listing
    # Another folder (a sub-folder too) starts from it.
    for output_dir in (tmp_path / "fine_tuned", folder / "fine_tuned"):
        runner = _Runner(_Job(output_dir=str(output_dir), init_checkpoint=prefix,
                              do_train=True))
        assert runner.run() == "result"


def test_an_evaluation_may_read_its_own_finished_runs_checkpoint(tmp_path):
    """Google's `--do_predict --init_checkpoint=$OUT/model.ckpt-N --output_dir=$OUT`:
    a run that does not train writes beside the checkpoint it evaluates."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    module = tf.Module()
    module.v = tf.Variable([1.0])
    prefix = tf.train.CheckpointManager(tf.train.Checkpoint(model=module), str(tmp_path),
                                        1).save(checkpoint_number=3)
    runner = _Runner(_Job(output_dir=str(tmp_path), init_checkpoint=prefix, do_train=False,
                          do_eval=True))
    assert runner.run() == "result"
