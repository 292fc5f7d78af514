"""Google's input packing, written once: ``[CLS] a [SEP] b [SEP]``.

Every model input made of one or two sequences is packed here: the
fine-tuning TFRecords (`data.processors.features`), fill-mask and feature
extraction (`modeling.serving.inference`) and the SavedModels that take raw
strings (`modeling.serving.export`, inside the graph). With one set of rules
an exported model sees exactly the ids it was fine-tuned on, and a fix
reaches every path at once.

The rules (google-research/bert, `run_classifier.convert_single_example`):

* Budget: a pair keeps ``max_seq_length - 3`` tokens, a single sequence
  ``max_seq_length - 2`` (id inputs without a ``[CLS]`` or ``[SEP]`` id get
  one more token per special token they lack). An empty second sequence is
  no second sequence.
* Truncation: a single sequence keeps its first tokens; a pair loses one
  token at a time from the end of the longer sequence (of b when both are
  equally long), `truncate_seq_pair`: a short sequence probably carries more
  information per token than a long one. Id inputs may keep the *last*
  tokens instead (``keep="last"``, e.g. the latest events of a history).
* Layout: ``[CLS] a [SEP]`` in segment 0, then ``b [SEP]`` in segment 1;
  b's ``[SEP]`` only when b still has tokens after truncation (Google's code
  tests the truncated list).
* Padding: `input_mask` is 1 over the packed tokens; ids, mask and segment
  ids are padded with 0 up to `max_seq_length`.

Two implementations of these rules, side by side:

* `pack` (and `pack_ids`, `pad`, `pad_batch`): Python lists of tokens or
  ids, one example at a time, the truncation being Google's loop.
* `pack_in_graph`: a batch of `tf.RaggedTensor` ids with TensorFlow ops, for
  SavedModels and `tf.data`. The loop becomes its closed form,
  `truncated_lengths`; `tests/data/test_packing.py` checks that both give the
  same ids for every pair of lengths around the budget.
"""

import collections

import numpy as np
import tensorflow as tf

from data import tokenization

__all__ = ["Packed", "Features", "PackingError", "truncate_seq_pair", "truncate",
           "pack", "pad", "pack_ids", "pad_batch", "truncated_lengths", "pack_in_graph"]

KEEP = ("first", "last")


class PackingError(ValueError):
    """`max_seq_length` leaves no room for the special tokens, or bad packing arguments."""


