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

import common_flags
from modeling.tasks import squad_job

main = common_flags.job_main(squad_job.SquadJob, squad_job.run)


if __name__ == "__main__":
    script.run(main)
