"""Writes a multilingual pre-training corpus in mBERT's smoothed language proportions.

    python run/resample_languages.py --input_file=data/sample/sample_en.txt,data/sample/sample_zh.txt \
      --languages=en,zh --language_sampling_alpha=0.7 --output_dir=/tmp/multilingual_corpus
    python run/create_vocab.py --input_file=data/sample/sample_en.txt,data/sample/sample_zh.txt \
      --languages=en,zh --language_sampling_alpha=0.7 --vocab_file=/tmp/multilingual_vocab.txt
    python run/create_pretraining_data.py --input_file=/tmp/multilingual_corpus/*.txt ...

Each comma-separated --input_file pattern is one language. Language i is
sampled with q_i = p_i^alpha / sum_j p_j^alpha (p_i its share of the words;
alpha 0.7 in mBERT, 1 = natural shares, 0 = uniform): its whole documents,
in a seeded shuffled order, repeated or cut to q_i of --total_words. The
output directory gets one text file per language and sampling.json (sizes,
p, q, what was written), and sampling.png: p_i beside q_i per language, and
q_i as a function of alpha in [0, 1] (--noplot: none). The work is
`data.multilingual`; the picture `modeling/analysis/plots.py`.
"""

import os

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import multilingual
from modeling.analysis import plots

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Comma-separated patterns, one language each.")
flags.DEFINE_string("languages", None, "The languages' names, in the patterns' order (en,zh).")
flags.DEFINE_float("language_sampling_alpha", 0.7, "The smoothing exponent (mBERT: 0.7).")
flags.DEFINE_string("output_dir", None, "Where <language>.txt and sampling.json are written.")
flags.DEFINE_integer("total_words", None, "Words in all (default: the input's own size).")
flags.DEFINE_integer("seed", 12345, "Seed of the document order.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case when counting words (as the tokenizer will).")
flags.DEFINE_bool("plot", True, "Also write sampling.png into --output_dir (and as a TensorBoard image in --output_dir/tensorboard).")


def main(_):
    report = multilingual.resample_documents(
        multilingual.files_by_language(FLAGS.input_file, FLAGS.languages),
        FLAGS.language_sampling_alpha, FLAGS.output_dir, FLAGS.total_words, FLAGS.seed,
        FLAGS.do_lower_case)
    for language in sorted(report["q"]):
        print("%s: %d words (p=%.3f) -> q=%.3f, wrote %d words in %d documents" % (
            language, report["sizes"][language], report["p"][language], report["q"][language],
            report["written"][language]["words"], report["written"][language]["documents"]))
    if FLAGS.plot:
        path = os.path.join(FLAGS.output_dir, "sampling.png")
        plots.plot_language_sampling(report, path)
        plots.png_to_tensorboard(path)
        print("wrote %s" % path)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_dir"])
