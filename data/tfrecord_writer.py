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
    """`tf.io.TFRecordWriter(path)` for a local path: `write(bytes)`, `close()`;
    `write_all(list of bytes)` too."""

    def __init__(self, path):
        self._file = open(path, "wb")

    def write(self, record):
        self.write_all((record,))

    def write_all(self, records):
        """Writes the records of a list, in order (one write call)."""
        pack_length = _LENGTH.pack
        pack_crc = _CRC.pack
        parts = []
        for record in records:
            header = pack_length(len(record))
            parts += (header, pack_crc(masked_crc32c(header)), record,
                      pack_crc(masked_crc32c(record)))
        self._file.write(b"".join(parts))

    def write_framed(self, data):
        """Writes records that are already framed (e.g. `ChunkResult.tfrecord_bytes()`)."""
        self._file.write(data)

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *unused):
        self.close()


class _TensorFlowWriter(object):
    """tf.io.TFRecordWriter with `write_all`, for remote paths."""

    def __init__(self, path):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        self._writer = tf.io.TFRecordWriter(path)

    def write(self, record):
        self._writer.write(record)

    def write_all(self, records):
        for record in records:
            self._writer.write(record)

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()


def open_writer(path):
    """A TFRecord writer for `path`: this module's for local paths, TensorFlow's for remote."""
    if atomic.is_remote(path):
        return _TensorFlowWriter(path)
    return TFRecordWriter(path)
