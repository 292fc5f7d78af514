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
(`modeling.tasks.input_formats`): GPT scores ``<s> context $ choice <e>`` per
candidate with one shared linear layer and a softmax over the candidates.
"""

import os

from data.processors.base import CLASSIFICATION
from data.processors.base import DataError
from data.processors.base import DataProcessor
from data.processors.base import InputExample

__all__ = ["ChoiceExample", "MultipleChoiceProcessor"]


class ChoiceExample(InputExample):
    """A multiple-choice example: `text_a` the context, `choices` the candidates.

    Args:
      guid: unique id of the example.
      context: the context (question, story beginning); may be empty.
      choices: list of candidate strings.
      label: index of the right choice as a string ("0", "1", ...), or None.
      source: optional ``"file:line"``.
    """

    def __init__(self, guid, context, choices, label=None, source=None):
        super().__init__(guid, context, None, label, source)
        self.choices = list(choices)

    def __repr__(self):
        return "ChoiceExample(guid=%r, context=%r, choices=%r, label=%r)" % (
            self.guid, self.text_a, self.choices, self.label)


class MultipleChoiceProcessor(DataProcessor):
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

    def get_train_examples(self, data_dir):
        return self._examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(data_dir, "test")

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

    def _examples(self, data_dir, split):
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
