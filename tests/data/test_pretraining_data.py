# coding=utf-8
"""Pre-training instances: masking statistics, NSP, truncation, writer, bad input."""

import collections
import glob
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import corpus
from data import input_pipeline
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer
from data import tf_example
from data import tfrecord_writer
from data import tokenization

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _options(vocab_file, **overrides):
    values = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=128,
                  max_predictions_per_seq=20, random_seed=12345, dupe_factor=2,
                  masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
    values.update(overrides)
    return pretraining_data.InstanceOptions(**values)


def _write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return str(path)


# --- Masking ------------------------------------------------------------------

def _random_instance_tokens(rng, vocab_words, length):
    body = [rng.choice(vocab_words) for _ in range(length - 3)]
    cut = rng.randint(1, len(body) - 1)
    return ["[CLS]"] + body[:cut] + ["[SEP]"] + body[cut:] + ["[SEP]"]


def test_masking_statistics_token_level():
    vocab_words = ["w%d" % i for i in range(500)] + ["##p%d" % i for i in range(100)]
    rng = random.Random(7)
    counts = collections.Counter()
    total_predictions = 0
    for _ in range(3000):
        length = rng.randint(8, 128)
        tokens = _random_instance_tokens(rng, vocab_words, length)
        output, positions, labels = pretraining_data.create_masked_lm_predictions(
            tokens, 0.15, 20, vocab_words, rng)
        expected = min(20, max(1, int(round(length * 0.15))))
        assert len(positions) == expected
        assert positions == sorted(positions)
        assert len(set(positions)) == len(positions)
        for pos, label in zip(positions, labels):
            assert tokens[pos] not in ("[CLS]", "[SEP]")
            assert label == tokens[pos]
            if output[pos] == "[MASK]":
                counts["mask"] += 1
            elif output[pos] == tokens[pos]:
                counts["keep"] += 1
            else:
                counts["random"] += 1
        # Positions that were not chosen are untouched.
        untouched = set(range(len(tokens))) - set(positions)
        assert all(output[i] == tokens[i] for i in untouched)
        total_predictions += len(positions)
    # 80/10/10; a random replacement can draw the same token (1/600), counted as keep.
    assert abs(counts["mask"] / total_predictions - 0.8) < 0.015
    assert abs(counts["keep"] / total_predictions - 0.1) < 0.012
    assert abs(counts["random"] / total_predictions - 0.1) < 0.012


def test_whole_word_masking_never_splits_a_word():
    vocab_words = ["w%d" % i for i in range(300)] + ["##p%d" % i for i in range(300)]
    rng = random.Random(11)
    masked_continuations = 0
    for _ in range(1000):
        tokens = _random_instance_tokens(rng, vocab_words, rng.randint(10, 128))
        # Make the first token of each segment a word start.
        tokens = [t if not (t.startswith("##") and tokens[i - 1] in ("[CLS]", "[SEP]"))
                  else "w0" for i, t in enumerate(tokens)]
        _, positions, _ = pretraining_data.create_masked_lm_predictions(
            tokens, 0.15, 20, vocab_words, rng, do_whole_word_mask=True)
        masked = set(positions)
        assert len(positions) <= min(20, max(1, int(round(len(tokens) * 0.15))))
        for unit in pretraining_data.candidate_units(tokens, True):
            chosen = [i in masked for i in unit]
            assert all(chosen) or not any(chosen), (tokens, unit, positions)
            if all(chosen) and len(unit) > 1:
                masked_continuations += 1
    assert masked_continuations > 100  # multi-piece words really got masked


def test_truncate_seq_pair():
    rng = random.Random(3)
    for _ in range(200):
        a = list(range(rng.randint(1, 100)))
        b = list(range(1000, 1000 + rng.randint(1, 100)))
        a0, b0 = list(a), list(b)
        pretraining_data.truncate_seq_pair(a, b, 50, rng)
        assert len(a) + len(b) <= 50 or (a == a0 and b == b0)
        assert len(a) >= 1 and len(b) >= 1
        # Truncation removes from the ends only: what remains is contiguous.
        assert a == a0[a0.index(a[0]):a0.index(a[0]) + len(a)]
        assert b == b0[b0.index(b[0]):b0.index(b[0]) + len(b)]
        if len(a0) + len(b0) > 50:
            assert len(a) + len(b) == 50


