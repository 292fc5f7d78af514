"""`XLNetNetwork`: XLNet (Yang et al. 2019) as a Keras 3 model.

XLNet is a Transformer-XL encoder run as two streams:

* the content stream `h` (one vector per position, starting from the word
  embedding) is an ordinary bidirectional encoder restricted by
  `perm_mask`: position i sees position j unless `perm_mask[i, j]` is 1,
  and always sees itself;
* the query stream `g` (one vector per predicted position, starting from
  the learned `mask_emb`, so it knows where it is but not what is there)
  attends to the content stream under the same `perm_mask`, never to its
  own position. It is what permutation language modelling predicts from
  (`modeling.xlnet.objective`). The token at a predicted position stays out
  of its query stream in every layer because a factorisation order's mask
  (`modeling.xlnet.permutation`) also hides it from every token before it
  in the order; without such a mask, other positions' content would carry
  it in from the second layer on.

A query row that may attend to nothing (the first predicted token of an
order with no context and no memory) gets a zero attention output rather
than a uniform average over the keys it may not see.

Both streams use the same weights. Attention scores are Transformer-XL's,

    score[i, j] = (q_i + u) . k_j            content   (u = r_w_bias)
                + (q_i + v) . R_{i-j} W_r    position  (v = r_r_bias)
                + (q_i + s) . seg_embed[i, j differ]   segment (s = r_s_bias)

scaled by 1/sqrt(d_head): positions are relative (`R` a sinusoid of the
distance i - j, clipped at `clamp_len`), segments are relative (only whether
two tokens are in the same segment matters), and u, v, s are per layer
(`untie_r=True`) or shared. Blocks are post-LN: `LayerNorm(x +
Dropout(attention))`, then `LayerNorm(x + Dropout(W2 Dropout(act(W1 x))))`.

Segment-level recurrence: each layer's input states of the previous segment
(the last `mem_len` of them; of each segment only the first `reuse_len`
positions if set) are prepended to that layer's keys and values, under
`tf.stop_gradient`, and memory positions are visible to every query. The
memory travels two ways:

* explicitly: `network(features, memory=memory)` returns `outputs["memory"]`
  to pass to the next call (`{"states": [n_layer x [batch, mem, d_model]],
  "mask": [batch, mem]}`, mask 1 = a real remembered token);
* across training steps, when the features carry `mem_reset` (int
  `[batch]`, 1 where the row starts a new text stream; the "xlnet" pipeline
  provides it with memory-aligned consecutive batches, row i of every batch
  continuing row i of the previous one). The network then keeps the memory in
  non-trainable per-replica variables (`tf.VariableSynchronization.ON_READ`:
  each replica remembers its own rows), reads them at the start of the call
  (rows with `mem_reset` 1, or a batch of another size, start empty) and
  assigns the new memory at the end. These variables are not part of the
  model's checkpoint or of `model.variables`: a resumed run starts with an
  empty memory. The trainer's steps (and its evaluation, whose first batch
  resets every row) run one after the other in a graph loop, so the order
  of reads and writes is the order of the batches.

Inputs: a dict with `input_ids` (required), `input_mask` (1 real / 0 pad,
the project's convention, not HF's `input_mask` where 1 is padding),
`segment_ids`, `perm_mask` (float `[batch, seq, seq]`, 1 = may NOT attend,
HF's convention), `target_mapping` (float `[batch, num_predict, seq]`,
one-hot rows: which position each query-stream row predicts) and
`mem_reset`. Without `perm_mask` every token sees the whole input (fine-tuning);
without `perm_mask` and `target_mapping` there is no query stream.

Outputs (the encoder contract of `modeling.encoder`, plus XLNet's):
    sequence_output   [batch, seq, d_model]   content stream, last layer
    query_output      [batch, num_predict, d_model]  query stream, last layer
                      (when there is a query stream)
    pooled_output     [batch, d_model]  XLNet's sequence summary: tanh(dense(
                      last position)), the <cls> of `A <sep> B <sep> <cls>`
                      (left padded); of a right-padded row, its last real
                      position
    encoder_outputs   list of n_layer content-stream outputs
    embedding_output  [batch, seq, d_model] word embeddings after dropout
    memory            the memory after this segment (when mem_len > 0)
    attention_probs   list of [batch, heads, seq, mem + seq], when asked for

Weights (HF XLNet names under `transformer.`; N = layer):
    word_embedding, mask_emb                  word_embedding.weight, mask_emb
    layers[N].rel_attn.{q,k,v,o,r}            layer.N.rel_attn.{q,k,v,o,r}
      [d_model, n_head, d_head]
    layers[N].rel_attn.{r_w_bias,r_r_bias,r_s_bias,seg_embed}  (untie_r)
    layers[N].rel_attn.layer_norm             layer.N.rel_attn.layer_norm
    layers[N].ff.{layer_1,layer_2,layer_norm}  layer.N.ff.* (Linear: transposed)
    sequence_summary                          sequence_summary.summary
    r_w_bias, r_r_bias, r_s_bias, seg_embed   (untie_r=False: one shared set)
(HF's names are the family's "hf" name table, `modeling.xlnet.checkpoint_names`;
HF's `XLNetModel` has no sequence summary, its classifier's
`sequence_summary.summary` is a task head there.)
"""

