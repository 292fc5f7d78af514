# coding=utf-8
"""Attention and layer analysis: head statistics, pattern classes, maps, probes, the script."""

import glob
import json
import math
import os
import struct
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import tokenization
from data.processors.base import DataError
from modeling import bert as config_lib
from modeling import recipes
from modeling.analysis import attention
from modeling.analysis import probing

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOKENS = ["[CLS]", "the", "dog", ",", "runs", "[SEP]"]


def _heads_on_one_sentence():
    """[1 layer, 4 heads, 6, 6]: identity, all on [CLS], uniform, previous token."""
    n = len(TOKENS)
    identity = np.eye(n)
    on_cls = np.zeros((n, n))
    on_cls[:, 0] = 1.0
    uniform = np.full((n, n), 1.0 / n)
    previous = np.zeros((n, n))
    previous[0, 0] = 1.0
    for i in range(1, n):
        previous[i, i - 1] = 1.0
    return np.stack([identity, on_cls, uniform, previous])[None]


def _stats(probs, tokens, segments):
    stats = attention.HeadStatistics()
    stats.add(probs, tokens, segments)
    return stats.result()


def test_statistics_equal_hand_computed_values():
    result = _stats(_heads_on_one_sentence(), TOKENS, [0] * 6)
    get = lambda name: np.array(result[name][0])  # noqa: E731  (layer 0, per head)
    sixth = 1.0 / 6
    # identity, all-on-[CLS], uniform, previous token
    np.testing.assert_allclose(get("self"), [1.0, sixth, sixth, sixth])
    np.testing.assert_allclose(get("cls"), [sixth, 1.0, sixth, 2 * sixth])
    np.testing.assert_allclose(get("sep"), [sixth, 0.0, sixth, 0.0])
    np.testing.assert_allclose(get("punct"), [sixth, 0.0, sixth, sixth])  # "," at 3 (self / prev of 4)
    np.testing.assert_allclose(get("entropy"), [0.0, 0.0, math.log(6), 0.0], atol=1e-12)
    np.testing.assert_allclose(get("offset"), [0.0, -2.5, 0.0, -5.0 / 6], atol=1e-12)
    np.testing.assert_allclose(get("prev"), [0.0, sixth, 5 * sixth / 6, 5 * sixth])
    np.testing.assert_allclose(get("next"), [0.0, 0.0, 5 * sixth / 6, 0.0])
    np.testing.assert_allclose(get("local"), [1.0, 2 * sixth, (2 * 2 + 4 * 3) / 36.0, 1.0])
    np.testing.assert_allclose(get("special"), get("cls") + get("sep") + get("punct"))
    assert all(math.isnan(v) for v in result["same_segment"][0])  # no pair seen
    classes = attention.classify_heads(result)
    assert classes[0][0] == "diagonal" and classes[0][1] == "vertical"
    assert classes[0][3] == "diagonal"


def test_padding_is_never_counted_and_means_are_per_query_token():
    clean = _heads_on_one_sentence()
    padded = np.full((1, 4, 9, 9), 0.25)          # garbage everywhere ...
    padded[..., :6, :6] = clean * 0.7            # ... real rows leak 0.3 onto padding keys
    padded[..., :6, 6:] = 0.1
    assert np.allclose(padded[..., :6, :].sum(-1), 1.0)
    got = attention.sentence_statistics(padded[0], TOKENS, [0] * 6)
    want = attention.sentence_statistics(clean[0], TOKENS, [0] * 6)
    for name in attention.STATISTICS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-12, err_msg=name)
    # Means over query tokens of the corpus: uniform heads on texts of 4 and 6 tokens.
    stats = attention.HeadStatistics()
    short = ["[CLS]", "a", "b", "[SEP]"]
    stats.add(np.full((1, 1, 4, 4), 0.25), short, [0] * 4)
    stats.add(np.full((1, 1, 6, 6), 1.0 / 6), TOKENS, [0] * 6)
    entropy = stats.result()["entropy"][0][0]
    assert stats.num_queries == 10
    assert entropy == pytest.approx((4 * math.log(4) + 6 * math.log(6)) / 10)


