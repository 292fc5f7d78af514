"""Flags shared by every training script (`run_pretraining.py`, `run_classifier.py`, ...).

Scripts import this module from their own folder (`import common_flags`) and
call `define_trainer_flags()`; `job_from_flags(JobClass)` fills a library
job dataclass from the flags of the same names, so the library never reads
absl's FLAGS.
"""

import dataclasses

from absl import flags

from modeling.training import distribute

FLAGS = flags.FLAGS


def define_trainer_flags(optimizer=True):
    """tf.distribute (instead of TPUEstimator), XLA, precision, checkpoints, logging."""
    flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                      "How to distribute training. multi_worker_mirrored reads TF_CONFIG.")
    flags.DEFINE_string("tpu", None, "TPU name or address (with --distribution_strategy=tpu).")
    flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible).")
    flags.DEFINE_string("all_reduce_alg", None, "nccl, ring or hierarchical_copy.")
    flags.DEFINE_bool("use_xla", False,
                      "Compile the training step with XLA (on one replica: forward, backward, "
                      "update and metrics as one computation). Ignored with "
                      "--mixed_precision=bfloat16 on CPUs, where it would be slower.")
    flags.DEFINE_bool("xla_optimizer_update", True,
                      "Run each variable's optimizer update as one XLA computation (same "
                      "arithmetic, faster); --noxla_optimizer_update where XLA is unavailable.")
    flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                      "Compute in half precision (float16 uses dynamic loss scaling).")
    if optimizer:
        flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
        flags.DEFINE_integer("gradient_accumulation_steps", 1,
                             "Micro-batches of the training batch size per optimizer update.")
        # ULMFiT's fine-tuning techniques (modeling/training/finetuning_techniques.py).
        flags.DEFINE_enum("lr_schedule", "linear", ["linear", "stlr"],
                          "linear: Google's warm-up then linear decay to 0; stlr: ULMFiT's "
                          "slanted triangular rate (a rise over the first --stlr_cut_frac of "
                          "the updates, then a fall to learning_rate/--stlr_ratio; "
                          "--warmup_proportion/--num_warmup_steps are then not used).")
        flags.DEFINE_float("stlr_cut_frac", 0.1,
                           "With --lr_schedule=stlr: fraction of the updates spent rising.")
        flags.DEFINE_float("stlr_ratio", 32.0,
                           "With --lr_schedule=stlr: how much smaller the lowest rate is than "
                           "--learning_rate.", lower_bound=1.0)
        flags.DEFINE_float("layer_lr_decay", 1.0,
                           "Discriminative learning rates (ULMFiT: 2.6): each layer group "
                           "trains at the rate of the group above divided by this; groups "
                           "from the top: task head and pooler, the layers top down, the "
                           "embeddings. 1 = one rate for all.")
        flags.DEFINE_integer("unfreeze_steps", 0,
                             "Gradual unfreezing (ULMFiT): only the top layer group (task "
                             "head, pooler) trains for the first N updates, then one more "
                             "group below joins every N updates (the paper: N = one epoch). "
                             "0 = everything trains from the start.", lower_bound=0)
        flags.register_validator("layer_lr_decay", lambda v: v is not None and v > 0,
                                 message="--layer_lr_decay must be > 0 (ULMFiT: 2.6).")
        flags.register_validator("stlr_cut_frac", lambda v: v is not None and 0 < v < 1,
                                 message="--stlr_cut_frac must be in (0, 1) (ULMFiT: 0.1).")
    # Magnitude pruning during training (modeling/training/pruning.py).
    flags.DEFINE_float("target_sparsity", 0.0,
                       "Magnitude pruning (Zhu & Gupta): the fraction of each encoder dense "
                       "kernel's weights that are zero at --pruning_end_step, reached along a "
                       "cubic schedule and kept after it (embeddings, biases, layer norms and "
                       "the task head stay dense). 0 = no pruning.")
    flags.DEFINE_integer("pruning_begin_step", 0, "Update at which pruning starts.",
                         lower_bound=0)
    flags.DEFINE_integer("pruning_end_step", None,
                         "Update at which --target_sparsity is reached (default: 3/4 of the "
                         "training updates; the rest train with the masks fixed).")
    flags.DEFINE_integer("pruning_frequency", 100, "Updates between mask re-computations.",
                         lower_bound=1)
    flags.register_validator("target_sparsity", lambda v: v is not None and 0 <= v < 1,
                             message="--target_sparsity must be in [0, 1).")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints to keep.")
    flags.DEFINE_enum("nan_policy", "stop", ["stop", "skip"],
                      "When the loss or its gradient becomes NaN or infinite: stop (with "
                      "a clear error; the last checkpoint is the last good state) or skip "
                      "that update and go on.")
    flags.DEFINE_integer("log_steps", 100,
                         "Steps between progress lines and TensorBoard points.")
    flags.DEFINE_integer("steps_per_loop", 100,
                         "Training steps per call into TensorFlow (one graph loop; cuts "
                         "host round trips). A loop stops at logging and checkpoint "
                         "boundaries, at SIGTERM and at a non-finite update.")
    flags.DEFINE_alias("iterations_per_loop", "steps_per_loop")


def present_flag_values(job_class):
    """{field: value} of the `job_class` fields whose flags were given explicitly."""
    return {field.name: FLAGS[field.name].value for field in dataclasses.fields(job_class)
            if field.name in FLAGS and FLAGS[field.name].present}


def job_from_flags(job_class, **overrides):
    """A `job_class` dataclass whose fields take the values of the same-named flags."""
    values = {}
    for field in dataclasses.fields(job_class):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
        elif field.name in FLAGS:
            values[field.name] = FLAGS[field.name].value
    return job_class(**values)


def define_data_service_flags():
    """Training input from a tf.data service (see `data.input_pipeline.data_service_input_fn`)."""
    flags.DEFINE_string("data_service_address", None,
                        "Read the training batches from this tf.data service dispatcher, "
                        "grpc://HOST:PORT: the input pipeline runs on the service's "
                        "workers (for training that the host CPU cannot feed). Evaluation "
                        "still reads locally.")
    flags.DEFINE_string("data_service_job_name", None,
                        "tf.data service job to share: trainers with the same name split "
                        "the batches between them (multi-worker training needs one). One "
                        "name per training run: a job is known by its name only.")
