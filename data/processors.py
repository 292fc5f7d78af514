"""Fine-tuning data: DataProcessors, feature conversion and TFRecords.

google-research/bert's `run_classifier.py` API and semantics, as a library:

* `InputExample(guid, text_a, text_b=None, label=None)`: one raw example.
  `PaddingInputExample`: a fake example that pads the eval/predict sets to a
  whole number of batches (all-zero features, `is_real_example = 0`), so
  every batch has the same static shape on every replica, and metrics
  weighted by `is_real_example` ignore it.
* `InputFeatures(input_ids, input_mask, segment_ids, label_id,
  is_real_example=True)`: one converted example.
* `DataProcessor`: reads a task's train/dev/test files into examples;
  `get_labels()` names the classes. The GLUE/XNLI processors below read the
  file layouts Google's code (and the GLUE download) use.
* `convert_single_example`, `file_based_convert_examples_to_features`,
  `file_based_input_fn_builder`, `_truncate_seq_pair`: Google's conversion,
  with the same `[CLS] a [SEP] b [SEP]` packing, segment ids, padding and
  truncation (the longer of the two token lists loses its last token until
  the pair fits).

TFRecord features (Google's names): `input_ids`, `input_mask`, `segment_ids`
(int64 `[max_seq_length]`), `label_ids` and `is_real_example` (int64 `[1]`).

Beyond Google's script:

* Three task types (`DataProcessor.task_type`): `"classification"` (one
  label per example, softmax), `"multi_label"` (the label is a list of
  labels; `label_ids` is a multi-hot int64 vector of `len(get_labels())`,
  trained with sigmoid cross-entropy), `"regression"` (the label is a float,
  `label_ids` a float32 scalar; `get_labels()` returns None, e.g. STS-B).
* `GenericProcessor`: any tsv/csv/jsonl files, configured by arguments
  (columns by name or index, header or not, labels given or inferred from
  the training file).
* `IdsProcessor`: inputs that already are integer id sequences (events,
  items, ...); no tokenizer, the ids are used as token ids directly.
* Clear errors for bad input: a malformed row names its file, line and the
  layout that was expected (`DataError`); a label outside `get_labels()`
  names its file and line (or example guid) and lists the valid labels.
* `_read_tsv` / `_read_csv` return rows that are plain lists (so Google-style
  code `line[3]` works unchanged) and also carry `.path` / `.line_number`
  (and `.location`, "file:line"), for such messages in user processors too.
* Processors by name (`get_processor_class("mrpc")`) and user processors in
  the user's own file, without editing this project:
  `get_processor_class(processor="path/to/my_task.py:MyProcessor")`.
* TFRecords are written under a temporary name and renamed when complete.
"""

import collections
import csv
import importlib
import importlib.util
import io
import json
import os
import sys
import traceback

from absl import logging
import tensorflow as tf

from data import corpus as corpus_lib
from data import example_proto
from data import input_pipeline
from data import tokenization

__all__ = [
    "CLASSIFICATION", "MULTI_LABEL", "REGRESSION", "TASK_TYPES",
    "DataError", "ProcessorError", "Row", "Record",
    "InputExample", "IdsInputExample", "PaddingInputExample", "InputFeatures",
    "DataProcessor", "GlueTsvProcessor", "XnliProcessor", "MnliProcessor", "MnliMismatchedProcessor",
    "MrpcProcessor", "ColaProcessor", "Sst2Processor", "QqpProcessor", "StsbProcessor",
    "GenericProcessor", "IdsProcessor",
    "PROCESSORS", "register_processor", "load_processor_class", "get_processor_class",
    "convert_single_example", "convert_examples_to_features",
    "file_based_convert_examples_to_features", "file_based_input_fn_builder",
    "classifier_feature_spec", "infer_task_type", "pad_examples",
]

CLASSIFICATION = "classification"
MULTI_LABEL = "multi_label"
REGRESSION = "regression"
TASK_TYPES = (CLASSIFICATION, MULTI_LABEL, REGRESSION)

# Maximum csv field size: sentences can be long (csv's default is 128 KiB).
csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))


class DataError(ValueError):
    """A data file is missing, malformed, or holds a label outside the label list."""


class ProcessorError(ValueError):
    """A processor name or `file.py:Class` spec cannot be resolved."""


# ----------------------------------------------------------------- records


class Row(list):
    """A row of a delimited file: a list of fields that knows where it came from.

    Attributes:
      path: the file it was read from.
      line_number: 1-based line of the file where the row starts.
    """

    def __init__(self, values, path, line_number):
        super().__init__(values)
        self.path = path
        self.line_number = line_number

    @property
    def location(self):
        """``"path:line"``, for error messages."""
        return "%s:%d" % (self.path, self.line_number)


class Record(dict):
    """A JSON object read from a `.jsonl` line, with `.path` / `.line_number`."""

    def __init__(self, values, path, line_number):
        super().__init__(values)
        self.path = path
        self.line_number = line_number

    @property
    def location(self):
        return "%s:%d" % (self.path, self.line_number)


class InputExample(object):
    """A single training/dev/test example for sequence (pair) classification.

    Args:
      guid: unique id of the example (used in messages and logs).
      text_a: the first sequence (untokenized text).
      text_b: the second sequence, for sentence-pair tasks; None otherwise.
      label: a label of `get_labels()` (classification); a list of such
        labels (multi-label); a float or a string holding one (regression).
        None for unlabeled (test) examples: they get label id 0 (or an
        all-zero vector / 0.0).
      source: optional ``"file:line"`` the example was read from, named in
        error messages.
    """

    def __init__(self, guid, text_a, text_b=None, label=None, source=None):
        self.guid = guid
        self.text_a = text_a
        self.text_b = text_b
        self.label = label
        self.source = source

    def describe(self):
        """``"example <guid> (file:line)"``, for error messages."""
        where = " (%s)" % self.source if self.source else ""
        return "example %s%s" % (self.guid, where)

    def __repr__(self):
        return "InputExample(guid=%r, text_a=%r, text_b=%r, label=%r)" % (
            self.guid, self.text_a, self.text_b, self.label)


