"""Model folders in and out (modeling.pretrained), on BERT: HF, Google, keras-hub, this project.

The HF folders are written here by `transformers` (random tiny BERTs over
Google's Chinese vocabulary and the real all-MiniLM-L6-v2); nothing is
downloaded. Parity is asserted on numbers: ids equal to HF's AutoTokenizer,
hidden states and MLM logits within 1e-4 of HF's model, and the same
after a round trip through each output format.
"""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import torch
import transformers

from modeling import pretrained
from modeling.checkpoints import CheckpointFormatError
from modeling.pretrained import export
from modeling.pretrained import folders

TEXTS = [
    ("Hello world, this is BERT.", None),
    ("我们今天去北京看长城。", "天气很好！"),
    ("Accents: café naïve Über", "[MASK] in text stays [MASK]"),
    ("  spaces   everywhere  ", "numbers 12,345.6 and symbols #@!"),
]


@dataclasses.dataclass
class _Settings:
    """The fields of a job that a model folder fills."""
    init_checkpoint: str
    bert_config_file: str = None
    vocab_file: str = None
    do_lower_case: bool = False
    model_family: str = "bert"


def _batch(tokenizer, texts):
    encoded = [tokenizer.encode(a, b) for a, b in texts]
    width = max(len(e.input_ids) for e in encoded)
    ids = np.zeros((len(encoded), width), np.int32)
    segments = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, :len(e.input_ids)] = e.input_ids
        segments[i, :len(e.input_ids)] = e.segment_ids
        mask[i, :len(e.input_ids)] = 1
    return ids, segments, mask


def _hf_outputs(model, ids, segments, mask):
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    token_type_ids=torch.tensor(segments, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    output_hidden_states=True)
    return out


def _ours(model, ids, segments, mask):
    features = {"input_ids": ids, "segment_ids": segments, "input_mask": mask}
    if hasattr(model, "objectives"):  # A pretrainer: the MLM head at every position.
        features["masked_lm_positions"] = np.tile(np.arange(ids.shape[1], dtype=np.int32),
                                                  (len(ids), 1))
    return model(features)


def _close_where_real(a, b, mask, atol=1e-4):
    """Hidden states agree at every real (unpadded) position."""
    keep = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(a)[keep], np.asarray(b)[keep], atol=atol, rtol=0)


@pytest.fixture(scope="module")
def hf_bert_dir(tmp_path_factory, chinese_vocab_file):
    """A random HF BertForPreTraining over Google's Chinese vocabulary, with its tokenizer."""
    folder = tmp_path_factory.mktemp("hf_bert")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=21128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    model = transformers.BertForPreTraining(config).eval()
    model.save_pretrained(folder)
    shutil.copy(chinese_vocab_file, folder / "vocab.txt")
    transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"),
                                   do_lower_case=True).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def hf_bert(hf_bert_dir):
    return (transformers.AutoModel.from_pretrained(hf_bert_dir).eval(),
            transformers.BertForPreTraining.from_pretrained(hf_bert_dir).eval(),
            transformers.AutoTokenizer.from_pretrained(hf_bert_dir))


@pytest.fixture(scope="module")
def loaded(hf_bert_dir):
    return pretrained.load_pretrained(hf_bert_dir, objectives=("masked_lm", "next_sentence"))


# ------------------------------------------------------------------ reading


def test_inspect_tells_the_kind_family_and_files(hf_bert_dir, minilm_model_dir):
    folder = pretrained.inspect(hf_bert_dir)
    assert (folder.kind, folder.family.name) == ("hf", "bert")
    assert folder.vocab_file.endswith("vocab.txt")
    assert folder.config().vocab_size == 21128
    # A file inside the folder names the same folder, with that checkpoint.
    inside = pretrained.inspect(os.path.join(minilm_model_dir, "model.safetensors"))
    assert inside.path == minilm_model_dir and inside.checkpoint.endswith("model.safetensors")


def test_tokens_equal_hf_autotokenizer(loaded, hf_bert):
    hf_tokenizer = hf_bert[2]
    for a, b in TEXTS:
        ours = loaded.tokenizer.encode(a, b)
        theirs = hf_tokenizer(a, b)
        assert ours.input_ids == theirs["input_ids"], (a, b)
        assert ours.segment_ids == theirs["token_type_ids"], (a, b)
    assert loaded.tokenizer.encode("[MASK]").input_ids[1] == hf_tokenizer.mask_token_id


