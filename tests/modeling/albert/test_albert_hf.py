"""Hugging Face ALBERT folders in and out: names, config, tokenizer, outputs.

Tiny random `transformers` ALBERTs (saved with `save_pretrained`, so the
names and the config are HF's own) load into `AlbertEncoder` / the ALBERT
pretrainer with HF's hidden states and logits; the tokenizer gives
`transformers.AutoTokenizer`'s ids on a SentencePiece model learned here
with ALBERT's symbols (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4, and
google-research/albert's user-defined punctuation); and what this project
writes (`table_arrays` + `config_to_hf` + `tokenizer.save`) loads back in
`transformers` with the same outputs and ids.
"""

import io
import json
import os
import shutil
import sys
import types

import keras
import numpy as np
import pytest
import safetensors.numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sentencepiece = pytest.importorskip("sentencepiece")

from modeling import registry  # noqa: E402
from modeling.albert import AlbertEncoder  # noqa: E402
from modeling.albert import checkpoint_names  # noqa: E402
from modeling.albert import hf_format  # noqa: E402
from modeling.albert.config import AlbertConfig  # noqa: E402
from modeling.albert.config import BertConfigError  # noqa: E402
from modeling.albert.encoder import EXACT_GELU  # noqa: E402
from modeling.albert.tokenizer import AlbertTokenizer  # noqa: E402
from modeling.checkpoints import CheckpointFormatError  # noqa: E402
from modeling.checkpoints import CheckpointMismatchError  # noqa: E402
from modeling.checkpoints import init_from_checkpoint  # noqa: E402
from modeling.checkpoints import name_tables  # noqa: E402
from modeling.checkpoints import targets  # noqa: E402
from modeling.pretrained.formats import TokenizerFormatError  # noqa: E402
from modeling.recipes import build_albert_pretrainer  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ATOL = 1e-4
E, H, HEADS, I, P = 8, 16, 2, 32, 32

TEXTS = [
    "Hello world! The quick brown fox.",
    "  Leading,  inner   and trailing spaces  ",
    "Héllo café naïve ``quoted'' text",
    "中文分词测试。",
    "mixed 中文 and English, (with) a-b e.g. U.S.A.",
    "a [MASK] b",
    "x  [MASK]  y",
    "[CLS] hi [SEP] there",
    "hello <unk> world<pad>",
    "there were 1,000 people and 9,9 in 2019, 2020,",
    "ﬁ ligature ＡＢＣ\ttab\nnewline",
    "",
]
PAIRS = [("first sentence.", "Second one here"), ("中文", "English [MASK]"),
         ("a [MASK]", "  b  ")]


# --------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def _protobuf_for_the_converter():
    """Lets `AutoTokenizer` convert `spiece.model` in this environment.

    The converter imports `sentencepiece.sentencepiece_model_pb2`, generated
    for a newer protobuf runtime than the one TensorFlow pins here; the
    copy `transformers` ships (`sentencepiece_model_pb2_new`) reads the same
    file. Only the test's HF side needs it: `AlbertTokenizer` reads the
    model without protobuf.
    """
    with pytest.MonkeyPatch.context() as patch:
        try:
            from sentencepiece import sentencepiece_model_pb2  # noqa: F401
        except Exception:  # pylint: disable=broad-except
            from transformers.utils import sentencepiece_model_pb2_new
            patch.setitem(sys.modules, "sentencepiece.sentencepiece_model_pb2",
                          sentencepiece_model_pb2_new)
            patch.setattr(sentencepiece, "sentencepiece_model_pb2", sentencepiece_model_pb2_new,
                          raising=False)
        yield


def _corpus_lines():
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO, "data", "sample", name), encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f if line.strip()]
    return lines


@pytest.fixture(scope="module")
def spiece_dir(tmp_path_factory):
    """A folder with a tiny `spiece.model` laid out as ALBERT's, and HF's settings files."""
    folder = str(tmp_path_factory.mktemp("spiece"))
    lines = [line.lower() for line in _corpus_lines()]
    lines += ["in 2019, 2020, 9,9 and 1,000,000 (or 12,345) items."] * 20
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=1500,
        model_type="unigram", character_coverage=0.9995, pad_id=0, unk_id=1, bos_id=-1,
        eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=["(", ")", '"', "-", "."], num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(model.getvalue())
    # HF's own settings files, as its slow tokenizer writes them.
    transformers.AlbertTokenizer(os.path.join(folder, "spiece.model")).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizers(spiece_dir):
    return (AlbertTokenizer.from_folder(spiece_dir),
            transformers.AutoTokenizer.from_pretrained(spiece_dir),
            transformers.AlbertTokenizer.from_pretrained(spiece_dir))


