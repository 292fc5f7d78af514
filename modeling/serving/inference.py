"""Inference helpers: fill-mask through the MLM head, and feature extraction.

`fill_mask` answers the question users keep asking about Google's BERT: the
sequence output is hidden-size wide, so how do I get the vocabulary-wide
prediction at each `[MASK]`? Through the pre-training MLM head (transform +
tied decoder + output bias), which Google's checkpoints carry as
`cls/predictions/*`. The text is tokenized around the literal ``[MASK]``
markers, so they become the `[MASK]` token instead of being split into
``[``, ``mask``, ``]`` as plain text would be.

`extract_features` reproduces Google's `extract_features.py` output: for each
input, every token with the activations of the requested layers
(`encoder_features_from_files`: from a family's files, what
`run/extract_features.py` runs for BERT and ALBERT).

Both pack their inputs with `data.packing` (``text_a ||| text_b`` is a pair),
the rules the fine-tuning data and the exported SavedModels use.

What the scripts around them check first: `check_vocab_fits` (the vocabulary
file is the model's; `wordpiece_encoder` builds an encoder and its tokenizer
so checked), `read_input_lines` (an input file of UTF-8 text, with file, line
and column of a bad byte).
"""

import contextlib
import dataclasses
from typing import List, Optional

import keras
import numpy as np
import tensorflow as tf

from data import corpus
from data import packing
from data import tokenization
from modeling import registry
from modeling.serving import quantization
from modeling.training.options import option


PRECISIONS = ("fp32", "bf16", "int8")
_FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")


def with_precision(model, precision):
    """`model` itself for "fp32"; for "bf16" a copy that computes in bfloat16;
    for "int8" the model with its Dense products in int8.

    "bf16" is `modeling.serving.quantization.LowPrecisionModel`: the Dense
    products in bfloat16 (AVX512-BF16 / AMX on CPUs that have them, tensor
    cores on GPUs) with their kernels cast to bf16 once, the rest of the
    model in float32, and products of fewer than
    `quantization.BF16_MIN_ROWS` rows in float32, where oneDNN's bf16 kernels
    are no faster than its fp32 ones (so bf16 is never slower than fp32).
    A model without Dense layers (an LSTM network) gets instead a copy rebuilt
    from its config under Keras's ``mixed_bfloat16`` policy with the same
    weights.

    "int8" is `modeling.serving.quantization.Int8Model`: dynamic-range
    quantisation of the Dense products (weights once, activations per call)
    through oneDNN's int8 kernels; it raises `quantization.Int8Unavailable`
    (one line) without oneDNN or for a model without such layers.
    """
    if precision not in PRECISIONS:
        raise ValueError("precision (--precision) must be one of %s, got %r"
                         % (", ".join(PRECISIONS), precision))
    if precision == "int8":
        return quantization.int8_model(model)
    if precision == "fp32" or keras.mixed_precision.global_policy().name == "mixed_bfloat16":
        return model
    if any(quantization.quantizable(layer) for layer in quantization.sublayers(model)):
        return quantization.bf16_model(model)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        config = dict(model.get_config())
        config.pop("dtype", None)  # the float32 policy it was built with
        copy = type(model).from_config(config)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    dummy = tf.zeros([1, 2], tf.int32)
    copy({"input_ids": dummy, "input_mask": dummy + 1, "segment_ids": dummy}, training=False)
    copy.set_weights(model.get_weights())
    return copy


class Encoder(object):
    """A BERT-shaped encoder as one compiled function, for low-latency inference.

    ``Encoder(encoder)(features)`` gives what ``encoder(features,
    training=False)`` gives, as numpy arrays, but: the call is one traced
    TensorFlow function for any batch size and length (no eager op
    dispatch, no retracing), and the inputs are cut to the longest row of
    the batch (by `input_mask`) before the encoder runs and the sequence
    outputs padded back after, so padding to `max_seq_length` costs nothing.

    Args:
      encoder: a model called as ``encoder({"input_ids", "input_mask",
        "segment_ids"}, training=False)`` returning a dict of tensors.
      precision: "fp32", "bf16" or "int8" (see `with_precision`).
    """

    def __init__(self, encoder, precision="fp32"):
        self.encoder = with_precision(encoder, precision)
        self.precision = precision
        spec = tf.TensorSpec([None, None], tf.int32)
        self._call = tf.function(self._forward, input_signature=[
            {name: spec for name in _FEATURE_NAMES}])

    def _forward(self, features):
        return tf.nest.map_structure(
            lambda t: tf.cast(t, tf.float32) if t.dtype.is_floating else t,
            call_trimmed(self.encoder, features))

    def __call__(self, features):
        features = {name: tf.cast(features[name], tf.int32) for name in _FEATURE_NAMES}
        outputs = self._call(features)
        return tf.nest.map_structure(lambda t: t.numpy(), outputs)


