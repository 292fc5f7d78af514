"""`GPTNetwork`: GPT's (Radford et al. 2018) decoder, GPT-2's stack with post-LN blocks.

GPT is the decoder GPT-2 grew out of, and differs from it in three places
only, so `GPTNetwork` is `modeling.gpt2.GPT2Network` with its switches set:

* post-LN blocks (`TransformerBlock(norm_first=False)`, as BERT's):
  `n = LayerNorm(x + Attention(x))`, `h = LayerNorm(n + MLP(n))`;
* no final LayerNorm: `sequence_output` is the last block's output;
* every kernel initialised with normal(0, `initializer_range`), the two
  residual output projections included (GPT-2 scales those by
  `1 / sqrt(2 * n_layer)`).

The rest is shared: token + learned position embeddings, then dropout (no
LayerNorm); causal masking as data (`modeling.layers.causal_attention_mask`,
times the padding mask); the language-model head is the token table itself
(tied: `logits = h @ wte^T`, `GPT2Network.logits`); cached decoding
(`call_with_cache`, `decode_step`).

    >>> network = GPTNetwork.from_config_object(GPTConfig.from_preset("gpt_tiny", 3000))
    >>> outputs = network({"input_ids": ids, "input_mask": mask})
    >>> outputs["sequence_output"]          # [batch, seq, n_embd]

Inputs and outputs: those of `GPT2Network` (`input_ids`, optional
`input_mask` and `position_ids`; `sequence_output`, `encoder_outputs`,
`embedding_output`, optionally `attention_probs`).

Weights and HF `openai-gpt` names (`modeling.gpt.checkpoint_names`):
`embeddings.wte` = `tokens_embed`, `embeddings.wpe` = `positions_embed`,
block N's `attention_sublayer` = `h.N.attn` + `h.N.ln_1`, `ffn_sublayer` =
`h.N.mlp` + `h.N.ln_2`.

Fine-tuning adds GPT's start, delimiter and extract tokens as new rows of
the token table (`with_extra_tokens`), as OpenAI's code did.
"""

import keras

from modeling.gpt.config import GPT_ACTIVATIONS
from modeling.gpt2.network import GPT2Network
from modeling.layers.common import PACKAGE as _PACKAGE

__all__ = ["GPTNetwork"]

_CONFIG_FIELDS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "afn",
                  "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon",
                  "initializer_range")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GPTNetwork(GPT2Network):
    """The GPT decoder stack (see the module docstring).

    Args:
        vocab_size ... initializer_range: as in `GPTConfig` (HF names).
        output_attention_probs: default for returning attention
            probabilities (a call argument of the same name overrides it).
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS

    family_name = "gpt"
    norm_first = False
    final_layer_norm = False
    scale_residual_init = False

    def __init__(self, vocab_size, n_positions=512, n_embd=768, n_layer=12, n_head=12,
                 afn="gelu", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                 layer_norm_epsilon=1e-5, initializer_range=0.02, output_attention_probs=False,
                 **kwargs):
        if afn not in GPT_ACTIVATIONS:
            raise ValueError("afn %r is not supported; known: %s"
                             % (afn, ", ".join(GPT_ACTIVATIONS)))
        kwargs.setdefault("name", "gpt")
        self.afn = afn
        super().__init__(vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer,
                         n_head=n_head, n_inner=4 * n_embd,
                         activation_function=GPT_ACTIVATIONS[afn], resid_pdrop=resid_pdrop,
                         embd_pdrop=embd_pdrop, attn_pdrop=attn_pdrop,
                         layer_norm_epsilon=layer_norm_epsilon,
                         initializer_range=initializer_range,
                         output_attention_probs=output_attention_probs, **kwargs)

    def gpt_config(self):
        """The `GPTConfig` of this network."""
        from modeling.gpt.config import GPTConfig  # pylint: disable=g-import-not-at-top

        return self.config_object(GPTConfig)

    def gpt2_config(self):
        raise TypeError("A GPTNetwork has a GPTConfig (gpt_config()), not a GPT2Config.")

    def copy_weights_from(self, source):
        """Copies a `GPTNetwork`'s weights into this one, whose token table may be longer.

        Every weight must have the same shape except the token table, of
        which `source`'s rows fill the first rows; the rows after them (GPT's
        fine-tuning tokens) keep their values. Returns the number of extra
        rows. This is how fine-tuning appends its start, delimiter and
        extract embeddings to a pre-trained table.
        """
        if not isinstance(source, GPTNetwork):
            raise TypeError("copy_weights_from expects a GPTNetwork, got %s"
                            % type(source).__name__)
        extra = self.vocab_size - source.vocab_size
        if extra < 0:
            raise ValueError("The source network has %d tokens, more than this one's %d."
                             % (source.vocab_size, self.vocab_size))
        mine, theirs = self.weights, source.weights
        if len(mine) != len(theirs):
            raise ValueError("The networks have %d and %d weights: not the same shape."
                             % (len(mine), len(theirs)))
        pairs = []
        for target, value in zip(mine, theirs):
            if target is self.embedding_table:
                if int(value.shape[1]) != int(target.shape[1]):
                    raise ValueError("Token tables of widths %d and %d."
                                     % (int(value.shape[1]), int(target.shape[1])))
                continue
            if tuple(target.shape) != tuple(value.shape):
                raise ValueError("Weight %s has shape %s here and %s in the source."
                                 % (target.path, tuple(target.shape), tuple(value.shape)))
            pairs.append((target, value))
        for target, value in pairs:
            target.assign(value)
        table = self.embedding_table
        table.assign(keras.ops.concatenate(
            [keras.ops.cast(source.embedding_table, table.dtype), table[source.vocab_size:]], 0))
        return extra
