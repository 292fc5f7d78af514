"""Pre-training instances for BERT: NSP pairs and static masked-LM masks.

This follows google-research/bert's `create_pretraining_data.py` rule for rule
(for a corpus that fits one chunk, the same seed gives the same instances):

* A document is cut into chunks of sentences of about `max_seq_length - 3`
  tokens (sometimes shorter, with probability `short_seq_prob`, so the model
  also sees short sequences as it will at fine-tuning time).
* Segment A is a random-length prefix of a chunk. Half the time segment B is
  the rest of the chunk ("IsNext"); otherwise B is taken from a random other
  document ("NotNext"), and the chunk's sentences that B did not use are put
  back so they are not wasted.
* The pair is truncated to fit, one token at a time from the longer segment,
  at the front or the back at random (so the model doesn't learn that
  sentences always end in punctuation).
* ``num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) *
  masked_lm_prob)))`` positions are masked among all tokens but ``[CLS]`` and
  ``[SEP]``; each chosen word piece becomes ``[MASK]`` 80% of the time, stays
  itself 10%, becomes a random vocabulary token 10%. With whole-word masking
  the units chosen are whole words (a token and its ``##`` pieces), still
  80/10/10 per word piece.

Beyond Google's rules, the parts of other pre-training recipes are selected
by name in `InstanceOptions` (defaults give Google's output, unchanged):

* ``masking``: a strategy of `data.pretraining.masking.MASKING_STRATEGIES` -- ``token``
  (Google's), ``whole_word`` (``--do_whole_word_mask``; for Chinese with
  ``chinese_word_segmentation``, jieba words as units), ``span`` (SpanBERT),
  ``ngram`` (ALBERT), ``unilm`` (UNILM: whole words, sometimes 2-3-grams).
* ``sentence_objective``: how a document becomes sequences, from
  `SENTENCE_OBJECTIVES` -- ``nsp`` (the pairs above), ``sop`` (ALBERT's
  sentence order: two consecutive segments, swapped half of the time, label
  1 = swapped), ``contiguous`` (the same pairs never swapped: UNILM's
  source and target) and ``none`` (one segment of consecutive sentences,
  label 0).

Word boundaries travel beside the tokens: with ``chinese_word_segmentation``
each sentence comes with a list of booleans, True where a word begins
(`data.pretraining.masking.tokenize_with_word_starts`); the objectives cut and truncate
them together with the tokens, and the masking strategy groups tokens into
words with them. Without segmentation none are carried and words are read
off the ``##`` marks.

What differs from Google's script is the plumbing around it (see `run`): the
corpus is processed in chunks of documents so memory stays bounded, chunks
are processed in parallel worker processes, and each chunk's random stream is
derived from (seed, chunk index) so the output does not depend on the number
of workers. The random "next" segment comes from another document of the same
chunk; with thousands of documents per chunk this changes nothing that
matters.

Speed (`benchmarks/bench_data_prep.py` measures it against Google's script):
with Google's defaults (NSP pairs, per-WordPiece masking) a chunk takes the
compiled path (`data.pretraining.compiled_nsp`): its lines become token ids
in bulk (`data.tokenizers.ascii_wordpiece`: printable-ASCII lines by a
compiled WordPiece trie walk, the others through `FullTokenizer` or, for many of them, the
in-graph `BulkTokenizer`; `FullTokenizer`'s ids exactly), and the instances
and their serialised records come from compiled code that makes Python's
exact random draws, so the bytes are those of the Python path below. No
TensorFlow is imported for it. Other recipes take the Python path: a chunk's
lines are tokenized together in the graph
(`data.tokenizers.wordpiece.BulkTokenizer`), the per-instance shuffles make
Python's exact draws with fewer calls (`data.pretraining.fast_random`), and
records are written as bytes directly, the bytes `tf.train.Example`
serialisation gives (`data.pretraining.example_encoder`). The writer is
`data/pretraining/writer.py`.
"""

import collections
import logging
import random
import sys

import numpy as np

from data import corpus as corpus_lib
from data.pretraining import compiled_nsp
from data.pretraining import example_encoder
from data.pretraining import fast_random
from data.pretraining import masking
from data import tokenization
from data.tokenizers import ascii_wordpiece

# Non-ASCII lines of a chunk from which on the in-graph tokenizer (TensorFlow,
# a few seconds to import) tokenizes them instead of FullTokenizer line by line.
BULK_TOKENIZATION_MIN_LINES = 20000

# The feature names of Google's pre-training TFRecords.
PRETRAINING_INT_FEATURES = ("input_ids", "input_mask", "segment_ids",
                            "masked_lm_positions", "masked_lm_ids",
                            "next_sentence_labels")
PRETRAINING_FLOAT_FEATURES = ("masked_lm_weights",)


