"""The one training loop every run script uses.

A custom loop under `tf.distribute` rather than `model.fit` (Keras 3's fit
does not work under MultiWorkerMirroredStrategy, keras-team/keras#20585, and
a custom loop gives exact control over accumulation, checkpoints and resume).

Contract with the model: it has a method
``compute_loss_and_metrics(features, training) -> (loss, metrics)`` where
`loss` is this replica's scalar loss and `metrics` maps names to
``(sum, count)`` pairs (summed over replicas and steps, shown as sum/count).
Objectives only contribute losses and metrics; everything else lives here:

* one optimizer update per step, from `gradient_accumulation_steps`
  micro-batches (the optimizer accumulates, clips and applies; see
  `modeling.training.optimization`);
* checkpoints of model + optimizer (step, slots, accumulators, and the count
  of micro-batches consumed, which is the input position) every
  `save_checkpoints_steps`, and automatic resume from the latest one: a run
  killed at any moment restarts from its last checkpoint with identical
  state, and skips the batches it already trained on (with a seeded input
  pipeline, it then sees exactly the batches an uninterrupted run would);
* a NaN or infinite gradient never reaches the weights (the optimizer skips
  that update); with ``nan_policy="stop"`` (the default) training then
  stops with `NonFiniteLossError`, the last checkpoint being the last good
  state; with ``"skip"`` it goes on and counts the skipped updates;
* SIGTERM (after `data.termination.install()`, as every run script does)
  finishes the current step, saves a checkpoint and exits;
* TensorBoard scalars (every metric, learning rate, gradient norm,
  examples/sec) under ``model_dir/train`` and ``model_dir/eval``;
* a progress line with steps/sec and the time left;
* with `profile_steps=(A, B)`, a TensorBoard profile of steps A to B
  (`tf.profiler.experimental`) under ``model_dir/train/plugins/profile/``.
"""

import collections
import math
import os
import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import atomic
from data import termination
from modeling.training import distribute
from modeling.training import pruning

NAN_POLICIES = ("stop", "skip")

PROFILE_STEPS_HELP = ("--profile_steps must be A,B with whole numbers 0 <= A <= B (the first "
                      "and last step to profile, e.g. 10,12)")


def parse_profile_steps(value):
    """``"A,B"`` (or ``(A, B)``) -> ``(A, B)`` with 0 <= A <= B; None or "" -> None.

    Raises:
      ValueError: naming --profile_steps and what it expects.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        first, last = (int(str(p).strip()) for p in parts)
    except ValueError:
        raise ValueError("%s; got %r" % (PROFILE_STEPS_HELP, value)) from None
    if not 0 <= first <= last:
        raise ValueError("%s; got %r" % (PROFILE_STEPS_HELP, value))
    return first, last


class _ProfileWindow(object):
    """Starts TensorFlow's profiler before the loop that runs step `first`, stops after `last`.

    Steps are counted as the progress lines and TensorBoard count them: step
    N is the N-th update (0 and 1 both mean the first). The profiler starts
    and stops between calls into TensorFlow, so with steps_per_loop > 1 the
    window grows to whole loops. The trace goes to
    ``logdir/plugins/profile/<run>/<host>.xplane.pb``, which TensorBoard's
    profile plugin reads.
    """

    def __init__(self, steps, logdir, enabled=True):
        # Step 0 and step 1 are both the first update.
        self.first, self.last = (max(1, steps[0]), max(1, steps[1])) if steps else (None, None)
        self.logdir = logdir
        self.enabled = enabled and steps is not None
        self.running = False
        self.done = False

    def before(self, step, loop_length):
        """Before a loop of `loop_length` updates that starts with `step` updates done."""
        if not self.enabled or self.running or self.done:
            return
        if step + 1 <= self.last and step + loop_length >= self.first:
            try:
                tf.profiler.experimental.start(self.logdir)
            except tf.errors.AlreadyExistsError:
                logging.warning("--profile_steps: another profiler is running; not profiling.")
                self.done = True
                return
            self.running = True
            logging.info("Profiling from step %d (--profile_steps=%d,%d) into %s",
                         step + 1, self.first, self.last, self.logdir)

    def after(self, step):
        """After a loop that ended with `step` updates done."""
        if self.running and step >= self.last:
            self.stop(step)

    def stop(self, step=None):
        if not self.running:
            return
        tf.profiler.experimental.stop()
        self.running, self.done = False, True
        logging.info("Profile written%s to %s (TensorBoard: the Profile tab of "
                     "--logdir=%s)", "" if step is None else " up to step %d" % step,
                     os.path.join(self.logdir, "plugins", "profile"),
                     os.path.dirname(self.logdir))


class NonFiniteLossError(ValueError):
    """The loss or its gradient became NaN or infinite in training, or an evaluation
    loss did (nan_policy="stop")."""


def _as_int(variable):
    """A scalar (Keras or tf.distribute) variable's value as a Python int."""
    value = getattr(variable, "value", variable)
    return int(tf.get_static_value(tf.convert_to_tensor(value)))


