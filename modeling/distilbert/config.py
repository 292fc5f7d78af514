"""`DistilBertConfig`: DistilBERT's hyper-parameters under Hugging Face's `config.json` names.

Why HF's names: DistilBERT (Sanh et al. 2019) was released only as
Hugging Face folders (`distilbert-base-uncased`, `-cased`, the
multilingual one and their fine-tunes), `config.json` next to
`model.safetensors`, with names of its own (`dim`, `n_layers`, `n_heads`,
`hidden_dim`, `dropout`, `activation`, ...). So this project's DistilBERT
config *is* HF's `config.json` (as GPT-2's is): one file format, read and
written unchanged; keys the encoder does not use (`qa_dropout`,
`seq_classif_dropout`, `tie_weights_`, labels, ...) are fields or extras,
kept and written back.

The encoder is BERT's (`modeling.distilbert.encoder`), so the BERT-style
names generic code asks for (`hidden_size`, `num_hidden_layers`,
`hidden_act`, `hidden_dropout_prob`, ...) are properties over HF's fields,
and `type_vocab_size` is 0: DistilBERT has no token-type embeddings.
`replace()` takes either spelling, since shared code (the distillation
students' `half_depth_config`) changes `num_hidden_layers`.

LayerNorm epsilon is not in HF's file: HF's DistilBERT hard-codes 1e-12,
BERT's value, which the encoder uses. `sinusoidal_pos_embds=True` (fixed
sinusoidal position table) is supported: the table is still a stored
weight, and a fresh encoder fills it and freezes it.
"""

from modeling import config_schema
from modeling import hf_config

__all__ = ["DistilBertConfig", "DistilBertConfigError", "load_distilbert_config"]


class DistilBertConfigError(ValueError):
    """A DistilBERT `config.json` (or dict) has a missing, mistyped or invalid value."""


# Field -> (default, kind), HF `DistilBertConfig`'s arguments in its order.
_FIELDS = (
    ("vocab_size", 30522, "int"),
    ("max_position_embeddings", 512, "int"),
    ("sinusoidal_pos_embds", False, "bool"),
    ("n_layers", 6, "int"),
    ("n_heads", 12, "int"),
    ("dim", 768, "int"),
    ("hidden_dim", 3072, "int"),
    ("dropout", 0.1, "prob"),
    ("attention_dropout", 0.1, "prob"),
    ("activation", "gelu", "str"),
    ("initializer_range", 0.02, "positive_float"),
    ("qa_dropout", 0.1, "prob"),
    ("seq_classif_dropout", 0.2, "prob"),
    ("pad_token_id", 0, "optional_id"),
)
_FIELD_NAMES = tuple(name for name, _, _ in _FIELDS)

# BERT-style names (what generic code and the encoder use) -> HF's fields.
BERT_NAMES = {
    "hidden_size": "dim",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "intermediate_size": "hidden_dim",
    "hidden_act": "activation",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
}

# What a DistilBERT config.json may hold: the fields, `tie_weights_`
# (written by the releases' transformers versions, read by none now) and the
# keys every HF config may carry.
DISTILBERT_SCHEMA = config_schema.ConfigSchema(
    "DistilBERT", _FIELD_NAMES, ("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim"),
    extra_keys={"tie_weights_"} | config_schema.HF_COMMON_KEYS,
    model_types=("distilbert",))

# HF activation names -> this project's (`modeling.layers.get_activation`).
HF_ACTIVATIONS = hf_config.HF_ACTIVATIONS


class DistilBertConfig(hf_config.HFConfig):
    """DistilBERT's hyper-parameters (HF `DistilBertConfig` field names and defaults).

    Args:
        vocab_size: rows of the word embedding table (30522: BERT's English vocab).
        max_position_embeddings: rows of the position table.
        sinusoidal_pos_embds: the position table is fixed sinusoids (not trained).
        n_layers: Transformer blocks (6 in the released models).
        n_heads: attention heads; must divide `dim`.
        dim: width of the model.
        hidden_dim: feed-forward width.
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: HF name of the feed-forward and MLM-transform activation.
        initializer_range: std of the weight initialiser.
        qa_dropout, seq_classif_dropout: HF's task heads' dropout (kept).
        pad_token_id: id of `[PAD]`.
        **extra: other keys, kept and written back.
    """

    FIELDS = _FIELDS
    ERROR = DistilBertConfigError
    SCHEMA = DISTILBERT_SCHEMA
    WHAT = "a DistilBERT config"
    MODEL_TYPE = "distilbert"
    MULTIPLE = ("dim", "n_heads")
    ACTIVATION = ("activation", HF_ACTIVATIONS, True)

    def _prepare(self, values, extra):
        renamed = [key for key in BERT_NAMES if key in extra]
        if renamed:
            raise DistilBertConfigError(
                "DistilBERT configs use HF's names: %s" % ", ".join(
                    "`%s` for `%s`" % (BERT_NAMES[key], key) for key in renamed))

    # ------------------------------------------------- BERT-style aliases

    @property
    def hidden_size(self):
        return self.dim

    @property
    def num_hidden_layers(self):
        return self.n_layers

    @property
    def num_attention_heads(self):
        return self.n_heads

    @property
    def intermediate_size(self):
        return self.hidden_dim

    @property
    def hidden_dropout_prob(self):
        return self.dropout

    @property
    def attention_probs_dropout_prob(self):
        return self.attention_dropout

    @property
    def type_vocab_size(self):
        """0: DistilBERT has no token-type (segment) embeddings."""
        return 0

    @property
    def attention_head_size(self):
        return self.dim // self.n_heads

    def replace(self, **changes):
        """A copy with fields changed; BERT-style names (`num_hidden_layers`) are accepted."""
        return super().replace(**{BERT_NAMES.get(key, key): value
                                  for key, value in changes.items()})


def load_distilbert_config(path):
    """Reads a DistilBERT `config.json` (HF's, or a keras-hub preset's), or the one in a folder.

    Raises:
        FileNotFoundError: no such file (or no config.json in the folder).
        DistilBertConfigError: invalid JSON or values; the message names the file.
    """
    path = config_schema.config_file_in(path)
    from modeling.distilbert import hf_format  # pylint: disable=import-outside-toplevel
    # A keras-hub preset's config.json: what its DistilBertBackbone computes.
    config = hf_format.load_keras_hub_config(path)
    if config is not None:
        return config
    return DistilBertConfig.from_json_file(path)
