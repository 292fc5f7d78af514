"""Sequence (pair) classification fine-tuning as a library call: what `run/run_classifier.py` runs.

    from modeling.tasks import classifier_job
    result = classifier_job.run(classifier_job.ClassifierJob(
        task_name="mrpc", data_dir="glue_data/MRPC", vocab_file=".../vocab.txt",
        bert_config_file=".../bert_config.json",
        init_checkpoint=".../bert_model.ckpt", output_dir="/tmp/mrpc",
        do_train=True, do_eval=True))
    result.eval_results["eval_accuracy"]

`ClassifierJob` holds the flags of Google's `run_classifier.py` (and this
project's) as fields with the same names and defaults, so a notebook runs
exactly what the script runs and the script stays a flag parser.

How examples become model inputs is the model family's fine-tuning input
format (`modeling.tasks.input_formats`): `PooledInputFormat` here (Google's
``[CLS] a [SEP] b [SEP]`` and `BertClassifier`; for multiple-choice tasks,
``[CLS] context [SEP] choice [SEP]`` per candidate and `BertMultipleChoice`)
for BERT, ALBERT and every family with a pooled output, or the one a family registers (GPT's
`<s> a $ b <e>` with the auxiliary LM loss, `modeling.gpt.classification`).

`run(job)` is `ClassifierRunner(job).run()`, the common job shape of
`modeling.training.job` with the input format's hooks:

1. checks everything it can before any training: the flags, the casing
   against the checkpoint's name, `max_seq_length` against the config, the
   vocabulary against the config, the processor's task type, labels and
   metrics; then reads and converts every split needed (bad rows and labels
   are reported before any time is spent), writing Google's TFRecords
   (`train.tf_record`, `eval.tf_record`, `predict.tf_record`);
2. fine-tunes `BertClassifier` with the project's one trainer
   (`tf.distribute`, checkpoints and resume, TensorBoard), or restores the
   latest checkpoint for eval/predict only;
3. writes Google's `eval_results.txt` (plus the processor's metrics, e.g.
   eval_f1) and `test_results.tsv`, and optionally a SavedModel that takes
   raw strings (`export_dir`).

Every problem with the inputs is a `ValueError` (or `FileNotFoundError`)
whose one-line message names the flag, file or line at fault; the script
prints it as ``run_classifier: error: ...``.

The task is registered as ``registry.tasks.get("classification")``.
"""

import dataclasses
import functools
import os
from typing import Any, List, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import processors as processors_lib
from data import tokenization
from modeling import checkpoints
from modeling import registry
from modeling.serving import export
from modeling.tasks import FineTuningTask
from modeling.tasks import classification as classifier_lib
from modeling.tasks import input_formats
from modeling.tasks import length_batching
from modeling.tasks import multiple_choice
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training.options import option

__all__ = ["ClassifierJob", "ClassifierJobError", "ClassifierResult", "ClassifierRunner",
           "PooledInputFormat", "build_processor", "feature_families", "labels_and_metrics",
           "run"]


def feature_families():
    """Families whose networks are used frozen, as features (`--features`): the registry's."""
    return registry.families_with("frozen_features")


