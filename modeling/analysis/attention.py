"""What the attention heads look at: maps per sentence, statistics per head, pattern classes.

Three things, for any BERT-shaped encoder (`modeling.encoder`: BERT, ALBERT,
anything returning ``attention_probs`` when called with
``output_attention_probs=True``):

* `attention_probabilities`: the per-layer attention of each text
  (``text_a ||| text_b`` for pairs, packed by `data.packing` as for
  fine-tuning), cut to its real tokens: one ``[layers, heads, n, n]`` array
  per text. `attention_grid_figure` / `save_attention_grid` draw one of them
  as a grid of heat maps, one row per layer and one column per head, the
  tokens on both axes (query tokens down, key tokens across).
* `HeadStatistics`: per-head statistics over a corpus, each the mean over all
  real query tokens of all texts (padding is never a query and never a key:
  rows and columns beyond the text are dropped and each row renormalised
  over the real keys):

    entropy        -sum_j p_ij log p_ij, in nats (uniform over n keys: log n)
    cls            p on [CLS]
    sep            p on [SEP] (both of a pair)
    punct          p on punctuation tokens (every character punctuation,
                   `data.tokenization`'s definition; [CLS]/[SEP] are not)
    self           p_ii
    prev, next     p_i,i-1 and p_i,i+1 (0 where there is no such token)
    offset         sum_j p_ij (j - i): negative = looks back, positive = ahead
    local          prev + self + next
    special        cls + sep + punct
    same_segment   p on keys of the query's own segment, over the queries of
                   PAIRS only ([CLS] and the first [SEP] belong to segment A);
                   NaN when the corpus has no pairs

* `classify_heads`: a pattern class per head after Kovaleva et al. (2019,
  "Revealing the Dark Secrets of BERT"), decided from the statistics with
  these thresholds (`THRESHOLDS`):

    diagonal       local >= 0.5 and local >= special: the head attends to the
                   token itself or its neighbours
    vertical       special >= 0.5: most attention goes to [CLS], [SEP] or
                   punctuation, whatever the query
    block          same_segment >= 0.8 (pairs seen): attention stays inside
                   the query's own sentence, spread over it
    heterogeneous  none of these

  Kovaleva et al. label heat maps by hand (with a "vertical + diagonal"
  mixture); here the classes are the rules above, in this order.

`write_statistics` writes the JSON, one heat map PNG per statistic (layers x
heads) and the same pictures as TensorBoard images. Every file is written
atomically (`data.atomic`).
"""

import dataclasses
import io
import json
import math
import os
from typing import Optional

import numpy as np

from data import atomic
from data import packing
from data import tokenization
from modeling import registry
from modeling.analysis import probing
from modeling.analysis.plots import write_tensorboard_images  # pylint: disable=unused-import
from modeling.training.options import option

__all__ = ["STATISTICS", "THRESHOLDS", "PATTERNS", "HeadStatistics", "attention_probabilities",
           "token_kinds", "sentence_statistics", "classify_heads", "attention_grid_figure",
           "save_attention_grid", "save_figure", "heatmap_figure", "write_statistics",
           "write_tensorboard_images", "read_texts", "attention_families", "load_encoder",
           "write_maps", "corpus_statistics", "AttentionAnalysisSettings"]

STATISTICS = ("entropy", "cls", "sep", "punct", "self", "prev", "next", "offset", "local",
              "special", "same_segment")
THRESHOLDS = {"diagonal": 0.5, "vertical": 0.5, "block": 0.8}
PATTERNS = ("diagonal", "vertical", "block", "heterogeneous")

# Sizes of the map grid: inches per cell and per token, and the resolution.
MAP_DPI = 80
_MIN_CELL_INCHES = 2.0
_INCHES_PER_TOKEN = 0.16


