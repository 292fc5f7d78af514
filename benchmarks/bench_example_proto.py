"""Was the hand-written tf.train.Example encoder worth keeping? (It was not.)

    python benchmarks/bench_example_proto.py [--instances=2000] [--rounds=5]

This project used to encode pre-training examples in pure Python
(`data/example_proto.py`, copied below as `handwritten_serialize`) instead of
building `tf.train.Example` protos. It only earned its place if it was faster
than the protobuf runtime TensorFlow ships (the C-backed `upb` in current
releases), so this script serialises the same pre-training instances both
ways:

  * hand-written: `handwritten_serialize(int_features, float_features)`
  * tf.train.Example: `data.tf_example.serialize_example`, i.e.
    `tf.train.Example(features=tf.train.Features(feature={...}))
    .SerializeToString(deterministic=True)`, what the project uses now

with Google's 7 features (`input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`), checks that every record is byte-identical
(`deterministic=True` writes map entries in sorted key order, as the
hand-written encoder does), and prints the best round's time of each, their
ratio, the protobuf backend and the machine's CPU (model and an abridged
flags line of /proc/cpuinfo). Takes a few seconds.

Measured when the decision was made (AMD EPYC, 2 shared cores, Python 3.11,
TensorFlow 2.21, protobuf 7.36 upb), two runs: hand-written 627 / 531 ms,
tf.train.Example 170 / 95 ms for 2,000 instances; tf.train.Example 3.7x / 5.6x
as fast.
"""

import argparse
import os
import platform
import random
import struct
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from google.protobuf import __version__ as protobuf_version  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

from data import tf_example  # noqa: E402

# CPU flags that matter for this kind of code, in the order printed.
_INTERESTING_FLAGS = ("sse4_2", "avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw",
                      "avx512_vnni", "amx_tile", "sha_ni", "neon", "asimd")


# ------------------------------------------------ the former data/example_proto.py
# Protobuf wire format (field number << 3 | wire type):
#   Example  { Features features = 1; }
#   Features { map<string, Feature> feature = 1; }   (map entry: key = 1, value = 2)
#   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
#                      Int64List int64_list = 3; } }
#   Int64List / FloatList { repeated int64/float value = 1 [packed]; }


def _varint(value):
    if value < 0:
        value += 1 << 64  # int64 negatives are 10-byte two's complement
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
    return _length_delimited(3, _length_delimited(1, packed) if values else b"")


def _float_feature(values):
    packed = struct.pack("<%df" % len(values), *values)
    return _length_delimited(2, _length_delimited(1, packed) if values else b"")


def handwritten_serialize(int_features=None, float_features=None):
    """The serialised Example, features in sorted key order (the deleted encoder)."""
    entries = []
    for features, encode in ((int_features, _int64_feature),
                             (float_features, _float_feature)):
        for name, values in (features or {}).items():
            entries.append((name, encode(values)))
    entries.sort(key=lambda e: e[0])
    body = b"".join(
        _length_delimited(1, _length_delimited(1, name.encode("utf-8")) +
                          _length_delimited(2, feature))
        for name, feature in entries)
    return _length_delimited(1, body)


# ----------------------------------------------------------------- benchmark


def make_instances(n, seq_length=128, max_predictions=20, vocab_size=30522, seed=0):
    """`n` (int_features, float_features) pairs shaped like Google's pre-training data."""
    rng = random.Random(seed)
    instances = []
    for _ in range(n):
        length = seq_length if rng.random() < 0.9 else rng.randint(16, seq_length)
        first = rng.randint(2, length - 2)
        input_ids = [101] + [rng.randrange(999, vocab_size) for _ in range(length - 2)] + [102]
        input_ids[first] = 102
        pad = seq_length - length
        num_masked = min(max_predictions, max(1, round(length * 0.15)))
        positions = sorted(rng.sample(range(1, length - 1), num_masked))
        mp_pad = max_predictions - num_masked
        int_features = {
            "input_ids": input_ids + [0] * pad,
            "input_mask": [1] * length + [0] * pad,
            "segment_ids": [0] * (first + 1) + [1] * (length - first - 1) + [0] * pad,
            "masked_lm_positions": positions + [0] * mp_pad,
            "masked_lm_ids": [rng.randrange(999, vocab_size) for _ in positions] + [0] * mp_pad,
            "next_sentence_labels": [rng.randint(0, 1)],
        }
        float_features = {"masked_lm_weights": [1.0] * num_masked + [0.0] * mp_pad}
        instances.append((int_features, float_features))
    return instances


def serialize_handwritten(instances):
    return [handwritten_serialize(ints, floats) for ints, floats in instances]


def serialize_tf(instances):
    return [tf_example.serialize_example(ints, floats) for ints, floats in instances]


def best_of(fn, instances, rounds):
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn(instances)
        best = min(best, time.perf_counter() - start)
    return best, result


def cpu_description():
    """(model name, abridged flags) from /proc/cpuinfo, or what platform knows."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = value.split()
    except OSError:
        pass
    shown = [flag for flag in _INTERESTING_FLAGS if flag in flags]
    return model, "%s (%d flags in all)" % (" ".join(shown) or "-", len(flags))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seq_length", type=int, default=128)
    args = parser.parse_args()

    instances = make_instances(args.instances, args.seq_length)
    serialize_tf(instances[:10])  # warm up both paths
    serialize_handwritten(instances[:10])
    hand_time, handwritten = best_of(serialize_handwritten, instances, args.rounds)
    tf_time, theirs = best_of(serialize_tf, instances, args.rounds)
    mismatches = sum(a != b for a, b in zip(handwritten, theirs))
    if mismatches:
        raise SystemExit("bench_example_proto: %d of %d records differ between the "
                         "hand-written encoder and tf.train.Example"
                         % (mismatches, len(handwritten)))

    model, flags = cpu_description()
    print("CPU:       %s, %d cores visible" % (model, os.cpu_count() or 0))
    print("CPU flags: %s" % flags)
    print("Python %s, TensorFlow %s, protobuf %s (%s backend)"
          % (platform.python_version(), tf.__version__, protobuf_version,
             api_implementation.Type()))
    print("%d instances, seq %d, 7 features, %d bytes each on average; identical bytes: yes"
          % (len(instances), args.seq_length, sum(map(len, handwritten)) // len(handwritten)))
    print("best of %d rounds:" % args.rounds)
    print("  hand-written encoder    %8.1f ms  %8.0f instances/s"
          % (hand_time * 1e3, len(instances) / hand_time))
    print("  tf.train.Example        %8.1f ms  %8.0f instances/s"
          % (tf_time * 1e3, len(instances) / tf_time))
    if hand_time < tf_time:
        print("the hand-written encoder is %.2fx as fast as tf.train.Example"
              % (tf_time / hand_time))
    else:
        print("tf.train.Example is %.2fx as fast as the hand-written encoder"
              % (hand_time / tf_time))


if __name__ == "__main__":
    main()
