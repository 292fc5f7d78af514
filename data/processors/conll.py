"""CoNLL-style token tagging data (NER): reading, label alignment to word pieces, TFRecords.

A CoNLL file has one token per line, its tag in the LAST whitespace-separated
column and the token in the first (CoNLL-2003's ``EU NNP B-NP B-ORG`` and
two-column ``EU B-ORG`` files both work); a blank line ends a sentence and
``-DOCSTART-`` lines are skipped. Chinese character-level files (one
character and its tag per line) read the same way: BERT's tokenizer keeps
every CJK character a token of its own.

Tags follow a scheme (`SCHEMES`): ``bio`` (``O``, ``B-X``, ``I-X``) or
``bioes`` (also ``E-X`` and ``S-X``). A line with fewer than two columns or
a tag outside the scheme is a `DataError` naming ``file:line``.

Alignment (`convert_sentence`): each word is WordPiece-tokenized; its tag
goes on its FIRST piece (``label_mask`` 1) and its other pieces get label id
0 and ``label_mask`` 0, so they count in neither loss nor metrics. The
sequence is ``[CLS] pieces [SEP]``; pieces beyond ``max_seq_length - 2`` are
cut, and a word whose first piece was cut is not predicted (`TaggedFeatures
.num_words` says how many words fit; the job predicts ``O`` for the rest and
still scores their gold entities). A word the tokenizer maps to no piece at
all (only control characters) becomes ``[UNK]`` so that every word keeps a
position.

Features written per sentence (int64): ``input_ids``, ``input_mask``,
``segment_ids``, ``label_ids``, ``label_mask`` (``[max_seq_length]`` each)
and ``is_real_example``.
"""

import dataclasses
import os
from typing import List, Optional

import tensorflow as tf

from data import atomic
from data import input_pipeline
from data.processors.base import DataError

__all__ = ["SCHEMES", "TaggedSentence", "TaggedFeatures", "read_conll", "check_tags",
           "label_list_from", "convert_sentence", "write_tagging_records",
           "tagging_feature_spec", "tagging_input_fn_builder", "write_conll_predictions"]

SCHEMES = {"bio": ("B", "I"), "bioes": ("B", "I", "E", "S")}
DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class TaggedSentence:
    """One sentence: its words, their tags and where each word was read (``file:line``)."""

    guid: str
    words: List[str]
    tags: List[str]
    sources: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TaggedFeatures:
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    label_ids: List[int]
    label_mask: List[int]
    is_real_example: int = 1
    num_words: int = 0            # words whose first piece fits
    tokens: Optional[List[str]] = None


def _check_tag(tag, scheme, where):
    if tag == "O":
        return
    prefixes = SCHEMES[scheme]
    if len(tag) < 3 or tag[1] != "-" or tag[0] not in prefixes:
        raise DataError(
            "%s: tag %r is not in the %s scheme; expected O or %s followed by -TYPE "
            "(e.g. B-PER)" % (where, tag, scheme, ", ".join(p + "-" for p in prefixes)))


def check_tags(sentences, scheme):
    """Raises `DataError` (``file:line``) at the first tag outside `scheme`."""
    if scheme not in SCHEMES:
        raise ValueError("tagging scheme %r: expected one of %s" % (scheme, ", ".join(SCHEMES)))
    for sentence in sentences:
        for i, tag in enumerate(sentence.tags):
            where = sentence.sources[i] if sentence.sources else sentence.guid
            _check_tag(tag, scheme, where)


def read_conll(path, scheme="bio", set_type=None, tag_column=-1):
    """The sentences of a CoNLL file, tags checked against `scheme`.

    The token is the first column and the tag column `tag_column` (default
    the last; CoNLL-2003's part-of-speech tags are column 1); a blank line
    ends a sentence, ``-DOCSTART-`` lines are skipped. ``scheme=None``
    accepts any tag (part-of-speech and other probing tags).
    """
    if tag_column == 0:
        raise ValueError("tag column 0 is the token; expected the tag's column (default -1, "
                         "the last)")
    if not tf.io.gfile.exists(path):
        raise DataError("%s: no such file" % path)
    set_type = set_type or os.path.splitext(os.path.basename(path))[0]
    needed = tag_column + 1 if tag_column > 0 else max(2, -tag_column + 1)
    sentences, words, tags, sources = [], [], [], []

    def flush():
        if words:
            sentences.append(TaggedSentence("%s-%d" % (set_type, len(sentences)),
                                            list(words), list(tags), list(sources)))
            del words[:], tags[:], sources[:]

    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataError("%s:%d: not valid UTF-8" % (path, line)) from None
    for line_number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == DOCSTART:
            flush()
            continue
        where = "%s:%d" % (path, line_number)
        if len(fields) < needed:
            column = "the last column" if tag_column == -1 else "column %d" % tag_column
            raise DataError("%s: expected a token and its tag in %s (whitespace-separated), "
                            "got %r" % (where, column, line.strip()))
        if scheme is not None:
            _check_tag(fields[tag_column], scheme, where)
        words.append(fields[0])
        tags.append(fields[tag_column])
        sources.append(where)
    flush()
    return sentences


def label_list_from(sentences):
    """``O`` first, then the other tags sorted by type and prefix (stable ids)."""
    tags = {tag for sentence in sentences for tag in sentence.tags} - {"O"}
    return ["O"] + sorted(tags, key=lambda t: (t[2:], t[0]))


def check_known_tags(sentences, label_list):
    """Raises `DataError` naming the file and line of the first tag not in `label_list`."""
    known = set(label_list)
    for sentence in sentences:
        for i, tag in enumerate(sentence.tags):
            if tag not in known:
                where = sentence.sources[i] if sentence.sources else sentence.guid
                raise DataError("%s: tag %r is not among the training labels (%s)"
                                % (where, tag, ", ".join(label_list)))


