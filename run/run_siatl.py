"""Fine-tunes a pre-trained LSTM language model for classification the SiATL way.

Chronopoulou et al. (2019): the LM (ULMFiT's AWD-LSTM from
`run_pretraining.py --recipe=ulmfit`), a task BiLSTM with self-attention
pooling on top, the LM's own loss on the task text kept as an auxiliary loss
(weight 0.2 decaying to 0.1), and sequential unfreezing: new layers, then
the pre-trained LM, then everything, each stage with a fresh optimizer.

    python run/run_pretraining.py --recipe=ulmfit --output_dir=/tmp/lm
    python run/run_siatl.py --task_name=generic --data_dir=my_task \
      --text_a_column=text --label_column=label \
      --vocab_file=data/sample/elmo/vocab.txt \
      --bert_config_file=/tmp/lm/ulmfit_config.json --init_checkpoint=/tmp/lm \
      --do_train --do_eval --output_dir=/tmp/siatl \
      [--stage_1_steps=N --stage_2_steps=N --stage_3_steps=N]

The data flags are run_classifier.py's (`--task_name`, `--processor`, the
generic-task flags). Outputs in `--output_dir`: stage_1/, stage_2/, stage_3/
(checkpoints and TensorBoard logs of each stage; a killed run resumes in the
stage it was in), eval_results.txt, test_results.tsv.

This script only parses flags: the run is `modeling.siatl.job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

import common_flags
from data import processors as processors_lib
from modeling.siatl import job as siatl_job
from modeling.siatl import model as siatl_model

flags.DEFINE_string("model_family", "ulmfit",
                    "Family of the pre-trained LM (its config file format and network).")
flags.DEFINE_string("lm_objective", "word_lm",
                    "The LM's pre-training objective (a registered name): the auxiliary loss.")
flags.DEFINE_string("data_dir", None, "The input data dir (train/dev/test files of the task).")
flags.DEFINE_string("bert_config_file", None,
                    "The LM's config file (ulmfit_config.json of the pre-training output).")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_string("vocab_file", None,
                    "The LM's word vocabulary (<S> </S> <UNK>, then one word per line).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None,
                    "The pre-trained LM: a run_pretraining.py output dir or ckpt-N prefix.")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input text.")
flags.DEFINE_integer("max_seq_length", 64, "Words per example with <S> and </S>; longer "
                     "texts are cut.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate of every stage.")
flags.DEFINE_float("num_train_epochs", 3.0,
                   "Epochs of stage 3 when --stage_3_steps is not given.")
flags.DEFINE_float("warmup_proportion", 0.1, "Warm-up share of each stage's updates.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_string("processor", None,
                    "A DataProcessor in your own file: path/to/my_task.py:MyProcessor.")
flags.DEFINE_enum("file_format", "tsv", ["tsv", "csv", "jsonl"], "generic: data file format.")
flags.DEFINE_string("text_a_column", "0", "generic: column of text_a (index or name).")
flags.DEFINE_string("text_b_column", None, "generic: column of text_b (index or name).")
flags.DEFINE_string("label_column", "1", "generic: column of the label (index or name).")
flags.DEFINE_string("guid_column", None, "generic: column of an example id (optional).")
flags.DEFINE_bool("has_header", True, "generic: tsv/csv files start with a header row.")
flags.DEFINE_list("labels", None, "generic: the label list (default: from the training file).")
flags.DEFINE_enum("task_type", "classification", list(processors_lib.TASK_TYPES),
                  "generic: classification, multi_label or regression.")
flags.DEFINE_string("label_separator", ",", "generic: separator of multi-label labels.")
flags.DEFINE_string("train_file", None, "generic: training file name in --data_dir.")
flags.DEFINE_string("dev_file", None, "generic: dev file name in --data_dir.")
flags.DEFINE_string("test_file", None, "generic: test file name in --data_dir.")
flags.DEFINE_list("eval_metrics", None,
                  "generic: metrics besides eval_accuracy/eval_loss (f1, mcc, ...).")
flags.DEFINE_string("xnli_language", "zh", "xnli: the language to train and evaluate on.")
flags.DEFINE_integer("stage_1_steps", None,
                     "Updates of stage 1 (new layers only); default one epoch; 0 skips it.")
flags.DEFINE_integer("stage_2_steps", None,
                     "Updates of stage 2 (the pre-trained LM only); default one epoch; 0 "
                     "skips it.")
flags.DEFINE_integer("stage_3_steps", None,
                     "Updates of stage 3 (everything); default --num_train_epochs epochs.")
flags.DEFINE_integer("task_hidden_size", 64, "Units of each direction of the task BiLSTM.")
flags.DEFINE_integer("attention_size", None,
                     "Units of the attention's tanh layer (default 2 x --task_hidden_size).")
flags.DEFINE_float("task_dropout", 0.2, "Dropout on the attention-pooled vector.")
flags.DEFINE_float("aux_lm_weight_start", 0.2, "Weight of the auxiliary LM loss at the start.")
flags.DEFINE_float("aux_lm_weight_end", 0.1, "Weight of the auxiliary LM loss at the end.")
flags.DEFINE_enum("aux_lm_weight_decay", "exponential", list(siatl_model.GAMMA_DECAYS),
                  "How the auxiliary weight goes from start to end over all stages' updates.")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")
common_flags.define_trainer_flags()


def main(_):
    siatl_job.run(common_flags.job_from_flags(siatl_job.SiatlJob))


if __name__ == "__main__":
    script.run(main)
