"""`BertEncoder`: the BERT Transformer encoder as a Keras 3 model.

    >>> from modeling.bert.config import BertConfig
    >>> encoder = BertEncoder.from_config_object(
    ...     BertConfig.from_preset("bert_tiny", vocab_size=100))
    >>> outputs = encoder({"input_ids": ids, "input_mask": mask,
    ...                    "segment_ids": segments})
    >>> outputs["sequence_output"].shape   # [batch, seq, 128]

The constructor takes the fields of `BertConfig` as arguments (so
`get_config()` / `from_config()` and `.keras` saving round-trip);
`BertEncoder.from_config_object(bert_config)` builds one from a `BertConfig`
and `encoder.bert_config()` gives it back. Weights are created in the
constructor (their shapes do not depend on the input), so a fresh encoder can
be inspected, tied to or restored into before its first call.

Inputs: a dict with `input_ids` (required), `input_mask` (1 real / 0 pad) and
`segment_ids` (token type ids); or positionally `encoder(input_ids,
input_mask, segment_ids)`, or a list/tuple in that order. Two optional dict
keys serve derived models: `attention_mask` (`[batch, seq, seq]`, 1 = may
attend; replaces the padding mask, e.g. UNILM's seq-to-seq masks) and
`position_ids`.

Outputs (a dict):
    sequence_output  [batch, seq, hidden]  last layer
    pooled_output    [batch, hidden]       tanh(dense(sequence_output[:, 0]))
    encoder_outputs  list of num_hidden_layers [batch, seq, hidden]
    embedding_output [batch, seq, hidden]  after embedding LayerNorm/dropout
    attention_probs  list of [batch, heads, seq, seq], only if requested by
                     `output_attention_probs` (constructor or call argument)

A `head_mask` (`[num_hidden_layers, num_attention_heads]`, 1 keep / 0 drop)
multiplies each head's attention probabilities (`modeling.encoder`).

Pruned encoders: `num_attention_heads_per_layer` (the `bert_config.json` key
of the same name) gives layer l its own head count h_l <= num_attention_heads;
the heads keep their width `hidden_size // num_attention_heads`, so layer l's
query/key/value kernels are `[hidden, h_l * head_size]` and its attention
output kernel `[h_l * head_size, hidden]`. A layer with 0 heads keeps
zero-width kernels and its attention sublayer is `LayerNorm(x + output bias)`
(as Hugging Face's BERT with all of a layer's heads pruned). Checkpoint names
are unchanged; shapes follow the config (`modeling.analysis.heads`).

All outputs are in the compute dtype of the dtype policy (float16 under
"mixed_float16", bfloat16 under "mixed_bfloat16"); variables stay float32.

Weight attribute paths and the google-research/bert checkpoint names they
correspond to (N = layer index; "(T)" = Keras kernel is the transpose):

    embeddings.word_embeddings          bert/embeddings/word_embeddings
    embeddings.position_embeddings      bert/embeddings/position_embeddings
    embeddings.token_type_embeddings    bert/embeddings/token_type_embeddings
    embeddings.layer_norm.{gamma,beta}  bert/embeddings/LayerNorm/{gamma,beta}
    transformer_layers[N].attention_sublayer.
      attention.query.{kernel,bias}     bert/encoder/layer_N/attention/self/query/...
      attention.key.{kernel,bias}       .../attention/self/key/...
      attention.value.{kernel,bias}     .../attention/self/value/...
      attention.output_dense.*          .../attention/output/dense/...
      layer_norm.{gamma,beta}           .../attention/output/LayerNorm/...
    transformer_layers[N].ffn_sublayer.
      intermediate.{kernel,bias}        .../intermediate/dense/...
      output_dense.{kernel,bias}        .../output/dense/...
      layer_norm.{gamma,beta}           .../output/LayerNorm/...
    pooler.{kernel,bias}                bert/pooler/dense/{kernel,bias}

All Dense kernels are `[in, out]` like TF1's `tf.layers.dense`, so no
transposes are needed for the encoder (Hugging Face's PyTorch layout stores
`[out, in]` and needs them). The pre-training heads are documented in
`modeling.objectives`.
"""

import keras

from modeling.bert.config import HEADS_PER_LAYER_KEY
from modeling.bert.config import check_heads_per_layer
from modeling.encoder import EncoderBase
from modeling.layers import LAYER_NORM_EPSILON
from modeling.layers import BertEmbeddings
from modeling.layers import TransformerBlock

