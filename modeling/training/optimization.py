"""Optimizers and learning-rate schedule for BERT pre-training and fine-tuning.

What is here, and how it matches google-research/bert's `optimization.py`:

* `LinearWarmupLinearDecay`: Google's schedule, exactly:
  `lr(step) = peak * step / warmup` while `step < warmup`, otherwise
  `peak * (1 - min(step, total) / total)`. The decay is measured from step 0,
  not from the end of warm-up, so the rate just after warm-up is
  `peak * (1 - warmup / total)`, as in Google's code.
* `AdamWeightDecay`: Google's `AdamWeightDecayOptimizer`: Adam moments with
  NO bias correction, and decoupled weight decay added to the update,
  `w -= lr * (m / (sqrt(v) + eps) + wd * w)`, skipped for variables whose
  path matches one of `exclude_from_weight_decay` (default "LayerNorm",
  "layer_norm", "bias"; matched with `re.search` on `variable.path`, e.g.
  `bert_encoder/layer_0/attention_sublayer/LayerNorm/gamma`).
* `Lamb`: layer-wise adaptive moments (You et al. 2019) with bias-corrected
  moments, the same decay and exclusions, and trust ratio `||w|| / ||u||`
  (1 when either norm is 0); excluded variables get neither decay nor the
  trust ratio (as tf-models does).
* `SlantedTriangular`: ULMFiT's slanted triangular rate (Howard & Ruder
  2018): `cut = floor(T * cut_frac)`, `p = t / cut` while `t < cut`, else
  `1 - (t - cut) / (cut * (1 / cut_frac - 1))`, and
  `lr = peak * (1 + p * (ratio - 1)) / ratio`.
* Per-variable learning-rate factors (`learning_rate_multipliers` of both
  optimizers): a dict `{regex: factor}` or a callable (ULMFiT's
  discriminative rates and gradual unfreezing,
  `finetuning_techniques.LayerwiseLearningRates`); factor 0 freezes.
* `create_optimizer(...)`: the schedule plus either optimizer, with gradient
  clipping and optional gradient accumulation.

Each variable's update (moments, decay, trust ratio, assignment) runs as one
XLA computation on the variable handles (`jit_update=True`, the default):
the same arithmetic as op by op, one pass over memory instead of one per
term (faster on CPU: docs/speed.md). `jit_update=False` runs it op by op (for
platforms without XLA).

Gradient processing (both optimizers share it, in `apply`):

    1. all-reduce (SUM) the gradients across replicas (when called inside
       `strategy.run` with more than one replica);
    2. with `gradient_accumulation_steps = k > 1`, add them to accumulators;
       only every k-th call continues, with the MEAN of the k micro-batch
       gradients;
    3. clip by global norm (`clip_norm`, 1.0 by default);
    4. apply one update at learning rate `schedule(optimizer.iterations)`,
       and increment `optimizer.iterations`.

So clipping happens AFTER accumulation and after the cross-replica sum: k
accumulated micro-batches give exactly the update of one k-times larger
batch, and N replicas give the update of one N-times larger batch. (This is
Google's single-device semantics; Google's TPU code clipped each core's
gradient before the cross-shard sum.) `optimizer.iterations` counts updates
(what the schedule, `num_train_steps` and checkpoints mean by "step");
`optimizer.micro_steps` counts `apply_gradients` calls.

Driving it from a custom training loop under tf.distribute:

    with strategy.scope():
        model = build_bert_pretrainer(config)
        optimizer = create_optimizer(1e-4, num_train_steps, num_warmup_steps,
                                     gradient_accumulation_steps=k)
        # Create the slots now: variables cannot be created in strategy.run
        # (this is also what lets a checkpoint restore them before step 1).
        optimizer.build(model.trainable_variables)

    @tf.function
    def train_step(features):                       # one micro-batch
        def step_fn(features):
            with tf.GradientTape() as tape:
                loss, metrics = model.compute_loss_and_metrics(
                    features, training=True)
                # Gradients are SUMMED across replicas: scale by 1/replicas
                # so the update uses the global-batch mean.
                scaled = loss / strategy.num_replicas_in_sync
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return metrics
        per_replica = strategy.run(step_fn, args=(features,))
        return tf.nest.map_structure(
            lambda x: strategy.reduce("SUM", x, axis=None), per_replica)

Call `train_step` once per micro-batch; the weights change on every k-th
call (`optimizer.iterations` then advances by one). Do not clip in the loop:
the optimizer does it. Accumulators and counters are optimizer variables, so
a checkpoint of the optimizer resumes mid-accumulation exactly. Keras's own
`gradient_accumulation_steps`/`global_clipnorm` are not used: they clip each
replica's gradient before the cross-replica sum, run the schedule on
micro-steps, and put synchronisation inside a replica-context `cond` (which
MirroredStrategy rejects).

For float16 mixed precision wrap the optimizer in
`keras.optimizers.LossScaleOptimizer` (and scale the loss with its
`scale_loss`); this composes with accumulation and MirroredStrategy (tested).
bfloat16 needs no loss scaling. This module needs the TensorFlow backend.
"""

