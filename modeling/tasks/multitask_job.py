"""MT-DNN multi-task fine-tuning as a library call: what `run/run_multitask.py` runs.

    from modeling.tasks import multitask_job
    result = multitask_job.run(multitask_job.MultitaskJob(
        task_list_file="tasks.json", vocab_file=".../vocab.txt",
        bert_config_file=".../bert_config.json", init_checkpoint=".../bert_model.ckpt",
        output_dir="/tmp/mtdnn", do_train=True, do_eval=True, num_train_steps=10000))
    result.eval_results["mrpc/eval_accuracy"]

`run(job)`:

1. reads the task list (`data.multitask.read_task_list`: name, processor,
   data_dir, head, weight, options per task), checks each task's settings,
   reads its train/dev data through the project's readers (a
   `DataProcessor` for classification, regression and ranking, the CoNLL
   reader for tagging, the SQuAD reader for span QA) and writes its
   TFRecords to ``output_dir/<task>/`` (atomically) before any training;
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
   (``<task>/eval_f1``), start/end accuracy for span QA; ``eval_loss`` is
   the weighted total.

The checkpoints in ``output_dir`` hold the shared encoder under the same
variable paths as a single-task model's, so ``--init_checkpoint=output_dir``
of `run_classifier.py`, `run_ner.py` or `run_squad.py` fine-tunes a task
further from the multi-task encoder (MT-DNN's second stage); the heads are
not loaded there (a single-task model starts its head fresh).

Every problem with the inputs is a `MultitaskJobError` (a `ValueError`)
with a one-line message naming the flag, the task list entry and field, or
the data file and line. Registered as ``registry.tasks.get("multitask")``.
"""

import dataclasses
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import multitask as data_lib
from data import processors as processors_lib
from data import squad as squad_lib
from data import tokenization
from data.processors import conll
from modeling import checkpoints
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import classification as classifier_lib
from modeling.tasks import classifier_job
from modeling.tasks import multitask as model_lib
from modeling.tasks import ner_job
from modeling.tasks import seqeval
from modeling.training import optimization
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["MultitaskJob", "MultitaskJobError", "MultitaskResult", "prepare_tasks", "run"]


class MultitaskJobError(ValueError):
    """A bad flag, task list entry or data file (one line)."""


# Options of each head (the task list's "options" object).
_PROCESSOR_OPTIONS = ("file_format", "text_a_column", "text_b_column", "label_column",
                      "guid_column", "has_header", "labels", "task_type", "label_separator",
                      "train_file", "dev_file", "test_file", "eval_metrics", "ids_num_labels",
                      "ids_label_from_last_id", "ids_cls_id", "ids_sep_id", "ids_offset",
                      "ids_keep", "xnli_language")
OPTIONS = {
    data_lib.CLASSIFICATION: _PROCESSOR_OPTIONS,
    data_lib.REGRESSION: _PROCESSOR_OPTIONS,
    data_lib.RANKING: ("train_file", "dev_file", "test_file"),
    data_lib.TAGGING: ("tagging_scheme", "train_file", "dev_file"),
    data_lib.SPAN_QA: ("doc_stride", "max_query_length", "version_2_with_negative",
                       "n_best_size", "max_answer_length", "null_score_diff_threshold",
                       "train_file", "dev_file"),
}
TAGGING_PROCESSORS = ("ner", "conll")
SPAN_QA_PROCESSORS = ("squad",)


