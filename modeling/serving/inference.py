"""Inference helpers: fill-mask through the MLM head, and feature extraction.

`fill_mask` answers the question users keep asking about Google's BERT: the
sequence output is hidden-size wide, so how do I get the vocabulary-wide
prediction at each `[MASK]`? Through the pre-training MLM head (transform +
tied decoder + output bias), which Google's checkpoints carry as
`cls/predictions/*`. The text is tokenized around the literal ``[MASK]``
markers, so they become the `[MASK]` token instead of being split into
``[``, ``mask``, ``]`` as plain text would be.

`extract_features` reproduces Google's `extract_features.py` output: for each
input, every token with the activations of the requested layers.

Both pack their inputs with `data.packing` (``text_a ||| text_b`` is a pair),
the rules the fine-tuning data and the exported SavedModels use.
"""

import numpy as np
import tensorflow as tf

from data import packing
from data import tokenization


def tokenize_with_masks(tokenizer, text):
    """Tokenizes `text`, turning each literal ``[MASK]`` into the mask token."""
    tokens = []
    pieces = text.split(tokenization.MASK_TOKEN)
    for i, piece in enumerate(pieces):
        if i:
            tokens.append(tokenization.MASK_TOKEN)
        tokens.extend(tokenizer.tokenize(piece))
    return tokens


# The packer's former private name here (tests and notebooks call it):
# (tokens_a, tokens_b, max_seq_length) -> (tokens, segment_ids).
_pack = packing.pack


def _batch_features(token_lists, segment_lists, tokenizer, max_seq_length):
    """Packed token lists as a padded batch of model features (int32 tensors)."""
    id_lists = [tokenizer.convert_tokens_to_ids(tokens) for tokens in token_lists]
    features = packing.pad_batch(id_lists, segment_lists, max_seq_length)
    return {name: tf.constant(value) for name, value in features.items()}


def fill_mask(pretrainer, tokenizer, texts, top_k=5, max_seq_length=128):
    """Top-k vocabulary predictions at every ``[MASK]`` of each text.

    Args:
      pretrainer: a `BertPretrainer` with a "masked_lm" objective.
      tokenizer: a `FullTokenizer` of the model's vocabulary.
      texts: strings holding one or more literal ``[MASK]``; a ``|||``
        separates a second segment (``text_a ||| text_b``).
      top_k: predictions per mask.

    Returns:
      one dict per text: ``{"text", "tokens", "masks": [{"position",
      "predictions": [{"token", "probability"}]}]}``; `position` indexes
      `tokens` ([CLS] is 0).
    """
    head = pretrainer.get_objective("masked_lm").head
    encoder = pretrainer.encoder
    results = []
    for text in texts:
        text_a, _, text_b = text.partition("|||")
        tokens, segment_ids = packing.pack(tokenize_with_masks(tokenizer, text_a.strip()),
                                           tokenize_with_masks(tokenizer, text_b.strip())
                                           if text_b else None, max_seq_length)
        positions = [i for i, t in enumerate(tokens) if t == tokenization.MASK_TOKEN]
        entry = {"text": text, "tokens": tokens, "masks": []}
        if positions:
            features = _batch_features([tokens], [segment_ids], tokenizer, len(tokens))
            outputs = encoder(features, training=False)
            logits = head(outputs["sequence_output"], tf.constant([positions], tf.int32),
                          encoder.embedding_table)
            probs = tf.nn.softmax(tf.cast(logits[0], tf.float32), axis=-1).numpy()
            k = min(top_k, probs.shape[-1])
            for position, row in zip(positions, probs):
                best = np.argsort(-row, kind="stable")[:k]
                entry["masks"].append({
                    "position": position,
                    "predictions": [{"token": tokenizer.inv_vocab[int(i)],
                                     "probability": float(row[i])} for i in best]})
        results.append(entry)
    return results


def extract_features(encoder, tokenizer, texts, layers=(-1, -2, -3, -4), max_seq_length=128,
                     batch_size=32):
    """Google's extract_features output, plus pooled and mean-pooled vectors.

    Args:
      encoder: a `BertEncoder`.
      texts: strings; ``text_a ||| text_b`` for pairs.
      layers: layer indexes into the encoder's layer outputs (-1 = last).

    Yields:
      one dict per text: ``{"linex_index", "features": [{"token", "layers":
      [{"index", "values"}]}], "pooled_output", "mean_pooled_output"}``.
    """
    packed = []
    for text in texts:
        text_a, _, text_b = text.partition("|||")
        packed.append(packing.pack(tokenizer.tokenize(text_a.strip()),
                                   tokenizer.tokenize(text_b.strip()) if text_b else None,
                                   max_seq_length))
    for start in range(0, len(packed), batch_size):
        chunk = packed[start:start + batch_size]
        features = _batch_features([t for t, _ in chunk], [s for _, s in chunk], tokenizer,
                                   max(len(t) for t, _ in chunk))
        outputs = encoder(features, training=False)
        all_layers = [o.numpy() for o in outputs["encoder_outputs"]]
        pooled = outputs["pooled_output"].numpy()
        mask = features["input_mask"].numpy().astype(np.float32)
        last = outputs["sequence_output"].numpy()
        mean = (last * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        for row, (tokens, _) in enumerate(chunk):
            token_features = []
            for i, token in enumerate(tokens):
                token_features.append({
                    "token": token,
                    "layers": [{"index": index,
                                "values": [round(float(x), 6) for x in all_layers[index][row, i]]}
                               for index in layers]})
            yield {"linex_index": start + row, "features": token_features,
                   "pooled_output": [round(float(x), 6) for x in pooled[row]],
                   "mean_pooled_output": [round(float(x), 6) for x in mean[row]]}
