"""Activations by name (as written in `bert_config.json` / HF `config.json`) and
BERT's initialiser.

* "gelu": exact GELU (erf), what google-research/bert trained with;
* "gelu_new" / "gelu_tanh" / "gelu_approximate": the tanh approximation of
  GPT/GPT-2 (HF "gelu_new");
* "relu", "swish"/"silu", "tanh", "linear".
"""

import math

import keras
import tensorflow as tf

__all__ = ["activation_names", "gelu", "gelu_tanh", "get_activation",
           "register_activation", "truncated_normal_initializer"]


def gelu(x):
    """Exact GELU: `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`.

    This is what google-research/bert calls "gelu" (its released checkpoints
    were trained with it).
    """
    x = tf.convert_to_tensor(x)
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def gelu_tanh(x):
    """Tanh approximation of GELU (GPT/GPT-2, Hugging Face "gelu_new").

    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`
    """
    x = tf.convert_to_tensor(x)
    c = tf.cast(math.sqrt(2.0 / math.pi), x.dtype)
    return 0.5 * x * (1.0 + tf.tanh(c * (x + 0.044715 * tf.pow(x, 3))))


def _linear(x):
    return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_tanh": gelu_tanh,
    "gelu_approximate": gelu_tanh,
    "relu": tf.nn.relu,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
    "tanh": tf.tanh,
    "linear": _linear,
}


def activation_names():
    """The names `get_activation` knows (lower case), registered ones included."""
    return list(_ACTIVATIONS)


def get_activation(name):
    """Maps an activation name (as in `bert_config.json`) to a function.

    Args:
        name: A name (case-insensitive; see the module docstring), `None` or
            "" for the identity, or a callable (returned unchanged).

    Raises:
        ValueError: the name is unknown.
    """
    if name is None or name == "":
        return _linear
    if callable(name):
        return name
    if not isinstance(name, str):
        raise ValueError(f"Activation must be a name or callable, got {name!r}.")
    key = name.lower()
    if key not in _ACTIVATIONS:
        raise ValueError(
            f"Unsupported activation {name!r}; known: {', '.join(_ACTIVATIONS)}."
        )
    return _ACTIVATIONS[key]


def truncated_normal_initializer(initializer_range=0.02):
    """BERT's initialiser: normal(0, stddev) re-drawn beyond 2 stddev."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)




def register_activation(name, fn):
    """Makes `fn` available to every config under `name` (case-insensitive)."""
    _ACTIVATIONS[name.lower()] = fn
    return fn
