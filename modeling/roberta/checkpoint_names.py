"""RoBERTa's Hugging Face checkpoint names: BERT's encoder rows, RoBERTa's `lm_head`.

HF's `RobertaModel` is BERT's module tree, so the encoder's stored names
(`embeddings.*`, `encoder.layer.N.*`, `pooler.dense.*`) and layouts are
BERT's; they are taken from `modeling.bert.checkpoint_names.NAME_TABLE`
rather than written twice. What differs:

* the prefix: `RobertaModel` is saved without one, the task models
  (`RobertaForMaskedLM`, `RobertaForSequenceClassification`, ...) with
  `roberta.`;
* the pooler may be absent: the task models are built without one and
  their files (the released `roberta-base` among them) have none. An
  encoder with a pooler keeps its initial pooler then, listed in
  `LoadReport.missing_heads` (HF's `RobertaModel` re-initialises it the
  same way, and a classifier's head starts fresh in HF too); an encoder
  built with `RobertaEncoder(add_pooling_layer=False)` has no pooler rows
  at all (they are optional), and skips a stored pooler as HF's task
  models do;
* the MLM head, `RobertaLMHead`: `lm_head.dense` -> exact GELU ->
  `lm_head.layer_norm` -> the decoder tied to the word embeddings, plus
  `lm_head.bias`. That is `modeling.objectives.MaskedLMHead`'s computation
  (transform dense, activation, LayerNorm, tied decoder, output bias), so
  the rows fill its variables. Newer `transformers` also save the bias as
  `lm_head.decoder.bias` (an alias: both must be equal), and the tied
  `lm_head.decoder.weight` must equal the word embeddings when present;
* no next-sentence head (RoBERTa dropped NSP).

keras-hub's `RobertaBackbone` (`KERAS_HUB`, by variable path) is BERT's
keras-hub layout for the blocks (`bert_names.KERAS_HUB`'s rows), its
embeddings under `embeddings/` and no pooler and no token types:
`hf_format.weights_from_keras_hub` gives the token-type row (zeros) and
the position rows past the padding id; the pooler keeps its initial values
and is listed in `LoadReport.missing_heads`, as for HF's task models.
"""

from modeling.bert import checkpoint_names as bert_names
from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import each_layer
from modeling.objectives import MaskedLMHead

__all__ = ["CHECKPOINT_HEADS", "HF", "KERAS_HUB", "PREFIX"]

# The prefix of the encoder's names in HF's RoBERTa task models.
PREFIX = "roberta."

_ENCODER_ROWS = tuple(
    Entry(e.hf_name, e.getter, e.hf_transform, optional=e.getter.startswith("encoder.pooler."))
    for e in bert_names.NAME_TABLE if e.getter.startswith("encoder."))

_HEAD_ROWS = (
    Entry("lm_head.dense.weight", "mlm.transform_dense.kernel", TRANSPOSED),
    Entry("lm_head.dense.bias", "mlm.transform_dense.bias", AS_IS),
    Entry("lm_head.layer_norm.weight", "mlm.transform_layer_norm.gamma", AS_IS),
    Entry("lm_head.layer_norm.bias", "mlm.transform_layer_norm.beta", AS_IS),
    Entry("lm_head.bias", "mlm.output_bias", AS_IS),
)

# The masked-LM head root of the getters, found among a pretrainer's objectives.
CHECKPOINT_HEADS = {"mlm": (MaskedLMHead, "masked_lm")}


def _hf_name(name):
    """A stored name as the table writes it: without the task models' `roberta.`."""
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


HF = NameTable(
    entries=_ENCODER_ROWS + _HEAD_ROWS,
    repeat=each_layer,
    encoder_prefixes=("embeddings.", "encoder.", "pooler."),
    head_prefixes=("lm_head.",),
    # Buffers saved with the weights, not parameters; a stored pooler that
    # an encoder without one does not use (HF drops it the same way).
    ignore=((r"(^|\.)(position_ids|token_type_ids)$", "buffer, not a weight"),
            (r"^pooler\.", "pooler, and this encoder has none (add_pooling_layer=False)")),
    aliases={"lm_head.bias": ("lm_head.decoder.bias",)},
    tied=(Tied("lm_head.decoder.weight", "embeddings.word_embeddings.weight", "mlm"),),
    rename=_hf_name,
    may_be_absent=(r"^pooler\.",),
)


# keras-hub's RobertaBackbone: its embeddings, BERT's keras-hub rows for the blocks.
_KERAS_HUB_EMBEDDINGS = (
    ("embeddings/token_embedding/embeddings", "encoder.embeddings.word_embeddings"),
    ("embeddings/position_embedding/embeddings", "encoder.embeddings.position_embeddings"),
    # Not keras-hub's: zeros, from `hf_format.weights_from_keras_hub`.
    ("token_type_embedding/embeddings", "encoder.embeddings.token_type_embeddings"),
    ("embeddings_layer_norm/gamma", "encoder.embeddings.layer_norm.gamma"),
    ("embeddings_layer_norm/beta", "encoder.embeddings.layer_norm.beta"),
)

KERAS_HUB = NameTable(
    entries=tuple(Entry(name, getter, AS_IS) for name, getter in _KERAS_HUB_EMBEDDINGS)
    + tuple(e for e in bert_names.KERAS_HUB.entries if e.name.startswith("transformer_layer_"))
    # keras-hub's RoBERTa has no pooler: an encoder with one keeps its initial pooler.
    + tuple(e._replace(optional=True) for e in bert_names.KERAS_HUB.entries
            if e.getter.startswith("encoder.pooler.")),
    repeat=each_layer,
    encoder_prefixes=("embeddings/", "token_type_embedding/", "embeddings_layer_norm/",
                      "transformer_layer_"),
    may_be_absent=(r"^pooled_dense/",),
)
