"""SavedModels for serving: raw strings in, model outputs out.

The tokenizer runs inside the graph (`data.tokenizers.wordpiece.GraphTokenizer`,
which gives the ids of Google's `FullTokenizer`), followed by Google's input
packing (`data.packing.pack_in_graph`, the same rules as the Python packer
that wrote the fine-tuning data): ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B
[SEP]``, the pair truncated by removing tokens from the end of the longer
segment, padded to `max_seq_length` with `input_mask` and `segment_ids`. A
serving system sends text and gets probabilities back; no Python
tokenization on the client.

Two signatures are exported:

* ``serving_default(text_a)`` for single texts,
* ``serving_pair(text_a, text_b)`` for sentence pairs,

each taking a `[batch]` string tensor and returning a dict of tensors.
"""

import os
import shutil

import tensorflow as tf

from data import atomic
from data import packing
from data import tokenization
from data.tokenizers.wordpiece import GraphTokenizer
from modeling.serving import inference


def _default_outputs(outputs):
    if isinstance(outputs, dict):
        return dict(outputs)
    return {"outputs": outputs}


class TextModelServer(tf.Module):
    """A `tf.Module` wrapping a Keras model with in-graph tokenization and packing.

    Args:
      model: a Keras model called as ``model({"input_ids", "input_mask",
        "segment_ids"}, training=False)``.
      vocab_file / do_lower_case: the model's tokenizer.
      max_seq_length: packed length.
      output_fn: maps the model's output to the dict the signatures return
        (default: the model's dict as it is, or ``{"outputs": tensor}``).
      precision: "fp32" (the model as it is), "bf16" or "int8"
        (`inference.with_precision`). An int8 SavedModel holds the int8
        weights (not the float kernels they replace) and runs oneDNN's int8
        kernels: serve it with TF_ENABLE_ONEDNN_OPTS=1 (TensorFlow's default on
        CPUs with AVX-512 VNNI/BF16 or AMX); without oneDNN its calls fail.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, output_fn=None,
                 name=None, precision="fp32"):
        super().__init__(name=name)
        if max_seq_length < 3:
            raise ValueError("max_seq_length must be at least 3, got %d" % max_seq_length)
        model = inference.with_precision(model, precision)
        self.precision = precision
        # Keras models saved as attributes bring their own auto-generated
        # (float-input) serving signature into the SavedModel; keep the model
        # out of the object graph and track its variables directly instead.
        self.__dict__["model"] = model
        dummy = tf.zeros([1, max_seq_length], tf.int32)
        model({"input_ids": dummy, "input_mask": dummy, "segment_ids": dummy},
              training=False)  # creates any variable built lazily
        self.model_variables = [v if isinstance(v, tf.Variable) else getattr(v, "value", v)
                                for v in getattr(model, "variables", [])]
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        vocab = tokenization.load_vocab(vocab_file)
        tokenization.check_vocab_special_tokens(
            vocab, vocab_file, required=(tokenization.CLS_TOKEN, tokenization.SEP_TOKEN))
        self.cls_id = vocab[tokenization.CLS_TOKEN]
        self.sep_id = vocab[tokenization.SEP_TOKEN]
        self.max_seq_length = max_seq_length
        self._output_fn = output_fn or _default_outputs

    def pack(self, segments):
        """Google's packing of 1 or 2 tokenized segments into model features.

        `data.packing.pack_in_graph`: the rules of the Python packer that made
        the fine-tuning data, with TensorFlow ops.
        """
        return packing.pack_in_graph(segments, self.max_seq_length, self.cls_id, self.sep_id)

    def _run(self, segments):
        features = self.pack([self.tokenizer.tokenize(s) for s in segments])
        # The model runs on the longest row, not max_seq_length columns.
        return self._output_fn(inference.call_trimmed(self.model, features))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a")])
    def serve(self, text_a):
        return self._run([text_a])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_pair(self, text_a, text_b):
        return self._run([text_a, text_b])


def export_text_model(model, export_dir, vocab_file, do_lower_case, max_seq_length,
                      output_fn=None, precision="fp32"):
    """Saves a SavedModel with ``serving_default`` and ``serving_pair``.

    `precision` as in `TextModelServer` ("int8": the Dense products in int8).

    Written to a temporary folder and moved into place, so `export_dir` is
    either the complete new export or left as it was.

    Returns:
      the `TextModelServer` that was saved.
    """
    export_dir = os.path.abspath(export_dir)
    if os.path.isdir(export_dir) and os.listdir(export_dir) and not os.path.isfile(
            os.path.join(export_dir, "saved_model.pb")):
        # Replacing it would delete whatever is there (checkpoints, data).
        raise ValueError("--export_dir=%s exists and is not a SavedModel: refusing to replace "
                         "it; choose a new or an earlier export directory" % export_dir)
    if os.path.isfile(export_dir):
        raise ValueError("--export_dir=%s is a file, expected a directory" % export_dir)
    server = TextModelServer(model, vocab_file, do_lower_case, max_seq_length, output_fn,
                             precision=precision)
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    atomic.sweep_stale_temporaries(parent)
    tmp = atomic.temporary_name(export_dir)
    try:
        tf.saved_model.save(server, tmp, signatures={
            "serving_default": server.serve, "serving_pair": server.serve_pair})
        if tf.io.gfile.exists(export_dir):
            shutil.rmtree(export_dir)
        atomic.commit(tmp, export_dir)
    finally:
        atomic.discard(tmp)
    return server
