"""BERT pre-training throughput and memory, side by side with keras-hub and HF transformers.

    pip install -r requirements-bench.txt
    python benchmarks/bench_training.py [--cases=default] [--rounds=3] [--steps=6]

Each peer runs in the form its users would pick for speed:

* keras-hub: `BertMaskedLM` (masked LM only), `compile(jit_compile=True)`,
  `train_on_batch`, Keras's `AdamW` with global-norm clipping; mixed bf16
  through Keras's `mixed_bfloat16` policy.
* HF transformers in torch: `BertForPreTraining` (masked LM + NSP, as ours),
  eager, `torch.optim.AdamW` with `clip_grad_norm_`; bf16 through
  `torch.autocast("cpu", torch.bfloat16)`.
* this project: the trainer's own training loop (`Trainer._build_train_step`,
  exactly what `run_pretraining.py` runs) over a `tf.data` pipeline. "xla off"
  means nothing of ours is XLA-compiled (not even the optimizer update);
  "xla on" compiles the whole step (forward, backward, update, metrics).

Same shapes for all (sequence 128, 20 masked positions, vocabulary 30,522,
exact GELU, Adam epsilon 1e-6, weight decay 0.01, clip norm 1.0). Every
measurement runs in a fresh process; a round runs every case once, in turn, so
that a burst of other work on the machine hits all of them; per-step times
are recorded raw and the median of a case's steps is its figure. Memory: the
process's peak RSS, and that minus the RSS after imports and model build
(what the training itself costs). Before every case the run measures the
machine's matrix-product peak (`common.measure_peak`: fp32, and bf16 where the
CPU has bf16 units; the run keeps the best) and every case's model FLOPs utilisation is its achieved FLOP/s
(`common.bert_flops`, printed at the start) over the peak of the precision
it runs in. Results go to `benchmarks/results/bench_training.jsonl` (one line
per measurement, with the machine, its peak and library versions) and
`benchmarks/report.py` turns them into the tables of docs/benchmarks.md and
docs/speed.md, one per machine kind.
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

SEQ = 128
PRED = 20
VOCAB = 30522

SIZES = {
    # name: (layers, hidden, heads, intermediate)
    "bert_tiny": (2, 128, 2, 512),
    "bert_mini": (4, 256, 4, 1024),
    "bert_small": (4, 512, 8, 2048),
    "bert_base": (12, 768, 12, 3072),
}

# (impl, size, batch, precision, xla, steps_per_loop)
CASE_SETS = {
    "default": [
        ("ours", "bert_tiny", 32, "fp32", "default", "default"),
        ("ours", "bert_tiny", 32, "fp32", "off", 1),
        ("ours", "bert_tiny", 32, "fp32", "on", 1),
        ("ours_malloc", "bert_tiny", 32, "fp32", "default", "default"),
        ("ours_eigen", "bert_tiny", 32, "fp32", "default", "default"),
        ("keras_hub", "bert_tiny", 32, "fp32", "on", 1),
        ("keras_hub_cpu_runtime", "bert_tiny", 32, "fp32", "on", 1),
        ("hf_torch", "bert_tiny", 32, "fp32", "off", 1),
        ("ours", "bert_base", 8, "fp32", "default", "default"),
        ("ours", "bert_base", 8, "fp32", "off", 1),
        ("ours", "bert_base", 8, "fp32", "on", 1),
        ("keras_hub", "bert_base", 8, "fp32", "on", 1),
        ("hf_torch", "bert_base", 8, "fp32", "off", 1),
        ("ours", "bert_base", 8, "bf16", "off", 1),
        ("ours", "bert_base", 8, "bf16", "on", 1),
        ("keras_hub", "bert_base", 8, "bf16", "on", 1),
        ("hf_torch", "bert_base", 8, "bf16", "off", 1),
    ],
    # BERT-base only, what each flag is worth (no keras-hub: its XLA compile
    # alone takes minutes): python benchmarks/bench_training.py --cases=base
    "base": [
        ("ours", "bert_base", 8, "fp32", "default", "default"),
        ("ours", "bert_base", 8, "fp32", "off", 1),
        ("ours", "bert_base", 8, "fp32", "on", 1),
        ("hf_torch", "bert_base", 8, "fp32", "off", 1),
        ("ours", "bert_base", 8, "bf16", "default", "default"),
        ("ours", "bert_base", 8, "bf16", "off", 1),
        ("hf_torch", "bert_base", 8, "bf16", "off", 1),
    ],
}


def flops_per_sequence(size):
    """Matrix-product FLOPs of one trained sequence of `size` (`common.bert_flops`)."""
    layers, hidden, _, inner = SIZES[size]
    return common.bert_flops(layers, hidden, inner, SEQ, VOCAB, PRED, training=True)


# Rows that show what the CPU settings of `modeling.training.cpu_runtime` are
# worth: ours without the caching allocator (malloc, TensorFlow's default),
# ours without oneDNN (Eigen, TensorFlow's default on CPUs without AVX-512
# VNNI/BF16 or AMX), and keras-hub with both, as our scripts set them. The
# last is not keras-hub's idiomatic form, so it is not a "vs best peer"
# baseline. name: (implementation, environment before TensorFlow is imported)
VARIANTS = {"ours_malloc": ("ours", {"TF_CPU_ALLOCATOR_USE_BFC": "false"}),
            "ours_eigen": ("ours", {"TF_ENABLE_ONEDNN_OPTS": "0"}),
            "keras_hub_cpu_runtime": ("keras_hub", {})}


def _batch(batch_size, seed=0):
    import numpy as np  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(seed)
    ids = rng.randint(1000, VOCAB, size=(batch_size, SEQ)).astype("int32")
    ids[:, 0] = 101
    positions = np.sort(np.stack([rng.choice(np.arange(1, SEQ), PRED, replace=False)
                                  for _ in range(batch_size)]), axis=1).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1)
    nsp = rng.randint(0, 2, size=(batch_size, 1)).astype("int32")
    return ids, positions, labels, nsp


def _resolve(xla, steps_per_loop):
    """The values a user gets without flags, for "default"."""
    sys.path.insert(0, os.path.join(REPO, "run"))
    from run import common_flags  # pylint: disable=import-outside-toplevel
    from absl import flags  # pylint: disable=import-outside-toplevel
    common_flags.define_trainer_flags()
    values = flags.FLAGS
    values(["bench"])
    # "default" is what a user gets without flags, the fused optimizer update
    # (--xla_optimizer_update) included; explicit "off" compiles nothing.
    jit_update = xla == "on"
    if xla == "default":
        xla = "on" if values.use_xla else "off"
        jit_update = values.use_xla or values.xla_optimizer_update
    if steps_per_loop == "default":
        steps_per_loop = values.steps_per_loop
    return xla, int(steps_per_loop), jit_update


def _measure_ours(size, batch_size, precision, xla, steps_per_loop, steps, rounds,
                  jit_update=None):
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from modeling import bert as bert_lib  # pylint: disable=import-outside-toplevel
    from modeling import recipes  # pylint: disable=import-outside-toplevel
    from modeling.training import distribute  # pylint: disable=import-outside-toplevel
    from modeling.training import optimization  # pylint: disable=import-outside-toplevel
    from modeling.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel

    layers, hidden, heads, inner = SIZES[size]
    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    config = bert_lib.BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                                 num_attention_heads=heads, intermediate_size=inner,
                                 hidden_act="gelu", max_position_embeddings=512)
    ids, positions, labels, nsp = _batch(batch_size)
    features = {"input_ids": ids, "input_mask": ids * 0 + 1, "segment_ids": ids * 0,
                "masked_lm_positions": positions, "masked_lm_ids": labels,
                "masked_lm_weights": (positions * 0 + 1).astype("float32"),
                "next_sentence_labels": nsp}

    def input_fn(_):
        return tf.data.Dataset.from_tensors(features).repeat()

    model_dir = tempfile.mkdtemp(prefix="bench_training_")
    strategy = distribute.get_strategy("one_device")
    trainer = trainer_lib.Trainer(
        strategy, lambda: recipes.build_bert_pretrainer(config),
        lambda: optimization.create_optimizer(
            1e-4, 10000, 100, jit_update=xla == "on" if jit_update is None else jit_update),
        model_dir, batch_size, num_train_steps=10 ** 6, use_xla=xla == "on",
        steps_per_loop=steps_per_loop)
    iterator = iter(strategy.distribute_datasets_from_function(input_fn))
    train_loop = trainer._build_train_step()  # pylint: disable=protected-access
    rss_built = common.rss_mb()
    # A loop of `steps_per_loop` updates, but never more than the timed
    # steps of a round (the default of 100 would make BERT-base rounds take
    # minutes; 6 updates per call already amortise the round trip).
    steps_per_loop = min(steps_per_loop, steps)
    n = tf.constant(steps_per_loop, tf.int32)

    def sync():
        return float(tf.reduce_sum(trainer.model.trainable_variables[0]))

    for _ in range(2):  # tracing, compilation
        metrics = train_loop(iterator, n)
    sync()
    times = []
    calls = max(1, steps // steps_per_loop)
    for _ in range(rounds):
        for _ in range(calls):
            start = time.perf_counter()
            metrics = train_loop(iterator, n)
            sync()
            times.append((time.perf_counter() - start) / steps_per_loop)
    loss = metrics["loss"]
    return {"step_seconds": times, "rss_built_mb": rss_built, "peak_mb": common.peak_mb(),
            "loss": float(loss[0]) / float(loss[1]),
            "resolved": {"xla": xla, "steps_per_loop": steps_per_loop,
                         "xla_optimizer_update": xla == "on" if jit_update is None
                         else bool(jit_update)}}


def _measure_keras_hub(size, batch_size, precision, steps, rounds):
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    layers, hidden, heads, inner = SIZES[size]
    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=inner, max_sequence_length=512, num_segments=2, dropout=0.1)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                                   global_clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    ids, positions, labels, _ = _batch(batch_size)
    x = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool),
         "segment_ids": np.zeros_like(ids), "mask_positions": positions}
    rss_built = common.rss_mb()
    for _ in range(2):
        loss = model.train_on_batch(x, labels)
    times = []
    for _ in range(rounds):
        for _ in range(steps):
            start = time.perf_counter()
            loss = model.train_on_batch(x, labels)  # returns a Python float: synchronous
            times.append(time.perf_counter() - start)
    return {"step_seconds": times, "rss_built_mb": rss_built, "peak_mb": common.peak_mb(),
            "loss": float(loss[0] if isinstance(loss, (list, tuple)) else loss)}


def _measure_hf_torch(size, batch_size, precision, steps, rounds):
    import contextlib  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel

    layers, hidden, heads, inner = SIZES[size]
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=hidden,
                                     num_hidden_layers=layers, num_attention_heads=heads,
                                     intermediate_size=inner, hidden_act="gelu",
                                     max_position_embeddings=512, type_vocab_size=2)
    model = transformers.BertForPreTraining(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    ids, positions, labels, nsp = _batch(batch_size)
    ids_t = torch.from_numpy(ids).long()
    ones, zeros = torch.ones_like(ids_t), torch.zeros_like(ids_t)
    rows = torch.arange(batch_size).unsqueeze(1)
    positions_t = torch.from_numpy(positions).long()
    labels_t = torch.from_numpy(labels).long().reshape(-1)
    nsp_t = torch.from_numpy(nsp[:, 0]).long()

    def forward_loss():
        # BertForPreTraining's own modules, with the masked-LM head applied
        # to the 20 masked positions only (as ours and keras-hub do), not to
        # all 128 (what `model(**inputs, labels=...)` would compute).
        sequence, pooled = model.bert(input_ids=ids_t, attention_mask=ones,
                                      token_type_ids=zeros, return_dict=False)[:2]
        gathered = sequence[rows, positions_t]
        logits, nsp_logits = model.cls(gathered, pooled)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), labels_t)
        return loss + torch.nn.functional.cross_entropy(nsp_logits.float(), nsp_t)
    rss_built = common.rss_mb()

    def step():
        optimizer.zero_grad(set_to_none=True)
        context = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                   else contextlib.nullcontext())
        with context:
            loss = forward_loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss)

    for _ in range(2):
        loss = step()
    times = []
    for _ in range(rounds):
        for _ in range(steps):
            start = time.perf_counter()
            loss = step()
            times.append(time.perf_counter() - start)
    return {"step_seconds": times, "rss_built_mb": rss_built, "peak_mb": common.peak_mb(),
            "loss": loss, "torch_threads": torch.get_num_threads()}


def _child(case, steps, rounds):
    impl, size, batch_size, precision, xla, steps_per_loop = case
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    rss_start = common.rss_mb()
    if impl in VARIANTS:
        impl, environ = VARIANTS[impl]
        os.environ.update(environ)
    if impl == "ours" or case[0] in VARIANTS:
        # What every run/ script does before it imports TensorFlow.
        from modeling.training import cpu_runtime  # pylint: disable=import-outside-toplevel
        cpu_runtime.configure()
    if impl == "ours":
        xla, steps_per_loop, jit_update = _resolve(xla, steps_per_loop)
        result = _measure_ours(size, batch_size, precision, xla, steps_per_loop, steps, rounds,
                               jit_update)
    elif impl == "keras_hub":
        result = _measure_keras_hub(size, batch_size, precision, steps, rounds)
    else:
        result = _measure_hf_torch(size, batch_size, precision, steps, rounds)
    result["rss_start_mb"] = rss_start
    return result


def _case_key(case):
    impl, size, batch_size, precision, xla, steps_per_loop = case
    return "%s/%s/b%d/%s/xla_%s/loop_%s" % (impl, size, batch_size, precision, xla,
                                          steps_per_loop)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="default", choices=sorted(CASE_SETS))
    parser.add_argument("--only", default="",
                        help="comma-separated substrings; keep the cases whose key has one")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds; each runs every case once, in a fresh process")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per case and round")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--run_id", default=None,
                        help="append to this earlier run (its rows and these form one table)")
    args = parser.parse_args()
    if args.child:
        case = tuple(json.loads(args.child))
        common.print_child_result(_child(case, args.steps, 1))
        return
    cases = [tuple(c) for c in CASE_SETS[args.cases]]
    if args.only:
        keys = args.only.split(",")
        cases = [c for c in cases if any(k in _case_key(c) for k in keys)]
    run_id = args.run_id or time.strftime("%Y%m%dT%H%M%S")
    machine = common.machine_info()
    versions = common.library_versions(("tensorflow", "keras", "keras_hub", "torch",
                                        "transformers", "numpy"))
    print("machine: %s, %d cores, %s (kind %s)" % (
        machine["cpu_model"], machine["cores"],
        " ".join(f for f, on in machine["cpu_flags"].items() if on), machine["kind"]))
    peak = common.measure_peak()
    print("peak: %s GFLOP/s fp32, %s GFLOP/s bf16 (%s)" % (
        _gflops_text(peak.get("fp32_gflops")), _gflops_text(peak.get("bf16_gflops")),
        peak.get("error") or peak["matmul"]))
    print("model FLOPs: %s" % common.FLOP_FORMULA)
    for size in sorted({c[1] for c in cases}, key=list(SIZES).index):
        print("  %s: %.2f GFLOP per trained sequence" % (size, flops_per_sequence(size) / 1e9))
    collected = {c: [] for c in cases}
    for round_index in range(args.rounds):
        for case_index, case in enumerate(cases):
            if round_index or case_index:
                # Before every case: on a machine shared with other jobs a single
                # measurement may fall in a busy moment; the run keeps the best.
                peak = common.best_peak(peak, common.measure_peak())
            result = common.run_child(__file__, case, ["--steps=%d" % args.steps], cwd=REPO)
            if result is None:
                continue
            collected[case].append(result)
            impl, size, batch_size, precision, xla, steps_per_loop = case
            median = statistics.median(result["step_seconds"])
            flops = flops_per_sequence(size) * batch_size
            record = {
                "run_id": run_id, "round": round_index,
                "config": {"impl": impl, "size": size, "batch_size": batch_size,
                           "precision": precision, "xla": xla,
                           "steps_per_loop": steps_per_loop, "seq_length": SEQ,
                           "max_predictions": PRED, "vocab_size": VOCAB},
                "resolved": result.get("resolved"),
                "step_seconds": result["step_seconds"],
                "seq_per_sec": batch_size / median,
                "peak_mb": result["peak_mb"],
                "training_mb": result["peak_mb"] - result["rss_built_mb"],
                "rss_built_mb": result["rss_built_mb"],
                "rss_start_mb": result["rss_start_mb"],
                "final_loss": result["loss"],
                "flops_per_step": flops, "gflops_per_sec": flops / median / 1e9,
                "mfu": common.mfu(flops, median, peak, precision),
                "machine": machine, "peak": peak, "versions": versions,
                "load_average": list(os.getloadavg()),
            }
            common.append_result("bench_training", record)
            print("round %d  %-52s %8.2f seq/s  %s of peak  peak %6.0f MB  training %6.0f MB"
                  % (round_index, _case_key(case), record["seq_per_sec"],
                     _percent(record["mfu"]), record["peak_mb"], record["training_mb"]),
                  flush=True)
    print("best peak of %d measurements: %s GFLOP/s fp32, %s bf16" % (
        peak.get("measurements", 1), _gflops_text(peak.get("fp32_gflops")),
        _gflops_text(peak.get("bf16_gflops"))))
    print("\nmedian over rounds (vs best peer of the same size, batch and precision; "
          "fraction of the %s peak):" % "/".join(
              p for p in ("fp32", "bf16") if peak.get(p + "_gflops")))
    medians = {case: statistics.median(case[2] / statistics.median(r["step_seconds"])
                                       for r in runs)
               for case, runs in collected.items() if runs}
    for case, seq in medians.items():
        impl, size, batch_size, precision = case[:4]
        peers = [v for c, v in medians.items()
                 if c[0] in PEERS and c[1:4] == (size, batch_size, precision)]
        ratio = "%.2fx best peer" % (seq / max(peers)) if peers and impl not in PEERS else ""
        utilisation = common.mfu(flops_per_sequence(size), 1.0 / seq, peak, precision)
        print("  %-52s %8.2f seq/s  %-16s MFU %s" % (_case_key(case), seq, ratio,
                                                    _percent(utilisation)))


# The idiomatic peers "vs best peer" compares with (not the VARIANTS rows).
PEERS = ("keras_hub", "hf_torch")


def _percent(value):
    return "-" if value is None else "%.0f%%" % (100 * value)


def _gflops_text(value):
    return "-" if value is None else "%.0f" % value


if __name__ == "__main__":
    main()
