"""The shape every training job has, once: `JobRunner` and the checks jobs share.

A fine-tuning or training job (classifier, SQuAD, NER, Siamese, multi-task,
distillation, CVT, SiATL, translation, pre-training) goes through the same
steps; `JobRunner.run` does them in order and a task supplies only its hooks:

    check_output_dir()      an output_dir that is the folder of a checkpoint the job
                            reads (`checkpoint_inputs()`) is refused
    check()                 every input checked; nothing written yet
    start                   seed, precision policy, strategy (`settings.start_run`)
    lock                    one run per output directory (`settings.output_dir_lock`)
    prepare()               read the splits, write the records; returns the number
                            of training examples (None without training)
    steps                   `training_steps`: updates and warm-up from the epochs
    build_model() / init_model(model)
    trainer                 `build_trainer`: the project's one `Trainer`
    train_input_fn()        train, or restore the latest checkpoint
    after_training(trainer) what must not wait for the evaluation (an export)
    evaluate(trainer)       -> results (written by the task), with do_eval
    predict(trainer)        with do_predict
    finish(trainer)         export, report; returns the job's result

    class NerRunner(JobRunner):
        error = NerJobError
        def check(self): ...
        def prepare(self): ...
        ...
    def run(job):
        return NerRunner(job).run()

The shared checks (`check_modes`, `check_required`, `check_positive`,
`check_training_values`, `load_family_config`, `check_case_matches_checkpoint`,
`check_vocab_matches`, `load_tokenizer`) raise
the runner's `error` (a `ValueError`) with a one-line message that names the
flag or file, which the run scripts print as ``<script>: error: ...``.
"""

import dataclasses
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from data.processors.base import DataError
from modeling import registry
from modeling.training import optimization
from modeling.training import settings
from modeling.training import trainer as trainer_lib
from modeling.training import validation
from modeling.training.options import option

__all__ = ["EncoderSettings", "JobRunner", "eval_results_from", "folder_tokenizer",
           "print_results"]


@dataclasses.dataclass
class EncoderSettings(settings.TextSettings):
    """The pre-trained encoder a job starts from (a family of `modeling.registry`), and how
    its text is read: Google's flags, declared once for the jobs that fine-tune one."""

    model_family: str = option(
        registry.DEFAULT_FAMILY, "The encoder's model family (bert, albert, ...): how "
        "--bert_config_file and --init_checkpoint are read.")
    bert_config_file: Optional[str] = option(
        None, "The config json file corresponding to the pre-trained BERT model (Google's "
        "bert_config.json or HF's config.json). This specifies the model architecture. Or a "
        "preset name of the family (bert_base, L-4_H-256, ...): a model of that size with "
        "--vocab_file's vocabulary.")
    init_checkpoint: Optional[str] = option(
        None, "Initial checkpoint (usually from a pre-trained BERT model): a Google "
        "bert_model.ckpt prefix, a checkpoint of this project, or HF safetensors.")


def eval_results_from(raw, loss_alias=True):
    """Google's eval_results.txt keys from a `Trainer.evaluate` dict: eval_<name>, loss, global_step.

    `loss_alias=False`: no ``loss`` key repeating eval_loss (the jobs that never wrote one).
    """
    raw = dict(raw)
    results = {"global_step": raw.pop("global_step")}
    for name, value in raw.items():
        results["eval_" + name] = value
    if loss_alias and "eval_loss" in results:
        results["loss"] = results["eval_loss"]
    return results


def print_results(results, title="Eval results"):
    """Prints `results` as Google's scripts do (``***** Eval results *****`` then key = value)."""
    print("***** %s *****" % title)
    for key in sorted(results):
        print("  %s = %s" % (key, results[key]))


