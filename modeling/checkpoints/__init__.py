"""Checkpoint formats: Google TF1, Hugging Face safetensors, this project's own.

Users arrive with weights in one of three shapes and expect each to work as
`--init_checkpoint`:

* name-based TF1 checkpoints (`bert_model.ckpt.{index,data-*}`): Google's
  BERT releases, google-research/albert's, anything trained with their TF1
  scripts. Variable names (`bert/encoder/layer_3/attention/self/query/kernel`)
  are the contract. Read and written by `google_tf1`.
* Hugging Face exports (`model.safetensors`): PyTorch layout under PyTorch
  module names. Read by `safetensors_format` with the `safetensors`
  package; PyTorch pickles (`pytorch_model.bin`) are refused, because
  unpickling can run arbitrary code.
* this project's own object-based checkpoints (`ckpt-N`, written by
  `modeling.training.trainer.Trainer`): matched by variable path, for every family,
  by `object_based`.

`init_from_checkpoint(model, path)` tells them apart (`resolve_checkpoint`)
and loads whichever it is. What the external names mean is not written here
but in each family's package (`modeling/bert/checkpoint_names.py`,
`modeling/albert/checkpoint_names.py`), as name tables registered on the
family (`registry.Family.name_tables`); `name_tables` is the machinery that
applies them in both directions. The family of a model is found through
`modeling.registry.families` (`targets`), so this package knows no family:
a new family's checkpoints load once it registers its tables.

What must match, what is skipped (the policy, for every format)
---------------------------------------------------------------
* Encoder weights are always required: every one the model has must be in
  the checkpoint with the right shape, and every encoder-namespace entry of
  the checkpoint (`bert/...`; HF `embeddings.*`, `encoder.*`, `pooler.*`)
  must have a place in the model. A deeper or wider checkpoint is an error,
  never a silent partial load.
* Pre-training heads (`cls/predictions/*`, `cls/seq_relationship/*`) are
  loaded when the model is a pretrainer with those objectives. If the
  checkpoint lacks them that is an error (continuing pre-training from an
  encoder-only export would otherwise restart the heads from random without
  anyone noticing), unless `allow_missing_heads=True`, in which case they
  keep their initial values and are listed in `LoadReport.missing_heads`.
* Heads the model does not have are skipped and listed (an encoder or a
  classifier loading a pre-training checkpoint), as are variables outside
  the family's namespaces (`output_weights` of a fine-tuned classifier).
* Optimizer state is skipped (Google's `*/adam_m`, `*/adam_v`, TF1
  `Adam`/`Momentum` slots, `global_step`; the trainer's optimizer), as are
  buffers (HF's `position_ids`) and tied copies (HF's
  `cls.predictions.decoder.weight`, checked equal to the word embeddings
  when the model has the MLM head, since this model can only tie them).
* Any problem raises ONE `CheckpointMismatchError` listing all missing,
  unexpected and mis-shaped names (with both shapes, in the checkpoint's own
  layout), before any variable is touched: a failed load leaves the model
  as it was. A checkpoint that cannot be read into the model at all (a
  pickle, a format the family has no names for) is a one-line
  `CheckpointFormatError`.

Example:

    >>> encoder = BertEncoder.from_config_object(
    ...     load_bert_config("uncased_L-12_H-768_A-12/bert_config.json"))
    >>> report = init_from_checkpoint(encoder, "uncased_L-12_H-768_A-12")
    >>> print(report)       # format, counts, what was skipped and why
    >>> save_google_checkpoint(pretrainer, "/tmp/export/bert_model.ckpt")
"""

import importlib
import os

from absl import logging
import tensorflow as tf