def call_trimmed(model, features):
    """``model(features, training=False)`` with the padding columns cut off first.

    Features padded to a fixed length (``[batch, max_seq_length]``) are cut
    to the longest row of the batch (by `input_mask`, so padding must be at
    the end, as `data.packing` puts it); outputs with a sequence axis
    (``[batch, length, hidden]``; attention probabilities ``[batch, heads,
    length, length]`` on their last two axes) are padded back with zeros, so
    the result has
    the shapes of the uncut call and the same values at every real token
    (padded positions get zeros instead of values nobody should read).
    """
    length = tf.shape(features["input_ids"])[1]
    used = tf.reduce_max(tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1))
    used = tf.clip_by_value(used, 1, length)
    trimmed = {name: (value[:, :used] if value.shape.rank == 2 else value)
               for name, value in features.items()}
    outputs = model(trimmed, training=False)

    def pad_back(tensor):
        rank = tensor.shape.rank if tf.is_tensor(tensor) else None
        extra = [0, length - used]
        if rank == 3:
            return tf.pad(tensor, [[0, 0], extra, [0, 0]])
        if rank == 4:
            return tf.pad(tensor, [[0, 0], [0, 0], extra, extra])
        return tensor

    return tf.nest.map_structure(pad_back, outputs)


def check_vocab_fits(num_vocab_tokens, config_vocab_size, vocab_file, config_file=None):
    """Raises `tokenization.VocabError` unless the vocabulary has exactly vocab_size tokens.

    A vocabulary with fewer tokens than the model's ``vocab_size`` is not an
    error TensorFlow sees: its ids all index the embedding table, but the
    rows of another vocabulary, so features (extract_features) belong to
    other tokens and fill-mask predictions name other tokens (or ids the
    file does not have). More tokens give ids past the table, which the CPU
    refuses mid-run and a GPU silently reads as zeros. Hence the rule
    `run/predict_masked.py` has always applied: exactly as many tokens as
    ``vocab_size``.

    Args:
      num_vocab_tokens: tokens in the vocabulary file (``len(tokenizer.vocab)``).
      config_vocab_size: the model config's ``vocab_size``.
      vocab_file: the vocabulary's path (``--vocab_file``), for the message.
      config_file: the config's path (``--bert_config_file``), or None.
    """
    if num_vocab_tokens != config_vocab_size:
        raise tokenization.VocabError(
            "--vocab_file=%s has %d tokens but %s says vocab_size=%d; expected the "
            "vocabulary of this model (exactly vocab_size tokens)"
            % (vocab_file, num_vocab_tokens,
               "--bert_config_file=%s" % config_file if config_file else "the model config",
               config_vocab_size))


def wordpiece_encoder(family, config, vocab_file, do_lower_case, init_checkpoint=None,
                      config_file=None):
    """`(encoder, tokenizer)`: the `family`'s encoder of `config` with `init_checkpoint`'s
    weights (None keeps random ones) and Google's WordPiece tokenizer of `vocab_file`,
    checked to fit the config (`check_vocab_fits`; `config_file` names it in the message).
    """
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    check_vocab_fits(len(tokenizer.vocab), config.vocab_size, vocab_file, config_file)
    encoder = family.build_encoder(config)
    if init_checkpoint:
        checkpoints.init_from_checkpoint(encoder, init_checkpoint)
    return encoder, tokenizer


