"""Greedy and beam-search decoding with a `MassNetwork` (translation, fragment filling).

The encoder runs once per source batch; the decoder then runs step by step
on its own output, as it was trained: the first decoder input is [MASK] at
position `first_position` (1: the position after [CLS], where a target
sentence starts), and every chosen token is fed back at the next position.
Each step re-runs the decoder over the whole prefix (a short target makes
this cheaper than bookkeeping a key/value cache; the causal mask makes the
last position's output the same either way).

* greedy: the most likely token at every step (the lowest id on a tie),
  until `eos_id` (kept in the output) or `max_length` tokens.
* beam: the `beam_size` best prefixes by summed log-probability; a prefix
  ending in `eos_id` among the best `beam_size` candidates of a step is
  finished. A source is done when `beam_size` prefixes have finished (or
  at `max_length`, when the unfinished ones count as finished), and the
  result is the finished prefix of the best score normalised by GNMT's
  length penalty `((5 + length) / 6) ** length_penalty` (0: the summed
  log-probability itself). Candidates are ranked by a stable sort, so ties
  go to the lower beam and token id: with `beam_size=1` this is greedy
  decoding exactly (tested).

Log-probabilities are summed in float64, so that adding a prefix's score
never reorders two candidates.
"""

import dataclasses
from typing import List
import weakref

import numpy as np
import tensorflow as tf

__all__ = ["Hypothesis", "beam_search", "greedy", "score_targets"]


@dataclasses.dataclass
class Hypothesis:
    """One decoded sequence: `tokens` (ids, `eos_id` included if reached), `log_prob` (summed)."""

    tokens: List[int]
    log_prob: float


_DECODERS = weakref.WeakKeyDictionary()


def _decoder(network):
    """The network's `_Decoder`, traced once per network."""
    if network not in _DECODERS:
        _DECODERS[network] = _Decoder(network)
    return _DECODERS[network]


class _Decoder:
    """The network's encoder once, and a traced decoder step for any prefix length."""

    def __init__(self, network):
        # A weak reference: the cache above must not keep the network alive.
        network = weakref.ref(network)

        @tf.function(reduce_retracing=True)
        def encode(input_ids, input_mask, segment_ids):
            return network().encode(input_ids, input_mask, segment_ids, training=False)[0]

        @tf.function(reduce_retracing=True)
        def last_log_probs(memory, memory_mask, ids, positions, segments):
            output = network().decode(memory, memory_mask, ids, positions,
                                      decoder_segment_ids=segments, training=False)[0]
            return tf.nn.log_softmax(network().logits(output[:, -1]), axis=-1)

        self.encode = encode
        self.last_log_probs = last_log_probs


def _inputs(sources):
    ids = np.asarray(sources["input_ids"], np.int32)
    mask = np.asarray(sources.get("input_mask", np.ones_like(ids)), np.int32)
    segments = np.asarray(sources.get("segment_ids", np.zeros_like(ids)), np.int32)
    return ids, mask, segments


def _step_inputs(prefixes, start_id, first_position, language):
    rows, length = prefixes.shape
    ids = np.concatenate([np.full([rows, 1], start_id, np.int32), prefixes], 1)
    positions = np.broadcast_to(np.arange(first_position, first_position + length + 1,
                                          dtype=np.int32), ids.shape)
    return ids, positions, np.full(ids.shape, language, np.int32)


def _check(network, max_length, first_position):
    if max_length < 1:
        raise ValueError("max_length must be at least 1, got %r" % (max_length,))
    if first_position + max_length > network.max_position_embeddings:
        raise ValueError("first_position + max_length (%d) exceeds the network's "
                         "max_position_embeddings (%d)"
                         % (first_position + max_length, network.max_position_embeddings))


def greedy(network, sources, start_id, eos_id, max_length, target_language=0,
           first_position=1):
    """Greedy decoding of a batch of sources.

    Args:
        network: a `MassNetwork`.
        sources: dict of `input_ids`, `input_mask`, `segment_ids` (NumPy or
            tensors, `[batch, seq]`; the last two optional).
        start_id: the first decoder input ([MASK], as in pre-training).
        eos_id: the token that ends a sequence ([SEP]).
        max_length: most tokens per sequence.
        target_language: the decoder's language id.
        first_position: the position of the first decoder input.

    Returns:
        A list of `Hypothesis`, one per source.
    """
    _check(network, max_length, first_position)
    decoder = _decoder(network)
    ids, mask, segments = _inputs(sources)
    memory = decoder.encode(ids, mask, segments)
    batch = ids.shape[0]
    prefixes = np.zeros([batch, 0], np.int32)
    scores = np.zeros([batch], np.float64)
    done = np.zeros([batch], bool)
    lengths = np.zeros([batch], np.int64)
    for _ in range(max_length):
        step_ids, positions, languages = _step_inputs(prefixes, start_id, first_position,
                                                      target_language)
        log_probs = decoder.last_log_probs(memory, mask, step_ids, positions,
                                           languages).numpy().astype(np.float64)
        chosen = np.argmax(log_probs, axis=-1).astype(np.int32)
        live = ~done
        scores[live] += log_probs[np.arange(batch), chosen][live]
        lengths[live] += 1
        prefixes = np.concatenate([prefixes, chosen[:, None]], 1)
        done |= chosen == eos_id
        if done.all():
            break
    return [Hypothesis([int(t) for t in prefixes[i, :lengths[i]]], float(scores[i]))
            for i in range(batch)]


