"""Removes attention heads from a BERT or ALBERT model: a smaller checkpoint every script loads.

Explicit heads (0-based LAYER:HEAD):

    python run/prune_heads.py --init_checkpoint=$BERT_DIR --bert_config_file=$BERT_DIR/bert_config.json \
      --vocab_file=$BERT_DIR/vocab.txt --heads_to_prune=0:1,3:0,3:7 --output_dir=/tmp/pruned

By importance (Michel et al. 2019) on labelled data, usually a fine-tuned
classifier (run_classifier.py's output_dir), with run_classifier's data flags:

    python run/prune_heads.py --init_checkpoint=/tmp/mrpc_output \
      --bert_config_file=$BERT_DIR/bert_config.json --vocab_file=$BERT_DIR/vocab.txt \
      --task_name=mrpc --data_dir=glue_data/MRPC --prune_fraction=0.5 \
      --prune_step_fraction=0.1 --output_dir=/tmp/pruned

The heads are masked the least important `--prune_step_fraction` at a time
and re-scored, accuracy on the dev set recorded at every step
(`pruning_curve.png`), then removed for real. `--output_dir` gets
`bert_model.ckpt` (Google TF1 names; a classifier's `output_weights` /
`output_bias` too), `bert_config.json` with `num_attention_heads_per_layer`,
and `pruning.json` (heads removed, importance, accuracy before/after,
parameters and measured latency before/after). Use it as
`--init_checkpoint=/tmp/pruned --bert_config_file=/tmp/pruned/bert_config.json`.

ALBERT (`--model_family=albert`): all layers share one attention layer, so
a head is removed at every depth. `--heads_to_prune` names heads of the
shared layer, `HEAD` or `*:HEAD` (e.g. `--heads_to_prune=1,*:5`); `LAYER:HEAD`
is accepted only if the head is listed for every layer (a partial entry is
refused: the layer is shared). `--prune_fraction` scores a shared head by the
sum over depths of its importance and removes whole shared heads. The output
is `model.ckpt` and `albert_config.json` with `num_attention_heads_per_group`:

    python run/prune_heads.py --model_family=albert --init_checkpoint=$ALBERT_DIR \
      --bert_config_file=$ALBERT_DIR/albert_config.json --vocab_file=$ALBERT_DIR/vocab.txt \
      --heads_to_prune=0,7 --output_dir=/tmp/albert_pruned

then `--model_family=albert --init_checkpoint=/tmp/albert_pruned
--bert_config_file=/tmp/albert_pruned/albert_config.json` in every script.

The run is `modeling.analysis.heads.run`; this script only parses flags.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import dataclasses

from absl import flags

import common_flags
from data import processors as processors_lib
from modeling import registry
from modeling.analysis import heads
from modeling.tasks import classifier_job

flags.DEFINE_string("model_family", registry.DEFAULT_FAMILY,
                    "The encoder's model family (bert or albert): how --bert_config_file and "
                    "--init_checkpoint are read and what a head is (ALBERT: a head of the "
                    "shared layer).")
flags.DEFINE_string("init_checkpoint", None,
                    "The model: a Google bert_model.ckpt prefix or folder, a checkpoint of this "
                    "project (e.g. run_classifier's output_dir), or HF safetensors.")
flags.DEFINE_string("bert_config_file", None,
                    "The model's bert_config.json (ALBERT: albert_config.json).")
flags.DEFINE_string("vocab_file", None, "The model's vocab.txt (needed with labelled data).")
flags.DEFINE_string("output_dir", None,
                    "Where bert_model.ckpt, bert_config.json and pruning.json are written.")
flags.DEFINE_string("heads_to_prune", None,
                    "Heads to remove: LAYER:HEAD,... (0-based), e.g. 0:1,3:0. ALBERT: "
                    "heads of the shared layer, HEAD or *:HEAD (e.g. 1,*:5), or LAYER:HEAD "
                    "listed for every layer.")
flags.DEFINE_float("prune_fraction", None,
                   "Instead of --heads_to_prune: remove this fraction of all heads, the least "
                   "important first (needs labelled data).")
flags.DEFINE_float("prune_step_fraction", 0.1,
                   "Fraction of the heads masked per step of iterative pruning.")
flags.DEFINE_float("curve_fraction", None,
                   "Continue the accuracy-vs-heads curve (masking only) to this fraction; "
                   "default --prune_fraction.")
flags.DEFINE_bool("normalize_layers", True,
                  "Divide each layer's importance scores by their L2 norm (Michel et al.).")
flags.DEFINE_enum("importance_split", "train", ["train", "dev"],
                  "The examples the importance scores are computed on.")
flags.DEFINE_integer("max_examples", 512, "At most this many examples per split.")
flags.DEFINE_integer("eval_batch_size", 32, "Batch size for scoring and evaluation.")
flags.DEFINE_integer("latency_batch_size", 8, "Batch size of the latency measurement.")
flags.DEFINE_integer("latency_repeats", 10, "Timed forward passes (the median is reported).")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input (True for uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the examples.")
# run_classifier's data flags.
flags.DEFINE_string("task_name", None, "The task (as run_classifier.py's --task_name).")
flags.DEFINE_string("data_dir", None, "The task's data directory.")
flags.DEFINE_string("processor", None, "A DataProcessor: path/to/my_task.py:MyProcessor.")
flags.DEFINE_string("text_a_column", "0", "generic: column of text_a.")
flags.DEFINE_string("text_b_column", None, "generic: column of text_b.")
flags.DEFINE_string("label_column", "1", "generic: column of the label.")
flags.DEFINE_bool("has_header", True, "generic: files start with a header row.")
flags.DEFINE_list("labels", None, "generic: the label list.")
flags.DEFINE_string("train_file", None, "generic: training file name in --data_dir.")
flags.DEFINE_string("dev_file", None, "generic: dev file name in --data_dir.")
flags.DEFINE_string("xnli_language", "zh", "xnli: the language.")
# The ClassifierJob fields whose flags are run_classifier's as they are (same default and help);
# the others above are worded for pruning.
_CLASSIFIER_FLAGS = ("file_format",)
common_flags.define_job_flags(classifier_job.ClassifierJob, exclude=[
    field.name for field in dataclasses.fields(classifier_job.ClassifierJob)
    if field.name not in _CLASSIFIER_FLAGS])


def main(_):
    job = common_flags.job_from_flags(classifier_job.ClassifierJob,
                                      task_type=processors_lib.CLASSIFICATION)
    report = heads.run(
        job, heads_to_prune=flags.FLAGS.heads_to_prune,
        prune_fraction=flags.FLAGS.prune_fraction,
        prune_step_fraction=flags.FLAGS.prune_step_fraction,
        curve_fraction=flags.FLAGS.curve_fraction,
        normalize_layers=flags.FLAGS.normalize_layers,
        importance_split=flags.FLAGS.importance_split,
        max_examples=flags.FLAGS.max_examples, batch_size=flags.FLAGS.eval_batch_size,
        latency_batch_size=flags.FLAGS.latency_batch_size,
        latency_repeats=flags.FLAGS.latency_repeats)
    print("Heads per layer: %s -> %s" % (report["heads_per_layer_before"],
                                         report["heads_per_layer_after"]))
    if "shared_heads_after" in report:
        print("Shared heads:    %s -> %s" % (report["shared_heads_before"],
                                             report["shared_heads_after"]))
    if "accuracy_after" in report:
        print("Dev accuracy:    %.4f -> %.4f" % (report["accuracy_before"],
                                                 report["accuracy_after"]))
    latency = report["latency"]
    print("Parameters:      %d -> %d" % (report["parameters_before"],
                                         report["parameters_after"]))
    print("Latency:         %.4fs -> %.4fs (x%.2f)" % (
        latency["before_seconds"], latency["after_seconds"], latency["speedup"] or 0.0))
    print("Wrote %s" % flags.FLAGS.output_dir)


if __name__ == "__main__":
    script.run(main, required_flags=["init_checkpoint", "bert_config_file", "output_dir"])
