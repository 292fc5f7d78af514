"""Multilingual vs English-only BERT: fine-tune on English, evaluate on Chinese (zero-shot).

    python run/zero_shot_transfer.py --output_dir=/tmp/zero_shot

Pre-trains two demo BERTs (the bundled English and Chinese halves resampled
with --language_sampling_alpha, and the English half alone), fine-tunes each
on the English sentences of a toy task from the bundled parallel pairs
(morning or evening?) and prints the held-out accuracy on English and on the
Chinese translations, which no model was fine-tuned on. The work is
`modeling.tasks.zero_shot`; XNLI's zero-shot set-up is
`run_classifier.py --task_name=xnli --xnli_train_language=en --xnli_language=zh`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from modeling.tasks import zero_shot

FLAGS = flags.FLAGS
_DEFAULTS = zero_shot.ZeroShotJob()
flags.DEFINE_string("output_dir", None, "Where both models' runs and zero_shot.json go.")
flags.DEFINE_float("language_sampling_alpha", _DEFAULTS.language_sampling_alpha,
                   "mBERT's smoothing exponent for the multilingual model's corpus.")
flags.DEFINE_integer("pretrain_steps", None, "Pre-training steps (default: the demo's).")
flags.DEFINE_float("num_train_epochs", _DEFAULTS.num_train_epochs, "Fine-tuning epochs.")
flags.DEFINE_float("learning_rate", _DEFAULTS.learning_rate, "Fine-tuning learning rate.")
flags.DEFINE_integer("seed", _DEFAULTS.seed, "Seed of every run.")


def main(_):
    rows = zero_shot.run(zero_shot.ZeroShotJob(
        output_dir=FLAGS.output_dir, language_sampling_alpha=FLAGS.language_sampling_alpha,
        pretrain_steps=FLAGS.pretrain_steps, num_train_epochs=FLAGS.num_train_epochs,
        learning_rate=FLAGS.learning_rate, seed=FLAGS.seed))
    print(zero_shot.format_table(rows))


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
