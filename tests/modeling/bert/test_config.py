"""Tests for modeling.bert.config.BertConfig: Google's fields, files and presets."""

import json
import os

import pytest

from modeling.bert import config as config_lib
from modeling.bert.config import BertConfig, BertConfigError, list_presets

# bert_config.json of google-research/bert's chinese_L-12_H-768_A-12 release:
# it carries keys the encoder does not use, which must survive a round trip.
CHINESE_CONFIG = {
    "attention_probs_dropout_prob": 0.1,
    "directionality": "bidi",
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
    "type_vocab_size": 2,
    "vocab_size": 21128,
}


def test_defaults_are_googles():
    config = BertConfig(vocab_size=30522)
    assert config.to_dict() == {
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 16,
        "initializer_range": 0.02,
    }
    assert config.attention_head_size == 64
    assert config.extra == {}


def test_from_dict_keeps_unknown_keys_and_known_values():
    config = BertConfig.from_dict(CHINESE_CONFIG)
    assert config.vocab_size == 21128
    assert config.type_vocab_size == 2
    assert config.extra["directionality"] == "bidi"
    assert config.extra["pooler_type"] == "first_token_transform"
    assert config.to_dict() == CHINESE_CONFIG
    # Known fields come first, in Google's order, then the extras.
    keys = list(config.to_dict())
    assert keys[:11] == list(BertConfig(vocab_size=1).to_dict())
    assert keys[11:] == [
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
    ]


def test_json_file_round_trip_preserves_unknown_keys(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(CHINESE_CONFIG, indent=2))
    config = BertConfig.from_json_file(str(path))

    out = tmp_path / "out" / "bert_config.json"
    out.parent.mkdir()
    config.to_json_file(str(out))
    assert json.loads(out.read_text()) == CHINESE_CONFIG
    assert BertConfig.from_json_file(out) == config
    assert json.loads(config.to_json_string()) == CHINESE_CONFIG


def test_extras_are_copied_not_shared():
    source = dict(CHINESE_CONFIG, nested={"a": [1, 2]})
    config = BertConfig.from_dict(source)
    config.to_dict()["nested"]["a"].append(3)
    source["nested"]["a"].append(4)
    assert config.extra["nested"] == {"a": [1, 2]}


def test_to_json_file_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "bert_config.json"
    BertConfig(vocab_size=10).to_json_file(path)
    assert os.listdir(tmp_path) == ["bert_config.json"]

    # Overwriting replaces the content.
    BertConfig(vocab_size=20).to_json_file(path)
    assert BertConfig.from_json_file(path).vocab_size == 20

    # A failure while publishing leaves the old file intact and no temp file.
    def failing_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(config_lib.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        BertConfig(vocab_size=30).to_json_file(path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["bert_config.json"]
    assert BertConfig.from_json_file(path).vocab_size == 20


def test_missing_file_error_names_the_file(tmp_path):
    path = tmp_path / "nope" / "bert_config.json"
    with pytest.raises(FileNotFoundError, match="nope/bert_config.json"):
        BertConfig.from_json_file(str(path))


def test_invalid_json_error_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"vocab_size": 10,, }')
    with pytest.raises(BertConfigError, match="broken.json.*not valid JSON"):
        BertConfig.from_json_file(str(path))


def test_wrong_type_error_names_file_and_field(tmp_path):
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"vocab_size": 10, "hidden_size": "768"}))
    with pytest.raises(BertConfigError, match="typo.json.*hidden_size"):
        BertConfig.from_json_file(str(path))


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"hidden_size": True}, "hidden_size"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
        ({"intermediate_size": 0}, "intermediate_size"),
        ({"hidden_dropout_prob": 1.0}, "hidden_dropout_prob"),
        ({"attention_probs_dropout_prob": "0.1"}, "attention_probs_dropout_prob"),
        ({"initializer_range": 0.0}, "initializer_range"),
        ({"hidden_act": 3}, "hidden_act"),
    ],
)
def test_invalid_values_are_rejected(changes, field):
    with pytest.raises(BertConfigError, match=field):
        BertConfig(vocab_size=10, **changes)


