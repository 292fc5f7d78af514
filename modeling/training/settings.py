"""`TrainerSettings`: the trainer's settings, shared by every job dataclass.

Each library job (`ClassifierJob`, `NerJob`, `SquadJob`, `PretrainingJob`,
...) subclasses this dataclass, so the trainer's settings are declared once,
here, with their help texts (`modeling.training.options.option`); every
training script derives its trainer flags (``--distribution_strategy``,
``--use_xla``, ``--mixed_precision``, ...) from these fields, with the same
names and defaults. The settings become the strategy, the trainer's and the
optimizer's arguments here:

    @dataclasses.dataclass
    class MyJob(TrainerSettings):
        data_dir: Optional[str] = option(None, "Where the data files are.")
        ...

    strategy = job.get_strategy()
    optimizer = optimization.create_optimizer(lr, steps, warmup, **job.optimizer_options())
    trainer = Trainer(strategy, ..., **job.trainer_options())
"""

import contextlib
import dataclasses
from typing import Optional

import keras

from modeling.training import distribute
from modeling.training import pruning
from modeling.training import run_lock
from modeling.training import trainer as trainer_lib
from modeling.training.options import option
from modeling.training.options import option_from

__all__ = ["DataServiceSettings", "EvalSettings", "FineTuningSettings",
           "PredictSettings", "TextSettings", "TrainerSettings", "TrainingSettings",
           "option_from", "output_dir_lock", "start_run"]


