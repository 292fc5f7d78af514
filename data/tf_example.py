"""`tf.train.Example` records from Python lists: how every TFRecord here is written.

The fine-tuning features (`data.processors.features`) are written as Google's
scripts write them (the pre-training writer writes the same bytes for its
fixed seven features directly, `data.pretraining.example_encoder`, checked
against `serialize_example`): a `tf.train.Example` whose features are Int64Lists and
FloatLists, built from plain Python lists.

Why `tf.train.Example` and not a hand-written encoder: this project used to
encode the protobuf wire format itself in pure Python (`data/example_proto.py`),
to keep TensorFlow out of the data worker processes and on the belief that it
was faster. `benchmarks/bench_example_proto.py` measured it against
`tf.train.Example` on 2,000 pre-training instances (seq 128, Google's 7
features): the protobuf runtime TensorFlow ships (upb, in C) was several
times as fast, with byte-identical records, so
the hand-written encoder was deleted (the benchmark keeps a copy of it as the
baseline it measures). The price is that pre-training data workers import
TensorFlow (a few seconds at start-up).

Records are serialised with ``deterministic=True``: map entries (the
features) are written in sorted key order, so the bytes do not depend on the
order a dict was filled in, and they are the bytes this project wrote before.
"""

import tensorflow as tf

__all__ = ["int64_feature", "float_feature", "bytes_feature", "make_example",
           "serialize_example"]


def int64_feature(values):
    """A `tf.train.Feature` holding an Int64List."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def float_feature(values):
    """A `tf.train.Feature` holding a FloatList (float32 on the wire)."""
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def bytes_feature(values):
    """A `tf.train.Feature` holding a BytesList."""
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def make_example(int_features=None, float_features=None, bytes_features=None):
    """A `tf.train.Example` of the given features.

    Args:
      int_features: dict name -> list of ints (an Int64List each).
      float_features: dict name -> list of floats (a FloatList each).
      bytes_features: dict name -> list of bytes (a BytesList each).
    """
    feature = {}
    for features, make in ((int_features, int64_feature), (float_features, float_feature),
                           (bytes_features, bytes_feature)):
        for name, values in (features or {}).items():
            if name in feature:
                raise ValueError("Feature %r is given twice (as two different types)." % name)
            feature[name] = make(values)
    return tf.train.Example(features=tf.train.Features(feature=feature))


def serialize_example(int_features=None, float_features=None, bytes_features=None):
    """The serialised `tf.train.Example` of the given features (see `make_example`)."""
    return make_example(int_features, float_features, bytes_features).SerializeToString(
        deterministic=True)
