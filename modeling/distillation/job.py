"""Knowledge distillation as a library call: what `run/run_distillation.py` runs.

    from modeling.distillation import job as distillation_job
    result = distillation_job.run(distillation_job.DistillationJob(
        style="mtdnn", task_name="generic", data_dir="data", vocab_file="vocab.txt",
        teacher_config_file="teacher/bert_config.json",
        teacher_checkpoints=["teacher_a", "teacher_b"],
        student_config_file="student_config.json", transfer_file="unlabeled.tsv",
        output_dir="/tmp/distilled", do_train=True, do_eval=True))
    result.table      # teacher vs student: parameters, latency, accuracy

Three styles (`style`):

    mtdnn      classification: an ensemble of fine-tuned classifiers (the
               output dirs or checkpoints of `run_classifier.py`, or Google
               TF1 classifier checkpoints with `output_weights`), their
               tempered probabilities averaged, the student trained on
               alpha T^2 soft + (1 - alpha) hard cross-entropy
               (`models.ClassifierDistiller`). `transfer_file` adds unlabeled
               examples (one per line: text_a, or text_a TAB text_b) that
               count in the soft loss only. With no teacher and alpha = 0
               this is plain fine-tuning of the student: the baseline.
    distilbert masked LM on `run/create_pretraining_data.py` TFRecords: the
               teacher a pre-trained BERT with its MLM head, the student its
               width and half its layers (unless `student_config_file`
               says otherwise), initialised from the teacher's embeddings,
               layers 0, 2, 4, ..., pooler and MLM head; soft MLM + hard MLM
               + cosine loss (`models.MaskedLMDistiller`).
    tinybert   classification: one fine-tuned teacher; embedding, attention
               and hidden-state MSE over `layer_map` (default uniform) through
               a learned projection when the student is narrower, and/or the
               prediction-layer soft loss (`stage`); two-stage training is two
               runs, the second with `student_init_checkpoint` = the first
               run's `student/` (`models.TinyBertDistiller`).

Teachers run inside each step, frozen (see `models` for why not precomputed
soft targets). The student starts from `student_init_checkpoint` when given
(a pre-trained small BERT; encoder only, or encoder and classifier head when
the checkpoint is a `student/` export of an earlier run).

Outputs in `output_dir`: TFRecords, trainer checkpoints (student, teachers,
projection), `student/bert_model.ckpt` + `student/bert_config.json` (a Google
TF1 checkpoint: the encoder, and `output_weights`/`output_bias` for a
classifier or `cls/predictions/*` for DistilBERT, so it loads as
`--init_checkpoint` anywhere and as a teacher of a further round),
`eval_results.txt`, and the teacher vs student table printed and written to
`distillation_results.json` (atomic): parameters, latency (ms per eval batch,
mean of timed calls after warm-up) and dev accuracy (MLM accuracy for
distilbert).

Every bad setting or input is a `DistillationError` (or a `DataError` of
the data) whose one line names the flag, file or line at fault.

Registered as ``registry.tasks.get("distillation")``.
"""

import dataclasses
import json
import os
import time
from typing import Any, List, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import corpus
from data import input_pipeline
from data import processors as processors_lib
from data import tokenization
from modeling import checkpoints
from modeling import registry
from modeling.checkpoints import google_tf1
from modeling.checkpoints import name_tables
from modeling.checkpoints import object_based
from modeling.checkpoints import targets
from modeling.distillation import models
from modeling.distillation import students
from modeling.distillation.students import DistillationError
from modeling.objectives.base import BertPretrainer
from modeling.tasks import FineTuningTask
from modeling.tasks import classifier_job
from modeling.tasks import length_batching
from modeling.tasks.classification import BertClassifier
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["DistillationJob", "DistillationError", "DistillationResult", "STYLES",
           "load_classifier", "read_transfer_examples", "run"]

STYLES = ("mtdnn", "distilbert", "tinybert")
RESULTS_FILE = "distillation_results.json"
STUDENT_DIR = "student"
_HEAD_NAMES = ("output_weights", "output_bias")