class IdsInputExample(InputExample):
    """An example whose sequences are already lists of token ids.

    Converted without a tokenizer: `cls_id` (if not None) is prepended,
    `sep_id` (if not None) ends each sequence, and segment ids are 0 for the
    first sequence and 1 for the second, as for text.

    Args:
      ids_a, ids_b: lists of ints (ids_b may be None).
      cls_id, sep_id: ids of the special tokens, or None for none.
      keep: when too long, keep the "first" ids (Google's truncation, from
        the end) or the "last" ones (truncate from the start; e.g. the most
        recent events of a history).
    """

    def __init__(self, guid, ids_a, ids_b=None, label=None, cls_id=None, sep_id=None,
                 keep="first", source=None):
        super().__init__(guid, ids_a, ids_b, label, source=source)
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.keep = keep


class PaddingInputExample(object):
    """A fake example, so the number of examples is a multiple of the batch size.

    Google's TPU code needed static batch shapes; padding does the same here
    for every strategy: all replicas get full batches, and because padding
    examples have `is_real_example = 0`, losses and metrics weighted by it
    are exactly those of the real examples. Padding examples are always
    appended at the end, so predictions for the real examples come first.
    """


class InputFeatures(object):
    """A single set of features of data (the TFRecord features of one example).

    `label_id` is an int (classification), a list of 0/1 ints (multi-label)
    or a float (regression).
    """

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


# -------------------------------------------------------------- processors


def _open_text(path):
    if not tf.io.gfile.exists(path):
        raise DataError("Data file %s does not exist." % path)
    return corpus_lib.open_file(path, "rb")


def _decode(raw, path, line_number):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError("%s:%d: not valid UTF-8 (%s)." % (path, line_number, e)) from e


def _read_delimited(path, delimiter, quotechar):
    """Rows of a delimited file, each a `Row` with the line it starts on."""
    with _open_text(path) as f:
        data = f.read()
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line = data[:e.start].count(b"\n") + 1
            raise DataError("%s:%d: not valid UTF-8 (%s)." % (path, line, e)) from e
    else:
        text = data
    kwargs = {"delimiter": delimiter}
    if quotechar is None:
        kwargs["quoting"] = csv.QUOTE_NONE
    else:
        kwargs["quotechar"] = quotechar
    reader = csv.reader(io.StringIO(text, newline=""), **kwargs)
    rows = []
    start = 1
    try:
        for values in reader:
            if values:  # blank lines are skipped
                rows.append(Row(values, path, start))
            start = reader.line_num + 1
    except csv.Error as e:
        raise DataError("%s:%d: cannot parse the row: %s" % (path, start, e)) from e
    return rows


class DataProcessor(object):
    """Base class for data converters of sequence classification data sets.

    Subclasses implement `get_train_examples(data_dir)`,
    `get_dev_examples(data_dir)`, `get_test_examples(data_dir)` (each
    returning a list of `InputExample`) and `get_labels()`.

    Class attributes a subclass may override:
      task_type: "classification" (default), "multi_label" or "regression".
      eval_metrics: metrics `run_classifier.py --do_eval` reports (as
        `eval_<name>`, besides eval_loss); any of "accuracy", "f1", "mcc",
        "pearson", "spearman", "micro_f1", "macro_f1" (see
        `modeling.classifier.compute_metrics`).
      needs_tokenizer: False when examples are `IdsInputExample`s.

    Helpers for subclasses: `_read_tsv`, `_read_csv`, `_read_jsonl` (rows
    that know their file and line), `_field(row, index, layout)` (a column,
    or a `DataError` naming file, line and the expected layout) and
    `_check_label(label, row)`.
    """

    task_type = CLASSIFICATION
    eval_metrics = ("accuracy",)
    needs_tokenizer = True

    def get_train_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the train set."""
        # Abstract, as in Google's API: every task's processor defines it.
        raise NotImplementedError("%s must define get_train_examples()" % type(self).__name__)

    def get_dev_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the dev set."""
        # Abstract, as in Google's API: every task's processor defines it.
        raise NotImplementedError("%s must define get_dev_examples()" % type(self).__name__)

    def get_test_examples(self, data_dir):
        """Gets a collection of `InputExample`s for prediction."""
        # Abstract, as in Google's API: every task's processor defines it.
        raise NotImplementedError("%s must define get_test_examples()" % type(self).__name__)

    def get_labels(self):
        """Gets the list of labels for this data set (None for regression)."""
        # Abstract, as in Google's API: every task's processor defines it.
        raise NotImplementedError("%s must define get_labels()" % type(self).__name__)

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """Reads a tab separated value file into a list of `Row`s.

        As in Google's code, quotes are ordinary characters unless
        `quotechar` is given.
        """
        return _read_delimited(input_file, "\t", quotechar)

    @classmethod
    def _read_csv(cls, input_file, quotechar='"', delimiter=","):
        """Reads a comma separated value file (RFC 4180 quoting) into `Row`s."""
        return _read_delimited(input_file, delimiter, quotechar)

    @classmethod
    def _read_jsonl(cls, input_file):
        """Reads a file of one JSON object per line into `Record`s (blank lines skipped)."""
        records = []
        with _open_text(input_file) as f:
            for line_number, raw in enumerate(f, 1):
                line = _decode(raw, input_file, line_number).strip()
                if line_number == 1:
                    line = line.lstrip("\ufeff")
                if not line:
                    continue
                try:
                    value = json.loads(line)
                except ValueError as e:
                    raise DataError("%s:%d: not valid JSON: %s" % (input_file, line_number, e)) from e
                if not isinstance(value, dict):
                    raise DataError("%s:%d: expected a JSON object per line, got %s."
                                    % (input_file, line_number, type(value).__name__))
                records.append(Record(value, input_file, line_number))
        return records

    @staticmethod
    def _field(row, index, layout):
        """`row[index]`, or a DataError naming the file, line and expected layout."""
        try:
            return row[index]
        except (IndexError, KeyError):
            where = getattr(row, "location", "<row>")
            if isinstance(row, dict):
                raise DataError("%s: the JSON object has no key %r (expected %s); keys: %s."
                                % (where, index, layout, ", ".join(sorted(row)))) from None
            raise DataError("%s: expected %s, but the row has %d column(s)."
                            % (where, layout, len(row))) from None

    def _check_label(self, label, row_or_source):
        """Raises DataError if `label` is not one of `get_labels()`."""
        labels = self.get_labels()
        if labels and label not in labels:
            where = getattr(row_or_source, "location", row_or_source)
            raise DataError("%s: label %r is not one of the labels of this task: %s."
                            % (where, label, ", ".join(repr(l) for l in labels)))
        return label


def _location(row):
    return getattr(row, "location", None)