def read_input_lines(path, skip_blank=False):
    """The lines of a UTF-8 text file, without their line ends.

    Args:
      path: the file (local, or remote through `tf.io.gfile`).
      skip_blank: leave out blank lines (fill-mask); by default every line
        is kept, so an output's index is the input's line number - 1 (as in
        Google's extract_features).

    Raises:
      ValueError ``"FILE:LINE: not valid UTF-8 (byte 0x.. at column N)"``.
    """
    lines = []
    with corpus.open_file(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError("%s:%d: not valid UTF-8 (byte 0x%02x at column %d); "
                                 "expected UTF-8 text, one input per line"
                                 % (path, lineno, raw[e.start], e.start + 1)) from None
            if lineno == 1:
                text = text.lstrip("\ufeff")
            text = text.rstrip("\n").rstrip("\r")
            if skip_blank and not text.strip():
                continue
            lines.append(text)
    return lines


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


def _check_masks_kept(index, text, tokens_a, tokens_b, segment_ids, max_seq_length):
    """Raises ValueError when truncation to `max_seq_length` cut off a [MASK].

    `packing.pack` truncates at the ends (of the longer segment of a pair), so
    segment A keeps its first ``count(0) - 2`` tokens ([CLS], [SEP] aside)
    and B its first ``count(1) - 1``. Word pieces are counted as in the
    untruncated ``[CLS] A [SEP] B [SEP]`` ([CLS] is 0).
    """
    kept_a = segment_ids.count(0) - 2
    cut = [1 + i for i in range(kept_a, len(tokens_a))
           if tokens_a[i] == tokenization.MASK_TOKEN]
    if tokens_b:
        kept_b = segment_ids.count(1) - 1
        cut += [len(tokens_a) + 2 + j for j in range(kept_b, len(tokens_b))
                if tokens_b[j] == tokenization.MASK_TOKEN]
    if cut:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ValueError("text %d (%r): the [MASK] at word piece %d is beyond "
                         "--max_seq_length=%d; expected every [MASK] within the first "
                         "max_seq_length word pieces (shorten the text or raise "
                         "--max_seq_length)" % (index + 1, shown, min(cut), max_seq_length))


def masked_lm_probabilities(pretrainer, precision="fp32"):
    """`fn(features, positions) -> float32 [batch, positions, vocab]` probabilities.

    Encoder and masked-LM head as one traced function (any batch size,
    length and number of positions), for `fill_mask` and the Python API.
    `precision` "int8" or "bf16" computes the encoder's and the head's Dense
    products in that precision (`quantization.LowPrecisionModel`; the tied
    output layer stays float32); a pretrainer built under ``mixed_bfloat16``
    is used as it is.
    """
    head = pretrainer.get_objective("masked_lm").head
    encoder = pretrainer.encoder
    low = with_precision(pretrainer, precision)
    int8 = low if isinstance(low, quantization.LowPrecisionModel) else None
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{name: spec for name in _FEATURE_NAMES}, spec])
    def probabilities(features, positions):
        with int8.running() if int8 is not None else contextlib.nullcontext():
            outputs = encoder(features, training=False)
            logits = head(outputs["sequence_output"], positions, encoder.embedding_table)
        return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)

    probabilities.int8 = int8  # keeps the int8 weights alive with the function
    return probabilities