@dataclasses.dataclass
class DistillationJob(settings.TrainerSettings, input_pipeline.LengthBatchingSettings,
                      settings.TextSettings, settings.FineTuningSettings,
                      settings.EvalSettings, processors_lib.GenericColumns):
    """Everything a distillation run needs; the fields are `run_distillation.py`'s flags."""

    style: str = option(
        "mtdnn", "mtdnn (ensemble soft targets), distilbert (masked LM, every-other-layer "
        "student) or tinybert (layer-wise distillation).", choices=STYLES)
    model_family: str = option("bert", "The encoders' model family.")
    # Lists, or (from Python) one comma-separated string.
    teacher_config_file: Optional[List[str]] = option(
        None, "The teachers' bert_config.json: one for all, or one per checkpoint.")
    teacher_checkpoints: Optional[List[str]] = option(
        None, "Teacher checkpoints (comma-separated): run_classifier.py output dirs or "
        "ckpt-N, Google TF1 checkpoints; distilbert: a pre-trained BERT with its "
        "MLM head. Empty with --alpha=0: the student alone on the labels.")
    student_config_file: Optional[str] = option(
        None, "The student's bert_config.json (distilbert: default the teacher's width "
        "and half its layers).")
    student_init_checkpoint: Optional[str] = option(
        None, "Start the student from this checkpoint (a pre-trained small BERT, or an "
        "earlier run's student/ export).")
    # Classification data (mtdnn, tinybert): as run_classifier.py.
    task_name: Optional[str] = option(None, "Classification task (mrpc, cola, generic, ...).")
    processor: Any = option(None, "Your DataProcessor: path/to/my_task.py:MyProcessor.")
    data_dir: Optional[str] = option(None, "The task's data directory.")
    guid_column: Optional[str] = option(None, "generic: column of an example id.")
    train_file: Optional[str] = option(None, "generic: training file name in --data_dir.")
    dev_file: Optional[str] = option(None, "generic: dev file name in --data_dir.")
    transfer_file: Optional[str] = option(
        None, "Unlabeled examples the teachers label (one per line: text_a, or "
        "text_a<TAB>text_b); they count in the soft loss only.")
    # Masked-LM data (distilbert): create_pretraining_data.py TFRecords.
    input_file: Optional[str] = option(
        None, "distilbert: training TFRecords (comma-separated globs).")
    eval_input_file: Optional[str] = option(None, "distilbert: dev TFRecords.")
    max_predictions_per_seq: int = option(20, "distilbert: masked positions per sequence.")
    num_train_steps: Optional[int] = option(
        None, "Training steps (overrides --num_train_epochs).")
    # The losses.
    temperature: float = option(1.0, "Softmax temperature T of the soft targets.")
    alpha: float = option(0.5, "mtdnn: loss = alpha T^2 soft CE + (1 - alpha) hard CE.")
    soft_loss_weight: float = option(5.0, "distilbert: weight of the soft MLM loss.")
    mlm_loss_weight: float = option(2.0, "distilbert: weight of the hard MLM loss.")
    cos_loss_weight: float = option(1.0, "distilbert: weight of the hidden-state cosine loss.")
    layer_map: Optional[str] = option(
        None, "tinybert: student:teacher layer pairs, 0-based (\"0:2,1:5\"); default "
        "uniform, student s -> teacher (s+1)N/M-1.")
    stage: str = option(
        "both", "tinybert: layer-wise losses, the prediction-layer soft loss, or both (task "
        "distillation); general: the layer-wise losses on unlabelled --input_file masked-LM "
        "records from a pre-trained teacher (TinyBERT's general distillation).",
        choices=models.STAGES)
    tinybert_attention: str = option(
        "scores", "tinybert: match the attention scores before the softmax (the paper's) or "
        "the probabilities.", choices=models.ATTENTION_TARGETS)
    latency_runs: int = option(5, "Timed forward passes per model (after warm-up).")


@dataclasses.dataclass
class DistillationResult:
    """eval_results (the student's, eval_results.txt); table (rows of the comparison)."""

    eval_results: dict
    table: list
    output_dir: str
    student_checkpoint: Optional[str] = None


def _list(value):
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


# ----------------------------------------------------------------- checking


def _load_config(family, path, flag):
    if not path:
        raise DistillationError("--%s is required." % flag)
    if not tf.io.gfile.exists(path):
        raise DistillationError("--%s=%s: no such file" % (flag, path))
    try:
        return family.load_config(path)
    except (ValueError, TypeError) as e:
        raise DistillationError("--%s: %s" % (flag, str(e).splitlines()[0])) from None


# ------------------------------------------------------------------ models


