"""MT-DNN multi-task fine-tuning as a library call: what `run/run_multitask.py` runs.

    from modeling.tasks import multitask_job
    result = multitask_job.run(multitask_job.MultitaskJob(
        task_list_file="tasks.json", vocab_file=".../vocab.txt",
        bert_config_file=".../bert_config.json", init_checkpoint=".../bert_model.ckpt",
        output_dir="/tmp/mtdnn", do_train=True, do_eval=True, num_train_steps=10000))
    result.eval_results["mrpc/eval_accuracy"]

`run(job)` is `MultitaskRunner(job).run()`, the common job shape of
`modeling.training.job`:

1. checks the flags, the casing against the checkpoint's name,
   `max_seq_length` against the config and the vocabulary, and reads the
   task list (`data.multitask.read_task_list`: name, processor, data_dir,
   head, weight, options per task); then, for each task, the single-task
   job's runner of its head checks the task and reads and writes its data
   to ``output_dir/<task>/`` (atomically) before any training: run_classifier's
   (`classifier_job.ClassifierRunner`: the `DataProcessor`, its task type,
   labels and metrics, Google's records) for classification, regression and
   ranking, run_ner's (`ner_job.NerRunner`: the CoNLL splits, the label list,
   the tagging records) for tagging, run_squad's (`squad_job.SquadRunner`:
   the SQuAD questions and their document windows) for span QA; a dev set
   is not padded to whole batches (each task's last dev batch is kept). A
   classification task's output layer is its ``options.classifier``: by
   default MT-DNN's stochastic answer network (``"san"``,
   `modeling.tasks.san`; ``san_steps`` K = 5, ``san_step_dropout`` 0.1) when
   every example is a sentence pair, else the dense layer on the pooled
   output (``"dense"``, which a pair task may also ask for);
2. trains `modeling.tasks.multitask.MultiTaskModel` (one shared encoder,
   one head per task) with the project's one trainer; every batch comes
   from one task, task t drawn with probability ``n_t^(1/T) / sum_s
   n_s^(1/T)`` (``sampling_temperature`` T; n_t its training examples:
   sequences, queries for ranking, document windows for span QA), see
   `data.multitask.sampling_dataset`. Training metrics go to TensorBoard per
   task (``<task>/loss``, ``<task>/accuracy`` ...);
3. evaluates every task on its own dev set (the dev sets read one after
   another through one evaluation, so each task's (sum, count) metrics come
   from its own batches only) and writes ``eval_results.txt``:
   ``<task>/eval_loss``, ``<task>/eval_accuracy`` ..., the processor's extra
   metrics for classification/regression (``<task>/eval_f1``, ``_mcc``,
   ``_pearson`` ...), entity precision/recall/F1 for tagging
   (``<task>/eval_f1``), exact match and F1 for span QA (answers decoded by
   its `SquadRunner`); ``eval_loss`` is the weighted total.

The checkpoints in ``output_dir`` hold the shared encoder under the same
variable paths as a single-task model's, so ``--init_checkpoint=output_dir``
of `run_classifier.py`, `run_ner.py` or `run_squad.py` fine-tunes a task
further from the multi-task encoder (MT-DNN's second stage); the heads are
not loaded there (a single-task model starts its head fresh).

Every problem with the inputs is a `MultitaskJobError` (a `ValueError`)
with a one-line message naming the flag, the task list entry and field, or
the data file and line. Registered as ``registry.tasks.get("multitask")``.
"""

import contextlib
import dataclasses
import json
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import input_pipeline as input_pipeline_lib
from data import multitask as data_lib
from data import processors as processors_lib
from data import squad as squad_lib
from data import tokenization
from data.processors import conll
from modeling import registry
from modeling.checkpoints import object_based
from modeling.tasks import FineTuningTask
from modeling.tasks import classification as classifier_lib
from modeling.tasks import classifier_job
from modeling.tasks import length_batching
from modeling.tasks import multitask as model_lib
from modeling.tasks import ner_job
from modeling.tasks import san as san_lib
from modeling.tasks import seqeval
from modeling.tasks import squad_job
from modeling.training import job as job_lib
from modeling.training import optimization
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training.options import option

__all__ = ["MultitaskJob", "MultitaskJobError", "MultitaskResult", "MultitaskRunner",
           "prepare_tasks", "run"]


class MultitaskJobError(ValueError):
    """A bad flag, task list entry or data file (one line)."""


# Options of each head (the task list's "options" object).
_PROCESSOR_OPTIONS = ("file_format", "text_a_column", "text_b_column", "label_column",
                      "guid_column", "has_header", "labels", "task_type", "label_separator",
                      "train_file", "dev_file", "test_file", "eval_metrics", "ids_num_labels",
                      "ids_label_from_last_id", "ids_cls_id", "ids_sep_id", "ids_offset",
                      "ids_keep", "xnli_language")
# A classification task's output layer (the model's, not the processor's).
CLASSIFIER_OPTIONS = ("classifier", "san_steps", "san_step_dropout")
OPTIONS = {
    data_lib.CLASSIFICATION: _PROCESSOR_OPTIONS + CLASSIFIER_OPTIONS,
    data_lib.REGRESSION: _PROCESSOR_OPTIONS,
    data_lib.RANKING: ("train_file", "dev_file", "test_file"),
    data_lib.TAGGING: ("tagging_scheme", "train_file", "dev_file"),
    data_lib.SPAN_QA: ("doc_stride", "max_query_length", "version_2_with_negative",
                       "n_best_size", "max_answer_length", "null_score_diff_threshold",
                       "train_file", "dev_file"),
}
# Options that are JSON true/false ("false", a string, would read as true).
BOOLEAN_OPTIONS = ("has_header", "ids_label_from_last_id", "version_2_with_negative")
TAGGING_PROCESSORS = ("ner", "conll")
SPAN_QA_PROCESSORS = ("squad",)


