"""Magnitude pruning of weights during training (Zhu & Gupta, 2017).

"To prune, or not to prune": during fine-tuning the sparsity of each pruned
kernel rises from s_i to s_f along

    s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt)) ** 3,   t0 <= t <= t0 + n * dt

(fast at first, when redundant weights abound, then slower); every dt steps
each kernel's mask is recomputed to zero its s_t smallest-magnitude weights,
and after every update the masks are applied again, so a pruned weight stays
zero whatever the optimizer's moments push into it.

`PruningSchedule` is what the training scripts' flags (``--target_sparsity``,
``--pruning_begin_step``, ``--pruning_end_step``, ``--pruning_frequency``)
hand to `modeling.training.trainer.Trainer`, which builds a
`MagnitudePruner` over the model's encoder kernels, runs its `step` after
every optimizer update inside the compiled training loop, keeps the masks in
its checkpoints and logs the measured ``weight_sparsity``.
"""

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf

__all__ = ["PruningError", "PruningSchedule", "polynomial_sparsity", "encoder_dense_kernels",
           "MagnitudePruner"]


class PruningError(ValueError):
    """Bad pruning arguments (one line, naming the flag)."""


@dataclasses.dataclass
class PruningSchedule:
    """Zhu & Gupta's schedule. `end_step` None: three quarters of the run's updates.

    The last quarter then trains the pruned model with its masks fixed (the
    paper's recovery period).
    """

    target_sparsity: float
    begin_step: int = 0
    end_step: Optional[int] = None
    frequency: int = 100
    initial_sparsity: float = 0.0

    def resolved_end_step(self, num_train_steps):
        if self.end_step is not None:
            return int(self.end_step)
        return int(0.75 * num_train_steps)

    def pruner(self, variables, num_train_steps):
        return MagnitudePruner(variables, self.target_sparsity, self.begin_step,
                               self.resolved_end_step(num_train_steps), self.frequency,
                               self.initial_sparsity)


