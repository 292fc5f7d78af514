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

What differs from Google's script is the plumbing around it (see `run`): the
corpus is processed in chunks of documents so memory stays bounded, chunks
are processed in parallel worker processes, and each chunk's random stream is
derived from (seed, chunk index) so the output does not depend on the number
of workers. The random "next" segment comes from another document of the same
chunk; with thousands of documents per chunk this changes nothing that
matters.

This module does not import TensorFlow (workers stay light); the writer in
`data/pretraining_writer.py` does.
"""

import collections
import random

from data import corpus as corpus_lib
from data import example_proto
from data import tokenization

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
    units = []
    for i, token in enumerate(tokens):
        if token == tokenization.CLS_TOKEN or token == tokenization.SEP_TOKEN:
            continue
        if do_whole_word_mask and units and token.startswith("##"):
            units[-1].append(i)
        else:
            units.append([i])
    return units


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                 vocab_words, rng, do_whole_word_mask=False):
    """Chooses and applies the masked-LM corruption of one instance.

    Returns:
      (output_tokens, masked_lm_positions, masked_lm_labels), positions sorted.
    """
    units = candidate_units(tokens, do_whole_word_mask)
    rng.shuffle(units)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms = []
    covered = set()
    for unit in units:
        if len(masked_lms) >= num_to_predict:
            break
        # A whole word that would overshoot the budget is skipped, not cut.
        if len(masked_lms) + len(unit) > num_to_predict:
            continue
        if any(index in covered for index in unit):
            continue
        for index in unit:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = tokenization.MASK_TOKEN
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
    masked_lms.sort(key=lambda m: m.index)
    return (output_tokens, [m.index for m in masked_lms], [m.label for m in masked_lms])


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates a pair in place to at most `max_num_tokens` tokens in total."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Cutting at the front or at the back at random adds noise that keeps
        # the model from relying on where sentences are cut.
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob,
                                   max_predictions_per_seq, vocab_words, rng,
                                   do_whole_word_mask=False):
    """Creates the NSP instances of one document (a list of tokenized sentences)."""
    document = all_documents[document_index]
    # Room for [CLS], [SEP], [SEP].
    max_num_tokens = max_seq_length - 3
    # Usually fill the whole sequence; sometimes aim shorter so that
    # pre-training also covers the short inputs of fine-tuning.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                # How many sentences of the chunk go into segment A.
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b = []
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
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # The sentences of this chunk that B did not use are put
                    # back, to become part of the next chunk.
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)

                tokens = ([tokenization.CLS_TOKEN] + tokens_a + [tokenization.SEP_TOKEN] +
                          tokens_b + [tokenization.SEP_TOKEN])
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, masked_lm_positions, masked_lm_labels = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                    do_whole_word_mask)
                instances.append(TrainingInstance(
                    tokens=tokens, segment_ids=segment_ids,
                    masked_lm_positions=masked_lm_positions,
                    masked_lm_labels=masked_lm_labels, is_random_next=is_random_next))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def instance_to_features(instance, vocab, max_seq_length, max_predictions_per_seq):
    """Pads an instance into Google's fixed-size feature lists.

    Returns:
      (int_features, float_features): dicts name -> list.
    """
    input_ids = tokenization.convert_tokens_to_ids(vocab, instance.tokens)
    if len(input_ids) > max_seq_length:
        raise ValueError("Instance of %d tokens exceeds max_seq_length=%d"
                         % (len(input_ids), max_seq_length))
    pad = max_seq_length - len(input_ids)
    input_mask = [1] * len(input_ids) + [0] * pad
    segment_ids = list(instance.segment_ids) + [0] * pad
    input_ids = input_ids + [0] * pad

    masked_lm_ids = tokenization.convert_tokens_to_ids(vocab, instance.masked_lm_labels)
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

class InstanceOptions(collections.namedtuple("InstanceOptions", [
        "vocab_file", "do_lower_case", "max_seq_length", "max_predictions_per_seq",
        "random_seed", "dupe_factor", "masked_lm_prob", "short_seq_prob",
        "do_whole_word_mask"])):
    """Everything a worker needs to turn a chunk of documents into examples."""

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


def chunk_rng(random_seed, chunk_index):
    """The random stream of one chunk: a function of the seed and chunk index only.

    Chunk 0 uses the seed itself, so a corpus that fits one chunk gets exactly
    the stream Google's script would use.
    """
    if chunk_index == 0:
        return random.Random(random_seed)
    return random.Random("%d/%d" % (random_seed, chunk_index))


class ChunkResult(object):
    """Serialised examples of one chunk plus its statistics."""

    def __init__(self):
        self.examples = []
        self.stats = corpus_lib.ReadStats()
        self.num_documents = 0
        self.num_instances = 0
        self.num_tokens = 0
        self.num_masked = 0
        self.num_random_next = 0
        self.first_instances = []


class ChunkProcessor(object):
    """Turns chunks of raw documents into serialised pre-training examples."""

    def __init__(self, options, tokenizer=None, keep_first_instances=0):
        options.validate()
        self.options = options
        self.tokenizer = tokenizer or tokenization.FullTokenizer(
            options.vocab_file, options.do_lower_case)
        tokenization.check_vocab_special_tokens(self.tokenizer.vocab, options.vocab_file)
        self.vocab_words = list(self.tokenizer.vocab.keys())
        self.keep_first_instances = keep_first_instances

    def tokenize_documents(self, documents, stats):
        """Tokenizes raw documents; drops empty lines and empty documents."""
        all_documents = []
        for document in documents:
            sentences = []
            for lineno, raw in document.lines:
                text = corpus_lib.decode_line(raw, document.path, lineno, stats)
                tokens = self.tokenizer.tokenize(text)
                if tokens:
                    sentences.append(tokens)
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
        return all_documents

    def process(self, chunk_index, documents):
        opts = self.options
        result = ChunkResult()
        rng = chunk_rng(opts.random_seed, chunk_index)
        all_documents = self.tokenize_documents(documents, result.stats)
        result.num_documents = len(all_documents)
        if not all_documents:
            return result
        rng.shuffle(all_documents)
        instances = []
        for _ in range(opts.dupe_factor):
            for document_index in range(len(all_documents)):
                instances.extend(create_instances_from_document(
                    all_documents, document_index, opts.max_seq_length,
                    opts.short_seq_prob, opts.masked_lm_prob,
                    opts.max_predictions_per_seq, self.vocab_words, rng,
                    opts.do_whole_word_mask))
        rng.shuffle(instances)
        vocab = self.tokenizer.vocab
        for instance in instances:
            int_features, float_features = instance_to_features(
                instance, vocab, opts.max_seq_length, opts.max_predictions_per_seq)
            result.examples.append(example_proto.serialize_example(
                int_features, float_features))
            result.num_tokens += len(instance.tokens)
            result.num_masked += len(instance.masked_lm_positions)
            result.num_random_next += int(instance.is_random_next)
        result.num_instances = len(instances)
        if chunk_index == 0:
            result.first_instances = instances[:self.keep_first_instances]
        return result


# Worker-process state: one ChunkProcessor per process, built once.
_WORKER_PROCESSOR = None


def init_worker(options, keep_first_instances=0):
    global _WORKER_PROCESSOR
    _WORKER_PROCESSOR = ChunkProcessor(options, keep_first_instances=keep_first_instances)


def process_chunk_in_worker(chunk_index, documents):
    return _WORKER_PROCESSOR.process(chunk_index, documents)
