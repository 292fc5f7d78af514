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

The run is `modeling.analysis.heads.run`; this script only parses flags (the
fields of `modeling.analysis.heads.PruningSettings`).
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.analysis import heads

common_flags.define_job_flags(heads.PruningSettings)


def main(_):
    settings = common_flags.job_from_flags(heads.PruningSettings)
    common_flags.require(settings, "bert_config_file")
    report = heads.run(settings.classifier_job(), **settings.run_options())
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
    print("Wrote %s" % settings.output_dir)


if __name__ == "__main__":
    script.run(main, required_flags=["init_checkpoint", "output_dir"])
