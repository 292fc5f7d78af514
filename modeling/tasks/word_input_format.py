"""run_classifier's input format for word-level families (ELMo, ULMFiT, CoVe), and a frozen-feature classifier.

The Transformer families read WordPiece ids; the pre-Transformer ones read
whole words from a word vocabulary (`data.word_vocab.WordVocabulary`:
``<S> </S> <UNK>`` then one word per line) and, for ELMo, each word's
characters. `WordInputFormat` frames an example as

    input_ids    <S> words_a </S> [words_b </S>]   cut to max_seq_length, 0-padded
    input_mask   1 for a word, 0 for padding (padding at the end)
    segment_ids  0 for <S> a </S>, 1 for b </S>
    char_ids     [max_seq_length, max_characters_per_token]   (only `uses_char_ids`)

with Google's truncation of pairs and Google's record layout otherwise
(`label_ids`, `is_real_example`), so processors, labels, metrics, padding
of the last batch and the trainer are run_classifier's own. Words come from
Google's `BasicTokenizer` (punctuation split off, CJK characters one by one,
lower-cased with `--do_lower_case`), the tokenizer ELMo's pre-training
pipeline uses.

A family subclasses it with `build_model` and `init_model` and registers
the subclass in `input_formats.FORMATS` under its name; then

    python run/run_classifier.py --model_family=elmo --task_name=... \
        --bert_config_file=DIR/elmo_options.json --vocab_file=vocab.txt \
        --init_checkpoint=DIR ...

fine-tunes it. ELMo and CoVe are used as *features* (Peters et al. 2018;
McCann et al. 2017): `FrozenFeatureClassifier` keeps the pre-trained
network's weights fixed and trains a task model over its outputs (an
optional trainable combiner such as ELMo's `ScalarMix`, a BiLSTM,
max-pooling over the words, dropout, a dense layer).
`load_network_weights` restores such a network from a `run_pretraining.py`
output directory.
"""

import keras
import numpy as np
import tensorflow as tf

from data import atomic
from data import packing
from data import processors as processors_lib
from data import tokenization
from data import word_vocab
from data.processors import features as features_lib
from modeling import checkpoints
from modeling.checkpoints import object_based
from modeling.tasks import classification
from modeling.tasks import input_formats
from modeling.tasks.input_formats import ClassifierJobError

__all__ = ["FrozenFeatureClassifier", "WordInputFormat", "WordTokenizer",
           "load_network_weights", "packed_words", "word_features"]


class WordTokenizer:
    """Text -> words (Google's BasicTokenizer) and words -> ids of a `WordVocabulary`."""

    def __init__(self, vocab, do_lower_case=True):
        self.vocab = vocab
        self.basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)

    def tokenize(self, text):
        return self.basic.tokenize(text)

    def convert_tokens_to_ids(self, words):
        return self.vocab.ids(words)


def packed_words(words_a, words_b, max_seq_length):
    """``<S> a </S> [b </S>]`` and its segment ids, unpadded.

    Pairs are cut by Google's `truncate_seq_pair` to ``max_seq_length - 3``
    words, a single text keeps its first ``max_seq_length - 2``.
    """
    words_a, words_b = list(words_a), list(words_b or [])
    if words_b:
        packing.truncate_seq_pair(words_a, words_b, max_seq_length - 3)
    else:
        words_a = words_a[: max_seq_length - 2]
    return packing.pack(words_a, words_b or None, max_seq_length,
                        cls=word_vocab.BOS, sep=word_vocab.EOS)


def word_features(words_a, words_b, tokenizer, max_seq_length, max_characters_per_token=None):
    """(input_ids, input_mask, segment_ids[, char_ids]) of one example's words, padded (see
    `packed_words`)."""
    words, segment_ids = packed_words(words_a, words_b, max_seq_length)
    padded = packing.pad(tokenizer.convert_tokens_to_ids(words), segment_ids, max_seq_length)
    if max_characters_per_token is None:
        return tuple(padded)
    char_ids = np.zeros([max_seq_length, max_characters_per_token], np.int64)
    for i, word in enumerate(words):
        char_ids[i] = word_vocab.word_char_ids(word, max_characters_per_token)
    return tuple(padded) + (char_ids,)


