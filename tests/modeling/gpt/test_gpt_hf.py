"""GPT (`openai-gpt`) and GPT-2 Hugging Face folders: tokenizers and config, against `transformers`.

References written here: a `</w>` BPE learned with the `tokenizers` package
the way HF's `OpenAIGPTTokenizerFast` is built (BERT normaliser and
pre-tokenizer, `end_of_word_suffix="</w>"`), saved as `vocab.json` +
`merges.txt` (first line `#version: 0.2`); a byte-level BPE learned with
`tokenizers.ByteLevelBPETokenizer`; HF's tokenizers of those folders
(`AutoTokenizer`: the fast classes; `use_fast=False`: the Python ones); and
tiny random `OpenAIGPTModel` / `GPT2Model`s saved with `save_pretrained`.
"""

import json
import os

import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from tokenizers import Tokenizer
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import trainers

from data.tokenizers import gpt_bpe
from modeling import registry
from modeling.checkpoints import init_from_checkpoint
from modeling.checkpoints import name_tables
from modeling.checkpoints.targets import find_target
from modeling.gpt import GPTNetwork
from modeling.gpt import hf_format as gpt_hf
from modeling.gpt2 import GPT2Network
from modeling.gpt2 import hf_format as gpt2_hf
from modeling.pretrained.formats import TokenizerFormatError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

TEXTS = [
    "Hello World! It's a test, isn't it? $100 & 50%.",
    "中文测试，还有标点。自然语言处理",
    "Café naïve ÉCOLE façade",
    "  spaces\tand\nnewlines   at the end  ",
    "don't stop--ever... (really) [ok] {yes} \"quoted\"",
    "ＡＢＣ full width １２３ and emoji 😀 here",
    "x\u200by zero width, ß İ ﬁ ΣΑΣ",
    "",
]
PAIRS = [(TEXTS[0], TEXTS[1]), (TEXTS[3], "")]


def _corpus():
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO, "data", "sample", name), encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    return lines


def _encode_hf(tokenizer, text, pair=None):
    encoded = tokenizer(text, pair, return_token_type_ids=True)
    return encoded["input_ids"], encoded["token_type_ids"]


def _assert_same_ids(ours, hf, texts, pairs):
    for text in texts:
        expected = _encode_hf(hf, text)
        got = ours.encode(text)
        assert (got.input_ids, got.segment_ids) == expected, (
            text, hf.convert_ids_to_tokens(expected[0]), ours.convert_ids_to_tokens(got.input_ids))
    for a, b in pairs:
        got = ours.encode(a, b)
        assert (got.input_ids, got.segment_ids) == _encode_hf(hf, a, b), (a, b)


# ---------------------------------------------------------------- GPT


@pytest.fixture(scope="module")
def gpt_folder(tmp_path_factory):
    """An openai-gpt folder: a learned `</w>` BPE, a config, a random OpenAIGPTLMHeadModel."""
    folder = str(tmp_path_factory.mktemp("openai_gpt"))
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    # Characters the vocabulary lacks become <unk>: leave some of the corpus out.
    lines = [line for line in _corpus() if "ß" not in line]
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<unk>"], end_of_word_suffix="</w>",
        show_progress=False))
    tokenizer.model.save(folder)  # vocab.json, merges.txt (`#version: 0.2` first)
    vocab_size = tokenizer.get_vocab_size()
    torch.manual_seed(0)
    model = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(
        vocab_size=vocab_size, n_positions=64, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    model.save_pretrained(folder)
    return folder, model


def test_gpt_merges_file_has_hf_layout(gpt_folder):
    folder, _ = gpt_folder
    with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version") and lines[-1] == ""
    assert any(line.endswith("</w>") for line in lines[1:50])
    assert gpt_bpe.load_merges(os.path.join(folder, "merges.txt"))[0] == tuple(lines[1].split())


@pytest.mark.parametrize("use_fast", [True, False])
def test_gpt_tokenizer_ids_equal_hf(gpt_folder, use_fast):
    folder, _ = gpt_folder
    hf = transformers.AutoTokenizer.from_pretrained(folder, use_fast=use_fast)
    assert type(hf).__name__ == ("OpenAIGPTTokenizerFast" if use_fast else "OpenAIGPTTokenizer")
    ours = gpt_hf.read_tokenizer(folder)
    assert ours.vocab_size == len(hf)
    _assert_same_ids(ours, hf, TEXTS + ["<unk> in text<unk>x", "an unknown ß here"], PAIRS)
    # Lower-cased, BERT-split, `</w>` word ends, one <unk> per unknown character.
    assert ours.tokenize("The END.")[-1] == ".</w>"
    assert "<unk>" in ours.tokenize("ßß") and ours.encode("ßß").input_ids.count(
        ours.token_id("unk")) == 2


def test_gpt_normaliser_is_hfs_rust_one():
    """Corner cases the corpus does not reach: marks, odd whitespace, controls, sigma, CJK."""
    rust = normalizers.BertNormalizer(lowercase=True)
    for text in ("हिन्दी ां e\u0301 \u0903", "A\u2028B\x0bC\x85D\u00a0E\u3000F\u200bG\ufeffH",
                 "ΣΑΣ İ Ǆ ß ﬁ", "\x00x\ufffdy\x7f", "\U00020000中a", TEXTS[5]):
        assert gpt_bpe.normalize(text) == rust.normalize_str(text), text
    words = gpt_bpe.basic_words("Hello, wörld! (中文) $5")
    assert words == ["hello", ",", "world", "!", "(", "中", "文", ")", "$", "5"]


def test_gpt_tokenizer_save_round_trip(gpt_folder, tmp_path):
    folder, _ = gpt_folder
    ours = gpt_hf.read_tokenizer(folder)
    written = sorted(os.path.basename(p) for p in ours.save(str(tmp_path)))
    assert written == ["merges.txt", "special_tokens_map.json", "tokenizer_config.json",
                       "vocab.json"]
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "openai-gpt"}))
    for use_fast in (True, False):
        hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), use_fast=use_fast)
        _assert_same_ids(gpt_hf.read_tokenizer(str(tmp_path)), hf, TEXTS, PAIRS)
    assert ours.decode(ours.encode("Hello, world").input_ids) == "hello , world"


