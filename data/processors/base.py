"""The DataProcessor API: examples, features, errors and file readers.

google-research/bert's `run_classifier.py` classes, kept so that Google-style
processor code runs unchanged:

* `InputExample(guid, text_a, text_b=None, label=None)`: one raw example.
  `PaddingInputExample`: a fake example that pads the eval/predict sets to a
  whole number of batches (all-zero features, `is_real_example = 0`), so
  every batch has the same static shape on every replica, and metrics
  weighted by `is_real_example` ignore it.
* `InputFeatures(input_ids, input_mask, segment_ids, label_id,
  is_real_example=True)`: one converted example.
* `DataProcessor`: reads a task's train/dev/test files into examples;
  `get_labels()` names the classes.

Beyond Google's classes, what makes bad input cheap to fix:

* Three task types (`DataProcessor.task_type`): `"classification"` (one
  label per example, softmax), `"multi_label"` (the label is a list of
  labels, trained with sigmoid cross-entropy), `"regression"` (the label is a
  float; `get_labels()` returns None, e.g. STS-B).
* `IdsInputExample`: sequences that already are token ids (no tokenizer).
* A malformed row names its file, line and the layout that was expected
  (`DataError`); a label outside `get_labels()` names its file and line (or
  example guid) and lists the valid labels.
* `_read_tsv` / `_read_csv` return rows that are plain lists (so Google-style
  code `line[3]` works unchanged) and also carry `.path` / `.line_number`
  (and `.location`, "file:line"), for such messages in user processors too.
"""

import csv
import io
import json
import math
import sys

import tensorflow as tf

from data import corpus as corpus_lib

__all__ = [
    "CLASSIFICATION", "MULTI_LABEL", "REGRESSION", "TASK_TYPES",
    "DataError", "ProcessorError", "Row", "Record",
    "InputExample", "IdsInputExample", "PaddingInputExample", "InputFeatures",
    "DataProcessor", "SplitProcessor", "location_of", "parse_score", "sorted_labels",
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


class _Located:
    """Values read from a file that know where they came from.

    Attributes:
      path: the file it was read from.
      line_number: 1-based line of the file where it starts.
    """

    def __init__(self, values, path, line_number):
        super().__init__(values)
        self.path = path
        self.line_number = line_number

    @property
    def location(self):
        """``"path:line"``, for error messages."""
        return "%s:%d" % (self.path, self.line_number)


class Row(_Located, list):
    """A row of a delimited file: a list of fields with `.path` / `.line_number`."""


class Record(_Located, dict):
    """A JSON object read from a `.jsonl` line, with `.path` / `.line_number`."""


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


# ------------------------------------------------------------- readers


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
        `modeling.tasks.classification.compute_metrics`).
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


class SplitProcessor(DataProcessor):
    """A `DataProcessor` that reads its three splits one way.

    Subclasses define `_split_examples(data_dir, split)`, `split` being "train",
    "dev" or "test", and `get_labels()`.
    """

    def get_train_examples(self, data_dir):
        return self._split_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._split_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._split_examples(data_dir, "test")

    def _split_examples(self, data_dir, split):
        raise NotImplementedError("%s must define _split_examples()" % type(self).__name__)


def location_of(row):
    """A row's ``"file:line"`` (None for rows that do not know where they came from)."""
    return getattr(row, "location", None)


def parse_score(value, row):
    """A regression label as a finite float, or a DataError naming the row's file and line."""
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataError("%s: the label %r is not a number (this is a regression task)."
                        % (getattr(row, "location", row), value)) from None
    if not math.isfinite(score):
        raise DataError("%s: the label %r is not a finite number; expected a finite score "
                        "(this is a regression task)." % (getattr(row, "location", row), value))
    return score


def sorted_labels(labels):
    """Numeric order when every label is an integer, else string order."""
    labels = list(labels)
    try:
        return sorted(labels, key=lambda label: (int(label), label))
    except ValueError:
        return sorted(labels)
