# coding=utf-8
"""RoBERTa (modeling.roberta): HF folders load with HF's numbers and HF's token ids.

The references are `transformers` itself: tiny random `RobertaModel` /
`RobertaForMaskedLM` saved with `save_pretrained`, and `AutoTokenizer`
(the fast `RobertaTokenizerFast`) of a byte-level BPE learned here with
the `tokenizers` package on the bundled corpus.
"""

import json
import os

import keras
import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers

from modeling import checkpoints
from modeling import registry
from modeling.bert import BertConfig
from modeling.bert import BertEncoder
from modeling.checkpoints import CheckpointMismatchError
from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.objectives import BertPretrainer
from modeling.pretrained.formats import TokenizerFormatError
from modeling.roberta import RobertaConfig
from modeling.roberta import RobertaConfigError
from modeling.roberta import RobertaEncoder
from modeling.roberta import RobertaTokenizer
from modeling.roberta import checkpoint_names
from modeling.roberta import hf_format
from modeling.roberta import load_roberta_config
from modeling.roberta import roberta_position_ids

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
H, L, HEADS, I, MAXPOS = 32, 2, 4, 37, 40
ATOL = 1e-4

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "你好，世界。这是中文。",
    "Mixed 中文 and English, numbers 12345!",
    "  leading spaces",
    "trailing spaces   ",
    "multiple   inner    spaces\tand\ttabs\nand newlines",
    "a <mask> b",
    "a<mask>b",
    "<mask> at the start and at the end <mask>",
    "x <s> y </s>z <pad> <unk>",
    "It's a dog's life, isn't it? We'll see.",
    "",
    " ",
    "emoji 🙂 and accents café",
]
PAIRS = [("How are you?", "I am fine, thanks."), ("第一句", "  second <mask> part "),
         ("", "only the pair"), ("one", "")]


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    """vocab.json + merges.txt of a byte-level BPE learned on the bundled corpus."""
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=g-import-not-at-top
    files = [os.path.join(REPO_ROOT, "data", "sample", name)
             for name in ("sample_en.txt", "sample_zh.txt")]
    bpe = ByteLevelBPETokenizer()
    bpe.train(files, vocab_size=420, min_frequency=2, special_tokens=SPECIALS,
              show_progress=False)
    folder = tmp_path_factory.mktemp("bpe")
    bpe.save_model(str(folder))
    return str(folder)


def _tokenizer_folder(bpe_dir, tmp_path_factory, add_prefix_space):
    folder = tmp_path_factory.mktemp("tokenizer_%s" % add_prefix_space)
    for name in ("vocab.json", "merges.txt"):
        with open(os.path.join(bpe_dir, name), encoding="utf-8") as src:
            (folder / name).write_text(src.read(), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "RobertaTokenizer", "add_prefix_space": add_prefix_space}))
    return str(folder)


@pytest.fixture(scope="module", params=[False, True], ids=["no_prefix_space", "prefix_space"])
def tokenizer_pair(request, bpe_dir, tmp_path_factory):
    """(our tokenizer, HF's AutoTokenizer) of one folder."""
    folder = _tokenizer_folder(bpe_dir, tmp_path_factory, request.param)
    hf = transformers.AutoTokenizer.from_pretrained(folder)
    assert isinstance(hf, transformers.RobertaTokenizerFast)
    return RobertaTokenizer.from_folder(folder), hf


@pytest.fixture(scope="module")
def vocab_size(bpe_dir):
    with open(os.path.join(bpe_dir, "vocab.json"), encoding="utf-8") as f:
        return len(json.load(f))


def _hf_config(vocab_size):
    return transformers.RobertaConfig(
        vocab_size=vocab_size, hidden_size=H, num_hidden_layers=L, num_attention_heads=HEADS,
        intermediate_size=I, max_position_embeddings=MAXPOS, type_vocab_size=1,
        layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)


def _randomise_torch(model, seed):
    # Non-trivial LayerNorms and biases (HF initialises them to 1 and 0).
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))


@pytest.fixture(scope="module")
def hf_model_dir(tmp_path_factory, vocab_size):
    """A random HF `RobertaModel` saved with `save_pretrained` (no prefix, with pooler)."""
    torch.manual_seed(0)
    model = transformers.RobertaModel(_hf_config(vocab_size)).eval()
    _randomise_torch(model, 1)
    folder = tmp_path_factory.mktemp("hf_roberta")
    model.save_pretrained(str(folder))
    return str(folder), model