@dataclasses.dataclass
class ClassifierJob(settings.TrainerSettings, settings.DataServiceSettings,
                    input_pipeline.LengthBatchingSettings, job_lib.EncoderSettings,
                    settings.FineTuningSettings, settings.EvalSettings,
                    settings.PredictSettings, processors_lib.GenericColumns):
    """Everything a fine-tuning run needs; the fields are `run_classifier.py`'s flags.

    `processor` is a ``path/to/my_task.py:MyProcessor`` spec (as the flag),
    or, from Python, a `DataProcessor` class or instance (used as it is).
    """

    # Google's model, schedule, eval and predict flags are the settings groups'
    # fields. model_family: a name of `modeling.registry.families` whose encoder
    # has a pooled output, or one with a registered input format.
    # None fine-tunes model_family.
    features: Optional[str] = option(
        None, "Classify over a frozen pre-trained network's features instead of fine-tuning an "
        "encoder: elmo (a biLM's scalar-mixed layers) or cove (a translation encoder's states "
        "with the word vectors); the same as --model_family=elmo|cove.",
        choices=feature_families)
    # Google's flags.
    data_dir: Optional[str] = option(
        None, "The input data dir. Should contain the .tsv files (or other data files) for the "
        "task.")
    task_name: Optional[str] = option(None, "The name of the task to train.")
    # Your own processor.
    processor: Any = option(
        None, "A DataProcessor in your own file: path/to/my_task.py:MyProcessor (or "
        "package.module:MyProcessor). Overrides --task_name.")
    # task_name=generic: the columns are `GenericColumns`' fields.
    guid_column: Optional[str] = option(None, "generic: column of an example id (optional).")
    labels: Optional[List[str]] = option(
        None, "generic, ids: the label list (comma-separated); default: inferred from the "
        "training file.")
    task_type: str = option(
        processors_lib.CLASSIFICATION, "generic: classification (one label), multi_label "
        "(several labels per example, separated by --label_separator) or regression (a float "
        "label).", choices=processors_lib.TASK_TYPES)
    label_separator: str = option(",",
                                  "generic: separator of the labels of a multi-label field.")
    train_file: Optional[str] = option(None, "generic, ids: training file name in --data_dir.")
    dev_file: Optional[str] = option(None, "generic, ids: dev file name in --data_dir.")
    test_file: Optional[str] = option(None, "generic, ids: test file name in --data_dir.")
    eval_metrics: Optional[List[str]] = option(
        None, "generic, ids: metrics besides eval_accuracy/eval_loss, from accuracy, f1, mcc, "
        "pearson, spearman, micro_f1, macro_f1.")
    # task_name=ids.
    ids_num_labels: Optional[int] = option(None, "ids: labels are the integers 0..N-1.")
    ids_label_from_last_id: bool = option(
        False, "ids: each line is only ids and the last one is the label (next-id prediction).")
    ids_cls_id: Optional[int] = option(
        None, "ids: token id put first (like [CLS]); none if unset.")
    ids_sep_id: Optional[int] = option(None, "ids: token id ending each sequence (like [SEP]).")
    ids_offset: int = option(0, "ids: added to every input id.")
    ids_keep: str = option("first", "ids: which ids a too-long sequence keeps.",
                           choices=("first", "last"))
    # task_name=xnli.
    xnli_language: str = option("zh", "xnli: the language to train and evaluate on.")
    xnli_train_language: Optional[str] = option(
        None, "xnli: train on this language's MultiNLI instead (en: zero-shot transfer to "
        "--xnli_language, as multilingual BERT is evaluated).")
    # Families with their own input format (GPT).
    merges_file: Optional[str] = option(
        None, "gpt: the byte-level BPE merges (merges.txt); --vocab_file is then vocab.json.")
    input_transformation: str = option(
        "auto", "gpt: how an example becomes sequences: auto (<s> text <e>, <s> a $ b <e>, one "
        "sequence per candidate for multiple_choice tasks) or similarity (both orders of a "
        "pair, their <e> states added).",
        choices=("auto", "classification", "entailment", "similarity", "multiple_choice"))
    lm_loss_weight: Optional[float] = option(
        None, "gpt: weight of the auxiliary language-model loss added to the task loss "
        "(default 0.5, the paper's; 0 disables it).")
    # Serving.
    export_dir: Optional[str] = option(
        None, "Write a SavedModel for serving here: raw strings in (text_a, or text_a and "
        "text_b with the serving_pair signature), probabilities out, tokenizer inside the "
        "graph.")


