"""TFRecord files written without TensorFlow (the bytes `tf.io.TFRecordWriter` writes).

Each record is framed as TFRecord frames it (`data.tfrecord_check` reads the
same framing back)::

    uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes
    length bytes of data          | uint32 masked CRC-32C of the data

Local files only, uncompressed; `open_writer` gives `tf.io.TFRecordWriter`
for remote paths (``gs://...``), importing TensorFlow then. This lets
`run/create_pretraining_data.py` run without importing TensorFlow, a few
seconds of every run's start.
"""

import struct

from data import atomic
from data.tfrecord_check import masked_crc32c

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


class TFRecordWriter(object):
    """`tf.io.TFRecordWriter(path)` for a local path: `write(bytes)`, `close()`."""

    def __init__(self, path):
        self._file = open(path, "wb")

    def write(self, record):
        header = _LENGTH.pack(len(record))
        self._file.write(b"".join((header, _CRC.pack(masked_crc32c(header)), record,
                                   _CRC.pack(masked_crc32c(record)))))

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *unused):
        self.close()


def open_writer(path):
    """A TFRecord writer for `path`: this module's for local paths, TensorFlow's for remote."""
    if atomic.is_remote(path):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        return tf.io.TFRecordWriter(path)
    return TFRecordWriter(path)
