"""BERT and the models before it on one task: what `run/compare_models.py` runs.

    from modeling.experiments import comparison
    rows = comparison.compare(comparison.CompareJob(output_dir="/tmp/compare"))
    print(comparison.format_table(rows))

The task (`build_word_order_task`) is made from the bundled corpus
(`data/sample/sample_en.txt` and `sample_zh.txt`): is a sentence in its
original word order (1) or are its words shuffled (0)? Every sentence of
four or more words appears twice, once each way, its final punctuation kept
in place, written as space-separated words in both cases so that nothing
but the order differs. A bag of words therefore scores exactly chance: the
task measures what a model knows about word order, which is what language
model pre-training teaches. The documents are split as the pre-training
demos split them (`data.corpus.split_documents`, every tenth document held
out), so the held-out sentences come from documents that neither the
pre-training nor the fine-tuning saw.

Each model is pre-trained by its recipe's demo (`run_pretraining.py
--recipe=...`, the same trainer, checkpoints and TensorBoard; an existing
pre-training directory is resumed, i.e. reused when complete) and then
fine-tuned on the task by its own fine-tuning script's job:

    bert     Transformer, MLM + NSP; run_classifier (fine-tunes everything)
    elmo     character-CNN biLM; run_classifier --model_family=elmo
             (frozen biLM, scalar mix, BiLSTM task model)
    ulmfit   AWD-LSTM LM; run_classifier --model_family=ulmfit (concat
             pooling; slanted triangular rates, discriminative rates,
             gradual unfreezing)
    siatl    the same AWD-LSTM LM; run_siatl (auxiliary LM loss, task BiLSTM
             with self-attention, sequential unfreezing)
    cove     en->zh translation encoder; run_classifier --model_family=cove
             (frozen encoder, [word vectors; encoder states], BiLSTM task model)

The table has, per model: held-out accuracy, pre-training and fine-tuning
wall time, and the fine-tuned model's parameters (every model variable of
its checkpoint, frozen ones included). Written atomically to
`output_dir/comparison.json` and `comparison.txt`.
"""

import dataclasses
import json
import os
import random
import time
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from data import atomic
from data import corpus as corpus_lib
from data import tokenization
from modeling import checkpoints
from modeling.checkpoints import object_based
from modeling.recipes import pretraining
from modeling.training.options import option

__all__ = ["CompareJob", "MODELS", "build_word_order_task", "compare", "format_table",
           "shuffled"]

MODELS = ("bert", "elmo", "ulmfit", "siatl", "cove")
SAMPLE_FILES = ("sample_en.txt", "sample_zh.txt")
MIN_WORDS = 4


@dataclasses.dataclass
class CompareJob:
    """What to compare and with which budgets (the script's flags)."""

    output_dir: Optional[str] = option(
        None, "Where every model's runs and the table are written.")
    models: List[str] = option(
        help="Models to compare, in table order: %s." % ",".join(MODELS),
        default_factory=lambda: list(MODELS))
    pretrain_steps: Optional[int] = option(
        None, "Pre-training steps of every model (default: each recipe's demo budget).",
        lower_bound=1)
    num_train_epochs: float = option(
        3.0, "Fine-tuning epochs over the task's training sentences (all models).",
        check=(lambda v: v is not None and v > 0, "--num_train_epochs must be > 0."))
    train_batch_size: int = option(32, "Fine-tuning batch size.", lower_bound=1)
    max_seq_length: int = option(
        48, "Tokens per sentence in fine-tuning (word pieces for BERT, words otherwise).")
    seed: int = option(12345, "Seed of the task's shuffles and of every run.")


def shuffled(words, rng):
    """`words` with all but a final punctuation mark in another order (never the same)."""
    words = list(words)
    tail = [words.pop()] if words and tokenization._is_punctuation(words[-1][-1]) else []
    if len(set(words)) < 2:
        return None
    out = list(words)
    while out == words:
        rng.shuffle(out)
    return out + tail


def _sentences(path):
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = tokenizer.tokenize(line.strip())
            if len(words) >= MIN_WORDS:
                yield words


