"""Extractive QA (SQuAD 1.1 / 2.0, CMRC) fine-tuning as a library call: what `run/run_squad.py` runs.

    from modeling.tasks import squad_job
    result = squad_job.run(squad_job.SquadJob(
        vocab_file=".../vocab.txt", bert_config_file=".../bert_config.json",
        init_checkpoint=".../bert_model.ckpt", do_train=True, train_file="train-v1.1.json",
        do_predict=True, predict_file="dev-v1.1.json", output_dir="/tmp/squad"))
    result.eval_results["f1"]

`SquadJob` holds the flags of Google's `run_squad.py` (same names and
defaults: max_seq_length 384, doc_stride 128, max_query_length 64,
n_best_size 20, max_answer_length 30, ...) plus the trainer's.

`run(job)`:

1. checks the flags, the casing against the checkpoint's name,
   `max_seq_length` against the config and the vocabulary; reads the JSON
   files (a bad question is a one-line error naming the file and
   ``data[i].paragraphs[j].qas[k]``) and writes ``train.tf_record`` /
   ``eval.tf_record`` (`data.squad`);
2. fine-tunes `modeling.tasks.span_qa.BertSpanQA` with the project's one
   trainer (or restores the latest checkpoint in `output_dir`);
3. with `do_predict`, writes ``predictions.json``, ``nbest_predictions.json``
   and, with `version_2_with_negative`, ``null_odds.json``; when the predict
   file has answers, exact match and F1 (official normalisation) go to
   ``eval_results.json`` (and are printed).

Registered as ``registry.tasks.get("squad")``.
"""

import dataclasses
import json
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import squad
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import input_formats
from modeling.tasks import length_batching
from modeling.tasks import span_qa
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training.options import option

__all__ = ["SquadJob", "SquadJobError", "SquadResult", "SquadRunner", "run"]

SquadJobError = ClassifierJobError


