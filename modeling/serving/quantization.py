"""int8 inference: dynamic-range quantisation of a model's Dense products (oneDNN).

`int8_model(model)` gives a callable with the model's interface whose Dense
layers (BERT's query/key/value/output projections, the intermediate and
output Dense of every block, the pooler; any `keras.layers.Dense` with a
kernel of at least `MIN_SIZE` x `MIN_SIZE`) compute their product in int8, as
PyTorch's ``quantize_dynamic`` does for ``nn.Linear``: the weights are
quantised once, the activations per call from their own range, and the
attention-score products, softmax, GELU, layer norms and small heads (a
classifier's output layer) stay in float32.

The scheme, per Dense layer ``y = x W + b`` (`x` flattened to ``[rows, in]``):

* weights: symmetric int8 per tensor, ``W ~= s_w Wq`` with ``s_w =
  max|W| / 127`` and ``Wq = round(W / s_w)`` in [-127, 127] (oneDNN's
  int8 product takes one weight scale per tensor);
* activations: asymmetric uint8 per call from the tensor's minimum and
  maximum (the range widened to hold 0), ``x ~= lo + s_x xq`` with ``s_x =
  (hi - lo) / 255`` and ``xq = round((x - lo) / s_x)`` in [0, 255];
* product: ``x W ~= s_x s_w (xq Wq) + lo s_w (1 Wq)``, where ``1 Wq`` are the
  weight's column sums (computed once). The integer product and its rescaling
  are one oneDNN kernel (``QuantizedMatMulWithBiasAndDequantize``: u8 x s8 into
  int32 on VNNI / AMX-int8, then ``s_x s_w`` times the sum plus a float bias,
  in float32); the bias it adds is ``b + lo s_w (1 Wq)``.

The kernel is called in its ``SCALED`` mode with ``min_a = 0`` and ``max_a =
255 s_x`` (its input scale ``max_a / 255`` is then ``s_x``): the zero point
is handled here, by the column sums, rather than by the op's ``MIN_FIRST``
mode, whose bias compensation in TensorFlow 2.21 (oneDNN v3) adds the
compensation in the wrong units (products off by orders of magnitude; see
tests/modeling/serving/test_quantization.py).

The oneDNN kernels exist only when TensorFlow's oneDNN ops are on
(``TF_ENABLE_ONEDNN_OPTS=1``, TensorFlow's default on CPUs with AVX-512
VNNI/BF16 or AMX, and what every script here sets, `modeling.training.cpu_runtime`);
without them TensorFlow has no kernel for the op and a call fails, so
`int8_model` refuses first with one line (`Int8Unavailable`).

The model itself is not copied and not changed in what it computes: each
quantised Dense layer gets a `call` that computes in int8 only while an
`Int8Model` of it is running (while it is being traced: the choice is made
in Python, once per trace), and its own product otherwise.
"""

import contextlib
import threading

import keras
import numpy as np
import tensorflow as tf

# Dense layers whose input or output width is below this stay in float (a
# classifier's output layer of a few labels, a pruned attention projection).
MIN_SIZE = 32


class Int8Unavailable(ValueError):
    """int8 is not possible for this model or in this process (one line)."""


def onednn_enabled():
    """Whether this process runs TensorFlow's oneDNN ops (TF_ENABLE_ONEDNN_OPTS)."""
    try:
        from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return False


def check_available():
    """Raises `Int8Unavailable` unless oneDNN's int8 kernels can run here."""
    if not onednn_enabled():
        raise Int8Unavailable(
            "--precision=int8 needs TensorFlow's oneDNN kernels, which are off in this process "
            "(TF_ENABLE_ONEDNN_OPTS=0, or a TensorFlow built without oneDNN); expected "
            "TF_ENABLE_ONEDNN_OPTS=1 on an x86 CPU, or --precision=fp32")


def quantize_kernel(kernel):
    """`(int8 [in, out], scale, column sums [out])` of a float kernel: symmetric, per tensor."""
    kernel = np.asarray(kernel, np.float32)
    largest = float(np.max(np.abs(kernel))) if kernel.size else 0.0
    scale = largest / 127.0 if largest > 0 else 1.0
    quantized = np.clip(np.round(kernel / scale), -127, 127).astype(np.int8)
    column_sums = quantized.astype(np.int64).sum(axis=0).astype(np.float32)
    return quantized, np.float32(scale), column_sums


