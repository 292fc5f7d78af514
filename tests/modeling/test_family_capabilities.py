# coding=utf-8
"""Family capabilities are what the families register, and the shared tools offer them.

Head pruning (`Family.head_pruning`), attention maps (`Family.attention_maps`),
feature extraction (`Family.feature_extractor`) and text generation
(`registry.decoders`) are found in the registry: a family (or decoder)
registered by a test's own module is offered and used by the scripts, and
the shared modules name no family.
"""

import ast
import glob
import json
import os
import sys

import keras
import numpy as np
import pytest

import script_runner
from modeling import registry

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Runs a run/ script after importing the test's own parts (`fake_parts.py`
# next to this wrapper), as a user's module would register them.
WRAPPER = """
import os, runpy, sys
here, repo, script = os.path.dirname(os.path.abspath(__file__)), sys.argv[1], sys.argv[2]
sys.path[:0] = [here, os.path.join(repo, "run"), repo]
import fake_parts  # noqa: F401  registers the fake family and decoder
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
"""

FAKE_PARTS = """
from modeling import registry
from modeling.bert import BertConfig, BertEncoder, load_bert_config


def _features(settings, layers):
    with open(settings.input_file, encoding="utf-8") as f:
        texts = [line.rstrip("\\n") for line in f]
    records = ({"linex_index": i, "text": t, "layers": layers} for i, t in enumerate(texts))
    return texts, records, "fake features"


registry.families.register("fake_family", registry.Family(
    name="fake_family", config_class=BertConfig, load_config=load_bert_config,
    build_encoder=BertEncoder.from_config_object, demo_config=lambda vocab_size: None,
    attention_maps=True, feature_extractor=_features))


def _check(settings):
    if settings.max_new_tokens > 5:
        raise ValueError("--max_new_tokens=%d: the fake decoder writes at most 5"
                         % settings.max_new_tokens)


def _generate(settings, prompts):
    return [{"prompt": p, "prompt_ids": [], "generated_ids": [], "text": p[::-1]}
            for p in prompts]


registry.decoders.register("fake_decoder", registry.Decoder(
    name="fake_decoder", required_flags=("output_file",), input_flags=(),
    check=_check, generate=_generate))
"""


def _run_with_fake_parts(tmp_path, script, args):
    (tmp_path / "fake_parts.py").write_text(FAKE_PARTS, encoding="utf-8")
    wrapper = tmp_path / "with_fake_parts.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    return script_runner.run(
        [sys.executable, str(wrapper), REPO_ROOT, os.path.join(REPO_ROOT, "run", script)]
        + list(args), capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _tiny_bert(tmp_path, vocab_size):
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling.bert import BertConfig, BertEncoder  # pylint: disable=g-import-not-at-top
    config = BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=32, type_vocab_size=2)
    keras.utils.set_random_seed(4)
    encoder = BertEncoder.from_config_object(config)
    model_dir = tmp_path / "tiny_bert"
    model_dir.mkdir()
    config.to_json_file(str(model_dir / "bert_config.json"))
    prefix = checkpoints.save_google_checkpoint(encoder, str(model_dir / "bert_model.ckpt"))
    return str(model_dir / "bert_config.json"), prefix


# ------------------------------------------------------------ the built-ins


def test_the_built_in_families_register_their_capabilities():
    assert registry.families_with("head_pruning") == ["albert", "bert"]
    assert registry.families_with("attention_maps") == ["albert", "bert"]
    assert {"albert", "bert", "elmo"} <= set(registry.families_with("feature_extractor"))
    assert {"cove", "elmo"} <= set(registry.families_with("frozen_features"))
    assert {"gpt", "gpt2", "unilm"} <= set(registry.decoders.names())
    assert registry.families.get("albert").head_pruning.shared
    assert not registry.families.get("bert").head_pruning.shared
    assert registry.DEFAULT_FAMILY in registry.families
    assert registry.DEFAULT_DECODER in registry.decoders
    # The scripts' choices as they were: the default first.
    assert registry.default_first(["gpt", "gpt2", "unilm"], "gpt2") == ["gpt2", "gpt", "unilm"]
    assert registry.default_first(["albert", "bert"]) == ["bert", "albert"]
    assert registry.default_first(["albert", "cove"]) == ["albert", "cove"]