def test_hidden_states_and_heads_equal_hf(loaded, hf_bert):
    hf_model, hf_pretraining, _ = hf_bert
    ids, segments, mask = _batch(loaded.tokenizer, TEXTS)
    theirs = _hf_outputs(hf_model, ids, segments, mask)
    ours = _ours(loaded.model, ids, segments, mask)
    _close_where_real(ours["sequence_output"], theirs.last_hidden_state.numpy(), mask)
    layers = _ours(loaded.model.encoder, ids, segments, mask)["encoder_outputs"]
    for layer, hidden in enumerate(theirs.hidden_states[1:]):
        _close_where_real(layers[layer], hidden.numpy(), mask)
    np.testing.assert_allclose(ours["pooled_output"], theirs.pooler_output.numpy(), atol=1e-4)
    heads = _hf_outputs(hf_pretraining, ids, segments, mask)
    logits = ours["masked_lm_logits"]
    _close_where_real(np.reshape(logits, heads.prediction_logits.shape),
                      heads.prediction_logits.numpy(), mask)
    np.testing.assert_allclose(ours["next_sentence_logits"],
                               heads.seq_relationship_logits.numpy(), atol=1e-4)


def test_real_minilm_folder_loads_with_parity(minilm_model_dir):
    model, tokenizer = pretrained.from_pretrained(minilm_model_dir)
    hf_model = transformers.AutoModel.from_pretrained(minilm_model_dir).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_model_dir)
    texts = [("A real sentence encoder.", "It was trained on a billion pairs."),
             ("Short one", None)]
    for a, b in texts:
        assert tokenizer.encode(a, b).input_ids == hf_tokenizer(a, b)["input_ids"]
    ids, segments, mask = _batch(tokenizer, texts)
    _close_where_real(_ours(model, ids, segments, mask)["sequence_output"],
                      _hf_outputs(hf_model, ids, segments, mask).last_hidden_state.numpy(), mask)


# ------------------------------------------------------------------ writing


@pytest.fixture(scope="module")
def hf_export(loaded, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("exports") / "hf")
    pretrained.save_pretrained(loaded.model, loaded.tokenizer, out, output_format="hf")
    return out


def test_hf_export_loads_in_transformers_with_the_same_outputs(loaded, hf_export, hf_bert):
    config = json.load(open(os.path.join(hf_export, "config.json")))
    assert config["architectures"] == ["BertForPreTraining"]
    assert config["model_type"] == "bert" and config["layer_norm_eps"] == 1e-12
    model = transformers.AutoModel.from_pretrained(hf_export).eval()
    heads = transformers.BertForPreTraining.from_pretrained(hf_export).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_export)
    for a, b in TEXTS:
        assert tokenizer(a, b)["input_ids"] == loaded.tokenizer.encode(a, b).input_ids
    ids, segments, mask = _batch(loaded.tokenizer, TEXTS)
    original = _hf_outputs(hf_bert[0], ids, segments, mask)
    _close_where_real(_hf_outputs(model, ids, segments, mask).last_hidden_state.numpy(),
                      original.last_hidden_state.numpy(), mask, atol=1e-5)
    np.testing.assert_allclose(
        _hf_outputs(heads, ids, segments, mask).prediction_logits.numpy(),
        _hf_outputs(hf_bert[1], ids, segments, mask).prediction_logits.numpy(), atol=1e-5)


def test_google_export_reads_back_as_a_google_folder(loaded, tmp_path, hf_bert):
    out = str(tmp_path / "google")
    pretrained.save_pretrained(loaded.model, loaded.tokenizer, out, output_format="google")
    assert sorted(os.listdir(out)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "vocab.txt"]
    back = pretrained.load_pretrained(out, objectives=("masked_lm", "next_sentence"))
    assert back.folder.kind == "google"
    ids, segments, mask = _batch(back.tokenizer, TEXTS)
    _close_where_real(_ours(back.model, ids, segments, mask)["sequence_output"],
                      _hf_outputs(hf_bert[0], ids, segments, mask).last_hidden_state.numpy(),
                      mask)