def _head_tensors(path):
    """{output_weights, output_bias: array} of a classifier checkpoint, or None without a head."""
    fmt, prefix = checkpoints.resolve_checkpoint(path)
    if fmt not in (checkpoints.OBJECT_BASED, checkpoints.GOOGLE_TF1):
        return None
    reader = tf.train.load_checkpoint(prefix)
    if fmt == checkpoints.GOOGLE_TF1:
        names = set(reader.get_variable_to_shape_map())
        if not all(n in names for n in _HEAD_NAMES):
            return None
        return {n: reader.get_tensor(n) for n in _HEAD_NAMES}
    # Trainer checkpoints: the classifier's variables by their Keras paths.
    stored = object_based.model_variable_keys(reader, prefix)
    found = {}
    for name in _HEAD_NAMES:
        matches = sorted(full for full in stored if full.split("/")[-1] == name)
        if not matches:
            return None
        if len(matches) > 1:
            raise DistillationError(
                "%s: several classifier heads (%s); give a single classifier's checkpoint "
                "(a run_classifier.py output dir, or the student/ export of a distillation "
                "run)" % (path, ", ".join(matches)))
        found[name] = reader.get_tensor(stored[matches[0]])
    return found


def _no_head_error(path):
    return DistillationError(
        "%s: no classifier head (output_weights, output_bias) in the checkpoint; a "
        "teacher must be a fine-tuned classifier (run_classifier.py's output dir)" % path)


def load_classifier(classifier, path, require_head=True):
    """Loads a fine-tuned classifier: the encoder (`init_from_checkpoint`) and its head.

    Args:
        classifier: a `BertClassifier`.
        path: a `run_classifier.py` output dir or `ckpt-N`, a Google TF1
            classifier checkpoint (`output_weights`, `output_bias`), or a
            `student/` export of this job.
        require_head: a checkpoint without the classifier head is an error
            (teachers); else the head keeps its initial values (a student
            started from a pre-trained encoder).

    Returns:
        True if the head was loaded.
    """
    checkpoints.init_from_checkpoint(classifier, path)
    head = _head_tensors(path)
    if head is None:
        if require_head:
            raise _no_head_error(path)
        return False
    for name in _HEAD_NAMES:
        variable = getattr(classifier, name)
        if tuple(head[name].shape) != tuple(variable.shape):
            raise DistillationError(
                "%s: %s has shape %s but the model's is %s (a different number of labels "
                "or width)" % (path, name, tuple(head[name].shape), tuple(variable.shape)))
    for name in _HEAD_NAMES:
        targets.assign(getattr(classifier, name), head[name])
    return True


def _classifier(config, family, num_labels, name):
    """A `BertClassifier` called `name` (its variables `name/output_weights`, ...)."""
    encoder = family.build_encoder(config, name=name + "_encoder")
    return BertClassifier(encoder, num_labels=num_labels,
                          dropout_rate=config.hidden_dropout_prob,
                          initializer_range=config.initializer_range, name=name)


def _mlm_model(config, family, name):
    encoder = family.build_encoder(config, name=name + "_encoder")
    objective = registry.objectives.get("masked_lm")(config, family)
    return BertPretrainer(encoder, [objective], name=name)


def save_student(model, output_dir, config):
    """Writes `output_dir/student/bert_model.ckpt` (Google TF1 names) and bert_config.json."""
    directory = os.path.join(output_dir, STUDENT_DIR)
    prefix = os.path.join(directory, "bert_model.ckpt")
    target = targets.find_target(model)
    table = name_tables.table_for(target, name_tables.GOOGLE_TF1_KEY, prefix)
    arrays = {name: np.ascontiguousarray(value, dtype=np.float32)
              for name, value in name_tables.table_arrays(target, table).items()}
    if isinstance(model, BertClassifier):
        for name in _HEAD_NAMES:
            arrays[name] = np.asarray(getattr(model, name).numpy(), np.float32)
    google_tf1.write_tf1_checkpoint(prefix, arrays)
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    return prefix


# -------------------------------------------------------------------- data


def read_transfer_examples(path):
    """Unlabeled examples: one per line, text_a or text_a TAB text_b; blank lines skipped."""
    if not tf.io.gfile.exists(path):
        raise DistillationError("--transfer_file=%s: no such file" % path)
    examples = []
    for number, line in corpus.text_lines(path, DistillationError):
        fields = line.split("\t")
        if len(fields) > 2:
            raise DistillationError("%s:%d: expected text_a or text_a<TAB>text_b, found %d "
                                    "tab-separated fields" % (path, number, len(fields)))
        examples.append(processors_lib.InputExample(
            guid="transfer-%d" % number, text_a=fields[0],
            text_b=fields[1] if len(fields) > 1 else None, label=None,
            source="%s:%d" % (path, number)))
    if not examples:
        raise DistillationError("--transfer_file=%s has no examples" % path)
    return examples


