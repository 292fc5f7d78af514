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
(`modeling.tasks.gpt_classification`).

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

from absl import flags

import common_flags
from data import processors as processors_lib
from modeling.tasks import classifier_job

# Google's flags.
flags.DEFINE_string("model_family", "bert",
                    "The encoder's model family (bert, albert, gpt, ...): how --bert_config_file "
                    "and --init_checkpoint are read and how inputs are framed.")
flags.DEFINE_enum("features", None, list(classifier_job.FEATURE_FAMILIES),
                  "Classify over a frozen pre-trained network's features instead of "
                  "fine-tuning an encoder: elmo (a biLM's scalar-mixed layers) or cove (a "
                  "translation encoder's states with the word vectors); the same as "
                  "--model_family=elmo|cove.")
flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) "
                    "for the task.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model): a Google "
                    "bert_model.ckpt prefix, a checkpoint of this project, or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models "
                  "and False for cased models.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter "
                     "than this will be padded.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate warmup for. "
                   "E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
# Your own processor.
flags.DEFINE_string("processor", None,
                    "A DataProcessor in your own file: path/to/my_task.py:MyProcessor "
                    "(or package.module:MyProcessor). Overrides --task_name.")
# --task_name=generic.
flags.DEFINE_enum("file_format", "tsv", ["tsv", "csv", "jsonl"], "generic: data file format.")
flags.DEFINE_string("text_a_column", "0", "generic: column of text_a (index or header name/key).")
flags.DEFINE_string("text_b_column", None,
                    "generic: column of text_b (index or name); unset for single sentences.")
flags.DEFINE_string("label_column", "1", "generic: column of the label (index or name).")
flags.DEFINE_string("guid_column", None, "generic: column of an example id (optional).")
flags.DEFINE_bool("has_header", True, "generic: tsv/csv files start with a header row.")
flags.DEFINE_list("labels", None,
                  "generic, ids: the label list (comma-separated); default: inferred from "
                  "the training file.")
flags.DEFINE_enum("task_type", "classification", list(processors_lib.TASK_TYPES),
                  "generic: classification (one label), multi_label (several labels per "
                  "example, separated by --label_separator) or regression (a float label).")
flags.DEFINE_string("label_separator", ",", "generic: separator of the labels of a multi-label field.")
flags.DEFINE_string("train_file", None, "generic, ids: training file name in --data_dir.")
flags.DEFINE_string("dev_file", None, "generic, ids: dev file name in --data_dir.")
flags.DEFINE_string("test_file", None, "generic, ids: test file name in --data_dir.")
flags.DEFINE_list("eval_metrics", None,
                  "generic, ids: metrics besides eval_accuracy/eval_loss, from accuracy, f1, "
                  "mcc, pearson, spearman, micro_f1, macro_f1.")
# --task_name=ids.
flags.DEFINE_integer("ids_num_labels", None, "ids: labels are the integers 0..N-1.")
flags.DEFINE_bool("ids_label_from_last_id", False,
                  "ids: each line is only ids and the last one is the label (next-id prediction).")
flags.DEFINE_integer("ids_cls_id", None, "ids: token id put first (like [CLS]); none if unset.")
flags.DEFINE_integer("ids_sep_id", None, "ids: token id ending each sequence (like [SEP]).")
flags.DEFINE_integer("ids_offset", 0, "ids: added to every input id.")
flags.DEFINE_enum("ids_keep", "first", ["first", "last"],
                  "ids: which ids a too-long sequence keeps.")
# --task_name=xnli.
flags.DEFINE_string("xnli_language", "zh", "xnli: the language to train and evaluate on.")
flags.DEFINE_string("xnli_train_language", None,
                    "xnli: train on this language's MultiNLI instead (en: zero-shot transfer to "
                    "--xnli_language, as multilingual BERT is evaluated).")
# Families with their own input format (GPT).
flags.DEFINE_string("merges_file", None,
                    "gpt: the byte-level BPE merges (merges.txt); --vocab_file is then "
                    "vocab.json.")
flags.DEFINE_enum("input_transformation", "auto",
                  ["auto", "classification", "entailment", "similarity", "multiple_choice"],
                  "gpt: how an example becomes sequences: auto (<s> text <e>, <s> a $ b <e>, "
                  "one sequence per candidate for multiple_choice tasks) or similarity (both "
                  "orders of a pair, their <e> states added).")
flags.DEFINE_float("lm_loss_weight", None,
                   "gpt: weight of the auxiliary language-model loss added to the task loss "
                   "(default 0.5, the paper's; 0 disables it).")
# tf.distribute instead of TPUEstimator, XLA, precision, optimizer, checkpoints
# and logging: the flags every training script shares.
common_flags.define_trainer_flags()
common_flags.define_data_service_flags()
flags.DEFINE_string("export_dir", None,
                    "Write a SavedModel for serving here: raw strings in (text_a, or "
                    "text_a and text_b with the serving_pair signature), probabilities out, "
                    "tokenizer inside the graph.")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")


def main(_):
    classifier_job.run(common_flags.job_from_flags(classifier_job.ClassifierJob))


if __name__ == "__main__":
    script.run(main)
