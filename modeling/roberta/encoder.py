"""`RobertaEncoder`: BERT's encoder with RoBERTa's position ids.

RoBERTa's network is BERT's, weight for weight (the same embeddings,
blocks and tanh pooler, under the same HF names), so `RobertaEncoder`
subclasses `BertEncoder` and changes only what RoBERTa computes
differently:

* position ids. fairseq, and HF after it (`create_position_ids_from_input_ids`),
  number the real tokens from `pad_token_id + 1` and give every padding
  token the position `pad_token_id`, counting over the *ids* (not the
  attention mask):

      not_pad = input_ids != pad_token_id
      position_ids = cumsum(not_pad) * not_pad + pad_token_id

  so with `pad_token_id` 1 the first token has position 2, and 512 tokens
  need the 514 rows of `max_position_embeddings`. A pad id inside a
  sequence is skipped by the count, as in HF. Explicit `position_ids` in
  the inputs dict are used as given;
* the defaults: one token type, LayerNorm epsilon 1e-5, 514 positions;
* an optional pooler: HF's `RobertaForMaskedLM` and
  `RobertaForSequenceClassification` are built with
  `add_pooling_layer=False` and their files hold no `pooler.dense.*`
  (the released `roberta-base` is one). An encoder with a pooler loads
  them keeping its initial pooler (as HF's `RobertaModel` does);
  `add_pooling_layer=False` builds one without (no `pooled_output`), HF's
  task models' exact layout.

Being a subclass, it is a family of its own only because the BERT family
recognises exactly `BertEncoder` (`type(model) is BertEncoder`).

    >>> encoder = RobertaEncoder.from_config_object(RobertaConfig(vocab_size=100,
    ...     hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    ...     intermediate_size=64))
    >>> encoder({"input_ids": ids, "input_mask": mask})["sequence_output"]
"""

import keras
import tensorflow as tf

from modeling.bert.encoder import BertEncoder
from modeling.roberta.config import PAD_TOKEN_ID
from modeling.roberta.config import ROBERTA_LAYER_NORM_EPSILON
from modeling.roberta.config import ROBERTA_MAX_POSITIONS
from modeling.roberta.config import RobertaConfig

__all__ = ["RobertaEncoder", "roberta_position_ids"]


def roberta_position_ids(input_ids, pad_token_id):
    """RoBERTa's position ids of `input_ids` `[batch, seq]` (see the module docstring)."""
    input_ids = tf.convert_to_tensor(input_ids)
    not_pad = tf.cast(tf.not_equal(input_ids, tf.cast(pad_token_id, input_ids.dtype)), tf.int32)
    return tf.cumsum(not_pad, axis=1) * not_pad + pad_token_id


@keras.saving.register_keras_serializable(package="roberta_family")
class RobertaEncoder(BertEncoder):
    """BERT's encoder with RoBERTa's positions and defaults (see the module docstring).

    Args:
        vocab_size ... initializer_range, layer_norm_epsilon,
            output_attention_probs, num_attention_heads_per_layer: as for
            `BertEncoder`, with RoBERTa's defaults.
        pad_token_id: the padding id the position ids count from.
        add_pooling_layer: build the tanh pooler (HF's `RobertaModel`
            default); False for the weights of HF's task models, which have
            none.
        **kwargs: Keras `Model` arguments.
    """

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=ROBERTA_MAX_POSITIONS, type_vocab_size=1,
                 initializer_range=0.02, layer_norm_epsilon=ROBERTA_LAYER_NORM_EPSILON,
                 output_attention_probs=False, num_attention_heads_per_layer=None,
                 pad_token_id=PAD_TOKEN_ID, add_pooling_layer=True, **kwargs):
        kwargs.setdefault("name", "roberta_encoder")
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) \
                or not 0 <= pad_token_id < max_position_embeddings - 1:
            raise ValueError(f"pad_token_id must be an integer in [0, max_position_embeddings "
                             f"- 1 = {max_position_embeddings - 1}), got {pad_token_id!r}.")
        self._add_pooling_layer = bool(add_pooling_layer)
        super().__init__(
            vocab_size, hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
            hidden_act=hidden_act, hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings, type_vocab_size=type_vocab_size,
            initializer_range=initializer_range, layer_norm_epsilon=layer_norm_epsilon,
            output_attention_probs=output_attention_probs,
            num_attention_heads_per_layer=num_attention_heads_per_layer, **kwargs)
        self.pad_token_id = pad_token_id
        self.add_pooling_layer = self._add_pooling_layer

    def _make_pooler(self):
        # Called by BertEncoder's constructor; None: no pooler, no pooled_output.
        return super()._make_pooler() if self._add_pooling_layer else None

    @property
    def max_sequence_length(self):
        """The longest input: positions run from pad_token_id + 1 to max_position_embeddings - 1."""
        return self.max_position_embeddings - self.pad_token_id - 1

    def _embed(self, input_ids, segment_ids, position_ids, training):
        if position_ids is None:
            length = input_ids.shape[1] if hasattr(input_ids, "shape") else None
            if length is not None and length > self.max_sequence_length:
                raise ValueError(
                    f"Sequence length {length} exceeds RoBERTa's {self.max_sequence_length} "
                    f"positions (max_position_embeddings={self.max_position_embeddings} less "
                    f"pad_token_id + 1 = {self.pad_token_id + 1}).")
            position_ids = roberta_position_ids(input_ids, self.pad_token_id)
        return super()._embed(input_ids, segment_ids, position_ids, training)

    # --------------------------------------------------------------- configs

    @classmethod
    def from_config_object(cls, bert_config, **kwargs):
        """An encoder for a `RobertaConfig` (or a `BertConfig` with RoBERTa's extras).

        `pad_token_id` and `layer_norm_epsilon` come from the config's
        extras when it has them; `kwargs` (`add_pooling_layer`, `name`,
        `dtype`, ...) go to the constructor.
        """
        extra = getattr(bert_config, "extra", None) or {}
        if "pad_token_id" in extra:
            kwargs.setdefault("pad_token_id", int(extra["pad_token_id"]))
        return super().from_config_object(bert_config, **kwargs)

    def bert_config(self):
        """The `RobertaConfig` describing this encoder."""
        config = super().bert_config()
        return RobertaConfig(**dict(config.to_dict(), pad_token_id=self.pad_token_id,
                                    layer_norm_epsilon=self.layer_norm_epsilon))

    roberta_config = bert_config

    def _saved_fields(self):
        return super()._saved_fields() + ("pad_token_id", "add_pooling_layer")