class XnliProcessor(DataProcessor):
    """XNLI: MultiNLI training data machine-translated, XNLI dev/test (Google's layout).

    Files (as Google's code reads them):
      train: ``{data_dir}/multinli/multinli.train.{language}.tsv`` with a
        header; columns premise, hypo, label (``contradictory`` is read as
        ``contradiction``).
      dev / test: ``{data_dir}/xnli.dev.tsv`` / ``xnli.test.tsv`` with a
        header; column 0 is the language (rows of other languages are
        skipped), 1 the label, 6 sentence1, 7 sentence2.
    """

    TRAIN_LAYOUT = "3 columns: premise, hypo, label"
    EVAL_LAYOUT = "at least 8 columns: language, gold_label, ..., sentence1 (7th), sentence2 (8th)"

    def __init__(self, language="zh"):
        self.language = language

    def get_train_examples(self, data_dir):
        path = os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language)
        examples = []
        for i, line in enumerate(self._read_tsv(path)):
            if i == 0:
                continue
            text_a = self._field(line, 0, self.TRAIN_LAYOUT)
            text_b = self._field(line, 1, self.TRAIN_LAYOUT)
            label = self._field(line, 2, self.TRAIN_LAYOUT)
            if label == "contradictory":
                label = "contradiction"
            self._check_label(label, line)
            examples.append(InputExample("train-%d" % i, text_a, text_b, label,
                                         source=_location(line)))
        return examples

    def _eval_examples(self, path, set_type):
        examples = []
        for i, line in enumerate(self._read_tsv(path)):
            if i == 0:
                continue
            if self._field(line, 0, self.EVAL_LAYOUT) != self.language:
                continue
            label = self._field(line, 1, self.EVAL_LAYOUT)
            text_a = self._field(line, 6, self.EVAL_LAYOUT)
            text_b = self._field(line, 7, self.EVAL_LAYOUT)
            self._check_label(label, line)
            examples.append(InputExample("%s-%d" % (set_type, i), text_a, text_b, label,
                                         source=_location(line)))
        return examples

    def get_dev_examples(self, data_dir):
        return self._eval_examples(os.path.join(data_dir, "xnli.dev.tsv"), "dev")

    def get_test_examples(self, data_dir):
        return self._eval_examples(os.path.join(data_dir, "xnli.test.tsv"), "test")

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]


