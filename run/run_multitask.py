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

Heads: classification (sentence pairs: MT-DNN's stochastic answer network by
default, options {"classifier": "dense"} for the dense layer; single
sentences: dense), regression, ranking (one score per candidate, softmax
over a query's candidates), span_qa, tagging. Every batch comes from one
task, drawn with probability proportional to n_t^(1/T) (n_t the task's
training examples, T = --sampling_temperature: 1 proportional, large T
near uniform). Outputs in --output_dir: checkpoints, TensorBoard logs with
per-task losses and metrics (`<task>/loss`, `<task>/accuracy`, ...),
task_sampling.txt (task, head, examples, probability) and eval_results.txt
(`<task>/eval_accuracy`, `<task>/eval_f1`, ... per task).

Multi-task distillation (Liu et al. 2019): `--teacher_dirs=A,B,C` (earlier runs'
--output_dir) gives every classification task the teachers' averaged probabilities as
soft targets; its loss is (1 - w) * CE(labels) + w * CE(soft), w = --soft_target_weight.

Then fine-tune a task further from the multi-task encoder:
`run_classifier.py` / `run_ner.py` / `run_squad.py` with
`--init_checkpoint=/tmp/mtdnn` (the encoder loads, the head starts fresh).

This script only parses flags: the run is `modeling.tasks.multitask_job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.tasks import multitask_job

main = common_flags.job_main(multitask_job.MultitaskJob, multitask_job.run)


if __name__ == "__main__":
    script.run(main)
