"""GPT-2's checkpoint names: Hugging Face `GPT2Model` / `GPT2LMHeadModel` safetensors.

The weights people have for GPT-2 (OpenAI's four sizes, their fine-tunes)
are HF exports. Their names, written down once here as a
`modeling.checkpoints.name_tables.NameTable` registered on the family as
`name_tables={"hf": HF}`, so that `modeling.checkpoints.init_from_checkpoint`
reads them into a `GPT2Network` (or a pretrainer around one):

    wte.weight [vocab, n_embd]          embeddings.wte
    wpe.weight [n_positions, n_embd]    embeddings.wpe
    h.N.ln_1.{weight,bias}              block N attention_sublayer.layer_norm
    h.N.attn.c_attn.weight [E, 3E]      attention query | key | value kernels
    h.N.attn.c_attn.bias [3E]           query | key | value biases
    h.N.attn.c_proj.{weight,bias}       attention.output_dense
    h.N.ln_2.{weight,bias}              ffn_sublayer.layer_norm
    h.N.mlp.c_fc.{weight,bias}          ffn_sublayer.intermediate
    h.N.mlp.c_proj.{weight,bias}        ffn_sublayer.output_dense
    ln_f.{weight,bias}                  ln_f

* HF's GPT-2 uses `Conv1D`, whose weight is `[in, out]` like a Keras Dense
  kernel: nothing is transposed. `c_attn` fuses the three projections
  column-wise (query, key, value blocks of `n_embd` columns), split with
  `fused` (`Split` transforms).
* `GPT2LMHeadModel` saves its weights under `transformer.`; `GPT2Model`
  (and OpenAI's converted checkpoints) without it: both are read.
* `lm_head.weight` is the token table again (tied); when a file carries it,
  it must equal `wte.weight` (this network can only tie them) and is then
  skipped.
* `h.N.attn.bias` / `h.N.attn.masked_bias` are the causal-mask buffers older
  `transformers` versions saved; they are not weights and are skipped (the
  mask is data here, `modeling.layers.causal_attention_mask`).
"""

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import each_layer
from modeling.checkpoints.name_tables import fused

__all__ = ["HF"]

_B = "encoder.transformer_layers[{layer}]."
_A = _B + "attention_sublayer."
_F = _B + "ffn_sublayer."
_H = "h.{layer}."


def _strip_transformer(name):
    return name[len("transformer."):] if name.startswith("transformer.") else name


HF = NameTable(
    entries=(
        Entry("wte.weight", "encoder.embeddings.wte", AS_IS),
        Entry("wpe.weight", "encoder.embeddings.wpe", AS_IS),
        Entry(_H + "ln_1.weight", _A + "layer_norm.gamma", AS_IS),
        Entry(_H + "ln_1.bias", _A + "layer_norm.beta", AS_IS),
        *fused(_H + "attn.c_attn.weight",
               [_A + "attention.query.kernel", _A + "attention.key.kernel",
                _A + "attention.value.kernel"]),
        *fused(_H + "attn.c_attn.bias",
               [_A + "attention.query.bias", _A + "attention.key.bias",
                _A + "attention.value.bias"]),
        Entry(_H + "attn.c_proj.weight", _A + "attention.output_dense.kernel", AS_IS),
        Entry(_H + "attn.c_proj.bias", _A + "attention.output_dense.bias", AS_IS),
        Entry(_H + "ln_2.weight", _F + "layer_norm.gamma", AS_IS),
        Entry(_H + "ln_2.bias", _F + "layer_norm.beta", AS_IS),
        Entry(_H + "mlp.c_fc.weight", _F + "intermediate.kernel", AS_IS),
        Entry(_H + "mlp.c_fc.bias", _F + "intermediate.bias", AS_IS),
        Entry(_H + "mlp.c_proj.weight", _F + "output_dense.kernel", AS_IS),
        Entry(_H + "mlp.c_proj.bias", _F + "output_dense.bias", AS_IS),
        Entry("ln_f.weight", "encoder.ln_f.gamma", AS_IS),
        Entry("ln_f.bias", "encoder.ln_f.beta", AS_IS),
    ),
    repeat=each_layer,
    encoder_prefixes=("wte.", "wpe.", "h.", "ln_f."),
    ignore=((r"^h\.\d+\.attn\.(masked_)?bias$", "buffer, not a weight"),),
    # The LM head is the token table: always checked equal, then skipped.
    tied=(Tied("lm_head.weight", "wte.weight", "encoder"),),
    rename=_strip_transformer,
)
