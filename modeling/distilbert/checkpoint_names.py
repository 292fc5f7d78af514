"""DistilBERT's Hugging Face tensor names, as a `NameTable` (`modeling.checkpoints.name_tables`).

HF's DistilBERT modules (`modeling_distilbert.py`) name BERT's weights
their own way; the model's attribute paths are `BertEncoder`'s:

    embeddings.word_embeddings.weight        encoder.embeddings.word_embeddings
    embeddings.position_embeddings.weight    encoder.embeddings.position_embeddings
    embeddings.LayerNorm.{weight,bias}       encoder.embeddings.layer_norm.{gamma,beta}
    transformer.layer.N.attention.q_lin      .attention_sublayer.attention.query   (T)
      .k_lin / .v_lin / .out_lin             .key / .value / .output_dense          (T)
    transformer.layer.N.sa_layer_norm        .attention_sublayer.layer_norm
    transformer.layer.N.ffn.lin1 / .lin2     .ffn_sublayer.intermediate / .output_dense (T)
    transformer.layer.N.output_layer_norm    .ffn_sublayer.layer_norm
    vocab_transform                          mlm.transform_dense                   (T)
    vocab_layer_norm                         mlm.transform_layer_norm
    vocab_projector.bias                     mlm.output_bias
    vocab_projector.weight                   tied: the word embedding table

(T): PyTorch `nn.Linear` weights are `[out, in]`, Keras kernels `[in, out]`.
HF's MLM head is vocab_transform -> the config's `activation` ->
vocab_layer_norm (1e-12) -> vocab_projector, which is what
`modeling.objectives.MaskedLMHead` computes (dense, activation, LayerNorm,
tied decoder plus bias), so a pretrainer's masked-LM head is the `mlm` root.

`DistilBertModel` saves the encoder names bare; `DistilBertForMaskedLM` and
the task models put `distilbert.` before them (the head names stay bare),
which `rename` strips. The sequence classifier's `pre_classifier` and
`classifier` are a task head: skipped when loading.

keras-hub's `DistilBertBackbone` (`KERAS_HUB`) holds the encoder's weights by
variable path: `token_and_position_embedding/{token,position}_embedding`,
`embeddings_layer_norm` and per block BERT's keras-hub names
(`transformer_layer_N/self_attention_layer/...`), its EinsumDense attention
kernels shown merged to 2-D by `modeling.pretrained.keras_hub`.
"""

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import each_layer
from modeling.checkpoints.name_tables import keras_hub_encoder_block_rows
from modeling.objectives import MaskedLMHead

__all__ = ["CHECKPOINT_HEADS", "HF", "KERAS_HUB", "PREFIX"]

# The prefix of the encoder's names in HF's task models.
PREFIX = "distilbert."

_H = "transformer.layer.{layer}."
_T = "encoder.transformer_layers[{layer}]."
_TA = _T + "attention_sublayer."
_TF = _T + "ffn_sublayer."


def _linear(hf_name, getter):
    """A PyTorch `nn.Linear`: its transposed weight and its bias."""
    return (Entry(hf_name + ".weight", getter + ".kernel", TRANSPOSED),
            Entry(hf_name + ".bias", getter + ".bias", AS_IS))


def _layer_norm(hf_name, getter):
    return (Entry(hf_name + ".weight", getter + ".gamma", AS_IS),
            Entry(hf_name + ".bias", getter + ".beta", AS_IS))


_ENTRIES = (
    Entry("embeddings.word_embeddings.weight", "encoder.embeddings.word_embeddings", AS_IS),
    Entry("embeddings.position_embeddings.weight", "encoder.embeddings.position_embeddings",
          AS_IS),
    *_layer_norm("embeddings.LayerNorm", "encoder.embeddings.layer_norm"),
    *_linear(_H + "attention.q_lin", _TA + "attention.query"),
    *_linear(_H + "attention.k_lin", _TA + "attention.key"),
    *_linear(_H + "attention.v_lin", _TA + "attention.value"),
    *_linear(_H + "attention.out_lin", _TA + "attention.output_dense"),
    *_layer_norm(_H + "sa_layer_norm", _TA + "layer_norm"),
    *_linear(_H + "ffn.lin1", _TF + "intermediate"),
    *_linear(_H + "ffn.lin2", _TF + "output_dense"),
    *_layer_norm(_H + "output_layer_norm", _TF + "layer_norm"),
    # Masked-LM head (its decoder matrix is the tied word embedding table).
    *_linear("vocab_transform", "mlm.transform_dense"),
    *_layer_norm("vocab_layer_norm", "mlm.transform_layer_norm"),
    Entry("vocab_projector.bias", "mlm.output_bias", AS_IS),
)

# Head roots of the getters, found among a pretrainer's objectives by head type.
CHECKPOINT_HEADS = {"mlm": (MaskedLMHead, "masked_lm")}


def _hf_name(name):
    """HF names as the table writes them: the task models' `distilbert.` prefix dropped."""
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


HF = NameTable(
    entries=_ENTRIES,
    repeat=each_layer,
    encoder_prefixes=("embeddings.", "transformer."),
    head_prefixes=("vocab_transform.", "vocab_layer_norm.", "vocab_projector."),
    # Buffers some transformers versions saved with the weights.
    ignore=((r"(^|\.)position_ids$", "buffer, not a weight"),),
    # The MLM decoder is the word embedding table (this model can only tie them).
    tied=(Tied("vocab_projector.weight", "embeddings.word_embeddings.weight", "mlm"),),
    rename=_hf_name,
)


# keras-hub's DistilBertBackbone, by variable path (`modeling.pretrained.keras_hub`
# shows its EinsumDense attention kernels merged to 2-D, as ours are); no MLM head.
_KERAS_HUB_ROWS = (
    ("token_and_position_embedding/token_embedding/embeddings",
     "encoder.embeddings.word_embeddings"),
    ("token_and_position_embedding/position_embedding/embeddings",
     "encoder.embeddings.position_embeddings"),
    ("embeddings_layer_norm/gamma", "encoder.embeddings.layer_norm.gamma"),
    ("embeddings_layer_norm/beta", "encoder.embeddings.layer_norm.beta"),
    *keras_hub_encoder_block_rows(),
)

KERAS_HUB = NameTable(
    entries=tuple(Entry(name, getter, AS_IS) for name, getter in _KERAS_HUB_ROWS),
    repeat=each_layer,
    encoder_prefixes=("token_and_position_embedding/", "embeddings_layer_norm/",
                      "transformer_layer_"),
)
