"""Text pairs for Siamese (bi-encoder) training, and the stored questions of a matching index.

Two plain formats, tab-separated, UTF-8, one item per line (blank lines
skipped, a UTF-8 BOM tolerated):

* pair files (`read_pairs`): ``text_a<TAB>text_b`` (a query and its
  positive, for the in-batch-negatives loss), or ``text_a<TAB>text_b<TAB>label``
  (a label of the label list for the softmax loss; a float for the cosine
  loss). An optional header line ``text_a<TAB>text_b[<TAB>label]`` is skipped.
* question files (`read_questions`): ``id<TAB>question``: the stored
  questions of an FAQ index (`run/build_index.py`); ids must be unique.

Any bad line is a `DataError` naming ``file:line`` and what was expected.

`write_pair_records` packs each text ON ITS OWN (``[CLS] text [SEP]``, the
bi-encoder never sees the pair together) into one TFRecord, written
atomically, with the features ``a_input_ids``, ``a_input_mask``,
``a_segment_ids``, ``b_...``, ``label_ids`` and ``is_real_example``;
`pair_input_fn_builder` reads them back for the trainer. This module knows
no model.
"""

import math

import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import packing
from data import tf_example
from data.processors.base import DataError, InputExample, _open_text

__all__ = ["read_pairs", "read_questions", "encode_text", "write_pair_records",
           "pair_feature_spec", "pair_input_fn_builder", "LABEL_KINDS"]

# What the third column holds: nothing (in-batch pairs), a class, a float.
LABEL_KINDS = ("none", "class", "float")


def _lines(path):
    """(line number, text) of the non-blank lines of a UTF-8 file."""
    with _open_text(path) as f:
        data = f.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataError("%s:%d: not valid UTF-8 (byte 0x%02x); expected UTF-8 text"
                        % (path, line, data[e.start])) from None
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def read_pairs(path, label_kind="none", labels=None, set_type="train"):
    """`InputExample`s of a pair file (see the module docstring).

    Args:
        path: the TSV file.
        label_kind: "none" (two columns; a third is refused), "class" (the
            third column, one of `labels` when given) or "float" (a number).
        labels: the allowed class labels (label_kind "class"), or None.
        set_type: guid prefix.
    """
    if label_kind not in LABEL_KINDS:
        raise ValueError("label_kind must be one of %s, got %r"
                         % (", ".join(LABEL_KINDS), label_kind))
    columns = 2 if label_kind == "none" else 3
    examples = []
    for number, line in _lines(path):
        fields = line.split("\t")
        where = "%s:%d" % (path, number)
        if number == 1 and [f.strip().lower() for f in fields[:2]] == ["text_a", "text_b"]:
            continue
        if len(fields) != columns:
            raise DataError(
                "%s: expected %d tab-separated columns (%s), found %d" % (
                    where, columns,
                    "text_a, text_b" if columns == 2 else "text_a, text_b, label",
                    len(fields)))
        text_a, text_b = fields[0].strip(), fields[1].strip()
        if not text_a or not text_b:
            raise DataError("%s: empty text in column %d; expected two non-empty texts"
                            % (where, 1 if not text_a else 2))
        label = None
        if label_kind == "class":
            label = fields[2].strip()
            if labels is not None and label not in labels:
                raise DataError("%s: label %r is not one of the labels (%s)"
                                % (where, label, ", ".join(labels)))
        elif label_kind == "float":
            try:
                label = float(fields[2])
            except ValueError:
                raise DataError("%s: label %r is not a number; expected a float score "
                                "(cosine loss)" % (where, fields[2])) from None
            if not math.isfinite(label):
                raise DataError("%s: label %r is not a finite number; expected a float score "
                                "(cosine loss)" % (where, fields[2].strip()))
        examples.append(InputExample("%s-%d" % (set_type, number), text_a, text_b, label,
                                     source=where))
    return examples


