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
(`modeling.elmo.vocabulary`, default the bundled data/sample/elmo/vocab.txt).
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
CVT 0.798 / 0.684 / 0.733, labelled only 0.530 / 0.557 / 0.565.

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

from data import atomic
from data.processors import conll
from data.processors.base import DataError
from modeling import registry
from modeling.cvt import data as cvt_data
from modeling.cvt import model as cvt_model
from modeling.elmo import vocabulary
from modeling.tasks import FineTuningTask
from modeling.tasks import seqeval
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import optimization
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


def _check_job(job):
    if not job.output_dir:
        raise CvtJobError("--output_dir is required.")
    if job.train_file is None and (job.dev_file or job.test_file or job.unlabeled_file):
        raise CvtJobError("--dev_file/--test_file/--unlabeled_file need --train_file "
                          "(without any of them the job runs the bundled demo).")
    if job.train_file and job.use_unlabeled and not job.unlabeled_file:
        raise CvtJobError("--use_unlabeled needs --unlabeled_file (plain text, one sentence "
                          "per line); or pass --nouse_unlabeled for the labelled-only tagger.")
    for name in ("max_seq_length", "embedding_dim", "lstm_dim", "hidden_dim",
                 "train_batch_size", "unlabeled_batch_size", "eval_batch_size",
                 "num_train_steps", "gradient_accumulation_steps", "demo_num_labeled"):
        if getattr(job, name) < 1:
            raise CvtJobError("--%s must be positive, got %r" % (name, getattr(job, name)))
    for name in ("dropout", "word_dropout"):
        if not 0.0 <= getattr(job, name) < 1.0:
            raise CvtJobError("--%s must be in [0, 1), got %r" % (name, getattr(job, name)))
    for name in ("unlabeled_weight", "unlabeled_start_step", "unlabeled_rampup_steps"):
        if getattr(job, name) < 0:
            raise CvtJobError("--%s must be >= 0, got %r" % (name, getattr(job, name)))
    validation.validate_training_values(
        True, learning_rate=job.learning_rate,
        save_checkpoints_steps=job.save_checkpoints_steps,
        keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
        warmup_proportion=job.warmup_proportion, do_eval=True)
    if job.nan_policy not in trainer_lib.NAN_POLICIES:
        raise CvtJobError("--nan_policy=%s: expected one of %s"
                          % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))
    try:
        return vocabulary.WordVocabulary(job.vocab_file or DEFAULT_VOCAB)
    except vocabulary.VocabularyError as e:
        raise CvtJobError(str(e)) from None


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


def run(job):
    """Trains (CVT or labelled-only), evaluates on dev and test; returns a `CvtResult`."""
    vocab = _check_job(job)
    strategy = settings.start_run(job)
    with settings.output_dir_lock(job, strategy):
        try:
            return _run(job, vocab, strategy)
        except DataError as e:
            raise CvtJobError(str(e)) from None


