# coding=utf-8
"""DistilBERT's HF folders load with HF's numbers and ids, and are written back.

Tiny random models written by `transformers` itself (`save_pretrained`,
safetensors) are the reference: hidden states of every layer and MLM logits
of this project's encoder loaded with `init_from_checkpoint` equal HF's
within 1e-4; token ids equal HF's `AutoTokenizer` of the same folder; a
folder written from this project's arrays (`table_arrays`), config
(`config_to_hf`) and tokenizer (`save`) loads in `transformers` with the
same outputs.
"""

import json
import os
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from modeling import checkpoints  # noqa: E402  pylint: disable=g-import-not-at-top
from modeling import registry  # noqa: E402
from modeling.bert import BertEncoder  # noqa: E402
from modeling.checkpoints import targets  # noqa: E402
from modeling.checkpoints.name_tables import table_arrays  # noqa: E402
from modeling.checkpoints.report import CheckpointMismatchError  # noqa: E402
from modeling.distilbert import DistilBertConfig  # noqa: E402
from modeling.distilbert import DistilBertConfigError  # noqa: E402
from modeling.distilbert import DistilBertEncoder  # noqa: E402
from modeling.distilbert import DistilBertTokenizer  # noqa: E402
from modeling.distilbert import load_distilbert_config  # noqa: E402
from modeling.distilbert import encoder as distilbert_encoder  # noqa: E402
from modeling.distilbert import hf_format  # noqa: E402
from modeling.objectives.base import BertPretrainer  # noqa: E402

FAMILY = registry.families.get("distilbert")

# [PAD]=0 .. [MASK]=4, then English words and pieces, accented words (the
# cased vocabulary keeps them, the uncased one strips them), Chinese
# characters (split one by one) and punctuation.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         "the", "cat", "sat", "on", "mat", "a", "dog", "##s", "run", "##ning", "hello",
         "world", "un", "##able", "cafe", "café", "über", "uber", "naive", "naïve",
         "The", "Cat", "Hello", "World", "Über", "Café",
         "我", "爱", "北", "京", "天", "安", "门", "中", "文",
         ".", ",", "!", "?", "'", "-"]
VOCAB += ["w%d" % i for i in range(64 - len(VOCAB))]
SEQ = 9


