"""Token tagging (NER) fine-tuning as a library call: what `run/run_ner.py` runs.

    from modeling.tasks import ner_job
    result = ner_job.run(ner_job.NerJob(
        data_dir="conll2003", vocab_file=".../vocab.txt",
        bert_config_file=".../bert_config.json", init_checkpoint=".../bert_model.ckpt",
        do_lower_case=False, output_dir="/tmp/ner", do_train=True, do_eval=True))
    result.eval_results["eval_f1"]

Data: CoNLL files (`data.processors.conll`): ``train.txt``, ``dev.txt`` and
``test.txt`` in `data_dir`, or `train_file` / `dev_file` / `test_file`
(paths, or names inside `data_dir`). Tags follow `tagging_scheme` (``bio`` or
``bioes``); the label list is ``O`` plus the training file's tags (or, with
no training, the ``label_list.txt`` a training run wrote in `output_dir`).

`run(job)`:

1. checks the flags, the casing against the checkpoint's name,
   `max_seq_length` against the config and the vocabulary; reads every
   needed split (a bad line or a tag outside the scheme or the label list
   is a one-line error naming ``file:line``) and writes ``train.tf_record``,
   ``eval.tf_record``, ``predict.tf_record``;
2. fine-tunes `modeling.tasks.tagging.BertTagger` (softmax per token, or a
   CRF with `use_crf`) with the project's one trainer;
3. with `do_eval`, writes ``eval_results.txt``: eval_precision, eval_recall,
   eval_f1 (entity level, micro-averaged, seqeval's default definition:
   `modeling.tasks.seqeval`), eval_<TYPE>_precision/_recall/_f1 per entity
   type, eval_accuracy (labelled tokens), eval_loss, loss, global_step; and
   ``eval_report.txt`` (a seqeval-like table). With `do_predict`, writes
   ``test_predictions.txt``: ``token gold predicted`` per word, a blank line
   between sentences (CoNLL format, conlleval's input), and the entity
   scores of the test set in ``test_results.txt`` when it has gold tags.

Words cut by `max_seq_length` are predicted ``O`` (their gold entities still
count, so truncation shows up as lost recall) and reported in the log.
All outputs are written atomically.

Registered as ``registry.tasks.get("ner")``.
"""

import dataclasses
import os
from typing import Optional

from absl import logging

from data import atomic
from data import input_pipeline
from data.processors import conll
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import input_formats
from modeling.tasks import length_batching
from modeling.tasks import seqeval
from modeling.tasks import tagging
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training.options import option

__all__ = ["NerJob", "NerJobError", "NerResult", "run", "tags_of"]

NerJobError = ClassifierJobError
LABEL_LIST_FILE = "label_list.txt"


# Every tagging feature is padded with `input_mask` (`conll.FEATURE_NAMES`).
TAGGING_GROUPS = (("input_mask", conll.FEATURE_NAMES),)


@dataclasses.dataclass
class NerJob(settings.TrainerSettings, input_pipeline.LengthBatchingSettings,
             job_lib.EncoderSettings, settings.FineTuningSettings, settings.EvalSettings,
             settings.PredictSettings):
    """Everything a tagging run needs; the fields are `run_ner.py`'s flags."""

    max_seq_length: int = option(
        128, "Maximum word pieces per sentence with [CLS] and [SEP]; words beyond are "
        "predicted O.")
    data_dir: Optional[str] = option(None, "Directory with train.txt, dev.txt and test.txt.")
    train_file: Optional[str] = option(None, "Training file (a path, or a name in --data_dir).")
    dev_file: Optional[str] = option(None, "Dev file (a path, or a name in --data_dir).")
    test_file: Optional[str] = option(None, "Test file (a path, or a name in --data_dir).")
    tagging_scheme: str = option(
        "bio", "Tag scheme of the files: bio (O, B-X, I-X) or bioes (also E-X, S-X).",
        choices=("bio", "bioes"))
    use_crf: bool = option(False, "Score and decode with a linear-chain CRF over the word tags.")


@dataclasses.dataclass
class NerResult:
    """eval_results (eval_results.txt), test_predictions (tag lists per test sentence)."""

    eval_results: dict
    test_predictions: Optional[list]
    test_results: Optional[dict]
    output_dir: str