import math

import keras
import tensorflow as tf

from modeling.layers import get_activation
from modeling.layers import truncated_normal_initializer
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields
from modeling.xlnet.config import HF_ACTIVATIONS

__all__ = ["RelativeAttention", "XLNetFeedForward", "XLNetLayer", "XLNetNetwork",
           "rel_shift", "relative_positional_encoding"]

_CONFIG_FIELDS = ("vocab_size", "d_model", "n_layer", "n_head", "d_inner", "ff_activation",
                  "untie_r", "mem_len", "reuse_len", "bi_data", "clamp_len", "dropout",
                  "layer_norm_eps", "initializer_range")

# What a masked score gets: exp() of it is 0 in float32.
_NEG_INF = -1e30


def relative_positional_encoding(qlen, klen, d_model, clamp_len=-1, bi_data=False,
                                 batch_size=None, dtype=tf.float32):
    """Sinusoids of the relative distances `klen, klen-1, ..., -qlen+1`.

    Row r encodes the distance `klen - r`; query i (at absolute position
    `klen - qlen + i`) and key j are `klen - qlen + i - j` apart, which
    `rel_shift` turns into a `[qlen, klen]` table. Distances are clipped to
    `[-clamp_len, clamp_len]` when `clamp_len > 0`.

    Returns:
        `[1, klen + qlen, d_model]`, or with `bi_data` `[batch_size, ...]`:
        the first half of the batch forward distances, the second half the
        same distances negated (a right-to-left reading).
    """
    freq = tf.range(0, d_model, 2.0, dtype=tf.float32)
    inv_freq = 1.0 / (10000.0 ** (freq / float(d_model)))

    def encode(pos_seq):
        if clamp_len > 0:
            pos_seq = tf.clip_by_value(pos_seq, -float(clamp_len), float(clamp_len))
        angles = pos_seq[:, tf.newaxis] * inv_freq[tf.newaxis, :]
        return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)[tf.newaxis]

    forward = tf.range(tf.cast(klen, tf.float32), tf.cast(-qlen, tf.float32), -1.0)
    if not bi_data:
        return tf.cast(encode(forward), dtype)
    if batch_size is None:
        raise ValueError("bi_data needs the batch size")
    half = batch_size // 2
    pos = tf.concat([tf.repeat(encode(forward), half, axis=0),
                     tf.repeat(encode(-forward), batch_size - half, axis=0)], axis=0)
    return tf.cast(pos, dtype)


def rel_shift(scores, klen):
    """Turns `[..., qlen, klen + qlen]` scores by distance row into `[..., qlen, klen]`.

    `scores[..., i, r]` is query i against distance row r (distance `klen -
    r`); the result's `[..., i, j]` is query i against the distance between
    i and key j, `klen - qlen + i - j`, i.e. row `qlen - i + j`. Done as
    Transformer-XL does, with two reshapes and no gather.
    """
    shape = tf.shape(scores)
    lead, qlen, rlen = shape[:-2], shape[-2], shape[-1]
    x = tf.reshape(scores, tf.concat([lead, [rlen, qlen]], 0))
    x = x[..., 1:, :]
    x = tf.reshape(x, tf.concat([lead, [qlen, rlen - 1]], 0))
    return x[..., :klen]


