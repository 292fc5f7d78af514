"""The default pre-training data is Google's, instance for instance.

`tests/data/google_reference/google_output.tfrecord` was written by
google-research/bert's `create_pretraining_data.py` itself (see the README
beside it); this project's writer, given the same corpus and options, must
produce the same instances in the same order: same tokens, same NSP pairs,
same masked positions and replacements, same weights.
"""

import os

import tensorflow as tf

from data.pretraining import instances
from data.pretraining import writer

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "google_reference")


def _records(path):
    records = []
    for raw in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(raw.numpy())
        records.append({key: list(value.int64_list.value) or list(value.float_list.value)
                        for key, value in example.features.feature.items()})
    return records


def test_defaults_reproduce_googles_instances(tmp_path, sample_vocab_file):
    output = str(tmp_path / "ours.tfrecord")
    writer.create_pretraining_data(
        [os.path.join(HERE, "corpus_en.txt"), os.path.join(HERE, "corpus_zh.txt")], [output],
        instances.InstanceOptions(
            vocab_file=sample_vocab_file, do_lower_case=True, max_seq_length=64,
            max_predictions_per_seq=10, masked_lm_prob=0.15, random_seed=12345,
            dupe_factor=2, short_seq_prob=0.1))
    google = _records(os.path.join(HERE, "google_output.tfrecord"))
    ours = _records(output)
    assert len(google) == 231
    assert len(ours) == len(google)
    for index, (theirs, mine) in enumerate(zip(google, ours)):
        assert mine == theirs, "instance %d differs" % index
