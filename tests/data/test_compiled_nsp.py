"""The compiled path of Google's defaults makes the Python path's instances, byte for byte.

The Python path (`ChunkProcessor(..., compiled=False)`) is the one
tests/data/test_google_reference.py holds to Google's own output; here the
compiled one (`data.pretraining.compiled_nsp`) must give the same serialised
records, counts, statistics and logged instances, chunk by chunk, over the
sample corpus and over corpora made to reach the rare branches: one-sentence
and one-document corpora (segment B from the same document after ten
tries), sentences longer than the sequence (truncation at both ends), empty
lines and documents, short-sequence targets, budgets cut by
max_predictions_per_seq.
"""

import os
import random

import numpy as np
import pytest

from data import corpus as corpus_lib
from data.pretraining import compiled_nsp
from data.pretraining import instances


def _chunks(files, documents_per_chunk):
    stats = corpus_lib.ReadStats()
    return list(corpus_lib.iter_document_chunks(files, documents_per_chunk, stats,
                                                corpus_lib.DEFAULT_MAX_LINE_BYTES))


def _assert_same(options, files, documents_per_chunk):
    python = instances.ChunkProcessor(options, compiled=False, keep_first_instances=3)
    compiled = instances.ChunkProcessor(options, keep_first_instances=3)
    total = 0
    for index, chunk in enumerate(_chunks(files, documents_per_chunk)):
        expected = python.process(index, chunk)
        got = compiled.process(index, chunk)
        assert compiled._compiled_path()
        assert got.examples == expected.examples, "chunk %d" % index
        for field in ("num_documents", "num_instances", "num_tokens", "num_masked",
                      "num_random_next"):
            assert getattr(got, field) == getattr(expected, field), field
        assert got.stats.counts == expected.stats.counts
        assert dict(got.stats.examples) == dict(expected.stats.examples)
        assert [str(i) for i in got.first_instances] == \
            [str(i) for i in expected.first_instances]
        total += expected.num_instances
    return total


def _options(vocab_file, **overrides):
    values = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=64,
                  max_predictions_per_seq=10, random_seed=12345, dupe_factor=2,
                  masked_lm_prob=0.15, short_seq_prob=0.1)
    values.update(overrides)
    return instances.InstanceOptions(**values)


@pytest.mark.parametrize("documents_per_chunk,overrides", [
    (10000, {}),
    (37, {"max_seq_length": 128, "max_predictions_per_seq": 20, "dupe_factor": 3}),
    (5, {"max_seq_length": 16, "max_predictions_per_seq": 2, "short_seq_prob": 0.5,
         "random_seed": 3}),
    (200, {"masked_lm_prob": 0.4, "short_seq_prob": 1.0, "dupe_factor": 1,
           "do_lower_case": False}),
])
def test_sample_corpus_same_records(sample_vocab_file, sample_corpus_files,
                                    documents_per_chunk, overrides):
    assert _assert_same(_options(sample_vocab_file, **overrides), sample_corpus_files,
                        documents_per_chunk) > 100


