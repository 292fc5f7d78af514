"""MT-DNN: trains one shared encoder on several tasks at once, one head per task.

    python run/run_multitask.py --task_list_file=tasks.json --do_train --do_eval \
      --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_steps=20000 --sampling_temperature=1.0 --output_dir=/tmp/mtdnn

`tasks.json` is a JSON list, one object per task (`data/multitask.py`):

    [{"name": "mrpc", "processor": "mrpc", "data_dir": "glue/MRPC",
      "head": "classification"},
     {"name": "stsb", "processor": "sts-b", "data_dir": "glue/STS-B",
      "head": "regression", "weight": 0.5},
     {"name": "qnli", "processor": "multiple_choice", "data_dir": "qnli_pairs",
      "head": "ranking"},
     {"name": "conll", "processor": "ner", "data_dir": "conll2003", "head": "tagging"},
     {"name": "squad", "processor": "squad", "data_dir": "squad11", "head": "span_qa"}]

Heads: classification, regression, ranking (one score per candidate, softmax
over a query's candidates), span_qa, tagging. Every batch comes from one
task, drawn with probability proportional to n_t^(1/T) (n_t the task's
training examples, T = --sampling_temperature: 1 proportional, large T
near uniform). Outputs in --output_dir: checkpoints, TensorBoard logs with
per-task losses and metrics (`<task>/loss`, `<task>/accuracy`, ...),
task_sampling.txt (task, head, examples, probability) and eval_results.txt
(`<task>/eval_accuracy`, `<task>/eval_f1`, ... per task).

Then fine-tune a task further from the multi-task encoder:
`run_classifier.py` / `run_ner.py` / `run_squad.py` with
`--init_checkpoint=/tmp/mtdnn` (the encoder loads, the head starts fresh).

This script only parses flags: the run is `modeling.tasks.multitask_job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

import common_flags
from modeling.tasks import multitask_job

flags.DEFINE_string("task_list_file", None,
                    "JSON list of tasks: name, processor, data_dir, head, weight, options.")
flags.DEFINE_string("model_family", "bert", "The encoder's model family (bert, albert, ...).")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, records and results are written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: a Google bert_model.ckpt prefix, a checkpoint of "
                    "this project, or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input (True for uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum word pieces per sequence.")
flags.DEFINE_bool("do_train", False, "Whether to run multi-task training.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate every task on its dev set.")
flags.DEFINE_integer("train_batch_size", 32,
                     "Sequences per training batch (ranking: queries of C candidates "
                     "make up about as many sequences).")
flags.DEFINE_integer("eval_batch_size", 8, "Sequences per eval batch.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", None,
                     "Updates to train for; default: --num_train_epochs passes over the "
                     "summed task sizes.")
flags.DEFINE_float("num_train_epochs", 3.0, "Passes over all tasks' data (without "
                   "--num_train_steps).")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training with linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_float("sampling_temperature", 1.0,
                   "Task t is drawn with probability ~ n_t^(1/T): 1 proportional to its "
                   "size, larger values closer to uniform.")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and task sampling.")
common_flags.define_trainer_flags()


def main(_):
    multitask_job.run(common_flags.job_from_flags(multitask_job.MultitaskJob))


if __name__ == "__main__":
    script.run(main)