# `sequence`: the packed tokens or ids, unpadded; `segment_ids` of the same length.
Packed = collections.namedtuple("Packed", ["sequence", "segment_ids"])
# The model's three int features, padded to max_seq_length.
Features = collections.namedtuple("Features", ["input_ids", "input_mask", "segment_ids"])


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates a sequence pair in place to at most `max_length` tokens in all.

    One token at a time from the end of the longer sequence (of `tokens_b`
    when they are equally long): a shorter sequence probably carries more
    information per token than a longer one, so this beats cutting the same
    fraction off each.
    """
    max_length = max(0, max_length)
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _layout(cls, sep, pair):
    parts = [] if cls is None else [str(cls)]
    parts.append("a")
    if sep is not None:
        parts.append(str(sep))
    if pair:
        parts.append("b")
        if sep is not None:
            parts.append(str(sep))
    return " ".join(parts)


def _budget(max_seq_length, pair, cls, sep):
    specials = (cls is not None) + (sep is not None) * (2 if pair else 1)
    budget = max_seq_length - specials
    if budget < 0:
        raise PackingError("max_seq_length=%d is too short for %s (%s)."
                           % (max_seq_length, "a pair" if pair else "a single sequence",
                              _layout(cls, sep, pair)))
    return budget


def truncate(a, b, budget, keep="first"):
    """Copies of `a` and `b` (None: a single sequence) cut to `budget` tokens in all."""
    if keep not in KEEP:
        raise PackingError("keep must be 'first' or 'last', not %r." % (keep,))
    a = list(a)
    b = list(b) if b else None
    if keep == "last":
        a.reverse()
        if b:
            b.reverse()
    if b:
        truncate_seq_pair(a, b, budget)
    else:
        del a[max(0, budget):]
    if keep == "last":
        a.reverse()
        if b:
            b.reverse()
    return a, b


def pack(a, b, max_seq_length, *, cls=tokenization.CLS_TOKEN, sep=tokenization.SEP_TOKEN,
         keep="first"):
    """``cls a sep b sep`` cut to `max_seq_length`, with its segment ids (unpadded).

    Args:
      a, b: lists of tokens or of ids; `b` None or empty for a single sequence.
      max_seq_length: the packed length, special tokens included.
      cls, sep: the special tokens (or ids); None leaves that token out.
      keep: "first" (Google's truncation) or "last" (truncate from the start).

    Returns:
      `Packed(sequence, segment_ids)`, which unpacks as a pair.

    Raises:
      PackingError: `max_seq_length` is shorter than the special tokens.
    """
    pair = bool(b)
    a, b = truncate(a, b, _budget(max_seq_length, pair, cls, sep), keep)
    sequence = ([] if cls is None else [cls]) + a
    if sep is not None:
        sequence.append(sep)
    segment_ids = [0] * len(sequence)
    if b:
        sequence += b
        if sep is not None:
            sequence.append(sep)
        segment_ids += [1] * (len(sequence) - len(segment_ids))
    return Packed(sequence, segment_ids)


def pad(ids, segment_ids, max_seq_length, pad_id=0):
    """`Features` of packed ids: the mask, and everything padded to `max_seq_length`
    (ids with `pad_id`: 0 is Google's `[PAD]`; RoBERTa's is 1; the rest with 0)."""
    if len(ids) > max_seq_length:
        raise PackingError("%d packed ids do not fit max_seq_length=%d."
                           % (len(ids), max_seq_length))
    padding = [0] * (max_seq_length - len(ids))
    return Features(list(ids) + [pad_id] * len(padding), [1] * len(ids) + padding,
                    list(segment_ids) + padding)


def pack_ids(ids_a, ids_b, max_seq_length, *, cls_id, sep_id, keep="first"):
    """`pack` for ids, then `pad`: the padded `Features` of one example."""
    ids, segment_ids = pack(ids_a, ids_b, max_seq_length, cls=cls_id, sep=sep_id, keep=keep)
    return pad(ids, segment_ids, max_seq_length)


def pad_batch(id_lists, segment_lists, length):
    """A batch of packed ids as int32 numpy arrays ``[batch, length]`` (a dict of Features)."""
    input_ids = np.zeros((len(id_lists), length), np.int32)
    input_mask = np.zeros_like(input_ids)
    segment_ids = np.zeros_like(input_ids)
    for row, (ids, segments) in enumerate(zip(id_lists, segment_lists)):
        if len(ids) > length:
            raise PackingError("%d packed ids do not fit length %d." % (len(ids), length))
        input_ids[row, :len(ids)] = ids
        input_mask[row, :len(ids)] = 1
        segment_ids[row, :len(segments)] = segments
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


# ------------------------------------------------------------------ in the graph


def truncated_lengths(len_a, len_b, budget):
    """The lengths `truncate_seq_pair` leaves, in closed form, on int tensors.

    Popping from the longer sequence (b on ties) until the pair fits
    `budget` ends in one of three states:

    * it already fits: both lengths are unchanged;
    * the shorter one fits in half the budget: it keeps its length and the
      longer one gets the rest, ``budget - shorter``;
    * otherwise both were cut down to equal lengths and then alternately
      (b first): a keeps ``ceil(budget / 2)``, b ``floor(budget / 2)``.

    A single sequence is ``len_b = 0``: a keeps ``min(len_a, budget)``.
    """
    budget = tf.maximum(budget, 0)
    fits = len_a + len_b <= budget
    shorter_fits = 2 * tf.minimum(len_a, len_b) <= budget
    keep_a = tf.where(fits, len_a,
                      tf.where(shorter_fits, tf.where(len_a <= len_b, len_a, budget - len_b),
                               (budget + 1) // 2))
    keep_b = tf.where(fits, len_b,
                      tf.where(shorter_fits, tf.where(len_b < len_a, len_b, budget - len_a),
                               budget // 2))
    return keep_a, keep_b


def _keep_first(ragged, lengths):
    """Each row's first `lengths[row]` values."""
    positions = tf.ragged.range(ragged.row_lengths())
    return tf.ragged.boolean_mask(ragged, positions < tf.expand_dims(lengths, 1))


def _column(value, present, row_splits_dtype):
    """A ragged column holding `value` in the rows where `present` (bool [batch])."""
    counts = tf.cast(present, row_splits_dtype)
    values = tf.fill([tf.reduce_sum(counts)], value)
    return tf.RaggedTensor.from_row_lengths(values, counts)


def pack_in_graph(segments, max_seq_length, cls_id, sep_id):
    """`pack` + `pad` for a batch, with TensorFlow ops (SavedModels, `tf.data`).

    Args:
      segments: one or two `tf.RaggedTensor`s of ids ``[batch, (tokens)]``
        (e.g. `data.tokenizers.wordpiece.GraphTokenizer.tokenize` outputs).
      max_seq_length: the packed length (a Python int).
      cls_id, sep_id: ids of ``[CLS]`` and ``[SEP]``.

    Returns:
      dict of int32 ``[batch, max_seq_length]`` tensors: input_ids,
      input_mask, segment_ids -- those `pack_ids` gives for each row.
    """
    if len(segments) not in (1, 2):
        raise PackingError("pack_in_graph takes 1 or 2 segments, got %d." % len(segments))
    _budget(max_seq_length, len(segments) == 2, cls_id, sep_id)
    ragged = []
    for segment in segments:
        if not isinstance(segment, tf.RaggedTensor):
            segment = tf.RaggedTensor.from_tensor(segment)
        ragged.append(tf.cast(segment, tf.int64).with_row_splits_dtype(tf.int64))
    a = ragged[0]
    len_a = a.row_lengths()
    len_b = ragged[1].row_lengths() if len(ragged) == 2 else tf.zeros_like(len_a)
    # An empty b is no b: its row has the single sequence's budget.
    budget = max_seq_length - 2 - tf.cast(len_b > 0, tf.int64)
    keep_a, keep_b = truncated_lengths(len_a, len_b, budget)
    every_row = tf.ones_like(len_a, tf.bool)
    a = _keep_first(a, keep_a)
    parts = [_column(tf.constant(cls_id, tf.int64), every_row, tf.int64), a,
             _column(tf.constant(sep_id, tf.int64), every_row, tf.int64)]
    segment_ids = [tf.zeros_like(part) for part in parts]
    if len(ragged) == 2:
        b = _keep_first(ragged[1], keep_b)
        b_sep = _column(tf.constant(sep_id, tf.int64), keep_b > 0, tf.int64)
        parts += [b, b_sep]
        segment_ids += [tf.ones_like(b), tf.ones_like(b_sep)]
    ids = tf.concat(parts, axis=1)
    segment_ids = tf.concat(segment_ids, axis=1)
    shape = [None, max_seq_length]
    return {"input_ids": tf.cast(ids.to_tensor(0, shape=shape), tf.int32),
            "input_mask": tf.cast(tf.ones_like(ids).to_tensor(0, shape=shape), tf.int32),
            "segment_ids": tf.cast(segment_ids.to_tensor(0, shape=shape), tf.int32)}
