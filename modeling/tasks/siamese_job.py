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

from data import input_pipeline
from data.processors import pairs
from modeling import registry
from modeling.tasks import FineTuningTask
from modeling.tasks import classification
from modeling.tasks import input_formats
from modeling.tasks import length_batching
from modeling.tasks import siamese
from modeling.tasks.input_formats import ClassifierJobError
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training.options import option

__all__ = ["SiameseJob", "SiameseJobError", "SiameseResult", "SiameseRunner", "run",
           "retrieval_metrics"]

SiameseJobError = ClassifierJobError
LABEL_LIST_FILE = "label_list.txt"
_LABEL_KIND = {"in_batch": "none", "softmax": "class", "cosine": "float"}


# Each text of a pair is padded on its own (`pairs.pair_feature_spec`): cut on its own.
PAIR_GROUPS = tuple((prefix + "input_mask", tuple(prefix + name for name in (
    "input_ids", "input_mask", "segment_ids"))) for prefix in ("a_", "b_"))


@dataclasses.dataclass
class SiameseJob(settings.TrainerSettings, input_pipeline.LengthBatchingSettings,
                 job_lib.EncoderSettings, settings.FineTuningSettings, settings.EvalSettings):
    """Everything a bi-encoder run needs; the fields are `run_siamese.py`'s flags."""

    max_seq_length: int = option(64, "Maximum word pieces per text with [CLS] and [SEP].")
    train_batch_size: int = option(
        32, "Total batch size for training (the in-batch loss's negatives).")
    eval_batch_size: int = settings.option_from(settings.EvalSettings, "eval_batch_size", 32)
    learning_rate: float = settings.option_from(settings.FineTuningSettings, "learning_rate",
                                                2e-5)
    num_train_epochs: float = settings.option_from(settings.FineTuningSettings,
                                                   "num_train_epochs", 1.0)
    data_dir: Optional[str] = option(None, "Directory with train.tsv and dev.tsv.")
    train_file: Optional[str] = option(
        None, "Training pairs (a path, or a name in --data_dir).")
    dev_file: Optional[str] = option(None, "Dev pairs (a path, or a name in --data_dir).")
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


def _cls_position(tokenizer):
    """"last" when the tokenizer's framing ends with its cls token (XLNet's `text <sep>
    <cls>`), else "first" (`[CLS] text [SEP]`, `<s> text </s>`)."""
    if hasattr(tokenizer, "build_inputs") and "cls" in tokenizer.special_tokens:
        ids = tokenizer.build_inputs([]).input_ids
        if ids and ids[-1] == tokenizer.token_id("cls") and ids[0] != ids[-1]:
            return "last"
    return "first"


class SiameseRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with the bi-encoder's hooks."""

    error = SiameseJobError
    modes = ("do_train", "do_eval")
    example_name = "training pairs"

    def check(self):
        job = self.job
        self.check_modes()
        self.check_required("bert_config_file", "output_dir", "vocab_file")
        for name, value, choices in (("pooling", job.pooling, siamese.POOLINGS),
                                     ("similarity", job.similarity, siamese.SIMILARITIES),
                                     ("loss", job.loss, siamese.LOSSES)):
            if value not in choices:
                raise SiameseJobError("--%s=%s: expected one of %s" % (name, value,
                                                                       ", ".join(choices)))
        if not job.scale > 0:
            raise SiameseJobError("--scale=%s: expected a positive number (1 / temperature)"
                                  % job.scale)
        self.check_case_matches_checkpoint()
        self.family, self.config = self.load_family_config()
        if job.max_seq_length < 3:
            raise SiameseJobError("--max_seq_length must be at least 3 ([CLS] word [SEP]).")
        self.check_positive("train_batch_size", "eval_batch_size", "gradient_accumulation_steps")
        if job.do_train and job.loss == "in_batch" and job.train_batch_size < 2:
            raise SiameseJobError("--loss=in_batch needs --train_batch_size of at least 2 (the "
                                  "other pairs of the batch are the negatives).")
        self.check_training_values()
        input_pipeline.check_length_batching(job, SiameseJobError)
        self.tokenizer = self.load_tokenizer(self.config)

    def check_family(self, family):
        # Any bidirectional encoder (BERT-style, DistilBERT, XLNet); not a causal LM.
        input_formats.check_token_encoder(
            self.job, family, "the bi-encoder pools the states of", SiameseJobError)

    def _read(self, name, default, set_type, labels=None):
        return self.read_split(
            name, default,
            lambda path: pairs.read_pairs(path, _LABEL_KIND[self.job.loss], labels, set_type),
            "pairs")

    def _label_list(self, train):
        """softmax: the training file's labels, sorted (saved as label_list.txt); else None."""
        if self.job.loss != "softmax":
            return None
        labels = None
        if train is not None:
            labels = sorted({e.label for e in train})
            if len(labels) < 2:
                raise SiameseJobError("--loss=softmax: the training file has one label (%s); "
                                      "expected at least two" % labels[0])
        return self.saved_label_list(labels, LABEL_LIST_FILE)

    def _write(self, examples, name, **kwargs):
        pairs.write_pair_records(examples, os.path.join(self.job.output_dir, name), self.tokenizer,
                                 self.job.max_seq_length, _LABEL_KIND[self.job.loss],
                                 self.label_list, **kwargs)

    def _input_fn(self, name, batch_size, is_training):
        job = self.job
        base = pairs.pair_input_fn_builder(os.path.join(job.output_dir, name), job.max_seq_length,
                                           is_training, batch_size, _LABEL_KIND[job.loss],
                                           seed=job.seed)
        return length_batching.input_fn(
            job, base, batch_size, length_batching.TRAIN if is_training else length_batching.EVAL,
            groups=PAIR_GROUPS)

    def prepare(self):
        job = self.job
        self.train = self._read("train_file", "train.tsv", "train") if job.do_train else None
        self.label_list = self._label_list(self.train)
        self.dev = (self._read("dev_file", "dev.tsv", "dev", self.label_list) if job.do_eval
                    else None)
        if self.train is not None:
            self.training_steps(len(self.train))  # refused before the records are written
            self._write(self.train, "train.tf_record")
        if self.dev is not None:
            self._write(self.dev, "eval.tf_record", pad_to_multiple=job.eval_batch_size)
        return len(self.train) if self.train is not None else None

    def build_model(self):
        job, label_list = self.job, self.label_list
        return siamese.BiEncoder.from_config_object(
            self.config, family=self.family, pooling=job.pooling, similarity=job.similarity,
            loss=job.loss, scale=job.scale, num_labels=len(label_list) if label_list else None,
            cls_position=_cls_position(self.tokenizer))

    def train_input_fn(self):
        return self._input_fn("train.tf_record", self.job.train_batch_size, True)

    def evaluate(self, trainer):
        job = self.job
        eval_fn = self._input_fn("eval.tf_record", job.eval_batch_size, False)
        results = job_lib.eval_results_from(trainer.evaluate(eval_fn, max_steps=None,
                                                             restore=False))
        results.update(_dev_metrics(job, trainer, eval_fn, self.dev))
        if trainer.is_chief:
            trainer_lib.write_eval_results(results,
                                           os.path.join(job.output_dir, "eval_results.txt"))
        logging.info("Eval results: %s", results)
        job_lib.print_results(results)
        return results

    def finish(self, trainer, eval_results, predictions):
        print("Checkpoints:  %s" % os.path.abspath(self.job.output_dir))
        return SiameseResult(eval_results=eval_results, label_list=self.label_list,
                             output_dir=self.job.output_dir)


def run(job):
    """Runs `job` (train and/or eval); returns a `SiameseResult`."""
    return SiameseRunner(job).run()


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