@pytest.fixture(scope="module")
def hf_mlm_dir(tmp_path_factory, vocab_size):
    """A random HF `RobertaForMaskedLM` (prefix `roberta.`, no pooler, tied decoder)."""
    torch.manual_seed(2)
    model = transformers.RobertaForMaskedLM(_hf_config(vocab_size)).eval()
    _randomise_torch(model, 3)
    folder = tmp_path_factory.mktemp("hf_roberta_mlm")
    model.save_pretrained(str(folder))
    return str(folder), model


def _config_of(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return hf_format.config_from_hf(json.load(f))


@pytest.fixture(scope="module")
def loaded_encoder(hf_model_dir):
    folder, _ = hf_model_dir
    config = _config_of(folder)
    keras.utils.set_random_seed(7)
    encoder = RobertaEncoder.from_config_object(config)
    report = checkpoints.init_from_checkpoint(encoder, folder)
    return encoder, config, report


def _batch(vocab_size):
    """Two sequences of different lengths, the second padded with <pad> (id 1)."""
    rng = np.random.RandomState(0)
    ids = rng.randint(5, vocab_size, size=(2, 11)).astype(np.int32)
    ids[:, 0] = 0
    ids[0, -1] = 2
    ids[1, 6] = 2
    ids[1, 7:] = 1
    mask = (ids != 1).astype(np.int32)
    return ids, mask


def _torch(array):
    return torch.tensor(np.asarray(array), dtype=torch.long)


# ------------------------------------------------------------------ encoder


def test_position_ids_are_hfs(vocab_size):
    from transformers.models.roberta import modeling_roberta  # pylint: disable=g-import-not-at-top
    ids, _ = _batch(vocab_size)
    ids[0, 4] = 1  # a pad id inside a sequence is skipped by the count, as in HF
    want = modeling_roberta.create_position_ids_from_input_ids(_torch(ids), 1).numpy()
    np.testing.assert_array_equal(roberta_position_ids(ids, 1).numpy(), want)
    assert want[1, 0] == 2 and want[1, -1] == 1


def test_hidden_states_of_every_layer_equal_hf_roberta_model(hf_model_dir, loaded_encoder,
                                                            vocab_size):
    _, hf = hf_model_dir
    encoder, config, report = loaded_encoder
    assert config.max_position_embeddings == MAXPOS and config.type_vocab_size == 1
    assert encoder.layer_norm_epsilon == 1e-5 and encoder.pad_token_id == 1
    skipped = dict(report.skipped)
    assert "pooler.dense.weight" in report.loaded and not any(
        name.startswith(("embeddings.", "encoder.")) and reason != "buffer, not a weight"
        for name, reason in skipped.items())
    ids, mask = _batch(vocab_size)
    out = encoder({"input_ids": ids, "input_mask": mask})
    with torch.no_grad():
        want = hf(_torch(ids), attention_mask=_torch(mask), output_hidden_states=True)
    np.testing.assert_allclose(out["sequence_output"].numpy(), want.last_hidden_state.numpy(),
                               atol=ATOL)
    np.testing.assert_allclose(out["pooled_output"].numpy(), want.pooler_output.numpy(),
                               atol=ATOL)
    ours = [out["embedding_output"]] + list(out["encoder_outputs"])
    assert len(ours) == len(want.hidden_states) == L + 1
    for layer, (got, expected) in enumerate(zip(ours, want.hidden_states)):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=ATOL,
                                   err_msg="hidden state %d" % layer)


def test_too_long_inputs_are_refused(loaded_encoder):
    encoder, _, _ = loaded_encoder
    assert encoder.max_sequence_length == MAXPOS - 2
    encoder({"input_ids": np.full((1, MAXPOS - 2), 5, np.int32)})
    with pytest.raises(ValueError, match="exceeds RoBERTa's 38 positions"):
        encoder({"input_ids": np.full((1, MAXPOS - 1), 5, np.int32)})