def _hf_config(vocab_size, **overrides):
    values = dict(vocab_size=vocab_size, embedding_size=E, hidden_size=H, num_hidden_layers=2,
                  num_attention_heads=HEADS, intermediate_size=I, max_position_embeddings=P,
                  hidden_act="gelu_new", hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    values.update(overrides)
    return transformers.AlbertConfig(**values)


def _randomise(model, seed):
    """Every parameter random (LayerNorm weights around 1), so parity is not vacuous."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            centre = 1.0 if "LayerNorm" in name or "layer_norm" in name else 0.0
            parameter.copy_(centre + 0.2 * torch.randn_like(parameter))
    return model.eval()


@pytest.fixture(scope="module")
def vocab_size(tokenizers):
    return tokenizers[0].vocab_size


@pytest.fixture(scope="module")
def hf_pretraining_dir(tmp_path_factory, vocab_size):
    """An `AlbertForPreTraining` folder (names under `albert.`, heads at the top)."""
    model = _randomise(transformers.AlbertForPreTraining(_hf_config(vocab_size)), seed=0)
    folder = str(tmp_path_factory.mktemp("hf_pretraining"))
    model.save_pretrained(folder)
    return folder, model


# HF's AlbertModel itself fails (an IndexError slicing its head mask) when
# inner_group_num exceeds num_hidden_layers / num_hidden_groups, so groups and
# inner groups are tested apart.
@pytest.fixture(scope="module", params=[
    dict(),                                           # ALBERT's usual layout
    dict(inner_group_num=2, hidden_act="gelu"),       # 2 blocks per layer, erf GELU
    dict(num_hidden_groups=2),                        # a block per layer
], ids=["shared", "inner_groups_erf", "groups"])
def hf_model_dir(request, tmp_path_factory, vocab_size):
    """An `AlbertModel` folder (no prefix)."""
    model = _randomise(transformers.AlbertModel(_hf_config(vocab_size, **request.param)),
                       seed=1)
    folder = str(tmp_path_factory.mktemp("hf_model"))
    model.save_pretrained(folder)
    return folder, model


def _config_of(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return hf_format.config_from_hf(json.load(f))


def _batch(vocab_size, seed=3):
    """A padded batch of two: token types 0/1, the second row padded."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(2, 9)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[1, -3:] = 0
    ids[1, -3:] = 0
    segments = np.zeros_like(ids)
    segments[:, 5:] = 1
    return ids, mask, segments


def _torch(array):
    return torch.from_numpy(np.asarray(array, np.int64))


def _hf_forward(model, ids, mask, segments):
    with torch.no_grad():
        return model(_torch(ids), attention_mask=_torch(mask), token_type_ids=_torch(segments),
                     output_hidden_states=True)


@pytest.fixture(scope="module")
def loaded_pretrainer(hf_pretraining_dir):
    folder, _ = hf_pretraining_dir
    config = _config_of(folder)
    keras.utils.set_random_seed(7)
    pretrainer = build_albert_pretrainer(config)
    report = init_from_checkpoint(pretrainer, folder)
    return pretrainer, config, report


# ------------------------------------------------------------------ names


def test_table_names_are_the_names_transformers_saves(hf_pretraining_dir, loaded_pretrainer):
    folder, _ = hf_pretraining_dir
    pretrainer, _, report = loaded_pretrainer
    saved = set(safetensors.numpy.load_file(os.path.join(folder, "model.safetensors")))
    assert report.format == "hf_safetensors"
    # Every stored tensor has a row and no row is left (reported without `albert.`).
    assert set(report.loaded) == {checkpoint_names.HF.rename(n) for n in saved}
    written = name_tables.table_arrays(targets.find_target(pretrainer), checkpoint_names.HF)
    prefix = hf_format.HF_FORMAT.with_prefix
    assert {(prefix + n if n.startswith(checkpoint_names.HF.encoder_prefixes) else n)
            for n in written} == saved
    for name in ("albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight",
                 "albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.bias",
                 "albert.encoder.embedding_hidden_mapping_in.weight", "albert.pooler.weight",
                 "predictions.dense.weight", "predictions.bias",
                 "sop_classifier.classifier.weight"):
        assert name in saved
    # The Google rows are unchanged by sharing them with HF's.
    assert [e.name for e in checkpoint_names.ALBERT_NAME_TABLE][:2] == [
        "bert/embeddings/word_embeddings", "bert/embeddings/position_embeddings"]


def test_family_registers_the_hf_format(spiece_dir):
    family = registry.families.get("albert")
    assert family.hf is hf_format.HF_FORMAT
    assert family.hf.model_types == ("albert",)
    assert family.name_tables["hf"] is checkpoint_names.HF
    assert family.hf.architectures["pretraining"] == "AlbertForPreTraining"
    assert isinstance(family.hf.read_tokenizer(spiece_dir, None), AlbertTokenizer)


# ----------------------------------------------------------------- config


def test_config_from_and_to_hf(hf_pretraining_dir):
    folder, model = hf_pretraining_dir
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    config = hf_format.config_from_hf(values)
    assert isinstance(config, AlbertConfig)
    assert (config.embedding_size, config.hidden_size, config.num_hidden_groups,
            config.inner_group_num) == (E, H, 1, 1)
    assert config.hidden_act == "gelu_new"
    assert config.extra["layer_norm_epsilon"] == 1e-12
    assert config.extra["classifier_dropout_prob"] == 0.0      # HF keys kept as extras
    back = hf_format.config_to_hf(config)
    assert "layer_norm_epsilon" not in back
    for key in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                "num_hidden_groups", "inner_group_num", "intermediate_size", "hidden_act",
                "layer_norm_eps", "classifier_dropout_prob", "model_type", "pad_token_id",
                "bos_token_id", "eos_token_id", "position_embedding_type"):
        assert back[key] == values[key], key
    assert transformers.AlbertConfig(**back).to_diff_dict()["hidden_act"] == "gelu_new"

    # Activations: HF's "gelu" is erf, an ALBERT config's "gelu" the tanh form.
    assert hf_format.config_from_hf(dict(values, hidden_act="gelu")).hidden_act == EXACT_GELU
    assert hf_format.config_to_hf(config.replace(hidden_act=EXACT_GELU))["hidden_act"] == "gelu"
    assert hf_format.config_to_hf(config.replace(hidden_act="gelu"))["hidden_act"] == "gelu_new"
    assert hf_format.config_from_hf(
        dict(values, hidden_act="gelu_pytorch_tanh")).hidden_act == "gelu_new"
    # No layer_norm_eps at all: HF's default.
    assert hf_format.config_to_hf(AlbertConfig(
        vocab_size=10, embedding_size=4, hidden_size=8, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=8))["layer_norm_eps"] == 1e-12


