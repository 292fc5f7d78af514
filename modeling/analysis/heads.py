"""Attention-head importance and pruning (Michel, Levy & Neubig 2019, "Are Sixteen
Heads Really Better than One?").

Every head h of layer l gets a gate m_{l,h} on its attention probabilities (the
encoders' `head_mask`, 1 = keep). Its importance is the expected sensitivity of
the loss to that gate at m = 1, the paper's (eq. 3)

    I_{l,h} = E_x |dL(x) / dm_{l,h}|

with L(x) one example's task loss: `granularity="example"` (the default) gives
every real example its own gate (a `[batch, heads]` head mask), so the absolute
value is taken per example, and averages over the real examples of all batches.
`granularity="batch"` takes it per batch instead, of the batch's mean loss
(`compute_loss_and_metrics`), averaged over batches, as Hugging Face's
`run_bertology` does. (Michel et al.'s own code takes it per token: the
gradient of each position's head output, dotted with that output.) With
`normalize_layers=True` each layer's scores are divided by their L2 norm
(Michel et al. do this before comparing heads across layers).

    imp = head_importance(classifier, batches)            # [layers, heads]
    curve = iterative_pruning(classifier, score_batches, eval_batches,
                              step_fraction=0.1, max_fraction=0.5)
    smaller = prune_heads(classifier, curve["pruned"])    # fewer weights, same outputs

`iterative_pruning` removes the least important `step_fraction` of the heads
at a time by masking them, re-scores the rest with the mask in place (Michel
et al.'s `--exact_pruning`; `rescore=False` ranks once, as their BERT
scripts), and records accuracy against the number of heads left; `prune_heads` then removes
heads for real: a new model whose layers have fewer heads
(`num_attention_heads_per_layer`), with the kept heads' query/key/value kernel
columns and biases and attention-output kernel rows copied, which computes
exactly what the masked model computes. `save_pruned` writes it as a Google
TF1 checkpoint plus a `bert_config.json` that every script loads.

ALBERT applies one attention block at every depth (per group of layers; one
group in the released models), so its heads can only be removed everywhere
at once. The pruning unit is then a head of the shared block (`HeadUnits`):
its importance is the sum over depths of the per-depth scores
(`shared_head_importance`), masking it zeroes a column of the `[layers,
heads]` mask, and `prune_heads` gives an ALBERT whose shared block has fewer
heads of the same width (`num_attention_heads_per_group` in
`albert_config.json`), saved as google-research/albert's `model.ckpt`.
"""

import dataclasses
import json
import math
import os
import tempfile
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from data import atomic
from data import processors as processors_lib
from modeling import registry
from modeling.analysis import plots
from modeling.tasks import classifier_job
from modeling.training.options import option

__all__ = ["HeadUnits", "PruningSettings", "head_pruning_of", "head_units", "head_units_of_config",
           "parse_heads_for", "parse_shared_heads", "shared_head_importance",
           "count_parameters", "evaluate", "head_counts", "head_importance",
           "iterative_pruning", "load_classifier_head", "measure_latency",
           "parse_heads", "plot_pruning_curve", "prunable_families", "prune_heads",
           "save_pruned"]


# ------------------------------------------------------------------ structure

def _encoder_of(model):
    if hasattr(model, "transformer_layers") or _is_shared(model):
        return model
    return model.encoder


def _is_shared(encoder):
    """An ALBERT-style encoder: attention blocks shared between layers."""
    return hasattr(encoder, "attention_sublayers") and hasattr(encoder, "group_of_layer")


def _attention(encoder, layer):
    return encoder.transformer_layers[layer].attention_sublayer.attention


class HeadUnits:
    """What a head-pruning step removes: a head of one *unit*.

    For BERT a unit is a layer. For ALBERT (one attention block shared by
    every layer of a group; one group, so one block, in the released
    models) a unit is a group: removing head h of group g removes it at
    every depth of the group (and from each of its `inner_group_num`
    blocks), so that is the only removal the weights allow.

    Attributes:
        unit_of_layer: the unit of each layer (`[num_hidden_layers]`).
        counts: the heads of each unit.
        shared: True for ALBERT's groups, False for BERT's layers.
    """

    def __init__(self, unit_of_layer, counts, shared):
        self.unit_of_layer = list(unit_of_layer)
        self.counts = list(counts)
        self.shared = bool(shared)

    @property
    def layer_counts(self):
        """The heads of each layer."""
        return [self.counts[u] for u in self.unit_of_layer]

    def layers_of(self, unit):
        return [l for l, u in enumerate(self.unit_of_layer) if u == unit]

    def layer_mask(self, unit_mask):
        """A per-layer head mask (list of vectors) from one vector per unit."""
        return [unit_mask[u] for u in self.unit_of_layer]


def prunable_families():
    """The families whose heads can be removed (`Family.head_pruning`), the default first."""
    return registry.default_first(registry.families_with("head_pruning"))


def head_pruning_of(model_or_family):
    """The `registry.HeadPruning` of a family (a name or a `Family`) or of a model's family."""
    if isinstance(model_or_family, str):
        family = registry.families.get(model_or_family)
    elif isinstance(model_or_family, registry.Family):
        family = model_or_family
    else:
        from modeling.checkpoints import targets  # pylint: disable=g-import-not-at-top
        family = targets.find_target(model_or_family).family
    if family.head_pruning is None:
        raise ValueError(f"--model_family={family.name}: head pruning supports "
                         f"{_and(prunable_families())}")
    return family.head_pruning


def _and(names):
    return " and ".join(names) if len(names) < 3 else (
        ", ".join(names[:-1]) + " and " + names[-1])


def head_units(model):
    """`HeadUnits` of `model`'s encoder (a BERT or a fully shared ALBERT)."""
    encoder = _encoder_of(model)
    if hasattr(encoder, "transformer_layers"):
        counts = [_attention(encoder, i).num_attention_heads
                  for i in range(encoder.num_hidden_layers)]
        return HeadUnits(range(len(counts)), counts, False)
    if _is_shared(encoder):
        if encoder.share_parameters != "all":
            raise ValueError(f"{type(encoder).__name__}: head pruning needs ALBERT's full "
                             "sharing (share_parameters='all'), got "
                             f"{encoder.share_parameters!r}")
        k = encoder.inner_group_num
        counts = [encoder.attention_sublayers[g * k].attention.num_attention_heads
                  for g in range(encoder.num_hidden_groups)]
        return HeadUnits([encoder.group_of_layer(l) for l in range(encoder.num_hidden_layers)],
                         counts, True)
    raise ValueError(f"{type(encoder).__name__}: head pruning needs a BERT encoder "
                     "(one block per layer) or an ALBERT encoder (shared blocks).")


