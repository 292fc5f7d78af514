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

`sample_permutation` predicts the last 1/K of one random order of a row.
XLNet's own inputs (`modeling.xlnet.pipeline`) choose the predicted
positions first, as n-gram spans (`sample_span_mask`, the authors'
`_sample_mask`), then order them with the functional `<sep>`/`<cls>` tokens
(`local_perm_mask`, `_local_perm`), each part of a two-segment row on its
own (`two_part_features`).
"""

import numpy as np

__all__ = ["is_start_piece", "local_perm_mask", "num_predict_for", "perm_mask_from_order",
           "sample_permutation", "sample_span_mask", "sample_token_mask", "span_weights",
           "start_piece_table", "target_features", "two_part_features"]


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
    return dict(target_features(input_ids, targets, num_predict), perm_mask=perm_mask)


# ------------------------------------------------------------ span prediction

# Pieces that begin a word for span sampling besides "▁..." and "<...>" ones:
# XLNet's `_is_start_piece` also counts ASCII punctuation as a start.
_PUNCTUATION = frozenset('!"#$%&\'()*+,-./:;?@[\\]^_`{|}~')


def is_start_piece(piece):
    """Whether a SentencePiece piece begins a word (spans start only there)."""
    return piece.startswith("\u2581") or piece.startswith("<") or piece in _PUNCTUATION


def start_piece_table(id_to_piece, vocab_size):
    """bool `[vocab]`: `is_start_piece` of every id (`id_to_piece: id -> piece`)."""
    return np.array([is_start_piece(id_to_piece(i)) for i in range(vocab_size)], dtype=bool)


def span_weights(max_gram=5):
    """P(span length n) for n = 1..max_gram: proportional to 1/n, as in XLNet."""
    weights = 1.0 / np.arange(1, max_gram + 1)
    return weights / weights.sum()


def sample_span_mask(rng, is_start, goal_num_predict=None, max_gram=5, mask_alpha=6,
                     mask_beta=1):
    """Chooses the positions to predict as spans (XLNet's span-based prediction).

    XLNet (section 3.1 and `_sample_mask` of zihangdai/xlnet) predicts spans
    rather than lone tokens: a length n is drawn from 1..`max_gram` with
    P(n) proportional to 1/n, a context of `n * mask_alpha / mask_beta`
    tokens (K n with the recipe's K = 6) is laid down from the current
    position, the span of n tokens starts at a random offset inside it
    (moved on to the next word-start piece) and the next context begins
    where this one ends. A span that would reach the last position is not
    taken, and a span never exceeds the remaining budget. When the spans
    fall short of `goal_num_predict` (the end of the row was reached),
    random single tokens fill the budget, so every row predicts exactly
    the budget, as the authors' records do.

    Args:
        rng: a `numpy.random.Generator`.
        is_start: bool `[n]`, whether each token begins a word.
        goal_num_predict: the budget (None: spans until the end).
        max_gram, mask_alpha, mask_beta: XLNet's flags (5, 6, 1).

    Returns:
        `(mask bool [n], spans)`: spans is the list of `(begin, end)` of the
        sampled spans (without the single-token fill).
    """
    is_start = np.asarray(is_start, dtype=bool)
    seg_len = len(is_start)
    mask = np.zeros([seg_len], dtype=bool)
    if goal_num_predict is not None:
        goal_num_predict = min(int(goal_num_predict), seg_len)
    probabilities = span_weights(max_gram)
    spans, num_predict, cursor = [], 0, 0
    while cursor < seg_len:
        if goal_num_predict is not None and num_predict >= goal_num_predict:
            break
        n = int(rng.choice(max_gram, p=probabilities)) + 1
        if goal_num_predict is not None:
            n = min(n, goal_num_predict - num_predict)
        context = (n * mask_alpha) // mask_beta
        left = int(rng.integers(context))
        begin = cursor + left
        while begin < seg_len and not is_start[begin]:
            begin += 1
        end = begin + n
        if end >= seg_len:
            break
        mask[begin:end] = True
        spans.append((begin, end))
        num_predict += n
        cursor = end + context - left
    while goal_num_predict is not None and num_predict < goal_num_predict:
        i = int(rng.integers(seg_len))
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return mask, spans


def sample_token_mask(rng, seg_len, goal_num_predict):
    """`goal_num_predict` distinct random positions of `seg_len` (no spans)."""
    mask = np.zeros([seg_len], dtype=bool)
    mask[rng.choice(seg_len, size=min(int(goal_num_predict), seg_len), replace=False)] = True
    return mask


def local_perm_mask(rng, is_masked, is_functional):
    """XLNet's `_local_perm`: one random order over a part; its permutation mask.

    Every position gets a rank in a random order. Context tokens (neither
    chosen nor functional) get rank -1: everyone sees them, and they see
    no chosen or functional token, so nothing predicted leaks through them.
    A target (chosen and not `<sep>`/`<cls>`) sees the chosen and functional
    tokens ranked before it, never itself; a functional token sees those
    ranked before it and itself. So the tokens of one span are predicted
    one after the other in the sampled order: the later ones see the
    earlier ones' content, the earlier never the later, as in the authors'
    code (which orders single tokens, not spans).

        perm_mask[i, j] = 1 (i may NOT attend to j)  iff
            j is chosen or functional  and  self_rank(i) <= rank(j)

    with self_rank = rank for targets and rank + 1 otherwise.

    Returns:
        `(perm_mask float32 [n, n], is_target bool [n])`.
    """
    is_masked = np.asarray(is_masked, dtype=bool)
    is_functional = np.asarray(is_functional, dtype=bool)
    ordered = is_masked | is_functional
    is_target = is_masked & ~is_functional
    rank = np.where(ordered, rng.permutation(len(is_masked)), -1)
    self_rank = np.where(is_target, rank, rank + 1)
    perm_mask = (self_rank[:, np.newaxis] <= rank[np.newaxis, :]) & ordered[np.newaxis, :]
    return perm_mask.astype(np.float32), is_target


def two_part_features(rng, input_ids, is_start, is_functional, reuse_len, num_predict,
                      span=True, **span_options):
    """Targets and permutation mask of one pre-training row, as XLNet builds them.

    The row is cut at `reuse_len` (XLNet's reuse part, cached as the next
    step's memory, and the `A <sep> B <sep> <cls>` part). Each part gets
    half the budget (the reuse part the larger half) sampled by
    `sample_span_mask` (`span=False`: single random tokens) and its own
    random order (`local_perm_mask`). The reuse part never sees the second
    part (the memory must not hold what comes after it); the second part
    sees all of the reuse part, which precedes it in the factorisation order.

    Returns the dict of `sample_permutation` plus `spans` (list of the
    sampled spans' `(begin, end)` in row positions).
    """
    input_ids = np.asarray(input_ids)
    seq_length = len(input_ids)
    is_start = np.asarray(is_start, dtype=bool)
    is_functional = np.asarray(is_functional, dtype=bool)
    budgets = (num_predict - num_predict // 2, num_predict // 2)
    bounds = ((0, reuse_len), (reuse_len, seq_length))
    perm_mask = np.zeros([seq_length, seq_length], np.float32)
    perm_mask[:reuse_len, reuse_len:] = 1.0
    is_target = np.zeros([seq_length], dtype=bool)
    spans = []
    for (lo, hi), budget in zip(bounds, budgets):
        if span:
            mask, part_spans = sample_span_mask(rng, is_start[lo:hi], budget, **span_options)
            spans.extend((lo + b, lo + e) for b, e in part_spans)
        else:
            mask = sample_token_mask(rng, hi - lo, budget)
        part_mask, part_target = local_perm_mask(rng, mask, is_functional[lo:hi])
        perm_mask[lo:hi, lo:hi] = part_mask
        is_target[lo:hi] = part_target
    targets = np.nonzero(is_target)[0]
    return dict(target_features(input_ids, targets, num_predict), perm_mask=perm_mask,
                spans=spans)


def target_features(input_ids, targets, num_predict):
    """`target_mapping`, `target_ids`, `target_weights` of the positions `targets`."""
    seq_length = len(input_ids)
    target_mapping = np.zeros([num_predict, seq_length], np.float32)
    target_ids = np.zeros([num_predict], np.int32)
    target_weights = np.zeros([num_predict], np.float32)
    n = len(targets)
    target_mapping[np.arange(n), targets] = 1.0
    target_ids[:n] = np.asarray(input_ids)[targets]
    target_weights[:n] = 1.0
    return {"target_mapping": target_mapping, "target_ids": target_ids,
            "target_weights": target_weights}
