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

from absl import flags

import common_flags
from modeling.distillation import job as distillation_job

flags.DEFINE_enum("style", "mtdnn", list(distillation_job.STYLES),
                  "mtdnn (ensemble soft targets), distilbert (masked LM, every-other-layer "
                  "student) or tinybert (layer-wise distillation).")
flags.DEFINE_string("model_family", "bert", "The encoders' model family.")
flags.DEFINE_list("teacher_config_file", None,
                  "The teachers' bert_config.json: one for all, or one per checkpoint.")
flags.DEFINE_list("teacher_checkpoints", None,
                  "Teacher checkpoints (comma-separated): run_classifier.py output dirs or "
                  "ckpt-N, Google TF1 checkpoints; distilbert: a pre-trained BERT with its "
                  "MLM head. Empty with --alpha=0: the student alone on the labels.")
flags.DEFINE_string("student_config_file", None,
                    "The student's bert_config.json (distilbert: default the teacher's width "
                    "and half its layers).")
flags.DEFINE_string("student_init_checkpoint", None,
                    "Start the student from this checkpoint (a pre-trained small BERT, or an "
                    "earlier run's student/ export).")
# Classification data (mtdnn, tinybert), as run_classifier.py.
flags.DEFINE_string("task_name", None, "Classification task (mrpc, cola, generic, ...).")
flags.DEFINE_string("processor", None, "Your DataProcessor: path/to/my_task.py:MyProcessor.")
flags.DEFINE_string("data_dir", None, "The task's data directory.")
flags.DEFINE_enum("file_format", "tsv", ["tsv", "csv", "jsonl"], "generic: data file format.")
flags.DEFINE_string("text_a_column", "0", "generic: column of text_a.")
flags.DEFINE_string("text_b_column", None, "generic: column of text_b.")
flags.DEFINE_string("label_column", "1", "generic: column of the label.")
flags.DEFINE_string("guid_column", None, "generic: column of an example id.")
flags.DEFINE_bool("has_header", True, "generic: files start with a header row.")
flags.DEFINE_list("labels", None, "generic: the label list.")
flags.DEFINE_string("train_file", None, "generic: training file name in --data_dir.")
flags.DEFINE_string("dev_file", None, "generic: dev file name in --data_dir.")
flags.DEFINE_string("vocab_file", None, "The vocabulary shared by teachers and student.")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input text.")
flags.DEFINE_string("transfer_file", None,
                    "Unlabeled examples the teachers label (one per line: text_a, or "
                    "text_a<TAB>text_b); they count in the soft loss only.")
# Masked-LM data (distilbert).
flags.DEFINE_string("input_file", None, "distilbert: training TFRecords (comma-separated globs).")
flags.DEFINE_string("eval_input_file", None, "distilbert: dev TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "distilbert: masked positions per sequence.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_bool("do_train", False, "Whether to train the student.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate and compare teacher and student.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval (and latency).")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate.")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over labelled + transfer examples.")
flags.DEFINE_integer("num_train_steps", None, "Training steps (overrides --num_train_epochs).")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training with linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_float("temperature", 1.0, "Softmax temperature T of the soft targets.")
flags.DEFINE_float("alpha", 0.5,
                   "mtdnn: loss = alpha T^2 soft CE + (1 - alpha) hard CE.")
flags.DEFINE_float("soft_loss_weight", 5.0, "distilbert: weight of the soft MLM loss.")
flags.DEFINE_float("mlm_loss_weight", 2.0, "distilbert: weight of the hard MLM loss.")
flags.DEFINE_float("cos_loss_weight", 1.0, "distilbert: weight of the hidden-state cosine loss.")
flags.DEFINE_string("layer_map", None,
                    "tinybert: student:teacher layer pairs, 0-based (\"0:2,1:5\"); default "
                    "uniform, student s -> teacher (s+1)N/M-1.")
flags.DEFINE_enum("stage", "both", ["intermediate", "prediction", "both"],
                  "tinybert: layer-wise losses, the prediction-layer soft loss, or both.")
flags.DEFINE_integer("latency_runs", 5, "Timed forward passes per model (after warm-up).")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")
common_flags.define_trainer_flags()


def main(_):
    distillation_job.run(common_flags.job_from_flags(distillation_job.DistillationJob))


if __name__ == "__main__":
    script.run(main)
