"""Hugging Face XLNet folders in and out: weights, config and tokenizer, against `transformers`.

References written here: a tiny random `XLNetModel` / `XLNetLMHeadModel` /
`XLNetForSequenceClassification` saved with `save_pretrained` (safetensors),
a SentencePiece model learned on the bundled corpus with XLNet's symbols, and
HF's two tokenizers of that folder (`XLNetTokenizerFast`, what
`AutoTokenizer` gives, and the Python `XLNetTokenizer`).
"""

import contextlib
import importlib
import json
import os
import random

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
import torch
import transformers
from transformers.models.xlnet.modeling_xlnet import load_tf_weights_in_xlnet

from data import vocab_learning
from modeling.checkpoints import CheckpointMismatchError
from modeling.checkpoints import init_from_checkpoint
from modeling.checkpoints import load_google_checkpoint
from modeling.checkpoints import name_tables
from modeling.checkpoints import save_google_checkpoint
from modeling.checkpoints.targets import find_target
from modeling.objectives.base import BertPretrainer
from modeling.pretrained.formats import TokenizerFormatError
from modeling.xlnet import XLNetNetwork
from modeling.xlnet import checkpoint_names
from modeling.xlnet import hf_format
from modeling.xlnet.objective import PermutationLMObjective
from modeling.xlnet.tokenizer import XLNetTokenizer

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB, D, LAYERS, HEADS, INNER = 1200, 32, 2, 4, 48

TEXTS = [
    "Hello world, this is a test of the tokenizer.",
    "In 1990, 12,000 people paid 3,5 dollars; 25,000 did not.",
    "  Multiple   spaces\tand\nnewlines  ",
    "Café naïve ``quoted'' text",
    "中文测试，还有标点。自然语言处理",
    "ＡＢＣ full width １２３ and x\u200by",
    "A <sep> B<cls>C <mask> D <mask>E <eop> <eod>x",
    "<unk> <s> </s> <pad> end <sep>",
    "<mask> at the start, trailing space ",
    "",
]
PAIRS = [(TEXTS[0], TEXTS[4]), (TEXTS[1], TEXTS[6]), ("short", "")]


@contextlib.contextmanager
def hf_fast_conversion():
    """Lets HF convert `spiece.model` to its fast tokenizer in this environment.

    HF's converter parses the model with `sentencepiece`'s protobuf module,
    generated for a newer protobuf than TensorFlow's pinned runtime, so the
    import fails; HF's own copy of the same messages works. Patched only
    when the real import fails.
    """
    module = importlib.import_module("transformers.convert_slow_tokenizer")
    original = module.import_protobuf
    try:
        original()
        patched = False
    except Exception:  # pylint: disable=broad-except
        from transformers.utils import sentencepiece_model_pb2_new as messages
        module.import_protobuf = lambda error_message="": messages
        patched = True
    try:
        yield
    finally:
        if patched:
            module.import_protobuf = original


def _hf_tokenizer(folder, use_fast):
    with hf_fast_conversion():
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, use_fast=use_fast)
    assert type(tokenizer).__name__ == ("XLNetTokenizerFast" if use_fast else "XLNetTokenizer")
    return tokenizer


def _learned_spiece(path):
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO, "data", "sample", name), encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    rng = random.Random(0)
    # Numbers with commas, so that the model has `12,`-style pieces.
    lines += ["In %d, %d,%03d people paid %d,%03d, or %d, each."
              % (rng.randint(1900, 2020), rng.randint(1, 99), rng.randint(0, 999),
                 rng.randint(1, 9), rng.randint(0, 999), rng.randint(1, 99)) for _ in range(300)]
    with open(path, "wb") as f:
        f.write(vocab_learning.learn_sentencepiece(lines, VOCAB))