def _bias_weight(layer, name, shape, initializer_range):
    return layer.add_weight(name=name, shape=shape,
                            initializer=truncated_normal_initializer(initializer_range))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class RelativeAttention(keras.layers.Layer):
    """Two-stream relative multi-head attention with its residual and post-LayerNorm.

    Weights: `q`, `k`, `v`, `o`, `r` (`[d_model, n_head, d_head]`, no
    biases; `r` projects the positional encodings) and, when
    `own_biases` (`untie_r`), `r_w_bias`, `r_r_bias`, `r_s_bias`
    (`[n_head, d_head]`) and `seg_embed` (`[2, n_head, d_head]`: same /
    different segment). Without own biases the network passes shared ones
    to `call`.

    Call args:
        h: content stream `[batch, qlen, d_model]`.
        g: query stream `[batch, num_predict, d_model]` or None.
        memory: `[batch, mlen, d_model]` (may have mlen 0).
        pos_emb: `[1 or batch, klen + qlen, d_model]`.
        seg_mat: bool `[batch, qlen, klen]`, True where query and key are in
            different segments.
        mask_h, mask_g: float `[batch, qlen, klen]`, 1 = may attend.
        target_mapping: `[batch, num_predict, qlen]` (with `g`).
        biases: `(r_w_bias, r_r_bias, r_s_bias, seg_embed)` when shared.

    Returns:
        `(h, g, probs_h)`: the new streams (g None without a query stream)
        and the content stream's attention probabilities.

    A query row that may attend to nothing (the first token of a
    factorisation order without memory, in the query stream) gets a zero
    attention output, not an average over masked keys: a masked key must
    never leak into it.
    """

    def __init__(self, d_model, n_head, dropout=0.1, layer_norm_eps=1e-12,
                 initializer_range=0.02, own_biases=True, **kwargs):
        super().__init__(**kwargs)
        if d_model % n_head:
            raise ValueError("d_model (%d) must be a multiple of n_head (%d)." % (d_model, n_head))
        self.d_model = d_model
        self.n_head = n_head
        self.d_head = d_model // n_head
        self.dropout_rate = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.own_biases = own_biases
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.attention_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy,
                                                      name="attention_dropout")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm")

    def build(self, input_shape=None):
        if self.built:
            return
        shape = (self.d_model, self.n_head, self.d_head)
        for name in ("q", "k", "v", "o", "r"):
            setattr(self, name, _bias_weight(self, name, shape, self.initializer_range))
        if self.own_biases:
            for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
                setattr(self, name, _bias_weight(self, name, (self.n_head, self.d_head),
                                                 self.initializer_range))
            self.seg_embed = _bias_weight(self, "seg_embed", (2, self.n_head, self.d_head),
                                          self.initializer_range)
        self.layer_norm.build((None, None, self.d_model))

    def _project(self, x, weight):
        return tf.einsum("bid,dnh->binh", x, tf.cast(weight, x.dtype))

    def _core(self, q_head, k_head_h, v_head_h, k_head_r, seg_mat, mask, biases, training):
        """Attention of `q_head` `[b, i, n, h]` over keys `[b, j, n, h]`: `([b, i, n, h], probs)`."""
        r_w_bias, r_r_bias, r_s_bias, seg_embed = (tf.cast(b, q_head.dtype) for b in biases)
        klen = tf.shape(k_head_h)[1]
        content = tf.einsum("binh,bjnh->bnij", q_head + r_w_bias, k_head_h)
        position = tf.einsum("binh,bjnh->bnij", q_head + r_r_bias, k_head_r)
        position = rel_shift(position, klen)
        # Segment term: (q + s) . seg_embed[same / different], then picked per pair.
        seg_scores = tf.einsum("binh,snh->bnis", q_head + r_s_bias, seg_embed)
        segment = tf.where(seg_mat[:, tf.newaxis], seg_scores[..., 1:2], seg_scores[..., 0:1])
        scores = tf.cast(content + position + segment, tf.float32) / math.sqrt(self.d_head)
        visible = tf.cast(mask, tf.float32)[:, tf.newaxis]
        scores = scores + (1.0 - visible) * _NEG_INF
        probs = tf.nn.softmax(scores, axis=-1)
        # Rows that see nothing attend to nothing.
        probs = probs * tf.reduce_max(visible, axis=-1, keepdims=True)
        probs = tf.cast(probs, q_head.dtype)
        dropped = self.attention_dropout(probs, training=training)
        return tf.einsum("bnij,bjnh->binh", dropped, v_head_h), probs

    def _post(self, residual, attn_vec, training):
        out = tf.einsum("binh,dnh->bid", attn_vec, tf.cast(self.o, attn_vec.dtype))
        out = self.dropout(out, training=training)
        return self.layer_norm(out + residual)

    def call(self, h, g, memory, pos_emb, seg_mat, mask_h, mask_g=None, target_mapping=None,
             biases=None, training=None):
        if self.own_biases:
            biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias, self.seg_embed)
        cat = tf.concat([tf.cast(memory, h.dtype), h], axis=1)
        k_head_h = self._project(cat, self.k)
        v_head_h = self._project(cat, self.v)
        k_head_r = self._project(tf.cast(pos_emb, h.dtype), self.r)
        if k_head_r.shape[0] == 1:
            k_head_r = tf.repeat(k_head_r, tf.shape(h)[0], axis=0)
        q_head_h = self._project(h, self.q)
        vec_h, probs_h = self._core(q_head_h, k_head_h, v_head_h, k_head_r, seg_mat, mask_h,
                                    biases, training)
        new_h = self._post(h, vec_h, training)
        new_g = None
        if g is not None:
            q_head_g = self._project(g, self.q)
            if target_mapping is not None:
                # Each query row to the position it predicts (for the
                # relative position term), and back afterwards.
                mapping = tf.cast(target_mapping, q_head_g.dtype)
                q_head_g = tf.einsum("bmnh,bml->blnh", q_head_g, mapping)
                vec_g, _ = self._core(q_head_g, k_head_h, v_head_h, k_head_r, seg_mat, mask_g,
                                      biases, training)
                vec_g = tf.einsum("blnh,bml->bmnh", vec_g, mapping)
            else:
                vec_g, _ = self._core(q_head_g, k_head_h, v_head_h, k_head_r, seg_mat, mask_g,
                                      biases, training)
            new_g = self._post(g, vec_g, training)
        return new_h, new_g, probs_h

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, n_head=self.n_head, dropout=self.dropout_rate,
                      layer_norm_eps=self.layer_norm_eps,
                      initializer_range=self.initializer_range, own_biases=self.own_biases)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetFeedForward(keras.layers.Layer):
    """`LayerNorm(x + Dropout(layer_2(Dropout(act(layer_1(x))))))` (XLNet's `ff`)."""

    def __init__(self, d_model, d_inner, ff_activation="gelu", dropout=0.1,
                 layer_norm_eps=1e-12, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_inner = d_inner
        self.ff_activation = ff_activation
        self.dropout_rate = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self._activation = get_activation(HF_ACTIVATIONS.get(ff_activation.lower(),
                                                             ff_activation))
        init = truncated_normal_initializer(initializer_range)
        policy = self.dtype_policy
        self.layer_1 = keras.layers.Dense(d_inner, kernel_initializer=init, dtype=policy,
                                          name="layer_1")
        self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=init, dtype=policy,
                                          name="layer_2")
        self.dropout = keras.layers.Dropout(dropout, dtype=policy, name="dropout")
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_eps,
                                                          dtype=policy, name="layer_norm")

    def build(self, input_shape=None):
        if self.built:
            return
        self.layer_1.build((None, None, self.d_model))
        self.layer_2.build((None, None, self.d_inner))
        self.layer_norm.build((None, None, self.d_model))

    def call(self, x, training=None):
        out = self.dropout(self._activation(self.layer_1(x)), training=training)
        out = self.dropout(self.layer_2(out), training=training)
        return self.layer_norm(out + x)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_inner=self.d_inner,
                      ff_activation=self.ff_activation, dropout=self.dropout_rate,
                      layer_norm_eps=self.layer_norm_eps,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetLayer(keras.layers.Layer):
    """One XLNet block: `rel_attn` (`RelativeAttention`) then `ff`, on both streams."""

    def __init__(self, d_model, n_head, d_inner, ff_activation="gelu", dropout=0.1,
                 layer_norm_eps=1e-12, initializer_range=0.02, own_biases=True, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.n_head = n_head
        self.d_inner = d_inner
        self.ff_activation = ff_activation
        self.dropout_rate = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.own_biases = own_biases
        common = dict(dropout=dropout, layer_norm_eps=layer_norm_eps,
                      initializer_range=initializer_range, dtype=self.dtype_policy)
        self.rel_attn = RelativeAttention(d_model, n_head, own_biases=own_biases,
                                          name="rel_attn", **common)
        self.ff = XLNetFeedForward(d_model, d_inner, ff_activation=ff_activation, name="ff",
                                   **common)

    def build(self, input_shape=None):
        if self.built:
            return
        self.rel_attn.build()
        self.ff.build()

    def call(self, h, g, memory, pos_emb, seg_mat, mask_h, mask_g=None, target_mapping=None,
             biases=None, training=None):
        h, g, probs = self.rel_attn(h, g, memory, pos_emb, seg_mat, mask_h, mask_g=mask_g,
                                    target_mapping=target_mapping, biases=biases,
                                    training=training)
        h = self.ff(h, training=training)
        if g is not None:
            g = self.ff(g, training=training)
        return h, g, probs

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, n_head=self.n_head, d_inner=self.d_inner,
                      ff_activation=self.ff_activation, dropout=self.dropout_rate,
                      layer_norm_eps=self.layer_norm_eps,
                      initializer_range=self.initializer_range, own_biases=self.own_biases)
        return config


