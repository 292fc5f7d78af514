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
from data import squad
from data import tokenization
from modeling import checkpoints
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import input_formats
from modeling.tasks import span_qa
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import optimization
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["SquadJob", "SquadJobError", "SquadResult", "run"]

SquadJobError = ClassifierJobError


@dataclasses.dataclass
class SquadJob(settings.TrainerSettings):
    """Everything a SQuAD run needs; the fields are `run_squad.py`'s flags."""

    model_family: str = option(
        "bert", "The encoder's model family (bert, albert, ...): how --bert_config_file and "
        "--init_checkpoint are read.")
    # Google's flags.
    bert_config_file: Optional[str] = option(
        None, "The config json file corresponding to the pre-trained BERT model. This "
        "specifies the model architecture.")
    vocab_file: Optional[str] = option(
        None, "The vocabulary file that the BERT model was trained on.")
    output_dir: Optional[str] = option(
        None, "The output directory where the model checkpoints will be written.")
    train_file: Optional[str] = option(None, "SQuAD json for training. E.g., train-v1.1.json")
    predict_file: Optional[str] = option(
        None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
    init_checkpoint: Optional[str] = option(
        None, "Initial checkpoint (usually from a pre-trained BERT model): a Google "
        "bert_model.ckpt prefix, a checkpoint of this project, or HF safetensors.")
    do_lower_case: bool = option(
        True, "Whether to lower case the input text. Should be True for uncased models and "
        "False for cased models.")
    max_seq_length: int = option(
        384, "The maximum total input sequence length after WordPiece tokenization. "
        "Sequences longer than this will be truncated, and sequences shorter than this will "
        "be padded.")
    doc_stride: int = option(
        128, "When splitting up a long document into chunks, how much stride to take between "
        "chunks.")
    max_query_length: int = option(
        64, "The maximum number of tokens for the question. Questions longer than this will "
        "be truncated to this length.")
    do_train: bool = option(False, "Whether to run training.")
    do_predict: bool = option(False, "Whether to run eval on the dev set.")
    train_batch_size: int = option(32, "Total batch size for training.")
    predict_batch_size: int = option(8, "Total batch size for predictions.")
    learning_rate: float = option(5e-5, "The initial learning rate for Adam.")
    num_train_epochs: float = option(3.0, "Total number of training epochs to perform.")
    warmup_proportion: float = option(
        0.1, "Proportion of training to perform linear learning rate warmup for. E.g., 0.1 = "
        "10% of training.")
    save_checkpoints_steps: int = option(1000, "How often to save the model checkpoint.")
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
    seed: Optional[int] = option(None, "Random seed for weights, dropout and input shuffling.")


@dataclasses.dataclass
class SquadResult:
    """What `run` produced (predictions etc. empty without do_predict)."""

    predictions: dict
    nbest: dict
    null_odds: dict
    eval_results: dict
    output_dir: str


def _check_job(job):
    if not (job.do_train or job.do_predict):
        raise SquadJobError("At least one of `do_train` or `do_predict` must be True.")
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        if not getattr(job, name):
            raise SquadJobError("--%s is required." % name)
    if job.do_train and not job.train_file:
        raise SquadJobError("If `do_train` is True, then `train_file` must be specified.")
    if job.do_predict and not job.predict_file:
        raise SquadJobError("If `do_predict` is True, then `predict_file` must be specified.")
    for name in ("train_file", "predict_file"):
        path = getattr(job, name)
        if path and (job.do_train if name == "train_file" else job.do_predict):
            if not tf.io.gfile.exists(path):
                raise SquadJobError("--%s=%s: no such file" % (name, path))
    for name in ("max_query_length", "doc_stride", "n_best_size", "max_answer_length",
                 "train_batch_size", "predict_batch_size", "gradient_accumulation_steps"):
        if getattr(job, name) < 1:
            raise SquadJobError("--%s must be positive, got %d." % (name, getattr(job, name)))
    if job.max_seq_length <= job.max_query_length + 3:
        raise SquadJobError(
            "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
            % (job.max_seq_length, job.max_query_length))
    try:
        tokenization.validate_case_matches_checkpoint(job.do_lower_case, job.init_checkpoint)
    except ValueError as e:
        raise SquadJobError(str(e)) from e
    try:
        family = registry.families.get(job.model_family)
    except registry.RegistryError as e:
        raise SquadJobError("--model_family: %s" % e) from e
    if not family.has_pooler or job.model_family in input_formats.FORMATS:
        # GPT's, XLNet's, ... own input formats: no [CLS] question [SEP] doc [SEP].
        raise SquadJobError(
            "--model_family=%s: span QA packs [CLS] question [SEP] document [SEP] with a "
            "WordPiece vocabulary; use a BERT-style family (e.g. bert, albert)"
            % job.model_family)
    if not os.path.exists(job.bert_config_file):
        raise SquadJobError("--bert_config_file=%s: no such file" % job.bert_config_file)
    config = family.load_config(job.bert_config_file)
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_positions is not None and job.max_seq_length > max_positions:
        raise SquadJobError(
            "Cannot use sequence length %d because the BERT model (%s) was only trained up "
            "to sequence length %d (max_position_embeddings)."
            % (job.max_seq_length, job.bert_config_file, max_positions))
    validation.validate_training_values(
        job.do_train, learning_rate=job.learning_rate,
        save_checkpoints_steps=job.save_checkpoints_steps,
        keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
        num_train_epochs=job.num_train_epochs if job.do_train else None,
        warmup_proportion=job.warmup_proportion, do_eval=job.do_predict)
    if job.nan_policy not in trainer_lib.NAN_POLICIES:
        raise SquadJobError("--nan_policy=%s: expected one of %s"
                            % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))
    if not os.path.exists(job.vocab_file):
        raise SquadJobError("--vocab_file=%s: no such file" % job.vocab_file)
    vocab = tokenization.load_vocab(job.vocab_file)
    tokenization.check_vocab_special_tokens(vocab, job.vocab_file,
                                            required=("[UNK]", "[CLS]", "[SEP]"))
    if len(vocab) != config.vocab_size:
        raise SquadJobError(
            "The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d; "
            "use the vocab.txt that belongs to the model."
            % (job.vocab_file, len(vocab), job.bert_config_file, config.vocab_size))
    return family, config, tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)