@dataclasses.dataclass
class ClassifierResult:
    """What `run` produced.

    Attributes:
        eval_results: the contents of eval_results.txt ({} without do_eval).
        test_predictions: with do_predict, one row per test example, in the
            order of the test file: class probabilities, or the predicted
            score for regression (the rows of test_results.tsv).
        output_dir: checkpoints, TFRecords, TensorBoard logs.
        export_dir: the SavedModel, if one was written.
    """

    eval_results: dict
    test_predictions: Optional[np.ndarray]
    output_dir: str
    export_dir: Optional[str] = None


def _split_files(job):
    return {name: getattr(job, name) for name in ("train_file", "dev_file", "test_file")
            if getattr(job, name)}


def build_processor(job, vocab_size=None):
    """The job's `DataProcessor`: its own, `--processor`'s, or `--task_name`'s, configured."""
    if job.processor is None or isinstance(job.processor, str):
        processor_class = processors_lib.get_processor_class(job.task_name, job.processor)
    elif isinstance(job.processor, type):
        processor_class = job.processor
    else:
        return job.processor  # a DataProcessor instance, used as it is
    if issubclass(processor_class, processors_lib.GenericProcessor):
        return processor_class(
            data_dir=job.data_dir, file_format=job.file_format,
            text_a_column=job.text_a_column, text_b_column=job.text_b_column,
            label_column=job.label_column, guid_column=job.guid_column,
            has_header=job.has_header, labels=job.labels, task_type=job.task_type,
            label_separator=job.label_separator, eval_metrics=job.eval_metrics,
            **_split_files(job))
    if issubclass(processor_class, processors_lib.IdsProcessor):
        return processor_class(
            data_dir=job.data_dir, labels=job.labels, num_labels=job.ids_num_labels,
            label_from_last_id=job.ids_label_from_last_id, cls_id=job.ids_cls_id,
            sep_id=job.ids_sep_id, id_offset=job.ids_offset, keep=job.ids_keep,
            vocab_size=vocab_size, eval_metrics=job.eval_metrics, **_split_files(job))
    if issubclass(processor_class, processors_lib.XnliProcessor):
        return processor_class(language=job.xnli_language,
                               train_language=getattr(job, "xnli_train_language", None))
    if issubclass(processor_class, processors_lib.MultipleChoiceProcessor):
        return processor_class(data_dir=job.data_dir, **_split_files(job))
    return processor_class()


def _resolve_features(job):
    """`job` with `model_family` set from `features` (a copy; `job` itself is not changed)."""
    if job.features is None:
        return job
    families = feature_families()
    if job.features not in families:
        raise ClassifierJobError("--features=%s: expected one of %s"
                                 % (job.features, ", ".join(families)))
    # model_family left at its default, or already the features' family.
    default_family = next(field.default for field in dataclasses.fields(job)
                          if field.name == "model_family")
    if job.model_family not in (default_family, job.features):
        raise ClassifierJobError(
            "--features=%s reads the %s network; leave --model_family unset (it was %s)"
            % (job.features, job.features, job.model_family))
    return dataclasses.replace(job, model_family=job.features)


def _check_job(job):
    """Checks the settings that need no data; returns `(config, input_format)`."""
    runner = ClassifierRunner(job)
    runner.check_settings()
    return runner.config, runner.input_format


def _tokenizer(job, bert_config):
    """The tokenizer, after checking the vocabulary against the config."""
    runner = ClassifierRunner(job)
    runner.check_required("vocab_file")
    runner.check_vocab_matches(bert_config)
    return tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)


def pack_with_tokenizer(example, tokenizer, max_seq_length):
    """`(input_ids, input_mask, segment_ids)` of one example through a `PretrainedTokenizer`."""
    encoded = tokenizer.pack(example.text_a, example.text_b, max_seq_length)
    pad = max_seq_length - len(encoded.input_ids)
    return (list(encoded.input_ids) + [tokenizer.pad_id] * pad,
            [1] * len(encoded.input_ids) + [0] * pad, list(encoded.segment_ids) + [0] * pad)


