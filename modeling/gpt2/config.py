"""`GPT2Config`: GPT-2's hyper-parameters under Hugging Face's `config.json` names.

Why HF's names: the GPT-2 weights people have (OpenAI's four sizes and every
fine-tune since) are distributed as HF folders, `config.json` next to
`model.safetensors`, and OpenAI's own `hparams.json` uses the same short
names (`n_embd`, `n_layer`, ...). So this project's GPT-2 config *is* HF's
`config.json`: one file format, read and written unchanged. Keys this
network does not use (`summary_*` of the double-heads model,
`task_specific_params`, `architectures`, ...) are kept in `extra` and written
back, so a config survives a round trip.

Values are validated when the config is made, so a bad file fails at load
time with one line naming the file and the field. Files are also checked
against `GPT2_SCHEMA` (`modeling.config_schema`): an unknown key is an error
naming the closest known one, and `vocab_size`, `n_positions` (or `n_ctx`),
`n_embd`, `n_layer` and `n_head` must be given. Options that would make
HF's model compute something this network does not (cross-attention,
unscaled attention, attention scaled by the inverse layer index) are refused
rather than ignored.

The `max_position_embeddings`, `hidden_size`, ... properties give the
BERT-style names generic code asks for (the pre-training job checks
`max_seq_length` against `max_position_embeddings`).

Presets: OpenAI's sizes (`gpt2`, `gpt2_medium`, `gpt2_large`, `gpt2_xl`) and
`gpt2_tiny`, a tiny GPT-2 (2 layers, width 128).
"""

from modeling import config_schema
from modeling import hf_config

__all__ = ["GPT2Config", "GPT2ConfigError", "list_presets", "load_gpt2_config"]


class GPT2ConfigError(ValueError):
    """A GPT-2 `config.json` (or dict) has a missing, mistyped or invalid value."""


# Field -> (default, kind), in the order HF writes them. `None` kinds are
# optional ints (n_inner, token ids).
_FIELDS = (
    ("vocab_size", 50257, "int"),
    ("n_positions", 1024, "int"),
    ("n_embd", 768, "int"),
    ("n_layer", 12, "int"),
    ("n_head", 12, "int"),
    ("n_inner", None, "optional_int"),
    ("activation_function", "gelu_new", "str"),
    ("resid_pdrop", 0.1, "prob"),
    ("embd_pdrop", 0.1, "prob"),
    ("attn_pdrop", 0.1, "prob"),
    ("layer_norm_epsilon", 1e-5, "positive_float"),
    ("initializer_range", 0.02, "positive_float"),
    ("bos_token_id", 50256, "optional_id"),
    ("eos_token_id", 50256, "optional_id"),
)
_FIELD_NAMES = tuple(name for name, _, _ in _FIELDS)

# HF options whose non-default values change what the model computes.
_REFUSED = {
    "add_cross_attention": (False, "cross-attention layers"),
    "scale_attn_weights": (True, "attention without the 1/sqrt(head size) scale"),
    "scale_attn_by_inverse_layer_idx": (False, "attention scaled by 1/(layer index + 1)"),
}

# What a GPT-2 config.json may hold (`modeling.config_schema`): the fields;
# OpenAI's `n_ctx` and `n_vocab` (hparams.json; they stand for `n_positions`
# and `vocab_size`); the HF options of `_REFUSED` (checked by value); HF's
# other GPT-2 keys (the double-heads model's `summary_*`, ...) and the keys
# every HF config may carry. Shapes come from the structural fields, which
# a file must give.
GPT2_SCHEMA = config_schema.ConfigSchema(
    "GPT-2", _FIELD_NAMES, ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"),
    extra_keys=({"n_ctx", "n_vocab", "reorder_and_upcast_attn", "summary_activation",
                 "summary_first_dropout", "summary_proj_to_labels", "summary_type",
                 "summary_use_proj"}
                | set(_REFUSED) | config_schema.HF_COMMON_KEYS),
    model_types=("gpt2",),
    alternatives={"n_positions": ("n_ctx",), "vocab_size": ("n_vocab",)})

