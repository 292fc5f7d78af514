"""The generated benchmark tables of docs/benchmarks.md and docs/speed.md, from `benchmarks/results/*.jsonl`.

    python benchmarks/report.py            # print the tables
    python benchmarks/report.py --write    # replace them in docs/benchmarks.md and docs/speed.md

Training and inference have one table per machine kind (`common.machine_kind`:
amx, avx512-bf16, avx512, avx2, from the CPU flags, named in the table's
heading): each from the latest run on that kind (per model size for
training), so machines are never mixed in one table. Their "of peak" columns
are the model FLOPs utilisation: the case's FLOPs (`common.bert_flops`) per
second over the matrix-product peak of its precision that the run measured
(the best of the run's measurements). Records from before the peak was
measured are shown without it; records without CPU flags go to an "unknown
machine" table. The other tables come from the latest run of their benchmark
and name the machine it ran on. In a generated page (it says so at its top) a
table sits between ``<!-- report:NAME -->`` and ``<!-- /report:NAME -->``;
--write replaces what is between the markers and nothing else. The results
files are never rewritten.
"""

import argparse
import collections
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
PAGE = os.path.join(REPO, "docs", "benchmarks.md")
SPEED_PAGE = os.path.join(REPO, "docs", "speed.md")

if REPO not in sys.path:
    sys.path.insert(0, REPO)
from benchmarks import common  # noqa: E402  pylint: disable=wrong-import-position

KIND_ORDER = [kind for kind, _ in common.MACHINE_KINDS] + ["other", "unknown"]


