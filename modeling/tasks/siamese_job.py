"""Siamese (bi-encoder) fine-tuning as a library call: what `run/run_siamese.py` runs.

    from modeling.tasks import siamese_job
    result = siamese_job.run(siamese_job.SiameseJob(
        data_dir="faq_pairs", vocab_file=".../vocab.txt",
        bert_config_file=".../config.json", init_checkpoint=".../model.safetensors",
        output_dir="/tmp/siamese", do_train=True, do_eval=True,
        pooling="mean", similarity="cosine", loss="in_batch", scale=20.0))
    result.eval_results["eval_recall_at_1"]

Data (`data.processors.pairs`): ``train.tsv`` and ``dev.tsv`` in `data_dir`
(or `train_file` / `dev_file`), tab-separated: ``query<TAB>positive`` for
the in-batch loss, ``text_a<TAB>text_b<TAB>label`` for the softmax loss (the
labels are the training file's, sorted, saved as ``label_list.txt``), and
``text_a<TAB>text_b<TAB>score`` (a float) for the cosine loss. A bad line is a
one-line error naming ``file:line``.

`run(job)`:

1. checks the flags, the casing against the checkpoint's name,
   `max_seq_length` against the config and the vocabulary; reads the splits
   and writes ``train.tf_record`` / ``eval.tf_record`` (each text packed on
   its own, `data.processors.pairs.write_pair_records`);
2. fine-tunes `modeling.tasks.siamese.BiEncoder` (one shared encoder) with
   the project's one trainer; `init_checkpoint` loads the encoder (Google
   TF1, HF safetensors such as all-MiniLM-L6-v2, or this project's own);
3. with `do_eval`, writes ``eval_results.txt``: eval_loss (and
   eval_accuracy for in_batch, over eval batches of `eval_batch_size`, and
   for softmax) and, from the pooled vectors of the whole dev set:

       in_batch  eval_recall_at_1, eval_recall_at_5, eval_mrr: every dev
                 query ranked against every distinct dev positive (the
                 FAQ task: find the stored question)
       softmax   eval_accuracy
       cosine    eval_pearson, eval_spearman of cos(u, v) with the scores

The trained checkpoint in `output_dir` is what `run/build_index.py
--init_checkpoint=<output_dir>` encodes the stored questions with.

Registered as ``registry.tasks.get("siamese")``.
"""

import dataclasses
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import tokenization
from data.processors import pairs
from data.processors.base import DataError
from modeling import checkpoints
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import classification
from modeling.tasks import siamese
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import optimization
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["SiameseJob", "SiameseJobError", "SiameseResult", "run", "retrieval_metrics"]

SiameseJobError = ClassifierJobError
LABEL_LIST_FILE = "label_list.txt"
_LABEL_KIND = {"in_batch": "none", "softmax": "class", "cosine": "float"}


