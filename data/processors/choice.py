"""Multiple-choice data (a context and N candidate answers, one right): `MultipleChoiceProcessor`.

Story cloze, RACE, SWAG, ARC, COPA: every example is a context and a fixed
number of candidate continuations or answers, and the label is the index of
the right one. The files are JSON lines, one example per line:

    {"context": "Karen was assigned a roommate ...", "choices": ["Karen became good
     friends with her roommate.", "Karen hated her roommate."], "label": 0}

* `context`: a string (may be empty);
* `choices`: a list of N non-empty strings; N is the same on every line of
  every split (the first example read sets it, or `num_choices`);
* `label`: the 0-based index of the right choice, an integer (or a string
  holding one); optional in test files, where the examples are unlabeled;
* `id`: optional; the example's guid (default `<split>-<line>`).

Files: `train.jsonl`, `dev.jsonl` and `test.jsonl` in the data directory
(other names with `train_file`, `dev_file`, `test_file`). Every problem is a
`DataError` naming the file and line and what was expected.

Examples are `ChoiceExample`s (`text_a` the context, `choices` the
candidates, `label` the index as a string of `get_labels()`, "0" .. "N-1").
How a model family turns one into sequences is its fine-tuning input format
(`modeling.tasks.input_formats`): BERT-style encoders score
``[CLS] context [SEP] choice [SEP]`` per candidate (`convert_choice_example`,
`file_based_convert_choice_examples`: the N packed sequences stored end to
end, ``N * max_seq_length`` ids per record), GPT ``<s> context $ choice <e>``;
one shared linear layer scores each candidate and a softmax runs over the
candidates.

Two published data sets in their own file layouts, as subclasses:

* `ArctProcessor` (``--task_name=arct``): the Argument Reasoning
  Comprehension Task (SemEval-2018 task 12) TSV files ``train-full.txt``,
  ``dev-full.txt``, ``test-full.txt`` with the header ``#id warrant0 warrant1
  correctLabelW0orW1 reason claim debateTitle debateInfo``. The context is
  ``claim reason`` and the candidates the two warrants (Niven & Kao's BERT
  setup); the example keeps every field in `fields` for cue analyses.
* `SwagProcessor` (``--task_name=swag``): SWAG's CSV files ``train.csv``,
  ``val.csv``, ``test.csv`` (columns ``sent1``, ``sent2``, ``ending0`` ..
  ``ending3``, ``label``; found by the header's names). The context is
  ``sent1`` and candidate i is ``sent2 ending<i>``.
"""

import os

from absl import logging
import tensorflow as tf

from data import atomic
from data.processors import features as features_lib
from data.processors.base import CLASSIFICATION
from data.processors.base import DataError
from data.processors.base import DataProcessor
from data.processors.base import InputExample
from data.processors.base import InputFeatures
from data.processors.base import PaddingInputExample
from data.processors.base import SplitProcessor

__all__ = ["ChoiceExample", "MultipleChoiceProcessor", "ArctProcessor", "SwagProcessor",
           "convert_choice_example", "file_based_convert_choice_examples"]


class ChoiceExample(InputExample):
    """A multiple-choice example: `text_a` the context, `choices` the candidates.

    Args:
      guid: unique id of the example.
      context: the context (question, story beginning); may be empty.
      choices: list of candidate strings.
      label: index of the right choice as a string ("0", "1", ...), or None.
      source: optional ``"file:line"``.
    """

    def __init__(self, guid, context, choices, label=None, source=None, fields=None):
        super().__init__(guid, context, None, label, source)
        self.choices = list(choices)
        # The data set's own columns (ARCT: claim, reason, warrant0, ...), for analyses.
        self.fields = dict(fields or {})

    def __repr__(self):
        return "ChoiceExample(guid=%r, context=%r, choices=%r, label=%r)" % (
            self.guid, self.text_a, self.choices, self.label)


