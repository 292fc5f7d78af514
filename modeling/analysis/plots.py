"""Pictures of the analyses' results: compression, cloze probing, cues, HANS, language sampling.

Each ``plot_*`` function takes the result its analysis already returns (and
writes as JSON) plus a path, draws one figure with matplotlib's object API
(no pyplot, the Agg canvas, so it runs without a display and never touches
global state), writes it as a PNG atomically (`data.atomic`: a temporary
file beside the target, renamed over it) and returns the numbers it drew,
read back from the figure's artists, so a test can check that the picture
shows what it was given.

* `plot_compression` (`compression.evaluate`'s report): size, median latency,
  accuracy and agreement per variant, three bar panels (compression.png);
* `plot_cloze` (`cloze.probe`): precision@1 and @10 per relation and over
  all facts (cloze.png);
* `plot_cues` (`data.probing.arct.cue_statistics`): productivity against
  coverage of every cue, the top ones labelled, the chance line (cues.png);
* `plot_hans` (`data.probing.hans.evaluate_hans`): accuracy per heuristic x
  gold label, and per sub-case (hans.png);
* `plot_language_sampling` (`data.multilingual.resample_documents`): p_i
  beside q_i per language, and q_i as a function of alpha (sampling.png).

The run scripts write them by default (``--noplot``: not).
"""

import io
import os

import numpy as np

from data import atomic

__all__ = ["DPI", "new_figure", "save_figure", "plot_compression", "plot_cloze", "plot_cues",
           "plot_hans", "plot_language_sampling", "COMPRESSION_ROWS"]

DPI = 100

# The compression report's rows, in the order drawn: (key, label).
COMPRESSION_ROWS = (("float", "float (TF)"), ("float32", "float32"),
                    ("dynamic_int8", "dynamic int8"), ("float16", "float16"))

_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")


def new_figure(width, height, dpi=DPI):
    """A matplotlib `Figure` (no pyplot) with an Agg canvas and a constrained layout."""
    # pylint: disable=g-import-not-at-top
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure, path, colors=256):
    """Writes `figure` as a PNG at `path` atomically (parent directories made); returns `path`.

    With `colors` (the default), the picture is stored with a palette of
    that many colours (Pillow's median cut; plots have few), which makes the
    file about a third of the full-colour one; ``colors=None`` keeps RGBA.
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    data = buffer.getvalue()
    if colors:
        from PIL import Image  # pylint: disable=g-import-not-at-top  # matplotlib's dependency
        image = Image.open(io.BytesIO(data)).convert("RGB").quantize(colors)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
        data = buffer.getvalue()
    path = os.fspath(path)
    with atomic.atomic_output(path, "wb") as handle:
        handle.write(data)
    return path


def write_tensorboard_images(images, log_dir, step=0):
    """Writes PNG bytes ``{tag: png}`` as TensorBoard images into `log_dir`."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        for tag, data in images.items():
            image = tf.image.decode_png(data, channels=4)[tf.newaxis]
            tf.summary.image(tag, image, step=step)
    writer.flush()
    writer.close()


def png_to_tensorboard(path, log_dir=None):
    """The picture at `path` also as a TensorBoard image (tag: its file name without
    ``.png``) in `log_dir` (default: ``tensorboard/`` beside it); returns `log_dir`."""
    log_dir = log_dir or os.path.join(os.path.dirname(os.fspath(path)), "tensorboard")
    with open(path, "rb") as f:
        data = f.read()
    write_tensorboard_images({os.path.splitext(os.path.basename(path))[0]: data}, log_dir)
    return log_dir


def _heights(container):
    return [float(patch.get_height()) for patch in container.patches]


def _widths(container):
    return [float(patch.get_width()) for patch in container.patches]


def _label_bars(axes, bars, fmt):
    axes.bar_label(bars, labels=[fmt % b.get_height() for b in bars], fontsize=7, padding=1)


# --------------------------------------------------------------- compression


