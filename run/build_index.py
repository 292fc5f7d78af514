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

The library part is `modeling.serving.matching`.
"""

import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import atomic
from data.processors import pairs
from modeling.serving import matching

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Stored questions: id<TAB>question per line.")
flags.DEFINE_string("output_file", None, "The index file to write (.npz).")
flags.DEFINE_string("model_family", "bert", "The encoder's model family (bert, albert, ...).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_string("init_checkpoint", None,
                    "The bi-encoder's weights: HF safetensors, Google TF1, or a "
                    "run_siamese.py output dir.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 64, "Word pieces per question with [CLS] and [SEP].")
flags.DEFINE_enum("pooling", "mean", ["cls", "mean", "max"], "Sentence vector pooling.")
flags.DEFINE_enum("similarity", "cosine", ["cosine", "dot"],
                  "cosine stores L2-normalised vectors; dot stores them as they are.")
flags.DEFINE_integer("batch_size", 64, "Questions encoded per call.")


def main(_):
    atomic.check_outputs([("--output_file", FLAGS.output_file)],
                         [("--input_file", FLAGS.input_file), ("--vocab_file", FLAGS.vocab_file),
                          ("--bert_config_file", FLAGS.bert_config_file)])
    if FLAGS.batch_size < 1:
        raise ValueError("--batch_size=%d: expected a positive number" % FLAGS.batch_size)
    ids, questions = pairs.read_questions(FLAGS.input_file)
    encoder = matching.load_sentence_encoder(
        FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.init_checkpoint, FLAGS.do_lower_case,
        FLAGS.pooling, FLAGS.similarity, FLAGS.max_seq_length, FLAGS.model_family)
    start = time.perf_counter()
    index = matching.build_index(
        encoder, ids, questions, FLAGS.output_file, batch_size=FLAGS.batch_size,
        similarity=FLAGS.similarity,
        settings={"model_family": FLAGS.model_family,
                  "bert_config_file": FLAGS.bert_config_file, "vocab_file": FLAGS.vocab_file,
                  "init_checkpoint": FLAGS.init_checkpoint,
                  "do_lower_case": FLAGS.do_lower_case})
    print("Wrote %d %d-dim vectors (%s, %s) to %s in %.1f s"
          % (len(index), index.vectors.shape[1], FLAGS.pooling, FLAGS.similarity,
             FLAGS.output_file, time.perf_counter() - start))


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "vocab_file",
                                     "bert_config_file"])
