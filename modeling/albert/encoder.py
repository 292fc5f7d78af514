"""ALBERT (Lan et al. 2019): BERT with factorised embeddings and shared layers.

ALBERT changes two things about the BERT encoder, both to cut parameters
rather than computation:

* Factorised embedding parameterisation. Token, position and segment
  embeddings are `E` wide (128) instead of `H`; after their LayerNorm and
  dropout a dense layer (`embedding_hidden_mapping_in`) lifts them to `H`.
  A 30000 x 768 table becomes 30000 x 128 + 128 x 768.
* Cross-layer parameter sharing. One Transformer block is applied
  `num_hidden_layers` times. The paper also measures sharing only the
  attention or only the feed-forward sub-layer; `share_parameters` selects:

      "all"        one attention + one FFN for every layer (ALBERT's choice;
                   with `num_hidden_groups` G > 1, G such blocks, layer i
                   using block `int(i / L * G)`, as google-research/albert)
      "attention"  one attention sub-layer, a FFN per layer
      "ffn"        one FFN sub-layer, an attention per layer
      "none"       nothing shared: a BERT encoder with factorised embeddings

Sentence-order prediction (SOP) replaces next-sentence prediction. It is the
same two-way classifier on the pooled output (`cls/seq_relationship`), only
the data differ (label 1 = the two segments swapped), so it is the existing
`NextSentenceObjective` reading `next_sentence_labels` (the feature
google-research/albert writes) and reporting `sentence_order_loss` /
`sentence_order_accuracy`. The masked-LM head is BERT's with its transform
projecting to `E`, so the tied decoder is the `[vocab, E]` word table.

    >>> from modeling.albert import AlbertConfig
    >>> config = AlbertConfig.from_preset("albert_base")
    >>> pretrainer = recipes.build_albert_pretrainer(config)
    >>> loss, metrics = pretrainer.compute_loss_and_metrics(features)

`AlbertEncoder` has `BertEncoder`'s call contract (dict in, dict out with
`sequence_output`, `pooled_output`, `encoder_outputs` (one per layer),
`embedding_output` (`[batch, seq, H]`, the input of the first layer, i.e.
after the projection), `attention_probs` on request) plus
`factorized_embedding_output` (`[batch, seq, E]`, before the projection),
and an `embedding_table` property (`[vocab, E]`), so the pre-training
objectives, `BertPretrainer` and the trainer work with it unchanged.

Building blocks: the embeddings are `BertEmbeddings` at width E; a layer is
an `AttentionSublayer` followed by a `FeedForwardSublayer`
(`modeling.layers`), the two halves `TransformerBlock` is made of, held
separately so that each half can be shared on its own.

Weights and google-research/albert checkpoint names ("all" sharing; g =
group, k = inner group, block b = g * inner_group_num + k):

    embeddings.word_embeddings          bert/embeddings/word_embeddings  [V, E]
    embeddings.position_embeddings      bert/embeddings/position_embeddings
    embeddings.token_type_embeddings    bert/embeddings/token_type_embeddings
    embeddings.layer_norm.{gamma,beta}  bert/embeddings/LayerNorm/...
    embedding_projection.{kernel,bias}  bert/encoder/embedding_hidden_mapping_in/...
    attention_sublayers[b].
      attention.{query,key,value}.*     bert/encoder/transformer/group_g/inner_group_k/
                                          attention_1/self/{query,key,value}/...
      attention.output_dense.*          .../attention_1/output/dense/...
      layer_norm.{gamma,beta}           .../LayerNorm/...
    ffn_sublayers[b].
      intermediate.*                    .../ffn_1/intermediate/dense/...
      output_dense.*                    .../ffn_1/intermediate/output/dense/...
      layer_norm.{gamma,beta}           .../LayerNorm_1/...
    pooler.{kernel,bias}                bert/pooler/dense/...

(The table is `modeling/albert/checkpoint_names.py`; `modeling.checkpoints`
reads and writes them, and Hugging Face's names beside them.) Only "all"
sharing has a google-research/albert (or HF) checkpoint layout; the other
modes are this project's, for the paper's ablations, and save through Keras
/ the trainer's checkpoints.

Activation: google-research/albert's `gelu` is the tanh approximation, and
its released checkpoints were trained with it, so `from_config_object` and
`build_albert_pretrainer` map a config's "gelu" to "gelu_tanh". The
constructor takes `hidden_act` literally (there "gelu" is the exact erf
form, as everywhere in this project).
"""

import keras

from modeling.albert.config import HEADS_PER_GROUP_KEY
from modeling.albert.config import AlbertConfig
from modeling.albert.config import check_heads_per_group
from modeling.encoder import EncoderBase
from modeling.layers import (
    LAYER_NORM_EPSILON,
    AttentionSublayer,
    BertEmbeddings,
    FeedForwardSublayer,
    gelu,
    register_activation,
    truncated_normal_initializer,
)

__all__ = [
    "AlbertEncoder",
    "EXACT_GELU",
    "SHARING_MODES",
    "albert_activation",
]