def _perturb(model, seed):
    """Random values for every parameter (HF initialises LayerNorms to 1/0, biases to 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator) * 0.2
            if "LayerNorm" in name or "layer_norm" in name:
                param.copy_(1.0 + noise if name.endswith("weight") else noise)
            else:
                param.copy_(noise)


def _hf_config(**changes):
    values = dict(vocab_size=len(VOCAB), dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                  max_position_embeddings=24, dropout=0.1, attention_dropout=0.1,
                  activation="gelu", pad_token_id=0)
    values.update(changes)
    return transformers.DistilBertConfig(**values)


def _batch():
    """A padded batch of two lengths (9 and 5 tokens), ids in the vocabulary."""
    rng = np.random.RandomState(3)
    ids = rng.randint(5, len(VOCAB), size=(2, SEQ)).astype(np.int32)
    ids[:, 0], ids[0, -1] = 2, 3
    ids[1, 4], ids[1, 5:] = 3, 0
    mask = np.ones((2, SEQ), np.int32)
    mask[1, 5:] = 0
    return ids, mask


def _hf_outputs(model, ids, mask):
    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor(ids, dtype=torch.long),
                     attention_mask=torch.tensor(mask, dtype=torch.long),
                     output_hidden_states=True)


def _write_folder(folder, arrays, config, architecture):
    os.makedirs(folder, exist_ok=True)
    safetensors_numpy.save_file({k: np.ascontiguousarray(v, np.float32)
                                 for k, v in arrays.items()},
                                os.path.join(folder, "model.safetensors"),
                                metadata={"format": "pt"})
    values = dict(hf_format.config_to_hf(config), architectures=[architecture])
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(values, f)
    return folder


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def hf_base(tmp_path_factory):
    """A random HF DistilBertModel (gelu) saved with save_pretrained."""
    torch.manual_seed(0)
    model = transformers.DistilBertModel(_hf_config())
    _perturb(model, 1)
    folder = str(tmp_path_factory.mktemp("distilbert_base"))
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture(scope="module")
def hf_mlm(tmp_path_factory):
    """A random HF DistilBertForMaskedLM (relu: the head's activation follows the config)."""
    torch.manual_seed(0)
    model = transformers.DistilBertForMaskedLM(_hf_config(activation="relu"))
    _perturb(model, 2)
    model.tie_weights()
    folder = str(tmp_path_factory.mktemp("distilbert_mlm"))
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture(scope="module")
def encoder(hf_base):
    _, folder = hf_base
    model = DistilBertEncoder.from_config_object(load_distilbert_config(folder))
    report = checkpoints.init_from_checkpoint(model, folder)
    assert report.format == "hf_safetensors"
    return model


@pytest.fixture(scope="module")
def pretrainer(hf_mlm):
    _, folder = hf_mlm
    config = load_distilbert_config(folder)
    model = BertPretrainer(FAMILY.build_encoder(config),
                           [registry.objectives.get("masked_lm")(config, FAMILY)],
                           name="distilbert_pretrainer")
    report = checkpoints.init_from_checkpoint(model, folder)
    assert "vocab_transform.weight" in report.loaded
    assert "embeddings.word_embeddings.weight" in report.loaded  # `distilbert.` stripped
    return model


# ------------------------------------------------------------------- parity


def test_hidden_states_of_every_layer_equal_hfs(hf_base, encoder):
    model, _ = hf_base
    ids, mask = _batch()
    expected = _hf_outputs(model, ids, mask)
    outputs = encoder({"input_ids": ids, "input_mask": mask}, training=False)
    ours = [outputs["embedding_output"]] + list(outputs["encoder_outputs"])
    assert len(ours) == len(expected.hidden_states) == 3
    for layer, (mine, theirs) in enumerate(zip(ours, expected.hidden_states)):
        np.testing.assert_allclose(np.asarray(mine), theirs.numpy(), atol=1e-4,
                                   err_msg="hidden state %d" % layer)
    np.testing.assert_allclose(np.asarray(outputs["sequence_output"]),
                               expected.last_hidden_state.numpy(), atol=1e-4)
    # No pooler and no token types: segment ids change nothing.
    assert "pooled_output" not in outputs
    assert encoder.embeddings.token_type_embeddings is None
    other = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": np.ones_like(ids)})
    np.testing.assert_array_equal(np.asarray(other["sequence_output"]),
                                  np.asarray(outputs["sequence_output"]))


def test_masked_lm_logits_equal_hfs(hf_mlm, pretrainer):
    model, _ = hf_mlm
    ids, mask = _batch()
    expected = _hf_outputs(model, ids, mask).logits.numpy()
    positions = np.tile(np.arange(SEQ, dtype=np.int32), (2, 1))
    outputs = pretrainer({"input_ids": ids, "input_mask": mask,
                          "masked_lm_positions": positions}, training=False)
    np.testing.assert_allclose(np.asarray(outputs["masked_lm_logits"]), expected, atol=1e-4)


def test_task_folders_load_into_an_encoder_skipping_their_heads(hf_mlm, tmp_path):
    # The MLM folder into a bare encoder: prefix stripped, head skipped.
    mlm_model, mlm_folder = hf_mlm
    encoder = DistilBertEncoder.from_config_object(load_distilbert_config(mlm_folder))
    report = checkpoints.init_from_checkpoint(encoder, mlm_folder)
    assert ("vocab_transform.weight", "head not in the model") in report.skipped
    ids, mask = _batch()
    np.testing.assert_allclose(
        np.asarray(encoder({"input_ids": ids, "input_mask": mask})["sequence_output"]),
        _hf_outputs(mlm_model.distilbert, ids, mask).last_hidden_state.numpy(), atol=1e-4)
    # A sequence classifier: pre_classifier and classifier are a task head.
    torch.manual_seed(0)
    classifier = transformers.DistilBertForSequenceClassification(_hf_config(num_labels=3))
    classifier.save_pretrained(str(tmp_path))
    encoder = DistilBertEncoder.from_config_object(load_distilbert_config(str(tmp_path)))
    report = checkpoints.init_from_checkpoint(encoder, str(tmp_path))
    skipped = dict(report.skipped)
    assert {"pre_classifier.weight", "classifier.bias"} <= set(skipped)


def test_sinusoidal_position_table_is_hfs_and_frozen():
    torch.manual_seed(0)
    model = transformers.DistilBertModel(_hf_config(sinusoidal_pos_embds=True))
    hf_values = json.loads(model.config.to_json_string())
    config = hf_format.config_from_hf(hf_values)
    assert config.sinusoidal_pos_embds
    encoder = FAMILY.build_encoder(config)
    table = encoder.embeddings.position_embeddings
    np.testing.assert_allclose(np.asarray(table),
                               model.embeddings.position_embeddings.weight.detach().numpy(),
                               atol=1e-6)
    assert not table.trainable
    assert all(v is not table for v in encoder.trainable_weights)
    rebuilt = DistilBertEncoder.from_config(encoder.get_config())
    assert rebuilt.sinusoidal_pos_embds
    np.testing.assert_allclose(distilbert_encoder.sinusoidal_table(24, 32), np.asarray(table))


# ------------------------------------------------------------ bad checkpoints


def test_wrong_shaped_weights_are_a_mismatch_error_naming_the_tensor(hf_base, tmp_path):
    _, folder = hf_base
    arrays = safetensors_numpy.load_file(os.path.join(folder, "model.safetensors"))
    arrays["transformer.layer.1.ffn.lin1.weight"] = np.zeros((40, 32), np.float32)
    safetensors_numpy.save_file(arrays, str(tmp_path / "model.safetensors"),
                                metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        (tmp_path / "config.json").write_text(f.read(), encoding="utf-8")
    encoder = DistilBertEncoder.from_config_object(load_distilbert_config(str(tmp_path)))
    before = np.asarray(encoder.embeddings.word_embeddings).copy()
    with pytest.raises(CheckpointMismatchError) as error:
        checkpoints.init_from_checkpoint(encoder, str(tmp_path))
    assert error.value.mismatched == [("transformer.layer.1.ffn.lin1.weight", (40, 32),
                                       (48, 32))]
    assert not error.value.missing and not error.value.unexpected
    assert "transformer.layer.1.ffn.lin1.weight: checkpoint [40, 32], model expects [48, 32]" \
        in str(error.value)
    # Nothing was assigned.
    np.testing.assert_array_equal(np.asarray(encoder.embeddings.word_embeddings), before)


def test_a_deeper_checkpoint_is_an_error_not_a_partial_load(hf_base, tmp_path):
    _, folder = hf_base
    arrays = safetensors_numpy.load_file(os.path.join(folder, "model.safetensors"))
    shallow = DistilBertEncoder.from_config_object(
        load_distilbert_config(folder).replace(num_hidden_layers=1))
    safetensors_numpy.save_file(arrays, str(tmp_path / "model.safetensors"),
                                metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError) as error:
        checkpoints.init_from_checkpoint(shallow, str(tmp_path / "model.safetensors"))
    assert any(name.startswith("transformer.layer.1.") for name, _ in error.value.unexpected)


# ----------------------------------------------------------------- config


def test_config_reads_hfs_file_and_writes_it_back(hf_mlm, tmp_path):
    _, folder = hf_mlm
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        hf_values = json.load(f)
    config = hf_format.config_from_hf(hf_values)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size, config.hidden_act, config.type_vocab_size) == \
        (32, 2, 4, 48, "relu", 0)
    assert config == load_distilbert_config(folder)
    written = hf_format.config_to_hf(config)
    assert written["model_type"] == "distilbert" and "architectures" not in written
    for key in ("dim", "n_layers", "n_heads", "hidden_dim", "activation", "dropout",
                "attention_dropout", "max_position_embeddings", "vocab_size", "pad_token_id",
                "initializer_range", "qa_dropout", "seq_classif_dropout"):
        assert written[key] == hf_values[key], key
    (tmp_path / "config.json").write_text(json.dumps(written), encoding="utf-8")
    again = transformers.AutoConfig.from_pretrained(str(tmp_path))
    assert isinstance(again, transformers.DistilBertConfig)
    assert (again.dim, again.n_layers, again.activation) == (32, 2, "relu")
    # Released files' old key and BERT-style replace() (the distillation students').
    old = DistilBertConfig.from_dict(dict(hf_values, tie_weights_=True))
    assert old.extra["tie_weights_"] is True
    assert config.replace(num_hidden_layers=1, hidden_dropout_prob=0.0).to_dict()["n_layers"] == 1


@pytest.mark.parametrize("changes, message", [
    ({"dimm": 32}, "unknown DistilBERT config key `dimm` (did you mean `dim`?)"),
    ({"model_type": "bert"}, "`model_type` is 'bert', not 'distilbert'"),
    ({"n_heads": 5}, "`dim` (32) must be a multiple of `n_heads` (5)"),
    ({"activation": "swiglu"}, "`activation` 'swiglu' is not supported"),
])
def test_bad_config_files_are_one_line_errors_naming_the_file(tmp_path, changes, message):
    values = dict(vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                  model_type="distilbert")
    values.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    with pytest.raises(DistilBertConfigError) as error:
        load_distilbert_config(str(tmp_path))
    assert message in str(error.value) and str(path) in str(error.value)
    assert "\n" not in str(error.value)


def test_bert_style_names_are_refused_with_hfs_names():
    with pytest.raises(DistilBertConfigError, match="`dim` for `hidden_size`"):
        DistilBertConfig(vocab_size=10, hidden_size=32)


# ----------------------------------------------------------------- family


def test_the_family_is_registered_apart_from_bert(encoder):
    assert targets.family_of(encoder) is FAMILY
    assert registry.families.get("bert").is_encoder(encoder) is False
    assert FAMILY.hf.model_types == ("distilbert",) and FAMILY.hf.with_prefix == "distilbert."
    assert FAMILY.hf.architectures["masked_lm"] == "DistilBertForMaskedLM"
    assert not FAMILY.has_pooler
    # BERT itself keeps its token types and pooler.
    bert = BertEncoder(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=8, type_vocab_size=2)
    assert bert.embeddings.token_type_embeddings.shape == (2, 8) and bert.pooler is not None


def test_classification_reads_the_first_token_through_hfs_pre_classifier():
    # No pooler: the classifier job accepts the family because its sentence
    # vector is the first token through a ReLU layer (HF's pre_classifier);
    # a family with neither is refused.
    from modeling.tasks import classification  # pylint: disable=g-import-not-at-top
    from modeling.tasks import classifier_job  # pylint: disable=g-import-not-at-top
    assert FAMILY.sentence_vector == "first_token"
    classifier_job.PooledInputFormat.check_family(
        types.SimpleNamespace(model_family="distilbert"), FAMILY)
    with pytest.raises(classifier_job.ClassifierJobError, match="no pooled output"):
        classifier_job.PooledInputFormat.check_family(
            types.SimpleNamespace(model_family="gpt2"), registry.families.get("gpt2"))
    config = hf_format.config_from_hf(_hf_config().to_dict())
    model = classification.BertClassifier.from_config_object(config, num_labels=3,
                                                             family="distilbert")
    assert model.pre_classifier is not None and model.pre_classifier.activation.__name__ == "relu"


# -------------------------------------------------------------- tokenizer

TEXTS = [
    ("The cat sat on the mat.", None),
    ("Hello, World! The dogs running", "un able cafe?"),
    ("Café über naïve Über", "CAFÉ naive"),
    ("我爱北京天安门", "中文 hello"),
    ("hello [MASK] world [SEP] the", "[CLS] cat [PAD]"),
    ("unknownword 象 -'", None),
]


def _tokenizer_folder(root, name, do_lower_case):
    folder = os.path.join(str(root), name)
    os.makedirs(folder)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in VOCAB))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": do_lower_case, "tokenizer_class": "DistilBertTokenizer"}, f)
    return folder


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizer_folder(request, tmp_path_factory):
    return _tokenizer_folder(tmp_path_factory.mktemp("tok"), "distilbert", request.param)