class _MemoryState:
    """The memory kept across calls (see the module docstring); not tracked by
    Keras or checkpoints (a plain holder of two variables)."""

    def __init__(self, n_layer, mem_len, d_model):
        on_read = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.states = tf.Variable(tf.zeros([n_layer, 0, mem_len, d_model]),
                                  shape=tf.TensorShape([n_layer, None, mem_len, d_model]),
                                  name="xlnet_memory_states", **on_read)
        self.mask = tf.Variable(tf.zeros([0, mem_len]), shape=tf.TensorShape([None, mem_len]),
                                name="xlnet_memory_mask", **on_read)
        # The rows remembered, kept apart: TensorFlow's graph optimiser may
        # read a variable's shape out of order with its assignment (Shape of
        # a read becomes VariableShape), its value never.
        self.rows = tf.Variable(0, dtype=tf.int32, name="xlnet_memory_rows", **on_read)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class XLNetNetwork(ConfigFields, keras.Model):
    """The XLNet network (see the module docstring).

    Args:
        vocab_size ... initializer_range: as in `XLNetConfig` (HF names).
        output_attention_probs: default for returning attention
            probabilities (a call argument of the same name overrides it).
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    _EXTRA_CONFIG_FIELDS = ("output_attention_probs",)

    def __init__(self, vocab_size, d_model=1024, n_layer=24, n_head=16, d_inner=4096,
                 ff_activation="gelu", untie_r=True, mem_len=0, reuse_len=None,
                 bi_data=False, clamp_len=-1, dropout=0.1, layer_norm_eps=1e-12,
                 initializer_range=0.02, output_attention_probs=False, **kwargs):
        kwargs.setdefault("name", "xlnet")
        super().__init__(**kwargs)
        if d_model % n_head:
            raise ValueError("d_model (%d) must be a multiple of n_head (%d)." % (d_model, n_head))
        self._set_fields(locals(), mem_len=mem_len or 0)
        policy = self.dtype_policy
        # On the embeddings, the positional encodings and the outputs.
        self.drop = keras.layers.Dropout(dropout, dtype=policy, name="dropout")
        self.layers_ = [
            XLNetLayer(d_model, n_head, d_inner, ff_activation=ff_activation, dropout=dropout,
                       layer_norm_eps=layer_norm_eps, initializer_range=initializer_range,
                       own_biases=untie_r, dtype=policy, name="layer_%d" % i)
            for i in range(n_layer)
        ]
        self.sequence_summary = keras.layers.Dense(
            d_model, activation="tanh",
            kernel_initializer=truncated_normal_initializer(initializer_range),
            dtype=policy, name="sequence_summary")
        self._memory_state = (_MemoryState(n_layer, self.mem_len, d_model)
                              if self.mem_len > 0 else None)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        init = truncated_normal_initializer(self.initializer_range)
        self.word_embedding = self.add_weight(
            name="word_embedding", shape=(self.vocab_size, self.d_model), initializer=init)
        self.mask_emb = self.add_weight(name="mask_emb", shape=(1, 1, self.d_model),
                                        initializer=init)
        if not self.untie_r:
            head = (self.n_head, self.d_model // self.n_head)
            self.r_w_bias = self.add_weight(name="r_w_bias", shape=head, initializer=init)
            self.r_r_bias = self.add_weight(name="r_r_bias", shape=head, initializer=init)
            self.r_s_bias = self.add_weight(name="r_s_bias", shape=head, initializer=init)
            self.seg_embed = self.add_weight(name="seg_embed", shape=(2,) + head,
                                             initializer=init)
        for layer in self.layers_:
            layer.build()
        self.sequence_summary.build((None, self.d_model))

    # ------------------------------------------------------------ properties

    @property
    def embedding_table(self):
        """The word embedding variable (`[vocab_size, d_model]`), tied to the LM head."""
        return self.word_embedding

    @property
    def hidden_size(self):
        return self.d_model

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_dropout_prob(self):
        return self.dropout

    @property
    def pooler(self):
        """The sequence summary dense layer (BERT's name for what makes `pooled_output`)."""
        return self.sequence_summary

    def xlnet_config(self):
        """The `XLNetConfig` of this network."""
        from modeling.xlnet.config import XLNetConfig  # pylint: disable=g-import-not-at-top

        return self.config_object(XLNetConfig)

    # ---------------------------------------------------------------- memory

    def empty_memory(self, batch_size):
        """A memory holding nothing (all `mem_len` slots masked)."""
        return {"states": [tf.zeros([batch_size, self.mem_len, self.d_model], self.compute_dtype)
                           for _ in range(self.n_layer)],
                "mask": tf.zeros([batch_size, self.mem_len], tf.float32)}

    def _read_state(self, batch_size, mem_reset):
        """The kept memory for this batch (rows that reset, or a new batch size: empty)."""
        state = self._memory_state
        states, mask = state.states.read_value(), state.mask.read_value()
        # All rows when the batch size is the one remembered, none otherwise.
        kept = tf.where(tf.equal(state.rows.read_value(), batch_size), batch_size, 0)
        states = tf.pad(states[:, :kept], [[0, 0], [0, batch_size - kept], [0, 0], [0, 0]])
        mask = tf.pad(mask[:kept], [[0, batch_size - kept], [0, 0]])
        keep = 1.0 - tf.cast(tf.reshape(mem_reset, [-1]), tf.float32)
        mask = mask * keep[:, tf.newaxis]
        states = states * keep[tf.newaxis, :, tf.newaxis, tf.newaxis]
        return {"states": [tf.cast(states[i], self.compute_dtype) for i in range(self.n_layer)],
                "mask": mask}

    def _write_state(self, memory):
        state = self._memory_state
        state.states.assign(tf.cast(tf.stack(memory["states"]), tf.float32))
        state.mask.assign(memory["mask"])
        state.rows.assign(tf.shape(memory["mask"])[0])

    def _update_memory(self, memory_state, memory_mask, hidden, input_mask):
        """The last `mem_len` of `[memory, hidden[:, :reuse_len]]`, gradients stopped."""
        if self.reuse_len is not None:
            hidden = hidden[:, :self.reuse_len]
            input_mask = input_mask[:, :self.reuse_len]
        states = tf.concat([tf.cast(memory_state, hidden.dtype), hidden], 1)[:, -self.mem_len:]
        mask = tf.concat([memory_mask, input_mask], 1)[:, -self.mem_len:]
        return tf.stop_gradient(states), tf.stop_gradient(mask)

    # ------------------------------------------------------------------ call

    @staticmethod
    def _unpack(inputs):
        if isinstance(inputs, dict):
            if "input_ids" not in inputs:
                raise ValueError("XLNetNetwork inputs need an 'input_ids' entry.")
            return inputs
        return {"input_ids": inputs}

    def call(self, inputs, training=None, memory=None, output_attention_probs=None):
        features = self._unpack(inputs)
        input_ids = tf.convert_to_tensor(features["input_ids"])
        batch_size, qlen = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
        if output_attention_probs is None:
            output_attention_probs = self.output_attention_probs
        input_mask = features.get("input_mask")
        input_mask = (tf.ones([batch_size, qlen], tf.float32) if input_mask is None
                      else tf.cast(input_mask, tf.float32))
        segment_ids = features.get("segment_ids")
        segment_ids = (tf.zeros([batch_size, qlen], tf.int32) if segment_ids is None
                       else tf.cast(segment_ids, tf.int32))
        perm_mask = features.get("perm_mask")
        target_mapping = features.get("target_mapping")

        stateful = (memory is None and self._memory_state is not None
                    and features.get("mem_reset") is not None)
        if stateful:
            memory = self._read_state(batch_size, features["mem_reset"])
        if memory is None and self.mem_len > 0:
            memory = self.empty_memory(batch_size)
        if memory is not None:
            memory_mask = tf.cast(memory["mask"], tf.float32)
            mlen = tf.shape(memory_mask)[1]
        else:
            memory_mask = tf.zeros([batch_size, 0], tf.float32)
            mlen = 0
        klen = mlen + qlen

        # Who may attend to whom (1 = yes), over keys [memory, sequence].
        key_valid = tf.concat([memory_mask, input_mask], 1)[:, tf.newaxis, :]
        eye = tf.eye(qlen, dtype=tf.float32)[tf.newaxis]
        allowed = (tf.ones([batch_size, qlen, qlen], tf.float32) if perm_mask is None
                   else 1.0 - tf.cast(perm_mask, tf.float32))
        memory_cols = tf.ones([batch_size, qlen, mlen], tf.float32)
        mask_h = tf.concat([memory_cols, tf.maximum(allowed, eye)], 2) * key_valid
        has_query = perm_mask is not None or target_mapping is not None
        mask_g = (tf.concat([memory_cols, allowed * (1.0 - eye)], 2) * key_valid
                  if has_query else None)
        # Relative segments: memory counts as segment 0, as in XLNet.
        key_segments = tf.concat([tf.zeros([batch_size, mlen], tf.int32), segment_ids], 1)
        seg_mat = tf.not_equal(segment_ids[:, :, tf.newaxis], key_segments[:, tf.newaxis, :])

        pos_emb = relative_positional_encoding(qlen, klen, self.d_model, self.clamp_len,
                                               self.bi_data, batch_size,
                                               dtype=self.compute_dtype)
        pos_emb = self.drop(pos_emb, training=training)
        word = tf.gather(self.word_embedding, input_ids)
        h = self.drop(word, training=training)
        embedding_output = h
        g = None
        if has_query:
            rows = (tf.shape(target_mapping)[1] if target_mapping is not None else qlen)
            g = tf.tile(tf.cast(self.mask_emb, h.dtype), [batch_size, rows, 1])
            g = self.drop(g, training=training)
        biases = None if self.untie_r else (self.r_w_bias, self.r_r_bias, self.r_s_bias,
                                            self.seg_embed)

        encoder_outputs, attention_probs, new_states = [], [], []
        new_mask = None
        for i, layer in enumerate(self.layers_):
            layer_memory = (memory["states"][i] if memory is not None
                            else tf.zeros([batch_size, 0, self.d_model], h.dtype))
            if self.mem_len > 0:
                states, new_mask = self._update_memory(layer_memory, memory_mask, h,
                                                       input_mask)
                new_states.append(states)
            h, g, probs = layer(h, g, layer_memory, pos_emb, seg_mat, mask_h, mask_g=mask_g,
                                target_mapping=target_mapping, biases=biases,
                                training=training)
            encoder_outputs.append(h)
            attention_probs.append(probs)
        sequence_output = self.drop(h, training=training)
        # XLNet's summary reads the last position (<cls> of left-padded
        # inputs); right-padded rows give their last real position.
        positions = tf.range(qlen, dtype=tf.int32)[tf.newaxis, :]
        last = tf.reduce_max(tf.where(input_mask > 0, positions, 0), axis=1)
        outputs = {
            "sequence_output": sequence_output,
            "pooled_output": self.sequence_summary(
                tf.gather(sequence_output, last, axis=1, batch_dims=1)),
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }
        if g is not None:
            outputs["query_output"] = self.drop(g, training=training)
        if self.mem_len > 0:
            new_memory = {"states": new_states, "mask": new_mask}
            outputs["memory"] = new_memory
            if stateful:
                self._write_state(new_memory)
        if output_attention_probs:
            outputs["attention_probs"] = attention_probs
        return outputs