def _task_type(processor, error=ClassifierJobError):
    task_type = getattr(processor, "task_type", processors_lib.CLASSIFICATION)
    if task_type not in processors_lib.TASK_TYPES:
        raise error("%s.task_type is %r; expected one of %s."
                    % (type(processor).__name__, task_type, ", ".join(processors_lib.TASK_TYPES)))
    return task_type


def labels_and_metrics(processor, task_type):
    """(label_list, num_labels, eval_metrics) of a processor, checked."""
    label_list = processor.get_labels()
    if task_type == processors_lib.REGRESSION:
        label_list, num_labels = None, 1
    else:
        if not label_list:
            raise ClassifierJobError("The processor's get_labels() returned no labels.")
        label_list = list(label_list)
        num_labels = len(label_list)
    eval_metrics = tuple(getattr(processor, "eval_metrics", ("accuracy",)))
    unknown = [m for m in eval_metrics if m not in classifier_lib.METRICS]
    if unknown:
        raise ClassifierJobError("Unknown eval metric(s) %s; known: %s."
                                 % (", ".join(unknown), ", ".join(classifier_lib.METRICS)))
    return label_list, num_labels, eval_metrics


def _write_summaries(model_dir, step, values):
    writer = tf.summary.create_file_writer(os.path.join(model_dir, "eval"))
    with writer.as_default(step=step):
        for name, value in values.items():
            if np.isfinite(value):
                tf.summary.scalar(name, value)
    writer.flush()


def _write_test_results(path, rows):
    """Google's test_results.tsv: one tab-separated row per example (atomic)."""
    atomic.write_text(path, "".join("\t".join(str(value) for value in row) + "\n"
                                    for row in rows))


def _output_name(task_type):
    return "predictions" if task_type == processors_lib.REGRESSION else "probabilities"