def test_pattern_classes_of_constructed_heads_on_a_pair():
    words_a = ["w%d" % i for i in range(8)]
    tokens = ["[CLS]"] + words_a + ["[SEP]"] + words_a + ["[SEP]"]
    segments = [0] * 10 + [1] * 9
    n = len(tokens)
    seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
    nxt = np.zeros((n, n))
    for i in range(n):
        nxt[i, min(i + 1, n - 1)] = 1.0
    vertical = np.zeros((n, n))
    vertical[:, seps] = 0.5
    block = np.zeros((n, n))
    for i in range(n):
        own = [j for j in range(n) if segments[j] == segments[i] and tokens[j].startswith("w")]
        block[i, own] = 1.0 / len(own)
    spread = np.full((n, n), 1.0 / n)
    result = _stats(np.stack([nxt, vertical, block, spread])[None], tokens, segments)
    assert attention.classify_heads(result) == [["diagonal", "vertical", "block",
                                                 "heterogeneous"]]
    np.testing.assert_allclose(result["same_segment"][0][2], 1.0)
    np.testing.assert_allclose(result["same_segment"][0][3], (10 * 10 + 9 * 9) / (19.0 * 19))
    np.testing.assert_allclose(result["sep"][0][1], 1.0)
    assert result["offset"][0][0] == pytest.approx(18 / 19.0)
    # The thresholds are what decides: with a 'block' bar above 1, the block head
    # is heterogeneous.
    assert attention.classify_heads(result, {"block": 1.01})[0][2] == "heterogeneous"


@pytest.fixture(scope="module")
def tiny(sample_vocab_file):
    """A random 2-layer, 3-head BERT (width 24) over the bundled vocabulary."""
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = config_lib.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=24, num_hidden_layers=2,
        num_attention_heads=3, intermediate_size=48, max_position_embeddings=64,
        type_vocab_size=2)
    keras.utils.set_random_seed(5)
    return config, tokenizer, recipes.build_bert_pretrainer(config)


def test_attention_of_a_batch_equals_each_text_alone(tiny):
    _, tokenizer, model = tiny
    texts = ["The dog runs to the river.", "a cat ||| the old house"]
    together = list(attention.attention_probabilities(model.encoder, tokenizer, texts, 32))
    for text, (tokens, segments, probs) in zip(texts, together):
        (alone_tokens, _, alone), = attention.attention_probabilities(
            model.encoder, tokenizer, [text], 32)
        assert tokens == alone_tokens and probs.shape == (2, 3, len(tokens), len(tokens))
        np.testing.assert_allclose(probs, alone, atol=1e-5)
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    assert together[1][1] == [0, 0, 0, 0, 1, 1, 1, 1]  # [CLS] a cat [SEP] the old house [SEP]


def _png_size(path):
    with open(path, "rb") as f:
        header = f.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_map_grid_has_a_row_per_layer_and_a_column_per_head(tiny, tmp_path):
    _, tokenizer, model = tiny
    (tokens, _, probs), = attention.attention_probabilities(
        model.encoder, tokenizer, ["the big dog eats ."], 32)
    figure = attention.attention_grid_figure(probs, tokens)
    assert [ax.get_title() for ax in figure.axes] == [
        "layer %d head %d" % (l, h) for l in range(2) for h in range(3)]
    geometry = {ax.get_subplotspec().get_geometry()[:2] for ax in figure.axes}
    assert geometry == {(2, 3)}
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == tokens
    path = str(tmp_path / "maps" / "map.png")
    assert attention.save_attention_grid(probs, tokens, path) == (2, 3)
    cell = max(attention._MIN_CELL_INCHES, attention._INCHES_PER_TOKEN * len(tokens))
    width, height = _png_size(path)
    assert (width, height) == (round(3 * cell * attention.MAP_DPI),
                               round(2 * cell * attention.MAP_DPI))
    assert os.listdir(str(tmp_path / "maps")) == ["map.png"]  # no temporary left


def _tagged_corpus(vocab, count, seed):
    """Sentences 'DET (ADJ) NOUN VERB (DET) NOUN': every word has one tag."""
    lexicon = {"DET": ["the", "a", "this", "that"], "ADJ": ["big", "small", "red", "old", "new"],
               "NOUN": ["dog", "cat", "fish", "river", "sea", "tree", "house", "book"],
               "VERB": ["eats", "runs", "walks", "reads"]}
    assert all(w in vocab for words in lexicon.values() for w in words)
    rng = np.random.RandomState(seed)
    pick = lambda tag: (lexicon[tag][rng.randint(len(lexicon[tag]))], tag)  # noqa: E731
    sentences = []
    for _ in range(count):
        words = [pick("DET")] + ([pick("ADJ")] if rng.rand() < 0.5 else [])
        words += [pick("NOUN"), pick("VERB")] + ([pick("DET")] if rng.rand() < 0.5 else [])
        words.append(pick("NOUN"))
        sentences.append(words)
    return sentences


