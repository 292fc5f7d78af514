"""GPT-2 sequence classification as HF's `GPT2ForSequenceClassification`: a score on the last token.

GPT-2 has no pooled output and no classification token. HF's
`GPT2ForSequenceClassification` (the layout of every GPT-2 classifier
published in HF folders) reads the final hidden state (after `ln_f`) of each
row's last real token and multiplies it by one bias-free matrix, `score`:

    logits = h[last] @ score^T                 score [num_labels, n_embd]

Which token is "last" is HF's rule: with a `pad_token_id` in the config, the
rightmost token whose id is not the padding id (so left and right padding
give the same row; a row that ends with that id itself is read before it);
without one, HF takes the last position and refuses batches of more than one
row. Here the attention mask generalises the second case, and is applied in
the first too:

    real  = input_mask (and input_ids != pad_token_id, when the config has one)
    last  = argmax(position * real)            (0 for a row with no real token)

which is HF's index wherever HF computes one (padding written with the
padding id; a single unpadded row without one), and the last masked-in token
of every padded batch otherwise. No dropout is applied to `h[last]` (HF
applies none); the blocks' own dropouts train as configured.

`run_classifier.py --init_checkpoint=GPT2_FOLDER` fine-tunes it through
`GPT2InputFormat`, registered below as the "gpt2" fine-tuning input format
(`modeling.tasks.input_formats`): the folder's own tokenizer frames the texts
as HF's `GPT2Tokenizer` does (a pair is the two texts' ids one after the
other, nothing added), padded on the right. An HF
`GPT2ForSequenceClassification` folder initialises the score too when its
number of labels is the task's. A fine-tuned classifier goes out as
`GPT2ForSequenceClassification` (`run/convert_checkpoint.py`: the family's
`HFFormat.classifier_table` and `build_classifier`, `modeling.gpt2.hf_format`).

    from modeling.gpt2.classification import load_sequence_classifier
    model, tokenizer = load_sequence_classifier("hf_gpt2_sst2/")
    outputs = model({"input_ids": ids, "input_mask": mask})   # logits, probabilities

Weights: `encoder` (a `GPT2Network`), `output_weights` `[num_labels, n_embd]`
(HF's `score.weight`, the same layout), initialised as HF's Linear layers
are (normal with the config's `initializer_range`, the library's truncated
initialiser).

Not here (refused in one line): multiple-choice tasks (HF's
`GPT2DoubleHeadsModel` is another head), SavedModel export
(`--export_dir`: the serving graph's tokenizer is WordPiece).
"""

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling.gpt2.network import GPT2Network
from modeling.layers import truncated_normal_initializer
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.encoder_models import EncoderModel
from modeling.tasks import classification as classifier_lib
from modeling.tasks import classifier_job
from modeling.tasks.input_formats import FORMATS
from modeling.tasks.input_formats import ClassifierJobError

__all__ = ["GPT2Classifier", "GPT2InputFormat", "SCORE", "last_token_index", "load_score",
           "load_sequence_classifier"]

#: HF's name of the score matrix in a `GPT2ForSequenceClassification` file.
SCORE = "score.weight"


def last_token_index(input_ids, input_mask=None, pad_token_id=None):
    """`[batch]` int32: each row's last real token (see the module docstring)."""
    input_ids = tf.cast(input_ids, tf.int32)
    real = tf.ones_like(input_ids) if input_mask is None else tf.cast(
        tf.cast(input_mask, tf.int32) > 0, tf.int32)
    if pad_token_id is not None:
        real = real * tf.cast(tf.not_equal(input_ids, int(pad_token_id)), tf.int32)
    positions = tf.range(tf.shape(input_ids)[1], dtype=tf.int32)[None, :]
    return tf.argmax(positions * real, axis=-1, output_type=tf.int32)


