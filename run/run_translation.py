"""Fine-tunes a pre-trained MASS model as a translator and reports BLEU on held-out pairs.

    python run/run_pretraining.py --recipe=mass --output_dir=/tmp/mass
    python run/run_translation.py --init_checkpoint=/tmp/mass --output_dir=/tmp/mass_mt

With the defaults it fine-tunes on the bundled English-Chinese pairs
(`data/sample/parallel_en_zh.tsv`, every tenth pair held out), translates
the held-out English sentences with beam search and prints their corpus
BLEU (sacrebleu-style, character level for Chinese) beside the baseline of
copying the source. `--output_dir` gets the checkpoints, TensorBoard logs,
`translation_results.json` and `translations.tsv`. The work is
`modeling.mass.translation`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.mass import translation

main = common_flags.job_main(translation.TranslationJob, translation.run)


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
