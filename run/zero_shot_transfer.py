"""Multilingual vs English-only BERT: fine-tune on English, evaluate on Chinese (zero-shot).

    python run/zero_shot_transfer.py --output_dir=/tmp/zero_shot

Pre-trains two demo BERTs (the bundled English and Chinese halves resampled
with --language_sampling_alpha, and the English half alone), fine-tunes each
on the English sentences of a toy task from the bundled parallel pairs
(morning or evening?) and prints the held-out accuracy on English and on the
Chinese translations, which no model was fine-tuned on. The work is
`modeling.experiments.zero_shot`; XNLI's zero-shot set-up is
`run_classifier.py --task_name=xnli --xnli_train_language=en --xnli_language=zh`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.experiments import zero_shot

main = common_flags.job_main(zero_shot.ZeroShotJob, zero_shot.run, show=zero_shot.format_table)


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
