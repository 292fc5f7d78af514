"""Serialised pre-training `tf.train.Example`s, byte for byte, without building protos.

`data.tf_example.serialize_example` builds a `tf.train.Example` message and
serialises it (``deterministic=True``); for the pre-training writer that was
a quarter of the run. Every pre-training record has the same seven features
of known kinds, so `PretrainingExampleEncoder` writes the same bytes
directly:

* Int64 values are varints. A list whose values are all below 128 is its own
  encoding (``bytes(values)``); token ids go through a table of each id's
  varint, joined in C. Anything else (negative or huge values) takes a
  general varint encoder.
* Floats are packed little-endian float32 (`struct`); the masked-LM weights
  are 1.0 and 0.0, cached per count.
* The message around them: ``Example.features`` (field 1) holds ``Features``,
  whose ``feature`` map (field 1) has one entry per feature, written in
  sorted key order as deterministic serialisation writes them; each entry is
  ``key`` (field 1) and the ``Feature`` (field 2), whose ``float_list``
  (field 2) or ``int64_list`` (field 3) holds the packed ``value`` (field 1,
  left out when empty).

tests/data/test_pretraining_data.py checks the bytes against `serialize_example`.
"""

import struct

_INT64_MASK = (1 << 64) - 1


def varint(value):
    """The protobuf varint of an int64 (negative values take ten bytes)."""
    value &= _INT64_MASK
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(field_number, payload):
    return bytes((field_number << 3 | 2,)) + varint(len(payload)) + payload


class ExampleEncoder(object):
    """Encodes feature dicts of fixed names and kinds into serialised `tf.train.Example`s.

    Args:
      int_names: names of the Int64List features.
      float_names: names of the FloatList features.
      table_size: ints in [0, table_size) are encoded through a table of
        their varints (the vocabulary size, or more).
    """

    def __init__(self, int_names, float_names, table_size):
        self._names = sorted(list(int_names) + list(float_names),
                             key=lambda name: name.encode("utf-8"))
        self._float_names = frozenset(float_names)
        self._table = [varint(v) for v in range(max(table_size, 1 << 12))]
        self._prefixes = {name: {} for name in self._names}
        self._float_cache = {}

    def _entry(self, name, payload):
        """The map entry of feature `name` whose packed values are `payload`.

        Every length in it depends only on the payload's length, so all the
        bytes before the payload are computed once per (name, length).
        """
        prefixes = self._prefixes[name]
        prefix = prefixes.get(len(payload))
        if prefix is None:
            list_field = 2 if name in self._float_names else 3
            value_list = _length_delimited(1, payload) if payload else b""
            entry = (_length_delimited(1, name.encode("utf-8")) +
                     _length_delimited(2, _length_delimited(list_field, value_list)))
            # Features.feature (field 1) holding the entry.
            entry = _length_delimited(1, entry)
            prefix = entry[:len(entry) - len(payload)]
            prefixes[len(payload)] = prefix
        return prefix + payload

    def _message(self, entries):
        """Example{features (field 1): Features{entries}}."""
        return _length_delimited(1, b"".join(entries))

    def encode_ints(self, values):
        """Packed varints of a list of ints."""
        if not values:
            return b""
        low, high = min(values), max(values)
        if low >= 0 and high < 128:
            return bytes(values)
        if low >= 0 and high < len(self._table):
            return b"".join(map(self._table.__getitem__, values))
        return b"".join(varint(v) for v in values)

    def encode_floats(self, values):
        """Packed little-endian float32s of a list of floats."""
        key = tuple(values)
        cached = self._float_cache.get(key)
        if cached is None:
            cached = struct.pack("<%df" % len(values), *values)
            if len(self._float_cache) < 4096:
                self._float_cache[key] = cached
        return cached

    def serialize(self, int_features, float_features):
        """The bytes `tf_example.serialize_example(int_features, float_features)` gives.

        `int_features` and `float_features` hold exactly the names given to
        the constructor.
        """
        entries = []
        for name in self._names:
            if name in self._float_names:
                payload = self.encode_floats(float_features[name])
            else:
                payload = self.encode_ints(int_features[name])
            entries.append(self._entry(name, payload))
        return self._message(entries)


class PretrainingExampleEncoder(ExampleEncoder):
    """Google's pre-training records, straight from an instance's unpadded lists.

    `serialize_instance` gives the bytes of
    ``serialize_example(*instance_to_features(...))`` (the seven features of
    `data.pretraining.instances`, padded with zeros) without building the
    padded lists.
    """

    INT_FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                    "masked_lm_ids", "next_sentence_labels")
    FLOAT_FEATURES = ("masked_lm_weights",)

    def __init__(self, max_seq_length, max_predictions_per_seq, vocab_size):
        super().__init__(self.INT_FEATURES, self.FLOAT_FEATURES,
                         max(vocab_size, max_seq_length))
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._ones = [b"\x01" * n for n in range(max_seq_length + 1)]
        self._zeros = [b"\x00" * n for n in range(max(max_seq_length, max_predictions_per_seq) + 1)]
        self._weights = [struct.pack("<%df" % max_predictions_per_seq,
                                     *([1.0] * n + [0.0] * (max_predictions_per_seq - n)))
                         for n in range(max_predictions_per_seq + 1)]
        self._labels = [self._entry("next_sentence_labels", bytes((label,)))
                        for label in (0, 1)]

    def serialize_instance(self, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                           next_sentence_label):
        """One record; ids are vocabulary ids, the label 0 or 1.

        Raises:
          ValueError: more tokens than max_seq_length or more predictions
            than max_predictions_per_seq.
        """
        n = len(input_ids)
        k = len(masked_lm_positions)
        seq_pad = self.max_seq_length - n
        pred_pad = self.max_predictions_per_seq - k
        if seq_pad < 0:
            raise ValueError("Instance of %d tokens exceeds max_seq_length=%d"
                             % (n, self.max_seq_length))
        if pred_pad < 0:
            raise ValueError("Instance of %d predictions exceeds max_predictions_per_seq=%d"
                             % (k, self.max_predictions_per_seq))
        zeros = self._zeros
        entry = self._entry
        table = self._table
        if max(input_ids) < len(table) and (not k or max(masked_lm_ids) < len(table)):
            ids = b"".join(map(table.__getitem__, input_ids))
            masked_ids = b"".join(map(table.__getitem__, masked_lm_ids))
        else:
            ids = self.encode_ints(input_ids)
            masked_ids = self.encode_ints(masked_lm_ids)
        return self._message((
            entry("input_ids", ids + zeros[seq_pad]),
            entry("input_mask", self._ones[n] + zeros[seq_pad]),
            entry("masked_lm_ids", masked_ids + zeros[pred_pad]),
            entry("masked_lm_positions", self.encode_ints(masked_lm_positions) + zeros[pred_pad]),
            entry("masked_lm_weights", self._weights[k]),
            self._labels[next_sentence_label],
            entry("segment_ids", self.encode_ints(segment_ids) + zeros[seq_pad]),
        ))