def build_word_order_task(work_dir, seed=12345):
    """Writes the task's `train.tsv` and `dev.tsv` under `work_dir`; returns their paths and counts.

    Columns: `sentence` (space-separated words), `label` (1 original order,
    0 shuffled). See the module docstring.
    """
    texts = [os.path.join(pretraining.SAMPLE_DIR, name) for name in SAMPLE_FILES]
    train_texts, eval_texts = corpus_lib.split_documents(texts, os.path.join(work_dir, "text"))
    rng = random.Random(seed)
    paths, counts = {}, {}
    for split, files in (("train", train_texts), ("dev", eval_texts)):
        rows = []
        for path in files:
            for words in _sentences(path):
                other = shuffled(words, rng)
                if other is not None:
                    rows.append((" ".join(words), "1"))
                    rows.append((" ".join(other), "0"))
        rng.shuffle(rows)
        paths[split] = os.path.join(work_dir, "%s.tsv" % split)
        with atomic.atomic_output(paths[split]) as out:
            out.write("sentence\tlabel\n")
            for text, label in rows:
                out.write("%s\t%s\n" % (text, label))
        counts[split] = len(rows)
    return paths, counts


def count_parameters(checkpoint_dir):
    """Model parameters stored in a trainer checkpoint (optimizer state excluded)."""
    _, prefix = checkpoints.resolve_checkpoint(checkpoint_dir)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    keys = set(object_based.model_variable_keys(reader, prefix).values())
    return int(sum(np.prod(shapes[k]) for k in keys if "seed_generator" not in k))