@pytest.mark.parametrize("change, message", [
    (dict(model_type="bert"), "model_type 'bert' is not ALBERT"),
    (dict(position_embedding_type="relative_key"), "position_embedding_type 'relative_key'"),
    (dict(embedding_size=H), "embedding_hidden_mapping_in"),
    (dict(hidden_act="quick_gelu"), "quick_gelu"),
    (dict(not_an_albert_key=1), "not_an_albert_key"),
])
def test_config_from_hf_refuses_what_the_encoder_cannot_compute(hf_pretraining_dir, change,
                                                                message):
    folder, _ = hf_pretraining_dir
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        values = json.load(f)
    with pytest.raises(BertConfigError, match=message) as error:
        hf_format.config_from_hf(dict(values, **change))
    assert "\n" not in str(error.value)


def test_encoder_describes_its_config(loaded_pretrainer):
    pretrainer, config, _ = loaded_pretrainer
    described = pretrainer.encoder.albert_config()
    assert hf_format.config_to_hf(described)["hidden_act"] == "gelu_new"
    erf = AlbertEncoder.from_config_object(config.replace(hidden_act=EXACT_GELU))
    assert erf.albert_config().hidden_act == EXACT_GELU
    tanh = AlbertEncoder.from_config_object(config.replace(hidden_act="gelu"))
    assert tanh.hidden_act == "gelu_tanh" and tanh.albert_config().hidden_act == "gelu"


# ---------------------------------------------------------------- outputs


