"""Windows of raw-text files as a sharded, shuffled, batched `tf.data` pipeline.

What the raw-text pre-training pipelines share (RoBERTa's dynamic masking,
the causal LM's packing): each file becomes a dataset of fixed-size windows
through a `pack(path)` function of the caller's; the files are sharded
between input pipelines when there are enough of them (windows otherwise),
read in parallel and shuffled when training, and the windows batched.

`read_settings` resolves what every such pipeline's arguments leave open;
inside `pack`, `tokenized_blocks` tokenizes a file's lines and ends them with
a marker element, so that the scan that cuts windows sees the file's end.
"""

import random

import tensorflow as tf

from data import corpus as corpus_lib

__all__ = ["batched_windows", "read_settings", "tokenized_blocks"]


def read_settings(input_patterns, is_training, batch_size, repeat, seed, input_context):
    """`(files, repeat, seed, batch_size)` of a raw-text pipeline's arguments.

    The files of `input_patterns`; `repeat` None: when training; `seed`
    None: one drawn; `batch_size` per replica under `input_context`.
    """
    files = corpus_lib.expand_file_patterns(input_patterns)
    if repeat is None:
        repeat = is_training
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    return files, repeat, seed, batch_size


def tokenized_blocks(lines, tokenize_block):
    """`lines.map(tokenize_block)` and one end marker after them.

    `tokenize_block(block)` gives `(ids, row_lengths, blank, False)`; the
    marker is `(no ids, no row lengths, no blank flags, True)`.
    """
    blocks = lines.map(tokenize_block, num_parallel_calls=tf.data.AUTOTUNE)
    end = tf.data.Dataset.from_tensors((
        tf.zeros([0], tf.int32), tf.zeros([0], tf.int64), tf.zeros([0], tf.bool),
        tf.constant(True)))
    return blocks.concatenate(end)


def batched_windows(files, pack, batch_size, is_training, input_context=None, repeat=False,
                    seed=None, cycle_length=4, shuffle_buffer_size=1000,
                    drop_remainder=True):
    """Batches of `pack(path)`'s elements over `files` (see the module docstring).

    Args:
      files: file paths (already expanded).
      pack: `path (string tensor) -> tf.data.Dataset` of one file's windows.
      batch_size: the batch size of this input pipeline (per replica).
      is_training: interleave and shuffle files and windows.
      input_context: a `tf.distribute.InputContext`, or None.
      repeat: read the files forever.
      seed: shuffling seed.
      cycle_length: files read in parallel (training).
      shuffle_buffer_size: windows in the shuffle buffer (training).
      drop_remainder: drop a last partial batch.
    """
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines
    d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    if shard_by_file:
        d = d.shard(num_pipelines, pipeline_id)
    if repeat:
        d = d.repeat()
    if is_training:
        d = d.shuffle(len(files), seed=seed)
        d = d.interleave(pack, cycle_length=min(cycle_length, len(files)),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        d = d.flat_map(pack)
    if num_pipelines > 1 and not shard_by_file:
        d = d.shard(num_pipelines, pipeline_id)
    if is_training:
        d = d.shuffle(shuffle_buffer_size, seed=seed)
    return d.batch(batch_size, drop_remainder=drop_remainder)