class MultipleChoiceProcessor(SplitProcessor):
    """Reads the JSON-lines multiple-choice format of the module docstring.

    Args:
      data_dir: where the files are; used to find the number of choices
        when `num_choices` is not given (the first example of the first
        split file that exists).
      num_choices: candidates per example; None reads it from the data.
      train_file, dev_file, test_file: file names in the data directory.
    """

    task_type = CLASSIFICATION
    eval_metrics = ("accuracy",)
    is_multiple_choice = True

    def __init__(self, data_dir=None, num_choices=None, train_file="train.jsonl",
                 dev_file="dev.jsonl", test_file="test.jsonl"):
        self.files = {"train": train_file, "dev": dev_file, "test": test_file}
        if num_choices is not None and (isinstance(num_choices, bool) or
                                        not isinstance(num_choices, int) or num_choices < 2):
            raise ValueError("num_choices must be an integer >= 2, got %r" % (num_choices,))
        self.num_choices = num_choices
        if num_choices is None and data_dir is not None:
            self.num_choices = self._count_choices(data_dir)

    def _count_choices(self, data_dir):
        for split in ("train", "dev", "test"):
            path = os.path.join(data_dir, self.files[split])
            if os.path.isfile(path):
                records = self._read_jsonl(path)
                if records:
                    return len(self._choices(records[0]))
        raise DataError("%s: none of %s holds an example to count the choices of"
                        % (data_dir, ", ".join(self.files.values())))

    def get_labels(self):
        if self.num_choices is None:
            raise ValueError("MultipleChoiceProcessor: the number of choices is unknown; "
                             "give data_dir or num_choices")
        return [str(i) for i in range(self.num_choices)]

    # ---------------------------------------------------------------- rows

    @staticmethod
    def _choices(record):
        layout = '{"context": str, "choices": [str, ...], "label": int}'
        choices = DataProcessor._field(record, "choices", layout)
        if (not isinstance(choices, list) or len(choices) < 2
                or not all(isinstance(c, str) and c.strip() for c in choices)):
            raise DataError("%s: `choices` must be a list of at least two non-empty strings, "
                            "got %r" % (record.location, choices))
        return choices

    def _split_examples(self, data_dir, split):
        path = os.path.join(data_dir, self.files[split])
        layout = '{"context": str, "choices": [str, ...], "label": int}'
        examples = []
        for record in self._read_jsonl(path):
            context = self._field(record, "context", layout)
            if not isinstance(context, str):
                raise DataError("%s: `context` must be a string, got %r"
                                % (record.location, context))
            choices = self._choices(record)
            if self.num_choices is None:
                self.num_choices = len(choices)
            if len(choices) != self.num_choices:
                raise DataError("%s: %d choices, but this task has %d per example (every "
                                "example needs the same number)"
                                % (record.location, len(choices), self.num_choices))
            label = record.get("label")
            if label is None:
                if split != "test":
                    raise DataError("%s: no `label` (the index of the right choice); only "
                                    "test examples may be unlabeled" % record.location)
            else:
                try:
                    index = int(label)
                    if isinstance(label, bool) or str(index) != str(label).strip():
                        raise ValueError
                except (TypeError, ValueError):
                    raise DataError("%s: `label` must be the integer index of the right "
                                    "choice, got %r" % (record.location, label)) from None
                if not 0 <= index < len(choices):
                    raise DataError("%s: `label` %d is not an index of the %d choices"
                                    % (record.location, index, len(choices)))
                label = str(index)
            guid = record.get("id", "%s-%d" % (split, record.line_number))
            examples.append(ChoiceExample(str(guid), context, choices, label,
                                          source=record.location))
        return examples


class _FixedChoiceProcessor(MultipleChoiceProcessor):
    """A multiple-choice data set with a fixed number of candidates and its own file layout."""

    NUM_CHOICES = None
    FILES = None

    def __init__(self, data_dir=None, num_choices=None, train_file=None, dev_file=None,
                 test_file=None):
        if num_choices not in (None, self.NUM_CHOICES):
            raise ValueError("%s has %d choices per example, not %r"
                             % (type(self).__name__, self.NUM_CHOICES, num_choices))
        files = dict(zip(("train", "dev", "test"), self.FILES))
        super().__init__(data_dir=None, num_choices=self.NUM_CHOICES,
                         train_file=train_file or files["train"],
                         dev_file=dev_file or files["dev"], test_file=test_file or files["test"])

    def _split_examples(self, data_dir, split):
        path = os.path.join(data_dir, self.files[split])
        rows = self._read_rows(path)
        if not rows:
            raise DataError("%s: no header row (expected %s)" % (path, self.LAYOUT))
        header = [name.strip() for name in rows[0]]
        missing = [name for name in self.COLUMNS if name not in header]
        if split != "test" and self.LABEL_COLUMN not in header:
            missing.append(self.LABEL_COLUMN)
        if missing:
            raise DataError("%s:%d: the header has no column %s (expected %s)"
                            % (path, rows[0].line_number, ", ".join(missing), self.LAYOUT))
        examples = []
        for row in rows[1:]:
            if len(row) != len(header):
                raise DataError("%s: %d columns, but the header has %d (expected %s)"
                                % (row.location, len(row), len(header), self.LAYOUT))
            fields = dict(zip(header, row))
            context, choices = self._context_and_choices(fields)
            if not all(choice.strip() for choice in choices):
                raise DataError("%s: an empty candidate in %r" % (row.location, choices))
            label = fields.get(self.LABEL_COLUMN, "").strip()
            if not label:
                if split != "test":
                    raise DataError("%s: no %s (the index of the right choice); only test "
                                    "examples may be unlabeled" % (row.location,
                                                                   self.LABEL_COLUMN))
                label = None
            elif label not in self.get_labels():
                raise DataError("%s: %s %r is not one of %s" % (
                    row.location, self.LABEL_COLUMN, label, ", ".join(self.get_labels())))
            guid = fields.get(self.ID_COLUMN) or "%s-%d" % (split, row.line_number)
            examples.append(ChoiceExample(guid, context, choices, label, source=row.location,
                                          fields=fields))
        return examples