def head_units_of_config(config, model_family=registry.DEFAULT_FAMILY):
    """`HeadUnits` of the encoder a family's config (`bert_config.json`,
    `albert_config.json`) describes; `model_family` a name or a `Family`
    (its `HeadPruning.units_of_config`)."""
    pruning = head_pruning_of(model_family)
    unit_of_layer, counts = pruning.units_of_config(config)
    return HeadUnits(unit_of_layer, counts, pruning.shared)


def head_counts(model):
    """The number of heads of each layer of `model`'s (BERT or ALBERT) encoder."""
    return head_units(model).layer_counts


def _ones(counts):
    return [np.ones([n], np.float32) for n in counts]


def _as_matrix(per_layer, counts, fill=np.nan):
    width = max(counts) if counts else 0
    matrix = np.full([len(counts), width], fill, np.float64)
    for layer, values in enumerate(per_layer):
        matrix[layer, :len(values)] = values
    return matrix


def parse_heads(spec, counts, what="--heads_to_prune", unit="layer"):
    """`"LAYER:HEAD,..."` (0-based) -> sorted list of (layer, head); one-line errors.

    Rejects malformed items, layers or heads out of range, duplicates, and a
    list that removes every head of every layer. (`unit` names what the
    first index counts in the messages: "layer", or "group" for ALBERT.)
    """
    items = [item.strip() for item in spec.split(",")] if isinstance(spec, str) else spec
    heads, seen = [], set()
    for item in items:
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) != 2 or not all(p.strip().lstrip("-").isdigit() for p in parts):
                raise ValueError(f"{what}: {item!r} is not LAYER:HEAD (two 0-based integers, "
                                 "e.g. 0:1)")
            layer, head = int(parts[0]), int(parts[1])
        else:
            layer, head = (int(v) for v in item)
        if not 0 <= layer < len(counts):
            raise ValueError(f"{what}: {layer}:{head}: {unit} {layer} is out of range "
                             f"(the model has {unit}s 0..{len(counts) - 1})")
        if not 0 <= head < counts[layer]:
            raise ValueError(f"{what}: {layer}:{head}: head {head} is out of range ({unit} "
                             f"{layer} has heads 0..{counts[layer] - 1})")
        if (layer, head) in seen:
            raise ValueError(f"{what}: {layer}:{head} is given twice")
        seen.add((layer, head))
        heads.append((layer, head))
    if not heads:
        raise ValueError(f"{what}: no heads given")
    if len(heads) == sum(counts):
        raise ValueError(f"{what}: removes all {len(heads)} heads of every {unit}; keep at "
                         "least one")
    return sorted(heads)


def _is_int(text):
    return text.strip().lstrip("-").isdigit()


def parse_shared_heads(spec, units, what="--heads_to_prune"):
    """ALBERT's `--heads_to_prune` -> sorted (group, head) pairs; one-line errors.

    The layers of a group share one attention block, so a head is removed at
    every depth or not at all. Two spellings, mixable:

        HEAD or *:HEAD      head HEAD of the shared layer (one group only,
                            as in every released ALBERT), e.g. `1,*:3`
        LAYER:HEAD          listed for EVERY layer sharing that block, e.g.
                            `0:1,1:1,...,11:1` for a 12-layer ALBERT

    A LAYER:HEAD entry whose head is not listed for all the other layers of
    its group is refused (the layer is shared), as are heads out of range,
    duplicates and removing every head. `spec` may also be a list of those
    strings, of ints (HEAD) and of (LAYER, HEAD) tuples. (`prune_heads`
    takes the result, (GROUP, HEAD) pairs.)
    """
    items = [item.strip() for item in spec.split(",")] if isinstance(spec, str) else list(spec)
    short, by_pair = [], {}
    groups = len(units.counts)
    for item in items:
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) == 1 and _is_int(parts[0]):
                short.append((item, int(parts[0])))
                continue
            if len(parts) == 2 and parts[0].strip() == "*" and _is_int(parts[1]):
                short.append((item, int(parts[1])))
                continue
            if len(parts) != 2 or not all(_is_int(p) for p in parts):
                raise ValueError(f"{what}: {item!r} is not HEAD, *:HEAD or LAYER:HEAD (0-based "
                                 "integers; ALBERT's layers share their heads, e.g. 1 or *:1)")
            layer, head = int(parts[0]), int(parts[1])
        elif isinstance(item, (int, np.integer)):
            short.append((str(item), int(item)))
            continue
        else:
            layer, head = (int(v) for v in item)
        layers = len(units.unit_of_layer)
        if not 0 <= layer < layers:
            raise ValueError(f"{what}: {layer}:{head}: layer {layer} is out of range "
                             f"(the model has layers 0..{layers - 1})")
        group = units.unit_of_layer[layer]
        if not 0 <= head < units.counts[group]:
            raise ValueError(f"{what}: {layer}:{head}: head {head} is out of range (the "
                             f"shared layer has heads 0..{units.counts[group] - 1})")
        listed = by_pair.setdefault((group, head), [])
        if layer in listed:
            raise ValueError(f"{what}: {layer}:{head} is given twice")
        listed.append(layer)
    pairs = []
    for item, head in short:
        if groups != 1:
            raise ValueError(f"{what}: {item}: with num_hidden_groups={groups} a head is "
                             "not one shared head; give LAYER:HEAD for every layer of its "
                             "group")
        if not 0 <= head < units.counts[0]:
            raise ValueError(f"{what}: {item}: head {head} is out of range (the shared layer "
                             f"has heads 0..{units.counts[0] - 1})")
        if (0, head) in pairs:
            raise ValueError(f"{what}: head {head} is given twice")
        pairs.append((0, head))
    for (group, head), listed in sorted(by_pair.items()):
        missing = [l for l in units.layers_of(group) if l not in listed]
        if missing:
            sharing = ("all ALBERT layers use one attention layer" if groups == 1 else
                       f"ALBERT layers {units.layers_of(group)[0]}.."
                       f"{units.layers_of(group)[-1]} use one attention layer")
            short_form = f", or give it once as {head} or *:{head}" if groups == 1 else ""
            raise ValueError(
                f"{what}: {min(listed)}:{head}: the layer is shared ({sharing}), so head "
                f"{head} goes at every depth: list it for layer"
                f"{'s' if len(missing) > 1 else ''} {','.join(map(str, missing))} too"
                f"{short_form}")
        if (group, head) in pairs:
            raise ValueError(f"{what}: head {head} is given twice")
        pairs.append((group, head))
    if pairs and len(set(pairs)) == sum(units.counts):
        raise ValueError(f"{what}: removes all {len(pairs)} heads of the shared attention; "
                         "keep at least one")
    return parse_heads(pairs, units.counts, what, unit="group")