def _pad_token_id(config):
    value = config.extra.get("pad_token_id")
    if isinstance(value, list):  # HF allows a list; its rule compares with one id
        value = value[0] if value else None
    return None if value is None else int(value)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GPT2Classifier(EncoderModel, keras.Model):
    """A `GPT2Network` and HF's bias-free `score` on the last real token.

    Args:
        encoder: a `GPT2Network`.
        num_labels: classes (labels for multi-label; 1 for regression).
        task_type: "classification", "multi_label" or "regression".
        pad_token_id: the config's padding id (HF's rule), or None.
        initializer_range: std of `output_weights` (default the encoder's).
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    def __init__(self, encoder, num_labels=2, task_type=classifier_lib.CLASSIFICATION,
                 pad_token_id=None, initializer_range=None, **kwargs):
        kwargs.setdefault("name", "gpt2_classifier")
        super().__init__(**kwargs)
        if task_type not in classifier_lib.TASK_TYPES:
            raise ValueError("task_type must be one of %s, not %r"
                             % (", ".join(classifier_lib.TASK_TYPES), task_type))
        if task_type == classifier_lib.REGRESSION:
            num_labels = 1
        if not num_labels or int(num_labels) < 1:
            raise ValueError("num_labels must be a positive integer, got %r" % (num_labels,))
        self.encoder = encoder
        self.num_labels = int(num_labels)
        self.task_type = task_type
        self.pad_token_id = None if pad_token_id is None else int(pad_token_id)
        self.set_head_rates(initializer_range)
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_labels, encoder.n_embd),
            initializer=truncated_normal_initializer(self.initializer_range))
        self.build()

    @classmethod
    def from_config_object(cls, gpt2_config, num_labels=2,
                           task_type=classifier_lib.CLASSIFICATION, dtype=None):
        """A classifier over a fresh `GPT2Network` of `gpt2_config` (its `pad_token_id`)."""
        kwargs = {} if dtype is None else {"dtype": dtype}
        encoder = GPT2Network.from_config_object(gpt2_config, **kwargs)
        return cls(encoder, num_labels=num_labels, task_type=task_type,
                   pad_token_id=_pad_token_id(gpt2_config), **kwargs)

    def call(self, features, training=None):
        """`logits` `[batch, num_labels]` plus `probabilities` (or `predictions`)."""
        if not isinstance(features, dict):
            features = {"input_ids": features}
        ids = tf.cast(features["input_ids"], tf.int32)
        mask = features.get("input_mask")
        mask = tf.ones_like(ids) if mask is None else tf.cast(mask, tf.int32)
        hidden = self.encoder({"input_ids": ids, "input_mask": mask},
                              training=training)["sequence_output"]
        state = tf.gather(hidden, last_token_index(ids, mask, self.pad_token_id), batch_dims=1)
        logits = tf.matmul(state, tf.cast(self.output_weights, state.dtype), transpose_b=True)
        return classifier_lib.outputs_of_logits(tf.cast(logits, tf.float32), self.task_type)

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (the classifier's losses)."""
        outputs = self(features, training=training)
        return classifier_lib.task_loss_and_metrics(outputs, features, self.task_type,
                                                    self.num_labels)

    def get_config(self):
        return self.encoder_model_config(num_labels=self.num_labels, task_type=self.task_type,
                                         pad_token_id=self.pad_token_id,
                                         initializer_range=self.initializer_range)


def load_score(model, checkpoint):
    """Copies HF's `score.weight` of `checkpoint` into `model.output_weights`.

    Returns True when it did; False when the checkpoint is not an HF
    safetensors file (or folder) holding `score.weight`, or holds one for
    another number of labels (the score then keeps its initial values, as
    HF's `ignore_mismatched_sizes` does; logged).
    """
    try:
        fmt, path = checkpoints.resolve_checkpoint(checkpoint)
    except (FileNotFoundError, ValueError):
        return False
    if fmt != checkpoints.HF_SAFETENSORS:
        return False
    from modeling.checkpoints import safetensors_format  # pylint: disable=import-outside-toplevel
    source = safetensors_format.open_safetensors(path)
    if SCORE not in source.names():
        return False
    shape = tuple(source.shape(SCORE))
    if shape != tuple(model.output_weights.shape):
        logging.warning("%s: %s is %s, the classifier's is %s (%d labels): the score starts "
                        "fresh", checkpoint, SCORE, shape, tuple(model.output_weights.shape),
                        model.num_labels)
        return False
    model.output_weights.assign(np.asarray(source.read(SCORE), np.float32))
    return True


def load_sequence_classifier(path, num_labels=None, task_type=classifier_lib.CLASSIFICATION,
                             tokenizer=True, dtype=None):
    """`(GPT2Classifier, tokenizer)` of a GPT-2 model folder (HF, keras-hub or this project's).

    The encoder's weights are loaded with `modeling.checkpoints`' checks; an
    HF `GPT2ForSequenceClassification` folder's `score.weight` too.
    `num_labels` defaults to the score's rows, else the config's `id2label`,
    else 2.
    """
    from modeling.pretrained import folders  # pylint: disable=import-outside-toplevel
    folder = folders.inspect(path)
    if folder.family.name != GPT2Network.family_name:
        raise ClassifierJobError("%s: a %s folder, not a GPT-2 one" % (path, folder.family.name))
    config = folder.config()
    if num_labels is None:
        num_labels = _folder_num_labels(folder.checkpoint, config)
    model = GPT2Classifier.from_config_object(config, num_labels, task_type, dtype=dtype)
    checkpoints.init_from_checkpoint(model, folder.checkpoint)
    load_score(model, folder.checkpoint)
    return model, (folder.tokenizer(config) if tokenizer else None)