def plot_compression(report, path, title=None):
    """Three bar panels from `compression.evaluate`'s report: size, latency, accuracy.

    Rows: the float model (its parameter bytes; TensorFlow) and each TFLite
    variant present (float32, dynamic int8, float16). The size panel writes
    each variant's ratio to the float32 file on its bar; the last panel has
    accuracy and agreement with the float model side by side (the float row
    has accuracy only).

    Returns:
      ``{"rows": [label...], "size_bytes": [...], "latency_ms": [...],
      "accuracy": [...], "agreement": [...] (variants only)}``, read back
      from the drawn bars.
    """
    rows = []
    for key, label in COMPRESSION_ROWS:
        if key == "float":
            row = report.get("float")
            if row is None:
                continue
            rows.append((label, row["parameter_bytes"], row["latency_ms_per_example"],
                         row["accuracy"], None))
        elif key in report.get("variants", {}):
            row = report["variants"][key]
            rows.append((label, row["size_bytes"], row["latency_ms_per_example"],
                         row["accuracy"], row["agreement_with_float"]))
    if not rows:
        raise ValueError("plot_compression: the report has no float row and no variants")
    labels = [r[0] for r in rows]
    x = np.arange(len(rows))
    figure = new_figure(11, 3.6)
    size_axes, latency_axes, accuracy_axes = figure.subplots(1, 3)
    colors = [_COLORS[i % len(_COLORS)] for i in range(len(rows))]

    sizes = size_axes.bar(x, [r[1] for r in rows], color=colors)
    float32 = report.get("float32_tflite_bytes") or (
        report.get("variants", {}).get("float32", {}).get("size_bytes"))
    size_labels = []
    for r in rows:
        text = "{:,}".format(int(r[1]))
        if float32 and r[0] != "float (TF)":
            text += "\n%.2fx" % (r[1] / float(float32))
        size_labels.append(text)
    size_axes.bar_label(sizes, labels=size_labels, fontsize=7, padding=1)
    size_axes.set_ylabel("bytes")
    size_axes.yaxis.set_major_formatter("{x:,.0f}")
    size_axes.set_title("size (float: parameter bytes)", fontsize=9)
    size_axes.margins(y=0.2)

    latency = latency_axes.bar(x, [r[2] for r in rows], color=colors)
    _label_bars(latency_axes, latency, "%.2f")
    latency_axes.set_ylabel("ms per example (median)")
    latency_axes.set_title("latency", fontsize=9)
    latency_axes.margins(y=0.15)

    width = 0.38
    accuracy = accuracy_axes.bar(x - width / 2, [r[3] for r in rows], width, label="accuracy",
                                 color="#4c72b0")
    _label_bars(accuracy_axes, accuracy, "%.3f")
    variant_x = [i for i, r in enumerate(rows) if r[4] is not None]
    agreement = accuracy_axes.bar(np.asarray(variant_x, dtype=float) + width / 2,
                                  [rows[i][4] for i in variant_x], width,
                                  label="agreement with float", color="#dd8452")
    _label_bars(accuracy_axes, agreement, "%.3f")
    accuracy_axes.set_ylim(0, 1.3)
    accuracy_axes.set_yticks(np.linspace(0, 1, 6))
    accuracy_axes.set_title("accuracy and agreement", fontsize=9)
    accuracy_axes.legend(fontsize=7, loc="upper center", ncol=2)
    for axes in (size_axes, latency_axes, accuracy_axes):
        axes.set_xticks(x)
        axes.set_xticklabels(labels, fontsize=8, rotation=15)
        axes.grid(True, axis="y", alpha=0.3)
    figure.suptitle(title or "Post-training quantization (%d examples)"
                    % report.get("num_examples", 0), fontsize=10)
    save_figure(figure, path)
    return {"rows": labels, "size_bytes": _heights(sizes), "latency_ms": _heights(latency),
            "accuracy": _heights(accuracy), "agreement": _heights(agreement)}


# --------------------------------------------------------------------- cloze


def plot_cloze(report, path, title=None):
    """P@1 and P@10 bars per relation (sorted) and over all facts, from `cloze.probe`.

    Returns ``{"groups": [...], "precision_at_1": [...], "precision_at_10": [...]}``
    read back from the bars ("all" last).
    """
    per_relation = report.get("per_relation") or {}
    groups = [(name, row) for name, row in sorted(per_relation.items())]
    groups.append(("all", report))
    x = np.arange(len(groups))
    figure = new_figure(max(5.0, 1.0 + 0.9 * len(groups)), 3.6)
    axes = figure.subplots()
    width = 0.38
    at_1 = axes.bar(x - width / 2, [g[1]["precision_at_1"] for g in groups], width,
                    label="P@1", color="#4c72b0")
    at_10 = axes.bar(x + width / 2, [g[1]["precision_at_10"] for g in groups], width,
                     label="P@10", color="#dd8452")
    _label_bars(axes, at_1, "%.2f")
    _label_bars(axes, at_10, "%.2f")
    axes.set_xticks(x)
    axes.set_xticklabels(["%s\n(n=%d)" % (name, row.get("num_facts", 0)) for name, row in groups],
                         fontsize=8)
    axes.set_ylim(0, 1.25)
    axes.set_yticks(np.linspace(0, 1, 6))
    axes.set_ylabel("precision")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=8, loc="upper center", ncol=2)
    skipped = len(report.get("skipped") or [])
    axes.set_title(title or "Cloze probing: %d facts%s" % (
        report.get("num_facts", 0), " (%d skipped)" % skipped if skipped else ""), fontsize=10)
    save_figure(figure, path)
    return {"groups": [g[0] for g in groups], "precision_at_1": _heights(at_1),
            "precision_at_10": _heights(at_10)}


