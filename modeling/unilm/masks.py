"""UNILM's self-attention masks: one Transformer, four language models.

UNILM (Dong et al. 2019) trains one shared Transformer as four language
models at once; what differs is only which positions a token may attend to
(1 = may attend, as every mask of `modeling.layers.masks`):

    bidirectional   every real token sees every real token (BERT's cloze)
    left_to_right   position i sees j <= i
    right_to_left   position i sees j >= i
    seq2seq         source tokens (segment 0: [CLS] A [SEP]) see the source
                    only; target tokens (segment 1: B [SEP]) see the source
                    and the target up to and including themselves

Padding keys are never visible. The masks are `[batch, seq, seq]` data fed to
the encoder as the `attention_mask` feature (`modeling.encoder`), so the
BERT encoder runs every mode unchanged and a BERT checkpoint initialises
UNILM directly.

Modes are ints (`MODES`); `sample_modes` draws them with the paper's mix
(1/3 bidirectional, 1/3 seq2seq, 1/6 each direction) from a stateless seed.
"""

import tensorflow as tf

__all__ = ["BIDIRECTIONAL", "LEFT_TO_RIGHT", "MODES", "PAPER_MIX", "RIGHT_TO_LEFT",
           "SEQ2SEQ", "attention_mask", "sample_modes"]

BIDIRECTIONAL, LEFT_TO_RIGHT, RIGHT_TO_LEFT, SEQ2SEQ = 0, 1, 2, 3
MODES = {"bidirectional": BIDIRECTIONAL, "left_to_right": LEFT_TO_RIGHT,
         "right_to_left": RIGHT_TO_LEFT, "seq2seq": SEQ2SEQ}
# Shares of the modes, in the order of their ids.
PAPER_MIX = (1.0 / 3, 1.0 / 6, 1.0 / 6, 1.0 / 3)


def attention_mask(modes, segment_ids, input_mask, dtype=tf.float32):
    """The `[batch, seq, seq]` attention masks of a batch.

    Args:
        modes: int `[batch]` (or a scalar for the whole batch), ids of `MODES`.
        segment_ids: int `[batch, seq]`; 0 = source, 1 = target (seq2seq).
        input_mask: `[batch, seq]`, 1 real / 0 padding.
        dtype: of the result.
    """
    segment_ids = tf.convert_to_tensor(segment_ids)
    seq = tf.shape(segment_ids)[1]
    batch = tf.shape(segment_ids)[0]
    rows = tf.range(seq)[:, tf.newaxis]
    cols = tf.range(seq)[tf.newaxis, :]
    lower = tf.cast(cols <= rows, dtype)[tf.newaxis]          # [1, seq, seq]
    upper = tf.cast(cols >= rows, dtype)[tf.newaxis]
    full = tf.ones_like(lower)
    target = tf.cast(tf.equal(segment_ids, 1), dtype)         # [batch, seq]
    target_query = target[:, :, tf.newaxis]
    target_key = target[:, tf.newaxis, :]
    seq2seq = (1.0 - target_key) + target_query * target_key * lower
    modes = tf.broadcast_to(tf.cast(modes, tf.int32), [batch])
    per_mode = tf.stack([tf.broadcast_to(m, [batch, seq, seq])
                         for m in (full, lower, upper, seq2seq)], axis=1)
    mask = tf.gather(per_mode, modes, axis=1, batch_dims=1)
    keys = tf.cast(input_mask, dtype)[:, tf.newaxis, :]
    return mask * keys


def sample_modes(batch_size, seed, mix=PAPER_MIX):
    """Int32 `[batch_size]` modes drawn with probabilities `mix`.

    Args:
        seed: a stateless seed, int `[2]` (the same seed draws the same modes).
        mix: four non-negative weights, in the order of the mode ids.
    """
    logits = tf.math.log(tf.constant([list(mix)], tf.float32))
    draws = tf.random.stateless_categorical(logits, batch_size, seed, dtype=tf.int32)
    return draws[0]
