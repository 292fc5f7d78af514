"""ULMFiT's classifier: the fine-tuned AWD-LSTM, concat pooling and fastai's head.

    input_ids -> AwdLstm (all of it trains) -> the last layer's states H [batch, words, emb_sz]
      concat pooling   [H at the last word, max over the words, mean over the words]
                       (padding never counts: `input_mask`)        [batch, 3 * emb_sz]
      head             BatchNorm -> Dropout(0.4) -> Dense(50) -> ReLU
                       -> BatchNorm -> Dropout(0.1) -> Dense(num_labels)   (fastai's
                       `PoolingLinearClassifier` with its default layers and ps)

Howard & Ruder (2018), section 3.3. `run_classifier.py --model_family=ulmfit`
frames each example as `<S> a </S> [b </S>]` word ids
(`modeling.tasks.word_input_format`), loads the AWD-LSTM from a
`run_pretraining.py --recipe=ulmfit` output (`--init_checkpoint`), and trains
with the one trainer; ULMFiT's fine-tuning techniques are the trainer's
flags (`--lr_schedule=stlr --layer_lr_decay=2.6 --unfreeze_steps=N`): the
layer groups are the embeddings, `layer_0` .. `layer_{n-1}` and the head.
The network's dropouts are those of the config file (`ulmfit_config.json`).
"""

import keras
import tensorflow as tf

from modeling import checkpoints
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.tasks import classification
from modeling.tasks import input_formats
from modeling.tasks import word_input_format
from modeling.ulmfit.network import AwdLstm

__all__ = ["UlmfitClassifier", "UlmfitInputFormat", "concat_pooling"]


def concat_pooling(hidden, input_mask):
    """`[last real state, max over real words, mean over real words]`, `[batch, 3 * dim]`.

    Args:
        hidden: `[batch, words, dim]`, padding at the end of each row.
        input_mask: `[batch, words]`, 1 for a word (at least one per row).
    """
    hidden = tf.convert_to_tensor(hidden)
    mask = tf.cast(input_mask, tf.bool)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    last = tf.gather(hidden, tf.maximum(lengths - 1, 0), batch_dims=1)
    lowest = tf.cast(hidden.dtype.min, hidden.dtype)
    maximum = tf.reduce_max(tf.where(mask[:, :, None], hidden, lowest), axis=1)
    weights = tf.cast(mask, hidden.dtype)[:, :, None]
    mean = tf.reduce_sum(hidden * weights, axis=1) / tf.maximum(
        tf.reduce_sum(weights, axis=1), tf.cast(1.0, hidden.dtype))
    return tf.concat([last, maximum, mean], axis=-1)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class UlmfitClassifier(keras.Model):
    """The AWD-LSTM with concat pooling and fastai's head (see the module docstring).

    Args:
        network: an `AwdLstm` (kept as `encoder`; it trains).
        num_labels, task_type: as `BertClassifier`.
        head_size: units of the head's hidden layer (fastai: 50).
        dropouts: the head's two dropout rates (fastai: 0.4, 0.1).
    """

    def __init__(self, network, num_labels, task_type=classification.CLASSIFICATION,
                 head_size=50, dropouts=(0.4, 0.1), **kwargs):
        kwargs.setdefault("name", "ulmfit_classifier")
        super().__init__(**kwargs)
        self.encoder = network
        self.num_labels = int(num_labels)
        self.task_type = task_type
        self.head_size = int(head_size)
        self.dropouts = tuple(float(p) for p in dropouts)
        outputs = 1 if task_type == classification.REGRESSION else self.num_labels
        self.head_norms = [keras.layers.BatchNormalization(name="head_norm_%d" % i)
                           for i in range(2)]
        self.head_dropouts = [keras.layers.Dropout(p, name="head_dropout_%d" % i)
                              for i, p in enumerate(self.dropouts)]
        self.head_hidden = keras.layers.Dense(self.head_size, name="head_hidden")
        self.output_layer = keras.layers.Dense(outputs, name="output")
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        width = 3 * self.encoder.embedding_size
        self.head_norms[0].build((None, width))
        self.head_hidden.build((None, width))
        self.head_norms[1].build((None, self.head_size))
        self.output_layer.build((None, self.head_size))
        self.built = True

    def pooled(self, features, training=None):
        """The concat-pooled features `[batch, 3 * emb_sz]` of a batch."""
        outputs = self.encoder(features, training=training)
        return concat_pooling(outputs["layers"][-1], outputs["input_mask"])

    def call(self, features, training=None):
        hidden = self.pooled(features, training=training)
        hidden = self.head_dropouts[0](self.head_norms[0](hidden, training=training),
                                       training=training)
        hidden = tf.nn.relu(self.head_hidden(hidden))
        hidden = self.head_dropouts[1](self.head_norms[1](hidden, training=training),
                                       training=training)
        logits = tf.cast(self.output_layer(hidden), tf.float32)
        return classification.outputs_of_logits(logits, self.task_type)

    def compute_loss_and_metrics(self, features, training=None):
        outputs = self(features, training=training)
        return classification.task_loss_and_metrics(outputs, features, self.task_type,
                                                    self.num_labels)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "network": keras.saving.serialize_keras_object(self.encoder),
                "num_labels": self.num_labels, "task_type": self.task_type,
                "head_size": self.head_size, "dropouts": list(self.dropouts)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["network"] = keras.saving.deserialize_keras_object(config["network"])
        return cls(**config)


class UlmfitInputFormat(word_input_format.WordInputFormat):
    """run_classifier's `--model_family=ulmfit`: word ids -> `UlmfitClassifier`."""

    uses_char_ids = False

    def build_model(self, num_labels, task_type):
        return UlmfitClassifier(AwdLstm.from_config_object(self.config), num_labels,
                                task_type=task_type)

    def init_model(self, model, checkpoint):
        """Loads the AWD-LSTM of a `run_pretraining.py --recipe=ulmfit` output (head: fresh)."""
        return checkpoints.init_from_checkpoint(model, checkpoint)


input_formats.FORMATS.register("ulmfit", UlmfitInputFormat)
