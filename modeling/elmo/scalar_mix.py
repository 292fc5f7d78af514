"""`ScalarMix`: ELMo's task-specific weighting of the biLM's layers (Peters et al. 2018, eq. 1).

    ELMo_k = gamma * sum_j softmax(s)_j * h_{k,j}

over the L + 1 layers of `ElmoNetwork` (`elmo_layers`: the token layer,
then each biLSTM layer), with `s` (one scalar per layer, initialised to 0,
so the first mix is the plain average) and `gamma` (initialised to 1)
trained with the downstream model while the biLM stays frozen.

Two options of the paper (section 3.2 and its footnote), as bilm-tf's
`weight_layers` implements them, both off by default as there:

* `do_layer_norm`: each layer is normalised before weighting,
  `(h - mean) / sqrt(var + 1e-12)`, with ONE mean and variance per layer
  over all its values at real positions (`mask`; every position without
  one), as bilm-tf's `_do_ln` (not per token);
* `l2_coef` (the paper's lambda): `regularization_loss()` is
  `l2_coef * sum_j s_j^2`, added to the task loss, pulling the weights
  towards the average of the layers.
"""

import keras
import tensorflow as tf

from modeling.layers.common import PACKAGE as _PACKAGE

__all__ = ["ScalarMix"]

LAYER_NORM_EPSILON = 1e-12  # bilm-tf's


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ScalarMix(keras.layers.Layer):
    """Softmax-normalised, trainable weighted sum of layers, scaled by gamma.

    Args:
        num_layers: how many layers are mixed (a call must pass exactly these).
        initial_scalars: the starting `s` (default zeros: the average).
        initial_gamma: the starting `gamma`.
        trainable_weights_and_gamma: train `s` and `gamma` (False: a fixed mix).
        do_layer_norm: normalise each layer first (bilm-tf's masked form).
        l2_coef: lambda of the `regularization_loss` on `s` (0: none).

    Call: a list of `num_layers` tensors of one shape `[batch, words, dim]`
    (and optionally `mask` `[batch, words]`, 1 for a real word, which only
    the layer normalisation reads) -> a tensor of that shape.
    """

    def __init__(self, num_layers, initial_scalars=None, initial_gamma=1.0,
                 trainable_weights_and_gamma=True, do_layer_norm=False, l2_coef=0.0,
                 **kwargs):
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError("ScalarMix needs at least one layer, got %d" % num_layers)
        if initial_scalars is not None and len(initial_scalars) != num_layers:
            raise ValueError("initial_scalars has %d values for %d layers"
                             % (len(initial_scalars), num_layers))
        if float(l2_coef) < 0:
            raise ValueError("l2_coef must be >= 0, got %r" % (l2_coef,))
        self.num_layers = int(num_layers)
        self.initial_scalars = (None if initial_scalars is None
                                else [float(s) for s in initial_scalars])
        self.initial_gamma = float(initial_gamma)
        self.trainable_weights_and_gamma = bool(trainable_weights_and_gamma)
        self.do_layer_norm = bool(do_layer_norm)
        self.l2_coef = float(l2_coef)
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

    def regularization_loss(self):
        """`l2_coef * sum(s^2)` (float32 scalar; 0 without `l2_coef`)."""
        return self.l2_coef * tf.reduce_sum(tf.square(tf.cast(self.scalars, tf.float32)))

    @staticmethod
    def _layer_norm(layer, mask):
        """bilm-tf's `_do_ln`: one mean and variance over the real positions' values."""
        values = tf.cast(layer, tf.float32)
        if mask is None:
            weights = tf.ones(tf.shape(values)[:-1], tf.float32)
        else:
            weights = tf.cast(mask, tf.float32)
        weights = weights[..., tf.newaxis]
        count = tf.reduce_sum(weights) * tf.cast(tf.shape(values)[-1], tf.float32)
        mean = tf.reduce_sum(values * weights) / count
        variance = tf.reduce_sum(tf.square((values - mean) * weights)) / count
        normed = (values - mean) * tf.math.rsqrt(variance + LAYER_NORM_EPSILON)
        return tf.cast(normed, layer.dtype)

    def call(self, layers, mask=None):
        layers = list(layers)
        if len(layers) != self.num_layers:
            raise ValueError("ScalarMix was built for %d layers but got %d"
                             % (self.num_layers, len(layers)))
        if self.do_layer_norm:
            layers = [self._layer_norm(layer, mask) for layer in layers]
        weights = tf.cast(self.normalized_weights(), layers[0].dtype)
        mixed = tf.add_n([weights[i] * layer for i, layer in enumerate(layers)])
        return tf.cast(self.gamma, mixed.dtype) * mixed

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, initial_scalars=self.initial_scalars,
                      initial_gamma=self.initial_gamma,
                      trainable_weights_and_gamma=self.trainable_weights_and_gamma,
                      do_layer_norm=self.do_layer_norm, l2_coef=self.l2_coef)
        return config
