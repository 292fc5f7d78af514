"""Published causal LMs out of one folder: `run/generate.py` on HF GPT-2 / GPT folders, and export.

References written here: tiny random `GPT2LMHeadModel` / `OpenAIGPTLMHeadModel`
folders (`save_pretrained`) with tokenizers learned on the bundled corpus
(a byte-level BPE with `<|endoftext|>`; GPT's `</w>` BPE as HF's
`OpenAIGPTTokenizerFast` is built), HF's `generate(do_sample=False)` and
`AutoTokenizer` of those folders, and a random `XLNetModel` folder. The
script runs once in a subprocess (the openai-gpt folder, the one whose
tokenizer is not GPT-2's); the rest goes through the library call the script
makes (`fill_settings`, then the recipe's registered decoder).
"""

import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from tokenizers import Tokenizer
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import trainers

from modeling import registry
from modeling.pretrained import export
from modeling.pretrained import folders
from modeling.pretrained import from_pretrained
from modeling.pretrained import save_pretrained
from modeling.serving import generation

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROMPTS = ["The baker opens the shop", "Language models", "中文测试，还有"]
NEW_TOKENS = 12


def _corpus():
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO, "data", "sample", name), encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    return lines


def _spread(model):
    """Weights large enough that greedy choices are far from ties (TF vs torch rounding)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                continue
            p.copy_(0.2 * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("gpt2"))
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(_corpus(), vocab_size=800, special_tokens=["<|endoftext|>"],
                                  show_progress=False)
    tokenizer.save_model(folder)
    eot = tokenizer.token_to_id("<|endoftext|>")
    torch.manual_seed(0)
    model = _spread(transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eot, eos_token_id=eot)))
    model.save_pretrained(folder)
    return folder, model


@pytest.fixture(scope="module")
def gpt_folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("openai_gpt"))
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=800, special_tokens=["<unk>"], end_of_word_suffix="</w>",
        show_progress=False))
    tokenizer.model.save(folder)  # vocab.json, merges.txt
    torch.manual_seed(0)
    model = _spread(transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(
        vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)))
    model.save_pretrained(folder)
    return folder, model


@pytest.fixture(scope="module")
def xlnet_folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("xlnet"))
    model = transformers.XLNetModel(transformers.XLNetConfig(
        vocab_size=300, d_model=32, n_layer=2, n_head=4, d_inner=48, dropout=0.0,
        ff_activation="gelu", mem_len=None))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(0.3 * torch.randn_like(p) + (1.0 if "layer_norm.weight" in name else 0.0))
    model.eval().save_pretrained(folder)
    return folder, model


def _hf_expected(folder, hf_model, prompt):
    """HF's prompt ids, greedy continuation and its text (special tokens skipped)."""
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = hf_tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        out = hf_model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)),
                                do_sample=False, max_new_tokens=NEW_TOKENS,
                                pad_token_id=hf_model.config.eos_token_id or 0)
    generated = out[0, len(ids):].tolist()
    return ids, generated, hf_tokenizer.decode(generated, skip_special_tokens=True)


def _settings(folder, **changes):
    """run/generate.py's settings from --init_checkpoint=FOLDER alone, as the script fills them."""
    values = dict(init_checkpoint=folder, prompt=PROMPTS[0], output_file="unused.jsonl",
                  max_new_tokens=NEW_TOKENS, decoding="greedy")
    values.update(changes)
    return folders.fill_settings(generation.GenerationSettings(**values))


@pytest.mark.parametrize("which,family", [("gpt2", "gpt2"), ("gpt", "gpt")])
def test_folder_alone_generates_what_hf_generates(which, family, gpt2_folder, gpt_folder):
    folder, hf_model = {"gpt2": gpt2_folder, "gpt": gpt_folder}[which]
    settings = _settings(folder)
    assert settings.recipe == family
    decoder = registry.decoders.get(settings.recipe)
    for name in decoder.required_flags:
        assert getattr(settings, name), name
    # Batched prompts of different lengths (left-padded) get what each gets alone.
    records = decoder.generate(settings, PROMPTS)
    for prompt, record in zip(PROMPTS, records):
        ids, generated, text = _hf_expected(folder, hf_model, prompt)
        assert record["prompt_ids"] == ids, prompt
        assert record["generated_ids"] == generated, prompt
        assert record["text"] == text, prompt


def test_gpt2_stops_after_eos_as_hf(gpt2_folder):
    folder, hf_model = gpt2_folder
    generator = generation.load_folder_generator(folder)
    assert generator.eos_id == hf_model.config.eos_token_id == generator.bos_id
    # HF's generate stops after eos (kept); so does ours.
    eos = generator.eos_id
    ids, generated, _ = _hf_expected(folder, hf_model, PROMPTS[1])
    [result] = generation.generate(generator.network, [ids], generation.DecodingOptions(
        max_new_tokens=NEW_TOKENS), eos_id=eos, bos_id=eos)
    assert result.generated_ids == generated
    assert len(generated) == NEW_TOKENS or generated[-1] == eos