def _records(name):
    path = os.path.join(RESULTS, name + ".jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _latest_run(records):
    if not records:
        return []
    run_id = records[-1].get("run_id")
    if run_id is None:
        return records[-1:]
    return [r for r in records if r.get("run_id") == run_id]


def _kind(record):
    machine = record.get("machine") or {}
    return machine.get("kind") or common.machine_kind(machine.get("cpu_flags"))


def _by_kind(records):
    """{machine kind: its records, in file order}, fastest kinds first."""
    kinds = collections.defaultdict(list)
    for record in records:
        kinds[_kind(record)].append(record)
    return collections.OrderedDict((k, kinds[k]) for k in KIND_ORDER if k in kinds)


def _kind_heading(kind, records):
    machine = records[-1].get("machine") or {}
    flags = [f for f, on in (machine.get("cpu_flags") or {}).items() if on]
    if kind == "unknown":
        return "#### Unknown machine (records without CPU flags)"
    return "#### Machine kind `%s`: %s" % (kind, " ".join(flags) or "none of the flags")


def _run_peak(records):
    """The best peak the records of one run measured (None for records from before peaks)."""
    peaks = [r["peak"] for r in records if r.get("peak")]
    best = common.best_peak(*peaks)
    if best:
        # The records of one run carry the run's peak so far, each counting
        # every measurement before it: the run made as many as the largest count.
        best["measurements"] = max(p.get("measurements", 1) for p in peaks)
    return best


def _peak_text(peak):
    if not peak or not peak.get("fp32_gflops"):
        return "The matrix-product peak was not measured (records from before peaks were recorded)"
    text = "Matrix-product peak %.0f GFLOP/s fp32" % peak["fp32_gflops"]
    if peak.get("bf16_gflops"):
        text += ", %.0f bf16" % peak["bf16_gflops"]
    return text + " (%s; the best of %d measurement%s in the run)" % (
        peak.get("matmul", "2048^3 matmul"), peak.get("measurements", 1),
        "" if peak.get("measurements", 1) == 1 else "s")


def _load_text(records):
    loads = [r["load_average"][0] for r in records if r.get("load_average")]
    loads += [v for r in records for v in ((r.get("peak") or {}).get("load_average") or [])
              if v is not None]
    if not loads:
        return ""
    cores = (records[-1].get("machine") or {}).get("cores")
    if cores and max(loads) <= cores + 0.5:
        # The benchmark itself keeps the cores busy: a load of the cores is no other job.
        return (" 1-minute load average %.1f-%.1f on %d cores: the machine ran the benchmark "
                "alone." % (min(loads), max(loads), cores))
    return (" Other jobs ran on the machine at the same time (1-minute load average %.1f-%.1f "
            "on %s cores): absolute figures are low and noisy, read ratios and fractions of "
            "the peak measured in the same run." % (
                min(loads), max(loads), (records[-1].get("machine") or {}).get("cores", "?")))


def _percent(value):
    return "" if value is None else "%.0f%%" % (100 * value)


def missing_kinds_text(kinds):
    """A sentence naming the machine kinds with no measurement among `kinds`."""
    missing = [k for k, _ in common.MACHINE_KINDS if k not in kinds]
    if not missing:
        return ""
    return "No measurement yet on: %s." % ", ".join("`%s`" % k for k in missing)


def _machine_line(record):
    machine = record.get("machine", {})
    flags = [f for f, on in machine.get("cpu_flags", {}).items() if on]
    versions = ", ".join("%s %s" % (k, v) for k, v in sorted(record.get("versions", {}).items())
                         if v)
    return "Machine: %s, %s cores, CPU flags %s; %s; %s." % (
        machine.get("cpu_model"), machine.get("cores"), " ".join(flags) or "none",
        versions, record.get("timestamp", "")[:10])


def _latest_run_per_size(records):
    """Each model size's records from the latest run that measured it.

    A run may measure some sizes only (`bench_training.py --only=bert_tiny`);
    the rows of one size, and so every ratio, always come from one run.
    """
    latest = collections.OrderedDict()
    for record in records:
        latest[record["config"]["size"]] = record.get("run_id")
    return [r for r in records if latest[r["config"]["size"]] == r.get("run_id")]


# The peers "vs best peer" compares with, each in its idiomatic form (not the
# rows of bench_training.VARIANTS).
PEERS = ("keras_hub", "hf_torch")


TRAINING_NAMES = {
    "ours": "this project", "keras_hub": "keras-hub (jit_compile, train_on_batch)",
    "hf_torch": "HF transformers, torch eager",
    "ours_malloc": "this project, `TF_CPU_ALLOCATOR_USE_BFC=false` (malloc)",
    "ours_eigen": "this project, `TF_ENABLE_ONEDNN_OPTS=0` (Eigen kernels)",
    "keras_hub_cpu_runtime": "keras-hub (jit_compile, train_on_batch) with this "
                             "project's CPU settings (BFC allocator, oneDNN)"}
SIZE_ORDER = ["bert_tiny", "bert_mini", "bert_small", "bert_base"]


def training_rows(records):
    """The rows of one machine kind's training table: dicts, sizes in order.

    Each has the case's key (size, batch, precision, impl, xla, steps per
    loop), ``seq_per_sec`` (median over rounds), ``ratio`` to the best
    idiomatic peer of the same size, batch and precision (ours only),
    ``mfu`` (None without a peak), memory, ``resolved`` and ``rounds``.
    """
    runs = _latest_run_per_size(records)
    runs.sort(key=lambda r: SIZE_ORDER.index(r["config"]["size"])
              if r["config"]["size"] in SIZE_ORDER else len(SIZE_ORDER))  # stable
    groups = collections.OrderedDict()
    for record in runs:
        c = record["config"]
        key = (c["size"], c["batch_size"], c["precision"], c["impl"], c["xla"],
               c["steps_per_loop"])
        groups.setdefault(key, []).append(record)
    peaks = {}
    for record in runs:
        peaks.setdefault(record.get("run_id"), []).append(record)
    peaks = {run: _run_peak(rs) for run, rs in peaks.items()}
    best_peer = {}
    rows = []
    for key, group in groups.items():
        size, batch, precision, impl = key[:4]
        seq = statistics.median(r["seq_per_sec"] for r in group)
        if impl in PEERS:
            shape = (size, batch, precision)
            best_peer[shape] = max(best_peer.get(shape, 0), seq)
        flops = group[0].get("flops_per_step")
        peak = peaks.get(group[0].get("run_id"))
        mfu = (common.mfu(flops * seq / batch, 1.0, peak, precision)
               if flops and peak else None)
        rows.append({"key": key, "seq_per_sec": seq, "mfu": mfu,
                     "peak_mb": statistics.median(r["peak_mb"] for r in group),
                     "training_mb": statistics.median(r["training_mb"] for r in group),
                     "resolved": group[0].get("resolved") or {}, "rounds": len(group),
                     "date": group[0].get("timestamp", "")[:10], "record": group[-1]})
    for row in rows:
        size, batch, precision, impl = row["key"][:4]
        peer = best_peer.get((size, batch, precision))
        row["ratio"] = row["seq_per_sec"] / peer if peer and impl.startswith("ours") else None
    return rows, peaks


def _training_kind_table(records):
    rows, peaks = training_rows(records)
    lines = ["| model, batch | precision | implementation | XLA | steps/loop | seq/s "
             "| vs best peer | of peak | peak MB | training MB |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        size, batch, precision, impl, xla, loop = row["key"]
        resolved, ours, seq = row["resolved"], impl.startswith("ours"), row["seq_per_sec"]
        if ours and xla == "default":
            xla_text = "default (%s)" % resolved.get("xla", "?")
            if resolved.get("xla") == "off" and resolved.get("xla_optimizer_update"):
                xla_text = "default (update only)"
            loop_text = "default (%s)" % resolved.get("steps_per_loop", "?")
        else:
            xla_text = {"on": "on", "off": "off"}.get(xla, xla) if impl != "hf_torch" else "-"
            loop_text = str(loop) if ours else "-"
            if ours and precision == "bf16" and xla == "on":
                # The trainer ignores --use_xla for bf16 on CPUs; what stays
                # compiled is the fused optimizer update.
                xla_text = "on: update only (bf16 on CPU)"
        if impl == "hf_torch" and precision == "bf16":
            precision_text = "bf16 (autocast)"
        elif precision == "bf16":
            precision_text = "mixed bf16"
        else:
            precision_text = precision
        lines.append("| %s, %d | %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f |" % (
            size.replace("bert_", "BERT-"), batch, precision_text, TRAINING_NAMES[impl],
            xla_text, loop_text, "%.1f" % seq if seq >= 10 else "%.2f" % seq,
            "%.2fx" % row["ratio"] if row["ratio"] is not None else "", _percent(row["mfu"]),
            row["peak_mb"], row["training_mb"]))
    rounds, dates, machines = (collections.OrderedDict() for _ in range(3))
    for row in rows:
        size = row["key"][0]
        rounds[size] = max(rounds.get(size, 0), row["rounds"])
        dates[size] = row["date"]
        machines[size] = _machine_line(row["record"])
    when = "; ".join("%s: %d rounds, %s" % (size.replace("bert_", "BERT-"), n, dates[size])
                     for size, n in rounds.items())
    # Sizes measured on different machines of the kind (a later --only run
    # elsewhere) name each size's machine; else the one machine.
    if len({line.rsplit(";", 1)[0] for line in machines.values()}) > 1:
        machine_text = " ".join("%s: %s" % (size.replace("bert_", "BERT-"), line)
                                for size, line in machines.items())
    else:
        machine_text = list(machines.values())[-1]
    peak_texts = collections.OrderedDict()
    for run_id, peak in peaks.items():
        if peak:
            peak_texts[run_id] = _peak_text(peak)
    peak_text = " " + ("; ".join(peak_texts.values()) if peak_texts else _peak_text(None)) + "."
    latest = [row["record"] for row in rows]
    return "\n".join(lines) + "\n\nseq/s is the median over rounds of each round's median " \
        "step; each model's rows come from one run (%s). " % when + machine_text + peak_text + \
        _load_text([r for r in records if r.get("run_id") in peaks]
                   if any(peaks.values()) else latest)


def training_table():
    kinds = _by_kind(_records("bench_training"))
    if not kinds:
        return None
    parts = ["%s\n\n%s" % (_kind_heading(kind, records), _training_kind_table(records))
             for kind, records in kinds.items()]
    parts.append("\"of peak\": model FLOPs utilisation, %s, per second over the peak of "
                 "the case's precision (bf16 cases: the bf16 peak). %s" % (
                     common.FLOP_FORMULA, missing_kinds_text(kinds)))
    return "\n\n".join(parts)


INFERENCE_NAMES = {"ours": "this project, `inference.Encoder`",
                   "ours_savedmodel": "this project, exported SavedModel (text in)",
                   "keras_hub": "keras-hub `BertBackbone` in tf.function",
                   "hf_torch": "HF transformers, torch eager",
                   "hf_torch_compile": "HF transformers, torch.compile"}


def inference_rows(records):
    """The rows of one machine kind's inference table (its latest run): dicts."""
    runs = _latest_run(records)
    groups = collections.OrderedDict()
    for record in runs:
        c = record["config"]
        groups.setdefault((c["impl"], c["precision"]), []).append(record)
    peak = _run_peak(runs)
    base = groups.get(("hf_torch", "fp32"))
    base_latency = statistics.median(r["latency_ms"] for r in base) if base else None
    rows = []
    for (impl, precision), group in groups.items():
        latency = statistics.median(r["latency_ms"] for r in group)
        batched = statistics.median(r["batched_seq_per_sec"] for r in group)
        flops = group[0].get("flops_per_sentence")
        rows.append({"impl": impl, "precision": precision, "latency_ms": latency,
                     "batched_seq_per_sec": batched,
                     "ratio": base_latency / latency if base_latency else None,
                     "mfu_single": common.mfu(flops, latency / 1000, peak, precision)
                     if flops else None,
                     "mfu_batched": common.mfu(flops * batched, 1.0, peak, precision)
                     if flops else None,
                     "diff": group[0].get("max_abs_diff_vs_fp32")})
    return rows, peak, runs


def _inference_kind_table(records):
    rows, peak, runs = inference_rows(records)
    lines = ["| implementation | precision | 1 sentence, ms | vs HF eager fp32 | of peak "
             "| batch of 32, seq/s | of peak | max abs diff vs fp32 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        diff = row["diff"]
        diff_text = ("%.3f (sequence), %.3f (pooled)" % (diff["sequence_output"],
                                                        diff["pooled_output"])
                     if diff else "")
        lines.append("| %s | %s | %.1f | %s | %s | %.1f | %s | %s |" % (
            INFERENCE_NAMES.get(row["impl"], row["impl"]), row["precision"], row["latency_ms"],
            "%.2fx" % row["ratio"] if row["ratio"] else "", _percent(row["mfu_single"]),
            row["batched_seq_per_sec"], _percent(row["mfu_batched"]), diff_text))
    peak_text = " " + _peak_text(peak) + "."
    return "\n".join(lines) + "\n\nBERT-base, 30 word pieces; latency is the median " \
        "call. " + _machine_line(runs[-1]) + peak_text + _load_text(runs)


def inference_table():
    kinds = _by_kind(_records("bench_inference"))
    if not kinds:
        return None
    parts = ["%s\n\n%s" % (_kind_heading(kind, records), _inference_kind_table(records))
             for kind, records in kinds.items()]
    parts.append("\"of peak\": %.2f GFLOP per sentence of 30 tokens (`common.bert_flops`, "
                 "forward only: sequence and pooled outputs) times sentences per second, over "
                 "the peak of the case's precision (int8: the same products against the fp32 "
                 "peak, as no int8 peak is measured; above 100%% is possible). %s" % (
                     common.bert_flops(12, 768, 3072, 30, training=False,
                                       next_sentence=False) / 1e9,
                     missing_kinds_text(kinds)))
    return "\n\n".join(parts)


def tokenization_table():
    runs = _latest_run(_records("bench_tokenization"))
    if not runs:
        return None
    record = runs[-1]
    lines = ["| workload | GraphTokenizer lines/s | UnicodeWordPiece lines/s | HF tokenizers "
             "lines/s | FullTokenizer lines/s | GraphTokenizer vs HF | UnicodeWordPiece vs HF "
             "| ids identical |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, work in record["workloads"].items():
        rates = work["lines_per_s"]
        identical = (work.get("identical_graph_hf") and work.get("identical_graph_python")
                     and work.get("identical_bulk_hf", True)
                     and work.get("identical_bulk_python", True))
        lines.append("| %s | %.0f | %s | %.0f | %.0f | %.2fx | %s | %s |" % (
            name.replace("_", " "), rates["graph"],
            "%.0f" % rates["bulk"] if "bulk" in rates else "-", rates["hf"],
            rates.get("python", 0), work["graph_vs_hf"],
            "%.2fx" % work["bulk_vs_hf"] if "bulk_vs_hf" in work else "-",
            "yes" if identical else "NO"))
    loads = [{"load_average": [v], "machine": record.get("machine") or {}}
             for v in record.get("load_average") or []]
    return "\n".join(lines) + "\n\n" + ("%s %s" % (_load_text(loads).strip(),
                                                   _machine_line(record))).strip()


def data_prep_table():
    runs = _latest_run(_records("bench_data_prep"))
    if not runs:
        return None
    record = runs[-1]
    d = record["derived"]
    lines = ["| writer | wall s | vs Google (wall) | run after start-up, s | vs Google "
             "(after start-up) | TensorFlow imported | instances | masked share "
             "| random-next share |",
             "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for name, label in (("google", "Google's create_pretraining_data.py"),
                        ("ours_1w", "this project, 1 worker"),
                        ("ours_2w", "this project, 2 workers")):
        if name not in d["best_wall_s"]:
            continue
        stats = record["statistics"][name]
        speed = d.get("speedup_wall_vs_google", {}).get(name)
        after = d.get("speedup_after_import_vs_google", {}).get(name)
        imported = [run.get("tensorflow_imported") for run in record["runs"][name]]
        lines.append("| %s | %.1f | %s | %.1f | %s | %s | %d | %.4f | %.4f |" % (
            label, d["best_wall_s"][name], "%.2fx" % speed if speed else "",
            d["best_after_import_s"][name], "%.2fx" % after if after else "",
            "yes" if name == "google" or any(imported) else
            ("no" if imported and imported[0] is not None else "?"),
            stats["instances"], stats["masked_share"], stats["random_next_share"]))
    lines.append("")
    lines.append("\"Start-up\" is `import tensorflow` for Google's script (it needs it to run); "
                 "for this project it is nothing beyond the interpreter's start, as it "
                 "imports TensorFlow only when something needs it.")
    memory = record.get("memory")
    tail = ""
    if memory:
        tail = " Peak memory (1 worker): %s (x%.2f over the last doubling)." % (
            ", ".join("%.0f MB at %.1f MB of corpus" % (rss, mb)
                      for rss, mb in zip(memory["max_rss_mb"], memory["corpus_mb"])),
            memory.get("rss_growth_last_doubling", memory["rss_growth"]))
    return "\n".join(lines) + "\n\n%.1f MB of English, %d documents.%s %s" % (
        record["config"]["corpus_mb"], record["config"]["documents"], tail,
        _machine_line(record))


def matching_table():
    records = _records("bench_matching")
    if not records:
        return None
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from benchmarks import bench_matching  # pylint: disable=import-outside-toplevel

    record = records[-1]
    load = record.get("load")
    note = ""
    if load:
        note = " Load average during the run: %s (the machine was shared)." % (
            " / ".join("%.2f" % v for v in (load if isinstance(load, list) else [load])))
    return bench_matching.markdown_table(record) + "\n\n" + note.strip() + (
        " " if note else "") + _machine_line(record)


def _flag_row(flag, what, with_row, without_row, value="seq_per_sec", mfu="mfu", unit="seq/s",
              higher_is_better=True):
    if not with_row or not without_row:
        return "| %s | %s | not in the latest run on this kind | | |" % (flag, what)
    a, b = with_row[value], without_row[value]
    ratio = a / b if higher_is_better else b / a
    fmt = (lambda v: "%.2f" % v) if max(a, b) < 10 else (lambda v: "%.1f" % v)
    utilisation = ""
    if with_row.get(mfu) is not None and without_row.get(mfu) is not None:
        utilisation = "%s / %s" % (_percent(with_row[mfu]), _percent(without_row[mfu]))
    return "| %s | %s | %s / %s %s | %.2fx | %s |" % (flag, what, fmt(a), fmt(b), unit, ratio,
                                                    utilisation)


def _speed_kind_table(training_records, inference_records):
    rows, _ = training_rows(training_records) if training_records else ([], None)
    sizes = [row["key"][0] for row in rows]
    size = max(sizes, key=SIZE_ORDER.index) if sizes else None
    find = {}
    for row in rows:
        s_, batch, precision, impl, xla, loop = row["key"]
        if s_ == size and impl == "ours":
            find[(precision, xla, loop)] = row
    name = (size or "").replace("bert_", "BERT-")
    batch = next((row["key"][1] for row in rows if row["key"][0] == size), "?")
    lines = ["| flag | compared (%s training, batch %s; BERT-base inference) | with / without "
             "| worth | of peak, with / without |" % (name or "BERT", batch),
             "|---|---|---:|---:|---:|"]
    lines.append(_flag_row(
        "`--mixed_precision=bfloat16`", "training, defaults otherwise, against fp32",
        find.get(("bf16", "default", "default")), find.get(("fp32", "default", "default"))))
    lines.append(_flag_row(
        "`--use_xla` (fp32)", "whole step under XLA against nothing compiled, 1 step per loop",
        find.get(("fp32", "on", 1)), find.get(("fp32", "off", 1))))
    for precision, text in (("fp32", "fp32"), ("bf16", "mixed bf16")):
        default = find.get((precision, "default", "default"))
        resolved = (default or {}).get("resolved") or {}
        fused = resolved.get("xla_optimizer_update")
        lines.append(_flag_row(
            "`--steps_per_loop`%s (the defaults), %s" % (
                " and `--xla_optimizer_update`" if fused else "", text),
            "%s updates per call%s, against 1 per call and nothing compiled" % (
                resolved.get("steps_per_loop", "up to 100"),
                " and the fused optimizer update" if fused else ""),
            default, find.get((precision, "off", 1))))
    inference = {}
    if inference_records:
        inference = {(r["impl"], r["precision"]): r for r in inference_rows(inference_records)[0]}
    ours_bf16, ours_fp32 = inference.get(("ours", "bf16")), inference.get(("ours", "fp32"))
    lines.append(_flag_row("`--precision=bf16` (inference)", "one sentence of 30 tokens, "
                           "latency", ours_bf16, ours_fp32, value="latency_ms", mfu="mfu_single",
                           unit="ms", higher_is_better=False))
    lines.append(_flag_row("`--precision=bf16` (inference)", "batch of 32 x 30 tokens",
                           ours_bf16, ours_fp32, value="batched_seq_per_sec", mfu="mfu_batched"))
    ours_int8 = inference.get(("ours", "int8"))
    if ours_int8:
        lines.append(_flag_row("`--precision=int8` (inference)", "one sentence of 30 tokens, "
                               "latency", ours_int8, ours_fp32, value="latency_ms",
                               mfu="mfu_single", unit="ms", higher_is_better=False))
        lines.append(_flag_row("`--precision=int8` (inference)", "batch of 32 x 30 tokens",
                               ours_int8, ours_fp32, value="batched_seq_per_sec",
                               mfu="mfu_batched"))
    return "\n".join(lines)


def flags_table():
    """docs/speed.md: what each flag is worth, per machine kind, from the training and inference tables."""
    training = _by_kind(_records("bench_training"))
    inference = _by_kind(_records("bench_inference"))
    kinds = [k for k in KIND_ORDER if k in training or k in inference]
    if not kinds:
        return None
    parts = []
    for kind in kinds:
        records = training.get(kind) or inference.get(kind)
        parts.append("%s\n\n%s" % (_kind_heading(kind, records), _speed_kind_table(
            training.get(kind), inference.get(kind))))
    parts.append("From the tables of [Benchmarks](benchmarks.md) (the latest run on each "
                 "kind; ratios of medians; \"worth\" above 1 means the flag is faster). "
                 "\"Of peak\": the model FLOPs utilisation of the two cases, against the "
                 "matrix-product peak of their precision measured in the same run; empty for "
                 "runs from before the peak was measured. %s" % missing_kinds_text(kinds))
    return "\n\n".join(parts)


def length_batching_table():
    """docs/speed.md: fine-tuning short texts at two --max_seq_length, trimming on and off."""
    runs = _latest_run(_records("bench_length_batching"))
    if not runs:
        return None
    by_case = {(r["max_seq_length"], r["trim_batches"]): r for r in runs}
    base = by_case.get((48, False))
    lines = ["| --max_seq_length | --trim_batches | mean padded width | ms per step | seq/s "
             "| vs 48 untrimmed | of fp32 peak |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for key in ((48, False), (48, True), (256, False), (256, True)):
        r = by_case.get(key)
        if r is None:
            continue
        lines.append("| %d | %s | %.1f | %.0f | %.1f | %s | %s |" % (
            key[0], "on" if key[1] else "off", r["mean_padded_width"],
            1000 * r["step_seconds_median"], r["sequences_per_second"],
            "%.2fx" % (r["sequences_per_second"] / base["sequences_per_second"]) if base else "",
            _percent(r.get("mfu_fp32"))))
    record = runs[-1]
    size = record["size"].replace("bert_", "BERT-")
    notes = ["%s classifier, batch %d, texts of 10 to 40 word pieces; the median over %d "
             "rounds of each round's median step (`benchmarks/bench_length_batching.py`). "
             "\"Of fp32 peak\": the FLOPs of the width each batch really has "
             "(`common.bert_flops`, training) per second over the fp32 matrix-product peak." % (
                 size, record["batch"], record["rounds"])]
    on48, on256 = by_case.get((48, True)), by_case.get((256, True))
    off256 = by_case.get((256, False))
    if on48 and on256 and off256:
        notes.append("At 256, trimming makes a step %.2fx faster; 256 trimmed costs %.2fx "
                     "what 48 trimmed costs." % (
                         off256["step_seconds_median"] / on256["step_seconds_median"],
                         on256["step_seconds_median"] / on48["step_seconds_median"]))
    peak = _run_peak(runs)
    notes.append("%s.%s" % (_peak_text(peak), _load_text(runs)))
    return "\n".join(lines) + "\n\n" + " ".join(n.strip() for n in notes) + " " + \
        _machine_line(record)


TABLES = collections.OrderedDict([
    ("training", training_table), ("inference", inference_table),
    ("tokenization", tokenization_table), ("data_prep", data_prep_table),
    ("matching", matching_table)])

# The generated pages and their tables (docs/benchmarks.md: TABLES).
PAGES = collections.OrderedDict([(PAGE, TABLES),
                                 (SPEED_PAGE, collections.OrderedDict([
                                     ("flags", flags_table),
                                     ("length_batching", length_batching_table)]))])


def render(page=PAGE):
    """{table name: markdown or None} of one generated page."""
    return {name: fn() for name, fn in PAGES[page].items()}


def replace_in_page(text, tables, page=PAGE):
    for name, table in tables.items():
        if table is None:
            continue
        pattern = re.compile(r"(<!-- report:%s -->\n).*?(<!-- /report:%s -->)" % (name, name),
                             re.S)
        if not pattern.search(text):
            raise ValueError("%s has no <!-- report:%s --> ... <!-- /report:%s --> "
                             "markers" % (os.path.relpath(page, REPO), name, name))
        text = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="update docs/benchmarks.md and docs/speed.md in place")
    args = parser.parse_args()
    for page in PAGES:
        tables = render(page)
        if not args.write:
            for name, table in tables.items():
                print("## %s\n\n%s\n" % (name, table or "(no results yet)"))
            continue
        with open(page, encoding="utf-8") as f:
            text = f.read()
        updated = replace_in_page(text, tables, page)
        temporary = page + ".tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(updated)
        os.replace(temporary, page)
        print("%s: %d tables updated" % (os.path.relpath(page, REPO),
                                         sum(t is not None for t in tables.values())))


if __name__ == "__main__":
    sys.exit(main())
