"""Factorisation orders as data: permutation masks and target mappings (NumPy).

Permutation language modelling predicts the tokens of a sequence in a random
order `z` (a permutation of its positions), each from the tokens before it
in that order; the positions themselves stay where they are, only the
attention masks change. With partial prediction (XLNet section 2.3) only the
last `num_predict` tokens of the order (about 1/K of the sequence, K = 6)
are predicted; the others are context. As in XLNet's `_local_perm`, the
context tokens then see each other freely (their order among themselves
would never be scored), every predicted token sees all of them, and a
predicted token sees the predicted tokens before it in the order.

    perm_mask[i, j] = 1  (i may NOT attend to j)  iff  j is predicted and
                                                   rank(j) >= rank(i)

where every context token has rank -1. The content stream adds the
diagonal back (a token always sees itself there); the query stream never
sees its own position (`modeling.xlnet.network`). Padding positions are
neither predicted nor ordered: their keys are hidden by `input_mask`.

`target_mapping[m]` is the one-hot row of the m-th predicted position
(predicted positions in increasing position order); rows beyond the number
of predicted tokens are zero with weight 0.
"""

import numpy as np

__all__ = ["num_predict_for", "perm_mask_from_order", "sample_permutation"]


def num_predict_for(seq_length, k=6):
    """Predicted tokens per sequence of `seq_length` under partial prediction with K = `k`."""
    if k < 1:
        raise ValueError("partial prediction K must be >= 1, got %r" % (k,))
    return max(1, int(round(seq_length / float(k))))


def perm_mask_from_order(order, num_predict, seq_length=None):
    """Masks of one factorisation order.

    Args:
        order: int array, a permutation of the real positions (the first
            `len(order)` positions; the rest, up to `seq_length`, are
            padding).
        num_predict: the last `num_predict` positions of `order` are
            predicted (`len(order)` for full permutation LM).
        seq_length: padded length (default `len(order)`).

    Returns:
        `(perm_mask float32 [seq, seq], target_positions int32 [n])`, the
        predicted positions sorted, n = min(num_predict, len(order)).
    """
    order = np.asarray(order, dtype=np.int64)
    real = len(order)
    seq_length = real if seq_length is None else seq_length
    num_predict = min(int(num_predict), real)
    rank = np.full([seq_length], -1, dtype=np.int64)
    predicted = order[real - num_predict:]
    rank[predicted] = np.arange(num_predict)
    is_target = np.zeros([seq_length], dtype=bool)
    is_target[predicted] = True
    perm_mask = is_target[np.newaxis, :] & (rank[np.newaxis, :] >= rank[:, np.newaxis])
    return perm_mask.astype(np.float32), np.sort(predicted).astype(np.int32)


def sample_permutation(rng, input_ids, input_mask, num_predict, k=6):
    """Draws a factorisation order for one sequence; returns its features.

    Args:
        rng: a `numpy.random.Generator`.
        input_ids: int `[seq]`.
        input_mask: `[seq]`, 1 real / 0 padding; real positions come first.
        num_predict: rows of `target_mapping` (`num_predict_for(seq, k)`).
        k: partial prediction: about 1/k of the real tokens are predicted
            (at most `num_predict`), so a short, padded row is not scored
            more densely than a full one.

    Returns:
        dict of NumPy arrays: `perm_mask` `[seq, seq]`, `target_mapping`
        `[num_predict, seq]`, `target_ids` `[num_predict]`, `target_weights`
        `[num_predict]` (float32, 0 for unused rows).
    """
    seq_length = len(input_ids)
    real = int(np.sum(np.asarray(input_mask) > 0))
    order = rng.permutation(real)
    predicted = min(num_predict, num_predict_for(real, k)) if real else 0
    perm_mask, targets = perm_mask_from_order(order, predicted, seq_length)
    target_mapping = np.zeros([num_predict, seq_length], np.float32)
    target_ids = np.zeros([num_predict], np.int32)
    target_weights = np.zeros([num_predict], np.float32)
    n = len(targets)
    target_mapping[np.arange(n), targets] = 1.0
    target_ids[:n] = np.asarray(input_ids)[targets]
    target_weights[:n] = 1.0
    return {"perm_mask": perm_mask, "target_mapping": target_mapping,
            "target_ids": target_ids, "target_weights": target_weights}
