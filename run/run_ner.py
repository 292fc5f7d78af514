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

import common_flags
from modeling.tasks import ner_job

main = common_flags.job_main(ner_job.NerJob, ner_job.run)


if __name__ == "__main__":
    script.run(main)