@dataclasses.dataclass
class MaskedLMFiles:
    """A masked-LM checkpoint's files, as the scripts that read one take them (fill-mask, cloze)."""

    bert_config_file: Optional[str] = option(
        None, "bert_config.json (Google) or config.json (HF).")
    vocab_file: Optional[str] = option(None, "The vocabulary file of the model.")
    init_checkpoint: Optional[str] = option(
        None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")


@dataclasses.dataclass
class FillMaskSettings(MaskedLMFiles):
    """What `run/predict_masked.py` predicts with `fill_mask`, and from which model; its flags."""

    text: List[str] = option(help="A text with one or more [MASK] (repeatable).", multi=True,
                             default_factory=list)
    input_file: Optional[str] = option(None, "One text per line.")
    output_file: Optional[str] = option(None, "Write JSON lines here.")
    top_k: int = option(5, "Predictions per [MASK].", lower_bound=1)
    max_seq_length: int = option(128, "Longer inputs are truncated.")
    precision: str = option(
        "fp32", "bf16: compute in bfloat16 (float32 weights; faster on CPUs with "
        "AVX512-BF16 or AMX, and on GPUs/TPUs); probabilities within ~1e-2. int8: the "
        "Dense products in int8 (dynamic-range quantisation, oneDNN; see docs/speed.md).",
        choices=PRECISIONS)


def fill_mask(pretrainer, tokenizer, texts, top_k=5, max_seq_length=128, precision="fp32"):
    """Top-k vocabulary predictions at every ``[MASK]`` of each text.

    Args:
      pretrainer: a `BertPretrainer` with a "masked_lm" objective.
      tokenizer: a `FullTokenizer` of the model's vocabulary.
      texts: strings holding one or more literal ``[MASK]``; a ``|||``
        separates a second segment (``text_a ||| text_b``).
      top_k: predictions per mask (>= 1).
      max_seq_length: word pieces per text, special tokens included.
      precision: "int8" or "bf16" computes the Dense products in that
        precision (see `masked_lm_probabilities`).

    Raises:
      ValueError when `top_k` < 1, or when truncation to `max_seq_length`
      would drop a ``[MASK]`` (a text without any ``[MASK]`` just gets no
      predictions).

    Returns:
      one dict per text: ``{"text", "tokens", "masks": [{"position",
      "predictions": [{"token", "probability"}]}]}``; `position` indexes
      `tokens` ([CLS] is 0).
    """
    if top_k < 1:
        raise ValueError("--top_k=%r: expected at least 1 prediction per [MASK]" % (top_k,))
    probabilities = masked_lm_probabilities(pretrainer, precision)
    results = []
    for index, text in enumerate(texts):
        text_a, _, text_b = text.partition("|||")
        tokens_a = tokenize_with_masks(tokenizer, text_a.strip())
        tokens_b = tokenize_with_masks(tokenizer, text_b.strip()) if text_b else None
        tokens, segment_ids = packing.pack(tokens_a, tokens_b, max_seq_length)
        _check_masks_kept(index, text, tokens_a, tokens_b, segment_ids, max_seq_length)
        positions = [i for i, t in enumerate(tokens) if t == tokenization.MASK_TOKEN]
        entry = {"text": text, "tokens": tokens, "masks": []}
        if positions:
            features = _batch_features([tokens], [segment_ids], tokenizer, len(tokens))
            probs = probabilities(features, tf.constant([positions], tf.int32))[0].numpy()
            entry["masks"] = mask_predictions(positions, probs, top_k, tokenizer.inv_vocab)
        results.append(entry)
    return results


def mask_predictions(positions, probs, top_k, inv_vocab):
    """`fill_mask`'s ``masks`` entries: the `top_k` tokens of each row of `probs`
    (``[positions, vocab]``), most likely first (the lower id on a tie)."""
    k = min(top_k, probs.shape[-1])
    masks = []
    for position, row in zip(positions, probs):
        best = np.argsort(-row, kind="stable")[:k]
        masks.append({"position": position,
                      "predictions": [{"token": inv_vocab[int(i)], "probability": float(row[i])}
                                      for i in best]})
    return masks


@dataclasses.dataclass
class FeatureExtractionSettings:
    """`run/extract_features.py`'s flags: what a `Family.feature_extractor` gets as `settings`."""

    input_file: Optional[str] = option(
        None, "One text per line (text_a ||| text_b for pairs).")
    output_file: Optional[str] = option(None, "JSON lines output.")
    layers: Optional[str] = option(
        None, "Comma-separated layer indexes (default: -1,-2,-3,-4; "
        "for --model_family=elmo every layer, 0 = token layer).")
    model_family: str = option(
        registry.DEFAULT_FAMILY, "bert: a BERT encoder's WordPiece vectors (albert: an "
        "ALBERT encoder's); elmo: an ELMo biLM's word vectors.",
        choices=lambda: registry.default_first(registry.families_with("feature_extractor")))
    bert_config_file: Optional[str] = option(
        None, "bert_config.json (Google) or config.json (HF).")
    max_seq_length: int = option(128, "Longer inputs are truncated.")
    init_checkpoint: Optional[str] = option(
        None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
    vocab_file: Optional[str] = option(None, "The vocabulary file of the model.")
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")
    batch_size: int = option(32, "Batch size for predictions.")
    precision: str = option(
        "fp32", "bf16: compute in bfloat16 (float32 weights; faster on CPUs with "
        "AVX512-BF16 or AMX, and on GPUs/TPUs). int8: the Dense products in int8 "
        "(dynamic-range quantisation, oneDNN; see docs/speed.md).", choices=PRECISIONS)
    group_by_length: bool = option(
        True, "Batch texts of similar length together (each batch padded to its longest "
        "text); the output stays in input order with the same values.")

    def layer_indexes(self):
        """`layers` as integers (None: not given, the family's default)."""
        if self.layers is None:
            return None
        try:
            return [int(x) for x in self.layers.split(",")]
        except ValueError:
            raise ValueError("--layers=%s: expected comma-separated integers such as -1,-2"
                             % self.layers) from None


def extract_features(encoder, tokenizer, texts, layers=(-1, -2, -3, -4), max_seq_length=128,
                     batch_size=32, precision="fp32", group_by_length=True):
    """Google's extract_features output, plus pooled and mean-pooled vectors.

    Args:
      encoder: a `BertEncoder`.
      texts: strings; ``text_a ||| text_b`` for pairs.
      layers: layer indexes into the encoder's layer outputs (-1 = last).
      precision: "fp32", "bf16" or "int8" (see `Encoder`).
      group_by_length: batch texts of similar length together (each batch
        is padded to its longest text only), in windows of
        `GROUP_WINDOW_BATCHES` batches; the outputs still come in input
        order, with the same values.

    Yields:
      one dict per text, in input order: ``{"linex_index", "features":
      [{"token", "layers": [{"index", "values"}]}], "pooled_output",
      "mean_pooled_output"}``.
    """
    packed = []
    for text in texts:
        text_a, _, text_b = text.partition("|||")
        packed.append(packing.pack(tokenizer.tokenize(text_a.strip()),
                                   tokenizer.tokenize(text_b.strip()) if text_b else None,
                                   max_seq_length))
    compiled = Encoder(encoder, precision)

    def run_batch(rows):
        chunk = [packed[i] for i in rows]
        features = _batch_features([t for t, _ in chunk], [s for _, s in chunk], tokenizer,
                                   max(len(t) for t, _ in chunk))
        outputs = compiled(features)
        return [_feature_record(index, packed[index][0], outputs, features, row, layers)
                for row, index in enumerate(rows)]

    return in_input_order([len(tokens) for tokens, _ in packed], batch_size, run_batch,
                          group_by_length)


def in_input_order(lengths, batch_size, run_batch, group_by_length=True):
    """Yields `run_batch(indexes)`'s per-row results in input order.

    Rows are batched `batch_size` at a time; with `group_by_length`, within
    windows of `GROUP_WINDOW_BATCHES` batches the longest rows go together
    (ties in input order), so that each batch, padded to its longest row,
    carries little padding; the results are put back in input order.
    """
    window = batch_size * (GROUP_WINDOW_BATCHES if group_by_length else 1)
    for window_start in range(0, len(lengths), window):
        indexes = list(range(window_start, min(window_start + window, len(lengths))))
        if group_by_length:
            indexes.sort(key=lambda i: -lengths[i])
        done = {}
        for start in range(0, len(indexes), batch_size):
            rows = indexes[start:start + batch_size]
            done.update(zip(rows, run_batch(rows)))
        for index in range(window_start, window_start + len(indexes)):
            yield done.pop(index)


# Texts grouped by length together: this many batches at a time (HF's
# length-grouped sampler sorts "mega-batches" of 50 batches).
GROUP_WINDOW_BATCHES = 50


def _feature_record(index, tokens, outputs, features, row, layers):
    """One text's `extract_features` dict from row `row` of a batch's outputs."""
    all_layers = outputs["encoder_outputs"]
    mask = features["input_mask"].numpy()[row].astype(np.float32)
    last = outputs["sequence_output"][row]
    mean = (last * mask[:, None]).sum(0) / max(mask.sum(), 1.0)
    token_features = []
    for i, token in enumerate(tokens):
        token_features.append({
            "token": token,
            "layers": [{"index": index_,
                        "values": [round(float(x), 6) for x in all_layers[index_][row, i]]}
                       for index_ in layers]})
    return {"linex_index": index, "features": token_features,
            "pooled_output": [round(float(x), 6) for x in outputs["pooled_output"][row]],
            "mean_pooled_output": [round(float(x), 6) for x in mean]}


def encoder_features_from_files(family, settings, layers):
    """`extract_features` of an encoder of `family` read from files: the
    `Family.feature_extractor` of a family whose encoder takes `input_ids` /
    `input_mask` / `segment_ids` of a WordPiece vocabulary and returns
    `encoder_outputs`, `sequence_output` and `pooled_output` (BERT, ALBERT).

    `settings` has `run/extract_features.py`'s flags as attributes; `layers`
    None means the last four. The config, layers, length and vocabulary are
    checked and the weights loaded here; the returned records are computed
    as they are consumed. Returns `(texts, records, "features")`.
    """
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top

    layers = layers or [-1, -2, -3, -4]
    config = family.load_config(settings.bert_config_file)
    for index in layers:
        if not -config.num_hidden_layers <= index < config.num_hidden_layers:
            raise ValueError("--layers has %d but the model has %d layers"
                             % (index, config.num_hidden_layers))
    if settings.max_seq_length > config.max_position_embeddings:
        raise ValueError("--max_seq_length=%d exceeds max_position_embeddings=%d"
                         % (settings.max_seq_length, config.max_position_embeddings))
    tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
    check_vocab_fits(len(tokenizer.vocab), config.vocab_size, settings.vocab_file,
                     settings.bert_config_file)
    texts = read_input_lines(settings.input_file)
    encoder = family.build_encoder(config)
    checkpoints.init_from_checkpoint(encoder, settings.init_checkpoint)
    return texts, extract_features(encoder, tokenizer, texts, layers, settings.max_seq_length,
                                   settings.batch_size, settings.precision,
                                   getattr(settings, "group_by_length", True)), "features"
