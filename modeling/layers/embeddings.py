"""Token embeddings: BERT's word + position + token-type sum."""

import keras
import tensorflow as tf

from modeling.layers.activations import truncated_normal_initializer
from modeling.layers.common import LAYER_NORM_EPSILON
from modeling.layers.common import PACKAGE as _PACKAGE
from modeling.layers.config_fields import LayerFields

__all__ = ["BertEmbeddings"]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbeddings(LayerFields, keras.layers.Layer):
    """Word + position + token-type embeddings, then LayerNorm and dropout.

    Weights (Google name in brackets):
        `word_embeddings` [vocab, hidden] (bert/embeddings/word_embeddings),
        `position_embeddings` [max_positions, hidden]
        (bert/embeddings/position_embeddings),
        `token_type_embeddings` [type_vocab, hidden]
        (bert/embeddings/token_type_embeddings); with `type_vocab_size=0`
        there is no such weight (None) and nothing is added for segments
        (DistilBERT has no token types),
        `layer_norm.gamma` / `.beta` (bert/embeddings/LayerNorm/gamma|beta).

    Call args:
        input_ids: int `[batch, seq]`.
        segment_ids: int `[batch, seq]` token type ids, default all 0.
        position_ids: int `[batch, seq]` or `[seq]`, default `0..seq-1`.
        training: enables dropout.

    Returns:
        `[batch, seq, hidden]` in the layer's compute dtype.
    """

    _FIELDS = ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size",
               "initializer_range", "hidden_dropout_prob", "layer_norm_epsilon")

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        hidden_dropout_prob=0.1,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_fields(locals())
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout = keras.layers.Dropout(
            hidden_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    @classmethod
    def of_encoder(cls, encoder, hidden_size=None):
        """The `embeddings` of a BERT-shaped `encoder`, from its attributes of the same names.

        `hidden_size`: the embeddings' width (ALBERT's `embedding_size`);
        None: the encoder's `hidden_size`.
        """
        fields = {field: getattr(encoder, field) for field in cls._FIELDS}
        if hidden_size is not None:
            fields["hidden_size"] = hidden_size
        return cls(**fields, dtype=encoder.dtype_policy, name="embeddings")

    def build(self, input_shape=None):
        if self.built:
            return
        init = truncated_normal_initializer(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=init,
        )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init,
        )
        self.token_type_embeddings = None
        if self.type_vocab_size:
            self.token_type_embeddings = self.add_weight(
                name="token_type_embeddings",
                shape=(self.type_vocab_size, self.hidden_size),
                initializer=init,
            )
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, input_ids, segment_ids=None, position_ids=None, training=None):
        input_ids = tf.convert_to_tensor(input_ids)
        seq_length = tf.shape(input_ids)[1]
        static_length = input_ids.shape[1]
        if static_length is not None and static_length > self.max_position_embeddings:
            raise ValueError(
                f"Sequence length {static_length} exceeds "
                f"max_position_embeddings={self.max_position_embeddings}."
            )
        embeddings = tf.gather(self.word_embeddings, input_ids)
        if position_ids is None:
            # [seq, hidden], broadcast over the batch.
            positions = self.position_embeddings[:seq_length]
        else:
            positions = tf.gather(self.position_embeddings, position_ids)
        embeddings = embeddings + positions
        if self.token_type_embeddings is not None:
            if segment_ids is None:
                segment_ids = tf.zeros_like(input_ids)
            embeddings = embeddings + tf.gather(self.token_type_embeddings, segment_ids)
        embeddings = self.layer_norm(embeddings)
        return self.dropout(embeddings, training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.hidden_size,)


