"""`DistilBertEncoder`: DistilBERT's encoder, which is BERT's with two parts removed.

DistilBERT (Sanh et al. 2019) is BERT's post-LN Transformer encoder
without token-type (segment) embeddings and without the tanh pooler:
embeddings = LayerNorm(word + position), then `n_layers` blocks of
LayerNorm(x + attention(x)) and LayerNorm(h + lin2(act(lin1(h)))), every
LayerNorm with epsilon 1e-12. So the encoder is `BertEncoder` itself,
built with `type_vocab_size` 0 (`BertEmbeddings` then has no token-type
table and adds nothing for segments) and no pooler; it is a subclass so
that it is a family of its own (the BERT family recognises exactly
`BertEncoder`), with its own checkpoint names (`checkpoint_names`) and
config (`DistilBertConfig`, HF's field names).

    >>> encoder = DistilBertEncoder.from_config_object(DistilBertConfig(
    ...     vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64))
    >>> encoder({"input_ids": ids, "input_mask": mask})["sequence_output"]

Inputs are BERT's; `segment_ids`, if given, are ignored (HF's
DistilBertModel takes no `token_type_ids`). Outputs are BERT's without
`pooled_output`: sentence-level tasks take the first position's vector
themselves (HF's DistilBertForSequenceClassification: ReLU(pre_classifier(
h[:, 0])) then classifier).

`sinusoidal_pos_embds=True`: HF fills the position table with fixed
sinusoids (sin on even, cos on odd columns, position / 10000^(2*(j//2)/dim))
and does not train it; the table is still saved with the weights, so only
a fresh encoder needs it: it is filled and made non-trainable here.
"""

import keras
import numpy as np

from modeling.bert.encoder import BertEncoder
from modeling.distilbert.config import BERT_NAMES
from modeling.distilbert.config import DistilBertConfig
from modeling.layers import LAYER_NORM_EPSILON

__all__ = ["DistilBertEncoder", "sinusoidal_table"]

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
    "initializer_range",
)


def sinusoidal_table(num_positions, width):
    """HF DistilBERT's fixed position table `[num_positions, width]` (float32)."""
    positions = np.arange(num_positions, dtype=np.float64)[:, None]
    columns = np.arange(width)
    angles = positions / np.power(10000.0, 2 * (columns // 2) / width)[None, :]
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)


@keras.saving.register_keras_serializable(package="distilbert_family")
class DistilBertEncoder(BertEncoder):
    """BERT's encoder without token types and pooler (see the module docstring).

    Args:
        vocab_size ... initializer_range: as `BertEncoder`'s (BERT-style
            names; `DistilBertConfig` maps HF's onto them).
        sinusoidal_pos_embds: fixed sinusoidal position table (frozen).
        layer_norm_epsilon: 1e-12, as HF's DistilBERT hard-codes.
        output_attention_probs, num_attention_heads_per_layer, **kwargs:
            as `BertEncoder`'s.
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    # Read by `BertEmbeddings.of_encoder`: no token-type table.
    type_vocab_size = 0

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        initializer_range=0.02,
        sinusoidal_pos_embds=False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        output_attention_probs=False,
        num_attention_heads_per_layer=None,
        **kwargs,
    ):
        kwargs.setdefault("name", "distilbert_encoder")
        super().__init__(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            hidden_act=hidden_act,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=0,
            initializer_range=initializer_range,
            layer_norm_epsilon=layer_norm_epsilon,
            output_attention_probs=output_attention_probs,
            num_attention_heads_per_layer=num_attention_heads_per_layer,
            **kwargs,
        )
        self.sinusoidal_pos_embds = bool(sinusoidal_pos_embds)
        if self.sinusoidal_pos_embds:
            table = self.embeddings.position_embeddings
            table.assign(sinusoidal_table(max_position_embeddings, hidden_size))
            table.trainable = False

    def _make_pooler(self):
        return None  # DistilBERT has no pooler; `pooled_output` is not returned.

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """An encoder for a `DistilBertConfig` (`kwargs`: `name`, `dtype`, ...)."""
        kwargs.setdefault("sinusoidal_pos_embds", getattr(config, "sinusoidal_pos_embds", False))
        return super().from_config_object(config, **kwargs)

    def distilbert_config(self):
        """The `DistilBertConfig` describing this encoder (HF's field names)."""
        values = {BERT_NAMES.get(field, field): getattr(self, field)
                  for field in _CONFIG_FIELDS}
        return DistilBertConfig(sinusoidal_pos_embds=self.sinusoidal_pos_embds, **values)

    bert_config = distilbert_config

    def get_config(self):
        config = super().get_config()
        config["sinusoidal_pos_embds"] = self.sinusoidal_pos_embds
        return config
