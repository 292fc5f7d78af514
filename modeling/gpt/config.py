"""`GPTConfig`: GPT's (Radford et al. 2018) hyper-parameters under Hugging Face's `config.json` names.

Why HF's names: the GPT weights people have (OpenAI's `openai-gpt` and its
fine-tunes) are distributed as HF folders, `config.json` next to
`model.safetensors`, with HF's `OpenAIGPTConfig` fields (`n_embd`,
`n_layer`, `afn`, ...). So this project's GPT config *is* that file: read and
written unchanged. Keys this network does not use (the double-heads model's
`summary_*`, `n_special`, `predict_special_tokens`, `task_specific_params`,
...) are kept in `extra` and written back.

Values are validated when the config is made, so a bad file fails at load
time with one line naming the file and the field. Files are also checked
against `GPT_SCHEMA` (`modeling.config_schema`): an unknown key is an error
naming the closest known one, and `vocab_size`, `n_positions` (or `n_ctx`),
`n_embd`, `n_layer` and `n_head` must be given.

`afn` is HF's activation name for GPT: its "gelu" is the tanh approximation
(`gelu_new`, what OpenAI's code computed), unlike GPT-2's "gelu".

The `max_position_embeddings`, `hidden_size`, `hidden_act`, ... properties
give the BERT-style names generic code asks for.

Presets: `openai_gpt` (OpenAI's model: 12 layers, width 768, 512 positions,
a 40,478-token BPE vocabulary) and `gpt_tiny` (2 layers, width 64).
"""

from modeling import config_schema
from modeling import hf_config

__all__ = ["GPTConfig", "GPTConfigError", "GPT_ACTIVATIONS", "list_presets", "load_gpt_config"]


class GPTConfigError(ValueError):
    """A GPT `config.json` (or dict) has a missing, mistyped or invalid value."""


# Field -> (default, kind), HF `OpenAIGPTConfig`'s names and defaults.
_FIELDS = (
    ("vocab_size", 40478, "int"),
    ("n_positions", 512, "int"),
    ("n_embd", 768, "int"),
    ("n_layer", 12, "int"),
    ("n_head", 12, "int"),
    ("afn", "gelu", "str"),
    ("resid_pdrop", 0.1, "prob"),
    ("embd_pdrop", 0.1, "prob"),
    ("attn_pdrop", 0.1, "prob"),
    ("layer_norm_epsilon", 1e-5, "positive_float"),
    ("initializer_range", 0.02, "positive_float"),
)
_FIELD_NAMES = tuple(name for name, _, _ in _FIELDS)

# HF's GPT activations (`modeling_openai.ACT_FNS`) -> this project's
# (`modeling.layers.get_activation`): GPT's "gelu" is the tanh approximation.
GPT_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "swish"}

GPT_SCHEMA = config_schema.ConfigSchema(
    "GPT", _FIELD_NAMES, ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"),
    extra_keys=({"n_ctx", "n_special", "predict_special_tokens", "summary_activation",
                 "summary_first_dropout", "summary_proj_to_labels", "summary_type",
                 "summary_use_proj"} | config_schema.HF_COMMON_KEYS),
    model_types=("openai-gpt",),
    alternatives={"n_positions": ("n_ctx",)})

_PRESETS = {
    "openai_gpt": dict(n_embd=768, n_layer=12, n_head=12, n_positions=512),
    "gpt_tiny": dict(n_embd=64, n_layer=2, n_head=2, n_positions=128),
}


def list_presets():
    return list(_PRESETS)


class GPTConfig(hf_config.OpenAIConfig):
    """GPT's hyper-parameters (HF `OpenAIGPTConfig` field names and defaults).

    Args:
        vocab_size: rows of the token embedding table (40478 for OpenAI's).
        n_positions: longest context (rows of the position table, 512).
        n_embd: width of the model.
        n_layer: Transformer blocks.
        n_head: attention heads; must divide `n_embd`.
        afn: HF's activation name ("gelu" = the tanh approximation).
        resid_pdrop: dropout on each block half's output before the residual.
        embd_pdrop: dropout on token + position embeddings.
        attn_pdrop: dropout on the attention probabilities.
        layer_norm_epsilon: LayerNorm epsilon (1e-5).
        initializer_range: std of the weight initialiser (0.02).
        **extra: other keys, kept and written back.
    """

    FIELDS = _FIELDS
    ERROR = GPTConfigError
    SCHEMA = GPT_SCHEMA
    WHAT = "a GPT config"
    MODEL_TYPE = "openai-gpt"
    RAW_IN_ERRORS = True
    ACTIVATION = ("afn", GPT_ACTIVATIONS, False)
    PRESETS = _PRESETS

    # ------------------------------------------------- BERT-style aliases

    @property
    def intermediate_size(self):
        return 4 * self.n_embd

    @property
    def hidden_dropout_prob(self):
        """Dropout of a fine-tuning head (GPT's classifier dropout is `resid_pdrop`'s 0.1)."""
        return self.resid_pdrop

    # -------------------------------------------------------------- presets

    @classmethod
    def from_preset(cls, name, vocab_size=40478, **overrides):
        """A named size (`list_presets()`), with `vocab_size` and other overrides."""
        return cls._preset(name, vocab_size=vocab_size, **overrides)


def load_gpt_config(path):
    """Reads a GPT `config.json`, or the one in a model folder.

    Raises:
        FileNotFoundError: no such file (or no config.json in the folder).
        GPTConfigError: invalid JSON or values; the message names the file.
    """
    return GPTConfig.from_json_file(config_schema.config_file_in(path))