def test_encoder_matches_transformers_on_a_padded_batch(hf_model_dir, vocab_size):
    folder, model = hf_model_dir
    config = _config_of(folder)
    encoder = AlbertEncoder.from_config_object(config)
    report = init_from_checkpoint(encoder, folder)
    assert report.format == "hf_safetensors"
    ids, mask, segments = _batch(vocab_size)
    out = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    want = _hf_forward(model, ids, mask, segments)
    np.testing.assert_allclose(out["sequence_output"], want.last_hidden_state.numpy(),
                               atol=ATOL)
    np.testing.assert_allclose(out["pooled_output"], want.pooler_output.numpy(), atol=ATOL)
    # hidden_states: the projected embeddings, then every layer.
    assert len(want.hidden_states) == len(out["encoder_outputs"]) + 1
    np.testing.assert_allclose(out["embedding_output"], want.hidden_states[0].numpy(),
                               atol=ATOL)
    for layer, (got, expected) in enumerate(zip(out["encoder_outputs"], want.hidden_states[1:])):
        np.testing.assert_allclose(got, expected.numpy(), atol=ATOL, err_msg=f"layer {layer}")


def test_pretrainer_matches_transformers_mlm_and_sop_logits(hf_pretraining_dir,
                                                            loaded_pretrainer, vocab_size):
    _, model = hf_pretraining_dir
    pretrainer, _, _ = loaded_pretrainer
    ids, mask, segments = _batch(vocab_size)
    positions = np.array([[1, 4, 7], [0, 2, 5]], np.int32)
    out = pretrainer({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                      "masked_lm_positions": positions}, training=False)
    want = _hf_forward(model, ids, mask, segments)
    logits = want.prediction_logits.numpy()
    gathered = np.stack([logits[b, positions[b]] for b in range(len(ids))])
    np.testing.assert_allclose(np.reshape(out["masked_lm_logits"], gathered.shape), gathered,
                               atol=ATOL)
    np.testing.assert_allclose(out["sentence_order_logits"], want.sop_logits.numpy(),
                               atol=ATOL)
    np.testing.assert_allclose(out["sequence_output"], want.hidden_states[-1].numpy(),
                               atol=ATOL)


def test_masked_lm_folder_has_no_pooler(tmp_path, hf_pretraining_dir, vocab_size):
    _, pretraining = hf_pretraining_dir
    mlm = transformers.AlbertForMaskedLM(pretraining.config).eval()
    mlm.load_state_dict(pretraining.state_dict(), strict=False)
    folder = str(tmp_path / "mlm")
    mlm.save_pretrained(folder)
    config = _config_of(folder)
    # An encoder with a pooler keeps its initial one (as HF's AlbertModel
    # does from this folder), listed in the report: features and fill-mask
    # read such folders; a pooled output from it is not used.
    with_pooler = AlbertEncoder.from_config_object(config)
    initial = with_pooler.pooler.kernel.numpy()
    report = init_from_checkpoint(with_pooler, folder)
    assert sorted(report.missing_heads) == ["pooler.bias", "pooler.weight"]
    assert "kept their initial values" in str(report)
    np.testing.assert_array_equal(with_pooler.pooler.kernel.numpy(), initial)
    encoder = AlbertEncoder.from_config_object(config, add_pooling_layer=False)
    report = init_from_checkpoint(encoder, folder)
    assert ("predictions.bias", "head not in the model") in report.skipped
    ids, mask, segments = _batch(vocab_size)
    out = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    assert "pooled_output" not in out
    np.testing.assert_allclose(out["sequence_output"],
                               _hf_forward(mlm, ids, mask, segments).hidden_states[-1].numpy(),
                               atol=ATOL)
    # A stored pooler is skipped, with its reason, by an encoder without one.
    report = init_from_checkpoint(AlbertEncoder.from_config_object(
        config, add_pooling_layer=False), hf_pretraining_dir[0])
    assert any(name == "pooler.weight" and "add_pooling_layer=False" in reason
               for name, reason in report.skipped)
    assert AlbertEncoder.from_config(encoder.get_config()).pooler is None


# ----------------------------------------------------------------- errors


