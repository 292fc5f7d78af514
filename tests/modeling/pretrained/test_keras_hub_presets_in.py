"""keras-hub presets in for RoBERTa, ALBERT, DistilBERT and GPT-2 (BERT's are in test_pretrained.py).

Each case builds a small random keras-hub backbone and tokenizer here
(keras-hub's own classes over tiny vocabulary files written by the test:
byte-level BPE, WordPiece, SentencePiece; nothing is downloaded) and saves
them with keras-hub's `save_to_preset`. The folder is then read through
this project's loaders (`modeling.pretrained.from_pretrained`, and the
`--init_checkpoint=FOLDER` path of the scripts: `fill_settings`, the
family's config loader, `init_from_checkpoint`, and `run/extract_features.py`
given the folder alone), and must give keras-hub's hidden states (within
1e-4) and keras-hub's token ids, framing included (keras-hub's classifier
preprocessors); a model of this project written out with `save_keras_hub`
reads back with the same outputs.
"""

import dataclasses
import io
import json
import os
import shutil
import sys

import numpy as np
import pytest

import script_runner
from modeling import checkpoints
from modeling import pretrained
from modeling import registry
from modeling.checkpoints import CheckpointFormatError
from modeling.pretrained import folders

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

TEXTS = [
    ("The baker opens the shop.", None),
    ("By seven o'clock, 12 loaves", "are cooling on a rack!"),
    ("Accents: café Über", "  spaces   here "),
    ("a [MASK] <mask> b", "<|endoftext|> end"),
]

# family -> (keras-hub backbone class, classifier preprocessor, vocabulary asset)
CASES = {
    "roberta": ("RobertaBackbone", "RobertaTextClassifierPreprocessor", "vocabulary.json"),
    "albert": ("AlbertBackbone", "AlbertTextClassifierPreprocessor", "vocabulary.spm"),
    "distilbert": ("DistilBertBackbone", "DistilBertTextClassifierPreprocessor",
                   "vocabulary.txt"),
    "gpt2": ("GPT2Backbone", None, "vocabulary.json"),
}
MAX_LENGTH = 64


@dataclasses.dataclass
class _Settings:
    """The fields of a job that a model folder fills."""
    init_checkpoint: str
    bert_config_file: str = None
    vocab_file: str = None
    merges_file: str = None
    do_lower_case: bool = False
    model_family: str = registry.DEFAULT_FAMILY


def _corpus():
    with open(os.path.join(REPO, "data", "sample", "sample_en.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _bpe_files(folder, specials):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_corpus(), vocab_size=400, special_tokens=specials,
                            show_progress=False)
    bpe.save_model(folder)
    return os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")


def _wordpiece_file(folder):
    words = {}
    for line in _corpus():
        for word in line.lower().replace(".", " . ").replace(",", " , ").split():
            words[word] = words.get(word, 0) + 1
    chars = sorted({c for word in words for c in word} | set("!'[]<>|"))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    vocab += [w for w in sorted(words, key=lambda w: (-words[w], w))[:150] if w not in vocab]
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in vocab))
    return path, len(vocab)


def _spiece_file(folder):
    import sentencepiece  # pylint: disable=import-outside-toplevel
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus()), model_writer=model, vocab_size=300,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1, minloglevel=2)
    path = os.path.join(folder, "spiece.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


def _spread(backbone, seed):
    """Weights large enough that the layers mix (keras-hub initialises them at 0.02)."""
    rng = np.random.RandomState(seed)
    for variable in backbone.weights:
        value = rng.normal(0.0, 0.2, tuple(variable.shape))
        if variable.path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype("float32"))


