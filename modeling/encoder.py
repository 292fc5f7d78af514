"""The encoder interface objectives, tasks and serving code rely on.

An encoder is a Keras model called with a dict of features (`input_ids`, and
where the family uses them `input_mask`, `segment_ids`, `attention_mask`,
`position_ids`) that returns a dict:

    sequence_output  [batch, seq, hidden]  last layer
    encoder_outputs  list of [batch, seq, hidden], one per layer
    embedding_output [batch, seq, hidden]  the first layer's input
    pooled_output    [batch, hidden]       only for families with a pooler
    attention_probs  list of [batch, heads, seq, seq], when asked for
    attention_scores the same maps before the softmax (float32, masked keys
                     -10000), with `output_attention_scores=True`, for the
                     families that set `_SUPPORTS_ATTENTION_SCORES`

Head masks (Michel et al. 2019): an optional `head_mask`, as a call argument
or a `"head_mask"` entry of the features dict, `[num_layers, heads]` (or a
list of one `[heads_l]` vector, or None, per layer, for pruned models with
per-layer head counts), 1 keep / 0 drop, multiplies each head's attention
probabilities. Families that support it set `_SUPPORTS_HEAD_MASK`; without a
mask the computation is exactly the unmasked one.

and has an `embedding_table` property (the word embedding variable, tied to
output layers). `EncoderBase` implements the loop over layers once for the
BERT-shaped families (BERT, ALBERT, ...): a subclass says how to embed and
how to apply one layer.
"""

import keras
import tensorflow as tf

from modeling.layers import padding_attention_mask
from modeling.layers import truncated_normal_initializer
from modeling.layers.config_fields import ConfigFields

__all__ = ["EncoderBase", "feature_dict", "id_features"]


def feature_dict(inputs, key, missing):
    """A network's call `inputs` as a feature dict: a dict as it is, a lone tensor as its
    `key` entry; a dict without `key` raises `ValueError(missing)`."""
    features = inputs if isinstance(inputs, dict) else {key: inputs}
    if key not in features:
        raise ValueError(missing)
    return features


def id_features(inputs, key, missing, dims):
    """(`feature_dict(inputs, key, missing)`, its `key` entry as int32), the entry's rank
    that of `dims`, else ValueError (``<key> must be [batch, words], got shape ...``)."""
    features = feature_dict(inputs, key, missing)
    ids = tf.cast(features[key], tf.int32)
    if ids.shape.rank != len(dims):
        raise ValueError("%s must be [%s], got shape %s" % (key, ", ".join(dims), ids.shape))
    return features, ids


