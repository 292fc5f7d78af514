"""Distils a BERT teacher (or an ensemble) into a smaller student.

MT-DNN style (classification; an ensemble of run_classifier.py outputs, their
tempered probabilities averaged; soft + hard cross-entropy; unlabeled
transfer examples the teachers label):

    python run/run_distillation.py --style=mtdnn --task_name=generic \
      --data_dir=data --train_file=train.tsv --dev_file=dev.tsv \
      --vocab_file=vocab.txt --teacher_config_file=teacher/bert_config.json \
      --teacher_checkpoints=/tmp/teacher_a,/tmp/teacher_b \
      --student_config_file=student_config.json --transfer_file=unlabeled.txt \
      --temperature=2 --alpha=0.7 --do_train --do_eval --output_dir=/tmp/student

DistilBERT style (masked LM on create_pretraining_data.py TFRecords; the
student has the teacher's width and half its layers, starts from layers
0, 2, 4, ...; --soft_loss_weight/--mlm_loss_weight/--cos_loss_weight 5/2/1):

    python run/run_distillation.py --style=distilbert \
      --teacher_config_file=$BERT_BASE_DIR/bert_config.json \
      --teacher_checkpoints=$BERT_BASE_DIR/bert_model.ckpt \
      --input_file=train.tfrecord --eval_input_file=dev.tfrecord \
      --max_seq_length=128 --max_predictions_per_seq=20 --temperature=2 \
      --do_train --do_eval --num_train_steps=10000 --output_dir=/tmp/distilbert

TinyBERT style (classification; layer-wise embedding, attention and hidden
MSE through a learned projection, --layer_map=student:teacher pairs, 0-based,
default uniform; then --stage=prediction from the first run's student/):

    python run/run_distillation.py --style=tinybert --stage=intermediate ... \
      --output_dir=/tmp/tiny_1
    python run/run_distillation.py --style=tinybert --stage=prediction ... \
      --student_init_checkpoint=/tmp/tiny_1/student --output_dir=/tmp/tiny_2

The run prints teacher vs student (parameters, ms per eval batch, dev
accuracy) and writes distillation_results.json, eval_results.txt and the
student as a Google TF1 checkpoint (student/bert_model.ckpt,
student/bert_config.json). This script only parses flags: the run is
`modeling.distillation.job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.distillation import job as distillation_job

main = common_flags.job_main(distillation_job.DistillationJob, distillation_job.run)


if __name__ == "__main__":
    script.run(main)
