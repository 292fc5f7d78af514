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

The library part is `modeling.serving.matching` (the flags are its
`MatchSettings`' fields).
"""

import json
import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from modeling import registry
from modeling.serving import inference
from modeling.serving import matching

common_flags.define_job_flags(matching.MatchSettings)


def main(_):
    settings = common_flags.job_from_flags(matching.MatchSettings)
    if (settings.query is None) == (settings.query_file is None):
        raise ValueError("give exactly one of --query and --query_file")
    if settings.top_k < 1:
        raise ValueError("--top_k=%d: expected at least 1" % settings.top_k)
    if settings.output_file:
        atomic.check_outputs([("--output_file", settings.output_file)],
                             [("--index_file", settings.index_file)] +
                             ([("--query_file", settings.query_file)]
                              if settings.query_file else []))
    index = matching.load_index(settings.index_file)
    queries = ([settings.query] if settings.query is not None
               else inference.read_input_lines(settings.query_file, skip_blank=True))
    if not queries or not all(q.strip() for q in queries):
        raise ValueError("no query: expected a non-empty --query or lines in --query_file")
    recorded = index.settings

    def setting(name):
        return settings.encoder_setting(name, index)

    encoder = matching.load_sentence_encoder(
        setting("bert_config_file"), setting("vocab_file"), setting("init_checkpoint"),
        recorded.get("do_lower_case", True), recorded["pooling"], recorded["similarity"],
        recorded.get("max_seq_length", 64), setting("model_family") or registry.DEFAULT_FAMILY)
    matching.check_encoder(index, encoder)
    matcher = matching.Matcher(encoder, index, settings.top_k)
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
    if settings.output_file:
        with atomic.atomic_output(settings.output_file) as out:
            for record in records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    script.run(main, required_flags=["index_file"])