__all__ = ["BertEncoder", "HEADS_PER_LAYER_KEY", "check_heads_per_layer"]

_CONFIG_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)


@keras.saving.register_keras_serializable(package="bert_family")
class BertEncoder(EncoderBase):
    """The BERT encoder: embeddings, `num_hidden_layers` blocks, tanh pooler.

    Args:
        vocab_size ... initializer_range: as in `BertConfig`.
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).
        output_attention_probs: Default for returning per-layer attention
            probabilities; a call argument of the same name overrides it.
        num_attention_heads_per_layer: optional list of `num_hidden_layers`
            head counts in [0, num_attention_heads] (a pruned model); None =
            `num_attention_heads` everywhere.
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    _SUPPORTS_HEAD_MASK = True
    _SUPPORTS_ATTENTION_SCORES = True

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        output_attention_probs=False,
        num_attention_heads_per_layer=None,
        **kwargs,
    ):
        kwargs.setdefault("name", "bert_encoder")
        super().__init__(**kwargs)
        self._check_head_width(hidden_size, num_attention_heads)
        self._set_fields(locals())
        if num_attention_heads_per_layer is not None:
            num_attention_heads_per_layer = check_heads_per_layer(
                num_attention_heads_per_layer, num_hidden_layers, num_attention_heads)
        self.num_attention_heads_per_layer = num_attention_heads_per_layer

        def head_args(i):
            if num_attention_heads_per_layer is None:
                return {}
            return {"num_attention_heads": num_attention_heads_per_layer[i],
                    "head_size": hidden_size // num_attention_heads}

        self.embeddings = BertEmbeddings.of_encoder(self)
        self.transformer_layers = [
            TransformerBlock.of_encoder(self, f"layer_{i}", **head_args(i))
            for i in range(num_hidden_layers)
        ]
        self.pooler = self._make_pooler()
        # All weight shapes are known now: create them, so that the encoder
        # can be tied to, restored into or mapped before its first call.
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings.build()
        for layer in self.transformer_layers:
            layer.build((None, None, self.hidden_size))
        if self.pooler is not None:  # None: a subclass without a pooler (DistilBERT).
            self.pooler.build((None, self.hidden_size))

    # ------------------------------------------------------------ properties

    @classmethod
    def from_config_object(cls, bert_config, **kwargs):
        """Builds an encoder from a `modeling.bert.BertConfig`.

        `kwargs` (e.g. `name`, `dtype`, `output_attention_probs`) are passed to
        the constructor. Of the config's other keys (`extra`) only
        `layer_norm_epsilon` is used (HF's `layer_norm_eps` lands there);
        the rest are ignored.
        """
        args = cls._args_from_config_object(bert_config)
        heads = (getattr(bert_config, "extra", None) or {}).get(HEADS_PER_LAYER_KEY)
        if heads is not None:
            args["num_attention_heads_per_layer"] = list(heads)
        args.update(kwargs)
        return cls(**args)

    def bert_config(self):
        """Returns the `BertConfig` describing this encoder."""
        from modeling.bert.config import BertConfig

        extra = {}
        if self.num_attention_heads_per_layer is not None:
            extra[HEADS_PER_LAYER_KEY] = list(self.num_attention_heads_per_layer)
        return BertConfig(**{field: getattr(self, field) for field in _CONFIG_FIELDS},
                          **extra)

    def get_config(self):
        config = super().get_config()
        if self.num_attention_heads_per_layer is not None:
            config["num_attention_heads_per_layer"] = list(self.num_attention_heads_per_layer)
        return config

    # ------------------------------------------------------------------ layers

    def _embed(self, input_ids, segment_ids, position_ids, training):
        embedding_output = self.embeddings(
            input_ids,
            segment_ids=segment_ids,
            position_ids=position_ids,
            training=training,
        )
        return embedding_output, {}

    def _apply_layer(self, index, hidden, attention_mask, training, head_mask=None,
                     return_scores=False):
        hidden, probs = self.transformer_layers[index](
            hidden, attention_mask=attention_mask, training=training,
            **({} if head_mask is None else {"head_mask": head_mask}),
            **({"return_scores": True} if return_scores else {}),
        )
        return hidden, [probs]
