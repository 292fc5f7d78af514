"""Shortcut probing: ARCT-style cue statistics, ablations and adversarial data; HANS.

    # productivity and coverage of every unigram/bigram cue (Niven & Kao 2019)
    python run/analyze_shortcuts.py --mode=arct_cues --task_name=arct --data_dir=arct_data \
      --split=train --output_dir=/tmp/arct_cues            # cues.json, cues.tsv
    # any other processor: --task_name=swag|multiple_choice|mnli|generic (+ --file_format,
    # --text_a_column, --text_b_column, --label_column ...) or --processor=my.py:MyProcessor

    # "warrant only" / "no claim" / "no reason" baselines, one ARCT data dir each
    python run/analyze_shortcuts.py --mode=arct_ablations --data_dir=arct_data \
      --output_dir=/tmp/arct_ablations                     # warrant_only/, no_claim/, no_reason/
    # Niven & Kao's adversarial set: each row and its copy with the claim negated and the
    # label flipped (rows the rules cannot negate: reported, left out of both halves)
    python run/analyze_shortcuts.py --mode=arct_adversarial --data_dir=arct_data \
      --output_dir=/tmp/arct_adversarial [--nokeep_original: the copies only]

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
The library is `data.probing` (arct, hans); this script only parses flags
(the fields of `data.probing.shortcuts.ShortcutSettings`).
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import json
import os

import common_flags
from data.probing import arct
from data.probing import hans
from data.probing import shortcuts
from modeling.analysis import plots

common_flags.define_job_flags(shortcuts.ShortcutSettings)


def main(_):
    settings = common_flags.job_from_flags(shortcuts.ShortcutSettings)
    settings.check_needed()
    mode = settings.mode
    if mode == "arct_cues":
        examples = arct.load_examples(settings.data_dir, settings.split, settings.task_name,
                                      settings.processor, **settings.generic_processor_options())
        report = arct.cue_statistics(examples, settings.orders(), settings.min_applicability)
        paths = arct.write_cues(report, settings.output_dir, settings.top)
        if settings.plot:
            paths = tuple(paths) + (os.path.join(settings.output_dir, "cues.png"),)
            plots.plot_cues(report, paths[-1], top=settings.plot_top)
            plots.png_to_tensorboard(paths[-1])
        print("%d data points (%s), chance %.3f; top cues (productivity, coverage):"
              % (report["n"], report["kind"], report["chance"] or 0.0))
        for row in report["cues"][:10]:
            print("  %-24s %.3f  %.3f%s" % (row["cue"], row["productivity"], row["coverage"],
                                             "  " + row["label"] if "label" in row else ""))
        print("wrote %s" % ", ".join(paths))
    elif mode == "arct_ablations":
        for ablation in settings.ablations:
            if ablation not in arct.ABLATIONS:
                raise ValueError("--ablations: unknown %r (expected %s)"
                                 % (ablation, ",".join(arct.ABLATIONS)))
        for ablation in settings.ablations:
            counts = arct.write_ablation(settings.data_dir,
                                         os.path.join(settings.output_dir, ablation), ablation)
            print("%s: %s" % (ablation, json.dumps(counts)))
    elif mode == "arct_adversarial":
        report = arct.write_adversarial(settings.data_dir, settings.output_dir,
                                        settings.keep_original)
        for split, info in report.items():
            print("%s: %d rows, %d negated, %d unsupported %s, %d written" % (
                info["file"], info["rows"], info["negated"], info["unsupported"],
                json.dumps(info["unsupported_reasons"]), info["written"]))
            if info["unsupported_ids"]:
                shown = info["unsupported_ids"][:10]
                print("  claims not negated, rows left out: %s%s" % (", ".join(shown), (
                    " ... (all %d in adversarial_report.json)" % info["unsupported"]
                    if info["unsupported"] > len(shown) else "")))
            for side in ("original", "written"):
                cues = info["cue_balance"][side]
                print("  %-8s %d cues, %d off chance; \"%s\" productivity %s" % (
                    side, cues["cues"], cues["unbalanced"], cues["cue"],
                    "n/a" if cues["productivity"] is None else "%.3f" % cues["productivity"]))
    elif mode == "hans_generate":
        examples = hans.generate(settings.per_template, settings.seed, settings.subcases)
        paths = hans.write_hans(examples, settings.output_dir)
        print("%d pairs; wrote %s" % (len(examples), ", ".join(paths)))
    elif mode == "hans_evaluate":
        path = settings.input
        if os.path.isdir(path):
            path = os.path.join(path, "hans.tsv")
        examples = hans.read_hans(path)
        predictions = hans.read_predictions(settings.predictions_file, settings.label_list)
        if len(predictions) != len(examples):
            raise ValueError("--predictions_file=%s has %d rows, --input=%s %d examples: "
                             "predict exactly that file" % (settings.predictions_file,
                                                            len(predictions), path,
                                                            len(examples)))
        result = hans.evaluate_hans(predictions, examples)
        out = hans.write_evaluation(result,
                                    os.path.join(settings.output_dir, "hans_results.json"))
        if settings.plot:
            plots.plot_hans(result, os.path.join(settings.output_dir, "hans.png"))
            plots.png_to_tensorboard(os.path.join(settings.output_dir, "hans.png"))
            out += ", " + os.path.join(settings.output_dir, "hans.png")
        print("overall accuracy %.4f (%d pairs)" % (result["overall"]["accuracy"],
                                                    result["overall"]["count"]))
        for heuristic, cells in result["by_heuristic"].items():
            print("  %-16s %s" % (heuristic, "  ".join(
                "%s %.3f" % (label, cell["accuracy"]) for label, cell in sorted(cells.items()))))
        print("wrote %s" % out)


if __name__ == "__main__":
    script.run(main, required_flags=["mode"])
