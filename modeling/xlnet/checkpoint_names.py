"""XLNet's checkpoint names: Hugging Face `XLNetModel` / `XLNetLMHeadModel` safetensors.

The XLNet weights people have (`xlnet-base-cased`, `xlnet-large-cased`, the
Chinese `chinese-xlnet-*` releases and their fine-tunes) are HF exports.
Their names, written down once here as a
`modeling.checkpoints.name_tables.NameTable` registered on the family as
`name_tables={"hf": HF}`, so that `modeling.checkpoints.init_from_checkpoint`
reads them into an `XLNetNetwork` (or a pretrainer around one) and
`name_tables.table_arrays` writes them:

    word_embedding.weight [vocab, d_model]        word_embedding
    mask_emb [1, 1, d_model]                      mask_emb
    layer.N.rel_attn.{q,k,v,o,r} [d_model, n_head, d_head]   layers_[N].rel_attn.*
    layer.N.rel_attn.{r_w_bias,r_r_bias,r_s_bias} [n_head, d_head]
    layer.N.rel_attn.seg_embed [2, n_head, d_head]
    layer.N.rel_attn.layer_norm.{weight,bias}     rel_attn.layer_norm.{gamma,beta}
    layer.N.ff.layer_{1,2}.{weight,bias}          ff.layer_{1,2} (Linear: transposed)
    layer.N.ff.layer_norm.{weight,bias}           ff.layer_norm.{gamma,beta}
    lm_loss.bias [vocab]                          the permutation LM's `lm_bias`

* The attention projections are stored as `[d_model, n_head, d_head]`
  parameters in both (HF keeps zihangdai/xlnet's einsum layout), so nothing
  but the two feed-forward `nn.Linear` weights is transposed.
* `XLNetLMHeadModel` and the task models save the encoder under
  `transformer.`; `XLNetModel` without it: both are read. `lm_loss.weight`
  is the word embedding again (tied): when a file carries it, it must equal
  `word_embedding.weight` and is then skipped.
* HF's `XLNetModel` has per-layer u/v/segment biases whatever `untie_r`
  says (its `untie_r` only matters when converting a TF checkpoint). A
  network with `untie_r=False` holds one shared set; the table writes it
  under every layer's names (HF then computes exactly what the shared model
  does) and reads every layer's names into it, which is only right when
  they are equal -- so `modeling.xlnet.hf_format.config_from_hf` always
  builds the per-layer (`untie_r=True`) network for an HF folder.
* `sequence_summary.summary.*` and `logits_proj.*` of
  `XLNetForSequenceClassification` are a task head (HF's `XLNetModel` has
  no summary): skipped on reading, and the network's own `sequence_summary`
  is not part of this table.

zihangdai/xlnet's own TF1 checkpoints (`xlnet_model.ckpt`, the released
`xlnet_cased_L-12_H-768_A-12` and its fine-tunes) are the "google_tf1"
table, `GOOGLE_TF1`, read and written by `modeling.checkpoints`'
`load_google_checkpoint` / `save_google_checkpoint`:

    model/transformer/word_embedding/lookup_table      word_embedding
    model/transformer/mask_emb/mask_emb                mask_emb
    model/transformer/layer_N/rel_attn/{q,k,v,o,r}/kernel
    model/transformer/layer_N/rel_attn/LayerNorm/{gamma,beta}
    model/transformer/layer_N/ff/layer_{1,2}/{kernel,bias}   (TF kernels: as is)
    model/transformer/layer_N/ff/LayerNorm/{gamma,beta}
    model/transformer/{r_w_bias,r_r_bias,r_s_bias}     [n_layer, n_head, d_head]
    model/transformer/seg_embed                        [n_layer, 2, n_head, d_head]
    model/lm_loss/bias                                 the permutation LM's `lm_bias`

With `untie_r` the u/v/segment biases of all layers are ONE tensor each,
stacked on a new first axis (`_Stacked` rows, layer i = slice i); with
`untie_r=False` they are the shared `[n_head, d_head]` set. The summary and
classification heads of XLNet's fine-tuning scripts (`model/sequnece_summary/`
-- sic -- and `model/classification_*/`) are task heads, skipped.
"""

import dataclasses

import numpy as np

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import TRANSPOSED
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Split
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import strip_prefix
from modeling.xlnet.objective import LMBiasHead

__all__ = ["CHECKPOINT_HEADS", "GOOGLE_TF1", "HF"]

_L = "layer.{layer}."
_A = "encoder.layers_[{layer}].rel_attn."
_F = "encoder.layers_[{layer}].ff."

# Head roots of the getters: the permutation LM's head is its output bias
# (`objective.head`, an `LMBiasHead`; the decoder is the tied embedding).
CHECKPOINT_HEADS = {"lm": (LMBiasHead, "permutation_lm")}


def _each_layer(encoder):
    """`{layer}` for every block, `{biases}` where that layer's u/v/segment biases live."""
    shared = not getattr(encoder, "untie_r", True)
    return [{"layer": i, "biases": "encoder" if shared else "encoder.layers_[%d].rel_attn" % i}
            for i in range(encoder.num_hidden_layers)]