import functools
import math
import re

import keras
import tensorflow as tf

from modeling.training import finetuning_techniques

__all__ = [
    "AdamWeightDecay",
    "Lamb",
    "LinearWarmupLinearDecay",
    "SlantedTriangular",
    "create_optimizer",
]

LR_SCHEDULES = ("linear", "stlr")

_PACKAGE = "bert_family"
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


# ------------------------------------------------------------------ schedule


def _check_peak_and_steps(peak_learning_rate, num_train_steps):
    """What both schedules refuse: a peak rate that is not a finite number >= 0,
    a number of updates that is not positive."""
    try:
        peak = float(peak_learning_rate)
    except (TypeError, ValueError):
        peak = None
    if peak is None or not (math.isfinite(peak) and peak >= 0):
        raise ValueError("learning rate (--learning_rate) must be a finite number >= 0, "
                         f"got {peak_learning_rate}.")
    if num_train_steps <= 0:
        raise ValueError("num_train_steps (--num_train_steps) must be positive, got "
                         f"{num_train_steps}.")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Google BERT's learning rate: linear warm-up, then linear decay to 0.

    Args:
        peak_learning_rate: the `init_lr` of Google's `create_optimizer`.
        num_train_steps: step at which the rate reaches 0 (and stays).
        num_warmup_steps: steps of linear warm-up from 0; 0 disables it.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0):
        _check_peak_and_steps(peak_learning_rate, num_train_steps)
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
        self.peak_learning_rate = peak_learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.cast(self.peak_learning_rate, tf.float32)
        total = tf.cast(self.num_train_steps, tf.float32)
        decayed = peak * (1.0 - tf.minimum(step, total) / total)
        if not self.num_warmup_steps:
            return decayed
        warmup = tf.cast(self.num_warmup_steps, tf.float32)
        return tf.where(step < warmup, peak * step / warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SlantedTriangular(keras.optimizers.schedules.LearningRateSchedule):
    """ULMFiT's slanted triangular learning rate (Howard & Ruder 2018, eq. 3).

        cut  = floor(T * cut_frac)                    (at least 1)
        p    = t / cut                                 if t < cut
             = 1 - (t - cut) / (cut * (1/cut_frac - 1))  otherwise (at least 0)
        lr_t = peak * (1 + p * (ratio - 1)) / ratio

    with `t` the update (`optimizer.iterations`, from 0) and `T` the
    `num_train_steps`: a short linear rise from `peak / ratio` to `peak` at
    update `cut`, then a long linear fall back to `peak / ratio` at update
    T, where it stays.

    Args:
        peak_learning_rate: `lr_max`.
        num_train_steps: `T`.
        cut_frac: fraction of the updates spent rising (the paper: 0.1),
            in (0, 1).
        ratio: how much smaller the lowest rate is than the peak (the
            paper: 32), >= 1.
    """

    def __init__(self, peak_learning_rate, num_train_steps, cut_frac=0.1, ratio=32.0):
        _check_peak_and_steps(peak_learning_rate, num_train_steps)
        if not (isinstance(cut_frac, (int, float)) and 0 < cut_frac < 1):
            raise ValueError(f"stlr_cut_frac (--stlr_cut_frac) must be in (0, 1), got {cut_frac}.")
        if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio >= 1):
            raise ValueError(f"stlr_ratio (--stlr_ratio) must be a number >= 1, got {ratio}.")
        self.peak_learning_rate = peak_learning_rate
        self.num_train_steps = num_train_steps
        self.cut_frac = cut_frac
        self.ratio = ratio

    @property
    def cut(self):
        """The update at which the rate peaks."""
        return max(1, int(math.floor(self.num_train_steps * self.cut_frac)))

    def __call__(self, step):
        cut = float(self.cut)
        t = tf.minimum(tf.cast(step, tf.float32), float(self.num_train_steps))
        rising = t / cut
        falling = 1.0 - (t - cut) / (cut * (1.0 / self.cut_frac - 1.0))
        p = tf.maximum(tf.where(t < cut, rising, falling), 0.0)
        peak = tf.cast(self.peak_learning_rate, tf.float32)
        return peak * (1.0 + p * (self.ratio - 1.0)) / self.ratio

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "cut_frac": self.cut_frac,
            "ratio": self.ratio,
        }


# ------------------------------------------------------------ shared machinery


