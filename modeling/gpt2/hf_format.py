"""GPT-2's Hugging Face folder format: `model_type` "gpt2", its config and tokenizer.

`GPT2Config` is HF's `config.json` already (`modeling.gpt2.config`), so the
config mapping is the file itself, checked against the family's schema
(unknown keys and options that would compute something else are refused).
The tokenizer is `data.tokenizers.byte_bpe.ByteBPETokenizer` over
`vocab.json` + `merges.txt`, wrapped as HF's `GPT2Tokenizer` is: no
framing (no `<|endoftext|>` is added; `add_bos_token` is False in GPT-2's
folders), `<|endoftext|>` written in the text kept whole, a pair is the two
texts' ids one after the other (segment ids 0 then 1, what HF gives when
asked for `token_type_ids`).

keras-hub presets (`GPT2Backbone`) in: `config_from_keras_hub` (the tanh
GELU, epsilon 1e-5, one dropout rate; the backbone config names no token
ids, so the config has none and generation takes `<|endoftext|>` from the
vocabulary) and `tokenizer_from_keras_hub`, the same `GPT2Tokenizer` over
the preset's `assets/tokenizer/vocabulary.json` and `merges.txt`:
keras-hub's `GPT2Tokenizer` adds no framing either and keeps
`<|endoftext|>` whole in text.
"""

import os

from data.tokenizers import byte_bpe
from data.tokenizers import hf_files
from modeling import config_schema
from modeling.gpt2.config import GPT2Config
from modeling.gpt2.config import GPT2ConfigError
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import keras_hub_tokenizer_file
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["GPT2Tokenizer", "HF_FORMAT", "KERAS_HUB_BACKBONE", "build_classifier",
           "config_from_hf", "config_from_keras_hub", "config_to_hf", "keras_hub_arrays",
           "load_keras_hub_config", "read_tokenizer", "tokenizer_from_keras_hub"]

KERAS_HUB_BACKBONE = "GPT2Backbone"

_ROLES = ("bos", "eos", "unk")


class GPT2Tokenizer(PretrainedTokenizer):
    """HF's `GPT2Tokenizer` (and `GPT2TokenizerFast`) ids over GPT-2's byte-level BPE.

    Args:
        vocab_file, merges_file: `vocab.json`, `merges.txt`.
        special_tokens: role ("bos", "eos", "unk") -> token; default
            `<|endoftext|>` for each, when the vocabulary has it.
        add_prefix_space: a space is put before text that does not start
            with one (HF's fast `ByteLevel(add_prefix_space=True)`).
    """

    def __init__(self, vocab_file, merges_file, special_tokens=None, add_prefix_space=False):
        try:
            self._bpe = byte_bpe.ByteBPETokenizer(vocab_file, merges_file, special_tokens=[])
        except byte_bpe.ByteBPEError as e:
            raise TokenizerFormatError(str(e)) from None
        self.vocab = self._bpe.encoder
        if special_tokens is None:
            special_tokens = {role: byte_bpe.END_OF_TEXT for role in _ROLES}
        self.special_tokens = {role: token for role, token in special_tokens.items()
                               if token is not None and token in self.vocab}
        self.add_prefix_space = bool(add_prefix_space)
        super().__init__()

    @classmethod
    def from_folder(cls, folder):
        """The tokenizer of an HF GPT-2 folder (`vocab.json`, `merges.txt`, optional settings)."""
        vocab_file = require_file(folder, "vocab.json", "GPT-2's BPE vocabulary")
        merges_file = require_file(folder, "merges.txt", "GPT-2's BPE merges")
        settings = tokenizer_config(folder)
        specials = {role: settings.get(role + "_token", byte_bpe.END_OF_TEXT) for role in _ROLES}
        return cls(vocab_file, merges_file, special_tokens=specials,
                   add_prefix_space=settings.get("add_prefix_space", False))

    def _pieces(self, text):
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        tokens = []
        for word in self._bpe.split_words(text):
            tokens.extend(self._bpe.word_tokens(word))
        return tokens

    def build_inputs(self, ids_a, ids_b=None):
        ids_b = list(ids_b or [])
        return Encoded(list(ids_a) + ids_b, [0] * len(ids_a) + [1] * len(ids_b))

    def decode(self, ids):
        return self._bpe.decode(ids)

    def save(self, folder):
        os.makedirs(folder, exist_ok=True)
        specials = {role + "_token": token for role, token in self.special_tokens.items()}
        settings = {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": self.add_prefix_space,
                    "add_bos_token": False, "errors": "replace"}
        settings.update(specials)
        return (hf_files.write_bpe_files(folder, self.vocab, self._bpe.merges)
                + hf_files.write_settings(folder, settings, specials))


