"""`MassNetwork`: MASS's encoder-decoder Transformer (Song et al. 2019) from the shared layers.

    encoder  BERT's post-LN `TransformerBlock`s over the (partly masked) sentence
    decoder  post-LN `TransformerDecoderBlock`s: causal self-attention over the
             decoder's inputs, cross-attention to the encoder's output
    shared   one `BertEmbeddings` layer (tokens + positions + language ids,
             LayerNorm) feeds both sides; the output layer is the same token
             table, transposed (tied), plus a bias: `logits = h @ E^T + b`

    >>> network = MassNetwork.from_config_object(MassConfig(vocab_size=100, hidden_size=32,
    ...     num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    >>> outputs = network(features)           # a batch of the "mass" pipeline
    >>> outputs["decoder_sequence_output"]    # [batch, dec_len, hidden]

Why positions are inputs of the decoder: MASS feeds the decoder only the
masked fragment (the positions outside it would be [MASK] and carry
nothing), and each fed token keeps its position in the sentence, so the
decoder knows *where* in the sentence it is predicting. The fragment is
contiguous, so the causal mask over the decoder's own order is the causal
mask over sentence positions.

Inputs: a dict (other keys are ignored, so a whole training batch can be
passed) with
    input_ids, input_mask, segment_ids      [batch, seq]  the encoder side
                                            (segment ids are language ids)
and, to run the decoder,
    decoder_input_ids                       [batch, dec]  fed tokens
    decoder_position_ids                    [batch, dec]  their sentence positions
    decoder_input_mask                      [batch, dec]  1 real / 0 padding
    decoder_segment_ids                     [batch, dec]  language ids (default 0)
or the encoder's ids tensor alone.

Outputs (the encoder contract of `modeling.encoder`, plus the decoder's):
    sequence_output          [batch, seq, hidden]   the encoder's last block
    encoder_outputs          list of the encoder blocks' outputs
    embedding_output         [batch, seq, hidden]   the encoder's input
    decoder_sequence_output  [batch, dec, hidden]   the decoder's last block
    decoder_outputs          list of the decoder blocks' outputs
    attention_probs          (when asked for) encoder self-attention probs,
    decoder_attention_probs  and the decoder's (self, cross) pairs

Weights (paths under the network, `mass/`):
    embeddings/{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}
    encoder_layer_N/{attention_sublayer,ffn_sublayer}/...
    decoder_layer_N/{attention_sublayer,cross_attention_sublayer,ffn_sublayer}/...
    output_bias [vocab]
"""

import keras
import tensorflow as tf

from modeling.encoder import feature_dict
from modeling.layers import BertEmbeddings
from modeling.layers import TransformerBlock
from modeling.layers import TransformerDecoderBlock
from modeling.layers import causal_attention_mask
from modeling.layers import padding_attention_mask
from modeling.layers.common import LAYER_NORM_EPSILON
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import ConfigFields

__all__ = ["MassNetwork"]