def run(job):
    """Runs `job` (train and/or predict); returns a `SquadResult`."""
    family, config, tokenizer = _check_job(job)
    # Read every file first: a bad question is reported before any training
    # and before anything is written.
    train_examples = predict_examples = None
    try:
        if job.do_train:
            train_examples = squad.read_squad_examples(job.train_file, True,
                                                       job.version_2_with_negative)
            if not train_examples:
                raise SquadJobError("--train_file=%s has no questions." % job.train_file)
        if job.do_predict:
            predict_examples = squad.read_squad_examples(job.predict_file, False,
                                                         job.version_2_with_negative)
            if not predict_examples:
                raise SquadJobError("--predict_file=%s has no questions." % job.predict_file)
    except squad.SquadDataError as e:
        raise SquadJobError(str(e)) from None
    strategy = settings.start_run(job)
    with settings.output_dir_lock(job, strategy):
        return _run(job, config, family, tokenizer, strategy, train_examples,
                    predict_examples)


def _features(job, examples, tokenizer, is_training):
    return squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=job.max_seq_length, doc_stride=job.doc_stride,
        max_query_length=job.max_query_length, is_training=is_training)


def _run(job, config, family, tokenizer, strategy, train_examples, predict_examples):
    output_dir = job.output_dir
    tf.io.gfile.makedirs(output_dir)

    num_train_steps = num_warmup_steps = 0
    train_record = os.path.join(output_dir, "train.tf_record")
    if train_examples is not None:
        per_update = job.train_batch_size * job.gradient_accumulation_steps
        num_train_steps = int(len(train_examples) / per_update * job.num_train_epochs)
        num_warmup_steps = int(num_train_steps * job.warmup_proportion)
        if num_train_steps < 1:
            raise SquadJobError("%d training questions, --train_batch_size=%d and "
                                "--num_train_epochs=%s make no training step."
                                % (len(train_examples), job.train_batch_size,
                                   job.num_train_epochs))
        train_features = _features(job, train_examples, tokenizer, True)
        squad.write_features(train_features, train_record, True)
        logging.info("***** Running training *****")
        logging.info("  Num orig examples = %d", len(train_examples))
        logging.info("  Num split examples = %d", len(train_features))
        logging.info("  Num steps = %d", num_train_steps)
    predict_record = os.path.join(output_dir, "eval.tf_record")
    predict_features = None
    if predict_examples is not None:
        predict_features = _features(job, predict_examples, tokenizer, False)
        squad.write_features(predict_features, predict_record, False)

    def model_fn():
        return span_qa.BertSpanQA.from_config_object(config, family=family)

    def init_fn(model):
        if job.init_checkpoint:
            checkpoints.init_from_checkpoint(model, job.init_checkpoint)
            logging.info("Initialised the encoder from %s", job.init_checkpoint)
        else:
            logging.warning("No --init_checkpoint: the encoder starts from random weights.")

    trainer = trainer_lib.Trainer(
        strategy, model_fn=model_fn,
        optimizer_fn=lambda: optimization.create_optimizer(
            job.learning_rate, max(1, num_train_steps), num_warmup_steps,
            **job.optimizer_options()),
        model_dir=output_dir, train_batch_size=job.train_batch_size,
        num_train_steps=num_train_steps, save_checkpoints_steps=job.save_checkpoints_steps,
        init_fn=init_fn, **job.trainer_options())

    if train_examples is not None:
        trainer.train(squad.input_fn_builder(train_record, job.max_seq_length, True,
                                             job.train_batch_size, seed=job.seed))
    else:
        trainer.restore_or_initialize()

    result = SquadResult(predictions={}, nbest={}, null_odds={}, eval_results={},
                         output_dir=output_dir)
    if predict_examples is None:
        print("Checkpoints:  %s" % os.path.abspath(output_dir))
        return result
    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(predict_examples))
    logging.info("  Num split examples = %d", len(predict_features))
    outputs = trainer.predict(
        squad.input_fn_builder(predict_record, job.max_seq_length, False,
                               job.predict_batch_size),
        ["unique_ids", "start_logits", "end_logits"], restore=False)
    results = squad.stack_results(outputs["unique_ids"], outputs["start_logits"],
                                  outputs["end_logits"])
    if len(results) != len(predict_features):
        raise SquadJobError("Predicted %d windows but %s has %d."
                            % (len(results), job.predict_file, len(predict_features)))
    predictions, nbest, null_odds = squad.postprocess(
        predict_examples, predict_features, results, n_best_size=job.n_best_size,
        max_answer_length=job.max_answer_length, do_lower_case=job.do_lower_case,
        version_2_with_negative=job.version_2_with_negative,
        null_score_diff_threshold=job.null_score_diff_threshold)
    result.predictions, result.nbest, result.null_odds = predictions, nbest, null_odds
    if trainer.is_chief:
        paths = squad.write_predictions(output_dir, predictions, nbest,
                                        null_odds if job.version_2_with_negative else None)
        for path in paths.values():
            print("Wrote %s" % path)
    if squad.has_gold_answers(predict_examples):
        scores = squad.evaluate(predict_examples, predictions)
        scores["global_step"] = trainer.current_step()
        if trainer.is_chief:
            atomic.write_text(os.path.join(output_dir, "eval_results.json"),
                              json.dumps(scores, indent=2, sort_keys=True) + "\n")
        print("***** Eval results *****")
        for key in sorted(scores):
            print("  %s = %s" % (key, scores[key]))
        result.eval_results = scores
    print("Checkpoints:  %s" % os.path.abspath(output_dir))
    return result


registry.tasks.register("squad", FineTuningTask(
    name="squad",
    description="Extractive QA on SQuAD 1.1/2.0 or CMRC JSON: start/end logits over the "
                "document windows (Google's run_squad.py); exact match and F1",
    model_class=span_qa.BertSpanQA, job_class=SquadJob, run=run))