def _unless_zero_gradient(update_fn):
    """`update_fn(variable, *slots, gradient, learning_rate)`, skipped for an all-zero gradient."""

    def guarded(variable, *args):
        gradient = args[-2]

        def apply():
            update_fn(variable, *args)
            return tf.constant(True)

        return tf.cond(tf.reduce_any(tf.not_equal(gradient, 0)), apply,
                       lambda: tf.constant(False))

    return guarded


def _check_factor(factor, path):
    if isinstance(factor, (int, float)) and not (math.isfinite(factor) and factor >= 0):
        raise ValueError(f"learning-rate multiplier of {path} must be a finite number >= 0, "
                         f"got {factor}.")
    return factor


class _RegexMultipliers(object):
    """`{regex: factor}`: a path's factor is that of the first regex found in it (else 1)."""

    def __init__(self, table):
        self.table = [(str(pattern), float(_check_factor(factor, pattern)))
                      for pattern, factor in table.items()]

    def __call__(self, paths, step):
        del step
        return [next((factor for pattern, factor in self.table if re.search(pattern, path)),
                     1.0) for path in paths]


def _with_learning_rate_factor(update_fn, factor):
    """`update_fn(variable, *slots, gradient, learning_rate)` at `learning_rate * factor`.

    A Python factor of 1 returns `update_fn` itself and one of 0 returns
    None (no update); a tensor factor of 0 skips the update at run time, so
    a frozen variable keeps its value and its moments.
    """
    if isinstance(factor, (int, float)):
        factor = float(factor)
        if factor == 1.0:
            return update_fn
        if factor == 0.0:
            return None

        def scaled(variable, *args):
            *rest, learning_rate = args
            update_fn(variable, *rest, learning_rate * factor)

        return scaled

    def gated(variable, *args):
        *rest, learning_rate = args

        def apply():
            update_fn(variable, *rest, learning_rate * tf.cast(factor, learning_rate.dtype))
            return tf.constant(True)

        return tf.cond(factor > 0, apply, lambda: tf.constant(False))

    return gated


def _mask_frozen(gradient, factor):
    """The gradient, or zeros where the learning-rate factor is 0 (frozen)."""
    if isinstance(factor, (int, float)):
        return tf.zeros_like(gradient) if factor == 0 else gradient
    return tf.where(factor > 0, gradient, tf.zeros_like(gradient))


