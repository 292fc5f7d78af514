"""Fine-tunes BERT for extractive question answering (SQuAD 1.1 / 2.0, CMRC).

google-research/bert's `run_squad.py`: the same flags and defaults, SQuAD JSON
in, `predictions.json`, `nbest_predictions.json` (and `null_odds.json` with
`--version_2_with_negative`) out, trained through this project's one trainer
(`tf.distribute`, checkpoints and resume, TensorBoard) instead of
TPUEstimator:

    python run/run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --do_train --train_file=$SQUAD_DIR/train-v1.1.json \
      --do_predict --predict_file=$SQUAD_DIR/dev-v1.1.json \
      --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
      --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base

When the predict file has answers (a dev set), exact match and F1 with the
official answer normalisation are printed and written to
`eval_results.json` (HasAns_/NoAns_ splits for SQuAD 2.0 dev sets).
Chinese (CMRC 2018 JSON, character offsets) works as it is: every CJK
character is a document token, and F1 counts characters.

This script only parses flags: the run is `modeling.tasks.squad_job.run`,
which a notebook can call with a `SquadJob` of the same fields.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

import common_flags
from modeling.tasks import squad_job

flags.DEFINE_string("model_family", "bert",
                    "The encoder's model family (bert, albert, ...): how --bert_config_file "
                    "and --init_checkpoint are read.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("train_file", None,
                    "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model): a Google "
                    "bert_model.ckpt prefix, a checkpoint of this project, or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models "
                  "and False for cased models.")
flags.DEFINE_integer("max_seq_length", 384,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter "
                     "than this will be padded.")
flags.DEFINE_integer("doc_stride", 128,
                     "When splitting up a long document into chunks, how much stride to "
                     "take between chunks.")
flags.DEFINE_integer("max_query_length", 64,
                     "The maximum number of tokens for the question. Questions longer than "
                     "this will be truncated to this length.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate warmup for. "
                   "E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("n_best_size", 20,
                     "The total number of n-best predictions to generate in the "
                     "nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30,
                     "The maximum length of an answer that can be generated. This is needed "
                     "because the start and end predictions are not conditioned on one another.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "If null_score - best_non_null is greater than the threshold predict null.")
common_flags.define_trainer_flags()
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")


def main(_):
    squad_job.run(common_flags.job_from_flags(squad_job.SquadJob))


if __name__ == "__main__":
    script.run(main)
