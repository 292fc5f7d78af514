"""SiATL fine-tuning as a library call: what `run/run_siatl.py` runs.

    from modeling.siatl import job as siatl_job
    result = siatl_job.run(siatl_job.SiatlJob(
        task_name="generic", data_dir="my_task", vocab_file="data/sample/elmo/vocab.txt",
        bert_config_file="lm/ulmfit_config.json", init_checkpoint="lm",
        output_dir="/tmp/siatl", do_train=True, do_eval=True))
    result.eval_results["eval_accuracy"]

A pre-trained LSTM language model (by default ULMFiT's AWD-LSTM, the output
of ``run_pretraining.py --recipe=ulmfit``) becomes a classifier
(`modeling.siatl.model.SiatlClassifier`: task BiLSTM, self-attention
pooling, dense; the LM loss on the task text stays as an auxiliary loss whose
weight decays from 0.2 to 0.1) and is fine-tuned by sequential unfreezing,
each stage a separate run of the one trainer with a fresh optimizer:

    stage 1  output_dir/stage_1   the new layers (task BiLSTM, attention, output)
    stage 2  output_dir/stage_2   the new layers + the pre-trained LM (its LSTMs and
                                  its LM objective's decoder), embeddings frozen
    stage 3  output_dir/stage_3   everything, the embeddings too

(cumulative, as Chronopoulou et al. 2019 and their code unfreeze:
`model_lib.SiatlClassifier.set_trainable_parts`). Each stage starts from the
previous stage's final weights (stage 1 from `init_checkpoint`), with its
own learning-rate schedule (`learning_rate`, warm-up `warmup_proportion` of
the stage, linear decay).
Its length is `stage_1_steps`, `stage_2_steps`, `stage_3_steps` (updates;
default: one epoch, one epoch, `num_train_epochs` epochs; 0 skips a stage).
The auxiliary weight decays over the updates of all stages together: the
model reads ``stage offset + the stage optimizer's iterations``, both kept by
the checkpoints, so a killed run restarted with the same settings resumes in
the stage it was in, at the same gamma, and finished stages are not run
again.

`run(job)` is `SiatlRunner(job).run()`: run_classifier's runner
(`classifier_job.ClassifierRunner`) with SiATL's checks, the stage plan and
one trainer per stage. Data are run_classifier's: `task_name` /
`processor` / the generic-task fields (`classifier_job.build_processor`),
labels and metrics
(`classifier_job.labels_and_metrics`), and the word-level records of
`modeling.tasks.word_input_format` (``<S> a </S> [b </S>]`` ids of the LM's
word vocabulary `vocab_file`), written to ``output_dir/{train,eval,
predict}.tf_record``. Outputs as run_classifier's: ``eval_results.txt``
(eval_accuracy, eval_loss = the task loss, the LM objective's loss on the
dev text, eval_aux_lm_weight, global_step = updates of all stages, plus the
processor's metrics) and ``test_results.tsv``.

Every bad setting or input is a `SiatlJobError` (a `ValueError`) with a
one-line message naming the flag, file or line. Registered as
``registry.tasks.get("siatl")``.
"""

import dataclasses
import os
from typing import List, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import processors as processors_lib
from modeling import checkpoints
from modeling import registry
from modeling.objectives.base import BertPretrainer
from modeling.siatl import model as model_lib
from modeling.tasks import FineTuningTask
from modeling.tasks import classifier_job
from modeling.tasks import word_input_format as wif
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training.options import option
from modeling.training.options import option_from

__all__ = ["SiatlInputFormat", "SiatlJob", "SiatlJobError", "SiatlResult", "SiatlRunner",
           "Stage", "run", "stage_plan"]

STAGE_PARTS = (model_lib.NEW, model_lib.ALL_BUT_EMBEDDINGS, model_lib.ALL)


class SiatlJobError(ClassifierJobError):
    """Bad SiATL settings or inputs, reported as one line."""