class TrainingInstance(object):
    """A single pre-training example: a segment pair with its masked LM targets."""

    __slots__ = ("tokens", "segment_ids", "masked_lm_positions",
                 "masked_lm_labels", "is_random_next")

    def __init__(self, tokens, segment_ids, masked_lm_positions,
                 masked_lm_labels, is_random_next):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels
        self.is_random_next = is_random_next

    def __str__(self):
        return ("tokens: %s\nsegment_ids: %s\nis_random_next: %s\n"
                "masked_lm_positions: %s\nmasked_lm_labels: %s\n" % (
                    " ".join(self.tokens), " ".join(map(str, self.segment_ids)),
                    self.is_random_next, " ".join(map(str, self.masked_lm_positions)),
                    " ".join(self.masked_lm_labels)))

    __repr__ = __str__


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def candidate_units(tokens, do_whole_word_mask=False):
    """Groups maskable token positions into the units masking chooses among.

    ``[CLS]`` and ``[SEP]`` are never candidates. Without whole-word masking
    every other token is a unit; with it, a ``##`` continuation joins the unit
    of the token before it.
    """
    if do_whole_word_mask:
        return masking.word_units(tokens)
    return [[i] for i, token in enumerate(tokens) if token not in masking.SPECIAL_TOKENS]


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                 vocab_words, rng, do_whole_word_mask=False):
    """Chooses and applies the masked-LM corruption of one instance (Google's API).

    The ``token`` or ``whole_word`` strategy of `data.pretraining.masking`.

    Returns:
      (output_tokens, masked_lm_positions, masked_lm_labels), positions sorted.
    """
    masker = masking.build_masker("whole_word" if do_whole_word_mask else "token",
                                  masked_lm_prob, max_predictions_per_seq, vocab_words)
    result = masker(tokens, rng)
    return result.tokens, result.positions, result.labels


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng, side_a=None, side_b=None):
    """Truncates a pair in place to at most `max_num_tokens` tokens in total.

    Google's rule: one token at a time from the longer segment (B on ties),
    at its front or its back at random, one ``rng.random()`` per token
    removed. The removals are only counted here and applied with one slice
    per list at the end, so a long pair costs time linear in its length
    (deleting list items one by one was quadratic).

    `side_a` / `side_b`, when given, are per-token lists (word starts) that
    lose the same positions as their segment.
    """
    # Each segment's kept stretch is [start, end) of the original list.
    start_a, end_a = 0, len(tokens_a)
    start_b, end_b = 0, len(tokens_b)
    while (end_a - start_a) + (end_b - start_b) > max_num_tokens:
        if end_a - start_a > end_b - start_b:
            # Cutting at the front or at the back at random adds noise that
            # keeps the model from relying on where sentences are cut.
            if rng.random() < 0.5:
                start_a += 1
            else:
                end_a -= 1
        else:
            if end_b <= start_b:
                raise ValueError("cannot truncate a pair to max_num_tokens=%d; expected >= 0"
                                 % max_num_tokens)
            if rng.random() < 0.5:
                start_b += 1
            else:
                end_b -= 1
    for tokens, side, start, end in ((tokens_a, side_a, start_a, end_a),
                                     (tokens_b, side_b, start_b, end_b)):
        for values in (tokens, side):
            if values is None or (start == 0 and end == len(values)):
                continue
            del values[end:]
            del values[:start]


def _truncate_outer_ends(tokens_a, tokens_b, max_num_tokens, side_a=None, side_b=None):
    """Truncates a pair from A's front and B's back only, longer segment first.

    A and B then stay one contiguous stretch of the document (what sentence
    order prediction needs); the cut still falls inside sentences, at the
    outer ends.
    """
    excess = len(tokens_a) + len(tokens_b) - max_num_tokens
    if excess <= 0:
        return
    # Remove one token at a time from the longer segment (B on ties), as
    # Google's truncation does, but always at the outer end.
    cut_a = cut_b = 0
    len_a, len_b = len(tokens_a), len(tokens_b)
    for _ in range(excess):
        if len_a > len_b:
            cut_a += 1
            len_a -= 1
        else:
            cut_b += 1
            len_b -= 1
    del tokens_a[:cut_a]
    if side_a is not None:
        del side_a[:cut_a]
    if cut_b:
        del tokens_b[len(tokens_b) - cut_b:]
        if side_b is not None:
            del side_b[len(side_b) - cut_b:]


# ---------------------------------------------------------------------------
# Sentence objectives: how a document becomes token sequences.
# ---------------------------------------------------------------------------

SegmentedSequence = collections.namedtuple(
    "SegmentedSequence", ["tokens", "segment_ids", "word_starts", "label"])
SegmentedSequence.__doc__ = """One instance before masking.

tokens: with [CLS]/[SEP]; segment_ids: 0 for [CLS] A [SEP], 1 for B [SEP];
word_starts: per token, True where a word begins, or None (words are read
off the ## marks); label: the sentence-level label (next_sentence_labels).
"""


def _target_seq_length(max_num_tokens, short_seq_prob, rng):
    # Usually fill the whole sequence; sometimes aim shorter so that
    # pre-training also covers the short inputs of fine-tuning.
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _gather(document, word_starts, indices):
    """Concatenated tokens (and word starts, or None) of sentences `indices`."""
    tokens = []
    for j in indices:
        tokens.extend(document[j])
    if word_starts is None:
        return tokens, None
    starts = []
    for j in indices:
        starts.extend(word_starts[j])
    return tokens, starts


def _assemble(segments):
    """[CLS] seg0 [SEP] (seg1 [SEP]): tokens, segment ids and word starts.

    `segments` is a list of (tokens, word_starts or None). When word starts
    are carried, each segment's first token starts a word: a word whose
    beginning truncation cut off is a unit of its own, not part of the word
    before the [SEP].
    """
    tokens = [tokenization.CLS_TOKEN]
    segment_ids = [0]
    carried = segments[0][1] is not None
    starts = [True] if carried else None
    for segment_id, (segment_tokens, segment_starts) in enumerate(segments):
        tokens.extend(segment_tokens)
        tokens.append(tokenization.SEP_TOKEN)
        segment_ids.extend([segment_id] * (len(segment_tokens) + 1))
        if carried:
            if segment_tokens:
                starts.append(True)
                starts.extend(segment_starts[1:])
            starts.append(True)
    return tokens, segment_ids, starts