def _keras_hub_preset(family, root):
    """(preset folder, backbone, tokenizer): keras-hub's own, saved with `save_to_preset`."""
    import keras_hub  # pylint: disable=import-outside-toplevel
    models = keras_hub.models
    files = os.path.join(root, "files")
    os.makedirs(files)
    size = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                max_sequence_length=MAX_LENGTH, dropout=0.0)
    if family == "roberta":
        vocab, merges = _bpe_files(files, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        tokenizer = models.RobertaTokenizer(vocabulary=vocab, merges=merges)
        backbone = models.RobertaBackbone(vocabulary_size=tokenizer.vocabulary_size(), **size)
    elif family == "gpt2":
        vocab, merges = _bpe_files(files, ["<|endoftext|>"])
        tokenizer = models.GPT2Tokenizer(vocabulary=vocab, merges=merges)
        # keras-hub's GPT-2 converter (save_keras_hub) builds 4 * hidden_dim only.
        backbone = models.GPT2Backbone(vocabulary_size=tokenizer.vocabulary_size(),
                                       **dict(size, intermediate_dim=64))
    elif family == "distilbert":
        vocab, vocab_size = _wordpiece_file(files)
        tokenizer = models.DistilBertTokenizer(vocabulary=vocab, lowercase=True)
        backbone = models.DistilBertBackbone(vocabulary_size=vocab_size, **size)
    else:
        tokenizer = models.AlbertTokenizer(proto=_spiece_file(files))
        # Four layers in two groups of two inner layers: the shared blocks' mapping.
        backbone = models.AlbertBackbone(
            vocabulary_size=tokenizer.vocabulary_size(), embedding_dim=8, num_groups=2,
            num_inner_repetitions=2, **dict(size, num_layers=4))
    _spread(backbone, seed=sorted(CASES).index(family))
    folder = os.path.join(root, "preset")
    backbone.save_to_preset(folder)
    tokenizer.save_to_preset(folder)
    return folder, backbone, tokenizer


@pytest.fixture(scope="module", params=sorted(CASES))
def preset(request, tmp_path_factory):
    family = request.param
    folder, backbone, tokenizer = _keras_hub_preset(family, str(tmp_path_factory.mktemp(family)))
    model, ours = pretrained.from_pretrained(folder)
    return family, folder, backbone, tokenizer, model, ours


def _batch(tokenizer, texts):
    encoded = [tokenizer.encode(a, b) for a, b in texts]
    width = max(len(e.input_ids) for e in encoded)
    assert width <= MAX_LENGTH
    ids = np.full((len(encoded), width), tokenizer.pad_id, np.int32)
    segments = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, :len(e.input_ids)] = e.input_ids
        segments[i, :len(e.input_ids)] = e.segment_ids
        mask[i, :len(e.input_ids)] = 1
    return ids, segments, mask


def _theirs(backbone, ids, segments, mask):
    inputs = {"token_ids": ids, "padding_mask": mask}
    if "segment_ids" in [i.name for i in backbone.inputs]:
        inputs["segment_ids"] = segments
    out = backbone(inputs)
    return out if isinstance(out, dict) else {"sequence_output": out}


def _ours(model, ids, segments, mask):
    out = model({"input_ids": ids, "segment_ids": segments, "input_mask": mask})
    return out if isinstance(out, dict) else {"sequence_output": out}


def _assert_same_outputs(model, backbone, tokenizer, atol=1e-4):
    ids, segments, mask = _batch(tokenizer, TEXTS)
    theirs = _theirs(backbone, ids, segments, mask)
    ours = _ours(model, ids, segments, mask)
    keep = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours["sequence_output"])[keep],
                               np.asarray(theirs["sequence_output"])[keep], atol=atol, rtol=0)
    if "pooled_output" in theirs:  # ALBERT's tanh pooler on [CLS]
        np.testing.assert_allclose(np.asarray(ours["pooled_output"]),
                                   np.asarray(theirs["pooled_output"]), atol=atol, rtol=0)


def _keras_hub_ids(tokenizer, text):
    return [int(i) for i in np.asarray(tokenizer(text))]


def _assert_keras_hub_tokens(family, keras_tokenizer, ours):
    import keras_hub  # pylint: disable=import-outside-toplevel
    for a, b in TEXTS:
        for text in (t for t in (a, b) if t is not None):
            assert ours.encode(text, add_special_tokens=False).input_ids == \
                _keras_hub_ids(keras_tokenizer, text), (family, text)
    preprocessor_class = CASES[family][1]
    if preprocessor_class is None:  # GPT-2: no framing, in keras-hub's tokenizer and ours
        for a, _ in TEXTS:
            assert ours.encode(a).input_ids == _keras_hub_ids(keras_tokenizer, a)
        return
    preprocessor = getattr(keras_hub.models, preprocessor_class)(
        tokenizer=keras_tokenizer, sequence_length=2 * MAX_LENGTH)
    for a, b in TEXTS:
        packed = preprocessor(x=a if b is None else (a, b))
        keep = np.asarray(packed["padding_mask"]).astype(bool)
        encoded = ours.encode(a, b)
        assert [int(i) for i in np.asarray(packed["token_ids"])[keep]] == encoded.input_ids, \
            (family, a, b)
        if "segment_ids" in packed:
            assert [int(i) for i in np.asarray(packed["segment_ids"])[keep]] == \
                encoded.segment_ids, (family, a, b)


