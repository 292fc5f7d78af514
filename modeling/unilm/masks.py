"""UNILM's self-attention masks: one Transformer, four language models.

UNILM (Dong et al. 2019) trains one shared Transformer as four language
models at once; what differs is only which positions a token may attend to
(1 = may attend, as every mask of `modeling.layers.masks`):

    bidirectional   every real token sees every real token (BERT's cloze)
    left_to_right   position i sees j <= i
    right_to_left   position i sees j >= i
    seq2seq         source tokens ([CLS] A [SEP]) see the source only; target
                    tokens (B [SEP], those of the target segment id) see the
                    source and the target up to and including themselves

Padding keys are never visible. The masks are `[batch, seq, seq]` data fed to
the encoder as the `attention_mask` feature (`modeling.encoder`), so the
BERT encoder runs every mode unchanged and a BERT checkpoint initialises
UNILM directly.

Modes are ints (`MODES`); `sample_modes` draws them with the paper's mix
(1/3 bidirectional, 1/3 seq2seq, 1/6 each direction) from a stateless seed.

Segment ids are the LM identifier ("we use different segment embeddings for
different LM objectives"): `SEGMENT_IDS["paper"]`, the ids of the authors'
loaders with `--new_segment_ids` (bidirectional pairs A 0 / B 1, the
left-to-right stream 2, the right-to-left stream 3, seq2seq source 4 /
target 5; `type_vocab_size` 6). `SEGMENT_IDS["two"]` keeps BERT's two types
(pairs 0/1 in every pair mode, single streams 0) for a config or checkpoint
with `type_vocab_size` 2, which this project does not widen on load.
"""

import tensorflow as tf

__all__ = ["BIDIRECTIONAL", "LEFT_TO_RIGHT", "MODES", "PAPER_MIX", "RIGHT_TO_LEFT",
           "SEGMENT_IDS", "SEQ2SEQ", "attention_mask", "check_segment_ids",
           "check_type_vocab_size", "sample_modes", "segment_table", "target_segment_id"]

BIDIRECTIONAL, LEFT_TO_RIGHT, RIGHT_TO_LEFT, SEQ2SEQ = 0, 1, 2, 3
MODES = {"bidirectional": BIDIRECTIONAL, "left_to_right": LEFT_TO_RIGHT,
         "right_to_left": RIGHT_TO_LEFT, "seq2seq": SEQ2SEQ}
# Shares of the modes, in the order of their ids.
PAPER_MIX = (1.0 / 3, 1.0 / 6, 1.0 / 6, 1.0 / 3)
# Modes trained on one text stream `[CLS] text [SEP]` (the others on pairs).
SINGLE_STREAM_MODES = (LEFT_TO_RIGHT, RIGHT_TO_LEFT)

# (first segment id, second segment id) of each mode, in the order of the mode
# ids; a single-stream mode's tokens all take the first.
SEGMENT_IDS = {
    "paper": ((0, 1), (2, 2), (3, 3), (4, 5)),
    "two": ((0, 1), (0, 0), (0, 0), (0, 1)),
}


def check_segment_ids(scheme, where="unilm_segment_ids"):
    if scheme not in SEGMENT_IDS:
        raise ValueError("%s: expected one of %s, got %r"
                         % (where, ", ".join(map(repr, SEGMENT_IDS)), scheme))
    return scheme


def segment_table(scheme):
    """Int32 `[4, 2]`: the (first, second) segment ids of each mode."""
    return tf.constant(SEGMENT_IDS[check_segment_ids(scheme)], tf.int32)


def target_segment_id(scheme):
    """The segment id of seq2seq target tokens (5 "paper", 1 "two")."""
    return SEGMENT_IDS[check_segment_ids(scheme)][SEQ2SEQ][1]


def min_type_vocab_size(scheme):
    return 1 + max(max(pair) for pair in SEGMENT_IDS[check_segment_ids(scheme)])


def check_type_vocab_size(config, scheme):
    """A one-line error when `config.type_vocab_size` cannot embed `scheme`'s ids."""
    need = min_type_vocab_size(scheme)
    have = getattr(config, "type_vocab_size", None)
    if have is None or have < need:
        raise ValueError("type_vocab_size=%s: unilm_segment_ids=%r needs at least %d token "
                         "types (one per LM: %s); use a config with type_vocab_size >= %d or "
                         "the recipe data option unilm_segment_ids=\"two\""
                         % (have, scheme, need, SEGMENT_IDS[scheme], need))


def attention_mask(modes, segment_ids, input_mask, dtype=tf.float32, target_id=1):
    """The `[batch, seq, seq]` attention masks of a batch.

    Args:
        modes: int `[batch]` (or a scalar for the whole batch), ids of `MODES`.
        segment_ids: int `[batch, seq]`; in seq2seq rows the tokens of
            `target_id` are the target, the others the source.
        input_mask: `[batch, seq]`, 1 real / 0 padding.
        dtype: of the result.
        target_id: the seq2seq target's segment id (`target_segment_id`:
            5 with the paper's ids, 1 with two).
    """
    segment_ids = tf.convert_to_tensor(segment_ids)
    seq = tf.shape(segment_ids)[1]
    batch = tf.shape(segment_ids)[0]
    rows = tf.range(seq)[:, tf.newaxis]
    cols = tf.range(seq)[tf.newaxis, :]
    lower = tf.cast(cols <= rows, dtype)[tf.newaxis]          # [1, seq, seq]
    upper = tf.cast(cols >= rows, dtype)[tf.newaxis]
    full = tf.ones_like(lower)
    target = tf.cast(tf.equal(segment_ids, target_id), dtype)         # [batch, seq]
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
