"""`BertSpanQA`: an encoder plus one dense layer giving start and end logits (SQuAD).

google-research/bert's `run_squad.create_model` as a Keras 3 model:

    logits = sequence_output @ output_weights^T + output_bias     # [batch, seq, 2]
    start_logits, end_logits = logits[..., 0], logits[..., 1]

with Google's variable layout (`cls/squad/output_weights` `[2, hidden]`,
`cls/squad/output_bias` `[2]`, truncated normal 0.02 and zeros). Padding
positions (`input_mask` 0) get -10000 added to both logits, so no probability
lands on them.

`compute_loss_and_metrics(features, training)` follows the trainer contract:
the loss is Google's, the mean of the start and the end cross-entropy over the
window's positions against `start_positions` / `end_positions` (0, the `[CLS]`
token, when the window holds no answer); metrics `loss`, `start_accuracy`,
`end_accuracy` as (sum, count).
"""

import keras
import tensorflow as tf

from modeling import registry
from modeling.layers.encoder_models import EncoderModel

__all__ = ["BertSpanQA"]

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


@keras.saving.register_keras_serializable(package="bert_family")
class BertSpanQA(EncoderModel, keras.Model):
    """Start/end logits over every position of an encoder's `sequence_output`.

    Args:
        encoder: a `BertEncoder` (or any encoder with `sequence_output` and
            `hidden_size`).
        initializer_range: stddev of `output_weights`; default the encoder's.
        **kwargs: Keras `Model` arguments.
    """

    def __init__(self, encoder, initializer_range=None, **kwargs):
        kwargs.setdefault("name", "bert_span_qa")
        super().__init__(**kwargs)
        self.encoder = encoder
        self.set_head_rates(initializer_range)
        self.add_output_weights(2, encoder.hidden_size)
        self.build()

    @classmethod
    def from_config_object(cls, bert_config, family=registry.DEFAULT_FAMILY, **encoder_kwargs):
        """A span-QA model over a fresh encoder of `family` for `bert_config`."""
        encoder = registry.build_encoder(bert_config, family, **encoder_kwargs)
        return cls(encoder, initializer_range=bert_config.initializer_range)

    def call(self, features, training=None):
        """`start_logits`, `end_logits`: `[batch, seq]` float32."""
        inputs = {name: features[name] for name in ENCODER_INPUTS if name in features}
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = tf.einsum("bsh,kh->bsk", sequence, tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        mask = tf.cast(features["input_mask"], tf.float32)
        logits += (1.0 - mask)[:, :, None] * -10000.0
        return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}

    def compute_loss_and_metrics(self, features, training=None):
        """`(loss, {name: (sum, count)})` for the trainer (see the module docstring)."""
        outputs = self(features, training=training)
        starts = tf.reshape(tf.cast(features["start_positions"], tf.int32), [-1])
        ends = tf.reshape(tf.cast(features["end_positions"], tf.int32), [-1])
        start_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=starts, logits=outputs["start_logits"])
        end_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=ends, logits=outputs["end_logits"])
        per_example = (start_loss + end_loss) / 2.0
        count = tf.cast(tf.size(per_example), tf.float32)
        loss_sum = tf.reduce_sum(per_example)

        def correct(logits, labels):
            predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))

        metrics = {"loss": (loss_sum, count),
                   "start_accuracy": (correct(outputs["start_logits"], starts), count),
                   "end_accuracy": (correct(outputs["end_logits"], ends), count)}
        return tf.math.divide_no_nan(loss_sum, count), metrics

    def get_config(self):
        return self.encoder_model_config(with_dtype=False,
                                         initializer_range=self.initializer_range)
