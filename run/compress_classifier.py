"""Post-training quantization of a fine-tuned classifier: size, latency, accuracy.

    python run/run_classifier.py --task_name=sst2 --do_train --do_eval ... --output_dir=out/sst2
    python run/compress_classifier.py --bert_config_file=$BERT_DIR/bert_config.json \
      --model_dir=out/sst2 --max_seq_length=128 --output_file=out/sst2/compression.json \
      --tflite_dir=out/sst2/tflite

Restores the classifier from --model_dir (the checkpoint run_classifier.py
trained; or --checkpoint for a given prefix), converts it with the TFLite
converter to float32, dynamic-range int8 and float16 models, and evaluates
each in the TFLite interpreter against the float model on --eval_file (by
default MODEL_DIR/eval.tf_record, the records run_classifier.py --do_eval
wrote). See modeling/analysis/compression.py. With --output_file, a picture
of size, latency and accuracy per variant goes beside it as compression.png
(--noplot: none; modeling/analysis/plots.py). The flags are the fields of
`modeling.analysis.compression.CompressionSettings`.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from modeling import bert as config_lib
from modeling.analysis import compression
from modeling.analysis import plots
from modeling.tasks import classification

common_flags.define_job_flags(compression.CompressionSettings)


def main(_):
    settings = common_flags.job_from_flags(compression.CompressionSettings)
    settings.check_variants()
    path = settings.checkpoint_path()
    eval_file = settings.eval_records()
    plot_file = settings.plot_file()
    outputs = ([("--output_file", settings.output_file)] if settings.output_file else []) + (
        [("--plot", plot_file)] if plot_file else []) + (
        [("--tflite_dir", compression.tflite_path(settings.tflite_dir, v))
         for v in settings.variants] if settings.tflite_dir else [])
    if outputs:
        atomic.check_outputs(outputs,
                             [("--eval_file", eval_file), ("--model_dir", settings.model_dir),
                              ("--checkpoint", path),
                              ("--bert_config_file", settings.bert_config_file)])
    num_labels = compression.checkpoint_num_labels(path, settings.num_labels)
    bert_config = config_lib.load_bert_config(settings.bert_config_file)
    model = classification.BertClassifier.from_config_object(
        bert_config, num_labels=num_labels, family=settings.model_family)
    compression.restore_classifier(model, path)
    examples = compression.read_labelled_records(eval_file, settings.max_seq_length,
                                                 settings.max_examples)
    models = {}
    report = compression.evaluate(model, examples, settings.max_seq_length,
                                  variants=settings.variants, repeats=settings.repeats,
                                  models_out=models)
    report.update(checkpoint=path, eval_file=eval_file)
    print("float:         accuracy %.4f  %.2f ms/example  %d parameter bytes"
          % (report["float"]["accuracy"], report["float"]["latency_ms_per_example"],
             report["float"]["parameter_bytes"]))
    for name, row in report["variants"].items():
        print("%-14s accuracy %.4f  %.2f ms/example  %d bytes (%.2fx float32)  "
              "agreement %.4f" % (name + ":", row["accuracy"], row["latency_ms_per_example"],
                                  row["size_bytes"], row["size_ratio_to_float32"],
                                  row["agreement_with_float"]))
    if settings.tflite_dir:
        compression.write_models(models, settings.tflite_dir)
    if settings.output_file:
        atomic.write_text(settings.output_file, json.dumps(report, indent=2) + "\n")
    if plot_file:
        plots.plot_compression(report, plot_file)
        plots.png_to_tensorboard(plot_file)
        print("wrote %s" % plot_file)


if __name__ == "__main__":
    script.run(main, required_flags=["bert_config_file"])