def _pretrain(job, recipe, work_dir, **overrides):
    """Runs (or resumes, or reuses) a recipe's demo pre-training; returns its time in seconds.

    The time of the run that trained it is kept beside the checkpoints
    (`comparison_pretraining.json`), so a reused pre-training reports the
    time it took, not the seconds of restoring it.
    """
    output_dir = os.path.join(work_dir, "pretrain_" + recipe)
    settings = dict(recipe=recipe, output_dir=output_dir, seed=job.seed)
    if job.pretrain_steps is not None:
        settings.update(num_train_steps=job.pretrain_steps,
                        num_warmup_steps=max(1, job.pretrain_steps // 10),
                        save_checkpoints_steps=job.pretrain_steps)
    settings.update(overrides)
    demo = pretraining.PretrainingJob.for_demo(**settings)
    record_path = os.path.join(output_dir, "comparison_pretraining.json")
    record = None
    if tf.io.gfile.exists(record_path):
        with tf.io.gfile.GFile(record_path) as f:
            record = json.load(f)
    start = time.time()
    results = pretraining.run(demo)
    seconds = time.time() - start
    if record is not None and record.get("num_train_steps") == demo.num_train_steps:
        seconds = record["seconds"]
    else:
        with atomic.atomic_output(record_path) as out:
            out.write(json.dumps({"num_train_steps": demo.num_train_steps,
                                  "seconds": round(seconds, 1)}) + "\n")
    return output_dir, demo, results, seconds


def _classifier_job(job, task, output_dir, **settings):
    from modeling.tasks import classifier_job  # pylint: disable=g-import-not-at-top

    values = dict(
        task_name="generic", data_dir=os.path.dirname(task["train"]),
        train_file=task["train"], dev_file=task["dev"], text_a_column="sentence",
        label_column="label", labels=["0", "1"], has_header=True, output_dir=output_dir,
        do_train=True, do_eval=True, max_seq_length=job.max_seq_length,
        train_batch_size=job.train_batch_size, eval_batch_size=32,
        num_train_epochs=job.num_train_epochs, save_checkpoints_steps=100000,
        seed=job.seed)
    values.update(settings)
    return classifier_job.ClassifierJob(**values)


def _run_classifier(job, task, output_dir, **settings):
    from modeling.tasks import classifier_job  # pylint: disable=g-import-not-at-top

    start = time.time()
    result = classifier_job.run(_classifier_job(job, task, output_dir, **settings))
    return result.eval_results["eval_accuracy"], time.time() - start, output_dir


def _steps_per_epoch(job, task):
    return max(1, task["train_examples"] // job.train_batch_size)


def _fine_tuned(job, task, work_dir, family, description, config_file_name, **settings):
    """`family`'s demo pre-training, then run_classifier from it (`settings` on top)."""
    pre_dir, demo, _, pre_time = _pretrain(job, family, work_dir)
    return pre_time, description, _run_classifier(
        job, task, os.path.join(work_dir, "finetune_" + family), model_family=family,
        bert_config_file=os.path.join(pre_dir, config_file_name), vocab_file=demo.vocab_file,
        init_checkpoint=pre_dir, **settings)


def _bert(job, task, work_dir):
    return _fine_tuned(job, task, work_dir, "bert", "fine-tuned Transformer",
                       "bert_config.json", learning_rate=1e-4)


def _elmo(job, task, work_dir):
    return _fine_tuned(job, task, work_dir, "elmo", "frozen biLM features",
                       "elmo_options.json", learning_rate=3e-3)


def _ulmfit(job, task, work_dir):
    # ULMFiT's three techniques; every layer group is unfrozen by half the budget.
    return _fine_tuned(job, task, work_dir, "ulmfit", "fine-tuned AWD-LSTM, concat pooling",
                       "ulmfit_config.json", learning_rate=1e-2, lr_schedule="stlr",
                       layer_lr_decay=2.6,
                       unfreeze_steps=max(1, _steps_per_epoch(job, task) // 3))


def _siatl(job, task, work_dir):
    from modeling.siatl import job as siatl_job  # pylint: disable=g-import-not-at-top

    pre_dir, demo, _, pre_time = _pretrain(job, "ulmfit", work_dir)
    output_dir = os.path.join(work_dir, "finetune_siatl")
    per_epoch = _steps_per_epoch(job, task)
    total = max(3, int(round(job.num_train_epochs * per_epoch)))
    # The same number of updates as the others: a sixth new layers only, a
    # sixth the LM only, then everything.
    values = dataclasses.asdict(_classifier_job(job, task, output_dir))
    known = {f.name for f in dataclasses.fields(siatl_job.SiatlJob)}
    values = {k: v for k, v in values.items() if k in known}
    values.update(model_family="ulmfit", bert_config_file=os.path.join(pre_dir, "ulmfit_config.json"),
                  vocab_file=demo.vocab_file, init_checkpoint=pre_dir, learning_rate=1e-3,
                  stage_1_steps=total // 6, stage_2_steps=total // 6,
                  stage_3_steps=total - 2 * (total // 6))
    start = time.time()
    result = siatl_job.run(siatl_job.SiatlJob(**values))
    return pre_time, "AWD-LSTM + aux LM loss, 3 stages", (
        result.eval_results["eval_accuracy"], time.time() - start,
        os.path.join(output_dir, "stage_3"))


def _cove(job, task, work_dir):
    return _fine_tuned(job, task, work_dir, "cove", "frozen MT encoder features",
                       "cove_config.json", learning_rate=3e-3)


RUNNERS = {"bert": _bert, "elmo": _elmo, "ulmfit": _ulmfit, "siatl": _siatl, "cove": _cove}


def compare(job):
    """Pre-trains and fine-tunes each model of `job.models`; returns the table's rows."""
    if not job.output_dir:
        raise ValueError("--output_dir is required")
    if not job.models:
        raise ValueError("--models: none given; expected some of %s" % ",".join(MODELS))
    twice = sorted({m for m in job.models if job.models.count(m) > 1})
    if twice:
        raise ValueError("--models names %s twice; expected each model once"
                         % ", ".join(twice))
    unknown = [m for m in job.models if m not in MODELS]
    if unknown:
        raise ValueError("--models: unknown model(s) %s; expected some of %s"
                         % (", ".join(unknown), ",".join(MODELS)))
    missing = [m for m in job.models if m not in RUNNERS]
    if missing:
        raise ValueError("--models: %s cannot run here (not installed in this build)"
                         % ", ".join(missing))
    work_dir = os.path.abspath(job.output_dir)
    tf.io.gfile.makedirs(work_dir)
    task, counts = build_word_order_task(os.path.join(work_dir, "task"), job.seed)
    rows = []
    task = dict(task, train_examples=counts["train"])
    for name in job.models:
        pre_time, how, (accuracy, fine_time, checkpoint_dir) = RUNNERS[name](job, task, work_dir)
        rows.append({
            "model": name, "how": how, "eval_accuracy": float(accuracy),
            "pretrain_seconds": round(pre_time, 1), "finetune_seconds": round(fine_time, 1),
            "parameters": count_parameters(checkpoint_dir),
        })
    report = {"task": {"train_examples": counts["train"], "dev_examples": counts["dev"],
                       "chance": 0.5},
              "settings": dataclasses.asdict(job), "rows": rows}
    with atomic.atomic_output(os.path.join(work_dir, "comparison.json")) as out:
        out.write(json.dumps(report, indent=2) + "\n")
    with atomic.atomic_output(os.path.join(work_dir, "comparison.txt")) as out:
        out.write(format_table(rows) + "\n")
    return rows


def format_table(rows: List[Dict]):
    """A Markdown table of `compare`'s rows."""
    lines = ["| model | how | held-out accuracy | pre-training s | fine-tuning s | parameters |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| %s | %s | %.3f | %.0f | %.0f | %s |" % (
            row["model"], row["how"], row["eval_accuracy"], row["pretrain_seconds"],
            row["finetune_seconds"], format(row["parameters"], ",")))
    return "\n".join(lines)