def _run(job, vocab, strategy):
    output_dir = job.output_dir
    tf.io.gfile.makedirs(output_dir)
    files = {"train": job.train_file, "dev": job.dev_file, "test": job.test_file,
             "unlabeled": job.unlabeled_file}
    if not job.train_file:
        demo = cvt_data.write_demo_data(os.path.join(output_dir, "data"),
                                        num_labeled=job.demo_num_labeled)
        files = {name: demo[name] for name in files}
        if not job.vocab_file:
            vocab = vocabulary.WordVocabulary(demo["vocab"])
        logging.info("Demo data in %s", os.path.dirname(demo["train"]))
    train = _read(files["train"], "train_file")
    dev = _read(files["dev"], "dev_file") if files["dev"] else None
    test = _read(files["test"], "test_file") if files["test"] else None
    label_list = conll.label_list_from(train)
    atomic.write_text(os.path.join(output_dir, LABEL_LIST_FILE),
                      "".join(label + "\n" for label in label_list))
    n = job.max_seq_length
    path = lambda name: os.path.join(output_dir, name)
    cvt_data.write_tagged_records(train, label_list, vocab, n, path("train.tf_record"),
                                  job.do_lower_case)
    for name, sentences in (("eval", dev), ("predict", test)):
        if sentences is not None:
            cvt_data.write_tagged_records(sentences, label_list, vocab, n,
                                          path(name + ".tf_record"), job.do_lower_case,
                                          pad_to_multiple=job.eval_batch_size)
    train_fn = cvt_data.tagged_input_fn(path("train.tf_record"), n, job.train_batch_size,
                                        True, seed=job.seed)
    accumulate = job.gradient_accumulation_steps
    if job.use_unlabeled:
        plain = cvt_data.read_unlabeled(files["unlabeled"], job.do_lower_case)
        if not plain:
            raise CvtJobError("--unlabeled_file=%s: no sentences" % files["unlabeled"])
        cvt_data.write_unlabeled_records(plain, vocab, n, path("unlabeled.tf_record"),
                                         job.do_lower_case)
        train_fn = cvt_data.unlabeled_input_fn(train_fn, path("unlabeled.tf_record"), n,
                                               job.unlabeled_batch_size, seed=job.seed,
                                               start_batch=job.unlabeled_start_step * accumulate,
                                               rampup_batches=job.unlabeled_rampup_steps
                                               * accumulate)
        logging.info("CVT: %d labelled, %d unlabelled sentences", len(train), len(plain))
    else:
        logging.info("Labelled only: %d sentences", len(train))

    def model_fn():
        model = cvt_model.CvtTagger(
            len(vocab), len(label_list), embedding_dim=job.embedding_dim,
            lstm_dim=job.lstm_dim, hidden_dim=job.hidden_dim, dropout=job.dropout,
            unlabeled_weight=job.unlabeled_weight, word_dropout=job.word_dropout,
            unk_id=vocab.unk_id, unlabeled_trains_embeddings=job.unlabeled_trains_embeddings)
        return model.build_all(n)

    steps = job.num_train_steps
    trainer = trainer_lib.Trainer(
        strategy, model_fn=model_fn,
        optimizer_fn=lambda: optimization.create_optimizer(
            job.learning_rate, steps, int(steps * job.warmup_proportion),
            **job.optimizer_options()),
        model_dir=output_dir, train_batch_size=job.train_batch_size, num_train_steps=steps,
        save_checkpoints_steps=job.save_checkpoints_steps, **job.trainer_options())
    trainer.train(train_fn)

    results = {}
    result = CvtResult(eval_results=results, test_predictions=None, output_dir=output_dir,
                       data_files=files)
    for name, sentences, prefix in (("eval", dev, "eval_"), ("predict", test, "test_")):
        if sentences is None:
            continue
        input_fn = cvt_data.tagged_input_fn(path(name + ".tf_record"), n,
                                            job.eval_batch_size, False)
        raw = trainer.evaluate(input_fn, max_steps=None, restore=False)
        results["global_step"] = raw.pop("global_step")
        results[prefix + "loss"] = raw["loss"]
        results[prefix + "accuracy"] = raw["accuracy"]
        predicted = trainer.predict(input_fn, ["predicted_ids"],
                                    restore=False)["predicted_ids"]
        tags = _tags(sentences, predicted, label_list)
        results.update(_flat_scores(seqeval.entity_scores([s.tags for s in sentences], tags),
                                    prefix))
        if name == "predict":
            result.test_predictions = tags
            if trainer.is_chief:
                conll.write_conll_predictions(path("test_predictions.txt"), sentences, tags)
    if trainer.is_chief and results:
        trainer_lib.write_eval_results(results, path("eval_results.txt"))
    print("***** Eval results (%s) *****" % ("CVT" if job.use_unlabeled else "labelled only"))
    for key in sorted(results):
        print("  %s = %s" % (key, results[key]))
    return result


registry.tasks.register("cvt", FineTuningTask(
    name="cvt",
    description="Cross-view training (Clark et al. 2018): BiLSTM tagger on CoNLL BIO files "
                "plus unlabelled text; entity-level F1 as seqeval",
    model_class=cvt_model.CvtTagger, job_class=CvtJob, run=run))