@dataclasses.dataclass
class SiameseJob(settings.TrainerSettings):
    """Everything a bi-encoder run needs; the fields are `run_siamese.py`'s flags."""

    model_family: str = option("bert", "The encoder's model family (bert, albert, ...).")
    data_dir: Optional[str] = option(None, "Directory with train.tsv and dev.tsv.")
    train_file: Optional[str] = option(
        None, "Training pairs (a path, or a name in --data_dir).")
    dev_file: Optional[str] = option(None, "Dev pairs (a path, or a name in --data_dir).")
    bert_config_file: Optional[str] = option(
        None, "The config json file corresponding to the pre-trained BERT model (Google's "
        "bert_config.json or HF's config.json).")
    vocab_file: Optional[str] = option(
        None, "The vocabulary file that the BERT model was trained on.")
    output_dir: Optional[str] = option(None, "Where checkpoints and results are written.")
    init_checkpoint: Optional[str] = option(
        None, "Initial checkpoint: a Google bert_model.ckpt prefix, a checkpoint of this "
        "project, or HF safetensors (e.g. all-MiniLM-L6-v2).")
    do_lower_case: bool = option(True, "Lower case the input (True for uncased models).")
    max_seq_length: int = option(64, "Maximum word pieces per text with [CLS] and [SEP].")
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    train_batch_size: int = option(
        32, "Total batch size for training (the in-batch loss's negatives).")
    eval_batch_size: int = option(32, "Total batch size for eval.")
    learning_rate: float = option(2e-5, "The initial learning rate for Adam.")
    num_train_epochs: float = option(1.0, "Total number of training epochs to perform.")
    warmup_proportion: float = option(0.1, "Proportion of training with linear warmup.")
    save_checkpoints_steps: int = option(1000, "How often to save the model checkpoint.")
    pooling: str = option(
        "mean", "Sentence vector: [CLS] vector, mean or max over the real tokens.",
        choices=siamese.POOLINGS)
    similarity: str = option("cosine", "Score of two sentence vectors.",
                             choices=siamese.SIMILARITIES)
    loss: str = option(
        "in_batch", "in_batch: multiple-negatives ranking over the batch; softmax: "
        "Sentence-BERT classifier over (u, v, |u-v|); cosine: MSE of cos(u, v).",
        choices=siamese.LOSSES)
    # Not derived: run_siamese.py defines --scale (default None: this default) and
    # --temperature (1 / scale) itself and accepts one of the two.
    scale: float = option(siamese.DEFAULT_SCALE, "Multiplier of the in-batch similarities.",
                          flag=False)
    seed: Optional[int] = option(None, "Random seed for weights, dropout and input shuffling.")


@dataclasses.dataclass
class SiameseResult:
    """eval_results (eval_results.txt); the label list (softmax); the output dir."""

    eval_results: dict
    label_list: Optional[list]
    output_dir: str


def retrieval_metrics(query_vectors, candidate_vectors, targets, similarity="cosine", ks=(1, 5)):
    """Recall@k and mean reciprocal rank of ranking `candidate_vectors` for each query.

    `targets[i]` is the index of query i's right candidate. The rank of the
    right candidate is 1 + the number of candidates scoring strictly higher
    (a tie does not hurt). Returns ``{"recall_at_<k>": ..., "mrr": ...}``.
    """
    q = np.asarray(query_vectors, np.float64)
    c = np.asarray(candidate_vectors, np.float64)
    if similarity == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
        c = c / np.maximum(np.linalg.norm(c, axis=-1, keepdims=True), 1e-12)
    scores = q @ c.T
    targets = np.asarray(targets)
    right = scores[np.arange(len(targets)), targets]
    ranks = 1 + np.sum(scores > right[:, None], axis=1)
    results = {"recall_at_%d" % k: float(np.mean(ranks <= k)) for k in ks}
    results["mrr"] = float(np.mean(1.0 / ranks))
    return results


def _split_path(job, name, default):
    value = getattr(job, name)
    if value and (os.path.isabs(value) or not job.data_dir or tf.io.gfile.exists(value)):
        return value
    if not job.data_dir:
        raise SiameseJobError("Give --data_dir or --%s." % name)
    return os.path.join(job.data_dir, value or default)