class _BertOptimizer(keras.optimizers.Optimizer):
    """Weight-decay exclusions, global-norm clipping and accumulation.

    Subclasses implement `build` (moment slots `_m`, `_v`) and
    `_update_fn(index)`: a function
    `(variable, *slots, gradient, learning_rate)` that updates the backend
    variables in place. With `jit_update` (default) that function is
    compiled with XLA, which fuses each variable's element-wise update into
    one pass over memory instead of one TensorFlow op per term; the
    arithmetic is the same.

    With `skip_zero_gradients`, a variable whose (accumulated, clipped)
    gradient is zero everywhere keeps its value and its moments in that
    update, as PyTorch optimizers skip parameters without a gradient. Multi-task
    training needs it: a batch of one task gives the other tasks' heads
    exactly zero gradients, and Adam's momentum and the weight decay would
    still move them.

    `learning_rate_multipliers` (None: every variable at the schedule's
    rate) scales the rate per variable: a dict `{regex: factor}` (the first
    regex `re.search`ed in `variable.path` gives the factor, 1 if none) or
    a callable `fn(paths, step) -> factors`, called with the paths of all
    the optimizer's variables (in `build` order) and the update counter
    (`iterations`, int64), returning one factor per path (Python floats or
    float32 scalar tensors); e.g. `finetuning_techniques.LayerwiseLearningRates`.
    The factor multiplies the whole update (weight decay included). A
    variable whose factor is 0 is frozen for that update: its gradient is
    zeroed before accumulation and clipping (so it does not count in the
    global norm), and its value and moments stay as they are.
    """

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.0,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm=None,
        gradient_accumulation_steps=1,
        jit_update=True,
        skip_zero_gradients=False,
        learning_rate_multipliers=None,
        name=None,
        **kwargs,
    ):
        # Keras's own clipping/decay/accumulation are not used (see module
        # docstring); reject them rather than silently ignoring them.
        for key in ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm",
                    "gradient_accumulation_steps", "loss_scale_factor"):
            if kwargs.get(key) is not None:
                raise ValueError(
                    f"{type(self).__name__} does not take Keras's `{key}`; use "
                    "weight_decay_rate / clip_norm / gradient_accumulation_steps."
                )
            kwargs.pop(key, None)
        if kwargs.pop("use_ema", False):
            raise ValueError(f"{type(self).__name__} does not support use_ema.")
        kwargs.pop("ema_momentum", None)
        kwargs.pop("ema_overwrite_frequency", None)
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if gradient_accumulation_steps is None or int(gradient_accumulation_steps) < 1:
            raise ValueError(
                "gradient_accumulation_steps must be >= 1, got "
                f"{gradient_accumulation_steps}."
            )
        if clip_norm is not None and clip_norm <= 0:
            raise ValueError(f"clip_norm must be positive or None, got {clip_norm}.")
        self.weight_decay_rate = weight_decay_rate
        self.exclude_from_weight_decay_patterns = list(exclude_from_weight_decay or ())
        self.clip_norm = clip_norm
        self.accumulation_steps = int(gradient_accumulation_steps)
        self.jit_update = bool(jit_update)
        self.skip_zero_gradients = bool(skip_zero_gradients)
        if isinstance(learning_rate_multipliers, (list, tuple)):  # from get_config
            learning_rate_multipliers = dict(learning_rate_multipliers)
        if learning_rate_multipliers is None:
            self._multiplier_fn = None
        elif isinstance(learning_rate_multipliers, dict):
            self._multiplier_fn = _RegexMultipliers(learning_rate_multipliers)
        elif callable(learning_rate_multipliers):
            self._multiplier_fn = learning_rate_multipliers
        else:
            raise ValueError("learning_rate_multipliers must be None, a dict {regex: factor} "
                             "or a callable (paths, step) -> factors, got "
                             f"{learning_rate_multipliers!r}.")
        self.learning_rate_multipliers = learning_rate_multipliers
        with keras.name_scope(self.name, caller=self):
            self._micro_steps = keras.Variable(
                0,
                name="micro_steps",
                dtype="int",
                trainable=False,
                aggregation="only_first_replica",
            )
            # Global norm of the gradient of the last update (after the
            # cross-replica sum and accumulation, before clipping), for
            # TensorBoard.
            self._gradient_norm = keras.Variable(
                0.0,
                name="gradient_norm",
                dtype="float32",
                trainable=False,
                aggregation="only_first_replica",
            )
            # Updates skipped because the gradient was NaN or infinite
            # (the weights and moments stay as they were).
            self._nonfinite_updates = keras.Variable(
                0,
                name="nonfinite_updates",
                dtype="int",
                trainable=False,
                aggregation="only_first_replica",
            )
    @property
    def gradient_norm(self):
        """Global norm of the last update's gradient, before clipping."""
        return self._gradient_norm

    @property
    def nonfinite_updates(self):
        """Updates skipped so far because the gradient was NaN or infinite."""
        return self._nonfinite_updates

    @property
    def micro_steps(self):
        """Number of `apply_gradients` calls (micro-batches) so far."""
        return self._micro_steps

    def _decays(self, variable):
        """Whether `variable` (a model variable) gets weight decay."""
        if not self.weight_decay_rate:
            return False
        path = getattr(variable, "path", None) or variable.name
        for pattern in self.exclude_from_weight_decay_patterns:
            if re.search(pattern, path):
                return False
        # Also honour Keras's `exclude_from_weight_decay(var_list=...)`.
        return self._use_weight_decay(variable)

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self._decay_flags = [self._decays(v) for v in variables]
        self._variable_paths = tuple(getattr(v, "path", None) or v.name for v in variables)
        if self.accumulation_steps > 1:
            self._accumulators = self.add_optimizer_variables(
                variables, "gradient_accumulator"
            )

    def _learning_rate_factors(self, indices):
        """The learning-rate factor of each variable `indices` names; None without multipliers."""
        if self._multiplier_fn is None:
            return None
        paths = self._variable_paths
        factors = list(self._multiplier_fn(list(paths), tf.cast(self._iterations, "int64")))
        if len(factors) != len(paths):
            raise ValueError(f"learning_rate_multipliers returned {len(factors)} factors for "
                             f"{len(paths)} variables.")
        return [_check_factor(factors[i], paths[i]) for i in indices]

    def _decay_rate(self, index):
        """Weight decay of model variable `index` (0.0 when excluded)."""
        return self.weight_decay_rate if self._decay_flags[index] else 0.0

    def _update_in_place(self, math_fn, compiled_fn, targets, *args):
        """Sets `targets` (variable, *slots) to `math_fn(*targets, *args)`.

        Through `compiled_fn` (`_on_handles(math_fn)`) when `jit_update` is
        on and the targets are plain resource variables (per-device
        components inside `strategy.extended.update`); op by op otherwise.
        """
        if self.jit_update and all(_plain_resource_variable(t) for t in targets):
            compiled_fn(tuple(t.handle for t in targets), targets[0].dtype, *args)
            return
        new_values = math_fn(*[t.read_value() for t in targets], *args)
        for target, value in zip(targets, new_values):
            target.assign(value)

    def _slots(self, index):
        """The moment slots (`_m`, `_v`, made by the subclass's `build`)."""
        return self._m[index], self._v[index]

    def _moment_hyper(self, index):
        """`(beta_1, 1 - beta_1, beta_2, 1 - beta_2, epsilon, decay)` tensors.

        1 - beta is taken in float64 before the cast, as Google's code does:
        in float32, 1 - 0.999 is off by 1e-5 relative.
        """
        beta_1, one_minus_beta_1 = _cast_pair(self.beta_1, "float32")
        beta_2, one_minus_beta_2 = _cast_pair(self.beta_2, "float32")
        return (beta_1, one_minus_beta_1, beta_2, one_minus_beta_2,
                tf.constant(self.epsilon, "float32"),
                tf.constant(self._decay_rate(index), "float32"))

    def _update_fn(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define _update_fn.")

    # ---------------------------------------------------------------- apply

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return
        if trainable_variables is None:
            if not self.built:
                raise ValueError(
                    "Call optimizer.build(variables) or pass the variables."
                )
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        replica_context = tf.distribute.get_replica_context()
        if not self.built:
            if (
                replica_context is not None
                and replica_context.num_replicas_in_sync > 1
            ):
                raise ValueError(
                    "Build the optimizer before the first distributed step: "
                    "`optimizer.build(model.trainable_variables)` under "
                    "`strategy.scope()` (slot variables cannot be created "
                    "inside `strategy.run`)."
                )
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
        self._check_variables_are_known(trainable_variables)

        pairs = [(g, v) for g, v in zip(grads, trainable_variables) if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        variables = [v for _, v in pairs]
        with keras.name_scope(self.name, caller=self):
            # Dense gradients: the embedding gradient is an IndexedSlices, but
            # the update touches every row anyway (moments, decay).
            grads = [
                tf.convert_to_tensor(g, dtype_hint=v.dtype) for g, v in pairs
            ]
            grads = [tf.cast(g, v.dtype) for g, v in zip(grads, variables)]
            if replica_context is not None and replica_context.num_replicas_in_sync > 1:
                grads = replica_context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
            factors = self._learning_rate_factors(
                [self._get_variable_index(v) for v in variables])
            if factors is not None:
                # Frozen variables (factor 0) have no gradient: not accumulated,
                # not in the global norm.
                grads = [_mask_frozen(g, f) for g, f in zip(grads, factors)]
            if self.accumulation_steps == 1:
                final_grads, norm = self._clip(grads)
            else:
                # The would-be update from the accumulated mean, computed in
                # every call (cheap next to the model) so that the only
                # conditional is in cross-replica context below.
                k = float(self.accumulation_steps)
                accumulators = [self._accumulator_for(v) for v in variables]
                final_grads, norm = self._clip(
                    [(acc + g) / k for acc, g in zip(accumulators, grads)]
                )
            learning_rate = tf.cast(self.learning_rate, "float32")
            if replica_context is None:
                # Cross-replica context (e.g. called under strategy.scope()
                # but outside strategy.run): gradients are already global.
                self._apply_merged(
                    tf.distribute.get_strategy(), grads, final_grads, variables,
                    learning_rate, norm,
                )
            else:
                replica_context.merge_call(
                    self._apply_merged,
                    args=(grads, final_grads, variables, learning_rate, norm),
                )

    def apply_gradients(self, grads_and_vars):
        grads, variables = zip(*list(grads_and_vars))
        self.apply(grads, variables)
        return self._iterations

    def _clip(self, grads):
        """Returns (gradients clipped by global norm, their norm before)."""
        norm = tf.linalg.global_norm(grads)
        if self.clip_norm is None:
            return grads, tf.cast(norm, "float32")
        clipped, _ = tf.clip_by_global_norm(grads, self.clip_norm, use_norm=norm)
        return clipped, tf.cast(norm, "float32")

    def _accumulator_for(self, variable):
        return self._accumulators[self._get_variable_index(variable)]

    def _apply_merged(self, strategy, grads, final_grads, variables, learning_rate,
                      norm):
        """Runs in cross-replica context: the state changes of one call."""
        indices = [self._get_variable_index(v) for v in variables]

        # Every replica holds the same norm (the gradients are all-reduced
        # before it is taken); in cross-replica context read the first.
        local_norm = strategy.experimental_local_results(norm)[0]
        finite = tf.math.is_finite(local_norm)
        factors = self._learning_rate_factors(indices)

        def apply_update():
            for position, (grad, var, index) in enumerate(zip(final_grads, variables, indices)):
                slots = [_tf_variable(s) for s in self._slots(index)]
                update_fn = self._update_fn(index)
                if self.skip_zero_gradients:
                    update_fn = _unless_zero_gradient(update_fn)
                if factors is not None:
                    update_fn = _with_learning_rate_factor(update_fn, factors[position])
                    if update_fn is None:
                        continue
                strategy.extended.update(
                    _tf_variable(var), update_fn,
                    args=(*slots, grad, learning_rate), group=False,
                )
            return tf.constant(True)

        def skip_update():
            # A NaN or infinite gradient would poison every weight and
            # moment: leave them as they are and count the skip (the
            # trainer's nan_policy decides whether to go on).
            strategy.extended.update(
                _tf_variable(self._nonfinite_updates), lambda v: v.assign_add(1),
                group=False,
            )
            return tf.constant(False)

        def update():
            tf.cond(finite, apply_update, skip_update)
            strategy.extended.update(
                _tf_variable(self._gradient_norm), lambda v, n: v.assign(n),
                args=(norm,), group=False,
            )

        if self.accumulation_steps == 1:
            update()
            self._iterations.assign_add(1)
            self._micro_steps.assign_add(1)
            return

        accumulators = [_tf_variable(self._accumulator_for(v)) for v in variables]
        is_update_step = tf.equal(
            (self._micro_steps + 1) % self.accumulation_steps, 0
        )

        def update_and_reset():
            update()
            for acc in accumulators:
                strategy.extended.update(
                    acc, lambda a: a.assign(tf.zeros_like(a)), group=False
                )
            return tf.constant(True)

        def accumulate():
            for grad, acc in zip(grads, accumulators):
                strategy.extended.update(
                    acc, lambda a, g: a.assign_add(g), args=(grad,), group=False
                )
            return tf.constant(False)

        tf.cond(is_update_step, update_and_reset, accumulate)
        self._iterations.assign_add(tf.cast(is_update_step, self._iterations.dtype))
        self._micro_steps.assign_add(1)

    # --------------------------------------------------------------- config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        # Keras's from_config deserialises the schedule in place; work on a
        # copy so the caller's dict stays a plain config.
        config = dict(config)
        multipliers = config.get("learning_rate_multipliers")
        if isinstance(multipliers, dict) and "class_name" in multipliers:
            config["learning_rate_multipliers"] = keras.saving.deserialize_keras_object(
                multipliers, custom_objects=custom_objects)
        return super().from_config(config, custom_objects=custom_objects)

    def get_config(self):
        config = super().get_config()
        for key in ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm",
                    "use_ema", "ema_momentum", "ema_overwrite_frequency",
                    "loss_scale_factor", "gradient_accumulation_steps"):
            config.pop(key, None)
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay_patterns),
            clip_norm=self.clip_norm,
            gradient_accumulation_steps=self.accumulation_steps,
            jit_update=self.jit_update,
            skip_zero_gradients=self.skip_zero_gradients,
        )
        multipliers = self.learning_rate_multipliers
        if isinstance(multipliers, dict):
            config["learning_rate_multipliers"] = [[k, v] for k, v in multipliers.items()]
        elif multipliers is not None:
            config["learning_rate_multipliers"] = keras.saving.serialize_keras_object(
                multipliers)
        return config