class WordInputFormat(input_formats.InputFormat):
    """Words of a word vocabulary as run_classifier's records (see the module docstring).

    Subclasses set `uses_char_ids` and implement `build_model` and
    `init_model`.
    """

    uses_char_ids = False

    @property
    def max_characters_per_token(self):
        return int(getattr(self.config, "max_characters_per_token", 50))

    def check(self):
        job = self.job
        if getattr(job, "lm_loss_weight", None) is not None:
            raise ClassifierJobError("--lm_loss_weight: --model_family=%s has no auxiliary "
                                     "language-model loss in run_classifier" % job.model_family)
        if (getattr(job, "input_transformation", None) or "auto") != "auto":
            raise ClassifierJobError("--input_transformation=%s: --model_family=%s reads "
                                     "<S> a </S> b </S>; only auto applies"
                                     % (job.input_transformation, job.model_family))
        if job.max_seq_length < 3:
            raise ClassifierJobError("--max_seq_length=%d: a word-level model needs at least 3 "
                                     "(<S>, a word, </S>)" % job.max_seq_length)
        vocab_size = getattr(self.config, "vocab_size", None)
        if vocab_size is not None and len(self.vocabulary()) != vocab_size:
            raise ClassifierJobError(
                "--vocab_file=%s has %d words but --bert_config_file=%s says vocab_size=%d"
                % (job.vocab_file, len(self.vocabulary()), job.bert_config_file, vocab_size))

    def vocabulary(self):
        if getattr(self, "_vocab", None) is None:
            if not self.job.vocab_file:
                raise ClassifierJobError("--vocab_file: --model_family=%s needs its word "
                                         "vocabulary (<S> </S> <UNK>, then one word per line)"
                                         % self.job.model_family)
            try:
                self._vocab = word_vocab.WordVocabulary(self.job.vocab_file)
            except (ValueError, OSError) as e:
                raise ClassifierJobError("--vocab_file: %s" % e) from e
        return self._vocab

    def tokenizer(self):
        return WordTokenizer(self.vocabulary(), self.job.do_lower_case)

    def prepare(self, processor, task_type, label_list, num_labels):
        if getattr(processor, "is_multiple_choice", False):
            raise ClassifierJobError(
                "--task_name: --model_family=%s has no multiple-choice model; use a "
                "pair or single-text classification task" % self.job.model_family)

    def _example_features(self, example, label_list, task_type, tokenizer, index):
        if isinstance(example, features_lib.PaddingInputExample):
            feats = features_lib.convert_single_example(
                index, example, label_list, self.job.max_seq_length, None, task_type)
            char_ids = np.zeros([self.job.max_seq_length, self.max_characters_per_token])
            return feats, char_ids
        if isinstance(example, processors_lib.IdsInputExample):
            raise ClassifierJobError(
                "%s: --model_family=%s reads text, not token ids (task_name=ids)"
                % (example.describe(), self.job.model_family))
        packed = word_features(
            tokenizer.tokenize(example.text_a or ""),
            tokenizer.tokenize(example.text_b) if example.text_b else None,
            tokenizer, self.job.max_seq_length,
            self.max_characters_per_token if self.uses_char_ids else None)
        feats = features_lib.convert_single_example(
            index, example, label_list, self.job.max_seq_length, None, task_type,
            pack_fn=lambda _: packed[:3])
        return feats, (packed[3] if self.uses_char_ids else None)

    def write_records(self, examples, path, label_list, task_type, tokenizer):
        outputs = atomic.TemporaryOutputs([path])
        try:
            with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
                for index, example in enumerate(examples):
                    feats, char_ids = self._example_features(
                        example, label_list, task_type, tokenizer, index)
                    record = features_lib.serialize_features(feats, task_type)
                    if self.uses_char_ids:
                        parsed = tf.train.Example.FromString(record)
                        parsed.features.feature["char_ids"].int64_list.value.extend(
                            int(v) for v in np.asarray(char_ids).reshape([-1]))
                        record = parsed.SerializeToString()
                    writer.write(record)
            outputs.commit()
        finally:
            outputs.discard()
        return path

    def input_fn(self, path, batch_size, is_training, task_type, num_labels):
        base = features_lib.file_based_input_fn_builder(
            path, self.job.max_seq_length, is_training=is_training, drop_remainder=True,
            batch_size=batch_size, task_type=task_type, num_labels=num_labels,
            seed=self.job.seed)
        if not self.uses_char_ids:
            return base
        length, chars = self.job.max_seq_length, self.max_characters_per_token
        spec = features_lib.classifier_feature_spec(length, task_type, num_labels)
        spec["char_ids"] = tf.io.FixedLenFeature([length * chars], tf.int64)

        def input_fn(input_context=None):
            from data import input_pipeline  # pylint: disable=g-import-not-at-top

            def reshape(features):
                features = dict(features)
                features["char_ids"] = tf.reshape(features["char_ids"], [-1, length, chars])
                return features

            d = input_pipeline.tfrecord_dataset(
                path, spec, batch_size, is_training, input_context=input_context,
                seed=self.job.seed, drop_remainder=True)
            return d.map(reshape)

        return input_fn