@dataclasses.dataclass
class AttentionAnalysisSettings:
    """One analysis of an encoder (`load_encoder`, then maps, statistics or `probing`).

    The fields are `run/analyze_attention.py`'s flags; the ``probe_*``,
    ``tag_*`` and `seed` fields are the ``probe`` mode's (`modeling.analysis.probing`).
    """

    mode: Optional[str] = option(
        None, "maps: heat-map grids per text; stats: per-head statistics and pattern "
        "classes over a corpus; probe: a linear probe per layer on a tagged file.",
        choices=("maps", "stats", "probe"))
    input_file: Optional[str] = option(
        None, "maps/stats: one text per line (text_a ||| text_b for pairs); "
        "probe: a CoNLL-style tagged file.")
    output_dir: Optional[str] = option(None, "Where the JSON, PNGs and tensorboard/ go.")
    # (attention_families is defined below; the lambda looks it up when flags are defined)
    model_family: str = option(
        registry.DEFAULT_FAMILY, "The encoder's family.",
        choices=lambda: attention_families())  # pylint: disable=unnecessary-lambda
    bert_config_file: Optional[str] = option(
        None, "bert_config.json (Google), config.json (HF) or albert_config.json.")
    init_checkpoint: Optional[str] = option(
        None, "Google TF1 checkpoint, this project's checkpoint or HF safetensors.")
    vocab_file: Optional[str] = option(None, "The vocabulary file of the model.")
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")
    max_seq_length: int = option(128, "Longer inputs are truncated.")
    max_texts: Optional[int] = option(
        None, "Use only the first N texts/sentences of --input_file (N >= 1; unset: all).",
        lower_bound=1)
    probe_dev_file: Optional[str] = option(
        None, "probe: held-out tagged file (default: a part of --input_file, see "
        "--probe_dev_fraction).")
    probe_dev_fraction: float = option(0.2, "probe: share of sentences held out.")
    tag_scheme: str = option("any", "probe: any (POS and other tags) or bio/bioes (checked).",
                             choices=probing.TAG_SCHEMES)
    tag_column: int = option(
        -1, "probe: the tag's column, 0-based (-1: the last; CoNLL-2003's part-of-speech "
        "tags: 1).")
    probe_epochs: int = option(30, "probe: passes over the training words.")
    probe_learning_rate: float = option(0.01, "probe: Adam learning rate.")
    probe_l2: float = option(1e-3, "probe: L2 penalty on the weights.")
    seed: int = option(0, "probe: seed of the split and of the probe's batch order.")


# ----------------------------------------------------------------- running


def read_texts(path, max_texts=None):
    """Non-blank lines of a UTF-8 file (``text_a ||| text_b`` for pairs).

    Args:
      path: the file.
      max_texts: keep only the first `max_texts` (None: all).

    Raises ValueError naming the file when it holds no text, and for a
    `max_texts` below 1.
    """
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top
    if max_texts is not None and (isinstance(max_texts, bool) or not isinstance(max_texts, int)
                                  or max_texts < 1):
        raise ValueError("--max_texts=%s: expected a positive number of texts (unset: all)"
                         % (max_texts,))
    texts = inference.read_input_lines(path, skip_blank=True)
    if not texts:
        raise ValueError("%s: no text; expected one sentence (or 'a ||| b' pair) per line" % path)
    return texts[:max_texts] if max_texts is not None else texts


def _pack_texts(tokenizer, texts, max_seq_length):
    packed = []
    for text in texts:
        text_a, _, text_b = text.partition("|||")
        tokens_a = tokenizer.tokenize(text_a.strip())
        tokens_b = tokenizer.tokenize(text_b.strip()) if text_b else None
        packed.append(packing.pack(tokens_a, tokens_b, max_seq_length))
    return packed


def _attention_function(encoder):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"input_ids": spec, "input_mask": spec, "segment_ids": spec}])
    def run(features):
        outputs = encoder(features, training=False, output_attention_probs=True)
        return [tf.cast(p, tf.float32) for p in outputs["attention_probs"]]

    return run