def nsp_pairs(all_documents, document_index, max_seq_length, short_seq_prob, rng,
              all_word_starts=None):
    """Google's next-sentence-prediction pairs of one document (a generator).

    Label 1 = B comes from another document. See the module docstring; the
    random calls are Google's, in Google's order, provided the caller masks
    each sequence as soon as it is yielded.
    """
    document = all_documents[document_index]
    doc_starts = all_word_starts[document_index] if all_word_starts is not None else None
    # Room for [CLS], [SEP], [SEP].
    max_num_tokens = max_seq_length - 3
    target_seq_length = _target_seq_length(max_num_tokens, short_seq_prob, rng)

    current_chunk = []  # sentence indices
    current_length = 0
    i = 0
    while i < len(document):
        current_chunk.append(i)
        current_length += len(document[i])
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                # How many sentences of the chunk go into segment A.
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a, starts_a = _gather(document, doc_starts, current_chunk[:a_end])

                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    # A corpus of one document has nothing else to draw from;
                    # after 10 tries the same document is accepted.
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    used = []
                    used_length = 0
                    for j in range(random_start, len(random_document)):
                        used.append(j)
                        used_length += len(random_document[j])
                        if used_length >= target_b_length:
                            break
                    tokens_b, starts_b = _gather(
                        random_document,
                        all_word_starts[random_document_index]
                        if all_word_starts is not None else None, used)
                    # The sentences of this chunk that B did not use are put
                    # back, to become part of the next chunk.
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                else:
                    is_random_next = False
                    tokens_b, starts_b = _gather(document, doc_starts, current_chunk[a_end:])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng, starts_a, starts_b)
                tokens, segment_ids, starts = _assemble(
                    [(tokens_a, starts_a), (tokens_b, starts_b)])
                yield SegmentedSequence(tokens, segment_ids, starts, int(is_random_next))
            current_chunk = []
            current_length = 0
        i += 1


def sop_pairs(all_documents, document_index, max_seq_length, short_seq_prob, rng,
              all_word_starts=None):
    """ALBERT's sentence-order-prediction pairs of one document (a generator).

    See `_ordered_pairs`: the pairs of `contiguous_pairs`, swapped with
    probability 0.5 (label 1 = swapped, as ALBERT stores it).
    """
    return _ordered_pairs(all_documents, document_index, max_seq_length, short_seq_prob,
                          rng, all_word_starts, swap=True)


def contiguous_pairs(all_documents, document_index, max_seq_length, short_seq_prob, rng,
                     all_word_starts=None):
    """Pairs A, B where B is the text that follows A in the document (a generator).

    UNILM's segments: A is the source and B the target of its
    sequence-to-sequence objective, so B must continue A (never swapped, never
    from another document). Label 0 always. Chunking and truncation as for
    SOP (`_ordered_pairs`).
    """
    return _ordered_pairs(all_documents, document_index, max_seq_length, short_seq_prob,
                          rng, all_word_starts, swap=False)


def _ordered_pairs(all_documents, document_index, max_seq_length, short_seq_prob, rng,
                   all_word_starts, swap):
    """Contiguous pairs of one document, swapped with probability 0.5 when `swap`.

    Sentences are gathered into chunks as for NSP; A is a random-length
    prefix of the chunk and B the rest, so B always directly follows A in the
    document. A chunk of a single sentence is split inside it, at a random
    word start (a sentence of one word gives no pair). The pair is truncated
    at its outer ends only (A's front, B's back), so it stays one contiguous
    stretch of text; then, with probability 0.5, A and B are swapped.
    Label 1 = swapped, as ALBERT stores it. No segment ever comes from
    another document.
    """
    document = all_documents[document_index]
    doc_starts = all_word_starts[document_index] if all_word_starts is not None else None
    max_num_tokens = max_seq_length - 3
    target_seq_length = _target_seq_length(max_num_tokens, short_seq_prob, rng)

    current_chunk = []
    current_length = 0
    for i in range(len(document)):
        current_chunk.append(i)
        current_length += len(document[i])
        if i < len(document) - 1 and current_length < target_seq_length:
            continue
        chunk, current_chunk, current_length = current_chunk, [], 0
        if len(chunk) >= 2:
            a_end = rng.randint(1, len(chunk) - 1)
            tokens_a, starts_a = _gather(document, doc_starts, chunk[:a_end])
            tokens_b, starts_b = _gather(document, doc_starts, chunk[a_end:])
        else:
            tokens, starts = _gather(document, doc_starts, chunk)
            word_starts = starts if starts is not None else masking.wordpiece_word_starts(tokens)
            cuts = [k for k in range(1, len(tokens)) if word_starts[k]]
            if not cuts:
                continue
            cut = cuts[rng.randrange(len(cuts))]
            tokens_a, tokens_b = tokens[:cut], tokens[cut:]
            starts_a = starts[:cut] if starts is not None else None
            starts_b = starts[cut:] if starts is not None else None
        _truncate_outer_ends(tokens_a, tokens_b, max_num_tokens, starts_a, starts_b)
        swapped = swap and rng.random() < 0.5
        if swapped:
            tokens_a, tokens_b = tokens_b, tokens_a
            starts_a, starts_b = starts_b, starts_a
        tokens, segment_ids, starts = _assemble([(tokens_a, starts_a), (tokens_b, starts_b)])
        yield SegmentedSequence(tokens, segment_ids, starts, int(swapped))