def _format_seconds(seconds):
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return "%dh%02dm" % (hours, minutes)
    if minutes:
        return "%dm%02ds" % (minutes, seconds)
    return "%ds" % seconds


def _xla_loses_in_bfloat16(strategy):
    """True for mixed bf16 when training runs on CPUs (XLA CPU has no bf16 matrix units)."""
    if keras.mixed_precision.global_policy().name != "mixed_bfloat16":
        return False
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return False
    return not tf.config.list_logical_devices("GPU")


class MetricTotals(object):
    """Running (sum, count) totals of the metrics a step returns."""

    def __init__(self):
        self.sums = collections.OrderedDict()

    def add(self, metrics):
        for name, (total, count) in metrics.items():
            s, c = self.sums.get(name, (0.0, 0.0))
            self.sums[name] = (s + float(total), c + float(count))

    def result(self):
        return collections.OrderedDict(
            (name, s / c if c else 0.0) for name, (s, c) in self.sums.items())

    def reset(self):
        self.sums.clear()


class Trainer(object):
    """Trains and evaluates a model under a `tf.distribute` strategy.

    Args:
      strategy: a `tf.distribute.Strategy` (see `modeling.training.distribute`).
      model_fn: () -> model with `compute_loss_and_metrics`; called under
        the strategy's scope.
      optimizer_fn: () -> optimizer (see `modeling.training.optimization`); called
        under the strategy's scope.
      model_dir: checkpoints go here, TensorBoard logs in `train/`, `eval/`.
      train_batch_size: global batch size of one micro-batch (for
        examples/sec).
      num_train_steps: optimizer updates to train for in total (a resumed
        run continues up to the same total).
      save_checkpoints_steps: checkpoint every this many updates.
      keep_checkpoint_max: checkpoints kept.
      log_steps: updates between progress lines and TensorBoard points.
      gradient_accumulation_steps: micro-batches per update; must match the
        optimizer's setting.
      use_xla: compile the training step with XLA: on one replica the whole
        step (forward, backward, optimizer update, metrics) is one XLA
        computation; with several replicas the forward and backward pass
        (the all-reduce and the update stay outside).
      init_fn: optional `fn(model)` run once when there is no checkpoint to
        resume from (e.g. loading `--init_checkpoint`).
      checkpoint_data_position: on resume, skip the micro-batches already
        consumed (counted by the optimizer, so it is in every checkpoint),
        so a resumed run continues with the next unseen batch.
      loss_scale: dynamic loss scaling (wraps the optimizer in Keras's
        `LossScaleOptimizer`); None: on when the global dtype policy is
        mixed_float16 (bfloat16 needs none).
      nan_policy: "stop" (raise `NonFiniteLossError` at the first update
        whose gradient is NaN or infinite; that update is not applied and
        no checkpoint is written) or "skip" (skip such updates and go on).
      steps_per_loop: updates run by one call into TensorFlow (a graph loop,
        as Model Garden's Orbit does), which cuts the host round trips
        between steps. A loop never crosses a logging or checkpoint
        boundary, and it ends early at a non-finite update
        (nan_policy="stop") or when SIGTERM arrives.
      weight_pruning: optional `pruning.PruningSchedule`: magnitude pruning
        of the encoder's dense kernels (`pruning.encoder_dense_kernels`)
        during training, its masks recomputed on the schedule and applied
        after every update inside the training loop (in cross-replica
        context, so every replica holds the same zeros), saved in the
        checkpoints, the measured sparsity logged as ``weight_sparsity``.
      profile_steps: optional ``(A, B)`` or ``"A,B"``, 0 <= A <= B: write a
        TensorBoard profile (`tf.profiler.experimental`) of training steps A
        to B (step N = the N-th update, as in the progress lines) under
        ``model_dir/train/plugins/profile/`` (the chief only). With
        steps_per_loop > 1 the profiled window is rounded out to whole loops.
    """

    def __init__(self, strategy, model_fn, optimizer_fn, model_dir, train_batch_size,
                 num_train_steps, save_checkpoints_steps=1000, keep_checkpoint_max=5,
                 log_steps=100, gradient_accumulation_steps=1, use_xla=False,
                 init_fn=None, checkpoint_data_position=True, loss_scale=None,
                 nan_policy="stop", steps_per_loop=1, weight_pruning=None, profile_steps=None):
        if nan_policy not in NAN_POLICIES:
            raise ValueError("nan_policy (--nan_policy) must be one of %s, got %r"
                             % (", ".join(NAN_POLICIES), nan_policy))
        self.nan_policy = nan_policy
        self.strategy = strategy
        self.model_dir = model_dir
        self.train_batch_size = train_batch_size
        self.num_train_steps = int(num_train_steps)
        self.save_checkpoints_steps = max(1, int(save_checkpoints_steps))
        self.keep_checkpoint_max = keep_checkpoint_max
        self.log_steps = max(1, int(log_steps))
        self.accumulation_steps = max(1, int(gradient_accumulation_steps))
        self.use_xla = use_xla
        if int(steps_per_loop) < 1:
            raise ValueError("steps_per_loop (--steps_per_loop) must be at least 1, got %r"
                             % (steps_per_loop,))
        self.steps_per_loop = int(steps_per_loop)
        self.profile_steps = parse_profile_steps(profile_steps)
        self.init_fn = init_fn
        self.checkpoint_data_position = checkpoint_data_position
        self.is_chief = distribute.is_chief(strategy)
        if loss_scale is None:
            loss_scale = keras.mixed_precision.global_policy().name == "mixed_float16"
        self.loss_scale = loss_scale
        with strategy.scope():
            self.model = model_fn()
            self.optimizer = optimizer_fn()
            if loss_scale:
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            # Slots and accumulators exist before step 1, so a checkpoint can
            # restore them and strategy.run never has to create variables.
            self.optimizer.build(self.model.trainable_variables)
            self.pruner = (None if weight_pruning is None else weight_pruning.pruner(
                pruning.encoder_dense_kernels(self.model), self.num_train_steps))
        # The optimizer that counts micro-steps and reports gradient norms
        # (inside the loss-scale wrapper, if any).
        self._base_optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        opt_steps = getattr(self._base_optimizer, "accumulation_steps", 1)
        if opt_steps != self.accumulation_steps:
            raise ValueError("The optimizer accumulates %d micro-batches but the trainer "
                             "was given gradient_accumulation_steps=%d"
                             % (opt_steps, self.accumulation_steps))
        self._train_step = None
        self._eval_step = None
        self.history = []
        # Set from the SIGTERM watchdog thread: a running graph loop stops
        # after its current update (see data.termination.on_request).
        self._stop_flag = tf.Variable(False, trainable=False, name="stop_requested")
        # Under MultiWorkerMirroredStrategy the workers must stop after the same
        # update (saving is collective): the flags are all-reduced in the loop,
        # and this holds the agreed value of the last check.
        self._multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        self._stop_agreed = tf.Variable(False, trainable=False, name="stop_agreed")

    # ------------------------------------------------------------------ steps

    @property
    def global_step(self):
        """The optimizer's update counter (a variable)."""
        return self.optimizer.iterations

    def current_step(self):
        """Updates done so far, as a Python int."""
        return _as_int(self.optimizer.iterations)

    def _loss_and_grads(self, features):
        with tf.GradientTape() as tape:
            loss, metrics = self.model.compute_loss_and_metrics(features, training=True)
            # The optimizer SUMS gradients over replicas: scale so that the
            # update uses the mean over the global batch.
            scaled = loss / self.strategy.num_replicas_in_sync
            if self.loss_scale:
                scaled = self.optimizer.scale_loss(scaled)
        variables = self.model.trainable_variables
        grads = tape.gradient(scaled, variables)
        return grads, metrics

    def _build_train_step(self):
        """Returns `train_loop(iterator, num_steps) -> summed metrics`.

        Runs up to `num_steps` updates (each from `accumulation_steps`
        micro-batches) in one graph loop; the metrics returned are the
        (sum, count) pairs summed over the updates done.
        """
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        if self.use_xla and _xla_loses_in_bfloat16(strategy):
            logging.warning(
                "--use_xla ignored: with --mixed_precision=bfloat16 on CPUs, TensorFlow's "
                "XLA CPU backend does not use the bf16 matrix instructions (AVX512-BF16, "
                "AMX) that its oneDNN kernels use, so XLA would make the step slower.")
            self.use_xla = False
        whole_step_xla = self.use_xla and strategy.num_replicas_in_sync == 1
        loss_and_grads = self._loss_and_grads
        if self.use_xla and not whole_step_xla:
            loss_and_grads = tf.function(loss_and_grads, jit_compile=True)

        def replica_step(features):
            grads, metrics = loss_and_grads(features)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return metrics

        # The model and the optimizer are written with explicit TensorFlow
        # control flow (a Python `if` on a tensor raises at tracing); not
        # running them through AutoGraph halves the tracing time of a step
        # (measured ~10 s -> ~6 s for the demo job) and the graph is the same.
        replica_step = tf.autograph.experimental.do_not_convert(replica_step)

        if strategy.num_replicas_in_sync == 1:
            # A function of its own, so that the two calls in `train_loop` (the
            # first update, then the loop's body) share one trace (tracing a
            # step takes seconds). Whole step under XLA: forward, backward,
            # update and metrics, one XLA computation. (With several
            # replicas the update's cross-replica merge_call must not run
            # inside a nested function.)
            replica_step = tf.function(replica_step, jit_compile=True if whole_step_xla else None)

        pruner = self.pruner

        def one_update(iterator):
            totals = None
            for _ in range(self.accumulation_steps):
                per_replica = strategy.run(replica_step, args=(next(iterator),))
                reduced = tf.nest.map_structure(
                    lambda t: strategy.reduce(tf.distribute.ReduceOp.SUM, t, axis=None),
                    per_replica)
                totals = reduced if totals is None else tf.nest.map_structure(
                    tf.add, totals, reduced)
            if pruner is not None:  # after the update: masks due? then applied
                pruner.step(optimizer.iterations)
            return totals

        nonfinite = getattr(self._base_optimizer, "nonfinite_updates", None)
        stop_on_nonfinite = self.nan_policy == "stop" and nonfinite is not None
        stop_flag = self._stop_flag
        multi_worker, stop_agreed = self._multi_worker, self._stop_agreed

        def stop_requested():
            """This process's SIGTERM flag; with several workers, whether any has one."""
            if not multi_worker:
                return stop_flag.read_value()
            def replica():  # how many workers' replicas stop (read on each replica)
                local = tf.cast(stop_flag.read_value(), tf.int32) * tf.ones([], tf.int32)
                return tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, local)

            per_replica = strategy.run(replica)
            agreed = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None) > 0
            stop_agreed.assign(agreed)
            return agreed

        @tf.function
        def train_loop(iterator, num_steps):
            start_nonfinite = (tf.identity(tf.convert_to_tensor(nonfinite))
                               if stop_on_nonfinite else 0)
            totals = one_update(iterator)
            for _ in tf.range(num_steps - 1):
                if stop_requested():
                    break
                if stop_on_nonfinite:
                    if tf.not_equal(tf.convert_to_tensor(nonfinite), start_nonfinite):
                        break
                totals = tf.nest.map_structure(tf.add, totals, one_update(iterator))
            if multi_worker:  # the agreed flag after the last update, for the Python loop
                stop_requested()
            return totals

        return train_loop

    def _build_eval_step(self):
        model, strategy = self.model, self.strategy

        def replica_step(features):
            _, metrics = model.compute_loss_and_metrics(features, training=False)
            return metrics

        @tf.function
        def eval_step(iterator):
            per_replica = strategy.run(replica_step, args=(next(iterator),))
            return tf.nest.map_structure(
                lambda t: strategy.reduce(tf.distribute.ReduceOp.SUM, t, axis=None),
                per_replica)

        return eval_step

    # ------------------------------------------------------------- checkpoint

    def _checkpoint_dir(self):
        if self.is_chief:
            return self.model_dir
        # Every worker must take part in saving (the variables are
        # mirrored), but only the chief's files are kept.
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.model_dir, ".worker_tmp",
                            "%s_%d" % (resolver.task_type, resolver.task_id))

    def _rng_states(self):
        """The state variables of the model's random generators (dropout).

        Keras keeps them in `SeedGenerator` objects, which TensorFlow's
        checkpoint tracking does not see; without them a resumed run would
        replay the dropout masks of its first steps.
        """
        return [v for v in self.model.variables
                if v.name.endswith("seed_generator_state")]

    def _make_manager(self):
        extra = {} if self.pruner is None else {"pruning_masks": self.pruner.masks}
        checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                         random_states=self._rng_states(), **extra)
        manager = tf.train.CheckpointManager(
            checkpoint, directory=self._checkpoint_dir(),
            max_to_keep=self.keep_checkpoint_max, checkpoint_name="ckpt",
            step_counter=self.optimizer.iterations)
        return checkpoint, manager

    def latest_checkpoint(self):
        return tf.train.latest_checkpoint(self.model_dir)

    def restore_or_initialize(self):
        """Resumes from the latest checkpoint in model_dir, else runs init_fn.

        Returns:
          the path restored from, or None.
        """
        checkpoint, _ = self._make_manager()
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest:
            if self.pruner is not None and not any(
                    name.startswith("pruning_masks/") for name, _ in tf.train.list_variables(latest)):
                raise ValueError(
                    "%s holds no pruning masks: it was written without --target_sparsity. "
                    "Start pruning in a new --output_dir with --init_checkpoint=%s, or resume "
                    "without the pruning flags" % (latest, latest))
            status = checkpoint.restore(latest)
            status.assert_existing_objects_matched()
            logging.info("Resumed from %s at step %d", latest, _as_int(self.global_step))
            return latest
        if self.init_fn is not None:
            self.init_fn(self.model)
        return None

    # ------------------------------------------------------------------ train

    def train(self, train_input_fn):
        """Trains up to `num_train_steps`, resuming if a checkpoint exists.

        Args:
          train_input_fn: `fn(input_context) -> tf.data.Dataset` of
            per-replica batches (see `data.input_pipeline`).

        Returns:
          the metrics of the last logging window (dict name -> float).
        """
        checkpoint, manager = self._make_manager()
        self.restore_or_initialize()
        input_fn = train_input_fn
        consumed = _as_int(getattr(self._base_optimizer, "micro_steps",
                                  self.optimizer.iterations))
        if consumed and self.checkpoint_data_position:
            input_fn = self._skipping_input_fn(train_input_fn, consumed)
        dataset = self.strategy.distribute_datasets_from_function(input_fn)
        iterator = iter(dataset)
        if self._train_step is None:
            self._train_step = self._build_train_step()
        writer = (tf.summary.create_file_writer(os.path.join(self.model_dir, "train"))
                  if self.is_chief else tf.summary.create_noop_writer())
        step = _as_int(self.global_step)
        if step >= self.num_train_steps:
            logging.info("Already trained to step %d (num_train_steps=%d).",
                         step, self.num_train_steps)
        nonfinite_counter = getattr(self._base_optimizer, "nonfinite_updates", None)
        nonfinite = _as_int(nonfinite_counter) if nonfinite_counter is not None else 0
        self._stop_flag.assign(False)
        self._stop_agreed.assign(False)
        profile = _ProfileWindow(self.profile_steps, os.path.join(self.model_dir, "train"),
                                 enabled=self.is_chief)
        try:
            with termination.graceful(), termination.on_request(
                    lambda: self._stop_flag.assign(True)):
                last = self._train_loop(iterator, checkpoint, manager, writer, step, nonfinite,
                                        profile)
        finally:
            profile.stop()
        writer.flush()
        return last

    def _train_loop(self, iterator, checkpoint, manager, writer, step, nonfinite, profile=None):
        del checkpoint  # saved through the manager
        profile = profile or _ProfileWindow(None, None)
        start_step = step
        totals = MetricTotals()
        window_start = time.time()
        window_step = step
        run_start = time.time()
        last = {}
        nonfinite_counter = getattr(self._base_optimizer, "nonfinite_updates", None)
        while step < self.num_train_steps:
            loop_length = self._loop_length(step)
            profile.before(step, loop_length)
            metrics = self._train_step(iterator, tf.constant(loop_length, tf.int32))
            step = _as_int(self.global_step)
            profile.after(step)
            if nonfinite_counter is not None:
                count = _as_int(nonfinite_counter)
                if count > nonfinite:
                    self._on_nonfinite(step, count - nonfinite, count, metrics)
                    nonfinite = count
            totals.add(metrics)
            if step % self.log_steps == 0 or step == self.num_train_steps:
                now = time.time()
                elapsed = max(now - window_start, 1e-9)
                steps_per_sec = (step - window_step) / elapsed
                last = totals.result()
                last["learning_rate"] = float(self._current_learning_rate())
                last["steps_per_second"] = steps_per_sec
                last["examples_per_second"] = (
                    steps_per_sec * self.train_batch_size * self.accumulation_steps)
                norm = getattr(self._base_optimizer, "gradient_norm", None)
                if norm is not None:
                    last["gradient_norm"] = float(norm.numpy())
                if self.pruner is not None:
                    last["weight_sparsity"] = self.pruner.measured_sparsity()
                with writer.as_default(step=step):
                    for name, value in last.items():
                        tf.summary.scalar(name, value)
                done = (step - start_step) / max(now - run_start, 1e-9)
                eta = (self.num_train_steps - step) / max(done, 1e-9)
                logging.info(
                    "step %d/%d  %s  %.2f steps/s  ETA %s", step, self.num_train_steps,
                    "  ".join("%s=%.4g" % (k, v) for k, v in last.items()
                              if k not in ("steps_per_second", "examples_per_second")),
                    steps_per_sec, _format_seconds(eta))
                self.history.append((step, dict(last)))
                totals.reset()
                window_start, window_step = time.time(), step
            path = None
            if step % self.save_checkpoints_steps == 0 or step == self.num_train_steps:
                path = manager.save(checkpoint_number=step)
                if self.is_chief:
                    logging.info("Saved checkpoint %s", path)
            # Several workers act on the agreed flag only, so that all of them
            # save the same step (a SIGTERM that came after the last check is
            # seen by the next one).
            if self._stop_agreed.numpy() if self._multi_worker else termination.requested():
                if path is None:
                    path = manager.save(checkpoint_number=step)
                writer.flush()
                raise termination.Terminated(
                    "terminated by SIGTERM%s at step %d; saved %s (run the same command "
                    "again to resume)" % (
                        "" if termination.requested() else " of another worker", step, path))
        return last

    def _loop_length(self, step):
        """Updates for the next loop: up to the next log/checkpoint/end boundary."""
        n = min(self.steps_per_loop, self.num_train_steps - step)
        for every in (self.log_steps, self.save_checkpoints_steps):
            n = min(n, every - step % every)
        return max(1, n)

    def _on_nonfinite(self, step, new, total, metrics):
        loss = metrics.get("loss") if isinstance(metrics, dict) else None
        loss_text = ""
        if loss is not None:
            value = float(loss[0]) / max(float(loss[1]), 1e-9)
            loss_text = " (loss %s)" % value
        if self.nan_policy == "skip":
            logging.warning("step %d: %d update(s) skipped because the gradient was NaN or "
                            "infinite%s; %d skipped so far (--nan_policy=skip).",
                            step, new, loss_text, total)
            return
        latest = self.latest_checkpoint()
        raise NonFiniteLossError(
            "step %d: the loss or its gradient became NaN or infinite%s; training stopped "
            "without applying that update. Last good checkpoint: %s. Lower "
            "--learning_rate, check the input data, or pass --nan_policy=skip to skip "
            "such updates" % (step, loss_text, latest or "none (nothing was saved yet)"))

    def _skipping_input_fn(self, input_fn, consumed_steps):
        """Wraps `input_fn` to skip what `consumed_steps` micro-steps read.

        Each micro-step takes one batch per local replica from its worker's
        input pipeline.
        """
        strategy = self.strategy

        def skipping(input_context):
            dataset = input_fn(input_context)
            pipelines = input_context.num_input_pipelines if input_context else 1
            per_pipeline = max(1, strategy.num_replicas_in_sync // max(1, pipelines))
            return dataset.skip(consumed_steps * per_pipeline)

        logging.info("Skipping the %d micro-batches already trained on.", consumed_steps)
        return skipping

    def _current_learning_rate(self):
        lr = self._base_optimizer.learning_rate
        return lr.numpy() if hasattr(lr, "numpy") else lr

    # ------------------------------------------------------------------- eval

    def evaluate(self, eval_input_fn, max_steps, restore=True):
        """Evaluates for `max_steps` batches; returns Google-style results.

        Returns:
          dict with every metric (sum/count over all batches) and
          `global_step`; also written to TensorBoard under `eval/`.
        """
        latest = None
        if restore:
            latest = self.latest_checkpoint()
            if latest:
                checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
                checkpoint.restore(latest).expect_partial()
        if self._eval_step is None:
            self._eval_step = self._build_eval_step()
        dataset = self.strategy.distribute_datasets_from_function(eval_input_fn)
        iterator = iter(dataset)
        totals = MetricTotals()
        steps = 0
        while max_steps is None or steps < max_steps:
            try:
                metrics = self._eval_step(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            totals.add(metrics)
            steps += 1
        results = totals.result()
        results["global_step"] = _as_int(self.global_step)
        self._check_finite_eval(results, steps, latest)
        if self.is_chief:
            writer = tf.summary.create_file_writer(os.path.join(self.model_dir, "eval"))
            with writer.as_default(step=results["global_step"]):
                for name, value in results.items():
                    if name != "global_step":
                        tf.summary.scalar(name, value)
            writer.flush()
        return results

    def _check_finite_eval(self, results, steps, checkpoint):
        """A NaN or infinite evaluation loss stops (nan_policy="stop") before it is reported.

        Only losses (and perplexities) are checked: a metric such as a
        correlation of constant predictions may be NaN for a sound model.
        """
        bad = ["%s = %s" % (name, value) for name, value in results.items()
               if ("loss" in name or "perplexity" in name) and not math.isfinite(value)]
        if not bad:
            return
        step = results["global_step"]
        if checkpoint:
            where = "the checkpoint %s" % checkpoint
        else:
            latest = self.latest_checkpoint()
            where = "the model at step %d" % step
            if latest and latest.endswith("ckpt-%d" % step):
                where += " (%s)" % latest
        if self.nan_policy == "skip":
            logging.warning("evaluation of %s over %d batch(es): %s (NaN or infinite); "
                            "reported anyway (--nan_policy=skip).", where, steps, ", ".join(bad))
            return
        raise NonFiniteLossError(
            "evaluation of %s over %d batch(es) gave %s (NaN or infinite); no eval results "
            "were written. Check the eval data and that model, or pass "
            "--nan_policy=skip to report such results" % (where, steps, ", ".join(bad)))

    # ---------------------------------------------------------------- predict

    def predict(self, predict_input_fn, output_names=None, restore=True):
        """Runs the model in inference mode; returns numpy arrays in input order.

        Each batch goes through ``model(features, training=False)`` under
        the strategy (every replica takes its own batch); the per-replica
        results are put back in the order the input pipeline produced them.
        Under a multi-worker strategy every worker reads and predicts the
        whole input (inference needs no cross-worker communication), so
        each worker gets all predictions, in order.

        Args:
          predict_input_fn: `fn(input_context) -> tf.data.Dataset` of
            per-replica batches; finite (read once). A last partial batch is
            fine.
          output_names: names of the model's outputs (keys of the dict it
            returns; a model returning one tensor calls it "output") or of
            input features to pass through, e.g. "label_ids",
            "is_real_example"; a model output wins over a feature of the same
            name. None: all model outputs.
          restore: first load the latest checkpoint in `model_dir`, if any.

        Returns:
          dict name -> np.ndarray whose first axis runs over the examples.
        """
        if restore:
            latest = self.latest_checkpoint()
            if latest:
                checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
                checkpoint.restore(latest).expect_partial()
        strategy = self.strategy
        model = self.model
        names = tuple(output_names) if output_names is not None else None

        def replica_step(features):
            outputs = model(features, training=False)
            if not isinstance(outputs, dict):
                outputs = {"output": outputs}
            selected = {}
            for name in (names if names is not None else tuple(outputs)):
                if name in outputs:
                    value = outputs[name]
                elif name in features:
                    value = features[name]
                else:
                    raise ValueError(
                        "predict: %r is neither a model output (%s) nor an input feature "
                        "(%s)." % (name, ", ".join(sorted(outputs)), ", ".join(sorted(features))))
                if not tf.is_tensor(value):
                    raise ValueError("predict: output %r is not a single tensor." % name)
                selected[name] = value
            return selected

        @tf.function
        def predict_step(iterator):
            return strategy.run(replica_step, args=(next(iterator),))

        input_fn = predict_input_fn

        def whole_input_fn(input_context=None):
            # One pipeline per worker, reading everything: no sharding, so the
            # local replicas' batches are consecutive batches of the input.
            if input_context is not None and input_context.num_input_pipelines > 1:
                local_replicas = max(1, input_context.num_replicas_in_sync //
                                     input_context.num_input_pipelines)
                input_context = tf.distribute.InputContext(
                    num_input_pipelines=1, input_pipeline_id=0,
                    num_replicas_in_sync=local_replicas)
            return input_fn(input_context)

        dataset = strategy.distribute_datasets_from_function(whole_input_fn)
        iterator = iter(dataset)
        collected = collections.OrderedDict()
        while True:
            try:
                per_replica = predict_step(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            for name, value in per_replica.items():
                parts = collected.setdefault(name, [])
                for local in strategy.experimental_local_results(value):
                    parts.append(local.numpy())
        if names is None:
            names = tuple(collected)
        return collections.OrderedDict(
            (name, np.concatenate(collected[name], axis=0) if name in collected
             else np.zeros([0])) for name in names)


def write_eval_results(results, path):
    """Writes ``key = value`` lines sorted by key, as Google's scripts do (atomically)."""
    atomic.write_text(path, "".join("%s = %s\n" % (key, str(results[key]))
                                    for key in sorted(results)))
