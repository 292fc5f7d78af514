"""`GPT2Network`: GPT-2 (Radford et al. 2019) as a Keras 3 model built from the shared layers.

GPT-2 is a stack of the library's `TransformerBlock`s with `norm_first=True`
(pre-LN: each half is `x + Dropout(f(LayerNorm(x)))`), learned token and
position embeddings, and a final LayerNorm `ln_f`. What may attend to what
is data: `causal_attention_mask(seq) * padding_attention_mask(input_mask)`,
so nothing in the blocks is specific to GPT-2. The language-model head is
the token embedding table itself (tied): `logits = ln_f(h) @ wte^T`, see
`logits` and `modeling.objectives.causal_lm`.

    >>> network = GPT2Network.from_config_object(GPT2Config.from_preset("gpt2_tiny", 3000))
    >>> outputs = network({"input_ids": ids, "input_mask": mask})
    >>> outputs["sequence_output"]          # [batch, seq, n_embd], after ln_f

Inputs: a dict with `input_ids` (required), `input_mask` (1 real / 0 pad)
and `position_ids` (default `0..seq-1`; give them for left-padded rows), or
the ids tensor alone. Other keys are ignored, so a whole training batch can
be passed.

Outputs (the encoder contract of `modeling.encoder`):
    sequence_output   [batch, seq, n_embd]  ln_f of the last block's output
    encoder_outputs   list of n_layer [batch, seq, n_embd] block outputs
                      (before ln_f)
    embedding_output  [batch, seq, n_embd]  token + position embeddings
                      after dropout
    attention_probs   list of [batch, heads, seq, seq], when asked for

Incremental decoding: `call_with_cache(input_ids, cache)` runs only the new
positions, reading the keys and values of the earlier ones from `cache`
(one `(key, value)` pair per block, `[batch, heads, past, head_size]`) and
returning the extended cache with the logits; `decode_step` does one token.
It gives the same logits as running the whole sequence again (tested).

Weights and HF GPT-2 names (`modeling.gpt2.checkpoint_names`; N = block):
    embeddings.wte, embeddings.wpe            wte.weight, wpe.weight
    transformer_layers[N].attention_sublayer.layer_norm   h.N.ln_1
      .attention.{query,key,value}            h.N.attn.c_attn (split in 3)
      .attention.output_dense                 h.N.attn.c_proj
    transformer_layers[N].ffn_sublayer.layer_norm         h.N.ln_2
      .intermediate                           h.N.mlp.c_fc
      .output_dense                           h.N.mlp.c_proj
    ln_f                                      ln_f
HF's `Conv1D` stores `[in, out]` like Keras' `Dense`, so nothing is transposed.

Initialisation follows GPT-2: normal(0, 0.02) (truncated at 2 std, the
library's initialiser) for embeddings and kernels, and
`0.02 / sqrt(2 * n_layer)` for the two residual output projections of every
block, so that the residual stream's variance does not grow with depth.
"""

import math

import keras
import tensorflow as tf

from modeling.gpt2.config import HF_ACTIVATIONS
from modeling.layers import TransformerBlock
from modeling.layers import causal_attention_mask
from modeling.layers import padding_attention_mask
from modeling.layers import truncated_normal_initializer
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["GPT2Embeddings", "GPT2Network"]

