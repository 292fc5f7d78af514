"""BERT-base inference latency (one sentence) and batched throughput, side by side with peers.

    pip install -r requirements-bench.txt
    python benchmarks/bench_inference.py [--rounds=3] [--calls=30]

The same random-weight BERT-base (vocabulary 30,522, exact GELU) encodes one
sentence of 30 word pieces (latency) and a batch of 32 such sentences
(throughput), giving the sequence output and the pooled output:

* this project: `modeling.serving.inference.Encoder` (what `extract_features.py`
  and `predict_masked.py` run: one compiled TensorFlow function, inputs cut to
  the longest row), in fp32, bf16 (the Dense products in bf16 with kernels
  cast once, products under `quantization.BF16_MIN_ROWS` rows in fp32) and
  int8 (dynamic-range quantisation of the Dense products, oneDNN's int8
  kernels), plus the exported SavedModel's `serving_default` (text in,
  in-graph tokenizer included) in fp32 and int8;
* keras-hub: `BertBackbone` called in a `tf.function` (its fastest form for
  single calls; `predict` adds per-call overhead);
* HF transformers in torch: `BertModel` eager under `torch.inference_mode()`,
  and `torch.compile`d; bf16 through autocast.

Every case runs in a fresh process; a round runs every case once, in turn;
per-call times are recorded raw and the median is the figure. Our bf16 case
also records the largest difference of its outputs from fp32 on the same
weights, and so does the int8 case. The int8 FLOPs are counted as the same
products (the fraction of peak is then against the fp32 peak: the run
measures no int8 peak). Before every case the run measures the machine's matrix-product
peak (`common.measure_peak`; the run keeps the best); every case's model FLOPs utilisation is
`flops_per_sentence()` (`common.bert_flops`, forward only: sequence and pooled
outputs) times sentences per second over the peak of its precision.
Results go to `benchmarks/results/bench_inference.jsonl`.
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

VOCAB = 30522
TOKENS = 30
BATCH = 32
CASES = [
    ("ours", "fp32"), ("ours", "bf16"), ("ours", "int8"), ("ours_savedmodel", "fp32"),
    ("ours_savedmodel", "int8"),
    ("keras_hub", "fp32"), ("keras_hub", "bf16"),
    ("hf_torch", "fp32"), ("hf_torch_compile", "fp32"), ("hf_torch", "bf16"),
]


def flops_per_sentence(tokens=TOKENS):
    """Matrix-product FLOPs of one BERT-base forward pass (`common.bert_flops`)."""
    return common.bert_flops(12, 768, 3072, tokens, training=False, next_sentence=False)


def _ids(batch, seed=0):
    import numpy as np  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(seed)
    ids = rng.randint(1000, VOCAB, size=(batch, TOKENS)).astype("int32")
    ids[:, 0], ids[:, -1] = 101, 102
    return ids


def _time(fn, calls):
    fn()
    fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _ours(precision, calls, savedmodel):
    import keras  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from modeling import bert as bert_lib  # pylint: disable=import-outside-toplevel
    from modeling.serving import inference  # pylint: disable=import-outside-toplevel

    config = bert_lib.BertConfig(vocab_size=VOCAB, hidden_size=768, num_hidden_layers=12,
                                 num_attention_heads=12, intermediate_size=3072,
                                 hidden_act="gelu", max_position_embeddings=512)
    keras.utils.set_random_seed(0)
    reference = bert_lib.BertEncoder.from_config_object(config)
    one, batch = _ids(1), _ids(BATCH)
    features = lambda ids: {"input_ids": ids, "input_mask": np.ones_like(ids),  # noqa: E731
                            "segment_ids": np.zeros_like(ids)}
    reference(features(one))
    extra = {}
    if savedmodel:
        from modeling.serving import export  # pylint: disable=import-outside-toplevel
        vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        with open(vocab, "w") as f:
            f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                              ["w%d" % i for i in range(VOCAB - 5)]) + "\n")
        path = os.path.join(tempfile.mkdtemp(), "export")
        export.export_text_model(
            reference, path, vocab, True, 128,
            output_fn=lambda out: {"sequence_output": out["sequence_output"],
                                   "pooled_output": out["pooled_output"]},
            precision=precision)
        loaded = tf.saved_model.load(path)
        serve = loaded.signatures["serving_default"]
        sentence = tf.constant([" ".join("w%d" % i for i in range(1000, 1000 + TOKENS - 2))])
        sentences = tf.constant([sentence.numpy()[0]] * BATCH)
        single = lambda: [v.numpy() for v in serve(text_a=sentence).values()]  # noqa: E731
        batched = lambda: [v.numpy() for v in serve(text_a=sentences).values()]  # noqa: E731
    else:
        encoder = inference.Encoder(reference, precision=precision)
        single = lambda: encoder(features(one))  # noqa: E731
        batched = lambda: encoder(features(batch))  # noqa: E731
        if precision in ("bf16", "int8"):
            exact = inference.Encoder(reference)(features(batch))
            approx = batched()
            extra["max_abs_diff_vs_fp32"] = {
                name: float(np.max(np.abs(exact[name] - approx[name])))
                for name in ("sequence_output", "pooled_output")}
    return _time(single, calls), _time(batched, max(3, calls // 5)), extra


def _keras_hub(precision, calls):
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=12, num_heads=12, hidden_dim=768,
        intermediate_dim=3072, max_sequence_length=512, num_segments=2)
    call = tf.function(lambda x: backbone(x, training=False))

    def run(ids):
        out = call({"token_ids": ids, "padding_mask": np.ones_like(ids, bool),
                    "segment_ids": np.zeros_like(ids)})
        return {k: v.numpy() for k, v in out.items()}

    one, batch = _ids(1), _ids(BATCH)
    return _time(lambda: run(one), calls), _time(lambda: run(batch), max(3, calls // 5)), {}


def _hf(precision, calls, compiled):
    import contextlib  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_act="gelu")
    model = transformers.BertModel(config).eval()
    if compiled:
        model = torch.compile(model)
    one, batch = (torch.from_numpy(_ids(1)).long(), torch.from_numpy(_ids(BATCH)).long())

    def run(ids):
        context = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                   else contextlib.nullcontext())
        with torch.inference_mode(), context:
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                        token_type_ids=torch.zeros_like(ids))
            return out.last_hidden_state.float().numpy(), out.pooler_output.float().numpy()

    return _time(lambda: run(one), calls), _time(lambda: run(batch), max(3, calls // 5)), {}


def _child(case, calls):
    impl, precision = case
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if impl in ("ours", "ours_savedmodel"):
        return _ours(precision, calls, impl == "ours_savedmodel")
    if impl == "keras_hub":
        return _keras_hub(precision, calls)
    return _hf(precision, calls, impl == "hf_torch_compile")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=30, help="timed single-sentence calls")
    parser.add_argument("--only", default="", help="comma-separated impl names to keep")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        single, batched, extra = _child(tuple(json.loads(args.child)), args.calls)
        common.print_child_result({"single": single, "batched": batched, "extra": extra})
        return
    cases = [c for c in CASES if not args.only or c[0] in args.only.split(",")]
    run_id = time.strftime("%Y%m%dT%H%M%S")
    machine = common.machine_info()
    versions = common.library_versions(("tensorflow", "keras", "keras_hub", "torch",
                                        "transformers", "numpy"))
    peak = common.measure_peak()
    flops = flops_per_sentence()
    print("machine kind %s; peak %s GFLOP/s fp32, %s bf16; %.2f GFLOP per sentence of %d "
          "tokens (%s)" % (machine["kind"], peak.get("fp32_gflops"), peak.get("bf16_gflops"),
                           flops / 1e9, TOKENS, common.FLOP_FORMULA))
    latencies = {}
    for round_index in range(args.rounds):
        for case_index, case in enumerate(cases):
            if round_index or case_index:
                # Before every case: on a machine shared with other jobs a single
                # measurement may fall in a busy moment; the run keeps the best.
                peak = common.best_peak(peak, common.measure_peak())
            result = common.run_child(__file__, case, ["--calls=%d" % args.calls], cwd=REPO)
            if result is None:
                continue
            record = {"run_id": run_id, "round": round_index,
                      "config": {"impl": case[0], "precision": case[1], "tokens": TOKENS,
                                 "batch": BATCH, "model": "bert_base"},
                      "single_seconds": result["single"], "batched_seconds": result["batched"],
                      "latency_ms": 1000 * statistics.median(result["single"]),
                      "batched_seq_per_sec": BATCH / statistics.median(result["batched"]),
                      "flops_per_sentence": flops,
                      "machine": machine, "peak": peak, "versions": versions,
                      "load_average": list(os.getloadavg())}
            record["mfu_single"] = common.mfu(flops, record["latency_ms"] / 1000, peak, case[1])
            record["mfu_batched"] = common.mfu(flops * record["batched_seq_per_sec"], 1.0,
                                               peak, case[1])
            record.update(result["extra"])
            common.append_result("bench_inference", record)
            latencies.setdefault(case, []).append(record["latency_ms"])
            base = latencies.get(("hf_torch", "fp32"))
            ratio = ("%.2fx HF eager fp32" % (statistics.median(base) / record["latency_ms"])
                     if base else "")
            print("round %d  %-18s %-5s %7.1f ms/sentence %-20s MFU %s  %7.1f seq/s batched "
                  "MFU %s %s" % (
                      round_index, case[0], case[1], record["latency_ms"], ratio,
                      _percent(record["mfu_single"]), record["batched_seq_per_sec"],
                      _percent(record["mfu_batched"]), result["extra"] or ""), flush=True)


def _percent(value):
    return "-" if value is None else "%.0f%%" % (100 * value)


if __name__ == "__main__":
    main()