def attention_probabilities(encoder, tokenizer, texts, max_seq_length=128, batch_size=16):
    """Yields ``(tokens, segment_ids, probs)`` per text; probs ``[layers, heads, n, n]``.

    `n` is the number of real tokens of the packed text ([CLS] ... [SEP]);
    the rows and columns of padding are cut off. When layers have different
    head counts (pruned heads), `probs` is a list of ``[heads, n, n]`` arrays.
    """
    run = _attention_function(encoder)
    packed = _pack_texts(tokenizer, texts, max_seq_length)
    for start in range(0, len(packed), batch_size):
        chunk = packed[start:start + batch_size]
        width = max(len(tokens) for tokens, _ in chunk)
        features = packing.pad_batch([tokenizer.convert_tokens_to_ids(t) for t, _ in chunk],
                                     [s for _, s in chunk], width)
        layers = [p.numpy() for p in run(features)]
        for row, (tokens, segments) in enumerate(chunk):
            n = len(tokens)
            per_layer = [layer[row, :, :n, :n] for layer in layers]
            if len({p.shape[0] for p in per_layer}) == 1:
                per_layer = np.stack(per_layer)
            yield list(tokens), list(segments), per_layer


# -------------------------------------------------------------- statistics


def _is_punctuation_token(token):
    return bool(token) and all(tokenization._is_punctuation(c) for c in token)  # pylint: disable=protected-access


def token_kinds(tokens):
    """Boolean arrays ``(is_cls, is_sep, is_punct)`` over `tokens`."""
    is_cls = np.array([t == tokenization.CLS_TOKEN for t in tokens])
    is_sep = np.array([t == tokenization.SEP_TOKEN for t in tokens])
    is_punct = np.array([_is_punctuation_token(t) and not (c or s)
                         for t, c, s in zip(tokens, is_cls, is_sep)])
    return is_cls, is_sep, is_punct


def sentence_statistics(probs, tokens, segment_ids, length=None):
    """Sums over the query tokens of one text, per head.

    Args:
      probs: ``[heads, seq, seq]`` attention of one layer (or ``[layers,
        heads, seq, seq]``); `seq` may include padding beyond `length`.
      tokens: the text's real tokens (their number is `length` when not given).
      segment_ids: their segment ids.
      length: real tokens; rows and columns beyond are dropped.

    Returns:
      dict statistic -> ``[..., heads]`` sums over the real queries (divide by
      the number of queries for means); ``same_segment`` is summed over the
      queries of a pair only (zeros for a single text).
    """
    n = len(tokens) if length is None else length
    p = np.asarray(probs, np.float64)[..., :n, :n]
    p = p / np.maximum(p.sum(-1, keepdims=True), 1e-30)
    is_cls, is_sep, is_punct = token_kinds(tokens[:n])
    positions = np.arange(n, dtype=np.float64)
    logs = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    sums = {
        "entropy": -(p * logs).sum(-1),
        "cls": p @ is_cls.astype(np.float64),
        "sep": p @ is_sep.astype(np.float64),
        "punct": p @ is_punct.astype(np.float64),
        "self": np.diagonal(p, axis1=-2, axis2=-1),
        "prev": np.diagonal(p, offset=-1, axis1=-2, axis2=-1),
        "next": np.diagonal(p, offset=1, axis1=-2, axis2=-1),
        "offset": p @ positions - positions,
    }
    sums = {name: value.sum(-1) for name, value in sums.items()}
    sums["local"] = sums["prev"] + sums["self"] + sums["next"]
    sums["special"] = sums["cls"] + sums["sep"] + sums["punct"]
    segments = np.asarray(segment_ids[:n])
    if segments.size and segments.max() > segments.min():
        same = (segments[:, None] == segments[None, :]).astype(np.float64)
        sums["same_segment"] = (p * same).sum(-1).sum(-1)
    else:
        sums["same_segment"] = np.zeros(p.shape[:-2])
    return sums


