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
from data import input_pipeline
from data import processors as processors_lib
from data import tokenization
from data.processors.base import DataError
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
from modeling.tasks.classification import BertClassifier
from modeling.training import optimization
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
class DistillationJob(settings.TrainerSettings):
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
    file_format: str = option("tsv", "generic: data file format.",
                              choices=("tsv", "csv", "jsonl"))
    text_a_column: Optional[str] = option("0", "generic: column of text_a.")
    text_b_column: Optional[str] = option(None, "generic: column of text_b.")
    label_column: Optional[str] = option("1", "generic: column of the label.")
    guid_column: Optional[str] = option(None, "generic: column of an example id.")
    has_header: bool = option(True, "generic: files start with a header row.")
    labels: Optional[List[str]] = option(None, "generic: the label list.")
    train_file: Optional[str] = option(None, "generic: training file name in --data_dir.")
    dev_file: Optional[str] = option(None, "generic: dev file name in --data_dir.")
    vocab_file: Optional[str] = option(None, "The vocabulary shared by teachers and student.")
    do_lower_case: bool = option(True, "Lower case the input text.")
    transfer_file: Optional[str] = option(
        None, "Unlabeled examples the teachers label (one per line: text_a, or "
        "text_a<TAB>text_b); they count in the soft loss only.")
    # Masked-LM data (distilbert): create_pretraining_data.py TFRecords.
    input_file: Optional[str] = option(
        None, "distilbert: training TFRecords (comma-separated globs).")
    eval_input_file: Optional[str] = option(None, "distilbert: dev TFRecords.")
    max_predictions_per_seq: int = option(20, "distilbert: masked positions per sequence.")
    max_seq_length: int = option(128, "Maximum sequence length.")
    output_dir: Optional[str] = option(None, "Where checkpoints and results are written.")
    do_train: bool = option(False, "Whether to train the student.")
    do_eval: bool = option(False, "Whether to evaluate and compare teacher and student.")
    train_batch_size: int = option(32, "Total batch size for training.")
    eval_batch_size: int = option(8, "Total batch size for eval (and latency).")
    learning_rate: float = option(5e-5, "The initial learning rate.")
    num_train_epochs: float = option(3.0, "Epochs over labelled + transfer examples.")
    num_train_steps: Optional[int] = option(
        None, "Training steps (overrides --num_train_epochs).")
    warmup_proportion: float = option(0.1, "Proportion of training with linear warmup.")
    save_checkpoints_steps: int = option(1000, "How often to save a checkpoint.")
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
        "both", "tinybert: layer-wise losses, the prediction-layer soft loss, or both.",
        choices=("intermediate", "prediction", "both"))
    latency_runs: int = option(5, "Timed forward passes per model (after warm-up).")
    seed: Optional[int] = option(None, "Random seed for weights, dropout and input shuffling.")


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