def _train_input_fn(labelled, transfer, seq_length, batch_size, num_examples, seed):
    """Labelled (hard_label_weight 1) and transfer (0) records, shuffled together, repeated."""
    spec = processors_lib.classifier_feature_spec(seq_length)

    def input_fn(input_context=None):
        per_replica = batch_size
        d = tf.data.TFRecordDataset([labelled]).map(lambda s: (s, 1.0))
        if transfer:
            d = d.concatenate(tf.data.TFRecordDataset([transfer]).map(lambda s: (s, 0.0)))
        if input_context is not None:
            per_replica = input_context.get_per_replica_batch_size(batch_size)
            if input_context.num_input_pipelines > 1:
                d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        d = d.repeat().shuffle(min(max(num_examples, 1), 10000), seed=seed)
        d = d.batch(per_replica, drop_remainder=True)

        def decode(serialized, weights):
            features = input_pipeline.decode_batch(serialized, spec)
            features["hard_label_weight"] = weights
            return features

        return d.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    return input_fn


def _expand(flag, pattern):
    files = []
    for part in _list(pattern):
        files.extend(tf.io.gfile.glob(part))
    if not files:
        raise DistillationError("--%s=%s matches no file" % (flag, pattern))
    return files


# --------------------------------------------------------------- measuring


def _count(model):
    """Parameters of a model (its weights, without dropout RNG states)."""
    return int(sum(int(np.prod(v.shape)) for v in model.weights
                   if not v.path.endswith("seed_generator_state")))


def _measure(name, model, forward, correct_fn, eval_input_fn, latency_runs, params):
    """A table row: parameters, ms per eval batch (mean after warm-up), accuracy."""
    step = tf.function(lambda features: forward(model, features))
    right = total = 0.0
    first = None
    for features in eval_input_fn():
        if first is None:
            first = features
        outputs = step(features)
        if correct_fn is None:  # no metric: one batch for the latency
            break
        c, n = correct_fn(outputs, features)
        right += float(c)
        total += float(n)
    timings = []
    if first is not None:
        for _ in range(2):  # warm-up (tracing done above)
            tf.nest.map_structure(lambda t: t.numpy(), step(first))
        for _ in range(latency_runs):
            start = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), step(first))
            timings.append((time.perf_counter() - start) * 1000.0)
    return {"model": name, "parameters": params,
            "latency_ms": float(np.mean(timings)) if timings else float("nan"),
            "accuracy": (None if correct_fn is None else right / total if total
                         else float("nan")), "examples": int(total)}


def _classification_correct(logits, features):
    labels = tf.reshape(tf.cast(features["label_ids"], tf.int32), [-1])
    weights = tf.reshape(tf.cast(features.get("is_real_example", tf.ones_like(labels)),
                                 tf.float32), [-1])
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    return tf.reduce_sum(weights * correct), tf.reduce_sum(weights)


def _mlm_correct(logits, features):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                               tf.cast(features["masked_lm_ids"], tf.int32)), tf.float32)
    return tf.reduce_sum(weights * correct), tf.reduce_sum(weights)


def format_table(rows, metric):
    """The teacher vs student table as text."""
    lines = ["%-18s %12s %14s %10s" % ("model", "parameters", "ms/batch", metric)]
    for row in rows:
        accuracy = "-" if row["accuracy"] is None else "%.4f" % row["accuracy"]
        lines.append("%-18s %12d %14.2f %10s" % (row["model"], row["parameters"],
                                                row["latency_ms"], accuracy))
    return "\n".join(lines)


# --------------------------------------------------------------------- run


class DistillationRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with distillation's hooks.

    The style picks the data (classification records, or create_pretraining_data.py
    TFRecords for distilbert), the distiller and its teachers; the student is
    exported right after training, then compared with the teachers on the dev set.
    """

    error = DistillationError
    modes = ("do_train", "do_eval")

    def __init__(self, job):
        super().__init__(job)
        self.table = []
        self.student_checkpoint = None
        # Masked-LM records in, a masked-LM student out: DistilBERT, and
        # TinyBERT's general distillation (unlabelled text, no task head).
        self.general = job.style == "tinybert" and job.stage == "general"
        self.mlm = job.style == "distilbert" or self.general

    # ----- checks (nothing written yet) ----------------------------------------------------

    def checkpoint_inputs(self):
        job = self.job
        return ([("--teacher_checkpoints", path) for path in _list(job.teacher_checkpoints)] +
                [("--student_init_checkpoint", job.student_init_checkpoint)])

    def check(self):
        """The settings that need no data: family, teachers, student, losses, training values."""
        job = self.job
        if job.style not in STYLES:
            raise DistillationError("--style=%s: expected one of %s"
                                    % (job.style, ", ".join(STYLES)))
        self.check_modes()
        self.check_required("output_dir")
        self.family = family = self.load_family()
        self.teacher_paths = paths = _list(job.teacher_checkpoints)
        config_files = _list(job.teacher_config_file)
        baseline = job.style == "mtdnn" and not paths
        if baseline:
            if job.alpha != 0:
                raise DistillationError(
                    "--teacher_checkpoints is empty: with no teacher only --alpha=0 (plain "
                    "fine-tuning of the student on the labels, the baseline) makes sense; got "
                    "--alpha=%s" % job.alpha)
        elif not paths:
            raise DistillationError("--teacher_checkpoints is required for --style=%s"
                                    % job.style)
        if job.style != "mtdnn" and len(paths) > 1:
            raise DistillationError("--style=%s distils one teacher; --teacher_checkpoints has "
                                    "%d (an ensemble is --style=mtdnn)" % (job.style, len(paths)))
        if paths and len(config_files) not in (1, len(paths)):
            raise DistillationError(
                "--teacher_config_file: give one config for all teachers or one per "
                "checkpoint; got %d for %d checkpoints" % (len(config_files), len(paths)))
        teacher_configs = []
        if paths:
            if not config_files:
                raise DistillationError("--teacher_config_file is required.")
            teacher_configs = [_load_config(family, f, "teacher_config_file")
                               for f in config_files]
            if len(teacher_configs) == 1:
                teacher_configs = teacher_configs * len(paths)
        if self.mlm and not job.student_config_file:
            student_config = students.half_depth_config(teacher_configs[0])
        else:
            student_config = _load_config(family, job.student_config_file,
                                          "student_config_file")
        self.teacher_configs, self.student_config = teacher_configs, student_config
        vocab_sizes = {c.vocab_size for c in teacher_configs + [student_config]}
        if len(vocab_sizes) > 1:
            named = [("--teacher_config_file=%s" % f, c)
                     for f, c in zip(config_files, teacher_configs)]
            if job.student_config_file:
                named.append(("--student_config_file=%s" % job.student_config_file,
                              student_config))
            raise DistillationError("teachers and student must share one vocabulary: %s"
                                    % ", ".join("%s says vocab_size=%d" % (flag, c.vocab_size)
                                                for flag, c in named))
        for config in teacher_configs + [student_config]:
            if job.max_seq_length > config.max_position_embeddings:
                raise DistillationError(
                    "--max_seq_length=%d exceeds max_position_embeddings=%d of a teacher or "
                    "student config" % (job.max_seq_length, config.max_position_embeddings))
        self._check_tinybert()
        if not job.temperature > 0:
            raise DistillationError("--temperature must be positive, got %s" % job.temperature)
        if not 0 <= job.alpha <= 1:
            raise DistillationError("--alpha must be in [0, 1], got %s" % job.alpha)
        self.check_positive("train_batch_size", "eval_batch_size", "gradient_accumulation_steps",
                            "latency_runs")
        if job.num_train_steps is not None and job.num_train_steps < 1:
            raise DistillationError("--num_train_steps must be positive (or unset: epochs).")
        try:
            self.check_training_values()
        except validation.TrainingValueError as e:
            raise DistillationError(str(e)) from None
        input_pipeline.check_length_batching(job, DistillationError)
        for path in paths + _list(job.student_init_checkpoint):
            try:
                checkpoints.resolve_checkpoint(path)
            except (FileNotFoundError, ValueError) as e:
                raise DistillationError("checkpoint %s: %s"
                                        % (path, str(e).splitlines()[0])) from None
        if not self.mlm:  # a teacher without a head is refused before any record is written
            for path in paths:
                if _head_tensors(path) is None:
                    raise _no_head_error(path)

    def check_family(self, family):
        if not family.has_pooler:
            raise DistillationError("--model_family=%s: distillation needs a BERT-style encoder "
                                    "family with a pooled output (e.g. bert, albert)"
                                    % self.job.model_family)

    def _check_tinybert(self):
        """TinyBERT's stage, and the head count and layer map of its layer-wise losses."""
        job, student, teacher = self.job, self.student_config, None
        self.layer_map = None
        if job.style != "tinybert":
            return
        if job.stage not in models.STAGES:
            raise DistillationError("--stage=%s: expected one of %s"
                                    % (job.stage, ", ".join(models.STAGES)))
        if job.stage == "prediction":
            return
        teacher = self.teacher_configs[0]
        if student.num_attention_heads != teacher.num_attention_heads:
            raise DistillationError(
                "--student_config_file=%s: attention maps are matched head by head, so the "
                "student needs the teacher's num_attention_heads=%d (it has %d)"
                % (job.student_config_file, teacher.num_attention_heads,
                   student.num_attention_heads))
        self.layer_map = students.parse_layer_map(job.layer_map, student.num_hidden_layers,
                                                  teacher.num_hidden_layers)

    # ----- data ----------------------------------------------------------------------------

    def prepare(self):
        """The masked-LM files (distilbert) or the classification records; the training examples."""
        job = self.job
        if self.mlm:
            self.train_files = _expand("input_file", job.input_file) if job.do_train else None
            self.eval_files = (_expand("eval_input_file", job.eval_input_file)
                               if job.do_eval else None)
            num_examples = 0
            if job.do_train and job.num_train_steps is None:
                num_examples = sum(1 for f in self.train_files
                                   for _ in tf.data.TFRecordDataset(f))
        else:
            num_examples = self._classification_data()
        if self.layer_map is not None:
            logging.info("Layer map (student:teacher): %s",
                         ",".join("%d:%d" % pair for pair in self.layer_map))
        return num_examples

    def _classification_data(self):
        """Writes train/transfer/eval TFRecords; returns the number of training examples."""
        job = self.job
        classifier_args = {f.name: getattr(job, f.name) for f in dataclasses.fields(
            classifier_job.ClassifierJob) if hasattr(job, f.name)}
        cjob = classifier_job.ClassifierJob(**classifier_args)
        if not job.data_dir:
            raise DistillationError("--data_dir is required for --style=%s" % job.style)
        if not job.task_name and not job.processor:
            raise DistillationError("Give --task_name or "
                                    "--processor=path/to/my_task.py:MyProcessor.")
        vocab_size = self.student_config.vocab_size
        try:
            processor = classifier_job.build_processor(cjob, vocab_size)
        except (ValueError, KeyError) as e:
            raise DistillationError(str(e).splitlines()[0]) from None
        if getattr(processor, "task_type", processors_lib.CLASSIFICATION) != \
                processors_lib.CLASSIFICATION:
            raise DistillationError("--style=%s distils single-label classification; the "
                                    "processor's task_type is %s"
                                    % (job.style, processor.task_type))
        if getattr(processor, "is_multiple_choice", False):
            raise DistillationError("--style=%s: multiple-choice processors are not supported"
                                    % job.style)
        self.check_required("vocab_file")
        if not tf.io.gfile.exists(job.vocab_file):
            raise DistillationError("--vocab_file=%s: no such file" % job.vocab_file)
        vocab = tokenization.load_vocab(job.vocab_file)
        if len(vocab) != vocab_size:
            raise DistillationError("--vocab_file=%s has %d tokens but the configs say "
                                    "vocab_size=%d" % (job.vocab_file, len(vocab), vocab_size))
        self.tokenizer = tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)
        self.label_list = list(processor.get_labels())
        if not self.label_list:
            raise DistillationError("The processor's get_labels() returned no labels.")
        self.train_record = self.transfer_record = self.eval_record = None
        # Every split is read (and a bad one refused) before any record is written.
        train = transfer = dev = None
        if job.do_train:
            train = processor.get_train_examples(job.data_dir)
            if not train:
                raise DistillationError("The training set in %s has no examples." % job.data_dir)
            if job.transfer_file:
                if not self.teacher_paths:
                    raise DistillationError("--transfer_file: unlabeled examples need a "
                                            "teacher (--teacher_checkpoints)")
                transfer = read_transfer_examples(job.transfer_file)
        if job.do_eval:
            dev = processor.get_dev_examples(job.data_dir)
            if not dev:
                raise DistillationError("The dev set in %s has no examples." % job.data_dir)
        num_train = 0
        if train is not None:
            self.train_record = self._write(train, "train.tf_record")
            num_train = len(train)
        if transfer is not None:
            self.transfer_record = self._write(transfer, "transfer.tf_record")
            num_train += len(transfer)
        if dev is not None:
            self.eval_record = self._write(processors_lib.pad_examples(dev, job.eval_batch_size),
                                           "eval.tf_record")
        self.num_train_examples = num_train
        return num_train

    def _write(self, examples, name):
        path = os.path.join(self.job.output_dir, name)
        processors_lib.file_based_convert_examples_to_features(
            examples, self.label_list, self.job.max_seq_length, self.tokenizer, path,
            processors_lib.CLASSIFICATION)
        return path

    def training_steps(self, num_examples):
        """`num_train_steps` when given, else Google's arithmetic over the epochs."""
        steps = self.job.num_train_steps
        if steps:
            return steps, int(steps * self.job.warmup_proportion)
        return super().training_steps(num_examples)

    def train_input_fn(self):
        job = self.job
        if self.mlm:
            base = input_pipeline.pretraining_input_fn_builder(
                self.train_files, job.max_seq_length, job.max_predictions_per_seq, True,
                job.train_batch_size, seed=job.seed)
        else:
            base = _train_input_fn(self.train_record, self.transfer_record, job.max_seq_length,
                                   job.train_batch_size, self.num_train_examples, job.seed)
        # Batches cut to their bucketed length (masked positions are real tokens).
        return length_batching.input_fn(job, base, job.train_batch_size, length_batching.TRAIN)

    def _eval_input_fn(self):
        job = self.job
        if not self.mlm:
            base = processors_lib.file_based_input_fn_builder(
                self.eval_record, job.max_seq_length, is_training=False, drop_remainder=True,
                batch_size=job.eval_batch_size, seed=job.seed)
        else:
            def base(input_context=None):
                return input_pipeline.pretraining_dataset(
                    self.eval_files, job.max_seq_length, job.max_predictions_per_seq,
                    job.eval_batch_size, False, input_context=input_context,
                    drop_remainder=False)
        return length_batching.input_fn(job, base, job.eval_batch_size, length_batching.EVAL)

    # ----- the models ----------------------------------------------------------------------

    def build_model(self):
        """The distiller: the student, then its frozen teachers (loaded here)."""
        # Teachers are loaded here, not in init_model: they are fixed, and a
        # resumed run (which skips init_model) must see them too.
        # The student is built first, so that with one seed it starts from
        # the same weights whatever the teachers (distilled vs baseline).
        job, family = self.job, self.family
        if self.mlm:
            student = _mlm_model(self.student_config, family, "student")
            teacher = _mlm_model(self.teacher_configs[0], family, "teacher")
            checkpoints.init_from_checkpoint(teacher, self.teacher_paths[0])
            if self.general:
                model = models.TinyBertDistiller(student, teacher, self.layer_map,
                                                 stage="general",
                                                 attention=job.tinybert_attention)
            else:
                model = models.MaskedLMDistiller(
                    student, teacher, temperature=job.temperature,
                    soft_weight=job.soft_loss_weight, mlm_weight=job.mlm_loss_weight,
                    cos_weight=job.cos_loss_weight)
            self.teachers = [teacher]
        else:
            num_labels = len(self.label_list)
            student = _classifier(self.student_config, family, num_labels, "student")
            self.teachers = []
            for i, (config, path) in enumerate(zip(self.teacher_configs, self.teacher_paths)):
                teacher = _classifier(config, family, num_labels, "teacher_%d" % i)
                load_classifier(teacher, path)
                self.teachers.append(teacher)
            if job.style == "tinybert":
                model = models.TinyBertDistiller(student, self.teachers[0], self.layer_map or [],
                                                 stage=job.stage, temperature=job.temperature,
                                                 attention=job.tinybert_attention)
            else:
                model = models.ClassifierDistiller(student, self.teachers,
                                                   temperature=job.temperature, alpha=job.alpha)
        self.student = student
        return model

    def init_model(self, model):
        """The student from `student_init_checkpoint`, else (distilbert) from the teacher."""
        path = self.job.student_init_checkpoint
        if path:
            if self.mlm:
                checkpoints.init_from_checkpoint(model.student, path, allow_missing_heads=True)
            else:
                load_classifier(model.student, path, require_head=False)
            logging.info("Student initialised from %s", path)
        elif self.general:
            logging.info("TinyBERT general distillation: the student starts from random "
                         "weights, as in the paper.")
        elif self.mlm:
            copied = students.copy_every_other_layer(model.teacher.encoder,
                                                     model.student.encoder)
            students._copy(model.teacher.get_objective("masked_lm").head,  # pylint: disable=protected-access
                           model.student.get_objective("masked_lm").head, "MLM head")
            logging.info("Student initialised from the teacher's embeddings, layers %s, "
                         "pooler and MLM head", copied)
        else:
            logging.info("No --student_init_checkpoint: the student starts from random weights.")

    # ----- after training --------------------------------------------------------------------

    def after_training(self, trainer):
        """The student's Google TF1 export (`save_student`), before any evaluation."""
        if trainer.is_chief:
            self.student_checkpoint = save_student(self.student, self.job.output_dir,
                                                   self.student_config)

    def evaluate(self, trainer):
        """The student's eval_results.txt; the teacher vs student table (distillation_results.json)."""
        job = self.job
        eval_input_fn = self._eval_input_fn()
        results = job_lib.eval_results_from(
            trainer.evaluate(eval_input_fn, max_steps=None, restore=False), loss_alias=False)
        if trainer.is_chief:
            trainer_lib.write_eval_results(results, os.path.join(job.output_dir,
                                                                 "eval_results.txt"))
        self.table = self._comparison(eval_input_fn)
        # General distillation trains no head: the held-out layer-wise losses
        # (eval_results.txt) are its measure, the table has no accuracy.
        metric = (None if self.general else "masked_lm_accuracy" if self.mlm else "accuracy")
        print(format_table(self.table, {None: "-", "masked_lm_accuracy": "mlm_acc"}.get(
            metric, metric)))
        if trainer.is_chief:
            atomic.write_text(os.path.join(job.output_dir, RESULTS_FILE), json.dumps({
                "style": job.style, "metric": metric,
                "eval_batch_size": job.eval_batch_size, "latency_runs": job.latency_runs,
                "rows": self.table}, indent=2) + "\n")
        return results

    def _comparison(self, eval_input_fn):
        """Rows: each teacher (and the ensemble), then the student."""
        if self.mlm:
            def forward(model, features):
                encoded = model.encoder(features, training=False)
                return model.get_objective("masked_lm")(encoded, features)["outputs"][
                    "masked_lm_logits"]
            correct = None if self.general else _mlm_correct
        else:
            def forward(model, features):
                return model(features, training=False)["logits"]
            correct = _classification_correct
        runs = self.job.latency_runs
        rows = []
        teachers = self.teachers
        for i, teacher in enumerate(teachers):
            name = "teacher" if len(teachers) == 1 else "teacher_%d" % i
            rows.append(_measure(name, teacher, forward, correct, eval_input_fn, runs,
                                 _count(teacher)))
        if len(teachers) > 1:
            def ensemble(models_, features):
                probs = [tf.nn.softmax(m(features, training=False)["logits"], -1)
                         for m in models_]
                return tf.add_n(probs) / float(len(probs))
            rows.append(_measure("teacher_ensemble", teachers, ensemble, correct, eval_input_fn,
                                 runs, sum(_count(t) for t in teachers)))
        rows.append(_measure("student", self.student, forward, correct, eval_input_fn, runs,
                             _count(self.student)))
        return rows

    def finish(self, trainer, eval_results, predictions):
        print("Student:      %s" % (self.student_checkpoint or "-"))
        super().finish(trainer, eval_results, predictions)  # the checkpoints
        return DistillationResult(eval_results=eval_results, table=self.table,
                                  output_dir=self.job.output_dir,
                                  student_checkpoint=self.student_checkpoint)


def run(job):
    """Runs `job`; returns a `DistillationResult`."""
    return DistillationRunner(job).run()


registry.tasks.register("distillation", FineTuningTask(
    name="distillation",
    description="Knowledge distillation: MT-DNN ensemble soft targets, DistilBERT (soft MLM + "
                "cosine, every-other-layer student), TinyBERT (layer-wise MSE, projection)",
    model_class=models.ClassifierDistiller, job_class=DistillationJob, run=run))