@dataclasses.dataclass
class MultitaskJob(settings.TrainerSettings):
    """Everything a multi-task run needs; the fields are `run_multitask.py`'s flags."""

    task_list_file: Optional[str] = option(
        None, "JSON list of tasks: name, processor, data_dir, head, weight, options.")
    model_family: str = option("bert", "The encoder's model family (bert, albert, ...).")
    bert_config_file: Optional[str] = option(
        None, "The config json file corresponding to the pre-trained BERT model.")
    vocab_file: Optional[str] = option(
        None, "The vocabulary file that the BERT model was trained on.")
    output_dir: Optional[str] = option(
        None, "Where checkpoints, records and results are written.")
    init_checkpoint: Optional[str] = option(
        None, "Initial checkpoint: a Google bert_model.ckpt prefix, a checkpoint of this "
        "project, or HF safetensors.")
    do_lower_case: bool = option(True, "Lower case the input (True for uncased models).")
    max_seq_length: int = option(128, "Maximum word pieces per sequence.")
    do_train: bool = option(False, "Whether to run multi-task training.")
    do_eval: bool = option(False, "Whether to evaluate every task on its dev set.")
    train_batch_size: int = option(
        32, "Sequences per training batch (ranking: queries of C candidates make up about as "
        "many sequences).")
    eval_batch_size: int = option(8, "Sequences per eval batch.")
    learning_rate: float = option(5e-5, "The initial learning rate for Adam.")
    num_train_steps: Optional[int] = option(
        None, "Updates to train for; default: --num_train_epochs passes over the summed task "
        "sizes.")
    num_train_epochs: float = option(
        3.0, "Passes over all tasks' data (without --num_train_steps).")
    warmup_proportion: float = option(0.1, "Proportion of training with linear warmup.")
    save_checkpoints_steps: int = option(1000, "How often to save the model checkpoint.")
    sampling_temperature: float = option(
        1.0, "Task t is drawn with probability ~ n_t^(1/T): 1 proportional to its size, "
        "larger values closer to uniform.")
    seed: Optional[int] = option(None, "Random seed for weights, dropout and task sampling.")


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
        return task

    def batch_size(self, rows):
        """Records per batch for `rows` sequences (ranking: queries of C rows each)."""
        if self.head == data_lib.RANKING:
            return max(1, rows // self.num_choices)
        return rows


# ------------------------------------------------------------------ checks


def _check_job(job):
    if not (job.do_train or job.do_eval):
        raise MultitaskJobError("At least one of `do_train` or `do_eval` must be True.")
    for name in ("task_list_file", "bert_config_file", "vocab_file", "output_dir"):
        if not getattr(job, name):
            raise MultitaskJobError("--%s is required." % name)
    if not job.sampling_temperature > 0:
        raise MultitaskJobError("--sampling_temperature=%s: expected a positive number "
                                "(1: proportional to task size; larger: closer to uniform)"
                                % job.sampling_temperature)
    if job.num_train_steps is not None and job.num_train_steps < 1 and job.do_train:
        raise MultitaskJobError("--num_train_steps=%d: expected a positive number of updates"
                                % job.num_train_steps)
    for name in ("train_batch_size", "eval_batch_size", "gradient_accumulation_steps"):
        if getattr(job, name) < 1:
            raise MultitaskJobError("--%s must be positive." % name)
    try:
        tokenization.validate_case_matches_checkpoint(job.do_lower_case, job.init_checkpoint)
    except ValueError as e:
        raise MultitaskJobError(str(e)) from e
    try:
        family = registry.families.get(job.model_family)
    except registry.RegistryError as e:
        raise MultitaskJobError("--model_family: %s" % e) from e
    if not family.has_pooler:
        raise MultitaskJobError("--model_family=%s: its encoder has no pooled output; the "
                                "classification, regression and ranking heads need one "
                                "(e.g. bert, albert)" % job.model_family)
    if not os.path.exists(job.bert_config_file):
        raise MultitaskJobError("--bert_config_file=%s: no such file" % job.bert_config_file)
    config = family.load_config(job.bert_config_file)
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_positions is not None and job.max_seq_length > max_positions:
        raise MultitaskJobError(
            "Cannot use sequence length %d because the BERT model (%s) was only trained up "
            "to sequence length %d (max_position_embeddings)."
            % (job.max_seq_length, job.bert_config_file, max_positions))
    if job.nan_policy not in trainer_lib.NAN_POLICIES:
        raise MultitaskJobError("--nan_policy=%s: expected one of %s"
                                % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))
    validation.validate_training_values(
        job.do_train, learning_rate=job.learning_rate,
        save_checkpoints_steps=job.save_checkpoints_steps,
        keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
        num_train_epochs=(job.num_train_epochs if job.do_train and job.num_train_steps is None
                          else None),
        warmup_proportion=job.warmup_proportion, do_eval=job.do_eval)
    if not os.path.exists(job.vocab_file):
        raise MultitaskJobError("--vocab_file=%s: no such file" % job.vocab_file)
    vocab = tokenization.load_vocab(job.vocab_file)
    tokenization.check_vocab_special_tokens(vocab, job.vocab_file,
                                            required=("[UNK]", "[CLS]", "[SEP]"))
    if len(vocab) != config.vocab_size:
        raise MultitaskJobError(
            "The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d; "
            "use the vocab.txt that belongs to the model."
            % (job.vocab_file, len(vocab), job.bert_config_file, config.vocab_size))
    return family, config, tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)


