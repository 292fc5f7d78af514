"""ALBERT's checkpoint names: google-research/albert's TF1 layout and Hugging Face's.

google-research/albert's checkpoints hold fully shared blocks under
`bert/encoder/transformer/group_g/inner_group_k/...`; `{group}` and
`{inner}` index them, `{block}` is the matching index into the encoder's
sublayer lists (g * inner_group_num + k). Every kernel is stored [in, out]
like the Keras Dense kernel (ALBERT's 3-D attention projections are reshaped
views of 2-D variables), except `cls/seq_relationship/output_weights`
([2, H]). The same table is used to read those checkpoints and to write
them (`save_google_checkpoint`), so an ALBERT trained here can go back to
google-research/albert's scripts.

Hugging Face's `AlbertModel` holds the same blocks under
`encoder.albert_layer_groups.{group}.albert_layers.{inner}.` (its
`AlbertForPreTraining` / task models put `albert.` before every encoder
name), PyTorch `nn.Linear` weights [out, in] (so TRANSPOSED), and its heads
at the top level: `predictions.*` (MLM; `predictions.decoder.weight` is the
tied word table, `predictions.decoder.bias` a copy of `predictions.bias`)
and `sop_classifier.classifier.*` (sentence order, [2, H] like Google's).
Both formats' names are written side by side in `NAME_ROWS`, one row per
weight, so a weight added to the model is one row for both; `GOOGLE_TF1`
and `HF` are the two `NameTable`s cut from it. Both lay out fully shared
blocks only: an encoder with another `share_parameters` mode has no name
in either (a one-line `CheckpointFormatError`).

Getters start from `encoder` (the `AlbertEncoder`), `mlm` (the
`MaskedLMHead`) and `nsp`: the sentence-order head, a `NextSentenceHead`,
stored where google-research/albert stores it, `cls/seq_relationship`.

keras-hub's `AlbertBackbone` (`KERAS_HUB`, by variable path, attention
kernels merged to 2-D by `modeling.pretrained.keras_hub`) holds the same
fully shared blocks as `group_{g}_inner_layer_{k}/`, running layer i in
group `i // (L / G)` (L a multiple of G, where that is google-research's
rounding too), and the embeddings, projection and pooler of the encoder.
"""

import collections

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.report import CheckpointFormatError
from modeling.objectives import MaskedLMHead
from modeling.objectives import NextSentenceHead

__all__ = ["ALBERT_NAME_TABLE", "CHECKPOINT_HEADS", "GOOGLE_TF1", "HF", "HF_NAME_TABLE",
           "KERAS_HUB", "NAME_ROWS", "NameRow"]

NameRow = collections.namedtuple(
    "NameRow", ["google_name", "getter", "transform", "hf_name", "hf_transform", "optional"],
    defaults=(False,))
NameRow.__doc__ = """One ALBERT weight under its Google and Hugging Face names.

    google_name: name in google-research/albert checkpoints.
    getter: attribute path from a root (`encoder`, `mlm`, `nsp`).
    transform: Google array -> Keras variable.
    hf_name: name in HF ALBERT state dicts, without the `albert.` prefix.
    hf_transform: HF array -> Keras variable.
    optional: the weight exists only in some encoders (the projection).
"""

_AG = "bert/encoder/transformer/group_{group}/inner_group_{inner}/"
_HG = "encoder.albert_layer_groups.{group}.albert_layers.{inner}."
_AA = "encoder.attention_sublayers[{block}]."
_AF = "encoder.ffn_sublayers[{block}]."


def _linear(google, getter, hf):
    """A Dense layer's kernel and bias: Google `<google>/{kernel,bias}`, HF `<hf>.{weight,bias}`."""
    return (NameRow(google + "/kernel", getter + ".kernel", AS_IS, hf + ".weight", TRANSPOSED),
            NameRow(google + "/bias", getter + ".bias", AS_IS, hf + ".bias", AS_IS))


def _layer_norm(google, getter, hf):
    return (NameRow(google + "/gamma", getter + ".gamma", AS_IS, hf + ".weight", AS_IS),
            NameRow(google + "/beta", getter + ".beta", AS_IS, hf + ".bias", AS_IS))


