"""The pre-training job as a library call: what `run/run_pretraining.py` runs.

    from modeling.recipes import pretraining
    results = pretraining.run(pretraining.PretrainingJob.for_demo(recipe="bert"))

`PretrainingJob` holds Google's `run_pretraining.py` flags (and this
project's) as fields; `run(job)` reads the recipe, builds the model, the
input pipeline and the trainer, trains, evaluates, and scores every
objective's context-free baseline on the same held-out data: the common job
shape (`modeling.training.job.JobRunner`) with pre-training's hooks
(`PretrainingRunner`). Nothing here knows a family or an objective by name:
the recipe's registered parts say everything.

The demo job (`demo=True`) splits the bundled corpus by documents (every
tenth document held out, `data.corpus.split_documents`), makes the
pipeline's inputs from each part, trains on one and evaluates on the other.
A pipeline with bundled data of its own (`demo_data_files`, e.g. CoVe's
parallel text) makes both parts itself (`demo_inputs_from_files`).
"""

import dataclasses
import os
import random
from typing import List, Optional

from absl import logging
import tensorflow as tf

from data import corpus
from data import input_pipeline
from modeling import recipes
from modeling import registry
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.training import job as job_lib
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training.options import option

__all__ = ["DEMO_DEFAULTS", "PretrainingJob", "PretrainingRunner", "REPO_ROOT", "SAMPLE_DIR",
           "run"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "sample")

# The demo job: a tiny model trained for a few minutes on two CPU cores.
# `run_pretraining.py` applies each value only when its flag is not given;
# `PretrainingJob.for_demo()` applies them all.
DEMO_DEFAULTS = dict(
    output_dir=os.path.join("output", "pretraining_sample"),
    do_train=True, do_eval=True, train_batch_size=32, eval_batch_size=32,
    learning_rate=1e-3, num_train_steps=2000, num_warmup_steps=100,
    save_checkpoints_steps=500, max_eval_steps=20, max_seq_length=64,
    max_predictions_per_seq=10, seed=12345, log_steps=100,
)

# Examples of the training data counted for the baselines' frequencies.
BASELINE_TRAIN_EXAMPLES = 20000


@dataclasses.dataclass
class PretrainingJob(settings.TrainerSettings, settings.DataServiceSettings,
                     settings.TrainingSettings, settings.EvalSettings):
    """Everything a pre-training run needs; the fields are `run/run_pretraining.py`'s flags."""

    recipe: str = option(
        "bert", "Pre-training recipe: a name (%s) or a recipe JSON file. With "
        "--input_file, make the inputs the recipe's pipeline reads (see README)."
        % ", ".join(recipes.list_recipes()))
    input_file: Optional[str] = option(
        None, "Input files (a glob or comma separated): TFRecords, or raw text for "
        "recipes that read it. Not given: the demo job on the bundled corpus.")
    eval_input_file: Optional[str] = option(
        None, "Held-out input files for --do_eval (default: --input_file, as Google's "
        "script evaluates on its training files).")
    bert_config_file: Optional[str] = option(
        None, "The config json file of the model (the recipe's family: "
        "bert_config.json, albert_config.json, HF config.json), or the name of one of the "
        "family's presets (bert_base, L-4_H-256, albert_base, gpt2, ...) with the "
        "vocabulary's size.")
    init_checkpoint: Optional[str] = option(
        None, "Initial checkpoint (usually from a pre-trained BERT model).")
    vocab_file: Optional[str] = option(
        None, "Vocabulary of recipes that tokenize raw text (and of the demo job).")
    merges_file: Optional[str] = option(
        None, "BPE merges of byte-level BPE recipes (GPT-2).")
    do_lower_case: bool = option(True, "Lower-case raw text (recipes that tokenize it).")
    max_seq_length: int = option(128, "The maximum total input sequence length.")
    max_predictions_per_seq: int = option(
        20, "Maximum number of masked LM predictions per sequence.")
    num_train_steps: int = option(100000, "Number of training steps.")
    num_warmup_steps: int = option(10000, "Number of warmup steps.")
    max_eval_steps: int = option(100, "Maximum number of eval steps.")
    demo: bool = option(False, "The demo job on the bundled corpus (`for_demo`).", flag=False)
    demo_texts: Optional[List[str]] = option(
        None, "The demo's text files (default: the bundled data/sample/sample_*.txt), split "
        "by documents like them.", flag=False)

    @classmethod
    def for_demo(cls, **overrides):
        """The demo job: `DEMO_DEFAULTS`, then the recipe's own `demo` settings, then `overrides`."""
        values = dict(DEMO_DEFAULTS, demo=True)
        recipe = recipes.load_recipe(overrides.get("recipe", cls.recipe))
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(recipe.demo) - known)
        if unknown:
            raise recipes.RecipeError("Recipe %s: unknown demo setting(s) %s"
                                      % (recipe.name, ", ".join(unknown)))
        values.update(recipe.demo)
        values.update(overrides)
        return cls(**values)