@pytest.mark.parametrize("use_fast", [True, False], ids=["fast", "slow"])
def test_token_ids_equal_hfs_and_there_are_no_token_types(tokenizer_folder, use_fast):
    ours = hf_format.read_tokenizer(tokenizer_folder)
    assert isinstance(ours, DistilBertTokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(tokenizer_folder, use_fast=use_fast)
    assert "token_type_ids" not in theirs.model_input_names
    for text, pair in TEXTS:
        expected = theirs(text, pair)
        encoded = ours.encode(text, pair)
        assert encoded.input_ids == expected["input_ids"], (text, pair)
        assert "token_type_ids" not in expected
        assert encoded.segment_ids == [0] * len(encoded.input_ids)
        plain = ours.encode(text, pair, add_special_tokens=False)
        assert plain.input_ids == theirs(text, pair, add_special_tokens=False)["input_ids"]
        assert set(plain.segment_ids) <= {0}


def test_a_saved_tokenizer_reads_back_in_hf(tokenizer_folder, tmp_path):
    ours = hf_format.read_tokenizer(tokenizer_folder)
    ours.save(str(tmp_path))
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert type(theirs).__name__.startswith("DistilBertTokenizer")
    for text, pair in TEXTS:
        assert ours.encode(text, pair).input_ids == theirs(text, pair)["input_ids"]


# --------------------------------------------------------------- round trip


def test_written_folder_loads_in_transformers_with_equal_outputs(pretrainer, tmp_path):
    config = pretrainer.encoder.distilbert_config()
    assert config.hidden_act == "relu" and config.dim == 32
    tokenizer = hf_format.read_tokenizer(_tokenizer_folder(tmp_path, "tok", True))
    ids, mask = _batch()
    positions = np.tile(np.arange(SEQ, dtype=np.int32), (2, 1))
    ours = pretrainer({"input_ids": ids, "input_mask": mask, "masked_lm_positions": positions},
                      training=False)

    # The pretrainer as DistilBertForMaskedLM: encoder names under `distilbert.`.
    arrays = table_arrays(targets.find_target(pretrainer), FAMILY.name_tables[FAMILY.hf.table])
    assert "vocab_projector.bias" in arrays and "vocab_projector.weight" not in arrays
    prefixes = FAMILY.name_tables["hf"].encoder_prefixes
    mlm_arrays = {(FAMILY.hf.with_prefix + k if k.startswith(prefixes) else k): v
                  for k, v in arrays.items()}
    mlm_folder = _write_folder(str(tmp_path / "mlm"), mlm_arrays, config,
                               FAMILY.hf.architectures["masked_lm"])
    tokenizer.save(mlm_folder)
    hf_mlm = transformers.AutoModelForMaskedLM.from_pretrained(mlm_folder)
    assert isinstance(hf_mlm, transformers.DistilBertForMaskedLM)
    np.testing.assert_allclose(_hf_outputs(hf_mlm, ids, mask).logits.numpy(),
                               np.asarray(ours["masked_lm_logits"]), atol=1e-4)
    hf_model = transformers.AutoModel.from_pretrained(mlm_folder)
    assert isinstance(hf_model, transformers.DistilBertModel)
    np.testing.assert_allclose(_hf_outputs(hf_model, ids, mask).last_hidden_state.numpy(),
                               np.asarray(ours["sequence_output"]), atol=1e-4)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(mlm_folder)
    for text, pair in TEXTS:
        assert hf_tokenizer(text, pair)["input_ids"] == tokenizer.encode(text, pair).input_ids

    # The bare encoder as DistilBertModel: no prefix, no head.
    encoder_arrays = table_arrays(targets.find_target(pretrainer.encoder),
                                  FAMILY.name_tables["hf"])
    assert set(encoder_arrays) == {k for k in arrays if k.startswith(prefixes)}
    base_folder = _write_folder(str(tmp_path / "base"), encoder_arrays, config,
                                FAMILY.hf.architectures["encoder"])
    hf_base = transformers.AutoModel.from_pretrained(base_folder)
    np.testing.assert_allclose(_hf_outputs(hf_base, ids, mask).last_hidden_state.numpy(),
                               np.asarray(ours["sequence_output"]), atol=1e-4)
    # And it reads back into this project unchanged.
    again = DistilBertEncoder.from_config_object(load_distilbert_config(base_folder))
    checkpoints.init_from_checkpoint(again, base_folder)
    for a, b in zip(again.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))



