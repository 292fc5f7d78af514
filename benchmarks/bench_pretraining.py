"""Pre-training throughput at seq 128, side by side with keras-hub's BertMaskedLM.

    pip install -r requirements-bench.txt
    python benchmarks/bench_pretraining.py [--sizes=bert_tiny,bert_mini,bert_small,bert_base]
        [--batch_size=8] [--steps=5] [--rounds=3]

For every size, with and without XLA, one training step (forward, backward,
AdamW update) of this project's BertPretrainer (masked LM + NSP) and of
keras-hub's `BertMaskedLM` (masked LM only, so it does slightly less work) on
the same config, batch and sequence length. Each measurement runs in a fresh
subprocess, which also gives its peak memory (max RSS): after two warm-up
steps (tracing, XLA compilation) it times `--rounds` rounds of `--steps`
steps and keeps the fastest round, so that a burst of other work on the
machine does not decide the ratio. Printed: sequences/sec, peak memory, and
our throughput as a ratio to keras-hub's.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SEQ = 128
PRED = 20


def _measure(impl, size, xla, batch_size, steps, vocab_size, rounds=1):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from modeling import bert as config_lib  # pylint: disable=g-import-not-at-top

    config = config_lib.BertConfig.from_preset(size, vocab_size=vocab_size)
    rng = np.random.RandomState(0)
    ids = rng.randint(1000, vocab_size, size=(batch_size, SEQ)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, SEQ), PRED, replace=False)
                                  for _ in range(batch_size)]), axis=1).astype("int32")
    labels = np.take_along_axis(ids, positions, axis=1)
    if impl == "ours":
        from modeling import recipes  # pylint: disable=g-import-not-at-top
        from modeling.training import optimization  # pylint: disable=g-import-not-at-top
        model = recipes.build_bert_pretrainer(config)
        optimizer = optimization.create_optimizer(1e-4, 1000, 10)
        optimizer.build(model.trainable_variables)
        features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids), "masked_lm_positions": positions,
                    "masked_lm_ids": labels,
                    "masked_lm_weights": np.ones(positions.shape, "float32"),
                    "next_sentence_labels": np.zeros((batch_size, 1), "int32")}
        features = {k: tf.constant(v) for k, v in features.items()}

        def loss_fn(f):
            return model.compute_loss_and_metrics(f, training=True)[0]
    else:
        import keras  # pylint: disable=g-import-not-at-top
        import keras_hub  # pylint: disable=g-import-not-at-top
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=vocab_size, num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size,
            max_sequence_length=config.max_position_embeddings,
            num_segments=config.type_vocab_size, dropout=0.1)
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
        optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                           global_clipnorm=1.0)
        optimizer.build(model.trainable_variables)
        inputs = {"token_ids": tf.constant(ids), "padding_mask": tf.ones_like(ids, tf.bool),
                  "segment_ids": tf.zeros_like(ids), "mask_positions": tf.constant(positions)}
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        targets = tf.constant(labels)
        features = inputs

        def loss_fn(f):
            return loss_object(targets, model(f, training=True))

    grad_fn = tf.function(
        lambda f: tf.gradients(loss_fn(f), model.trainable_variables), jit_compile=xla)

    @tf.function
    def step(f):
        grads = grad_fn(f)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    step(features)
    step(features)
    seconds = []
    for _ in range(rounds):
        float(tf.reduce_sum(model.trainable_variables[0]))  # nothing pending
        start = time.perf_counter()
        for _ in range(steps):
            step(features)
        float(tf.reduce_sum(model.trainable_variables[0]))  # wait for the last step
        seconds.append(time.perf_counter() - start)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"seq_per_sec": batch_size * steps / min(seconds), "peak_mb": peak_mb}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="bert_tiny,bert_mini,bert_small,bert_base")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        impl, size, xla = args.child.split(":")
        result = _measure(impl, size, xla == "1", args.batch_size, args.steps, args.vocab_size,
                          args.rounds)
        print("RESULT " + json.dumps(result))
        return
    print("seq %d, batch %d, fastest of %d rounds of %d steps per measurement\n" % (
        SEQ, args.batch_size, args.rounds, args.steps))
    print("%-11s %-4s %14s %14s %10s %12s %12s" % (
        "size", "xla", "ours seq/s", "keras-hub", "ratio", "ours MB", "keras-hub MB"))
    for size in args.sizes.split(","):
        for xla in ("0", "1"):
            row = {}
            for impl in ("ours", "keras_hub"):
                out = subprocess.run(
                    [sys.executable, __file__, "--child=%s:%s:%s" % (impl, size, xla),
                     "--batch_size=%d" % args.batch_size, "--steps=%d" % args.steps,
                     "--rounds=%d" % args.rounds,
                     "--vocab_size=%d" % args.vocab_size],
                    capture_output=True, text=True)
                lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
                row[impl] = json.loads(lines[-1][7:]) if lines else None
                if not lines:
                    print("  %s %s xla=%s failed: %s" % (impl, size, xla, out.stderr[-500:]))
            if row["ours"] and row["keras_hub"]:
                print("%-11s %-4s %14.1f %14.1f %9.2fx %12.0f %12.0f" % (
                    size, "on" if xla == "1" else "off", row["ours"]["seq_per_sec"],
                    row["keras_hub"]["seq_per_sec"],
                    row["ours"]["seq_per_sec"] / row["keras_hub"]["seq_per_sec"],
                    row["ours"]["peak_mb"], row["keras_hub"]["peak_mb"]))


if __name__ == "__main__":
    main()