def _cast_pair(beta, dtype):
    """`(beta, 1 - beta)` as tensors of `dtype`, the difference taken first."""
    if isinstance(beta, (int, float)):
        return tf.cast(beta, dtype), tf.cast(1.0 - beta, dtype)
    beta = tf.cast(beta, dtype)
    return beta, 1.0 - beta


def _tf_variable(variable):
    """The backend `tf.Variable` (possibly distributed) behind a Keras one."""
    return variable.value if isinstance(variable, keras.Variable) else variable


# ------------------------------------------------------- per-variable updates
#
# Pure functions: (variable, m, v, gradient, learning_rate, *hyper) -> the
# new (variable, m, v). The hyper-parameters are float32 tensors, so one XLA
# compilation serves every variable of a shape.


def _adam_moments(m, v, gradient, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2):
    gradient, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2 = (
        tf.cast(x, m.dtype)
        for x in (gradient, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2))
    new_m = beta_1 * m + one_minus_beta_1 * gradient
    new_v = beta_2 * v + one_minus_beta_2 * tf.square(gradient)
    return new_m, new_v


def _adamw_math(variable, m, v, gradient, learning_rate, beta_1, one_minus_beta_1,
                beta_2, one_minus_beta_2, epsilon, weight_decay_rate):
    new_m, new_v = _adam_moments(m, v, gradient, beta_1, one_minus_beta_1, beta_2,
                                 one_minus_beta_2)
    epsilon, weight_decay_rate, learning_rate = (
        tf.cast(x, variable.dtype) for x in (epsilon, weight_decay_rate, learning_rate))
    update = new_m / (tf.sqrt(new_v) + epsilon) + weight_decay_rate * variable
    return variable - learning_rate * update, new_m, new_v