def _fail(spec, field, message):
    return MultitaskJobError("%s: field %r: %s" % (spec.where, field, message))


def _check_options(spec):
    allowed = OPTIONS[spec.head]
    for key in spec.options:
        if key not in allowed:
            raise _fail(spec, "options", "%r is not an option of a %s task; its options: %s"
                        % (key, spec.head, ", ".join(allowed)))


def _processor(spec, vocab_size):
    """The DataProcessor of a classification/regression/ranking entry, configured."""
    options = dict(spec.options)
    is_spec = ":" in spec.processor
    if spec.head == data_lib.RANKING and not is_spec:
        if spec.processor.lower() != "multiple_choice":
            raise _fail(spec, "processor", "%r: a ranking task reads the multiple-choice "
                        "JSON lines (processor \"multiple_choice\", or your own "
                        "file.py:Class subclassing MultipleChoiceProcessor)" % spec.processor)
    if spec.head in (data_lib.CLASSIFICATION, data_lib.REGRESSION):
        options.setdefault("task_type", spec.head)
    job = classifier_job.ClassifierJob(
        task_name=None if is_spec else spec.processor, processor=spec.processor if is_spec
        else None, data_dir=spec.data_dir, **options)
    try:
        processor = classifier_job.build_processor(job, vocab_size)
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
    return processor


def _data_path(spec, option, default):
    value = spec.options.get(option) or default
    return value if os.path.isabs(value) else os.path.join(spec.data_dir, value)


def _int_option(spec, key, default, minimum):
    value = spec.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(spec, "options", "%s=%r: expected an integer >= %d" % (key, value, minimum))
    return value


def _read_label_list(path, spec):
    if not tf.io.gfile.exists(path):
        raise _fail(spec, "head", "without --do_train the tags come from %s, written by a "
                    "training run in --output_dir; it does not exist" % path)
    with tf.io.gfile.GFile(path) as f:
        return [line.strip() for line in f if line.strip()]


def prepare_tasks(job, specs, tokenizer, vocab_size):
    """Reads and writes every task's data (train and/or dev); returns `PreparedTask`s.

    Everything is read and converted before any training, so a bad row of
    the last task is reported before time is spent on the first.
    """
    prepared = []
    for task_id, spec in enumerate(specs):
        _check_options(spec)
        task = PreparedTask(spec=spec, task_id=task_id)
        directory = os.path.join(job.output_dir, spec.name)
        tf.io.gfile.makedirs(directory)
        train_path = os.path.join(directory, "train.tf_record")
        dev_path = os.path.join(directory, "eval.tf_record")
        try:
            if spec.head in (data_lib.CLASSIFICATION, data_lib.REGRESSION, data_lib.RANKING):
                _prepare_processor_task(job, task, tokenizer, vocab_size, train_path,
                                        dev_path)
            elif spec.head == data_lib.TAGGING:
                _prepare_tagging_task(job, task, tokenizer, directory, train_path, dev_path)
            else:
                _prepare_span_task(job, task, tokenizer, train_path, dev_path)
        except (processors_lib.DataError, squad_lib.SquadDataError) as e:
            raise MultitaskJobError("%s: %s" % (spec.where, e)) from None
        except classifier_job.ClassifierJobError as e:
            raise MultitaskJobError("%s: field 'processor': %s" % (spec.where, e)) from None
        if job.do_train and task.num_train < 1:
            raise _fail(spec, "data_dir", "%s has no training examples" % spec.data_dir)
        prepared.append(task)
    return prepared