class GlueTsvProcessor(DataProcessor):
    """A task whose train/dev/test sets are three tsv files in `data_dir`.

    Subclasses name the files (`TRAIN_FILE`, `DEV_FILE`, `TEST_FILE`), the
    classes (`LABELS`; None for regression) and define
    `_create_examples(lines, set_type)`, as Google's GLUE processors do.
    """

    TRAIN_FILE = "train.tsv"
    DEV_FILE = "dev.tsv"
    TEST_FILE = "test.tsv"
    LABELS = ("0", "1")

    def _examples(self, data_dir, filename, set_type):
        return self._create_examples(self._read_tsv(os.path.join(data_dir, filename)), set_type)

    def get_train_examples(self, data_dir):
        return self._examples(data_dir, self.TRAIN_FILE, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(data_dir, self.DEV_FILE, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(data_dir, self.TEST_FILE, "test")

    def get_labels(self):
        return None if self.LABELS is None else list(self.LABELS)

    def _create_examples(self, lines, set_type):
        raise NotImplementedError("%s must define _create_examples()" % type(self).__name__)


class MnliProcessor(GlueTsvProcessor):
    """MultiNLI (GLUE): train.tsv, dev_matched.tsv, test_matched.tsv.

    Header line; column 0 is the pair id (the guid), 8 sentence1,
    9 sentence2, the last column the gold label (test: unlabeled, read as
    "contradiction" as Google does).
    """

    LAYOUT = ("at least 11 columns: index, ..., sentence1 (9th), sentence2 (10th), "
              "label1, ..., gold_label (last)")
    DEV_FILE = "dev_matched.tsv"
    TEST_FILE = "test_matched.tsv"
    LABELS = ("contradiction", "entailment", "neutral")

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, self._field(line, 0, self.LAYOUT))
            text_a = self._field(line, 8, self.LAYOUT)
            text_b = self._field(line, 9, self.LAYOUT)
            if set_type == "test":
                label = "contradiction"
            else:
                self._field(line, 10, self.LAYOUT)
                label = self._check_label(line[-1], line)
            examples.append(InputExample(guid, text_a, text_b, label, source=_location(line)))
        return examples


class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI mismatched: dev_mismatched.tsv, test_mismatched.tsv."""

    DEV_FILE = "dev_mismatched.tsv"
    TEST_FILE = "test_mismatched.tsv"


class MrpcProcessor(GlueTsvProcessor):
    """MRPC (GLUE): train.tsv, dev.tsv, test.tsv with a header.

    Columns: Quality (the label, "0"/"1"), #1 ID, #2 ID, #1 String,
    #2 String. The test file's first column is an index (read as label "0",
    as Google does). Reports F1 besides accuracy.
    """

    LAYOUT = "5 columns: Quality, #1 ID, #2 ID, #1 String, #2 String"
    eval_metrics = ("accuracy", "f1")

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            text_a = self._field(line, 3, self.LAYOUT)
            text_b = self._field(line, 4, self.LAYOUT)
            if set_type == "test":
                label = "0"
            else:
                label = self._check_label(line[0], line)
            examples.append(InputExample("%s-%s" % (set_type, i), text_a, text_b, label,
                                         source=_location(line)))
        return examples


class ColaProcessor(GlueTsvProcessor):
    """CoLA (GLUE): train.tsv and dev.tsv without a header, test.tsv with one.

    Train/dev columns: source, label ("0"/"1"), original mark, sentence.
    Test columns: index, sentence. Reports Matthews correlation.
    """

    LAYOUT = "4 columns: source, label, original judgement, sentence"
    TEST_LAYOUT = "2 columns: index, sentence"
    eval_metrics = ("accuracy", "mcc")

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if set_type == "test" and i == 0:
                continue
            guid = "%s-%s" % (set_type, i)
            if set_type == "test":
                text_a = self._field(line, 1, self.TEST_LAYOUT)
                label = "0"
            else:
                text_a = self._field(line, 3, self.LAYOUT)
                label = self._check_label(line[1], line)
            examples.append(InputExample(guid, text_a, None, label, source=_location(line)))
        return examples


class Sst2Processor(GlueTsvProcessor):
    """SST-2 (GLUE): header; train/dev columns sentence, label; test index, sentence."""

    LAYOUT = "2 columns: sentence, label"
    TEST_LAYOUT = "2 columns: index, sentence"

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            if set_type == "test":
                guid = "test-%s" % self._field(line, 0, self.TEST_LAYOUT)
                text_a = self._field(line, 1, self.TEST_LAYOUT)
                label = "0"
            else:
                guid = "%s-%d" % (set_type, i)
                text_a = self._field(line, 0, self.LAYOUT)
                label = self._check_label(self._field(line, 1, self.LAYOUT), line)
            examples.append(InputExample(guid, text_a, None, label, source=_location(line)))
        return examples


class QqpProcessor(GlueTsvProcessor):
    """QQP (GLUE): header; train/dev: id, qid1, qid2, question1, question2,
    is_duplicate; test: id, question1, question2. Reports F1 besides accuracy.
    """

    LAYOUT = "6 columns: id, qid1, qid2, question1, question2, is_duplicate"
    TEST_LAYOUT = "3 columns: id, question1, question2"
    eval_metrics = ("accuracy", "f1")

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, self._field(line, 0, self.LAYOUT))
            if set_type == "test":
                text_a = self._field(line, 1, self.TEST_LAYOUT)
                text_b = self._field(line, 2, self.TEST_LAYOUT)
                label = "0"
            else:
                text_a = self._field(line, 3, self.LAYOUT)
                text_b = self._field(line, 4, self.LAYOUT)
                label = self._check_label(self._field(line, 5, self.LAYOUT), line)
            examples.append(InputExample(guid, text_a, text_b, label, source=_location(line)))
        return examples


class StsbProcessor(GlueTsvProcessor):
    """STS-B (GLUE), a regression task: the label is a similarity score in [0, 5].

    Header; columns index, genre, filename, year, old_index, source1,
    source2, sentence1 (8th), sentence2 (9th), score (last; absent in the
    test file, read as 0.0). `get_labels()` returns None: there are no
    classes, the model has a single output trained with mean squared error.
    Reports Pearson and Spearman correlations.
    """

    LAYOUT = "10 columns: index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score"
    TEST_LAYOUT = "9 columns: index, genre, filename, year, old_index, source1, source2, sentence1, sentence2"
    task_type = REGRESSION
    eval_metrics = ("pearson", "spearman")
    LABELS = None

    def _create_examples(self, lines, set_type):
        examples = []
        layout = self.TEST_LAYOUT if set_type == "test" else self.LAYOUT
        for i, line in enumerate(lines):
            if i == 0:
                continue
            guid = "%s-%s" % (set_type, self._field(line, 0, layout))
            text_a = self._field(line, 7, layout)
            text_b = self._field(line, 8, layout)
            label = 0.0 if set_type == "test" else _parse_score(self._field(line, 9, layout), line)
            examples.append(InputExample(guid, text_a, text_b, label, source=_location(line)))
        return examples


def _parse_score(value, row):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DataError("%s: the label %r is not a number (this is a regression task)."
                        % (getattr(row, "location", row), value)) from None


def _parse_column(column):
    """A column given as an int, a string of digits (an index) or a name."""
    if column is None or isinstance(column, int):
        return column
    column = str(column).strip()
    if not column:
        return None
    if column.isdigit():
        return int(column)
    return column


def _sorted_labels(labels):
    """Numeric order when every label is an integer, else string order."""
    labels = list(labels)
    try:
        return sorted(labels, key=lambda label: (int(label), label))
    except ValueError:
        return sorted(labels)


class GenericProcessor(DataProcessor):
    """Any classification/regression data in tsv, csv or jsonl, configured by arguments.

    Args:
      data_dir: directory of the files (needed to infer labels from the
        training file).
      file_format: "tsv", "csv" or "jsonl".
      text_a_column, text_b_column, label_column, guid_column: a column index
        (int, or a string of digits) or a column name (header name for
        tsv/csv, key for jsonl). `text_b_column` None: single sentences.
        `guid_column` None: guids are "<set>-<line>".
      has_header: tsv/csv files start with a header row (required to name
        columns by name).
      labels: the label list; None infers it from the training file (its
        distinct labels, in numeric order if all are integers, else sorted).
      task_type: "classification", "multi_label" (the label field holds
        several labels, separated by `label_separator`, or a JSON list in
        jsonl) or "regression" (a float label; `get_labels()` is None).
      label_separator: separator of the labels of a multi-label field.
      train_file, dev_file, test_file: file names inside `data_dir`;
        default ``train.<format>``, ``dev.<format>``, ``test.<format>``.
      quotechar: tsv quoting character (default: none, as Google's
        `_read_tsv`); csv always uses `"`.
      eval_metrics: metrics to report (default: accuracy; plus F1 of the
        second label for two classes; Pearson/Spearman for regression;
        accuracy and micro/macro F1 for multi-label).

    Test files may omit the label column (their labels are not used).
    """

    def __init__(self, data_dir=None, file_format="tsv", text_a_column=0, text_b_column=None,
                 label_column=1, guid_column=None, has_header=True, labels=None,
                 task_type=CLASSIFICATION, label_separator=",", train_file=None,
                 dev_file=None, test_file=None, quotechar=None, eval_metrics=None):
        if file_format not in ("tsv", "csv", "jsonl"):
            raise ProcessorError("file_format must be tsv, csv or jsonl, not %r." % file_format)
        if task_type not in TASK_TYPES:
            raise ProcessorError("task_type must be one of %s, not %r."
                                 % (", ".join(TASK_TYPES), task_type))
        self.data_dir = data_dir
        self.file_format = file_format
        self.text_a_column = _parse_column(text_a_column)
        self.text_b_column = _parse_column(text_b_column)
        self.label_column = _parse_column(label_column)
        self.guid_column = _parse_column(guid_column)
        if self.text_a_column is None:
            raise ProcessorError("GenericProcessor needs a text_a column.")
        if self.label_column is None:
            raise ProcessorError("GenericProcessor needs a label column.")
        self.has_header = has_header and file_format != "jsonl"
        named = [c for c in (self.text_a_column, self.text_b_column, self.label_column,
                             self.guid_column) if isinstance(c, str)]
        if named and file_format != "jsonl" and not has_header:
            raise ProcessorError("Columns named %s need a header row (has_header=True), or "
                                 "give column indices." % ", ".join(map(repr, named)))
        self.task_type = task_type
        self.label_separator = label_separator
        self.files = {"train": train_file or "train." + file_format,
                      "dev": dev_file or "dev." + file_format,
                      "test": test_file or "test." + file_format}
        self.quotechar = quotechar
        if labels is not None:
            labels = [str(label) for label in labels]
            if task_type == REGRESSION:
                raise ProcessorError("A regression task has no label list.")
            if len(set(labels)) != len(labels):
                raise ProcessorError("The label list %s has duplicates." % labels)
        self._labels = labels
        self._auto_metrics = eval_metrics is None
        if eval_metrics is None:
            if task_type == REGRESSION:
                eval_metrics = ("pearson", "spearman")
            elif task_type == MULTI_LABEL:
                eval_metrics = ("accuracy", "micro_f1", "macro_f1")
            elif labels is not None and len(labels) == 2:
                eval_metrics = ("accuracy", "f1")
            else:
                eval_metrics = ("accuracy",)
        self.eval_metrics = tuple(eval_metrics)

    # Reading.

    def _path(self, data_dir, set_type):
        return os.path.join(data_dir, self.files[set_type])

    def _read_records(self, path):
        """(records, column resolver) for the configured format."""
        if self.file_format == "jsonl":
            return self._read_jsonl(path), None
        if self.file_format == "csv":
            rows = self._read_csv(path)
        else:
            rows = self._read_tsv(path, quotechar=self.quotechar)
        header = None
        if self.has_header:
            if not rows:
                raise DataError("%s is empty; expected a header row." % path)
            header = {name.strip(): index for index, name in enumerate(rows[0])}
            rows = rows[1:]
        return rows, header

    def _resolve(self, column, header, path, optional=False):
        """The index (or jsonl key) of `column`."""
        if column is None or isinstance(column, int) or header is None:
            return column
        if column not in header:
            if optional:
                return None
            raise DataError("%s: the header has no column %r; its columns are: %s."
                            % (path, column, ", ".join(header)))
        return header[column]

    def _describe_layout(self):
        parts = ["text_a=%r" % (self.text_a_column,)]
        if self.text_b_column is not None:
            parts.append("text_b=%r" % (self.text_b_column,))
        parts.append("label=%r" % (self.label_column,))
        kind = {"tsv": "tab-separated columns", "csv": "comma-separated columns",
                "jsonl": "keys"}[self.file_format]
        return "%s %s" % (kind, ", ".join(parts))

    def _parse_label(self, value, record, check):
        where = record.location
        if self.task_type == REGRESSION:
            return _parse_score(value, record)
        if self.task_type == MULTI_LABEL:
            if isinstance(value, (list, tuple)):
                values = [str(v) for v in value]
            else:
                values = [v.strip() for v in str(value).split(self.label_separator)]
                values = [v for v in values if v]
            if check:
                for v in values:
                    self._check_label(v, where)
            return values
        if isinstance(value, (list, dict)):
            raise DataError("%s: expected a single label, got %r." % (where, value))
        label = str(value).strip() if not isinstance(value, str) else value.strip()
        if check:
            self._check_label(label, where)
        return label

    def _create_examples(self, data_dir, set_type, check_labels=True):
        path = self._path(data_dir, set_type)
        check_labels = check_labels and set_type != "test"
        records, header = self._read_records(path)
        layout = self._describe_layout()
        a = self._resolve(self.text_a_column, header, path)
        b = self._resolve(self.text_b_column, header, path)
        guid_col = self._resolve(self.guid_column, header, path)
        label_col = self._resolve(self.label_column, header, path, optional=(set_type == "test"))
        examples = []
        for record in records:
            if not isinstance(record, dict) and not any(field.strip() for field in record):
                continue  # blank line
            text_a = self._field(record, a, layout)
            text_b = self._field(record, b, layout) if b is not None else None
            if guid_col is not None:
                guid = "%s-%s" % (set_type, self._field(record, guid_col, layout))
            else:
                guid = "%s-%d" % (set_type, record.line_number)
            label = None
            if label_col is not None:
                present = (label_col in record) if isinstance(record, dict) else (
                    label_col < len(record))
                if present:
                    label = self._parse_label(record[label_col], record, check_labels)
                elif set_type != "test":
                    self._field(record, label_col, layout)
            if text_a is None:
                raise DataError("%s: text_a (%r) is empty (null)." % (record.location,
                                                                       self.text_a_column))
            if not isinstance(text_a, str):
                text_a = str(text_a)
            if text_b is not None and not isinstance(text_b, str):
                text_b = str(text_b)
            examples.append(InputExample(guid, text_a, text_b, label, source=record.location))
        return examples

    def get_train_examples(self, data_dir):
        return self._create_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(data_dir, "test")

    def get_labels(self):
        if self.task_type == REGRESSION:
            return None
        if self._labels is None:
            if not self.data_dir:
                raise ProcessorError("GenericProcessor needs `labels`, or `data_dir` to infer "
                                     "them from the training file.")
            found = collections.OrderedDict()
            for example in self._create_examples(self.data_dir, "train", check_labels=False):
                values = example.label if isinstance(example.label, list) else [example.label]
                for value in values:
                    if value is not None:
                        found[value] = True
            self._labels = _sorted_labels(found)
            if not self._labels:
                raise DataError("No labels found in %s." % self._path(self.data_dir, "train"))
            if self._auto_metrics and len(self._labels) == 2 and \
                    self.task_type == CLASSIFICATION:
                self.eval_metrics = ("accuracy", "f1")
            logging.info("Labels inferred from %s: %s", self._path(self.data_dir, "train"),
                         self._labels)
        return list(self._labels)


class IdsProcessor(DataProcessor):
    """Inputs that already are integer id sequences; no tokenizer.

    For example event histories: a line of 100 space-separated event ids
    whose label is the next event id. File format (``train.tsv``,
    ``dev.tsv``, ``test.tsv`` in `data_dir` unless named otherwise), one
    example a line:

        <ids>\\t<label>                  e.g. ``17 4 99 23\\t42``
        <ids_a>\\t<ids_b>\\t<label>        a pair of sequences
        <ids>                           with label_from_last_id=True: the
                                        last id is the label ("predict the
                                        next id from the ones before")

    The ids (plus `id_offset`) are used directly as `input_ids`, so they
    must be below the model's vocab_size (checked when `vocab_size` is
    given). Test lines of single sequences may omit the label column (a
    2-column test line is read as ids and label, so test pairs keep a
    label column, with any value).

    Args:
      data_dir: directory of the files (to infer labels from train).
      labels: the label list (strings); else `num_labels` gives labels
        "0".."num_labels-1"; else they are inferred from the training file.
      num_labels: see `labels` (e.g. the number of distinct events, when the
        label is the next event id).
      label_from_last_id: the label is the last id of each line.
      cls_id, sep_id: token ids put before / after each sequence, or None.
      id_offset: added to every input id (e.g. to keep ids 0..k for
        [PAD]/[CLS]/[SEP]); labels are not shifted.
      keep: "first" or "last": which ids survive truncation.
      vocab_size: if given, ids outside [0, vocab_size) are refused.
      has_header: skip the first line of each file.
      train_file, dev_file, test_file: file names inside `data_dir`.
    """

    needs_tokenizer = False

    def __init__(self, data_dir=None, labels=None, num_labels=None, label_from_last_id=False,
                 cls_id=None, sep_id=None, id_offset=0, keep="first", vocab_size=None,
                 has_header=False, train_file="train.tsv", dev_file="dev.tsv",
                 test_file="test.tsv", eval_metrics=None):
        if keep not in ("first", "last"):
            raise ProcessorError("keep must be 'first' or 'last', not %r." % keep)
        self.data_dir = data_dir
        if labels is None and num_labels is not None:
            labels = [str(i) for i in range(int(num_labels))]
        self._labels = [str(label) for label in labels] if labels is not None else None
        self.label_from_last_id = label_from_last_id
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.id_offset = int(id_offset or 0)
        self.keep = keep
        self.vocab_size = vocab_size
        self.has_header = has_header
        self.files = {"train": train_file, "dev": dev_file, "test": test_file}
        for name, value in (("cls_id", cls_id), ("sep_id", sep_id)):
            if value is not None and vocab_size is not None and not 0 <= value < vocab_size:
                raise ProcessorError("%s=%d is outside the vocabulary [0, %d)."
                                     % (name, value, vocab_size))
        if eval_metrics is not None:
            self.eval_metrics = tuple(eval_metrics)

    def _parse_ids(self, text, row):
        try:
            ids = [int(token) + self.id_offset for token in text.split()]
        except ValueError:
            bad = next(t for t in text.split() if not _is_int(t))
            raise DataError("%s: %r is not an integer id (expected space-separated ids)."
                            % (row.location, bad)) from None
        if self.vocab_size is not None:
            for token in ids:
                if not 0 <= token < self.vocab_size:
                    raise DataError("%s: id %d (after id_offset %d) is outside the model's "
                                    "vocabulary [0, %d)." % (row.location, token,
                                                             self.id_offset, self.vocab_size))
        return ids

    def _create_examples(self, data_dir, set_type, check_labels=True):
        path = os.path.join(data_dir, self.files[set_type])
        rows = self._read_tsv(path)
        if self.has_header:
            rows = rows[1:]
        if self.label_from_last_id:
            layout = "one column of space-separated ids (the last one is the label)"
        else:
            layout = ("2 tab-separated columns (ids, label) or 3 (ids_a, ids_b, label)"
                      if set_type != "test" else
                      "1-3 tab-separated columns (ids[, ids_b][, label])")
        examples = []
        for row in rows:
            if not any(field.strip() for field in row):
                continue
            ids_b = None
            label = None
            if self.label_from_last_id:
                if len(row) != 1:
                    raise DataError("%s: expected %s, but the row has %d columns."
                                    % (row.location, layout, len(row)))
                tokens = row[0].split()
                if len(tokens) < 2:
                    raise DataError("%s: expected at least 2 ids (inputs and the label), got %d."
                                    % (row.location, len(tokens)))
                ids_a = self._parse_ids(" ".join(tokens[:-1]), row)
                label = tokens[-1]
            elif set_type == "test" and len(row) == 1:
                ids_a = self._parse_ids(row[0], row)
            elif len(row) in (2, 3):
                ids_a = self._parse_ids(row[0], row)
                if len(row) == 3:
                    ids_b = self._parse_ids(row[1], row)
                label = row[-1].strip()
            else:
                raise DataError("%s: expected %s, but the row has %d columns."
                                % (row.location, layout, len(row)))
            if label is not None and check_labels and set_type != "test":
                self._check_label(label, row)
            examples.append(IdsInputExample(
                "%s-%d" % (set_type, row.line_number), ids_a, ids_b, label,
                cls_id=self.cls_id, sep_id=self.sep_id, keep=self.keep, source=row.location))
        return examples

    def get_train_examples(self, data_dir):
        return self._create_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(data_dir, "test")

    def get_labels(self):
        if self._labels is None:
            if not self.data_dir:
                raise ProcessorError("IdsProcessor needs `labels` or `num_labels`, or "
                                     "`data_dir` to infer the labels from the training file.")
            found = {example.label for example in
                     self._create_examples(self.data_dir, "train", check_labels=False)}
            found.discard(None)
            self._labels = _sorted_labels(found)
            if not self._labels:
                raise DataError("No labels found in %s."
                                % os.path.join(self.data_dir, self.files["train"]))
        return list(self._labels)


def _is_int(text):
    try:
        int(text)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------- registry

PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli_mismatched": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst2": Sst2Processor,
    "qqp": QqpProcessor,
    "stsb": StsbProcessor,
    "generic": GenericProcessor,
    "ids": IdsProcessor,
}
# GLUE's folder names.
_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-mm": "mnli_mismatched"}


def register_processor(name, processor_class):
    """Makes `processor_class` available as `--task_name=<name>`."""
    PROCESSORS[name.lower()] = processor_class


def _is_processor_class(value):
    return isinstance(value, type) and all(
        callable(getattr(value, method, None))
        for method in ("get_train_examples", "get_dev_examples", "get_test_examples",
                       "get_labels"))


def load_processor_class(spec):
    """Loads a processor class from ``path/to/file.py:ClassName`` or ``package.module:ClassName``.

    A file is loaded with `importlib.util.spec_from_file_location`, so it can
    live anywhere; it may import this project (``from data import
    processors``). The class needs the DataProcessor methods; subclassing
    `DataProcessor` gives it the defaults (`task_type`, `eval_metrics`).

    Raises:
      ProcessorError: the spec is malformed, the file or class does not
        exist, or the file fails to import (with the file and line).
    """
    if ":" not in spec:
        raise ProcessorError("--processor=%r: expected path/to/file.py:ClassName "
                             "(or package.module:ClassName)." % spec)
    location, _, class_name = spec.rpartition(":")
    if not location or not class_name:
        raise ProcessorError("--processor=%r: expected path/to/file.py:ClassName." % spec)
    is_file = location.endswith(".py") or os.sep in location or "/" in location
    try:
        if is_file:
            path = os.path.abspath(os.path.expanduser(location))
            if not os.path.isfile(path):
                raise ProcessorError("Processor file %s does not exist." % location)
            module_name = "user_processor_%s_%x" % (
                os.path.splitext(os.path.basename(path))[0], abs(hash(path)))
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
        else:
            module = importlib.import_module(location)
    except ProcessorError:
        raise
    except Exception as e:  # pylint: disable=broad-except
        where = location
        if isinstance(e, SyntaxError) and e.lineno:
            where = "%s:%d" % (e.filename or location, e.lineno)
        else:
            frames = traceback.extract_tb(e.__traceback__)
            own = [f for f in frames if is_file and os.path.abspath(f.filename) == path]
            frames = own or [f for f in frames if not f.filename.startswith("<")]
            if frames:
                where = "%s:%d" % (frames[-1].filename, frames[-1].lineno)
        raise ProcessorError("Could not load the processor module %s (%s): %s: %s"
                             % (location, where, type(e).__name__, e)) from e
    value = getattr(module, class_name, None)
    if value is None:
        candidates = sorted(name for name, obj in vars(module).items()
                            if _is_processor_class(obj) and obj.__module__ == module.__name__)
        raise ProcessorError("%s defines no %r; processor classes defined there: %s."
                             % (location, class_name, ", ".join(candidates) or "none"))
    if not _is_processor_class(value):
        raise ProcessorError("%s:%s is not a DataProcessor (it needs get_train_examples, "
                             "get_dev_examples, get_test_examples and get_labels)."
                             % (location, class_name))
    return value


def get_processor_class(task_name=None, processor=None):
    """The processor class for `--processor=file.py:Class` or else `--task_name`."""
    if processor:
        return load_processor_class(processor)
    if not task_name:
        raise ProcessorError("Give --task_name (one of %s) or --processor=path/to/file.py:Class."
                             % ", ".join(sorted(PROCESSORS)))
    key = task_name.lower()
    key = _ALIASES.get(key, key)
    if key not in PROCESSORS:
        raise ProcessorError("Task not found: %s (known tasks: %s; or use "
                             "--processor=path/to/file.py:Class)."
                             % (task_name, ", ".join(sorted(PROCESSORS))))
    return PROCESSORS[key]


# -------------------------------------------------------------- conversion


def infer_task_type(label_list, examples=()):
    """regression without labels; multi-label if any example's label is a list."""
    if not label_list:
        return REGRESSION
    for example in examples:
        if isinstance(getattr(example, "label", None), (list, tuple)):
            return MULTI_LABEL
    return CLASSIFICATION


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates a sequence pair in place to the maximum length.

    One token at a time from the end of the longer sequence (of `tokens_b`
    when they are equally long): a shorter sequence probably carries more
    information per token than a longer one, so this beats cutting the same
    fraction off each.
    """
    max_length = max(0, max_length)
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _label_value(example, label_map, label_list, task_type):
    label = example.label
    if task_type == REGRESSION:
        if label is None:
            return 0.0
        try:
            return float(label)
        except (TypeError, ValueError):
            raise DataError("%s: the label %r is not a number (this is a regression task)."
                            % (example.describe(), label)) from None

    def index(value):
        if value not in label_map:
            raise DataError("%s: label %r is not one of the labels of this task: %s."
                            % (example.describe(), value,
                               ", ".join(repr(l) for l in label_list)))
        return label_map[value]

    if task_type == MULTI_LABEL:
        hot = [0] * len(label_list)
        values = label if isinstance(label, (list, tuple)) else (
            [] if label is None else [label])
        for value in values:
            hot[index(value)] = 1
        return hot
    if label is None:
        return 0
    if isinstance(label, (list, tuple)):
        raise DataError("%s: a list of labels %r in a single-label task." % (
            example.describe(), label))
    return index(label)


def _padding_features(max_seq_length, num_labels, task_type):
    if task_type == REGRESSION:
        label = 0.0
    elif task_type == MULTI_LABEL:
        label = [0] * num_labels
    else:
        label = 0
    zeros = [0] * max_seq_length
    return InputFeatures(list(zeros), list(zeros), list(zeros), label, is_real_example=False)


def _pack(ids_a, ids_b, cls_id, sep_id, max_seq_length):
    """[CLS] a [SEP] b [SEP], segment ids and padding (special ids may be None)."""
    ids = [] if cls_id is None else [cls_id]
    ids += ids_a
    if sep_id is not None:
        ids.append(sep_id)
    segment_ids = [0] * len(ids)
    if ids_b:
        ids += ids_b
        if sep_id is not None:
            ids.append(sep_id)
        segment_ids += [1] * (len(ids) - len(segment_ids))
    mask = [1] * len(ids)
    padding = max_seq_length - len(ids)
    return ids + [0] * padding, mask + [0] * padding, segment_ids + [0] * padding


def _convert_ids_example(example, max_seq_length):
    ids_a = list(example.text_a)
    ids_b = list(example.text_b) if example.text_b else None
    specials = (example.cls_id is not None) + (example.sep_id is not None) * (2 if ids_b else 1)
    budget = max_seq_length - specials
    if budget < (2 if ids_b else 1):
        raise ValueError("max_seq_length=%d leaves no room for the ids of %s."
                         % (max_seq_length, example.describe()))
    if example.keep == "last":
        ids_a.reverse()
        if ids_b:
            ids_b.reverse()
    if ids_b:
        _truncate_seq_pair(ids_a, ids_b, budget)
    else:
        del ids_a[budget:]
    if example.keep == "last":
        ids_a.reverse()
        if ids_b:
            ids_b.reverse()
    return _pack(ids_a, ids_b, example.cls_id, example.sep_id, max_seq_length)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer,
                           task_type=None):
    """Converts a single `InputExample` into a single `InputFeatures`.

    Google's packing: ``[CLS] tokens_a [SEP]`` (segment 0), then for pairs
    ``tokens_b [SEP]`` (segment 1), zero-padded to `max_seq_length`; a pair
    is truncated with `_truncate_seq_pair` to ``max_seq_length - 3`` tokens,
    a single sequence keeps its first ``max_seq_length - 2``.
    `IdsInputExample`s skip the tokenizer (`tokenizer` may then be None).
    The first five examples are logged.

    Args:
      task_type: "classification", "multi_label" or "regression"; None
        infers it from `label_list` and the example (see `infer_task_type`).

    Raises:
      DataError: the label is not in `label_list` (the message names the
        example and the file:line it came from, and lists the labels).
    """
    if task_type is None:
        task_type = infer_task_type(label_list, [example])
    if isinstance(example, PaddingInputExample):
        return _padding_features(max_seq_length, len(label_list or ()), task_type)
    label_map = {label: i for i, label in enumerate(label_list or ())}
    label_id = _label_value(example, label_map, label_list, task_type)

    tokens = None
    if isinstance(example, IdsInputExample):
        input_ids, input_mask, segment_ids = _convert_ids_example(example, max_seq_length)
    else:
        if tokenizer is None:
            raise ValueError("A tokenizer is needed to convert text %s." % example.describe())
        tokens_a = tokenizer.tokenize(example.text_a or "")
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
        if tokens_b:
            if max_seq_length < 3:
                raise ValueError("max_seq_length=%d is too short for a pair "
                                 "([CLS] a [SEP] b [SEP])." % max_seq_length)
            # [CLS], [SEP], [SEP].
            _truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
        else:
            if max_seq_length < 2:
                raise ValueError("max_seq_length=%d is too short ([CLS] a [SEP])."
                                 % max_seq_length)
            # [CLS], [SEP].
            tokens_a = tokens_a[:max_seq_length - 2]
        tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
        if tokens_b:
            tokens += tokens_b + ["[SEP]"]
        cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        input_ids, input_mask, segment_ids = _pack(
            tokenizer.convert_tokens_to_ids(tokens_a),
            tokenizer.convert_tokens_to_ids(tokens_b) if tokens_b else None,
            cls_id, sep_id, max_seq_length)

    assert len(input_ids) == max_seq_length
    if ex_index < 5:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        if tokens is not None:
            logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
        logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
        logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
        logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
        logging.info("label: %s (id = %s)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, segment_ids, label_id, is_real_example=True)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                 task_type=None):
    """Converts a list of examples (in memory) into a list of `InputFeatures`."""
    examples = list(examples)
    if task_type is None:
        task_type = infer_task_type(label_list, examples)
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer, task_type)
            for i, example in enumerate(examples)]


def _serialize(features, task_type):
    int_features = collections.OrderedDict()
    int_features["input_ids"] = features.input_ids
    int_features["input_mask"] = features.input_mask
    int_features["segment_ids"] = features.segment_ids
    int_features["is_real_example"] = [int(features.is_real_example)]
    float_features = None
    if task_type == REGRESSION:
        float_features = {"label_ids": [float(features.label_id)]}
    elif task_type == MULTI_LABEL:
        int_features["label_ids"] = list(features.label_id)
    else:
        int_features["label_ids"] = [features.label_id]
    return example_proto.serialize_example(int_features, float_features)


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file, task_type=None):
    """Converts a set of `InputExample`s to a TFRecord file.

    The file is written under a temporary name and renamed to `output_file`
    only when complete: an interrupted or failed conversion never leaves a
    truncated file (an existing `output_file` stays as it was).

    Returns:
      the number of records written.
    """
    examples = list(examples)
    if task_type is None:
        task_type = infer_task_type(label_list, examples)
    directory = os.path.dirname(output_file)
    if directory:
        tf.io.gfile.makedirs(directory)
    temp = "%s.tmp-%d" % (output_file, os.getpid())
    done = False
    try:
        with tf.io.TFRecordWriter(temp) as writer:
            for ex_index, example in enumerate(examples):
                if ex_index % 10000 == 0 and ex_index:
                    logging.info("Writing example %d of %d", ex_index, len(examples))
                features = convert_single_example(ex_index, example, label_list,
                                                  max_seq_length, tokenizer, task_type)
                writer.write(_serialize(features, task_type))
        tf.io.gfile.rename(temp, output_file, overwrite=True)
        done = True
    finally:
        if not done and tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
    return len(examples)


def pad_examples(examples, batch_size):
    """Appends `PaddingInputExample`s up to a multiple of `batch_size` (a new list)."""
    examples = list(examples)
    while len(examples) % batch_size:
        examples.append(PaddingInputExample())
    return examples


def classifier_feature_spec(seq_length, task_type=CLASSIFICATION, num_labels=None):
    """The `tf.io.parse_example` spec of the classifier TFRecords."""
    if task_type == REGRESSION:
        label = tf.io.FixedLenFeature([], tf.float32)
    elif task_type == MULTI_LABEL:
        if not num_labels:
            raise ValueError("Multi-label features need num_labels.")
        label = tf.io.FixedLenFeature([num_labels], tf.int64)
    elif task_type == CLASSIFICATION:
        label = tf.io.FixedLenFeature([], tf.int64)
    else:
        raise ValueError("Unknown task_type %r; expected one of %s."
                         % (task_type, ", ".join(TASK_TYPES)))
    return {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "label_ids": label,
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder, *,
                                batch_size, task_type=CLASSIFICATION, num_labels=None,
                                seed=None, shuffle_buffer_size=1000, repeat=None):
    """Creates an `input_fn(input_context=None)` over a classifier TFRecord file.

    Training reads repeat forever, shuffled; eval/predict reads go once, in
    file order. Under `tf.distribute`, hand the function to
    ``strategy.distribute_datasets_from_function``: `batch_size` is the
    global batch size and each replica gets its share. int64 features come
    back as int32 (see `data.input_pipeline`).

    Args:
      input_file: TFRecord path(s) (comma-separated globs allowed).
      seq_length: max_seq_length the file was written with.
      is_training: shuffle and repeat.
      drop_remainder: drop a last partial batch (static shapes, TPUs).
      batch_size: global batch size.
      task_type, num_labels: the `label_ids` feature's type and shape.
      seed: shuffling seed.
    """
    spec = classifier_feature_spec(seq_length, task_type, num_labels)

    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(
            input_file, spec, batch_size, is_training, input_context=input_context,
            shuffle_buffer_size=shuffle_buffer_size, seed=seed, repeat=repeat,
            drop_remainder=drop_remainder)

    return input_fn
