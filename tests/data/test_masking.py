# coding=utf-8
"""Masking strategies and sentence objectives of static pre-training data.

Statistics over a few thousand instances, each checking a property that a
broken strategy would violate: Google's exact token masking, whole words
(WordPiece and jieba), the shared budget, SpanBERT's span lengths and
per-span corruption, ALBERT's n-gram distribution, sentence order
prediction, single segments, the writer and worker-count independence.
"""

import collections
import glob
import hashlib
import os
import pickle
import random
import sys

import jieba
import pytest
import tensorflow as tf

import script_runner
from data import corpus
from data.pretraining import masking
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer
from data import tokenization

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "sample")
SAMPLE_ZH = os.path.join(SAMPLE_DIR, "sample_zh.txt")
SPECIALS = ("[CLS]", "[SEP]")


def _options(vocab_file, **overrides):
    values = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=128,
                  max_predictions_per_seq=20, random_seed=12345, dupe_factor=2,
                  masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
    values.update(overrides)
    return pretraining_data.InstanceOptions(**values)


def _instance(rng, length, pieces=(1, 1, 1, 2, 3), balanced=False):
    """[CLS] A [SEP] B [SEP] of random words of 1-3 WordPiece tokens."""
    body = []
    while len(body) < length - 3:
        body.append("w%d" % rng.randrange(400))
        body.extend("##p%d" % rng.randrange(100) for _ in range(rng.choice(pieces) - 1))
    body = body[:length - 3]
    if balanced:
        cut = rng.randint(len(body) // 3, 2 * len(body) // 3)
    else:
        cut = rng.randint(1, len(body) - 1)
    if body[cut].startswith("##"):  # segment B starts with a word
        body[cut] = "w0"
    return ["[CLS]"] + body[:cut] + ["[SEP]"] + body[cut:] + ["[SEP]"]


# Random replacements drawn from words that never occur in `_instance`, so a
# replaced token is always recognisably different from the original.
REPLACEMENT_VOCAB = ["v%d" % i for i in range(300)]


def _outcome(original, output):
    if output == "[MASK]":
        return "mask"
    return "keep" if output == original else "random"


def _words_in(unit, word_start_positions):
    return sum(1 for p in unit if p in word_start_positions)


# --- Google's masking, unchanged ----------------------------------------------

def _google_masked_lm(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                      do_whole_word_mask):
    """Reference: google-research/bert's create_masked_lm_predictions, as it was."""
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in SPECIALS:
            continue
        if do_whole_word_mask and cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked = []
    covered = set()
    for index_set in cand_indexes:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked.append((index, tokens[index]))
    masked.sort()
    return output_tokens, [m[0] for m in masked], [m[1] for m in masked]


@pytest.mark.parametrize("whole_word", [False, True])
def test_token_and_whole_word_masking_match_google_exactly(whole_word):
    vocab_words = ["w%d" % i for i in range(400)] + ["##p%d" % i for i in range(100)]
    masker = masking.build_masker("whole_word" if whole_word else "token", 0.15, 20,
                                  vocab_words)
    data_rng = random.Random(3)
    for seed in range(1500):
        tokens = _instance(data_rng, data_rng.randint(6, 160))
        if data_rng.random() < 0.3:  # a continuation right after [SEP], as truncation leaves
            tokens[tokens.index("[SEP]") + 1] = "##p1"
        ours_rng, ref_rng = random.Random(seed), random.Random(seed)
        ours = masker(tokens, ours_rng)
        ref = _google_masked_lm(tokens, 0.15, 20, vocab_words, ref_rng, whole_word)
        assert (ours.tokens, ours.positions, ours.labels) == ref
        old_api = pretraining_data.create_masked_lm_predictions(
            tokens, 0.15, 20, vocab_words, random.Random(seed), whole_word)
        assert old_api == ref
        # The same number of random draws: the streams stay in step.
        assert ours_rng.random() == ref_rng.random()


def _chunk_digest(files, documents_per_chunk, options):
    processor = pretraining_data.ChunkProcessor(options)
    digest = hashlib.sha256()
    count = 0
    chunks = corpus.iter_document_chunks(files, documents_per_chunk)
    for index, chunk in enumerate(chunks):
        for example in processor.process(index, chunk).examples:
            digest.update(example)
            count += 1
    return count, digest.hexdigest()


def test_default_output_is_byte_identical_to_before(sample_corpus_files, sample_vocab_file,
                                                    english_uncased_vocab_file):
    # Digests of the serialised examples written before the masking registry
    # existed; the defaults (token masking, NSP) must reproduce them exactly.
    assert _chunk_digest(sample_corpus_files, 100000, _options(sample_vocab_file)) == (
        893, "4b5b9408080a9e428e930fbc2a8b9bfe5d97cb35e38f1b25f3d9eba0a59228dd")
    assert _chunk_digest(sample_corpus_files, 40, _options(
        sample_vocab_file, max_seq_length=48, dupe_factor=1)) == (
            482, "20c1356f572e7348d824320d1a2bd8974e9749581d4a93b63f88ae439e048493")
    assert _chunk_digest(sample_corpus_files, 100000, _options(
        english_uncased_vocab_file, do_whole_word_mask=True)) == (
            899, "fba8f05c588775be01fe08916a47c6545a05236ca820d7e4defc778e5b0f8c79")


# --- Shared budget and invariants ---------------------------------------------

@pytest.mark.parametrize("name", list(masking.MASKING_STRATEGIES))
def test_every_strategy_keeps_the_budget_and_the_invariants(name):
    masker = masking.build_masker(name, 0.15, 80, REPLACEMENT_VOCAB)
    capped = masking.build_masker(name, 0.15, 5, REPLACEMENT_VOCAB)
    rng = random.Random(17)
    masked = budget = tokens_total = 0
    multi_piece_words = 0
    for _ in range(800):
        tokens = _instance(rng, rng.randint(12, 256))
        result = masker(tokens, rng)
        expected = masking.num_to_predict(len(tokens), 0.15, 80)
        positions = result.positions
        assert len(positions) <= expected
        assert positions == sorted(set(positions))
        assert sorted(p for unit in result.units for p in unit) == positions
        assert result.labels == [tokens[p] for p in positions]
        assert not any(tokens[p] in SPECIALS for p in positions)
        chosen = set(positions)
        assert all(result.tokens[i] == tokens[i] for i in range(len(tokens)) if i not in chosen)
        if name != "token":
            # Whole words only: every word is masked entirely or not at all.
            for word in masking.word_units(tokens, split_at_special=True):
                hits = sum(p in chosen for p in word)
                assert hits in (0, len(word)), (name, tokens, word, positions)
                multi_piece_words += hits > 1
        masked += len(positions)
        budget += expected
        tokens_total += len(tokens)
        assert len(capped(tokens, rng).positions) <= 5
    assert masked == budget if name == "token" else masked >= 0.98 * budget
    assert abs(masked / tokens_total - 0.15) < 0.01
    if name != "token":
        assert multi_piece_words > 500


# --- Whole words: WordPiece and Chinese (jieba) ------------------------------------

def _jieba_word_ranges(tokenizer, text):
    """Token ranges of the jieba words of `text`, from jieba.lcut directly."""
    ranges = []
    position = 0
    for word in jieba.lcut(text):
        n = len(tokenizer.tokenize(word))
        if n:
            ranges.append((position, position + n))
            position += n
    return ranges


def _zh_sentences():
    with open(SAMPLE_ZH, encoding="utf-8") as f:
        return [line for line in f if line.strip()]


def test_word_starts_keep_the_tokens_and_follow_jieba(sample_vocab_file, chinese_vocab_file):
    segmenter = masking.ChineseWordSegmenter()
    tokenizer = tokenization.FullTokenizer(sample_vocab_file)
    for text in _zh_sentences():
        tokens, starts = masking.tokenize_with_word_starts(tokenizer, text, segmenter)
        assert tokens == tokenizer.tokenize(text)
        assert not any(t.startswith("##") for t in tokens)
        ranges = _jieba_word_ranges(tokenizer, text)
        assert ranges[-1][1] == len(tokens)
        assert [i for i, s in enumerate(starts) if s] == [b for b, _ in ranges]
    # Mixed scripts, compatibility ideographs, unknown characters, other vocab.
    tokenizer = tokenization.FullTokenizer(chinese_vocab_file)
    for text in ["iPhone手机和T恤，卡拉OK 3.5元 unaffable", "豈更車賈滑串句龜龜\t中华人民共和国",
                 "Ｆｕｌｌ-width 文字\u200b和\x00控制符", "", "   "]:
        tokens, starts = masking.tokenize_with_word_starts(tokenizer, text, segmenter)
        assert tokens == tokenizer.tokenize(text)
        assert len(starts) == len(tokens)
        assert all(s == (not t.startswith("##")) for t, s in zip(tokens, starts)
                   if not tokenization.is_cjk_char(t))
    _, starts = masking.tokenize_with_word_starts(tokenizer, "中华人民共和国成立了", segmenter)
    assert starts == [True] + [False] * 6 + [True, False, True]


@pytest.mark.parametrize("per_unit", [False, True])
def test_chinese_whole_word_masking_masks_jieba_words(sample_vocab_file, per_unit):
    segmenter = masking.ChineseWordSegmenter()
    tokenizer = tokenization.FullTokenizer(sample_vocab_file)
    vocab_words = list(tokenizer.vocab)
    masker = masking.build_masker("whole_word", 0.15, 20, vocab_words,
                                  replace_per_unit=per_unit)
    rng = random.Random(5)
    multi_char_units = 0
    outcomes = collections.Counter()
    for text in _zh_sentences() * 3:
        tokens, starts = masking.tokenize_with_word_starts(tokenizer, text, segmenter)
        words = set(jieba.lcut(text))
        ranges = {(b + 1, e + 1) for b, e in _jieba_word_ranges(tokenizer, text)}
        instance = ["[CLS]"] + tokens + ["[SEP]"]
        result = masker(instance, rng, [True] + starts + [True])
        for unit in result.units:
            assert (unit[0], unit[-1] + 1) in ranges
            assert "".join(instance[p] for p in unit) in words
            multi_char_units += len(unit) > 1
            if per_unit and len(unit) > 1:
                kinds = {_outcome(instance[p], result.tokens[p]) for p in unit}
                outcomes["mixed" if len(kinds) > 1 else "uniform"] += 1
    assert multi_char_units > 500
    if per_unit:
        # A random replacement can draw the original character (1 in 2577).
        assert outcomes["mixed"] <= 0.01 * outcomes["uniform"]
    # Without segmentation (Google's flag alone) every character is a word.
    assert masking.word_units(["[CLS]", "面", "包", "师", "[SEP]"]) == [[1], [2], [3]]


def test_writer_with_chinese_word_segmentation_masks_whole_jieba_words(
        tmp_path, sample_vocab_file):
    out = os.path.join(str(tmp_path), "zh.tfrecord")
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_pretraining_data.py"),
         "--input_file=%s" % SAMPLE_ZH, "--output_file=%s" % out,
         "--vocab_file=%s" % sample_vocab_file, "--masking=whole_word",
         "--chinese_word_segmentation", "--max_seq_length=64", "--max_predictions_per_seq=12",
         "--dupe_factor=3", "--log_examples=0"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr
    assert "masked tokens:" in result.stdout

    # Every jieba word of the corpus, as token boundaries in the token stream.
    tokenizer = tokenization.FullTokenizer(sample_vocab_file)
    stream = []
    boundaries = set()
    for text in _zh_sentences():
        base = len(stream)
        for begin, _ in _jieba_word_ranges(tokenizer, text):
            boundaries.add(base + begin)
        stream.extend(tokenizer.tokenize(text))
    boundaries.add(len(stream))
    joined = "\x01" + "\x01".join(stream) + "\x01"
    token_at_offset = {}
    offset = 0
    for index, token in enumerate(stream):
        token_at_offset[offset] = index
        offset += len(token) + 1

    def occurrences(segment):
        needle = "\x01" + "\x01".join(segment) + "\x01"
        found = joined.find(needle)
        while found >= 0:
            yield token_at_offset[found]
            found = joined.find(needle, found + 1)

    inv_vocab = {i: t for t, i in tokenizer.vocab.items()}
    instances = whole_words = 0
    for record in tf.data.TFRecordDataset(out):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        ids = list(feature["input_ids"].int64_list.value)
        length = sum(feature["input_mask"].int64_list.value)
        weights = feature["masked_lm_weights"].float_list.value
        k = int(sum(weights))
        positions = list(feature["masked_lm_positions"].int64_list.value)[:k]
        labels = list(feature["masked_lm_ids"].int64_list.value)[:k]
        tokens = [inv_vocab[i] for i in ids[:length]]
        for p, label in zip(positions, labels):
            tokens[p] = inv_vocab[label]
        assert not any(t.startswith("##") for t in tokens)
        sep = tokens.index("[SEP]")
        masked = set(positions)
        for first, last in ((1, sep), (sep + 1, length - 1)):
            segment = tokens[first:last]
            runs = []
            i = 0
            while i < len(segment):
                if first + i in masked:
                    j = i
                    while j < len(segment) and first + j in masked:
                        j += 1
                    runs.append((i, j))
                    i = j
                else:
                    i += 1
            # Some place of the corpus holds this segment with every masked
            # run made of whole jieba words (a run may only touch a word cut
            # by truncation at the segment's ends).
            assert any(
                all((begin == 0 or start + begin in boundaries)
                    and (end == len(segment) or start + end in boundaries)
                    for begin, end in runs)
                for start in occurrences(segment)), (segment, runs)
            whole_words += sum(1 for begin, end in runs if end - begin > 1)
        instances += 1
    assert instances > 300
    assert whole_words > 800


# --- SpanBERT spans ---------------------------------------------------------------

def test_span_length_distribution_is_spanberts():
    strategy = masking.create_masking_strategy("span")
    assert abs(strategy.mean_length() - 3.797) < 0.001  # truncated and renormalised
    assert max(strategy.lengths) == 10
    masker = masking.Masker(strategy, 0.15, 80, REPLACEMENT_VOCAB)
    rng = random.Random(23)
    all_lengths = []
    first_lengths = []
    for n in range(1800):
        # Long sequences (budget 38-77 tokens): the first span is never
        # limited by the budget or the room, so it shows the drawn length.
        length = 512 if n < 300 else 256
        tokens = _instance(rng, length, pieces=(1, 1, 1, 2), balanced=True)
        starts = {word[0] for word in masking.word_units(tokens, split_at_special=True)}
        result = masker(tokens, rng)
        lengths = [_words_in(unit, starts) for unit in result.units]
        first_lengths.append(lengths[0])
        if n < 300:
            all_lengths.extend(lengths)
    assert max(all_lengths) <= 10
    assert abs(sum(first_lengths) / len(first_lengths) - 3.8) < 0.15
    histogram = collections.Counter(first_lengths)
    assert abs(histogram[1] / len(first_lengths) - 0.224) < 0.03
    assert abs(histogram[10] / len(first_lengths) - 0.030) < 0.015
    # All spans of 512-token sequences, the last one of each shortened to
    # fit the budget.
    assert abs(sum(all_lengths) / len(all_lengths) - 3.8) < 0.3


@pytest.mark.parametrize("per_unit", [None, False])
def test_spans_are_whole_words_in_one_segment_with_per_span_corruption(per_unit):
    masker = masking.build_masker("span", 0.15, 40, REPLACEMENT_VOCAB,
                                  replace_per_unit=per_unit)
    rng = random.Random(29)
    outcomes = collections.Counter()
    mixed = spans = 0
    for _ in range(1500):
        tokens = _instance(rng, rng.randint(20, 200))
        starts = masking.wordpiece_word_starts(tokens)
        sep = tokens.index("[SEP]")
        result = masker(tokens, rng)
        for unit in result.units:
            assert unit == list(range(unit[0], unit[-1] + 1))  # contiguous
            assert unit[-1] < sep or unit[0] > sep  # one segment
            assert starts[unit[0]]  # starts at a word start ...
            after = unit[-1] + 1
            assert tokens[after] in SPECIALS or starts[after]  # ... ends at a word end
            kinds = {_outcome(tokens[p], result.tokens[p]) for p in unit}
            spans += 1
            if len(kinds) == 1:
                outcomes[kinds.pop()] += 1
            else:
                mixed += 1
    if per_unit is None:  # SpanBERT's default: one decision per span
        assert mixed == 0
        assert abs(outcomes["mask"] / spans - 0.8) < 0.02
        assert abs(outcomes["keep"] / spans - 0.1) < 0.015
        assert abs(outcomes["random"] / spans - 0.1) < 0.015
    else:
        assert mixed > 0.15 * spans


# --- ALBERT n-grams ----------------------------------------------------------------

def test_ngram_lengths_follow_one_over_n():
    masker = masking.build_masker("ngram", 0.15, 80, REPLACEMENT_VOCAB)
    assert masker.replace_per_unit is False  # ALBERT decides per word piece
    rng = random.Random(31)
    lengths = collections.Counter()
    mixed = 0
    for _ in range(300):
        tokens = _instance(rng, 512, pieces=(1, 1, 1, 2), balanced=True)
        starts = {word[0] for word in masking.word_units(tokens, split_at_special=True)}
        result = masker(tokens, rng)
        for unit in result.units:
            assert unit == list(range(unit[0], unit[-1] + 1))
            lengths[_words_in(unit, starts)] += 1
            mixed += len({_outcome(tokens[p], result.tokens[p]) for p in unit}) > 1
    total = sum(lengths.values())
    assert set(lengths) == {1, 2, 3}
    for n, expected in ((1, 6 / 11), (2, 3 / 11), (3, 2 / 11)):
        assert abs(lengths[n] / total - expected) < 0.03, (n, lengths)
    assert mixed > 100


def test_strategy_options_are_validated():
    with pytest.raises(ValueError, match="Unknown masking strategy"):
        masking.create_masking_strategy("bogus")
    with pytest.raises(ValueError, match="span_geometric_p"):
        masking.create_masking_strategy("span", geometric_p=0.0)
    with pytest.raises(ValueError, match="max_ngram"):
        masking.create_masking_strategy("ngram", max_ngram=0)
    # Options of other strategies are ignored.
    assert masking.create_masking_strategy("ngram", max_ngram=2, geometric_p=0.5).lengths == (1, 2)
    assert masking.create_masking_strategy("span", max_span_length=1).lengths == (1,)


# --- Sentence objectives --------------------------------------------------------------

def _traceable_documents(rng, num_docs):
    """Documents whose every token names its document and position."""
    documents = []
    for d in range(num_docs):
        num_sentences = 1 if d % 7 == 0 else rng.randint(2, 40)
        position = 0
        document = []
        for _ in range(num_sentences):
            n = rng.randint(1, 14) if d % 11 else rng.randint(40, 90)  # some very long
            document.append(["d%d_%d" % (d, position + k) for k in range(n)])
            position += n
        documents.append(document)
    return documents


def _trace(token):
    doc, position = token[1:].split("_")
    return int(doc), int(position)


def _restored(instance):
    tokens = list(instance.tokens)
    for p, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
        tokens[p] = label
    return tokens


@pytest.mark.parametrize("max_seq_length", [24, 64])
def test_sop_pairs_are_consecutive_segments_of_one_document(max_seq_length):
    rng = random.Random(37)
    documents = _traceable_documents(rng, 60)
    vocab = sorted({t for doc in documents for s in doc for t in s})
    labels = []
    single_sentence_documents = 0
    for index in list(range(len(documents))) * 4:
        instances = pretraining_data.create_instances_from_document(
            documents, index, max_seq_length, 0.1, 0.15, 10, vocab, rng,
            sentence_objective="sop")
        single_sentence_documents += len(documents[index]) == 1 and len(instances) > 0
        for instance in instances:
            tokens = _restored(instance)
            assert len(tokens) <= max_seq_length
            assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
            sep = tokens.index("[SEP]")
            assert instance.segment_ids == [0] * (sep + 1) + [1] * (len(tokens) - sep - 1)
            a = [_trace(t) for t in tokens[1:sep]]
            b = [_trace(t) for t in tokens[sep + 1:-1]]
            assert a and b
            assert {d for d, _ in a + b} == {index}  # never another document
            first, second = (b, a) if instance.is_random_next else (a, b)
            positions = [p for _, p in first + second]
            # Original order when label 0, swapped when 1: consecutive text.
            assert positions == list(range(positions[0], positions[0] + len(positions)))
            labels.append(instance.is_random_next)
    assert len(labels) > 800
    assert abs(sum(labels) / len(labels) - 0.5) < 0.04
    assert single_sentence_documents > 0  # split inside the sentence, not skipped


def test_single_segments_pack_consecutive_sentences():
    rng = random.Random(41)
    documents = _traceable_documents(rng, 60)
    vocab = sorted({t for doc in documents for s in doc for t in s})
    max_seq_length = 48
    count = 0
    for index in range(len(documents)):
        instances = pretraining_data.create_instances_from_document(
            documents, index, max_seq_length, 0.0, 0.15, 10, vocab, rng,
            sentence_objective="none")
        covered = []
        for instance in instances:
            tokens = _restored(instance)
            assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
            assert tokens.count("[SEP]") == 1 and len(tokens) <= max_seq_length
            assert instance.segment_ids == [0] * len(tokens)
            assert not instance.is_random_next
            covered.extend(tokens[1:-1])
            count += 1
        # Every token of the document, once, in order: nothing lost or repeated.
        assert covered == [t for sentence in documents[index] for t in sentence]
        # Packed: an instance ends only when the next sentence does not fit
        # (short_seq_prob=0: the target is a full sequence).
        sentence_bounds = [0]
        for sentence in documents[index]:
            sentence_bounds.append(sentence_bounds[-1] + len(sentence))
        end = 0
        for instance in instances[:-1]:
            end += len(instance.tokens) - 2
            if end in sentence_bounds:
                k = sentence_bounds.index(end)
                next_length = sentence_bounds[k + 1] - sentence_bounds[k]
                assert len(instance.tokens) - 2 + next_length > max_seq_length - 2
            else:  # a piece of a sentence longer than a sequence
                assert len(instance.tokens) == max_seq_length
    assert count > 200


def test_objectives_and_masking_through_the_chunk_processor(sample_vocab_file):
    documents = list(corpus.iter_documents([SAMPLE_ZH]))
    for objective in pretraining_data.SENTENCE_OBJECTIVES:
        options = _options(sample_vocab_file, sentence_objective=objective, masking="span",
                           chinese_word_segmentation=True, dupe_factor=1)
        result = pretraining_data.ChunkProcessor(
            options, keep_first_instances=1000).process(0, documents)
        assert result.num_instances == len(result.examples) > 50
        labels = [i.is_random_next for i in result.first_instances]
        if objective == "none":
            assert not any(labels)
            assert all(set(i.segment_ids) == {0} for i in result.first_instances)
        elif objective == "contiguous":  # UNILM's source -> target: never swapped
            assert not any(labels)
            assert all(set(i.segment_ids) == {0, 1} for i in result.first_instances)
        else:
            assert 0.35 < sum(labels) / len(labels) < 0.65
        assert abs(result.num_masked / result.num_tokens - 0.15) < 0.015


# --- Options, script, workers ---------------------------------------------------------

def test_instance_options_defaults_compatibility_and_validation(sample_vocab_file):
    legacy = pretraining_data.InstanceOptions(
        sample_vocab_file, True, 128, 20, 12345, 2, 0.15, 0.1, False)
    assert legacy.masking == "token" and legacy.sentence_objective == "nsp"
    assert legacy.chinese_word_segmentation is False and legacy.replace_per_unit is None
    assert (legacy.span_geometric_p, legacy.max_span_length, legacy.max_ngram) == (0.2, 10, 3)
    assert pickle.loads(pickle.dumps(legacy)) == legacy
    legacy.validate()
    assert legacy._replace(do_whole_word_mask=True).resolved_masking() == "whole_word"
    span = legacy._replace(masking="span", max_span_length=4)
    assert span.masking_strategy().lengths == (1, 2, 3, 4)
    for bad, message in ((dict(masking="bogus"), "Unknown masking"),
                         (dict(sentence_objective="bogus"), "Unknown sentence_objective"),
                         (dict(masking="span", do_whole_word_mask=True), "do_whole_word_mask"),
                         (dict(chinese_word_segmentation=True), "no effect"),
                         (dict(masking="span", span_geometric_p=1.5), "span_geometric_p"),
                         (dict(replace_per_unit="yes"), "replace_per_unit")):
        with pytest.raises(ValueError, match=message):
            legacy._replace(**bad).validate()
    legacy._replace(do_whole_word_mask=True, chinese_word_segmentation=True).validate()


def _read_records(pattern):
    records = []
    for path in sorted(glob.glob(pattern)):
        records.extend(r.numpy() for r in tf.data.TFRecordDataset(path))
    return records


@pytest.mark.parametrize("overrides", [
    dict(masking="whole_word", chinese_word_segmentation=True, sentence_objective="sop"),
    dict(masking="span", sentence_objective="none"),
    dict(masking="ngram", replace_per_unit=True, chinese_word_segmentation=True),
], ids=["wwm-zh-sop", "span-none", "ngram-nsp"])
def test_same_output_for_one_and_two_workers(tmp_path, sample_corpus_files,
                                             sample_vocab_file, overrides):
    options = _options(sample_vocab_file, max_seq_length=48, dupe_factor=1, **overrides)
    outputs = {}
    for workers in (1, 2):
        paths = [os.path.join(str(tmp_path), "w%d_%d.tfrecord" % (workers, k))
                 for k in range(2)]
        pretraining_writer.create_pretraining_data(
            sample_corpus_files, paths, options, num_workers=workers,
            documents_per_chunk=60)
        outputs[workers] = [_read_records(p) for p in paths]
    assert outputs[1] == outputs[2]
    assert sum(len(r) for r in outputs[1]) > 300
    default = os.path.join(str(tmp_path), "default.tfrecord")
    pretraining_writer.create_pretraining_data(
        sample_corpus_files, [default], _options(sample_vocab_file, max_seq_length=48,
                                                 dupe_factor=1), documents_per_chunk=60)
    assert _read_records(default) != outputs[1][0] + outputs[1][1]
