"""Zero-shot cross-lingual transfer: fine-tune on English, evaluate on Chinese.

What `run/zero_shot_transfer.py` runs:

    from modeling.experiments import zero_shot
    rows = zero_shot.run(zero_shot.ZeroShotJob(output_dir="/tmp/zero_shot"))

Two tiny BERTs are pre-trained by the demo recipe with the bundled
English+Chinese WordPiece vocabulary (`data/sample/vocab.txt`):

    multilingual   on the bundled English and Chinese halves, resampled with
                   mBERT's smoothed language sampling (`language_sampling_alpha`,
                   0.7; `data.multilingual.resample_documents`)
    english_only   on the English half only (the monolingual model)

Each is fine-tuned on the same English sentences of a toy task made from
the bundled parallel pairs (`data/sample/parallel_en_zh.tsv`): does the
sentence speak of the morning or of the evening? Pairs whose English says
exactly one of the two are kept; every fifth is held out. The fine-tuned
classifier is then evaluated on the held-out English sentences and, without
any Chinese training example, on their Chinese translations (zero-shot).

The bundled halves are not translations of each other and the models are
tiny, so nothing forces the two languages into one space here; mBERT's
transfer comes from scale and shared pieces (numbers, names) across 104
Wikipedias. The table shows what this set-up gives, not what mBERT gives.
With real data the same zero-shot evaluation is `run_classifier.py
--task_name=xnli --xnli_train_language=en --xnli_language=zh`.

Results go to `output_dir/zero_shot.json` (atomically).
"""

import dataclasses
import json
import math
import os
import re
from typing import Optional

from data import atomic
from data import multilingual
from modeling.recipes import pretraining
from modeling.training.options import option

__all__ = ["ZeroShotJob", "build_time_of_day_task", "format_table", "run"]

PARALLEL_FILE = os.path.join(pretraining.SAMPLE_DIR, "parallel_en_zh.tsv")
LABELS = ("morning", "evening")


@dataclasses.dataclass
class ZeroShotJob:
    """The comparison's settings; the fields are `run/zero_shot_transfer.py`'s flags."""

    output_dir: Optional[str] = option(None, "Where both models' runs and zero_shot.json go.")
    language_sampling_alpha: float = option(
        0.7, "mBERT's smoothing exponent for the multilingual model's corpus.")
    # None = the bert recipe's demo budget.
    pretrain_steps: Optional[int] = option(None, "Pre-training steps (default: the demo's).")
    num_train_epochs: float = option(20.0, "Fine-tuning epochs.")
    learning_rate: float = option(1e-4, "Fine-tuning learning rate.")
    seed: int = option(12345, "Seed of every run.")


