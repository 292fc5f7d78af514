"""TFRecord files written without TensorFlow: TensorFlow's bytes, read back by tf.data."""

import os
import random

import tensorflow as tf

from data import tfrecord_check
from data import tfrecord_writer


def test_same_bytes_as_tensorflows_writer(tmp_path):
    rng = random.Random(0)
    records = [b"", b"x", bytes(range(256)) * 3] + [
        bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 3000))) for _ in range(60)]
    ours = os.path.join(str(tmp_path), "ours.tfrecord")
    theirs = os.path.join(str(tmp_path), "theirs.tfrecord")
    with tfrecord_writer.TFRecordWriter(ours) as writer:
        for record in records:
            writer.write(record)
    with tf.io.TFRecordWriter(theirs) as writer:
        for record in records:
            writer.write(record)
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        assert a.read() == b.read()
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == records
    assert tfrecord_check.scan_tfrecord_file(ours).records == len(records)


def test_masked_crc_matches_a_bitwise_reference():
    header = (5).to_bytes(8, "little")
    assert tfrecord_check.masked_crc32c(header) == _reference_masked_crc(header)
    assert tfrecord_check.masked_crc32c(b"hello") == _reference_masked_crc(b"hello")


def _reference_masked_crc(data):
    # CRC-32C bit by bit (reflected polynomial 0x82F63B78), then TFRecord's mask.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