_CONFIG_FIELDS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
                  "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
                  "layer_norm_epsilon", "initializer_range")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GPT2Embeddings(keras.layers.Layer):
    """Token + learned position embeddings, then dropout (no LayerNorm).

    Weights: `wte` `[vocab, n_embd]` (tied to the LM head), `wpe`
    `[n_positions, n_embd]`.

    Call args: `input_ids` `[batch, seq]`; `position_ids` `[batch, seq]` or
    `[seq]` (default `0..seq-1`); `training`.
    """

    def __init__(self, vocab_size, n_positions, n_embd, embd_pdrop=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.embd_pdrop = embd_pdrop
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(embd_pdrop, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        if self.built:
            return
        init = truncated_normal_initializer(self.initializer_range)
        self.wte = self.add_weight(name="wte", shape=(self.vocab_size, self.n_embd),
                                   initializer=init)
        self.wpe = self.add_weight(name="wpe", shape=(self.n_positions, self.n_embd),
                                   initializer=init)

    def call(self, input_ids, position_ids=None, training=None):
        input_ids = tf.convert_to_tensor(input_ids)
        static_length = input_ids.shape[1]
        if static_length is not None and static_length > self.n_positions:
            raise ValueError("Sequence length %d exceeds n_positions=%d."
                             % (static_length, self.n_positions))
        embeddings = tf.gather(self.wte, input_ids)
        if position_ids is None:
            positions = self.wpe[:tf.shape(input_ids)[1]]
        else:
            positions = tf.gather(self.wpe, position_ids)
        return self.dropout(embeddings + positions, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.n_embd,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, n_positions=self.n_positions,
                      n_embd=self.n_embd, embd_pdrop=self.embd_pdrop,
                      initializer_range=self.initializer_range)
        return config


def _activation_name(name):
    """HF's activation spellings -> the library's (`get_activation`)."""
    return HF_ACTIVATIONS.get(name.lower(), name) if isinstance(name, str) else name


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GPT2Network(ConfigFields, keras.Model):
    """The GPT-2 decoder stack (see the module docstring).

    Class attributes a decoder of the same shape overrides (`modeling.gpt`'s
    GPT is this stack with post-LN blocks, no `ln_f` and plain 0.02 output
    projections): `family_name`, `norm_first`, `final_layer_norm`,
    `scale_residual_init`.

    Args:
        vocab_size ... initializer_range: as in `GPT2Config` (HF names).
        output_attention_probs: default for returning attention
            probabilities (a call argument of the same name overrides it).
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    _EXTRA_CONFIG_FIELDS = ("output_attention_probs",)

    family_name = "gpt2"
    norm_first = True
    final_layer_norm = True
    scale_residual_init = True

    def __init__(self, vocab_size, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                 n_inner=None, activation_function="gelu_new", resid_pdrop=0.1,
                 embd_pdrop=0.1, attn_pdrop=0.1, layer_norm_epsilon=1e-5,
                 initializer_range=0.02, output_attention_probs=False, **kwargs):
        kwargs.setdefault("name", "gpt2")
        super().__init__(**kwargs)
        if n_embd % n_head:
            raise ValueError("n_embd (%d) must be a multiple of n_head (%d)." % (n_embd, n_head))
        # GPT-2's fields (a subclass's `_CONFIG_FIELDS`, e.g. GPT's, are its own).
        self._set_fields(locals(), _CONFIG_FIELDS + GPT2Network._EXTRA_CONFIG_FIELDS)
        policy = self.dtype_policy
        self.embeddings = GPT2Embeddings(
            vocab_size, n_positions, n_embd, embd_pdrop=embd_pdrop,
            initializer_range=initializer_range, dtype=policy, name="embeddings")
        self.transformer_layers = [
            TransformerBlock(
                hidden_size=n_embd, num_attention_heads=n_head,
                intermediate_size=n_inner or 4 * n_embd,
                hidden_act=_activation_name(activation_function),
                hidden_dropout_prob=resid_pdrop, attention_probs_dropout_prob=attn_pdrop,
                initializer_range=initializer_range, layer_norm_epsilon=layer_norm_epsilon,
                norm_first=self.norm_first,
                output_initializer_range=(initializer_range / math.sqrt(2 * n_layer)
                                          if self.scale_residual_init else None),
                dtype=policy, name="layer_%d" % i)
            for i in range(n_layer)
        ]
        self.ln_f = (keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="ln_f")
            if self.final_layer_norm else None)
        # Weight shapes do not depend on the input: create them now, so the
        # network can be tied to or loaded into before its first call.
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings.build()
        for block in self.transformer_layers:
            block.build((None, None, self.n_embd))
        if self.ln_f is not None:
            self.ln_f.build((None, None, self.n_embd))

    # ------------------------------------------------------------ properties

    @property
    def embedding_table(self):
        """The token embedding variable `wte` (`[vocab_size, n_embd]`), tied to the LM head."""
        return self.embeddings.wte

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd

    @property
    def head_size(self):
        return self.n_embd // self.n_head

    def gpt2_config(self):
        """The `GPT2Config` of this network."""
        from modeling.gpt2.config import GPT2Config  # pylint: disable=g-import-not-at-top

        return self.config_object(GPT2Config)

    # ------------------------------------------------------------------ call

    @staticmethod
    def _unpack(inputs):
        if isinstance(inputs, dict):
            if "input_ids" not in inputs:
                raise ValueError("GPT2Network inputs need an 'input_ids' entry.")
            return inputs["input_ids"], inputs.get("input_mask"), inputs.get("position_ids")
        return inputs, None, None

    def _final_norm(self, hidden):
        return hidden if self.ln_f is None else self.ln_f(hidden)

    def logits(self, sequence_output):
        """Next-token logits through the tied embedding table: float32 `[..., vocab]`."""
        table = tf.cast(self.embedding_table, sequence_output.dtype)
        flat = tf.reshape(sequence_output, [-1, self.n_embd])
        logits = tf.matmul(flat, table, transpose_b=True)
        shape = tf.concat([tf.shape(sequence_output)[:-1], [self.vocab_size]], 0)
        return tf.cast(tf.reshape(logits, shape), tf.float32)

    def call(self, inputs, training=None, output_attention_probs=None):
        input_ids, input_mask, position_ids = self._unpack(inputs)
        input_ids = tf.convert_to_tensor(input_ids)
        if output_attention_probs is None:
            output_attention_probs = self.output_attention_probs
        mask = causal_attention_mask(tf.shape(input_ids)[1])
        if input_mask is not None:
            mask = mask * padding_attention_mask(input_mask)
        embedding_output = self.embeddings(input_ids, position_ids=position_ids,
                                           training=training)
        hidden = embedding_output
        encoder_outputs, attention_probs = [], []
        for block in self.transformer_layers:
            hidden, probs = block(hidden, attention_mask=mask, training=training)
            encoder_outputs.append(hidden)
            attention_probs.append(probs)
        outputs = {
            "sequence_output": self._final_norm(hidden),
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        if output_attention_probs:
            outputs["attention_probs"] = attention_probs
        return outputs

    # ------------------------------------------------------- cached decoding

    def empty_cache(self, batch_size):
        """A cache holding no position: one `(key, value)` per block."""
        shape = [batch_size, self.n_head, 0, self.head_size]
        return [(tf.zeros(shape, self.compute_dtype), tf.zeros(shape, self.compute_dtype))
                for _ in range(self.n_layer)]

    def call_with_cache(self, input_ids, cache=None, input_mask=None, position_ids=None,
                        training=False):
        """Runs the new positions `input_ids` after the `cache`d ones.

        Args:
            input_ids: int `[batch, seq]`, the positions after the cached ones.
            cache: list of `(key, value)` per block, each
                `[batch, heads, past, head_size]` (`empty_cache` or a previous
                call's); None means no past.
            input_mask: optional `[batch, past + seq]` 1 real / 0 pad over
                the cached and the new positions (left-padded prompts).
            position_ids: `[batch, seq]`; default `past .. past + seq - 1`.

        Returns:
            dict with `logits` float32 `[batch, seq, vocab]`,
            `sequence_output` and `cache` (extended by the new positions).
        """
        input_ids = tf.convert_to_tensor(input_ids)
        batch_size, seq_length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
        if cache is None:
            cache = self.empty_cache(batch_size)
        past = tf.shape(cache[0][0])[2]
        if position_ids is None:
            position_ids = past + tf.range(seq_length)[tf.newaxis, :]
        # New query i sits at position past + i and sees keys 0 .. past + i.
        query_positions = past + tf.range(seq_length)
        key_positions = tf.range(past + seq_length)
        mask = tf.cast(key_positions[tf.newaxis, :] <= query_positions[:, tf.newaxis],
                       tf.float32)[tf.newaxis]
        if input_mask is not None:
            mask = mask * padding_attention_mask(input_mask)
        hidden = self.embeddings(input_ids, position_ids=position_ids, training=training)
        new_cache = []
        for block, layer_cache in zip(self.transformer_layers, cache):
            hidden, _, layer_cache = block(hidden, attention_mask=mask, training=training,
                                           cache=layer_cache, return_cache=True)
            new_cache.append(layer_cache)
        sequence_output = self._final_norm(hidden)
        return {"logits": self.logits(sequence_output), "sequence_output": sequence_output,
                "cache": new_cache}

    def decode_step(self, token_ids, cache, input_mask=None, position_ids=None):
        """One token per row (`[batch]`) after `cache`: `(logits [batch, vocab], cache)`."""
        token_ids = tf.convert_to_tensor(token_ids)[:, tf.newaxis]
        if position_ids is not None:
            position_ids = tf.convert_to_tensor(position_ids)[:, tf.newaxis]
        outputs = self.call_with_cache(token_ids, cache, input_mask=input_mask,
                                       position_ids=position_ids)
        return outputs["logits"][:, 0], outputs["cache"]