def parse_heads_for(spec, units, what="--heads_to_prune"):
    """`parse_heads` (BERT: (layer, head)) or `parse_shared_heads` (ALBERT: (group, head))."""
    if units.shared:
        return parse_shared_heads(spec, units, what)
    return parse_heads(spec, units.counts, what)


# ----------------------------------------------------------------- measuring

def _with_mask(features, mask):
    features = dict(features)
    features["head_mask"] = mask
    return features


def evaluate(model, batches, head_mask=None):
    """`{"loss", "accuracy"}` of `model` over `batches` (weighted by `is_real_example`)."""
    sums = {}
    for batch in batches:
        features = batch if head_mask is None else _with_mask(
            batch, [tf.constant(m) for m in head_mask])
        _, metrics = model.compute_loss_and_metrics(features, training=False)
        for name, (total, count) in metrics.items():
            old = sums.get(name, (0.0, 0.0))
            sums[name] = (old[0] + float(total), old[1] + float(count))
    return {name: (total / count if count else float("nan"))
            for name, (total, count) in sums.items()}


GRANULARITIES = ("example", "batch")


def _gradient_fn(model, granularity="example"):
    """`(features, masks) -> (weights, d loss / d masks)` as one `tf.function`.

    "batch": `weights` is 1 and each gradient a `[heads]` vector, of the batch's
    mean loss. "example": each real example has its own gates, and each
    gradient is `[batch, heads]`, of that example's own loss (the mean loss's
    gradient times the number of real examples, for a loss that is the mean
    over the real examples, as a classifier's); `weights` `[batch]` is
    `is_real_example` (padding examples count for nothing).
    """
    if granularity not in GRANULARITIES:
        raise ValueError("granularity must be one of %s, got %r"
                         % (", ".join(GRANULARITIES), granularity))

    @tf.function(reduce_retracing=True)
    def grads(features, masks):
        if granularity == "example":
            rows = tf.shape(features["input_ids"])[0]
            masks = [tf.tile(m[tf.newaxis, :], [rows, 1]) for m in masks]
            real = features.get("is_real_example")
            real = (tf.ones([rows], tf.float32) if real is None
                    else tf.reshape(tf.cast(real, tf.float32), [-1]))
        with tf.GradientTape() as tape:
            tape.watch(masks)
            loss, _ = model.compute_loss_and_metrics(_with_mask(features, masks),
                                                     training=False)
        gradients = tape.gradient(loss, masks)
        if granularity == "batch":
            return tf.ones([1], tf.float32), gradients
        count = tf.reduce_sum(real)
        return real, [None if g is None else g * count for g in gradients]

    return grads


def head_importance(model, batches, head_mask=None, normalize_layers=False, _grads=None,
                    granularity="example"):
    """Michel et al.'s importance: the mean over examples of |dL(x)/dm_{l,h}|.

    Args:
        model: a task model with `compute_loss_and_metrics(features, training)`
            over a BERT encoder (`BertClassifier`, ...), or an encoder-based
            model whose loss reads labels from the features.
        batches: an iterable of feature dicts with labels (`label_ids`).
        head_mask: where the gradient is taken: a list of one `[heads_l]`
            vector per layer; default all ones (Michel et al.'s m = 1). Masked
            heads (0) get a score too (the gradient at 0).
        normalize_layers: divide each layer's scores by their L2 norm.
        granularity: "example" (the paper's, one gate per example; the
            model's loss must be the mean over the real examples of one
            encoder row each, as a classifier's) or "batch" (per batch, of
            the batch's mean loss, as HF's run_bertology).

    Returns:
        `[layers, max heads]` float64 array (NaN where a pruned layer has
        fewer heads).
    """
    counts = head_counts(model)
    mask = _ones(counts) if head_mask is None else [np.asarray(m, np.float32)
                                                    for m in head_mask]

    grads = _grads or _gradient_fn(model, granularity)
    totals = [np.zeros([n], np.float64) for n in counts]
    num_batches, weight = 0, 0.0
    for batch in batches:
        masks = [tf.constant(m) for m in mask]
        weights, gradients = grads(dict(batch), masks)
        weights = weights.numpy().astype(np.float64)
        for layer, gradient in enumerate(gradients):
            if gradient is not None:
                values = np.abs(gradient.numpy().astype(np.float64))
                if values.ndim == 2:  # one row per example, padding rows weighted 0
                    values = (weights[:, None] * values).sum(axis=0)
                totals[layer] += values
        num_batches += 1
        weight += weights.sum()
    if not num_batches:
        raise ValueError("head_importance: no batches to score the heads on")
    if not weight:
        raise ValueError("head_importance: the batches hold no real example")
    scores = [t / weight for t in totals]
    if normalize_layers:
        scores = [s / (np.linalg.norm(s) + 1e-20) if s.size else s for s in scores]
    return _as_matrix(scores, counts)