def _randomise(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(0.3 * torch.randn_like(p) + (1.0 if "layer_norm.weight" in name else 0.0))
    return model.eval()


def _hf_config(**overrides):
    values = dict(vocab_size=VOCAB, d_model=D, n_layer=LAYERS, n_head=HEADS, d_inner=INNER,
                  dropout=0.0, ff_activation="gelu", mem_len=None)
    values.update(overrides)
    return transformers.XLNetConfig(**values)


def _read_config(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return hf_format.config_from_hf(json.load(f))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """HF folders: a base model (with tokenizer), an LM head model, a classifier, untie_r=False."""
    root = tmp_path_factory.mktemp("xlnet_hf")
    out = {}
    for name, cls, config in (
            ("base", transformers.XLNetModel, _hf_config()),
            ("lm", transformers.XLNetLMHeadModel, _hf_config()),
            ("classifier", transformers.XLNetForSequenceClassification,
             _hf_config(num_labels=3)),
            ("shared", transformers.XLNetModel, _hf_config(untie_r=False, clamp_len=3))):
        folder = str(root / name)
        model = _randomise(cls(config))
        model.save_pretrained(folder)
        out[name] = (folder, model)
    _learned_spiece(os.path.join(out["base"][0], "spiece.model"))
    return out


@pytest.fixture(scope="module")
def hf_tokenizers(folders):
    folder = folders["base"][0]
    return {True: _hf_tokenizer(folder, True), False: _hf_tokenizer(folder, False)}


def _encoder_parity(ours, hf_model, encoded):
    ids = np.array(encoded["input_ids"], np.int32)
    types = np.array(encoded["token_type_ids"], np.int32)
    mask = np.array(encoded["attention_mask"], np.int32)
    with torch.no_grad():
        expected = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                            token_type_ids=torch.tensor(types, dtype=torch.long),
                            attention_mask=torch.tensor(mask, dtype=torch.float32))
    got = ours({"input_ids": ids, "segment_ids": types, "input_mask": mask})
    real = mask > 0
    return got["sequence_output"].numpy()[real], expected.last_hidden_state.numpy()[real]


def _pair_batch(hf_tokenizer):
    # Two rows of different lengths: a pair (segments 0, 1 and <cls>'s 2) and
    # a single text; HF pads the shorter on the left with type id 3.
    first = hf_tokenizer(TEXTS[0], TEXTS[4])
    second = hf_tokenizer(TEXTS[1])
    width = max(len(first["input_ids"]), len(second["input_ids"]))
    padded = {key: [] for key in ("input_ids", "token_type_ids", "attention_mask")}
    for row in (first, second):
        extra = width - len(row["input_ids"])
        padded["input_ids"].append([hf_tokenizer.pad_token_id] * extra + row["input_ids"])
        padded["token_type_ids"].append([3] * extra + row["token_type_ids"])
        padded["attention_mask"].append([0] * extra + row["attention_mask"])
    return padded


# ------------------------------------------------------------------ weights


def test_xlnet_model_folder_gives_hf_hidden_states(folders, hf_tokenizers):
    folder, hf_model = folders["base"]
    config = _read_config(folder)
    network = XLNetNetwork.from_config_object(config)
    report = init_from_checkpoint(network, folder)
    assert len(report.loaded) == 2 + LAYERS * 17
    batch = _pair_batch(hf_tokenizers[True])
    assert batch["attention_mask"][1][0] == 0  # left padded
    # HF's own padding of a single-text batch is the same layout.
    padded = hf_tokenizers[True]([TEXTS[4], TEXTS[0]], padding=True)
    assert padded["attention_mask"][0][0] == 0 and padded["token_type_ids"][0][0] == 3
    got, expected = _encoder_parity(network, hf_model, batch)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_untie_r_false_folder_is_read_with_per_layer_biases(folders, hf_tokenizers):
    """HF's XLNetModel keeps per-layer biases whatever `untie_r` says; so does the network read."""
    folder, hf_model = folders["shared"]
    config = _read_config(folder)
    assert config.untie_r and config.clamp_len == 3
    network = XLNetNetwork.from_config_object(config)
    init_from_checkpoint(network, folder)
    got, expected = _encoder_parity(network, hf_model, _pair_batch(hf_tokenizers[True]))
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_lm_head_folder_fills_the_permutation_lm_with_hf_logits(folders):
    folder, hf_model = folders["lm"]
    network = XLNetNetwork.from_config_object(_read_config(folder))
    objective = PermutationLMObjective(vocab_size=VOCAB)
    pretrainer = BertPretrainer(network, [objective])
    report = init_from_checkpoint(pretrainer, folder)
    assert "lm_loss.bias" in report.loaded
    np.testing.assert_array_equal(objective.lm_bias.numpy(),
                                  hf_model.lm_loss.bias.detach().numpy())
    # Two streams: predict positions 5 and 6 of an order hiding them from the rest.
    rng = np.random.default_rng(3)
    ids = rng.integers(9, VOCAB, size=(2, 8)).astype(np.int32)
    perm = np.zeros((2, 8, 8), np.float32)
    perm[:, :, 5:7] = 1.0
    perm[:, 6, 5] = 0.0  # 6 comes after 5 in the order
    mapping = np.zeros((2, 2, 8), np.float32)
    mapping[:, 0, 5] = mapping[:, 1, 6] = 1.0
    with torch.no_grad():
        expected = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                            perm_mask=torch.tensor(perm),
                            target_mapping=torch.tensor(mapping)).logits.numpy()
    query = network({"input_ids": ids, "perm_mask": perm, "target_mapping": mapping})
    got = objective.logits(query["query_output"]).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_classifier_folder_loads_the_encoder_and_skips_the_task_head(folders, hf_tokenizers):
    folder, hf_model = folders["classifier"]
    network = XLNetNetwork.from_config_object(_read_config(folder))
    report = init_from_checkpoint(network, folder)
    skipped = dict(report.skipped)
    assert any(name.startswith("sequence_summary.") for name in skipped)
    assert any(name.startswith("logits_proj.") for name in skipped)
    got, expected = _encoder_parity(network, hf_model.transformer,
                                    _pair_batch(hf_tokenizers[True]))
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_wrong_shapes_are_one_error_naming_the_weight(folders):
    folder, _ = folders["base"]
    config = _read_config(folder).replace(d_inner=64)
    network = XLNetNetwork.from_config_object(config)
    with pytest.raises(CheckpointMismatchError, match="layer.0.ff.layer_1.weight"):
        init_from_checkpoint(network, folder)


