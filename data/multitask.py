"""MT-DNN multi-task data: the task list file, ranking records, and the task-sampling input.

A multi-task run (`run/run_multitask.py`, `modeling.tasks.multitask_job`)
trains one shared encoder on several tasks. What it trains on is a task
list file, a JSON list of objects, one per task:

    [
      {"name": "mrpc", "processor": "mrpc", "data_dir": "glue/MRPC",
       "head": "classification"},
      {"name": "stsb", "processor": "sts-b", "data_dir": "glue/STS-B",
       "head": "regression", "weight": 0.5},
      {"name": "qnli", "processor": "multiple_choice", "data_dir": "qnli_pairs",
       "head": "ranking"},
      {"name": "conll", "processor": "ner", "data_dir": "conll2003",
       "head": "tagging", "options": {"tagging_scheme": "bio"}},
      {"name": "squad", "processor": "squad", "data_dir": "squad11",
       "head": "span_qa", "options": {"doc_stride": 128}}
    ]

Fields:

* ``name``: the task's name in metrics (``<name>/loss``, ``<name>/accuracy``),
  eval results and file names; letters, digits, ``_ . -``; unique.
* ``head``: ``classification`` (sentence pairs: MT-DNN's stochastic answer
  network by default; single sentences, or ``"classifier": "dense"`` in the
  options: a dense layer on the pooled output) | ``regression`` (a dense
  layer on the pooled output) | ``ranking`` (MT-DNN's pairwise ranking: one
  score per (query, candidate) pair, softmax over a query's candidates) |
  ``span_qa`` (start/end logits) | ``tagging`` (per-token softmax).
* ``processor``: for classification and regression a task name of
  `data.processors` (mrpc, sst-2, sts-b, generic, ...) or a user processor
  ``path/to/my_task.py:MyProcessor``; ``multiple_choice`` (or a user
  `MultipleChoiceProcessor` subclass) for ranking, whose JSON-lines format
  gives the query as ``context`` and the candidates as ``choices``;
  ``ner`` (CoNLL files train.txt / dev.txt) for tagging; ``squad`` (SQuAD
  JSON train.json / dev.json) for span QA.
* ``data_dir``: the task's data; a relative path is taken relative to the
  task list file's directory.
* ``weight``: the task's loss weight (default 1; must be > 0).
* ``options``: head- and processor-specific settings, e.g. the generic
  processor's ``file_format``, ``text_a_column``, ``labels``; classification's
  ``classifier`` (``"san"`` | ``"dense"``), ``san_steps``,
  ``san_step_dropout``; tagging's ``tagging_scheme``; span QA's
  ``doc_stride``, ``max_query_length``, ``train_file``, ``dev_file``. Which
  keys are allowed is checked by the job.

Every problem is a `TaskListError` whose one-line message names the file,
the entry (index and name) and the field at fault.

The training input (`sampling_dataset`): every batch comes from ONE task,
task t being drawn with probability ``p_t = n_t^(1/T) / sum_s n_s^(1/T)``
(`sampling_probabilities`; n_t its training examples, T the sampling
temperature: 1 proportional to size, large T close to uniform). Tasks
produce different features (tags per token, a label per sequence, answer
positions), but a compiled training step needs one structure, so every
batch carries the UNION of all tasks' features (`UNION_KEYS`; zeros where a
task has none) plus ``task_id`` per row: `to_union` maps one task's parsed
batch to that structure, and ``tf.data.Dataset.sample_from_datasets`` draws
the batches (seeded).

Ranking records (`write_ranking_records`): one record per query holds its
C candidate sequences ``[CLS] query [SEP] candidate [SEP]`` flattened
(``input_ids`` of C * max_seq_length), and ``label_ids`` the index of the
right candidate; a batch of b queries becomes b * C rows, row c of query q
carrying ``label_ids`` 1 if c is the right candidate, else 0.
"""

import json
import math
import os
import re

import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import packing
from data import tf_example

__all__ = ["HEADS", "UNION_KEYS", "TaskListError", "TaskSpec", "read_task_list",
           "sampling_probabilities", "write_ranking_records", "ranking_feature_spec",
           "to_union", "task_dataset", "sampling_dataset", "write_soft_targets",
           "soft_target_spec", "SOFT_TARGETS", "SOFT_TARGET_WEIGHT"]

CLASSIFICATION = "classification"
REGRESSION = "regression"
RANKING = "ranking"
SPAN_QA = "span_qa"
TAGGING = "tagging"
HEADS = (CLASSIFICATION, REGRESSION, RANKING, SPAN_QA, TAGGING)

