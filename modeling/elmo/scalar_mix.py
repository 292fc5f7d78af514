"""`ScalarMix`: ELMo's task-specific weighting of the biLM's layers (Peters et al. 2018, eq. 1).

    ELMo_k = gamma * sum_j softmax(s)_j * h_{k,j}

over the L + 1 layers of `ElmoNetwork` (`elmo_layers`: the token layer,
then each biLSTM layer), with `s` (one scalar per layer, initialised to 0,
so the first mix is the plain average) and `gamma` (initialised to 1)
trained with the downstream model while the biLM stays frozen.
"""

import keras
import tensorflow as tf

from modeling.layers.common import PACKAGE as _PACKAGE

__all__ = ["ScalarMix"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ScalarMix(keras.layers.Layer):
    """Softmax-normalised, trainable weighted sum of layers, scaled by gamma.

    Args:
        num_layers: how many layers are mixed (a call must pass exactly these).
        initial_scalars: the starting `s` (default zeros: the average).
        initial_gamma: the starting `gamma`.
        trainable_weights_and_gamma: train `s` and `gamma` (False: a fixed mix).

    Call: a list of `num_layers` tensors of one shape -> a tensor of that shape.
    """

    def __init__(self, num_layers, initial_scalars=None, initial_gamma=1.0,
                 trainable_weights_and_gamma=True, **kwargs):
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError("ScalarMix needs at least one layer, got %d" % num_layers)
        if initial_scalars is not None and len(initial_scalars) != num_layers:
            raise ValueError("initial_scalars has %d values for %d layers"
                             % (len(initial_scalars), num_layers))
        self.num_layers = int(num_layers)
        self.initial_scalars = (None if initial_scalars is None
                                else [float(s) for s in initial_scalars])
        self.initial_gamma = float(initial_gamma)
        self.trainable_weights_and_gamma = bool(trainable_weights_and_gamma)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        scalars = self.initial_scalars or [0.0] * self.num_layers
        self.scalars = self.add_weight(
            name="scalars", shape=(self.num_layers,),
            initializer=keras.initializers.Constant(scalars),
            trainable=self.trainable_weights_and_gamma)
        self.gamma = self.add_weight(
            name="gamma", shape=(), initializer=keras.initializers.Constant(self.initial_gamma),
            trainable=self.trainable_weights_and_gamma)
        self.built = True

    def normalized_weights(self):
        """softmax(s), float32 `[num_layers]`."""
        return tf.nn.softmax(tf.cast(self.scalars, tf.float32))

    def call(self, layers):
        layers = list(layers)
        if len(layers) != self.num_layers:
            raise ValueError("ScalarMix was built for %d layers but got %d"
                             % (self.num_layers, len(layers)))
        weights = tf.cast(self.normalized_weights(), layers[0].dtype)
        mixed = tf.add_n([weights[i] * layer for i, layer in enumerate(layers)])
        return tf.cast(self.gamma, mixed.dtype) * mixed

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, initial_scalars=self.initial_scalars,
                      initial_gamma=self.initial_gamma,
                      trainable_weights_and_gamma=self.trainable_weights_and_gamma)
        return config