def test_written_folder_loads_in_transformers(folders, hf_tokenizers, tmp_path):
    """table_arrays + config_to_hf + tokenizer.save, read back by HF's classes."""
    folder, hf_model = folders["base"]
    config = _read_config(folder)
    network = XLNetNetwork.from_config_object(config)
    init_from_checkpoint(network, folder)
    out = str(tmp_path / "written")
    os.makedirs(out)
    arrays = name_tables.table_arrays(find_target(network), checkpoint_names.HF)
    safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                                os.path.join(out, "model.safetensors"),
                                metadata={"format": "pt"})
    values = hf_format.config_to_hf(config)
    values["architectures"] = [hf_format.HF_FORMAT.architectures["encoder"]]
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f)
    XLNetTokenizer.from_folder(folder).save(out)
    reloaded = transformers.AutoModel.from_pretrained(out).eval()
    assert type(reloaded).__name__ == "XLNetModel"
    got, expected = _encoder_parity(network, reloaded, _pair_batch(hf_tokenizers[True]))
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    for use_fast in (True, False):
        hf = _hf_tokenizer(out, use_fast)
        ours = XLNetTokenizer.from_folder(out, use_fast=use_fast)
        for text in TEXTS:
            assert ours.encode(text).input_ids == hf(text)["input_ids"], text