def shared_head_importance(model, batches, head_mask=None, normalize=False, _grads=None,
                           granularity="example"):
    """ALBERT's importance of a shared head: the sum over depths of Michel et al.'s.

    Head h of a group's shared attention block acts at every layer l of the
    group, each with its own gate m_{l,h}; removing it closes all of them.
    Its score is

        I_{g,h} = sum over layers l of group g of I_{l,h}

    with I_{l,h} = the mean over examples of |dL(x)/dm_{l,h}| (`head_importance`,
    unnormalised). With `normalize` each group's scores are divided by their
    L2 norm (the analogue of Michel et al.'s per-layer normalisation).

    Args:
        head_mask: where the gradients are taken: one `[heads]` vector per
            group (the same gate at every depth), or a per-layer list as
            `head_importance` takes; default all ones.
        granularity: as `head_importance`'s.

    Returns:
        `[groups, max heads]` float64 array (for BERT, whose units are its
        layers, `head_importance` itself).
    """
    units = head_units(model)
    if head_mask is not None and len(head_mask) == len(units.counts) \
            and len(units.counts) != len(units.unit_of_layer):
        head_mask = units.layer_mask(head_mask)
    if not units.shared:
        return head_importance(model, batches, head_mask, normalize, _grads=_grads,
                               granularity=granularity)
    per_layer = head_importance(model, batches, head_mask, normalize_layers=False,
                                _grads=_grads, granularity=granularity)
    scores = []
    for group, count in enumerate(units.counts):
        total = np.zeros([count], np.float64)
        for layer in units.layers_of(group):
            total += per_layer[layer, :count]
        if normalize and total.size:
            total = total / (np.linalg.norm(total) + 1e-20)
        scores.append(total)
    return _as_matrix(scores, units.counts)


def count_parameters(model):
    """Number of scalars in `model`'s weights."""
    return int(sum(np.prod(w.shape) for w in model.weights))


def measure_latency(model, features, repeats=10, warmup=2):
    """Median seconds of one forward pass of `model` (a `tf.function`) on `features`."""
    forward = tf.function(lambda f: model(f, training=False))
    for _ in range(warmup):
        tf.nest.map_structure(lambda t: t.numpy(), forward(features))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), forward(features))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


# ------------------------------------------------------------------- pruning

def iterative_pruning(model, score_batches, eval_batches, step_fraction=0.1,
                      max_fraction=0.5, normalize_layers=True, keep_fraction=None,
                      granularity="example", rescore=True):
    """Masks the least important heads a step at a time; records accuracy vs heads.

    Each step re-scores the remaining heads with the current mask in place
    (`head_importance` on `score_batches`), masks the `step_fraction` (of the
    original number of heads, at least one) with the lowest scores, and
    evaluates on `eval_batches`; it stops once `max_fraction` of the heads are
    masked (never all of them).

    Args:
        keep_fraction: optional fraction <= max_fraction at which the masked
            set is reported as `pruned` (the heads to remove); default
            `max_fraction`. The curve goes on to `max_fraction`.
        granularity: of the importance scores (`head_importance`).
        rescore: re-score the remaining heads with the mask in place before
            every step (Michel et al.'s `--exact_pruning`); False ranks the
            heads once, at m = 1, and masks them in that order (their BERT
            scripts' default).

    For ALBERT the unit is a head of a group's shared attention block
    (`HeadUnits`): it is scored by `shared_head_importance` (the sum over
    depths), masked at every depth at once, and the pairs below are
    (group, head); the fractions are of the shared heads.

    Returns:
        dict: `steps` (list of {"heads_left", "fraction_pruned", "accuracy",
        "loss", "pruned_this_step"}), `pruned` (the (layer, head) pairs masked
        when `keep_fraction` was reached, in the order they were masked),
        `order` (every masked head in order), `importance` (the first scores,
        at m = 1, as nested lists).
    """
    if not 0.0 < step_fraction <= 1.0:
        raise ValueError(f"step_fraction must be in (0, 1], got {step_fraction}")
    if not 0.0 < max_fraction < 1.0:
        raise ValueError(f"the fraction of heads to prune must be in (0, 1), got {max_fraction}")
    keep_fraction = max_fraction if keep_fraction is None else keep_fraction
    units = head_units(model)
    counts = units.counts  # BERT: one entry per layer; ALBERT: per shared group
    total = sum(counts)
    target = min(total - 1, int(round(max_fraction * total)))
    keep_target = min(target, int(round(keep_fraction * total)))
    per_step = max(1, int(round(step_fraction * total)))
    mask = _ones(counts)  # one vector per unit; ALBERT's layers share their group's
    score_batches, eval_batches = list(score_batches), list(eval_batches)
    grads = _gradient_fn(model, granularity)  # traced once for every step

    def score(unit_mask):
        if not units.shared:
            return head_importance(model, score_batches, unit_mask, normalize_layers,
                                   _grads=grads)
        return shared_head_importance(model, score_batches, units.layer_mask(unit_mask),
                                      normalize_layers, _grads=grads)

    def record(pruned_now):
        result = evaluate(model, eval_batches, units.layer_mask(mask))
        left = int(sum(m.sum() for m in mask))
        return {"heads_left": left, "fraction_pruned": 1.0 - left / total,
                "accuracy": result.get("accuracy"), "loss": result.get("loss"),
                "pruned_this_step": pruned_now}

    steps, order, first_scores, pruned = [record([])], [], None, None
    if keep_target == 0:
        pruned = []
    while len(order) < target:
        scores = score(mask) if rescore or first_scores is None else first_scores
        if first_scores is None:
            first_scores = scores
        candidates = [(scores[l, h], l, h) for l in range(len(counts))
                      for h in range(counts[l]) if mask[l][h] > 0]
        candidates.sort()
        limit = min(per_step, target - len(order))
        if pruned is None and len(order) < keep_target:
            limit = min(limit, keep_target - len(order))  # land exactly on keep_target
        now = [(l, h) for _, l, h in candidates[:limit]]
        for l, h in now:
            mask[l][h] = 0.0
        order.extend(now)
        steps.append(record([list(p) for p in now]))
        if pruned is None and len(order) >= keep_target:
            pruned = list(order)
    if first_scores is None:
        first_scores = score(None) if not units.shared else score(_ones(counts))
    return {"steps": steps, "pruned": pruned if pruned is not None else list(order),
            "order": order, "importance": _nested(first_scores)}


