"""Features and fill-mask from a published model folder of any family, with HF's tokens.

`run/extract_features.py` and `run/predict_masked.py` read Google's files
(a WordPiece `vocab.txt`, a `bert_config.json`) through `inference`. A
published HF or keras-hub folder brings its own config and tokenizer
instead, and the family comes from the folder (`modeling.pretrained`): a
RoBERTa's byte-level BPE with `<s> a </s></s> b </s>`, an ALBERT's
SentencePiece, a DistilBERT, an XLNet, a GPT or GPT-2 are read the way HF
reads them, and fed to the family's encoder through the encoder contract
(`modeling.encoder`). Nothing here names a family: what differs between
them is the folder's tokenizer (framing, pad id, mask token) and the
encoder's outputs (a pooler or not).

* `folder_features(folder, settings, layers)`: Google's extract_features
  records (`linex_index`, `features` of `token` and `layers`), the
  `mean_pooled_output` and, for families with a pooler whose weights the
  folder has, `pooled_output`.
  Tokens are the folder tokenizer's pieces, special tokens included, as
  HF's `convert_ids_to_tokens(tokenizer(a, b)["input_ids"])`.
* `folder_fill_mask(folder, settings, texts)`: `inference.fill_mask`'s
  records through the family's masked-LM head (RoBERTa's `lm_head`,
  ALBERT's `predictions`, DistilBERT's `vocab_projector`, BERT's `cls`).
  A text may write the mask as the folder's own token (`<mask>`) or as
  `[MASK]`, which stands for it.

Inputs longer than `max_seq_length` are cut longest-first
(`PretrainedTokenizer.pack`); a `[MASK]` cut off is an error, as in
`inference.fill_mask`.
"""

import numpy as np
import tensorflow as tf

from data import tokenization
from modeling import registry
from modeling.pretrained import folders
from modeling.serving import inference

__all__ = ["folder_features", "folder_fill_mask", "max_tokens"]