from modeling.layers.common import PACKAGE as _PACKAGE
SHARING_MODES = ("all", "attention", "ffn", "none")

# An ALBERT config's name for the exact (erf) GELU: its "gelu" is the tanh
# form (below), but Hugging Face's ALBERT computes the erf form for configs
# saying "gelu" (its v1 releases), and those must load as they compute.
EXACT_GELU = "gelu_erf"
register_activation(EXACT_GELU, gelu)


def albert_activation(name):
    """The activation google-research/albert means by a config's `hidden_act`.

    Its `gelu` is the tanh approximation; other names mean what they mean
    in `modeling.layers.get_activation`.
    """
    if isinstance(name, str) and name.lower() == "gelu":
        return "gelu_tanh"
    return name


# ------------------------------------------------------------------ encoder

_CONFIG_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AlbertEncoder(EncoderBase):
    """The ALBERT encoder (see the module docstring).

    Args:
        vocab_size ... initializer_range: as in `AlbertConfig` (`hidden_act`
            is taken literally; see the module docstring).
        share_parameters: "all" (default), "attention", "ffn" or "none".
        layer_norm_epsilon: 1e-12 as in ALBERT.
        output_attention_probs: default for returning attention
            probabilities (one entry per layer and inner group).
        num_attention_heads_per_group: optional list of `num_hidden_groups`
            head counts in [0, num_attention_heads] (a head-pruned ALBERT,
            `modeling.analysis.heads`): every attention block of group g has
            that many heads of width `hidden_size // num_attention_heads`.
            "all" sharing only; None = `num_attention_heads` everywhere.
        add_pooling_layer: build the tanh pooler (default); False for the
            weights of HF's `AlbertForMaskedLM`, which has none (then there
            is no `pooled_output`).
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).

    `num_hidden_groups` > 1 is only meaningful with "all" sharing (each
    group shares one block); the other modes need it to be 1.
    `inner_group_num` K > 1 applies K blocks in turn inside every layer;
    `encoder_outputs` holds the output of every layer (after its last inner
    block).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    _EXTRA_CONFIG_FIELDS = ("share_parameters", "add_pooling_layer") \
        + EncoderBase._EXTRA_CONFIG_FIELDS
    # A layer's head mask applies to each of its inner blocks.
    _SUPPORTS_HEAD_MASK = True
    _SUPPORTS_ATTENTION_SCORES = True

    def __init__(
        self,
        vocab_size,
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_hidden_groups=1,
        num_attention_heads=12,
        intermediate_size=3072,
        inner_group_num=1,
        hidden_act="gelu_tanh",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        share_parameters="all",
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        output_attention_probs=False,
        num_attention_heads_per_group=None,
        add_pooling_layer=True,
        **kwargs,
    ):
        kwargs.setdefault("name", "albert_encoder")
        super().__init__(**kwargs)
        self._check_head_width(hidden_size, num_attention_heads)
        if share_parameters not in SHARING_MODES:
            raise ValueError(
                f"share_parameters must be one of {SHARING_MODES}, got "
                f"{share_parameters!r}."
            )
        if not 1 <= num_hidden_groups <= num_hidden_layers:
            raise ValueError(
                f"num_hidden_groups ({num_hidden_groups}) must be in "
                f"[1, num_hidden_layers={num_hidden_layers}]."
            )
        if share_parameters != "all" and num_hidden_groups != 1:
            raise ValueError(
                "num_hidden_groups > 1 groups fully shared blocks; it needs "
                f"share_parameters='all', got {share_parameters!r}."
            )
        if inner_group_num < 1:
            raise ValueError(f"inner_group_num must be >= 1, got {inner_group_num}.")
        if num_attention_heads_per_group is not None:
            if share_parameters != "all":
                raise ValueError(
                    "num_attention_heads_per_group sets the heads of the fully shared "
                    f"blocks; it needs share_parameters='all', got {share_parameters!r}.")
            num_attention_heads_per_group = check_heads_per_group(
                num_attention_heads_per_group, num_hidden_groups, num_attention_heads)
        self.num_attention_heads_per_group = num_attention_heads_per_group
        self._set_fields(locals())

        policy = self.dtype_policy
        self.embeddings = BertEmbeddings.of_encoder(self, hidden_size=embedding_size)
        # As in google-research/albert, the projection exists only when the
        # widths differ.
        if embedding_size != hidden_size:
            self.embedding_projection = keras.layers.Dense(
                hidden_size,
                kernel_initializer=truncated_normal_initializer(initializer_range),
                dtype=policy,
                name="embedding_hidden_mapping_in",
            )
        else:
            self.embedding_projection = None

        num_blocks = self.num_hidden_groups * inner_group_num
        per_layer = num_hidden_layers * inner_group_num
        num_attention = {"all": num_blocks, "attention": inner_group_num}.get(
            share_parameters, per_layer)
        num_ffn = {"all": num_blocks, "ffn": inner_group_num}.get(
            share_parameters, per_layer)

        def head_args(block):
            # A pruned ALBERT: block b belongs to group b // inner_group_num.
            if num_attention_heads_per_group is None:
                return {}
            return {"num_attention_heads":
                    num_attention_heads_per_group[block // inner_group_num],
                    "head_size": hidden_size // num_attention_heads}

        self.attention_sublayers = [
            AttentionSublayer.of_encoder(self, f"attention_{i}", **head_args(i))
            for i in range(num_attention)
        ]
        self.ffn_sublayers = [FeedForwardSublayer.of_encoder(self, f"ffn_{i}")
                              for i in range(num_ffn)]
        # HF's AlbertForMaskedLM (and token-level task models) have no pooler.
        self.pooler = self._make_pooler() if add_pooling_layer else None
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, self.embedding_size))
        for layer in self.attention_sublayers + self.ffn_sublayers:
            layer.build((None, None, self.hidden_size))
        if self.pooler is not None:
            self.pooler.build((None, self.hidden_size))

    # ------------------------------------------------------------ structure

    def group_of_layer(self, layer_index):
        """The parameter group of layer `layer_index` ("all" sharing).

        google-research/albert's formula, float division included, so a
        checkpoint's `group_g` lands on the same layers.
        """
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    def sublayer_indices(self, layer_index, inner_index=0):
        """`(attention index, ffn index)` used by layer `layer_index`'s
        inner block `inner_index`."""
        k = self.inner_group_num
        shared = self.group_of_layer(layer_index) * k + inner_index
        own = layer_index * k + inner_index
        mode = self.share_parameters
        attention = shared if mode == "all" else (inner_index if mode == "attention" else own)
        ffn = shared if mode == "all" else (inner_index if mode == "ffn" else own)
        return attention, ffn

    @classmethod
    def from_config_object(cls, albert_config, **kwargs):
        """Builds an encoder from a `modeling.albert.AlbertConfig`.

        "gelu" becomes "gelu_tanh" (ALBERT's GELU, see the module
        docstring). `kwargs` (`share_parameters`, `name`, `dtype`,
        `output_attention_probs`, ...) go to the constructor; a
        `layer_norm_epsilon` in the config's extras is used.

        Raises:
            ValueError: `net_structure_type` is not 0 (the only structure
                google-research/albert implements).
        """
        net_structure = getattr(albert_config, "net_structure_type", 0)
        if net_structure != 0:
            raise ValueError(
                f"net_structure_type={net_structure} is not implemented (only 0, "
                "as in google-research/albert)."
            )
        args = cls._args_from_config_object(albert_config)
        args["hidden_act"] = albert_activation(args["hidden_act"])
        heads = (getattr(albert_config, "extra", None) or {}).get(HEADS_PER_GROUP_KEY)
        if heads is not None:
            args["num_attention_heads_per_group"] = list(heads)
        args.update(kwargs)
        return cls(**args)

    def albert_config(self):
        """The `AlbertConfig` describing this encoder (`from_config_object` gives it back).

        The activation is named as an ALBERT config names it: the tanh GELU
        "gelu", the exact one `EXACT_GELU`.
        """
        values = {field: getattr(self, field) for field in _CONFIG_FIELDS}
        act = values["hidden_act"]
        if isinstance(act, str):
            values["hidden_act"] = {"gelu_tanh": "gelu", "gelu": EXACT_GELU}.get(act.lower(), act)
        if self.layer_norm_epsilon != LAYER_NORM_EPSILON:
            values["layer_norm_epsilon"] = float(self.layer_norm_epsilon)
        if self.num_attention_heads_per_group is not None:
            values[HEADS_PER_GROUP_KEY] = list(self.num_attention_heads_per_group)
        return AlbertConfig(**values)

    def get_config(self):
        config = super().get_config()
        if self.num_attention_heads_per_group is not None:
            config["num_attention_heads_per_group"] = list(self.num_attention_heads_per_group)
        return config

    # ------------------------------------------------------------------ layers

    def _embed(self, input_ids, segment_ids, position_ids, training):
        factorized = self.embeddings(
            input_ids,
            segment_ids=segment_ids,
            position_ids=position_ids,
            training=training,
        )
        hidden = factorized
        if self.embedding_projection is not None:
            hidden = self.embedding_projection(factorized)
        return hidden, {"factorized_embedding_output": factorized}

    def _apply_layer(self, index, hidden, attention_mask, training, head_mask=None,
                     return_scores=False):
        probs = []
        for inner_index in range(self.inner_group_num):
            a, f = self.sublayer_indices(index, inner_index)
            hidden, block_probs = self.attention_sublayers[a](
                hidden, attention_mask=attention_mask, training=training,
                **({} if head_mask is None else {"head_mask": head_mask}),
                **({"return_scores": True} if return_scores else {}))
            hidden = self.ffn_sublayers[f](hidden, training=training)
            probs.append(block_probs)
        return hidden, probs