def _lamb_math(variable, m, v, gradient, learning_rate, t, beta_1, one_minus_beta_1,
               beta_2, one_minus_beta_2, epsilon, weight_decay_rate, adapt):
    new_m, new_v = _adam_moments(m, v, gradient, beta_1, one_minus_beta_1, beta_2,
                                 one_minus_beta_2)
    beta_1, beta_2, t, epsilon, weight_decay_rate, learning_rate = (
        tf.cast(x, variable.dtype)
        for x in (beta_1, beta_2, t, epsilon, weight_decay_rate, learning_rate))
    m_hat = new_m / (1.0 - tf.pow(beta_1, t))
    v_hat = new_v / (1.0 - tf.pow(beta_2, t))
    update = m_hat / (tf.sqrt(v_hat) + epsilon) + weight_decay_rate * variable
    if adapt:
        w_norm = tf.norm(variable)
        u_norm = tf.norm(update)
        ratio = tf.where(
            (w_norm > 0.0) & (u_norm > 0.0),
            tf.math.divide_no_nan(w_norm, u_norm),
            tf.ones_like(w_norm),
        )
        update = ratio * update
    return variable - learning_rate * update, new_m, new_v


def _on_handles(math_fn):
    """`math_fn` as one XLA computation reading and writing variable handles.

    Handles (resource tensors) rather than variables are the arguments: a
    `tf.function` traced inside another one binds variable arguments to
    the variables of its first call, so a second variable of the same shape
    would update the first one's slots.
    """

    def run(handles, dtype, *args):
        values = [tf.raw_ops.ReadVariableOp(resource=h, dtype=dtype) for h in handles]
        for handle, value in zip(handles, math_fn(*values, *args)):
            tf.raw_ops.AssignVariableOp(resource=handle, value=value)

    return tf.function(run, jit_compile=True)