FIELDS = ("name", "processor", "data_dir", "head", "weight", "options")
REQUIRED = ("name", "processor", "data_dir", "head")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")

# Feature keys of every multi-task batch: [rows, seq] or [rows]; int32 except
# label_values (float32).
SEQUENCE_KEYS = ("input_ids", "input_mask", "segment_ids", "tag_ids", "label_mask")
ROW_KEYS = ("task_id", "is_real_example", "label_ids", "label_values", "start_positions",
            "end_positions")
UNION_KEYS = SEQUENCE_KEYS + ROW_KEYS
# Multi-task distillation (`write_soft_targets`): a teacher ensemble's
# probabilities, [rows, soft_width] float32 (zeros past a task's labels),
# and per row 1.0 where the row has them (0.0 for tasks without teachers).
SOFT_TARGETS = "soft_targets"
SOFT_TARGET_WEIGHT = "soft_target_weight"


class TaskListError(ValueError):
    """The task list file is missing, not JSON, or an entry is malformed."""


class TaskSpec(object):
    """One entry of the task list (see the module docstring)."""

    def __init__(self, name, processor, data_dir, head, weight=1.0, options=None,
                 where=None):
        self.name = name
        self.processor = processor
        self.data_dir = data_dir
        self.head = head
        self.weight = float(weight)
        self.options = dict(options or {})
        self.where = where or name

    def __repr__(self):
        return "TaskSpec(name=%r, head=%r, processor=%r, data_dir=%r, weight=%r)" % (
            self.name, self.head, self.processor, self.data_dir, self.weight)


def _entry_error(path, index, name, field, message):
    entry = "entry %d" % index + (" (%r)" % name if isinstance(name, str) else "")
    where = "%s: %s" % (path, entry)
    if field:
        where += ": field %r" % field
    return TaskListError("%s: %s" % (where, message))


