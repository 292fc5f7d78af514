"""extract_features and predict_masked from a published folder alone, for every family.

References written here: tiny random HF folders (`save_pretrained`, no
downloads) with tokenizers learned on the bundled corpus -- RoBERTa
(`RobertaForMaskedLM`, byte-level BPE), DistilBERT (`DistilBertForMaskedLM`,
WordPiece), ALBERT (`AlbertForMaskedLM`, SentencePiece), GPT-2 (`GPT2Model`)
and XLNet (`XLNetModel`, SentencePiece). Each family's features must be
HF's hidden states of HF's tokens (special tokens and pair framing
included), and each masked-LM family's fill-mask HF's masked-LM
probabilities at the mask. The scripts run once each in a subprocess; the
rest goes through the library calls they make (`fill_settings`, then
`folders.published_folder` and `modeling.serving.folder_inference`).
"""

import io
import json
import os
import shutil
import sys

import numpy as np
import pytest
import sentencepiece
import torch
import transformers

import script_runner
from data import vocab_learning
from modeling.pretrained import folders
from modeling.serving import folder_inference
from modeling.serving import inference

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TEXTS = ["the baker opens the shop at dawn", "language models read text ||| and write it",
         "a longer sentence about the old river that runs past the town every day"]
MASKED = ["the baker opens the [MASK] at dawn", "a [MASK] reads ||| and [MASK] it"]


def _corpus():
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO, "data", "sample", name), encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    return lines


def _randomise(model, scale=0.2):
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(scale * torch.randn_like(p))
    return model.eval()


def _roberta(folder):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_corpus(), vocab_size=600, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(folder)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer"}, f)
    return transformers.RobertaForMaskedLM(transformers.RobertaConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=66,
        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2))


def _wordpiece_words():
    words = sorted({w for line in _corpus() for w in line.lower().split() if w.isalpha()})
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words


def _distilbert(folder):
    vocab = _wordpiece_words()
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "DistilBertTokenizer"}, f)
    return transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(
        vocab_size=len(vocab), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
        max_position_embeddings=64, activation="gelu"))


def _albert(folder):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([line.lower() for line in _corpus()]), model_writer=model,
        vocab_size=1500, model_type="unigram", character_coverage=0.9995, pad_id=0, unk_id=1,
        bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(model.getvalue())
    transformers.AlbertTokenizer(os.path.join(folder, "spiece.model")).save_pretrained(folder)
    return transformers.AlbertForMaskedLM(transformers.AlbertConfig(
        vocab_size=1500, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
        hidden_act="gelu"))


def _gpt2(folder):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_corpus(), vocab_size=600, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    bpe.save_model(folder)
    eot = bpe.token_to_id("<|endoftext|>")
    return transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=bpe.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=2,
        bos_token_id=eot, eos_token_id=eot))


def _xlnet(folder):
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(vocab_learning.learn_sentencepiece(_corpus(), 1200))
    return transformers.XLNetModel(transformers.XLNetConfig(
        vocab_size=1200, d_model=32, n_layer=2, n_head=4, d_inner=48, ff_activation="gelu",
        mem_len=None))


BUILDERS = {"roberta": _roberta, "distilbert": _distilbert, "albert": _albert, "gpt2": _gpt2,
            "xlnet": _xlnet}
MASKED_LM = ("roberta", "distilbert", "albert")
# HF's slow tokenizers for the SentencePiece families: their fast converters
# need a newer protobuf than TensorFlow pins (see test_albert_hf.py).
SLOW = {"albert": transformers.AlbertTokenizer, "xlnet": transformers.XLNetTokenizer}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    out = {}
    for family, build in BUILDERS.items():
        folder = str(tmp_path_factory.mktemp(family))
        model = _randomise(build(folder))
        model.save_pretrained(folder)
        tokenizer = (SLOW[family](os.path.join(folder, "spiece.model")) if family in SLOW
                     else transformers.AutoTokenizer.from_pretrained(folder))
        out[family] = (folder, model, tokenizer)
    return out


def _hf_encode(tokenizer, text):
    text_a, _, text_b = text.partition("|||")
    return tokenizer(text_a.strip(), text_b.strip() or None)