def quantize_activations(x):
    """`(uint8 x, lo, scale)`: ``x ~= lo + scale * q``, from the tensor's own range (0 inside)."""
    lo = tf.minimum(tf.reduce_min(x), 0.0)
    hi = tf.maximum(tf.reduce_max(x), 0.0)
    scale = tf.maximum((hi - lo) / 255.0, 1e-30)
    q = tf.cast(tf.clip_by_value(tf.round((x - lo) / scale), 0.0, 255.0), tf.uint8)
    return q, lo, scale


def int8_matmul(x, kernel_q, kernel_scale, column_sums, bias=None):
    """``x @ W + bias`` for a 2-D float32 `x`, with `W` given by `quantize_kernel`.

    `kernel_q` is an int8 tensor or variable ``[in, out]``, `kernel_scale` a
    scalar, `column_sums` ``[out]`` float32. Returns float32 ``[rows, out]``.
    """
    q, lo, x_scale = quantize_activations(x)
    kernel_scale = tf.cast(kernel_scale, tf.float32)
    offset = lo * kernel_scale * column_sums
    if bias is not None:
        offset = offset + tf.cast(bias, tf.float32)
    zero = tf.constant(0.0)
    return tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=tf.bitcast(q, tf.quint8), b=tf.bitcast(tf.convert_to_tensor(kernel_q), tf.qint8),
        bias=offset, min_a=zero, max_a=255.0 * x_scale,
        min_b=-127.0 * kernel_scale, max_b=127.0 * kernel_scale,
        min_freezed_output=zero, max_freezed_output=tf.constant(1.0),
        Toutput=tf.float32, input_quant_mode="SCALED")


def quantizable(layer):
    """Whether `layer` is a Dense layer whose product `int8_model` computes in int8."""
    if not isinstance(layer, keras.layers.Dense) or not layer.built:
        return False
    if type(layer).call is not keras.layers.Dense.call and not getattr(layer, "_int8_patched",
                                                                        False):
        return False  # a subclass with a product of its own
    if getattr(layer, "lora_enabled", False) or getattr(layer, "quantization_mode", None):
        return False
    shape = tuple(layer.kernel.shape)
    return len(shape) == 2 and min(shape) >= MIN_SIZE and getattr(layer, "units", 1) >= MIN_SIZE


# The Int8Model running in this thread (while its model is called or traced).
_active = threading.local()


@contextlib.contextmanager
def _running(weights):
    previous = getattr(_active, "weights", None)
    _active.weights = weights
    try:
        yield
    finally:
        _active.weights = previous


def _patch(layer):
    """Gives `layer` a `call` that computes in int8 while an `Int8Model` of it runs."""
    if getattr(layer, "_int8_patched", False):
        return
    float_call = layer.call

    def call(inputs, training=None):
        weights = getattr(_active, "weights", None)
        entry = weights.get(id(layer)) if weights else None
        if entry is None:
            return float_call(inputs, training=training)
        return entry(layer, inputs)

    layer.call = call
    layer._int8_patched = True  # pylint: disable=protected-access


class _Int8Dense(tf.Module):
    """One Dense layer's int8 weights (variables, so that a SavedModel holds them)."""

    def __init__(self, layer):
        super().__init__(name=layer.name + "_int8")
        quantized, scale, column_sums = quantize_kernel(np.asarray(layer.kernel))
        self.kernel_q = tf.Variable(quantized, trainable=False, name="kernel_int8")
        self.kernel_scale = tf.Variable(scale, trainable=False, name="kernel_scale")
        self.column_sums = tf.Variable(column_sums, trainable=False, name="column_sums")
        self.bias = (tf.Variable(np.asarray(layer.bias, np.float32), trainable=False, name="bias")
                     if layer.bias is not None else None)

    def __call__(self, layer, inputs):
        x = tf.cast(inputs, tf.float32)
        units = self.kernel_q.shape[1]
        rows = tf.reshape(x, [-1, self.kernel_q.shape[0]])
        y = int8_matmul(rows, self.kernel_q, self.kernel_scale, self.column_sums, self.bias)
        y = tf.reshape(y, tf.concat([tf.shape(x)[:-1], [units]], axis=0))
        if layer.activation is not None:
            y = layer.activation(y)
        return tf.cast(y, layer.compute_dtype)


