"""Windows of raw-text files as a sharded, shuffled, batched `tf.data` pipeline.

What the raw-text pre-training pipelines share (RoBERTa's dynamic masking,
the causal LM's packing): each file becomes a dataset of fixed-size windows
through a `pack(path)` function of the caller's; the files are sharded
between input pipelines when there are enough of them (windows otherwise),
read in parallel and shuffled when training, and the windows batched.
"""

import tensorflow as tf

__all__ = ["batched_windows"]


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
