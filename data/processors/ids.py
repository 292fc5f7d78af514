"""`IdsProcessor`: examples that already are integer id sequences; no tokenizer.

Event histories, item sequences, ...: the ids (plus an offset) are the
model's token ids directly, packed by the same rules as text
(`data.packing`), with optional ``[CLS]``/``[SEP]`` ids and truncation that
can keep the latest ids. `run_classifier.py --task_name=ids` fills its
arguments from the `--ids_*` flags.
"""

import os

from data.processors.base import (DataError, IdsInputExample, ProcessorError, SplitProcessor,
                                  sorted_labels)

__all__ = ["IdsProcessor"]


class IdsProcessor(SplitProcessor):
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

    def _split_examples(self, data_dir, set_type, check_labels=True):
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

    def get_labels(self):
        if self._labels is None:
            if not self.data_dir:
                raise ProcessorError("IdsProcessor needs `labels` or `num_labels`, or "
                                     "`data_dir` to infer the labels from the training file.")
            found = {example.label for example in
                     self._split_examples(self.data_dir, "train", check_labels=False)}
            found.discard(None)
            self._labels = sorted_labels(found)
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
