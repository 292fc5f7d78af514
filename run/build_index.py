"""Encodes the stored questions of an FAQ once: vectors + ids to one index file.

    python run/build_index.py --input_file=faq.tsv --output_file=faq_index.npz \
      --bert_config_file=$MODEL_DIR/config.json --vocab_file=$MODEL_DIR/vocab.txt \
      --init_checkpoint=$MODEL_DIR/model.safetensors --pooling=mean --similarity=cosine

Input: ``id<TAB>question`` per line (UTF-8; ids unique; a bad line is a
one-line error naming file:line). `--init_checkpoint` is the bi-encoder:
HF safetensors (all-MiniLM-L6-v2), a Google checkpoint, or a
`run_siamese.py` output directory. Output: a NumPy .npz written atomically
with the vectors (L2-normalised for --similarity=cosine), ids, questions and
the settings (model files, pooling, similarity, dimension, casing, a probe
vector) that `run/match.py` checks its encoder against.

The library part is `modeling.serving.matching` (the flags are its
`IndexSettings`' fields).
"""

import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from data.processors import pairs
from modeling.serving import matching

common_flags.define_job_flags(matching.IndexSettings)


def main(_):
    settings = common_flags.job_from_flags(matching.IndexSettings)
    atomic.check_outputs([("--output_file", settings.output_file)],
                         [("--input_file", settings.input_file),
                          ("--vocab_file", settings.vocab_file),
                          ("--bert_config_file", settings.bert_config_file)])
    if settings.batch_size < 1:
        raise ValueError("--batch_size=%d: expected a positive number" % settings.batch_size)
    ids, questions = pairs.read_questions(settings.input_file)
    encoder = matching.load_sentence_encoder(
        settings.bert_config_file, settings.vocab_file, settings.init_checkpoint,
        settings.do_lower_case, settings.pooling, settings.similarity,
        settings.max_seq_length, settings.model_family)
    start = time.perf_counter()
    index = matching.build_index(
        encoder, ids, questions, settings.output_file, batch_size=settings.batch_size,
        similarity=settings.similarity, settings=settings.recorded())
    print("Wrote %d %d-dim vectors (%s, %s) to %s in %.1f s"
          % (len(index), index.vectors.shape[1], settings.pooling, settings.similarity,
             settings.output_file, time.perf_counter() - start))


if __name__ == "__main__":
    # --init_checkpoint too: an index of random weights no match.py run can use.
    script.run(main, required_flags=["input_file", "output_file", "vocab_file",
                                     "bert_config_file", "init_checkpoint"])