def polynomial_sparsity(step, target_sparsity, begin_step, end_step, initial_sparsity=0.0,
                        frequency=1, power=3):
    """Zhu & Gupta's sparsity at `step` (a Python number): s_i before, s_f after.

    ``n * dt = end_step - begin_step``; between, the step is rounded down to
    the last mask update (``begin_step + k * frequency``), since masks only
    change then.
    """
    if not 0.0 <= initial_sparsity <= target_sparsity < 1.0:
        raise PruningError("sparsity: expected 0 <= initial (%r) <= target (--target_sparsity"
                               "=%r) < 1" % (initial_sparsity, target_sparsity))
    if end_step <= begin_step or frequency < 1:
        raise PruningError("pruning steps: expected --pruning_begin_step (%r) < "
                               "--pruning_end_step (%r) and --pruning_frequency (%r) >= 1"
                               % (begin_step, end_step, frequency))
    if step < begin_step:
        return float(initial_sparsity)
    if step >= end_step:
        return float(target_sparsity)
    step = begin_step + ((step - begin_step) // frequency) * frequency
    fraction = (step - begin_step) / float(end_step - begin_step)
    return float(target_sparsity + (initial_sparsity - target_sparsity) * (1.0 - fraction) ** power)


def encoder_dense_kernels(model):
    """The 2-D (and 3-D, per-head) dense kernels of a model's encoder layers.

    Embedding tables, biases, layer norms and the task head stay dense:
    the kernels of the attention projections and feed-forward layers hold
    most of BERT's weights outside the embeddings.
    """
    encoder = getattr(model, "encoder", model)
    kernels = []
    for variable in encoder.trainable_variables:
        path = getattr(variable, "path", variable.name)
        if "kernel" in path.split("/")[-1] and "embedding" not in path:
            kernels.append(variable)
    if not kernels:
        raise PruningError("no dense kernels to prune in %s" % getattr(model, "name", model))
    return kernels


class MagnitudePruner(object):
    """Masks on `variables`, updated along `polynomial_sparsity`, applied after updates.

    Everything is TensorFlow ops, so `step` runs eagerly after a custom loop's
    update or inside a compiled training loop (`modeling.training.trainer`
    calls it after every optimizer update when given ``weight_pruning``)::

        pruner = MagnitudePruner(encoder_dense_kernels(model), 0.5, 0, 1000, frequency=100)
        for step, batch in enumerate(data, 1):
            train_step(batch)
            pruner.step(step)

    `step(t)` recomputes the masks when ``t`` is a mask-update step
    (``begin_step + k * frequency`` up to `end_step`, and `end_step` itself)
    and then multiplies every variable by its mask. Each variable is pruned
    on its own to the scheduled sparsity: the ``round(s * size)`` smallest
    magnitudes are zeroed (ties by position). Masks are non-trainable
    variables, created under the current distribution strategy's scope and
    kept in checkpoints when `masks` is tracked (a resumed run goes on
    with the same masks). Under a `tf.distribute` strategy, call `step` in
    cross-replica context (after ``strategy.run``): every replica's copy
    gets the same mask.
    """

    def __init__(self, variables, target_sparsity, begin_step, end_step, frequency=100,
                 initial_sparsity=0.0, power=3):
        polynomial_sparsity(begin_step, target_sparsity, begin_step, end_step,
                            initial_sparsity, frequency, power)  # checks the arguments
        self.variables = list(variables)
        self.target_sparsity = float(target_sparsity)
        self.initial_sparsity = float(initial_sparsity)
        self.begin_step = int(begin_step)
        self.end_step = int(end_step)
        self.frequency = int(frequency)
        self.power = power
        self.masks = [tf.Variable(tf.ones(v.shape, v.dtype), trainable=False,
                                  name="pruning_mask") for v in self.variables]

    def sparsity(self, step):
        """The scheduled sparsity at `step` (a Python number) as a Python float."""
        return polynomial_sparsity(step, self.target_sparsity, self.begin_step, self.end_step,
                                   self.initial_sparsity, self.frequency, self.power)

    def _scheduled(self, step):
        """`sparsity` and "is a mask-update step" as float64 / bool tensors of a step tensor."""
        step = tf.cast(step, tf.int64)
        begin, end = tf.constant(self.begin_step, tf.int64), tf.constant(self.end_step, tf.int64)
        clipped = tf.clip_by_value(step, begin, end)
        last_update = begin + ((clipped - begin) // self.frequency) * self.frequency
        last_update = tf.where(step >= end, end, last_update)
        fraction = tf.cast(last_update - begin, tf.float64) / float(self.end_step - self.begin_step)
        sparsity = (self.target_sparsity + (self.initial_sparsity - self.target_sparsity)
                    * (1.0 - fraction) ** self.power)
        due = tf.logical_and(tf.logical_and(step >= begin, step <= end),
                             tf.logical_or(tf.equal((step - begin) % self.frequency, 0),
                                           tf.equal(step, end)))
        return sparsity, due

    def is_mask_update_step(self, step):
        return bool(self._scheduled(step)[1])

    def update_masks(self, sparsity):
        """Each mask zeroes the ``round(sparsity * size)`` smallest magnitudes of its variable."""
        sparsity = tf.cast(sparsity, tf.float64)
        for variable, mask in zip(self.variables, self.masks):
            size = int(np.prod(variable.shape))
            magnitudes = tf.reshape(tf.abs(tf.convert_to_tensor(variable)), [-1])
            count = tf.cast(tf.round(sparsity * size), tf.int32)
            # The rank of each position in a stable ascending sort.
            ranks = tf.math.invert_permutation(tf.argsort(magnitudes, stable=True))
            keep = tf.cast(ranks >= count, mask.dtype)
            mask.assign(tf.reshape(keep, mask.shape))

    def apply_masks(self):
        for variable, mask in zip(self.variables, self.masks):
            variable.assign(variable * mask)

    def step(self, step):
        """After the update of `step` (int or tensor): new masks if due, then masks applied."""
        sparsity, due = self._scheduled(step)
        if tf.executing_eagerly():
            if bool(due):
                self.update_masks(sparsity)
        else:
            def update():
                self.update_masks(sparsity)
                return tf.constant(True)
            tf.cond(due, update, lambda: tf.constant(False))
        self.apply_masks()

    def measured_sparsity(self):
        """Fraction of exact zeros over all pruned variables (a Python float)."""
        zeros = sum(int(np.sum(np.asarray(v.numpy()) == 0)) for v in self.variables)
        return zeros / float(sum(int(np.prod(v.shape)) for v in self.variables))