def test_hidden_size_must_divide_by_heads_error_names_both():
    with pytest.raises(ValueError, match=r"hidden_size.*100.*num_attention_heads.*12"):
        BertConfig(vocab_size=10, hidden_size=100, num_attention_heads=12)


def test_vocab_size_is_required_and_json_ints_are_normalised():
    with pytest.raises(BertConfigError, match="vocab_size"):
        BertConfig.from_dict({"hidden_size": 768})
    config = BertConfig.from_dict({"vocab_size": 99.0, "hidden_size": 768.0})
    assert config.vocab_size == 99 and isinstance(config.vocab_size, int)
    assert config.hidden_size == 768 and isinstance(config.hidden_size, int)


def test_replace_returns_a_validated_copy():
    config = BertConfig.from_dict(CHINESE_CONFIG)
    smaller = config.replace(num_hidden_layers=2)
    assert smaller.num_hidden_layers == 2 and config.num_hidden_layers == 12
    assert smaller.extra == config.extra
    with pytest.raises(BertConfigError):
        config.replace(num_attention_heads=7)


def test_preset_table_has_the_24_small_berts_plus_base_and_large():
    names = list_presets()
    small = [n for n in names if n.startswith("L-") and n != "L-24_H-1024"]
    assert len(small) == 24
    for layers in (2, 4, 6, 8, 10, 12):
        for hidden in (128, 256, 512, 768):
            config = BertConfig.from_preset(f"L-{layers}_H-{hidden}")
            assert config.num_hidden_layers == layers
            assert config.hidden_size == hidden
            assert config.num_attention_heads == hidden // 64
            assert config.intermediate_size == 4 * hidden
            assert config.vocab_size == 30522


@pytest.mark.parametrize(
    "alias, layers, hidden, heads, intermediate",
    [
        ("bert_tiny", 2, 128, 2, 512),
        ("bert_mini", 4, 256, 4, 1024),
        ("bert_small", 4, 512, 8, 2048),
        ("bert_medium", 8, 512, 8, 2048),
        ("bert_base", 12, 768, 12, 3072),
        ("bert_large", 24, 1024, 16, 4096),
    ],
)
def test_preset_aliases(alias, layers, hidden, heads, intermediate):
    assert alias in list_presets()
    config = BertConfig.from_preset(alias, vocab_size=21128)
    assert (
        config.num_hidden_layers,
        config.hidden_size,
        config.num_attention_heads,
        config.intermediate_size,
        config.vocab_size,
    ) == (layers, hidden, heads, intermediate, 21128)


def test_preset_overrides_and_unknown_name():
    config = BertConfig.from_preset("bert_tiny", vocab_size=99, hidden_dropout_prob=0.0)
    assert config.hidden_dropout_prob == 0.0 and config.vocab_size == 99
    with pytest.raises(KeyError, match="bert_huge"):
        BertConfig.from_preset("bert_huge")


# ------------------------------------------------------- schema of the files

