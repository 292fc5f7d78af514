"""Fine-tuning input formats: how one model family turns examples into model inputs.

`run_classifier.py` (`modeling.tasks.classifier_job`) reads a task's
examples through a `DataProcessor` and trains with the one trainer whatever
the model, but each family frames its inputs its own way:

    BERT, ALBERT   [CLS] a [SEP] b [SEP], segment ids, the pooled [CLS]
    GPT            <s> a $ b <e>, new embedding rows for the three tokens,
                   the hidden state at <e>, both orders for similarity, one
                   sequence per candidate for multiple choice, plus an
                   auxiliary language-model loss
    XLNet          A <sep> B <sep> <cls>, SentencePiece, [CLS] at the end

A family's way is an `InputFormat` subclass registered here under the
family's name (`FORMATS.register("gpt", GPTInputFormat)`, next to its task
model in the family's package: `modeling/gpt/classification.py`); the job
asks `format_class_for(family)` and never branches on a family's name. A
family without one gets the default, `classifier_job.PooledInputFormat`
(Google's packing and `BertClassifier`), which needs an encoder with a
pooled output.

The contract, one object per run (`InputFormat(job, config)`), called in this
order:

    check_family(job, family)    (static) before the config is read
    check()                      settings that need no data (flags of the
                                 format: vocabulary files, its own options)
    tokenizer()                  the text tokenizer (after checking the
                                 vocabulary against the config)
    prepare(processor, task_type, label_list, num_labels)
                                 sees the task before any example is read
    write_records(examples, path, label_list, task_type, tokenizer)
                                 TFRecords of one split (atomically)
    input_fn(path, batch_size, is_training, task_type, num_labels)
    build_model(num_labels, task_type)          a fresh task model
    init_model(model, checkpoint)               --init_checkpoint into it
    export(model, export_dir, output_name)      a SavedModel, if supported

Every bad setting or input is a `ClassifierJobError` (or a `DataError` of the
data) with a one-line message naming the flag, file or line at fault.
"""

import os

from modeling import registry

__all__ = ["ClassifierJobError", "FORMATS", "InputFormat", "bidirectional_encoder",
           "check_token_encoder", "format_class_for"]


class ClassifierJobError(ValueError):
    """Bad job settings or inputs, reported as one line."""


FORMATS = registry.Registry("fine-tuning input format")


def format_class_for(family_name, default):
    """The `InputFormat` class registered for `family_name`, else `default`."""
    if family_name in FORMATS:
        return FORMATS.get(family_name)
    return default


def bidirectional_encoder(family):
    """Whether `family`'s encoder reads each token with the context on both sides, as the
    token and span tasks need (NER, bi-encoders, span QA): a family with a pooled output
    or a sentence vector of its own (DistilBERT's first token). A causal language model
    (GPT's, GPT-2's) registers neither."""
    return bool(family.has_pooler or family.sentence_vector != "pooled")


def check_token_encoder(job, family, task, error, takes=None):
    """Refuses, in one line, a `family` without a `bidirectional_encoder` for `task`, what
    the task does with one ("NER tags the words with").

    The message names the folder of `--init_checkpoint` when the family came
    from one (else `--model_family`), what the family lacks, and the families
    with a published-folder format that the task takes (`takes(family)`,
    default any bidirectional one).
    """
    if bidirectional_encoder(family):
        return
    path = getattr(job, "init_checkpoint", None)
    where = ("--init_checkpoint=%s" % path if path and os.path.isdir(path)
             else "--model_family=%s" % family.name)
    takes = takes or bidirectional_encoder
    usable = [name for name, other in registry.families.items()
              if other.hf is not None and bidirectional_encoder(other) and takes(other)]
    raise error("%s: %s a bidirectional encoder; a %s model is a causal language model (no "
                "pooled output or sentence vector): use a folder of %s"
                % (where, task, family.name, ", ".join(usable)))


class InputFormat:
    """One run's input format (see the module docstring).

    Args:
        job: the `ClassifierJob` (its fields are the script's flags).
        config: the family's model config, read from `--bert_config_file`.
        family: the `registry.Family`.
    """

    #: Whether `input_fn`'s batches are Google's layout (`input_ids`, `input_mask`,
    #: `segment_ids` of `max_seq_length`, padded on one side), so that the job
    #: may cut them to their length (`modeling.tasks.length_batching`).
    trims_batches = False

    def __init__(self, job, config, family):
        self.job = job
        self.config = config
        self.family = family

    @staticmethod
    def check_family(job, family):
        """Checks that the format can serve `family` (before its config is read)."""

    def check(self):
        """Checks the job's settings that need no data."""

    def tokenizer(self):
        raise NotImplementedError

    def prepare(self, processor, task_type, label_list, num_labels):
        """Sees the task's processor and labels before any example is read."""

    def write_records(self, examples, path, label_list, task_type, tokenizer):
        raise NotImplementedError

    def input_fn(self, path, batch_size, is_training, task_type, num_labels):
        raise NotImplementedError

    def build_model(self, num_labels, task_type):
        raise NotImplementedError

    def init_model(self, model, checkpoint):
        raise NotImplementedError

    def export(self, model, export_dir, output_name):
        raise ClassifierJobError("--export_dir: the %s input format has no SavedModel export"
                                 % self.family.name)