class HeadStatistics(object):
    """Per-head means of `STATISTICS` over a corpus, accumulated text by text.

        stats = HeadStatistics()
        for tokens, segments, probs in attention_probabilities(...):
            stats.add(probs, tokens, segments)
        result = stats.result()   # {"entropy": [[...heads] per layer], ...}
    """

    def __init__(self):
        self.sums = None          # per layer: statistic -> [heads]
        self.num_texts = 0
        self.num_queries = 0
        self.num_pair_queries = 0

    def add(self, probs, tokens, segment_ids):
        """Adds one text: `probs` ``[layers, heads, n, n]`` (or a list per layer)."""
        n = len(tokens)
        layer_sums = [sentence_statistics(layer, tokens, segment_ids, n) for layer in probs]
        if self.sums is None:
            self.sums = layer_sums
        else:
            if len(layer_sums) != len(self.sums):
                raise ValueError("attention of %d layers after texts with %d"
                                 % (len(layer_sums), len(self.sums)))
            for total, new in zip(self.sums, layer_sums):
                for name in total:
                    total[name] = total[name] + new[name]
        self.num_texts += 1
        self.num_queries += n
        if len(set(segment_ids[:n])) > 1:
            self.num_pair_queries += n

    def result(self):
        """dict statistic -> list (layers) of lists (heads) of means (NaN: not measured)."""
        if self.sums is None:
            raise ValueError("no text was added to the statistics")
        out = {}
        for name in STATISTICS:
            count = self.num_pair_queries if name == "same_segment" else self.num_queries
            out[name] = [[float(v) / count if count else float("nan") for v in layer[name]]
                         for layer in self.sums]
        return out


def classify_heads(statistics, thresholds=None):
    """The pattern class of each head (`PATTERNS`; rules in the module docstring).

    Args:
      statistics: `HeadStatistics.result()` (per layer, per head means).
      thresholds: overrides of `THRESHOLDS`.

    Returns:
      list (layers) of lists (heads) of class names.
    """
    limits = dict(THRESHOLDS, **(thresholds or {}))
    classes = []
    for layer, (local, special, same) in enumerate(zip(
            statistics["local"], statistics["special"], statistics["same_segment"])):
        row = []
        for head in range(len(local)):
            if local[head] >= limits["diagonal"] and local[head] >= special[head]:
                row.append("diagonal")
            elif special[head] >= limits["vertical"]:
                row.append("vertical")
            elif not math.isnan(same[head]) and same[head] >= limits["block"]:
                row.append("block")
            else:
                row.append("heterogeneous")
        classes.append(row)
    return classes


# ---------------------------------------------------------------- pictures


def _figure(width, height):
    from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
    return Figure(figsize=(width, height), dpi=MAP_DPI, layout="constrained")


