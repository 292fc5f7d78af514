"""`BertMultipleChoice`: an encoder scoring N candidates, a softmax across them.

The ARCT and SWAG setup for BERT-style encoders (BERT, ALBERT, XLNet's
summary): each of an example's N candidates is packed with the context as a
pair, ``[CLS] context [SEP] choice_i [SEP]`` (`data.processors.choice`),
every pair goes through the same encoder, ONE shared dense layer turns each
pooled output into a score, and the softmax runs over the example's N
scores:

    score_i   = dropout(pooled(context, choice_i)) . output_weights + output_bias
    P(i)      = exp(score_i) / sum_j exp(score_j)          (over candidates)
    loss      = -log P(label)

So a candidate's score never depends on the other candidates (permuting the
candidates permutes the probabilities), and the probabilities of an
example's candidates sum to 1.

Inputs are the classifier features with the candidates end to end:
`input_ids`, `input_mask`, `segment_ids` of shape
``[batch, num_choices * max_seq_length]`` (or already
``[batch, num_choices, max_seq_length]``); outputs `logits` and
`probabilities` ``[batch, num_choices]``. The loss and metrics are
`classification.task_loss_and_metrics`' (accuracy, loss; padding examples
weighted 0). Weights: `encoder`, and Google's classifier names
`output_weights` ``[1, hidden]`` and `output_bias` ``[1]``.
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.tasks import classification

__all__ = ["BertMultipleChoice"]

_ID_FEATURES = ("input_ids", "input_mask", "segment_ids")


@keras.saving.register_keras_serializable(package="bert_family")
class BertMultipleChoice(classification.BertClassifier):
    """An encoder plus one shared scoring layer over each candidate's pooled output.

    Args:
        encoder: a `BertEncoder` (or any encoder with a pooled output).
        num_choices: candidates per example (>= 2).
        dropout_rate, initializer_range: as `BertClassifier`'s.
    """

    def __init__(self, encoder, num_choices, dropout_rate=None, initializer_range=None,
                 **kwargs):
        if isinstance(num_choices, bool) or not isinstance(num_choices, int) or num_choices < 2:
            raise ValueError("num_choices must be an integer >= 2, got %r" % (num_choices,))
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(encoder, num_labels=1, task_type=classification.CLASSIFICATION,
                         dropout_rate=dropout_rate, initializer_range=initializer_range,
                         **kwargs)
        self.num_choices = num_choices

    @classmethod
    def from_config_object(cls, bert_config, num_choices, dtype=None,
                           family=registry.DEFAULT_FAMILY, **encoder_kwargs):
        """A multiple-choice model over a fresh encoder of `family` for its config."""
        kwargs = {} if dtype is None else {"dtype": dtype}
        encoder = registry.build_encoder(bert_config, family, **kwargs, **encoder_kwargs)
        return cls(encoder, num_choices=num_choices,
                   dropout_rate=bert_config.hidden_dropout_prob,
                   initializer_range=bert_config.initializer_range, **kwargs)

    def call(self, features, training=None):
        """Returns `logits` and `probabilities`, both ``[batch, num_choices]``."""
        flat = {}
        for name in _ID_FEATURES:
            if name not in features:
                continue
            value = features[name]
            # [batch, C * L] or [batch, C, L] -> [batch * C, L].
            flat[name] = tf.reshape(value, [-1, tf.shape(value)[-1] // self.num_choices]
                                    if value.shape.rank == 2 else [-1, tf.shape(value)[-1]])
        pooled = self.encoder(flat, training=training)["pooled_output"]
        pooled = self.dropout(pooled, training=training)
        scores = tf.matmul(pooled, tf.cast(self.output_weights, pooled.dtype), transpose_b=True)
        scores = tf.cast(scores, tf.float32) + tf.cast(self.output_bias, tf.float32)
        logits = tf.reshape(scores, [-1, self.num_choices])
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})`: cross-entropy over the candidates, accuracy."""
        outputs = self(features, training=training)
        return classification.task_loss_and_metrics(
            outputs, features, classification.CLASSIFICATION, self.num_choices)

    def get_config(self):
        config = super().get_config()
        del config["num_labels"], config["task_type"]
        config["num_choices"] = self.num_choices
        return config