def load_network_weights(network, checkpoint):
    """Restores a pre-trained `network` from a trainer checkpoint (a model dir or ckpt-N prefix).

    The network's variables are matched by their path below the network's
    own name (the pre-training model holds the network under the same
    name), so a classifier's copy loads from `run_pretraining.py`'s output.
    Every network variable must be found with its shape; one
    `CheckpointMismatchError` lists what is not. Returns the number of
    variables loaded.
    """
    fmt, prefix = checkpoints.resolve_checkpoint(checkpoint)
    if fmt != checkpoints.OBJECT_BASED:
        raise checkpoints.CheckpointFormatError(
            "%s: a %s network loads from this project's own checkpoints (run_pretraining.py's "
            "output), not a %s checkpoint" % (checkpoint, network.name, fmt))
    reader = tf.train.load_checkpoint(prefix)
    stored = object_based.model_variable_keys(reader, prefix)
    own = network.name + "/"

    def relative(path):
        # Keras names a variable from the layer scopes it was built in: below
        # the network's name, or (sub-layers built in its constructor) without it.
        at = path.find(own)
        if at == 0 or (at > 0 and path[at - 1] == "/"):
            return path[at + len(own):]
        return path

    by_relative = {}
    for full_name, key in stored.items():
        by_relative.setdefault(relative(full_name), key)
    shapes = reader.get_variable_to_shape_map()
    plan, missing, mismatched = [], [], []
    for variable in network.weights:
        if "seed_generator" in variable.path:
            continue
        key = by_relative.get(relative(variable.path))
        if key is None:
            missing.append((variable.path, tuple(variable.shape)))
        elif tuple(shapes[key]) != tuple(variable.shape):
            mismatched.append((variable.path, tuple(shapes[key]), tuple(variable.shape)))
        else:
            plan.append((variable, key))
    if missing or mismatched:
        raise checkpoints.CheckpointMismatchError(
            prefix, "the %s network of this config" % network.name, missing=missing,
            mismatched=mismatched)
    for variable, key in plan:
        variable.assign(reader.get_tensor(key))
    return len(plan)


class _Frozen(tf.Module):
    """Tracks a list of variables under stable names (for checkpoints only)."""

    def __init__(self, variables):
        super().__init__(name="frozen_weights")
        for i, variable in enumerate(variables):
            setattr(self, "w%d" % i, variable)