def save_figure(figure, path):
    """Writes `figure` as a PNG at `path` atomically (no pyplot, Agg); returns the bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    data = buffer.getvalue()
    if path is not None:
        with atomic.atomic_output(path, "wb") as f:
            f.write(data)
    return data


def attention_grid_figure(probs, tokens, title=None):
    """A figure of heat maps: row = layer, column = head, tokens on both axes.

    The size is fixed by the grid (`cell` inches per map, growing with the
    number of tokens): ``width = heads * cell``, ``height = layers * cell``
    inches at `MAP_DPI`.
    """
    layers = len(probs)
    heads = max(len(layer) for layer in probs)
    n = len(tokens)
    cell = max(_MIN_CELL_INCHES, _INCHES_PER_TOKEN * n)
    figure = _figure(heads * cell, layers * cell)
    grid = figure.add_gridspec(layers, heads)
    fontsize = max(3.0, min(7.0, 80.0 / max(n, 1)))
    for layer in range(layers):
        for head in range(heads):
            axes = figure.add_subplot(grid[layer, head])
            if head < len(probs[layer]):
                axes.imshow(np.asarray(probs[layer][head])[:n, :n], cmap="viridis", vmin=0.0,
                            vmax=1.0, interpolation="nearest")
            axes.set_xticks(range(n))
            axes.set_yticks(range(n))
            axes.set_xticklabels(tokens, rotation=90, fontsize=fontsize)
            axes.set_yticklabels(tokens, fontsize=fontsize)
            axes.set_title("layer %d head %d" % (layer, head), fontsize=7)
    if title:
        figure.suptitle(title, fontsize=9)
    return figure


def save_attention_grid(probs, tokens, path, title=None):
    """`attention_grid_figure` written as a PNG; returns ``(rows, columns)`` of the grid."""
    figure = attention_grid_figure(probs, tokens, title)
    save_figure(figure, path)
    return len(probs), max(len(layer) for layer in probs)


def heatmap_figure(values, title, fmt="%.2f", labels=None):
    """Layers (rows) x heads (columns) heat map of one statistic, values written in."""
    rows = len(values)
    cols = max(len(r) for r in values)
    matrix = np.full((rows, cols), np.nan)
    for i, r in enumerate(values):
        matrix[i, :len(r)] = r
    figure = _figure(max(4.0, 0.55 * cols + 1.5), max(3.0, 0.45 * rows + 1.2))
    axes = figure.add_subplot(1, 1, 1)
    middle = np.nanmean(matrix) if np.isfinite(matrix).any() else 0.0
    if labels is None:
        image = axes.imshow(matrix, cmap="viridis", aspect="auto", interpolation="nearest")
        figure.colorbar(image, ax=axes)
        middle = (np.nanmin(matrix) + np.nanmax(matrix)) / 2 if np.isfinite(matrix).any() else 0
    else:
        axes.imshow(matrix, cmap="tab10", vmin=0, vmax=9, aspect="auto",
                    interpolation="nearest")
    for i in range(rows):
        for j in range(cols):
            if labels is not None:
                text = labels[i][j][:4] if j < len(labels[i]) else ""
            else:
                text = "" if np.isnan(matrix[i, j]) else fmt % matrix[i, j]
            dark = labels is not None or np.isnan(matrix[i, j]) or matrix[i, j] < middle
            axes.text(j, i, text, ha="center", va="center", fontsize=6,
                      color="white" if dark else "black")
    axes.set_xlabel("head")
    axes.set_ylabel("layer")
    axes.set_xticks(range(cols))
    axes.set_yticks(range(rows))
    axes.set_title(title, fontsize=9)
    return figure


def write_statistics(stats, output_dir, thresholds=None):
    """Writes ``attention_stats.json``, ``stat_<name>.png`` per statistic and
    ``pattern.png`` into `output_dir`, and the pictures as TensorBoard images
    into ``output_dir/tensorboard``. Returns the JSON dict.
    """
    result = stats.result()
    classes = classify_heads(result, thresholds)
    counts = {name: sum(row.count(name) for row in classes) for name in PATTERNS}
    summary = {
        "num_texts": stats.num_texts,
        "num_query_tokens": stats.num_queries,
        "num_pair_query_tokens": stats.num_pair_queries,
        "num_layers": len(classes),
        "heads_per_layer": [len(row) for row in classes],
        "thresholds": dict(THRESHOLDS, **(thresholds or {})),
        "statistics": {name: [[None if math.isnan(v) else round(v, 6) for v in row]
                              for row in values] for name, values in result.items()},
        "pattern": classes,
        "pattern_counts": counts,
    }
    images = {}
    for name in STATISTICS:
        if name == "same_segment" and not stats.num_pair_queries:
            continue
        title = "%s (%s)" % (name, "nats" if name == "entropy" else
                             "tokens" if name == "offset" else "share of attention")
        images["stat_" + name] = save_figure(
            heatmap_figure(result[name], title),
            os.path.join(output_dir, "stat_%s.png" % name))
    codes = [[float(PATTERNS.index(c)) for c in row] for row in classes]
    images["pattern"] = save_figure(
        heatmap_figure(codes, "pattern: " + ", ".join("%s %d" % kv for kv in counts.items()),
                       labels=classes),
        os.path.join(output_dir, "pattern.png"))
    atomic.write_text(os.path.join(output_dir, "attention_stats.json"),
                      json.dumps(summary, indent=1) + "\n")
    write_tensorboard_images(images, os.path.join(output_dir, "tensorboard"))
    return summary


# -------------------------------------------------------------------- jobs


def attention_families():
    """The families whose encoders give attention maps (`Family.attention_maps`), the
    default first: `run/analyze_attention.py --model_family`'s choices."""
    from modeling import registry  # pylint: disable=g-import-not-at-top
    return registry.default_first(registry.families_with("attention_maps"))