def _prepare_processor_task(job, task, tokenizer, vocab_size, train_path, dev_path):
    spec, seq = task.spec, job.max_seq_length
    processor = _processor(spec, vocab_size)
    if spec.head == data_lib.RANKING:
        def write(examples, path):
            if not examples:
                raise _fail(spec, "data_dir", "%s has no examples for %s"
                            % (spec.data_dir, os.path.basename(path)))
            return data_lib.write_ranking_records(examples, seq, tokenizer, path)

        if job.do_train:
            examples = processor.get_train_examples(spec.data_dir)
            task.num_choices = write(examples, train_path)
            task.num_train, task.train_file = len(examples), train_path
        if job.do_eval:
            task.num_choices = write(processor.get_dev_examples(spec.data_dir), dev_path)
            task.dev_file = dev_path
        task.num_choices = task.num_choices or processor.num_choices
        task.eval_metrics = ("accuracy",)
        task.spec_fn = lambda s, _, c=task: data_lib.ranking_feature_spec(s, c.num_choices)
        return
    # pylint: disable-next=protected-access
    label_list, num_labels, eval_metrics = classifier_job.labels_and_metrics(processor,
                                                                              spec.head)
    task.label_list, task.eval_metrics = label_list, eval_metrics
    task.num_labels = num_labels if spec.head == data_lib.CLASSIFICATION else None
    needs_tokenizer = getattr(processor, "needs_tokenizer", True)
    if job.do_train:
        examples = processor.get_train_examples(spec.data_dir)
        processors_lib.file_based_convert_examples_to_features(
            examples, label_list, seq, tokenizer if needs_tokenizer else None, train_path,
            spec.head)
        task.num_train, task.train_file = len(examples), train_path
    if job.do_eval:
        examples = processor.get_dev_examples(spec.data_dir)
        if not examples:
            raise _fail(spec, "data_dir", "the dev set in %s has no examples" % spec.data_dir)
        processors_lib.file_based_convert_examples_to_features(
            examples, label_list, seq, tokenizer if needs_tokenizer else None, dev_path,
            spec.head)
        task.dev_file = dev_path
    task.spec_fn = lambda s, _, h=spec.head: processors_lib.classifier_feature_spec(s, h)


def _prepare_tagging_task(job, task, tokenizer, directory, train_path, dev_path):
    spec, seq = task.spec, job.max_seq_length
    if spec.processor.lower() not in TAGGING_PROCESSORS:
        raise _fail(spec, "processor", "%r: a tagging task reads CoNLL files (processor "
                    "\"ner\")" % spec.processor)
    scheme = spec.options.get("tagging_scheme", "bio")
    if scheme not in conll.SCHEMES:
        raise _fail(spec, "options", "tagging_scheme=%r: expected one of %s"
                    % (scheme, ", ".join(conll.SCHEMES)))
    label_path = os.path.join(directory, ner_job.LABEL_LIST_FILE)

    def read(option, default, set_type):
        path = _data_path(spec, option, default)
        sentences = conll.read_conll(path, scheme, set_type)
        if not sentences:
            raise _fail(spec, "data_dir", "%s has no sentences" % path)
        return sentences

    if job.do_train:
        train = read("train_file", "train.txt", "train")
        task.label_list = conll.label_list_from(train)
        atomic.write_text(label_path, "".join(label + "\n" for label in task.label_list))
        conll.write_tagging_records(train, task.label_list, seq, tokenizer, train_path)
        task.num_train, task.train_file = len(train), train_path
    else:
        task.label_list = _read_label_list(label_path, spec)
    task.num_labels = len(task.label_list)
    if job.do_eval:
        dev = read("dev_file", "dev.txt", "dev")
        conll.check_tags(dev, scheme)
        task.dev_features = conll.write_tagging_records(dev, task.label_list, seq, tokenizer,
                                                        dev_path)
        task.dev_sentences, task.dev_file = dev, dev_path
    task.eval_metrics = ("accuracy", "f1")
    task.spec_fn = lambda s, _: conll.tagging_feature_spec(s)


