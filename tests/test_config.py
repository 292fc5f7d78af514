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