def _write_conll(path, sentences):
    with open(path, "w", encoding="utf-8") as f:
        for words in sentences:
            f.write("".join("%s X %s\n" % pair for pair in words) + "\n")


def test_probe_reads_tags_off_the_embeddings_of_held_out_sentences(tiny, tmp_path):
    """Budget fixed in advance: 120 training and 40 held-out sentences, 30 epochs
    of Adam (lr 0.01, L2 1e-3) per layer. The tag is a function of the word, so
    layer 0 (embeddings) must beat the majority tag by a wide margin on
    sentences the probe never saw."""
    _, tokenizer, model = tiny
    train_file, dev_file = str(tmp_path / "train.txt"), str(tmp_path / "dev.txt")
    _write_conll(train_file, _tagged_corpus(tokenizer.vocab, 120, seed=1))
    _write_conll(dev_file, _tagged_corpus(tokenizer.vocab, 40, seed=2))
    train = probing.read_tagged_file(train_file)
    dev = probing.read_tagged_file(dev_file)
    assert train[0].tags[0] == "DET" and len(train) == 120
    results = probing.probe_layers(model.encoder, tokenizer, train, dev, max_seq_length=16)
    assert [r["name"] for r in results["layers"]] == ["embeddings", "layer_1", "layer_2"]
    assert results["majority_tag"] == "NOUN"
    baseline = results["majority_baseline_dev_accuracy"]
    assert 0.3 < baseline < 0.5  # NOUN: 2 of about 5 words
    assert results["layers"][0]["dev_accuracy"] >= max(0.9, baseline + 0.4)
    assert results["num_dev_words"] == sum(len(s.words) for s in dev)
    probing.write_probe_results(results, str(tmp_path / "out"))
    with open(str(tmp_path / "out" / "probe_results.json")) as f:
        assert json.load(f)["layers"][0]["dev_accuracy"] == results["layers"][0]["dev_accuracy"]
    assert _png_size(str(tmp_path / "out" / "probe_accuracy.png"))[0] > 100


def test_read_texts_keeps_the_first_max_texts_and_refuses_fewer_than_one(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("one\n\ntwo\nthree\n", encoding="utf-8")
    assert attention.read_texts(str(path)) == ["one", "two", "three"]
    assert attention.read_texts(str(path), 2) == ["one", "two"]
    for bad in (0, -1):  # -1 used to drop the last text, 0 to keep every one
        with pytest.raises(ValueError, match="--max_texts=%d: expected a positive number" % bad):
            attention.read_texts(str(path), bad)


def test_tagged_file_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("the DET\ndog\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.txt:2: expected a token and its tag in the last column"):
        probing.read_tagged_file(str(bad))
    pos = tmp_path / "pos.txt"
    pos.write_text("the DET\ndog NOUN\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"pos.txt:1: tag 'DET' is not in the bio scheme"):
        probing.read_tagged_file(str(pos), "bio")
    conll_2003 = tmp_path / "conll.txt"
    conll_2003.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n",
                          encoding="utf-8")
    (sentence,) = probing.read_tagged_file(str(conll_2003), tag_column=1)
    assert (sentence.words, sentence.tags) == (["EU", "rejects"], ["NNP", "VBZ"])
    assert probing.read_tagged_file(str(conll_2003), "bio")[0].tags == ["B-ORG", "O"]
    with pytest.raises(DataError, match=r"conll.txt:3: tag 'NNP' is not in the bio scheme"):
        probing.read_tagged_file(str(conll_2003), "bio", tag_column=1)
    train, dev = probing.split_sentences(probing.read_tagged_file(str(pos)) * 5, 0.2)
    assert (len(train), len(dev)) == (4, 1)


def test_script_writes_statistics_json_pngs_and_tensorboard(tiny, tmp_path, sample_vocab_file):
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    config, tokenizer, model = tiny
    model_dir = tmp_path / "tiny"
    model_dir.mkdir()
    config.to_json_file(str(model_dir / "bert_config.json"))
    prefix = checkpoints.save_google_checkpoint(model, str(model_dir / "bert_model.ckpt"))
    texts = ["The dog runs to the river.", "A cat reads a book. ||| The old tree, the sea."]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n\n", encoding="utf-8")
    out = tmp_path / "stats"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "analyze_attention.py"), "--mode=stats",
         "--input_file=%s" % (tmp_path / "texts.txt"), "--output_dir=%s" % out,
         "--bert_config_file=%s" % (model_dir / "bert_config.json"),
         "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
         "--max_seq_length=32"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Head patterns over 2 texts" in result.stdout
    with open(str(out / "attention_stats.json")) as f:
        summary = json.load(f)
    # The script's numbers are those of the same weights in this process.
    expected = attention.corpus_statistics(model.encoder, tokenizer, texts, 32).result()
    for name in ("entropy", "cls", "offset", "same_segment"):
        np.testing.assert_allclose(summary["statistics"][name], expected[name], atol=1e-4)
    assert summary["heads_per_layer"] == [3, 3] and summary["num_texts"] == 2
    assert sum(summary["pattern_counts"].values()) == 6
    pngs = sorted(os.path.basename(p) for p in glob.glob(str(out / "*.png")))
    assert pngs == sorted(["stat_%s.png" % s for s in attention.STATISTICS] + ["pattern.png"])
    events = glob.glob(str(out / "tensorboard" / "events.out.tfevents.*"))
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(events[0]) for v in e.summary.value}
    assert {"stat_entropy", "pattern"} <= tags