def convert_sentence(sentence, label_map, max_seq_length, tokenizer):
    """`TaggedFeatures` of one sentence (see the module docstring for the alignment)."""
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3, got %d" % max_seq_length)
    tokens, label_ids, label_mask = ["[CLS]"], [0], [0]
    num_words = 0
    check_known_tags([sentence], list(label_map))
    if hasattr(tokenizer, "build_inputs"):
        return _convert_with_framing(sentence, label_map, max_seq_length, tokenizer)
    for word, tag in zip(sentence.words, sentence.tags):
        pieces = tokenizer.tokenize(word) or ["[UNK]"]
        room = max_seq_length - 1 - len(tokens)
        if room <= 0:
            break
        pieces = pieces[:room]
        tokens.extend(pieces)
        label_ids.extend([label_map[tag]] + [0] * (len(pieces) - 1))
        label_mask.extend([1] + [0] * (len(pieces) - 1))
        num_words += 1
    tokens.append("[SEP]")
    label_ids.append(0)
    label_mask.append(0)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    padding = max_seq_length - len(input_ids)
    return TaggedFeatures(
        input_ids=input_ids + [0] * padding, input_mask=input_mask + [0] * padding,
        segment_ids=[0] * max_seq_length, label_ids=label_ids + [0] * padding,
        label_mask=label_mask + [0] * padding, num_words=num_words, tokens=tokens)


def _convert_with_framing(sentence, label_map, max_seq_length, tokenizer):
    """`convert_sentence` through a model folder's tokenizer (`PretrainedTokenizer`).

    Each word is read as HF reads pre-split words (`is_split_into_words`,
    with a space before every word: RoBERTa's `Ġword`, SentencePiece's
    `▁word`: `word_pieces`); the family's framing goes around the pieces
    (`build_inputs`: `<s> ... </s>`, XLNet's `... <sep> <cls>`), and the
    first piece of each word carries the word's tag, HF's `word_ids()` rule
    (the first position of each word id). The row is padded on the family's
    side (XLNet's left) with its pad id, as HF's `padding="max_length"`.
    """
    marker = -1
    framed = tokenizer.build_inputs([marker])
    start = list(framed.input_ids).index(marker)
    room = max_seq_length - (len(framed.input_ids) - 1)
    ids, labels, mask = [], [], []
    num_words = 0
    for word, tag in zip(sentence.words, sentence.tags):
        pieces = tokenizer.word_pieces(word)
        if not pieces or len(ids) >= room:
            break
        pieces = pieces[:room - len(ids)]
        ids.extend(tokenizer.convert_tokens_to_ids(pieces))
        labels.extend([label_map[tag]] + [0] * (len(pieces) - 1))
        mask.extend([1] + [0] * (len(pieces) - 1))
        num_words += 1
    encoded = tokenizer.build_inputs(ids)
    after = len(encoded.input_ids) - start - len(ids)
    input_ids, input_mask, segment_ids, offset = tokenizer.pad(encoded, max_seq_length)
    before = offset + start
    after += max_seq_length - len(encoded.input_ids) - offset
    return TaggedFeatures(
        input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
        label_ids=[0] * before + labels + [0] * after,
        label_mask=[0] * before + mask + [0] * after,
        num_words=num_words, tokens=tokenizer.convert_ids_to_tokens(encoded.input_ids))


def _padding_features(max_seq_length):
    zeros = [0] * max_seq_length
    return TaggedFeatures(list(zeros), list(zeros), list(zeros), list(zeros), list(zeros),
                          is_real_example=0)


FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask")


def write_tagging_records(sentences, label_list, max_seq_length, tokenizer, path,
                          pad_to_multiple=1):
    """Converts and writes `sentences` to a TFRecord file atomically.

    Padding sentences (all zeros, ``is_real_example`` 0) fill the last batch
    up to a multiple of `pad_to_multiple`. Returns the list of features of the
    real sentences.
    """
    label_map = {label: i for i, label in enumerate(label_list)}
    features = [convert_sentence(s, label_map, max_seq_length, tokenizer) for s in sentences]
    padded = list(features)
    while len(padded) % pad_to_multiple:
        padded.append(_padding_features(max_seq_length))
    outputs = atomic.TemporaryOutputs([path])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for feature in padded:
                values = {name: tf.train.Feature(int64_list=tf.train.Int64List(
                    value=getattr(feature, name))) for name in FEATURE_NAMES}
                values["is_real_example"] = tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[feature.is_real_example]))
                writer.write(tf.train.Example(
                    features=tf.train.Features(feature=values)).SerializeToString())
        outputs.commit()
    finally:
        outputs.discard()
    return features


def tagging_feature_spec(max_seq_length):
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURE_NAMES}
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def tagging_input_fn_builder(path, max_seq_length, is_training, batch_size, seed=None):
    """`input_fn(input_context=None)` over a tagging TFRecord file (train: shuffled, repeated)."""
    spec = tagging_feature_spec(max_seq_length)

    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(
            path, spec, batch_size, is_training, input_context=input_context, seed=seed,
            drop_remainder=True)

    return input_fn


def write_conll_predictions(path, sentences, predicted_tags):
    """``token gold predicted`` per line, a blank line after each sentence (atomic)."""
    lines = []
    for sentence, predicted in zip(sentences, predicted_tags):
        for word, gold, tag in zip(sentence.words, sentence.tags, predicted):
            lines.append("%s %s %s\n" % (word, gold, tag))
        lines.append("\n")
    return atomic.write_text(path, "".join(lines))