def single_segments(all_documents, document_index, max_seq_length, short_seq_prob, rng,
                    all_word_starts=None):
    """Single segments of consecutive sentences of one document (a generator).

    ``[CLS] tokens [SEP]`` with segment ids 0 and label 0. Whole sentences
    are packed while they fit in ``max_seq_length - 2`` tokens, until the
    target length is reached (shorter with probability `short_seq_prob`, as
    for NSP); a sentence longer than the sequence on its own is cut into
    consecutive pieces that each fill one.
    """
    document = all_documents[document_index]
    doc_starts = all_word_starts[document_index] if all_word_starts is not None else None
    # Room for [CLS], [SEP].
    max_num_tokens = max_seq_length - 2
    target_seq_length = _target_seq_length(max_num_tokens, short_seq_prob, rng)

    def emit(indices):
        tokens, starts = _gather(document, doc_starts, indices)
        for begin in range(0, len(tokens), max_num_tokens):
            piece = tokens[begin:begin + max_num_tokens]
            piece_starts = starts[begin:begin + max_num_tokens] if starts is not None else None
            tokens_out, segment_ids, starts_out = _assemble([(piece, piece_starts)])
            yield SegmentedSequence(tokens_out, segment_ids, starts_out, 0)

    current_chunk = []
    current_length = 0
    for i, sentence in enumerate(document):
        if current_chunk and current_length + len(sentence) > max_num_tokens:
            yield from emit(current_chunk)
            current_chunk, current_length = [], 0
        current_chunk.append(i)
        current_length += len(sentence)
        if current_length >= target_seq_length:
            yield from emit(current_chunk)
            current_chunk, current_length = [], 0
    if current_chunk:
        yield from emit(current_chunk)


# Sentence objectives by name: generator functions (all_documents,
# document_index, max_seq_length, short_seq_prob, rng, all_word_starts=None)
# yielding `SegmentedSequence`s. Each sequence is masked as soon as it is
# yielded, so an objective's random calls interleave with the masking's.
SENTENCE_OBJECTIVES = collections.OrderedDict([
    ("nsp", nsp_pairs),
    ("sop", sop_pairs),
    ("contiguous", contiguous_pairs),
    ("none", single_segments),
])


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob,
                                   max_predictions_per_seq, vocab_words, rng,
                                   do_whole_word_mask=False, masker=None,
                                   sentence_objective="nsp", all_word_starts=None):
    """Creates the instances of one document (a list of tokenized sentences).

    Args:
      all_documents: documents, each a list of sentences (lists of tokens).
      document_index: the document to make instances from (others may supply
        NSP's random next segment).
      max_seq_length, short_seq_prob: sequence lengths, as in Google's script.
      masked_lm_prob, max_predictions_per_seq, vocab_words, do_whole_word_mask:
        Google's masking (``token`` or ``whole_word``), used when `masker` is
        None.
      rng: a `random.Random`; all randomness comes from it.
      masker: a `data.pretraining.masking.Masker` (carrying its own budget), or None.
      sentence_objective: a name of `SENTENCE_OBJECTIVES`.
      all_word_starts: None, or word starts parallel to `all_documents`
        (per document, per sentence, per token: True where a word begins).

    Returns:
      a list of `TrainingInstance`s; ``is_random_next`` holds the sentence
      label (NSP: random next; SOP: swapped; none: always False).
    """
    if masker is None:
        masker = masking.build_masker("whole_word" if do_whole_word_mask else "token",
                                      masked_lm_prob, max_predictions_per_seq, vocab_words)
    if sentence_objective not in SENTENCE_OBJECTIVES:
        raise ValueError("Unknown sentence objective %r; choose one of: %s"
                         % (sentence_objective, ", ".join(SENTENCE_OBJECTIVES)))
    make_sequences = SENTENCE_OBJECTIVES[sentence_objective]
    instances = []
    for sequence in make_sequences(all_documents, document_index, max_seq_length,
                                   short_seq_prob, rng, all_word_starts):
        result = masker(sequence.tokens, rng, sequence.word_starts)
        instances.append(TrainingInstance(
            tokens=result.tokens, segment_ids=sequence.segment_ids,
            masked_lm_positions=result.positions, masked_lm_labels=result.labels,
            is_random_next=bool(sequence.label)))
    return instances


