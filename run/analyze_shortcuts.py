"""Shortcut probing: ARCT-style cue statistics, ablations and adversarial data; HANS.

    # productivity and coverage of every unigram/bigram cue (Niven & Kao 2019)
    python run/analyze_shortcuts.py --mode=arct_cues --task_name=arct --data_dir=arct_data \
      --split=train --output_dir=/tmp/arct_cues            # cues.json, cues.tsv
    # any other processor: --task_name=swag|multiple_choice|mnli|generic (+ --file_format,
    # --text_a_column, --text_b_column, --label_column ...) or --processor=my.py:MyProcessor

    # "warrant only" / "no claim" / "no reason" baselines, one ARCT data dir each
    python run/analyze_shortcuts.py --mode=arct_ablations --data_dir=arct_data \
      --output_dir=/tmp/arct_ablations                     # warrant_only/, no_claim/, no_reason/
    # negated claims with swapped labels (rows the rules cannot negate are counted, left out)
    python run/analyze_shortcuts.py --mode=arct_adversarial --data_dir=arct_data \
      --output_dir=/tmp/arct_adversarial [--keep_original]

    # HANS-style pairs, then a model's predictions scored per heuristic x label
    python run/analyze_shortcuts.py --mode=hans_generate --per_template=100 --seed=0 \
      --output_dir=/tmp/hans                               # hans.tsv, test_matched.tsv
    python run/run_classifier.py --task_name=mnli --do_predict --data_dir=/tmp/hans ... \
      --output_dir=/tmp/mnli_model
    python run/analyze_shortcuts.py --mode=hans_evaluate --input=/tmp/hans/hans.tsv \
      --predictions_file=/tmp/mnli_model/test_results.tsv --output_dir=/tmp/hans

Pictures (--plot, the default; --noplot: none): arct_cues writes cues.png
(productivity vs coverage of every cue, the top --plot_top labelled, the chance
line), hans_evaluate hans.png (accuracy per heuristic x label, and per
sub-case); modeling/analysis/plots.py draws them.

Every output is written atomically; the ablation and adversarial directories
are read by ``run_classifier --task_name=arct --data_dir=<dir>`` unchanged.
The library is `data.probing` (arct, hans); this script only parses flags.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import json
import os

from absl import flags

from data.probing import arct
from data.probing import hans
from modeling.analysis import plots

MODES = ("arct_cues", "arct_ablations", "arct_adversarial", "hans_generate", "hans_evaluate")

flags.DEFINE_enum("mode", None, MODES, "What to do.")
flags.DEFINE_string("data_dir", None, "The data set's directory (arct_* modes).")
flags.DEFINE_string("input", None, "hans_evaluate: the HANS TSV (or a directory holding "
                    "hans.tsv) the predictions are of.")
flags.DEFINE_string("output_dir", None, "Where the outputs are written.")
flags.DEFINE_string("task_name", "arct", "arct_cues: the processor (arct, swag, "
                    "multiple_choice, mnli, generic, ...).")
flags.DEFINE_string("processor", None, "arct_cues: your own processor, path/to/file.py:Class.")
flags.DEFINE_enum("split", "train", list(arct.SPLITS), "arct_cues: the split to analyse.")
flags.DEFINE_list("ngram_orders", ["1", "2"], "arct_cues: n-gram orders of the cues.")
flags.DEFINE_integer("min_applicability", 1, "arct_cues: leave out cues applicable to fewer "
                     "data points.")
flags.DEFINE_integer("top", None, "arct_cues: write only the top cues (default all).")
flags.DEFINE_string("file_format", "tsv", "generic processor: tsv, csv or jsonl.")
flags.DEFINE_string("text_a_column", "0", "generic processor: text_a column (index or name).")
flags.DEFINE_string("text_b_column", None, "generic processor: text_b column.")
flags.DEFINE_string("label_column", "1", "generic processor: label column.")
flags.DEFINE_bool("has_header", True, "generic processor: the files start with a header.")
flags.DEFINE_list("labels", None, "generic processor: the labels (default: inferred).")
flags.DEFINE_list("ablations", list(arct.ABLATIONS), "arct_ablations: which to write.")
flags.DEFINE_bool("keep_original", False, "arct_adversarial: write the original rows too.")
flags.DEFINE_integer("per_template", 100, "hans_generate: pairs per template (30 templates).")
flags.DEFINE_integer("seed", 0, "hans_generate: random seed.")
flags.DEFINE_list("subcases", None, "hans_generate: only these sub-cases.")
flags.DEFINE_string("predictions_file", None, "hans_evaluate: run_classifier's "
                    "test_results.tsv (class probabilities per example, in file order).")
flags.DEFINE_list("label_list", None, "hans_evaluate: the classifier's labels in column order "
                  "(default contradiction,entailment,neutral for 3 columns, "
                  "entailment,non-entailment for 2).")

flags.DEFINE_bool("plot", True, "arct_cues: also write cues.png; hans_evaluate: hans.png (each also a TensorBoard image in --output_dir/tensorboard).")
flags.DEFINE_integer("plot_top", 10, "arct_cues: cues labelled in cues.png.", lower_bound=0)

FLAGS = flags.FLAGS


def _need(*names):
    for name in names:
        if not getattr(FLAGS, name):
            raise ValueError("--mode=%s needs --%s" % (FLAGS.mode, name))


def _orders():
    try:
        return [int(o) for o in FLAGS.ngram_orders]
    except ValueError:
        raise ValueError("--ngram_orders=%s: expected integers such as 1,2"
                         % ",".join(FLAGS.ngram_orders)) from None


def main(_):
    mode = FLAGS.mode
    if mode == "arct_cues":
        _need("data_dir", "output_dir")
        generic = {}
        if (FLAGS.task_name or "").lower() == "generic" and not FLAGS.processor:
            generic = dict(file_format=FLAGS.file_format, text_a_column=FLAGS.text_a_column,
                           text_b_column=FLAGS.text_b_column, label_column=FLAGS.label_column,
                           has_header=FLAGS.has_header, labels=FLAGS.labels)
        examples = arct.load_examples(FLAGS.data_dir, FLAGS.split, FLAGS.task_name,
                                      FLAGS.processor, **generic)
        report = arct.cue_statistics(examples, _orders(), FLAGS.min_applicability)
        paths = arct.write_cues(report, FLAGS.output_dir, FLAGS.top)
        if FLAGS.plot:
            paths = tuple(paths) + (os.path.join(FLAGS.output_dir, "cues.png"),)
            plots.plot_cues(report, paths[-1], top=FLAGS.plot_top)
            plots.png_to_tensorboard(paths[-1])
        print("%d data points (%s), chance %.3f; top cues (productivity, coverage):"
              % (report["n"], report["kind"], report["chance"] or 0.0))
        for row in report["cues"][:10]:
            print("  %-24s %.3f  %.3f%s" % (row["cue"], row["productivity"], row["coverage"],
                                             "  " + row["label"] if "label" in row else ""))
        print("wrote %s" % ", ".join(paths))
    elif mode == "arct_ablations":
        _need("data_dir", "output_dir")
        for ablation in FLAGS.ablations:
            if ablation not in arct.ABLATIONS:
                raise ValueError("--ablations: unknown %r (expected %s)"
                                 % (ablation, ",".join(arct.ABLATIONS)))
        for ablation in FLAGS.ablations:
            counts = arct.write_ablation(FLAGS.data_dir,
                                         os.path.join(FLAGS.output_dir, ablation), ablation)
            print("%s: %s" % (ablation, json.dumps(counts)))
    elif mode == "arct_adversarial":
        _need("data_dir", "output_dir")
        report = arct.write_adversarial(FLAGS.data_dir, FLAGS.output_dir, FLAGS.keep_original)
        for split, info in report.items():
            print("%s: %d rows, %d negated, %d unsupported %s, %d written" % (
                info["file"], info["rows"], info["negated"], info["unsupported"],
                json.dumps(info["unsupported_reasons"]), info["written"]))
    elif mode == "hans_generate":
        _need("output_dir")
        examples = hans.generate(FLAGS.per_template, FLAGS.seed, FLAGS.subcases)
        paths = hans.write_hans(examples, FLAGS.output_dir)
        print("%d pairs; wrote %s" % (len(examples), ", ".join(paths)))
    elif mode == "hans_evaluate":
        _need("input", "predictions_file", "output_dir")
        path = FLAGS.input
        if os.path.isdir(path):
            path = os.path.join(path, "hans.tsv")
        examples = hans.read_hans(path)
        predictions = hans.read_predictions(FLAGS.predictions_file, FLAGS.label_list)
        if len(predictions) != len(examples):
            raise ValueError("--predictions_file=%s has %d rows, --input=%s %d examples: "
                             "predict exactly that file" % (FLAGS.predictions_file,
                                                            len(predictions), path,
                                                            len(examples)))
        result = hans.evaluate_hans(predictions, examples)
        out = hans.write_evaluation(result, os.path.join(FLAGS.output_dir, "hans_results.json"))
        if FLAGS.plot:
            plots.plot_hans(result, os.path.join(FLAGS.output_dir, "hans.png"))
            plots.png_to_tensorboard(os.path.join(FLAGS.output_dir, "hans.png"))
            out += ", " + os.path.join(FLAGS.output_dir, "hans.png")
        print("overall accuracy %.4f (%d pairs)" % (result["overall"]["accuracy"],
                                                    result["overall"]["count"]))
        for heuristic, cells in result["by_heuristic"].items():
            print("  %-16s %s" % (heuristic, "  ".join(
                "%s %.3f" % (label, cell["accuracy"]) for label, cell in sorted(cells.items()))))
        print("wrote %s" % out)


if __name__ == "__main__":
    script.run(main, required_flags=["mode"])