@dataclasses.dataclass
class MultitaskJob(settings.TrainerSettings, input_pipeline_lib.LengthBatchingSettings,
                   job_lib.EncoderSettings, settings.FineTuningSettings,
                   settings.EvalSettings):
    """Everything a multi-task run needs; the fields are `run_multitask.py`'s flags."""

    task_list_file: Optional[str] = option(
        None, "JSON list of tasks: name, processor, data_dir, head, weight, options.")
    train_batch_size: int = option(
        32, "Sequences per training batch (ranking: queries of C candidates make up about as "
        "many sequences).")
    num_train_steps: Optional[int] = option(
        None, "Updates to train for; default: --num_train_epochs passes over the summed task "
        "sizes.")
    sampling_temperature: float = option(
        1.0, "Task t is drawn with probability ~ n_t^(1/T): 1 proportional to its size, "
        "larger values closer to uniform.")
    teacher_dirs: Optional[str] = option(
        None, "Multi-task distillation: comma-separated output directories of earlier "
        "run_multitask runs (the teacher ensemble, e.g. the same tasks trained with other "
        "seeds). Each classification task learns from the average of the probabilities of "
        "the teachers that have a head for it, besides its labels.")
    teacher_config_file: Optional[str] = option(
        None, "The teachers' model config (default: --bert_config_file).")
    soft_target_weight: float = option(
        0.5, "With --teacher_dirs: a task's loss is (1 - w) * cross-entropy with the labels "
        "+ w * cross-entropy with the teachers' soft targets (0.5: their average, as in the "
        "MT-DNN distillation paper).")


@dataclasses.dataclass
class MultitaskResult:
    """What `run` produced.

    Attributes:
      eval_results: the contents of eval_results.txt ({} without do_eval).
      tasks: the prepared tasks (`PreparedTask`), in task-id order.
      probabilities: the sampling probability of each task.
      num_train_steps: updates trained for (0 without do_train).
      output_dir: checkpoints, TFRecords, TensorBoard logs.
      model: the trained (or restored) `MultiTaskModel`.
    """

    eval_results: dict
    tasks: list
    probabilities: list
    num_train_steps: int
    output_dir: str
    model: object = None


