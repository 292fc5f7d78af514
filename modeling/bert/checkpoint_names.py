"""BERT's checkpoint names: google-research/bert's TF1 names and HF's.

Both formats' names are written down once, side by side, in `NAME_TABLE`:
one `NameEntry(google_name, getter, transform, hf_name, hf_transform)` per
weight, with `{layer}` standing for the block index, so that a weight added
to the model is one row for both formats. `GOOGLE_TF1` and `HF` are the two
`NameTable`s cut from it (see `modeling.checkpoints.name_tables`), registered
on the BERT family as `name_tables={"google_tf1": ..., "hf": ...}`.

Getters start from `encoder` (the `BertEncoder`), `mlm` (a pretrainer's
`MaskedLMHead`) or `nsp` (its `NextSentenceHead`); `CHECKPOINT_HEADS` tells
the checkpoint code how to find those heads. Google's TF1 kernels are
[in, out] like Keras Dense kernels; PyTorch `nn.Linear` weights are
[out, in]; Google and HF both store the next-sentence weights [2, hidden].
"""

import collections
import re

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import each_layer
from modeling.checkpoints.name_tables import keras_hub_encoder_block_rows
from modeling.objectives import MaskedLMHead
from modeling.objectives import NextSentenceHead

__all__ = ["CHECKPOINT_HEADS", "GOOGLE_TF1", "HF", "KERAS_HUB", "NAME_TABLE", "NameEntry"]

NameEntry = collections.namedtuple(
    "NameEntry", ["google_name", "getter", "transform", "hf_name", "hf_transform"]
)
NameEntry.__doc__ = """One BERT weight under its Google and Hugging Face names.

    google_name: name in google-research/bert checkpoints (`{layer}` = block).
    getter: attribute path from a root (`encoder`, `mlm`, `nsp`) to the
        Keras variable, e.g.
        `encoder.transformer_layers[{layer}].ffn_sublayer.intermediate.kernel`.
    transform: Google array -> Keras variable (`AS_IS` or `TRANSPOSED`).
    hf_name: name in HF BERT state dicts (without the `bert.` prefix).
    hf_transform: HF array -> Keras variable.
"""

_L = "bert/encoder/layer_{layer}/"
_T = "encoder.transformer_layers[{layer}]."
_TA = _T + "attention_sublayer."
_TF = _T + "ffn_sublayer."
_H = "encoder.layer.{layer}."

NAME_TABLE = (
    # Embeddings.
    NameEntry("bert/embeddings/word_embeddings", "encoder.embeddings.word_embeddings",
              AS_IS, "embeddings.word_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/position_embeddings",
              "encoder.embeddings.position_embeddings",
              AS_IS, "embeddings.position_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/token_type_embeddings",
              "encoder.embeddings.token_type_embeddings",
              AS_IS, "embeddings.token_type_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/LayerNorm/gamma", "encoder.embeddings.layer_norm.gamma",
              AS_IS, "embeddings.LayerNorm.weight", AS_IS),
    NameEntry("bert/embeddings/LayerNorm/beta", "encoder.embeddings.layer_norm.beta",
              AS_IS, "embeddings.LayerNorm.bias", AS_IS),
    # Transformer blocks. TF1 kernels are [in, out] like Keras; PyTorch's
    # Linear weights are [out, in].
    NameEntry(_L + "attention/self/query/kernel", _TA + "attention.query.kernel",
              AS_IS, _H + "attention.self.query.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/query/bias", _TA + "attention.query.bias",
              AS_IS, _H + "attention.self.query.bias", AS_IS),
    NameEntry(_L + "attention/self/key/kernel", _TA + "attention.key.kernel",
              AS_IS, _H + "attention.self.key.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/key/bias", _TA + "attention.key.bias",
              AS_IS, _H + "attention.self.key.bias", AS_IS),
    NameEntry(_L + "attention/self/value/kernel", _TA + "attention.value.kernel",
              AS_IS, _H + "attention.self.value.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/value/bias", _TA + "attention.value.bias",
              AS_IS, _H + "attention.self.value.bias", AS_IS),
    NameEntry(_L + "attention/output/dense/kernel", _TA + "attention.output_dense.kernel",
              AS_IS, _H + "attention.output.dense.weight", TRANSPOSED),
    NameEntry(_L + "attention/output/dense/bias", _TA + "attention.output_dense.bias",
              AS_IS, _H + "attention.output.dense.bias", AS_IS),
    NameEntry(_L + "attention/output/LayerNorm/gamma", _TA + "layer_norm.gamma",
              AS_IS, _H + "attention.output.LayerNorm.weight", AS_IS),
    NameEntry(_L + "attention/output/LayerNorm/beta", _TA + "layer_norm.beta",
              AS_IS, _H + "attention.output.LayerNorm.bias", AS_IS),
    NameEntry(_L + "intermediate/dense/kernel", _TF + "intermediate.kernel",
              AS_IS, _H + "intermediate.dense.weight", TRANSPOSED),
    NameEntry(_L + "intermediate/dense/bias", _TF + "intermediate.bias",
              AS_IS, _H + "intermediate.dense.bias", AS_IS),
    NameEntry(_L + "output/dense/kernel", _TF + "output_dense.kernel",
              AS_IS, _H + "output.dense.weight", TRANSPOSED),
    NameEntry(_L + "output/dense/bias", _TF + "output_dense.bias",
              AS_IS, _H + "output.dense.bias", AS_IS),
    NameEntry(_L + "output/LayerNorm/gamma", _TF + "layer_norm.gamma",
              AS_IS, _H + "output.LayerNorm.weight", AS_IS),
    NameEntry(_L + "output/LayerNorm/beta", _TF + "layer_norm.beta",
              AS_IS, _H + "output.LayerNorm.bias", AS_IS),
    # Pooler.
    NameEntry("bert/pooler/dense/kernel", "encoder.pooler.kernel",
              AS_IS, "pooler.dense.weight", TRANSPOSED),
    NameEntry("bert/pooler/dense/bias", "encoder.pooler.bias",
              AS_IS, "pooler.dense.bias", AS_IS),
    # Masked-LM head (its decoder matrix is the tied word embedding table).
    NameEntry("cls/predictions/transform/dense/kernel", "mlm.transform_dense.kernel",
              AS_IS, "cls.predictions.transform.dense.weight", TRANSPOSED),
    NameEntry("cls/predictions/transform/dense/bias", "mlm.transform_dense.bias",
              AS_IS, "cls.predictions.transform.dense.bias", AS_IS),
    NameEntry("cls/predictions/transform/LayerNorm/gamma",
              "mlm.transform_layer_norm.gamma",
              AS_IS, "cls.predictions.transform.LayerNorm.weight", AS_IS),
    NameEntry("cls/predictions/transform/LayerNorm/beta",
              "mlm.transform_layer_norm.beta",
              AS_IS, "cls.predictions.transform.LayerNorm.bias", AS_IS),
    NameEntry("cls/predictions/output_bias", "mlm.output_bias",
              AS_IS, "cls.predictions.bias", AS_IS),
    # Next-sentence head: both Google and HF store [2, hidden].
    NameEntry("cls/seq_relationship/output_weights", "nsp.dense.kernel",
              TRANSPOSED, "cls.seq_relationship.weight", TRANSPOSED),
    NameEntry("cls/seq_relationship/output_bias", "nsp.dense.bias",
              AS_IS, "cls.seq_relationship.bias", AS_IS),
)