def _check_job(job):
    if not (job.do_train or job.do_eval):
        raise SiameseJobError("At least one of `do_train` or `do_eval` must be True.")
    for name in ("bert_config_file", "output_dir", "vocab_file"):
        if not getattr(job, name):
            raise SiameseJobError("--%s is required." % name)
    for name, value, choices in (("pooling", job.pooling, siamese.POOLINGS),
                                 ("similarity", job.similarity, siamese.SIMILARITIES),
                                 ("loss", job.loss, siamese.LOSSES)):
        if value not in choices:
            raise SiameseJobError("--%s=%s: expected one of %s" % (name, value,
                                                                   ", ".join(choices)))
    if not job.scale > 0:
        raise SiameseJobError("--scale=%s: expected a positive number (1 / temperature)"
                              % job.scale)
    try:
        tokenization.validate_case_matches_checkpoint(job.do_lower_case, job.init_checkpoint)
    except ValueError as e:
        raise SiameseJobError(str(e)) from e
    try:
        family = registry.families.get(job.model_family)
    except registry.RegistryError as e:
        raise SiameseJobError("--model_family: %s" % e) from e
    if not family.has_pooler:
        raise SiameseJobError("--model_family=%s: the bi-encoder packs [CLS] text [SEP] for a "
                              "BERT-style encoder family (e.g. bert, albert)" % job.model_family)
    if not os.path.exists(job.bert_config_file):
        raise SiameseJobError("--bert_config_file=%s: no such file" % job.bert_config_file)
    config = family.load_config(job.bert_config_file)
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_positions is not None and job.max_seq_length > max_positions:
        raise SiameseJobError(
            "Cannot use sequence length %d because the BERT model (%s) was only trained up "
            "to sequence length %d (max_position_embeddings)."
            % (job.max_seq_length, job.bert_config_file, max_positions))
    if job.max_seq_length < 3:
        raise SiameseJobError("--max_seq_length must be at least 3 ([CLS] word [SEP]).")
    for name in ("train_batch_size", "eval_batch_size", "gradient_accumulation_steps"):
        if getattr(job, name) < 1:
            raise SiameseJobError("--%s must be positive." % name)
    if job.do_train and job.loss == "in_batch" and job.train_batch_size < 2:
        raise SiameseJobError("--loss=in_batch needs --train_batch_size of at least 2 (the "
                              "other pairs of the batch are the negatives).")
    validation.validate_training_values(
        job.do_train, learning_rate=job.learning_rate,
        save_checkpoints_steps=job.save_checkpoints_steps,
        keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
        num_train_epochs=job.num_train_epochs if job.do_train else None,
        warmup_proportion=job.warmup_proportion, do_eval=job.do_eval)
    if job.nan_policy not in trainer_lib.NAN_POLICIES:
        raise SiameseJobError("--nan_policy=%s: expected one of %s"
                              % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))
    vocab = tokenization.load_vocab(job.vocab_file)
    tokenization.check_vocab_special_tokens(vocab, job.vocab_file,
                                            required=("[UNK]", "[CLS]", "[SEP]"))
    if len(vocab) != config.vocab_size:
        raise SiameseJobError(
            "The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d; "
            "use the vocab.txt that belongs to the model."
            % (job.vocab_file, len(vocab), job.bert_config_file, config.vocab_size))
    return family, config, tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)


def _read(job, name, default, set_type, labels=None):
    path = _split_path(job, name, default)
    if not tf.io.gfile.exists(path):
        raise SiameseJobError("--%s: %s does not exist"
                              % (name if getattr(job, name) else "data_dir", path))
    examples = pairs.read_pairs(path, _LABEL_KIND[job.loss], labels, set_type)
    if not examples:
        raise SiameseJobError("%s has no pairs." % path)
    return examples


def _label_list(job, train):
    if job.loss != "softmax":
        return None
    path = os.path.join(job.output_dir, LABEL_LIST_FILE)
    if train is not None:
        labels = sorted({e.label for e in train})
        if len(labels) < 2:
            raise SiameseJobError("--loss=softmax: the training file has one label (%s); "
                                  "expected at least two" % labels[0])
        atomic.write_text(path, "".join(label + "\n" for label in labels))
        return labels
    if not tf.io.gfile.exists(path):
        raise SiameseJobError("Without --do_train the labels come from %s, written by a "
                              "training run in --output_dir; it does not exist." % path)
    with tf.io.gfile.GFile(path) as f:
        return [line.strip() for line in f if line.strip()]


def run(job):
    """Runs `job` (train and/or eval); returns a `SiameseResult`."""
    family, config, tokenizer = _check_job(job)
    strategy = settings.start_run(job)
    with settings.output_dir_lock(job, strategy):
        try:
            return _run(job, family, config, tokenizer, strategy)
        except DataError as e:
            raise SiameseJobError(str(e)) from None


