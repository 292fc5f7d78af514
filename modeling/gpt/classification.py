"""GPT-style fine-tuning (Radford et al. 2018, section 3.2-3.3): `GPTClassifier` and its input format.

GPT fine-tunes the whole pre-trained decoder with one new linear layer on the
final hidden state of the extract token `<e>`, after turning each input into
token sequences (`data.processors.transformations`):

    classification   <s> text <e>                  logits = W h_e + b
    entailment       <s> premise $ hypothesis <e>  logits = W h_e + b
    similarity       <s> a $ b <e>, <s> b $ a <e>  logits = W (h_e(ab) + h_e(ba)) + b
    multiple choice  <s> context $ choice_k <e>    score_k = w . h_e(k) + b, softmax over k

`<s>`, `$` and `<e>` are three new rows appended to the pre-trained token
table (ids `V`, `V + 1`, `V + 2`; `GPTNetwork.copy_weights_from` fills the
first `V` rows from the checkpoint), trained with the rest. Dropout (the
config's `resid_pdrop`, 0.1) is applied to `h_e` before the linear layer.

The auxiliary language-model objective: the same sequences also predict
their next tokens through the (tied) token table, and

    loss = task_loss + lm_loss_weight * lm_loss        (lm_loss_weight 0.5 in the paper)

where `lm_loss` is, as in OpenAI's `train.py`, each sequence's mean
next-token cross-entropy over its predicted tokens, averaged over the
sequences of the batch's real examples (`lm_loss_average="sequence"`; a
position predicts the token after it when both are real; framing tokens are
predicted too). `lm_loss_average="token"` is the mean over every predicted
token of the batch instead (long sequences weigh more). `lm_loss_weight=0`
leaves the task loss alone.

Features (`data.processors.transformations`): `input_ids` and `input_mask`
`[batch, num_sequences * seq]` (an example's sequences end to end),
`label_ids`, `is_real_example`. The extract position of a sequence is its
last real token (`sum(input_mask) - 1`).

Outputs: `logits` `[batch, num_labels]` (multiple choice: `[batch,
num_choices]`), `probabilities` (or `predictions` for regression), and
`lm_logits` only when asked for (`compute_loss_and_metrics` computes them).

Metrics (`(sum, count)`): the classifier's (`loss` = the task loss,
`accuracy`, ...; `modeling.tasks.classification.task_loss_and_metrics`) plus
`lm_loss` (per sequence, or per predicted token with `"token"`) and
`total_loss` (what is minimised).

Weights: `encoder` (a `GPTNetwork` with `V + 3` token rows), and
`output_weights` `[num_labels or 1, n_embd]`, `output_bias`.
"""

import os

from absl import logging
import keras
import tensorflow as tf

from data import processors as processors_lib
from data.processors import transformations
from data.tokenizers import byte_bpe
from data.tokenizers import gpt_bpe
from modeling import checkpoints
from modeling.gpt.network import GPTNetwork
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.encoder_models import EncoderModel
from modeling.objectives.base import _per_example_cross_entropy
from modeling.objectives.causal_lm import next_token_targets
from modeling.tasks import classification as classifier_lib
from modeling.tasks.input_formats import FORMATS
from modeling.tasks.input_formats import ClassifierJobError
from modeling.tasks.input_formats import InputFormat

__all__ = ["GPTClassifier", "GPTInputFormat", "NUM_SPECIAL_TOKENS", "is_end_of_word_vocab"]

