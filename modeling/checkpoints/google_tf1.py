"""Google's TF1 name-based checkpoints: read and write.

Google's releases (`uncased_L-12_H-768_A-12/bert_model.ckpt`,
google-research/albert's `model.ckpt-N`) and anything trained with their
TF1 scripts are name-based checkpoints: a `.index` + `.data-*` pair whose
variable names (`bert/encoder/layer_3/attention/self/query/kernel`) are the
contract. The names are the model family's `"google_tf1"` name table
(`modeling/<family>/checkpoint_names.py`); this module is the format half:
reading tensors by name, knowing which stored names are optimizer state,
and writing a checkpoint that Google's own scripts
(`run_classifier.py --init_checkpoint`), `tf.train.load_checkpoint` and
HF's `load_tf_weights_in_bert` read back.

Writing uses the same table as reading (its transforms backwards), so every
family with a TF1 table can be written: BERT under google-research/bert's
names, ALBERT under google-research/albert's
(`bert/encoder/transformer/group_0/inner_group_0/...`).
"""

import os

import numpy as np
import tensorflow as tf

from data import atomic
from modeling.checkpoints import name_tables
from modeling.checkpoints.report import CheckpointFormatError
from modeling.checkpoints import targets

__all__ = ["GOOGLE_TF1", "OPTIMIZER_STATE", "load_google_checkpoint",
           "save_google_checkpoint", "write_tf1_checkpoint"]

GOOGLE_TF1 = "google_tf1"

# Optimizer state and counters in TF1 checkpoints (Google's
# AdamWeightDecayOptimizer and LAMB slots, tf.train optimizers' slots and
# powers): skipped by every family's loader.
OPTIMIZER_STATE = ((
    r"(^|/)(adam_m|adam_v|Adam|Adam_1|Momentum|lamb_m|lamb_v)$"
    r"|^(global_step|beta1_power|beta2_power)$", "optimizer state"),)


class TF1Source:
    """A TF checkpoint read by name (`names`, `shape`, `read`)."""

    def __init__(self, prefix):
        self.description = f"Google TF1 checkpoint {prefix}"
        self._reader = tf.train.load_checkpoint(prefix)
        self._shapes = self._reader.get_variable_to_shape_map()

    def names(self):
        return list(self._shapes)

    def shape(self, name):
        return tuple(self._shapes[name])

    def read(self, name):
        return np.asarray(read_tensor(self._reader, name, self.description))


def read_tensor(reader, name, description):
    """`reader.get_tensor(name)`, with damage reported as one line naming the checkpoint."""
    try:
        return reader.get_tensor(name)
    except (tf.errors.OpError, IndexError) as e:
        # A truncated data file raises IndexError ("Read less bytes than
        # requested"), a flipped byte DataLossError; neither names a file.
        text = getattr(e, "message", None) or str(e)
        raise CheckpointFormatError(
            "%s: cannot read %s (%s: %s); the checkpoint is damaged or incomplete"
            % (description, name, type(e).__name__, text.strip().splitlines()[0]
               if text.strip() else "?")) from None


def load_google_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Loads a TF1 name-based checkpoint (Google's BERT or ALBERT) into `model`.

    The names are those of the model's family (`Family.name_tables
    ["google_tf1"]`): google-research/bert's for a BERT model,
    google-research/albert's for an ALBERT one.

    Args:
        model: a family's encoder; a pretrainer around one (its masked-LM
            and next-sentence / sentence-order heads are loaded too); or a
            model whose `.encoder` is one (only the encoder is loaded).
        ckpt_prefix: e.g. `.../uncased_L-12_H-768_A-12/bert_model.ckpt`
            (the prefix of the `.index` / `.data-*` files).
        allow_missing_heads: for a pretrainer, let a checkpoint without
            `cls/*` heads load (the heads keep their initial values).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointMismatchError: see `name_tables.load_by_table`; nothing is
            assigned in that case.
        CheckpointFormatError: the model's family has no TF1 names.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    target = targets.find_target(model)
    source = TF1Source(ckpt_prefix)
    table = name_tables.table_for(target, name_tables.GOOGLE_TF1_KEY, source.description)
    return name_tables.load_by_table(target, source, table, GOOGLE_TF1, ckpt_prefix,
                                     allow_missing_heads, skip=OPTIMIZER_STATE)


def save_google_checkpoint(model, ckpt_prefix, global_step=None):
    """Writes `model` as a TF1 checkpoint under its family's Google names.

    A BERT model gets google-research/bert's names, an ALBERT model
    google-research/albert's. A pretrainer writes the encoder plus its
    `cls/predictions/*` and `cls/seq_relationship/*` heads (ALBERT's
    sentence-order head is `cls/seq_relationship`, as in
    google-research/albert); an encoder or a model with an `.encoder`
    writes the encoder (`bert/*`) only. Weights are written as float32.

    Atomicity: see `write_tf1_checkpoint`.

    Args:
        model: see `load_google_checkpoint`.
        ckpt_prefix: output prefix, e.g. `out/bert_model.ckpt`; the directory
            is created if needed.
        global_step: optional int written as `global_step` (int64), as
            Google's Estimator checkpoints carry.

    Returns:
        `ckpt_prefix`.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    target = targets.find_target(model)
    table = name_tables.table_for(target, name_tables.GOOGLE_TF1_KEY,
                                  f"A Google TF1 checkpoint ({ckpt_prefix})")
    arrays = {name: np.ascontiguousarray(value, dtype=np.float32)
              for name, value in name_tables.table_arrays(target, table).items()}
    return write_tf1_checkpoint(ckpt_prefix, arrays, global_step)


def write_tf1_checkpoint(ckpt_prefix, arrays, global_step=None):
    """Writes `{name: array}` as a name-based TF checkpoint, atomically.

    The files are written under a temporary prefix in the same directory and
    then renamed, data file first and index last, so a reader (which opens
    the `.index`) sees either the old checkpoint or the complete new one,
    and a crash leaves at most a hidden temporary file. Data shards of an
    older, differently-sharded checkpoint at the same prefix are removed.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    names = list(arrays)
    tensors = [tf.constant(arrays[name]) for name in names]
    if global_step is not None:
        names.append("global_step")
        tensors.append(tf.constant(int(global_step), tf.int64))

    directory, base = os.path.split(ckpt_prefix)
    directory = directory or "."
    tf.io.gfile.makedirs(directory)
    atomic.sweep_stale_temporaries(directory)
    tmp_prefix = atomic.temporary_name(os.path.join(directory, base))
    data_suffix = ".data-00000-of-00001"
    try:
        with tf.device("/cpu:0"):
            tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                              shape_and_slices=[""] * len(names), tensors=tensors)
        tf.io.gfile.rename(tmp_prefix + data_suffix, ckpt_prefix + data_suffix,
                           overwrite=True)
        tf.io.gfile.rename(tmp_prefix + ".index", ckpt_prefix + ".index", overwrite=True)
    finally:
        for leftover in tf.io.gfile.glob(tmp_prefix + "*"):
            tf.io.gfile.remove(leftover)
        atomic.discard(tmp_prefix)
    for stale in tf.io.gfile.glob(ckpt_prefix + ".data-*-of-*"):
        if not stale.endswith(data_suffix):
            tf.io.gfile.remove(stale)
    return ckpt_prefix