def test_written_folder_of_a_shared_bias_network_computes_the_same(folders, tmp_path):
    """untie_r=False: the one set of biases is written under every layer's names."""
    folder, _ = folders["base"]
    config = _read_config(folder).replace(untie_r=False)
    network = XLNetNetwork.from_config_object(config)
    arrays = name_tables.table_arrays(find_target(network), checkpoint_names.HF)
    np.testing.assert_array_equal(arrays["layer.0.rel_attn.r_w_bias"],
                                  arrays["layer.1.rel_attn.r_w_bias"])
    out = str(tmp_path / "shared")
    os.makedirs(out)
    safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                                os.path.join(out, "model.safetensors"),
                                metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_format.config_to_hf(config), f)
    reloaded = transformers.XLNetModel.from_pretrained(out).eval()
    ids = np.random.default_rng(5).integers(9, VOCAB, size=(2, 7)).astype(np.int32)
    with torch.no_grad():
        expected = reloaded(input_ids=torch.tensor(ids, dtype=torch.long)).last_hidden_state
    got = network({"input_ids": ids})["sequence_output"].numpy()
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4, rtol=1e-4)


def test_config_round_trip_keeps_hf_keys(folders):
    folder, _ = folders["classifier"]
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        original = json.load(f)
    written = hf_format.config_to_hf(hf_format.config_from_hf(original))
    for key in ("d_model", "n_layer", "n_head", "d_inner", "vocab_size", "ff_activation",
                "summary_type", "id2label", "clamp_len", "bi_data"):
        assert written[key] == original[key], key
    assert written["mem_len"] is None and written["model_type"] == "xlnet"
    assert transformers.XLNetConfig(**written).d_head == D // HEADS


# ---------------------------------------------------------------- tokenizer


@pytest.mark.parametrize("use_fast", [True, False])
def test_tokenizer_ids_equal_hf(folders, hf_tokenizers, use_fast):
    hf = hf_tokenizers[use_fast]
    ours = XLNetTokenizer.from_folder(folders["base"][0], use_fast=use_fast)
    assert ours.vocab_size == hf.vocab_size == VOCAB
    for text in TEXTS:
        expected = hf(text)
        got = ours.encode(text)
        assert got.input_ids == expected["input_ids"], (text, hf.convert_ids_to_tokens(
            expected["input_ids"]), ours.convert_ids_to_tokens(got.input_ids))
        assert got.segment_ids == expected["token_type_ids"], text
    for a, b in PAIRS:
        expected = hf(a, b)
        got = ours.encode(a, b)
        assert (got.input_ids, got.segment_ids) == (expected["input_ids"],
                                                    expected["token_type_ids"]), (a, b)


