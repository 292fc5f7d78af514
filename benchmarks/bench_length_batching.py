"""Fine-tuning cost of --max_seq_length on short texts, with and without --trim_batches.

    python benchmarks/bench_length_batching.py [--rounds=2] [--steps=20] [--size=bert_mini]

The case of issue 32 (point 4): a classifier fine-tuned on short texts (10 to
40 word pieces, a synthetic vocabulary) through `run_classifier`'s own path
(`ClassifierRunner`: Google's TFRecords, the job's input function, the
project's trainer), at --max_seq_length 48 and 256, with trimming on (the
default: each batch padded to its longest row, rounded up to a length bucket)
and off (Google's fixed length). With trimming on, 256 should cost what 48
costs (target within 1.3x); off, it costs what 256 tokens per example cost.

Each case runs in a fresh process, a round runs every case once in turn, and
a case's figure is the median over its rounds of the median step time (the
trainer's own per-step log, after 5 warm-up steps that trace the step). Model FLOPs utilisation is over the
machine's fp32 matrix-product peak measured before every case of the run
(`common.measure_peak`; the run keeps the best), with the FLOPs of the padded width each batch
really has (`common.bert_flops`, training, no masked-LM head). Results go to
``benchmarks/results/bench_length_batching.jsonl``.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from benchmarks import common  # noqa: E402

SIZES = {"bert_tiny": (2, 128, 2, 512), "bert_mini": (4, 256, 4, 1024),
         "bert_small": (4, 512, 8, 2048)}
CASES = [(48, True), (256, True), (256, False), (48, False)]  # (max_seq_length, trim)
BATCH = 32
NUM_WORDS = 2000
NUM_TRAIN = 2048


def _write_files(directory, size):
    """A vocabulary, a config of `size` and a tsv of short texts (10-40 pieces)."""
    import random  # pylint: disable=import-outside-toplevel
    from modeling import bert as config_lib  # pylint: disable=import-outside-toplevel
    words = ["w%d" % i for i in range(NUM_WORDS)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    layers, hidden, heads, inner = SIZES[size]
    config_lib.BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers,
                          num_attention_heads=heads, intermediate_size=inner,
                          max_position_embeddings=512, type_vocab_size=2).to_json_file(
                              os.path.join(directory, "bert_config.json"))
    rng = random.Random(0)
    with open(os.path.join(directory, "train.tsv"), "w") as f:
        f.write("text\tlabel\n")
        for _ in range(NUM_TRAIN):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 38)))
            f.write("%s\t%d\n" % (text, rng.randint(0, 1)))


def _child(case, size, steps):
    max_seq_length, trim = case
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from modeling.training import cpu_runtime  # pylint: disable=import-outside-toplevel
    cpu_runtime.configure()  # what every run/ script does first
    import numpy as np  # pylint: disable=import-outside-toplevel
    from modeling.tasks import classifier_job  # pylint: disable=import-outside-toplevel
    directory = tempfile.mkdtemp(prefix="bench_length_")
    _write_files(directory, size)
    job = classifier_job.ClassifierJob(
        task_name="generic", data_dir=directory, train_file="train.tsv", labels=["0", "1"],
        vocab_file=os.path.join(directory, "vocab.txt"),
        bert_config_file=os.path.join(directory, "bert_config.json"),
        output_dir=os.path.join(directory, "out"), max_seq_length=max_seq_length,
        do_train=True, train_batch_size=BATCH, num_train_epochs=100.0, log_steps=1,
        save_checkpoints_steps=100000, steps_per_loop=1, seed=1, trim_batches=trim)
    runner = classifier_job.ClassifierRunner(job)
    runner.check_output_dir()
    runner.check()
    runner.strategy = classifier_job.settings.start_run(job)
    os.makedirs(job.output_dir, exist_ok=True)
    runner.num_train_steps, runner.num_warmup_steps = runner.training_steps(runner.prepare())
    input_fn = runner.train_input_fn()
    widths = [int(b["input_ids"].shape[1]) for b in input_fn().take(50)]
    trainer = runner.build_trainer()
    warmup = 5  # the first steps trace the step function and warm the caches
    trainer.num_train_steps = warmup + steps
    trainer.train(input_fn)
    # One logged window per step (log_steps=1, steps_per_loop=1): its time.
    times = [1.0 / metrics["steps_per_second"] for step, metrics in trainer.history
             if step > warmup]
    return {"step_seconds": times, "mean_width": float(np.mean(widths)),
            "widths": sorted(set(widths))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per case and round")
    parser.add_argument("--size", default="bert_mini", choices=sorted(SIZES))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        common.print_child_result(_child(tuple(json.loads(args.child)), args.size, args.steps))
        return
    machine = common.machine_info()
    peak = common.measure_peak()
    print("machine: %s, %d cores (kind %s); fp32 peak %s GFLOP/s"
          % (machine["cpu_model"], machine["cores"], machine["kind"],
             peak.get("fp32_gflops")))
    print("model FLOPs: %s" % common.FLOP_FORMULA)
    layers, hidden, _, inner = SIZES[args.size]
    results = {case: [] for case in CASES}
    for round_index in range(args.rounds):
        for case_index, case in enumerate(CASES):
            if round_index or case_index:
                # Before every case: on a machine shared with other jobs a single
                # measurement may fall in a busy moment; the run keeps the best.
                peak = common.best_peak(peak, common.measure_peak())
            result = common.run_child(__file__, list(case),
                                      ["--size=%s" % args.size, "--steps=%d" % args.steps])
            if result:
                results[case].append(result)
    run_id = time.strftime("%Y%m%dT%H%M%S")
    rows = {}
    for case, runs in results.items():
        if not runs:
            continue
        seconds = statistics.median(statistics.median(r["step_seconds"]) for r in runs)
        width = runs[0]["mean_width"]
        flops = BATCH * common.bert_flops(layers, hidden, inner, width, training=True,
                                          next_sentence=False)
        rows[case] = seconds
        record = {"run_id": run_id, "case": "%s/b%d/seq%d/trim_%s" % (
                      args.size, BATCH, case[0], "on" if case[1] else "off"),
                  "size": args.size, "batch": BATCH, "max_seq_length": case[0],
                  "trim_batches": case[1], "step_seconds_median": seconds,
                  "sequences_per_second": BATCH / seconds, "mean_padded_width": width,
                  "widths": runs[0]["widths"], "rounds": len(runs),
                  "mfu_fp32": common.mfu(flops, seconds, peak, "fp32"), "peak": peak,
                  "machine": machine}
        common.append_result("bench_length_batching", record)
        mfu = record["mfu_fp32"]
        print("seq %3d trim %-3s  %7.1f ms/step  %6.1f seq/s  width %5.1f  MFU %s" % (
            case[0], "on" if case[1] else "off", 1000 * seconds, BATCH / seconds, width,
            "%.0f%%" % (100 * mfu) if mfu else "-"))
    if (48, True) in rows and (256, True) in rows:
        print("256 vs 48, trimming on:  %.2fx" % (rows[(256, True)] / rows[(48, True)]))
    if (48, False) in rows and (256, False) in rows:
        print("256 vs 48, trimming off: %.2fx" % (rows[(256, False)] / rows[(48, False)]))


if __name__ == "__main__":
    main()
