"""Finds the stored questions closest to a query: encodes only the query, one matrix product.

    python run/match.py --index_file=faq_index.npz --query="how can I reset my password" \
      --top_k=5
    python run/match.py --index_file=faq_index.npz --query_file=queries.txt

The encoder is the one recorded in the index (its config, vocabulary,
checkpoint, pooling, similarity, casing, max_seq_length); the model flags
override those, and an encoder that does not give the index's vectors
(another dimension, pooling or checkpoint) is refused with a one-line error.
Output, per query: the query, then ``rank<TAB>score<TAB>id<TAB>question``
lines, best first; `--output_file` also writes them as JSON lines
(atomically).

The library part is `modeling.serving.matching`.
"""

import json
import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import atomic
from modeling import registry
from modeling.serving import inference
from modeling.serving import matching

FLAGS = flags.FLAGS
flags.DEFINE_string("index_file", None, "The index written by build_index.py.")
flags.DEFINE_string("query", None, "One query.")
flags.DEFINE_string("query_file", None, "Queries, one per line (blank lines skipped).")
flags.DEFINE_integer("top_k", 5, "Stored questions to return per query.")
flags.DEFINE_string("output_file", None, "Optional JSON lines output.")
flags.DEFINE_string("model_family", None, "Default: the index's.")
flags.DEFINE_string("bert_config_file", None, "Default: the index's.")
flags.DEFINE_string("vocab_file", None, "Default: the index's.")
flags.DEFINE_string("init_checkpoint", None, "Default: the index's.")


def main(_):
    if (FLAGS.query is None) == (FLAGS.query_file is None):
        raise ValueError("give exactly one of --query and --query_file")
    if FLAGS.top_k < 1:
        raise ValueError("--top_k=%d: expected at least 1" % FLAGS.top_k)
    if FLAGS.output_file:
        atomic.check_outputs([("--output_file", FLAGS.output_file)],
                             [("--index_file", FLAGS.index_file)] +
                             ([("--query_file", FLAGS.query_file)] if FLAGS.query_file else []))
    index = matching.load_index(FLAGS.index_file)
    queries = ([FLAGS.query] if FLAGS.query is not None
               else inference.read_input_lines(FLAGS.query_file, skip_blank=True))
    if not queries or not all(q.strip() for q in queries):
        raise ValueError("no query: expected a non-empty --query or lines in --query_file")
    s = index.settings

    def setting(name):
        value = getattr(FLAGS, name)
        return value if value is not None else s.get(name)

    encoder = matching.load_sentence_encoder(
        setting("bert_config_file"), setting("vocab_file"), setting("init_checkpoint"),
        s.get("do_lower_case", True), s["pooling"], s["similarity"],
        s.get("max_seq_length", 64), setting("model_family") or registry.DEFAULT_FAMILY)
    matching.check_encoder(index, encoder)
    matcher = matching.Matcher(encoder, index, FLAGS.top_k)
    records = []
    for query in queries:
        start = time.perf_counter()
        hits = matcher([query])[0]
        elapsed = time.perf_counter() - start
        print("query: %s  (%.1f ms)" % (query, 1000 * elapsed))
        for rank, (question_id, question, score) in enumerate(hits, 1):
            print("%d\t%.4f\t%s\t%s" % (rank, score, question_id, question))
        records.append({"query": query, "matches": [
            {"rank": r, "id": i, "question": q, "score": round(sc, 6)}
            for r, (i, q, sc) in enumerate(hits, 1)]})
    if FLAGS.output_file:
        with atomic.atomic_output(FLAGS.output_file) as out:
            for record in records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    script.run(main, required_flags=["index_file"])