# ------------------------------------------------------------------ reading


def test_preset_loads_with_keras_hubs_outputs_and_tokens(preset):
    family, folder, backbone, keras_tokenizer, model, ours = preset
    inspected = pretrained.inspect(folder)
    assert (inspected.kind, inspected.family.name) == ("keras_hub", family)
    assert inspected.vocab_file.endswith(CASES[family][2])
    _assert_keras_hub_tokens(family, keras_tokenizer, ours)
    _assert_same_outputs(model, backbone, ours)


def test_preset_is_an_init_checkpoint_of_every_job(preset):
    family, folder, backbone, _, _, ours = preset
    filled = folders.fill_settings(_Settings(init_checkpoint=folder))
    assert filled.model_family == family
    assert filled.bert_config_file == os.path.join(folder, "config.json")
    assets = os.path.join(folder, "assets", "tokenizer")
    assert filled.vocab_file == os.path.join(assets, CASES[family][2])
    assert filled.merges_file == (os.path.join(assets, "merges.txt")
                                  if family in ("roberta", "gpt2") else None)
    family_object = registry.families.get(family)
    config = family_object.load_config(filled.bert_config_file)
    model = pretrained.loading.build_model(family_object, config)
    report = checkpoints.init_from_checkpoint(model, folder)
    assert report.format == "keras_hub"
    tokenizer = folders.published_folder(filled).tokenizer()
    assert tokenizer.encode(*TEXTS[1]).input_ids == ours.encode(*TEXTS[1]).input_ids
    # The fine-tuning jobs frame their examples with the preset's own tokenizer.
    from modeling.training import job as job_lib  # pylint: disable=import-outside-toplevel
    job_tokenizer = job_lib.folder_tokenizer(filled, config)
    assert job_tokenizer is not None and type(job_tokenizer) is type(ours)
    assert job_tokenizer.encode(*TEXTS[1]) == ours.encode(*TEXTS[1])
    _assert_same_outputs(model, backbone, tokenizer)


def test_a_script_reads_the_preset_alone(preset, tmp_path):
    family, folder, backbone, _, _, ours = preset
    text = TEXTS[0][0]
    (tmp_path / "in.txt").write_text(text + "\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO, "run", "extract_features.py"),
         "--init_checkpoint=" + folder, "--input_file=%s" % (tmp_path / "in.txt"),
         "--output_file=%s" % out, "--layers=-1", "--max_seq_length=%d" % MAX_LENGTH],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    features = json.loads(out.read_text().splitlines()[0])["features"]
    ids, segments, mask = _batch(ours, [(text, None)])
    assert len(features) == ids.shape[1]
    if family != "gpt2":  # GPT-2's layers are its blocks' outputs, before ln_f
        values = np.array([f["layers"][0]["values"] for f in features])
        np.testing.assert_allclose(
            values, np.asarray(_theirs(backbone, ids, segments, mask)["sequence_output"])[0],
            atol=1e-4, rtol=0)


def test_model_written_as_a_preset_reads_back_the_same(preset, tmp_path):
    import keras_hub  # pylint: disable=import-outside-toplevel
    family, _, backbone, keras_tokenizer, model, ours = preset
    out = str(tmp_path / "again")
    pretrained.save_pretrained(model, ours, out, output_format="keras_hub")
    assert type(keras_hub.models.Backbone.from_preset(out)).__name__ == CASES[family][0]
    back, back_tokenizer = pretrained.from_pretrained(out)
    for a, b in TEXTS:
        assert back_tokenizer.encode(a, b) == ours.encode(a, b), (family, a, b)
    _assert_keras_hub_tokens(family, keras_tokenizer, back_tokenizer)
    _assert_same_outputs(back, backbone, ours)


