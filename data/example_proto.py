"""Serialises `tf.train.Example` protos in pure Python.

The pre-training data workers build millions of small Examples. Encoding
them here (a few dozen lines of protobuf wire format) keeps TensorFlow out of
the worker processes and is faster than building `tf.train.Example` objects.
The bytes are exactly what `tf.train.Example.SerializeToString()` produces
for the same features written in sorted key order; `tests/test_example_proto.py`
checks that against TensorFlow.

Wire format used (field number << 3 | wire type):
  Example  { Features features = 1; }
  Features { map<string, Feature> feature = 1; }   (map entry: key = 1, value = 2)
  Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
                     Int64List int64_list = 3; } }
  Int64List { repeated int64 value = 1 [packed]; }
  FloatList { repeated float value = 1 [packed]; }
"""

import struct


def _varint(value):
    if value < 0:
        value += 1 << 64  # int64 negatives are encoded as 10-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field_number, payload):
    return _varint((field_number << 3) | 2) + _varint(len(payload)) + payload


def _int64_feature(values):
    packed = b"".join(_varint(int(v)) for v in values)
    int64_list = _length_delimited(1, packed) if values else b""
    return _length_delimited(3, int64_list)


def _float_feature(values):
    packed = struct.pack("<%df" % len(values), *values)
    float_list = _length_delimited(1, packed) if values else b""
    return _length_delimited(2, float_list)


def _bytes_feature(values):
    bytes_list = b"".join(_length_delimited(1, v) for v in values)
    return _length_delimited(1, bytes_list)


def serialize_example(int_features=None, float_features=None, bytes_features=None):
    """Returns the serialised `tf.train.Example` holding the given features.

    Args:
      int_features: dict name -> list of ints (an Int64List each).
      float_features: dict name -> list of floats (a FloatList each).
      bytes_features: dict name -> list of bytes (a BytesList each).
    """
    entries = []
    for features, encode in ((int_features, _int64_feature),
                             (float_features, _float_feature),
                             (bytes_features, _bytes_feature)):
        for name, values in (features or {}).items():
            entries.append((name, encode(values)))
    entries.sort(key=lambda e: e[0])
    body = b"".join(
        _length_delimited(1, _length_delimited(1, name.encode("utf-8")) +
                          _length_delimited(2, feature))
        for name, feature in entries)
    return _length_delimited(1, body)