from modeling.checkpoints import name_tables
from modeling.checkpoints.google_tf1 import GOOGLE_TF1
from modeling.checkpoints.google_tf1 import load_google_checkpoint
from modeling.checkpoints.google_tf1 import save_google_checkpoint
from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Split
from modeling.checkpoints.name_tables import fused
from modeling.checkpoints.object_based import GRAPH_KEY
from modeling.checkpoints.object_based import OBJECT_BASED
from modeling.checkpoints.object_based import legacy_block_path
from modeling.checkpoints.object_based import load_object_based
from modeling.checkpoints.report import CheckpointFormatError
from modeling.checkpoints.report import CheckpointMismatchError
from modeling.checkpoints.report import LoadReport
from modeling.checkpoints.safetensors_format import HF_SAFETENSORS
from modeling.checkpoints.safetensors_format import load_hf_safetensors
from modeling.checkpoints.safetensors_format import read_safetensors
from modeling.checkpoints.safetensors_format import refuse_pickle
from modeling.checkpoints.safetensors_format import safetensors_path

__all__ = [
    "ALBERT_NAME_TABLE",
    "AS_IS",
    "CheckpointFormatError",
    "CheckpointMismatchError",
    "Entry",
    "GOOGLE_TF1",
    "HF_SAFETENSORS",
    "LoadReport",
    "NAME_TABLE",
    "NameEntry",
    "NameTable",
    "OBJECT_BASED",
    "Split",
    "TRANSPOSED",
    "fused",
    "init_from_checkpoint",
    "legacy_block_path",
    "load_albert_checkpoint",
    "load_google_checkpoint",
    "load_hf_safetensors",
    "load_object_based",
    "name_tables",
    "read_safetensors",
    "resolve_checkpoint",
    "save_google_checkpoint",
]

# Names that used to live here and now live with their family; imported on
# first use, because the families' packages import this one.
_MOVED = {
    "NAME_TABLE": ("modeling.bert.checkpoint_names", "NAME_TABLE"),
    "NameEntry": ("modeling.bert.checkpoint_names", "NameEntry"),
    "ALBERT_NAME_TABLE": ("modeling.albert.checkpoint_names", "ALBERT_NAME_TABLE"),
}