def _nested(matrix):
    return [[None if math.isnan(v) else float(v) for v in row] for row in np.asarray(matrix)]


def prune_heads(model, heads):
    """A new model without `heads`; the kept heads' weights copied.

    Args:
        model: a `BertEncoder`, or a task model whose `.encoder` is one and
            whose `get_config()` lists its constructor arguments with an
            `encoder` entry (`BertClassifier`, `BertMultipleChoice`, ...).
        heads: (layer, head) pairs, or `{layer: [heads]}`, 0-based indices
            into `model`'s current heads of each layer.

    Returns:
        The pruned model, of `model`'s type: its layers have
        `num_attention_heads_per_layer` heads, and with dropout off it computes
        what `model` computes with those heads masked (head_mask 0).

    ALBERT (`AlbertEncoder` with full sharing, or a task model around one):
    `heads` are (group, head) pairs of the shared attention (group 0 with
    one shared layer), `{group: [heads]}`, plain head numbers or a
    `parse_shared_heads` string; the new encoder has
    `num_attention_heads_per_group` and computes what `model` computes with
    those heads masked at every depth.
    """
    encoder = _encoder_of(model)
    units = head_units(model)
    if units.shared:
        return _prune_shared_heads(model, encoder, units, heads)
    counts = units.counts
    if isinstance(heads, dict):
        heads = [(int(l), int(h)) for l, hs in heads.items() for h in hs]
    drop = {}
    for layer, head in parse_heads([tuple(p) for p in heads], counts, "prune_heads"):
        drop.setdefault(layer, set()).add(head)
    kept = [[h for h in range(n) if h not in drop.get(l, ())] for l, n in enumerate(counts)]
    config = encoder.get_config()
    config[head_pruning_of(encoder).counts_key] = [len(k) for k in kept]
    new_encoder = type(encoder).from_config(config)
    _copy_weights(encoder, new_encoder, kept)
    return _rebuild(model, encoder, new_encoder)