HF = NameTable(
    entries=(
        Entry("word_embedding.weight", "encoder.word_embedding", AS_IS),
        Entry("mask_emb", "encoder.mask_emb", AS_IS),
        *(Entry(_L + "rel_attn." + name, _A + name, AS_IS) for name in "qkvor"),
        *(Entry(_L + "rel_attn." + name, "{biases}." + name, AS_IS)
          for name in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")),
        Entry(_L + "rel_attn.layer_norm.weight", _A + "layer_norm.gamma", AS_IS),
        Entry(_L + "rel_attn.layer_norm.bias", _A + "layer_norm.beta", AS_IS),
        Entry(_L + "ff.layer_1.weight", _F + "layer_1.kernel", TRANSPOSED),
        Entry(_L + "ff.layer_1.bias", _F + "layer_1.bias", AS_IS),
        Entry(_L + "ff.layer_2.weight", _F + "layer_2.kernel", TRANSPOSED),
        Entry(_L + "ff.layer_2.bias", _F + "layer_2.bias", AS_IS),
        Entry(_L + "ff.layer_norm.weight", _F + "layer_norm.gamma", AS_IS),
        Entry(_L + "ff.layer_norm.bias", _F + "layer_norm.beta", AS_IS),
        Entry("lm_loss.bias", "lm.lm_bias", AS_IS),
    ),
    repeat=_each_layer,
    encoder_prefixes=("word_embedding.", "mask_emb", "layer."),
    head_prefixes=("lm_loss.",),
    tied=(Tied("lm_loss.weight", "word_embedding.weight", "lm"),),
    rename=strip_prefix("transformer."),
)


# ------------------------------------------------------------- TF1 (zihangdai/xlnet)


class _Stacked(Split):
    """Layer `part` of a tensor stacking `parts` layers' variables on a new first axis.

    A `Split` (so the rows sharing the stored name are checked to be one
    complete group, and written back joined), whose blocks are slices of a
    new axis rather than pieces of an existing one.
    """

    def __init__(self, part, parts):
        super().__init__(part, parts, axis=0)

    def stored_shape(self, model_shape):
        return (self.parts,) + tuple(int(d) for d in model_shape)

    def to_model(self, array):
        return np.asarray(array)[self.part]

    def join(self, blocks):
        return np.stack(blocks, axis=0)

    def __repr__(self):
        return f"_Stacked({self.part}, {self.parts})"


class _OneLayer:
    """The stacked biases of a one-layer model: `[1, ...]` stored, `[...]` in the model."""

    def to_model(self, array):
        return np.asarray(array)[0]

    def from_model(self, array):
        return np.asarray(array)[np.newaxis]

    def stored_shape(self, model_shape):
        return (1,) + tuple(int(d) for d in model_shape)

    def __repr__(self):
        return "_OneLayer"


_BIASES = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")


@dataclasses.dataclass(frozen=True)
class _XLNetTF1Table(NameTable):
    """The TF1 table: the template rows, plus the stacked (or shared) bias rows."""

    def rows(self, encoder):
        rows = list(super().rows(encoder))
        layers = encoder.num_hidden_layers
        for name in _BIASES:
            stored = "model/transformer/" + name
            if not encoder.untie_r:
                rows.append(Entry(stored, "encoder." + name, AS_IS))
            elif layers == 1:
                rows.append(Entry(stored, "encoder.layers_[0].rel_attn." + name, _OneLayer()))
            else:
                rows.extend(Entry(stored, "encoder.layers_[%d].rel_attn.%s" % (i, name),
                                  _Stacked(i, layers)) for i in range(layers))
        return rows


_TL = "model/transformer/layer_{layer}/"

GOOGLE_TF1 = _XLNetTF1Table(
    entries=(
        Entry("model/transformer/word_embedding/lookup_table", "encoder.word_embedding", AS_IS),
        Entry("model/transformer/mask_emb/mask_emb", "encoder.mask_emb", AS_IS),
        *(Entry(_TL + "rel_attn/%s/kernel" % name, _A + name, AS_IS) for name in "qkvor"),
        Entry(_TL + "rel_attn/LayerNorm/gamma", _A + "layer_norm.gamma", AS_IS),
        Entry(_TL + "rel_attn/LayerNorm/beta", _A + "layer_norm.beta", AS_IS),
        Entry(_TL + "ff/layer_1/kernel", _F + "layer_1.kernel", AS_IS),
        Entry(_TL + "ff/layer_1/bias", _F + "layer_1.bias", AS_IS),
        Entry(_TL + "ff/layer_2/kernel", _F + "layer_2.kernel", AS_IS),
        Entry(_TL + "ff/layer_2/bias", _F + "layer_2.bias", AS_IS),
        Entry(_TL + "ff/LayerNorm/gamma", _F + "layer_norm.gamma", AS_IS),
        Entry(_TL + "ff/LayerNorm/beta", _F + "layer_norm.beta", AS_IS),
        Entry("model/lm_loss/bias", "lm.lm_bias", AS_IS),
    ),
    repeat=_each_layer,
    encoder_prefixes=("model/transformer/",),
    head_prefixes=("model/lm_loss/",),
)
