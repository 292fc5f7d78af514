"""Pre-trains and fine-tunes BERT, ELMo, ULMFiT, SiATL and CoVe on one task; prints one table.

    python run/compare_models.py --output_dir=/tmp/compare
    python run/compare_models.py --output_dir=/tmp/compare --models=bert,elmo --pretrain_steps=300

The task, made from the bundled corpus: is a sentence in its original word
order or shuffled (a bag of words scores chance)? Each model is pre-trained
by its recipe's demo on the same documents, fine-tuned by its own fine-tuning
job for the same number of epochs, and scored on sentences of held-out
documents. The table (held-out accuracy, pre-training and fine-tuning time,
parameters) is printed and written to `--output_dir` as comparison.txt and
comparison.json; each model's directories stay there (TensorBoard works on
them). Running it again reuses finished pre-training. The work is
`modeling.tasks.comparison`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from modeling.tasks import comparison

FLAGS = flags.FLAGS
_DEFAULTS = comparison.CompareJob()

flags.DEFINE_string("output_dir", None, "Where every model's runs and the table are written.")
flags.DEFINE_list("models", list(comparison.MODELS),
                  "Models to compare, in table order: %s." % ",".join(comparison.MODELS))
flags.DEFINE_integer("pretrain_steps", None,
                     "Pre-training steps of every model (default: each recipe's demo budget).")
flags.DEFINE_float("num_train_epochs", _DEFAULTS.num_train_epochs,
                   "Fine-tuning epochs over the task's training sentences (all models).")
flags.DEFINE_integer("train_batch_size", _DEFAULTS.train_batch_size, "Fine-tuning batch size.")
flags.DEFINE_integer("max_seq_length", _DEFAULTS.max_seq_length,
                     "Tokens per sentence in fine-tuning (word pieces for BERT, words otherwise).")
flags.DEFINE_integer("seed", _DEFAULTS.seed, "Seed of the task's shuffles and of every run.")


def main(_):
    rows = comparison.compare(comparison.CompareJob(
        output_dir=FLAGS.output_dir, models=FLAGS.models, pretrain_steps=FLAGS.pretrain_steps,
        num_train_epochs=FLAGS.num_train_epochs, train_batch_size=FLAGS.train_batch_size,
        max_seq_length=FLAGS.max_seq_length, seed=FLAGS.seed))
    print(comparison.format_table(rows))


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