def instance_to_features(instance, vocab, max_seq_length, max_predictions_per_seq):
    """Pads an instance into Google's fixed-size feature lists.

    Returns:
      (int_features, float_features): dicts name -> list.
    """
    input_ids = list(map(vocab.__getitem__, instance.tokens))
    if len(input_ids) > max_seq_length:
        raise ValueError("Instance of %d tokens exceeds max_seq_length=%d"
                         % (len(input_ids), max_seq_length))
    pad = max_seq_length - len(input_ids)
    input_mask = [1] * len(input_ids) + [0] * pad
    segment_ids = list(instance.segment_ids) + [0] * pad
    input_ids = input_ids + [0] * pad

    masked_lm_ids = list(map(vocab.__getitem__, instance.masked_lm_labels))
    num_masked = len(masked_lm_ids)
    pad = max_predictions_per_seq - num_masked
    int_features = collections.OrderedDict()
    int_features["input_ids"] = input_ids
    int_features["input_mask"] = input_mask
    int_features["segment_ids"] = segment_ids
    int_features["masked_lm_positions"] = list(instance.masked_lm_positions) + [0] * pad
    int_features["masked_lm_ids"] = masked_lm_ids + [0] * pad
    int_features["next_sentence_labels"] = [1 if instance.is_random_next else 0]
    float_features = {"masked_lm_weights": [1.0] * num_masked + [0.0] * pad}
    return int_features, float_features


# ---------------------------------------------------------------------------
# Chunk processing, run in worker processes.
# ---------------------------------------------------------------------------

_INSTANCE_OPTION_FIELDS = (
    "vocab_file", "do_lower_case", "max_seq_length", "max_predictions_per_seq",
    "random_seed", "dupe_factor", "masked_lm_prob", "short_seq_prob",
    "do_whole_word_mask", "masking", "sentence_objective", "chinese_word_segmentation",
    "span_geometric_p", "max_span_length", "max_ngram", "replace_per_unit")
# Defaults of the trailing fields; callers written before they existed keep working.
_INSTANCE_OPTION_DEFAULTS = (
    False,    # do_whole_word_mask (Google's flag; an alias of masking="whole_word")
    "token",  # masking: a name of data.pretraining.masking.MASKING_STRATEGIES
    "nsp",    # sentence_objective: a name of SENTENCE_OBJECTIVES
    False,    # chinese_word_segmentation: jieba words as units for word-level masking
    0.2,      # span_geometric_p
    10,       # max_span_length (words)
    3,        # max_ngram (words)
    None,     # replace_per_unit: None = the strategy's default (per unit for span)
)


class InstanceOptions(collections.namedtuple("InstanceOptions", _INSTANCE_OPTION_FIELDS,
                                             defaults=_INSTANCE_OPTION_DEFAULTS)):
    """Everything a worker needs to turn a chunk of documents into examples.

    Google's fields come first; the recipe fields after ``do_whole_word_mask``
    have defaults that reproduce Google's output:

    * ``masking``: ``token`` | ``whole_word`` | ``span`` | ``ngram``
      (`data.pretraining.masking.MASKING_STRATEGIES`); ``do_whole_word_mask=True`` with
      ``masking="token"`` means ``whole_word``.
    * ``sentence_objective``: ``nsp`` | ``sop`` | ``none`` (`SENTENCE_OBJECTIVES`).
    * ``chinese_word_segmentation``: segment each sentence with jieba and use
      its words as the units of word-level masking.
    * ``span_geometric_p``, ``max_span_length``: SpanBERT's span lengths.
    * ``max_ngram``: ALBERT's longest n-gram.
    * ``replace_per_unit``: decide 80/10/10 once per unit (True), per word
      piece (False), or as the strategy does by default (None).
    """

    __slots__ = ()

    def resolved_masking(self):
        """The masking strategy's name, with Google's do_whole_word_mask alias applied."""
        if self.do_whole_word_mask and self.masking == "token":
            return "whole_word"
        return self.masking

    def masking_strategy(self):
        """A new `data.pretraining.masking.MaskingStrategy` for these options."""
        return masking.create_masking_strategy(
            self.resolved_masking(), geometric_p=self.span_geometric_p,
            max_span_length=self.max_span_length, max_ngram=self.max_ngram)

    def validate(self):
        if self.max_seq_length < 5:
            raise ValueError("max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP] "
                             "with 2 tokens), got %d" % self.max_seq_length)
        if self.max_predictions_per_seq < 1:
            raise ValueError("max_predictions_per_seq must be >= 1, got %d"
                             % self.max_predictions_per_seq)
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError("masked_lm_prob must be in (0, 1), got %r" % self.masked_lm_prob)
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError("short_seq_prob must be in [0, 1], got %r" % self.short_seq_prob)
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be >= 1, got %d" % self.dupe_factor)
        if self.masking not in masking.MASKING_STRATEGIES:
            raise ValueError("Unknown masking %r; choose one of: %s"
                             % (self.masking, ", ".join(masking.MASKING_STRATEGIES)))
        if self.do_whole_word_mask and self.masking not in ("token", "whole_word"):
            raise ValueError("do_whole_word_mask means masking=whole_word; it cannot be "
                             "combined with masking=%s" % self.masking)
        if self.sentence_objective not in SENTENCE_OBJECTIVES:
            raise ValueError("Unknown sentence_objective %r; choose one of: %s"
                             % (self.sentence_objective, ", ".join(SENTENCE_OBJECTIVES)))
        if (self.chinese_word_segmentation
                and self.resolved_masking() not in masking.WORD_LEVEL_STRATEGIES):
            raise ValueError("chinese_word_segmentation gives word boundaries to word-level "
                             "masking (%s); it has no effect with masking=%s"
                             % (", ".join(sorted(masking.WORD_LEVEL_STRATEGIES)),
                                self.resolved_masking()))
        if self.replace_per_unit not in (None, True, False):
            raise ValueError("replace_per_unit must be None, True or False, got %r"
                             % (self.replace_per_unit,))
        self.masking_strategy()  # checks the strategy's own options