NAME_ROWS = (
    NameRow("bert/embeddings/word_embeddings", "encoder.embeddings.word_embeddings",
            AS_IS, "embeddings.word_embeddings.weight", AS_IS),
    NameRow("bert/embeddings/position_embeddings", "encoder.embeddings.position_embeddings",
            AS_IS, "embeddings.position_embeddings.weight", AS_IS),
    NameRow("bert/embeddings/token_type_embeddings",
            "encoder.embeddings.token_type_embeddings",
            AS_IS, "embeddings.token_type_embeddings.weight", AS_IS),
    *_layer_norm("bert/embeddings/LayerNorm", "encoder.embeddings.layer_norm",
                 "embeddings.LayerNorm"),
    # Only when embedding_size != hidden_size (else the encoder has no projection;
    # HF's always has one, which `hf_format.config_from_hf` checks).
    *(row._replace(optional=True) for row in _linear(
        "bert/encoder/embedding_hidden_mapping_in", "encoder.embedding_projection",
        "encoder.embedding_hidden_mapping_in")),
    *_linear(_AG + "attention_1/self/query", _AA + "attention.query", _HG + "attention.query"),
    *_linear(_AG + "attention_1/self/key", _AA + "attention.key", _HG + "attention.key"),
    *_linear(_AG + "attention_1/self/value", _AA + "attention.value", _HG + "attention.value"),
    *_linear(_AG + "attention_1/output/dense", _AA + "attention.output_dense",
             _HG + "attention.dense"),
    *_layer_norm(_AG + "LayerNorm", _AA + "layer_norm", _HG + "attention.LayerNorm"),
    *_linear(_AG + "ffn_1/intermediate/dense", _AF + "intermediate", _HG + "ffn"),
    *_linear(_AG + "ffn_1/intermediate/output/dense", _AF + "output_dense", _HG + "ffn_output"),
    *_layer_norm(_AG + "LayerNorm_1", _AF + "layer_norm", _HG + "full_layer_layer_norm"),
    # Only when the encoder has a pooler (HF's AlbertForMaskedLM has none).
    *(row._replace(optional=True) for row in _linear("bert/pooler/dense", "encoder.pooler",
                                                     "pooler")),
    # Heads: BERT's, with the MLM transform projecting to embedding_size.
    *_linear("cls/predictions/transform/dense", "mlm.transform_dense", "predictions.dense"),
    *_layer_norm("cls/predictions/transform/LayerNorm", "mlm.transform_layer_norm",
                 "predictions.LayerNorm"),
    NameRow("cls/predictions/output_bias", "mlm.output_bias", AS_IS, "predictions.bias", AS_IS),
    # Sentence order: Google and HF both store [2, H].
    NameRow("cls/seq_relationship/output_weights", "nsp.dense.kernel", TRANSPOSED,
            "sop_classifier.classifier.weight", TRANSPOSED),
    NameRow("cls/seq_relationship/output_bias", "nsp.dense.bias", AS_IS,
            "sop_classifier.classifier.bias", AS_IS),
)

ALBERT_NAME_TABLE = tuple(Entry(r.google_name, r.getter, r.transform, r.optional)
                          for r in NAME_ROWS)
HF_NAME_TABLE = tuple(Entry(r.hf_name, r.getter, r.hf_transform, r.optional)
                      for r in NAME_ROWS)

CHECKPOINT_HEADS = {
    "mlm": (MaskedLMHead, "masked_lm"),
    "nsp": (NextSentenceHead, "sentence_order"),
}


def _shared_blocks(encoder, layout="google-research/albert checkpoints"):
    """The `{group}`, `{inner}`, `{block}` of every shared block of `encoder`."""
    if encoder.share_parameters != "all":
        raise CheckpointFormatError(
            f"{layout} hold fully shared blocks "
            "(group_g/inner_group_k); an AlbertEncoder with "
            f"share_parameters={encoder.share_parameters!r} has no such layout.")
    return [dict(group=group, inner=inner, block=group * encoder.inner_group_num + inner)
            for group in range(encoder.num_hidden_groups)
            for inner in range(encoder.inner_group_num)]


def _hf_blocks(encoder):
    """`_shared_blocks`, for encoders whose layers use the groups HF's ALBERT gives them.

    HF's `AlbertTransformer` puts layer i in group `int(i / (L / G))`,
    google-research/albert (and `AlbertEncoder.group_of_layer`)
    `int(i / L * G)`; the two round differently for a few (L, G) (22 layers
    in 22 groups, at layer 15), where the same weights would compute
    something else here, so those are refused.
    """
    layers, groups = encoder.num_hidden_layers, encoder.num_hidden_groups
    for layer in range(layers):
        if int(layer / (layers / groups)) != encoder.group_of_layer(layer):
            raise CheckpointFormatError(
                f"HF's ALBERT puts layer {layer} of {layers} in group "
                f"{int(layer / (layers / groups))} of {groups}, this encoder in group "
                f"{encoder.group_of_layer(layer)} (google-research/albert's rounding); "
                "these layer/group counts cannot be shared between the two.")
    return _shared_blocks(encoder, "Hugging Face ALBERT folders")