def test_the_family_is_its_own_and_registered():
    family = registry.families.get("roberta")
    assert family.hf is hf_format.HF_FORMAT and family.name_tables == {
        "hf": checkpoint_names.HF, "keras_hub": checkpoint_names.KERAS_HUB}
    assert "roberta" in family.hf.model_types and family.hf.with_prefix == "roberta."
    assert family.hf.architectures["encoder"] == "RobertaModel"
    encoder = RobertaEncoder.from_config_object(RobertaConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16))
    assert targets.family_of(encoder) is family
    bert = BertEncoder.from_config_object(BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16))
    assert targets.family_of(bert).name == "bert"
    # Keras config round trip keeps RoBERTa's arguments.
    again = RobertaEncoder.from_config(encoder.get_config())
    assert again.pad_token_id == 1 and again.max_position_embeddings == 514
    assert again.layer_norm_epsilon == 1e-5 and again.type_vocab_size == 1
    assert isinstance(encoder.bert_config(), RobertaConfig)
    assert encoder.bert_config().pad_token_id == 1


# ----------------------------------------------------------- masked LM head


def _mlm_pretrainer(config, add_pooling_layer=True):
    family = registry.families.get("roberta")
    encoder = family.build_encoder(config, add_pooling_layer=add_pooling_layer)
    objective = registry.objectives.get("masked_lm")(config, family)
    return BertPretrainer(encoder, [objective], name="roberta_mlm")


def test_mlm_logits_equal_hf_roberta_for_masked_lm(hf_mlm_dir, vocab_size):
    folder, hf = hf_mlm_dir
    config = _config_of(folder)
    keras.utils.set_random_seed(8)
    pretrainer = _mlm_pretrainer(config)
    head = pretrainer.get_objective("masked_lm").head
    # RobertaLMHead: dense -> exact GELU -> LayerNorm(eps of the config) -> tied decoder + bias.
    assert head.hidden_act == "gelu" and head.layer_norm_epsilon == 1e-5
    report = checkpoints.init_from_checkpoint(pretrainer, folder)
    # transformers leaves the tied decoder (and its bias, the same tensor) out of the file.
    assert "lm_head.bias" in report.loaded and "lm_head.decoder.weight" not in _state_dict(folder)
    ids, mask = _batch(vocab_size)
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), (2, 1))
    logits = pretrainer({"input_ids": ids, "input_mask": mask,
                         "masked_lm_positions": positions})["masked_lm_logits"].numpy()
    with torch.no_grad():
        want = hf(_torch(ids), attention_mask=_torch(mask)).logits.numpy()
    assert logits.shape == want.shape == (2, ids.shape[1], vocab_size)
    np.testing.assert_allclose(logits, want, atol=ATOL)


def test_stored_decoder_copies_must_be_tied(hf_mlm_dir, tmp_path):
    # Files written by other tools (or older transformers) carry the decoder
    # weight and bias too: equal copies are skipped, an untied decoder is refused.
    folder, _ = hf_mlm_dir
    config = _config_of(folder)
    state = _state_dict(folder)
    state["lm_head.decoder.weight"] = state["roberta.embeddings.word_embeddings.weight"]
    state["lm_head.decoder.bias"] = state["lm_head.bias"]
    path = str(tmp_path / "tied.safetensors")
    safetensors.numpy.save_file(state, path, metadata={"format": "pt"})
    report = checkpoints.init_from_checkpoint(_mlm_pretrainer(config), path)
    skipped = dict(report.skipped)
    assert skipped["lm_head.decoder.weight"].startswith("tied to")
    assert skipped["lm_head.decoder.bias"] == "alias of lm_head.bias"
    state["lm_head.decoder.weight"] = state["lm_head.decoder.weight"] + 1.0
    safetensors.numpy.save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError, match="is not tied"):
        checkpoints.init_from_checkpoint(_mlm_pretrainer(config), path)


def test_a_file_without_pooler_keeps_the_encoders_and_one_without_skips_it(hf_mlm_dir,
                                                                          hf_model_dir):
    # HF's task models have no pooler: an encoder with one keeps it as initialised.
    mlm_folder, _ = hf_mlm_dir
    encoder = RobertaEncoder.from_config_object(_config_of(mlm_folder))
    pooler = encoder.pooler.kernel.numpy()
    report = checkpoints.init_from_checkpoint(encoder, mlm_folder)
    assert sorted(report.missing_heads) == ["pooler.dense.bias", "pooler.dense.weight"]
    assert "kept their initial values" in str(report)
    np.testing.assert_array_equal(encoder.pooler.kernel.numpy(), pooler)
    # RobertaModel's file (with a pooler) into an encoder without one: skipped, as HF does.
    folder, _ = hf_model_dir
    encoder = RobertaEncoder.from_config_object(_config_of(folder), add_pooling_layer=False)
    report = checkpoints.init_from_checkpoint(encoder, folder)
    assert dict(report.skipped)["pooler.dense.weight"].startswith("pooler")
    assert "pooled_output" not in encoder({"input_ids": np.array([[0, 5, 2]], np.int32)})