def folder_tokenizer(job, config, error=ValueError, checkpoint_field="init_checkpoint"):
    """The `job`'s checkpoint folder's own tokenizer when it is not Google's WordPiece
    (RoBERTa's byte-level BPE, ALBERT's SentencePiece, ...), else None.

    An HF folder's tokenizer gives HF's ids and framing
    (`modeling.pretrained.tokenizers.PretrainedTokenizer`), a keras-hub
    preset's keras-hub's; Google's and this project's folders, and HF folders
    and presets with BERT's WordPiece vocabulary, keep the
    `vocab_file` path (the same ids, with its checks). Problems raise `error`
    (one line, naming the flag or the folder).
    """
    from modeling.pretrained import folders  # pylint: disable=import-outside-toplevel
    from modeling.pretrained import tokenizers  # pylint: disable=import-outside-toplevel
    path = getattr(job, checkpoint_field, None)
    if not path or not folders.is_model_folder(path):
        return None
    try:
        try:
            folder = folders.inspect(path, family=getattr(job, "model_family", None))
        except folders.FolderError:
            return None  # Not a folder of a known kind: the flags say everything.
        if folder.family.hf is None or folder.kind not in (folders.HF, folders.KERAS_HUB):
            return None
        tokenizer = folder.tokenizer(config)
    except ValueError as e:
        raise error("--%s=%s: %s" % (checkpoint_field, path, e)) from None
    if type(tokenizer) is tokenizers.WordPieceTokenizer:  # pylint: disable=unidiomatic-typecheck
        return None
    if tokenizer.vocab_size > config.vocab_size:
        raise error("%s: the tokenizer has %d tokens but the config says vocab_size=%d"
                    % (folder.path, tokenizer.vocab_size, config.vocab_size))
    return tokenizer