# ---------------------------------------------------------------------- cues


def plot_cues(report, path, top=10, title=None):
    """Productivity (y) against coverage (x) of every cue, from `cue_statistics`.

    Unigrams and bigrams in two colours on a log coverage axis, the chance
    line (1 / number of choices or labels) dashed, and the `top` cues of the
    report's ranking labelled in a column right of the plot (rank, cue, the
    label for pairs, productivity / coverage), each with a line to its point
    (the top cues often sit on top of each other).

    Returns ``{"coverage": [...], "productivity": [...], "labelled": [cue...],
    "labelled_xy": [(coverage, productivity)...], "chance": y of the chance
    line or None}`` read back from the figure, the points in the report's order.
    """
    cues = report.get("cues") or []
    figure = new_figure(8.4, 4.2)
    axes = figure.subplots()
    orders = sorted({row["order"] for row in cues}) or [1]
    collections = []
    for i, order in enumerate(orders):
        rows = [row for row in cues if row["order"] == order]
        name = {1: "unigrams", 2: "bigrams", 3: "trigrams"}.get(order, "%d-grams" % order)
        collections.append((order, axes.scatter(
            [r["coverage"] for r in rows], [r["productivity"] for r in rows], s=10,
            alpha=0.5, color=_COLORS[i % len(_COLORS)], label="%s (%d)" % (name, len(rows)),
            edgecolors="none")))
    chance = report.get("chance")
    chance_y = None
    if chance is not None:
        line = axes.axhline(chance, color="#c44e52", linestyle="--", linewidth=1,
                            label="chance (%.3f)" % chance)
        chance_y = float(line.get_ydata()[0])
    labelled, labelled_xy = [], []
    shown = cues[:top or 0]
    step = min(0.09, 0.98 / max(len(shown), 1))
    for rank, row in enumerate(shown, 1):
        text = "%d. %s%s  %.2f / %.3f" % (rank, row["cue"],
                                          " [%s]" % row["label"] if "label" in row else "",
                                          row["productivity"], row["coverage"])
        note = axes.annotate(
            text, (row["coverage"], row["productivity"]), xycoords="data",
            xytext=(1.03, 0.99 - (rank - 0.5) * step), textcoords="axes fraction",
            fontsize=7, va="center", ha="left", annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": "#8c8c8c", "linewidth": 0.5,
                        "shrinkA": 0, "shrinkB": 2})
        labelled.append(row["cue"])
        labelled_xy.append(tuple(float(v) for v in note.xy))
    if shown:
        axes.annotate("top %d: productivity / coverage" % len(shown), (1.03, 1.0),
                      xycoords="axes fraction", fontsize=7, va="bottom", ha="left",
                      style="italic")
    coverages = [row["coverage"] for row in cues if row["coverage"] > 0]
    if coverages:
        axes.set_xscale("log")
        axes.set_xlim(min(coverages) / 1.5, max(coverages) * 1.5)
    axes.set_xlabel("coverage (share of data points the cue applies to)")
    axes.set_ylabel("productivity")
    axes.set_ylim(-0.03, 1.08)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    axes.set_title(title or "Cues: %d data points (%s), top %d labelled"
                   % (report.get("n", 0), report.get("kind", "?"), len(labelled)), fontsize=10)
    save_figure(figure, path)
    # Back to the report's order from the per-order collections.
    points = {}
    for order, collection in collections:
        rows = [row for row in cues if row["order"] == order]
        for row, (cx, cy) in zip(rows, collection.get_offsets()):
            points[id(row)] = (float(cx), float(cy))
    return {"coverage": [points[id(r)][0] for r in cues],
            "productivity": [points[id(r)][1] for r in cues],
            "labelled": labelled, "labelled_xy": labelled_xy, "chance": chance_y}


