"""The pre-training tf.data reader: batching, sharding per input pipeline."""

import os

import numpy as np
import tensorflow as tf

from data import input_pipeline
from data import tf_example

SEQ, PRED = 16, 4


def _write_files(tmp_path, num_files, per_file):
    paths = []
    serial = 0
    for f in range(num_files):
        path = os.path.join(str(tmp_path), "part-%d.tfrecord" % f)
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(per_file):
                ids = [serial] + [1] * (SEQ - 1)
                writer.write(tf_example.serialize_example(
                    {"input_ids": ids, "input_mask": [1] * SEQ, "segment_ids": [0] * SEQ,
                     "masked_lm_positions": [1, 2, 0, 0], "masked_lm_ids": [5, 6, 0, 0],
                     "next_sentence_labels": [serial % 2]},
                    {"masked_lm_weights": [1.0, 1.0, 0.0, 0.0]}))
                serial += 1
        paths.append(path)
    return paths, serial


def _serials(dataset, steps=None):
    out = []
    for i, batch in enumerate(dataset):
        if steps is not None and i >= steps:
            break
        out.extend(batch["input_ids"][:, 0].numpy().tolist())
    return out


def test_eval_reads_everything_once_in_order(tmp_path):
    paths, total = _write_files(tmp_path, 3, 10)
    d = input_pipeline.pretraining_dataset(",".join(paths), SEQ, PRED, batch_size=4,
                                           is_training=False, drop_remainder=False)
    assert _serials(d) == list(range(total))
    d = input_pipeline.pretraining_dataset(os.path.join(str(tmp_path), "part-*"), SEQ, PRED,
                                           batch_size=4, is_training=False)
    batches = list(d)
    assert len(batches) == total // 4  # drop_remainder
    for batch in batches:
        assert batch["input_ids"].shape == (4, SEQ)
        assert batch["next_sentence_labels"].shape == (4, 1)
        assert batch["masked_lm_weights"].dtype == tf.float32


def test_training_shuffles_and_repeats(tmp_path):
    paths, total = _write_files(tmp_path, 3, 10)
    d = input_pipeline.pretraining_dataset(paths, SEQ, PRED, batch_size=5, is_training=True,
                                           seed=1, shuffle_buffer_size=20)
    seen = _serials(d, steps=30)  # 150 records from 30 -> repeated
    assert len(seen) == 150 and set(seen) == set(range(total))
    assert seen[:total] != list(range(total))


def test_sharding_by_input_context(tmp_path):
    for num_files in (4, 1):  # by file when there are enough files, by record otherwise
        sub = tmp_path / ("files%d" % num_files)
        sub.mkdir()
        paths, total = _write_files(sub, num_files, 12 // num_files)
        shards = []
        for pipeline_id in range(2):
            context = tf.distribute.InputContext(
                num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2)
            d = input_pipeline.pretraining_dataset(paths, SEQ, PRED, batch_size=4,
                                                   is_training=False, input_context=context,
                                                   drop_remainder=False)
            batch_sizes = [b["input_ids"].shape[0] for b in d]
            assert max(batch_sizes) == 2  # per-replica batch size
            shards.append(_serials(d))
        assert not set(shards[0]) & set(shards[1])
        assert sorted(shards[0] + shards[1]) == list(range(total))


def test_distributed_dataset_under_mirrored_strategy(tmp_path):
    paths, _ = _write_files(tmp_path, 2, 8)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    fn = input_pipeline.pretraining_input_fn_builder(paths, SEQ, PRED, is_training=True,
                                                     batch_size=4, seed=3)
    dist = strategy.distribute_datasets_from_function(fn)
    batch = next(iter(dist))
    per_replica = strategy.experimental_local_results(batch["input_ids"])
    assert len(per_replica) == 2 and all(t.shape == (2, SEQ) for t in per_replica)
    assert np.all(np.concatenate([t.numpy() for t in per_replica])[:, 1:] == 1)