@dataclasses.dataclass
class TrainerSettings:
    """tf.distribute (instead of TPUEstimator), XLA, precision, optimizer, checkpoints, logging."""

    distribution_strategy: str = option(
        "one_device", "How to distribute training. multi_worker_mirrored reads TF_CONFIG.",
        choices=distribute.STRATEGIES)
    # Google's TPU flags, as pointers to the ones above.
    use_tpu: bool = option(
        False, "Google's flag: the same as --distribution_strategy=tpu (with --tpu or "
        "--tpu_name).")
    tpu: Optional[str] = option(
        None, "TPU name or address (with --distribution_strategy=tpu).", aliases=("tpu_name",))
    num_gpus: Optional[int] = option(None, "GPUs to use (default: all visible).")
    all_reduce_alg: Optional[str] = option(None, "nccl, ring or hierarchical_copy.")
    use_xla: bool = option(
        False, "Compile the training step with XLA (on one replica: forward, backward, "
        "update and metrics as one computation). Ignored with --mixed_precision=bfloat16 "
        "on CPUs, where it would be slower.")
    xla_optimizer_update: bool = option(
        True, "Run each variable's optimizer update as one XLA computation (same "
        "arithmetic, faster); --noxla_optimizer_update where XLA is unavailable.")
    mixed_precision: Optional[str] = option(
        None, "Compute in half precision (float16 uses dynamic loss scaling).",
        choices=("bfloat16", "float16"))
    optimizer: str = option("adamw", "Optimizer.", choices=("adamw", "lamb"))
    gradient_accumulation_steps: int = option(
        1, "Micro-batches of the training batch size per optimizer update.")
    # ULMFiT's fine-tuning techniques (modeling.training.finetuning_techniques);
    # the defaults leave the optimizer exactly as without them.
    lr_schedule: str = option(
        "linear", "linear: Google's warm-up then linear decay to 0; stlr: ULMFiT's "
        "slanted triangular rate (a rise over the first --stlr_cut_frac of the updates, "
        "then a fall to learning_rate/--stlr_ratio; --warmup_proportion/--num_warmup_steps "
        "are then not used).", choices=("linear", "stlr"))
    stlr_cut_frac: float = option(
        0.1, "With --lr_schedule=stlr: fraction of the updates spent rising.",
        check=(lambda v: v is not None and 0 < v < 1,
               "--stlr_cut_frac must be in (0, 1) (ULMFiT: 0.1)."))
    stlr_ratio: float = option(
        32.0, "With --lr_schedule=stlr: how much smaller the lowest rate is than "
        "--learning_rate.", lower_bound=1.0)
    layer_lr_decay: float = option(
        1.0, "Discriminative learning rates (ULMFiT: 2.6): each layer group trains at the "
        "rate of the group above divided by this; groups from the top: task head and "
        "pooler, the layers top down, the embeddings. 1 = one rate for all.",
        check=(lambda v: v is not None and v > 0,
               "--layer_lr_decay must be > 0 (ULMFiT: 2.6)."))
    unfreeze_steps: int = option(
        0, "Gradual unfreezing (ULMFiT): only the top layer group (task head, pooler) "
        "trains for the first N updates, then one more group below joins every N updates "
        "(the paper: N = one epoch). 0 = everything trains from the start.", lower_bound=0)
    # Magnitude pruning during training (modeling.training.pruning); 0 = off.
    target_sparsity: float = option(
        0.0, "Magnitude pruning (Zhu & Gupta): the fraction of each encoder dense kernel's "
        "weights that are zero at --pruning_end_step, reached along a cubic schedule and "
        "kept after it (embeddings, biases, layer norms and the task head stay dense). "
        "0 = no pruning.",
        check=(lambda v: v is not None and 0 <= v < 1,
               "--target_sparsity must be in [0, 1)."))
    pruning_begin_step: int = option(0, "Update at which pruning starts.", lower_bound=0)
    pruning_end_step: Optional[int] = option(
        None, "Update at which --target_sparsity is reached (default: 3/4 of the training "
        "updates; the rest train with the masks fixed).")
    pruning_frequency: int = option(100, "Updates between mask re-computations.",
                                    lower_bound=1)
    keep_checkpoint_max: int = option(5, "Checkpoints to keep.")
    nan_policy: str = option(
        "stop", "When the loss or its gradient becomes NaN or infinite: stop (with a clear "
        "error; the last checkpoint is the last good state) or skip that update and go on.",
        choices=trainer_lib.NAN_POLICIES)
    log_steps: int = option(100, "Steps between progress lines and TensorBoard points.")
    steps_per_loop: int = option(
        100, "Training steps per call into TensorFlow (one graph loop; cuts host round "
        "trips). A loop stops at logging and checkpoint boundaries, at SIGTERM and at a "
        "non-finite update.", aliases=("iterations_per_loop",))
    profile_steps: Optional[str] = option(
        None, "A,B: write a TensorBoard profile (TensorFlow's profiler: op times, trace "
        "viewer) of training steps A to B, 0 <= A <= B (step N = the N-th update, as in the "
        "progress lines), under OUTPUT_DIR/train/plugins/profile/; view it in TensorBoard's "
        "Profile tab (pip install tensorboard-plugin-profile). The profiler starts and stops "
        "between calls into TensorFlow, so with --steps_per_loop > 1 the window is rounded "
        "out to whole loops (--steps_per_loop=1 for exactly A to B).",
        check=(lambda v: _valid_profile_steps(v), trainer_lib.PROFILE_STEPS_HELP + "."))

    @property
    def strategy_name(self):
        """`distribution_strategy`, or ``tpu`` when Google's `use_tpu` is set."""
        if self.use_tpu:
            if self.distribution_strategy not in ("one_device", "tpu"):
                raise ValueError("--use_tpu is --distribution_strategy=tpu; it cannot go with "
                                 "--distribution_strategy=%s" % self.distribution_strategy)
            return "tpu"
        return self.distribution_strategy

    def get_strategy(self):
        """The `tf.distribute` strategy of `distribution_strategy` and its options."""
        return distribute.get_strategy(self.strategy_name, self.num_gpus, self.tpu,
                                       self.all_reduce_alg)

    def optimizer_options(self):
        """Keyword arguments of `optimization.create_optimizer` from these settings.

        The ULMFiT settings are passed on when they differ from their neutral
        defaults (so a caller's own optimizer factory that does not know them
        keeps working unchanged while they are unused).
        """
        options = {"optimizer_type": self.optimizer,
                   "gradient_accumulation_steps": self.gradient_accumulation_steps,
                   "jit_update": self.xla_optimizer_update}
        if self.lr_schedule != "linear":
            options.update(lr_schedule=self.lr_schedule, stlr_cut_frac=self.stlr_cut_frac,
                           stlr_ratio=self.stlr_ratio)
        if self.layer_lr_decay != 1.0:
            options["layer_lr_decay"] = self.layer_lr_decay
        if self.unfreeze_steps:
            options["unfreeze_steps"] = self.unfreeze_steps
        return options

    def trainer_options(self):
        """Keyword arguments of `trainer.Trainer` from these settings."""
        options = {"keep_checkpoint_max": self.keep_checkpoint_max, "log_steps": self.log_steps,
                   "gradient_accumulation_steps": self.gradient_accumulation_steps,
                   "use_xla": self.use_xla, "nan_policy": self.nan_policy,
                   "steps_per_loop": self.steps_per_loop}
        profile_steps = trainer_lib.parse_profile_steps(self.profile_steps)
        if profile_steps is not None:
            options["profile_steps"] = profile_steps
        if self.target_sparsity:
            options["weight_pruning"] = pruning.PruningSchedule(
                self.target_sparsity, self.pruning_begin_step, self.pruning_end_step,
                self.pruning_frequency)
        return options