def test_wrong_shape_is_one_mismatch_naming_the_tensor(tmp_path, hf_pretraining_dir):
    folder, _ = hf_pretraining_dir
    arrays = safetensors.numpy.load_file(os.path.join(folder, "model.safetensors"))
    name = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"
    arrays[name] = np.zeros((I + 1, H), np.float32)
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(os.path.join(folder, "config.json"), bad / "config.json")
    safetensors.numpy.save_file(arrays, str(bad / "model.safetensors"), metadata={"format": "pt"})
    encoder = AlbertEncoder.from_config_object(_config_of(folder))
    before = [v.numpy().copy() for v in encoder.weights]
    with pytest.raises(CheckpointMismatchError) as error:
        init_from_checkpoint(encoder, str(bad))
    assert error.value.mismatched == [
        ("encoder.albert_layer_groups.0.albert_layers.0.ffn.weight", (I + 1, H), (I, H))]
    assert not error.value.missing and not error.value.unexpected
    assert "ffn.weight: checkpoint [33, 16], model expects [32, 16]" in str(error.value)
    for old, variable in zip(before, encoder.weights):   # nothing was assigned
        np.testing.assert_array_equal(old, variable.numpy())


def test_layouts_hf_cannot_hold_are_refused_in_one_line(hf_pretraining_dir):
    folder, _ = hf_pretraining_dir
    unshared = AlbertEncoder.from_config_object(_config_of(folder), share_parameters="none")
    with pytest.raises(CheckpointFormatError, match="share_parameters='none'") as error:
        init_from_checkpoint(unshared, folder)
    assert "\n" not in str(error.value)
    # 22 layers in 22 groups: HF and google-research/albert round layer 15
    # into different groups.
    encoder = types.SimpleNamespace(num_hidden_layers=22, num_hidden_groups=22,
                                    inner_group_num=1, share_parameters="all")
    encoder.group_of_layer = lambda i: AlbertEncoder.group_of_layer(encoder, i)
    with pytest.raises(CheckpointFormatError, match="layer 15 of 22") as error:
        checkpoint_names.HF.rows(encoder)
    assert "\n" not in str(error.value)
    encoder.num_hidden_groups = 2   # most layouts agree
    assert len(checkpoint_names.HF.rows(encoder)) > 0


# -------------------------------------------------------------- tokenizer