# ---------------------------------------------------------------------- HANS

_HANS_ORDER = ("lexical_overlap", "subsequence", "constituent")
_HANS_PREFIXES = {"%s%s_" % (h[0], l[0]): (h, l) for h in _HANS_ORDER
                  for l in ("entailment", "non-entailment")}


def plot_hans(result, path, subcases=True, title=None):
    """Accuracy per heuristic x gold label (grouped bars), from `evaluate_hans`.

    With `subcases`, a second panel has one horizontal bar per sub-case.

    Returns ``{"heuristics": [...], "labels": [...], "accuracy": {label:
    [per heuristic]}, "subcases": [...], "subcase_accuracy": [...]}`` read
    back from the bars (a missing cell is drawn as no bar and returned as None).
    """
    by_heuristic = result.get("by_heuristic") or {}
    heuristics = sorted(by_heuristic, key=lambda h: (
        _HANS_ORDER.index(h) if h in _HANS_ORDER else len(_HANS_ORDER), h))
    labels = sorted({label for cells in by_heuristic.values() for label in cells})
    by_subcase = result.get("by_subcase") or {}
    show_subcases = bool(subcases and by_subcase)
    height = max(3.6, 0.17 * len(by_subcase) + 1.0) if show_subcases else 3.6
    figure = new_figure(11 if show_subcases else 6, height)
    if show_subcases:
        axes, sub_axes = figure.subplots(1, 2, width_ratios=[1, 1.2])
    else:
        axes, sub_axes = figure.subplots(), None
    x = np.arange(len(heuristics))
    width = 0.8 / max(len(labels), 1)
    drawn = {}
    for i, label in enumerate(labels):
        values = [by_heuristic[h].get(label, {}).get("accuracy") for h in heuristics]
        where = [j for j, v in enumerate(values) if v is not None]
        bars = axes.bar(x[where] + (i - (len(labels) - 1) / 2.0) * width if where else [],
                        [values[j] for j in where], width, label=label,
                        color=_COLORS[i % len(_COLORS)])
        _label_bars(axes, bars, "%.2f")
        heights = iter(_heights(bars))
        drawn[label] = [next(heights) if v is not None else None for v in values]
    axes.set_xticks(x)
    axes.set_xticklabels(heuristics, fontsize=8)
    axes.set_ylabel("accuracy")
    axes.grid(True, axis="y", alpha=0.3)
    axes.set_ylim(0, 1.25)
    axes.set_yticks(np.linspace(0, 1, 6))
    axes.legend(fontsize=8, title="gold label", title_fontsize=8, loc="upper center",
                ncol=max(len(labels), 1))
    overall = result.get("overall") or {}
    axes.set_title(title or "HANS: accuracy per heuristic x gold label\n(overall %.3f, %d pairs)"
                   % (overall.get("accuracy", float("nan")), overall.get("count", 0)), fontsize=9)
    names, sub_values = [], []
    if sub_axes is not None:
        # HANS's sub-case names start with the heuristic's and the label's
        # initials (ln_passive: lexical overlap, non-entailed): grouped and
        # coloured by them when they do.
        def key(name):
            heuristic, label = _HANS_PREFIXES.get(name[:3], (None, None))
            return (heuristics.index(heuristic) if heuristic in heuristics else len(heuristics),
                    labels.index(label) if label in labels else len(labels), name)
        names = sorted(by_subcase, key=key)
        y = np.arange(len(names))
        colors = []
        for name in names:
            label = _HANS_PREFIXES.get(name[:3], (None, None))[1]
            colors.append(_COLORS[labels.index(label) % len(_COLORS)] if label in labels
                          else "#8c8c8c")
        bars = sub_axes.barh(y, [by_subcase[n]["accuracy"] for n in names], color=colors)
        sub_axes.bar_label(bars, labels=["%.2f" % b.get_width() for b in bars], fontsize=6,
                           padding=1)
        sub_axes.set_yticks(y)
        sub_axes.set_yticklabels(names, fontsize=6)
        sub_axes.invert_yaxis()
        sub_axes.set_xlim(0, 1.1)
        sub_axes.set_xlabel("accuracy")
        sub_axes.grid(True, axis="x", alpha=0.3)
        sub_axes.set_title("per sub-case (colour: gold label)", fontsize=9)
        sub_values = _widths(bars)
    save_figure(figure, path)
    return {"heuristics": heuristics, "labels": labels, "accuracy": drawn, "subcases": names,
            "subcase_accuracy": sub_values}


