"""Google's GLUE and XNLI processors: the file layouts of the GLUE download.

`cola`, `mnli`, `mnli_mismatched`, `mrpc`, `xnli` read exactly what Google's
`run_classifier.py` reads; `sst2`, `qqp` and `stsb` (a regression task) are
written the same way. Most tasks are three tsv files in `data_dir`, so they
share `GlueTsvProcessor` (file names, labels, `get_*_examples`) and define
only `_create_examples(lines, set_type)`, as Google's processors do; a user's
task stored the same way can subclass it too.
"""

import os

from data.processors.base import (DataProcessor, InputExample, REGRESSION, location_of,
                                  parse_score)

__all__ = ["XnliProcessor", "GlueTsvProcessor", "MnliProcessor", "MnliMismatchedProcessor",
           "MrpcProcessor", "ColaProcessor", "Sst2Processor", "QqpProcessor", "StsbProcessor"]


class XnliProcessor(DataProcessor):
    """XNLI: MultiNLI training data machine-translated, XNLI dev/test (Google's layout).

    Files (as Google's code reads them):
      train: ``{data_dir}/multinli/multinli.train.{language}.tsv`` with a
        header; columns premise, hypo, label (``contradictory`` is read as
        ``contradiction``).
      dev / test: ``{data_dir}/xnli.dev.tsv`` / ``xnli.test.tsv`` with a
        header; column 0 is the language (rows of other languages are
        skipped), 1 the label, 6 sentence1, 7 sentence2.

    `train_language` (default: `language`) reads another language's training
    file: ``train_language="en"`` fine-tunes on the English MultiNLI and
    evaluates on `language`'s XNLI rows, the zero-shot cross-lingual transfer
    of multilingual BERT's evaluation.
    """

    TRAIN_LAYOUT = "3 columns: premise, hypo, label"
    EVAL_LAYOUT = "at least 8 columns: language, gold_label, ..., sentence1 (7th), sentence2 (8th)"

    def __init__(self, language="zh", train_language=None):
        self.language = language
        self.train_language = train_language or language

    def get_train_examples(self, data_dir):
        path = os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.train_language)
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
                                         source=location_of(line)))
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
                                         source=location_of(line)))
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
            examples.append(InputExample(guid, text_a, text_b, label, source=location_of(line)))
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
                                         source=location_of(line)))
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
            examples.append(InputExample(guid, text_a, None, label, source=location_of(line)))
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
            examples.append(InputExample(guid, text_a, None, label, source=location_of(line)))
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
            examples.append(InputExample(guid, text_a, text_b, label, source=location_of(line)))
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
            label = 0.0 if set_type == "test" else parse_score(self._field(line, 9, layout), line)
            examples.append(InputExample(guid, text_a, text_b, label, source=location_of(line)))
        return examples