def beam_search(network, sources, start_id, eos_id, max_length, beam_size=4,
                length_penalty=0.6, target_language=0, first_position=1):
    """Beam search over a batch of sources (see the module docstring).

    Args: as `greedy`, and
        beam_size: prefixes kept per source (1: greedy).
        length_penalty: GNMT's alpha (0: rank by summed log-probability).

    Returns:
        A list of `Hypothesis`, one per source (`log_prob` unnormalised).
    """
    _check(network, max_length, first_position)
    if beam_size < 1:
        raise ValueError("beam_size must be at least 1, got %r" % (beam_size,))
    decoder = _decoder(network)
    ids, mask, segments = _inputs(sources)
    batch, k = ids.shape[0], beam_size
    memory = decoder.encode(ids, mask, segments)
    # Every source's row repeated `k` times: row b * k + j is beam j of source b.
    memory = tf.repeat(memory, k, axis=0)
    mask_k = np.repeat(mask, k, axis=0)
    prefixes = np.zeros([batch * k, 0], np.int32)
    scores = np.full([batch, k], -np.inf)
    scores[:, 0] = 0.0  # one live beam at the start
    finished = [[] for _ in range(batch)]
    done = np.zeros([batch], bool)

    def normalised(hypothesis):
        penalty = ((5.0 + len(hypothesis.tokens)) / 6.0) ** length_penalty
        return hypothesis.log_prob / penalty

    for step in range(max_length):
        step_ids, positions, languages = _step_inputs(prefixes, start_id, first_position,
                                                      target_language)
        log_probs = decoder.last_log_probs(memory, mask_k, step_ids, positions,
                                           languages).numpy().astype(np.float64)
        vocab = log_probs.shape[-1]
        totals = (scores[:, :, None] + log_probs.reshape(batch, k, vocab)).reshape(batch, -1)
        new_prefixes = np.zeros([batch * k, step + 1], np.int32)
        new_scores = np.full([batch, k], -np.inf)
        last_step = step == max_length - 1
        for b in range(batch):
            if done[b]:
                continue
            order = np.argsort(-totals[b], kind="stable")[:2 * k]
            alive = 0
            for rank, flat in enumerate(order):
                total = totals[b, flat]
                if not np.isfinite(total):
                    break
                beam, token = divmod(int(flat), vocab)
                tokens = list(prefixes[b * k + beam]) + [token]
                if token == eos_id:
                    if rank < k:
                        finished[b].append(Hypothesis([int(t) for t in tokens], float(total)))
                    continue
                if alive < k:
                    new_prefixes[b * k + alive] = tokens
                    new_scores[b, alive] = total
                    alive += 1
                if alive == k:
                    break
            if len(finished[b]) >= k:
                done[b] = True
            elif last_step:
                for j in range(alive):
                    finished[b].append(Hypothesis([int(t) for t in new_prefixes[b * k + j]],
                                                  float(new_scores[b, j])))
                done[b] = True
        prefixes, scores = new_prefixes, new_scores
        if done.all():
            break
    results = []
    for b in range(batch):
        best = None
        for hypothesis in finished[b]:  # the first of equal scores wins
            if best is None or normalised(hypothesis) > normalised(best):
                best = hypothesis
        results.append(best)
    return results


def score_targets(network, sources, targets, start_id, target_language=0, first_position=1):
    """Summed log-probability of each target under teacher forcing (the reference of tests).

    Args:
        sources: as for `greedy`.
        targets: list of token-id lists (each as the decoder should emit it).

    Returns:
        float64 array `[batch]`.
    """
    ids, mask, segments = _inputs(sources)
    longest = max(len(t) for t in targets)
    batch = len(targets)
    decoder_ids = np.zeros([batch, longest], np.int32)
    target_ids = np.zeros([batch, longest], np.int32)
    weights = np.zeros([batch, longest], np.float64)
    for i, target in enumerate(targets):
        decoder_ids[i, :len(target)] = [start_id] + list(target[:-1])
        target_ids[i, :len(target)] = target
        weights[i, :len(target)] = 1.0
    positions = np.broadcast_to(np.arange(first_position, first_position + longest,
                                          dtype=np.int32), decoder_ids.shape)
    outputs = network({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                       "decoder_input_ids": decoder_ids, "decoder_position_ids": positions,
                       "decoder_input_mask": (weights > 0).astype(np.int32),
                       "decoder_segment_ids": np.full(decoder_ids.shape, target_language,
                                                      np.int32)}, training=False)
    log_probs = tf.nn.log_softmax(network.logits(outputs["decoder_sequence_output"]))
    picked = np.take_along_axis(log_probs.numpy().astype(np.float64), target_ids[..., None],
                                axis=-1)[..., 0]
    return (picked * weights).sum(axis=1)
