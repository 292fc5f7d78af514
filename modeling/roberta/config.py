"""`RobertaConfig`: BERT's hyper-parameters plus the token ids RoBERTa's positions depend on.

RoBERTa (Liu et al. 2019) is BERT's network with other defaults, so its
config is a `BertConfig` (same fields, same checks, same `extra`) whose
defaults are those of the released `roberta-base`/`roberta-large`:

* `max_position_embeddings` 514: positions start past the padding id
  (`pad_token_id + 1` = 2 for the first token), so 512 tokens need rows
  0..513;
* `type_vocab_size` 1: RoBERTa has no next-sentence objective and feeds
  every token segment id 0;
* LayerNorm epsilon 1e-5 (BERT's is 1e-12), kept as the extra
  `layer_norm_epsilon` as BERT's config keeps HF's `layer_norm_eps`;
* `pad_token_id` 1, `bos_token_id` 0, `eos_token_id` 2 (`<s>` `<pad>`
  `</s>` are the first ids of the vocabulary). `pad_token_id` changes the
  computation (the position ids), the other two only the tokenizer's
  framing; all three are kept as extras, so the file written back has them
  under HF's names.

    >>> config = RobertaConfig(vocab_size=50265)
    >>> config.max_position_embeddings, config.type_vocab_size, config.pad_token_id
    (514, 1, 1)
"""

from modeling import config_schema
from modeling.bert.config import BERT_SCHEMA
from modeling.bert.config import HF_BERT_KEYS
from modeling.bert.config import BertConfig
from modeling.bert.config import BertConfigError
from modeling.bert.config import _HF_ACTIVATIONS  # HF's activation names -> this project's.

__all__ = ["HF_ACTIVATIONS", "ROBERTA_SCHEMA", "RobertaConfig", "RobertaConfigError",
           "load_roberta_config"]

# The same error class: a RoBERTa config is a BERT config, and code that
# catches BERT's config errors sees RoBERTa's too.
RobertaConfigError = BertConfigError

HF_ACTIVATIONS = dict(_HF_ACTIVATIONS)

# RoBERTa's defaults where they differ from BERT's (see the module docstring).
ROBERTA_MAX_POSITIONS = 514
ROBERTA_LAYER_NORM_EPSILON = 1e-5
PAD_TOKEN_ID, BOS_TOKEN_ID, EOS_TOKEN_ID = 1, 0, 2

_TOKEN_ID_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id")

ROBERTA_SCHEMA = config_schema.ConfigSchema(
    "RoBERTa", BERT_SCHEMA.fields, BERT_SCHEMA.required,
    extra_keys=(BERT_SCHEMA.known - set(BERT_SCHEMA.fields)) | HF_BERT_KEYS,
    model_types=("roberta",))


def _token_id(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RobertaConfigError(f"`{name}` must be a non-negative integer, got {value!r}.")
    return value


class RobertaConfig(BertConfig):
    """A `BertConfig` with RoBERTa's defaults and its special token ids.

    Args:
        vocab_size ... initializer_range: as in `BertConfig`
            (`max_position_embeddings` 514 and `type_vocab_size` 1 by default).
        pad_token_id: the padding id; real tokens' positions count from
            `pad_token_id + 1`, padding takes position `pad_token_id`.
        bos_token_id, eos_token_id: `<s>` and `</s>`.
        layer_norm_epsilon: LayerNorm epsilon of the encoder and the MLM head.
        **extra: other keys (kept and written back).
    """

    SCHEMA = ROBERTA_SCHEMA

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=ROBERTA_MAX_POSITIONS, type_vocab_size=1,
                 initializer_range=0.02, pad_token_id=PAD_TOKEN_ID, bos_token_id=BOS_TOKEN_ID,
                 eos_token_id=EOS_TOKEN_ID, layer_norm_epsilon=ROBERTA_LAYER_NORM_EPSILON,
                 **extra):
        if isinstance(layer_norm_epsilon, bool) or not isinstance(
                layer_norm_epsilon, (int, float)) or not layer_norm_epsilon > 0:
            raise RobertaConfigError(
                f"`layer_norm_epsilon` must be a positive number, got {layer_norm_epsilon!r}.")
        super().__init__(
            vocab_size, hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
            hidden_act=hidden_act, hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings, type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
            pad_token_id=_token_id("pad_token_id", pad_token_id),
            bos_token_id=_token_id("bos_token_id", bos_token_id),
            eos_token_id=_token_id("eos_token_id", eos_token_id),
            layer_norm_epsilon=float(layer_norm_epsilon), **extra)
        if self.pad_token_id >= self.max_position_embeddings - 1:
            raise RobertaConfigError(
                f"`pad_token_id` ({self.pad_token_id}) leaves no position: positions start "
                f"at pad_token_id + 1 and max_position_embeddings is "
                f"{self.max_position_embeddings}.")

    @property
    def pad_token_id(self):
        return self.extra["pad_token_id"]

    @property
    def bos_token_id(self):
        return self.extra["bos_token_id"]

    @property
    def eos_token_id(self):
        return self.extra["eos_token_id"]

    @property
    def layer_norm_epsilon(self):
        return self.extra["layer_norm_epsilon"]

    @property
    def max_sequence_length(self):
        """The longest input the position table covers (512 for 514 rows, pad id 1)."""
        return self.max_position_embeddings - self.pad_token_id - 1

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"RobertaConfig({fields})"


def load_roberta_config(path):
    """Reads a RoBERTa config: this project's file, HF's or a keras-hub preset's `config.json`.

    HF's file is read by `modeling.roberta.hf_format.config_from_hf`
    (HF's names and defaults); a file without `model_type` is this
    project's own (`RobertaConfig.to_json_file`).
    """
    import json  # pylint: disable=g-import-not-at-top
    import os  # pylint: disable=g-import-not-at-top

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"RoBERTa config file not found: {path}")
    from modeling.roberta import hf_format  # pylint: disable=g-import-not-at-top
    # A keras-hub preset's config.json: what its RobertaBackbone computes.
    config = hf_format.load_keras_hub_config(path)
    if config is not None:
        return config
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise RobertaConfigError(
            f"RoBERTa config file {path} is not valid JSON: {str(e).splitlines()[0]}") from e
    try:
        if isinstance(values, dict) and "model_type" in values:
            return hf_format.config_from_hf(values)
        return RobertaConfig._from_file_values(values)  # pylint: disable=protected-access
    except (RobertaConfigError, TypeError, ValueError) as e:
        raise RobertaConfigError(f"Invalid RoBERTa config file {path}: {e}") from e
