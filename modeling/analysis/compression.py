"""Post-training quantization of a fine-tuned classifier, through the TFLite converter.

A classifier (``model({"input_ids", "input_mask", "segment_ids"}) ->
{"logits", ...}``, e.g. `modeling.tasks.classification.BertClassifier`) is
traced as one concrete function of three int32 ``[1, max_seq_length]``
inputs returning the logits, or read from a SavedModel with such a
signature, and converted three ways:

* ``float32``: the plain TFLite model (the size baseline: same file format);
* ``dynamic_int8``: dynamic-range quantization (``Optimize.DEFAULT``): weights
  stored as int8 with per-channel scales, activations quantized on the fly
  in the matrix products (about 4x smaller);
* ``float16``: weights stored as float16 (about 2x smaller), computed in
  float32 on CPUs.

`evaluate` then runs each TFLite model in the TFLite interpreter over a
labelled set (the records `run/run_classifier.py` writes: ``input_ids``,
``input_mask``, ``segment_ids``, ``label_ids``, ``is_real_example``), one
example per call, and reports per variant the model size in bytes, the
median latency per example (over `repeats` timed passes, after a warm-up),
accuracy and the agreement rate of its argmax with the float model's
(the TensorFlow function of the Keras model, timed the same way).
"""

import dataclasses
import os
import statistics
import time
from typing import List, Optional
import warnings

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

from data import atomic
from modeling import registry
from modeling.training.options import option
# Magnitude pruning during fine-tuning lives with the trainer that runs it;
# its names stay importable from here.
from modeling.training.pruning import MagnitudePruner, encoder_dense_kernels, polynomial_sparsity  # pylint: disable=unused-import

__all__ = ["VARIANTS", "CompressionError", "CompressionSettings", "classifier_function",
           "checkpoint_num_labels", "convert", "restore_classifier", "save_feature_model",
           "read_labelled_records",
           "TFLiteClassifier", "evaluate", "write_models", "polynomial_sparsity",
           "encoder_dense_kernels", "MagnitudePruner"]

VARIANTS = ("float32", "dynamic_int8", "float16")
FEATURES = ("input_ids", "input_mask", "segment_ids")


class CompressionError(ValueError):
    """Bad arguments or inputs (one line)."""


@dataclasses.dataclass
class CompressionSettings:
    """Which classifier to quantize and evaluate on what; `run/compress_classifier.py`'s flags."""

    bert_config_file: Optional[str] = option(None, "bert_config.json of the fine-tuned model.")
    model_dir: Optional[str] = option(
        None, "run_classifier.py's --output_dir (its latest checkpoint).")
    checkpoint: Optional[str] = option(
        None, "A classifier checkpoint prefix instead of --model_dir's latest.")
    model_family: str = option(registry.DEFAULT_FAMILY, "The encoder's model family.")
    eval_file: Optional[str] = option(
        None, "Labelled classifier records (default MODEL_DIR/eval.tf_record).")
    max_seq_length: int = option(128, "The records' max_seq_length.", lower_bound=3)
    num_labels: Optional[int] = option(
        None, "Classes (default: read from the checkpoint's head).", lower_bound=1)
    variants: List[str] = option(help="Of float32, dynamic_int8, float16.",
                                 default_factory=lambda: list(VARIANTS))
    repeats: int = option(3, "Timed passes over the examples (median).", lower_bound=1)
    max_examples: Optional[int] = option(None, "Evaluate at most this many examples.")
    output_file: Optional[str] = option(None, "Write the JSON report here.")
    tflite_dir: Optional[str] = option(None, "Also write model_<variant>.tflite files here.")
    plot: bool = option(
        True, "With --output_file, also write compression.png beside it (and as a "
        "TensorBoard image in tensorboard/ there).")

    def check_variants(self):
        """Raises ValueError for a `variants` entry that is not one of `VARIANTS`."""
        for variant in self.variants:
            if variant not in VARIANTS:
                raise ValueError("--variants: %r is not one of %s"
                                 % (variant, ", ".join(VARIANTS)))

    def checkpoint_path(self):
        """`checkpoint`, else the latest checkpoint in `model_dir` (ValueError if none)."""
        if self.checkpoint:
            return self.checkpoint
        if not self.model_dir:
            raise ValueError("Give --model_dir (run_classifier.py's --output_dir) or "
                             "--checkpoint.")
        latest = tf.train.latest_checkpoint(self.model_dir)
        if not latest:
            raise ValueError("--model_dir=%s has no checkpoint; expected the --output_dir of a "
                             "run_classifier.py --do_train run" % self.model_dir)
        return latest

    def eval_records(self):
        """`eval_file`, or the eval.tf_record run_classifier.py wrote in `model_dir`."""
        return self.eval_file or os.path.join(self.model_dir or "", "eval.tf_record")

    def plot_file(self):
        """compression.png beside `output_file` (None: no output file, or `plot` off)."""
        if self.output_file and self.plot:
            return os.path.join(os.path.dirname(self.output_file), "compression.png")
        return None