@dataclasses.dataclass
class SiatlJob(classifier_job.ClassifierJob):
    """Everything a SiATL run needs; the fields are `run/run_siatl.py`'s flags.

    run_classifier's fields (its data flags, batch sizes, epochs), with SiATL's
    defaults for the family and the rate, plus SiATL's own. run_classifier's
    GPT-only, export and tf.data-service fields are refused if set (and are
    not on run_siatl.py's command line).
    """

    CLI_EXCLUDE = ("data_service_address", "data_service_job_name", "features",
                   "ids_num_labels", "ids_label_from_last_id", "ids_cls_id", "ids_sep_id",
                   "ids_offset", "ids_keep", "xnli_train_language", "merges_file",
                   "input_transformation", "lm_loss_weight", "export_dir")

    # run_classifier's fields, worded for (and with the defaults of) a pre-trained LM.
    model_family: str = option(
        "ulmfit", "Family of the pre-trained LM (its config file format and network).")
    data_dir: Optional[str] = option(
        None, "The input data dir (train/dev/test files of the task).")
    bert_config_file: Optional[str] = option(
        None, "The LM's config file (ulmfit_config.json of the pre-training output).")
    vocab_file: Optional[str] = option(
        None, "The LM's word vocabulary (<S> </S> <UNK>, then one word per line).")
    init_checkpoint: Optional[str] = option(
        None, "The pre-trained LM: a run_pretraining.py output dir or ckpt-N prefix.")
    max_seq_length: int = option(
        64, "Words per example with <S> and </S>; longer texts are cut.")
    learning_rate: float = option(1e-3, "Peak learning rate of every stage.")
    num_train_epochs: float = option(
        3.0, "Epochs of stage 3 when --stage_3_steps is not given.")
    warmup_proportion: float = option(0.1, "Warm-up share of each stage's updates.")
    # The generic files' label list (run_classifier's also serves its ids task).
    labels: Optional[List[str]] = option_from(processors_lib.GenericColumns, "labels")
    task_type: str = option(
        processors_lib.CLASSIFICATION, "generic: classification, multi_label or regression.",
        choices=processors_lib.TASK_TYPES)
    label_separator: str = option(",", "generic: separator of multi-label labels.")
    train_file: Optional[str] = option(None, "generic: training file name in --data_dir.")
    dev_file: Optional[str] = option(None, "generic: dev file name in --data_dir.")
    test_file: Optional[str] = option(None, "generic: test file name in --data_dir.")
    eval_metrics: Optional[List[str]] = option(
        None, "generic: metrics besides eval_accuracy/eval_loss (f1, mcc, ...).")
    # The registered objective the LM was pre-trained with (the auxiliary loss).
    lm_objective: str = option(
        "word_lm", "The LM's pre-training objective (a registered name): the auxiliary loss.")
    # SiATL: sequential unfreezing (updates per stage), the task model, the
    # auxiliary LM loss weight.
    stage_1_steps: Optional[int] = option(
        None, "Updates of stage 1 (new layers only); default one epoch; 0 skips it.")
    stage_2_steps: Optional[int] = option(
        None, "Updates of stage 2 (new layers + the LM, embeddings frozen); default one "
        "epoch; 0 skips it.")
    stage_3_steps: Optional[int] = option(
        None, "Updates of stage 3 (everything, embeddings too); default --num_train_epochs "
        "epochs.")
    task_hidden_size: int = option(64, "Units of each direction of the task BiLSTM.")
    attention_size: Optional[int] = option(
        None, "Units of the attention's tanh layer (default 2 x --task_hidden_size).")
    task_dropout: float = option(0.2, "Dropout on the attention-pooled vector.")
    aux_lm_weight_start: float = option(0.2, "Weight of the auxiliary LM loss at the start.")
    aux_lm_weight_end: float = option(0.1, "Weight of the auxiliary LM loss at the end.")
    aux_lm_weight_decay: str = option(
        model_lib.EXPONENTIAL,
        "How the auxiliary weight goes from start to end over all stages' updates.",
        choices=model_lib.GAMMA_DECAYS)