class PooledInputFormat(input_formats.InputFormat):
    """Google's input format: ``[CLS] a [SEP] b [SEP]`` and `BertClassifier` on the pooled output.

    The default of every family that registers no format of its own (BERT,
    ALBERT); its encoder needs a pooled output.
    """

    @staticmethod
    def check_family(job, family):
        if not family.has_pooler and family.sentence_vector == "pooled":
            raise ClassifierJobError(
                "--model_family=%s: its network has no pooled output to classify; sequence "
                "classification needs an encoder family with a pooler (e.g. bert, albert)"
                % job.model_family)

    def check(self):
        job = self.job
        if job.lm_loss_weight is not None:
            raise ClassifierJobError("--lm_loss_weight: --model_family=%s has no auxiliary "
                                     "language-model loss (GPT's)" % job.model_family)
        if (job.input_transformation or "auto") != "auto":
            raise ClassifierJobError("--input_transformation=%s: --model_family=%s packs "
                                     "[CLS] a [SEP] b [SEP]; only auto applies"
                                     % (job.input_transformation, job.model_family))

    def tokenizer(self):
        folder_tokenizer = self._folder_tokenizer()
        if folder_tokenizer is not None:
            return folder_tokenizer
        return _tokenizer(self.job, self.config)

    def _folder_tokenizer(self):
        """The `--init_checkpoint` folder's own tokenizer (`JobRunner.folder_tokenizer`)."""
        return job_lib.folder_tokenizer(self.job, self.config, ClassifierJobError)

    num_choices = None

    @property
    def trims_batches(self):
        """Batches can be cut to their length (`length_batching`): one sequence per example
        (a multiple-choice record holds its candidates end to end: kept whole)."""
        return not self.num_choices

    def prepare(self, processor, task_type, label_list, num_labels):
        if getattr(processor, "is_multiple_choice", False):
            # One [CLS] context [SEP] choice [SEP] per candidate, a softmax across them.
            self.num_choices = num_labels

    def pack_fn(self, tokenizer):
        """`example -> (input_ids, input_mask, segment_ids)`, or None for Google's packing.

        A model folder's own tokenizer frames the texts its family's way
        (`PretrainedTokenizer.build_inputs`: RoBERTa's `<s> a </s></s> b
        </s>`, ...), truncating the longer text first as Google does, and
        pads with its padding id.
        """
        from modeling.pretrained import tokenizers  # pylint: disable=import-outside-toplevel
        if not isinstance(tokenizer, tokenizers.PretrainedTokenizer):
            return None
        return functools.partial(pack_with_tokenizer, tokenizer=tokenizer,
                                 max_seq_length=self.job.max_seq_length)

    def write_records(self, examples, path, label_list, task_type, tokenizer):
        if self.num_choices:
            processors_lib.file_based_convert_choice_examples(
                examples, label_list, self.job.max_seq_length, tokenizer, path,
                pack_fn=self.pack_fn(tokenizer))
        else:
            processors_lib.file_based_convert_examples_to_features(
                examples, label_list, self.job.max_seq_length, tokenizer, path, task_type,
                pack_fn=self.pack_fn(tokenizer))
        return path

    def input_fn(self, path, batch_size, is_training, task_type, num_labels):
        # Multiple choice: the candidates' ids end to end, num_choices * max_seq_length.
        return processors_lib.file_based_input_fn_builder(
            path, self.job.max_seq_length * (self.num_choices or 1), is_training=is_training,
            drop_remainder=True, batch_size=batch_size, task_type=task_type,
            num_labels=num_labels, seed=self.job.seed)

    def build_model(self, num_labels, task_type):
        encoder_kwargs = {}
        if "layer_norm_epsilon" in self.config.extra:
            encoder_kwargs["layer_norm_epsilon"] = float(self.config.extra["layer_norm_epsilon"])
        if self.num_choices:
            return multiple_choice.BertMultipleChoice.from_config_object(
                self.config, num_choices=self.num_choices, family=self.job.model_family,
                **encoder_kwargs)
        return classifier_lib.BertClassifier.from_config_object(
            self.config, num_labels=num_labels, task_type=task_type,
            family=self.job.model_family, **encoder_kwargs)

    def init_model(self, model, checkpoint):
        return checkpoints.init_from_checkpoint(model, checkpoint)

    def export(self, model, export_dir, output_name):
        if self._folder_tokenizer() is not None:
            raise ClassifierJobError(
                "--export_dir: the SavedModel's in-graph tokenizer is WordPiece; a model folder "
                "with its own tokenizer has no SavedModel export yet; leave --export_dir unset")
        if self.num_choices:
            raise ClassifierJobError(
                "--export_dir: a multiple-choice model has no SavedModel export yet (the "
                "serving signature takes one text or one pair); leave --export_dir unset")
        export.export_text_model(model, export_dir, self.job.vocab_file,
                                 self.job.do_lower_case, self.job.max_seq_length,
                                 output_fn=lambda outputs: {output_name: outputs[output_name]})


class ClassifierRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with the input format's.

    `check` is `check_settings` (the flags, the family and its config, the
    input format: `_check_job`) then `check_task` (the processor, its task
    type, labels and metrics, the tokenizer). `prepare` reads every split it
    needs, calls `plan_training` with the number of training examples (None
    without training) before writing anything, and writes the records; the
    dev and test splits are padded to whole batches. SiATL's runner
    (`modeling.siatl.job.SiatlRunner`) keeps all of it but the settings and
    the plan.
    """

    error = ClassifierJobError
    #: What --init_checkpoint initialises (named in the log).
    initialised = "encoder"
    #: The eval metrics computed from predictions also go to TensorBoard (output_dir/eval).
    metric_summaries = True
    #: Updates before the trainer's own (`global_step` of eval_results.txt adds them).
    step_offset = 0

    def run(self):
        """`JobRunner.run`, with the strategy logged; a data error stays a `DataError`."""
        self.check_output_dir()
        self.check()
        self.strategy = settings.start_run(self.job)
        logging.info("Strategy: %s with %d replica(s)", type(self.strategy).__name__,
                     self.strategy.num_replicas_in_sync)
        with settings.output_dir_lock(self.job, self.strategy):
            return self._run_locked()

    # ----- checks ------------------------------------------------------------------------

    def check(self):
        self.check_settings()
        self.check_task()

    def check_settings(self):
        """The settings that need no data; sets `family`, `config` and `input_format`."""
        self.job = job = _resolve_features(self.job)
        self.check_modes()
        self.check_required("data_dir", "bert_config_file", "output_dir")
        try:
            input_pipeline.check_data_service(job.data_service_address,
                                              job.data_service_job_name)
        except ValueError as e:
            raise self.error(str(e)) from None
        if job.export_dir:
            export_dir = os.path.abspath(job.export_dir)
            for name in ("output_dir", "data_dir"):
                other = os.path.abspath(getattr(job, name))
                if other == export_dir or other.startswith(export_dir.rstrip(os.sep) + os.sep):
                    # The export replaces its directory as a whole.
                    raise self.error(
                        "--export_dir=%s would replace --%s=%s; give the SavedModel a "
                        "directory of its own" % (job.export_dir, name, getattr(job, name)))
        self.check_task_given()
        self.check_case_matches_checkpoint()
        self.format_class = input_formats.format_class_for(job.model_family, PooledInputFormat)
        self.family, self.config = self.load_family_config()
        self.check_positive("train_batch_size", "eval_batch_size", "predict_batch_size",
                            "gradient_accumulation_steps")
        self.check_training_values()
        input_pipeline.check_length_batching(job, self.error)
        self.input_format = self.format_class(job, self.config, self.family)
        self.input_format.check()

    def check_family(self, family):
        self.format_class.check_family(self.job, family)

    def check_config_file(self, config_flag, path):
        """None here: the family's reader names a missing file (and reads ``gs://`` paths)."""

    def check_task_given(self):
        if not self.job.task_name and not self.job.processor:
            raise self.error("Give --task_name (%s) or --processor=path/to/my_task.py:MyProcessor."
                             % ", ".join(sorted(processors_lib.PROCESSORS)))

    def check_task(self):
        """The processor, task type, tokenizer, labels and metrics; no example read yet."""
        self.processor = build_processor(self.job, self.config.vocab_size)
        self.check_processor()

    def check_processor(self):
        """`check_task` after the processor is built: its task type, the tokenizer, its
        labels and metrics."""
        processor = self.processor
        self.task_type = _task_type(processor, self.error)
        self.tokenizer = None
        if getattr(processor, "needs_tokenizer", True):
            self.tokenizer = self.input_format.tokenizer()
        self.label_list, self.num_labels, self.eval_metrics = labels_and_metrics(
            processor, self.task_type)
        self.input_format.prepare(processor, self.task_type, self.label_list, self.num_labels)
        logging.info("Task: %s (%s), labels: %s", type(processor).__name__, self.task_type,
                     self.label_list)

    # ----- records -----------------------------------------------------------------------

    def prepare(self):
        # Read and convert every split that is needed before training anything:
        # bad rows and labels are reported before any time is spent.
        job = self.job
        train_examples = self.processor.get_train_examples(job.data_dir) if job.do_train else None
        num_train = len(train_examples) if train_examples is not None else None
        self.plan_training(num_train)
        self.write_splits(train_examples)
        return num_train

    def write_splits(self, train_examples):
        """The records: `train_examples` (None without training) to train.tf_record, then
        the dev and test splits the modes need, read and padded to whole eval / predict
        batches (eval.tf_record, predict.tf_record)."""
        job = self.job
        self.train_file = self.eval_file = self.predict_file = None
        # Every split is read (a bad row refused) before any record is written.
        dev, test = getattr(self, "eval_splits", None) or self.read_eval_splits()
        if train_examples is not None:
            self.train_file = self._write_records(train_examples, "train.tf_record")
        if dev is not None:
            self.eval_counts, self.eval_file = self._write_padded(
                dev, job.eval_batch_size, "eval.tf_record")
        if test is not None:
            self.predict_counts, self.predict_file = self._write_padded(
                test, job.predict_batch_size, "predict.tf_record")

    def read_eval_splits(self):
        """`eval_splits`: the (dev, test) examples the modes need (None where not needed),
        read once; `write_splits` writes them."""
        job, processor = self.job, self.processor
        dev = self._read_split(processor.get_dev_examples, "dev") if job.do_eval else None
        test = self._read_split(processor.get_test_examples, "test") if job.do_predict else None
        self.eval_splits = (dev, test)
        return self.eval_splits

    def plan_training(self, num_examples):
        """Called after the training split is read (None without training), before writing."""
        if num_examples is None:
            return
        job = self.job
        self.num_train_steps, self.num_warmup_steps = self.training_steps(num_examples)
        logging.info("***** Running training *****")
        logging.info("  Num examples = %d", num_examples)
        logging.info("  Batch size = %d", job.train_batch_size)
        logging.info("  Num steps = %d", self.num_train_steps)

    def training_steps(self, num_examples):
        """`JobRunner.training_steps`; the refusal names --gradient_accumulation_steps if set."""
        job = self.job
        try:
            return super().training_steps(num_examples)
        except ClassifierJobError:
            if job.gradient_accumulation_steps == 1:
                raise
            raise self.error(
                "%d training examples, --train_batch_size=%d, --gradient_accumulation_steps=%d "
                "and --num_train_epochs=%s make no training step."
                % (num_examples, job.train_batch_size, job.gradient_accumulation_steps,
                   job.num_train_epochs)) from None

    def _write_records(self, examples, name):
        return self.input_format.write_records(examples, os.path.join(self.job.output_dir, name),
                                               self.label_list, self.task_type, self.tokenizer)

    def _read_split(self, read, split):
        """The examples of the dev or test split (`read(data_dir)`); none is refused."""
        examples = read(self.job.data_dir)
        if not examples:
            raise self.error("The %s set in %s has no examples." % (split, self.job.data_dir))
        return examples

    def _write_padded(self, examples, batch_size, name):
        """((padded, actual) counts, path): a dev or test split padded to whole batches."""
        padded = processors_lib.pad_examples(examples, batch_size)
        return (len(padded), len(examples)), self._write_records(padded, name)

    def _input_fn(self, path, batch_size, is_training, mode=None):
        # Eval and predict sets are padded to whole batches: every batch is
        # full, so replicas get equal shares. Batches are cut to their
        # bucketed length (`length_batching`) when the format's features
        # are Google's layout.
        base = self.input_format.input_fn(path, batch_size, is_training, self.task_type,
                                          self.num_labels)
        mode = mode or (length_batching.TRAIN if is_training else length_batching.EVAL)
        return length_batching.input_fn(
            self.job, base, batch_size, mode,
            enabled=getattr(self.input_format, "trims_batches", False))

    # ----- model and training ------------------------------------------------------------

    def build_model(self):
        return self.input_format.build_model(self.num_labels, self.task_type)

    def init_model(self, model):
        checkpoint = self.job.init_checkpoint
        if checkpoint:
            self.input_format.init_model(model, checkpoint)
            logging.info("Initialised the %s from %s", self.initialised, checkpoint)
        else:
            logging.warning("No --init_checkpoint: the %s starts from random weights.",
                            self.initialised)

    def train_input_fn(self):
        job = self.job
        train_input_fn = self._input_fn(self.train_file, job.train_batch_size, True)
        if job.data_service_address:
            # Training only; eval and predict read their files once, in order.
            train_input_fn = input_pipeline.data_service_input_fn(
                train_input_fn, job.data_service_address, job.data_service_job_name)
        return train_input_fn

    # ----- results -----------------------------------------------------------------------

    def evaluate(self, trainer):
        job = self.job
        output = _output_name(self.task_type)
        logging.info("***** Running evaluation *****")
        logging.info("  Num examples = %d (%d actual, %d padding)", self.eval_counts[0],
                     self.eval_counts[1], self.eval_counts[0] - self.eval_counts[1])
        eval_input_fn = self._input_fn(self.eval_file, job.eval_batch_size, False)
        # Google's Estimator also reports the mean loss as `loss`.
        results = job_lib.eval_results_from(trainer.evaluate(eval_input_fn, max_steps=None,
                                                             restore=False))
        if self.step_offset:
            results["global_step"] += self.step_offset
        extra = [m for m in self.eval_metrics if "eval_" + m not in results]
        if extra:
            predictions = trainer.predict(eval_input_fn, [output, "label_ids", "is_real_example"],
                                          restore=False)
            values = classifier_lib.compute_metrics(
                extra, predictions[output], predictions["label_ids"], self.task_type,
                predictions["is_real_example"])
            for name, value in values.items():
                results["eval_" + name] = value
            if trainer.is_chief and self.metric_summaries:
                _write_summaries(job.output_dir, results["global_step"], values)
        if trainer.is_chief:
            trainer_lib.write_eval_results(results,
                                           os.path.join(job.output_dir, "eval_results.txt"))
        job_lib.print_results(results)
        return results

    def predict(self, trainer):
        job = self.job
        output = _output_name(self.task_type)
        num_padded, num_actual = self.predict_counts
        logging.info("***** Running prediction *****")
        logging.info("  Num examples = %d (%d actual, %d padding)", num_padded, num_actual,
                     num_padded - num_actual)
        predictions = length_batching.predict(
            trainer, self._input_fn(self.predict_file, job.predict_batch_size, False,
                                    length_batching.PREDICT), [output], job)
        values = predictions[output][:num_actual]
        if len(values) != num_actual:
            raise self.error("Predicted %d examples but the test set has %d."
                             % (len(values), num_actual))
        rows = values.reshape(len(values), -1)
        path = os.path.join(job.output_dir, "test_results.tsv")
        if trainer.is_chief:
            _write_test_results(path, rows)
        print("Wrote %d predictions to %s" % (len(rows), path))
        return rows

    def finish(self, trainer, eval_results, predictions):
        job = self.job
        result = ClassifierResult(eval_results=eval_results, test_predictions=predictions,
                                  output_dir=job.output_dir)
        if job.export_dir and trainer.is_chief:
            if not getattr(self.processor, "needs_tokenizer", True):
                raise ClassifierJobError(
                    "--export_dir needs a text task (the serving signature takes raw strings); "
                    "this processor reads token ids.")
            if not job.do_train:
                trainer.restore_or_initialize()
            self.input_format.export(trainer.model, job.export_dir,
                                     _output_name(self.task_type))
            result.export_dir = job.export_dir
            print("SavedModel:   %s (serving_default(text_a), serving_pair(text_a, text_b))"
                  % os.path.abspath(job.export_dir))
        self.print_output_dir()
        return result

    def print_output_dir(self):
        output_dir = os.path.abspath(self.job.output_dir)
        print("Checkpoints:  %s" % output_dir)
        print("TensorBoard:  tensorboard --logdir %s" % output_dir)


def run(job):
    """Runs `job` (train, eval and/or predict, export); returns a `ClassifierResult`."""
    return ClassifierRunner(job).run()


registry.tasks.register("classification", FineTuningTask(
    name="classification",
    description="Sequence (pair) classification, multi-label classification or "
                "regression on the pooled output (Google's run_classifier.py)",
    model_class=classifier_lib.BertClassifier, job_class=ClassifierJob, run=run))