# ---------------------------------------------------------- bad checkpoints


def _state_dict(folder):
    return safetensors.numpy.load_file(os.path.join(folder, "model.safetensors"))


def _weights(model):
    return {v.path: np.array(v.numpy()) for v in model.weights}


def test_wrong_shaped_and_missing_weights_are_reported(hf_model_dir, tmp_path):
    folder, _ = hf_model_dir
    config = _config_of(folder)
    encoder = RobertaEncoder.from_config_object(config)
    before = _weights(encoder)
    state = _state_dict(folder)
    name = "encoder.layer.0.intermediate.dense.weight"
    state[name] = np.zeros((I + 1, H), np.float32)
    path = str(tmp_path / "wrong_shape.safetensors")
    safetensors.numpy.save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoints.init_from_checkpoint(encoder, path)
    message = str(info.value)
    assert path in message.splitlines()[0]
    assert "%s: checkpoint [%d, %d], model expects [%d, %d]" % (name, I + 1, H, I, H) in message
    state = _state_dict(folder)
    del state["encoder.layer.1.output.dense.bias"]
    path = str(tmp_path / "missing.safetensors")
    safetensors.numpy.save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError,
                       match=r"1 missing .*\n\s+encoder\.layer\.1\.output\.dense\.bias  "
                             r"expected shape \[32\]"):
        checkpoints.init_from_checkpoint(encoder, path)
    after = _weights(encoder)  # nothing was assigned
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)


# -------------------------------------------------------------- round trip


def _write_hf_folder(folder, arrays, config, architecture, tokenizer):
    os.makedirs(folder, exist_ok=True)
    safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                                os.path.join(folder, "model.safetensors"),
                                metadata={"format": "pt"})
    values = dict(hf_format.config_to_hf(config), architectures=[architecture])
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
    tokenizer.save(folder)


def test_written_folder_loads_in_transformers_with_equal_outputs(
        loaded_encoder, hf_model_dir, bpe_dir, tmp_path, vocab_size):
    encoder, config, _ = loaded_encoder
    _, original = hf_model_dir
    tokenizer = RobertaTokenizer.from_folder(bpe_dir)
    target = targets.find_target(encoder)
    arrays = name_tables.table_arrays(target, checkpoint_names.HF)
    folder = str(tmp_path / "written")
    _write_hf_folder(folder, arrays, config, "RobertaModel", tokenizer)
    model, info = transformers.AutoModel.from_pretrained(folder, output_loading_info=True)
    model.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert isinstance(model, transformers.RobertaModel)
    assert model.config.layer_norm_eps == 1e-5 and model.config.pad_token_id == 1
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    text, pair = "Hello there, 世界 <mask>!", "second part"
    encoded = tokenizer.encode(text, pair)
    assert hf_tokenizer(text, pair)["input_ids"] == encoded.input_ids
    ids = np.array([encoded.input_ids], np.int32)
    mask = np.ones_like(ids)
    out = encoder({"input_ids": ids, "input_mask": mask})
    with torch.no_grad():
        got = model(_torch(ids), attention_mask=_torch(mask))
        want = original(_torch(ids), attention_mask=_torch(mask))
    np.testing.assert_allclose(got.last_hidden_state.numpy(), want.last_hidden_state.numpy(),
                               atol=1e-6)
    np.testing.assert_allclose(got.pooler_output.numpy(), out["pooled_output"].numpy(),
                               atol=ATOL)
    np.testing.assert_allclose(got.last_hidden_state.numpy(), out["sequence_output"].numpy(),
                               atol=ATOL)
    # And the written folder reads back into this project.
    again = RobertaEncoder.from_config_object(load_roberta_config(folder))
    checkpoints.init_from_checkpoint(again, folder)
    np.testing.assert_array_equal(again.embedding_table.numpy(), encoder.embedding_table.numpy())