def _check_job(job):
    """Checks the settings that need no data; returns (family, teacher configs, student config)."""
    if job.style not in STYLES:
        raise DistillationError("--style=%s: expected one of %s" % (job.style, ", ".join(STYLES)))
    if not (job.do_train or job.do_eval):
        raise DistillationError("At least one of `do_train` or `do_eval` must be True.")
    if not job.output_dir:
        raise DistillationError("--output_dir is required.")
    try:
        family = registry.families.get(job.model_family)
    except registry.RegistryError as e:
        raise DistillationError("--model_family: %s" % e) from None
    if not family.has_pooler:
        raise DistillationError("--model_family=%s: distillation needs a BERT-style encoder "
                                "family with a pooled output (e.g. bert, albert)"
                                % job.model_family)
    checkpoints_ = _list(job.teacher_checkpoints)
    config_files = _list(job.teacher_config_file)
    baseline = job.style == "mtdnn" and not checkpoints_
    if baseline:
        if job.alpha != 0:
            raise DistillationError(
                "--teacher_checkpoints is empty: with no teacher only --alpha=0 (plain "
                "fine-tuning of the student on the labels, the baseline) makes sense; got "
                "--alpha=%s" % job.alpha)
    elif not checkpoints_:
        raise DistillationError("--teacher_checkpoints is required for --style=%s" % job.style)
    if job.style != "mtdnn" and len(checkpoints_) > 1:
        raise DistillationError("--style=%s distils one teacher; --teacher_checkpoints has %d "
                                "(an ensemble is --style=mtdnn)" % (job.style, len(checkpoints_)))
    if checkpoints_ and len(config_files) not in (1, len(checkpoints_)):
        raise DistillationError(
            "--teacher_config_file: give one config for all teachers or one per "
            "checkpoint; got %d for %d checkpoints" % (len(config_files), len(checkpoints_)))
    teacher_configs = []
    if checkpoints_:
        if not config_files:
            raise DistillationError("--teacher_config_file is required.")
        teacher_configs = [_load_config(family, f, "teacher_config_file") for f in config_files]
        if len(teacher_configs) == 1:
            teacher_configs = teacher_configs * len(checkpoints_)
    if job.style == "distilbert" and not job.student_config_file:
        student_config = students.half_depth_config(teacher_configs[0])
    else:
        student_config = _load_config(family, job.student_config_file, "student_config_file")
    vocab_sizes = {c.vocab_size for c in teacher_configs + [student_config]}
    if len(vocab_sizes) > 1:
        raise DistillationError("teachers and student must share one vocabulary; their configs "
                                "say vocab_size %s" % sorted(vocab_sizes))
    for config in teacher_configs + [student_config]:
        if job.max_seq_length > config.max_position_embeddings:
            raise DistillationError(
                "--max_seq_length=%d exceeds max_position_embeddings=%d of a teacher or "
                "student config" % (job.max_seq_length, config.max_position_embeddings))
    if job.style == "tinybert" and job.stage not in models.STAGES:
        raise DistillationError("--stage=%s: expected one of %s"
                                % (job.stage, ", ".join(models.STAGES)))
    if job.style == "tinybert" and job.stage != "prediction":
        if student_config.num_attention_heads != teacher_configs[0].num_attention_heads:
            raise DistillationError(
                "--student_config_file=%s: attention maps are matched head by head, so the "
                "student needs the teacher's num_attention_heads=%d (it has %d)"
                % (job.student_config_file, teacher_configs[0].num_attention_heads,
                   student_config.num_attention_heads))
        students.parse_layer_map(job.layer_map, student_config.num_hidden_layers,
                                 teacher_configs[0].num_hidden_layers)
    if not job.temperature > 0:
        raise DistillationError("--temperature must be positive, got %s" % job.temperature)
    if not 0 <= job.alpha <= 1:
        raise DistillationError("--alpha must be in [0, 1], got %s" % job.alpha)
    for name in ("train_batch_size", "eval_batch_size", "gradient_accumulation_steps",
                 "latency_runs"):
        if getattr(job, name) < 1:
            raise DistillationError("--%s must be positive." % name)
    if job.num_train_steps is not None and job.num_train_steps < 1:
        raise DistillationError("--num_train_steps must be positive (or unset: epochs).")
    try:
        validation.validate_training_values(
            job.do_train, learning_rate=job.learning_rate,
            save_checkpoints_steps=job.save_checkpoints_steps,
            keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
            num_train_epochs=job.num_train_epochs if job.do_train else None,
            warmup_proportion=job.warmup_proportion, do_eval=job.do_eval)
    except ValueError as e:
        raise DistillationError(str(e)) from None
    if job.nan_policy not in trainer_lib.NAN_POLICIES:
        raise DistillationError("--nan_policy=%s: expected one of %s"
                                % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))
    for path in checkpoints_ + _list(job.student_init_checkpoint):
        try:
            checkpoints.resolve_checkpoint(path)
        except (FileNotFoundError, ValueError) as e:
            raise DistillationError("checkpoint %s: %s" % (path, str(e).splitlines()[0])) \
                from None
    return family, checkpoints_, teacher_configs, student_config


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
            raise DistillationError(
                "%s: no classifier head (output_weights, output_bias) in the checkpoint; a "
                "teacher must be a fine-tuned classifier (run_classifier.py's output dir)" % path)
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
    with tf.io.gfile.GFile(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise DistillationError("%s:%d: not UTF-8 text" % (path, number)) from None
            if not line.strip():
                continue
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


def _classification_data(job, config):
    """Writes train/transfer/eval TFRecords; returns what the run needs."""
    classifier_args = {f.name: getattr(job, f.name) for f in dataclasses.fields(
        classifier_job.ClassifierJob) if hasattr(job, f.name)}
    cjob = classifier_job.ClassifierJob(**classifier_args)
    if not job.data_dir:
        raise DistillationError("--data_dir is required for --style=%s" % job.style)
    if not job.task_name and not job.processor:
        raise DistillationError("Give --task_name or --processor=path/to/my_task.py:MyProcessor.")
    try:
        processor = classifier_job.build_processor(cjob, config.vocab_size)
    except (ValueError, KeyError) as e:
        raise DistillationError(str(e).splitlines()[0]) from None
    if getattr(processor, "task_type", processors_lib.CLASSIFICATION) != \
            processors_lib.CLASSIFICATION:
        raise DistillationError("--style=%s distils single-label classification; the "
                                "processor's task_type is %s" % (job.style, processor.task_type))
    if getattr(processor, "is_multiple_choice", False):
        raise DistillationError("--style=%s: multiple-choice processors are not supported"
                                % job.style)
    if not job.vocab_file:
        raise DistillationError("--vocab_file is required.")
    if not tf.io.gfile.exists(job.vocab_file):
        raise DistillationError("--vocab_file=%s: no such file" % job.vocab_file)
    vocab = tokenization.load_vocab(job.vocab_file)
    if len(vocab) != config.vocab_size:
        raise DistillationError("--vocab_file=%s has %d tokens but the configs say vocab_size=%d"
                                % (job.vocab_file, len(vocab), config.vocab_size))
    tokenizer = tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)
    label_list = list(processor.get_labels())
    if not label_list:
        raise DistillationError("The processor's get_labels() returned no labels.")

    def write(examples, name):
        path = os.path.join(job.output_dir, name)
        processors_lib.file_based_convert_examples_to_features(
            examples, label_list, job.max_seq_length, tokenizer, path,
            processors_lib.CLASSIFICATION)
        return path

    data = {"label_list": label_list, "train": None, "transfer": None, "eval": None,
            "num_train": 0}
    if job.do_train:
        train = processor.get_train_examples(job.data_dir)
        if not train:
            raise DistillationError("The training set in %s has no examples." % job.data_dir)
        data["train"] = write(train, "train.tf_record")
        data["num_train"] = len(train)
        if job.transfer_file:
            if not _list(job.teacher_checkpoints):
                raise DistillationError("--transfer_file: unlabeled examples need a teacher "
                                        "(--teacher_checkpoints)")
            transfer = read_transfer_examples(job.transfer_file)
            data["transfer"] = write(transfer, "transfer.tf_record")
            data["num_train"] += len(transfer)
    if job.do_eval:
        dev = processor.get_dev_examples(job.data_dir)
        if not dev:
            raise DistillationError("The dev set in %s has no examples." % job.data_dir)
        data["num_dev"] = len(dev)
        data["eval"] = write(processors_lib.pad_examples(dev, job.eval_batch_size),
                             "eval.tf_record")
    return data


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
            "accuracy": right / total if total else float("nan"), "examples": int(total)}


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
        lines.append("%-18s %12d %14.2f %10.4f" % (row["model"], row["parameters"],
                                                  row["latency_ms"], row["accuracy"]))
    return "\n".join(lines)