def chunk_rng(random_seed, chunk_index):
    """The random stream of one chunk: a function of the seed and chunk index only.

    Chunk 0 uses the seed itself, so a corpus that fits one chunk gets exactly
    the stream Google's script would use.
    """
    if chunk_index == 0:
        return random.Random(random_seed)
    return random.Random("%d/%d" % (random_seed, chunk_index))


class ChunkResult(object):
    """Serialised examples of one chunk plus its statistics.

    On the compiled path the records stay in one buffer (`compiled`, a
    `compiled_nsp.ChunkInstances`) until `examples` is first read, and
    `tfrecord_bytes()` gives them framed for a TFRecord file at once.
    """

    def __init__(self):
        self._examples = []
        self.compiled = None
        self.stats = corpus_lib.ReadStats()
        self.num_documents = 0
        self.num_instances = 0
        self.num_tokens = 0
        self.num_masked = 0
        self.num_random_next = 0
        self.first_instances = []

    @property
    def examples(self):
        """The serialised tf.train.Examples of the chunk, in order (a list of bytes)."""
        if self._examples is None:
            self._examples = self.compiled.examples()
        return self._examples

    @examples.setter
    def examples(self, value):
        self._examples = value

    def tfrecord_bytes(self):
        """The records framed as in a TFRecord file (bytes), or None off the compiled path."""
        if self.compiled is None:
            return None
        return self.compiled.tfrecord_bytes()


