"""Shared building blocks: no family, no objective, only layers.

* `activations`: activations by name, BERT's initialiser;
* `masks`: attention masks as data (padding, causal; families build others);
* `embeddings`: BERT's word + position + token-type embeddings;
* `attention`: multi-head self-attention with any mask, an additive bias and
  a key/value cache for incremental decoding;
* `transformer`: post-LN and pre-LN blocks from two shared halves, and the
  encoder-decoder's decoder block (a cross-attention half in between).

Every layer is a Keras 3 layer whose constructor arguments are plain values
mirrored by `get_config()`, numerically Google's (initialiser, LayerNorm
epsilon, -10000 mask adder). Mixed precision: layers follow their dtype
policy; attention scores get their mask and softmax in float32, and
LayerNormalization normalises in float32.
"""

from modeling.layers.activations import gelu
from modeling.layers.activations import gelu_tanh
from modeling.layers.activations import get_activation
from modeling.layers.activations import register_activation
from modeling.layers.activations import truncated_normal_initializer
from modeling.layers.attention import MultiHeadSelfAttention
from modeling.layers.common import LAYER_NORM_EPSILON
from modeling.layers.common import MASK_ADDER
from modeling.layers.embeddings import BertEmbeddings
from modeling.layers.masks import causal_attention_mask
from modeling.layers.masks import padding_attention_mask
from modeling.layers.transformer import AttentionSublayer
from modeling.layers.transformer import CrossAttentionSublayer
from modeling.layers.transformer import FeedForwardSublayer
from modeling.layers.transformer import TransformerBlock
from modeling.layers.transformer import TransformerDecoderBlock

__all__ = [
    "AttentionSublayer",
    "BertEmbeddings",
    "CrossAttentionSublayer",
    "FeedForwardSublayer",
    "LAYER_NORM_EPSILON",
    "MASK_ADDER",
    "MultiHeadSelfAttention",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "causal_attention_mask",
    "gelu",
    "gelu_tanh",
    "get_activation",
    "padding_attention_mask",
    "register_activation",
    "truncated_normal_initializer",
]