def test_written_masked_lm_folder_loads_in_transformers(hf_mlm_dir, bpe_dir, tmp_path,
                                                        vocab_size):
    folder, original = hf_mlm_dir
    config = _config_of(folder)
    pretrainer = _mlm_pretrainer(config, add_pooling_layer=False)  # HF's exact layout
    checkpoints.init_from_checkpoint(pretrainer, folder)
    arrays = name_tables.table_arrays(targets.find_target(pretrainer), checkpoint_names.HF)
    prefix = hf_format.HF_FORMAT.with_prefix
    arrays = {(name if name.startswith("lm_head.") else prefix + name): value
              for name, value in arrays.items()}
    written = str(tmp_path / "written_mlm")
    _write_hf_folder(written, arrays, config, "RobertaForMaskedLM",
                     RobertaTokenizer.from_folder(bpe_dir))
    model, info = transformers.AutoModelForMaskedLM.from_pretrained(written,
                                                                    output_loading_info=True)
    model.eval()
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert isinstance(model, transformers.RobertaForMaskedLM)
    ids, mask = _batch(vocab_size)
    with torch.no_grad():
        got = model(_torch(ids), attention_mask=_torch(mask)).logits.numpy()
        want = original(_torch(ids), attention_mask=_torch(mask)).logits.numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)


# ------------------------------------------------------------------- config


def test_hf_config_keys_left_out_take_transformers_class_defaults():
    values = {"model_type": "roberta", "vocab_size": 50, "hidden_size": 16,
              "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16}
    config = hf_format.config_from_hf(values)
    want = transformers.RobertaConfig(**values)
    assert config.max_position_embeddings == want.max_position_embeddings == 512
    assert config.type_vocab_size == want.type_vocab_size == 2
    assert config.layer_norm_epsilon == want.layer_norm_eps == 1e-12
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (1, 0, 2)
    # This project's own defaults are the released checkpoints'.
    own = RobertaConfig(vocab_size=50)
    assert (own.max_position_embeddings, own.type_vocab_size, own.layer_norm_epsilon) == (
        514, 1, 1e-5)
    written = hf_format.config_to_hf(config)
    hf = transformers.RobertaConfig(**written)
    assert (hf.max_position_embeddings, hf.type_vocab_size, hf.layer_norm_eps,
            hf.pad_token_id) == (512, 2, 1e-12, 1)
    assert "layer_norm_epsilon" not in written and written["model_type"] == "roberta"
    again = hf_format.config_from_hf(written)
    assert again.to_dict() == dict(config.to_dict(), position_embedding_type="absolute")


@pytest.mark.parametrize("change, message", [
    ({"model_type": "bert"}, "not RoBERTa"),
    ({"position_embedding_type": "relative_key"}, "absolute position embeddings only"),
    ({"is_decoder": True}, "decoder is not supported"),
    ({"hidden_sise": 16}, "did you mean `hidden_size`"),
    ({"pad_token_id": -1}, "pad_token_id"),
])
def test_bad_hf_configs_are_one_line_errors(change, message, tmp_path):
    values = dict({"model_type": "roberta", "vocab_size": 50, "hidden_size": 16,
                   "num_hidden_layers": 1, "num_attention_heads": 2,
                   "intermediate_size": 16}, **change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(RobertaConfigError, match=message) as info:
        load_roberta_config(str(path))
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_own_config_file_round_trips(tmp_path):
    config = RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=16, pad_token_id=3)
    path = str(tmp_path / "config.json")
    config.to_json_file(path)
    again = load_roberta_config(path)
    assert again == config and again.pad_token_id == 3
    assert RobertaEncoder.from_config_object(again).pad_token_id == 3


# ---------------------------------------------------------------- tokenizer


def _hf_encode(hf, text, pair=None):
    encoded = hf(text, pair, return_token_type_ids=True)
    return encoded["input_ids"], encoded["token_type_ids"]


def test_token_ids_equal_autotokenizer(tokenizer_pair):
    ours, hf = tokenizer_pair
    for text in TEXTS:
        encoded = ours.encode(text)
        assert (encoded.input_ids, encoded.segment_ids) == _hf_encode(hf, text), text
    for text, pair in PAIRS + [(a, b) for a, b in zip(TEXTS, TEXTS[1:])]:
        encoded = ours.encode(text, pair)
        assert (encoded.input_ids, encoded.segment_ids) == _hf_encode(hf, text, pair), (text,
                                                                                       pair)


def test_framing_and_the_mask_taking_its_left_space(tokenizer_pair):
    ours, hf = tokenizer_pair
    ids = ours.encode("a", "b").input_ids
    assert ids[0] == 0 and ids[-1] == 2 and ids.count(2) == 3 and ids[2:4] == [2, 2]
    tokens = ours.tokenize("a <mask> b")
    assert tokens[-2:] == ["<mask>", "Ġb"] and tokens[-3] in ("a", "Ġa")
    assert ours.convert_tokens_to_ids(tokens) == hf("a <mask> b",
                                                    add_special_tokens=False)["input_ids"]
    text = "Hello 世界 <mask> again"
    ids = ours.encode(text).input_ids
    assert ours.decode(ids) == hf.decode(ids)
    assert ours.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)


