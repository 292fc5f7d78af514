"""Fine-tunes BERT for sequence (pair) classification or regression.

google-research/bert's `run_classifier.py`: the same flags, defaults, data
processors, TFRecords (`train.tf_record`, `eval.tf_record`,
`predict.tf_record` in `--output_dir`) and outputs (`eval_results.txt`,
`test_results.tsv`), trained through this project's one trainer
(`tf.distribute`, checkpoints and resume, TensorBoard) instead of
TPUEstimator.

    python run/run_classifier.py --task_name=MRPC --do_train --do_eval \
      --data_dir=glue_data/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output

GPT-style fine-tuning (Radford et al. 2018) with the paper's input
transformations and its auxiliary language-model loss:

    python run/run_classifier.py --model_family=gpt --task_name=multiple_choice \
      --data_dir=story_cloze --bert_config_file=gpt_dir/config.json \
      --vocab_file=gpt_dir/vocab.json --merges_file=gpt_dir/merges.txt \
      --init_checkpoint=gpt_dir --lm_loss_weight=0.5 --do_train --do_eval \
      --max_seq_length=64 --output_dir=/tmp/cloze

(`gpt_dir` from `run_pretraining.py --recipe=gpt`, or an HF `openai-gpt`
folder). Single texts become `<s> text <e>`, pairs `<s> a $ b <e>`
(`--input_transformation=similarity`: both orders, their `<e>` states
added), multiple choice one `<s> context $ choice <e>` per candidate
(`modeling.gpt.classification`).

Multiple-choice tasks work for BERT-style encoders too (BERT, ALBERT,
XLNet): one ``[CLS] context [SEP] choice [SEP]`` per candidate, one shared
scoring layer on the pooled outputs, a softmax across the candidates
(`modeling.tasks.multiple_choice`):

    python run/run_classifier.py --task_name=arct --data_dir=arct_data \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=80 \
      --do_train --do_eval --output_dir=/tmp/arct

Tasks: `--task_name` = cola, mnli, mnli_mismatched, mrpc, xnli, sst2, qqp,
stsb (GLUE/XNLI file layouts), multiple_choice (JSON lines
`{"context": ..., "choices": [...], "label": int}`, `data.processors.choice`),
arct (ARCT's TSV files: claim + reason against two warrants), swag (SWAG's
CSV files: four endings), generic (any tsv/csv/jsonl, configured with
`--file_format`, `--text_a_column`, `--text_b_column`, `--label_column`,
`--has_header`, `--labels`, `--task_type`, ...) or ids (lines of integer ids,
no tokenizer; `--ids_*` flags); or your own `DataProcessor` subclass in your
own file: `--processor=path/to/my_task.py:MyProcessor`.

eval_results.txt holds Google's keys (eval_accuracy, eval_loss, global_step,
loss) plus the task's metrics: eval_f1 (MRPC, QQP), eval_mcc (CoLA),
eval_pearson and eval_spearman (STS-B, where there is no eval_accuracy).
test_results.tsv holds one tab-separated row of class probabilities per test
example (one predicted score for regression), in the order of the test file.

The trainer flags are those of every training script (`common_flags`):
`--distribution_strategy`, `--use_xla`, `--mixed_precision`, `--optimizer`,
`--gradient_accumulation_steps` (an update then sees `--train_batch_size`
times that many examples), `--keep_checkpoint_max`, `--log_steps`, ...

This script only parses flags: the run is `modeling.tasks.classifier_job.run`,
which a notebook can call with a `ClassifierJob` of the same fields.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.tasks import classifier_job

main = common_flags.job_main(classifier_job.ClassifierJob, classifier_job.run)


if __name__ == "__main__":
    script.run(main)
