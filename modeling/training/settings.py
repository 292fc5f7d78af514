"""`TrainerSettings`: the trainer's settings, shared by every job dataclass.

Each training script defines the same trainer flags
(`run/common_flags.define_trainer_flags`) and each library job
(`ClassifierJob`, `NerJob`, `SquadJob`, `PretrainingJob`, ...) holds them as
fields of the same names; the jobs subclass this dataclass instead of
repeating them, and turn them into the strategy, the trainer's and the
optimizer's arguments here:

    @dataclasses.dataclass
    class MyJob(TrainerSettings):
        data_dir: Optional[str] = None
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

__all__ = ["TrainerSettings", "output_dir_lock", "start_run"]


@dataclasses.dataclass
class TrainerSettings:
    """The fields of `define_trainer_flags` (the same names and defaults)."""

    distribution_strategy: str = "one_device"
    tpu: Optional[str] = None
    num_gpus: Optional[int] = None
    all_reduce_alg: Optional[str] = None
    use_xla: bool = False
    xla_optimizer_update: bool = True
    mixed_precision: Optional[str] = None
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    keep_checkpoint_max: int = 5
    log_steps: int = 100
    steps_per_loop: int = 1
    nan_policy: str = "stop"
    # ULMFiT's fine-tuning techniques (modeling.training.finetuning_techniques);
    # the defaults leave the optimizer exactly as without them.
    lr_schedule: str = "linear"
    stlr_cut_frac: float = 0.1
    stlr_ratio: float = 32.0
    layer_lr_decay: float = 1.0
    unfreeze_steps: int = 0
    # Magnitude pruning during training (modeling.training.pruning); 0 = off.
    target_sparsity: float = 0.0
    pruning_begin_step: int = 0
    pruning_end_step: Optional[int] = None
    pruning_frequency: int = 100

    def get_strategy(self):
        """The `tf.distribute` strategy of `distribution_strategy` and its options."""
        return distribute.get_strategy(self.distribution_strategy, self.num_gpus, self.tpu,
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
        if self.target_sparsity:
            options["weight_pruning"] = pruning.PruningSchedule(
                self.target_sparsity, self.pruning_begin_step, self.pruning_end_step,
                self.pruning_frequency)
        return options


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
