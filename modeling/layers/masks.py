"""Attention masks are data: `[batch or 1, seq_q, seq_k]` tensors, 1 = may attend.

Combine them by multiplication: `padding_attention_mask(m) *
causal_attention_mask(t)` lets each position see the real positions at or
before it. UNILM's seq-to-seq or XLNet's stream masks are built the same way
by the families that need them; the attention layer takes any of them.
"""

import tensorflow as tf

__all__ = ["causal_attention_mask", "padding_attention_mask"]


def padding_attention_mask(input_mask, dtype="float32"):
    """Turns a `[batch, seq]` 1-real/0-pad mask into an attention mask.

    Returns `[batch, 1, seq]`: every query position may attend to every real
    key position. It broadcasts against `[batch, seq_q, seq_k]` masks, so
    `padding_attention_mask(m) * causal_attention_mask(t)` combines both.
    """
    mask = tf.cast(input_mask, dtype)
    return mask[:, tf.newaxis, :]


def causal_attention_mask(seq_length, dtype="float32"):
    """A `[1, seq, seq]` lower-triangular mask: position i sees j <= i.

    Args:
        seq_length: Python int or scalar tensor.
    """
    ones = tf.ones([seq_length, seq_length], dtype=dtype)
    return tf.linalg.band_part(ones, -1, 0)[tf.newaxis, :, :]


