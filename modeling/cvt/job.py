"""Cross-view training of a BiLSTM tagger as a library call: what `run/run_cvt.py` runs.

    from modeling.cvt import job as cvt_job
    result = cvt_job.run(cvt_job.CvtJob(output_dir="/tmp/cvt"))     # the demo
    result.eval_results["test_f1"]

    cvt_job.run(cvt_job.CvtJob(train_file="train.txt", dev_file="dev.txt",
                               test_file="test.txt", unlabeled_file="news.txt",
                               vocab_file="vocab.txt", output_dir="/tmp/cvt"))

Data: CoNLL-style BIO files (`data.processors.conll`: token first, tag last,
blank line between sentences) for train / dev / test; `unlabeled_file` is
plain text, one sentence per line (split into words as ELMo's pipeline
does); `vocab_file` a word vocabulary in ELMo's format
(`data.word_vocab`, default the bundled data/sample/elmo/vocab.txt).
Without `train_file` the job generates the demo data
(`modeling.cvt.data.write_demo_data`, with its own vocab.txt) in
``output_dir/data``.

`use_unlabeled=False` trains the same tagger, same steps, on the labelled
batches only (the baseline CVT is compared with).

The cross-view loss starts at step `unlabeled_start_step` and its weight
rises linearly to `unlabeled_weight` over `unlabeled_rampup_steps`: the
teacher (the primary module) first learns from the labelled sentences, as
it would from a large labelled set in the paper; from the start, a random
teacher's guesses pull the shared layer towards noise (on the demo, with
the loss from step 0: test F1 0.338 / 0.464, seeds 1 / 2, below the
labelled-only tagger's 0.530 / 0.557).
`unlabeled_trains_embeddings` (default True, as in the paper): the
cross-view loss also trains the word embeddings -- this is what teaches the
tagger the words only the unlabelled text shows (on the demo, with it off,
CVT's test F1 falls to 0.600 / 0.547, seeds 1 / 2, about the labelled-only
tagger's).

The defaults are the demo's budget (see `modeling.cvt.data`): 40 labelled
and 600 unlabelled sentences, 400 steps; measured test F1, seeds 1 / 2 / 3:
CVT 0.862 / 0.889 / 0.974, labelled only 0.630 / 0.600 / 0.581. (The two
comparisons above were measured before the primary module read both layers
and the edge views left the loss, when the default run gave CVT 0.798 /
0.684 / 0.733 against 0.530 / 0.557 / 0.565.)

Outputs in `output_dir` (atomically written): ``eval_results.txt`` with the
dev set's eval_precision, eval_recall, eval_f1 (entity level, as seqeval),
eval_accuracy, eval_loss, and the test set's test_precision, test_recall,
test_f1 (per entity type too); ``test_predictions.txt`` (``word gold
predicted``); ``label_list.txt``; checkpoints and TensorBoard logs (the
project's one trainer: resume, SIGTERM, NaN policy as every job).

Registered as ``registry.tasks.get("cvt")``.
"""

import dataclasses
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from data import word_vocab
from data.processors import conll
from modeling import registry
from modeling.cvt import data as cvt_data
from modeling.cvt import model as cvt_model
from modeling.tasks import FineTuningTask
from modeling.tasks import seqeval
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["CvtJob", "CvtJobError", "CvtResult", "DEFAULT_VOCAB", "run"]

CvtJobError = ClassifierJobError
DEFAULT_VOCAB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "data", "sample", "elmo", "vocab.txt")
LABEL_LIST_FILE = "label_list.txt"


@dataclasses.dataclass
class CvtJob(settings.TrainerSettings):
    """Everything a CVT run needs; the fields are `run_cvt.py`'s flags."""

    train_file: Optional[str] = option(
        None, "Labelled training sentences (CoNLL, BIO). None: the bundled demo.")
    dev_file: Optional[str] = option(None, "Labelled dev sentences (CoNLL, BIO).")
    test_file: Optional[str] = option(None, "Labelled test sentences (CoNLL, BIO).")
    unlabeled_file: Optional[str] = option(
        None, "Unlabelled text, one sentence per line (for --use_unlabeled).")
    vocab_file: Optional[str] = option(
        None, "Word vocabulary (ELMo's format); default data/sample/elmo/vocab.txt.")
    output_dir: Optional[str] = option(None, "Where checkpoints and results are written.")
    do_lower_case: bool = option(True, "Lower case words before the vocabulary lookup.")
    use_unlabeled: bool = option(
        True, "Cross-view training on --unlabeled_file; False: labelled data only.")
    max_seq_length: int = option(48, "Words per sentence; words beyond are predicted O.")
    embedding_dim: int = option(32, "Word vector width.")
    lstm_dim: int = option(32, "LSTM units per direction (both layers).")
    hidden_dim: int = option(32, "Hidden width of the prediction modules.")
    dropout: float = option(0.3, "Dropout on embeddings and LSTM outputs.")
    word_dropout: float = option(
        0.3, "Training: each word is replaced by <UNK> with this probability.")
    unlabeled_trains_embeddings: bool = option(
        True, "Whether the cross-view loss also trains the word embeddings (as in the "
        "paper; False: only the first LSTM layer and the auxiliary modules).")
    unlabeled_weight: float = option(0.5, "Weight of the cross-view loss.")
    unlabeled_start_step: int = option(
        100, "Step at which the cross-view loss starts (the primary module first "
        "learns from the labelled sentences).")
    unlabeled_rampup_steps: int = option(
        100, "Steps over which the cross-view loss's weight rises linearly from 0 to "
        "--unlabeled_weight.")
    train_batch_size: int = option(16, "Labelled sentences per step.")
    unlabeled_batch_size: int = option(32, "Unlabelled sentences per step.")
    eval_batch_size: int = option(32, "Sentences per eval batch.")
    learning_rate: float = option(3e-3, "Peak learning rate.")
    num_train_steps: int = option(400, "Training steps.")
    warmup_proportion: float = option(0.1, "Proportion of training with linear warmup.")
    save_checkpoints_steps: int = option(1000, "How often to save a checkpoint.")
    demo_num_labeled: int = option(40, "The demo's labelled training sentences.")
    seed: Optional[int] = option(1, "Random seed for weights, dropout and input shuffling.")