@dataclasses.dataclass
class PreparedTask:
    """One task with its data written: what the model and the input pipeline need."""

    spec: data_lib.TaskSpec
    task_id: int
    num_labels: Optional[int] = None       # classification, tagging
    num_choices: Optional[int] = None      # ranking
    label_list: Optional[list] = None
    eval_metrics: tuple = ()
    num_train: int = 0                     # training records (the sampling size)
    train_file: Optional[str] = None
    dev_file: Optional[str] = None
    spec_fn: object = None                 # (max_seq_length, is_training) -> parse spec
    dev_sentences: Optional[list] = None   # tagging: for entity F1
    dev_features: Optional[list] = None    # tagging, span QA: the dev features
    dev_examples: Optional[list] = None    # span QA: for decoding and EM/F1
    runner: object = None                  # its single-task runner (its data step)
    classifier: Optional[str] = None       # classification: "san" or "dense"
    san_steps: int = san_lib.DEFAULT_STEPS
    san_step_dropout: float = san_lib.DEFAULT_STEP_DROPOUT
    teachers: tuple = ()                   # distillation: the teacher dirs with its head

    @property
    def name(self):
        return self.spec.name

    @property
    def head(self):
        return self.spec.head

    def model_task(self):
        task = {"name": self.name, "head": self.head, "weight": self.spec.weight}
        if self.num_labels is not None:
            task["num_labels"] = self.num_labels
        if self.num_choices is not None:
            task["num_choices"] = self.num_choices
        if self.classifier is not None:
            task["classifier"] = self.classifier
        if self.classifier == model_lib.SAN:
            task.update(san_steps=self.san_steps, san_step_dropout=self.san_step_dropout)
        return task

    def batch_size(self, rows):
        """Records per batch for `rows` sequences (ranking: queries of C rows each)."""
        if self.head == data_lib.RANKING:
            return max(1, rows // self.num_choices)
        return rows


# ------------------------------------------------------------------ checks


def _fail(spec, field, message):
    return MultitaskJobError("%s: field %r: %s" % (spec.where, field, message))


def _check_processor(spec, processors, reads):
    """Raises unless the entry's processor is one of `processors` (the first named)."""
    if spec.processor.lower() not in processors:
        raise _fail(spec, "processor", "%r: %s (processor \"%s\")"
                    % (spec.processor, reads, processors[0]))


@contextlib.contextmanager
def _errors_of(spec, field=None):
    """A task's data errors (its runner's, its readers') as one line naming the entry;
    the runner's own (`ClassifierJobError`) also naming `field`, if given."""
    try:
        yield
    except (processors_lib.DataError, squad_lib.SquadDataError) as e:
        raise MultitaskJobError("%s: %s" % (spec.where, e)) from None
    except classifier_job.ClassifierJobError as e:
        raise (_fail(spec, field, str(e)) if field else
               MultitaskJobError("%s: %s" % (spec.where, e))) from None


def _check_options(spec):
    allowed = OPTIONS[spec.head]
    for key in spec.options:
        if key not in allowed:
            raise _fail(spec, "options", "%r is not an option of a %s task; its options: %s"
                        % (key, spec.head, ", ".join(allowed)))
        if key in BOOLEAN_OPTIONS:
            _bool_option(spec, key, None)
    if spec.head == data_lib.CLASSIFICATION:
        _classifier_options(spec)


def _classifier_options(spec):
    """(classifier or None for the default, K, step dropout) of a classification entry."""
    given = spec.options.get("classifier")
    if given is not None and given not in model_lib.CLASSIFIERS:
        raise _fail(spec, "options", "classifier=%s: expected \"san\" (the stochastic answer "
                    "network, for sentence pairs) or \"dense\"" % json.dumps(given))
    steps = _int_option(spec, "san_steps", san_lib.DEFAULT_STEPS, 1)
    rate = spec.options.get("san_step_dropout", san_lib.DEFAULT_STEP_DROPOUT)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < 1:
        raise _fail(spec, "options", "san_step_dropout=%s: expected a number in [0, 1)"
                    % json.dumps(rate))
    if given == model_lib.DENSE:
        for key in ("san_steps", "san_step_dropout"):
            if key in spec.options:
                raise _fail(spec, "options", "%s is a setting of the \"san\" classifier; "
                            "this task's classifier is \"dense\"" % key)
    return given, steps, float(rate)


def _first_single(examples):
    """The first example without a second text (`text_b`), else None."""
    return next((e for e in examples if not getattr(e, "text_b", None)), None)


def _data_path(spec, option, default):
    value = spec.options.get(option) or default
    return value if os.path.isabs(value) else os.path.join(spec.data_dir, value)


def _int_option(spec, key, default, minimum):
    value = spec.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(spec, "options", "%s=%r: expected an integer >= %d" % (key, value, minimum))
    return value


def _bool_option(spec, key, default):
    """A JSON true/false option (a string such as "false" is refused, never read as true)."""
    value = spec.options.get(key, default)
    if not isinstance(value, bool):
        raise _fail(spec, "options", "%s=%s: expected a JSON true or false"
                    % (key, json.dumps(value)))
    return value


# --------------------------------------------------------------- optimizer


def create_optimizer(job, num_train_steps, num_warmup_steps):
    """The job's optimizer (`optimization.create_optimizer`), idle heads kept as they are.

    A batch of task A gives task B's head an exactly zero gradient (its rows
    are masked out); `skip_zero_gradients` keeps Adam's momentum and the
    weight decay from moving that head anyway (MT-DNN's PyTorch optimizer
    skips parameters without a gradient).
    """
    return optimization.create_optimizer(
        job.learning_rate, max(1, num_train_steps), num_warmup_steps,
        **job.optimizer_options(), skip_zero_gradients=True)


# ------------------------------------------------------------------- input


# Every sequence key of a multi-task batch is padded with `input_mask` (ranking
# candidates are rows of their own there).
UNION_GROUPS = (("input_mask", data_lib.SEQUENCE_KEYS),)


def _task_input(task, seq, rows, is_training, seed, input_context=None, soft_width=None,
                trim=False):
    path = task.train_file if is_training else task.dev_file
    dataset = data_lib.task_dataset(path, task.spec_fn(seq, is_training), task.task_id,
                                    task.head, seq, task.batch_size(rows), is_training,
                                    input_context=input_context, seed=seed,
                                    num_choices=task.num_choices, soft_width=soft_width)
    if trim:  # each task's batches cut to their bucketed length (`length_batching`)
        dataset = dataset.map(
            lambda f: input_pipeline_lib.trim_batch(f, seq, UNION_GROUPS),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset


def train_input_fn(tasks, probabilities, seq, batch_size, seed=None, soft_width=None,
                   trim=False):
    """`input_fn(input_context)`: batches of one task each, tasks drawn with `probabilities`
    (with `soft_width`, the teachers' soft targets in every batch; `trim`: every batch cut
    to its bucketed length, `data.input_pipeline.trim_batch`)."""

    def input_fn(input_context=None):
        datasets = [_task_input(task, seq, batch_size, True,
                                None if seed is None else seed + task.task_id, input_context,
                                soft_width=soft_width, trim=trim)
                    for task in tasks]
        return data_lib.sampling_dataset(datasets, probabilities, seed=seed)

    return input_fn


def eval_input_fn(tasks, seq, batch_size, trim=False):
    """`input_fn`: every task's dev set, one after another (each batch one task)."""

    def input_fn(input_context=None):
        datasets = [_task_input(task, seq, batch_size, False, None, input_context, trim=trim)
                    for task in tasks]
        dataset = datasets[0]
        for other in datasets[1:]:
            dataset = dataset.concatenate(other)
        return dataset

    return input_fn


# --------------------------------------------------------------------- run


def prepare_tasks(job, specs, tokenizer, vocab_size):
    """Reads and writes every task's data (train and/or dev); returns `PreparedTask`s.

    `MultitaskRunner.prepare_tasks` for `job`, its family and config read from
    `job.model_family` and `job.bert_config_file` (`vocab_size` is the
    config's), `tokenizer` shared by the tasks.
    """
    del vocab_size  # the config's
    runner = MultitaskRunner(job)
    runner.family, runner.config = runner.load_family_config()
    runner.tokenizer = tokenizer
    return runner.prepare_tasks(specs)


class MultitaskRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`); each task's data through
    the single-task runner of its head (`prepare_tasks`), one trainer for all tasks."""

    error = MultitaskJobError
    modes = ("do_train", "do_eval")

    # ----- checks ------------------------------------------------------------------------

    def check(self):
        job = self.job
        self.check_modes()
        self.check_required("task_list_file", "bert_config_file", "vocab_file", "output_dir")
        if not job.sampling_temperature > 0:
            raise MultitaskJobError("--sampling_temperature=%s: expected a positive number "
                                    "(1: proportional to task size; larger: closer to uniform)"
                                    % job.sampling_temperature)
        if job.num_train_steps is not None and job.num_train_steps < 1 and job.do_train:
            raise MultitaskJobError("--num_train_steps=%d: expected a positive number of "
                                    "updates" % job.num_train_steps)
        self.check_positive("train_batch_size", "eval_batch_size", "gradient_accumulation_steps")
        input_pipeline_lib.check_length_batching(job, MultitaskJobError)
        if job.group_by_length:
            raise MultitaskJobError(
                "--group_by_length: run_multitask draws each batch from one task's own stream "
                "(MT-DNN's sampling) and does not regroup them; batches are still cut to "
                "their length (--trim_batches)")
        self.check_case_matches_checkpoint()
        self.family, self.config = self.load_family_config()
        # --num_train_steps leaves the epochs unused (not the warm-up).
        self.check_training_values(epochs=job.num_train_steps is None,
                                   warmup_proportion=job.warmup_proportion)
        self.check_files("vocab_file")
        self.check_vocab_matches(self.config)
        self.tokenizer = tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)
        try:
            self.specs = data_lib.read_task_list(job.task_list_file)
        except data_lib.TaskListError as e:
            raise MultitaskJobError(str(e)) from None
        self.check_teachers()

    def check_teachers(self):
        """--teacher_dirs: each a directory holding a checkpoint, none the --output_dir;
        --soft_target_weight in [0, 1]; the teachers' config read."""
        job = self.job
        self.teacher_checkpoints = []
        if not job.teacher_dirs:
            return
        if not job.do_train:
            raise MultitaskJobError("--teacher_dirs is given without --do_train: the "
                                    "teachers' soft targets are for training")
        if not 0.0 <= job.soft_target_weight <= 1.0:
            raise MultitaskJobError("--soft_target_weight=%s: expected a number from 0 to 1"
                                    % job.soft_target_weight)
        output = os.path.realpath(job.output_dir)
        for directory in [d.strip() for d in job.teacher_dirs.split(",") if d.strip()]:
            if os.path.realpath(directory) == output:
                raise MultitaskJobError("--teacher_dirs=%s is the --output_dir; a teacher is "
                                        "an earlier run's directory" % directory)
            latest = tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None
            if not latest:
                raise MultitaskJobError("--teacher_dirs=%s: no checkpoint there (expected "
                                        "the --output_dir of a finished run_multitask run)"
                                        % directory)
            self.teacher_checkpoints.append((directory, latest))
        if not self.teacher_checkpoints:
            raise MultitaskJobError("--teacher_dirs=%r names no directory" % job.teacher_dirs)
        config_flag = "teacher_config_file" if job.teacher_config_file else "bert_config_file"
        self.teacher_config = self.load_family_config(config_flag)[1]
        if self.teacher_config.vocab_size != self.config.vocab_size:
            raise MultitaskJobError("--%s=%s has vocab_size %d, the student's %d: teachers "
                                    "read the student's records, so they share its "
                                    "vocabulary" % (config_flag, getattr(job, config_flag),
                                                    self.teacher_config.vocab_size,
                                                    self.config.vocab_size))

    def check_family(self, family):
        if not family.has_pooler:
            raise MultitaskJobError("--model_family=%s: its encoder has no pooled output; the "
                                    "classification, regression and ranking heads need one "
                                    "(e.g. bert, albert)" % self.job.model_family)

    # ----- the tasks' data ---------------------------------------------------------------

    def prepare(self):
        job = self.job
        self.tasks = self.prepare_tasks(self.specs)
        self.probabilities = [1.0 / len(self.tasks)] * len(self.tasks)
        if not self.training:
            return None
        sizes = [task.num_train for task in self.tasks]
        self.probabilities = data_lib.sampling_probabilities(sizes, job.sampling_temperature)
        self.training_steps(sum(sizes))  # refused before task_sampling.txt is written
        self.soft_width = None
        if self.teacher_checkpoints:
            self.soft_width = self.write_soft_targets()
        for task, p in zip(self.tasks, self.probabilities):
            logging.info("Task %s (%s%s): %d training examples, sampled with p=%.4f",
                         task.name, task.head,
                         ", %s classifier" % task.classifier if task.classifier else "",
                         task.num_train, p)
        atomic.write_text(os.path.join(job.output_dir, "task_sampling.txt"), "".join(
            "%s\t%s\t%d\t%.6f\n" % (t.name, t.head, t.num_train, p)
            for t, p in zip(self.tasks, self.probabilities)))
        return sum(sizes)

    def prepare_tasks(self, specs):
        """Every task checked, read and written by its single-task runner (`PreparedTask`s).

        Everything is read and converted before any training, so a bad row of
        the last task is reported before time is spent on the first.
        """
        job = self.job
        prepared, writers = [], []
        for spec in specs:  # every entry's options before any task's records are written
            _check_options(spec)
        # Every task's files read (a bad row of the last task refused) before any is written.
        for task_id, spec in enumerate(specs):
            task = PreparedTask(spec=spec, task_id=task_id)
            directory = os.path.join(job.output_dir, spec.name)
            if spec.head == data_lib.TAGGING:
                write = self._prepare_tagging_task(task, directory)
            elif spec.head == data_lib.SPAN_QA:
                write = self._prepare_span_task(task, directory)
            else:
                write = self._prepare_processor_task(task, directory)
            if job.do_train:
                task.train_file = os.path.join(directory, "train.tf_record")
            if job.do_eval:
                task.dev_file = os.path.join(directory, "eval.tf_record")
            if job.do_train and task.num_train is not None and task.num_train < 1:
                raise _fail(spec, "data_dir", "%s has no training examples" % spec.data_dir)
            prepared.append(task)
            writers.append((directory, write))
        for directory, write in writers:
            tf.io.gfile.makedirs(directory)
            write()
        return prepared

    def _classifier_part(self, spec, directory):
        """run_classifier's runner of a classification/regression/ranking entry: its
        processor built, the head checked against it, then the runner's checks of the
        processor (task type, labels, metrics); Google's packing for every family
        (`PooledInputFormat`)."""
        job = self.job
        options = {k: v for k, v in spec.options.items() if k not in CLASSIFIER_OPTIONS}
        is_spec = ":" in spec.processor
        if spec.head == data_lib.RANKING and not is_spec:
            if spec.processor.lower() != "multiple_choice":
                raise _fail(spec, "processor", "%r: a ranking task reads the multiple-choice "
                            "JSON lines (processor \"multiple_choice\", or your own "
                            "file.py:Class subclassing MultipleChoiceProcessor)" % spec.processor)
        if spec.head in (data_lib.CLASSIFICATION, data_lib.REGRESSION):
            options.setdefault("task_type", spec.head)
        part_job = classifier_job.ClassifierJob(
            task_name=None if is_spec else spec.processor,
            processor=spec.processor if is_spec else None, data_dir=spec.data_dir,
            output_dir=directory, bert_config_file=job.bert_config_file,
            vocab_file=job.vocab_file, do_lower_case=job.do_lower_case,
            model_family=job.model_family, max_seq_length=job.max_seq_length,
            do_train=job.do_train, do_eval=job.do_eval,
            eval_batch_size=1,  # no padding: the multi-task evaluation keeps a partial batch
            **options)
        part = classifier_job.ClassifierRunner.task_of(
            part_job, family=self.family, config=self.config,
            input_format=classifier_job.PooledInputFormat(part_job, self.config, self.family))
        try:
            part.processor = processor = classifier_job.build_processor(
                part_job, self.config.vocab_size)
        except (processors_lib.ProcessorError, processors_lib.DataError, TypeError) as e:
            raise _fail(spec, "processor", str(e)) from None
        is_choice = getattr(processor, "is_multiple_choice", False)
        if spec.head == data_lib.RANKING and not is_choice:
            raise _fail(spec, "processor", "%s is not a multiple-choice processor; a ranking "
                        "task needs one" % type(processor).__name__)
        if spec.head != data_lib.RANKING:
            if is_choice:
                raise _fail(spec, "head", "%r with the multiple-choice processor: use head "
                            "\"ranking\"" % spec.head)
            task_type = getattr(processor, "task_type", processors_lib.CLASSIFICATION)
            if task_type != spec.head:
                raise _fail(spec, "head", "%r, but the processor %s is a %s task"
                            % (spec.head, type(processor).__name__, task_type))
        with _errors_of(spec, "processor"):
            part.check_processor()
        return part

    def _prepare_processor_task(self, task, directory):
        job, spec = self.job, task.spec
        task.runner = part = self._classifier_part(spec, directory)
        processor = part.processor
        if spec.head == data_lib.RANKING:
            return self._prepare_ranking_task(task, processor, directory)
        task.label_list, task.eval_metrics = part.label_list, part.eval_metrics
        task.num_labels = part.num_labels if spec.head == data_lib.CLASSIFICATION else None
        with _errors_of(spec, "data_dir"):
            train = processor.get_train_examples(spec.data_dir) if job.do_train else None
            dev, _ = part.read_eval_splits()
            if spec.head == data_lib.CLASSIFICATION:
                self._choose_classifier(task, (("training", train), ("dev", dev)))
        task.num_train = len(train or ())
        task.spec_fn = lambda s, _, h=spec.head: processors_lib.classifier_feature_spec(s, h)

        def write():
            with _errors_of(spec, "data_dir"):
                part.write_splits(train)
        return write

    def _choose_classifier(self, task, splits):
        """A classification task's output layer: the entry's \"classifier\", by default the
        SAN when every example of `splits` ((name, examples or None), ...) is a pair, else
        dense; a \"san\" given for single sentences is refused, and so is a classifier other
        than the one of the checkpoint a run in `output_dir` resumes or evaluates."""
        spec = task.spec
        given, task.san_steps, task.san_step_dropout = _classifier_options(spec)
        single = None
        for split, examples in splits:
            single = _first_single(examples or ())
            if single is not None:
                break
        if given == model_lib.SAN and single is not None:
            raise _fail(spec, "options", "classifier=\"san\" reads sentence pairs, but %s "
                        "example %r has no second text (text_b); use \"dense\" for single "
                        "sentences" % (split, single.guid))
        task.classifier = given or (model_lib.DENSE if single is not None else model_lib.SAN)
        self._check_checkpoint_classifier(task, given is None)

    def _check_checkpoint_classifier(self, task, by_default):
        """The checkpoint in `output_dir` (if any) holds the task's kind of classifier."""
        latest = tf.train.latest_checkpoint(self.job.output_dir)
        if not latest:
            return
        if getattr(self, "_checkpoint_paths", (None,))[0] != latest:
            reader = tf.train.load_checkpoint(latest)
            self._checkpoint_paths = (latest, set(object_based.model_variable_keys(reader,
                                                                                   latest)))
        stored = self._checkpoint_paths[1]
        prefix = "head_%s/" % task.name
        if prefix + "output_weights" not in stored:
            return  # a task new to this output_dir: its head starts fresh
        stored_kind = (model_lib.SAN if prefix + "attention_kernel" in stored
                       else model_lib.DENSE)
        if stored_kind != task.classifier:
            raise _fail(task.spec, "options", "classifier=\"%s\"%s, but the checkpoint %s "
                        "holds a \"%s\" classifier for this task; set \"classifier\": "
                        "\"%s\" or use a new --output_dir"
                        % (task.classifier, " (the default for sentence pairs)"
                           if by_default and task.classifier == model_lib.SAN else "",
                           latest, stored_kind, stored_kind))

    def _prepare_ranking_task(self, task, processor, directory):
        """One record per query of its C candidates (`data.multitask.write_ranking_records`)."""
        job, spec = self.job, task.spec

        splits = []
        with _errors_of(spec, "data_dir"):
            if job.do_train:
                splits.append((processor.get_train_examples(spec.data_dir), "train.tf_record"))
                task.num_train = len(splits[-1][0])
            if job.do_eval:
                splits.append((processor.get_dev_examples(spec.data_dir), "eval.tf_record"))
        for examples, name in splits:
            if not examples:
                raise _fail(spec, "data_dir", "%s has no examples for %s"
                            % (spec.data_dir, name))
        task.num_choices = processor.num_choices
        task.eval_metrics = ("accuracy",)
        task.spec_fn = lambda s, _, c=task: data_lib.ranking_feature_spec(s, c.num_choices)

        def write():
            with _errors_of(spec, "data_dir"):
                for examples, name in splits:
                    task.num_choices = data_lib.write_ranking_records(
                        examples, job.max_seq_length, self.tokenizer,
                        os.path.join(directory, name)) or task.num_choices
        return write

    def _prepare_tagging_task(self, task, directory):
        """run_ner's runner reads the CoNLL splits and writes the label list and records."""
        job, spec = self.job, task.spec
        _check_processor(spec, TAGGING_PROCESSORS, "a tagging task reads CoNLL files")
        scheme = spec.options.get("tagging_scheme", "bio")
        if scheme not in conll.SCHEMES:
            raise _fail(spec, "options", "tagging_scheme=%r: expected one of %s"
                        % (scheme, ", ".join(conll.SCHEMES)))
        task.runner = part = ner_job.NerRunner.task_of(ner_job.NerJob(
            data_dir=spec.data_dir, train_file=_data_path(spec, "train_file", "train.txt"),
            dev_file=_data_path(spec, "dev_file", "dev.txt"), tagging_scheme=scheme,
            output_dir=directory, max_seq_length=job.max_seq_length, do_train=job.do_train,
            do_eval=job.do_eval, eval_batch_size=1), tokenizer=self.tokenizer)
        with _errors_of(spec):
            part.read_splits()
            part.check_labels()
        task.num_train = len(part.train or ())
        task.eval_metrics = ("accuracy", "f1")
        task.spec_fn = lambda s, _: conll.tagging_feature_spec(s)

        def write():
            with _errors_of(spec):
                part.write_splits()
            task.label_list, task.num_labels = part.label_list, len(part.label_list)
            task.dev_sentences, task.dev_features = part.dev, part.dev_features
        return write

    def _prepare_span_task(self, task, directory):
        """run_squad's runner reads the questions and writes their document windows."""
        job, spec = self.job, task.spec
        _check_processor(spec, SPAN_QA_PROCESSORS, "a span_qa task reads SQuAD JSON")
        doc_stride = _int_option(spec, "doc_stride", 128, 1)
        max_query_length = _int_option(spec, "max_query_length", 64, 1)
        if job.max_seq_length < max_query_length + 4:
            raise _fail(spec, "options", "max_query_length=%d leaves no room for the document "
                        "in --max_seq_length=%d" % (max_query_length, job.max_seq_length))
        n_best_size = _int_option(spec, "n_best_size", 20, 1)
        max_answer_length = _int_option(spec, "max_answer_length", 30, 1)
        threshold = spec.options.get("null_score_diff_threshold", 0.0)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise _fail(spec, "options", "null_score_diff_threshold=%r: expected a number"
                        % (threshold,))
        # Evaluated as run_squad.py does: windows predicted, answers decoded,
        # exact match and F1 against every gold answer.
        task.runner = part = squad_job.SquadRunner.task_of(squad_job.SquadJob(
            train_file=_data_path(spec, "train_file", "train.json"),
            predict_file=_data_path(spec, "dev_file", "dev.json"), output_dir=directory,
            do_lower_case=job.do_lower_case, max_seq_length=job.max_seq_length,
            doc_stride=doc_stride, max_query_length=max_query_length, do_train=job.do_train,
            do_predict=job.do_eval, n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            version_2_with_negative=_bool_option(spec, "version_2_with_negative", False),
            null_score_diff_threshold=float(threshold)), tokenizer=self.tokenizer)
        with _errors_of(spec):
            part.read_splits()
        task.num_train = None  # the document windows, known once written
        task.spec_fn = squad_lib.feature_spec

        def write():
            with _errors_of(spec):
                part.write_splits()
            task.num_train = len(part.train_features or ())
            if job.do_train and task.num_train < 1:
                raise _fail(spec, "data_dir", "%s has no training examples" % spec.data_dir)
            task.dev_examples, task.dev_features = part.predict_examples, part.predict_features
        return write

    # ----- distillation --------------------------------------------------------------------

    def _teacher_tasks(self, directory, checkpoint):
        """The student's classification tasks that the teacher at `checkpoint` has a head
        for, as the teacher's model tasks (its own kind of classifier)."""
        stored = set(object_based.model_variable_keys(tf.train.load_checkpoint(checkpoint),
                                                      checkpoint))
        tasks = []
        for task in self.tasks:
            prefix = "head_%s/" % task.name
            if task.head != data_lib.CLASSIFICATION or prefix + "output_weights" not in stored:
                continue
            model_task = task.model_task()
            model_task["classifier"] = (model_lib.SAN if prefix + "attention_kernel" in stored
                                        else model_lib.DENSE)
            if model_task["classifier"] == model_lib.DENSE:
                for key in ("san_steps", "san_step_dropout"):
                    model_task.pop(key, None)
            tasks.append((task, model_task))
        logging.info("Teacher %s: soft targets for %s", directory,
                     ", ".join(t.name for t, _ in tasks) or "no task of this run")
        return tasks

    def _teacher_probabilities(self, directory, checkpoint):
        """{task name: [examples, labels] probabilities} of one teacher on the training
        records, in record order."""
        job = self.job
        tasks = self._teacher_tasks(directory, checkpoint)
        if not tasks:
            return {}
        model = model_lib.MultiTaskModel.from_config_object(
            self.teacher_config, [model_task for _, model_task in tasks], family=self.family)
        probabilities = {}
        for index, (task, _) in enumerate(tasks):
            dataset = input_pipeline_lib.tfrecord_dataset(
                task.train_file, task.spec_fn(job.max_seq_length, False), job.eval_batch_size,
                is_training=False, drop_remainder=False)
            rows = []
            for features in dataset:
                features = dict(features, task_id=tf.fill(tf.shape(features["label_ids"])[:1],
                                                          index))
                if not rows and index == 0:
                    model(features, training=False)  # builds the variables
                    self._restore_teacher(model, directory, checkpoint)
                rows.append(model(features, training=False)[task.name + "/probabilities"])
            probabilities[task.name] = np.concatenate([r.numpy() for r in rows], axis=0)
        return probabilities

    def _restore_teacher(self, model, directory, checkpoint):
        """Every weight of `model` (encoder and heads) from the trainer checkpoint, by path."""
        reader = tf.train.load_checkpoint(checkpoint)
        stored = object_based.model_variable_keys(reader, checkpoint)
        shapes = reader.get_variable_to_shape_map()
        for variable in model.weights:
            if "seed_generator" in variable.path:
                continue
            key = stored.get(variable.path)
            if key is None or tuple(shapes[key]) != tuple(variable.shape):
                raise MultitaskJobError(
                    "--teacher_dirs=%s: its checkpoint %s has %s for the teacher model's %s "
                    "%s (the model of --%s and this task list)"
                    % (directory, checkpoint, "no weight" if key is None else
                       "shape %s" % (tuple(shapes[key]),), variable.path,
                       tuple(variable.shape), "teacher_config_file"
                       if self.job.teacher_config_file else "bert_config_file"))
            variable.assign(reader.get_tensor(key))

    def write_soft_targets(self):
        """Each classification task with teachers gets ``<task>/train_soft.tf_record``: its
        training records with the teachers' average probabilities (Liu et al. 2019, MT-DNN
        distillation); returns the widest label set (the batches' soft-target width)."""
        job = self.job
        total, teachers = {}, {}
        for directory, checkpoint in self.teacher_checkpoints:
            for name, probabilities in self._teacher_probabilities(directory,
                                                                   checkpoint).items():
                total[name] = total.get(name, 0.0) + probabilities.astype(np.float64)
                teachers.setdefault(name, []).append(directory)
        if not total:
            raise MultitaskJobError("--teacher_dirs=%s: no teacher has a head for a "
                                    "classification task of --task_list_file=%s"
                                    % (job.teacher_dirs, job.task_list_file))
        width = 0
        for task in self.tasks:
            if task.name not in total:
                continue
            average = total[task.name] / len(teachers[task.name])
            soft_file = os.path.join(job.output_dir, task.name, "train_soft.tf_record")
            data_lib.write_soft_targets(task.train_file, soft_file, average)
            task.train_file, task.teachers = soft_file, tuple(teachers[task.name])
            task.spec_fn = (lambda s, training, base=task.spec_fn, n=task.num_labels:
                            data_lib.soft_target_spec(base(s, training), n)
                            if training else base(s, training))
            width = max(width, task.num_labels)
            logging.info("Task %s: soft targets of %d teacher(s), which agree with the "
                         "labels on %.1f%% of the training examples", task.name,
                         len(task.teachers), 100.0 * self._agreement(task, average))
        return width

    def _agreement(self, task, average):
        labels = [int(np.reshape(f["label_ids"], [-1])[0]) for f in tf.data.TFRecordDataset(task.train_file).map(
            lambda r: tf.io.parse_single_example(r, task.spec_fn(self.job.max_seq_length,
                                                                 False))).as_numpy_iterator()]
        return float(np.mean(np.argmax(average, axis=-1) == np.asarray(labels)))

    # ----- training ----------------------------------------------------------------------

    def training_steps(self, num_examples):
        """--num_train_steps, else --num_train_epochs passes over every task's batches
        (a ranking batch: train_batch_size // C queries); a run of no update is refused."""
        job = self.job
        if job.num_train_steps:
            num_train_steps = int(job.num_train_steps)
        else:
            batches = sum(task.num_train / task.batch_size(job.train_batch_size)
                          for task in self.tasks)
            num_train_steps = int(batches * job.num_train_epochs / job.gradient_accumulation_steps)
            if num_train_steps < 1:
                raise MultitaskJobError(
                    "%d training examples, --train_batch_size=%d and --num_train_epochs=%s "
                    "make no training step." % (num_examples, job.train_batch_size,
                                                job.num_train_epochs))
        return num_train_steps, int(num_train_steps * job.warmup_proportion)

    def build_model(self):
        return model_lib.MultiTaskModel.from_config_object(
            self.config, [task.model_task() for task in self.tasks], family=self.family,
            soft_target_weight=self.job.soft_target_weight)

    def build_trainer(self, **overrides):
        """`JobRunner.build_trainer` with `create_optimizer` (idle heads kept as they are)."""
        num_train_steps, num_warmup_steps = self.num_train_steps, self.num_warmup_steps
        overrides.setdefault("optimizer_fn", lambda: create_optimizer(
            self.job, num_train_steps, num_warmup_steps))
        return super().build_trainer(**overrides)

    def train_input_fn(self):
        job = self.job
        return train_input_fn(self.tasks, self.probabilities, job.max_seq_length,
                              job.train_batch_size, seed=job.seed,
                              soft_width=getattr(self, "soft_width", None),
                              trim=job.trim_batches)

    # ----- evaluation --------------------------------------------------------------------

    def _dev_input(self, task):
        job = self.job
        return lambda ctx: _task_input(task, job.max_seq_length, job.eval_batch_size, False,
                                       None, ctx, trim=job.trim_batches)

    def evaluate(self, trainer):
        job, tasks = self.job, self.tasks
        # Span QA dev windows carry no targets (a question may have several
        # answers): those tasks are decoded and scored below instead.
        scored = [task for task in tasks if task.head != data_lib.SPAN_QA]
        results = {"global_step": trainer.current_step()}
        if scored:
            raw = trainer.evaluate(eval_input_fn(scored, job.max_seq_length, job.eval_batch_size,
                                                 trim=job.trim_batches),
                                   max_steps=None, restore=False)
            results = {"global_step": raw.pop("global_step"), "eval_loss": raw.pop("loss")}
            names = {task.name for task in scored}
            for key, value in raw.items():
                name, _, metric = key.partition("/")
                if name in names:
                    results["%s/eval_%s" % (name, metric)] = value
        extra = {}
        for task in tasks:
            for metric, value in self._task_scores(trainer, task).items():
                extra["%s/eval_%s" % (task.name, metric)] = float(value)
        results.update(extra)
        if trainer.is_chief:
            if extra:
                # pylint: disable-next=protected-access
                classifier_job._write_summaries(
                    job.output_dir, results["global_step"],
                    {name.replace("/eval_", "/"): value for name, value in extra.items()})
            trainer_lib.write_eval_results(results, os.path.join(job.output_dir,
                                                                 "eval_results.txt"))
        job_lib.print_results(results)
        return results

    def _task_scores(self, trainer, task):
        """A task's metrics from its dev predictions: span QA's exact match and F1, tagging's
        entity scores, a classification/regression processor's extra metrics."""
        if task.head == data_lib.SPAN_QA:
            return self._span_scores(trainer, task)
        if task.head == data_lib.TAGGING:
            name = task.name + "/predicted_ids"
            predicted = length_batching.predict(trainer, self._dev_input(task), [name], self.job,
                                                sequence_outputs=[name])[name]
            tags = ner_job.tags_of(task.dev_sentences, task.dev_features, predicted,
                                   task.label_list)
            scores = seqeval.entity_scores([s.tags for s in task.dev_sentences], tags)
            return {key: scores[key] for key in ("precision", "recall", "f1")}
        names = [m for m in task.eval_metrics if m != "accuracy"]
        if task.head not in (data_lib.CLASSIFICATION, data_lib.REGRESSION) or not names:
            return {}
        output = task.name + ("/probabilities" if task.head == data_lib.CLASSIFICATION
                              else "/predictions")
        key = "label_ids" if task.head == data_lib.CLASSIFICATION else "label_values"
        predictions = trainer.predict(self._dev_input(task), [output, key, "is_real_example"],
                                      restore=False)
        return classifier_lib.compute_metrics(names, predictions[output], predictions[key],
                                              task.head, predictions["is_real_example"])

    def _span_scores(self, trainer, task):
        """The dev windows' logits decoded into answers by the task's `SquadRunner`
        (run_squad.py's way), written to ``<task>/predictions.json``; EM and F1."""
        names = [task.name + "/start_logits", task.name + "/end_logits"]
        outputs = length_batching.predict(trainer, self._dev_input(task), names, self.job,
                                          sequence_outputs=names, pad_value=-10000.0)
        features, part = task.dev_features, task.runner
        if len(outputs[names[0]]) != len(features):
            raise MultitaskJobError("%s: predicted %d windows but the dev set has %d"
                                    % (task.spec.where, len(outputs[names[0]]), len(features)))
        results = squad_lib.stack_results([f.unique_id for f in features], outputs[names[0]],
                                          outputs[names[1]])
        predictions, nbest, null_odds = part.answers(results)
        if trainer.is_chief:
            negatives = part.job.version_2_with_negative
            squad_lib.write_predictions(part.job.output_dir, predictions, nbest,
                                        null_odds if negatives else None)
        scores = squad_lib.evaluate(task.dev_examples, predictions)
        return {key: value for key, value in scores.items() if not key.endswith("total")}

    def finish(self, trainer, eval_results, predictions):
        super().finish(trainer, eval_results, predictions)  # Checkpoints: ...
        output_dir = self.job.output_dir
        print("TensorBoard:  tensorboard --logdir %s" % os.path.abspath(output_dir))
        return MultitaskResult(eval_results=eval_results, tasks=self.tasks,
                               probabilities=self.probabilities,
                               num_train_steps=self.num_train_steps, output_dir=output_dir,
                               model=trainer.model)


def run(job):
    """Runs `job` (multi-task training and/or per-task evaluation); returns a `MultitaskResult`."""
    return MultitaskRunner(job).run()


registry.tasks.register("multitask", FineTuningTask(
    name="multitask",
    description="MT-DNN: one shared encoder, one head per task (classification, regression, "
                "pairwise ranking, span QA, tagging), batches sampled per task",
    model_class=model_lib.MultiTaskModel, job_class=MultitaskJob, run=run))