def _edited_copy(folder, where, **files):
    """A copy of `folder` whose JSON `files` (name -> {key: value, or None to drop it}; a
    name -> None drops the file) are edited."""
    shutil.copytree(folder, where)
    for name, changes in files.items():
        path = os.path.join(where, name.replace("__", "."))
        if changes is None:
            os.remove(path)
            continue
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        with open(path, "w", encoding="utf-8") as f:
            json.dump(values, f)
    return str(where)


def test_eos_ids_are_where_hfs_generate_reads_them(gpt2_folder, tmp_path):
    """HF's `generate` stops at `generation_config.json`'s eos ids (any of a list) when the
    folder has that file, else at `config.json`'s; never at the tokenizer's own eos."""
    folder, hf_model = gpt2_folder
    _, generated, _ = _hf_expected(folder, hf_model, PROMPTS[0])
    eot = hf_model.config.eos_token_id
    stop, other = generated[3], generated[6]
    assert eot not in generated[:7] and len({stop, other, eot}) == 3
    cases = {  # edits, and whether HF stops before NEW_TOKENS
        "config_only": (dict(config__json={"eos_token_id": stop}, generation_config__json=None),
                        True),
        "generation_list": (dict(generation_config__json={"eos_token_id": [other, stop]}),
                            True),
        "generation_none": (dict(config__json={"eos_token_id": stop},
                                 generation_config__json={"eos_token_id": None}), False),
    }
    for name, (edits, stops) in cases.items():
        copy = _edited_copy(folder, tmp_path / name, **edits)
        ids, want, text = _hf_expected(
            copy, transformers.AutoModelForCausalLM.from_pretrained(copy).eval(), PROMPTS[0])
        assert (len(want) < NEW_TOKENS) == stops, (name, want)
        settings = _settings(copy)
        [record] = registry.decoders.get(settings.recipe).generate(settings, PROMPTS[:1])
        assert (record["prompt_ids"], record["generated_ids"], record["text"]) == \
            (ids, want, text), name


def test_folders_it_cannot_generate_with_are_one_line(gpt2_folder, xlnet_folder, tmp_path):
    # A folder of a family that is no causal LM: named, with the ones that are.
    settings = _settings(xlnet_folder[0])
    decoder = registry.decoders.get(settings.recipe)
    decoder.check(settings)
    with pytest.raises(generation.GenerationError,
                       match=r"is a xlnet model, not a causal LM .*expected a folder of gpt, "
                             r"gpt2") as error:
        decoder.generate(settings, PROMPTS[:1])
    assert error.value.option == "init_checkpoint"
    # A folder whose tokenizer file is missing: that file is named, not a flag to give.
    bare = _edited_copy(gpt2_folder[0], tmp_path / "bare", vocab__json=None, merges__txt=None)
    settings = _settings(bare)
    decoder.check(settings)
    with pytest.raises(generation.GenerationError, match=r"vocab\.json: no such file") as error:
        decoder.generate(settings, PROMPTS[:1])
    assert error.value.option == "init_checkpoint"
    # Anything else still needs its files given.
    settings = _settings(str(tmp_path / "ckpt-1"))
    with pytest.raises(ValueError, match=r"^--config_file is required"):
        decoder.check(settings)

def test_gpt_folder_reads_gpt_bpe(gpt_folder):
    """An openai-gpt folder's prompt goes through GPT's `</w>` BPE (lower-cased), not GPT-2's."""
    folder, _ = gpt_folder
    generator = generation.load_folder_generator(folder)
    assert type(generator.tokenizer).__name__ == "GPTTokenizer"
    assert generator.eos_id is None and generator.bos_id is None  # GPT has none; HF neither
    with pytest.raises(generation.GenerationError, match="empty"):
        generation.generate(generator.network, [[]])


def test_explicit_files_win_and_family_must_match(gpt2_folder, gpt_folder, tmp_path):
    gpt2, hf_model = gpt2_folder
    gpt, _ = gpt_folder
    # Vocabulary files given beside the folder are used in place of its own:
    # an empty vocab.json is refused by the byte-level BPE reader, naming the flag.
    other = tmp_path / "vocab.json"
    other.write_text("{}")
    settings = _settings(gpt2, vocab_file=str(other))
    with pytest.raises(generation.GenerationError) as error:
        registry.decoders.get(settings.recipe).generate(settings, PROMPTS[:1])
    assert error.value.option == "vocab_file"
    # The folder's own files named explicitly: the folder's way, HF's ids.
    settings = _settings(gpt2, vocab_file=os.path.join(gpt2, "vocab.json"))
    [record] = registry.decoders.get(settings.recipe).generate(settings, PROMPTS[:1])
    assert record["generated_ids"] == _hf_expected(gpt2, hf_model, PROMPTS[0])[1]
    # A GPT folder given to GPT-2's decoder is refused, naming --recipe.
    settings = _settings(gpt)
    with pytest.raises(generation.GenerationError, match="is a gpt model") as error:
        registry.decoders.get("gpt2").generate(settings, PROMPTS[:1])
    assert error.value.option == "recipe"