class ChunkProcessor(object):
    """Turns chunks of raw documents into serialised pre-training examples."""

    def __init__(self, options, tokenizer=None, keep_first_instances=0,
                 bulk_tokenization=True, compiled=True):
        """`compiled=False` keeps Google's defaults on the Python path (the
        reference the compiled one is tested against)."""
        options.validate()
        self.options = options
        # Whole chunks are tokenized in the graph (`BulkTokenizer`, the same
        # tokens as `FullTokenizer`, several times faster) unless a tokenizer
        # is passed in or bulk_tokenization is False.
        self._use_bulk = tokenizer is None and bulk_tokenization
        self._bulk = None
        self.tokenizer = tokenizer or tokenization.FullTokenizer(
            options.vocab_file, options.do_lower_case)
        tokenization.check_vocab_special_tokens(self.tokenizer.vocab, options.vocab_file)
        self.vocab_words = list(self.tokenizer.vocab.keys())
        self.keep_first_instances = keep_first_instances
        # Records are written directly, the bytes `tf_example.serialize_example`
        # writes (see `example_encoder`); built on first use by the Python path.
        self._encoder = None
        self.masker = masking.Masker(options.masking_strategy(), options.masked_lm_prob,
                                     options.max_predictions_per_seq, self.vocab_words,
                                     options.replace_per_unit)
        # jieba is loaded once per process (the processor is built once per worker).
        self.segmenter = (masking.ChineseWordSegmenter()
                          if options.chinese_word_segmentation else None)
        # Google's defaults take the compiled path (decided on first use).
        self._compiled = None if compiled else False
        self._ascii = None
        self._vocab_word_ids = None

    def tokenize_documents(self, documents, stats):
        """Tokenizes raw documents; drops empty lines and empty documents."""
        return self.tokenize_documents_with_word_starts(documents, stats)[0]

    def tokenize_documents_with_word_starts(self, documents, stats):
        """Tokenizes raw documents, with word boundaries when segmenting.

        Returns:
          (all_documents, all_word_starts): documents as lists of sentences
          (lists of tokens); `all_word_starts` is None without word
          segmentation, else the same nesting with, per token, True where a
          (jieba) word begins.
        """
        texts = [[corpus_lib.decode_line(raw, document.path, lineno, stats)
                  for lineno, raw in document.lines] for document in documents]
        if self.segmenter is not None:
            tokenized = [[masking.tokenize_with_word_starts(self.tokenizer, text, self.segmenter)
                          for text in document_texts] for document_texts in texts]
        else:
            bulk = self._bulk_tokenizer()
            if bulk is not None:
                flat = bulk.tokenize([text for document_texts in texts for text in document_texts])
            else:
                flat = [self.tokenizer.tokenize(text)
                        for document_texts in texts for text in document_texts]
            flat = iter(flat)
            tokenized = [[(next(flat), None) for _ in document_texts] for document_texts in texts]
        return _keep_documents_with_tokens(documents, tokenized, stats,
                                           self.segmenter is not None)

    def _compiled_path(self):
        """Whether `process` takes the compiled path (`compiled_nsp`): Google's
        defaults (NSP pairs, per-WordPiece masking), this processor's own
        tokenizer, and a compiled generator that passed its self-check."""
        opts = self.options
        if self._compiled is None:
            self._compiled = bool(
                self._use_bulk and opts.resolved_masking() == "token"
                and opts.sentence_objective == "nsp" and not opts.chinese_word_segmentation
                and not opts.replace_per_unit and compiled_nsp.self_check())
        return self._compiled

    def _non_ascii_tokens(self, lines):
        """FullTokenizer's tokens of the lines the ASCII path does not take.

        Few lines (accented words in English text) go through `FullTokenizer`
        itself; many (a Chinese corpus) through the in-graph `BulkTokenizer`,
        which is worth importing TensorFlow for.
        """
        if len(lines) >= BULK_TOKENIZATION_MIN_LINES or "tensorflow" in sys.modules:
            return self._bulk_tokenizer().tokenize(lines)
        return [self.tokenizer.tokenize(line) for line in lines]

    def _finish_compiled(self, prepared):
        """`process` for Google's defaults: the same instances and bytes, compiled."""
        opts = self.options
        chunk_index, result = prepared.chunk_index, prepared.result
        token_ids, sent_offsets, doc_offsets = prepared.arrays
        result.num_documents = len(doc_offsets) - 1
        if not result.num_documents:
            return result
        vocab = self.tokenizer.vocab
        made = compiled_nsp.create_chunk_instances(
            chunk_rng(opts.random_seed, chunk_index), token_ids, sent_offsets, doc_offsets,
            opts.dupe_factor, opts.max_seq_length, opts.short_seq_prob, opts.masked_lm_prob,
            opts.max_predictions_per_seq, self._vocab_word_ids,
            vocab[tokenization.CLS_TOKEN], vocab[tokenization.SEP_TOKEN],
            vocab[tokenization.MASK_TOKEN])
        if made is None:
            # The compiled generator drifted from Python's (never seen): this
            # chunk, and the rest of the run, take the Python path.
            logging.warning("compiled instance creation disagrees with Python's random "
                            "generator here; using the Python path")
            self._compiled = False
            return self._process_python(chunk_index, prepared.documents)
        result.compiled = made
        result.examples = None  # read from `made` when asked for
        result.num_instances = len(made)
        result.num_tokens = int(made.lengths.sum())
        result.num_masked = int(made.masked_counts.sum())
        result.num_random_next = int(made.labels.sum())
        if chunk_index == 0:
            inv = self.tokenizer.inv_vocab
            for k in range(min(self.keep_first_instances, len(made))):
                n, m = int(made.lengths[k]), int(made.masked_counts[k])
                result.first_instances.append(TrainingInstance(
                    tokens=[inv[i] for i in made.input_ids[k, :n].tolist()],
                    segment_ids=made.segment_ids[k, :n].tolist(),
                    masked_lm_positions=made.masked_lm_positions[k, :m].tolist(),
                    masked_lm_labels=[inv[i] for i in made.masked_lm_ids[k, :m].tolist()],
                    is_random_next=bool(made.labels[k])))
        return result


    def __getstate__(self):
        # The in-graph tokenizer holds TensorFlow objects; a copy (pickled to
        # another process) builds its own on first use.
        state = self.__dict__.copy()
        state["_bulk"] = None
        state["_ascii"] = None
        return state

    def _bulk_tokenizer(self):
        """The in-graph `BulkTokenizer` (built on first use), or None.

        Used when this processor built its own `FullTokenizer` and
        `bulk_tokenization` is on; a tokenizer passed in is used as given,
        line by line.
        """
        if not self._use_bulk:
            return None
        if self._bulk is None:
            from data.tokenizers import wordpiece  # pylint: disable=g-import-not-at-top
            self._bulk = wordpiece.BulkTokenizer(self.tokenizer)
        return self._bulk

    def prepare(self, chunk_index, documents):
        """The first stage of `process`: on the compiled path, the chunk's token ids.

        `finish(prepare(i, docs))` is `process(i, docs)`. The writer runs
        `prepare` one chunk ahead in a thread, so that a chunk's tokenization
        overlaps the previous chunk's instances and writing (the compiled
        kernels of both stages release the GIL).
        """
        if not self._compiled_path():
            return _PreparedChunk(chunk_index, documents, None, None)
        if self._ascii is None:
            ascii_tokenizer = ascii_wordpiece.AsciiWordPiece(self.tokenizer,
                                                             fallback=self._non_ascii_tokens)
            vocab = self.tokenizer.vocab
            self._vocab_word_ids = np.array([vocab[w] for w in self.vocab_words], np.int32)
            self._ascii = ascii_tokenizer
        result = ChunkResult()
        decode = corpus_lib.decode_line
        stats = result.stats
        lines = [decode(raw, document.path, lineno, stats)
                 for document in documents for lineno, raw in document.lines]
        arrays = _flatten_documents(documents, *self._ascii.id_arrays(lines), stats)
        return _PreparedChunk(chunk_index, documents, result, arrays)

    def finish(self, prepared):
        """The second stage of `process` (see `prepare`): a `ChunkResult`."""
        if prepared.result is None or not self._compiled_path():
            return self._process_python(prepared.chunk_index, prepared.documents)
        return self._finish_compiled(prepared)

    def process(self, chunk_index, documents):
        return self.finish(self.prepare(chunk_index, documents))

    def _process_python(self, chunk_index, documents):
        opts = self.options
        result = ChunkResult()
        rng = chunk_rng(opts.random_seed, chunk_index)
        all_documents, all_word_starts = self.tokenize_documents_with_word_starts(
            documents, result.stats)
        result.num_documents = len(all_documents)
        if not all_documents:
            return result
        if all_word_starts is None:
            fast_random.shuffle(rng, all_documents)
        else:
            # The same random calls as shuffling the documents (a shuffle's
            # draws depend only on the length), applied to both lists.
            order = list(range(len(all_documents)))
            fast_random.shuffle(rng, order)
            all_documents = [all_documents[k] for k in order]
            all_word_starts = [all_word_starts[k] for k in order]
        instances = []
        for _ in range(opts.dupe_factor):
            for document_index in range(len(all_documents)):
                instances.extend(create_instances_from_document(
                    all_documents, document_index, opts.max_seq_length,
                    opts.short_seq_prob, opts.masked_lm_prob,
                    opts.max_predictions_per_seq, self.vocab_words, rng,
                    masker=self.masker, sentence_objective=opts.sentence_objective,
                    all_word_starts=all_word_starts))
        fast_random.shuffle(rng, instances)
        vocab = self.tokenizer.vocab
        # The bytes of serialize_example(*instance_to_features(instance, ...)).
        if self._encoder is None:
            self._encoder = example_encoder.PretrainingExampleEncoder(
                opts.max_seq_length, opts.max_predictions_per_seq,
                max(self.tokenizer.vocab.values()) + 1)
        serialize = self._encoder.serialize_instance
        token_id = vocab.__getitem__
        for instance in instances:
            result.examples.append(serialize(
                list(map(token_id, instance.tokens)), instance.segment_ids,
                instance.masked_lm_positions, list(map(token_id, instance.masked_lm_labels)),
                1 if instance.is_random_next else 0))
            result.num_tokens += len(instance.tokens)
            result.num_masked += len(instance.masked_lm_positions)
            result.num_random_next += int(instance.is_random_next)
        result.num_instances = len(instances)
        if chunk_index == 0:
            result.first_instances = instances[:self.keep_first_instances]
        return result