def test_albert_encoder_is_analysed_the_same_way(tmp_path, sample_vocab_file):
    """ALBERT (shared layers, factorised embeddings) through the family registry:
    a map per layer, the statistics and the probe features (hidden width, every depth)."""
    from modeling import albert  # pylint: disable=g-import-not-at-top
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = albert.AlbertConfig(
        vocab_size=len(tokenizer.vocab), embedding_size=8, hidden_size=16, num_hidden_layers=3,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    config_file = tmp_path / "albert_config.json"
    config.to_json_file(str(config_file))
    keras.utils.set_random_seed(7)
    encoder, _ = attention.load_encoder("albert", str(config_file), None, sample_vocab_file,
                                        True, 32)
    assert type(encoder).__name__ == "AlbertEncoder"
    texts = ["the dog eats .", "a cat ||| the sea"]
    stats = attention.corpus_statistics(encoder, tokenizer, texts, 32)
    result = stats.result()
    assert np.array(result["entropy"]).shape == (3, 2) and stats.num_queries == 6 + 7
    assert np.all(np.array(result["entropy"]) <= math.log(7) + 1e-6)
    sentences = probing.read_tagged_file(str(_conll_file(tmp_path)))
    features, tags = probing.layer_features(encoder, tokenizer, sentences, 16)
    assert [f.shape for f in features] == [(5, 16)] * 4 and tags == ["DET", "NOUN", "VERB",
                                                                      "DET", "NOUN"]
    with pytest.raises(ValueError, match="--max_seq_length=64: expected 3 .. "
                                         "max_position_embeddings=32"):
        attention.load_encoder("albert", str(config_file), None, sample_vocab_file, True, 64)


def _conll_file(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("the DET\ndog NOUN\neats VERB\n\na DET\ncat NOUN\n", encoding="utf-8")
    return path


def test_layers_with_different_head_counts_pruned_heads(tmp_path):
    """After head pruning a layer may keep fewer heads: statistics and pictures per layer."""
    heads = _heads_on_one_sentence()[0]
    probs = [heads[:2], heads[2:3]]                     # layer 0: 2 heads, layer 1: 1 head
    stats = attention.HeadStatistics()
    stats.add(probs, TOKENS, [0] * 6)
    result = stats.result()
    assert [len(row) for row in result["entropy"]] == [2, 1]
    assert result["entropy"][1][0] == pytest.approx(math.log(6))
    assert attention.classify_heads(result) == [["diagonal", "vertical"], ["vertical"]]
    summary = attention.write_statistics(stats, str(tmp_path))
    assert summary["heads_per_layer"] == [2, 1]
    assert summary["statistics"]["same_segment"] == [[None, None], [None]]
    assert not os.path.exists(str(tmp_path / "stat_same_segment.png"))  # no pair seen
    assert attention.save_attention_grid(probs, TOKENS, str(tmp_path / "grid.png")) == (2, 2)
