"""Checks TFRecord inputs before a job reads them: framing, emptiness, feature lengths.

A TFRecord file is a sequence of records, each

    uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes
    length bytes of data          | uint32 masked CRC-32C of the data

`tf.data` finds out that a file is cut short, or is not a TFRecord file at
all, only when it gets there, possibly hours into a run; a file with no
records makes a repeating input spin forever; and a file written with
another `--max_seq_length` fails inside `tf.io.parse_example` with a shape
error naming no file. `verify_tfrecord_files` finds all three at the start:

* it walks each file's record headers, seeking over the data, and checks
  each length's CRC and that the file ends exactly where its last record
  does;
* it counts the records: an empty file is a warning when other files have
  records, an error when all are empty;
* it parses each file's first record as a `tf.train.Example` and checks
  that the expected features are there, with the expected number of
  values (and kind).

    from data import tfrecord_check
    tfrecord_check.verify_tfrecord_files(
        "/data/pretrain-*.tfrecord",
        {"input_ids": (128, "--max_seq_length"),
         "masked_lm_positions": (20, "--max_predictions_per_seq")})

Paths with a scheme (`gs://...`) are read through `tf.io.gfile`. Errors are
`TFRecordCheckError` (a `ValueError`), one line naming the file.
"""

import dataclasses
import os
import struct
from typing import Optional

from absl import logging
import google_crc32c

from data import corpus as corpus_lib

__all__ = ["TFRecordCheckError", "TFRecordFile", "check_example_features", "masked_crc32c",
           "scan_tfrecord_file",
           "verify_tfrecord_files"]

_HEADER_BYTES = 12   # uint64 length + uint32 masked CRC of the length
_FOOTER_BYTES = 4    # uint32 masked CRC of the data
_READ_BUFFER = 1 << 20


class TFRecordCheckError(ValueError):
    """A TFRecord input is truncated, not a TFRecord file, empty, or holds other features."""


# ------------------------------------------------------------------ CRC-32C

def _crc32c(data):
    # CRC-32C (Castagnoli) in C, with the CPU's CRC instructions where it has them.
    return google_crc32c.value(bytes(data))


def masked_crc32c(data):
    """The checksum TFRecord stores: CRC-32C, rotated right by 15, plus a constant."""
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# ------------------------------------------------------------------ framing


def _open(path):
    """`(file object, size in bytes)`; `tf.io.gfile` for remote paths."""
    if corpus_lib.is_remote(path):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        return tf.io.gfile.GFile(path, "rb"), tf.io.gfile.stat(path).length
    return open(path, "rb", buffering=_READ_BUFFER), os.path.getsize(path)


@dataclasses.dataclass
class TFRecordFile:
    """What a scan found in one file.

    Attributes:
        path: the file.
        records: the number of records.
        size: the file's size in bytes.
        first_record: the data of the first record (None when empty).
    """

    path: str
    records: int
    size: int
    first_record: Optional[bytes] = None


def scan_tfrecord_file(path):
    """Walks the record framing of one file (seeking over the data).

    Every length's CRC is checked, and the first record's data CRC; the
    other records' data is not read.

    Returns:
        A `TFRecordFile`.

    Raises:
        TFRecordCheckError: "PATH: truncated or not a TFRecord file (record
            N at byte B: ...)".
    """
    path = os.fspath(path)
    try:
        handle, size = _open(path)
    except OSError as e:
        raise TFRecordCheckError("%s: cannot be read (%s)" % (path, e)) from e

    def bad(index, offset, what):
        return TFRecordCheckError(
            "%s: truncated or not a TFRecord file (record %d at byte %d: %s; the file has "
            "%d bytes)" % (path, index, offset, what, size))

    records = 0
    first = None
    offset = 0
    with handle:
        while offset < size:
            if size - offset < _HEADER_BYTES:
                raise bad(records, offset, "the file ends inside the record's %d-byte header"
                          % _HEADER_BYTES)
            handle.seek(offset)
            header = handle.read(_HEADER_BYTES)
            if len(header) != _HEADER_BYTES:
                raise bad(records, offset, "read %d of the header's %d bytes"
                          % (len(header), _HEADER_BYTES))
            (length,) = struct.unpack("<Q", header[:8])
            (length_crc,) = struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != length_crc:
                raise bad(records, offset, "the length's checksum does not match")
            end = offset + _HEADER_BYTES + length + _FOOTER_BYTES
            if end > size:
                raise bad(records, offset, "a record of %d bytes runs past the end of the file"
                          % length)
            if records == 0:
                data = handle.read(length + _FOOTER_BYTES)
                (data_crc,) = struct.unpack("<I", data[length:])
                if masked_crc32c(data[:length]) != data_crc:
                    raise bad(records, offset, "the data's checksum does not match")
                first = data[:length]
            records += 1
            offset = end
    return TFRecordFile(path=path, records=records, size=size, first_record=first)


# ----------------------------------------------------------------- features

_KINDS = {"int64_list": "int64", "float_list": "float", "bytes_list": "bytes"}