@dataclasses.dataclass
class SiatlResult:
    """What `run` produced (as `classifier_job.ClassifierResult`)."""

    eval_results: dict
    test_predictions: Optional[np.ndarray]
    output_dir: str
    stages: list


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of sequential unfreezing."""

    number: int       # 1, 2, 3
    parts: str        # "new", "all_but_embeddings", "all" (model_lib.TRAINABLE_PARTS)
    steps: int        # optimizer updates of this stage (0: skipped)
    offset: int       # updates of the stages before it
    model_dir: str    # output_dir/stage_<number>


def stage_plan(job, steps_per_epoch, num_train_steps):
    """The three `Stage`s of `job` (see the module docstring for the defaults)."""
    defaults = (steps_per_epoch, steps_per_epoch, num_train_steps)
    stages, offset = [], 0
    for number, (parts, default) in enumerate(zip(STAGE_PARTS, defaults), 1):
        steps = getattr(job, "stage_%d_steps" % number)
        steps = default if steps is None else int(steps)
        stages.append(Stage(number, parts, steps, offset,
                            os.path.join(job.output_dir, "stage_%d" % number)))
        offset += steps
    return stages


class SiatlInputFormat(wif.WordInputFormat):
    """Word records of the LM's vocabulary, and the `SiatlClassifier` over the pre-trained LM."""

    def check(self):
        """`WordInputFormat.check` (max_seq_length, the vocabulary against the config) as a
        `SiatlJobError`."""
        try:
            super().check()
        except SiatlJobError:
            raise
        except ClassifierJobError as e:
            raise SiatlJobError(str(e)) from None

    def build_model(self, num_labels, task_type, parts=model_lib.ALL, gamma_decay_steps=0):
        job = self.job
        encoder = self.family.build_encoder(self.config)
        objective = registry.objectives.get(job.lm_objective)(self.config, self.family)
        model = model_lib.SiatlClassifier(
            encoder, objective, num_labels=num_labels, task_type=task_type,
            hidden_size=job.task_hidden_size, attention_size=job.attention_size,
            dropout_rate=job.task_dropout, gamma_start=job.aux_lm_weight_start,
            gamma_end=job.aux_lm_weight_end, gamma_decay=job.aux_lm_weight_decay,
            gamma_decay_steps=gamma_decay_steps)
        model.set_trainable_parts(parts)
        return model

    def init_model(self, model, checkpoint):
        """Loads the pre-trained LM (network and its objective's weights) from `checkpoint`.

        A checkpoint without the LM objective's weights (a fine-tuned
        classifier's) loads the network; the objective's bias starts at 0.
        """
        language_model = BertPretrainer(model.encoder, [model.lm_objective],
                                        name="siatl_language_model")
        return checkpoints.init_from_checkpoint(language_model, checkpoint,
                                                allow_missing_heads=True)


def _checkpoint_step(model_dir):
    """The update count of the latest checkpoint in `model_dir`, or None."""
    latest = tf.train.latest_checkpoint(model_dir)
    if not latest:
        return None
    return int(latest.rsplit("-", 1)[1])


def _stages_from_checkpoints(stages):
    """Without training: each stage as long as its checkpoints say (for gamma and global_step)."""
    result, offset = [], 0
    for stage in stages:
        steps = _checkpoint_step(stage.model_dir) or 0
        result.append(dataclasses.replace(stage, steps=steps, offset=offset))
        offset += steps
    return result


