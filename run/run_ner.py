"""Fine-tunes BERT for token tagging (NER) on CoNLL-style files.

    python run/run_ner.py --do_train --do_eval --do_predict \
      --data_dir=conll2003 --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=False \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/ner_output [--use_crf] [--tagging_scheme=bioes]

Files: `--data_dir` with train.txt, dev.txt, test.txt, or `--train_file`,
`--dev_file`, `--test_file`. One token per line, the token first and its tag
LAST (so CoNLL-2003's four columns work), a blank line between sentences,
`-DOCSTART-` lines skipped. Chinese character-level files (one character
and its tag per line) work with a Chinese vocabulary (e.g.
chinese_L-12_H-768_A-12). The tag goes on each word's first word piece.

Outputs in `--output_dir`: eval_results.txt (eval_precision, eval_recall,
eval_f1: entity level, micro-averaged, as seqeval; eval_<TYPE>_f1 ... per
entity type; eval_accuracy over tokens; eval_loss), eval_report.txt,
test_predictions.txt (`token gold predicted` per line, conlleval's input),
test_results.txt, label_list.txt, checkpoints.

This script only parses flags: the run is `modeling.tasks.ner_job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

import common_flags
from modeling.tasks import ner_job

flags.DEFINE_string("model_family", "bert", "The encoder's model family (bert, albert, ...).")
flags.DEFINE_string("data_dir", None, "Directory with train.txt, dev.txt and test.txt.")
flags.DEFINE_string("train_file", None, "Training file (a path, or a name in --data_dir).")
flags.DEFINE_string("dev_file", None, "Dev file (a path, or a name in --data_dir).")
flags.DEFINE_string("test_file", None, "Test file (a path, or a name in --data_dir).")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: a Google bert_model.ckpt prefix, a checkpoint of "
                    "this project, or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input (True for uncased models).")
flags.DEFINE_integer("max_seq_length", 128,
                     "Maximum word pieces per sentence with [CLS] and [SEP]; words beyond "
                     "are predicted O.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training with linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_enum("tagging_scheme", "bio", ["bio", "bioes"],
                  "Tag scheme of the files: bio (O, B-X, I-X) or bioes (also E-X, S-X).")
flags.DEFINE_bool("use_crf", False,
                  "Score and decode with a linear-chain CRF over the word tags.")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")
common_flags.define_trainer_flags()


def main(_):
    ner_job.run(common_flags.job_from_flags(ner_job.NerJob))


if __name__ == "__main__":
    script.run(main)
