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
from modeling import recipes
from modeling import registry
from modeling.recipes import pretraining

FLAGS = flags.FLAGS

# Google's flags.
flags.DEFINE_string("bert_config_file", None,
                    "The config json file of the model (the recipe's family: "
                    "bert_config.json, albert_config.json, HF config.json).")
flags.DEFINE_string("input_file", None,
                    "Input files (a glob or comma separated): TFRecords, or raw text for "
                    "recipes that read it. Not given: the demo job on the bundled corpus.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
# This project's.
flags.DEFINE_string("eval_input_file", None,
                    "Held-out input files for --do_eval (default: --input_file, as Google's "
                    "script evaluates on its training files).")
common_flags.define_trainer_flags()
common_flags.define_data_service_flags()
flags.DEFINE_integer("seed", None, "Random seed for weights and input shuffling.")
flags.DEFINE_string("vocab_file", None,
                    "Vocabulary of recipes that tokenize raw text (and of the demo job).")
flags.DEFINE_string("merges_file", None, "BPE merges of byte-level BPE recipes (GPT-2).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case raw text (recipes that tokenize it).")
flags.DEFINE_string("recipe", "bert",
                    "Pre-training recipe: a name (%s) or a recipe JSON file. With "
                    "--input_file, make the inputs the recipe's pipeline reads (see README)."
                    % ", ".join(recipes.list_recipes()))
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
