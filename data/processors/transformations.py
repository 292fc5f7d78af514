"""GPT's input transformations (Radford et al. 2018, section 3.3): examples -> token sequences.

GPT fine-tunes a left-to-right model, so every structured input becomes one
or more plain token sequences, framed by tokens that pre-training never saw:
a start token `<s>`, a delimiter `$` and an extract token `<e>` whose final
hidden state the task's linear layer reads:

    classification   <s> text <e>                         one sequence (a pair is
                                                          framed as entailment)
    entailment       <s> premise $ hypothesis <e>         one sequence (pairs only)
    similarity       <s> a $ b <e>  and  <s> b $ a <e>    two sequences (no order
                                                          between the texts)
    multiple choice  <s> context $ choice_k <e>           one per candidate

The three ids are `SpecialIds(start, delimiter, extract)`; GPT appends them
to the pre-trained vocabulary (ids `V`, `V + 1`, `V + 2` for a table of `V`
rows, `special_ids_after`). Texts are tokenized by any tokenizer with
`encode(text) -> ids` (GPT's byte-level BPE, `data.tokenizers.byte_bpe`).

Truncation keeps every sequence within `max_seq_length`: a single text keeps
its first `max_seq_length - 2` tokens; a pair (and a context with a choice)
is cut to `max_seq_length - 3` tokens by Google's `truncate_seq_pair`
(longest first, from the end), so `<e>` is never cut off.

Records: one example's sequences are padded to `max_seq_length` each and
stored end to end, so the TFRecords keep the classifier's feature names and
layout (`input_ids`, `input_mask`, `segment_ids` of `num_sequences *
max_seq_length`, `label_ids`, `is_real_example`) and
`features.file_based_input_fn_builder(seq_length=num_sequences *
max_seq_length)` reads them; the model splits them again. `segment_ids` are
zeros (GPT has no segment embedding).
"""

import collections

from absl import logging
import tensorflow as tf

from data import atomic
from data import packing
from data.processors.base import DataError
from data.processors.base import InputFeatures
from data.processors.base import PaddingInputExample
from data.processors.features import _label_value
from data.processors.features import serialize_features

__all__ = ["TRANSFORMATIONS", "SpecialIds", "file_based_convert_gpt_examples",
           "gpt_example_sequences", "num_sequences", "special_ids_after", "transform"]

CLASSIFICATION = "classification"
ENTAILMENT = "entailment"
SIMILARITY = "similarity"
MULTIPLE_CHOICE = "multiple_choice"
TRANSFORMATIONS = (CLASSIFICATION, ENTAILMENT, SIMILARITY, MULTIPLE_CHOICE)

SpecialIds = collections.namedtuple("SpecialIds", ["start", "delimiter", "extract"])


def special_ids_after(vocab_size):
    """GPT's start, delimiter and extract ids appended to a vocabulary of `vocab_size`."""
    return SpecialIds(vocab_size, vocab_size + 1, vocab_size + 2)


def num_sequences(transformation, num_choices=None):
    """How many sequences one example becomes."""
    if transformation == SIMILARITY:
        return 2
    if transformation == MULTIPLE_CHOICE:
        if not num_choices:
            raise ValueError("multiple_choice needs the number of choices")
        return int(num_choices)
    if transformation in (CLASSIFICATION, ENTAILMENT):
        return 1
    raise ValueError("Unknown input transformation %r; known: %s"
                     % (transformation, ", ".join(TRANSFORMATIONS)))


def _single(ids, max_seq_length, special):
    ids = list(ids)[:max_seq_length - 2]
    return [special.start] + ids + [special.extract]


def _pair(ids_a, ids_b, max_seq_length, special):
    ids_a, ids_b = list(ids_a), list(ids_b)
    packing.truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
    return [special.start] + ids_a + [special.delimiter] + ids_b + [special.extract]