def _valid_profile_steps(value):
    try:
        trainer_lib.parse_profile_steps(value)
    except ValueError:
        return False
    return True


@dataclasses.dataclass
class DataServiceSettings:
    """Training input from a tf.data service (`data.input_pipeline.data_service_input_fn`)."""

    data_service_address: Optional[str] = option(
        None, "Read the training batches from this tf.data service dispatcher, "
        "grpc://HOST:PORT: the input pipeline runs on the service's workers (for training "
        "that the host CPU cannot feed). Evaluation still reads locally.")
    data_service_job_name: Optional[str] = option(
        None, "tf.data service job to share: trainers with the same name split the batches "
        "between them (multi-worker training needs one). One name per training run: a job "
        "is known by its name only.")


# Google's flags that the training jobs share, in groups a job composes
# (``class NerJob(TrainerSettings, job.EncoderSettings, FineTuningSettings, ...)``),
# so that each flag's default and help are written once. A job whose default
# differs restates the field with `option_from` (the group's help, its own default):
#
#     max_seq_length: int = option_from(TextSettings, "max_seq_length", 384)


@dataclasses.dataclass
class TextSettings:
    """How a job's text becomes word pieces: the vocabulary, the case, the length."""

    vocab_file: Optional[str] = option(
        None, "The vocabulary file that the BERT model was trained on.")
    do_lower_case: bool = option(
        True, "Whether to lower case the input text. Should be True for uncased models and "
        "False for cased models.")
    max_seq_length: int = option(
        128, "The maximum total input sequence length after WordPiece tokenization. Sequences "
        "longer than this will be truncated, and sequences shorter than this will be padded.")


@dataclasses.dataclass
class TrainingSettings:
    """Where a training run writes, and its batch size, rate, checkpoints and seed."""

    output_dir: Optional[str] = option(
        None, "The output directory where the model checkpoints will be written.")
    do_train: bool = option(False, "Whether to run training.")
    train_batch_size: int = option(32, "Total batch size for training.")
    learning_rate: float = option(5e-5, "The initial learning rate for Adam.")
    save_checkpoints_steps: int = option(1000, "How often to save the model checkpoint.")
    seed: Optional[int] = option(None, "Random seed for weights, dropout and input shuffling.")


@dataclasses.dataclass
class FineTuningSettings(TrainingSettings):
    """A fine-tuning run's schedule: epochs over the data, with a linear warm-up."""

    num_train_epochs: float = option(3.0, "Total number of training epochs to perform.")
    warmup_proportion: float = option(
        0.1, "Proportion of training to perform linear learning rate warmup for. E.g., 0.1 = "
        "10% of training.")


@dataclasses.dataclass
class EvalSettings:
    """Evaluation on the dev set."""

    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    eval_batch_size: int = option(8, "Total batch size for eval.")


@dataclasses.dataclass
class PredictSettings:
    """Prediction of the test set."""

    do_predict: bool = option(False,
                              "Whether to run the model in inference mode on the test set.")
    predict_batch_size: int = option(8, "Total batch size for predict.")


def start_run(job):
    """A job's seed (`job.seed`), precision policy and strategy, set up for its run."""
    if job.seed is not None:
        keras.utils.set_random_seed(job.seed)
    if job.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_" + job.mixed_precision)
    return job.get_strategy()


def output_dir_lock(job, strategy):
    """One run per `job.output_dir` (the chief holds the lock; what a killed run left is swept)."""
    if distribute.is_chief(strategy):
        return run_lock.OutputDirLock(job.output_dir)
    return contextlib.nullcontext()
