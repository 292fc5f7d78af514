"""Examples to features, TFRecords and back: Google's conversion as a library.

`convert_single_example`, `convert_examples_to_features`,
`file_based_convert_examples_to_features` and `file_based_input_fn_builder`
are google-research/bert's `run_classifier.py` functions with the same
arguments and results, so code written against Google's API works here.
Packing (``[CLS] a [SEP] b [SEP]``, truncation, segment ids, mask, padding)
is `data.packing`'s, the one the serving paths use too.

TFRecord features (Google's names): `input_ids`, `input_mask`, `segment_ids`
(int64 `[max_seq_length]`), `label_ids` and `is_real_example` (int64 `[1]`).
For the task types Google's script did not have: multi-label `label_ids` is
a multi-hot int64 vector of `len(get_labels())`, regression `label_ids` a
float32 `[1]`.

TFRecords are written under a temporary name and renamed when complete, so
a failed conversion (a bad label in row 90,000) never leaves a truncated file
that a later run would train on.
"""

import os

from absl import logging
import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import packing
from data import tf_example
from data import tokenization
from data.processors.base import (CLASSIFICATION, MULTI_LABEL, REGRESSION, TASK_TYPES,
                                  DataError, IdsInputExample, InputFeatures,
                                  PaddingInputExample)

__all__ = [
    "infer_task_type", "convert_single_example", "convert_examples_to_features",
    "file_based_convert_examples_to_features", "file_based_input_fn_builder",
    "classifier_feature_spec", "pad_examples", "serialize_features",
]

# Google's name for the pair truncation (`data.packing.truncate_seq_pair`).
_truncate_seq_pair = packing.truncate_seq_pair


def infer_task_type(label_list, examples=()):
    """regression without labels; multi-label if any example's label is a list."""
    if not label_list:
        return REGRESSION
    for example in examples:
        if isinstance(getattr(example, "label", None), (list, tuple)):
            return MULTI_LABEL
    return CLASSIFICATION


def _label_value(example, label_map, label_list, task_type):
    label = example.label
    if task_type == REGRESSION:
        if label is None:
            return 0.0
        try:
            return float(label)
        except (TypeError, ValueError):
            raise DataError("%s: the label %r is not a number (this is a regression task)."
                            % (example.describe(), label)) from None

    def index(value):
        if value not in label_map:
            raise DataError("%s: label %r is not one of the labels of this task: %s."
                            % (example.describe(), value,
                               ", ".join(repr(l) for l in label_list)))
        return label_map[value]

    if task_type == MULTI_LABEL:
        hot = [0] * len(label_list)
        values = label if isinstance(label, (list, tuple)) else (
            [] if label is None else [label])
        for value in values:
            hot[index(value)] = 1
        return hot
    if label is None:
        return 0
    if isinstance(label, (list, tuple)):
        raise DataError("%s: a list of labels %r in a single-label task." % (
            example.describe(), label))
    return index(label)


def _padding_features(max_seq_length, num_labels, task_type):
    if task_type == REGRESSION:
        label = 0.0
    elif task_type == MULTI_LABEL:
        label = [0] * num_labels
    else:
        label = 0
    zeros = [0] * max_seq_length
    return InputFeatures(list(zeros), list(zeros), list(zeros), label, is_real_example=False)


def _convert_ids_example(example, max_seq_length):
    """Packed, padded (input_ids, input_mask, segment_ids) of an `IdsInputExample`."""
    pair = bool(example.text_b)
    specials = (example.cls_id is not None) + (example.sep_id is not None) * (2 if pair else 1)
    if max_seq_length - specials < (2 if pair else 1):
        raise ValueError("max_seq_length=%d leaves no room for the ids of %s."
                         % (max_seq_length, example.describe()))
    return packing.pack_ids(example.text_a, example.text_b, max_seq_length,
                            cls_id=example.cls_id, sep_id=example.sep_id, keep=example.keep)


