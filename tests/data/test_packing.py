"""data/packing.py: Google's packing rules, and the in-graph packer giving the same ids."""

import itertools

import pytest
import tensorflow as tf

from data import packing

CLS, SEP = 101, 102


def test_pack_tokens_as_googles_convert_single_example():
    tokens, segments = packing.pack(list("abcdef"), list("xyz"), 9)
    # Budget 6: a (6) loses 3 from its end, b (3) is kept.
    assert tokens == ["[CLS]", "a", "b", "c", "[SEP]", "x", "y", "z", "[SEP]"]
    assert segments == [0] * 5 + [1] * 4
    tokens, segments = packing.pack(list("abcdef"), None, 5)
    assert tokens == ["[CLS]", "a", "b", "c", "[SEP]"] and segments == [0] * 5
    # An empty b is no b (Google: `if example.text_b`).
    assert packing.pack(list("ab"), [], 6) == packing.pack(list("ab"), None, 6)
    # A b truncated to nothing loses its [SEP] too (Google tests the truncated list).
    assert packing.pack(list("abc"), list("x"), 4).sequence == ["[CLS]", "a", "[SEP]"]
    with pytest.raises(packing.PackingError, match=r"max_seq_length=2 is too short for a "
                                                   r"pair \(\[CLS\] a \[SEP\] b \[SEP\]\)"):
        packing.pack(["a"], ["b"], 2)


def test_pack_ids_without_specials_and_keeping_the_last_ids():
    features = packing.pack_ids([1, 2, 3, 4], None, 6, cls_id=None, sep_id=9, keep="last")
    assert features == ([1, 2, 3, 4, 9, 0], [1] * 5 + [0], [0] * 6)
    features = packing.pack_ids([1, 2, 3, 4, 5, 6], [7, 8], 5, cls_id=None, sep_id=None,
                                keep="last")
    assert features.input_ids == [4, 5, 6, 7, 8] and features.segment_ids == [0, 0, 0, 1, 1]
    with pytest.raises(packing.PackingError, match="keep must be 'first' or 'last'"):
        packing.pack_ids([1], None, 4, cls_id=None, sep_id=None, keep="middle")


def _ragged(rows):
    values = [value for row in rows for value in row]
    return tf.RaggedTensor.from_row_lengths(tf.constant(values, tf.int64, shape=[len(values)]),
                                            [len(row) for row in rows])


@pytest.mark.parametrize("max_seq_length", [3, 4, 5, 8, 9])
def test_in_graph_packer_gives_the_python_packers_ids(max_seq_length):
    # Every pair of lengths from 0 to 11 (empty b rows included), in one batch.
    pairs = list(itertools.product(range(12), range(12)))
    rows_a = [list(range(1000, 1000 + la)) for la, _ in pairs]
    rows_b = [list(range(2000, 2000 + lb)) for _, lb in pairs]
    got = packing.pack_in_graph([_ragged(rows_a), _ragged(rows_b)], max_seq_length, CLS, SEP)
    expected = [packing.pack_ids(a, b, max_seq_length, cls_id=CLS, sep_id=SEP)
                for a, b in zip(rows_a, rows_b)]
    for name, index in (("input_ids", 0), ("input_mask", 1), ("segment_ids", 2)):
        assert got[name].dtype == tf.int32
        assert got[name].shape == (len(pairs), max_seq_length)
        assert got[name].numpy().tolist() == [e[index] for e in expected], name

    single = packing.pack_in_graph([_ragged(rows_a)], max_seq_length, CLS, SEP)
    expected = [packing.pack_ids(a, None, max_seq_length, cls_id=CLS, sep_id=SEP)
                for a in rows_a]
    assert single["input_ids"].numpy().tolist() == [e.input_ids for e in expected]
    assert single["input_mask"].numpy().tolist() == [e.input_mask for e in expected]
    assert not single["segment_ids"].numpy().any()


def test_in_graph_packer_in_a_tf_function_and_truncated_lengths():
    packer = tf.function(lambda a, b: packing.pack_in_graph([a, b], 7, CLS, SEP))
    ids_a = tf.ragged.constant([[1, 2, 3, 4, 5], [1]], dtype=tf.int32)
    ids_b = tf.ragged.constant([[6, 7, 8], [2, 3]], dtype=tf.int32)
    got = packer(ids_a, ids_b)
    assert got["input_ids"].numpy().tolist() == [[CLS, 1, 2, SEP, 6, 7, SEP],
                                                 [CLS, 1, SEP, 2, 3, SEP, 0]]
    for la, lb, budget in itertools.product(range(9), range(9), range(-1, 10)):
        a, b = list(range(la)), list(range(lb))
        packing.truncate_seq_pair(a, b, budget)
        keep_a, keep_b = packing.truncated_lengths(la, lb, budget)
        assert (int(keep_a), int(keep_b)) == (len(a), len(b)), (la, lb, budget)
    with pytest.raises(packing.PackingError, match="1 or 2 segments"):
        packing.pack_in_graph([ids_a, ids_b, ids_a], 7, CLS, SEP)
