"""Checks of a training job's numeric settings, before anything is built.

Both jobs (`modeling.recipes.pretraining.PretrainingJob`,
`modeling.tasks.classifier_job.ClassifierJob`) take these values from flags.
Left unchecked, a bad value surfaces late and far from its flag (a batch
size of 0 inside `tf.data`; `--num_train_steps=0` with `--do_train` only
when the learning-rate schedule is built, after the model and the inputs),
or is silently changed (`--save_checkpoints_steps=0` and `--log_steps=0`
are read as 1: a checkpoint every step).
`validate_training_values` refuses them at the start, one line naming the
flag and what was expected:

    --learning_rate=nan: expected a finite positive number
    --train_batch_size=0: expected a positive integer
    --num_train_steps=0 with --do_train: expected a positive integer

Only the values given are checked (None: not this job's setting), and the
training-only settings only with `do_train`, so an evaluation-only run may
leave `num_train_steps` at 0.
"""

import math
import numbers

__all__ = ["TrainingValueError", "validate_training_values"]


class TrainingValueError(ValueError):
    """A training flag has a value no run can use."""


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _flag(name, value, context=""):
    return "--%s=%s%s" % (name, value, context)


def _positive_integer(name, value, context=""):
    if not (_is_integer(value) and value > 0):
        raise TrainingValueError("%s: expected a positive integer" % _flag(name, value, context))


def _non_negative_integer(name, value):
    if not (_is_integer(value) and value >= 0):
        raise TrainingValueError("%s: expected an integer >= 0" % _flag(name, value))


def validate_training_values(do_train, learning_rate=None, num_train_steps=None,
                             num_warmup_steps=None, train_batch_size=None,
                             eval_batch_size=None, save_checkpoints_steps=None,
                             gradient_accumulation_steps=None, predict_batch_size=None,
                             max_eval_steps=None, keep_checkpoint_max=None, log_steps=None,
                             num_train_epochs=None, warmup_proportion=None, do_eval=False):
    """Raises `TrainingValueError` naming the first flag with an unusable value.

    Args:
        do_train: whether the run trains; the training-only settings
            (`num_train_steps`, `num_train_epochs`, `learning_rate` > 0) are
            required only then.
        learning_rate: finite; > 0 with `do_train`, >= 0 otherwise (an
            evaluation-only run still builds the optimizer).
        num_train_steps: integer >= 0; > 0 with `do_train`.
        num_warmup_steps: integer >= 0.
        train_batch_size, eval_batch_size, predict_batch_size: positive
            integers.
        save_checkpoints_steps, gradient_accumulation_steps, log_steps,
            keep_checkpoint_max: positive integers.
        max_eval_steps: positive integer when `do_eval`.
        num_train_epochs: (fine-tuning) finite and > 0 with `do_train`.
        warmup_proportion: (fine-tuning) in [0, 1].
        do_eval: whether the run evaluates (for `max_eval_steps`).

    Every argument but `do_train` may be None: not checked (a setting the
    job does not have).
    """
    if learning_rate is not None:
        if do_train:
            if not (_is_number(learning_rate) and math.isfinite(learning_rate)
                    and learning_rate > 0):
                raise TrainingValueError("%s: expected a finite positive number"
                                         % _flag("learning_rate", learning_rate))
        elif not (_is_number(learning_rate) and math.isfinite(learning_rate)
                  and learning_rate >= 0):
            raise TrainingValueError("%s: expected a finite number >= 0"
                                     % _flag("learning_rate", learning_rate))
    if num_train_steps is not None:
        if do_train:
            _positive_integer("num_train_steps", num_train_steps, " with --do_train")
        else:
            _non_negative_integer("num_train_steps", num_train_steps)
    if num_warmup_steps is not None:
        _non_negative_integer("num_warmup_steps", num_warmup_steps)
    if num_train_epochs is not None and do_train:
        if not (_is_number(num_train_epochs) and math.isfinite(num_train_epochs)
                and num_train_epochs > 0):
            raise TrainingValueError("%s with --do_train: expected a finite positive number"
                                     % _flag("num_train_epochs", num_train_epochs))
    if warmup_proportion is not None:
        if not (_is_number(warmup_proportion) and 0 <= warmup_proportion <= 1):
            raise TrainingValueError("%s: expected a number in [0, 1]"
                                     % _flag("warmup_proportion", warmup_proportion))
    for name, value in (("train_batch_size", train_batch_size),
                        ("eval_batch_size", eval_batch_size),
                        ("predict_batch_size", predict_batch_size),
                        ("save_checkpoints_steps", save_checkpoints_steps),
                        ("gradient_accumulation_steps", gradient_accumulation_steps),
                        ("keep_checkpoint_max", keep_checkpoint_max),
                        ("log_steps", log_steps)):
        if value is not None:
            _positive_integer(name, value)
    if max_eval_steps is not None and do_eval:
        _positive_integer("max_eval_steps", max_eval_steps, " with --do_eval")