# --------------------------------------------------------------------- run


def run(job):
    """Runs `job`; returns a `DistillationResult`."""
    family, teacher_paths, teacher_configs, student_config = _check_job(job)
    strategy = settings.start_run(job)
    with settings.output_dir_lock(job, strategy):
        try:
            return _run(job, family, teacher_paths, teacher_configs, student_config, strategy)
        except DataError as e:
            raise DistillationError(str(e)) from None


def _run(job, family, teacher_paths, teacher_configs, student_config, strategy):
    tf.io.gfile.makedirs(job.output_dir)
    mlm = job.style == "distilbert"
    if mlm:
        if job.do_train:
            train_files = _expand("input_file", job.input_file)
        if job.do_eval:
            eval_files = _expand("eval_input_file", job.eval_input_file)
        num_examples = 0
        if job.do_train and job.num_train_steps is None:
            num_examples = sum(1 for f in train_files for _ in tf.data.TFRecordDataset(f))
        data = None
    else:
        data = _classification_data(job, student_config)
        num_examples = data["num_train"]
        num_labels = len(data["label_list"])

    num_train_steps = 0
    if job.do_train:
        per_update = job.train_batch_size * job.gradient_accumulation_steps
        num_train_steps = job.num_train_steps or int(
            num_examples / per_update * job.num_train_epochs)
        if num_train_steps < 1:
            raise DistillationError("%d training examples, --train_batch_size=%d and "
                                    "--num_train_epochs=%s make no training step"
                                    % (num_examples, job.train_batch_size, job.num_train_epochs))
    num_warmup_steps = int(num_train_steps * job.warmup_proportion)
    layer_map = None
    if job.style == "tinybert" and job.stage != "prediction":
        layer_map = students.parse_layer_map(job.layer_map, student_config.num_hidden_layers,
                                             teacher_configs[0].num_hidden_layers)
        logging.info("Layer map (student:teacher): %s",
                     ",".join("%d:%d" % pair for pair in layer_map))
    holder = {}

    def model_fn():
        # Teachers are loaded here, not in init_fn: they are fixed, and a
        # resumed run (which skips init_fn) must see them too.
        # The student is built first, so that with one seed it starts from
        # the same weights whatever the teachers (distilled vs baseline).
        if mlm:
            student = _mlm_model(student_config, family, "student")
            teacher = _mlm_model(teacher_configs[0], family, "teacher")
            checkpoints.init_from_checkpoint(teacher, teacher_paths[0])
            model = models.MaskedLMDistiller(
                student, teacher, temperature=job.temperature,
                soft_weight=job.soft_loss_weight, mlm_weight=job.mlm_loss_weight,
                cos_weight=job.cos_loss_weight)
            holder["teachers"] = [teacher]
        else:
            student = _classifier(student_config, family, num_labels, "student")
            teachers = []
            for i, (config, path) in enumerate(zip(teacher_configs, teacher_paths)):
                teacher = _classifier(config, family, num_labels, "teacher_%d" % i)
                load_classifier(teacher, path)
                teachers.append(teacher)
            if job.style == "tinybert":
                model = models.TinyBertDistiller(student, teachers[0], layer_map or [],
                                                 stage=job.stage, temperature=job.temperature)
            else:
                model = models.ClassifierDistiller(student, teachers,
                                                   temperature=job.temperature, alpha=job.alpha)
            holder["teachers"] = teachers
        holder["student"] = student
        return model

    def init_fn(model):
        if job.student_init_checkpoint:
            if mlm:
                checkpoints.init_from_checkpoint(model.student, job.student_init_checkpoint,
                                                 allow_missing_heads=True)
            else:
                load_classifier(model.student, job.student_init_checkpoint, require_head=False)
            logging.info("Student initialised from %s", job.student_init_checkpoint)
        elif mlm:
            copied = students.copy_every_other_layer(model.teacher.encoder,
                                                     model.student.encoder)
            students._copy(model.teacher.get_objective("masked_lm").head,  # pylint: disable=protected-access
                           model.student.get_objective("masked_lm").head, "MLM head")
            logging.info("Student initialised from the teacher's embeddings, layers %s, "
                         "pooler and MLM head", copied)
        else:
            logging.info("No --student_init_checkpoint: the student starts from random weights.")

    trainer = trainer_lib.Trainer(
        strategy, model_fn=model_fn,
        optimizer_fn=lambda: optimization.create_optimizer(
            job.learning_rate, max(1, num_train_steps), num_warmup_steps,
            **job.optimizer_options()),
        model_dir=job.output_dir, train_batch_size=job.train_batch_size,
        num_train_steps=num_train_steps, save_checkpoints_steps=job.save_checkpoints_steps,
        init_fn=init_fn, **job.trainer_options())

    if mlm:
        def eval_input_fn(input_context=None):
            return input_pipeline.pretraining_dataset(
                eval_files, job.max_seq_length, job.max_predictions_per_seq,
                job.eval_batch_size, False, input_context=input_context, drop_remainder=False)
    elif data["eval"]:
        eval_input_fn = processors_lib.file_based_input_fn_builder(
            data["eval"], job.max_seq_length, is_training=False, drop_remainder=True,
            batch_size=job.eval_batch_size, seed=job.seed)

    if job.do_train:
        if mlm:
            train_input_fn = input_pipeline.pretraining_input_fn_builder(
                train_files, job.max_seq_length, job.max_predictions_per_seq, True,
                job.train_batch_size, seed=job.seed)
        else:
            train_input_fn = _train_input_fn(data["train"], data["transfer"], job.max_seq_length,
                                             job.train_batch_size, num_examples, job.seed)
        trainer.train(train_input_fn)
    else:
        trainer.restore_or_initialize()

    result = DistillationResult(eval_results={}, table=[], output_dir=job.output_dir)
    student = holder["student"]
    if trainer.is_chief:
        result.student_checkpoint = save_student(student, job.output_dir, student_config)
    if job.do_eval:
        raw = trainer.evaluate(eval_input_fn, max_steps=None, restore=False)
        results = {"global_step": raw.pop("global_step")}
        for name, value in raw.items():
            results["eval_" + name] = value
        if trainer.is_chief:
            trainer_lib.write_eval_results(results, os.path.join(job.output_dir,
                                                                 "eval_results.txt"))
        result.eval_results = results
        result.table = _comparison(job, holder, eval_input_fn, mlm)
        metric = "mlm_acc" if mlm else "accuracy"
        print(format_table(result.table, metric))
        if trainer.is_chief:
            atomic.write_text(os.path.join(job.output_dir, RESULTS_FILE), json.dumps({
                "style": job.style, "metric": "masked_lm_accuracy" if mlm else "accuracy",
                "eval_batch_size": job.eval_batch_size, "latency_runs": job.latency_runs,
                "rows": result.table}, indent=2) + "\n")
    print("Student:      %s" % (result.student_checkpoint or "-"))
    print("Checkpoints:  %s" % os.path.abspath(job.output_dir))
    return result


