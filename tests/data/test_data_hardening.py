# coding=utf-8
"""Bad corpus input: binary files given as text are refused with file and line."""

import gzip
import os
import random
import shutil
import sys

import pytest
import tensorflow as tf

from data import corpus
from data import vocab_learning
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer

TEXT = ("The baker opens the shop at six.\nShe bakes bread every morning.\n\n"
        "The river runs to the sea.\nFish swim in the river.\n") * 20


def _options(vocab_file):
    return pretraining_data.InstanceOptions(
        vocab_file=vocab_file, do_lower_case=True, max_seq_length=64,
        max_predictions_per_seq=10, random_seed=1, dupe_factor=1, masked_lm_prob=0.15,
        short_seq_prob=0.1)


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _gzip_file(directory):
    return _write_bytes(os.path.join(directory, "corpus.txt.gz"),
                        gzip.compress(TEXT.encode("utf-8")))


def _tfrecord_file(directory):
    path = os.path.join(directory, "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for k in range(3):
            writer.write(b"record %d" % k)
    return path


def _executable_file(directory):
    path = os.path.join(directory, "program")
    shutil.copyfile(os.path.realpath(sys.executable), path)
    return path


def _binary_without_nul(directory):
    """Random bytes without NUL: binary that only the UTF-8 check can catch."""
    rng = random.Random(3)
    data = bytes(rng.choice(range(1, 256)) for _ in range(20000))
    return _write_bytes(os.path.join(directory, "noise.bin"), data)


@pytest.mark.parametrize("make", [_gzip_file, _tfrecord_file, _executable_file])
def test_binary_files_with_nul_bytes_are_refused(tmp_path, make):
    path = make(str(tmp_path))
    with pytest.raises(corpus.CorpusError) as raised:
        list(corpus.iter_documents([path]))
    message = str(raised.value)
    assert message.startswith("%s:1: looks binary (NUL byte" % path)
    assert message.endswith("expected UTF-8 text, one sentence per line")
    assert "\n" not in message


def test_nul_byte_is_found_on_its_line(tmp_path):
    path = _write_bytes(os.path.join(str(tmp_path), "late.txt"),
                        b"First line.\n\nSecond document.\nbad \x00 line\n")
    with pytest.raises(corpus.CorpusError, match=r"late\.txt:4: looks binary \(NUL byte at "
                                                 r"byte 5 of the line\)"):
        list(corpus.iter_documents([path]))


def test_binary_without_nul_is_refused_when_decoded(tmp_path):
    path = _binary_without_nul(str(tmp_path))
    documents = list(corpus.iter_documents([path]))  # no NUL: the reader passes it on
    lineno, raw = documents[0].lines[0]
    with pytest.raises(corpus.CorpusError) as raised:
        corpus.decode_line(raw, path, lineno, corpus.ReadStats())
    message = str(raised.value)
    assert message.startswith("%s:1: looks binary or not UTF-8 (" % path)
    assert "bytes invalid" in message
    assert message.endswith("expected UTF-8 text, one sentence per line")


def test_occasional_bad_bytes_are_still_repaired():
    stats = corpus.ReadStats()
    latin1 = "Caf\xe9 cr\xe8me, na\xefve r\xe9sum\xe9 \u2014 fine.\n".encode("latin-1", "replace")
    assert corpus.decode_line(latin1, "odd.txt", 7, stats) == "Caf crme, nave rsum ? fine.\n"
    text = corpus.decode_line(b"She bakes bread \xff\xfe every morning.\n", "odd.txt", 8, stats)
    assert text == "She bakes bread  every morning.\n"
    # Many bad bytes, but a small share of a long line: still text, repaired.
    french = ("L'\xe9t\xe9 dernier, nous avons visit\xe9 la c\xf4te et mang\xe9 "
              "des cr\xeapes pr\xe8s du ch\xe2teau, puis nous sommes rentr\xe9s "
              "\xe0 la maison tr\xe8s tard.\n").encode("latin-1")
    assert sum(b >= 0x80 for b in french) >= corpus.BINARY_MIN_INVALID_BYTES
    assert "nous sommes rentrs" in corpus.decode_line(french, "odd.txt", 9, stats)
    assert stats.counts["lines with invalid UTF-8 (bad bytes dropped)"] == 3
    assert stats.examples["lines with invalid UTF-8 (bad bytes dropped)"] == [
        "odd.txt:7", "odd.txt:8", "odd.txt:9"]


def test_pretraining_data_refuses_binary_and_leaves_nothing(tmp_path, sample_vocab_file):
    good = _write_bytes(os.path.join(str(tmp_path), "good.txt"), TEXT.encode("utf-8"))
    for make in (_gzip_file, _binary_without_nul):
        binary = make(str(tmp_path))
        out = os.path.join(str(tmp_path), "out", "pt.tfrecord")
        with pytest.raises(corpus.CorpusError, match=r"^%s:1: looks binary" % binary):
            pretraining_writer.create_pretraining_data(
                [good, binary], [out], _options(sample_vocab_file), documents_per_chunk=2)
        assert not os.path.exists(os.path.dirname(out)) or not os.listdir(os.path.dirname(out))


def test_vocabulary_learning_refuses_binary(tmp_path):
    for make in (_gzip_file, _binary_without_nul):
        binary = make(str(tmp_path))
        with pytest.raises(corpus.CorpusError, match=r"^%s:1: looks binary" % binary):
            vocab_learning.count_words([binary])
        with pytest.raises(corpus.CorpusError, match=r"^%s:1: looks binary" % binary):
            list(vocab_learning.byte_bpe_training_lines([binary]))