# Module-level, so that optimizers hold no tf.function (which would become a
# node of their checkpoints); handles are arguments, so sharing is safe.
_ADAMW_ON_HANDLES = _on_handles(_adamw_math)
_LAMB_MATH = {adapt: functools.partial(_lamb_math, adapt=adapt) for adapt in (True, False)}
_LAMB_ON_HANDLES = {adapt: _on_handles(fn) for adapt, fn in _LAMB_MATH.items()}


def _plain_resource_variable(variable):
    if not isinstance(variable, tf.Variable) or isinstance(
            variable, tf.distribute.DistributedValues):
        return False
    try:
        return variable.handle.dtype == tf.resource
    except (AttributeError, ValueError, TypeError):
        return False


# ----------------------------------------------------------------- optimizers


class _AdamMoments(_BertOptimizer):
    """Adam's constants and two moment slots (`<_SLOTS>_m`, `<_SLOTS>_v`), the
    part `AdamWeightDecay` and `Lamb` share; `_NAME` is the default name."""

    _SLOTS = None
    _NAME = None

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay_rate=0.0,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm=None,
        gradient_accumulation_steps=1,
        name=None,
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay_rate=weight_decay_rate,
            exclude_from_weight_decay=exclude_from_weight_decay,
            clip_norm=clip_norm,
            gradient_accumulation_steps=gradient_accumulation_steps,
            name=self._NAME if name is None else name,
            **kwargs,
        )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self._m = self.add_optimizer_variables(variables, self._SLOTS + "_m")
        self._v = self.add_optimizer_variables(variables, self._SLOTS + "_v")

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AdamWeightDecay(_AdamMoments):
    """google-research/bert's `AdamWeightDecayOptimizer` for Keras 3.

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        u = m / (sqrt(v) + epsilon)  [+ weight_decay_rate * w if decayed]
        w = w - lr * u

    No bias correction: early updates are smaller than Adam's, which
    together with warm-up is what Google trained BERT with. The moment slots
    are named `adam_m` / `adam_v` as in Google's checkpoints.

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay_rate: decoupled decay coefficient (Google: 0.01).
        beta_1, beta_2, epsilon: Adam constants (Google: 0.9, 0.999, 1e-6).
        exclude_from_weight_decay: regexes searched in variable paths.
        clip_norm: global-norm clip threshold, None to disable.
        gradient_accumulation_steps: micro-batches per update (1 = none).
        name: optimizer name.
    """

    _SLOTS = "adam"
    _NAME = "AdamWeightDecay"

    def _update_fn(self, index):
        hyper = self._moment_hyper(index)

        def update(variable, m, v, gradient, learning_rate):
            self._update_in_place(_adamw_math, _ADAMW_ON_HANDLES, (variable, m, v),
                                  gradient, learning_rate, *hyper)

        return update


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Lamb(_AdamMoments):
    """LAMB with BERT's weight-decay exclusions.

        m, v as Adam; m_hat = m / (1 - beta_1^t); v_hat = v / (1 - beta_2^t)
        u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w
        r = ||w|| / ||u||   (1 if either norm is 0)
        w = w - lr * r * u

    Variables matching `exclude_from_weight_decay` get no decay and r = 1.
    Arguments as for `AdamWeightDecay`.
    """

    _SLOTS = "lamb"
    _NAME = "Lamb"

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        # Whether each variable is "adapted" (decay + trust ratio): unlike
        # `_decay_flags` this does not depend on weight_decay_rate.
        self._adapt_flags = [
            not any(re.search(p, getattr(v, "path", None) or v.name)
                    for p in self.exclude_from_weight_decay_patterns)
            for v in variables
        ]

    def _update_fn(self, index):
        hyper = self._moment_hyper(index)
        adapt = self._adapt_flags[index]

        def update(variable, m, v, gradient, learning_rate):
            # `iterations` counts completed updates; this is update number t.
            t = tf.cast(self._iterations + 1, "float32")
            self._update_in_place(_LAMB_MATH[adapt], _LAMB_ON_HANDLES[adapt],
                                  (variable, m, v), gradient, learning_rate, t, *hyper)

        return update