def build_time_of_day_task(work_dir, parallel_file=PARALLEL_FILE, eval_every=5):
    """Writes train_en.tsv, dev_en.tsv and dev_zh.tsv; returns their paths and sizes."""
    rows = []
    with open(parallel_file, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2:
                raise ValueError("%s:%d: expected english<TAB>chinese" % (parallel_file, lineno))
            english, chinese = fields
            found = [label for label in LABELS if re.search(r"\b%s\b" % label, english.lower())]
            if len(found) == 1:
                rows.append((english, chinese, found[0]))
    splits = {"train_en": [], "dev_en": [], "dev_zh": []}
    for i, (english, chinese, label) in enumerate(rows):
        if i % eval_every == 0:
            splits["dev_en"].append((english, label))
            splits["dev_zh"].append((chinese, label))
        else:
            splits["train_en"].append((english, label))
    paths = {}
    for name, split_rows in splits.items():
        paths[name] = os.path.join(work_dir, name + ".tsv")
        with atomic.atomic_output(paths[name]) as out:
            out.write("sentence\tlabel\n")
            for text, label in split_rows:
                out.write("%s\t%s\n" % (text, label))
    return paths, {name: len(split_rows) for name, split_rows in splits.items()}


def _classify(job, task, pre_dir, output_dir, dev_file, do_train):
    from modeling.tasks import classifier_job  # pylint: disable=g-import-not-at-top

    result = classifier_job.run(classifier_job.ClassifierJob(
        task_name="generic", data_dir=os.path.dirname(task["train_en"]),
        train_file=task["train_en"], dev_file=dev_file, text_a_column="sentence",
        label_column="label", labels=list(LABELS), output_dir=output_dir,
        bert_config_file=os.path.join(pre_dir, "bert_config.json"),
        vocab_file=os.path.join(pretraining.SAMPLE_DIR, "vocab.txt"),
        init_checkpoint=pre_dir if do_train else None, do_train=do_train, do_eval=True,
        max_seq_length=48, train_batch_size=16, eval_batch_size=8,
        learning_rate=job.learning_rate, num_train_epochs=job.num_train_epochs,
        save_checkpoints_steps=100000, seed=job.seed))
    return result.eval_results["eval_accuracy"]


def _check(job):
    """Every flag's value, before anything is written or trained (one line naming the flag)."""
    if not job.output_dir:
        raise ValueError("--output_dir is required")
    if not 0 <= job.language_sampling_alpha <= 1:  # (NaN too)
        raise ValueError("--language_sampling_alpha=%r: expected a number in [0, 1] (mBERT: 0.7)"
                         % (job.language_sampling_alpha,))
    if job.pretrain_steps is not None and job.pretrain_steps < 1:
        raise ValueError("--pretrain_steps=%d: expected a positive integer (or none: the "
                         "demo's)" % job.pretrain_steps)
    for name in ("num_train_epochs", "learning_rate"):
        value = getattr(job, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError("--%s=%r: expected a finite positive number" % (name, value))


def run(job):
    """Pre-trains both models, fine-tunes each on English, evaluates on English and Chinese."""
    _check(job)
    work_dir = os.path.abspath(job.output_dir)
    task, sizes = build_time_of_day_task(os.path.join(work_dir, "task"))
    english = os.path.join(pretraining.SAMPLE_DIR, "sample_en.txt")
    chinese = os.path.join(pretraining.SAMPLE_DIR, "sample_zh.txt")
    sampling = multilingual.resample_documents(
        {"en": [english], "zh": [chinese]}, job.language_sampling_alpha,
        os.path.join(work_dir, "multilingual_corpus"), seed=job.seed)
    corpora = {"multilingual": [sampling["written"][lang]["file"] for lang in ("en", "zh")],
               "english_only": [english]}
    rows = []
    for name, texts in corpora.items():
        pre_dir = os.path.join(work_dir, "pretrain_" + name)
        settings = dict(recipe="bert", output_dir=pre_dir, demo_texts=texts, seed=job.seed)
        if job.pretrain_steps is not None:
            settings.update(num_train_steps=job.pretrain_steps,
                            num_warmup_steps=max(1, job.pretrain_steps // 10),
                            save_checkpoints_steps=job.pretrain_steps)
        pretraining.run(pretraining.PretrainingJob.for_demo(**settings))
        cls_dir = os.path.join(work_dir, "finetune_" + name)
        accuracy_en = _classify(job, task, pre_dir, cls_dir, task["dev_en"], do_train=True)
        accuracy_zh = _classify(job, task, pre_dir, cls_dir, task["dev_zh"], do_train=False)
        rows.append({"model": name, "pretraining_text": ", ".join(
            os.path.basename(t) for t in texts), "english_accuracy": float(accuracy_en),
            "chinese_zero_shot_accuracy": float(accuracy_zh)})
    report = {"task": sizes, "sampling": {k: sampling[k] for k in ("alpha", "p", "q")},
              "settings": dataclasses.asdict(job), "rows": rows}
    with atomic.atomic_output(os.path.join(work_dir, "zero_shot.json")) as out:
        out.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return rows


def format_table(rows):
    lines = ["| model | pre-trained on | English held-out | Chinese, zero-shot |",
             "|---|---|---|---|"]
    for row in rows:
        lines.append("| %s | %s | %.3f | %.3f |" % (
            row["model"], row["pretraining_text"], row["english_accuracy"],
            row["chinese_zero_shot_accuracy"]))
    return "\n".join(lines)