class JobRunner:
    """One run of a training job; subclasses implement the hooks (see the module docstring).

    Attributes set by `run`: `strategy`, `trainer`, `num_train_steps`,
    `num_warmup_steps`. A hook may set any attribute of its own for the
    hooks after it (the family, config and tokenizer from `check`, the
    examples and record paths from `prepare`).
    """

    #: The job's error type (a ValueError subclass); data errors are re-raised as it.
    error = ValueError
    #: The modes of the job class (`do_*` fields), of which at least one must be set.
    modes = ("do_train", "do_eval", "do_predict")
    #: What `prepare` counts for `training_steps` ("training examples", "sentences", ...).
    example_name = "training examples"

    def __init__(self, job):
        self.job = job
        self.job = self.filled_from_model_folder(job)
        self.strategy = None
        self.trainer = None
        self.num_train_steps = 0
        self.num_warmup_steps = 0

    # ----- the run -----------------------------------------------------------------------

    def run(self):
        """check, start, lock, prepare, steps, trainer, train/restore, evaluate, predict, finish."""
        self.check_output_dir()
        self.check()
        self.strategy = settings.start_run(self.job)
        with settings.output_dir_lock(self.job, self.strategy):
            try:
                return self._run_locked()
            except DataError as e:
                raise self.error(str(e)) from None

    def _run_locked(self):
        tf.io.gfile.makedirs(self.job.output_dir)
        num_examples = self.prepare()
        if self.training:
            self.num_train_steps, self.num_warmup_steps = self.training_steps(num_examples)
        self.trainer = self.build_trainer()
        if self.training:
            self.trainer.train(self.train_input_fn())
        else:
            self.trainer.restore_or_initialize()
        self.after_training(self.trainer)
        eval_results = self.evaluate(self.trainer) if self.evaluating else {}
        predictions = self.predict(self.trainer) if self.predicting else None
        return self.finish(self.trainer, eval_results, predictions)

    @property
    def training(self):
        return bool(getattr(self.job, "do_train", False))

    @property
    def evaluating(self):
        """Whether `run` calls `evaluate` (`job.do_eval` by default)."""
        return bool(getattr(self.job, "do_eval", False))

    @property
    def predicting(self):
        """Whether `run` calls `predict` (`job.do_predict` by default)."""
        return bool(getattr(self.job, "do_predict", False))

    # ----- hooks -------------------------------------------------------------------------

    def check(self):
        """Checks every input before anything is written (the common checks by default)."""
        self.check_modes()
        self.check_training_values()

    def check_family(self, family):
        """Refuses a family the task cannot use (`load_family_config` calls it before the
        config is read); any family by default."""

    def prepare(self):
        """Reads the splits and writes the records; returns the number of training examples."""
        raise NotImplementedError

    def build_model(self):
        raise NotImplementedError

    def init_model(self, model):
        """Initialises `model` from `job.init_checkpoint` (a warning without one)."""
        from modeling import checkpoints  # pylint: disable=import-outside-toplevel
        if self.job.init_checkpoint:
            checkpoints.init_from_checkpoint(model, self.job.init_checkpoint)
            logging.info("Initialised the encoder from %s", self.job.init_checkpoint)
        else:
            logging.warning("No --init_checkpoint: the encoder starts from random weights.")

    def train_input_fn(self):
        raise NotImplementedError

    def after_training(self, trainer):
        """After training (or restoring), before `evaluate`: e.g. an export of the trained
        model that must not wait for the evaluation (nothing by default)."""

    def evaluate(self, trainer):
        """With do_eval: the results the task writes (eval_results.txt); {} by default."""
        return {}

    def predict(self, trainer):
        """With do_predict: the task's predictions (None by default)."""
        return None

    def finish(self, trainer, eval_results, predictions):
        """Export and report; returns the job's result."""
        print("Checkpoints:  %s" % os.path.abspath(self.job.output_dir))
        return eval_results, predictions

    # ----- the trainer -------------------------------------------------------------------

    def training_steps(self, num_examples):
        """(updates, warm-up updates) from `num_train_epochs` over `num_examples` (Google's arithmetic).

        An update sees `train_batch_size * gradient_accumulation_steps`
        examples; a run that would make no update is refused.
        """
        job = self.job
        per_update = job.train_batch_size * job.gradient_accumulation_steps
        num_train_steps = int(num_examples / per_update * job.num_train_epochs)
        if num_train_steps < 1:
            raise self.error("%d %s, --train_batch_size=%d and --num_train_epochs=%s make no "
                             "training step." % (num_examples, self.example_name,
                                                 job.train_batch_size, job.num_train_epochs))
        return num_train_steps, int(num_train_steps * job.warmup_proportion)

    def build_trainer(self, **overrides):
        """The project's one `Trainer` for this job (AdamW/LAMB with Google's schedule)."""
        job = self.job
        num_train_steps, num_warmup_steps = self.num_train_steps, self.num_warmup_steps
        options = dict(
            model_fn=self.build_model,
            optimizer_fn=lambda: optimization.create_optimizer(
                job.learning_rate, max(1, num_train_steps), num_warmup_steps,
                **job.optimizer_options()),
            model_dir=job.output_dir, train_batch_size=job.train_batch_size,
            num_train_steps=num_train_steps, save_checkpoints_steps=job.save_checkpoints_steps,
            init_fn=self.init_model, **job.trainer_options())
        options.update(overrides)
        return trainer_lib.Trainer(self.strategy, **options)

    # ----- shared checks -----------------------------------------------------------------

    def check_modes(self):
        """At least one of the job's `modes` is set."""
        if not any(getattr(self.job, mode, False) for mode in self.modes):
            names = ["`%s`" % mode for mode in self.modes]
            listed = (", ".join(names[:-1]) + " or " + names[-1]) if len(names) > 1 else names[0]
            raise self.error("At least one of %s must be True." % listed)

    def filled_from_model_folder(self, job):
        """`job` completed from the model folder its `init_checkpoint` names (a copy):
        `modeling.pretrained.folders.fill_settings`, errors as the job's."""
        from modeling.pretrained import folders  # pylint: disable=import-outside-toplevel
        try:
            return folders.fill_settings(job)
        except ValueError as e:
            raise self.error("--init_checkpoint=%s: %s" % (job.init_checkpoint, e)) from None

    def check_output_dir(self):
        """Refuses an `output_dir` that is the folder of a checkpoint the job reads.

        A run there would take that checkpoint for its own: resume it instead
        of starting from it (with fewer steps: train nothing and report it),
        rotate it away, and replace the records, labels and config beside it.
        A run that does not train (`--do_train` false: evaluation or
        prediction with a finished run's checkpoint, Google's
        `--init_checkpoint=$OUTPUT_DIR/model.ckpt-N --output_dir=$OUTPUT_DIR`)
        may use the checkpoint's folder.
        """
        from data import atomic  # pylint: disable=import-outside-toplevel
        if not getattr(self.job, "do_train", True):
            return
        try:
            atomic.check_outputs([], self.checkpoint_inputs(),
                                 [("--output_dir", getattr(self.job, "output_dir", None))])
        except atomic.OutputConflictError as e:
            raise self.error(str(e)) from None

    def checkpoint_inputs(self):
        """(flag, path) of each checkpoint the job reads: `--init_checkpoint` by default."""
        return [("--init_checkpoint", getattr(self.job, "init_checkpoint", None))]

    def check_required(self, *names):
        """Each named field is given (``--NAME is required.``)."""
        for name in names:
            if not getattr(self.job, name):
                raise self.error("--%s is required." % name)

    def check_positive(self, *names):
        """Each named field is at least 1 (batch sizes, accumulation steps)."""
        for name in names:
            if getattr(self.job, name) < 1:
                raise self.error("--%s must be positive." % name)

    def check_training_values(self, epochs=True, **more):
        """Learning rate, checkpoint and logging intervals, epochs, warm-up and the NaN policy.

        `more`: further `validation.validate_training_values` arguments of the job
        (``num_train_steps=job.num_train_steps``, batch sizes, ``max_eval_steps``),
        checked in the same call, so the first bad flag in its order is the one named.
        """
        job = self.job
        values = dict(learning_rate=job.learning_rate,
                      save_checkpoints_steps=job.save_checkpoints_steps,
                      keep_checkpoint_max=job.keep_checkpoint_max, log_steps=job.log_steps,
                      do_eval=getattr(job, "do_eval", False))
        if epochs:
            values.update(num_train_epochs=job.num_train_epochs if self.training else None,
                          warmup_proportion=job.warmup_proportion)
        values.update(more)
        validation.validate_training_values(self.training, **values)
        if job.nan_policy not in trainer_lib.NAN_POLICIES:
            raise self.error("--nan_policy=%s: expected one of %s"
                             % (job.nan_policy, ", ".join(trainer_lib.NAN_POLICIES)))

    def load_family(self, family_flag="model_family"):
        """The registered family `job.<family_flag>` names, passed by `check_family`."""
        try:
            family = registry.families.get(getattr(self.job, family_flag))
        except registry.RegistryError as e:
            raise self.error("--%s: %s" % (family_flag, e)) from e
        self.check_family(family)
        return family

    def load_family_config(self, config_flag="bert_config_file", family_flag="model_family"):
        """(family, config): the registered family and its config file, with max_seq_length checked."""
        job = self.job
        family = self.load_family(family_flag)
        path = getattr(job, config_flag)
        if path and not os.path.exists(path) and path in family.preset_names():
            # A named size (`Family.presets`), its vocabulary that of --vocab_file.
            config = family.config_from(path, vocab_size=self.preset_vocab_size())
            logging.info("--%s=%s: the %s family's preset (vocab_size %d)", config_flag, path,
                         family.name, config.vocab_size)
        else:
            self.check_config_file(config_flag, path)
            config = family.load_config(path)
        max_positions = getattr(config, "max_position_embeddings", None)
        if max_positions is not None and job.max_seq_length > max_positions:
            raise self.error(
                "Cannot use sequence length %d because the BERT model (%s) was only trained up "
                "to sequence length %d (max_position_embeddings)."
                % (job.max_seq_length, path, max_positions))
        return family, config

    def preset_vocab_size(self):
        """The size of `job.vocab_file` (a WordPiece vocab.txt or a BPE vocab.json) for a
        preset config; None (the preset's own size) without one."""
        path = getattr(self.job, "vocab_file", None)
        if not path or not os.path.isfile(path):
            return None
        if path.endswith(".json"):
            import json  # pylint: disable=import-outside-toplevel
            with open(path, encoding="utf-8") as f:
                return len(json.load(f))
        from data import tokenization  # pylint: disable=import-outside-toplevel
        return len(tokenization.load_vocab(path))

    def check_max_seq_length(self, config):
        """``--max_seq_length=N exceeds max_position_embeddings=M of the model config``
        (for a config `load_family_config` did not read)."""
        max_positions = getattr(config, "max_position_embeddings", None)
        if max_positions is not None and self.job.max_seq_length > max_positions:
            raise self.error("--max_seq_length=%d exceeds max_position_embeddings=%d of the "
                             "model config" % (self.job.max_seq_length, max_positions))

    def init_pretrainer(self, model):
        """`init_model` of a pre-training model: from `job.init_checkpoint` with what it holds
        of the heads (a checkpoint without pre-training heads starts them fresh); nothing
        without one (from scratch is the usual pre-training run)."""
        from modeling import checkpoints  # pylint: disable=import-outside-toplevel
        if self.job.init_checkpoint:
            checkpoints.init_from_checkpoint(model, self.job.init_checkpoint,
                                             allow_missing_heads=True)

    def check_config_file(self, config_flag, path):
        """`load_family_config`'s check of the config path: ``--FLAG=PATH: no such file``.

        A job whose family reader takes other paths too (``gs://...``) and names a missing
        file itself overrides it with a no-op.
        """
        if not os.path.exists(path):
            raise self.error("--%s=%s: no such file" % (config_flag, path))

    def check_files(self, *names):
        """Each named field is an existing local file (``--NAME=PATH: no such file``)."""
        for name in names:
            path = getattr(self.job, name)
            if not os.path.exists(path):
                raise self.error("--%s=%s: no such file" % (name, path))

    def folder_tokenizer(self, config, checkpoint_field="init_checkpoint"):
        """The checkpoint folder's own tokenizer, or None (see `folder_tokenizer`)."""
        return folder_tokenizer(self.job, config, self.error, checkpoint_field)

    def load_tokenizer(self, config):
        """The model folder's own tokenizer (RoBERTa's BPE, ALBERT's SentencePiece, ...:
        `folder_tokenizer`), else Google's WordPiece of `job.vocab_file`, checked against
        the config (`check_vocab_matches`)."""
        from data import tokenization  # pylint: disable=import-outside-toplevel
        tokenizer = self.folder_tokenizer(config)
        if tokenizer is None:
            self.check_vocab_matches(config)
            tokenizer = tokenization.FullTokenizer(self.job.vocab_file, self.job.do_lower_case)
        return tokenizer

    def check_case_matches_checkpoint(self):
        """`--do_lower_case` agrees with what Google's `--init_checkpoint` name says
        (`tokenization.validate_case_matches_checkpoint`), refused as the runner's error."""
        from data import tokenization  # pylint: disable=import-outside-toplevel
        try:
            tokenization.validate_case_matches_checkpoint(self.job.do_lower_case,
                                                          self.job.init_checkpoint)
        except ValueError as e:
            raise self.error(str(e)) from e

    def check_vocab_matches(self, config, required=("[UNK]", "[CLS]", "[SEP]")):
        """The WordPiece vocabulary has the special tokens and the config's vocab_size."""
        from data import tokenization  # pylint: disable=import-outside-toplevel
        job = self.job
        vocab = tokenization.load_vocab(job.vocab_file)
        tokenization.check_vocab_special_tokens(vocab, job.vocab_file, required=required)
        if len(vocab) != config.vocab_size:
            raise self.error(
                "The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d; "
                "use the vocab.txt that belongs to the model."
                % (job.vocab_file, len(vocab), job.bert_config_file, config.vocab_size))
        return vocab

    # ----- splits and label lists (jobs with data_dir and train_file / dev_file / ...) -----

    def split_path(self, name, default):
        """A split's file: `job.<name>` (a path, or a name inside `job.data_dir`), else
        `data_dir/<default>`; ``Give --data_dir or --NAME.`` with neither."""
        job = self.job
        value = getattr(job, name)
        if value and (os.path.isabs(value) or not job.data_dir or tf.io.gfile.exists(value)):
            return value
        if not job.data_dir:
            raise self.error("Give --data_dir or --%s." % name)
        return os.path.join(job.data_dir, value or default)

    def read_split(self, name, default, read, what="examples"):
        """`read(path)` of the split's file (`split_path`); a missing file, or one `read`
        finds nothing in (``<path> has no <what>.``), is refused."""
        path = self.split_path(name, default)
        if not tf.io.gfile.exists(path):
            raise self.error("--%s: %s does not exist"
                             % (name if getattr(self.job, name) else "data_dir", path))
        examples = read(path)
        if not examples:
            raise self.error("%s has no %s." % (path, what))
        return examples

    def saved_label_list(self, labels, file_name="label_list.txt"):
        """`labels` (from the training split) written to `output_dir/<file_name>`; with
        None (no training), the list a training run wrote there, read back."""
        from data import atomic  # pylint: disable=import-outside-toplevel
        path = os.path.join(self.job.output_dir, file_name)
        if labels is not None:
            self.check_label_list_unchanged(labels, file_name)
            atomic.write_text(path, "".join(label + "\n" for label in labels))
            return labels
        if not tf.io.gfile.exists(path):
            raise self.error("Without --do_train the labels come from %s, written by a training "
                             "run in --output_dir; it does not exist." % path)
        with tf.io.gfile.GFile(path) as f:
            return [line.strip() for line in f if line.strip()]

    def check_label_list_unchanged(self, labels, file_name="label_list.txt"):
        """Refuses to change the label list of a run that trained in `output_dir`.

        Its checkpoints are only right with the labels they were trained on:
        a later run there with other training labels (resuming, or evaluating
        and predicting afterwards) would read the old weights with new ids
        and write wrong tags with status 0. A directory without a checkpoint
        (a run that failed before training) takes the new list.
        """
        path = os.path.join(self.job.output_dir, file_name)
        if not tf.io.gfile.exists(path) or not tf.train.latest_checkpoint(self.job.output_dir):
            return
        with tf.io.gfile.GFile(path) as f:
            saved = [line.strip() for line in f if line.strip()]
        if saved != list(labels):
            added = [l for l in labels if l not in saved]
            missing = [l for l in saved if l not in labels]
            difference = "; ".join(part for part in (
                "new: " + ", ".join(added) if added else "",
                "absent: " + ", ".join(missing) if missing else "",
                "" if added or missing else "same labels in another order") if part)
            raise self.error(
                "%s holds the labels of the run already trained in --output_dir (%s), and this "
                "run's training labels differ (%s); give another --output_dir"
                % (path, ", ".join(saved), difference))

    # ----- a task of a multi-task job ----------------------------------------------------

    @classmethod
    def task_of(cls, job, **shared):
        """A runner of the single-task `job` that is one task of a multi-task job, not run
        itself: `shared` (the family, config, tokenizer, ... the multi-task job checked
        once) become its attributes, for the task's own checks and its data step (e.g.
        `read_splits` / `write_splits`) to use, writing under `job.output_dir`."""
        runner = cls(job)
        for name, value in shared.items():
            setattr(runner, name, value)
        return runner