def _truncate_seq_pair_one_by_one(tokens_a, tokens_b, max_num_tokens, rng,
                                  side_a=None, side_b=None):
    """The former (quadratic) truncation, kept here as the reference."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            trunc_tokens, trunc_side = tokens_a, side_a
        else:
            trunc_tokens, trunc_side = tokens_b, side_b
        index = 0 if rng.random() < 0.5 else len(trunc_tokens) - 1
        del trunc_tokens[index]
        if trunc_side is not None:
            del trunc_side[index]


class _CountingRandom(random.Random):
    def __init__(self, seed):
        super().__init__(seed)
        self.calls = 0

    def random(self):
        self.calls += 1
        return super().random()


class _CountingList(list):
    """A list counting the item deletions made on it."""

    def __init__(self, values):
        super().__init__(values)
        self.deletions = 0

    def __delitem__(self, index):
        self.deletions += 1
        super().__delitem__(index)


def test_truncate_seq_pair_matches_one_by_one_truncation():
    cases = random.Random(17)
    for case in range(600):
        len_a = cases.randint(0, 60)
        len_b = cases.randint(0, 60)
        if case % 7 == 0:
            len_a = cases.randint(100, 300)  # far over budget
        budget = cases.randint(0, 90)
        with_sides = case % 2 == 0
        a = ["a%d" % k for k in range(len_a)]
        b = ["b%d" % k for k in range(len_b)]
        side_a = [cases.random() < 0.5 for _ in a] if with_sides else None
        side_b = [cases.random() < 0.5 for _ in b] if with_sides else None
        seed = cases.random()
        ref = (list(a), list(b), list(side_a) if with_sides else None,
               list(side_b) if with_sides else None)
        ref_rng = random.Random(seed)
        _truncate_seq_pair_one_by_one(ref[0], ref[1], budget, ref_rng, ref[2], ref[3])
        rng = random.Random(seed)
        a, b = _CountingList(a), _CountingList(b)
        pretraining_data.truncate_seq_pair(a, b, budget, rng, side_a, side_b)
        assert (a, b, side_a, side_b) == ref, case
        assert a.deletions <= 2 and b.deletions <= 2, case  # one cut per end, not per token
        # Exactly the same random calls: the streams are still in step.
        assert rng.getstate() == ref_rng.getstate(), case


def test_truncate_seq_pair_is_linear_on_a_long_pair():
    # 200k tokens: one-by-one deletion from the front moves the whole list
    # each time (quadratic); the truncation must cut each list in one go.
    a = _CountingList(range(150000))
    b = _CountingList(range(1000000, 1050000))
    side_a = _CountingList([True] * len(a))
    rng = _CountingRandom(5)
    pretraining_data.truncate_seq_pair(a, b, 125, rng, side_a, None)
    assert len(a) + len(b) == 125 and len(side_a) == len(a)
    assert rng.calls == 200000 - 125  # one random call per token removed
    assert a.deletions <= 2 and b.deletions <= 2 and side_a.deletions <= 2
    assert list(a) == list(range(a[0], a[0] + len(a)))
    assert list(b) == list(range(b[0], b[0] + len(b)))


def _numbered_documents(num_docs, sentences_per_doc, words_per_sentence):
    """Documents whose tokens encode (doc, sentence) so pairs can be traced."""
    return [[["d%ds%d" % (d, s)] * words_per_sentence for s in range(sentences_per_doc)]
            for d in range(num_docs)]


def test_nsp_pairs_are_real_continuations_or_from_another_document():
    documents = _numbered_documents(30, 60, 6)
    vocab_words = sorted({t for doc in documents for sent in doc for t in sent})
    rng = random.Random(5)
    labels = []
    for index in range(len(documents)):
        for instance in pretraining_data.create_instances_from_document(
                documents, index, 32, 0.0, 0.15, 5, vocab_words, rng):
            assert len(instance.tokens) <= 32
            sep = instance.tokens.index("[SEP]")
            assert instance.segment_ids == [0] * (sep + 1) + [1] * (len(instance.tokens) - sep - 1)
            assert instance.tokens[0] == "[CLS]" and instance.tokens[-1] == "[SEP]"
            # Undo the masking to read the sentence ids.
            original = list(instance.tokens)
            for pos, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
                original[pos] = label
            a_docs = {t.split("s")[0] for t in original[1:sep]}
            b_docs = {t.split("s")[0] for t in original[sep + 1:-1]}
            assert a_docs == {"d%d" % index}
            if instance.is_random_next:
                assert "d%d" % index not in b_docs
            else:
                assert b_docs == {"d%d" % index}
                last_a = int(original[sep - 1].split("s")[1])
                first_b = int(original[sep + 1].split("s")[1])
                assert first_b == last_a + 1 or first_b == last_a  # (truncation may cut)
            labels.append(instance.is_random_next)
    # A fair coin, except that a chunk of a single sentence must take a random
    # next: with long documents (and no short targets) that is rare.
    assert len(labels) > 400
    assert abs(np.mean(labels) - 0.5) < 0.06


def test_single_sentence_documents_use_random_next():
    documents = [[["a%d" % d] * 5] for d in range(10)]
    rng = random.Random(1)
    instances = pretraining_data.create_instances_from_document(
        documents, 0, 64, 0.0, 0.15, 5, ["x"], rng)
    assert len(instances) == 1 and instances[0].is_random_next


# --- Example serialisation ----------------------------------------------------

def test_serialized_examples_are_deterministic_tf_examples():
    int_features = {"input_ids": [101, 0, 7, 2 ** 40, -3], "next_sentence_labels": [1],
                    "empty": []}
    float_features = {"masked_lm_weights": [1.0, 0.5, 0.0, -2.25]}
    bytes_features = {"raw": [b"abc", b""]}
    ours = tf_example.serialize_example(int_features, float_features, bytes_features)
    feature = {}
    for name, values in int_features.items():
        feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    for name, values in float_features.items():
        feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    for name, values in bytes_features.items():
        feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    reference = tf.train.Example(features=tf.train.Features(feature=feature))
    assert tf.train.Example.FromString(ours) == reference
    assert ours == reference.SerializeToString(deterministic=True)
    # The bytes do not depend on the order the features were given in.
    reversed_ints = dict(reversed(list(int_features.items())))
    assert tf_example.serialize_example(reversed_ints, float_features, bytes_features) == ours
    with pytest.raises(ValueError, match="'raw' is given twice"):
        tf_example.serialize_example({"raw": [1]}, None, bytes_features)


def test_example_encoder_writes_serialize_examples_bytes():
    from data.pretraining import example_encoder
    rng = random.Random(3)
    for max_seq_length, vocab_size in ((128, 30522), (512, 100), (16, 70000)):
        encoder = example_encoder.PretrainingExampleEncoder(max_seq_length, 20, vocab_size)
        generic = example_encoder.ExampleEncoder(pretraining_data.PRETRAINING_INT_FEATURES,
                                                 pretraining_data.PRETRAINING_FLOAT_FEATURES,
                                                 vocab_size)
        vocab = {i: i for i in range(vocab_size)}
        for _ in range(300):
            n = rng.randint(3, max_seq_length)
            ids = [rng.randrange(vocab_size) for _ in range(n)]
            positions = sorted(rng.sample(range(n), rng.randint(0, min(n, 20))))
            instance = pretraining_data.TrainingInstance(
                ids, [rng.randint(0, 1) for _ in range(n)], positions,
                [rng.randrange(vocab_size) for _ in positions], rng.random() < 0.5)
            int_features, float_features = pretraining_data.instance_to_features(
                instance, vocab, max_seq_length, 20)
            expected = tf_example.serialize_example(int_features, float_features)
            assert generic.serialize(int_features, float_features) == expected
            assert encoder.serialize_instance(
                ids, instance.segment_ids, positions, instance.masked_lm_labels,
                int(instance.is_random_next)) == expected
    # Values the tables do not cover: negative, huge, empty lists, odd floats.
    int_features = {name: [] for name in pretraining_data.PRETRAINING_INT_FEATURES}
    int_features.update(input_ids=[-3, 2 ** 40, 5], masked_lm_ids=[300, 2 ** 62])
    float_features = {"masked_lm_weights": [0.5, -2.25, 1e30]}
    assert generic.serialize(int_features, float_features) == tf_example.serialize_example(
        int_features, float_features)
    with pytest.raises(ValueError, match="exceeds max_seq_length"):
        encoder.serialize_instance([1] * 17, [0] * 17, [], [], 0)


def test_fast_shuffle_makes_pythons_draws():
    from data.pretraining import fast_random
    for seed in list(range(200)) + ["12345/3", 2 ** 70]:
        for n in (0, 1, 2, 3, 4, 31, 32, 33, 64, 65, 100, 125, 126, 128, 129, 1000):
            expected, reference = list(range(n)), random.Random(seed)
            reference.shuffle(expected)
            got, ours = list(range(n)), random.Random(seed)
            fast_random.shuffle(ours, got)
            assert got == expected, (seed, n)
            # The generator is left exactly where random.shuffle leaves it.
            assert ours.getstate() == reference.getstate(), (seed, n)
    # Anything but a random.Random is asked to shuffle itself.

    class Recorder(random.Random):
        calls = 0

        def shuffle(self, x):
            Recorder.calls += 1
            super().shuffle(x)

    fast_random.shuffle(Recorder(1), [1, 2, 3])
    assert Recorder.calls == 1


def _chunk_documents(tmp_path, texts):
    path = _write(tmp_path / "chunk.txt", "\n\n".join(texts) + "\n")
    return list(corpus.iter_documents([path]))


def test_bulk_tokenization_gives_the_line_by_line_examples(
        tmp_path, sample_corpus_files, english_uncased_vocab_file, chinese_vocab_file):
    """Chunks tokenized in the graph give exactly the examples of FullTokenizer
    line by line: English, Chinese, long lines, odd characters."""
    texts = []
    for path in sample_corpus_files:
        with open(path, encoding="utf-8") as f:
            texts.extend(block.strip() for block in f.read().split("\n\n") if block.strip())
    texts.append("\n".join([" ".join("word%d" % i for i in range(600)),
                             "x" * 250 + " and a very long word", "我" * 700,
                             "naïve café\tΣίσυφος ΟΔΟΣ \u200b zero\u00a0width",
                             "\x07\x1f"]))
    texts.append("a single line document with U+13439 \U00013439 in it")
    documents = _chunk_documents(tmp_path, texts)
    for vocab_file in (english_uncased_vocab_file, chinese_vocab_file):
        for masking_name in ("token", "whole_word"):
            options = _options(vocab_file, max_seq_length=64, max_predictions_per_seq=10,
                               masking=masking_name)
            bulk = pretraining_data.ChunkProcessor(options).process(3, documents)
            python = pretraining_data.ChunkProcessor(
                options, bulk_tokenization=False).process(3, documents)
            assert bulk.num_instances == python.num_instances > 100
            assert bulk.examples == python.examples
            assert bulk.stats.counts == python.stats.counts


# --- Writer: round trip, determinism, workers -----------------------------------

def _read_records(pattern):
    records = []
    for path in sorted(glob.glob(pattern)):
        records.extend(r.numpy() for r in tf.data.TFRecordDataset(path))
    return records


def test_round_trip_on_sample_corpus(tmp_path, sample_corpus_files, sample_vocab_file):
    out = os.path.join(str(tmp_path), "pt.tfrecord")
    options = _options(sample_vocab_file, max_seq_length=64, max_predictions_per_seq=10,
                       dupe_factor=3)
    summary = pretraining_writer.create_pretraining_data(
        sample_corpus_files, [out], options, documents_per_chunk=100000)
    assert summary.documents > 250
    assert os.listdir(str(tmp_path)) == ["pt.tfrecord"]  # no temp file left

    tokenizer = tokenization.FullTokenizer(sample_vocab_file)
    vocab = tokenizer.vocab
    dataset = input_pipeline.pretraining_dataset(out, 64, 10, batch_size=32,
                                                 is_training=False, drop_remainder=False)
    n = 0
    masked = 0
    tokens = 0
    for batch in dataset:
        assert batch["input_ids"].dtype == tf.int32
        assert batch["masked_lm_weights"].dtype == tf.float32
        assert batch["input_ids"].shape[1] == 64 and batch["masked_lm_ids"].shape[1] == 10
        ids = batch["input_ids"].numpy()
        mask = batch["input_mask"].numpy()
        seg = batch["segment_ids"].numpy()
        pos = batch["masked_lm_positions"].numpy()
        weights = batch["masked_lm_weights"].numpy()
        for i in range(ids.shape[0]):
            length = int(mask[i].sum())
            assert mask[i, :length].all() and not mask[i, length:].any()
            assert ids[i, 0] == vocab["[CLS]"] and ids[i, length - 1] == vocab["[SEP]"]
            assert (ids[i, :length] == vocab["[SEP]"]).sum() == 2
            assert not ids[i, length:].any() and not seg[i, length:].any()
            k = int(weights[i].sum())
            assert (weights[i, :k] == 1).all() and not weights[i, k:].any()
            assert 1 <= k <= 10 and (pos[i, :k] < length).all() and (pos[i, :k] > 0).all()
            assert k == min(10, max(1, int(round(length * 0.15))))
            masked += k
            tokens += length
            n += 1
    assert n == summary.instances
    assert masked == summary.masked_tokens and tokens == summary.tokens
    assert abs(masked / tokens - 0.15) < 0.01


def test_same_output_for_any_worker_count_and_seed_matters(
        tmp_path, sample_corpus_files, sample_vocab_file):
    options = _options(sample_vocab_file, max_seq_length=48, dupe_factor=1)
    outputs = {}
    for workers in (1, 2):
        paths = [os.path.join(str(tmp_path), "w%d_%d.tfrecord" % (workers, k)) for k in range(3)]
        pretraining_writer.create_pretraining_data(
            sample_corpus_files, paths, options, num_workers=workers,
            documents_per_chunk=40)
        outputs[workers] = [_read_records(p) for p in paths]
    assert outputs[1] == outputs[2]
    sizes = [len(records) for records in outputs[1]]
    assert max(sizes) - min(sizes) <= 1  # round-robin over the output files
    other = os.path.join(str(tmp_path), "seed.tfrecord")
    pretraining_writer.create_pretraining_data(
        sample_corpus_files, [other], options._replace(random_seed=1),
        documents_per_chunk=40)
    assert _read_records(other) != [r for rs in outputs[1] for r in rs]
    again = os.path.join(str(tmp_path), "again.tfrecord")
    pretraining_writer.create_pretraining_data(
        sample_corpus_files, [again], options, documents_per_chunk=40)
    first = [r for i in range(max(sizes)) for rs in outputs[1] if i < len(rs) for r in [rs[i]]]
    assert _read_records(again) == first


# --- Bad input --------------------------------------------------------------------

def test_bad_lines_are_repaired_or_skipped_and_reported(tmp_path, sample_vocab_file):
    path = os.path.join(str(tmp_path), "messy.txt")
    content = (b"The baker opens the shop at six.\n"
               b"She bakes bread \xff\xfe every morning.\n"   # line 2: invalid UTF-8
               b"\n\n\n"                                     # empty documents
               b"\x07\x7f\x1b\n"                             # line 6: only controls
               b"The farmer opens the gate.\n"               # one-sentence document
               b"\n"
               + b"x" * 5000 + b"\n"                         # line 9: too long
               b"The river runs to the sea.\nFish swim in the river.\n")
    _write(path, content, "wb")
    out = os.path.join(str(tmp_path), "out.tfrecord")
    summary = pretraining_writer.create_pretraining_data(
        [path], [out], _options(sample_vocab_file, dupe_factor=1), max_line_bytes=1000)
    report = summary.describe()
    assert "invalid UTF-8" in report and "messy.txt:2" in report
    assert "without any token" in report and "messy.txt:6" in report
    assert "over 1000 bytes" in report and "messy.txt:9" in report
    assert "one-sentence" in report
    assert summary.documents == 3
    assert summary.stats.counts["lines over 1000 bytes skipped"] == 1
    assert len(_read_records(out)) == summary.instances > 0


def test_missing_and_empty_inputs(tmp_path, sample_vocab_file):
    with pytest.raises(corpus.CorpusError, match="nothing_here"):
        corpus.expand_file_patterns(os.path.join(str(tmp_path), "nothing_here*.txt"))
    empty = _write(os.path.join(str(tmp_path), "empty.txt"), "")
    blank = _write(os.path.join(str(tmp_path), "blank.txt"), "\n\n \n")
    out = os.path.join(str(tmp_path), "out.tfrecord")
    with pytest.raises(corpus.CorpusError, match="empty.txt"):
        pretraining_writer.create_pretraining_data(
            [empty, blank], [out], _options(sample_vocab_file))
    assert not os.path.exists(out)
    assert not [f for f in os.listdir(str(tmp_path)) if ".tmp-" in f]


def test_vocab_without_special_tokens_is_refused_before_writing(tmp_path, sample_corpus_files):
    vocab = _write(os.path.join(str(tmp_path), "bad_vocab.txt"),
                   "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    out = os.path.join(str(tmp_path), "out.tfrecord")
    _write(out, "precious")
    with pytest.raises(tokenization.VocabError, match=r"bad_vocab\.txt.*\[MASK\]"):
        pretraining_writer.create_pretraining_data(
            sample_corpus_files, [out], _options(vocab))
    with open(out) as f:
        assert f.read() == "precious"  # an existing output is never half-overwritten


def test_failure_midway_leaves_previous_output_intact(tmp_path, sample_vocab_file):
    good = _write(os.path.join(str(tmp_path), "good.txt"), "The baker opens the shop.\n")
    out = os.path.join(str(tmp_path), "out.tfrecord")
    _write(out, "previous run")
    # The second file disappears between globbing and reading.
    missing = os.path.join(str(tmp_path), "gone.txt")
    with pytest.raises(corpus.CorpusError, match="gone.txt"):
        pretraining_writer.create_pretraining_data(
            [good, missing], [out], _options(sample_vocab_file), documents_per_chunk=1)
    with open(out) as f:
        assert f.read() == "previous run"
    assert sorted(os.listdir(str(tmp_path))) == ["good.txt", "out.tfrecord"]


def test_script_reports_bad_input_without_traceback(tmp_path, sample_vocab_file):
    out = os.path.join(str(tmp_path), "out.tfrecord")
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_pretraining_data.py"),
         "--input_file=%s" % os.path.join(str(tmp_path), "missing_*.txt"),
         "--output_file=%s" % out, "--vocab_file=%s" % sample_vocab_file],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert "missing_*.txt" in result.stderr and "matches no file" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.exists(out)


def test_failing_second_output_leaves_no_temporary_of_the_first(tmp_path, sample_vocab_file,
                                                                 monkeypatch):
    text = _write(os.path.join(str(tmp_path), "text.txt"), "The baker opens the shop.\n")
    first = os.path.join(str(tmp_path), "first.tfrecord")
    second = os.path.join(str(tmp_path), "second.tfrecord")
    # The second output cannot be opened (e.g. a full disk or a read-only
    # mount), after the first one's temporary was created.
    real_writer = tfrecord_writer.TFRecordWriter
    opened = []

    def writer(path, *args, **kwargs):
        if opened:
            raise PermissionError(13, "Permission denied", path)
        opened.append(path)
        return real_writer(path, *args, **kwargs)

    monkeypatch.setattr(tfrecord_writer, "TFRecordWriter", writer)
    with pytest.raises(PermissionError):
        pretraining_writer.create_pretraining_data(
            [text], [first, second], _options(sample_vocab_file))
    assert len(opened) == 1 and ".tmp-" in opened[0]
    assert sorted(os.listdir(str(tmp_path))) == ["text.txt"]  # no temporary of the first


def test_more_output_files_than_instances_warns(tmp_path, sample_vocab_file, caplog):
    text = _write(os.path.join(str(tmp_path), "text.txt"),
                  "The baker opens the shop.\nShe bakes bread.\n")
    outputs = [os.path.join(str(tmp_path), "out-%d.tfrecord" % k) for k in range(4)]
    with caplog.at_level("WARNING"):
        summary = pretraining_writer.create_pretraining_data(
            [text], outputs, _options(sample_vocab_file, dupe_factor=1))
    sizes = [len(_read_records(path)) for path in outputs]
    assert summary.instances == sum(sizes) < 4
    empty = [path for path, n in zip(outputs, sizes) if n == 0]
    warning = "warning: %d of 4 output files hold no instance: %s" % (
        len(empty), ", ".join(empty))
    assert summary.empty_output_files == empty
    assert summary.describe().splitlines()[-1] == warning
    assert warning in caplog.text


def test_no_instance_error_says_lines_were_skipped(tmp_path, sample_vocab_file):
    long_lines = _write(os.path.join(str(tmp_path), "long.txt"),
                        ("word " * 40 + "\n") * 3 + "\n" + "word " * 50 + "\n")
    out = os.path.join(str(tmp_path), "out.tfrecord")
    with pytest.raises(corpus.CorpusError) as raised:
        pretraining_writer.create_pretraining_data(
            [long_lines], [out], _options(sample_vocab_file), max_line_bytes=100)
    message = str(raised.value)
    assert "\n" not in message
    assert "long.txt" in message and "no document holds any token" in message
    assert "4 line(s) longer than --max_line_bytes=100 were skipped" in message
    assert os.listdir(str(tmp_path)) == ["long.txt"]


def test_cap_num_workers():
    gb = 1000 ** 3
    assert pretraining_writer.cap_num_workers(64, 2, int(11.3 * gb)) == (
        2, "--num_workers=64 capped to 2 (2 cores, 11.3 GB available, ~0.6 GB per worker)")
    # Memory binds before cores: 1.5 GB holds two workers of 0.6 GB.
    workers, warning = pretraining_writer.cap_num_workers(8, 16, int(1.5 * gb))
    assert workers == 2 and warning.startswith("--num_workers=8 capped to 2 (16 cores, 1.5 GB")
    assert pretraining_writer.cap_num_workers(8, 16, 100 * 1000 ** 2)[0] == 1
    assert pretraining_writer.cap_num_workers(4, 2, None)[0] == 2
    assert pretraining_writer.cap_num_workers(2, 2, 64 * gb) == (2, None)
    assert pretraining_writer.cap_num_workers(1, 1, 0) == (1, None)


def test_machine_resources_reads_mem_available(tmp_path):
    meminfo = _write(os.path.join(str(tmp_path), "meminfo"),
                     "MemTotal:       16000000 kB\nMemFree:         1000000 kB\n"
                     "MemAvailable:   11000000 kB\n")
    cores, available = pretraining_writer.machine_resources(meminfo)
    assert cores >= 1 and available == 11000000 * 1024
    assert pretraining_writer.machine_resources(
        os.path.join(str(tmp_path), "missing"))[1] is None


def test_num_workers_is_capped_before_workers_start(tmp_path, sample_vocab_file,
                                                    monkeypatch, caplog):
    text = _write(os.path.join(str(tmp_path), "text.txt"), "The baker opens the shop.\n")
    monkeypatch.setattr(pretraining_writer, "machine_resources", lambda: (1, 8 * 1000 ** 3))
    started = []
    original = pretraining_writer._ordered_results

    def ordered_results(chunks, options, num_workers, log_first_instances, processor=None):
        started.append(num_workers)
        assert num_workers == 1  # 64 spawned worker processes would follow
        return original(chunks, options, num_workers, log_first_instances, processor)

    monkeypatch.setattr(pretraining_writer, "_ordered_results", ordered_results)
    with caplog.at_level("WARNING"):
        pretraining_writer.create_pretraining_data(
            [text], [os.path.join(str(tmp_path), "out.tfrecord")],
            _options(sample_vocab_file), num_workers=64)
    assert started == [1]
    assert "--num_workers=64 capped to 1 (1 core, 8.0 GB available" in caplog.text


def test_options_are_validated(sample_vocab_file):
    for bad in (dict(max_seq_length=4), dict(masked_lm_prob=0.0), dict(dupe_factor=0),
                dict(max_predictions_per_seq=0), dict(short_seq_prob=1.5)):
        with pytest.raises(ValueError):
            _options(sample_vocab_file, **bad).validate()