def max_tokens(config):
    """Most tokens one input may have under `config` (None: no learned position table).

    A config that knows better says so (`max_sequence_length`: RoBERTa's
    positions start past the padding id); else the position table's rows.
    """
    for name in ("max_sequence_length", "max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _check_length(config, settings, folder):
    limit = max_tokens(config)
    if limit is not None and settings.max_seq_length > limit:
        raise ValueError("--max_seq_length=%d exceeds the %d tokens the model of %s takes"
                         % (settings.max_seq_length, limit, folder.path))
    if settings.max_seq_length < 1:
        raise ValueError("--max_seq_length=%d: expected a positive number of tokens"
                         % settings.max_seq_length)


def _check_family(settings, folder):
    family = getattr(settings, "model_family", None)
    if family is not None and family != folder.family.name:
        raise ValueError("--model_family=%s, but %s is a %s model (leave --model_family out)"
                         % (family, folder.path, folder.family.name))


def _dtype(settings):
    if settings.precision not in inference.PRECISIONS:
        raise ValueError("--precision must be one of %s, got %r"
                         % (", ".join(inference.PRECISIONS), settings.precision))
    return "mixed_bfloat16" if settings.precision == "bf16" else None


def _int8_or_own(settings):
    """The precision `inference.Encoder` adds to the loaded model: "int8", or "fp32" (the
    model's own: bf16 is its build policy, `_dtype`)."""
    return "int8" if settings.precision == "int8" else "fp32"


def _split_pair(text):
    text_a, _, text_b = text.partition("|||")
    return text_a.strip(), (text_b.strip() if text_b else None)


def _batch(encoded_list, pad_id):
    """Right-padded int32 features of `Encoded` rows (the mask marks the real tokens)."""
    width = max(len(e.input_ids) for e in encoded_list)
    ids = np.full([len(encoded_list), width], pad_id, np.int32)
    mask = np.zeros([len(encoded_list), width], np.int32)
    segments = np.zeros([len(encoded_list), width], np.int32)
    for row, encoded in enumerate(encoded_list):
        n = len(encoded.input_ids)
        ids[row, :n] = encoded.input_ids
        mask[row, :n] = 1
        segments[row, :n] = encoded.segment_ids
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _load(folder, settings, objectives=()):
    """`(Pretrained, pooler_loaded)`: the folder's model and tokenizer, and whether the
    folder held the encoder's pooler (HF's task folders, `*ForMaskedLM`, and XLNet's
    `XLNetModel` have none: an encoder that has one keeps it as initialised, and its
    pooled output would be noise)."""
    from modeling import pretrained  # pylint: disable=import-outside-toplevel
    _check_family(settings, folder)
    dtype = _dtype(settings)
    if folder.kind == folders.KERAS_HUB:
        loaded = pretrained.load_pretrained(folder.checkpoint, objectives, dtype=dtype)
        _check_length(loaded.config, settings, folder)
        return loaded, True
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    config = folder.config()
    _check_length(config, settings, folder)
    from modeling.pretrained import loading  # pylint: disable=import-outside-toplevel
    model = loading.build_model(folder.family, config, objectives, dtype)
    encoder = getattr(model, "encoder", model)
    pooler = getattr(encoder, "pooler", None)
    before = [v.numpy().copy() for v in pooler.weights] if pooler is not None else []
    report = checkpoints.init_from_checkpoint(model, folder.checkpoint)
    pooler_loaded = pooler is not None and any(
        not np.array_equal(old, new.numpy()) for old, new in zip(before, pooler.weights))
    loaded = loading.Pretrained(model, folder.tokenizer(config), config, folder, report)
    return loaded, pooler_loaded


def _masked_lm_model(family):
    """HF's masked-LM class of `family` (its registered `HFFormat`), or None."""
    return (family.hf.architectures.get("masked_lm") if family.hf is not None else None)


def _masked_lm_families():
    return [name for name, family in registry.families.items() if _masked_lm_model(family)]


def folder_features(folder, settings, layers):
    """`run/extract_features.py` on a published folder: `(texts, records, "features")`.

    Args:
        folder: a `modeling.pretrained.folders.ModelFolder` (HF or keras-hub).
        settings: `inference.FeatureExtractionSettings`.
        layers: layer indexes (None: the last four, as Google's default).

    The records are computed as they are consumed; everything that can be
    wrong with the flags is found before the first one.
    """
    layers = list(layers or [-1, -2, -3, -4])
    loaded, pooler_loaded = _load(folder, settings)
    tokenizer = loaded.tokenizer
    texts = inference.read_input_lines(settings.input_file)
    encoded = [tokenizer.pack(*_split_pair(text), max_seq_length=settings.max_seq_length)
               for text in texts]
    compiled = inference.Encoder(loaded.model, _int8_or_own(settings))
    probe = compiled(_batch([encoded[0] if encoded else tokenizer.pack("")], tokenizer.pad_id))
    num_layers = len(probe["encoder_outputs"])
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise ValueError("--layers has %d but the model of %s has %d layers"
                             % (index, folder.path, num_layers))
    if settings.batch_size < 1:
        raise ValueError("--batch_size=%d: expected at least 1" % settings.batch_size)

    def run_batch(rows):
        chunk = [encoded[i] for i in rows]
        features = _batch(chunk, tokenizer.pad_id)
        outputs = compiled(features)
        all_layers = outputs["encoder_outputs"]
        mask = features["input_mask"].astype(np.float32)
        last = outputs["sequence_output"]
        mean = (last * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        records = []
        for row, (index_, item) in enumerate(zip(rows, chunk)):
            tokens = tokenizer.convert_ids_to_tokens(item.input_ids)
            record = {"linex_index": index_, "features": [
                {"token": token,
                 "layers": [{"index": index,
                             "values": [round(float(x), 6) for x in all_layers[index][row, i]]}
                            for index in layers]}
                for i, token in enumerate(tokens)]}
            if "pooled_output" in outputs and pooler_loaded:
                record["pooled_output"] = [round(float(x), 6)
                                           for x in outputs["pooled_output"][row]]
            record["mean_pooled_output"] = [round(float(x), 6) for x in mean[row]]
            records.append(record)
        return records

    def records():
        # Grouped by length (each batch padded to its longest text), in input order.
        yield from inference.in_input_order([len(e.input_ids) for e in encoded],
                                            settings.batch_size, run_batch,
                                            getattr(settings, "group_by_length", True))

    return texts, records(), "features"


def folder_fill_mask(folder, settings, texts):
    """`run/predict_masked.py` on a published folder: `inference.fill_mask`'s records.

    The family must have an HF masked-LM model (`masked_lm` among its
    `HFFormat.architectures`): XLNet's `<mask>` token has no head predicting
    it, and a family without that head's names would predict through an
    untrained one. The folder must hold the head (HF's `*ForMaskedLM`, not
    the bare encoder).

    Raises:
        ValueError: the family has no masked-LM head in the folder's format,
            the folder holds no such head, the folder's tokenizer has no
            mask token, `--top_k` < 1, or a mask was cut off by
            `--max_seq_length`.
    """
    if settings.top_k < 1:
        raise ValueError("--top_k=%r: expected at least 1 prediction per mask" % (settings.top_k,))
    masked_lm = _masked_lm_model(folder.family)
    if masked_lm is None:
        raise ValueError("%s is a %s model, which has no masked-LM head: predict_masked fills "
                         "masks with %s models" % (folder.path, folder.family.name,
                                                   ", ".join(_masked_lm_families())))
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    try:
        loaded, _ = _load(folder, settings, objectives=("masked_lm",))
    except checkpoints.CheckpointMismatchError as e:
        if e.hint is None or not e.missing:
            raise
        raise ValueError("%s holds no masked-LM head (%s is not in it): predict_masked needs "
                         "a masked-LM folder (HF's %s)" % (folder.path, e.missing[0][0],
                                                            masked_lm)) from None
    tokenizer = loaded.tokenizer
    if "mask" not in tokenizer.special_tokens:
        raise ValueError("%s: the %s tokenizer has no mask token: not a masked-LM model"
                         % (folder.path, folder.family.name))
    mask_token = tokenizer.special_tokens["mask"]
    mask_id = tokenizer.token_id("mask")
    probabilities = inference.masked_lm_probabilities(loaded.model, _int8_or_own(settings))
    results = []
    for index, text in enumerate(texts):
        written = text.replace(tokenization.MASK_TOKEN, mask_token)
        text_a, text_b = _split_pair(written)
        whole = tokenizer.pack(text_a, text_b)
        encoded = tokenizer.pack(text_a, text_b, max_seq_length=settings.max_seq_length)
        positions = [i for i, t in enumerate(encoded.input_ids) if t == mask_id]
        if len(positions) < whole.input_ids.count(mask_id):
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise ValueError("text %d (%r): a mask is beyond --max_seq_length=%d; expected "
                             "every mask within the first max_seq_length tokens (shorten the "
                             "text or raise --max_seq_length)"
                             % (index + 1, shown, settings.max_seq_length))
        tokens = tokenizer.convert_ids_to_tokens(encoded.input_ids)
        entry = {"text": text, "tokens": tokens, "masks": []}
        if positions:
            features = {name: tf.constant(value)
                        for name, value in _batch([encoded], tokenizer.pad_id).items()}
            probs = probabilities(features, tf.constant([positions], tf.int32))[0].numpy()
            entry["masks"] = inference.mask_predictions(positions, probs, settings.top_k,
                                                        tokenizer.inv_vocab)
        results.append(entry)
    return results
