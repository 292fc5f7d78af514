"""Keras models over one encoder (task models, pretrainers): their build and config.

`EncoderModel` is the mixin of a `keras.Model` whose constructor takes the
encoder (`self.encoder`) and plain values: `build` builds the encoder,
`encoder_model_config(**fields)` is what `get_config` returns (the name,
`trainable`, the dtype policy, the serialised encoder, then `fields`), and
`from_config` deserialises the encoder (and the other `NESTED` keys) before
calling the constructor.
"""

import keras

from modeling.layers.activations import truncated_normal_initializer

__all__ = ["EncoderModel", "add_output_weights"]


def add_output_weights(layer, rows, width, initializer_range):
    """`layer.output_weights` `[rows, width]` (truncated normal) and `layer.output_bias` `[rows]`."""
    layer.output_weights = layer.add_weight(
        name="output_weights", shape=(rows, width),
        initializer=truncated_normal_initializer(initializer_range))
    layer.output_bias = layer.add_weight(name="output_bias", shape=(rows,), initializer="zeros")


class EncoderModel:
    """Mixin of a `keras.Model` over `self.encoder` (see the module docstring)."""

    NESTED = ("encoder",)  # config keys holding serialised Keras objects

    def build(self, input_shape=None):
        if self.built:
            return
        self.encoder.build()
        self.built = True

    def set_head_rates(self, initializer_range, dropout_rate=False):
        """Sets `initializer_range` (and `dropout_rate`, unless False) of the model's head.

        None takes the encoder's (`initializer_range`, `hidden_dropout_prob`;
        BERT's 0.02 and 0.1 for an encoder without them).
        """
        if dropout_rate is not False:
            self.dropout_rate = float(getattr(self.encoder, "hidden_dropout_prob", 0.1)
                                      if dropout_rate is None else dropout_rate)
        self.initializer_range = float(getattr(self.encoder, "initializer_range", 0.02)
                                       if initializer_range is None else initializer_range)

    def add_output_weights(self, rows, width):
        """The head's `output_weights` `[rows, width]` and `output_bias` (`add_output_weights`)."""
        add_output_weights(self, rows, width, self.initializer_range)

    def encoder_model_config(self, with_dtype=True, **fields):
        """`get_config`'s dict: name, trainable, dtype (unless not `with_dtype`), encoder, `fields`."""
        config = {"name": self.name, "trainable": self.trainable}
        if with_dtype:
            config["dtype"] = keras.saving.serialize_keras_object(self.dtype_policy)
        config["encoder"] = keras.saving.serialize_keras_object(self.encoder)
        config.update(fields)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in cls.NESTED:
            config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)