class ArctProcessor(_FixedChoiceProcessor):
    """ARCT (SemEval-2018 task 12): claim + reason against two warrants (see the module docstring)."""

    NUM_CHOICES = 2
    FILES = ("train-full.txt", "dev-full.txt", "test-full.txt")
    COLUMNS = ("warrant0", "warrant1", "reason", "claim")
    LABEL_COLUMN = "correctLabelW0orW1"
    ID_COLUMN = "#id"
    LAYOUT = ("the ARCT TSV header #id, warrant0, warrant1, correctLabelW0orW1, reason, claim, "
              "debateTitle, debateInfo")

    def _read_rows(self, path):
        return self._read_tsv(path)

    def _context_and_choices(self, fields):
        context = " ".join(part.strip() for part in (fields["claim"], fields["reason"])
                           if part.strip())
        return context, [fields["warrant0"], fields["warrant1"]]


class SwagProcessor(_FixedChoiceProcessor):
    """SWAG: a context and four endings (see the module docstring)."""

    NUM_CHOICES = 4
    FILES = ("train.csv", "val.csv", "test.csv")
    COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
    LABEL_COLUMN = "label"
    ID_COLUMN = "fold-ind"
    LAYOUT = "SWAG's CSV columns sent1, sent2, ending0 .. ending3, label"

    def _read_rows(self, path):
        return self._read_csv(path)

    def _context_and_choices(self, fields):
        stem = fields["sent2"].strip()
        return fields["sent1"].strip(), [
            ("%s %s" % (stem, fields["ending%d" % i].strip())).strip() for i in range(4)]


# ------------------------------------------------------------ features


def convert_choice_example(ex_index, example, label_list, max_seq_length, tokenizer,
                           pack_fn=None):
    """One `ChoiceExample` -> `InputFeatures` of ``num_choices * max_seq_length`` ids.

    Candidate i is packed like a sentence pair, ``[CLS] context [SEP]
    choice_i [SEP]`` (Google's packing and truncation; ``[CLS] choice_i
    [SEP]`` when the context is empty), or by `pack_fn` (a family's own
    packing, as in `features.convert_single_example`); the packed candidates
    are stored end to end. `PaddingInputExample`s become all-zero features.
    """
    num_choices = len(label_list)
    if isinstance(example, PaddingInputExample):
        zeros = [0] * (num_choices * max_seq_length)
        return InputFeatures(zeros, list(zeros), list(zeros), 0, is_real_example=False)
    if not isinstance(example, ChoiceExample):
        raise DataError("%s is not a multiple-choice example (a context and candidates)"
                        % example.describe())
    if len(example.choices) != num_choices:
        raise DataError("%s has %d candidates; this task has %d"
                        % (example.describe(), len(example.choices), num_choices))
    input_ids, input_mask, segment_ids = [], [], []
    label_id = 0
    for choice in example.choices:
        context = example.text_a if (example.text_a or "").strip() else None
        pair = InputExample(example.guid, context or choice, choice if context else None,
                            example.label, source=example.source)
        # Logged below as one example, not per candidate (the converter logs indices < 5).
        features = features_lib.convert_single_example(
            ex_index + 5, pair, label_list, max_seq_length, tokenizer, CLASSIFICATION,
            pack_fn=pack_fn)
        input_ids += features.input_ids
        input_mask += features.input_mask
        segment_ids += features.segment_ids
        label_id = features.label_id
    if ex_index < 3:
        logging.info("*** Example %s: %d candidates ***", example.guid, num_choices)
        for i in range(num_choices):
            logging.info("input_ids[%d]: %s", i, " ".join(
                str(x) for x in input_ids[i * max_seq_length:(i + 1) * max_seq_length]))
        logging.info("label: %s (id = %s)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, segment_ids, label_id, is_real_example=True)


def file_based_convert_choice_examples(examples, label_list, max_seq_length, tokenizer,
                                       output_file, pack_fn=None):
    """Writes multiple-choice examples as classifier TFRecords of ``N * max_seq_length`` ids.

    The record layout is Google's classifier layout (`input_ids`,
    `input_mask`, `segment_ids`, `label_ids`, `is_real_example`) with the
    three id features `num_choices` times as long; written under a
    temporary name and renamed when complete.

    Returns:
      the number of records written.
    """
    examples = list(examples)
    outputs = atomic.TemporaryOutputs([output_file])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for ex_index, example in enumerate(examples):
                features = convert_choice_example(ex_index, example, label_list,
                                                  max_seq_length, tokenizer, pack_fn)
                writer.write(features_lib.serialize_features(features, CLASSIFICATION))
        outputs.commit()
    finally:
        outputs.discard()
    return len(examples)
