"""XLNet's fine-tuning input: `A <sep> B <sep> <cls>`, left padded, no permutation.

XLNet puts the classification token LAST (zihangdai/xlnet `classifier_utils
.convert_single_example`), so that with left padding it is always the final
position, where the network's sequence summary reads it (`pooled_output` of
`XLNetNetwork`: tanh(dense(last position))). For fine-tuning no `perm_mask`
and no `target_mapping` are given: every token sees the whole input and
there is no query stream.

    tokens       <pad> ... <pad>  a1 .. an <sep>  b1 .. bm <sep>  <cls>
    input_mask   0     ... 0      1  .. 1  1      1  .. 1  1      1
    segment_ids  4     ... 4      0  .. 0  0      1  .. 1  1      2

Segment ids are XLNet's (`SEG_ID_A` 0, `SEG_ID_B` 1, `SEG_ID_CLS` 2,
`SEG_ID_PAD` 4); the network only compares them (relative segment encoding:
same segment or not), so what matters is that A, B and `<cls>` differ. A
single text is `A <sep> <cls>`. Over-long pairs are truncated as XLNet and
BERT do: one token at a time from the end of the longer text.

    from data.tokenizers.sentencepiece import SentencePieceTokenizer
    tokenizer = SentencePieceTokenizer("spiece.model")
    features = pack_text_pair(tokenizer, "premise", "hypothesis", max_seq_length=128)
    logits = BertClassifier(XLNetNetwork(...), num_labels=3)(batch_of(features))
"""

import numpy as np

__all__ = ["SEG_ID_A", "SEG_ID_B", "SEG_ID_CLS", "SEG_ID_PAD", "pack_pair", "pack_text_pair"]

SEG_ID_A, SEG_ID_B, SEG_ID_CLS, SEG_ID_PAD = 0, 1, 2, 4


def _truncate_pair(ids_a, ids_b, budget):
    ids_a, ids_b = list(ids_a), list(ids_b)
    while len(ids_a) + len(ids_b) > budget:
        if len(ids_a) > len(ids_b):
            ids_a.pop()
        else:
            ids_b.pop()
    return ids_a, ids_b


def pack_pair(ids_a, ids_b, max_seq_length, sep_id, cls_id, pad_id):
    """Packs token ids as `A <sep> [B <sep>] <cls>`, left padded to `max_seq_length`.

    Args:
        ids_a: ids of the first text.
        ids_b: ids of the second text, or None for a single text.
        max_seq_length: the packed length.
        sep_id, cls_id, pad_id: ids of `<sep>`, `<cls>`, `<pad>`
            (`SentencePieceTokenizer.special_ids()`).

    Returns:
        dict of int32 NumPy arrays `[max_seq_length]`: `input_ids`,
        `input_mask` (1 real), `segment_ids`.
    """
    specials = 2 if ids_b is None else 3
    if max_seq_length < specials + 1:
        raise ValueError("max_seq_length=%d cannot hold XLNet's %d special tokens and a token "
                         "of text" % (max_seq_length, specials))
    ids_a, ids_b = _truncate_pair(ids_a, ids_b or [], max_seq_length - specials)
    tokens = list(ids_a) + [sep_id]
    segments = [SEG_ID_A] * len(tokens)
    if specials == 3:
        tokens += list(ids_b) + [sep_id]
        segments += [SEG_ID_B] * (len(ids_b) + 1)
    tokens.append(cls_id)
    segments.append(SEG_ID_CLS)
    pad = max_seq_length - len(tokens)
    return {
        "input_ids": np.array([pad_id] * pad + tokens, np.int32),
        "input_mask": np.array([0] * pad + [1] * len(tokens), np.int32),
        "segment_ids": np.array([SEG_ID_PAD] * pad + segments, np.int32),
    }


def pack_text_pair(tokenizer, text_a, text_b, max_seq_length):
    """`pack_pair` of two texts through a `SentencePieceTokenizer` (`text_b` may be None)."""
    special = tokenizer.special_ids()
    missing = [s for s in ("<sep>", "<cls>", "<pad>") if s not in special]
    if missing:
        raise ValueError("%s: the SentencePiece model has no %s piece(s); expected XLNet's "
                         "special symbols" % (tokenizer.model_file, ", ".join(missing)))
    ids_b = None if text_b is None else tokenizer.encode(text_b)
    return pack_pair(tokenizer.encode(text_a), ids_b, max_seq_length, special["<sep>"],
                     special["<cls>"], special["<pad>"])