# HF activation names -> this project's (`modeling.layers.get_activation`).
HF_ACTIVATIONS = {
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_new",
    "gelu_fast": "gelu_new",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
    "silu": "silu",
    "swish": "swish",
    "tanh": "tanh",
    "linear": "linear",
}

_PRESETS = {
    "gpt2": dict(n_embd=768, n_layer=12, n_head=12),
    "gpt2_medium": dict(n_embd=1024, n_layer=24, n_head=16),
    "gpt2_large": dict(n_embd=1280, n_layer=36, n_head=20),
    "gpt2_xl": dict(n_embd=1600, n_layer=48, n_head=25),
    # The demo job's model: BERT-Tiny's size, a context of 128.
    "gpt2_tiny": dict(n_embd=128, n_layer=2, n_head=2, n_positions=128),
}


def list_presets():
    return list(_PRESETS)


class GPT2Config(hf_config.OpenAIConfig):
    """GPT-2's hyper-parameters (HF `GPT2Config` field names and defaults).

    Args:
        vocab_size: rows of the token embedding table (50257 for OpenAI's).
        n_positions: longest context (rows of the position table).
        n_embd: width of the model.
        n_layer: Transformer blocks.
        n_head: attention heads; must divide `n_embd`.
        n_inner: feed-forward width; None means `4 * n_embd`.
        activation_function: HF name ("gelu_new" = tanh approximation).
        resid_pdrop: dropout on each block half's output before the residual.
        embd_pdrop: dropout on token + position embeddings.
        attn_pdrop: dropout on the attention probabilities.
        layer_norm_epsilon: LayerNorm epsilon (1e-5).
        initializer_range: std of the weight initialiser (0.02); residual
            output projections use `initializer_range / sqrt(2 * n_layer)`.
        bos_token_id, eos_token_id: `<|endoftext|>`'s id (50256 for OpenAI's).
        **extra: other keys, kept and written back.
    """

    FIELDS = _FIELDS
    ERROR = GPT2ConfigError
    SCHEMA = GPT2_SCHEMA
    WHAT = "a GPT-2 config"
    MODEL_TYPE = "gpt2"
    REFUSED = _REFUSED
    ACTIVATION = ("activation_function", HF_ACTIVATIONS, True)
    PRESETS = _PRESETS

    def _prepare(self, values, extra):
        super()._prepare(values, extra)
        if "n_vocab" in extra and "vocab_size" not in values:
            values["vocab_size"] = extra["n_vocab"]  # OpenAI's hparams.json

    # ------------------------------------------------- BERT-style aliases

    @property
    def intermediate_size(self):
        return self.n_inner or 4 * self.n_embd

    # -------------------------------------------------------------- presets

    @classmethod
    def from_preset(cls, name, vocab_size=50257, **overrides):
        """A named size (`list_presets()`), with `vocab_size` and other overrides."""
        if vocab_size != 50257:
            # <|endoftext|> is the last id of a vocabulary learned by
            # run/create_vocab.py --vocab_type=byte_bpe, as in OpenAI's.
            overrides = dict(dict(bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1),
                             **overrides)
        return cls._preset(name, vocab_size=vocab_size, **overrides)


def load_gpt2_config(path):
    """Reads a GPT-2 `config.json` (HF's, or a keras-hub preset's), or the one in a folder.

    Raises:
        FileNotFoundError: no such file (or no config.json in the folder).
        GPT2ConfigError: invalid JSON or values; the message names the file.
    """
    path = config_schema.config_file_in(path)
    from modeling.gpt2 import hf_format  # pylint: disable=import-outside-toplevel
    try:
        # A keras-hub preset's config.json: what its GPT2Backbone computes.
        config = hf_format.load_keras_hub_config(path)
    except (GPT2ConfigError, TypeError, ValueError) as e:
        raise GPT2ConfigError("Invalid keras-hub GPT-2 config %s: %s" % (path, e)) from e
    if config is not None:
        return config
    return GPT2Config.from_json_file(path)
