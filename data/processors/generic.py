"""`GenericProcessor`: any tsv, csv or jsonl data set, configured by arguments.

So that a data set in a common format needs no code: columns by index or by
header name (jsonl: by key), a header or not, labels given or inferred from
the training file, and the three task types. `run_classifier.py
--task_name=generic` fills its arguments from flags.
"""

import collections
import dataclasses
import os
from typing import List, Optional

from absl import logging

from data.options import option

from data.processors.base import (CLASSIFICATION, MULTI_LABEL, REGRESSION, TASK_TYPES,
                                  DataError, InputExample, ProcessorError, SplitProcessor,
                                  parse_score, sorted_labels)

__all__ = ["GenericColumns", "GenericProcessor"]


@dataclasses.dataclass
class GenericColumns:
    """The flags that describe a generic data file (``--task_name=generic``), declared once
    for the jobs and tools that read one (their fields, `GenericProcessor`'s arguments)."""

    file_format: str = option("tsv", "generic: data file format.",
                              choices=("tsv", "csv", "jsonl"))
    text_a_column: Optional[str] = option(
        "0", "generic: column of text_a (index or header name/key).")
    text_b_column: Optional[str] = option(
        None, "generic: column of text_b (index or name); unset for single sentences.")
    label_column: Optional[str] = option("1", "generic: column of the label (index or name).")
    has_header: bool = option(True, "generic: tsv/csv files start with a header row.")
    labels: Optional[List[str]] = option(
        None, "generic: the label list (comma-separated); default: inferred from the training "
        "file.")


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


class GenericProcessor(SplitProcessor):
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
    With a header, every row must have as many columns as the header (a
    test row may lack the label when it is the last column): an extra or a
    missing column is a `DataError` naming file and line.
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
        """(records, column resolver, header row or None) for the configured format."""
        if self.file_format == "jsonl":
            return self._read_jsonl(path), None, None
        if self.file_format == "csv":
            rows = self._read_csv(path)
        else:
            rows = self._read_tsv(path, quotechar=self.quotechar)
        header = None
        header_row = None
        if self.has_header:
            if not rows:
                raise DataError("%s is empty; expected a header row." % path)
            header_row = [name.strip() for name in rows[0]]
            header = {name: index for index, name in enumerate(header_row)}
            rows = rows[1:]
        return rows, header, header_row

    @staticmethod
    def _check_column_count(row, header_row, label_index, set_type):
        """A row has as many columns as the header (a test row may lack a last label).

        One column too many is typically a tab or comma inside a text that
        shifted the columns after it; one too few, a lost field.
        """
        if len(row) == len(header_row):
            return
        if (set_type == "test" and label_index == len(header_row) - 1
                and len(row) == len(header_row) - 1):
            return  # test files may omit the label column
        raise DataError("%s: %d columns, expected %d (header: %s)"
                        % (row.location, len(row), len(header_row), ", ".join(header_row)))

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
            return parse_score(value, record)
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

    def _split_examples(self, data_dir, set_type, check_labels=True):
        path = self._path(data_dir, set_type)
        check_labels = check_labels and set_type != "test"
        records, header, header_row = self._read_records(path)
        layout = self._describe_layout()
        a = self._resolve(self.text_a_column, header, path)
        b = self._resolve(self.text_b_column, header, path)
        guid_col = self._resolve(self.guid_column, header, path)
        label_col = self._resolve(self.label_column, header, path, optional=(set_type == "test"))
        examples = []
        for record in records:
            if not isinstance(record, dict) and not any(field.strip() for field in record):
                continue  # blank line
            if header_row is not None:
                self._check_column_count(record, header_row, label_col, set_type)
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

    def get_labels(self):
        if self.task_type == REGRESSION:
            return None
        if self._labels is None:
            if not self.data_dir:
                raise ProcessorError("GenericProcessor needs `labels`, or `data_dir` to infer "
                                     "them from the training file.")
            found = collections.OrderedDict()
            for example in self._split_examples(self.data_dir, "train", check_labels=False):
                values = example.label if isinstance(example.label, list) else [example.label]
                for value in values:
                    if value is not None:
                        found[value] = True
            self._labels = sorted_labels(found)
            if not self._labels:
                raise DataError("No labels found in %s." % self._path(self.data_dir, "train"))
            if self._auto_metrics and len(self._labels) == 2 and \
                    self.task_type == CLASSIFICATION:
                self.eval_metrics = ("accuracy", "f1")
            logging.info("Labels inferred from %s: %s", self._path(self.data_dir, "train"),
                         self._labels)
        return list(self._labels)