def test_fast_normaliser_is_hfs(folders, hf_tokenizers, tmp_path):
    """The fast pipeline's normaliser on what the corpus does not reach (lower-cased too)."""
    texts = ["हिन्दी ां e\u0301 \u0903 ⃝", "A\u2028B\x0bC\x85D\u00a0E\u3000F\u200bG",
             "ΣΑΣ İ Ǆ ß ﬁ ``x''", "a   b\t\tc  "]
    ours = XLNetTokenizer.from_folder(folders["base"][0])
    rust = hf_tokenizers[True].backend_tokenizer.normalizer
    for text in texts:
        assert ours.fast_normalize(text) == rust.normalize_str(text), text
    lowered = XLNetTokenizer(os.path.join(folders["base"][0], "spiece.model"),
                             do_lower_case=True)
    lowered.save(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    rust = _hf_tokenizer(str(tmp_path), True).backend_tokenizer.normalizer
    for text in texts:
        assert lowered.fast_normalize(text) == rust.normalize_str(text), text


def test_the_two_hf_tokenizers_differ_where_documented(folders):
    """Trailing space / space before a special token (fast: `▁`) and `12,` pieces."""
    fast = XLNetTokenizer.from_folder(folders["base"][0], use_fast=True)
    slow = XLNetTokenizer.from_folder(folders["base"][0], use_fast=False)
    words = slow.tokenize("end")
    assert slow.tokenize("end <sep>") == words + ["<sep>"]
    assert fast.tokenize("end <sep>") == words + ["\u2581", "<sep>"]
    assert (slow.tokenize("end "), fast.tokenize("end ")) == (words, words + ["\u2581"])
    assert any(len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in fast.vocab)
    for tokenizer in (fast, slow):
        pieces = tokenizer.tokenize(TEXTS[1])
        assert not any(len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in pieces)


def test_tokenizer_framing_and_settings(folders, tmp_path):
    ours = XLNetTokenizer.from_folder(folders["base"][0])
    encoded = ours.encode("a", "b")
    assert ours.convert_ids_to_tokens(encoded.input_ids)[-1] == "<cls>"
    assert encoded.segment_ids[-1] == 2 and encoded.segment_ids.count(0) >= 2
    paths = ours.save(str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == [
        "special_tokens_map.json", "spiece.model", "tokenizer_config.json"]
    with open(os.path.join(tmp_path, "tokenizer_config.json"), encoding="utf-8") as f:
        settings = json.load(f)
    assert settings["padding_side"] == "left" and settings["do_lower_case"] is False
    lowered = XLNetTokenizer(os.path.join(tmp_path, "spiece.model"), do_lower_case=True)
    assert lowered.tokenize("HELLO") == ours.tokenize("hello")


def test_missing_spiece_model_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TokenizerFormatError, match="spiece.model.*config.json"):
        hf_format.read_tokenizer(str(tmp_path))
    (tmp_path / "spiece.model").write_text("not a model")
    with pytest.raises(TokenizerFormatError, match="spiece.model: not a SentencePiece model"):
        hf_format.read_tokenizer(str(tmp_path))


# --------------------------------------------------- zihangdai/xlnet TF1 names


def test_tf1_checkpoint_is_read_by_hf_tf_loader_and_back(folders, hf_tokenizers, tmp_path):
    """save_google_checkpoint writes XLNet's TF1 names: HF's own TF loader reads them."""
    folder, _ = folders["lm"]
    config = _read_config(folder)
    network = XLNetNetwork.from_config_object(config)
    objective = PermutationLMObjective(vocab_size=VOCAB)
    init_from_checkpoint(BertPretrainer(network, [objective]), folder)
    prefix = save_google_checkpoint(BertPretrainer(network, [objective]),
                                    str(tmp_path / "xlnet_model.ckpt"))
    shapes = dict(tf.train.list_variables(prefix))
    assert shapes["model/transformer/r_w_bias"] == [LAYERS, HEADS, D // HEADS]
    assert shapes["model/transformer/seg_embed"] == [LAYERS, 2, HEADS, D // HEADS]
    assert shapes["model/lm_loss/bias"] == [VOCAB]
    hf_model = transformers.XLNetLMHeadModel(_hf_config()).eval()
    load_tf_weights_in_xlnet(hf_model, hf_model.config, prefix)
    np.testing.assert_array_equal(hf_model.lm_loss.bias.detach().numpy(),
                                  objective.lm_bias.numpy())
    batch = _pair_batch(hf_tokenizers[True])
    got, expected = _encoder_parity(network, hf_model.transformer, batch)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    # And back: a fresh pretrainer reads the TF1 checkpoint.
    fresh = XLNetNetwork.from_config_object(config)
    fresh_objective = PermutationLMObjective(vocab_size=VOCAB)
    report = load_google_checkpoint(BertPretrainer(fresh, [fresh_objective]), prefix)
    assert "model/transformer/r_s_bias" in report.loaded
    again, _ = _encoder_parity(fresh, hf_model.transformer, batch)
    np.testing.assert_allclose(again, got, atol=1e-6)
    np.testing.assert_array_equal(fresh_objective.lm_bias.numpy(), objective.lm_bias.numpy())


@pytest.mark.parametrize("overrides", [{"untie_r": False}, {"n_layer": 1}])
def test_tf1_round_trip_of_shared_biases_and_one_layer(folders, tmp_path, overrides):
    config = _read_config(folders["base"][0]).replace(**overrides)
    network = XLNetNetwork.from_config_object(config)
    prefix = save_google_checkpoint(network, str(tmp_path / "model.ckpt"))
    fresh = XLNetNetwork.from_config_object(config)
    load_google_checkpoint(fresh, prefix)
    ids = np.random.default_rng(2).integers(9, VOCAB, size=(2, 6)).astype(np.int32)
    np.testing.assert_allclose(fresh({"input_ids": ids})["sequence_output"].numpy(),
                               network({"input_ids": ids})["sequence_output"].numpy(),
                               atol=1e-6)