def test_gpt_folder_config_and_weights(gpt_folder, tmp_path):
    folder, model = gpt_folder
    family = registry.families.get("gpt")
    assert family.hf.model_types == ("openai-gpt",)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    config = family.hf.config_from_hf(values)
    network = GPTNetwork.from_config_object(config)
    init_from_checkpoint(network, folder)
    tokenizer = family.hf.read_tokenizer(folder, config)
    ids = np.array([tokenizer.encode(TEXTS[0]).input_ids], np.int32)
    with torch.no_grad():
        expected = model.transformer(input_ids=torch.tensor(ids, dtype=torch.long))
    got = network({"input_ids": ids})["sequence_output"].numpy()
    np.testing.assert_allclose(got, expected.last_hidden_state.numpy(), atol=1e-4, rtol=1e-4)
    # Written back by hand (the table, config_to_hf, the tokenizer): HF reads it.
    out = str(tmp_path / "written")
    os.makedirs(out)
    arrays = name_tables.table_arrays(find_target(network), family.name_tables["hf"])
    safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                                os.path.join(out, "model.safetensors"),
                                metadata={"format": "pt"})
    hf_values = family.hf.config_to_hf(config)
    hf_values["architectures"] = [family.hf.architectures["encoder"]]
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_values, f)
    tokenizer.save(out)
    reloaded = transformers.AutoModel.from_pretrained(out).eval()
    assert type(reloaded).__name__ == "OpenAIGPTModel"
    with torch.no_grad():
        again = reloaded(input_ids=torch.tensor(ids, dtype=torch.long)).last_hidden_state
    np.testing.assert_allclose(got, again.numpy(), atol=1e-4, rtol=1e-4)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert hf_tokenizer(TEXTS[1])["input_ids"] == tokenizer.encode(TEXTS[1]).input_ids


def test_gpt_missing_files_are_one_line_naming_them(gpt_folder, tmp_path):
    folder, _ = gpt_folder
    (tmp_path / "vocab.json").write_text(open(os.path.join(folder, "vocab.json"),
                                              encoding="utf-8").read())
    with pytest.raises(TokenizerFormatError, match="merges.txt: no such file"):
        gpt_hf.read_tokenizer(str(tmp_path))
    (tmp_path / "merges.txt").write_text("#version: 0.2\nth e e\n")
    with pytest.raises(TokenizerFormatError, match="merges.txt line 2"):
        gpt_hf.read_tokenizer(str(tmp_path))


# --------------------------------------------------------------- GPT-2


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A gpt2 folder: a learned byte-level BPE with <|endoftext|>, a random GPT2Model."""
    folder = str(tmp_path_factory.mktemp("gpt2"))
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(_corpus(), vocab_size=1200, special_tokens=["<|endoftext|>"],
                                  show_progress=False)
    tokenizer.save_model(folder)
    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    model.save_pretrained(folder)
    return folder, model


@pytest.mark.parametrize("use_fast", [True, False])
def test_gpt2_tokenizer_ids_equal_hf(gpt2_folder, use_fast):
    folder, _ = gpt2_folder
    hf = transformers.AutoTokenizer.from_pretrained(folder, use_fast=use_fast)
    assert type(hf).__name__ == ("GPT2TokenizerFast" if use_fast else "GPT2Tokenizer")
    ours = gpt2_hf.read_tokenizer(folder)
    assert ours.vocab_size == len(hf)
    _assert_same_ids(ours, hf, TEXTS + ["one<|endoftext|>two <|endoftext|> three"], PAIRS)
    assert ours.encode("a<|endoftext|>").input_ids[-1] == ours.token_id("eos")


def test_gpt2_tokenizer_save_round_trip(gpt2_folder, tmp_path):
    folder, _ = gpt2_folder
    ours = gpt2_hf.read_tokenizer(folder)
    ours.save(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    for use_fast in (True, False):
        hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), use_fast=use_fast)
        _assert_same_ids(gpt2_hf.read_tokenizer(str(tmp_path)), hf, TEXTS, PAIRS)
    assert ours.decode(ours.encode(TEXTS[1]).input_ids) == TEXTS[1]


def test_gpt2_folder_config_and_weights(gpt2_folder):
    folder, model = gpt2_folder
    family = registry.families.get("gpt2")
    assert family.hf.model_types == ("gpt2",)
    assert family.hf.architectures["causal_lm"] == "GPT2LMHeadModel"
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    config = family.hf.config_from_hf(values)
    written = family.hf.config_to_hf(config)
    assert written["model_type"] == "gpt2" and transformers.GPT2Config(**written).n_embd == 32
    network = GPT2Network.from_config_object(config)
    init_from_checkpoint(network, folder)
    ids = np.array([family.hf.read_tokenizer(folder).encode(TEXTS[1]).input_ids], np.int32)
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(ids, dtype=torch.long)).last_hidden_state
    got = network({"input_ids": ids})["sequence_output"].numpy()
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4, rtol=1e-4)


def test_gpt2_missing_vocab_is_one_line_naming_it(tmp_path):
    with pytest.raises(TokenizerFormatError, match="vocab.json: no such file"):
        gpt2_hf.read_tokenizer(str(tmp_path))
