"""Google's default pre-training instances, compiled: the same draws, the same records.

`create_pretraining_data.py` with Google's flags (next-sentence pairs,
per-WordPiece masking) spends its time in Python-level random draws: a
shuffle of every instance's ~125 maskable positions, the 80/10/10 draws, the
pair construction, then the serialisation of each `tf.train.Example`. This
module runs the same algorithm, draw for draw, as compiled code (numba) over
token-id arrays:

* **The generator.** Python's `random.Random` is a Mersenne Twister
  (MT19937). Its state (``rng.getstate()``: 624 words and a position) is
  copied into an array, and the draws Python would make are made here from
  the same 32-bit outputs: ``random()`` takes two (``(a >> 5) * 2**26 + (b
  >> 6)``, over ``2**53``); ``randint``/``randrange``/``shuffle`` go through
  ``_randbelow(n)``, the top ``n.bit_length()`` bits of one output, drawn
  again while ``>= n``. So the instances are exactly those of
  `data.pretraining.instances` (and of Google's script for a corpus that
  fits one chunk).
* **The algorithm** is `instances.nsp_pairs` + `masking._mask_tokens` +
  `ChunkProcessor.process`: shuffle the documents; for each duplicate and
  document, cut sentences into pairs (segment B from another document half
  of the time), truncate one token at a time at a random end, mask
  ``min(max_predictions, max(1, round(n * masked_lm_prob)))`` shuffled
  positions; shuffle the instances.
* **The records** are written into one byte buffer, the bytes
  ``tf_example.serialize_example`` gives for the seven padded features
  (deterministic serialisation: keys in sorted order), so that the writer
  only frames them.

`available()` says whether numba imports; `self_check()` checks once per
process that Python's `random` consumes its generator's outputs as modelled
here, and `state_matches` compares the compiled generator's state with
Python's after every chunk; the caller falls back to the Python path should
either ever disagree (a future interpreter changing `random`'s algorithm,
say). Compiled functions are cached on disk
(``cache=True``): the first run on a machine compiles them (a few seconds),
later runs load them. Calls into them are `termination.graceful()` blocks: a
SIGTERM that arrives while numba loads or compiles a kernel (Python code
inside the dispatcher, which would turn the exception into a SystemError)
ends the run right after the call, as an ordinary termination.
"""

import random

import numpy as np

from data import termination

try:  # pragma: no cover - numba is in requirements.txt
    import numba
    _njit = numba.njit(cache=True, nogil=True)
except ImportError:  # pragma: no cover
    numba = None
    _njit = None

_N = 624


def available():
    """Whether the compiled path can run (numba imports)."""
    return numba is not None


def rng_state(rng):
    """(state words int64[624], [position, words drawn]) of a `random.Random`'s
    Mersenne Twister; the compiled generator advances both."""
    version, internal, _ = rng.getstate()
    if version != 3 or len(internal) != _N + 1:
        raise ValueError("unexpected random.Random state (version %r, %d words)"
                         % (version, len(internal)))
    return (np.array(internal[:_N], dtype=np.int64),
            np.array([internal[_N], 0], dtype=np.int64))


def state_matches(rng, mt, pos):
    """Whether (mt, pos) is `rng`'s state advanced by the pos[1] words drawn from it.

    Python's own generator is advanced by that many 32-bit outputs (one
    ``getrandbits(32 * n)`` call) and the two states compared, which checks
    the compiled twist and tempering on every run at almost no cost.
    """
    check = random.Random()
    check.setstate(rng.getstate())
    check.getrandbits(32 * int(pos[1]))
    internal = check.getstate()[1]
    return internal[_N] == int(pos[0]) and np.array_equal(
        np.array(internal[:_N], dtype=np.int64), mt)