# ------------------------------------------------------------------- factory


def create_optimizer(
    init_lr,
    num_train_steps,
    num_warmup_steps,
    optimizer_type="adamw",
    weight_decay_rate=0.01,
    clip_norm=1.0,
    gradient_accumulation_steps=1,
    exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    jit_update=True,
    skip_zero_gradients=False,
    lr_schedule="linear",
    stlr_cut_frac=0.1,
    stlr_ratio=32.0,
    layer_lr_decay=1.0,
    unfreeze_steps=0,
    learning_rate_multipliers=None,
):
    """Google's `create_optimizer` for Keras 3: schedule + optimizer.

    Args:
        init_lr: peak learning rate.
        num_train_steps: optimizer updates until the rate reaches 0. With
            accumulation these are updates, not micro-batches.
        num_warmup_steps: updates of linear warm-up.
        optimizer_type: "adamw" (`AdamWeightDecay`, Google's) or "lamb".
        weight_decay_rate: decoupled weight decay (Google: 0.01).
        clip_norm: global-norm clipping threshold (Google: 1.0); None = off.
        gradient_accumulation_steps: micro-batches per update.
        exclude_from_weight_decay, beta_1, beta_2, epsilon, jit_update,
            skip_zero_gradients: see the classes and the module docstring.
        lr_schedule: "linear" (Google's `LinearWarmupLinearDecay`) or "stlr"
            (ULMFiT's `SlantedTriangular` with `stlr_cut_frac` and
            `stlr_ratio`; it rises over its own first `cut_frac` of the
            updates, so `num_warmup_steps` is not used).
        layer_lr_decay, unfreeze_steps: ULMFiT's discriminative rates and
            gradual unfreezing by layer group
            (`finetuning_techniques.LayerwiseLearningRates`); 1.0 and 0 (the
            defaults) leave every variable at the schedule's rate.
        learning_rate_multipliers: your own per-variable factors instead
            (see `_BertOptimizer`).

    Returns:
        An `AdamWeightDecay` or `Lamb` whose learning rate is a
        `LinearWarmupLinearDecay` (or `SlantedTriangular`).
    """
    if lr_schedule == "linear":
        schedule = LinearWarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    elif lr_schedule == "stlr":
        schedule = SlantedTriangular(init_lr, num_train_steps, stlr_cut_frac, stlr_ratio)
    else:
        raise ValueError(f"lr_schedule (--lr_schedule) must be one of {', '.join(LR_SCHEDULES)}, "
                         f"got {lr_schedule!r}.")
    if layer_lr_decay != 1.0 or unfreeze_steps:
        if learning_rate_multipliers is not None:
            raise ValueError("Give either learning_rate_multipliers or layer_lr_decay / "
                             "unfreeze_steps, not both.")
        learning_rate_multipliers = finetuning_techniques.LayerwiseLearningRates(
            layer_lr_decay, unfreeze_steps)
    classes = {"adamw": AdamWeightDecay, "adam": AdamWeightDecay, "lamb": Lamb}
    key = optimizer_type.lower()
    if key not in classes:
        raise ValueError(
            f"Unknown optimizer_type {optimizer_type!r}; use 'adamw' or 'lamb'."
        )
    return classes[key](
        learning_rate=schedule,
        weight_decay_rate=weight_decay_rate,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay,
        clip_norm=clip_norm,
        gradient_accumulation_steps=gradient_accumulation_steps,
        jit_update=jit_update,
        skip_zero_gradients=skip_zero_gradients,
        learning_rate_multipliers=learning_rate_multipliers,
    )