def test_tokenizer_ids_equal_autotokenizer(tokenizers):
    mine, fast, _ = tokenizers
    assert type(fast).__name__ == "AlbertTokenizerFast"
    assert [mine.vocab[t] for t in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")] == \
        [0, 1, 2, 3, 4]
    for text in TEXTS:
        want = fast(text)
        got = mine.encode(text)
        assert got.input_ids == want["input_ids"], text
        assert got.segment_ids == want["token_type_ids"], text
    for text, pair in PAIRS:
        want = fast(text, pair)
        got = mine.encode(text, pair)
        assert (got.input_ids, got.segment_ids) == (want["input_ids"], want["token_type_ids"])
        assert got.segment_ids[-1] == 1 and got.segment_ids[0] == 0
    # The whole bundled corpus, English and Chinese, as written (cased).
    for line in _corpus_lines():
        assert mine.encode(line).input_ids == fast(line)["input_ids"], line
    assert mine.encode("a [MASK] b").input_ids == mine.encode("a[MASK] b").input_ids


def test_slow_tokenizer_differs_from_the_matched_fast_one_on_whitespace(tokenizers):
    mine, fast, slow = tokenizers
    assert type(slow).__name__ == "AlbertTokenizer"
    for text in ("Hello world! The quick brown fox.", "中文分词测试。", "a [MASK] b"):
        assert slow(text)["input_ids"] == fast(text)["input_ids"] == mine.encode(text).input_ids
    # Whitespace before a special token (or at the end) is a "▁" for the fast
    # tokenizer, nothing for the slow one; AutoTokenizer is the fast one.
    text = "hi [SEP] there "
    assert slow(text)["input_ids"] != fast(text)["input_ids"]
    assert mine.encode(text).input_ids == fast(text)["input_ids"]
    assert "\u2581" in mine.tokenize(text)


def test_tokenizer_settings_are_read(spiece_dir, tmp_path, tokenizers):
    _, fast, _ = tokenizers
    cased = tmp_path / "cased"
    shutil.copytree(spiece_dir, cased)
    settings = json.loads((cased / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(do_lower_case=False, keep_accents=True)
    (cased / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    mine = AlbertTokenizer.from_folder(str(cased))
    assert (mine.do_lower_case, mine.keep_accents) == (False, True)
    hf = transformers.AutoTokenizer.from_pretrained(str(cased))
    for text in ("Héllo Café", "The [MASK] Naïve", "ÀB"):
        assert mine.encode(text).input_ids == hf(text)["input_ids"], text
    assert mine.encode("Héllo").input_ids != fast("Héllo")["input_ids"]


def test_tokenizer_save_reads_back_in_autotokenizer(tokenizers, tmp_path):
    mine, fast, _ = tokenizers
    folder = str(tmp_path / "saved")
    written = mine.save(folder)
    assert sorted(os.path.basename(p) for p in written) == [
        "special_tokens_map.json", "spiece.model", "tokenizer_config.json"]
    again = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(again).__name__ == "AlbertTokenizerFast"
    assert again.mask_token == "[MASK]" and again.pad_token_id == 0
    for text in TEXTS:
        assert again(text)["input_ids"] == mine.encode(text).input_ids == \
            fast(text)["input_ids"], text
    # A folder with HF's tokenizer.json (what hub folders carry) reads the same.
    fast_folder = str(tmp_path / "with_tokenizer_json")
    again.save_pretrained(fast_folder)
    assert os.path.isfile(os.path.join(fast_folder, "tokenizer.json"))
    from_json = AlbertTokenizer.from_folder(fast_folder)
    for text, pair in PAIRS:
        assert from_json.encode(text, pair).input_ids == again(text, pair)["input_ids"]


def test_tokenizer_errors_name_the_file(tmp_path):
    with pytest.raises(TokenizerFormatError, match="spiece.model: no such file") as error:
        AlbertTokenizer.from_folder(str(tmp_path))
    assert "\n" not in str(error.value)
    broken = tmp_path / "spiece.model"
    broken.write_bytes(b"\xff\xff\xff not a model")
    with pytest.raises(TokenizerFormatError, match="not a SentencePiece model") as error:
        AlbertTokenizer(str(broken))
    assert str(broken) in str(error.value) and "\n" not in str(error.value)


# ------------------------------------------------------------- round trip


def test_written_folder_loads_in_transformers_with_equal_outputs(
        loaded_pretrainer, hf_pretraining_dir, tokenizers, tmp_path, vocab_size):
    pretrainer, config, _ = loaded_pretrainer
    _, original = hf_pretraining_dir
    mine, _, _ = tokenizers
    arrays = name_tables.table_arrays(targets.find_target(pretrainer), checkpoint_names.HF)
    prefix = hf_format.HF_FORMAT.with_prefix
    arrays = {(prefix + n if n.startswith(checkpoint_names.HF.encoder_prefixes) else n):
              np.ascontiguousarray(v, np.float32) for n, v in arrays.items()}
    folder = str(tmp_path / "written")
    os.makedirs(folder)
    safetensors.numpy.save_file(arrays, os.path.join(folder, "model.safetensors"),
                                metadata={"format": "pt"})
    values = dict(hf_format.config_to_hf(config),
                  architectures=[hf_format.HF_FORMAT.architectures["pretraining"]])
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2)
    mine.save(folder)

    ids, mask, segments = _batch(vocab_size)
    out = pretrainer({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                      "masked_lm_positions": np.zeros((2, 1), np.int32)}, training=False)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    assert isinstance(model, transformers.AlbertModel)
    got = _hf_forward(model, ids, mask, segments)
    np.testing.assert_allclose(got.last_hidden_state.numpy(), out["sequence_output"],
                               atol=ATOL)
    np.testing.assert_allclose(got.pooler_output.numpy(), out["pooled_output"], atol=ATOL)
    full = transformers.AlbertForPreTraining.from_pretrained(folder).eval()
    got, want = _hf_forward(full, ids, mask, segments), _hf_forward(original, ids, mask, segments)
    np.testing.assert_allclose(got.prediction_logits.numpy(), want.prediction_logits.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(got.sop_logits.numpy(), want.sop_logits.numpy(), atol=1e-5)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    for text, pair in PAIRS:
        assert hf_tokenizer(text, pair)["input_ids"] == mine.encode(text, pair).input_ids
    # And the written folder reads back here, identically.
    again = AlbertEncoder.from_config_object(_config_of(folder))
    init_from_checkpoint(again, folder)
    for a, b in zip(again.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