_CONFIG_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_decoder_layers",
                  "num_attention_heads", "intermediate_size", "hidden_act",
                  "hidden_dropout_prob", "attention_probs_dropout_prob",
                  "max_position_embeddings", "type_vocab_size", "initializer_range")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MassNetwork(ConfigFields, keras.Model):
    """The MASS encoder-decoder (see the module docstring).

    Args:
        vocab_size ... initializer_range: as in `MassConfig` (BERT's names).
        layer_norm_epsilon: LayerNorm epsilon of every block (BERT's 1e-12).
        output_attention_probs: default for returning attention probabilities.
        **kwargs: Keras `Model` arguments (`name`, `dtype`, `trainable`).
    """

    _CONFIG_FIELDS = _CONFIG_FIELDS
    _EXTRA_CONFIG_FIELDS = ("layer_norm_epsilon", "output_attention_probs")

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=6,
                 num_decoder_layers=None, num_attention_heads=12, intermediate_size=3072,
                 hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=2, initializer_range=0.02,
                 layer_norm_epsilon=LAYER_NORM_EPSILON, output_attention_probs=False,
                 **kwargs):
        kwargs.setdefault("name", "mass")
        super().__init__(**kwargs)
        self._set_fields(locals(), num_decoder_layers=num_decoder_layers or num_hidden_layers)
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings.of_encoder(self)
        common = dict(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                      intermediate_size=intermediate_size, hidden_act=hidden_act,
                      hidden_dropout_prob=hidden_dropout_prob,
                      attention_probs_dropout_prob=attention_probs_dropout_prob,
                      initializer_range=initializer_range,
                      layer_norm_epsilon=layer_norm_epsilon, dtype=policy)
        self.encoder_layers = [TransformerBlock(name="encoder_layer_%d" % i, **common)
                               for i in range(num_hidden_layers)]
        self.decoder_layers = [TransformerDecoderBlock(name="decoder_layer_%d" % i, **common)
                               for i in range(self.num_decoder_layers)]
        # Weight shapes do not depend on the input: create them now, so the
        # network can be tied to or loaded into before its first call.
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        self.embeddings.build()
        shape = (None, None, self.hidden_size)
        for block in self.encoder_layers + self.decoder_layers:
            block.build(shape)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")

    # ------------------------------------------------------------ properties

    @property
    def embedding_table(self):
        """The shared token table `[vocab_size, hidden_size]` (input of both sides, tied output)."""
        return self.embeddings.word_embeddings

    # ------------------------------------------------------------ the parts

    def encode(self, input_ids, input_mask=None, segment_ids=None, training=None):
        """The encoder: `(sequence_output, block outputs, embedding_output, probs)`."""
        input_ids = tf.convert_to_tensor(input_ids)
        embedding_output = self.embeddings(input_ids, segment_ids=segment_ids,
                                           training=training)
        mask = None if input_mask is None else padding_attention_mask(input_mask)
        hidden, outputs, probs = embedding_output, [], []
        for block in self.encoder_layers:
            hidden, layer_probs = block(hidden, attention_mask=mask, training=training)
            outputs.append(hidden)
            probs.append(layer_probs)
        return hidden, outputs, embedding_output, probs

    def decode(self, memory, memory_mask, decoder_input_ids, decoder_position_ids,
               decoder_input_mask=None, decoder_segment_ids=None, training=None):
        """The decoder over `memory` (the encoder's output).

        Args:
            memory: `[batch, seq, hidden]`.
            memory_mask: `[batch, seq]` 1 real / 0 padding, or None.
            decoder_input_ids, decoder_position_ids: int `[batch, dec]`.
            decoder_input_mask: `[batch, dec]` 1 real / 0 padding, or None.
            decoder_segment_ids: `[batch, dec]` language ids, or None (0).

        Returns:
            `(decoder_sequence_output [batch, dec, hidden], block outputs,
            [(self probs, cross probs) per block])`. Position t depends only
            on the decoder's inputs at 0..t (and on the whole memory).
        """
        decoder_input_ids = tf.convert_to_tensor(decoder_input_ids)
        hidden = self.embeddings(decoder_input_ids, segment_ids=decoder_segment_ids,
                                 position_ids=decoder_position_ids, training=training)
        self_mask = causal_attention_mask(tf.shape(decoder_input_ids)[1])
        if decoder_input_mask is not None:
            self_mask = self_mask * padding_attention_mask(decoder_input_mask)
        cross_mask = None if memory_mask is None else padding_attention_mask(memory_mask)
        outputs, probs = [], []
        for block in self.decoder_layers:
            hidden, self_probs, cross_probs = block(
                hidden, memory, self_attention_mask=self_mask, memory_mask=cross_mask,
                training=training)
            outputs.append(hidden)
            probs.append((self_probs, cross_probs))
        return hidden, outputs, probs

    def logits(self, decoder_output):
        """Token logits through the tied table: float32 `[..., vocab]` (`h @ E^T + b`)."""
        table = tf.cast(self.embedding_table, decoder_output.dtype)
        flat = tf.reshape(decoder_output, [-1, self.hidden_size])
        logits = tf.matmul(flat, table, transpose_b=True)
        logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
        shape = tf.concat([tf.shape(decoder_output)[:-1], [self.vocab_size]], 0)
        return tf.reshape(logits, shape)

    # ------------------------------------------------------------------ call

    def call(self, inputs, training=None, output_attention_probs=None):
        if output_attention_probs is None:
            output_attention_probs = self.output_attention_probs
        features = feature_dict(inputs, "input_ids",
                                "MassNetwork inputs need an 'input_ids' entry.")
        input_mask = features.get("input_mask")
        sequence_output, encoder_outputs, embedding_output, probs = self.encode(
            features["input_ids"], input_mask, features.get("segment_ids"), training)
        outputs = {"sequence_output": sequence_output, "encoder_outputs": encoder_outputs,
                   "embedding_output": embedding_output}
        if output_attention_probs:
            outputs["attention_probs"] = probs
        if "decoder_input_ids" in features:
            if "decoder_position_ids" not in features:
                raise ValueError("MassNetwork: 'decoder_input_ids' need "
                                 "'decoder_position_ids' (their positions in the sentence).")
            decoder_output, decoder_outputs, decoder_probs = self.decode(
                sequence_output, input_mask, features["decoder_input_ids"],
                features["decoder_position_ids"], features.get("decoder_input_mask"),
                features.get("decoder_segment_ids"), training)
            outputs["decoder_sequence_output"] = decoder_output
            outputs["decoder_outputs"] = decoder_outputs
            if output_attention_probs:
                outputs["decoder_attention_probs"] = decoder_probs
        return outputs
