"""The benchmark tables of docs/benchmarks.md, generated from `benchmarks/results/*.jsonl`.

    python benchmarks/report.py            # print the tables
    python benchmarks/report.py --write    # replace them in docs/benchmarks.md

Each table comes from the latest run of its benchmark (the records sharing
the newest `run_id`, or the newest record for benchmarks that write one record
per run) and names the machine it ran on. In docs/benchmarks.md (a generated
page: it says so at its top) a table sits between ``<!-- report:NAME -->`` and
``<!-- /report:NAME -->``; --write replaces what is between the markers and
nothing else.
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


def training_table():
    runs = _latest_run_per_size(_records("bench_training"))
    if not runs:
        return None
    order = ["bert_tiny", "bert_mini", "bert_small", "bert_base"]
    runs.sort(key=lambda r: order.index(r["config"]["size"])
              if r["config"]["size"] in order else len(order))  # stable: run order kept
    groups = collections.OrderedDict()
    for record in runs:
        c = record["config"]
        key = (c["size"], c["batch_size"], c["precision"], c["impl"], c["xla"],
               c["steps_per_loop"])
        groups.setdefault(key, []).append(record)
    best_peer = {}
    rows = []
    for key, records in groups.items():
        size, batch, precision, impl, xla, loop = key
        seq = statistics.median(r["seq_per_sec"] for r in records)
        resolved = records[0].get("resolved") or {}
        if impl in PEERS:
            shape = (size, batch, precision)
            best_peer[shape] = max(best_peer.get(shape, (0, ""))[0], seq), impl
        rows.append((key, seq, statistics.median(r["peak_mb"] for r in records),
                     statistics.median(r["training_mb"] for r in records),
                     statistics.median(r["final_loss"] for r in records), resolved,
                     len(records)))
    names = {"ours": "this project", "keras_hub": "keras-hub (jit_compile, train_on_batch)",
             "hf_torch": "HF transformers, torch eager",
             "ours_malloc": "this project, `TF_CPU_ALLOCATOR_USE_BFC=false` (malloc)",
             "ours_eigen": "this project, `TF_ENABLE_ONEDNN_OPTS=0` (Eigen kernels)",
             "keras_hub_cpu_runtime": "keras-hub (jit_compile, train_on_batch) with this "
                                      "project's CPU settings (BFC allocator, oneDNN)"}
    lines = ["| model, batch | precision | implementation | XLA | steps/loop | seq/s "
             "| vs best peer | peak MB | training MB |",
             "|---|---|---|---|---|---:|---:|---:|---:|"]
    for key, seq, peak, training, _, resolved, _ in rows:
        size, batch, precision, impl, xla, loop = key
        peer = best_peer.get((size, batch, precision))
        ours = impl.startswith("ours")
        ratio = "%.2fx" % (seq / peer[0]) if peer and ours else ""
        if ours and xla == "default":
            xla_text = "default (%s)" % resolved.get("xla", "?")
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
        lines.append("| %s, %d | %s | %s | %s | %s | %s | %s | %.0f | %.0f |" % (
            size.replace("bert_", "BERT-"), batch, precision_text, names[impl], xla_text,
            loop_text, "%.1f" % seq if seq >= 10 else "%.2f" % seq, ratio, peak, training))
    rounds = collections.OrderedDict()
    for key, _, _, _, _, _, count in rows:
        rounds[key[0]] = max(rounds.get(key[0], 0), count)
    dates = {r["config"]["size"]: r.get("timestamp", "")[:10] for r in runs}
    when = "; ".join("%s: %d rounds, %s" % (size.replace("bert_", "BERT-"), n, dates[size])
                     for size, n in rounds.items())
    # Sizes measured on different machines (a later --only run elsewhere) name
    # each size's machine; else the one machine.
    machines = collections.OrderedDict()
    for record in runs:
        machines[record["config"]["size"]] = _machine_line(record)
    if len({line.rsplit(";", 1)[0] for line in machines.values()}) > 1:
        machine_text = " ".join("%s: %s" % (size.replace("bert_", "BERT-"), line)
                                for size, line in machines.items())
    else:
        machine_text = _machine_line(runs[-1])
    return "\n".join(lines) + "\n\nseq/s is the median over rounds of each round's median " \
        "step; each model's rows come from one run (%s). " % when + machine_text


def inference_table():
    runs = _latest_run(_records("bench_inference"))
    if not runs:
        return None
    groups = collections.OrderedDict()
    for record in runs:
        c = record["config"]
        groups.setdefault((c["impl"], c["precision"]), []).append(record)
    names = {"ours": "this project, `inference.Encoder`",
             "ours_savedmodel": "this project, exported SavedModel (text in)",
             "keras_hub": "keras-hub `BertBackbone` in tf.function",
             "hf_torch": "HF transformers, torch eager",
             "hf_torch_compile": "HF transformers, torch.compile"}
    base = groups.get(("hf_torch", "fp32"))
    base_latency = statistics.median(r["latency_ms"] for r in base) if base else None
    lines = ["| implementation | precision | 1 sentence, ms | vs HF eager fp32 | batch of 32, seq/s |"
             " max abs diff vs fp32 |",
             "|---|---|---:|---:|---:|---:|"]
    for (impl, precision), records in groups.items():
        latency = statistics.median(r["latency_ms"] for r in records)
        batched = statistics.median(r["batched_seq_per_sec"] for r in records)
        diff = records[0].get("max_abs_diff_vs_fp32")
        diff_text = ("%.3f (sequence), %.3f (pooled)" % (diff["sequence_output"],
                                                        diff["pooled_output"])
                     if diff else "")
        ratio = "%.2fx" % (base_latency / latency) if base_latency else ""
        lines.append("| %s | %s | %.1f | %s | %.1f | %s |" % (
            names.get(impl, impl), precision, latency, ratio, batched, diff_text))
    return "\n".join(lines) + "\n\nBERT-base, 30 word pieces; latency is the median " \
        "call. " + _machine_line(runs[-1])


def tokenization_table():
    runs = _latest_run(_records("bench_tokenization"))
    if not runs:
        return None
    record = runs[-1]
    lines = ["| workload | GraphTokenizer lines/s | HF tokenizers lines/s | FullTokenizer "
             "lines/s | GraphTokenizer vs HF | ids identical |",
             "|---|---:|---:|---:|---:|---|"]
    for name, work in record["workloads"].items():
        rates = work["lines_per_s"]
        lines.append("| %s | %.0f | %.0f | %.0f | %.2fx | %s |" % (
            name.replace("_", " "), rates["graph"], rates["hf"], rates.get("python", 0),
            work["graph_vs_hf"], "yes" if work.get("identical_graph_hf") and
            work.get("identical_graph_python") else "NO"))
    return "\n".join(lines) + "\n\n" + _machine_line(record)


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


TABLES = collections.OrderedDict([
    ("training", training_table), ("inference", inference_table),
    ("tokenization", tokenization_table), ("data_prep", data_prep_table),
    ("matching", matching_table)])


def render():
    return {name: fn() for name, fn in TABLES.items()}


def replace_in_page(text, tables):
    for name, table in tables.items():
        if table is None:
            continue
        pattern = re.compile(r"(<!-- report:%s -->\n).*?(<!-- /report:%s -->)" % (name, name),
                             re.S)
        if not pattern.search(text):
            raise ValueError("%s has no <!-- report:%s --> ... <!-- /report:%s --> "
                             "markers" % (os.path.relpath(PAGE, REPO), name, name))
        text = pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md in place")
    args = parser.parse_args()
    tables = render()
    if not args.write:
        for name, table in tables.items():
            print("## %s\n\n%s\n" % (name, table or "(no results yet)"))
        return
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    updated = replace_in_page(text, tables)
    temporary = PAGE + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(updated)
    os.replace(temporary, PAGE)
    print("%s: %d tables updated" % (os.path.relpath(PAGE, REPO),
                                     sum(t is not None for t in tables.values())))


if __name__ == "__main__":
    sys.exit(main())