@dataclasses.dataclass
class SquadJob(settings.TrainerSettings, input_pipeline.LengthBatchingSettings,
               job_lib.EncoderSettings, settings.FineTuningSettings, settings.PredictSettings):
    """Everything a SQuAD run needs; the fields are `run_squad.py`'s flags."""

    max_seq_length: int = settings.option_from(settings.TextSettings, "max_seq_length", 384)
    # Google's flags.
    train_file: Optional[str] = option(None, "SQuAD json for training. E.g., train-v1.1.json")
    predict_file: Optional[str] = option(
        None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
    doc_stride: int = option(
        128, "When splitting up a long document into chunks, how much stride to take between "
        "chunks.")
    max_query_length: int = option(
        64, "The maximum number of tokens for the question. Questions longer than this will "
        "be truncated to this length.")
    n_best_size: int = option(
        20, "The total number of n-best predictions to generate in the nbest_predictions.json "
        "output file.")
    max_answer_length: int = option(
        30, "The maximum length of an answer that can be generated. This is needed because "
        "the start and end predictions are not conditioned on one another.")
    version_2_with_negative: bool = option(
        False, "If true, the SQuAD examples contain some that do not have an answer.")
    null_score_diff_threshold: float = option(
        0.0, "If null_score - best_non_null is greater than the threshold predict null.")


@dataclasses.dataclass
class SquadResult:
    """What `run` produced (predictions etc. empty without do_predict)."""

    predictions: dict
    nbest: dict
    null_odds: dict
    eval_results: dict
    output_dir: str


_POSITIVE = ("max_query_length", "doc_stride", "n_best_size", "max_answer_length",
             "train_batch_size", "predict_batch_size", "gradient_accumulation_steps")
_SPLITS = (("do_train", "train_file"), ("do_predict", "predict_file"))


class SquadRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with span QA's hooks."""

    error = SquadJobError
    modes = ("do_train", "do_predict")
    example_name = "training questions"

    def check(self):
        job = self.job
        self.check_modes()
        self.check_required("bert_config_file", "vocab_file", "output_dir")
        for mode, name in _SPLITS:
            if getattr(job, mode) and not getattr(job, name):
                raise SquadJobError("If `%s` is True, then `%s` must be specified." % (mode, name))
        for mode, name in _SPLITS:
            if getattr(job, mode) and not tf.io.gfile.exists(getattr(job, name)):
                raise SquadJobError("--%s=%s: no such file" % (name, getattr(job, name)))
        for name in _POSITIVE:
            if getattr(job, name) < 1:
                raise SquadJobError("--%s must be positive, got %d." % (name, getattr(job, name)))
        if job.max_seq_length <= job.max_query_length + 3:
            raise SquadJobError(
                "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                % (job.max_seq_length, job.max_query_length))
        self.check_case_matches_checkpoint()
        self.family, self.config = self.load_family_config()
        self.check_training_values()
        input_pipeline.check_length_batching(job, SquadJobError)
        self.check_files("vocab_file")
        self.tokenizer = self.load_tokenizer(self.config)
        # Read every file here: a bad question is reported before any training
        # and before anything is written.
        self.read_splits()

    def check_family(self, family):
        # A bidirectional encoder of question and document: BERT-style families,
        # DistilBERT (no pooler, its first token); not GPT's, XLNet's, ... own
        # input formats, nor a causal LM.
        input_formats.check_token_encoder(
            self.job, family, "span QA packs question and document for", SquadJobError,
            takes=lambda f: f.name not in input_formats.FORMATS)
        if self.job.model_family in input_formats.FORMATS:
            raise SquadJobError(
                "--model_family=%s: span QA packs [CLS] question [SEP] document [SEP] for a "
                "bidirectional encoder; use a BERT-style family (e.g. bert, albert, roberta, "
                "distilbert)" % self.job.model_family)

    def read_splits(self):
        """Reads the files the modes need into `train_examples`, `predict_examples` (None if
        not needed); a bad question is one line naming the file and the question."""
        job = self.job
        try:
            self.train_examples = self._read("train_file", True) if job.do_train else None
            self.predict_examples = (self._read("predict_file", False) if job.do_predict
                                     else None)
        except squad.SquadDataError as e:
            raise SquadJobError(str(e)) from None

    def _read(self, name, is_training):
        path = getattr(self.job, name)
        examples = squad.read_squad_examples(path, is_training, self.job.version_2_with_negative)
        if not examples:
            raise SquadJobError("--%s=%s has no questions." % (name, path))
        return examples

    def _features(self, examples, is_training):
        job = self.job
        return squad.convert_examples_to_features(
            examples, self.tokenizer, max_seq_length=job.max_seq_length,
            doc_stride=job.doc_stride, max_query_length=job.max_query_length,
            is_training=is_training)

    def _record(self, name):
        return os.path.join(self.job.output_dir, name)

    def prepare(self):
        train_examples = self.train_examples
        if train_examples is not None:
            num_train_steps, _ = self.training_steps(len(train_examples))
        self.write_splits()
        if train_examples is not None:
            logging.info("***** Running training *****")
            logging.info("  Num orig examples = %d", len(train_examples))
            logging.info("  Num split examples = %d", len(self.train_features))
            logging.info("  Num steps = %d", num_train_steps)
        return len(train_examples) if train_examples is not None else None

    def write_splits(self):
        """The document windows of the questions read (`train_features`,
        `predict_features`; None if not read) written to train.tf_record / eval.tf_record."""
        self.train_features = self.predict_features = None
        if self.train_examples is not None:
            self.train_features = self._features(self.train_examples, True)
            squad.write_features(self.train_features, self._record("train.tf_record"), True)
        if self.predict_examples is not None:
            self.predict_features = self._features(self.predict_examples, False)
            squad.write_features(self.predict_features, self._record("eval.tf_record"), False)

    def build_model(self):
        return span_qa.BertSpanQA.from_config_object(self.config, family=self.family)

    def train_input_fn(self):
        job = self.job
        return length_batching.input_fn(
            job, squad.input_fn_builder(self._record("train.tf_record"), job.max_seq_length, True,
                                        job.train_batch_size, seed=job.seed),
            job.train_batch_size, length_batching.TRAIN)

    def predict(self, trainer):
        """(predictions, nbest, null_odds, scores); the scores ({} without gold answers)."""
        job, examples, features = self.job, self.predict_examples, self.predict_features
        logging.info("***** Running predictions *****")
        logging.info("  Num orig examples = %d", len(examples))
        logging.info("  Num split examples = %d", len(features))
        # Windows grouped by length and trimmed; logits padded back with the
        # model's padding logit, outputs in window order.
        predict_fn = length_batching.input_fn(
            job, squad.input_fn_builder(self._record("eval.tf_record"), job.max_seq_length, False,
                                        job.predict_batch_size),
            job.predict_batch_size, length_batching.PREDICT)
        outputs = length_batching.predict(
            trainer, predict_fn, ["unique_ids", "start_logits", "end_logits"], job,
            sequence_outputs=["start_logits", "end_logits"], pad_value=-10000.0)
        results = squad.stack_results(outputs["unique_ids"], outputs["start_logits"],
                                      outputs["end_logits"])
        if len(results) != len(features):
            raise SquadJobError("Predicted %d windows but %s has %d."
                                % (len(results), job.predict_file, len(features)))
        predictions, nbest, null_odds = self.answers(results)
        if trainer.is_chief:
            paths = squad.write_predictions(job.output_dir, predictions, nbest,
                                            null_odds if job.version_2_with_negative else None)
            for path in paths.values():
                print("Wrote %s" % path)
        scores = {}
        if squad.has_gold_answers(examples):
            scores = squad.evaluate(examples, predictions)
            scores["global_step"] = trainer.current_step()
            if trainer.is_chief:
                atomic.write_text(os.path.join(job.output_dir, "eval_results.json"),
                                  json.dumps(scores, indent=2, sort_keys=True) + "\n")
            job_lib.print_results(scores)
        return predictions, nbest, null_odds, scores

    def answers(self, results):
        """(predictions, nbest, null_odds): the answers decoded from the predict windows'
        `results` (`squad.stack_results`) as Google's run_squad.py does."""
        job = self.job
        return squad.postprocess(
            self.predict_examples, self.predict_features, results, n_best_size=job.n_best_size,
            max_answer_length=job.max_answer_length, do_lower_case=job.do_lower_case,
            version_2_with_negative=job.version_2_with_negative,
            null_score_diff_threshold=job.null_score_diff_threshold)

    def finish(self, trainer, eval_results, predictions):
        result = SquadResult(predictions={}, nbest={}, null_odds={}, eval_results={},
                             output_dir=self.job.output_dir)
        if predictions is not None:
            (result.predictions, result.nbest, result.null_odds,
             result.eval_results) = predictions
        print("Checkpoints:  %s" % os.path.abspath(self.job.output_dir))
        return result


def run(job):
    """Runs `job` (train and/or predict); returns a `SquadResult`."""
    return SquadRunner(job).run()


registry.tasks.register("squad", FineTuningTask(
    name="squad",
    description="Extractive QA on SQuAD 1.1/2.0 or CMRC JSON: start/end logits over the "
                "document windows (Google's run_squad.py); exact match and F1",
    model_class=span_qa.BertSpanQA, job_class=SquadJob, run=run))