GOOGLE_TF1 = NameTable(
    entries=ALBERT_NAME_TABLE,
    repeat=_shared_blocks,
    encoder_prefixes=("bert/",),
    head_prefixes=("cls/",),
)


def _hf_name(name):
    """HF names as the table writes them: `AlbertModel` saves its names bare,
    `AlbertForPreTraining` and the task models under `albert.`."""
    return name[len("albert."):] if name.startswith("albert.") else name


HF = NameTable(
    entries=HF_NAME_TABLE,
    repeat=_hf_blocks,
    encoder_prefixes=("embeddings.", "encoder.", "pooler."),
    head_prefixes=("predictions.", "sop_classifier."),
    # Buffers saved with the weights by some versions, not parameters.
    ignore=((r"(^|\.)(position_ids|token_type_ids)$", "buffer, not a weight"),
            (r"^pooler\.", "pooler, and this encoder has none (add_pooling_layer=False)")),
    # transformers saves the MLM bias also as the decoder's bias (one tensor).
    aliases={"predictions.bias": ("predictions.decoder.bias",)},
    # The MLM decoder is the word embedding table (this model can only tie them).
    tied=(Tied("predictions.decoder.weight", "embeddings.word_embeddings.weight", "mlm"),),
    rename=_hf_name,
    # HF's task models (`*ForMaskedLM`, ...) are saved without a pooler: the
    # encoder keeps its initial one, listed in the report's missing heads.
    may_be_absent=(r"^pooler\.",),
)


def _keras_hub_blocks(encoder):
    """`_shared_blocks`, for encoders whose layers use the groups keras-hub's ALBERT gives them."""
    if encoder.num_hidden_layers % encoder.num_hidden_groups:
        raise CheckpointFormatError(
            f"keras-hub's ALBERT needs num_hidden_layers ({encoder.num_hidden_layers}) to be a "
            f"multiple of num_hidden_groups ({encoder.num_hidden_groups}).")
    return _shared_blocks(encoder, "keras-hub ALBERT presets")


_KG = "group_{group}_inner_layer_{inner}/"


def _dense(theirs, getter):
    return ((theirs + "/kernel", getter + ".kernel"), (theirs + "/bias", getter + ".bias"))


def _norm(theirs, getter):
    return ((theirs + "/gamma", getter + ".gamma"), (theirs + "/beta", getter + ".beta"))


_KERAS_HUB_ROWS = (
    ("token_embedding/embeddings", "encoder.embeddings.word_embeddings", False),
    ("position_embedding/embeddings", "encoder.embeddings.position_embeddings", False),
    ("segment_embedding/embeddings", "encoder.embeddings.token_type_embeddings", False),
    *((n, g, False) for n, g in _norm("embeddings_layer_norm", "encoder.embeddings.layer_norm")),
    *((n, g, True) for n, g in _dense("embedding_projection", "encoder.embedding_projection")),
    *((n, g, False) for theirs, ours in (("query", "query"), ("key", "key"), ("value", "value"),
                                         ("attention_output", "output_dense"))
      for n, g in _dense(_KG + "self_attention_layer/" + theirs, _AA + "attention." + ours)),
    *((n, g, False) for n, g in _norm(_KG + "self_attention_layer_norm", _AA + "layer_norm")),
    *((n, g, False) for n, g in _dense(_KG + "feedforward_intermediate_dense",
                                       _AF + "intermediate")),
    *((n, g, False) for n, g in _dense(_KG + "feedforward_output_dense", _AF + "output_dense")),
    *((n, g, False) for n, g in _norm(_KG + "feedforward_layer_norm", _AF + "layer_norm")),
    *((n, g, True) for n, g in _dense("pooled_dense", "encoder.pooler")),
)

KERAS_HUB = NameTable(
    entries=tuple(Entry(name, getter, AS_IS, optional) for name, getter, optional
                  in _KERAS_HUB_ROWS),
    repeat=_keras_hub_blocks,
    encoder_prefixes=("token_embedding/", "position_embedding/", "segment_embedding/",
                      "embeddings_layer_norm/", "embedding_projection/", "group_",
                      "pooled_dense/"),
)