def load_encoder(model_family, bert_config_file, init_checkpoint, vocab_file, do_lower_case,
                 max_seq_length):
    """``(encoder, tokenizer)`` of a registered family from its files, checked first.

    `init_checkpoint`: anything `modeling.checkpoints.init_from_checkpoint`
    loads (Google TF1, HF safetensors, this project's own); None keeps the
    random initialisation.
    """
    from modeling import registry  # pylint: disable=g-import-not-at-top
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top
    if init_checkpoint:
        tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    try:
        family = registry.families.get(model_family)
    except registry.RegistryError as e:
        raise ValueError("--model_family: %s" % e) from None
    if not family.attention_maps:
        raise ValueError("--model_family=%s: its encoder gives no attention maps (those that "
                         "do: %s)" % (model_family, ", ".join(attention_families())))
    if not os.path.exists(bert_config_file):
        raise ValueError("--bert_config_file=%s: no such file" % bert_config_file)
    config = family.load_config(bert_config_file)
    limit = getattr(config, "max_position_embeddings", None)
    if max_seq_length < 3 or (limit is not None and max_seq_length > limit):
        raise ValueError("--max_seq_length=%d: expected 3 .. max_position_embeddings=%s of %s"
                         % (max_seq_length, limit, bert_config_file))
    return inference.wordpiece_encoder(family, config, vocab_file, do_lower_case,
                                       init_checkpoint, bert_config_file)


def write_maps(encoder, tokenizer, texts, output_dir, max_seq_length=128):
    """``attention_map_<i>.png`` per text (1-based line of non-blank texts), plus
    ``attention_maps.json`` (tokens and file of each) and TensorBoard images.
    """
    index, images = [], {}
    for number, (tokens, segments, probs) in enumerate(
            attention_probabilities(encoder, tokenizer, texts, max_seq_length), 1):
        name = "attention_map_%d.png" % number
        text = texts[number - 1]
        figure = attention_grid_figure(probs, tokens, title=text if len(text) <= 90
                                       else text[:87] + "...")
        images["attention_map_%d" % number] = save_figure(figure,
                                                          os.path.join(output_dir, name))
        index.append({"text": text, "tokens": tokens, "segment_ids": segments, "file": name,
                      "layers": len(probs), "heads": max(len(layer) for layer in probs)})
    atomic.write_text(os.path.join(output_dir, "attention_maps.json"),
                      json.dumps(index, ensure_ascii=False, indent=1) + "\n")
    write_tensorboard_images(images, os.path.join(output_dir, "tensorboard"))
    return index


def corpus_statistics(encoder, tokenizer, texts, max_seq_length=128, batch_size=16):
    """`HeadStatistics` of `encoder` over `texts`."""
    stats = HeadStatistics()
    for tokens, segments, probs in attention_probabilities(encoder, tokenizer, texts,
                                                           max_seq_length, batch_size):
        stats.add(probs, tokens, segments)
    return stats