def _init_from_stage(previous):
    """`init_fn` of a stage after the first: the final weights of stage `previous`."""
    def init_fn(model):
        latest = tf.train.latest_checkpoint(previous.model_dir)
        step = _checkpoint_step(previous.model_dir)
        if latest is None or step < previous.steps:
            raise SiatlJobError(
                "%s: stage %d ended at update %s of %d; its final checkpoint is missing"
                % (previous.model_dir, previous.number, step, previous.steps))
        status = tf.train.Checkpoint(model=model).restore(latest)
        status.expect_partial().assert_existing_objects_matched()
        logging.info("Stage: weights of stage %d from %s", previous.number, latest)
    return init_fn


class SiatlRunner(classifier_job.ClassifierRunner):
    """run_classifier's runner (`classifier_job.ClassifierRunner`: the task, its records,
    eval_results.txt, test_results.tsv) with SiATL's settings, a stage plan instead of one
    training length, and one trainer per stage."""

    error = SiatlJobError
    initialised = "language model"
    metric_summaries = False

    def check_settings(self):
        job = self.job
        self.check_modes()
        self.check_required("data_dir", "bert_config_file", "output_dir", "vocab_file")
        for name in ("features", "merges_file", "lm_loss_weight", "export_dir",
                     "data_service_address", "data_service_job_name"):
            if getattr(job, name) is not None:
                raise SiatlJobError("--%s is run_classifier's; SiATL has no use for it (its "
                                    "auxiliary LM weight is --aux_lm_weight_start/_end)" % name)
        if job.input_transformation != "auto":
            raise SiatlJobError("--input_transformation=%s: SiATL reads <S> a </S> b </S>; only "
                                "auto applies" % job.input_transformation)
        self.check_task_given()
        for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                     "gradient_accumulation_steps", "task_hidden_size"):
            if getattr(job, name) < 1:
                raise SiatlJobError("--%s must be positive, got %r." % (name, getattr(job, name)))
        if job.attention_size is not None and job.attention_size < 1:
            raise SiatlJobError("--attention_size must be positive, got %r." % job.attention_size)
        for number in (1, 2, 3):
            steps = getattr(job, "stage_%d_steps" % number)
            if steps is not None and steps < 0:
                raise SiatlJobError("--stage_%d_steps must be >= 0 (0 skips the stage), got %r."
                                    % (number, steps))
        if not 0 <= job.task_dropout < 1:
            raise SiatlJobError("--task_dropout must be in [0, 1), got %r." % job.task_dropout)
        if job.aux_lm_weight_decay not in model_lib.GAMMA_DECAYS:
            raise SiatlJobError("--aux_lm_weight_decay=%s: expected one of %s"
                                % (job.aux_lm_weight_decay, ", ".join(model_lib.GAMMA_DECAYS)))
        for name in ("aux_lm_weight_start", "aux_lm_weight_end"):
            if not getattr(job, name) >= 0:
                raise SiatlJobError("--%s must be >= 0, got %r." % (name, getattr(job, name)))
        if job.aux_lm_weight_decay == model_lib.EXPONENTIAL and (
                (job.aux_lm_weight_start == 0) != (job.aux_lm_weight_end == 0)):
            raise SiatlJobError("--aux_lm_weight_decay=exponential cannot reach or leave 0 "
                                "(--aux_lm_weight_start=%r, --aux_lm_weight_end=%r); use linear"
                                % (job.aux_lm_weight_start, job.aux_lm_weight_end))
        if job.unfreeze_steps:
            raise SiatlJobError("--unfreeze_steps: SiATL unfreezes by stages of its own "
                                "(--stage_1_steps, --stage_2_steps, --stage_3_steps); leave it 0")
        self.check_training_values()
        self.family, self.config = self.load_family_config()
        self.input_format = SiatlInputFormat(job, self.config, self.family)
        self.input_format.check()

    def check_family(self, family):
        try:
            registry.objectives.get(self.job.lm_objective)
        except registry.RegistryError as e:
            raise SiatlJobError("--lm_objective: %s" % e) from e

    def plan_training(self, num_examples):
        """The stages (`stage_plan`; without training, as long as their checkpoints say)."""
        job = self.job
        steps_per_epoch = num_train_steps = 0
        if num_examples is not None:
            examples_per_update = job.train_batch_size * job.gradient_accumulation_steps
            steps_per_epoch = int(num_examples / examples_per_update)
            num_train_steps = int(num_examples / examples_per_update * job.num_train_epochs)
        stages = stage_plan(job, steps_per_epoch, num_train_steps)
        if not job.do_train:
            stages = _stages_from_checkpoints(stages)
        self.stages = stages
        self.active = [stage for stage in stages if stage.steps > 0]
        if job.do_train and not self.active:
            raise SiatlJobError(
                "%d training examples, --train_batch_size=%d, --num_train_epochs=%s and "
                "--stage_1_steps/--stage_2_steps/--stage_3_steps make no training step"
                % (num_examples, job.train_batch_size, job.num_train_epochs))
        self.total_steps = sum(stage.steps for stage in stages)

    def stage_trainer(self, stage, init_fn):
        """The one trainer for `stage` (its parts trainable, its own schedule and model_dir)."""
        self.num_train_steps = stage.steps
        self.num_warmup_steps = int(stage.steps * self.job.warmup_proportion)
        trainer = self.build_trainer(
            model_fn=lambda: self.input_format.build_model(
                self.num_labels, self.task_type, stage.parts, gamma_decay_steps=self.total_steps),
            model_dir=stage.model_dir, init_fn=init_fn)
        trainer.model.bind_step(trainer.global_step, stage.offset)
        return trainer

    def _run_locked(self):
        job = self.job
        tf.io.gfile.makedirs(job.output_dir)
        self.prepare()
        trainer = stage = None
        if job.do_train:
            train_input_fn = self.train_input_fn()
            previous = None
            for stage in self.active:
                logging.info("***** SiATL stage %d: training %s layers for %d updates *****",
                             stage.number, stage.parts, stage.steps)
                done = _checkpoint_step(stage.model_dir)
                if done is not None and done >= stage.steps and stage is not self.active[-1]:
                    logging.info("Stage %d already done (%s).", stage.number, stage.model_dir)
                    previous = stage
                    continue
                trainer = self.stage_trainer(stage, self.init_model if previous is None
                                             else _init_from_stage(previous))
                trainer.train(train_input_fn)
                previous = stage
        if not (job.do_eval or job.do_predict):
            return self._result({}, None)
        if trainer is None:
            # Eval/predict only: the latest stage that has a checkpoint, else the LM.
            done = [s for s in self.stages if _checkpoint_step(s.model_dir) is not None]
            stage = done[-1] if done else self.stages[-1]
            trainer = self.stage_trainer(stage, self.init_model)
            trainer.restore_or_initialize()
        self.trainer, self.step_offset = trainer, stage.offset
        eval_results = self.evaluate(trainer) if job.do_eval else {}
        predictions = self.predict(trainer) if job.do_predict else None
        return self.finish(trainer, eval_results, predictions)

    def finish(self, trainer, eval_results, predictions):
        self.print_output_dir()
        return self._result(eval_results, predictions)

    def _result(self, eval_results, predictions):
        return SiatlResult(eval_results=eval_results, test_predictions=predictions,
                           output_dir=self.job.output_dir, stages=self.stages)


def run(job):
    """Runs `job` (train in stages, eval, predict); returns a `SiatlResult`."""
    return SiatlRunner(job).run()


registry.tasks.register("siatl", FineTuningTask(
    name="siatl",
    description="SiATL: a pre-trained LSTM LM (ULMFiT's AWD-LSTM) + task BiLSTM with "
                "self-attention, the LM loss as an auxiliary loss (weight 0.2 -> 0.1), "
                "sequential unfreezing (new layers; + the LM but its embeddings; all)",
    model_class=model_lib.SiatlClassifier, job_class=SiatlJob, run=run))