def test_keras_hub_export_is_a_preset_keras_hub_loads(loaded, tmp_path):
    import keras_hub  # pylint: disable=import-outside-toplevel
    out = str(tmp_path / "keras_hub")
    pretrained.save_pretrained(loaded.model, loaded.tokenizer, out, output_format="keras_hub")
    assert pretrained.inspect(out).kind == "keras_hub"
    backbone = keras_hub.models.Backbone.from_preset(out)
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(out)
    assert type(backbone).__name__ == "BertBackbone"
    text = "我们今天去北京看长城。Hello world"
    assert list(np.asarray(tokenizer(text))) == loaded.tokenizer.encode(text).input_ids[1:-1]
    ids, segments, mask = _batch(loaded.tokenizer, TEXTS)
    theirs = backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    # keras-hub's BertBackbone always computes the tanh GELU; ours with the
    # same weights and that activation must agree.
    tanh_model = pretrained.load_pretrained(
        loaded.folder.path, config=loaded.config.replace(hidden_act="gelu_new"),
        tokenizer=False).model
    _close_where_real(_ours(tanh_model, ids, segments, mask)["sequence_output"],
                      theirs["sequence_output"], mask)
    # ... and the preset reads back in (keras-hub's reader, our encoder): equal outputs.
    back, back_tokenizer = pretrained.from_pretrained(out)
    assert back_tokenizer.encode(text).input_ids == loaded.tokenizer.encode(text).input_ids
    assert back.bert_config().hidden_act == "gelu_new"
    _close_where_real(_ours(back, ids, segments, mask)["sequence_output"],
                      theirs["sequence_output"], mask, atol=1e-5)
    np.testing.assert_allclose(_ours(back, ids, segments, mask)["pooled_output"],
                               theirs["pooled_output"], atol=1e-5)
    # A preset is also an --init_checkpoint of every job: config, vocabulary, weights.
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    filled = folders.fill_settings(_Settings(init_checkpoint=out))
    assert filled.bert_config_file == os.path.join(out, "config.json")
    assert filled.vocab_file == os.path.join(out, "assets", "tokenizer", "vocabulary.txt")
    assert filled.do_lower_case is True
    family = loaded.folder.family
    encoder = pretrained.loading.build_model(family, family.load_config(filled.bert_config_file))
    report = checkpoints.init_from_checkpoint(encoder, out)
    assert report.format == "keras_hub"
    _close_where_real(_ours(encoder, ids, segments, mask)["sequence_output"],
                      theirs["sequence_output"], mask, atol=1e-5)


def test_encoder_alone_exports_as_bert_model(loaded, tmp_path, hf_bert):
    out = str(tmp_path / "encoder")
    pretrained.save_pretrained(loaded.model.encoder, loaded.tokenizer, out)
    assert json.load(open(os.path.join(out, "config.json")))["architectures"] == ["BertModel"]
    model = transformers.AutoModel.from_pretrained(out).eval()
    ids, segments, mask = _batch(loaded.tokenizer, TEXTS)
    np.testing.assert_allclose(_hf_outputs(model, ids, segments, mask).pooler_output.numpy(),
                               _hf_outputs(hf_bert[0], ids, segments, mask).pooler_output.numpy(),
                               atol=1e-5)


# ---------------------------------------------------------------- bad input


def _one_line(error):
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_unknown_model_type_is_one_line_naming_the_known(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "mamba"}')
    with pytest.raises(pretrained.UnknownModelTypeError) as error:
        pretrained.inspect(str(tmp_path))
    message = _one_line(error)
    assert "config.json" in message and "'mamba'" in message and "bert" in message


def test_config_without_model_type_and_no_config_are_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    with pytest.raises(pretrained.FolderError) as error:
        pretrained.inspect(str(tmp_path))
    assert "model_type" in _one_line(error)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(pretrained.FolderError) as error:
        pretrained.inspect(str(empty))
    assert "not a model folder" in _one_line(error)