def __getattr__(name):
    if name in _MOVED:
        module, attribute = _MOVED[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_albert_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Loads a google-research/albert TF1 checkpoint (`model.ckpt-N`).

    The same as `load_google_checkpoint`, which reads every family's TF1
    names (ALBERT's through its registered table); kept under this name.
    The model must be an `AlbertEncoder` with `share_parameters="all"` (the
    only layout ALBERT checkpoints have; other modes are a
    `CheckpointFormatError`), a pretrainer around one, or a model whose
    `.encoder` is one.
    """
    return load_google_checkpoint(model, ckpt_prefix, allow_missing_heads)


def _has_index(prefix):
    return tf.io.gfile.exists(prefix + ".index")


KERAS_HUB = "keras_hub"


def _is_keras_hub_preset(path):
    from modeling.pretrained import keras_hub  # pylint: disable=import-outside-toplevel
    return keras_hub.is_preset(path)


def resolve_checkpoint(path):
    """Works out what `path` is: returns `(format, resolved_path)`.

    Accepted: a keras-hub preset folder ("keras_hub"); a TF checkpoint prefix (`.../bert_model.ckpt`, `.../ckpt-5`)
    or its `.index` file; a `.safetensors` file or sharded index; a
    directory holding a `checkpoint` state file (the latest is taken), a
    `bert_model.ckpt`, exactly one other `*.index`, or `model.safetensors`.
    A TF checkpoint with an object graph is "object_based", otherwise
    "google_tf1". TF checkpoints may live on any `tf.io.gfile` file system
    (`gs://`); safetensors files are memory-mapped, so they must be local.

    Raises:
        FileNotFoundError: nothing recognisable at `path`.
        CheckpointFormatError: `path` is (or a directory holding only) a
            PyTorch pickle (`pytorch_model.bin`), which is never read.
        ValueError: a directory with several checkpoints and no state file.
    """
    path = os.fspath(path)
    if not tf.io.gfile.isdir(path):
        refuse_pickle(path)  # By name: the file is never opened.
    elif _is_keras_hub_preset(path):
        return KERAS_HUB, path
    prefix = None
    if path.endswith(".index") and tf.io.gfile.exists(path):
        prefix = path[: -len(".index")]
    elif safetensors_path(path) is not None and not tf.io.gfile.isdir(path):
        return HF_SAFETENSORS, path
    elif _has_index(path):
        prefix = path
    elif tf.io.gfile.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None and _has_index(os.path.join(path, "bert_model.ckpt")):
            prefix = os.path.join(path, "bert_model.ckpt")
        if prefix is None:
            indexes = sorted(tf.io.gfile.glob(os.path.join(path, "*.index")))
            if len(indexes) > 1:
                raise ValueError(
                    f"{path} holds several checkpoints and no 'checkpoint' state "
                    f"file; pass one prefix: {[i[:-6] for i in indexes]}"
                )
            if indexes:
                prefix = indexes[0][: -len(".index")]
        if prefix is None:
            found = safetensors_path(path)
            if found is not None:
                return HF_SAFETENSORS, found
            refuse_pickle(path)
    if prefix is None:
        raise FileNotFoundError(
            f"No checkpoint at {path}: not a TF checkpoint prefix (no .index), "
            "not a .safetensors file, and not a directory holding either."
        )
    reader = tf.train.load_checkpoint(prefix)
    if GRAPH_KEY in reader.get_variable_to_shape_map():
        return OBJECT_BASED, prefix
    return GOOGLE_TF1, prefix


def init_from_checkpoint(model, path, allow_missing_heads=False):
    """The one `--init_checkpoint` loader of every script.

    Args:
        model: a registered family's encoder (`BertEncoder`,
            `AlbertEncoder`, ...); a pretrainer around one (encoder and
            heads); or any task model whose `.encoder` is one (a
            classifier, a tagger, ...): then only the encoder is loaded and
            every head in the checkpoint (Google's `cls/*`, HF's `cls.*`, a
            trainer checkpoint's objectives, a fine-tuned task head) is
            skipped, because a task's own head starts fresh.
        path: a TF1 checkpoint prefix (Google's BERT or ALBERT), a
            checkpoint written by `modeling.training.trainer.Trainer` (prefix or
            model dir; the model part is restored, the optimizer ignored), a
            directory holding either, or an HF `.safetensors` file or model
            folder. See `resolve_checkpoint`.
        allow_missing_heads: see `load_google_checkpoint`.

    A format the model's family has no name table for (e.g. HF safetensors
    for ALBERT) is a `CheckpointFormatError`; this project's own
    checkpoints load into every family.

    Returns:
        A `LoadReport` (also logged).
    """
    try:
        fmt, resolved = resolve_checkpoint(path)
        if fmt == HF_SAFETENSORS:
            report = load_hf_safetensors(model, resolved, allow_missing_heads)
        elif fmt == KERAS_HUB:
            # keras-hub reads its own preset; the family's "keras_hub" table maps it.
            from modeling.pretrained import keras_hub  # pylint: disable=import-outside-toplevel
            report = keras_hub.load_into(model, resolved, allow_missing_heads)
        elif fmt == OBJECT_BASED:
            report = load_object_based(model, resolved, allow_missing_heads)
        else:
            report = load_google_checkpoint(model, resolved, allow_missing_heads)
    except tf.errors.OpError as e:
        # TensorFlow's reader names no file ("not an sstable (bad magic
        # number)", "Checksum does not match"): a damaged checkpoint.
        message = (e.message or "").strip().splitlines()
        raise CheckpointFormatError(
            "%s: cannot read the checkpoint (%s: %s); it is damaged or incomplete"
            % (path, type(e).__name__, message[0] if message else "?")) from None
    logging.info("%s", report)
    return report