def transform(transformation, max_seq_length, special, ids_a, ids_b=None, choices=None):
    """The token sequences of one example (lists of ids, unpadded).

    Args:
      transformation: one of `TRANSFORMATIONS`.
      max_seq_length: the longest sequence (>= 4 for pairs, 3 otherwise).
      special: `SpecialIds`.
      ids_a: the text's (premise's, context's) ids.
      ids_b: the second text's ids (entailment, similarity; classification
        with a second text is treated as entailment).
      choices: list of each candidate's ids (multiple choice).
    """
    if max_seq_length < 4:
        raise ValueError("max_seq_length=%d is too short for GPT's framing tokens"
                         % max_seq_length)
    if transformation == MULTIPLE_CHOICE:
        return [_pair(ids_a, choice, max_seq_length, special) for choice in choices]
    if transformation == SIMILARITY:
        return [_pair(ids_a, ids_b, max_seq_length, special),
                _pair(ids_b, ids_a, max_seq_length, special)]
    if transformation in (CLASSIFICATION, ENTAILMENT):
        if ids_b is None:
            return [_single(ids_a, max_seq_length, special)]
        return [_pair(ids_a, ids_b, max_seq_length, special)]
    raise ValueError("Unknown input transformation %r; known: %s"
                     % (transformation, ", ".join(TRANSFORMATIONS)))


def gpt_example_sequences(example, transformation, max_seq_length, tokenizer, special):
    """`transform` of an `InputExample` (or `ChoiceExample`) after tokenizing its texts.

    Raises:
      DataError: the example lacks what the transformation needs (a second
        text for entailment/similarity, candidates for multiple choice);
        the message names the example and its file:line.
    """
    ids_a = tokenizer.encode(example.text_a or "")
    choices = getattr(example, "choices", None)
    if transformation == MULTIPLE_CHOICE:
        if not choices:
            raise DataError("%s has no candidates; the multiple_choice transformation "
                            "needs a multiple-choice task" % example.describe())
        return transform(transformation, max_seq_length, special, ids_a,
                         choices=[tokenizer.encode(c) for c in choices])
    if choices:
        raise DataError("%s is a multiple-choice example; use --input_transformation="
                        "multiple_choice (or auto)" % example.describe())
    ids_b = tokenizer.encode(example.text_b) if example.text_b else None
    if transformation in (ENTAILMENT, SIMILARITY) and ids_b is None:
        raise DataError("%s has no second text; the %s transformation needs text pairs"
                        % (example.describe(), transformation))
    return transform(transformation, max_seq_length, special, ids_a, ids_b)


def _padded(sequences, max_seq_length, count):
    """Sequences padded to `max_seq_length` and stored end to end: (ids, mask)."""
    if len(sequences) != count:
        raise ValueError("expected %d sequences, got %d" % (count, len(sequences)))
    ids, mask = [], []
    for sequence in sequences:
        padding = max_seq_length - len(sequence)
        ids.extend(list(sequence) + [0] * padding)
        mask.extend([1] * len(sequence) + [0] * padding)
    return ids, mask


def convert_gpt_example(ex_index, example, label_list, max_seq_length, tokenizer, special,
                        transformation, task_type, count):
    """One example -> `InputFeatures` of `count * max_seq_length` ids (see the module docstring)."""
    if isinstance(example, PaddingInputExample):
        ids = [0] * (count * max_seq_length)
        if task_type == "regression":
            label = 0.0
        elif task_type == "multi_label":
            label = [0] * len(label_list)
        else:
            label = 0
        return InputFeatures(ids, list(ids), list(ids), label, is_real_example=False)
    label_map = {label: i for i, label in enumerate(label_list or ())}
    label_id = _label_value(example, label_map, label_list, task_type)
    sequences = gpt_example_sequences(example, transformation, max_seq_length, tokenizer,
                                      special)
    input_ids, input_mask = _padded(sequences, max_seq_length, count)
    if ex_index < 3:
        logging.info("*** Example %s (%s) ***", example.guid, transformation)
        for sequence in sequences:
            logging.info("ids: %s", " ".join(str(i) for i in sequence))
        logging.info("label: %s (id = %s)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, [0] * len(input_ids), label_id,
                         is_real_example=True)


def file_based_convert_gpt_examples(examples, label_list, max_seq_length, tokenizer, special,
                                    transformation, output_file, task_type, num_choices=None):
    """Writes the examples' transformed sequences as classifier TFRecords (atomically).

    Returns:
      the number of records written.
    """
    count = num_sequences(transformation, num_choices)
    examples = list(examples)
    outputs = atomic.TemporaryOutputs([output_file])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for ex_index, example in enumerate(examples):
                features = convert_gpt_example(ex_index, example, label_list, max_seq_length,
                                               tokenizer, special, transformation, task_type,
                                               count)
                writer.write(serialize_features(features, task_type))
        outputs.commit()
    finally:
        outputs.discard()
    return len(examples)