_PreparedChunk = collections.namedtuple(
    "_PreparedChunk", ["chunk_index", "documents", "result", "arrays"])


def _flatten_documents(documents, line_ids, lengths, stats):
    """`_keep_documents_with_tokens` for the compiled path, as arrays.

    `line_ids`, `lengths`: the token ids of every line of `documents`,
    concatenated in order, and how many each line has.
    Returns (token ids int32, sentence offsets, document offsets) of the
    non-empty lines of the documents that keep any (see
    `compiled_nsp.create_chunk_instances`); what was dropped is counted in
    `stats` with the same reasons and first locations.
    """
    lines_per_doc = np.fromiter((len(document.lines) for document in documents), np.int64,
                                count=len(documents))
    doc_of_line = np.repeat(np.arange(len(documents)), lines_per_doc)
    kept = lengths > 0
    sentences_per_doc = np.bincount(doc_of_line[kept], minlength=len(documents))
    if not kept.all():
        first_line = np.concatenate([[0], np.cumsum(lines_per_doc)[:-1]])
        for k in np.flatnonzero(~kept).tolist():
            document = documents[doc_of_line[k]]
            stats.add("lines without any token (only controls/whitespace)",
                      "%s:%d" % (document.path,
                                 document.lines[k - first_line[doc_of_line[k]]][0]))
    for d in np.flatnonzero(sentences_per_doc == 0).tolist():
        stats.add("documents without any token skipped",
                  "%s:%d" % (documents[d].path, documents[d].lines[0][0]))
    for d in np.flatnonzero(sentences_per_doc == 1).tolist():
        # Still used: segment B then always comes from another document.
        stats.add("one-sentence documents (only random-next pairs)",
                  "%s:%d" % (documents[d].path, documents[d].lines[0][0]))
    sentence_lengths = lengths[kept]
    sent_offsets = np.zeros(len(sentence_lengths) + 1, np.int64)
    np.cumsum(sentence_lengths, out=sent_offsets[1:])
    sentences_per_doc = sentences_per_doc[sentences_per_doc > 0]
    doc_offsets = np.zeros(len(sentences_per_doc) + 1, np.int64)
    np.cumsum(sentences_per_doc, out=doc_offsets[1:])
    token_ids = np.asarray(line_ids, np.int32)
    # Only lines and documents without any id are dropped, so every id stays.
    return token_ids, sent_offsets, doc_offsets


def _keep_documents_with_tokens(documents, tokenized, stats, with_word_starts):
    """Documents as lists of non-empty sentences; empty lines and documents counted.

    `tokenized`: per document, per line, (tokens, word starts or None).
    Returns (all_documents, all_word_starts or None).
    """
    all_documents = []
    all_word_starts = [] if with_word_starts else None
    for document, document_tokens in zip(documents, tokenized):
        sentences = []
        sentence_starts = []
        for (lineno, _), (tokens, starts) in zip(document.lines, document_tokens):
            if tokens:
                sentences.append(tokens)
                sentence_starts.append(starts)
            else:
                stats.add("lines without any token (only controls/whitespace)",
                          "%s:%d" % (document.path, lineno))
        if not sentences:
            stats.add("documents without any token skipped",
                      "%s:%d" % (document.path, document.lines[0][0]))
            continue
        if len(sentences) == 1:
            # Still used: segment B then always comes from another document.
            stats.add("one-sentence documents (only random-next pairs)",
                      "%s:%d" % (document.path, document.lines[0][0]))
        all_documents.append(sentences)
        if all_word_starts is not None:
            all_word_starts.append(sentence_starts)
    return all_documents, all_word_starts


# Worker-process state: one ChunkProcessor per process, built once.
_WORKER_PROCESSOR = None


def init_worker(options, keep_first_instances=0):
    global _WORKER_PROCESSOR
    _WORKER_PROCESSOR = ChunkProcessor(options, keep_first_instances=keep_first_instances)


def process_chunk_in_worker(chunk_index, documents):
    return _WORKER_PROCESSOR.process(chunk_index, documents)
