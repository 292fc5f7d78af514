"""ALBERT's checkpoint names: google-research/albert's TF1 layout.

google-research/albert's checkpoints hold fully shared blocks under
`bert/encoder/transformer/group_g/inner_group_k/...`; `{group}` and
`{inner}` index them, `{block}` is the matching index into the encoder's
sublayer lists (g * inner_group_num + k). Every kernel is stored [in, out]
like the Keras Dense kernel (ALBERT's 3-D attention projections are reshaped
views of 2-D variables), except `cls/seq_relationship/output_weights`
([2, H]). The same table is used to read those checkpoints and to write
them (`save_google_checkpoint`), so an ALBERT trained here can go back to
google-research/albert's scripts.

Getters start from `encoder` (the `AlbertEncoder`), `mlm` (the
`MaskedLMHead`) and `nsp`: the sentence-order head, a `NextSentenceHead`,
stored where google-research/albert stores it, `cls/seq_relationship`.
"""

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.report import CheckpointFormatError
from modeling.objectives import MaskedLMHead
from modeling.objectives import NextSentenceHead

__all__ = ["ALBERT_NAME_TABLE", "CHECKPOINT_HEADS", "GOOGLE_TF1"]

_AG = "bert/encoder/transformer/group_{group}/inner_group_{inner}/"
_AA = "encoder.attention_sublayers[{block}]."
_AF = "encoder.ffn_sublayers[{block}]."

ALBERT_NAME_TABLE = (
    Entry("bert/embeddings/word_embeddings", "encoder.embeddings.word_embeddings", AS_IS),
    Entry("bert/embeddings/position_embeddings",
          "encoder.embeddings.position_embeddings", AS_IS),
    Entry("bert/embeddings/token_type_embeddings",
          "encoder.embeddings.token_type_embeddings", AS_IS),
    Entry("bert/embeddings/LayerNorm/gamma", "encoder.embeddings.layer_norm.gamma", AS_IS),
    Entry("bert/embeddings/LayerNorm/beta", "encoder.embeddings.layer_norm.beta", AS_IS),
    # Only when embedding_size != hidden_size (else the encoder has no projection).
    Entry("bert/encoder/embedding_hidden_mapping_in/kernel",
          "encoder.embedding_projection.kernel", AS_IS, optional=True),
    Entry("bert/encoder/embedding_hidden_mapping_in/bias",
          "encoder.embedding_projection.bias", AS_IS, optional=True),
    Entry(_AG + "attention_1/self/query/kernel", _AA + "attention.query.kernel", AS_IS),
    Entry(_AG + "attention_1/self/query/bias", _AA + "attention.query.bias", AS_IS),
    Entry(_AG + "attention_1/self/key/kernel", _AA + "attention.key.kernel", AS_IS),
    Entry(_AG + "attention_1/self/key/bias", _AA + "attention.key.bias", AS_IS),
    Entry(_AG + "attention_1/self/value/kernel", _AA + "attention.value.kernel", AS_IS),
    Entry(_AG + "attention_1/self/value/bias", _AA + "attention.value.bias", AS_IS),
    Entry(_AG + "attention_1/output/dense/kernel", _AA + "attention.output_dense.kernel",
          AS_IS),
    Entry(_AG + "attention_1/output/dense/bias", _AA + "attention.output_dense.bias", AS_IS),
    Entry(_AG + "LayerNorm/gamma", _AA + "layer_norm.gamma", AS_IS),
    Entry(_AG + "LayerNorm/beta", _AA + "layer_norm.beta", AS_IS),
    Entry(_AG + "ffn_1/intermediate/dense/kernel", _AF + "intermediate.kernel", AS_IS),
    Entry(_AG + "ffn_1/intermediate/dense/bias", _AF + "intermediate.bias", AS_IS),
    Entry(_AG + "ffn_1/intermediate/output/dense/kernel", _AF + "output_dense.kernel", AS_IS),
    Entry(_AG + "ffn_1/intermediate/output/dense/bias", _AF + "output_dense.bias", AS_IS),
    Entry(_AG + "LayerNorm_1/gamma", _AF + "layer_norm.gamma", AS_IS),
    Entry(_AG + "LayerNorm_1/beta", _AF + "layer_norm.beta", AS_IS),
    Entry("bert/pooler/dense/kernel", "encoder.pooler.kernel", AS_IS),
    Entry("bert/pooler/dense/bias", "encoder.pooler.bias", AS_IS),
    # Heads: BERT's, with the MLM transform projecting to embedding_size.
    Entry("cls/predictions/transform/dense/kernel", "mlm.transform_dense.kernel", AS_IS),
    Entry("cls/predictions/transform/dense/bias", "mlm.transform_dense.bias", AS_IS),
    Entry("cls/predictions/transform/LayerNorm/gamma", "mlm.transform_layer_norm.gamma",
          AS_IS),
    Entry("cls/predictions/transform/LayerNorm/beta", "mlm.transform_layer_norm.beta", AS_IS),
    Entry("cls/predictions/output_bias", "mlm.output_bias", AS_IS),
    Entry("cls/seq_relationship/output_weights", "nsp.dense.kernel", TRANSPOSED),
    Entry("cls/seq_relationship/output_bias", "nsp.dense.bias", AS_IS),
)

CHECKPOINT_HEADS = {
    "mlm": (MaskedLMHead, "masked_lm"),
    "nsp": (NextSentenceHead, "sentence_order"),
}


def _shared_blocks(encoder):
    """The `{group}`, `{inner}`, `{block}` of every shared block of `encoder`."""
    if encoder.share_parameters != "all":
        raise CheckpointFormatError(
            "google-research/albert checkpoints hold fully shared blocks "
            "(group_g/inner_group_k); an AlbertEncoder with "
            f"share_parameters={encoder.share_parameters!r} has no such layout.")
    return [dict(group=group, inner=inner, block=group * encoder.inner_group_num + inner)
            for group in range(encoder.num_hidden_groups)
            for inner in range(encoder.inner_group_num)]


GOOGLE_TF1 = NameTable(
    entries=ALBERT_NAME_TABLE,
    repeat=_shared_blocks,
    encoder_prefixes=("bert/",),
    head_prefixes=("cls/",),
)