def test_script_takes_an_openai_gpt_folder_alone(gpt_folder, tmp_path):
    import script_runner  # pylint: disable=import-outside-toplevel
    folder, hf_model = gpt_folder
    out = tmp_path / "out.jsonl"
    done = script_runner.run(
        [sys.executable, os.path.join(REPO, "run", "generate.py"), "--init_checkpoint=" + folder,
         "--prompt=" + PROMPTS[0], "--max_new_tokens=%d" % NEW_TOKENS, "--decoding=greedy",
         "--output_file=" + str(out)],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids, generated, text = _hf_expected(folder, hf_model, PROMPTS[0])
    assert (record["prompt_ids"], record["generated_ids"], record["text"]) == (ids, generated, text)


# ------------------------------------------------------------------ export


def _ids(vocab_size, length=10):
    return np.random.default_rng(0).integers(0, vocab_size, [2, length]).astype(np.int64)


@pytest.mark.parametrize("which,architecture", [("gpt2", "GPT2LMHeadModel"),
                                                ("gpt", "OpenAIGPTLMHeadModel")])
def test_causal_lm_pretrainer_exports_as_lm_head_model(which, architecture, gpt2_folder,
                                                       gpt_folder, tmp_path):
    folder, hf_model = {"gpt2": gpt2_folder, "gpt": gpt_folder}[which]
    model, tokenizer = from_pretrained(folder, objectives=("causal_lm",))
    out = str(tmp_path / "out")
    save_pretrained(model, tokenizer, out, output_format="hf")  # no config=: config_of
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["architectures"] == [architecture]
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(reloaded).__name__ == architecture
    ids = torch.tensor(_ids(hf_model.config.vocab_size))
    with torch.no_grad():
        np.testing.assert_allclose(reloaded(ids).logits.numpy(), hf_model(ids).logits.numpy(),
                                   atol=1e-4)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert hf_tokenizer(PROMPTS[0])["input_ids"] == tokenizer.encode(PROMPTS[0]).input_ids


def test_config_of_describes_gpt2_gpt_xlnet(gpt2_folder, gpt_folder, xlnet_folder):
    for folder, config_name in ((gpt2_folder[0], "GPT2Config"), (gpt_folder[0], "GPTConfig"),
                                (xlnet_folder[0], "XLNetConfig")):
        model, _ = from_pretrained(folder, tokenizer=False)
        config = export.config_of(model)
        assert type(config).__name__ == config_name
        assert config.to_dict() == folders.inspect(folder).config().to_dict()


def test_xlnet_exports_without_config(xlnet_folder, tmp_path):
    folder, hf_model = xlnet_folder
    model, _ = from_pretrained(folder, tokenizer=False)
    out = str(tmp_path / "xlnet_out")
    save_pretrained(model, None, out, output_format="hf")
    reloaded = transformers.AutoModel.from_pretrained(out).eval()
    assert type(reloaded).__name__ == "XLNetModel"
    ids = torch.tensor(_ids(300))
    with torch.no_grad():
        np.testing.assert_allclose(reloaded(ids).last_hidden_state.numpy(),
                                   hf_model(ids).last_hidden_state.numpy(), atol=1e-4)


def test_gpt2_exports_as_keras_hub_preset(gpt2_folder, tmp_path):
    import keras_hub  # pylint: disable=import-outside-toplevel
    folder, hf_model = gpt2_folder
    model, tokenizer = from_pretrained(folder, objectives=("causal_lm",))
    out = str(tmp_path / "preset")
    save_pretrained(model, tokenizer, out, output_format="keras_hub")
    backbone = keras_hub.models.Backbone.from_preset(out)
    assert type(backbone).__name__ == "GPT2Backbone"
    ids = _ids(hf_model.config.vocab_size)
    hidden = backbone({"token_ids": ids.astype(np.int32),
                       "padding_mask": np.ones(ids.shape, np.int32)})
    with torch.no_grad():
        expected = hf_model.transformer(torch.tensor(ids)).last_hidden_state.numpy()
    np.testing.assert_allclose(np.asarray(hidden), expected, atol=1e-4)
    keras_tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(out)
    assert [int(i) for i in np.asarray(keras_tokenizer(PROMPTS[0]))] == \
        tokenizer.encode(PROMPTS[0]).input_ids
