"""`BertTagger`: BERT fine-tuned for token tagging (NER), optionally with a linear-chain CRF.

The encoder's `sequence_output`, dropout (the config's `hidden_dropout_prob`)
and one dense layer give per-token tag scores ``logits [batch, seq, num_labels]``.
Only positions with ``label_mask`` 1 (the first word piece of each word, see
`data.processors.conll`) count.

Without a CRF, each labelled position is scored by softmax cross-entropy and
predicted by argmax. With ``use_crf=True`` the labelled positions of a
sentence are gathered into a left-aligned sequence of length ``n`` (its
word count) and scored by a linear-chain CRF with a transition matrix
``A [num_labels, num_labels]`` and start/end scores ``s``, ``e``:

    score(y) = s[y_1] + sum_t logits_t[y_t] + sum_{t>1} A[y_{t-1}, y_t] + e[y_n]
    loss     = log Z - score(gold),  log Z = logsumexp over all y of score(y)

(log Z by the forward algorithm); predictions are the Viterbi path, written
back to the word positions. `crf_log_norm`, `crf_sequence_score` and
`viterbi_decode` are plain functions of (potentials, lengths, parameters).

`compute_loss_and_metrics(features, training)` follows the trainer contract:
the loss is averaged over labelled tokens (softmax) or real sentences (CRF),
and the metrics are ``loss`` and ``accuracy`` (over labelled tokens of real
sentences, `is_real_example` 1). Entity-level F1 needs whole sentences and
is computed after `predict` (`modeling.tasks.seqeval`).

    >>> model = BertTagger.from_config_object(bert_config, num_labels=9, use_crf=True)
    >>> model(features)["predicted_ids"].shape     # [batch, seq]

``word_predicted_ids`` holds the same predictions in word order (word `i` of
row `b` at `[b, i]`), which is what the job reads: it does not depend on where
the padding is (XLNet pads on the left) nor on batches cut to their length.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.encoder_models import EncoderModel

__all__ = ["BertTagger", "crf_sequence_score", "crf_log_norm", "viterbi_decode",
           "compact_positions", "word_order"]


def crf_sequence_score(potentials, tags, lengths, transitions, start, end):
    """score(tags) per sentence: potentials [B, T, K], tags [B, T] int, lengths [B]."""
    potentials = tf.convert_to_tensor(potentials, tf.float32)
    tags = tf.cast(tags, tf.int32)
    max_len = tf.shape(potentials)[1]
    mask = tf.sequence_mask(lengths, max_len, dtype=tf.float32)
    unary = tf.gather(potentials, tags, axis=2, batch_dims=2) * mask
    score = tf.reduce_sum(unary, axis=1)
    pair = tf.gather_nd(transitions, tf.stack([tags[:, :-1], tags[:, 1:]], axis=-1))
    score += tf.reduce_sum(pair * mask[:, 1:], axis=1)
    has_words = tf.cast(lengths > 0, tf.float32)
    last = tf.gather(tags, tf.maximum(lengths - 1, 0), axis=1, batch_dims=1)
    score += (tf.gather(start, tags[:, 0]) + tf.gather(end, last)) * has_words
    return score


def _forward(potentials, lengths, transitions, start, reduce):
    """Runs the forward recursion with `reduce` (logsumexp or max over the previous tag).

    Returns (final alphas [B, K], per-step backpointers [T-1, B, K] for max).
    """
    max_len = tf.shape(potentials)[1]
    mask = tf.sequence_mask(lengths, max_len)
    alpha0 = start[None, :] + potentials[:, 0]
    steps = tf.transpose(potentials[:, 1:], [1, 0, 2])            # [T-1, B, K]
    step_mask = tf.transpose(mask[:, 1:], [1, 0])                  # [T-1, B]
    num_labels = tf.shape(transitions)[0]
    identity = tf.broadcast_to(tf.range(num_labels)[None, :], tf.shape(alpha0))

    def body(carry, inputs):
        alpha, _ = carry
        emit, live = inputs
        scores = alpha[:, :, None] + transitions[None]            # [B, K_prev, K]
        if reduce == "logsumexp":
            new = tf.reduce_logsumexp(scores, axis=1) + emit
            pointers = identity
        else:
            new = tf.reduce_max(scores, axis=1) + emit
            pointers = tf.argmax(scores, axis=1, output_type=tf.int32)
        live = live[:, None]
        return (tf.where(live, new, alpha), tf.where(live, pointers, identity))

    alphas, pointers = tf.scan(body, (steps, step_mask), initializer=(alpha0, identity))
    final = tf.cond(max_len > 1, lambda: alphas[-1], lambda: alpha0)
    return final, pointers


def crf_log_norm(potentials, lengths, transitions, start, end):
    """log Z per sentence (0 for empty sentences)."""
    potentials = tf.convert_to_tensor(potentials, tf.float32)
    final, _ = _forward(potentials, lengths, transitions, start, "logsumexp")
    log_z = tf.reduce_logsumexp(final + end[None, :], axis=1)
    return tf.where(lengths > 0, log_z, tf.zeros_like(log_z))


def viterbi_decode(potentials, lengths, transitions, start, end):
    """The best tag sequences [B, T] (positions past a sentence's length repeat its last tag)."""
    potentials = tf.convert_to_tensor(potentials, tf.float32)
    final, pointers = _forward(potentials, lengths, transitions, start, "max")
    best_last = tf.argmax(final + end[None, :], axis=1, output_type=tf.int32)

    def back(tag, pointer):
        return tf.gather(pointer, tag, axis=1, batch_dims=1)

    # Walk the backpointers from the last step to the first; padded steps hold
    # the identity, so the last real tag is carried through them.
    previous = tf.scan(back, pointers, initializer=best_last, reverse=True)  # [T-1, B]
    path = tf.concat([tf.transpose(previous, [1, 0]), best_last[:, None]], axis=1)
    return path


def compact_positions(label_mask):
    """(positions [B, S], lengths [B]): the labelled positions of each row first, in order."""
    label_mask = tf.cast(label_mask, tf.int32)
    positions = tf.argsort(1 - label_mask, axis=1, stable=True)
    return positions, tf.reduce_sum(label_mask, axis=1)


def word_order(values, label_mask):
    """`values [B, S]` at the labelled positions, in order, left-aligned: `[B, S]`, 0 past
    each row's word count. Where the words are does not matter (padding on either
    side, batches cut to their length): row `b`'s word `i` is at `[b, i]`."""
    positions, lengths = compact_positions(label_mask)
    gathered = tf.gather(values, positions, batch_dims=1)
    keep = tf.sequence_mask(lengths, tf.shape(values)[1])
    return tf.where(keep, gathered, tf.zeros_like(gathered))


@keras.saving.register_keras_serializable(package="bert_family")
class BertTagger(EncoderModel, keras.Model):
    """An encoder plus a dense tag layer per token, optionally a CRF.

    Args:
        encoder: a `BertEncoder` (or a model with `sequence_output` and `hidden_size`).
        num_labels: number of tags.
        use_crf: score and decode with a linear-chain CRF.
        dropout_rate, initializer_range: default the encoder's.
    """

    def __init__(self, encoder, num_labels, use_crf=False, dropout_rate=None,
                 initializer_range=None, **kwargs):
        kwargs.setdefault("name", "bert_tagger")
        super().__init__(**kwargs)
        if not num_labels or int(num_labels) < 1:
            raise ValueError("num_labels must be a positive integer, got %r." % (num_labels,))
        self.encoder = encoder
        self.num_labels = int(num_labels)
        self.use_crf = bool(use_crf)
        self.set_head_rates(initializer_range, dropout_rate)
        self.dropout = keras.layers.Dropout(self.dropout_rate, name="dropout")
        hidden = encoder.hidden_size
        self.add_output_weights(self.num_labels, hidden)
        if self.use_crf:
            self.transitions = self.add_weight(name="crf_transitions",
                                               shape=(self.num_labels, self.num_labels),
                                               initializer="zeros")
            self.start_transitions = self.add_weight(name="crf_start", shape=(self.num_labels,),
                                                     initializer="zeros")
            self.end_transitions = self.add_weight(name="crf_end", shape=(self.num_labels,),
                                                   initializer="zeros")
        self.build()

    @classmethod
    def from_config_object(cls, bert_config, num_labels, use_crf=False,
                           family=registry.DEFAULT_FAMILY, **encoder_kwargs):
        encoder = registry.build_encoder(bert_config, family, **encoder_kwargs)
        return cls(encoder, num_labels=num_labels, use_crf=use_crf,
                   dropout_rate=bert_config.hidden_dropout_prob,
                   initializer_range=bert_config.initializer_range)

    def _crf_params(self):
        return (tf.cast(self.transitions, tf.float32), tf.cast(self.start_transitions, tf.float32),
                tf.cast(self.end_transitions, tf.float32))

    def call(self, features, training=None):
        """`logits [B, S, K]` and `predicted_ids [B, S]` (meaningful where label_mask is 1)."""
        sequence = self.encoder(features, training=training)["sequence_output"]
        sequence = self.dropout(sequence, training=training)
        logits = tf.einsum("bsh,kh->bsk", sequence, tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        outputs = {"logits": logits}
        if self.use_crf and "label_mask" in features:
            positions, lengths = compact_positions(features["label_mask"])
            compact = tf.gather(logits, positions, batch_dims=1)
            path = viterbi_decode(compact, lengths, *self._crf_params())
            inverse = tf.argsort(positions, axis=1)
            outputs["predicted_ids"] = tf.gather(path, inverse, batch_dims=1)
        else:
            outputs["predicted_ids"] = tf.argmax(logits, axis=-1, output_type=tf.int32)
        if "label_mask" in features:
            outputs["word_predicted_ids"] = word_order(outputs["predicted_ids"],
                                                       features["label_mask"])
        return outputs

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (see the module docstring)."""
        outputs = self(features, training=training)
        logits = outputs["logits"]
        labels = tf.cast(features["label_ids"], tf.int32)
        real = tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])
        token_weights = tf.cast(features["label_mask"], tf.float32) * real[:, None]
        if self.use_crf:
            positions, lengths = compact_positions(features["label_mask"])
            compact = tf.gather(logits, positions, batch_dims=1)
            compact_labels = tf.gather(labels, positions, batch_dims=1)
            params = self._crf_params()
            per_sentence = (crf_log_norm(compact, lengths, *params)
                            - crf_sequence_score(compact, compact_labels, lengths, *params))
            weights = real * tf.cast(lengths > 0, tf.float32)
            loss_sum, count = tf.reduce_sum(weights * per_sentence), tf.reduce_sum(weights)
        else:
            per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits)
            loss_sum = tf.reduce_sum(token_weights * per_token)
            count = tf.reduce_sum(token_weights)
        loss = tf.math.divide_no_nan(loss_sum, count)
        correct = tf.cast(tf.equal(outputs["predicted_ids"], labels), tf.float32)
        metrics = {"loss": (loss_sum, count),
                   "accuracy": (tf.reduce_sum(correct * token_weights),
                                tf.reduce_sum(token_weights))}
        return loss, metrics

    def get_config(self):
        return self.encoder_model_config(
            with_dtype=False, num_labels=self.num_labels, use_crf=self.use_crf,
            dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