def read_questions(path):
    """``(ids, questions)`` of an ``id<TAB>question`` file; duplicate ids are refused."""
    ids, questions, seen = [], [], {}
    for number, line in _lines(path):
        fields = line.split("\t")
        where = "%s:%d" % (path, number)
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise DataError("%s: expected 'id<TAB>question' (two non-empty tab-separated "
                            "columns), found %d column(s)" % (where, len(fields)))
        question_id = fields[0].strip()
        if question_id in seen:
            raise DataError("%s: id %r already used on line %d; expected unique ids"
                            % (where, question_id, seen[question_id]))
        seen[question_id] = number
        ids.append(question_id)
        questions.append(fields[1].strip())
    if not ids:
        raise DataError("%s: no questions; expected 'id<TAB>question' lines" % path)
    return ids, questions


def encode_text(text, tokenizer, max_seq_length):
    """``[CLS] text [SEP]`` ids, cut to `max_seq_length` (unpadded), by `data.packing`; a
    model folder's tokenizer (`PretrainedTokenizer.pack`) frames them its family's way
    (RoBERTa's ``<s> text </s>``)."""
    if hasattr(tokenizer, "build_inputs"):
        encoded = tokenizer.pack(text, None, max_seq_length)
        return list(encoded.input_ids), list(encoded.segment_ids)
    tokens, segment_ids = packing.pack(tokenizer.tokenize(text), None, max_seq_length)
    return tokenizer.convert_tokens_to_ids(tokens), segment_ids


def write_pair_records(examples, path, tokenizer, max_seq_length, label_kind="none",
                       label_list=None, pad_to_multiple=1):
    """Writes the pairs' features to one TFRecord (atomically); returns the record count.

    With `pad_to_multiple` > 1, padding records (``is_real_example`` 0,
    all-zero ids) fill the last batch, so evaluation sees every pair.
    """
    label_map = {label: i for i, label in enumerate(label_list or [])}
    outputs = atomic.TemporaryOutputs([path])
    count = 0
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            rows = list(examples)
            total = len(rows)
            if pad_to_multiple > 1 and total % pad_to_multiple:
                total += pad_to_multiple - total % pad_to_multiple
            for index in range(total):
                int_features, float_features = {}, None
                if index < len(rows):
                    example = rows[index]
                    for prefix, text in (("a_", example.text_a), ("b_", example.text_b)):
                        ids, segments = encode_text(text, tokenizer, max_seq_length)
                        padded = packing.pad(ids, segments, max_seq_length,
                                             getattr(tokenizer, "pad_id", 0))
                        int_features[prefix + "input_ids"] = padded.input_ids
                        int_features[prefix + "input_mask"] = padded.input_mask
                        int_features[prefix + "segment_ids"] = padded.segment_ids
                    real = 1
                    label = example.label
                else:
                    for prefix in ("a_", "b_"):
                        for name in ("input_ids", "input_mask", "segment_ids"):
                            int_features[prefix + name] = [0] * max_seq_length
                    real, label = 0, None
                if label_kind == "float":
                    float_features = {"label_ids": [float(label or 0.0)]}
                elif label_kind == "class":
                    int_features["label_ids"] = [label_map.get(label, 0)]
                else:
                    int_features["label_ids"] = [0]
                int_features["is_real_example"] = [real]
                writer.write(tf_example.serialize_example(int_features, float_features))
                count += 1
        outputs.commit()
    finally:
        outputs.discard()
    return count


def pair_feature_spec(seq_length, label_kind="none"):
    """The `tf.io.parse_example` spec of `write_pair_records`' files."""
    spec = {}
    for prefix in ("a_", "b_"):
        for name in ("input_ids", "input_mask", "segment_ids"):
            spec[prefix + name] = tf.io.FixedLenFeature([seq_length], tf.int64)
    spec["label_ids"] = tf.io.FixedLenFeature(
        [], tf.float32 if label_kind == "float" else tf.int64)
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def pair_input_fn_builder(path, seq_length, is_training, batch_size, label_kind="none",
                          seed=None):
    """`input_fn(input_context=None)` over a pair TFRecord (training: shuffled, repeated)."""
    spec = pair_feature_spec(seq_length, label_kind)

    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(
            path, spec, batch_size, is_training, input_context=input_context, seed=seed,
            drop_remainder=is_training)

    return input_fn
