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

keras-hub's `GPT2Backbone` (`KERAS_HUB`, by variable path, its EinsumDense
attention kernels merged to 2-D by `modeling.pretrained.keras_hub`) holds
the same weights: `token_embedding`, `position_embedding`, per block
`self_attention_layer_norm` (ln_1), `self_attention/{query,key,value,
attention_output}`, `feedforward_layer_norm` (ln_2), the two feed-forward
denses, and the final `layer_norm` (ln_f).
"""

from modeling.checkpoints.name_tables import AS_IS
from modeling.checkpoints.name_tables import Entry
from modeling.checkpoints.name_tables import NameTable
from modeling.checkpoints.name_tables import Tied
from modeling.checkpoints.name_tables import conv1d_block_parts
from modeling.checkpoints.name_tables import each_layer
from modeling.checkpoints.name_tables import strip_prefix

__all__ = ["HF", "KERAS_HUB"]

_ATTN, _LN_1, _MLP, _LN_2 = conv1d_block_parts()

HF = NameTable(
    entries=(
        Entry("wte.weight", "encoder.embeddings.wte", AS_IS),
        Entry("wpe.weight", "encoder.embeddings.wpe", AS_IS),
        *_LN_1, *_ATTN, *_LN_2, *_MLP,  # pre-LN: each norm before its half
        Entry("ln_f.weight", "encoder.ln_f.gamma", AS_IS),
        Entry("ln_f.bias", "encoder.ln_f.beta", AS_IS),
    ),
    repeat=each_layer,
    encoder_prefixes=("wte.", "wpe.", "h.", "ln_f."),
    ignore=((r"^h\.\d+\.attn\.(masked_)?bias$", "buffer, not a weight"),),
    # The LM head is the token table: always checked equal, then skipped.
    tied=(Tied("lm_head.weight", "wte.weight", "encoder"),),
    rename=strip_prefix("transformer."),
)


_K = "transformer_layer_{layer}/"
_KA = "encoder.transformer_layers[{layer}].attention_sublayer."
_KF = "encoder.transformer_layers[{layer}].ffn_sublayer."
_KERAS_HUB_ROWS = (
    ("token_embedding/embeddings", "encoder.embeddings.wte"),
    ("position_embedding/embeddings", "encoder.embeddings.wpe"),
    (_K + "self_attention_layer_norm/gamma", _KA + "layer_norm.gamma"),
    (_K + "self_attention_layer_norm/beta", _KA + "layer_norm.beta"),
    *((_K + "self_attention/%s/%s" % (theirs, part), _KA + "attention.%s.%s" % (ours, part))
      for theirs, ours in (("query", "query"), ("key", "key"), ("value", "value"),
                           ("attention_output", "output_dense"))
      for part in ("kernel", "bias")),
    (_K + "feedforward_layer_norm/gamma", _KF + "layer_norm.gamma"),
    (_K + "feedforward_layer_norm/beta", _KF + "layer_norm.beta"),
    (_K + "feedforward_intermediate_dense/kernel", _KF + "intermediate.kernel"),
    (_K + "feedforward_intermediate_dense/bias", _KF + "intermediate.bias"),
    (_K + "feedforward_output_dense/kernel", _KF + "output_dense.kernel"),
    (_K + "feedforward_output_dense/bias", _KF + "output_dense.bias"),
    ("layer_norm/gamma", "encoder.ln_f.gamma"),
    ("layer_norm/beta", "encoder.ln_f.beta"),
)

KERAS_HUB = NameTable(
    entries=tuple(Entry(name, getter, AS_IS) for name, getter in _KERAS_HUB_ROWS),
    repeat=each_layer,
    encoder_prefixes=("token_embedding/", "position_embedding/", "transformer_layer_",
                      "layer_norm/"),
)