def _prepare_span_task(job, task, tokenizer, train_path, dev_path):
    spec, seq = task.spec, job.max_seq_length
    if spec.processor.lower() not in SPAN_QA_PROCESSORS:
        raise _fail(spec, "processor", "%r: a span_qa task reads SQuAD JSON (processor "
                    "\"squad\")" % spec.processor)
    doc_stride = _int_option(spec, "doc_stride", 128, 1)
    max_query_length = _int_option(spec, "max_query_length", 64, 1)
    if seq < max_query_length + 4:
        raise _fail(spec, "options", "max_query_length=%d leaves no room for the document "
                    "in --max_seq_length=%d" % (max_query_length, seq))
    negatives = bool(spec.options.get("version_2_with_negative", False))

    for key, minimum in (("n_best_size", 1), ("max_answer_length", 1)):
        _int_option(spec, key, 20 if key == "n_best_size" else 30, minimum)
    threshold = spec.options.get("null_score_diff_threshold", 0.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise _fail(spec, "options", "null_score_diff_threshold=%r: expected a number"
                    % (threshold,))

    def write(option, default, path, is_training):
        examples = squad_lib.read_squad_examples(_data_path(spec, option, default),
                                                 is_training, negatives)
        features = squad_lib.convert_examples_to_features(
            examples, tokenizer, seq, doc_stride, max_query_length, is_training)
        squad_lib.write_features(features, path, is_training)
        return examples, features

    if job.do_train:
        _, features = write("train_file", "train.json", train_path, True)
        task.num_train, task.train_file = len(features), train_path
    if job.do_eval:
        # Evaluated as run_squad.py does: windows predicted, answers decoded,
        # exact match and F1 against every gold answer.
        task.dev_examples, task.dev_features = write("dev_file", "dev.json", dev_path, False)
        task.dev_file = dev_path
    task.spec_fn = squad_lib.feature_spec


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


def _task_input(task, seq, rows, is_training, seed, input_context=None):
    path = task.train_file if is_training else task.dev_file
    return data_lib.task_dataset(path, task.spec_fn(seq, is_training), task.task_id, task.head, seq,
                                 task.batch_size(rows), is_training,
                                 input_context=input_context, seed=seed,
                                 num_choices=task.num_choices)


def train_input_fn(tasks, probabilities, seq, batch_size, seed=None):
    """`input_fn(input_context)`: batches of one task each, tasks drawn with `probabilities`."""

    def input_fn(input_context=None):
        datasets = [_task_input(task, seq, batch_size, True,
                                None if seed is None else seed + task.task_id, input_context)
                    for task in tasks]
        return data_lib.sampling_dataset(datasets, probabilities, seed=seed)

    return input_fn


def eval_input_fn(tasks, seq, batch_size):
    """`input_fn`: every task's dev set, one after another (each batch one task)."""

    def input_fn(input_context=None):
        datasets = [_task_input(task, seq, batch_size, False, None, input_context)
                    for task in tasks]
        dataset = datasets[0]
        for other in datasets[1:]:
            dataset = dataset.concatenate(other)
        return dataset

    return input_fn


# --------------------------------------------------------------------- run


def run(job):
    """Runs `job` (multi-task training and/or per-task evaluation); returns a `MultitaskResult`."""
    family, config, tokenizer = _check_job(job)
    try:
        specs = data_lib.read_task_list(job.task_list_file)
    except data_lib.TaskListError as e:
        raise MultitaskJobError(str(e)) from None
    strategy = settings.start_run(job)
    with settings.output_dir_lock(job, strategy):
        tf.io.gfile.makedirs(job.output_dir)
        tasks = prepare_tasks(job, specs, tokenizer, config.vocab_size)
        return _run(job, family, config, tasks, strategy)


def _run(job, family, config, tasks, strategy):
    output_dir, seq = job.output_dir, job.max_seq_length
    probabilities = [1.0 / len(tasks)] * len(tasks)
    num_train_steps = num_warmup_steps = 0
    if job.do_train:
        sizes = [task.num_train for task in tasks]
        probabilities = data_lib.sampling_probabilities(sizes, job.sampling_temperature)
        if job.num_train_steps:
            num_train_steps = int(job.num_train_steps)
        else:
            per_update = job.gradient_accumulation_steps
            batches = sum(task.num_train / task.batch_size(job.train_batch_size)
                          for task in tasks)
            num_train_steps = int(batches * job.num_train_epochs / per_update)
            if num_train_steps < 1:
                raise MultitaskJobError(
                    "%d training examples, --train_batch_size=%d and --num_train_epochs=%s "
                    "make no training step." % (sum(sizes), job.train_batch_size,
                                                job.num_train_epochs))
        num_warmup_steps = int(num_train_steps * job.warmup_proportion)
        for task, p in zip(tasks, probabilities):
            logging.info("Task %s (%s): %d training examples, sampled with p=%.4f",
                         task.name, task.head, task.num_train, p)
        atomic.write_text(os.path.join(output_dir, "task_sampling.txt"), "".join(
            "%s\t%s\t%d\t%.6f\n" % (t.name, t.head, t.num_train, p)
            for t, p in zip(tasks, probabilities)))

    model_tasks = [task.model_task() for task in tasks]

    def model_fn():
        return model_lib.MultiTaskModel.from_config_object(config, model_tasks, family=family)

    def init_fn(model):
        if job.init_checkpoint:
            checkpoints.init_from_checkpoint(model, job.init_checkpoint)
        else:
            logging.warning("No --init_checkpoint: the encoder starts from random weights.")

    trainer = trainer_lib.Trainer(
        strategy, model_fn=model_fn,
        optimizer_fn=lambda: create_optimizer(job, num_train_steps, num_warmup_steps),
        model_dir=output_dir, train_batch_size=job.train_batch_size,
        num_train_steps=num_train_steps, save_checkpoints_steps=job.save_checkpoints_steps,
        init_fn=init_fn, **job.trainer_options())

    if job.do_train:
        trainer.train(train_input_fn(tasks, probabilities, seq, job.train_batch_size,
                                     seed=job.seed))
    else:
        trainer.restore_or_initialize()

    result = MultitaskResult(eval_results={}, tasks=tasks, probabilities=probabilities,
                             num_train_steps=num_train_steps, output_dir=output_dir,
                             model=trainer.model)
    if job.do_eval:
        result.eval_results = _evaluate(job, trainer, tasks)
    print("Checkpoints:  %s" % os.path.abspath(output_dir))
    print("TensorBoard:  tensorboard --logdir %s" % os.path.abspath(output_dir))
    return result


def _evaluate_span_task(job, trainer, task):
    """Decodes the dev windows' logits into answers (run_squad.py's way); EM and F1."""
    names = [task.name + "/start_logits", task.name + "/end_logits"]
    outputs = trainer.predict(lambda ctx: _task_input(task, job.max_seq_length,
                                                      job.eval_batch_size, False, None, ctx),
                              names, restore=False)
    features, options = task.dev_features, task.spec.options
    if len(outputs[names[0]]) != len(features):
        raise MultitaskJobError("%s: predicted %d windows but the dev set has %d"
                                % (task.spec.where, len(outputs[names[0]]), len(features)))
    results = squad_lib.stack_results([f.unique_id for f in features], outputs[names[0]],
                                      outputs[names[1]])
    negatives = bool(options.get("version_2_with_negative", False))
    predictions, nbest, null_odds = squad_lib.postprocess(
        task.dev_examples, features, results, n_best_size=options.get("n_best_size", 20),
        max_answer_length=options.get("max_answer_length", 30),
        do_lower_case=job.do_lower_case, version_2_with_negative=negatives,
        null_score_diff_threshold=float(options.get("null_score_diff_threshold", 0.0)))
    if trainer.is_chief:
        squad_lib.write_predictions(os.path.join(job.output_dir, task.name), predictions,
                                    nbest, null_odds if negatives else None)
    scores = squad_lib.evaluate(task.dev_examples, predictions)
    return {key: value for key, value in scores.items() if not key.endswith("total")}


def _evaluate(job, trainer, tasks):
    seq = job.max_seq_length
    # Span QA dev windows carry no targets (a question may have several
    # answers): those tasks are decoded and scored below instead.
    scored = [task for task in tasks if task.head != data_lib.SPAN_QA]
    results = {"global_step": trainer.current_step()}
    if scored:
        raw = trainer.evaluate(eval_input_fn(scored, seq, job.eval_batch_size),
                               max_steps=None, restore=False)
        results = {"global_step": raw.pop("global_step"), "eval_loss": raw.pop("loss")}
        names = {task.name for task in scored}
        for key, value in raw.items():
            name, _, metric = key.partition("/")
            if name in names:
                results["%s/eval_%s" % (name, metric)] = value
    extra = {}
    for task in tasks:
        values = {}
        if task.head == data_lib.SPAN_QA:
            values = _evaluate_span_task(job, trainer, task)
        elif task.head == data_lib.TAGGING:
            predicted = trainer.predict(lambda ctx, t=task: _task_input(
                t, seq, job.eval_batch_size, False, None, ctx), [task.name + "/predicted_ids"],
                restore=False)[task.name + "/predicted_ids"]
            # pylint: disable-next=protected-access
            tags = ner_job.tags_of(task.dev_sentences, task.dev_features, predicted,
                                    task.label_list)
            scores = seqeval.entity_scores([s.tags for s in task.dev_sentences], tags)
            values = {"precision": scores["precision"], "recall": scores["recall"],
                      "f1": scores["f1"]}
        elif task.head in (data_lib.CLASSIFICATION, data_lib.REGRESSION):
            names = [m for m in task.eval_metrics if m != "accuracy"]
            if names:
                output = task.name + ("/probabilities" if task.head == data_lib.CLASSIFICATION
                                      else "/predictions")
                key = "label_ids" if task.head == data_lib.CLASSIFICATION else "label_values"
                predictions = trainer.predict(lambda ctx, t=task: _task_input(
                    t, seq, job.eval_batch_size, False, None, ctx),
                    [output, key, "is_real_example"], restore=False)
                values = classifier_lib.compute_metrics(
                    names, predictions[output], predictions[key], task.head,
                    predictions["is_real_example"])
        for metric, value in values.items():
            extra["%s/eval_%s" % (task.name, metric)] = float(value)
    results.update(extra)
    if trainer.is_chief:
        if extra:
            writer = tf.summary.create_file_writer(os.path.join(job.output_dir, "eval"))
            with writer.as_default(step=results["global_step"]):
                for name, value in extra.items():
                    if np.isfinite(value):
                        tf.summary.scalar(name.replace("/eval_", "/"), value)
            writer.flush()
        trainer_lib.write_eval_results(results, os.path.join(job.output_dir,
                                                             "eval_results.txt"))
    print("***** Eval results *****")
    for key in sorted(results):
        print("  %s = %s" % (key, results[key]))
    return results


registry.tasks.register("multitask", FineTuningTask(
    name="multitask",
    description="MT-DNN: one shared encoder, one head per task (classification, regression, "
                "pairwise ranking, span QA, tagging), batches sampled per task",
    model_class=model_lib.MultiTaskModel, job_class=MultitaskJob, run=run))
