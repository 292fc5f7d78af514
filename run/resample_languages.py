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
`data.multilingual` (the flags are its `ResampleSettings`' fields); the picture
`modeling/analysis/plots.py`.
"""

import os

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import multilingual
from modeling.analysis import plots

common_flags.define_job_flags(multilingual.ResampleSettings)


def main(_):
    settings = common_flags.job_from_flags(multilingual.ResampleSettings)
    report = multilingual.resample_documents(
        multilingual.files_by_language(settings.input_file, settings.languages),
        settings.language_sampling_alpha, settings.output_dir, settings.total_words,
        settings.seed, settings.do_lower_case)
    for language in sorted(report["q"]):
        print("%s: %d words (p=%.3f) -> q=%.3f, wrote %d words in %d documents" % (
            language, report["sizes"][language], report["p"][language], report["q"][language],
            report["written"][language]["words"], report["written"][language]["documents"]))
    if settings.plot:
        path = os.path.join(settings.output_dir, "sampling.png")
        plots.plot_language_sampling(report, path)
        plots.png_to_tensorboard(path)
        print("wrote %s" % path)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_dir"])