# --------------------------------------------------------- language sampling


def plot_language_sampling(report, path, points=101, title=None):
    """Two panels from `resample_documents`'s report (`sampling.json`).

    Left: each language's natural share p_i beside its sampled share q_i at
    the report's alpha (and, when the report has them, the shares of the
    words written). Right: q_i = p_i^a / sum_j p_j^a for a in [0, 1]
    (`points` values), the report's alpha marked.

    Returns ``{"languages": [...], "p": [...], "q": [...], "written": [...] or
    None, "alpha": [...],
    "curves": {language: [...]}}`` read back from the figure.
    """
    from data import multilingual  # pylint: disable=g-import-not-at-top
    sizes = report["sizes"]
    languages = sorted(sizes)
    total = float(sum(sizes.values()))
    p = report.get("p") or {k: v / total for k, v in sizes.items()}
    q = report["q"]
    alpha = report["alpha"]
    figure = new_figure(10, 3.8)
    share_axes, curve_axes = figure.subplots(1, 2)
    x = np.arange(len(languages))
    written = report.get("written") or {}
    written_total = float(sum(w["words"] for w in written.values()))
    bars = 3 if written_total and set(written) == set(languages) else 2
    width = 0.8 / bars
    offset = (bars - 1) / 2.0
    p_bars = share_axes.bar(x - offset * width, [p[k] for k in languages], width,
                            label="natural share p", color="#4c72b0")
    q_bars = share_axes.bar(x + (1 - offset) * width, [q[k] for k in languages], width,
                            label="q (alpha %.2g)" % alpha, color="#dd8452")
    _label_bars(share_axes, p_bars, "%.3f")
    _label_bars(share_axes, q_bars, "%.3f")
    written_bars = None
    if bars == 3:
        written_bars = share_axes.bar(
            x + (2 - offset) * width, [written[k]["words"] / written_total for k in languages],
            width, label="written", color="#55a868")
        _label_bars(share_axes, written_bars, "%.3f")
    share_axes.set_xticks(x)
    share_axes.set_xticklabels(["%s\n%s words" % (k, "{:,}".format(int(sizes[k])))
                                for k in languages], fontsize=8)
    share_axes.set_ylim(0, 1.25)
    share_axes.set_yticks(np.linspace(0, 1, 6))
    share_axes.set_ylabel("share of the corpus")
    share_axes.grid(True, axis="y", alpha=0.3)
    share_axes.legend(fontsize=8, loc="upper center", ncol=bars)
    share_axes.set_title("p_i vs q_i = p_i^a / sum_j p_j^a", fontsize=9)
    grid = np.linspace(0.0, 1.0, points)
    table = [multilingual.language_sampling_probabilities(sizes, float(a)) for a in grid]
    lines = {}
    for i, language in enumerate(languages):
        color = _COLORS[i % len(_COLORS)]
        (line,) = curve_axes.plot(grid, [row[language] for row in table], color=color,
                                  label=language)
        curve_axes.plot([alpha], [q[language]], "o", color=color, markersize=5)
        lines[language] = line
    curve_axes.axvline(alpha, color="#8c8c8c", linestyle="--", linewidth=1,
                       label="alpha = %.2g" % alpha)
    curve_axes.set_xlim(0, 1)
    # The curves run from 1/n (alpha 0) to p_i (alpha 1): shown with a margin,
    # so near-equal languages do not look like one flat line.
    low = min(min(min(line.get_ydata()) for line in lines.values()), min(q.values()))
    high = max(max(max(line.get_ydata()) for line in lines.values()), max(q.values()))
    pad = max(0.05 * (high - low), 0.005)
    curve_axes.set_ylim(max(0.0, low - pad), min(1.0, high + pad) + 0.001)
    curve_axes.set_xlabel("alpha (0 = uniform, 1 = natural shares)")
    curve_axes.set_ylabel("sampled share q_i")
    curve_axes.grid(True, alpha=0.3)
    curve_axes.legend(fontsize=8)
    curve_axes.set_title("q_i as a function of alpha", fontsize=9)
    if title:
        figure.suptitle(title, fontsize=10)
    save_figure(figure, path)
    first = next(iter(lines.values()))
    return {"languages": languages, "p": _heights(p_bars), "q": _heights(q_bars),
            "written": _heights(written_bars) if written_bars is not None else None,
            "alpha": [float(a) for a in first.get_xdata()],
            "curves": {k: [float(v) for v in line.get_ydata()] for k, line in lines.items()}}
