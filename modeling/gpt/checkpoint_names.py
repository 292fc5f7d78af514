"""GPT's checkpoint names: Hugging Face `OpenAIGPTModel` / `OpenAIGPTLMHeadModel` safetensors.

OpenAI's GPT (`openai-gpt`) and its fine-tunes are HF exports. Their names,
written down once here as a `modeling.checkpoints.name_tables.NameTable`
registered on the family as `name_tables={"hf": HF}`, so that
`modeling.checkpoints.init_from_checkpoint` reads them into a `GPTNetwork`
(or a pretrainer around one):

    tokens_embed.weight [vocab, n_embd]         embeddings.wte
    positions_embed.weight [n_positions, n_embd] embeddings.wpe
    h.N.attn.c_attn.weight [E, 3E]               attention query | key | value kernels
    h.N.attn.c_attn.bias [3E]                    query | key | value biases
    h.N.attn.c_proj.{weight,bias}                attention.output_dense
    h.N.ln_1.{weight,bias}                       attention_sublayer.layer_norm
    h.N.mlp.c_fc.{weight,bias}                   ffn_sublayer.intermediate
    h.N.mlp.c_proj.{weight,bias}                 ffn_sublayer.output_dense
    h.N.ln_2.{weight,bias}                       ffn_sublayer.layer_norm

* GPT's blocks are post-LN: `ln_1` normalises `x + attention(x)` and `ln_2`
  `n + mlp(n)`, the LayerNorm *after* each half, which is where this
  project's post-LN `TransformerBlock` keeps it (`<half>.layer_norm`), so
  the rows are those of GPT-2 with GPT's two embedding names and no `ln_f`.
* `Conv1D` weights are `[in, out]` like Keras kernels: nothing is
  transposed; `c_attn` is split in three column blocks (`fused`).
* `OpenAIGPTLMHeadModel` saves its weights under `transformer.`;
  `OpenAIGPTModel` without it: both are read.
* `lm_head.weight` is the token table again (tied): checked equal to
  `tokens_embed.weight`, then skipped. `h.N.attn.bias` (the causal-mask
  buffer older `transformers` versions saved) and `position_ids` are buffers.
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
        Entry("tokens_embed.weight", "encoder.embeddings.wte", AS_IS),
        Entry("positions_embed.weight", "encoder.embeddings.wpe", AS_IS),
        *fused(_H + "attn.c_attn.weight",
               [_A + "attention.query.kernel", _A + "attention.key.kernel",
                _A + "attention.value.kernel"]),
        *fused(_H + "attn.c_attn.bias",
               [_A + "attention.query.bias", _A + "attention.key.bias",
                _A + "attention.value.bias"]),
        Entry(_H + "attn.c_proj.weight", _A + "attention.output_dense.kernel", AS_IS),
        Entry(_H + "attn.c_proj.bias", _A + "attention.output_dense.bias", AS_IS),
        Entry(_H + "ln_1.weight", _A + "layer_norm.gamma", AS_IS),
        Entry(_H + "ln_1.bias", _A + "layer_norm.beta", AS_IS),
        Entry(_H + "mlp.c_fc.weight", _F + "intermediate.kernel", AS_IS),
        Entry(_H + "mlp.c_fc.bias", _F + "intermediate.bias", AS_IS),
        Entry(_H + "mlp.c_proj.weight", _F + "output_dense.kernel", AS_IS),
        Entry(_H + "mlp.c_proj.bias", _F + "output_dense.bias", AS_IS),
        Entry(_H + "ln_2.weight", _F + "layer_norm.gamma", AS_IS),
        Entry(_H + "ln_2.bias", _F + "layer_norm.beta", AS_IS),
    ),
    repeat=each_layer,
    encoder_prefixes=("tokens_embed.", "positions_embed.", "h."),
    ignore=((r"^h\.\d+\.attn\.bias$", "buffer, not a weight"),
            (r"^position_ids$", "buffer, not a weight")),
    tied=(Tied("lm_head.weight", "tokens_embed.weight", "encoder"),),
    rename=_strip_transformer,
)