def _expectation(name, value):
    """`(length, flag or None, kind or None)` from a `expected_features` value."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, None, None
    if isinstance(value, (tuple, list)) and 2 <= len(value) <= 3:
        length, flag = value[0], value[1]
        kind = value[2] if len(value) == 3 else None
        if isinstance(length, int) and not isinstance(length, bool) and (
                kind is None or kind in _KINDS.values()):
            return length, flag, kind
    raise TypeError("expected_features[%r]: expected a length, or (length, flag[, kind]) "
                    "with kind one of %s; got %r" % (name, ", ".join(_KINDS.values()), value))


def check_example_features(path, serialized, expected_features):
    """Checks one serialized `tf.train.Example` against `expected_features`.

    Args:
        path: the file it came from (for messages).
        serialized: the record's bytes.
        expected_features: see `verify_tfrecord_files`.

    Raises:
        TFRecordCheckError: not an Example, a feature missing, of another
            kind, or with another number of values.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from google.protobuf import message  # pylint: disable=g-import-not-at-top

    try:
        example = tf.train.Example.FromString(serialized)
    except message.DecodeError as e:
        raise TFRecordCheckError("%s: the first record is not a tf.train.Example (%s)"
                                 % (path, e)) from e
    features = example.features.feature
    missing = [name for name in expected_features if name not in features]
    if missing:
        raise TFRecordCheckError(
            "%s: feature%s %s missing from its examples (they have: %s)"
            % (path, "s" if len(missing) > 1 else "", ", ".join(missing),
               ", ".join(sorted(features)) or "no features"))
    for name, value in expected_features.items():
        length, flag, kind = _expectation(name, value)
        feature = features[name]
        which = feature.WhichOneof("kind")
        actual_kind = _KINDS.get(which)
        if kind is not None and actual_kind != kind:
            raise TFRecordCheckError("%s: %s holds %s values, expected %s"
                                     % (path, name, actual_kind or "no", kind))
        count = len(getattr(feature, which).value) if which else 0
        if count != length:
            if flag:
                raise TFRecordCheckError(
                    "%s: %s has %d values per example but %s=%d (the file was written with "
                    "%s=%d?)" % (path, name, count, flag, length, flag, count))
            raise TFRecordCheckError("%s: %s has %d values per example, expected %d"
                                     % (path, name, count, length))


# Inputs up to this size (all files together) also get their data checksums
# verified at the start; larger ones as training reads them.
DEFAULT_CHECKSUM_BYTES = 1 << 30


def verify_data_checksums(path):
    """Reads every record of `path` through TensorFlow, which checks each data CRC.

    Raises:
        TFRecordCheckError naming the file when a record's data is damaged.
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path, buffer_size=_READ_BUFFER):
            count += 1
    except tf.errors.DataLossError as e:
        raise TFRecordCheckError(
            "%s: record %d is damaged (%s): the file is corrupt; write it again"
            % (path, count + 1, e.message.splitlines()[0] if e.message else "bad CRC")
        ) from None
    return count


def verify_tfrecord_files(paths, expected_features=None,
                          max_checksum_bytes=DEFAULT_CHECKSUM_BYTES):
    """Checks TFRecord inputs (see the module docstring) before a job reads them.

    Args:
        paths: a file, a comma-separated list of globs, or a list of them
            (as the jobs' `--input_file`).
        expected_features: optional dict feature name -> expected number of
            values per example: a length, or `(length, flag)` to name the
            flag that sets it in messages, or `(length, flag, kind)` with
            kind "int64", "float" or "bytes" (flag may be None).

        max_checksum_bytes: when all files together are at most this big,
            every record's data checksum is verified too (a full read);
            None: always; 0: never.

    Returns:
        dict path -> number of records, in file order.

    Raises:
        TFRecordCheckError: a file is truncated or not a TFRecord file, all
            files are empty, or a first record lacks an expected feature or
            has another number of values. `data.corpus.CorpusError`: a
            pattern matches no file.
    """
    files = corpus_lib.expand_file_patterns(paths)
    scans = [scan_tfrecord_file(path) for path in files]
    empty = [scan.path for scan in scans if not scan.records]
    if len(empty) == len(scans):
        shown = ", ".join(empty[:3]) + (" and %d more" % (len(empty) - 3)
                                         if len(empty) > 3 else "")
        raise TFRecordCheckError("%s: no records (every input file is empty)" % shown)
    for path in empty:
        logging.warning("%s: no records (an empty TFRecord file); the other input files "
                        "are read", path)
    if expected_features:
        for name, value in expected_features.items():
            _expectation(name, value)  # A bad specification fails before any file.
        for scan in scans:
            if scan.records:
                check_example_features(scan.path, scan.first_record, expected_features)
    total = sum(scan.size for scan in scans) if all(
        getattr(scan, "size", None) is not None for scan in scans) else None
    if max_checksum_bytes is None or (total is not None and total <= max_checksum_bytes):
        for scan in scans:
            if scan.records:
                verify_data_checksums(scan.path)
    elif max_checksum_bytes:
        logging.info("Inputs of %s bytes: data checksums are checked as training reads "
                     "them, not at the start (max_checksum_bytes=%d).", total,
                     max_checksum_bytes)
    return {scan.path: scan.records for scan in scans}