def test_preset_converts_to_an_hf_folder_with_keras_hubs_outputs(preset, tmp_path):
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
    from modeling.pretrained import convert  # pylint: disable=import-outside-toplevel
    family, folder, backbone, _, _, ours = preset
    out = str(tmp_path / "hf")
    # What run/convert_checkpoint.py --init_checkpoint=PRESET --output_format=hf does.
    summary = convert.convert(folders.fill_settings(convert.ConvertSettings(
        init_checkpoint=folder, output_dir=out, output_format="hf")))
    assert summary["heads"] == []  # a preset holds the backbone only
    hf_model = transformers.AutoModel.from_pretrained(out).eval()
    ids, segments, mask = _batch(ours, TEXTS)
    inputs = {"input_ids": torch.tensor(ids, dtype=torch.long),
              "attention_mask": torch.tensor(mask, dtype=torch.long)}
    if family == "albert":  # the only one of the four with token types
        inputs["token_type_ids"] = torch.tensor(segments, dtype=torch.long)
    with torch.no_grad():
        hidden = hf_model(**inputs).last_hidden_state.numpy()
    keep = mask.astype(bool)
    np.testing.assert_allclose(
        hidden[keep], np.asarray(_theirs(backbone, ids, segments, mask)["sequence_output"])[keep],
        atol=1e-4, rtol=0)


def test_preset_holds_no_pretraining_heads(preset):
    family, folder, _, _, _, _ = preset
    family_object = registry.families.get(family)
    config = family_object.load_config(os.path.join(folder, "config.json"))
    if family == "gpt2":  # the causal LM head is the token table: nothing is missing
        model = pretrained.loading.build_model(family_object, config, ("causal_lm",))
        assert checkpoints.init_from_checkpoint(model, folder).missing_heads == []
        return
    model = pretrained.loading.build_model(family_object, config, ("masked_lm",))
    with pytest.raises(CheckpointFormatError) as error:
        checkpoints.init_from_checkpoint(model, folder)
    assert "holds the backbone only, no mlm head" in _one_line(error)
    report = checkpoints.init_from_checkpoint(model, folder, allow_missing_heads=True)
    assert "mlm" in report.missing_heads


# ---------------------------------------------------------------- bad input


def _one_line(error):
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_preset_of_another_family_is_one_line(preset, tmp_path):
    family, folder, _, _, _, _ = preset
    other = "gpt2" if family != "gpt2" else "roberta"
    other_family = registry.families.get(other)
    with pytest.raises(Exception) as error:  # the family's config error
        other_family.load_config(os.path.join(folder, "config.json"))
    message = _one_line(error)
    assert "config.json" in message and CASES[family][0] in message
    model = pretrained.loading.build_model(
        other_family, other_family.demo_config(100))
    with pytest.raises(CheckpointFormatError) as error:
        checkpoints.init_from_checkpoint(model, folder)
    message = _one_line(error)
    assert "config.json" in message and CASES[family][0] in message
    # A backbone no family reads is refused when the folder is inspected.
    unknown = tmp_path / "unknown"
    shutil.copytree(folder, unknown)
    values = json.loads((unknown / "config.json").read_text())
    values["class_name"] = "MambaBackbone"
    (unknown / "config.json").write_text(json.dumps(values))
    with pytest.raises(pretrained.FolderError) as error:
        pretrained.inspect(str(unknown))
    assert "'MambaBackbone'" in _one_line(error)


def test_missing_tokenizer_file_names_it(preset, tmp_path):
    family, folder, _, _, _, _ = preset
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    asset = broken / "assets" / "tokenizer" / CASES[family][2]
    os.remove(asset)
    with pytest.raises(pretrained.TokenizerFormatError) as error:
        pretrained.from_pretrained(str(broken))
    assert "%s: no such file" % asset in _one_line(error)
    os.remove(broken / "tokenizer.json")
    with pytest.raises(pretrained.TokenizerFormatError) as error:
        pretrained.inspect(str(broken)).tokenizer()
    assert "tokenizer.json: no such file" in _one_line(error)


def test_gpt2_preset_out_refuses_a_width_keras_hub_cannot_convert(tmp_path):
    from modeling.gpt2 import GPT2Config  # pylint: disable=import-outside-toplevel
    from modeling.pretrained import export  # pylint: disable=import-outside-toplevel
    family = registry.families.get("gpt2")
    model = pretrained.loading.build_model(family, GPT2Config(
        vocab_size=50, n_positions=16, n_embd=8, n_layer=1, n_head=2, n_inner=16))
    with pytest.raises(export.ExportError) as error:
        pretrained.save_pretrained(model, None, str(tmp_path / "out"), output_format="keras_hub")
    assert "4 * n_embd = 32" in _one_line(error)
    assert not os.path.exists(tmp_path / "out")