def test_from_pretrained_and_save_pretrained_keep_hfs_numbers(hf_mlm, tmp_path):
    """The shared folder API (`modeling.pretrained`) finds this family by `model_type`."""
    from modeling.pretrained import from_pretrained  # pylint: disable=g-import-not-at-top
    from modeling.pretrained import save_pretrained  # pylint: disable=g-import-not-at-top
    hf_model, mlm_folder = hf_mlm
    folder = str(tmp_path / "release")
    os.makedirs(folder)
    for name in ("config.json", "model.safetensors"):
        with open(os.path.join(mlm_folder, name), "rb") as f:
            (tmp_path / "release" / name).write_bytes(f.read())
    tok = _tokenizer_folder(tmp_path, "tok", False)
    for name in os.listdir(tok):
        os.rename(os.path.join(tok, name), os.path.join(folder, name))
    model, tokenizer = from_pretrained(folder, objectives=("masked_lm",))
    assert isinstance(model.encoder, DistilBertEncoder)
    assert isinstance(tokenizer, DistilBertTokenizer) and not tokenizer.do_lower_case
    ids, mask = _batch()
    positions = np.tile(np.arange(SEQ, dtype=np.int32), (2, 1))
    logits = np.asarray(model({"input_ids": ids, "input_mask": mask,
                               "masked_lm_positions": positions})["masked_lm_logits"])
    np.testing.assert_allclose(logits, _hf_outputs(hf_model, ids, mask).logits.numpy(),
                               atol=1e-4)
    out = str(tmp_path / "out")
    save_pretrained(model, tokenizer, out)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["architectures"] == ["DistilBertForMaskedLM"]
    again = transformers.AutoModelForMaskedLM.from_pretrained(out)
    np.testing.assert_allclose(_hf_outputs(again, ids, mask).logits.numpy(), logits, atol=1e-4)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    for text, pair in TEXTS:
        assert hf_tokenizer(text, pair)["input_ids"] == tokenizer.encode(text, pair).input_ids