def test_rare_branches_same_records(tmp_path, sample_vocab_file, sample_corpus_files):
    with open(sample_corpus_files[0], encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    rng = random.Random(0)
    long_sentence = " ".join(rng.choice(sentences) for _ in range(30))
    documents = [
        [rng.choice(sentences)],                      # one sentence
        [long_sentence, rng.choice(sentences)],       # longer than the sequence
        ["\x01", "   ", "\x7f\x02"],                    # no token at all: skipped
        [rng.choice(sentences), "", rng.choice(sentences), long_sentence],
    ] + [[rng.choice(sentences) for _ in range(rng.randint(1, 6))] for _ in range(20)]
    path = os.path.join(str(tmp_path), "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        for document in documents:
            f.write("\n".join(document) + "\n\n")
    single = os.path.join(str(tmp_path), "single.txt")
    with open(single, "w", encoding="utf-8") as f:
        f.write(long_sentence + "\n" + sentences[0] + "\n")
    for files, per_chunk in (([path], 3), ([path], 1000), ([single], 10)):
        for seed in (1, 2):
            _assert_same(_options(sample_vocab_file, max_seq_length=32, random_seed=seed),
                         files, per_chunk)


def test_generator_makes_pythons_draws():
    assert compiled_nsp.self_check()
    for seed in range(20):
        reference = random.Random(seed)
        bounds = [reference.randint(1, 2 ** 32 - 1) for _ in range(50)]
        mt, pos = compiled_nsp.rng_state(reference)
        expected = [reference.randrange(n) for n in bounds]
        got = [int(compiled_nsp._draws(1, n, 1, mt, pos)[0]) for n in bounds]
        assert got == expected
        assert compiled_nsp._draws(0, 0, 1, mt, pos)[0] == reference.random()


def test_other_recipes_stay_on_the_python_path(sample_vocab_file):
    for overrides in ({"masking": "whole_word"}, {"do_whole_word_mask": True},
                      {"masking": "span"}, {"sentence_objective": "sop"},
                      {"sentence_objective": "none"}, {"replace_per_unit": True}):
        processor = instances.ChunkProcessor(_options(sample_vocab_file, **overrides))
        assert not processor._compiled_path(), overrides
    assert instances.ChunkProcessor(_options(sample_vocab_file))._compiled_path()
    assert not instances.ChunkProcessor(_options(sample_vocab_file),
                                        compiled=False)._compiled_path()


def test_records_parse_as_google_features(sample_vocab_file, sample_corpus_files):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    options = _options(sample_vocab_file)
    result = instances.ChunkProcessor(options).process(0, _chunks(sample_corpus_files,
                                                                  10000)[0])
    spec = {name: tf.io.FixedLenFeature([64], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    spec.update({name: tf.io.FixedLenFeature([10], tf.int64)
                 for name in ("masked_lm_positions", "masked_lm_ids")})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([10], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    parsed = tf.io.parse_example(result.examples[:50], spec)
    mask = parsed["input_mask"].numpy()
    weights = parsed["masked_lm_weights"].numpy()
    ids = parsed["input_ids"].numpy()
    assert (ids[mask == 0] == 0).all() and (mask.sum(axis=1) > 3).all()
    assert set(np.unique(weights)) <= {0.0, 1.0}
    positions = parsed["masked_lm_positions"].numpy()
    for row, w, m in zip(positions, weights, mask):
        real = row[w > 0]
        assert list(real) == sorted(real) and m[real].all() and (real > 0).all()


def test_generator_state_is_checked_after_each_chunk(sample_vocab_file, sample_corpus_files,
                                                     monkeypatch):
    rng = random.Random(5)
    mt, pos = compiled_nsp.rng_state(rng)
    compiled_nsp._draws(0, 0, 1000, mt, pos)
    assert pos[1] == 2000 and compiled_nsp.state_matches(rng, mt, pos)
    mt[17] ^= 1
    assert not compiled_nsp.state_matches(rng, mt, pos)
    # A disagreement sends the chunk (and the rest of the run) down the Python path.
    chunk = _chunks(sample_corpus_files, 10000)[0]
    options = _options(sample_vocab_file)
    expected = instances.ChunkProcessor(options, compiled=False).process(0, chunk)
    monkeypatch.setattr(compiled_nsp, "state_matches", lambda *unused: False)
    processor = instances.ChunkProcessor(options)
    assert processor.process(0, chunk).examples == expected.examples
    assert processor._compiled is False


def test_framed_records_are_a_tfrecord_file(tmp_path, sample_vocab_file, sample_corpus_files):
    from data import tfrecord_writer  # pylint: disable=g-import-not-at-top
    result = instances.ChunkProcessor(_options(sample_vocab_file)).process(
        0, _chunks(sample_corpus_files, 10000)[0])
    framed = result.tfrecord_bytes()
    path = os.path.join(str(tmp_path), "reference.tfrecord")
    with tfrecord_writer.TFRecordWriter(path) as writer:
        writer.write_all(result.examples)
    with open(path, "rb") as f:
        assert f.read() == framed
    python = instances.ChunkProcessor(_options(sample_vocab_file), compiled=False).process(
        0, _chunks(sample_corpus_files, 10000)[0])
    assert python.tfrecord_bytes() is None