def classifier_function(model, max_seq_length, output="logits"):
    """``model``'s `output` as a concrete function of int32 ``[1, max_seq_length]`` features."""
    spec = {name: tf.TensorSpec([1, max_seq_length], tf.int32, name=name) for name in FEATURES}

    @tf.function(input_signature=[spec])
    def serve(features):
        return {output: model(features, training=False)[output]}

    return serve.get_concrete_function()


_HEAD_KEY = "model/output_weights/.ATTRIBUTES/VARIABLE_VALUE"


def checkpoint_num_labels(path, num_labels=None):
    """The number of classes of the classifier checkpoint `path` (its head's rows).

    `num_labels` (a user's --num_labels, or None) must agree with the head;
    without a head (not a run_classifier.py checkpoint) it must be given.
    Raises `CompressionError` naming --num_labels.
    """
    shapes = dict(tf.train.list_variables(path))
    if _HEAD_KEY not in shapes:
        if num_labels is None:
            raise CompressionError("%s has no classifier head (%s); expected a "
                                   "run_classifier.py checkpoint, or give --num_labels"
                                   % (path, _HEAD_KEY))
        return num_labels
    head_labels = shapes[_HEAD_KEY][0]
    if num_labels is not None and num_labels != head_labels:
        raise CompressionError("--num_labels=%d, but the classifier head of %s has %d labels; "
                               "expected --num_labels=%d (or leave it out)"
                               % (num_labels, path, head_labels, head_labels))
    return head_labels


def restore_classifier(model, path):
    """Loads every weight of `model` (encoder and head) from a trainer checkpoint.

    `path` is a checkpoint prefix written by `modeling.training.trainer`
    (run_classifier.py's ``--output_dir/ckpt-N``). Variables are matched by
    their Keras paths (`modeling.checkpoints.object_based.model_variable_keys`);
    a weight the checkpoint lacks, or of another shape, is an error naming it.
    """
    from modeling.checkpoints import object_based  # pylint: disable=g-import-not-at-top
    reader = tf.train.load_checkpoint(path)
    keys = object_based.model_variable_keys(reader, path)
    shapes = reader.get_variable_to_shape_map()
    restored = 0
    for variable in model.weights:
        if variable.path.endswith("seed_generator_state"):
            continue  # dropout's random state: not needed for inference
        key = keys.get(variable.path)
        if key is None:
            raise CompressionError("%s has no weight %s; expected a checkpoint of this "
                                   "classifier (same --bert_config_file and number of labels)"
                                   % (path, variable.path))
        if list(shapes[key]) != list(variable.shape):
            raise CompressionError("%s: %s has shape %s, the model's is %s; expected the "
                                   "checkpoint of this --bert_config_file"
                                   % (path, variable.path, shapes[key], list(variable.shape)))
        variable.assign(reader.get_tensor(key))
        restored += 1
    return restored