def _prune_shared_heads(model, encoder, units, heads):
    """`prune_heads` for ALBERT: `heads` are (group, head) pairs, `{group: [heads]}`,
    or plain head numbers / `parse_shared_heads` strings (one shared layer)."""
    if isinstance(heads, dict):
        heads = [(int(g), int(h)) for g, hs in heads.items() for h in hs]
    if isinstance(heads, str):
        pairs = parse_shared_heads(heads, units, "prune_heads")
    else:
        pairs, numbers = [], []
        for item in heads:
            if isinstance(item, (int, np.integer)):
                numbers.append(int(item))
            else:
                pairs.append(tuple(int(v) for v in item))
        if numbers:
            pairs += parse_shared_heads(numbers, units, "prune_heads")
        pairs = parse_heads(pairs, units.counts, "prune_heads", unit="group")
    drop = {}
    for group, head in pairs:
        drop.setdefault(group, set()).add(head)
    kept = [[h for h in range(n) if h not in drop.get(g, ())]
            for g, n in enumerate(units.counts)]
    config = encoder.get_config()
    config[head_pruning_of(encoder).counts_key] = [len(k) for k in kept]
    new_encoder = type(encoder).from_config(config)
    for old, new in zip(encoder.weights, new_encoder.weights):
        if tuple(old.shape) == tuple(new.shape):
            new.assign(old)
    k = encoder.inner_group_num
    for block, (old_sub, new_sub) in enumerate(zip(encoder.attention_sublayers,
                                                   new_encoder.attention_sublayers)):
        _copy_attention(old_sub.attention, new_sub.attention, kept[block // k])
    return _rebuild(model, encoder, new_encoder)


def _rebuild(model, encoder, new_encoder):
    """`model` (an encoder, or a task model around `encoder`) around `new_encoder`."""
    if model is encoder:
        return new_encoder
    model_config = model.get_config()
    model_config["encoder"] = new_encoder
    new_model = type(model)(**model_config)
    old_rest = [w for w in model.weights if id(w) not in {id(v) for v in encoder.weights}]
    new_rest = [w for w in new_model.weights
                if id(w) not in {id(v) for v in new_encoder.weights}]
    if len(old_rest) != len(new_rest):
        raise ValueError(f"prune_heads: {type(model).__name__} rebuilt with a different "
                         "set of weights")
    for old, new in zip(old_rest, new_rest):
        new.assign(old)
    return new_model


def _copy_weights(old_encoder, new_encoder, kept):
    """Copies every weight; the attention projections keep the `kept` heads' slices."""
    old_weights, new_weights = old_encoder.weights, new_encoder.weights
    for old, new in zip(old_weights, new_weights):
        if tuple(old.shape) == tuple(new.shape):
            new.assign(old)
    for layer, heads in enumerate(kept):
        _copy_attention(_attention(old_encoder, layer), _attention(new_encoder, layer), heads)


def _copy_attention(old_att, new_att, heads):
    """The kept `heads`' query/key/value columns and output rows, old -> new attention."""
    size = old_att.head_size
    columns = np.asarray([h * size + i for h in heads for i in range(size)], np.int64)
    for name in ("query", "key", "value"):
        old_dense, new_dense = getattr(old_att, name), getattr(new_att, name)
        new_dense.kernel.assign(tf.gather(old_dense.kernel, columns, axis=1))
        new_dense.bias.assign(tf.gather(old_dense.bias, columns, axis=0))
    new_att.output_dense.kernel.assign(tf.gather(old_att.output_dense.kernel, columns,
                                                 axis=0))
    new_att.output_dense.bias.assign(old_att.output_dense.bias)


# -------------------------------------------------------------------- files

def load_classifier_head(model, path):
    """Loads a fine-tuned classifier's `output_weights`/`output_bias` from `path`.

    Google's run_classifier checkpoints and this project's Google-format
    exports name them `output_weights` / `output_bias`; this project's trainer
    checkpoints hold `<model name>/output_weights`; HF safetensors
    `classifier.weight` / `classifier.bias`. The encoder is loaded separately
    (`modeling.checkpoints.init_from_checkpoint`). Returns True if a head was
    found and loaded, False if the checkpoint has none.
    """
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling.checkpoints import object_based  # pylint: disable=g-import-not-at-top

    fmt, resolved = checkpoints.resolve_checkpoint(path)
    if fmt == checkpoints.HF_SAFETENSORS:
        arrays = checkpoints.read_safetensors(resolved)
        weight, bias = arrays.get("classifier.weight"), arrays.get("classifier.bias")
    else:
        reader = tf.train.load_checkpoint(resolved)
        names = reader.get_variable_to_shape_map()
        if fmt == checkpoints.OBJECT_BASED:
            keys = object_based.model_variable_keys(reader, resolved)
            found = {}
            for full_name, key in keys.items():
                for leaf in ("output_weights", "output_bias"):
                    if full_name.endswith("/" + leaf) and "encoder" not in full_name:
                        found[leaf] = key
            weight = reader.get_tensor(found["output_weights"]) \
                if "output_weights" in found else None
            bias = reader.get_tensor(found["output_bias"]) if "output_bias" in found else None
        else:
            weight = reader.get_tensor("output_weights") if "output_weights" in names else None
            bias = reader.get_tensor("output_bias") if "output_bias" in names else None
    if weight is None or bias is None:
        return False
    expected = tuple(model.output_weights.shape)
    if tuple(weight.shape) != expected:
        raise ValueError(f"{path}: the classifier's output_weights are {tuple(weight.shape)}; "
                         f"the model needs {expected} (check the task's labels)")
    model.output_weights.assign(weight)
    model.output_bias.assign(bias)
    return True


def save_pruned(model, output_dir, base_config):
    """Writes `bert_model.ckpt` (Google TF1 names) and `bert_config.json` into `output_dir`.

    The config is `base_config` (its other keys kept) with the model's
    `num_attention_heads_per_layer`; the checkpoint holds the encoder under
    google-research/bert's names plus, for a classifier, its
    `output_weights`/`output_bias` (the names of Google's fine-tuned
    checkpoints). Both load with `--bert_config_file=DIR/bert_config.json
    --init_checkpoint=DIR` in every script. Returns (checkpoint prefix,
    config path).

    An ALBERT is written as `model.ckpt` (google-research/albert's names)
    and `albert_config.json` with `num_attention_heads_per_group`; it loads
    with `--model_family=albert --bert_config_file=DIR/albert_config.json
    --init_checkpoint=DIR`.
    """
    from modeling.checkpoints import google_tf1  # pylint: disable=g-import-not-at-top
    from modeling.checkpoints import name_tables  # pylint: disable=g-import-not-at-top
    from modeling.checkpoints import targets  # pylint: disable=g-import-not-at-top

    tf.io.gfile.makedirs(output_dir)
    encoder = _encoder_of(model)
    target = targets.find_target(model)
    table = name_tables.table_for(target, name_tables.GOOGLE_TF1_KEY, output_dir)
    arrays = {name: np.ascontiguousarray(value, dtype=np.float32)
              for name, value in name_tables.table_arrays(target, table).items()}
    for name in ("output_weights", "output_bias"):
        if model is not encoder and hasattr(model, name):
            arrays[name] = np.asarray(getattr(model, name).numpy(), np.float32)
    units = head_units(model)
    # The family's file names (ALBERT: google-research/albert's) and config key.
    pruning = head_pruning_of(target.family)
    prefix = google_tf1.write_tf1_checkpoint(
        os.path.join(output_dir, pruning.checkpoint_name), arrays)
    config = base_config.replace(**{pruning.counts_key: units.counts})
    config_path = os.path.join(output_dir, target.family.config_file_name)
    config.to_json_file(config_path)
    return prefix, config_path


def write_json(path, value):
    """Writes `value` as indented JSON, atomically."""
    atomic.write_text(path, json.dumps(value, indent=2) + "\n")


def plot_pruning_curve(steps, path, title="Accuracy vs attention heads left"):
    """A PNG of accuracy (y) against heads left (x), written atomically."""
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

    figure = Figure(figsize=(5, 3.5))
    axes = figure.add_subplot(1, 1, 1)
    heads = [s["heads_left"] for s in steps]
    accuracy = [s["accuracy"] for s in steps]
    axes.plot(heads, accuracy, marker="o")
    axes.set_xlabel("attention heads left")
    axes.set_ylabel("accuracy")
    axes.set_title(title)
    axes.invert_xaxis()
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(suffix=".png", dir=directory, prefix=".tmp-")
    os.close(handle)
    try:
        figure.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


# ---------------------------------------------------------------------- job

def _batches(features, batch_size):
    """Lists of `InputFeatures` -> feature dicts of numpy arrays (last batch may be short)."""
    out = []
    for start in range(0, len(features), batch_size):
        chunk = features[start:start + batch_size]
        out.append({
            "input_ids": np.asarray([f.input_ids for f in chunk], np.int32),
            "input_mask": np.asarray([f.input_mask for f in chunk], np.int32),
            "segment_ids": np.asarray([f.segment_ids for f in chunk], np.int32),
            "label_ids": np.asarray([f.label_id for f in chunk], np.int32),
            "is_real_example": np.ones([len(chunk)], np.int32),
        })
    return out


def _latency_batch(config, batch_size, seq_length, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": tf.constant(rng.integers(1, config.vocab_size, [batch_size, seq_length]),
                                 tf.int32),
        "input_mask": tf.ones([batch_size, seq_length], tf.int32),
        "segment_ids": tf.zeros([batch_size, seq_length], tf.int32),
    }


@dataclasses.dataclass
class PruningSettings(processors_lib.GenericColumns):
    """A `run` of `run/prune_heads.py`; its fields are that script's flags.

    The model and data fields are `ClassifierJob`'s (`classifier_job()`
    makes the job `run` reads them from), worded for pruning; the others are
    `run`'s arguments (`run_options()`).
    """

    model_family: str = option(
        registry.DEFAULT_FAMILY, "The encoder's model family (bert or albert): how "
        "--bert_config_file and --init_checkpoint are read and what a head is (ALBERT: a "
        "head of the shared layer).")
    init_checkpoint: Optional[str] = option(
        None, "The model: a Google bert_model.ckpt prefix or folder, a checkpoint of this "
        "project (e.g. run_classifier's output_dir), or HF safetensors.")
    bert_config_file: Optional[str] = option(
        None, "The model's bert_config.json (ALBERT: albert_config.json).")
    vocab_file: Optional[str] = option(
        None, "The model's vocab.txt (needed with labelled data).")
    output_dir: Optional[str] = option(
        None, "Where bert_model.ckpt, bert_config.json and pruning.json are written.")
    heads_to_prune: Optional[str] = option(
        None, "Heads to remove: LAYER:HEAD,... (0-based), e.g. 0:1,3:0. ALBERT: heads of the "
        "shared layer, HEAD or *:HEAD (e.g. 1,*:5), or LAYER:HEAD listed for every layer.")
    prune_fraction: Optional[float] = option(
        None, "Instead of --heads_to_prune: remove this fraction of all heads, the least "
        "important first (needs labelled data).")
    prune_step_fraction: float = option(
        0.1, "Fraction of the heads masked per step of iterative pruning.")
    curve_fraction: Optional[float] = option(
        None, "Continue the accuracy-vs-heads curve (masking only) to this fraction; "
        "default --prune_fraction.")
    normalize_layers: bool = option(
        True, "Divide each layer's importance scores by their L2 norm (Michel et al.).")
    rescore_each_step: bool = option(
        True, "Re-score the remaining heads before every pruning step (Michel et al.'s "
        "--exact_pruning); false: rank them once and mask in that order.")
    importance_granularity: str = option(
        "example", "Where the importance takes |dL/dm|: per example (Michel et al.'s "
        "E_x |dL(x)/dm|) or per batch of the batch's mean loss (HF run_bertology).",
        choices=GRANULARITIES)
    importance_split: str = option(
        "train", "The examples the importance scores are computed on.",
        choices=("train", "dev"))
    max_examples: int = option(512, "At most this many examples per split.")
    eval_batch_size: int = option(32, "Batch size for scoring and evaluation.")
    latency_batch_size: int = option(8, "Batch size of the latency measurement.")
    latency_repeats: int = option(10, "Timed forward passes (the median is reported).")
    do_lower_case: bool = option(True, "Lower case the input (True for uncased models).")
    max_seq_length: int = option(128, "Sequence length of the examples.")
    # run_classifier's data settings.
    task_name: Optional[str] = option(
        None, "The task (as run_classifier.py's --task_name).")
    data_dir: Optional[str] = option(None, "The task's data directory.")
    processor: Optional[str] = option(
        None, "A DataProcessor: path/to/my_task.py:MyProcessor.")
    train_file: Optional[str] = option(None, "generic: training file name in --data_dir.")
    dev_file: Optional[str] = option(None, "generic: dev file name in --data_dir.")
    xnli_language: str = option("zh", "xnli: the language.")

    # The fields that are ClassifierJob's too.
    _JOB_FIELDS = ("model_family", "init_checkpoint", "bert_config_file", "vocab_file",
                   "output_dir", "eval_batch_size", "do_lower_case", "max_seq_length",
                   "task_name", "data_dir", "processor", "text_a_column", "text_b_column",
                   "label_column", "has_header", "labels", "train_file", "dev_file",
                   "xnli_language", "file_format")

    def classifier_job(self):
        """The `ClassifierJob` of the model and the labelled data (a classification task)."""
        return classifier_job.ClassifierJob(
            task_type=processors_lib.CLASSIFICATION,
            **{name: getattr(self, name) for name in self._JOB_FIELDS})

    def run_options(self):
        """`run`'s keyword arguments besides the job."""
        return dict(heads_to_prune=self.heads_to_prune, prune_fraction=self.prune_fraction,
                    prune_step_fraction=self.prune_step_fraction,
                    curve_fraction=self.curve_fraction,
                    normalize_layers=self.normalize_layers,
                    importance_granularity=self.importance_granularity,
                    rescore_each_step=self.rescore_each_step,
                    importance_split=self.importance_split, max_examples=self.max_examples,
                    batch_size=self.eval_batch_size,
                    latency_batch_size=self.latency_batch_size,
                    latency_repeats=self.latency_repeats)


def run(job, heads_to_prune=None, prune_fraction=None, prune_step_fraction=0.1,
        curve_fraction=None, normalize_layers=True, importance_split="train",
        max_examples=512, batch_size=32, latency_batch_size=8, latency_repeats=10,
        importance_granularity="example", rescore_each_step=True):
    """What `run/prune_heads.py` does; returns the `pruning.json` contents.

    Args:
        job: a `modeling.tasks.classifier_job.ClassifierJob` with the model
            (`model_family`: "bert" or "albert", `bert_config_file`, `init_checkpoint`, `vocab_file`,
            `do_lower_case`, `max_seq_length`), `output_dir`, and optionally
            the labelled data (`task_name`/`processor`, `data_dir`, the
            generic-format fields) of `run_classifier.py`.
        heads_to_prune: "LAYER:HEAD,..." (0-based), or None. With
            `job.model_family="albert"` the heads of the shared layer:
            "HEAD" / "*:HEAD", or LAYER:HEAD listed for every layer
            (`parse_shared_heads`).
        prune_fraction: with no explicit heads, the fraction of all heads to
            remove, chosen by iterative importance pruning on the data.
        prune_step_fraction: fraction of the heads masked per pruning step.
        curve_fraction: continue the accuracy curve (masking only) up to this
            fraction; default `prune_fraction`.
        importance_split: "train" or "dev": the examples the importance is
            computed on (accuracy is always the dev set's).
        importance_granularity: "example" or "batch" (`head_importance`).
        rescore_each_step: `iterative_pruning`'s `rescore`.
        max_examples: at most this many examples per split.
    """
    from data import tokenization  # pylint: disable=g-import-not-at-top
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling.tasks.classification import BertClassifier  # pylint: disable=g-import-not-at-top

    for name in ("bert_config_file", "init_checkpoint", "output_dir"):
        if not getattr(job, name):
            raise ValueError(f"--{name} is required")
    # The pruned checkpoint and config would replace the ones being pruned.
    atomic.check_outputs([], [("--" + name, getattr(job, name, None)) for name in (
        "init_checkpoint", "bert_config_file", "vocab_file")], [("--output_dir", job.output_dir)])
    if (heads_to_prune is None) == (prune_fraction is None):
        raise ValueError("give exactly one of --heads_to_prune=LAYER:HEAD,... and "
                         "--prune_fraction")
    if prune_fraction is not None and not 0.0 < prune_fraction < 1.0:
        raise ValueError(f"--prune_fraction={prune_fraction}: expected a fraction in (0, 1)")
    if not 0.0 < prune_step_fraction <= 1.0:
        raise ValueError(f"--prune_step_fraction={prune_step_fraction}: expected (0, 1]")
    if curve_fraction is not None and not (prune_fraction or 0.0) <= curve_fraction < 1.0:
        raise ValueError(f"--curve_fraction={curve_fraction}: expected [--prune_fraction, 1)")
    if importance_split not in ("train", "dev"):
        raise ValueError(f"--importance_split={importance_split}: expected train or dev")
    model_family = getattr(job, "model_family", None) or registry.DEFAULT_FAMILY
    if model_family not in prunable_families():
        raise ValueError(f"--model_family={model_family}: head pruning supports "
                         f"{_and(prunable_families())}")
    family = registry.families.get(model_family)
    config = family.load_config(job.bert_config_file)
    if heads_to_prune is not None:  # bad values fail before any model is built
        parse_heads_for(heads_to_prune, head_units_of_config(config, model_family))
    has_data = bool(job.data_dir and (job.task_name or job.processor))
    if prune_fraction is not None and not has_data:
        raise ValueError("--prune_fraction needs labelled data for the importance scores: "
                         "--task_name (or --processor) and --data_dir")

    batches = {}
    if has_data:
        if not job.vocab_file:
            raise ValueError("--vocab_file is required with labelled data")
        processor = classifier_job.build_processor(job, config.vocab_size)
        task_type = getattr(processor, "task_type", processors_lib.CLASSIFICATION)
        if task_type == processors_lib.REGRESSION or getattr(processor, "is_multiple_choice",
                                                             False):
            raise ValueError("head pruning measures accuracy: it needs a classification task, "
                             f"not {type(processor).__name__} ({task_type})")
        label_list, num_labels, _ = classifier_job.labels_and_metrics(processor, task_type)
        tokenizer = tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)
        splits = {"dev": processor.get_dev_examples}
        if prune_fraction is not None and importance_split == "train":
            splits["train"] = processor.get_train_examples
        for split, read in splits.items():
            examples = list(read(job.data_dir))[:max_examples]
            if not examples:
                raise ValueError(f"the {split} set in {job.data_dir} has no examples")
            features = processors_lib.convert_examples_to_features(
                examples, label_list, job.max_seq_length, tokenizer, task_type)
            batches[split] = _batches(features, batch_size)
        model = BertClassifier.from_config_object(config, num_labels=num_labels,
                                                  task_type=task_type, family=family)
    else:
        model = family.build_encoder(config)
    checkpoints.init_from_checkpoint(model, job.init_checkpoint)
    head_loaded = None
    if has_data:
        head_loaded = load_classifier_head(model, job.init_checkpoint)
        if not head_loaded and prune_fraction is not None:
            raise ValueError(f"--init_checkpoint={job.init_checkpoint} has no classifier head "
                             "(output_weights): importance scores need a fine-tuned "
                             "classifier (run_classifier.py's output)")

    units = head_units(model)
    counts = units.layer_counts
    report = {"init_checkpoint": job.init_checkpoint, "model_family": model_family,
              "heads_per_layer_before": counts, "classifier_head_loaded": head_loaded,
              "importance_granularity": importance_granularity}
    if units.shared:
        report["pruning_unit"] = ("a head of a group's shared attention: [GROUP, HEAD], "
                                  "removed at every depth of the group")
        report["shared_heads_before"] = units.counts
    if heads_to_prune is not None:
        pruned = parse_heads_for(heads_to_prune, units)
        if has_data and head_loaded:
            if units.shared:
                report["importance_per_layer"] = _nested(head_importance(
                    model, batches["dev"], granularity=importance_granularity))
            report["importance"] = _nested(shared_head_importance(
                model, batches["dev"], normalize=normalize_layers,
                granularity=importance_granularity))
    else:
        curve = iterative_pruning(
            model, batches[importance_split], batches["dev"], prune_step_fraction,
            max(prune_fraction, curve_fraction or 0.0), normalize_layers,
            keep_fraction=prune_fraction, granularity=importance_granularity,
            rescore=rescore_each_step)
        pruned = sorted(tuple(p) for p in curve["pruned"])
        report.update(importance=curve["importance"], curve=curve["steps"],
                      pruning_order=[list(p) for p in curve["order"]])
    smaller = prune_heads(model, pruned)
    report["heads_removed"] = [list(p) for p in pruned]
    report["heads_per_layer_after"] = head_counts(smaller)
    if units.shared:
        report["shared_heads_after"] = head_units(smaller).counts
    if has_data:
        report["accuracy_before"] = evaluate(model, batches["dev"]).get("accuracy")
        report["accuracy_after"] = evaluate(smaller, batches["dev"]).get("accuracy")
    report["parameters_before"] = count_parameters(_encoder_of(model))
    report["parameters_after"] = count_parameters(_encoder_of(smaller))
    latency_inputs = _latency_batch(config, latency_batch_size, job.max_seq_length)
    before = measure_latency(_encoder_of(model), latency_inputs, latency_repeats)
    after = measure_latency(_encoder_of(smaller), latency_inputs, latency_repeats)
    report["latency"] = {"batch_size": latency_batch_size, "seq_length": job.max_seq_length,
                         "what": "median seconds of one encoder forward pass (tf.function)",
                         "before_seconds": before, "after_seconds": after,
                         "speedup": before / after if after > 0 else None}
    prefix, config_path = save_pruned(smaller, job.output_dir, config)
    report["checkpoint"] = {"format": "google_tf1", "prefix": prefix, "config": config_path}
    if "curve" in report:
        report["curve_png"] = plot_pruning_curve(
            report["curve"], os.path.join(job.output_dir, "pruning_curve.png"))
        plots.png_to_tensorboard(report["curve_png"])
    write_json(os.path.join(job.output_dir, "pruning.json"), report)
    return report