NUM_SPECIAL_TOKENS = 3  # <s>, $, <e>
AUTO = "auto"
LM_LOSS_AVERAGES = ("sequence", "token")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GPTClassifier(EncoderModel, keras.Model):
    """A GPT decoder with the paper's task head (see the module docstring).

    Args:
        encoder: a `GPTNetwork` whose table holds the three framing tokens.
        num_labels: classes (1 for regression); for multiple choice, the
            number of candidates.
        task_type: "classification", "multi_label" or "regression".
        transformation: "classification", "entailment", "similarity" or
            "multiple_choice".
        lm_loss_weight: weight of the auxiliary language-model loss.
        lm_loss_average: "sequence" (OpenAI's: the mean over sequences of each
            sequence's mean per token) or "token" (the mean over all tokens).
        dropout_rate: dropout on the extract state (default the encoder's
            `resid_pdrop`).
        initializer_range: std of `output_weights` (default the encoder's).
    """

    def __init__(self, encoder, num_labels, task_type=classifier_lib.CLASSIFICATION,
                 transformation=transformations.CLASSIFICATION, lm_loss_weight=0.5,
                 dropout_rate=None, initializer_range=None, lm_loss_average="sequence",
                 **kwargs):
        kwargs.setdefault("name", "gpt_classifier")
        super().__init__(**kwargs)
        if task_type not in classifier_lib.TASK_TYPES:
            raise ValueError("task_type must be one of %s, not %r"
                             % (", ".join(classifier_lib.TASK_TYPES), task_type))
        if transformation not in transformations.TRANSFORMATIONS:
            raise ValueError("transformation must be one of %s, not %r"
                             % (", ".join(transformations.TRANSFORMATIONS), transformation))
        if transformation == transformations.MULTIPLE_CHOICE and (
                task_type != classifier_lib.CLASSIFICATION):
            raise ValueError("multiple choice is a classification over the candidates")
        if task_type == classifier_lib.REGRESSION:
            num_labels = 1
        if not num_labels or int(num_labels) < 1:
            raise ValueError("num_labels must be a positive integer, got %r" % (num_labels,))
        if lm_loss_weight < 0:
            raise ValueError("lm_loss_weight must be >= 0, got %r" % (lm_loss_weight,))
        if lm_loss_average not in LM_LOSS_AVERAGES:
            raise ValueError("lm_loss_average must be one of %s, not %r"
                             % (", ".join(LM_LOSS_AVERAGES), lm_loss_average))
        self.lm_loss_average = lm_loss_average
        self.encoder = encoder
        self.num_labels = int(num_labels)
        self.task_type = task_type
        self.transformation = transformation
        self.lm_loss_weight = float(lm_loss_weight)
        self.num_sequences = transformations.num_sequences(transformation, self.num_labels)
        self.set_head_rates(initializer_range,
                            encoder.resid_pdrop if dropout_rate is None else dropout_rate)
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy,
                                            name="dropout")
        rows = 1 if transformation == transformations.MULTIPLE_CHOICE else self.num_labels
        self.add_output_weights(rows, encoder.n_embd)
        self.build()

    @classmethod
    def from_config_object(cls, gpt_config, num_labels, task_type=classifier_lib.CLASSIFICATION,
                           transformation=transformations.CLASSIFICATION, lm_loss_weight=0.5,
                           dtype=None, lm_loss_average="sequence"):
        """A classifier over a fresh `GPTNetwork` of `gpt_config` plus the three framing rows."""
        kwargs = {} if dtype is None else {"dtype": dtype}
        encoder = GPTNetwork.from_config_object(
            gpt_config.replace(vocab_size=gpt_config.vocab_size + NUM_SPECIAL_TOKENS), **kwargs)
        return cls(encoder, num_labels, task_type=task_type, transformation=transformation,
                   lm_loss_weight=lm_loss_weight, lm_loss_average=lm_loss_average, **kwargs)

    # ------------------------------------------------------------------ call

    def _sequences(self, features):
        """`(ids, mask)` `[batch * num_sequences, seq]` of the stored end-to-end layout."""
        ids = tf.cast(features["input_ids"], tf.int32)
        mask = features.get("input_mask")
        mask = tf.ones_like(ids) if mask is None else tf.cast(mask, tf.int32)
        shape = [-1, tf.shape(ids)[-1] // self.num_sequences]
        return tf.reshape(ids, shape), tf.reshape(mask, shape)

    def call(self, features, training=None, return_lm_logits=False):
        ids, mask = self._sequences(features)
        outputs = self.encoder({"input_ids": ids, "input_mask": mask}, training=training)
        hidden = outputs["sequence_output"]
        # The extract token is each sequence's last real token (0 for padding rows).
        extract = tf.maximum(tf.reduce_sum(mask, axis=-1) - 1, 0)
        state = tf.gather(hidden, extract, batch_dims=1)          # [batch * n, E]
        state = self.dropout(state, training=training)
        weights = tf.cast(self.output_weights, state.dtype)
        if self.transformation == transformations.SIMILARITY:
            state = tf.reduce_sum(tf.reshape(state, [-1, 2, self.encoder.n_embd]), axis=1)
        logits = tf.cast(tf.matmul(state, weights, transpose_b=True), tf.float32)
        logits = logits + tf.cast(self.output_bias, tf.float32)
        if self.transformation == transformations.MULTIPLE_CHOICE:
            logits = tf.reshape(logits, [-1, self.num_sequences])
        result = {"logits": logits}
        if self.task_type == classifier_lib.CLASSIFICATION:
            result["probabilities"] = tf.nn.softmax(logits, axis=-1)
        elif self.task_type == classifier_lib.MULTI_LABEL:
            result["probabilities"] = tf.sigmoid(logits)
        else:
            result["predictions"] = logits[:, 0]
        if return_lm_logits:
            result["lm_logits"] = self.encoder.logits(hidden)
            result["sequence_ids"], result["sequence_mask"] = ids, mask
        return result

    def lm_loss_sum_and_count(self, outputs, features):
        """`(sum, count)` of the LM loss over the real examples' sequences.

        "sequence": (sum over sequences of each one's mean cross-entropy per
        predicted token, number of sequences); "token": (sum of the
        cross-entropies, number of predicted tokens).
        """
        ids, mask = outputs["sequence_ids"], outputs["sequence_mask"]
        targets, weights = next_token_targets(ids, mask)
        if "is_real_example" in features:
            real = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1, 1])
            real = tf.reshape(tf.tile(real, [1, self.num_sequences]), [-1, 1])
            weights = weights * real
        per_token = _per_example_cross_entropy(outputs["lm_logits"][:, :-1], targets)
        if self.lm_loss_average == "token":
            return tf.reduce_sum(weights * per_token), tf.reduce_sum(weights)
        tokens = tf.reduce_sum(weights, axis=-1)
        per_sequence = tf.math.divide_no_nan(tf.reduce_sum(weights * per_token, axis=-1),
                                             tokens)
        counted = tf.cast(tokens > 0, tf.float32)
        return tf.reduce_sum(per_sequence * counted), tf.reduce_sum(counted)

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})`: task loss + lm_loss_weight * LM loss."""
        outputs = self(features, training=training, return_lm_logits=True)
        task_loss, metrics = classifier_lib.task_loss_and_metrics(
            outputs, features, self.task_type, self.num_labels)
        lm_sum, lm_count = self.lm_loss_sum_and_count(outputs, features)
        lm_loss = tf.math.divide_no_nan(lm_sum, lm_count)
        loss = task_loss + self.lm_loss_weight * lm_loss
        metrics["lm_loss"] = (lm_sum, lm_count)
        examples = metrics["loss"][1]
        metrics["total_loss"] = (loss * examples, examples)
        return loss, metrics

    # ---------------------------------------------------------------- config

    def get_config(self):
        return self.encoder_model_config(
            num_labels=self.num_labels, task_type=self.task_type,
            transformation=self.transformation, lm_loss_weight=self.lm_loss_weight,
            dropout_rate=self.dropout_rate, initializer_range=self.initializer_range,
            lm_loss_average=self.lm_loss_average)


# ------------------------------------------------------------ input format


def is_end_of_word_vocab(vocab_file):
    """Whether `vocab_file` is GPT's `</w>` BPE vocabulary, not a byte-level one.

    GPT's (`openai-gpt`) words end in `</w>` and its base symbols are
    characters; a byte-level vocabulary holds all 256 byte symbols
    (`byte_bpe.bytes_to_unicode`). Raises `GPTBPEError` (naming the file)
    when the file is not a JSON vocabulary.
    """
    vocab = gpt_bpe.load_vocab(vocab_file)
    if all(symbol in vocab for symbol in byte_bpe.bytes_to_unicode().values()):
        return False
    return any(token.endswith(gpt_bpe.END_OF_WORD) for token in vocab)



class GPTInputFormat(InputFormat):
    """`run_classifier.py --model_family=gpt`: GPT's input transformations and head.

    Job fields used: `vocab_file` (vocab.json) and `merges_file`
    (merges.txt) of the BPE the model was pre-trained with: GPT's own
    lower-cased `</w>` BPE (`data.tokenizers.gpt_bpe`; OpenAI's `openai-gpt`
    and its fine-tunes) when the vocabulary's words end in `</w>` and it lacks
    the 256 byte symbols, else the byte-level BPE (`data.tokenizers.byte_bpe`;
    the demo's `--recipe=gpt`);
    `input_transformation` ("auto": classification for single texts,
    entailment for pairs, multiple_choice for a multiple-choice task; or
    "similarity" for symmetric pair tasks); `lm_loss_weight` (None: the
    paper's 0.5). `do_lower_case` does not apply (each BPE normalises text
    its own way: GPT's lower-cases, the byte-level one keeps the case).
    """

    def check(self):
        job = self.job
        for name in ("vocab_file", "merges_file"):
            if not getattr(job, name, None):
                raise ClassifierJobError(
                    "--%s is required for --model_family=gpt (the byte-level BPE's %s)"
                    % (name, "vocab.json" if name == "vocab_file" else "merges.txt"))
            if not os.path.isfile(getattr(job, name)):
                raise ClassifierJobError("--%s=%s: no such file" % (name, getattr(job, name)))
        transformation = getattr(job, "input_transformation", AUTO) or AUTO
        if transformation not in (AUTO,) + transformations.TRANSFORMATIONS:
            raise ClassifierJobError("--input_transformation=%s: expected one of %s"
                                     % (transformation, ", ".join(
                                         (AUTO,) + transformations.TRANSFORMATIONS)))
        weight = self.lm_loss_weight
        if weight < 0:
            raise ClassifierJobError("--lm_loss_weight=%s: must be >= 0 (0 disables the "
                                     "auxiliary language-model loss)" % weight)
        if job.export_dir:
            raise ClassifierJobError("--export_dir: a GPT classifier has no SavedModel export "
                                     "yet; leave --export_dir unset")
        if job.max_seq_length < 4:
            raise ClassifierJobError("--max_seq_length=%d is too short for GPT's <s> $ <e>"
                                     % job.max_seq_length)

    @property
    def lm_loss_weight(self):
        weight = getattr(self.job, "lm_loss_weight", None)
        return 0.5 if weight is None else float(weight)

    def tokenizer(self):
        job = self.job
        try:
            if is_end_of_word_vocab(job.vocab_file):
                tokenizer = gpt_bpe.GPTBPETokenizer(job.vocab_file, job.merges_file)
            else:
                tokenizer = byte_bpe.ByteBPETokenizer(job.vocab_file, job.merges_file)
        except (byte_bpe.ByteBPEError, gpt_bpe.GPTBPEError) as e:
            raise ClassifierJobError(str(e)) from None
        if tokenizer.vocab_size != self.config.vocab_size:
            raise ClassifierJobError(
                "The vocabulary %s has %d tokens but the GPT config %s says vocab_size=%d; "
                "use the vocab.json that belongs to the model."
                % (job.vocab_file, tokenizer.vocab_size, job.bert_config_file,
                   self.config.vocab_size))
        return tokenizer

    def prepare(self, processor, task_type, label_list, num_labels):
        if not getattr(processor, "needs_tokenizer", True):
            raise ClassifierJobError("--model_family=gpt reads text; %s gives token ids"
                                     % type(processor).__name__)
        requested = getattr(self.job, "input_transformation", AUTO) or AUTO
        choice_task = bool(getattr(processor, "is_multiple_choice", False))
        if choice_task:
            if requested not in (AUTO, transformations.MULTIPLE_CHOICE):
                raise ClassifierJobError(
                    "--input_transformation=%s: %s is a multiple-choice task (use auto or "
                    "multiple_choice)" % (requested, type(processor).__name__))
            self.transformation = transformations.MULTIPLE_CHOICE
        elif requested == transformations.MULTIPLE_CHOICE:
            raise ClassifierJobError("--input_transformation=multiple_choice needs a "
                                     "multiple-choice task (--task_name=multiple_choice)")
        elif requested == AUTO:
            # One sequence: `<s> text <e>` for a single text, `<s> a $ b <e>`
            # for a pair (the classification transformation frames both).
            self.transformation = transformations.CLASSIFICATION
        else:
            self.transformation = requested
        self.num_labels = num_labels
        self.special = transformations.special_ids_after(self.config.vocab_size)
        logging.info("GPT input transformation: %s (special ids %s)", self.transformation,
                     tuple(self.special))

    @property
    def _num_sequences(self):
        return transformations.num_sequences(self.transformation, self.num_labels)

    def write_records(self, examples, path, label_list, task_type, tokenizer):
        transformations.file_based_convert_gpt_examples(
            examples, label_list, self.job.max_seq_length, tokenizer, self.special,
            self.transformation, path, task_type, num_choices=self.num_labels)
        return path

    def input_fn(self, path, batch_size, is_training, task_type, num_labels):
        return processors_lib.file_based_input_fn_builder(
            path, self._num_sequences * self.job.max_seq_length, is_training=is_training,
            drop_remainder=True, batch_size=batch_size, task_type=task_type,
            num_labels=num_labels, seed=self.job.seed)

    def build_model(self, num_labels, task_type):
        return GPTClassifier.from_config_object(
            self.config, num_labels, task_type=task_type, transformation=self.transformation,
            lm_loss_weight=self.lm_loss_weight)

    def init_model(self, model, checkpoint):
        """Loads a pre-trained GPT (`V` rows) into the classifier's encoder (`V + 3` rows)."""
        pretrained = GPTNetwork.from_config_object(self.config, dtype=model.encoder.dtype_policy)
        report = checkpoints.init_from_checkpoint(pretrained, checkpoint)
        added = model.encoder.copy_weights_from(pretrained)
        logging.info("Initialised the GPT decoder from %s; %d new token rows (<s>, $, <e>)",
                     checkpoint, added)
        return report


FORMATS.register("gpt", GPTInputFormat)
