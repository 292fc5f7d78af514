"""--profile_steps=A,B: a TensorBoard profile of training steps A to B, and bad values refused."""

import dataclasses
import glob
import os

from absl import flags
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.training import options
from modeling.training import settings
from modeling.training import trainer as trainer_lib


class LinearModel(keras.Model):
    """The smallest model with the trainer's contract."""

    def __init__(self):
        super().__init__(name="linear")
        self.dense = keras.layers.Dense(1)
        self.dense.build((None, 4))

    def call(self, x):
        return self.dense(x)

    def compute_loss_and_metrics(self, features, training):
        loss = tf.reduce_mean(tf.square(self(features["x"])[:, 0] - features["y"]))
        return loss, {"loss": (loss, tf.constant(1.0))}


def _input_fn(_):
    rng = np.random.RandomState(0)
    x = rng.randn(8, 4).astype("float32")
    return tf.data.Dataset.from_tensors({"x": x, "y": x.sum(1)}).repeat()


def _job(argv):
    values = flags.FlagValues()
    options.define_flags(settings.TrainerSettings, values)
    values(["prog"] + list(argv))
    return options.job_from_flags(settings.TrainerSettings, values)


def test_profile_steps_writes_a_tensorboard_profile_under_the_log_dir(tmp_path):
    job = _job(["--profile_steps=2,3", "--steps_per_loop=1", "--log_steps=2"])
    assert job.profile_steps == "2,3" and job.trainer_options()["profile_steps"] == (2, 3)
    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"), LinearModel,
        lambda: keras.optimizers.SGD(0.01), str(tmp_path), 8, num_train_steps=4,
        save_checkpoints_steps=4, **job.trainer_options())
    trainer.train(_input_fn)
    assert trainer.current_step() == 4
    profiles = glob.glob(str(tmp_path / "train" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert len(profiles) == 1 and os.path.getsize(profiles[0]) > 0
    # The run directory TensorBoard's profile plugin lists: plugins/profile/<run>/.
    assert os.path.dirname(os.path.dirname(profiles[0])) == str(
        tmp_path / "train" / "plugins" / "profile")


@pytest.mark.parametrize("value", ["3,1", "-1,2", "5", "a,b", "1,2,3"])
def test_a_bad_profile_steps_is_refused_naming_the_flag(value):
    with pytest.raises(flags.Error, match="--profile_steps must be A,B with whole numbers "
                                          "0 <= A <= B"):
        _job(["--profile_steps=" + value])
    # From Python, the same one-line message.
    job = dataclasses.replace(settings.TrainerSettings(), profile_steps=value)
    with pytest.raises(ValueError, match="--profile_steps must be A,B.*got '%s'" % value):
        job.trainer_options()
    assert _job([]).trainer_options().get("profile_steps") is None


@pytest.mark.parametrize("steps, loops, expected", [
    # (A, B), loop lengths in turn -> the loops that ran under the profiler.
    ((2, 3), [1, 1, 1, 1, 1], [1, 2]),    # steps_per_loop=1: exactly steps 2 and 3
    ((3, 5), [4, 4], [0, 1]),             # steps 1-4 and 5-8: both loops, rounded out
    ((0, 0), [2, 2], [0]),                # step 0 = the first update
    ((5, 6), [2, 2, 2, 2], [2]),          # steps 5-6 are the third loop
    ((9, 12), [2, 2], []),                # past the end of training: nothing
])
def test_the_profiled_window_is_rounded_to_whole_loops(monkeypatch, steps, loops, expected):
    events = []
    monkeypatch.setattr(tf.profiler.experimental, "start", lambda logdir: events.append("start"))
    monkeypatch.setattr(tf.profiler.experimental, "stop", lambda: events.append("stop"))
    window = trainer_lib._ProfileWindow(steps, "/unused")  # pylint: disable=protected-access
    step, profiled = 0, []
    for index, length in enumerate(loops):
        window.before(step, length)
        if window.running:
            profiled.append(index)
        step += length
        window.after(step)
    window.stop()
    assert profiled == expected
    assert events == (["start", "stop"] if expected else [])
