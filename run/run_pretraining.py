"""Pre-trains a model of the BERT family on TFRecords or raw text.

Google's flags and outputs (checkpoints and `eval_results.txt` in
`--output_dir`), trained through `tf.distribute` instead of TPUEstimator.
`--recipe` picks the family, objectives and input pipeline
(`modeling/recipes/presets/*.json`, or your own JSON file whose parts may be
registered by `--recipe_module=your_parts.py`).

With no --input_file it runs the demo job: it splits the bundled sample
corpus (`data/sample/`) into training and held-out documents, makes the
recipe's inputs from each, pre-trains a tiny model for a few minutes on the
CPU, evaluates it on the held-out documents and compares every objective
with its context-free baseline:

    python run/run_pretraining.py
    tensorboard --logdir output/pretraining_sample

On your own data (Google's usage):

    python run/run_pretraining.py --input_file=/data/pretrain-*.tfrecord \
      --output_dir=/models/my_bert --bert_config_file=bert_config.json \
      --do_train --do_eval --train_batch_size=256 --num_train_steps=100000 \
      --num_warmup_steps=10000 --learning_rate=1e-4 \
      --distribution_strategy=mirrored
"""

import script  # first: quiet TensorFlow start  # pylint: disable=unused-import,g-bad-import-order

from absl import flags

import common_flags
from modeling import registry
from modeling.recipes import pretraining

FLAGS = flags.FLAGS

common_flags.define_job_flags(pretraining.PretrainingJob)
# The script's own: loaded before the recipe is read.
flags.DEFINE_string("recipe_module", None,
                    "A Python file that registers your own families, objectives or "
                    "pipelines for the parts your --recipe file names.")


def main(_):
    if FLAGS.recipe_module:
        registry.load_user_module(FLAGS.recipe_module)
    if FLAGS.input_file:
        job = common_flags.job_from_flags(pretraining.PretrainingJob)
    elif FLAGS.eval_input_file:
        raise ValueError("--eval_input_file needs --input_file (without it the demo job "
                         "holds out documents of the bundled corpus itself)")
    else:
        # The demo job; the flags given on the command line override its defaults.
        job = pretraining.PretrainingJob.for_demo(**common_flags.present_flag_values(
            pretraining.PretrainingJob))
    pretraining.run(job)


if __name__ == "__main__":
    script.run(main)