@dataclasses.dataclass
class CvtResult:
    eval_results: dict
    test_predictions: Optional[list]
    output_dir: str
    data_files: dict


def _read(path, flag):
    if not tf.io.gfile.exists(path):
        raise CvtJobError("--%s=%s: no such file" % (flag, path))
    sentences = conll.read_conll(path, "bio")
    if not sentences:
        raise CvtJobError("--%s=%s: no sentences (expected CoNLL: `word tag` per line, a "
                          "blank line between sentences)" % (flag, path))
    return sentences


def _flat_scores(scores, prefix):
    values = {prefix + key: scores[key] for key in ("precision", "recall", "f1")}
    for type_, s in scores["per_type"].items():
        for key in ("precision", "recall", "f1"):
            values["%s%s_%s" % (prefix, type_, key)] = s[key]
    return values


def _tags(sentences, predicted, label_list):
    return [[label_list[int(i)] for i in row[:len(s.words)]]
            + ["O"] * max(0, len(s.words) - len(row)) for s, row in zip(sentences, predicted)]


class CvtRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with CVT's hooks.

    It always trains, for `num_train_steps`; the dev set is its evaluation,
    the test set its prediction, both reported in one eval_results.txt.
    """

    error = CvtJobError
    modes = ()
    training = True
    dev = test = None  # the labelled splits, read by `prepare`

    @property
    def evaluating(self):
        return self.dev is not None

    @property
    def predicting(self):
        return self.test is not None

    def check(self):
        job = self.job
        self.check_required("output_dir")
        if job.train_file is None and (job.dev_file or job.test_file or job.unlabeled_file):
            raise CvtJobError("--dev_file/--test_file/--unlabeled_file need --train_file "
                              "(without any of them the job runs the bundled demo).")
        if job.train_file and job.use_unlabeled and not job.unlabeled_file:
            raise CvtJobError("--use_unlabeled needs --unlabeled_file (plain text, one sentence "
                              "per line); or pass --nouse_unlabeled for the labelled-only tagger.")
        for names, bad, requirement in (
                (("max_seq_length", "embedding_dim", "lstm_dim", "hidden_dim",
                  "train_batch_size", "unlabeled_batch_size", "eval_batch_size",
                  "num_train_steps", "gradient_accumulation_steps", "demo_num_labeled"),
                 lambda v: v < 1, "must be positive"),
                (("dropout", "word_dropout"), lambda v: not 0.0 <= v < 1.0, "must be in [0, 1)"),
                (("unlabeled_weight", "unlabeled_start_step", "unlabeled_rampup_steps"),
                 lambda v: v < 0, "must be >= 0")):
            for name in names:
                if bad(getattr(job, name)):
                    raise CvtJobError("--%s %s, got %r" % (name, requirement, getattr(job, name)))
        # Steps, not epochs: the warm-up proportion is checked on its own.
        validation.validate_training_values(True, warmup_proportion=job.warmup_proportion)
        self.check_training_values(epochs=False)
        try:
            self.vocab = word_vocab.WordVocabulary(job.vocab_file or DEFAULT_VOCAB)
        except word_vocab.VocabularyError as e:
            raise CvtJobError(str(e)) from None

    def prepare(self):
        job = self.job
        files = {"train": job.train_file, "dev": job.dev_file, "test": job.test_file,
                 "unlabeled": job.unlabeled_file}
        if not job.train_file:
            demo = cvt_data.write_demo_data(self._path("data"), num_labeled=job.demo_num_labeled)
            files = {name: demo[name] for name in files}
            if not job.vocab_file:
                self.vocab = word_vocab.WordVocabulary(demo["vocab"])
            logging.info("Demo data in %s", os.path.dirname(demo["train"]))
        self.files = files
        train = _read(files["train"], "train_file")
        self.dev = _read(files["dev"], "dev_file") if files["dev"] else None
        self.test = _read(files["test"], "test_file") if files["test"] else None
        labels = conll.label_list_from(train)
        # Checked before anything is written (a finished run's files stay as they are).
        self.check_label_list_unchanged(labels, LABEL_LIST_FILE)
        for sentences in (self.dev, self.test):
            conll.check_known_tags(sentences or [], labels)
        plain = None
        if job.use_unlabeled:  # read (and refused) before anything is written too
            plain = cvt_data.read_unlabeled(files["unlabeled"], job.do_lower_case)
            if not plain:
                raise CvtJobError("--unlabeled_file=%s: no sentences" % files["unlabeled"])
        self.label_list = self.saved_label_list(labels, LABEL_LIST_FILE)
        self._write(train, "train")
        for name, sentences in (("eval", self.dev), ("predict", self.test)):
            if sentences is not None:
                self._write(sentences, name, pad_to_multiple=job.eval_batch_size)
        if job.use_unlabeled:
            cvt_data.write_unlabeled_records(plain, self.vocab, job.max_seq_length,
                                             self._path("unlabeled.tf_record"), job.do_lower_case)
            logging.info("CVT: %d labelled, %d unlabelled sentences", len(train), len(plain))
        else:
            logging.info("Labelled only: %d sentences", len(train))
        return len(train)

    def _path(self, name):
        return os.path.join(self.job.output_dir, name)

    def _write(self, sentences, name, **kwargs):
        job = self.job
        cvt_data.write_tagged_records(sentences, self.label_list, self.vocab, job.max_seq_length,
                                      self._path(name + ".tf_record"), job.do_lower_case,
                                      **kwargs)

    def training_steps(self, num_examples):
        steps = self.job.num_train_steps
        return steps, int(steps * self.job.warmup_proportion)

    def build_model(self):
        job, vocab = self.job, self.vocab
        model = cvt_model.CvtTagger(
            len(vocab), len(self.label_list), embedding_dim=job.embedding_dim,
            lstm_dim=job.lstm_dim, hidden_dim=job.hidden_dim, dropout=job.dropout,
            unlabeled_weight=job.unlabeled_weight, word_dropout=job.word_dropout,
            unk_id=vocab.unk_id, unlabeled_trains_embeddings=job.unlabeled_trains_embeddings)
        return model.build_all(job.max_seq_length)

    def build_trainer(self, **overrides):
        return super().build_trainer(init_fn=None, **overrides)

    def train_input_fn(self):
        job, n = self.job, self.job.max_seq_length
        train_fn = cvt_data.tagged_input_fn(self._path("train.tf_record"), n,
                                            job.train_batch_size, True, seed=job.seed)
        if not job.use_unlabeled:
            return train_fn
        accumulate = job.gradient_accumulation_steps
        return cvt_data.unlabeled_input_fn(train_fn, self._path("unlabeled.tf_record"), n,
                                           job.unlabeled_batch_size, seed=job.seed,
                                           start_batch=job.unlabeled_start_step * accumulate,
                                           rampup_batches=job.unlabeled_rampup_steps
                                           * accumulate)

    def _score(self, trainer, name, sentences, prefix):
        """(tags, results): loss, accuracy and entity scores of one split, keys `prefix`..."""
        input_fn = cvt_data.tagged_input_fn(self._path(name + ".tf_record"),
                                            self.job.max_seq_length, self.job.eval_batch_size,
                                            False)
        raw = trainer.evaluate(input_fn, max_steps=None, restore=False)
        results = {"global_step": raw["global_step"], prefix + "loss": raw["loss"],
                   prefix + "accuracy": raw["accuracy"]}
        predicted = trainer.predict(input_fn, ["predicted_ids"], restore=False)["predicted_ids"]
        tags = _tags(sentences, predicted, self.label_list)
        results.update(_flat_scores(seqeval.entity_scores([s.tags for s in sentences], tags),
                                    prefix))
        return tags, results

    def evaluate(self, trainer):
        return self._score(trainer, "eval", self.dev, "eval_")[1]

    def predict(self, trainer):
        tags, results = self._score(trainer, "predict", self.test, "test_")
        if trainer.is_chief:
            conll.write_conll_predictions(self._path("test_predictions.txt"), self.test, tags)
        return tags, results

    def finish(self, trainer, eval_results, predictions):
        tags, test_results = predictions if predictions is not None else (None, {})
        results = dict(eval_results, **test_results)
        if trainer.is_chief and results:
            trainer_lib.write_eval_results(results, self._path("eval_results.txt"))
        job_lib.print_results(results, "Eval results (%s)" % (
            "CVT" if self.job.use_unlabeled else "labelled only"))
        return CvtResult(eval_results=results, test_predictions=tags,
                         output_dir=self.job.output_dir, data_files=self.files)


def run(job):
    """Trains (CVT or labelled-only), evaluates on dev and test; returns a `CvtResult`."""
    return CvtRunner(job).run()


registry.tasks.register("cvt", FineTuningTask(
    name="cvt",
    description="Cross-view training (Clark et al. 2018): BiLSTM tagger on CoNLL BIO files "
                "plus unlabelled text; entity-level F1 as seqeval",
    model_class=cvt_model.CvtTagger, job_class=CvtJob, run=run))
