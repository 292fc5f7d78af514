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
from modeling.checkpoints.name_tables import conv1d_block_parts
from modeling.checkpoints.name_tables import each_layer
from modeling.checkpoints.name_tables import strip_prefix

__all__ = ["HF"]

_ATTN, _LN_1, _MLP, _LN_2 = conv1d_block_parts()

HF = NameTable(
    entries=(
        Entry("tokens_embed.weight", "encoder.embeddings.wte", AS_IS),
        Entry("positions_embed.weight", "encoder.embeddings.wpe", AS_IS),
        *_ATTN, *_LN_1, *_MLP, *_LN_2,  # post-LN: each norm after its half
    ),
    repeat=each_layer,
    encoder_prefixes=("tokens_embed.", "positions_embed.", "h."),
    ignore=((r"^h\.\d+\.attn\.bias$", "buffer, not a weight"),
            (r"^position_ids$", "buffer, not a weight")),
    tied=(Tied("lm_head.weight", "tokens_embed.weight", "encoder"),),
    rename=strip_prefix("transformer."),
)