def test_saved_tokenizer_reads_back_in_autotokenizer_with_the_same_ids(tokenizer_pair,
                                                                      tmp_path):
    ours, _ = tokenizer_pair
    ours.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["merges.txt", "special_tokens_map.json",
                                           "tokenizer_config.json", "vocab.json"]
    for use_fast in (True, False):
        hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), use_fast=use_fast)
        assert hf.add_prefix_space == ours.add_prefix_space
        assert hf.convert_tokens_to_ids(SPECIALS) == [0, 1, 2, 3, 4]
        for text in TEXTS:
            if not use_fast and ours.add_prefix_space and "<" in text:
                # The slow tokenizer prefixes the text's start only, the fast one
                # (AutoTokenizer's, matched here) every stretch between special tokens.
                continue
            assert _hf_encode(hf, text) == tuple(ours.encode(text)), (use_fast, text)
        for text, pair in PAIRS:
            if not use_fast and (not pair or ours.add_prefix_space and "<" in text + pair):
                continue  # HF's slow tokenizer frames an empty pair; the fast one drops it.
            assert _hf_encode(hf, text, pair) == tuple(ours.encode(text, pair)), (use_fast,
                                                                                  text)
    again = RobertaTokenizer.from_folder(str(tmp_path))
    assert again.vocab == ours.vocab
    assert again._bpe.merges == ours._bpe.merges  # pylint: disable=protected-access


def test_merges_are_read_as_hf_reads_them(bpe_dir, tmp_path):
    # A merges.txt without the #version header: HF drops its first merge, and so do we.
    with open(os.path.join(bpe_dir, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version")
    (tmp_path / "merges.txt").write_text("\n".join(lines[1:]), encoding="utf-8")
    with open(os.path.join(bpe_dir, "vocab.json"), encoding="utf-8") as f:
        (tmp_path / "vocab.json").write_text(f.read(), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "RobertaTokenizer"}')
    ours = RobertaTokenizer.from_folder(str(tmp_path))
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert len(ours._bpe.merges) == len(lines) - 3  # pylint: disable=protected-access
    first = "".join(lines[1].split())
    for text in TEXTS + [first, " " + first]:
        assert ours.encode(text).input_ids == hf(text)["input_ids"], text


def test_missing_tokenizer_files_are_one_line_errors(bpe_dir, tmp_path):
    with pytest.raises(TokenizerFormatError, match="vocab.json: no such file") as info:
        RobertaTokenizer.from_folder(str(tmp_path))
    assert "\n" not in str(info.value)
    with open(os.path.join(bpe_dir, "vocab.json"), encoding="utf-8") as f:
        (tmp_path / "vocab.json").write_text(f.read(), encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match=r"merges.txt: no such file .*has: vocab.json"):
        RobertaTokenizer.from_folder(str(tmp_path))
    # (The real merges: a header-only merges.txt beside this vocabulary is itself refused.)
    with open(os.path.join(bpe_dir, "merges.txt"), encoding="utf-8") as f:
        (tmp_path / "merges.txt").write_text(f.read(), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text('{"mask_token": "[MASK]"}')
    with pytest.raises(TokenizerFormatError, match=r"the mask token '\[MASK\]' is not in"):
        RobertaTokenizer.from_folder(str(tmp_path))