def save_feature_model(model, export_dir, max_seq_length, output="logits"):
    """Writes a SavedModel whose ``serving_default`` takes the three id tensors.

    Written to a temporary directory beside `export_dir` and renamed into place.
    """
    module = tf.Module()
    module.__dict__["model"] = model  # untracked: its own signature would be saved too
    module.model_variables = [getattr(v, "value", v) for v in model.variables]
    function = classifier_function(model, max_seq_length, output)
    outputs = atomic.TemporaryOutputs([export_dir])
    try:
        tf.saved_model.save(module, outputs.temporaries[0],
                            signatures={"serving_default": function})
        outputs.commit()
    finally:
        outputs.discard()
    return export_dir


def _converter(source, trackable=None):
    if isinstance(source, (str, os.PathLike)):
        if not tf.io.gfile.isdir(os.fspath(source)):
            raise CompressionError("%s: not a SavedModel directory; expected one with a "
                                   "serving_default signature of input_ids/input_mask/"
                                   "segment_ids" % source)
        return tf.lite.TFLiteConverter.from_saved_model(os.fspath(source),
                                                        signature_keys=["serving_default"])
    # Weights as constants: left as resource variables, the TFLite model
    # would read uninitialised variables (NaN logits).
    frozen = convert_to_constants.convert_variables_to_constants_v2(source)
    return tf.lite.TFLiteConverter.from_concrete_functions([frozen], trackable)


def convert(source, variant, trackable=None):
    """The TFLite flatbuffer (bytes) of `source` quantized as `variant`.

    Args:
      source: a concrete function (`classifier_function`) or a SavedModel
        directory (`save_feature_model`).
      variant: one of `VARIANTS`.
      trackable: the object owning the function's variables (the Keras model).
    """
    if variant not in VARIANTS:
        raise CompressionError("variant (--variants) must be among %s, got %r"
                               % (", ".join(VARIANTS), variant))
    converter = _converter(source, trackable)
    if variant != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def _interpreter(model_content):
    """LiteRT's interpreter when installed (``ai_edge_litert``), else TensorFlow's."""
    try:
        from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
        return litert.Interpreter(model_content=model_content, num_threads=1)
    except ImportError:
        pass
    with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated": still works
        warnings.simplefilter("ignore", UserWarning)
        return tf.lite.Interpreter(model_content=model_content, num_threads=1)


class TFLiteClassifier(object):
    """A TFLite model of the three id inputs, called on one example at a time."""

    def __init__(self, model_content):
        self.interpreter = _interpreter(model_content)
        self.interpreter.allocate_tensors()
        self._inputs = {}
        for detail in self.interpreter.get_input_details():
            for name in FEATURES:
                if name in detail["name"]:
                    self._inputs[name] = detail["index"]
        if sorted(self._inputs) != sorted(FEATURES):
            raise CompressionError(
                "the TFLite model's inputs are %s; expected input_ids, input_mask, segment_ids"
                % [d["name"] for d in self.interpreter.get_input_details()])
        self._output = self.interpreter.get_output_details()[0]["index"]

    def __call__(self, example):
        for name, index in self._inputs.items():
            self.interpreter.set_tensor(index, np.asarray(example[name], np.int32).reshape(1, -1))
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self._output)[0].copy()


def read_labelled_records(path, max_seq_length, limit=None):
    """Real examples of a classifier TFRecord file as numpy dicts ``[1, L]`` each + label."""
    if not tf.io.gfile.glob(path):
        raise CompressionError("%s: no such records file; expected the eval.tf_record (or "
                               "another classifier record file) run_classifier.py wrote"
                               % path)
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURES}
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64, default_value=1)
    examples = []
    try:
        for record in tf.data.TFRecordDataset(tf.io.gfile.glob(path)):
            parsed = tf.io.parse_single_example(record, spec)
            if not int(parsed["is_real_example"]):
                continue
            examples.append(({name: parsed[name].numpy().astype(np.int32)[None]
                              for name in FEATURES}, int(parsed["label_ids"])))
            if limit and len(examples) >= limit:
                break
    except tf.errors.InvalidArgumentError as e:
        raise CompressionError("%s: not classifier records of --max_seq_length=%d (%s)"
                               % (path, max_seq_length, str(e).splitlines()[0])) from None
    if not examples:
        raise CompressionError("%s: no real examples" % path)
    return examples