def _folder_num_labels(checkpoint, config):
    try:
        fmt, path = checkpoints.resolve_checkpoint(checkpoint)
        if fmt == checkpoints.HF_SAFETENSORS:
            from modeling.checkpoints import safetensors_format  # pylint: disable=import-outside-toplevel
            source = safetensors_format.open_safetensors(path)
            if SCORE in source.names():
                return int(source.shape(SCORE)[0])
    except (FileNotFoundError, ValueError):
        pass
    labels = config.extra.get("id2label")
    return len(labels) if labels else 2


# ------------------------------------------------------------ input format


class GPT2InputFormat(classifier_job.PooledInputFormat):
    """`run_classifier.py` with a GPT-2 model: the folder's BPE, `GPT2Classifier`.

    The records are the pooled format's (`input_ids`, `input_mask`,
    `segment_ids` of the folder tokenizer's `build_inputs`, padded on the
    right; `segment_ids` are not read), so the job's length batching applies.
    Without a published folder (this project's GPT-2 output, or explicit
    flags) `--vocab_file` (vocab.json) and `--merges_file` (merges.txt) give
    the byte-level BPE, read as HF's `GPT2Tokenizer` reads them.
    """

    @staticmethod
    def check_family(job, family):
        """Any GPT-2 network classifies (the score reads its last token)."""

    def check(self):
        job = self.job
        if job.lm_loss_weight is not None:
            raise ClassifierJobError("--lm_loss_weight: a GPT-2 classifier (HF's "
                                     "GPT2ForSequenceClassification) has no auxiliary "
                                     "language-model loss; leave it unset")
        if (job.input_transformation or "auto") != "auto":
            raise ClassifierJobError(
                "--input_transformation=%s: a GPT-2 classifier reads the texts as HF's "
                "GPT2Tokenizer frames them (a pair end to end); only auto applies"
                % job.input_transformation)
        if job.export_dir:
            raise ClassifierJobError("--export_dir: a GPT-2 classifier has no SavedModel "
                                     "export yet (the serving graph's tokenizer is "
                                     "WordPiece); leave --export_dir unset")

    def tokenizer(self):
        folder_tokenizer = self._folder_tokenizer()
        if folder_tokenizer is not None:
            return folder_tokenizer
        from modeling.gpt2 import hf_format  # pylint: disable=import-outside-toplevel
        from modeling.pretrained.formats import TokenizerFormatError  # pylint: disable=import-outside-toplevel
        job = self.job
        for name, what in (("vocab_file", "vocab.json"), ("merges_file", "merges.txt")):
            if not getattr(job, name, None):
                raise ClassifierJobError("--%s is required for a GPT-2 model (the byte-level "
                                         "BPE's %s)" % (name, what))
        try:
            tokenizer = hf_format.GPT2Tokenizer(job.vocab_file, job.merges_file)
        except TokenizerFormatError as e:
            raise ClassifierJobError(str(e)) from None
        if tokenizer.vocab_size != self.config.vocab_size:
            raise ClassifierJobError(
                "--vocab_file=%s has %d tokens but the GPT-2 config %s says vocab_size=%d; use "
                "the vocab.json that belongs to the model"
                % (job.vocab_file, tokenizer.vocab_size, job.bert_config_file,
                   self.config.vocab_size))
        return tokenizer

    def prepare(self, processor, task_type, label_list, num_labels):
        if getattr(processor, "is_multiple_choice", False):
            raise ClassifierJobError(
                "%s is a multiple-choice task; a GPT-2 classifier (HF's "
                "GPT2ForSequenceClassification) scores one text or pair, not candidates"
                % type(processor).__name__)

    def build_model(self, num_labels, task_type):
        return GPT2Classifier.from_config_object(self.config, num_labels, task_type)

    def init_model(self, model, checkpoint):
        """The network from `checkpoint`; an HF classifier folder's `score` too."""
        report = checkpoints.init_from_checkpoint(model, checkpoint)
        if load_score(model, checkpoint):
            logging.info("Initialised the score (%d labels) from %s's %s", model.num_labels,
                         checkpoint, SCORE)
        return report


FORMATS.register("gpt2", GPT2InputFormat)