def test_families_register_their_presets_and_config_flags_take_a_preset(tmp_path,
                                                                       sample_vocab_file):
    """`Family.presets`: a config flag names a size instead of a file; the model gets the
    vocabulary's size; a name that is neither a file nor a preset is refused naming both."""
    from modeling.bert import BertConfig  # pylint: disable=g-import-not-at-top
    from modeling.recipes import pretraining  # pylint: disable=g-import-not-at-top
    from modeling import recipes  # pylint: disable=g-import-not-at-top
    from modeling.tasks import classifier_job  # pylint: disable=g-import-not-at-top
    assert {"albert", "bert", "gpt", "gpt2"} <= set(registry.families_with("presets"))
    bert = registry.families.get("bert")
    assert bert.config_from("bert_mini", vocab_size=77).to_dict() == BertConfig.from_preset(
        "L-4_H-256", vocab_size=77).to_dict()
    assert bert.config_from("bert_base").vocab_size == 30522  # the preset's own
    albert = registry.families.get("albert").config_from("albert_base", vocab_size=50)
    assert (albert.hidden_size, albert.embedding_size, albert.vocab_size) == (768, 128, 50)
    with pytest.raises(FileNotFoundError) as info:
        bert.config_from(str(tmp_path / "bert_bse"))
    assert str(info.value).startswith("%s: no such file, nor a preset of the bert family "
                                      "(L-2_H-128, " % (tmp_path / "bert_bse"))

    with open(sample_vocab_file, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\nthe river runs\tpos\nfish swim\tneg\n")
    job = classifier_job.ClassifierJob(
        task_name="generic", data_dir=str(data), do_train=True, output_dir=str(tmp_path / "o"),
        vocab_file=sample_vocab_file, bert_config_file="bert_tiny", max_seq_length=16)
    runner = classifier_job.ClassifierRunner(job)
    runner.check()
    assert (runner.config.hidden_size, runner.config.num_hidden_layers,
            runner.config.vocab_size) == (128, 2, vocab_size)
    assert not os.path.exists(tmp_path / "o")

    class Pipeline:  # pre-training's pipeline: the vocabulary it reads
        def vocab_size(self):
            return 123

    job = pretraining.PretrainingJob(bert_config_file="L-4_H-512")
    config = pretraining._load_config(recipes.load_recipe("bert"), job, Pipeline())  # pylint: disable=protected-access
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (512, 4, 123)


# ----------------------------------------------- a family registered in-process


@pytest.fixture
def fake_prunable_family():
    """A registered family whose heads are two units of two layers each (removed again after)."""
    from modeling.bert import BertConfig, BertEncoder, load_bert_config  # pylint: disable=g-import-not-at-top
    calls = []

    def units_of_config(config):
        calls.append(config)
        return [0, 0, 1, 1], [3, 5]

    family = registry.Family(
        name="fake_prunable", config_class=BertConfig, load_config=load_bert_config,
        build_encoder=BertEncoder.from_config_object, demo_config=lambda vocab_size: None,
        head_pruning=registry.HeadPruning(units_of_config=units_of_config,
                                          counts_key="fake_heads_per_unit",
                                          checkpoint_name="fake.ckpt", shared=True),
        attention_maps=True)
    registry.families.register("fake_prunable", family)
    try:
        yield family, calls
    finally:
        del registry.families._items["fake_prunable"]  # pylint: disable=protected-access


def test_a_registered_family_is_offered_and_used_for_head_pruning(fake_prunable_family):
    from modeling.analysis import attention  # pylint: disable=g-import-not-at-top
    from modeling.analysis import heads  # pylint: disable=g-import-not-at-top
    from modeling.tasks.classifier_job import ClassifierJob  # pylint: disable=g-import-not-at-top
    _, calls = fake_prunable_family
    assert heads.prunable_families() == ["bert", "albert", "fake_prunable"]
    assert "fake_prunable" in attention.attention_families()
    units = heads.head_units_of_config("the config", "fake_prunable")
    assert calls == ["the config"]
    assert units.unit_of_layer == [0, 0, 1, 1] and units.counts == [3, 5] and units.shared
    assert heads.parse_heads_for("2:4,3:4", units) == [(1, 4)]
    with pytest.raises(ValueError, match="^--model_family=gpt2: head pruning supports bert, "
                                         "albert and fake_prunable$"):
        heads.run(ClassifierJob(model_family="gpt2", bert_config_file="x",
                                init_checkpoint="x", output_dir="x"), heads_to_prune="1")
    with pytest.raises(ValueError, match="head pruning supports"):
        heads.head_units_of_config("the config", "gpt2")


def test_attention_analysis_refuses_a_family_without_attention_maps(tmp_path):
    from modeling.analysis import attention  # pylint: disable=g-import-not-at-top
    config = tmp_path / "config.json"
    config.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^--model_family=gpt2: its encoder gives no "
                                         r"attention maps \(those that do: bert, albert\)$"):
        attention.load_encoder("gpt2", str(config), None, "vocab.txt", True, 16)


