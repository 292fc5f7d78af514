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
"""

import os

from data.tokenizers import byte_bpe
from data.tokenizers import hf_files
from modeling.gpt2.config import GPT2Config
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["GPT2Tokenizer", "HF_FORMAT", "config_from_hf", "config_to_hf", "read_tokenizer"]

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


HF_FORMAT = HFFormat(
    model_types=("gpt2",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "GPT2Model", "causal_lm": "GPT2LMHeadModel"},
    with_prefix="transformer.",
    # Out only: keras-hub's own HF converter writes GPT-2 presets
    # (`modeling.pretrained.export.save_keras_hub`); reading them back needs
    # `keras_hub_config` / `keras_hub_tokenizer`, which GPT-2 does not have yet.
    keras_hub_backbone="GPT2Backbone",
)
