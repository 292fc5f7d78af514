"""The unigram masked-LM baseline: accuracy and loss computed by hand."""

import math

import numpy as np
import pytest
import tensorflow as tf

from data.pretraining import baselines


def _batches(rows, max_predictions=4):
    ids = np.zeros((len(rows), max_predictions), "int64")
    weights = np.zeros((len(rows), max_predictions), "float32")
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        weights[i, :len(row)] = 1.0
    return tf.data.Dataset.from_tensor_slices(
        {"masked_lm_ids": ids, "masked_lm_weights": weights}).batch(2)


def test_accuracy_and_cross_entropy_by_hand():
    train = _batches([[5, 5, 7], [5, 9]])          # counts: 5 x3, 7 x1, 9 x1
    evaluation = _batches([[5, 7], [8, 5, 5]])      # padding (weight 0) is ignored
    stats = baselines.unigram_masked_lm_statistics(train, evaluation, 8, 4, vocab_size=10)
    assert stats.token_id == 5
    assert stats.accuracy == pytest.approx(3 / 5)
    # Add-one smoothing: p(t) = (count + 1) / (5 + 10).
    expected = -(3 * math.log(4 / 15) + math.log(2 / 15) + math.log(1 / 15)) / 5
    assert stats.cross_entropy == pytest.approx(expected)
    assert baselines.unigram_masked_lm_baseline(train, evaluation, 8, 4) == (3 / 5, 5)
    assert baselines.unigram_masked_lm_statistics(train, evaluation, 8, 4).cross_entropy is None


def test_ids_outside_the_vocabulary_are_an_error():
    with pytest.raises(ValueError, match="training .* id 9, outside the vocabulary of 8"):
        baselines.unigram_masked_lm_statistics(_batches([[5, 9]]), _batches([[5]]), 8, 4,
                                               vocab_size=8)
    with pytest.raises(ValueError, match="evaluation .* id 8, outside the vocabulary of 8"):
        baselines.unigram_masked_lm_statistics(_batches([[5]]), _batches([[5, 8]]), 8, 4,
                                               vocab_size=8)