def _timed(call, examples, repeats):
    """(outputs of one pass, median seconds per example over `repeats` passes)."""
    outputs = [call(features) for features, _ in examples]  # also the warm-up
    per_example = []
    for _ in range(repeats):
        start = time.perf_counter()
        for features, _ in examples:
            call(features)
        per_example.append((time.perf_counter() - start) / len(examples))
    return np.stack(outputs), statistics.median(per_example)


def evaluate(model, examples, max_seq_length, variants=VARIANTS, repeats=3,
             saved_model_dir=None, models_out=None):
    """Size, latency, accuracy and agreement of each quantized variant vs the float model.

    Args:
      model: the Keras classifier (the float reference).
      examples: ``[(features, label)]`` (see `read_labelled_records`).
      max_seq_length: the examples' length.
      variants: which of `VARIANTS` to convert.
      repeats: timed passes over the examples (median reported).
      saved_model_dir: convert from this SavedModel (`save_feature_model`)
        instead of tracing `model`.
      models_out: a dict to receive ``{variant: TFLite bytes}`` (see `write_models`).

    Returns:
      a JSON-ready dict: ``num_examples``, ``float`` {accuracy,
      latency_ms_per_example, parameter_bytes}, and ``variants`` {name:
      {size_bytes, size_ratio_to_float32 (of the float32 TFLite file),
      latency_ms_per_example, accuracy, agreement_with_float}}.
    """
    function = classifier_function(model, max_seq_length)
    labels = np.array([label for _, label in examples])

    def float_call(features):
        return function({name: tf.constant(features[name]) for name in FEATURES}
                        )["logits"].numpy()[0]

    float_logits, float_latency = _timed(float_call, examples, repeats)
    float_pred = float_logits.argmax(-1)
    report = {
        "num_examples": len(examples),
        "max_seq_length": max_seq_length,
        "float": {"accuracy": float((float_pred == labels).mean()),
                  "latency_ms_per_example": 1000.0 * float_latency,
                  "parameter_bytes": int(sum(np.prod(v.shape) * np.dtype(v.dtype).itemsize
                                             for v in model.weights))},
        "variants": {},
    }
    sizes = {}
    for variant in ("float32",) + tuple(v for v in variants if v != "float32"):
        content = convert(saved_model_dir or function, variant, trackable=model)
        sizes[variant] = len(content)
        if variant not in variants:
            continue
        if models_out is not None:
            models_out[variant] = content
        lite = TFLiteClassifier(content)
        logits, latency = _timed(lite, examples, repeats)
        pred = logits.argmax(-1)
        report["variants"][variant] = {
            "size_bytes": len(content),
            "size_ratio_to_float32": len(content) / float(sizes["float32"]),
            "latency_ms_per_example": 1000.0 * latency,
            "accuracy": float((pred == labels).mean()),
            "agreement_with_float": float((pred == float_pred).mean()),
            "max_abs_logit_difference": float(np.abs(logits - float_logits).max()),
        }
    report["float32_tflite_bytes"] = sizes["float32"]
    return report


def tflite_path(output_dir, variant):
    """Where `write_models` writes `variant`'s TFLite model."""
    return os.path.join(output_dir, "model_%s.tflite" % variant)


def write_models(models, output_dir):
    """Writes ``{variant: TFLite bytes}`` as ``model_<variant>.tflite`` files, atomically."""
    paths = []
    for variant, content in models.items():
        path = tflite_path(output_dir, variant)
        with atomic.atomic_output(path, "wb") as f:
            f.write(content)
        paths.append(path)
    return paths
