# coding=utf-8
"""Fill-mask and feature extraction."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from data import tokenization
from modeling import config as config_lib
from modeling import inference
from modeling import objectives

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tiny(sample_vocab_file):
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = config_lib.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
        type_vocab_size=2)
    keras.utils.set_random_seed(3)
    return config, tokenizer, objectives.build_bert_pretrainer(config)


def test_mask_markers_become_mask_tokens(tiny):
    _, tokenizer, _ = tiny
    tokens = inference.tokenize_with_masks(tokenizer, u"The baker [MASK] bread.面包[MASK]好")
    assert tokens == ["the", "baker", "[MASK]", "bread", ".", u"面", u"包", "[MASK]", u"好"]


def test_fill_mask_matches_the_mlm_head(tiny):
    config, tokenizer, model = tiny
    texts = [u"The baker opens the [MASK] at [MASK] in the morning.",
             u"今天天气很[MASK]。 ||| 我们去[MASK]园。", u"no mask here"]
    results = inference.fill_mask(model, tokenizer, texts, top_k=4, max_seq_length=32)
    assert [len(r["masks"]) for r in results] == [2, 2, 0]
    first = results[0]
    positions = [m["position"] for m in first["masks"]]
    assert [first["tokens"][p] for p in positions] == ["[MASK]", "[MASK]"]
    # The same probabilities through the pretrainer's own forward pass.
    ids = tokenizer.convert_tokens_to_ids(first["tokens"])
    features = {"input_ids": tf.constant([ids]), "input_mask": tf.ones([1, len(ids)], tf.int32),
                "segment_ids": tf.zeros([1, len(ids)], tf.int32),
                "masked_lm_positions": tf.constant([positions])}
    logits = model(features, training=False)["masked_lm_logits"]
    probs = tf.nn.softmax(logits[0], axis=-1).numpy()
    for mask, row in zip(first["masks"], probs):
        predicted = [p["probability"] for p in mask["predictions"]]
        assert predicted == sorted(predicted, reverse=True)
        expected_ids = np.argsort(-row)[:4]
        assert [tokenizer.vocab[p["token"]] for p in mask["predictions"]] == expected_ids.tolist()
        np.testing.assert_allclose(predicted, row[expected_ids], rtol=1e-5)
    # The pair's second segment has segment id 1 and its own [SEP].
    pair = results[1]
    assert pair["tokens"].count("[SEP]") == 2


def test_extract_features_layers_and_pooling(tiny):
    config, tokenizer, model = tiny
    encoder = model.encoder
    texts = [u"The river runs to the sea.", u"Fish swim. ||| 鱼在游。"]
    records = list(inference.extract_features(encoder, tokenizer, texts, layers=[-1, -2],
                                              max_seq_length=16, batch_size=1))
    assert [r["linex_index"] for r in records] == [0, 1]
    tokens = [f["token"] for f in records[0]["features"]]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    ids = tokenizer.convert_tokens_to_ids(tokens)
    out = encoder({"input_ids": tf.constant([ids]), "input_mask": tf.ones([1, len(ids)], tf.int32),
                   "segment_ids": tf.zeros([1, len(ids)], tf.int32)}, training=False)
    for i, feature in enumerate(records[0]["features"]):
        assert [layer["index"] for layer in feature["layers"]] == [-1, -2]
        np.testing.assert_allclose(feature["layers"][0]["values"],
                                   out["encoder_outputs"][-1][0, i].numpy(), atol=1e-5)
        np.testing.assert_allclose(feature["layers"][1]["values"],
                                   out["encoder_outputs"][-2][0, i].numpy(), atol=1e-5)
    np.testing.assert_allclose(records[0]["pooled_output"], out["pooled_output"][0], atol=1e-5)
    np.testing.assert_allclose(records[0]["mean_pooled_output"],
                               out["sequence_output"][0].numpy().mean(0), atol=1e-5)