def _comparison(job, holder, eval_input_fn, mlm):
    """Rows: each teacher (and the ensemble), then the student."""
    if mlm:
        def forward(model, features):
            encoded = model.encoder(features, training=False)
            return model.get_objective("masked_lm")(encoded, features)["outputs"][
                "masked_lm_logits"]
        correct = _mlm_correct
    else:
        def forward(model, features):
            return model(features, training=False)["logits"]
        correct = _classification_correct
    rows = []
    teachers = holder["teachers"]
    for i, teacher in enumerate(teachers):
        name = "teacher" if len(teachers) == 1 else "teacher_%d" % i
        rows.append(_measure(name, teacher, forward, correct, eval_input_fn, job.latency_runs,
                             _count(teacher)))
    if len(teachers) > 1:
        def ensemble(models_, features):
            probs = [tf.nn.softmax(m(features, training=False)["logits"], -1) for m in models_]
            return tf.add_n(probs) / float(len(probs))
        rows.append(_measure("teacher_ensemble", teachers, ensemble, correct, eval_input_fn,
                             job.latency_runs, sum(_count(t) for t in teachers)))
    rows.append(_measure("student", holder["student"], forward, correct, eval_input_fn,
                         job.latency_runs, _count(holder["student"])))
    return rows


registry.tasks.register("distillation", FineTuningTask(
    name="distillation",
    description="Knowledge distillation: MT-DNN ensemble soft targets, DistilBERT (soft MLM + "
                "cosine, every-other-layer student), TinyBERT (layer-wise MSE, projection)",
    model_class=models.ClassifierDistiller, job_class=DistillationJob, run=run))