if numba is not None:

    @_njit
    def _next32(mt, pos):
        """The next 32-bit output of the Mersenne Twister (CPython's genrand_uint32)."""
        i = pos[0]
        if i >= _N:
            for k in range(_N):
                y = (mt[k] & 0x80000000) | (mt[(k + 1) % _N] & 0x7FFFFFFF)
                v = mt[(k + 397) % _N] ^ (y >> 1)
                if y & 1:
                    v ^= 0x9908B0DF
                mt[k] = v
            i = 0
        y = mt[i]
        pos[0] = i + 1
        pos[1] += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y

    @_njit
    def _random(mt, pos):
        """random.Random.random(): 53 bits from two outputs."""
        a = _next32(mt, pos) >> 5
        b = _next32(mt, pos) >> 6
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)

    @_njit
    def _randbelow(n, mt, pos):
        """random.Random._randbelow(n) for 1 <= n < 2**32 (getrandbits with rejection)."""
        k = 0
        m = n
        while m:
            m >>= 1
            k += 1
        shift = 32 - k
        r = _next32(mt, pos) >> shift
        while r >= n:
            r = _next32(mt, pos) >> shift
        return r

    @_njit
    def _shuffle(x, mt, pos):
        """random.Random.shuffle(x), in place."""
        for i in range(len(x) - 1, 0, -1):
            j = _randbelow(i + 1, mt, pos)
            t = x[i]
            x[i] = x[j]
            x[j] = t

    @_njit
    def _draws(kind, n, count, mt, pos):
        """`count` draws of one kind (0 random(), 1 _randbelow(n)); the tests compare
        them with Python's."""
        out = np.empty(count, np.float64)
        for c in range(count):
            if kind == 0:
                out[c] = _random(mt, pos)
            else:
                out[c] = _randbelow(n, mt, pos)
        return out

    @_njit
    def _gather(out, length, tokens, sent_offsets, first, last):
        """Appends the tokens of sentences [first, last) to out[length:]; the new length."""
        for s in range(first, last):
            for t in range(sent_offsets[s], sent_offsets[s + 1]):
                out[length] = tokens[t]
                length += 1
        return length

    @_njit
    def _create_instances(tokens, sent_offsets, doc_offsets, mt, pos, dupe_factor,
                          max_seq_length, short_seq_prob, masked_lm_prob,
                          max_predictions_per_seq, vocab_word_ids, cls_id, sep_id, mask_id,
                          capacity):
        """All instances of one chunk, in their final (shuffled) order.

        Returns (input_ids [N, L] int32 (masked), lengths [N], segment_ids
        [N, L] int8, masked positions [N, P] int32, masked label ids
        [N, P] int32, masked counts [N], next-sentence labels [N]).
        """
        num_docs = len(doc_offsets) - 1
        order = np.arange(num_docs)
        _shuffle(order, mt, pos)
        max_doc_tokens = 1
        for d in range(num_docs):
            size = sent_offsets[doc_offsets[d + 1]] - sent_offsets[doc_offsets[d]]
            if size > max_doc_tokens:
                max_doc_tokens = size
        buf_a = np.empty(max_doc_tokens, np.int32)
        buf_b = np.empty(max_doc_tokens, np.int32)
        candidates = np.empty(max_seq_length, np.int64)
        capacity = max(capacity, 16)
        ids = np.zeros((capacity, max_seq_length), np.int32)
        segments = np.zeros((capacity, max_seq_length), np.int8)
        lengths = np.zeros(capacity, np.int32)
        m_pos = np.zeros((capacity, max_predictions_per_seq), np.int32)
        m_ids = np.zeros((capacity, max_predictions_per_seq), np.int32)
        m_count = np.zeros(capacity, np.int32)
        labels = np.zeros(capacity, np.int8)
        count = 0
        max_num_tokens = max_seq_length - 3
        num_vocab = len(vocab_word_ids)
        for _ in range(dupe_factor):
            for d in range(num_docs):
                doc = order[d]
                s0 = doc_offsets[doc]
                num_sentences = doc_offsets[doc + 1] - s0
                target = max_num_tokens
                if _random(mt, pos) < short_seq_prob:
                    target = 2 + _randbelow(max_num_tokens - 1, mt, pos)
                chunk_start = 0
                chunk_len = 0
                current_length = 0
                i = 0
                while i < num_sentences:
                    if chunk_len == 0:
                        chunk_start = i
                    chunk_len += 1
                    current_length += (sent_offsets[s0 + i + 1] - sent_offsets[s0 + i])
                    if i == num_sentences - 1 or current_length >= target:
                        a_end = 1
                        if chunk_len >= 2:
                            a_end = 1 + _randbelow(chunk_len - 1, mt, pos)
                        len_a = _gather(buf_a, 0, tokens, sent_offsets, s0 + chunk_start,
                                        s0 + chunk_start + a_end)
                        if chunk_len == 1 or _random(mt, pos) < 0.5:
                            is_random_next = 1
                            target_b = target - len_a
                            other = d
                            for _try in range(10):
                                other = _randbelow(num_docs, mt, pos)
                                if other != d:
                                    break
                            r_doc = order[other]
                            r0 = doc_offsets[r_doc]
                            r_sentences = doc_offsets[r_doc + 1] - r0
                            r_start = _randbelow(r_sentences, mt, pos)
                            len_b = 0
                            for j in range(r_start, r_sentences):
                                len_b = _gather(buf_b, len_b, tokens, sent_offsets,
                                                r0 + j, r0 + j + 1)
                                if len_b >= target_b:
                                    break
                            i -= chunk_len - a_end
                        else:
                            is_random_next = 0
                            len_b = _gather(buf_b, 0, tokens, sent_offsets,
                                            s0 + chunk_start + a_end,
                                            s0 + chunk_start + chunk_len)
                        # Truncation: one token at a time from the longer segment (B on
                        # ties), at its front or back at random.
                        start_a, end_a, start_b, end_b = 0, len_a, 0, len_b
                        while (end_a - start_a) + (end_b - start_b) > max_num_tokens:
                            if end_a - start_a > end_b - start_b:
                                if _random(mt, pos) < 0.5:
                                    start_a += 1
                                else:
                                    end_a -= 1
                            else:
                                if _random(mt, pos) < 0.5:
                                    start_b += 1
                                else:
                                    end_b -= 1
                        if count == capacity:
                            capacity *= 2
                            ids = _grow2(ids, capacity)
                            segments = _grow2(segments, capacity)
                            m_pos = _grow2(m_pos, capacity)
                            m_ids = _grow2(m_ids, capacity)
                            lengths = _grow1(lengths, capacity)
                            m_count = _grow1(m_count, capacity)
                            labels = _grow1(labels, capacity)
                        row = ids[count]
                        seg = segments[count]
                        row[0] = cls_id
                        n = 1
                        for t in range(start_a, end_a):
                            row[n] = buf_a[t]
                            n += 1
                        row[n] = sep_id
                        n += 1
                        for t in range(start_b, end_b):
                            row[n] = buf_b[t]
                            seg[n] = 1
                            n += 1
                        row[n] = sep_id
                        seg[n] = 1
                        n += 1
                        # Google's token masking.
                        num_candidates = 0
                        for p in range(n):
                            if row[p] != cls_id and row[p] != sep_id:
                                candidates[num_candidates] = p
                                num_candidates += 1
                        _shuffle(candidates[:num_candidates], mt, pos)
                        budget = int(np.rint(n * masked_lm_prob))
                        budget = min(max_predictions_per_seq, max(1, budget))
                        chosen = min(budget, num_candidates)
                        positions = candidates[:chosen].copy()
                        originals = np.empty(chosen, np.int32)
                        for c in range(chosen):
                            p = positions[c]
                            originals[c] = row[p]
                        for c in range(chosen):
                            p = positions[c]
                            if _random(mt, pos) < 0.8:
                                row[p] = mask_id
                            elif _random(mt, pos) >= 0.5:
                                row[p] = vocab_word_ids[_randbelow(num_vocab, mt, pos)]
                        sort = np.argsort(positions)
                        for c in range(chosen):
                            m_pos[count, c] = positions[sort[c]]
                            m_ids[count, c] = originals[sort[c]]
                        m_count[count] = chosen
                        lengths[count] = n
                        labels[count] = is_random_next
                        count += 1
                        chunk_len = 0
                        current_length = 0
                    i += 1
        final = np.arange(count)
        _shuffle(final, mt, pos)
        return (ids[final], lengths[final], segments[final], m_pos[final], m_ids[final],
                m_count[final], labels[final])

    @_njit
    def _grow1(a, capacity):
        out = np.zeros(capacity, a.dtype)
        out[:len(a)] = a
        return out

    @_njit
    def _grow2(a, capacity):
        out = np.zeros((capacity, a.shape[1]), a.dtype)
        out[:a.shape[0]] = a
        return out

    @_njit
    def _varint_size(v):
        size = 1
        while v >= 0x80:
            v >>= 7
            size += 1
        return size

    @_njit
    def _put_varint(buf, at, v):
        while v >= 0x80:
            buf[at] = (v & 0x7F) | 0x80
            v >>= 7
            at += 1
        buf[at] = v
        return at + 1

    @_njit
    def _entry_size(key_len, payload_len):
        """Bytes of one Features.feature map entry (tag and length included)."""
        value_list = 1 + _varint_size(payload_len) + payload_len
        feature = 1 + _varint_size(value_list) + value_list
        entry = 1 + _varint_size(key_len) + key_len + 1 + _varint_size(feature) + feature
        return 1 + _varint_size(entry) + entry

    @_njit
    def _put_entry_head(buf, at, key, list_tag, payload_len):
        """Writes an entry up to its payload; returns where the payload goes."""
        key_len = len(key)
        value_list = 1 + _varint_size(payload_len) + payload_len
        feature = 1 + _varint_size(value_list) + value_list
        entry = 1 + _varint_size(key_len) + key_len + 1 + _varint_size(feature) + feature
        buf[at] = 0x0A
        at = _put_varint(buf, at + 1, entry)
        buf[at] = 0x0A
        at = _put_varint(buf, at + 1, key_len)
        for k in range(key_len):
            buf[at + k] = key[k]
        at += key_len
        buf[at] = 0x12
        at = _put_varint(buf, at + 1, feature)
        buf[at] = list_tag
        at = _put_varint(buf, at + 1, value_list)
        buf[at] = 0x0A
        return _put_varint(buf, at + 1, payload_len)

    @_njit
    def _ints_size(values, count):
        size = 0
        for k in range(count):
            size += _varint_size(values[k])
        return size

    @_njit
    def _put_ints(buf, at, values, count):
        for k in range(count):
            at = _put_varint(buf, at, values[k])
        return at

    @_njit
    def _serialize(ids, lengths, segments, m_pos, m_ids, m_count, labels, key_bytes,
                   key_offsets):
        """Serialised tf.train.Examples of all instances: (bytes uint8[], offsets int64[N+1]).

        The feature names, in sorted order (input_ids, input_mask,
        masked_lm_ids, masked_lm_positions, masked_lm_weights,
        next_sentence_labels, segment_ids), are key_bytes[key_offsets[k]:
        key_offsets[k + 1]].
        """
        keys = [key_bytes[key_offsets[k]:key_offsets[k + 1]] for k in range(7)]
        num, seq = ids.shape
        preds = m_pos.shape[1]
        sizes = np.empty(num, np.int64)
        # Zero padding and 0/1 values are one byte each.
        for r in range(num):
            n = lengths[r]
            k = m_count[r]
            body = (_entry_size(len(keys[0]), _ints_size(ids[r], n) + (seq - n)) +
                    _entry_size(len(keys[1]), seq) +
                    _entry_size(len(keys[2]), _ints_size(m_ids[r], k) + (preds - k)) +
                    _entry_size(len(keys[3]), _ints_size(m_pos[r], k) + (preds - k)) +
                    _entry_size(len(keys[4]), 4 * preds) +
                    _entry_size(len(keys[5]), 1) +
                    _entry_size(len(keys[6]), seq))
            sizes[r] = 1 + _varint_size(body) + body
        offsets = np.zeros(num + 1, np.int64)
        for r in range(num):
            offsets[r + 1] = offsets[r] + sizes[r]
        buf = np.zeros(offsets[num], np.uint8)
        one = np.array([1.0], np.float32).view(np.uint8)
        for r in range(num):
            n = lengths[r]
            k = m_count[r]
            at = offsets[r]
            buf[at] = 0x0A
            at = _put_varint(buf, at + 1, sizes[r] - 1 - _varint_size(sizes[r] - 1))
            # Zero bytes are already there: padding is skipped over.
            size = _ints_size(ids[r], n)
            at = _put_entry_head(buf, at, keys[0], 0x1A, size + (seq - n))
            at = _put_ints(buf, at, ids[r], n) + (seq - n)
            at = _put_entry_head(buf, at, keys[1], 0x1A, seq)
            for t in range(n):
                buf[at + t] = 1
            at += seq
            size = _ints_size(m_ids[r], k)
            at = _put_entry_head(buf, at, keys[2], 0x1A, size + (preds - k))
            at = _put_ints(buf, at, m_ids[r], k) + (preds - k)
            size = _ints_size(m_pos[r], k)
            at = _put_entry_head(buf, at, keys[3], 0x1A, size + (preds - k))
            at = _put_ints(buf, at, m_pos[r], k) + (preds - k)
            at = _put_entry_head(buf, at, keys[4], 0x12, 4 * preds)
            for t in range(k):
                for b in range(4):
                    buf[at + 4 * t + b] = one[b]
            at += 4 * preds
            at = _put_entry_head(buf, at, keys[5], 0x1A, 1)
            buf[at] = labels[r]
            at += 1
            at = _put_entry_head(buf, at, keys[6], 0x1A, seq)
            for t in range(n):
                buf[at + t] = segments[r, t]
            at += seq
        return buf, offsets


    @_njit
    def _crc32c(table, data, start, end):
        """CRC-32C of data[start:end], slicing by 8 (tables from `_crc32c_tables`)."""
        crc = np.uint32(0xFFFFFFFF)
        i = start
        while i + 8 <= end:
            crc ^= (np.uint32(data[i]) | (np.uint32(data[i + 1]) << 8) |
                    (np.uint32(data[i + 2]) << 16) | (np.uint32(data[i + 3]) << 24))
            crc = (table[7, crc & 0xFF] ^ table[6, (crc >> 8) & 0xFF] ^
                   table[5, (crc >> 16) & 0xFF] ^ table[4, crc >> 24] ^
                   table[3, data[i + 4]] ^ table[2, data[i + 5]] ^
                   table[1, data[i + 6]] ^ table[0, data[i + 7]])
            i += 8
        while i < end:
            crc = table[0, (crc ^ data[i]) & 0xFF] ^ (crc >> 8)
            i += 1
        return crc ^ np.uint32(0xFFFFFFFF)

    @_njit
    def _put_masked_crc(out, at, crc):
        masked = (((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)) & np.uint32(0xFFFFFFFF)
        for b in range(4):
            out[at + b] = (masked >> (8 * b)) & 0xFF

    @_njit
    def _frame(table, records, offsets):
        """TFRecord framing of every record (length, its masked CRC, data, data's CRC)."""
        num = len(offsets) - 1
        out = np.empty(offsets[num] + 16 * num, np.uint8)
        at = 0
        for r in range(num):
            length = offsets[r + 1] - offsets[r]
            for b in range(8):
                out[at + b] = (length >> (8 * b)) & 0xFF
            _put_masked_crc(out, at + 8, _crc32c(table, out, at, at + 8))
            out[at + 12:at + 12 + length] = records[offsets[r]:offsets[r + 1]]
            _put_masked_crc(out, at + 12 + length,
                            _crc32c(table, records, offsets[r], offsets[r + 1]))
            at += 16 + length
        return out


def _crc32c_tables():
    """Slicing-by-8 tables of CRC-32C (reflected polynomial 0x82F63B78)."""
    table = np.zeros((8, 256), np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[0, byte] = crc
    for k in range(1, 8):
        for byte in range(256):
            previous = int(table[k - 1, byte])
            table[k, byte] = (previous >> 8) ^ int(table[0, previous & 0xFF])
    return table


_CRC32C_TABLES = _crc32c_tables()


FEATURE_KEYS = ("input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions",
                "masked_lm_weights", "next_sentence_labels", "segment_ids")
# The keys as one byte array: key k is _KEY_BYTES[_KEY_OFFSETS[k]:_KEY_OFFSETS[k + 1]].
_KEY_BYTES = np.frombuffer("".join(FEATURE_KEYS).encode("ascii"), np.uint8).copy()
_KEY_OFFSETS = np.cumsum([0] + [len(k) for k in FEATURE_KEYS]).astype(np.int64)


class ChunkInstances(object):
    """The instances of one chunk as arrays, in their final order, and their records."""

    def __init__(self, arrays, records, offsets):
        (self.input_ids, self.lengths, self.segment_ids, self.masked_lm_positions,
         self.masked_lm_ids, self.masked_counts, self.labels) = arrays
        self.records = records
        self.offsets = offsets

    def __len__(self):
        return len(self.lengths)

    def examples(self):
        """The serialised tf.train.Examples, as a list of bytes."""
        data = self.records.tobytes()
        offsets = self.offsets.tolist()
        return [data[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)]

    def tfrecord_bytes(self):
        """All records framed as a TFRecord file holds them, in order (bytes)."""
        with termination.graceful():
            return _frame(_CRC32C_TABLES, self.records, self.offsets).tobytes()


def create_chunk_instances(rng, tokens, sent_offsets, doc_offsets, dupe_factor,
                           max_seq_length, short_seq_prob, masked_lm_prob,
                           max_predictions_per_seq, vocab_word_ids, cls_id, sep_id, mask_id):
    """Google's NSP + token-masking instances of one chunk, and their records.

    Args:
      rng: the chunk's `random.Random`; its state is read, not advanced.
      tokens: int32 token ids of every sentence, concatenated.
      sent_offsets: int64 [num_sentences + 1]: sentence s is
        tokens[sent_offsets[s]:sent_offsets[s + 1]] (non-empty).
      doc_offsets: int64 [num_documents + 1]: document d is sentences
        doc_offsets[d] .. doc_offsets[d + 1] - 1 (at least one).
      vocab_word_ids: int32, the id of each vocabulary word in file order
        (what a random replacement ``vocab_words[randint(...)]`` becomes).

    Returns:
      a `ChunkInstances`, or None should the compiled generator's state
      after the chunk differ from Python's (`state_matches`): then the
      caller takes the Python path.
    """
    with termination.graceful():
        return _create_chunk_instances(
            rng, tokens, sent_offsets, doc_offsets, dupe_factor, max_seq_length,
            short_seq_prob, masked_lm_prob, max_predictions_per_seq, vocab_word_ids, cls_id,
            sep_id, mask_id)


def _create_chunk_instances(rng, tokens, sent_offsets, doc_offsets, dupe_factor,
                            max_seq_length, short_seq_prob, masked_lm_prob,
                            max_predictions_per_seq, vocab_word_ids, cls_id, sep_id, mask_id):
    mt, pos = rng_state(rng)
    num_tokens = int(sent_offsets[-1])
    capacity = dupe_factor * (num_tokens // max(1, (max_seq_length - 3) // 2) +
                              len(doc_offsets))
    arrays = _create_instances(
        np.asarray(tokens, np.int32), np.asarray(sent_offsets, np.int64),
        np.asarray(doc_offsets, np.int64), mt, pos, int(dupe_factor), int(max_seq_length),
        float(short_seq_prob), float(masked_lm_prob), int(max_predictions_per_seq),
        np.asarray(vocab_word_ids, np.int32), int(cls_id), int(sep_id), int(mask_id),
        int(capacity))
    if not state_matches(rng, mt, pos):
        return None
    records, offsets = _serialize(*arrays, _KEY_BYTES, _KEY_OFFSETS)
    return ChunkInstances(arrays, records, offsets)


_self_check_result = None


def self_check():
    """Whether Python's `random` consumes generator outputs as this module does.

    Checked once per process, in Python, on Python's own generator:
    ``random()`` is two outputs, ``randrange``/``randint`` take the top
    ``n.bit_length()`` bits of one output with rejection, ``shuffle`` swaps
    with ``_randbelow(i + 1)`` from the end. The compiled generator itself is
    checked against Python's after every chunk (`state_matches`).
    """
    global _self_check_result
    if _self_check_result is None:
        _self_check_result = available() and _python_draws_as_modelled()
    return _self_check_result


def _python_draws_as_modelled():
    for seed in (0, 12345, "3/7"):
        reference = random.Random(seed)
        words = random.Random(seed)

        def below(n):
            shift = 32 - n.bit_length()
            r = words.getrandbits(32) >> shift
            while r >= n:
                r = words.getrandbits(32) >> shift
            return r

        def uniform():
            a, b = words.getrandbits(32) >> 5, words.getrandbits(32) >> 6
            return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)

        if any(reference.random() != uniform() for _ in range(20)):
            return False
        for n in (1, 2, 3, 5, 30522, 2 ** 31 + 11, 2 ** 32 - 1):
            for _ in range(30):
                if reference.randrange(n) != below(n) or \
                        reference.randint(2, n + 1) != 2 + below(n):
                    return False
        values = list(range(100))
        reference.shuffle(values)
        ours = list(range(100))
        for i in range(len(ours) - 1, 0, -1):
            j = below(i + 1)
            ours[i], ours[j] = ours[j], ours[i]
        if ours != values or reference.random() != uniform():
            return False
    return True


def warm_up():
    """Compiles (or loads from numba's on-disk cache) every kernel a run uses.

    A run does this by itself on first use; the tests call it once up front,
    under a lock, so that parallel test processes and the scripts they start
    do not each compile the same kernels.
    """
    if not available():
        return
    tokens = np.arange(5, 45, dtype=np.int32)
    made = create_chunk_instances(
        random.Random(0), tokens, np.arange(0, 41, 4, dtype=np.int64),
        np.array([0, 3, 6, 10], np.int64), 1, 16, 0.1, 0.15, 3,
        np.arange(50, dtype=np.int32), 1, 2, 3)
    if made is not None:
        made.tfrecord_bytes()
    from data.tokenizers import ascii_wordpiece  # pylint: disable=g-import-not-at-top
    ascii_wordpiece.warm_up()