def _feature_settings(folder, input_file, **changes):
    values = dict(init_checkpoint=folder, input_file=input_file, output_file="unused.jsonl",
                  layers="-1,-2,0", batch_size=2, max_seq_length=48)
    values.update(changes)
    return folders.fill_settings(inference.FeatureExtractionSettings(**values))


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "input.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_features_are_hfs_hidden_states_of_hfs_tokens(family, published, input_file):
    folder, hf_model, hf_tokenizer = published[family]
    settings = _feature_settings(folder, input_file)
    assert settings.model_family == family
    found = folders.published_folder(settings)
    assert found is not None and found.family.name == family
    texts, records, _ = folder_inference.folder_features(found, settings, [-1, -2, 0])
    records = list(records)
    assert [r["linex_index"] for r in records] == list(range(len(TEXTS))) and texts == TEXTS
    base = getattr(hf_model, hf_model.base_model_prefix, hf_model)
    for text, record in zip(TEXTS, records):
        encoded = _hf_encode(hf_tokenizer, text)
        ids = encoded["input_ids"]
        assert [f["token"] for f in record["features"]] == \
            hf_tokenizer.convert_ids_to_tokens(ids), text
        inputs = {"input_ids": torch.tensor([ids])}
        if "token_type_ids" in encoded and family != "roberta":
            inputs["token_type_ids"] = torch.tensor([encoded["token_type_ids"]])
        blocks = []
        if family == "gpt2":
            # HF's last hidden state is after ln_f; the layers are the blocks'
            # outputs (`modeling.gpt2.network`): the last one is hooked.
            hook = base.h[-1].register_forward_hook(lambda m, i, o: blocks.append(o[0]))
        with torch.no_grad():
            hidden = base(**inputs, output_hidden_states=True).hidden_states
        if family == "gpt2":
            hook.remove()
        layers = len(hidden) - 1
        last = blocks[0] if blocks else hidden[-1]
        for want, index in ((last, -1), (hidden[-2], -2), (hidden[1], 0)):
            got = np.array([[l["values"] for l in f["layers"] if l["index"] == index][0]
                            for f in record["features"]])
            np.testing.assert_allclose(got, want[0].numpy(), atol=1e-4, err_msg=text)
        assert layers == 2
        mean = np.asarray(record["mean_pooled_output"])
        np.testing.assert_allclose(mean, hidden[-1][0].numpy().mean(0), atol=1e-4)
        # Only a pooler whose weights the folder holds: *ForMaskedLM and
        # GPT-2 / XLNet / DistilBERT folders have none.
        assert "pooled_output" not in record


@pytest.mark.parametrize("family", ["albert", "roberta"])
def test_a_folder_with_its_pooler_gives_hfs_pooled_output(family, published, input_file,
                                                          tmp_path):
    """HF's base model (`AlbertModel`, `RobertaModel`) holds the pooler its `*ForMaskedLM`
    lacks: then `pooled_output` is there, equal to HF's `pooler_output`."""
    source, masked_lm, hf_tokenizer = published[family]
    hf_model = _randomise(transformers.AutoModel.from_config(masked_lm.config))
    assert hf_model.pooler is not None
    folder = str(tmp_path / family)
    hf_model.save_pretrained(folder)
    for name in os.listdir(source):
        if not name.startswith(("config", "model")):
            shutil.copy(os.path.join(source, name), folder)
    settings = _feature_settings(folder, input_file)
    texts, records, _ = folder_inference.folder_features(
        folders.published_folder(settings), settings, [-1])
    for text, record in zip(texts, records):
        encoded = _hf_encode(hf_tokenizer, text)
        inputs = {"input_ids": torch.tensor([encoded["input_ids"]])}
        if family != "roberta":
            inputs["token_type_ids"] = torch.tensor([encoded["token_type_ids"]])
        with torch.no_grad():
            out = hf_model(**inputs)
        np.testing.assert_allclose([f["layers"][0]["values"] for f in record["features"]],
                                   out.last_hidden_state[0].numpy(), atol=1e-4, err_msg=text)
        np.testing.assert_allclose(record["pooled_output"], out.pooler_output[0].numpy(),
                                   atol=1e-4, err_msg=text)
    # The bare encoder has no masked-LM head to fill masks with: named, in one line.
    settings = folders.fill_settings(inference.FillMaskSettings(init_checkpoint=folder,
                                                                max_seq_length=48))
    with pytest.raises(ValueError, match=r"holds no masked-LM head \(.* is not in it\): "
                                         r"predict_masked needs a masked-LM folder \(HF's "
                                         r"\w+ForMaskedLM\)$"):
        folder_inference.folder_fill_mask(folders.published_folder(settings), settings, MASKED)


def test_fill_mask_is_hfs_masked_lm(published):
    for family in MASKED_LM:
        folder, hf_model, hf_tokenizer = published[family]
        settings = folders.fill_settings(inference.FillMaskSettings(
            init_checkpoint=folder, text=MASKED, top_k=3, max_seq_length=48))
        found = folders.published_folder(settings)
        results = folder_inference.folder_fill_mask(found, settings, MASKED)
        for text, result in zip(MASKED, results):
            encoded = _hf_encode(hf_tokenizer, text.replace("[MASK]", hf_tokenizer.mask_token))
            ids = encoded["input_ids"]
            assert result["tokens"] == hf_tokenizer.convert_ids_to_tokens(ids), (family, text)
            positions = [i for i, t in enumerate(ids) if t == hf_tokenizer.mask_token_id]
            assert [m["position"] for m in result["masks"]] == positions and positions
            inputs = {"input_ids": torch.tensor([ids])}
            if family == "albert":
                inputs["token_type_ids"] = torch.tensor([encoded["token_type_ids"]])
            with torch.no_grad():
                probs = torch.softmax(hf_model(**inputs).logits[0], -1).numpy()
            for mask, position in zip(result["masks"], positions):
                best = np.argsort(-probs[position], kind="stable")[:3]
                assert [p["token"] for p in mask["predictions"]] == \
                    hf_tokenizer.convert_ids_to_tokens(best.tolist()), (family, text)
                np.testing.assert_allclose([p["probability"] for p in mask["predictions"]],
                                           probs[position][best], atol=1e-4)