# Head roots of the getters: found among a pretrainer's objectives by head
# type; with several of a type, the objective of this name.
CHECKPOINT_HEADS = {
    "mlm": (MaskedLMHead, "masked_lm"),
    "nsp": (NextSentenceHead, "next_sentence"),
}

GOOGLE_TF1 = NameTable(
    entries=tuple(Entry(e.google_name, e.getter, e.transform) for e in NAME_TABLE),
    repeat=each_layer,
    encoder_prefixes=("bert/",),
    head_prefixes=("cls/",),
)


def _hf_name(name):
    """HF names as the table writes them.

    A `BertModel` is saved without a prefix, `BertForPreTraining` and the
    task models with `bert.`; pytorch-pretrained-bert named LayerNorm
    parameters `gamma`/`beta` instead of `weight`/`bias`.
    """
    name = name[len("bert."):] if name.startswith("bert.") else name
    name = re.sub(r"\.gamma$", ".weight", name)
    return re.sub(r"\.beta$", ".bias", name)


HF = NameTable(
    entries=tuple(Entry(e.hf_name, e.getter, e.hf_transform) for e in NAME_TABLE),
    repeat=each_layer,
    encoder_prefixes=("embeddings.", "encoder.", "pooler."),
    head_prefixes=("cls.",),
    # Buffers saved with the weights, not parameters.
    ignore=((r"(^|\.)(position_ids|token_type_ids)$", "buffer, not a weight"),),
    # Newer transformers versions also save the MLM bias as the decoder's.
    aliases={"cls.predictions.bias": ("cls.predictions.decoder.bias",)},
    # The MLM decoder is the word embedding table (this model can only tie them).
    tied=(Tied("cls.predictions.decoder.weight", "embeddings.word_embeddings.weight",
               "mlm"),),
    rename=_hf_name,
    # HF's task models (`*ForMaskedLM`, ...) are saved without a pooler: the
    # encoder keeps its initial one, listed in the report's missing heads.
    may_be_absent=(r"^pooler\.",),
)


# keras-hub's BertBackbone, by variable path (`modeling.pretrained.keras_hub`
# shows its EinsumDense attention kernels merged to 2-D, as ours are).
_KERAS_HUB_ROWS = (
    ("token_embedding/embeddings", "encoder.embeddings.word_embeddings"),
    ("position_embedding/embeddings", "encoder.embeddings.position_embeddings"),
    ("segment_embedding/embeddings", "encoder.embeddings.token_type_embeddings"),
    ("embeddings_layer_norm/gamma", "encoder.embeddings.layer_norm.gamma"),
    ("embeddings_layer_norm/beta", "encoder.embeddings.layer_norm.beta"),
    *keras_hub_encoder_block_rows(),
    ("pooled_dense/kernel", "encoder.pooler.kernel"),
    ("pooled_dense/bias", "encoder.pooler.bias"),
)

KERAS_HUB = NameTable(
    entries=tuple(Entry(name, getter, AS_IS) for name, getter in _KERAS_HUB_ROWS),
    repeat=each_layer,
    encoder_prefixes=("token_embedding/", "position_embedding/", "segment_embedding/",
                      "embeddings_layer_norm/", "transformer_layer_", "pooled_dense/"),
)