TINY = {"vocab_size": 99, "hidden_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64}


def _load_error(tmp_path, values, loader=None):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    loader = loader or BertConfig.from_json_file
    with pytest.raises(BertConfigError) as info:
        loader(str(path))
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    return message


@pytest.mark.parametrize("loader", [BertConfig.from_json_file, config_lib.load_bert_config])
@pytest.mark.parametrize("field", sorted(TINY))
def test_a_file_without_a_structural_field_is_refused(tmp_path, loader, field):
    values = {k: v for k, v in TINY.items() if k != field}
    message = _load_error(tmp_path, values, loader)
    assert "missing required BERT field `%s`" % field in message
    # The same dict from Python keeps the defaults (presets, tests, replace()).
    if field != "vocab_size":
        assert BertConfig.from_dict(values).to_dict()[field] == BertConfig(1).to_dict()[field]


def test_a_missing_field_is_named_rather_than_a_check_against_its_default(tmp_path):
    # 100 is no multiple of the default 12 heads; the file simply lacks the heads.
    message = _load_error(tmp_path, {"vocab_size": 10, "hidden_size": 100})
    assert "missing required BERT fields `num_hidden_layers`, `num_attention_heads`, " \
           "`intermediate_size`" in message


@pytest.mark.parametrize("loader", [BertConfig.from_json_file, config_lib.load_bert_config])
def test_a_misspelt_key_is_refused_with_the_closest_known_key(tmp_path, loader):
    values = dict(TINY, hiddensize=48, hidden_dropout=0.2)
    message = _load_error(tmp_path, values, loader)
    assert "unknown BERT config keys `hiddensize` (did you mean `hidden_size`?), " \
           "`hidden_dropout` (did you mean `hidden_dropout_prob`?)" in message
    # Another family's config is no BERT config either.
    message = _load_error(tmp_path, dict(TINY, embedding_size=16), loader)
    assert "unknown BERT config key `embedding_size`" in message


def test_real_google_and_hf_files_load_and_written_configs_load_back(tmp_path):
    import transformers  # pylint: disable=g-import-not-at-top
    # Google's Chinese release (directionality, pooler_*) and what transformers
    # writes today (classifier_dropout, use_cache, ...) and wrote before.
    hf_dir = tmp_path / "hf"
    transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            id2label={0: "a", 1: "b"}).save_pretrained(str(hf_dir))
    hf = json.loads((hf_dir / "config.json").read_text())
    old_hf = dict(hf, _name_or_path="bert-base-uncased", architectures=["BertForMaskedLM"],
                  gradient_checkpointing=False, torch_dtype="float32", output_past=True,
                  bos_token_id=0, eos_token_id=2, transformers_version="4.8.2")
    for values in (CHINESE_CONFIG, hf, old_hf):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(values))
        config = config_lib.load_bert_config(str(path))
        out = tmp_path / "out" / "bert_config.json"
        config.to_json_file(str(out))  # HF's layer_norm_eps comes back as layer_norm_epsilon
        assert BertConfig.from_json_file(str(out)) == config
        assert config_lib.load_bert_config(str(out)) == config
    # A misspelling in such a file is still found.
    message = _load_error(tmp_path, dict(hf, layer_norm_epsilonn=1e-12),
                          config_lib.load_bert_config)
    assert "`layer_norm_epsilonn` (did you mean `layer_norm_epsilon`?)" in message


@pytest.mark.parametrize("loader", [BertConfig.from_json_file, config_lib.load_bert_config])
def test_an_unknown_activation_is_refused_at_load_time_listing_the_known_ones(tmp_path,
                                                                              loader):
    message = _load_error(tmp_path, dict(TINY, hidden_act="nonsense"), loader)
    assert "`hidden_act` 'nonsense' is not a known activation; known: gelu, gelu_new" \
        in message
    with pytest.raises(BertConfigError, match="`hidden_act` 'quick_gelu' is not a known"):
        BertConfig(vocab_size=10, hidden_act="quick_gelu")
    assert BertConfig(vocab_size=10, hidden_act="GELU_new").hidden_act == "GELU_new"


def test_a_registered_activation_is_known_to_configs():
    from modeling.layers import activations  # pylint: disable=g-import-not-at-top
    with pytest.raises(BertConfigError, match="hard_tanh_for_test"):
        BertConfig(vocab_size=10, hidden_act="hard_tanh_for_test")
    activations.register_activation("hard_tanh_for_test", lambda x: x)
    try:
        assert BertConfig(vocab_size=10, hidden_act="hard_tanh_for_test").hidden_act \
            == "hard_tanh_for_test"
    finally:
        del activations._ACTIVATIONS["hard_tanh_for_test"]  # pylint: disable=protected-access


@pytest.mark.parametrize("loader", [BertConfig.from_json_file, config_lib.load_bert_config])
def test_deeply_nested_or_non_object_json_is_one_line(tmp_path, loader):
    path = tmp_path / "bert_config.json"
    path.write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(BertConfigError, match="not valid JSON: nested too deeply"):
        loader(str(path))
    message = _load_error(tmp_path, [TINY], loader)
    assert "expected a JSON object of BERT config fields, got a JSON list" in message