@keras.saving.register_keras_serializable(package="bert_family")
class FrozenFeatureClassifier(keras.Model):
    """A task model over a frozen pre-trained network's word features.

    Args:
        feature_network: the pre-trained network (its weights are not trained).
        features_fn: ``features_fn(network, features, training) -> outputs``:
            runs the network (always with ``training=False``) and returns what
            `combiner` takes, or a ``[batch, words, dim]`` tensor.
        num_labels, task_type: as `BertClassifier`.
        feature_dim: the last dimension of the features (the model builds
            every weight at construction, as the trainer's optimizer needs).
        combiner: an optional trainable layer from the network's outputs to
            ``[batch, words, dim]`` (ELMo's `ScalarMix`; built here). It is
            called with ``mask=input_mask``, and a ``regularization_loss()``
            it has (ScalarMix's lambda ||s||^2) is added to the task loss.
        hidden_size: units of each direction of the task BiLSTM.
        dropout_rate: dropout before the BiLSTM and before the output layer.
    """

    def __init__(self, feature_network, features_fn, num_labels, feature_dim,
                 task_type=classification.CLASSIFICATION, combiner=None, hidden_size=64,
                 dropout_rate=0.2, **kwargs):
        kwargs.setdefault("name", "feature_classifier")
        super().__init__(**kwargs)
        self.encoder = feature_network
        self.encoder.trainable = False
        # The trainer's checkpoints reach a model's variables through the
        # object graph and the optimizer; a frozen network's weights held in
        # lists of layers would be in neither, so a resumed or evaluation-only
        # run would lose them. A plain tracked container keeps every one.
        self.frozen_weights = _Frozen(feature_network.weights)
        self.features_fn = features_fn
        self.num_labels = num_labels
        self.task_type = task_type
        self.combiner = combiner
        self.hidden_size = hidden_size
        self.input_dropout = keras.layers.Dropout(dropout_rate)
        self.task_lstm = keras.layers.Bidirectional(
            keras.layers.LSTM(hidden_size, return_sequences=True), name="task_bilstm")
        self.output_dropout = keras.layers.Dropout(dropout_rate)
        self.output_layer = keras.layers.Dense(
            1 if task_type == classification.REGRESSION else num_labels, name="output")
        self.feature_dim = feature_dim
        if combiner is not None:
            combiner.build(None)
        self.task_lstm.build((None, None, feature_dim))
        self.output_layer.build((None, 2 * hidden_size))
        self.built = True

    def call(self, features, training=None):
        outputs = self.features_fn(self.encoder, features, False)
        outputs = tf.nest.map_structure(tf.stop_gradient, outputs)
        hidden = (self.combiner(outputs, mask=features["input_mask"])
                  if self.combiner is not None else outputs)
        hidden = tf.cast(hidden, self.compute_dtype)
        mask = tf.cast(features["input_mask"], tf.bool)
        hidden = self.input_dropout(hidden, training=training)
        hidden = self.task_lstm(hidden, mask=mask, training=training)
        # Max-pooling over the words (padding never wins).
        very_negative = tf.cast(-1e4, hidden.dtype)
        pooled = tf.reduce_max(tf.where(mask[:, :, None], hidden, very_negative), axis=1)
        pooled = self.output_dropout(pooled, training=training)
        logits = tf.cast(self.output_layer(pooled), tf.float32)
        return classification.outputs_of_logits(logits, self.task_type)

    def compute_loss_and_metrics(self, features, training=None):
        outputs = self(features, training=training)
        loss, metrics = classification.task_loss_and_metrics(outputs, features, self.task_type,
                                                             self.num_labels)
        regularization = getattr(self.combiner, "regularization_loss", None)
        if regularization is not None:
            loss += regularization()
        return loss, metrics