def _run(job, family, config, tokenizer, strategy):
    output_dir = job.output_dir
    tf.io.gfile.makedirs(output_dir)
    label_kind = _LABEL_KIND[job.loss]
    train = _read(job, "train_file", "train.tsv", "train") if job.do_train else None
    label_list = _label_list(job, train)
    dev = _read(job, "dev_file", "dev.tsv", "dev", label_list) if job.do_eval else None

    num_train_steps = num_warmup_steps = 0
    if train is not None:
        per_update = job.train_batch_size * job.gradient_accumulation_steps
        num_train_steps = int(len(train) / per_update * job.num_train_epochs)
        num_warmup_steps = int(num_train_steps * job.warmup_proportion)
        if num_train_steps < 1:
            raise SiameseJobError("%d training pairs, --train_batch_size=%d and "
                                  "--num_train_epochs=%s make no training step."
                                  % (len(train), job.train_batch_size, job.num_train_epochs))
        pairs.write_pair_records(train, os.path.join(output_dir, "train.tf_record"), tokenizer,
                                 job.max_seq_length, label_kind, label_list)
    if dev is not None:
        pairs.write_pair_records(dev, os.path.join(output_dir, "eval.tf_record"), tokenizer,
                                 job.max_seq_length, label_kind, label_list,
                                 pad_to_multiple=job.eval_batch_size)

    def model_fn():
        return siamese.BiEncoder.from_config_object(
            config, family=family, pooling=job.pooling, similarity=job.similarity,
            loss=job.loss, scale=job.scale,
            num_labels=len(label_list) if label_list else None)

    def init_fn(model):
        if job.init_checkpoint:
            checkpoints.init_from_checkpoint(model, job.init_checkpoint)
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

    def input_fn(name, batch_size, is_training):
        return pairs.pair_input_fn_builder(os.path.join(output_dir, name), job.max_seq_length,
                                           is_training, batch_size, label_kind, seed=job.seed)

    if train is not None:
        trainer.train(input_fn("train.tf_record", job.train_batch_size, True))
    else:
        trainer.restore_or_initialize()

    result = SiameseResult(eval_results={}, label_list=label_list, output_dir=output_dir)
    if dev is not None:
        eval_fn = input_fn("eval.tf_record", job.eval_batch_size, False)
        raw = trainer.evaluate(eval_fn, max_steps=None, restore=False)
        results = {"global_step": raw.pop("global_step")}
        for name, value in raw.items():
            results["eval_" + name] = value
        results["loss"] = results["eval_loss"]
        results.update(_dev_metrics(job, trainer, eval_fn, dev))
        if trainer.is_chief:
            trainer_lib.write_eval_results(results, os.path.join(output_dir, "eval_results.txt"))
        logging.info("Eval results: %s", results)
        for key in sorted(results):
            print("  %s = %s" % (key, results[key]))
        result.eval_results = results
    print("Checkpoints:  %s" % os.path.abspath(output_dir))
    return result


def _dev_metrics(job, trainer, eval_fn, dev):
    """Whole-dev-set metrics from the pooled vectors (see the module docstring)."""
    out = trainer.predict(eval_fn, ["u", "v", "is_real_example"], restore=False)
    real = out["is_real_example"].astype(bool)
    u, v = out["u"][real], out["v"][real]
    if job.loss == "in_batch":
        candidates, targets, first = [], [], {}
        for row, example in enumerate(dev):
            if example.text_b not in first:
                first[example.text_b] = len(candidates)
                candidates.append(row)
            targets.append(first[example.text_b])
        metrics = retrieval_metrics(u, v[candidates], targets, job.similarity)
        return {"eval_" + k: v_ for k, v_ in metrics.items()}
    if job.loss == "cosine":
        cos = np.sum(u * v, axis=1) / np.maximum(
            np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1), 1e-12)
        labels = np.array([e.label for e in dev], np.float64)
        return {"eval_pearson": classification.pearson_correlation(cos, labels),
                "eval_spearman": classification.spearman_correlation(cos, labels)}
    return {}


registry.tasks.register("siamese", FineTuningTask(
    name="siamese",
    description="Siamese sentence matching (bi-encoder): shared encoder, cls/mean/max "
                "pooling, cosine/dot; in-batch negatives, SBERT softmax or cosine loss",
    model_class=siamese.BiEncoder, job_class=SiameseJob, run=run))