def tags_of(sentences, features, predicted_ids, label_list, word_order=False):
    """Per-sentence predicted tags: the prediction at each word's first piece; O past the cut.

    `word_order`: the rows are already in word order (the tagger's
    `word_predicted_ids`, word `i` at `i`), not at the features' positions."""
    result = []
    for sentence, feature, row in zip(sentences, features, predicted_ids):
        positions = [i for i, m in enumerate(feature.label_mask) if m]
        if word_order:
            positions = range(len(positions))
        tags = [label_list[int(row[p])] for p in positions]
        result.append(tags + ["O"] * (len(sentence.words) - len(tags)))
    return result


def _flat_scores(scores, prefix):
    values = {prefix + "precision": scores["precision"], prefix + "recall": scores["recall"],
              prefix + "f1": scores["f1"]}
    for type_, s in scores["per_type"].items():
        for key in ("precision", "recall", "f1"):
            values["%s%s_%s" % (prefix, type_, key)] = s[key]
    return values


class NerRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with tagging's hooks."""

    error = NerJobError
    example_name = "training sentences"

    def check(self):
        job = self.job
        self.check_modes()
        self.check_required("bert_config_file", "output_dir", "vocab_file")
        if job.tagging_scheme not in conll.SCHEMES:
            raise NerJobError("--tagging_scheme=%s: expected one of %s"
                              % (job.tagging_scheme, ", ".join(conll.SCHEMES)))
        if job.mixed_precision and job.use_crf:
            logging.info("The CRF computes in float32 under mixed precision.")
        self.check_case_matches_checkpoint()
        self.family, self.config = self.load_family_config()
        if job.max_seq_length < 3:
            raise NerJobError("--max_seq_length must be at least 3 ([CLS] word [SEP]).")
        self.check_positive("train_batch_size", "eval_batch_size", "predict_batch_size",
                            "gradient_accumulation_steps")
        self.check_training_values()
        input_pipeline.check_length_batching(job, NerJobError)
        self.tokenizer = self.load_tokenizer(self.config)

    def check_family(self, family):
        # Any bidirectional encoder (BERT-style, DistilBERT, XLNet); not a causal LM.
        input_formats.check_token_encoder(self.job, family, "NER tags the words with",
                                          NerJobError)

    def prepare(self):
        self.read_splits()
        if self.train is not None:
            self.training_steps(len(self.train))  # refused before anything is written
        self.write_splits()
        return len(self.train) if self.train is not None else None

    def read_splits(self):
        """Reads every split the modes need into `train`, `dev`, `test` (None if not needed),
        the tags checked: bad lines are reported before any training."""
        job = self.job
        self.train = self._read("train_file", "train.txt", "train") if job.do_train else None
        self.dev = self._read("dev_file", "dev.txt", "dev") if job.do_eval else None
        self.test = self._read("test_file", "test.txt", "test") if job.do_predict else None
        for sentences in (self.dev, self.test):
            if sentences is not None:
                conll.check_tags(sentences, job.tagging_scheme)

    def check_labels(self):
        """Everything checked before anything is written: the label list of a run trained
        in --output_dir, and every dev/test tag against the training labels."""
        if self.train is not None:
            labels = conll.label_list_from(self.train)
            self.check_label_list_unchanged(labels, LABEL_LIST_FILE)
            for sentences in (self.dev, self.test):
                conll.check_known_tags(sentences or [], labels)

    def write_splits(self):
        """The label list (label_list.txt; without training, read back from it) and the
        records of the splits read: train.tf_record, eval.tf_record and predict.tf_record,
        the last two padded to whole eval / predict batches (`dev_features`,
        `test_features`: the real sentences' features)."""
        job = self.job
        self.check_labels()
        self.label_list = self.saved_label_list(
            conll.label_list_from(self.train) if self.train is not None else None,
            LABEL_LIST_FILE)
        for sentences in (self.dev, self.test):
            conll.check_known_tags(sentences or [], self.label_list)
        logging.info("Labels: %s", self.label_list)
        if self.train is not None:
            self._write(self.train, "train.tf_record", 1)
        self.dev_features = (self._write(self.dev, "eval.tf_record", job.eval_batch_size)
                             if self.dev else None)
        self.test_features = (self._write(self.test, "predict.tf_record", job.predict_batch_size)
                              if self.test else None)
        for name, sentences, features in (("dev", self.dev, self.dev_features),
                                          ("test", self.test, self.test_features)):
            if features:
                cut = sum(len(s.words) - f.num_words for s, f in zip(sentences, features))
                if cut:
                    logging.warning("%s: %d words beyond --max_seq_length=%d are predicted O.",
                                    name, cut, job.max_seq_length)

    def _read(self, name, default, set_type):
        return self.read_split(
            name, default, lambda path: conll.read_conll(path, self.job.tagging_scheme, set_type),
            "sentences")

    def _write(self, sentences, name, multiple):
        return conll.write_tagging_records(sentences, self.label_list, self.job.max_seq_length,
                                           self.tokenizer, os.path.join(self.job.output_dir, name),
                                           multiple)

    def _input_fn(self, name, batch_size, is_training, mode=None):
        base = conll.tagging_input_fn_builder(os.path.join(self.job.output_dir, name),
                                              self.job.max_seq_length, is_training, batch_size,
                                              seed=self.job.seed)
        mode = mode or (length_batching.TRAIN if is_training else length_batching.EVAL)
        return length_batching.input_fn(self.job, base, batch_size, mode, groups=TAGGING_GROUPS)

    def _predicted_ids(self, trainer, input_fn):
        """`word_predicted_ids` `[examples, max_seq_length]` (word order), in input order."""
        return length_batching.predict(trainer, input_fn, ["word_predicted_ids"], self.job,
                                       sequence_outputs=["word_predicted_ids"]
                                       )["word_predicted_ids"]

    def build_model(self):
        return tagging.BertTagger.from_config_object(self.config,
                                                     num_labels=len(self.label_list),
                                                     use_crf=self.job.use_crf, family=self.family)

    def train_input_fn(self):
        return self._input_fn("train.tf_record", self.job.train_batch_size, True)

    def evaluate(self, trainer):
        job, dev = self.job, self.dev
        eval_fn = self._input_fn("eval.tf_record", job.eval_batch_size, False)
        results = job_lib.eval_results_from(trainer.evaluate(eval_fn, max_steps=None,
                                                             restore=False))
        predicted = self._predicted_ids(trainer, eval_fn)
        tags = tags_of(dev, self.dev_features, predicted, self.label_list,
                       word_order=True)
        scores = seqeval.entity_scores([s.tags for s in dev], tags)
        results.update(_flat_scores(scores, "eval_"))
        if trainer.is_chief:
            trainer_lib.write_eval_results(results,
                                           os.path.join(job.output_dir, "eval_results.txt"))
            atomic.write_text(os.path.join(job.output_dir, "eval_report.txt"),
                              seqeval.format_report(scores))
        job_lib.print_results(results)
        return results

    def predict(self, trainer):
        job, test = self.job, self.test
        predicted = self._predicted_ids(trainer, self._input_fn(
            "predict.tf_record", job.predict_batch_size, False, length_batching.PREDICT))
        tags = tags_of(test, self.test_features, predicted, self.label_list,
                       word_order=True)
        path = os.path.join(job.output_dir, "test_predictions.txt")
        scores = seqeval.entity_scores([s.tags for s in test], tags)
        if trainer.is_chief:
            conll.write_conll_predictions(path, test, tags)
            trainer_lib.write_eval_results(_flat_scores(scores, "test_"),
                                           os.path.join(job.output_dir, "test_results.txt"))
        print("Wrote predictions for %d sentences to %s" % (len(test), path))
        return tags, _flat_scores(scores, "test_")

    def finish(self, trainer, eval_results, predictions):
        tags, test_results = predictions if predictions is not None else (None, None)
        print("Checkpoints:  %s" % os.path.abspath(self.job.output_dir))
        return NerResult(eval_results=eval_results, test_predictions=tags,
                         test_results=test_results, output_dir=self.job.output_dir)


def run(job):
    """Runs `job` (train, eval and/or predict); returns a `NerResult`."""
    return NerRunner(job).run()


registry.tasks.register("ner", FineTuningTask(
    name="ner",
    description="Token tagging / NER on CoNLL files (BIO or BIOES), optional CRF; "
                "entity-level F1 as seqeval",
    model_class=tagging.BertTagger, job_class=NerJob, run=run))
