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
(--noplot: none; modeling/analysis/plots.py).
"""

import json
import os

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags
import tensorflow as tf

from data import atomic
from modeling import bert as config_lib
from modeling.analysis import compression
from modeling.analysis import plots
from modeling.tasks import classification

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the fine-tuned model.")
flags.DEFINE_string("model_dir", None, "run_classifier.py's --output_dir (its latest checkpoint).")
flags.DEFINE_string("checkpoint", None, "A classifier checkpoint prefix instead of --model_dir's latest.")
flags.DEFINE_string("model_family", "bert", "The encoder's model family.")
flags.DEFINE_string("eval_file", None, "Labelled classifier records (default MODEL_DIR/eval.tf_record).")
flags.DEFINE_integer("max_seq_length", 128, "The records' max_seq_length.", lower_bound=3)
flags.DEFINE_integer("num_labels", None, "Classes (default: read from the checkpoint's head).")
flags.DEFINE_list("variants", list(compression.VARIANTS), "Of float32, dynamic_int8, float16.")
flags.DEFINE_integer("repeats", 3, "Timed passes over the examples (median).", lower_bound=1)
flags.DEFINE_integer("max_examples", None, "Evaluate at most this many examples.")
flags.DEFINE_string("output_file", None, "Write the JSON report here.")
flags.DEFINE_string("tflite_dir", None, "Also write model_<variant>.tflite files here.")
flags.DEFINE_bool("plot", True, "With --output_file, also write compression.png beside it (and as a TensorBoard image in tensorboard/ there).")

_HEAD_KEY = "model/output_weights/.ATTRIBUTES/VARIABLE_VALUE"


def _checkpoint_path():
    if FLAGS.checkpoint:
        return FLAGS.checkpoint
    if not FLAGS.model_dir:
        raise ValueError("Give --model_dir (run_classifier.py's --output_dir) or --checkpoint.")
    latest = tf.train.latest_checkpoint(FLAGS.model_dir)
    if not latest:
        raise ValueError("--model_dir=%s has no checkpoint; expected the --output_dir of a "
                         "run_classifier.py --do_train run" % FLAGS.model_dir)
    return latest


def main(_):
    for variant in FLAGS.variants:
        if variant not in compression.VARIANTS:
            raise ValueError("--variants: %r is not one of %s"
                             % (variant, ", ".join(compression.VARIANTS)))
    path = _checkpoint_path()
    eval_file = FLAGS.eval_file or os.path.join(FLAGS.model_dir or "", "eval.tf_record")
    plot_file = None
    if FLAGS.output_file and FLAGS.plot:
        plot_file = os.path.join(os.path.dirname(FLAGS.output_file), "compression.png")
    if FLAGS.output_file:
        atomic.check_outputs([("--output_file", FLAGS.output_file)]
                             + ([("--plot", plot_file)] if plot_file else []),
                             [("--eval_file", eval_file)])
    shapes = dict(tf.train.list_variables(path))
    num_labels = FLAGS.num_labels
    if num_labels is None:
        if _HEAD_KEY not in shapes:
            raise ValueError("%s has no classifier head (%s); expected a run_classifier.py "
                             "checkpoint, or give --num_labels" % (path, _HEAD_KEY))
        num_labels = shapes[_HEAD_KEY][0]
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    model = classification.BertClassifier.from_config_object(
        bert_config, num_labels=num_labels, family=FLAGS.model_family)
    compression.restore_classifier(model, path)
    examples = compression.read_labelled_records(eval_file, FLAGS.max_seq_length,
                                                 FLAGS.max_examples)
    models = {}
    report = compression.evaluate(model, examples, FLAGS.max_seq_length,
                                  variants=FLAGS.variants, repeats=FLAGS.repeats,
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
    if FLAGS.tflite_dir:
        compression.write_models(models, FLAGS.tflite_dir)
    if FLAGS.output_file:
        atomic.write_text(FLAGS.output_file, json.dumps(report, indent=2) + "\n")
    if plot_file:
        plots.plot_compression(report, plot_file)
        plots.png_to_tensorboard(plot_file)
        print("wrote %s" % plot_file)


if __name__ == "__main__":
    script.run(main, required_flags=["bert_config_file"])