class _Bf16Dense(tf.Module):
    """One Dense layer's bfloat16 kernel (cast once), and the choice of product per call."""

    def __init__(self, layer):
        super().__init__(name=layer.name + "_bf16")
        self.kernel_bf16 = tf.Variable(tf.cast(tf.convert_to_tensor(layer.kernel), tf.bfloat16),
                                       trainable=False, name="kernel_bf16")

    def __call__(self, layer, inputs):
        x = tf.cast(inputs, tf.float32)
        units = self.kernel_bf16.shape[1]
        rows = tf.reshape(x, [-1, self.kernel_bf16.shape[0]])
        kernel = layer.kernel

        def in_bf16():
            product = tf.matmul(tf.cast(rows, tf.bfloat16), self.kernel_bf16)
            return tf.cast(product, tf.float32)

        def in_fp32():
            return tf.matmul(rows, tf.cast(kernel, tf.float32))

        y = tf.cond(tf.shape(rows)[0] >= BF16_MIN_ROWS, in_bf16, in_fp32)
        if layer.bias is not None:
            y = y + tf.cast(layer.bias, tf.float32)
        y = tf.reshape(y, tf.concat([tf.shape(x)[:-1], [units]], axis=0))
        if layer.activation is not None:
            y = layer.activation(y)
        return tf.cast(y, layer.compute_dtype)


# Products of fewer rows (tokens in the batch) than this stay in float32 in the
# bf16 path: below it oneDNN's bf16 kernels were no faster than its fp32 ones
# on the AVX512-BF16 machine (up to 1.3x slower at 1 to 8 rows; 0.5-0.85x the
# fp32 time from 16 rows up, for BERT-base's 768x768, 768x3072 and 3072x768
# kernels; docs/speed.md).
BF16_MIN_ROWS = 16


class LowPrecisionModel(tf.Module):
    """`model` with its Dense products in int8 or bf16: ``LowPrecisionModel(model, "int8")``.

    Called (eagerly or in a `tf.function`) like the model, it returns what
    the model returns with every `quantizable` Dense layer's product in the
    precision (the rest of the model in float32):

    * "int8": dynamic-range quantisation (the module docstring); `variables`
      are the model's, minus the float kernels and biases of the quantised
      layers, plus their int8 weights: what a SavedModel of it holds
      (`modeling.serving.export`).
    * "bf16": the kernels cast to bfloat16 once (not at every call, as
      Keras's ``mixed_bfloat16`` policy casts them), the activations at each
      product, the product accumulated by oneDNN and returned in bf16, then
      float32; products of fewer than `BF16_MIN_ROWS` rows stay in float32.

    Raises `Int8Unavailable` (one line) for int8 without oneDNN's kernels,
    and for either precision when the model has no Dense layer it covers
    (e.g. an LSTM network).
    """

    def __init__(self, model, precision="int8", name=None):
        if precision not in ("int8", "bf16"):
            raise ValueError("precision must be int8 or bf16, got %r" % (precision,))
        super().__init__(name=name or (getattr(model, "name", "model") + "_" + precision))
        if precision == "int8":
            check_available()
        self.__dict__["model"] = model  # not tracked: `variables` says what is needed
        self.precision = precision
        layers = [layer for layer in sublayers(model) if quantizable(layer)]
        if not layers:
            raise Int8Unavailable(
                "--precision=%s covers Dense layers of at least %d x %d; %s has none (expected "
                "a Transformer encoder such as BERT's, or --precision=fp32)"
                % (precision, MIN_SIZE, MIN_SIZE, type(model).__name__))
        entry = _Int8Dense if precision == "int8" else _Bf16Dense
        self.quantized = [entry(layer) for layer in layers]
        self.__dict__["_weights"] = {id(layer): e for layer, e in zip(layers, self.quantized)}
        for layer in layers:
            _patch(layer)
        replaced = ({id(v) for layer in layers for v in (layer.kernel, layer.bias)
                     if v is not None} if precision == "int8" else set())
        # Not tracked either (Keras variables): the export tracks `variables`.
        self.__dict__["float_variables"] = [v for v in model.variables if id(v) not in replaced]
        self.num_quantized = len(layers)

    @property
    def variables(self):
        return list(self.float_variables) + [
            v for entry in self.quantized for v in entry.variables]

    def running(self):
        """A context in which the model's covered layers compute in the precision (this thread)."""
        return _running(self._weights)

    def __call__(self, *args, **kwargs):
        with self.running():
            return self.model(*args, **kwargs)

    def __getattr__(self, name):
        # The wrapped model's attributes (`encoder`, `embedding_table`, `get_objective`, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.__dict__["model"], name)


Int8Model = LowPrecisionModel


def sublayers(model):
    """Every layer inside `model`, once each (Keras's own walk, the model included)."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:
        return []
    return list(flatten(include_self=True, recursive=True))


def int8_model(model):
    """The model with its Dense products in int8 (`LowPrecisionModel`, the module docstring)."""
    return LowPrecisionModel(model, "int8")


def bf16_model(model):
    """The model with its Dense products in bf16 where that is faster (`LowPrecisionModel`)."""
    return LowPrecisionModel(model, "bf16")