def _convert_text_example(example, max_seq_length, tokenizer):
    """(tokens, Features) of a text example: tokenized, packed and padded."""
    if tokenizer is None:
        raise ValueError("A tokenizer is needed to convert text %s." % example.describe())
    tokens_a = tokenizer.tokenize(example.text_a or "")
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    tokens, segment_ids = packing.pack(tokens_a, tokens_b, max_seq_length)
    return tokens, packing.pad(tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                               max_seq_length)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer,
                           task_type=None, pack_fn=None):
    """Converts a single `InputExample` into a single `InputFeatures`.

    Google's packing (`data.packing`): ``[CLS] tokens_a [SEP]`` (segment 0),
    then for pairs ``tokens_b [SEP]`` (segment 1), zero-padded to
    `max_seq_length`; a pair is truncated with `truncate_seq_pair` to
    ``max_seq_length - 3`` tokens, a single sequence keeps its first
    ``max_seq_length - 2``.
    `IdsInputExample`s skip the tokenizer (`tokenizer` may then be None).
    The first five examples are logged.

    Args:
      task_type: "classification", "multi_label" or "regression"; None
        infers it from `label_list` and the example (see `infer_task_type`).

      pack_fn: optional `example -> (input_ids, input_mask, segment_ids)`,
        each of `max_seq_length`, replacing Google's packing of text examples
        (a family that frames its inputs another way, e.g. XLNet's
        `A <sep> B <sep> <cls>` left-padded); labels, padding examples and the
        record layout stay Google's.

    Raises:
      DataError: the label is not in `label_list` (the message names the
        example and the file:line it came from, and lists the labels).
    """
    if task_type is None:
        task_type = infer_task_type(label_list, [example])
    if isinstance(example, PaddingInputExample):
        return _padding_features(max_seq_length, len(label_list or ()), task_type)
    label_map = {label: i for i, label in enumerate(label_list or ())}
    label_id = _label_value(example, label_map, label_list, task_type)

    tokens = None
    if pack_fn is not None and not isinstance(example, IdsInputExample):
        input_ids, input_mask, segment_ids = (list(map(int, v)) for v in pack_fn(example))
    elif isinstance(example, IdsInputExample):
        input_ids, input_mask, segment_ids = _convert_ids_example(example, max_seq_length)
    else:
        tokens, (input_ids, input_mask, segment_ids) = _convert_text_example(
            example, max_seq_length, tokenizer)

    assert len(input_ids) == max_seq_length
    if ex_index < 5:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        if tokens is not None:
            logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
        logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
        logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
        logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
        logging.info("label: %s (id = %s)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, segment_ids, label_id, is_real_example=True)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                 task_type=None):
    """Converts a list of examples (in memory) into a list of `InputFeatures`."""
    examples = list(examples)
    if task_type is None:
        task_type = infer_task_type(label_list, examples)
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer, task_type)
            for i, example in enumerate(examples)]


def serialize_features(features, task_type):
    """One `InputFeatures` as a serialized classifier `tf.train.Example`."""
    int_features = {}
    int_features["input_ids"] = features.input_ids
    int_features["input_mask"] = features.input_mask
    int_features["segment_ids"] = features.segment_ids
    int_features["is_real_example"] = [int(features.is_real_example)]
    float_features = None
    if task_type == REGRESSION:
        float_features = {"label_ids": [float(features.label_id)]}
    elif task_type == MULTI_LABEL:
        int_features["label_ids"] = list(features.label_id)
    else:
        int_features["label_ids"] = [features.label_id]
    return tf_example.serialize_example(int_features, float_features)


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file, task_type=None, pack_fn=None):
    """Converts a set of `InputExample`s to a TFRecord file (`pack_fn`: see
    `convert_single_example`).

    The file is written under a temporary name and renamed to `output_file`
    only when complete: an interrupted or failed conversion never leaves a
    truncated file (an existing `output_file` stays as it was).

    Returns:
      the number of records written.
    """
    examples = list(examples)
    if task_type is None:
        task_type = infer_task_type(label_list, examples)
    outputs = atomic.TemporaryOutputs([output_file])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for ex_index, example in enumerate(examples):
                if ex_index % 10000 == 0 and ex_index:
                    logging.info("Writing example %d of %d", ex_index, len(examples))
                features = convert_single_example(ex_index, example, label_list,
                                                  max_seq_length, tokenizer, task_type,
                                                  pack_fn=pack_fn)
                writer.write(serialize_features(features, task_type))
        outputs.commit()
    finally:
        outputs.discard()
    return len(examples)


def pad_examples(examples, batch_size):
    """Appends `PaddingInputExample`s up to a multiple of `batch_size` (a new list)."""
    examples = list(examples)
    while len(examples) % batch_size:
        examples.append(PaddingInputExample())
    return examples


def classifier_feature_spec(seq_length, task_type=CLASSIFICATION, num_labels=None):
    """The `tf.io.parse_example` spec of the classifier TFRecords."""
    if task_type == REGRESSION:
        label = tf.io.FixedLenFeature([], tf.float32)
    elif task_type == MULTI_LABEL:
        if not num_labels:
            raise ValueError("Multi-label features need num_labels.")
        label = tf.io.FixedLenFeature([num_labels], tf.int64)
    elif task_type == CLASSIFICATION:
        label = tf.io.FixedLenFeature([], tf.int64)
    else:
        raise ValueError("Unknown task_type %r; expected one of %s."
                         % (task_type, ", ".join(TASK_TYPES)))
    return {
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "label_ids": label,
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder, *,
                                batch_size, task_type=CLASSIFICATION, num_labels=None,
                                seed=None, shuffle_buffer_size=1000, repeat=None):
    """Creates an `input_fn(input_context=None)` over a classifier TFRecord file.

    Training reads repeat forever, shuffled; eval/predict reads go once, in
    file order. Under `tf.distribute`, hand the function to
    ``strategy.distribute_datasets_from_function``: `batch_size` is the
    global batch size and each replica gets its share. int64 features come
    back as int32 (see `data.input_pipeline`).

    Args:
      input_file: TFRecord path(s) (comma-separated globs allowed).
      seq_length: max_seq_length the file was written with.
      is_training: shuffle and repeat.
      drop_remainder: drop a last partial batch (static shapes, TPUs).
      batch_size: global batch size.
      task_type, num_labels: the `label_ids` feature's type and shape.
      seed: shuffling seed.
    """
    spec = classifier_feature_spec(seq_length, task_type, num_labels)

    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(
            input_file, spec, batch_size, is_training, input_context=input_context,
            shuffle_buffer_size=shuffle_buffer_size, seed=seed, repeat=repeat,
            drop_remainder=drop_remainder)

    return input_fn