def read_task_list(path):
    """The `TaskSpec`s of a task list file, checked (see the module docstring).

    Raises:
      TaskListError: one line naming the file, entry and field.
    """
    if not path:
        raise TaskListError("--task_list_file is required (a JSON list of tasks)")
    if not tf.io.gfile.exists(path):
        raise TaskListError("%s: no such task list file" % path)
    with tf.io.gfile.GFile(path, "rb") as f:
        raw = f.read()
    try:
        entries = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TaskListError("%s: not valid UTF-8" % path) from None
    except ValueError as e:
        raise TaskListError("%s:%d:%d: not valid JSON (%s)"
                            % (path, e.lineno, e.colno, e.msg)) from None
    if not isinstance(entries, list) or not entries:
        raise TaskListError("%s: expected a non-empty JSON list of task objects "
                            '[{"name", "processor", "data_dir", "head", ...}, ...], got %s'
                            % (path, type(entries).__name__ if entries else "an empty one"))
    base = os.path.dirname(os.path.abspath(path))
    specs, seen = [], {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None

        def fail(field, message, name=name, index=index):
            return _entry_error(path, index, name, field, message)

        if not isinstance(entry, dict):
            raise fail(None, "expected a JSON object, got %s" % json.dumps(entry)[:60])
        unknown = sorted(set(entry) - set(FIELDS))
        if unknown:
            raise fail(unknown[0], "unknown field; the fields are %s" % ", ".join(FIELDS))
        for field in REQUIRED:
            if field not in entry:
                raise fail(field, "missing (required: %s)" % ", ".join(REQUIRED))
            if not isinstance(entry[field], str) or not entry[field].strip():
                raise fail(field, "expected a non-empty string, got %s"
                           % json.dumps(entry[field]))
        if not _NAME.match(name):
            raise fail("name", "%r: use letters, digits, '_', '.' and '-' only" % name)
        if name in seen:
            raise fail("name", "%r is already the name of entry %d; names must be unique"
                       % (name, seen[name]))
        seen[name] = index
        head = entry["head"]
        if head not in HEADS:
            raise fail("head", "%r: expected one of %s" % (head, ", ".join(HEADS)))
        weight = entry.get("weight", 1.0)
        if (isinstance(weight, bool) or not isinstance(weight, (int, float))
                or not math.isfinite(weight) or weight <= 0):
            raise fail("weight", "expected a positive number (the loss weight), got %s"
                       % json.dumps(weight))
        options = entry.get("options", {})
        if not isinstance(options, dict):
            raise fail("options", "expected a JSON object of settings, got %s"
                       % json.dumps(options)[:60])
        data_dir = os.path.join(base, os.path.expanduser(entry["data_dir"]))
        if not tf.io.gfile.isdir(data_dir):
            raise fail("data_dir", "%s is not a directory" % data_dir)
        specs.append(TaskSpec(name, entry["processor"], data_dir, head, weight, options,
                              where="%s: entry %d (%r)" % (path, index, name)))
    return specs


def sampling_probabilities(sizes, temperature=1.0):
    """``p_t = n_t^(1/T) / sum_s n_s^(1/T)`` for task sizes `sizes` and temperature T.

    T = 1: proportional to size; T = inf: uniform. Every size must be positive.
    """
    temperature = float(temperature)
    if not temperature > 0:
        raise ValueError("--sampling_temperature must be positive, got %r" % temperature)
    sizes = [float(n) for n in sizes]
    if not sizes or min(sizes) <= 0:
        raise ValueError("every task needs training examples; sizes: %s" % sizes)
    if math.isinf(temperature):
        return [1.0 / len(sizes)] * len(sizes)
    # In log space: large n_t and small T do not overflow.
    logs = [math.log(n) / temperature for n in sizes]
    top = max(logs)
    powers = [math.exp(v - top) for v in logs]
    total = sum(powers)
    return [p / total for p in powers]


# -------------------------------------------------------------------- ranking


def write_ranking_records(examples, max_seq_length, tokenizer, path):
    """`ChoiceExample`s -> one record per query of its C packed candidates (atomic).

    Each candidate is ``[CLS] context [SEP] choice [SEP]`` (Google's packing,
    `data.packing`); ``label_ids`` is the right candidate's index (0 for
    unlabeled examples). Returns the number of candidates per query.
    """
    num_choices = None
    outputs = atomic.TemporaryOutputs([path])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for example in examples:
                if num_choices is None:
                    num_choices = len(example.choices)
                context = tokenizer.tokenize(example.text_a or "")
                ids, masks, segments = [], [], []
                for choice in example.choices:
                    tokens, segment_ids = packing.pack(list(context),
                                                       tokenizer.tokenize(choice),
                                                       max_seq_length)
                    features = packing.pad(tokenizer.convert_tokens_to_ids(tokens),
                                           segment_ids, max_seq_length)
                    ids += features.input_ids
                    masks += features.input_mask
                    segments += features.segment_ids
                writer.write(tf_example.serialize_example({
                    "input_ids": ids, "input_mask": masks, "segment_ids": segments,
                    "label_ids": [int(example.label or 0)], "is_real_example": [1]}))
        outputs.commit()
    finally:
        outputs.discard()
    return num_choices


def ranking_feature_spec(max_seq_length, num_choices):
    flat = [max_seq_length * num_choices]
    return {"input_ids": tf.io.FixedLenFeature(flat, tf.int64),
            "input_mask": tf.io.FixedLenFeature(flat, tf.int64),
            "segment_ids": tf.io.FixedLenFeature(flat, tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}


# ---------------------------------------------------------------- the union


def _rows(features):
    return tf.shape(features["input_ids"])[0]


def to_union(features, task_id, head, max_seq_length, num_choices=None, soft_width=None):
    """One task's parsed batch as a multi-task batch: `UNION_KEYS`, zeros where unused.

    Args:
      features: the task's parsed batch (classifier, ranking, tagging or
        SQuAD training features, int32 after `input_pipeline.decode_batch`).
      task_id: the task's index in the task list.
      head: its head type; for ranking, `num_choices` candidates per query.
      soft_width: with teachers (multi-task distillation), every batch also
        carries `SOFT_TARGETS` padded to this width and `SOFT_TARGET_WEIGHT`
        (zeros for a task whose records hold no soft targets).
    """
    seq = max_seq_length
    if head == RANKING:
        queries = tf.shape(features["input_ids"])[0]
        rows = queries * num_choices
        out = {name: tf.reshape(features[name], [rows, seq])
               for name in ("input_ids", "input_mask", "segment_ids")}
        gold = tf.one_hot(tf.reshape(features["label_ids"], [-1]), num_choices,
                          dtype=tf.int32)
        out["label_ids"] = tf.reshape(gold, [rows])
        out["is_real_example"] = tf.repeat(
            tf.reshape(tf.cast(features["is_real_example"], tf.int32), [-1]), num_choices)
    else:
        out = {name: tf.cast(features[name], tf.int32)
               for name in ("input_ids", "input_mask", "segment_ids")}
        rows = _rows(features)
        if "is_real_example" in features:
            out["is_real_example"] = tf.reshape(
                tf.cast(features["is_real_example"], tf.int32), [rows])
        else:
            out["is_real_example"] = tf.ones([rows], tf.int32)
        if head == CLASSIFICATION:
            out["label_ids"] = tf.reshape(tf.cast(features["label_ids"], tf.int32), [rows])
        elif head == REGRESSION:
            out["label_values"] = tf.reshape(tf.cast(features["label_ids"], tf.float32),
                                             [rows])
        elif head == TAGGING:
            out["tag_ids"] = tf.cast(features["label_ids"], tf.int32)
            out["label_mask"] = tf.cast(features["label_mask"], tf.int32)
        elif head == SPAN_QA:
            for name in ("start_positions", "end_positions"):
                if name in features:   # prediction windows have no targets
                    out[name] = tf.reshape(tf.cast(features[name], tf.int32), [rows])
        else:
            raise ValueError("unknown head %r" % head)
    out["task_id"] = tf.fill([rows], tf.constant(task_id, tf.int32))
    for name in SEQUENCE_KEYS:
        if name not in out:
            out[name] = tf.zeros([rows, seq], tf.int32)
    for name in ROW_KEYS:
        if name not in out:
            out[name] = tf.zeros([rows], tf.float32 if name == "label_values" else tf.int32)
    # Rows are dynamic (tasks batch differently); the sequence length is static.
    union = {name: tf.ensure_shape(out[name], [None, seq] if name in SEQUENCE_KEYS else [None])
             for name in UNION_KEYS}
    if soft_width:
        if SOFT_TARGETS in features:
            soft = tf.cast(features[SOFT_TARGETS], tf.float32)
            soft = tf.pad(soft, [[0, 0], [0, soft_width - soft.shape[-1]]])
            weight = tf.ones([rows], tf.float32)
        else:
            soft = tf.zeros([rows, soft_width], tf.float32)
            weight = tf.zeros([rows], tf.float32)
        union[SOFT_TARGETS] = tf.ensure_shape(soft, [None, soft_width])
        union[SOFT_TARGET_WEIGHT] = tf.ensure_shape(weight, [None])
    return union


def soft_target_spec(spec, num_labels):
    """A classification record spec that also reads `write_soft_targets`' probabilities."""
    return dict(spec, **{SOFT_TARGETS: tf.io.FixedLenFeature([num_labels], tf.float32)})


def write_soft_targets(source, path, probabilities):
    """Copies the records of `source` to `path` (atomic), record i with `SOFT_TARGETS` =
    `probabilities[i]` (a teacher ensemble's class probabilities for that example)."""
    records = [bytes(r) for r in tf.data.TFRecordDataset(source).as_numpy_iterator()]
    if len(records) != len(probabilities):
        raise ValueError("%s holds %d records but %d rows of soft targets were given"
                         % (source, len(records), len(probabilities)))
    outputs = atomic.TemporaryOutputs([path])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for record, row in zip(records, probabilities):
                example = tf.train.Example.FromString(record)
                example.features.feature[SOFT_TARGETS].float_list.value[:] = [
                    float(p) for p in row]
                writer.write(example.SerializeToString())
        outputs.commit()
    finally:
        outputs.discard()


def task_dataset(path, spec, task_id, head, max_seq_length, batch_size, is_training,
                 input_context=None, seed=None, num_choices=None, soft_width=None):
    """A task's TFRecords as multi-task batches (`to_union`).

    Training: shuffled, repeated, whole batches; eval: once, in order, the
    last partial batch kept. `batch_size` is the global batch size (in
    queries for ranking).
    """
    d = input_pipeline.tfrecord_dataset(path, spec, batch_size, is_training,
                                        input_context=input_context, seed=seed,
                                        drop_remainder=is_training)
    return d.map(lambda f: to_union(f, task_id, head, max_seq_length, num_choices,
                                    soft_width=soft_width),
                 num_parallel_calls=tf.data.AUTOTUNE)


def sampling_dataset(datasets, probabilities, seed=None):
    """Batches drawn from `datasets` (one task each, repeated) with `probabilities`.

    Each element is one whole batch of one task: MT-DNN's per-task
    mini-batches. Seeded, the sequence of tasks is reproducible.
    """
    if len(datasets) == 1:
        return datasets[0]
    return tf.data.Dataset.sample_from_datasets(
        list(datasets), weights=[float(p) for p in probabilities], seed=seed,
        stop_on_empty_dataset=False).prefetch(tf.data.AUTOTUNE)