# A `GPT2Config` from HF's parsed `config.json` (a `GPT2ConfigError` on bad values),
# and HF's `config.json` content for one (the config's own dict).
config_from_hf = GPT2Config.from_hf
config_to_hf = GPT2Config.to_hf


def read_tokenizer(folder, config=None):
    del config  # the folder's vocab.json, merges.txt and settings are the whole tokenizer
    return GPT2Tokenizer.from_folder(folder)


def config_from_keras_hub(values):
    """A `GPT2Config` for keras-hub's `GPT2Backbone` config (a `GPT2ConfigError`, one line)."""
    if not isinstance(values, dict):
        raise GPT2ConfigError("a keras-hub GPT2Backbone config must be a JSON object, got %s"
                              % type(values).__name__)
    dropout = float(values.get("dropout", 0.1))
    try:
        return GPT2Config(
            vocab_size=values["vocabulary_size"], n_positions=values.get("max_sequence_length",
                                                                        1024),
            n_embd=values["hidden_dim"], n_layer=values["num_layers"], n_head=values["num_heads"],
            n_inner=values["intermediate_dim"], activation_function="gelu_new",
            resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
            layer_norm_epsilon=1e-5, bos_token_id=None, eos_token_id=None)
    except KeyError as e:
        raise GPT2ConfigError("the keras-hub GPT2Backbone config has no %s" % e) from None


def tokenizer_from_keras_hub(folder, values, config=None):
    """`GPT2Tokenizer` over a preset's `assets/tokenizer/` files, as keras-hub's reads them."""
    del config
    files = []
    for name, what in (("vocabulary.json", "byte-level BPE vocabulary"),
                       ("merges.txt", "byte-level BPE merges")):
        files.append(keras_hub_tokenizer_file(folder, name, what))
    return GPT2Tokenizer(*files, add_prefix_space=bool(values.get("add_prefix_space", False)))


def keras_hub_arrays(arrays):
    """The HF arrays keras-hub's GPT-2 converter reads, as they are; refused (one line) when
    the feed-forward is not `4 * n_embd` wide, the only width that converter builds."""
    from modeling.pretrained.export import ExportError  # pylint: disable=import-outside-toplevel
    for name, value in arrays.items():
        if name.endswith("mlp.c_fc.weight") and value.shape[1] != 4 * value.shape[0]:
            raise ExportError(
                "keras-hub's GPT-2 converter builds a feed-forward of 4 * n_embd = %d; this "
                "model's is %d wide (n_inner), so it has no keras-hub preset"
                % (4 * value.shape[0], value.shape[1]))
    return arrays


def load_keras_hub_config(path):
    """The `GPT2Config` of a preset's `config.json` at `path`, or None if it is not one."""
    values = config_schema.keras_hub_backbone_config(path, KERAS_HUB_BACKBONE, GPT2ConfigError)
    return None if values is None else config_from_keras_hub(values)


def build_classifier(config, num_labels):
    """A fresh `GPT2Classifier` of `config` (a run_classifier.py checkpoint is restored into it)."""
    from modeling.gpt2 import classification  # pylint: disable=import-outside-toplevel
    return classification.GPT2Classifier.from_config_object(config, num_labels)


HF_FORMAT = HFFormat(
    model_types=("gpt2",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "GPT2Model", "causal_lm": "GPT2LMHeadModel",
                   "classifier": "GPT2ForSequenceClassification"},
    with_prefix="transformer.",
    # A fine-tuned `GPT2Classifier` (`modeling.gpt2.classification`): HF's `score.weight`
    # is its `output_weights` ([num_labels, n_embd], no bias).
    classifier_table=lambda: {"score.weight": ("output_weights", False)},
    build_classifier=build_classifier,
    # keras-hub presets out (keras-hub converts the HF folder, modeling.pretrained.export)
    # and in (modeling.pretrained.keras_hub, the "keras_hub" name table).
    keras_hub_backbone=KERAS_HUB_BACKBONE,
    keras_hub_config=config_from_keras_hub,
    keras_hub_tokenizer=tokenizer_from_keras_hub,
    keras_hub_arrays=keras_hub_arrays,
)
