"""tf.data input functions for the pre-training TFRecords.

`pretraining_dataset` reads the files written by `run/create_pretraining_data.py`
(Google's feature names and shapes) and is meant to be called once per input
pipeline under a `tf.distribute` strategy, through
``strategy.distribute_datasets_from_function``: given the `tf.distribute.InputContext`
it shards the input (by file when there are enough files, by record otherwise)
and batches with the per-replica batch size.

Training reads repeat forever with files shuffled and read in parallel
(interleaved), records shuffled in a buffer, and batches prefetched, so the
input pipeline stays ahead of the model. Evaluation reads files in order,
once (or repeated, for a fixed number of eval steps).
"""

import tensorflow as tf

from data import corpus as corpus_lib


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """The `tf.io.parse_example` spec of Google's pre-training features."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def decode_batch(serialized, feature_spec):
    """Parses a batch of serialised Examples; int64 features become int32.

    TPUs and most kernels want int32 ids, and int32 halves the host-to-device
    traffic.
    """
    features = tf.io.parse_example(serialized, feature_spec)
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in features.items()}


def tfrecord_dataset(input_patterns, feature_spec, batch_size, is_training,
                     input_context=None, shuffle_buffer_size=1000,
                     cycle_length=4, seed=None, repeat=None,
                     drop_remainder=True):
    """A batched dataset of parsed features from TFRecord files.

    Args:
      input_patterns: comma-separated globs (or a list of them).
      feature_spec: dict for `tf.io.parse_example`.
      batch_size: the batch size of this input pipeline. Under a strategy,
        pass the global batch size together with `input_context`; the
        per-replica size is derived from it.
      is_training: shuffle files and records, interleave files.
      input_context: a `tf.distribute.InputContext`, or None.
      shuffle_buffer_size: records in the shuffle buffer (training).
      cycle_length: files read in parallel (training).
      seed: shuffling seed, for reproducible runs.
      repeat: repeat forever; defaults to `is_training`.
      drop_remainder: keep batch shapes static (required on TPUs).
    """
    files = corpus_lib.expand_file_patterns(input_patterns)
    if repeat is None:
        repeat = is_training
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines

    if is_training:
        d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
        if shard_by_file:
            d = d.shard(num_pipelines, pipeline_id)
        if repeat:
            d = d.repeat()
        d = d.shuffle(buffer_size=len(files), seed=seed)
        d = d.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(cycle_length, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        if num_pipelines > 1 and not shard_by_file:
            d = d.shard(num_pipelines, pipeline_id)
        d = d.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
    else:
        d = tf.data.TFRecordDataset(files)
        if num_pipelines > 1:
            d = d.shard(num_pipelines, pipeline_id)
        if repeat:
            d = d.repeat()
    # Batch first, then parse the whole batch in one op: much faster than
    # parsing record by record.
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    d = d.map(lambda s: decode_batch(s, feature_spec),
              num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def pretraining_dataset(input_patterns, max_seq_length, max_predictions_per_seq,
                        batch_size, is_training, input_context=None, **kwargs):
    """Batches of Google's pre-training features (see `tfrecord_dataset`)."""
    return tfrecord_dataset(
        input_patterns,
        pretraining_feature_spec(max_seq_length, max_predictions_per_seq),
        batch_size, is_training, input_context=input_context, **kwargs)


def pretraining_input_fn_builder(input_files, max_seq_length, max_predictions_per_seq,
                                 is_training, batch_size, **kwargs):
    """Google-style builder: returns ``input_fn(input_context=None)``.

    The returned function can be handed directly to
    ``strategy.distribute_datasets_from_function``.
    """
    def input_fn(input_context=None):
        return pretraining_dataset(input_files, max_seq_length, max_predictions_per_seq,
                                   batch_size, is_training, input_context=input_context,
                                   **kwargs)
    return input_fn