def test_missing_tokenizer_file_names_it(hf_bert_dir, tmp_path):
    folder = tmp_path / "no_vocab"
    shutil.copytree(hf_bert_dir, folder)
    for name in ("vocab.txt", "tokenizer.json"):
        os.remove(folder / name)
    with pytest.raises(pretrained.TokenizerFormatError) as error:
        pretrained.from_pretrained(str(folder))
    assert "vocab.txt: no such file" in _one_line(error)


def test_pickle_only_folder_is_refused(hf_bert_dir, tmp_path):
    folder = tmp_path / "pickle"
    folder.mkdir()
    shutil.copy(os.path.join(hf_bert_dir, "config.json"), folder)
    shutil.copy(os.path.join(hf_bert_dir, "vocab.txt"), folder)
    (folder / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(CheckpointFormatError) as error:
        pretrained.from_pretrained(str(folder))
    assert "pytorch_model.bin is a PyTorch pickle" in _one_line(error)


def test_export_refuses_a_folder_that_holds_files(loaded, hf_export):
    before = sorted(os.listdir(hf_export))
    with pytest.raises(export.ExportError) as error:
        pretrained.save_pretrained(loaded.model, loaded.tokenizer, hf_export)
    assert "already holds files" in _one_line(error)
    assert sorted(os.listdir(hf_export)) == before
    with pytest.raises(export.ExportError) as error:
        pretrained.save_pretrained(loaded.model, loaded.tokenizer, hf_export + "2",
                                   output_format="onnx")
    assert "'onnx'" in _one_line(error)
    assert not os.path.exists(hf_export + "2")


def test_project_output_folder_is_recognised(tmp_path, hf_bert_dir, loaded):
    # What a pre-training job leaves: the Trainer's ckpt-N under a `checkpoint`
    # state file, and the family's config file (and vocabulary) beside it.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from modeling.training import optimization  # pylint: disable=import-outside-toplevel
    from modeling.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
    out = str(tmp_path / "run")
    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"),
        lambda: pretrained.load_pretrained(hf_bert_dir, ("masked_lm", "next_sentence"),
                                           tokenizer=False).model,
        lambda: optimization.create_optimizer(1e-2, 1, 0),
        model_dir=out, train_batch_size=2, num_train_steps=1, save_checkpoints_steps=1,
        log_steps=1)
    ids, segments, mask = _batch(loaded.tokenizer, TEXTS[:2])
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                "masked_lm_positions": np.array([[1, 2], [1, 3]], np.int32),
                "masked_lm_ids": np.array([[5, 6], [7, 8]], np.int32),
                "masked_lm_weights": np.ones((2, 2), np.float32),
                "next_sentence_labels": np.array([[0], [1]], np.int32)}
    trainer.train(lambda _: tf.data.Dataset.from_tensors(features).repeat())
    loaded.config.to_json_file(os.path.join(out, "bert_config.json"))
    shutil.copy(loaded.folder.vocab_file, os.path.join(out, "vocab.txt"))
    folder = folders.inspect(out)
    assert (folder.kind, folder.family.name) == ("project", "bert")
    back = pretrained.load_pretrained(out, objectives=("masked_lm", "next_sentence"))
    assert back.report.format == "object_based"
    trained = _ours(trainer.model.encoder, ids, segments, mask)["sequence_output"]
    np.testing.assert_allclose(_ours(back.model.encoder, ids, segments, mask)["sequence_output"],
                               trained, atol=1e-6)
    # The one training step moved the weights away from the HF folder's.
    assert np.abs(np.asarray(trained) - np.asarray(
        _ours(loaded.model.encoder, ids, segments, mask)["sequence_output"])).max() > 1e-3


# ------------------------------------------------------ convert_checkpoint.py


