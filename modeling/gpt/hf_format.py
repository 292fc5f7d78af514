"""GPT's (`openai-gpt`) Hugging Face folder format: its config and its own BPE tokenizer.

`GPTConfig` is HF's `OpenAIGPTConfig` file already (`modeling.gpt.config`),
so the config mapping is the file itself, checked against the family's
schema. The tokenizer is GPT's own BPE (`data.tokenizers.gpt_bpe`:
lower-cased, BERT-style word splitting, `</w>` word ends), wrapped as HF's
`OpenAIGPTTokenizer` is: no framing and no special token but `<unk>`
(kept whole when written in the text); a pair is the two texts' ids one
after the other (segment ids 0 then 1, what HF gives when asked for
`token_type_ids`).
"""

import os

from data.tokenizers import gpt_bpe
from data.tokenizers import hf_files
from modeling.gpt.config import GPTConfig
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.tokenizers import Encoded
from modeling.pretrained.tokenizers import PretrainedTokenizer
from modeling.pretrained.tokenizers import require_file
from modeling.pretrained.tokenizers import tokenizer_config

__all__ = ["GPTTokenizer", "HF_FORMAT", "config_from_hf", "config_to_hf", "read_tokenizer"]


class GPTTokenizer(PretrainedTokenizer):
    """HF's `OpenAIGPTTokenizer` (and `...Fast`) ids over GPT's `</w>` BPE.

    Args:
        vocab_file, merges_file: `vocab.json`, `merges.txt` (header line first).
        unk_token: the unknown token (`<unk>`).
    """

    def __init__(self, vocab_file, merges_file, unk_token=gpt_bpe.UNK_TOKEN):
        try:
            self._bpe = gpt_bpe.GPTBPETokenizer(vocab_file, merges_file, unk_token=unk_token)
        except gpt_bpe.GPTBPEError as e:
            raise TokenizerFormatError(str(e)) from None
        self.vocab = self._bpe.encoder
        self.special_tokens = {"unk": unk_token} if unk_token in self.vocab else {}
        super().__init__()

    @classmethod
    def from_folder(cls, folder):
        """The tokenizer of an HF `openai-gpt` folder (`vocab.json`, `merges.txt`, settings)."""
        vocab_file = require_file(folder, "vocab.json", "GPT's BPE vocabulary")
        merges_file = require_file(folder, "merges.txt", "GPT's BPE merges")
        settings = tokenizer_config(folder)
        return cls(vocab_file, merges_file,
                   unk_token=settings.get("unk_token", gpt_bpe.UNK_TOKEN))

    def _pieces(self, text):
        return self._bpe.tokenize_plain(text)

    def build_inputs(self, ids_a, ids_b=None):
        ids_b = list(ids_b or [])
        return Encoded(list(ids_a) + ids_b, [0] * len(ids_a) + [1] * len(ids_b))

    def decode(self, ids):
        return self._bpe.decode(ids)

    def save(self, folder):
        os.makedirs(folder, exist_ok=True)
        specials = {role + "_token": token for role, token in self.special_tokens.items()}
        settings = {"tokenizer_class": "OpenAIGPTTokenizer"}
        settings.update(specials)
        return (hf_files.write_bpe_files(folder, self.vocab, self._bpe.merges)
                + hf_files.write_settings(folder, settings, specials))


# A `GPTConfig` from HF's parsed `config.json` (a `GPTConfigError` on bad values),
# and HF's `config.json` content for one (the config's own dict).
config_from_hf = GPTConfig.from_hf
config_to_hf = GPTConfig.to_hf


def read_tokenizer(folder, config=None):
    del config  # the folder's vocab.json, merges.txt and settings are the whole tokenizer
    return GPTTokenizer.from_folder(folder)


HF_FORMAT = HFFormat(
    model_types=("openai-gpt",),
    config_from_hf=config_from_hf,
    config_to_hf=config_to_hf,
    read_tokenizer=read_tokenizer,
    architectures={"encoder": "OpenAIGPTModel", "causal_lm": "OpenAIGPTLMHeadModel"},
    with_prefix="transformer.",
)