# ------------------------------------------ a family registered by a user module


def test_extract_features_offers_and_uses_a_registered_extractor(tmp_path):
    inputs = tmp_path / "input.txt"
    inputs.write_text("one text\nanother ||| pair\n", encoding="utf-8")
    for name in ("vocab.txt", "config.json"):
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    result = _run_with_fake_parts(tmp_path, "extract_features.py", [
        "--model_family=fake_family", "--input_file=%s" % inputs, "--output_file=%s" % out,
        "--vocab_file=%s" % (tmp_path / "vocab.txt"), "--layers=-1,2",
        "--bert_config_file=%s" % (tmp_path / "config.json"), "--init_checkpoint=none"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote fake features of 2 inputs to %s" % out in result.stdout
    with open(out, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert records == [{"linex_index": 0, "text": "one text", "layers": [-1, 2]},
                       {"linex_index": 1, "text": "another ||| pair", "layers": [-1, 2]}]


def test_generate_offers_and_uses_a_registered_decoder(tmp_path):
    out = tmp_path / "out.jsonl"
    result = _run_with_fake_parts(tmp_path, "generate.py", [
        "--recipe=fake_decoder", "--prompt=abc", "--output_file=%s" % out,
        "--max_new_tokens=3"])
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out, encoding="utf-8") as f:
        assert [json.loads(line)["text"] for line in f] == ["cba"]
    # Its own checks, before anything is read or written.
    result = _run_with_fake_parts(tmp_path, "generate.py", [
        "--recipe=fake_decoder", "--prompt=abc", "--output_file=%s" % (tmp_path / "no.jsonl"),
        "--max_new_tokens=9"])
    assert result.returncode == 1
    assert "error: --max_new_tokens=9: the fake decoder writes at most 5" in result.stderr
    assert not (tmp_path / "no.jsonl").exists()
    # Its required flags.
    result = _run_with_fake_parts(tmp_path, "generate.py", ["--recipe=fake_decoder",
                                                            "--prompt=abc"])
    assert result.returncode == 1 and "error: --output_file is required" in result.stderr


def test_analyze_attention_offers_and_uses_a_registered_family(tmp_path, sample_vocab_file):
    from data import tokenization  # pylint: disable=g-import-not-at-top
    vocab_size = len(tokenization.FullTokenizer(sample_vocab_file, True).vocab)
    config_file, prefix = _tiny_bert(tmp_path, vocab_size)
    (tmp_path / "texts.txt").write_text("The dog runs.\n", encoding="utf-8")
    out = tmp_path / "maps"
    result = _run_with_fake_parts(tmp_path, "analyze_attention.py", [
        "--mode=maps", "--model_family=fake_family", "--input_file=%s" % (tmp_path / "texts.txt"),
        "--output_dir=%s" % out, "--bert_config_file=%s" % config_file,
        "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
        "--max_seq_length=16"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote 1 attention maps" in result.stdout
    with open(out / "attention_maps.json", encoding="utf-8") as f:
        assert json.load(f)[0]["layers"] == 2


# ------------------------------------------------- ALBERT's feature extraction


def test_extract_features_of_an_albert_checkpoint(tmp_path, sample_vocab_file):
    """`--model_family=albert`: the script's vectors are the encoder's own."""
    from data import tokenization  # pylint: disable=g-import-not-at-top
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling.albert import AlbertConfig, AlbertEncoder  # pylint: disable=g-import-not-at-top
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, True)
    config = AlbertConfig(vocab_size=len(tokenizer.vocab), embedding_size=8, hidden_size=16,
                          num_hidden_layers=4, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=32)
    keras.utils.set_random_seed(5)
    encoder = AlbertEncoder.from_config_object(config)
    model_dir = tmp_path / "tiny_albert"
    model_dir.mkdir()
    config.to_json_file(str(model_dir / "albert_config.json"))
    prefix = checkpoints.save_google_checkpoint(encoder, str(model_dir / "model.ckpt"))
    texts = ["The river runs to the sea.", "Fish swim. ||| The baker opens."]
    (tmp_path / "input.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "extract_features.py"),
         "--model_family=albert", "--bert_config_file=%s" % (model_dir / "albert_config.json"),
         "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
         "--input_file=%s" % (tmp_path / "input.txt"), "--output_file=%s" % out,
         "--max_seq_length=16"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote features of 2 inputs" in result.stdout
    with open(out, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    expected = list(inference.extract_features(encoder, tokenizer, texts, max_seq_length=16))
    assert len(records) == 2
    for record, want in zip(records, expected):
        assert [t["token"] for t in record["features"]] == [t["token"] for t in want["features"]]
        assert [l["index"] for l in record["features"][0]["layers"]] == [-1, -2, -3, -4]
        for got_token, want_token in zip(record["features"], want["features"]):
            for got, exp in zip(got_token["layers"], want_token["layers"]):
                np.testing.assert_allclose(got["values"], exp["values"], atol=1e-5)
        np.testing.assert_allclose(record["pooled_output"], want["pooled_output"], atol=1e-5)
    # A layer the model does not have is refused before anything is written.
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "extract_features.py"),
         "--model_family=albert", "--bert_config_file=%s" % (model_dir / "albert_config.json"),
         "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
         "--input_file=%s" % (tmp_path / "input.txt"), "--output_file=%s" % (tmp_path / "x"),
         "--layers=5"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert "--layers has 5 but the model has 4 layers" in result.stderr


# ------------------------------------------------ no family named in shared code

# The shared modules made family-agnostic: they find the families' parts in
# the registry (docstrings and help texts may name families as examples).
SHARED_MODULES = (
    sorted(glob.glob(os.path.join(REPO_ROOT, "modeling", "analysis", "*.py")))
    + sorted(glob.glob(os.path.join(REPO_ROOT, "modeling", "serving", "*.py")))
    + [os.path.join(REPO_ROOT, "run", name + ".py")
       for name in ("generate", "extract_features", "analyze_attention", "match")]
    + [os.path.join(REPO_ROOT, "modeling", "tasks", name + ".py")
       for name in ("classification", "multiple_choice", "multitask", "siamese", "span_qa",
                    "tagging")])

KNOWN_NAMES = {"bert", "albert", "gpt2", "gpt", "unilm", "elmo", "xlnet", "mass", "ulmfit",
               "cove", "roberta", "spanbert"}


def _docstrings(tree):
    """The string statements of `tree` (docstrings and other bare strings)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)}


def _family_names_in(path, names):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            value = node.value
            if value in names or any(value == "modeling." + n or value.startswith("modeling.%s."
                                                                                   % n)
                                     for n in names):
                found.append((node.lineno, repr(value)))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".")
            if parts[0] == "modeling" and len(parts) > 1 and parts[1] in names:
                found.append((node.lineno, "from %s import ..." % module))
            if module == "modeling":
                found.extend((node.lineno, "from modeling import %s" % a.name)
                             for a in node.names if a.name in names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "modeling" and len(parts) > 1 and parts[1] in names:
                    found.append((node.lineno, "import %s" % alias.name))
    return found


def test_shared_modules_name_no_family():
    names = KNOWN_NAMES | set(registry.families.names()) | set(registry.decoders.names())
    assert len(SHARED_MODULES) > 10
    offenders = {os.path.relpath(path, REPO_ROOT): found for path in SHARED_MODULES
                 for found in [_family_names_in(path, names)] if found}
    assert not offenders, offenders


def test_the_name_check_sees_names(tmp_path):
    """The check above finds a literal, a `modeling.<family>` import and a module path."""
    path = tmp_path / "module.py"
    path.write_text('"""Docs may say "bert"."""\n'
                    'from modeling.albert import config\n'
                    'from modeling import elmo\n'
                    'import modeling.gpt2.network\n'
                    'FAMILY = "unilm"\n'
                    'PACKAGE = "modeling.xlnet"\n'
                    'HELP = "bert: a BERT encoder"\n', encoding="utf-8")
    assert [line for line, _ in _family_names_in(str(path), KNOWN_NAMES)] == [2, 3, 4, 5, 6]