def test_the_folders_own_mask_token_and_bad_inputs(published, tmp_path):
    folder, _, _ = published["roberta"]
    settings = folders.fill_settings(inference.FillMaskSettings(init_checkpoint=folder,
                                                                max_seq_length=48))
    found = folders.published_folder(settings)
    same = folder_inference.folder_fill_mask(found, settings, ["the baker <mask> the shop",
                                                               "the baker [MASK] the shop"])
    assert same[0]["masks"] == same[1]["masks"] and same[0]["tokens"] == same[1]["tokens"]
    long_text = " ".join(["the baker opens the shop"] * 20) + " [MASK]"
    with pytest.raises(ValueError, match="beyond --max_seq_length=16"):
        folder_inference.folder_fill_mask(
            found, folders.fill_settings(inference.FillMaskSettings(
                init_checkpoint=folder, max_seq_length=16)), [long_text])
    # A family without an HF masked-LM model is refused before anything is built:
    # XLNet has a <mask> token but no head predicting it (its masks would be
    # filled by an untrained head), GPT-2 no mask token at all.
    for family in ("gpt2", "xlnet"):
        settings = folders.fill_settings(inference.FillMaskSettings(
            init_checkpoint=published[family][0], max_seq_length=48))
        with pytest.raises(ValueError, match=r"is a %s model, which has no masked-LM head: "
                                             r"predict_masked fills masks with albert, bert, "
                                             r"distilbert, roberta models" % family):
            folder_inference.folder_fill_mask(folders.published_folder(settings), settings,
                                              MASKED)
    # GPT-2's 64 positions bound --max_seq_length.
    gpt2, _, _ = published["gpt2"]
    path = tmp_path / "in.txt"
    path.write_text("hello\n")
    settings = _feature_settings(gpt2, str(path), max_seq_length=65)
    with pytest.raises(ValueError, match="--max_seq_length=65 exceeds the 64 tokens"):
        folder_inference.folder_features(folders.published_folder(settings), settings, None)
    settings = _feature_settings(gpt2, str(path))
    with pytest.raises(ValueError, match="--layers has 2 but the model .* has 2 layers"):
        folder_inference.folder_features(folders.published_folder(settings), settings, [2])
    # An explicit vocabulary in place of the folder's: Google's way, not the folder's.
    settings = _feature_settings(gpt2, str(path), vocab_file=str(path))
    assert folders.published_folder(settings) is None
    # RoBERTa's 66 rows hold 64 tokens (positions start past the padding id).
    roberta_settings = _feature_settings(folder, str(path), max_seq_length=65)
    with pytest.raises(ValueError, match="exceeds the 64 tokens"):
        folder_inference.folder_features(folders.published_folder(roberta_settings),
                                         roberta_settings, None)


def _run(script, *args, cwd):
    return script_runner.run([sys.executable, os.path.join(REPO, "run", script), *args],
                             capture_output=True, text=True, cwd=cwd, timeout=600)


def test_scripts_take_a_folder_alone(published, input_file, tmp_path):
    folder, hf_model, hf_tokenizer = published["roberta"]
    out = tmp_path / "features.jsonl"
    done = _run("extract_features.py", "--init_checkpoint=" + folder,
                "--input_file=" + input_file, "--output_file=" + str(out), "--layers=-1", "--max_seq_length=64",
                cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(TEXTS)
    ids = _hf_encode(hf_tokenizer, TEXTS[0])["input_ids"]
    with torch.no_grad():
        last = hf_model.roberta(torch.tensor([ids])).last_hidden_state[0].numpy()
    np.testing.assert_allclose([f["layers"][0]["values"] for f in records[0]["features"]], last,
                               atol=2e-4)
    masked = tmp_path / "masked.jsonl"
    done = _run("predict_masked.py", "--init_checkpoint=" + folder,
                "--text=" + MASKED[0], "--top_k=2", "--max_seq_length=64", "--output_file=" + str(masked),
                cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = [json.loads(line) for line in masked.read_text(encoding="utf-8").splitlines()]
    assert len(record["masks"]) == 1 and len(record["masks"][0]["predictions"]) == 2
    # A bad flag: one line naming it, nothing written.
    bad = tmp_path / "bad.jsonl"
    done = _run("extract_features.py", "--init_checkpoint=" + folder,
                "--input_file=" + input_file, "--output_file=" + str(bad), "--layers=-9", "--max_seq_length=64",
                cwd=str(tmp_path))
    errors = [l for l in done.stderr.splitlines() if l.startswith("extract_features: error")]
    assert done.returncode == 1 and len(errors) == 1 and "--layers" in errors[0], done.stderr
    assert not bad.exists()