def _demo_vocab(pipeline_class, job):
    """Fills the job's vocabulary files from the pipeline's bundled defaults."""
    for name, relative in pipeline_class.demo_vocab_files.items():
        if not getattr(job, name):
            setattr(job, name, os.path.join(REPO_ROOT, relative))


def _vocab_size(pipeline, job):
    """The vocabulary size a preset config gets: the pipeline's (raw-text recipes), that of
    --vocab_file (TFRecords), or None (the preset's own)."""
    try:
        return pipeline.vocab_size()
    except (NotImplementedError, TypeError, OSError, ValueError):
        pass
    if job.vocab_file and os.path.isfile(job.vocab_file):
        from data import tokenization  # pylint: disable=import-outside-toplevel
        return len(tokenization.load_vocab(job.vocab_file))
    return None


def _load_config(recipe, job, pipeline):
    if job.bert_config_file and (os.path.exists(job.bert_config_file) or
                                 job.bert_config_file not in recipe.family.preset_names()):
        config = recipe.load_config(job.bert_config_file)
    elif job.bert_config_file:
        # A named size of the recipe's family (`Family.presets`), the pipeline's vocabulary.
        config = recipe.family.config_from(job.bert_config_file, vocab_size=_vocab_size(
            pipeline, job))
    elif not job.demo:
        raise ValueError("--bert_config_file is required with --input_file")
    else:
        config = recipe.demo_config(pipeline.vocab_size())
    # A pipeline whose inputs constrain the model (UNILM's segment ids need
    # type_vocab_size 6) fits the demo config and checks a user's.
    fit = getattr(pipeline, "fit_config", None)
    return fit(config, demo=not job.bert_config_file) if fit else config


def baselines(model, pipeline, train_inputs, eval_inputs, max_eval_examples,
              eval_batch_size):
    """Every objective's context-free baseline on the evaluation data."""
    # Read once, scored by every objective (each takes its own targets).
    train_batches = list(pipeline.baseline_batches(train_inputs, BASELINE_TRAIN_EXAMPLES))
    eval_batches = list(pipeline.baseline_batches(eval_inputs, max_eval_examples,
                                                  eval_batch_size))
    results = {}
    for objective in model.objectives:
        results.update(objective.context_free_baseline(train_batches, eval_batches))
    return results


def report_lines(model, results):
    """One line per objective: its loss beside its baseline's loss."""
    lines = []
    for objective in model.objectives:
        name = objective.name
        kind = objective.baseline_kind
        pairs = [(metric, results.get("%s_%s" % (name, metric)),
                  results.get("%s_baseline_%s_%s" % (kind, name, metric)))
                 for metric in ("loss", "accuracy")]
        parts = []
        for metric, value, baseline in pairs:
            if value is None or baseline is None:
                continue
            better = value < baseline if metric == "loss" else value > baseline
            parts.append("%s %.4f vs %s baseline %.4f (%s)" % (
                metric, value, kind, baseline, "better" if better else "NOT better"))
        if parts:
            lines.append("%s: %s" % (name, "; ".join(parts)))
    return lines


class PretrainingRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with pre-training's hooks.

    `check` reads the recipe, builds its pipeline and the model config (the
    demo job's from the pipeline's vocabulary); `prepare` writes the config
    and makes or checks the inputs; the updates are `num_train_steps` (not
    epochs); `evaluate` reads the held-out inputs and scores every
    objective's context-free baseline on them. A damaged record met while
    reading (`DataLossError`, which names no file) is refused naming the flag
    and files being read.
    """

    modes = ("do_train", "do_eval")
    #: (flag, inputs) of what is being read, for a damaged record's error.
    reading = None

    def check(self):
        job = self.job
        if not job.demo and not job.output_dir:
            raise ValueError("--output_dir is required with --input_file")
        self.check_modes()
        self.check_training_values(
            epochs=False, num_train_steps=job.num_train_steps,
            num_warmup_steps=job.num_warmup_steps, train_batch_size=job.train_batch_size,
            eval_batch_size=job.eval_batch_size,
            gradient_accumulation_steps=job.gradient_accumulation_steps,
            max_eval_steps=job.max_eval_steps)
        input_pipeline.check_data_service(job.data_service_address, job.data_service_job_name)

        self.recipe = recipe = recipes.load_recipe(job.recipe)
        logging.info("Recipe %s: %s", recipe.name, recipe.description)
        pipeline_class = registry.pipelines.get(recipe.pipeline)
        if job.demo:
            _demo_vocab(pipeline_class, job)
        self.pipeline = recipe.build_pipeline(PipelineOptions(
            vocab_file=job.vocab_file, merges_file=job.merges_file,
            do_lower_case=job.do_lower_case, max_seq_length=job.max_seq_length,
            max_predictions_per_seq=job.max_predictions_per_seq,
            # One seed for the whole run even when none is given, so that the
            # evaluation and its baselines read the same (dynamically masked) batches.
            seed=job.seed if job.seed is not None else random.SystemRandom().randrange(2 ** 31)))
        self.pipeline.check_job(job)
        self.config = _load_config(recipe, job, self.pipeline)
        self.check_max_seq_length(self.config)

    def prepare(self):
        job, pipeline = self.job, self.pipeline
        logging.info("Strategy: %s with %d replica(s)", type(self.strategy).__name__,
                     self.strategy.num_replicas_in_sync)
        config_path = os.path.join(job.output_dir, self.recipe.family.config_file_name)
        if not tf.io.gfile.exists(config_path):
            self.config.to_json_file(config_path)
        data_dir = os.path.join(job.output_dir, "data")
        if job.demo and pipeline.demo_data_files:
            # A pipeline with its own bundled data (e.g. parallel text) splits it itself.
            self.train_inputs, self.eval_inputs = pipeline.demo_inputs_from_files(
                [os.path.join(REPO_ROOT, path) for path in pipeline.demo_data_files], data_dir)
        elif job.demo:
            texts = list(job.demo_texts or sorted(
                tf.io.gfile.glob(os.path.join(SAMPLE_DIR, "sample_*.txt"))))
            train_texts, eval_texts = corpus.split_documents(texts, os.path.join(data_dir, "text"))
            self.train_inputs, self.eval_inputs = pipeline.demo_inputs(
                train_texts, eval_texts, data_dir)
        else:
            self.train_inputs = job.input_file
            # Google evaluates on its input files.
            self.eval_inputs = job.eval_input_file or job.input_file
            pipeline.check_inputs(self.train_inputs)
            if job.eval_input_file:
                pipeline.check_inputs(self.eval_inputs)
        # An evaluation-only run still builds the optimizer (its slots are in
        # the checkpoint) but never steps it.
        self.num_train_steps, self.num_warmup_steps = self.training_steps(None)
        return None

    def training_steps(self, num_examples):
        return self.job.num_train_steps, self.job.num_warmup_steps

    def build_model(self):
        return self.recipe.build_model(self.config)

    def init_model(self, model):
        # Google TF1 checkpoints, this project's, or HF safetensors.
        self.init_pretrainer(model)

    def train_input_fn(self):
        job = self.job
        input_fn = self.pipeline.input_fn(self.train_inputs, True, job.train_batch_size)
        if job.data_service_address:
            # Only training reads through the service: evaluation and the
            # baselines read the held-out files once, in order, here.
            input_fn = input_pipeline.data_service_input_fn(
                input_fn, job.data_service_address, job.data_service_job_name)
        self.reading = ("--input_file", self.train_inputs)
        return input_fn

    def after_training(self, trainer):
        self.reading = None

    def _run_locked(self):
        try:
            return super()._run_locked()
        except tf.errors.DataLossError as e:
            if self.reading is None:
                raise
            raise _damaged_input(e, *self.reading) from None

    def evaluate(self, trainer):
        job, pipeline = self.job, self.pipeline
        self.reading = ("--eval_input_file" if job.eval_input_file else "--input_file",
                        self.eval_inputs)
        results = trainer.evaluate(
            pipeline.input_fn(self.eval_inputs, False, job.eval_batch_size), job.max_eval_steps)
        self.reading = None
        model = trainer.model
        results.update(baselines(model, pipeline, self.train_inputs, self.eval_inputs,
                                 job.max_eval_steps * job.eval_batch_size, job.eval_batch_size))
        for objective in model.objectives:
            results.update(objective.derived_metrics(dict(results)))
        if trainer.is_chief:
            trainer_lib.write_eval_results(results,
                                           os.path.join(job.output_dir, "eval_results.txt"))
        job_lib.print_results(results)
        for line in report_lines(model, results):
            print(line)
        return results

    def finish(self, trainer, eval_results, predictions):
        super().finish(trainer, eval_results, predictions)
        print("TensorBoard:  tensorboard --logdir %s" % os.path.abspath(self.job.output_dir))
        return eval_results


def _damaged_input(error, flag, inputs):
    """TensorFlow's "corrupted record at N" names no file: say which input it was."""
    message = (error.message or "").strip().splitlines()
    return ValueError(
        "%s=%s: a record is damaged (%s); the start-up check reads data checksums only "
        "for inputs up to 1 GiB, so find the file with "
        "data.tfrecord_check.verify_data_checksums and write it again"
        % (flag, inputs if isinstance(inputs, str) else ",".join(inputs),
           message[0] if message else "bad CRC"))


def run(job):
    """Runs `job` (train and/or evaluate); returns the evaluation results or {}."""
    return PretrainingRunner(job).run()