def test_convert_checkpoint_script_writes_each_format_with_heads(hf_bert_dir, hf_bert, tmp_path):
    import sys  # pylint: disable=import-outside-toplevel
    import script_runner  # pylint: disable=import-outside-toplevel
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    out = str(tmp_path / "google")
    done = script_runner.run(
        [sys.executable, os.path.join(repo, "run", "convert_checkpoint.py"),
         "--init_checkpoint=" + hf_bert_dir, "--output_format=google", "--output_dir=" + out],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "heads: masked_lm, next_sentence" in done.stdout
    # Google's folder back to HF, in-process (the same library call): equal logits.
    from modeling.pretrained import convert  # pylint: disable=import-outside-toplevel
    summary = convert.convert(convert.ConvertSettings(
        init_checkpoint=out, output_dir=str(tmp_path / "hf"), output_format="hf"))
    assert summary["heads"] == ["masked_lm", "next_sentence"]
    model = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "hf")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    batch = tokenizer(["北京 is a city", "长城"], padding=True, return_tensors="np")
    ids, segments, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    np.testing.assert_allclose(
        _hf_outputs(model, ids, segments, mask).prediction_logits.numpy(),
        _hf_outputs(hf_bert[1], ids, segments, mask).prediction_logits.numpy(), atol=1e-5)
    # The output may not be the input, and --heads=none writes the encoder alone.
    bad = script_runner.run(
        [sys.executable, os.path.join(repo, "run", "convert_checkpoint.py"),
         "--init_checkpoint=" + out, "--output_dir=" + out],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].endswith(
        "--output_dir=%s would overwrite --init_checkpoint=%s" % (out, out))
    convert.convert(convert.ConvertSettings(init_checkpoint=out, heads="none",
                                            output_dir=str(tmp_path / "encoder")))
    config = json.load(open(tmp_path / "encoder" / "config.json"))
    assert config["architectures"] == ["BertModel"]


def test_scripts_take_a_model_folder_alone(minilm_model_dir, tmp_path):
    """extract_features.py and predict_masked.py with --init_checkpoint=FOLDER and nothing else
    about the model: the vectors are HF's."""
    import sys  # pylint: disable=import-outside-toplevel
    import script_runner  # pylint: disable=import-outside-toplevel
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    texts = ["A folder is enough.", "Sentence encoders ||| map text to vectors"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "features.jsonl"
    done = script_runner.run(
        [sys.executable, os.path.join(repo, "run", "extract_features.py"),
         "--init_checkpoint=" + minilm_model_dir, "--input_file=" + str(tmp_path / "in.txt"),
         "--output_file=" + str(out), "--layers=-1"],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    hf_model = transformers.AutoModel.from_pretrained(minilm_model_dir).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_model_dir)
    for text, record in zip(texts, records):
        a, _, b = text.partition(" ||| ")
        encoded = hf_tokenizer(a, b or None, return_tensors="pt")
        with torch.no_grad():
            hidden = hf_model(**encoded).last_hidden_state[0].numpy()
        tokens = [f["token"] for f in record["features"]]
        assert tokens == hf_tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
        values = np.array([f["layers"][0]["values"] for f in record["features"]])
        np.testing.assert_allclose(values, hidden, atol=1e-4)
    # Without a folder, the config is still required, in one line.
    bad = script_runner.run(
        [sys.executable, os.path.join(repo, "run", "extract_features.py"),
         "--init_checkpoint=" + os.path.join(minilm_model_dir, "model.safetensors") + "x",
         "--input_file=" + str(tmp_path / "in.txt"), "--output_file=" + str(tmp_path / "o")],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "--vocab_file is required (or give --init_checkpoint as a model folder holding it)")
    assert not (tmp_path / "o").exists()


def test_a_folder_that_cannot_tell_its_family_takes_the_jobs(tmp_path):
    """This project's GPT output: config.json without model_type, a checkpoint state file."""
    (tmp_path / "config.json").write_text('{"n_embd": 8, "n_layer": 1, "n_head": 2}')
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    with pytest.raises(pretrained.FolderError, match="has no `model_type`"):
        pretrained.inspect(str(tmp_path))
    folder = pretrained.inspect(str(tmp_path), family="gpt")
    assert (folder.kind, folder.family.name) == ("project", "gpt")
    # A job that names its config explicitly does not need the folder to tell ...
    explicit = _Settings(init_checkpoint=str(tmp_path), bert_config_file="given.json")
    assert folders.fill_settings(explicit) is explicit
    # ... one that relies on the folder gets the folder's one-line reason.
    with pytest.raises(pretrained.FolderError, match="give --model_family"):
        folders.fill_settings(_Settings(init_checkpoint=str(tmp_path)))
    filled = folders.fill_settings(_Settings(init_checkpoint=str(tmp_path), model_family="gpt"))
    assert filled.bert_config_file == str(tmp_path / "config.json")