class EncoderBase(ConfigFields, keras.Model):
    """What BERT-shaped encoders share: input unpacking, call, config.

    A subclass sets `_CONFIG_FIELDS` (constructor arguments mirrored by
    `get_config`) and implements `_embed` (ids to the first layer's input,
    plus any extra outputs) and `_apply_layer` (one layer's forward pass);
    `call` runs embeddings, layers and (when the subclass has a `pooler`)
    the pooler on the first position, and returns the output dict documented
    in the module docstring.
    """

    _CONFIG_FIELDS = ()
    _EXTRA_CONFIG_FIELDS = ("layer_norm_epsilon", "output_attention_probs")
    # Whether `_apply_layer` takes a `head_mask` keyword (one layer's mask).
    _SUPPORTS_HEAD_MASK = False
    _SUPPORTS_ATTENTION_SCORES = False

    @property
    def embedding_table(self):
        """The word embedding variable (`[vocab_size, width]`).

        Tied output layers (the MLM decoder) multiply by its transpose.
        """
        return self.embeddings.word_embeddings

    def _embed(self, input_ids, segment_ids, position_ids, training):
        """Returns `(first layer input, {extra output name: tensor})`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement _embed (EncoderBase subclass)."
        )

    def _apply_layer(self, index, hidden, attention_mask, training):
        """Returns `(layer output, [attention probs of each block applied])`."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement _apply_layer (EncoderBase subclass)."
        )

    @staticmethod
    def _unpack_inputs(inputs, input_mask, segment_ids):
        attention_mask = position_ids = None
        if isinstance(inputs, dict):
            # Other keys (labels, masked_lm_*) are ignored, so a whole
            # pre-training batch can be passed as is.
            if "input_ids" not in inputs:
                raise ValueError("Encoder inputs need an 'input_ids' entry.")
            input_ids = inputs["input_ids"]
            input_mask = inputs.get("input_mask", input_mask)
            segment_ids = inputs.get("segment_ids", segment_ids)
            attention_mask = inputs.get("attention_mask")
            position_ids = inputs.get("position_ids")
        elif isinstance(inputs, (list, tuple)):
            if not 1 <= len(inputs) <= 3:
                raise ValueError(
                    "Positional encoder inputs are (input_ids[, input_mask"
                    f"[, segment_ids]]); got {len(inputs)} tensors."
                )
            input_ids = inputs[0]
            if len(inputs) > 1:
                input_mask = inputs[1]
            if len(inputs) > 2:
                segment_ids = inputs[2]
        else:
            input_ids = inputs
        return input_ids, input_mask, segment_ids, attention_mask, position_ids

    def call(
        self,
        inputs,
        input_mask=None,
        segment_ids=None,
        training=None,
        output_attention_probs=None,
        head_mask=None,
        output_attention_scores=False,
    ):
        input_ids, input_mask, segment_ids, attention_mask, position_ids = (
            self._unpack_inputs(inputs, input_mask, segment_ids)
        )
        if output_attention_scores and not self._SUPPORTS_ATTENTION_SCORES:
            raise ValueError(f"{type(self).__name__} does not return attention scores.")
        if head_mask is None and isinstance(inputs, dict):
            head_mask = inputs.get("head_mask")
        layer_head_masks = self._layer_head_masks(head_mask)
        if output_attention_probs is None:
            output_attention_probs = self.output_attention_probs

        embedding_output, extra_outputs = self._embed(
            input_ids, segment_ids, position_ids, training
        )
        if attention_mask is None and input_mask is not None:
            attention_mask = padding_attention_mask(input_mask)

        hidden = embedding_output
        encoder_outputs, attention_probs = [], []
        scores_kwargs = {"return_scores": True} if output_attention_scores else {}
        for index in range(self.num_hidden_layers):
            if layer_head_masks is None or layer_head_masks[index] is None:
                hidden, probs = self._apply_layer(index, hidden, attention_mask, training,
                                                  **scores_kwargs)
            else:
                hidden, probs = self._apply_layer(index, hidden, attention_mask, training,
                                                  head_mask=layer_head_masks[index],
                                                  **scores_kwargs)
            encoder_outputs.append(hidden)
            attention_probs.extend(probs)

        outputs = {
            "sequence_output": hidden,
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        if getattr(self, "pooler", None) is not None:
            outputs["pooled_output"] = self.pooler(hidden[:, 0, :])
        outputs.update(extra_outputs)
        if output_attention_scores:
            outputs["attention_scores"] = attention_probs
            if output_attention_probs:
                attention_probs = [tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
                                   for scores in attention_probs]
        if output_attention_probs:
            outputs["attention_probs"] = attention_probs
        return outputs

    def _layer_head_masks(self, head_mask):
        """`head_mask` as one entry (a `[heads]` tensor or None) per layer, or None."""
        if head_mask is None:
            return None
        if not self._SUPPORTS_HEAD_MASK:
            raise ValueError(f"{type(self).__name__} does not take a head_mask.")
        if isinstance(head_mask, (list, tuple)):
            masks = list(head_mask)
        else:
            if len(head_mask.shape) != 2 or head_mask.shape[0] != self.num_hidden_layers:
                raise ValueError(f"head_mask must be [num_hidden_layers="
                                 f"{self.num_hidden_layers}, heads]; got {head_mask.shape}.")
            masks = [head_mask[i] for i in range(self.num_hidden_layers)]
        if len(masks) != self.num_hidden_layers:
            raise ValueError(f"head_mask has {len(masks)} layers; the encoder has "
                             f"{self.num_hidden_layers}.")
        return masks

    @staticmethod
    def _check_head_width(hidden_size, num_attention_heads):
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of "
                f"num_attention_heads ({num_attention_heads})."
            )

    def _make_pooler(self):
        """The tanh pooler `pooler` (bert/pooler/dense) over `hidden_size`."""
        return keras.layers.Dense(
            self.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal_initializer(self.initializer_range),
            dtype=self.dtype_policy,
            name="pooler",
        )

    def _saved_fields(self):
        return self._CONFIG_FIELDS + self._EXTRA_CONFIG_FIELDS

    @classmethod
    def _args_from_config_object(cls, config_object):
        """Constructor arguments from a config object (`BertConfig`, ...).

        Its `_CONFIG_FIELDS`, plus `layer_norm_epsilon` when the config's
        extra keys carry one (HF's `layer_norm_eps` lands there).
        """
        args = {field: getattr(config_object, field) for field in cls._CONFIG_FIELDS}
        extra = getattr(config_object, "extra", None) or {}
        if "layer_norm_epsilon" in extra:
            args["layer_norm_epsilon"] = float(extra["layer_norm_epsilon"])
        return args
