# coding=utf-8
"""Fill-mask and feature extraction."""

import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import tokenization
from modeling import bert as config_lib
from modeling.serving import inference
from modeling import objectives
from modeling import recipes

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="module")
def tiny(sample_vocab_file):
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = config_lib.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
        type_vocab_size=2)
    keras.utils.set_random_seed(3)
    return config, tokenizer, recipes.build_bert_pretrainer(config)


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


def test_fill_mask_refuses_a_mask_cut_off_by_max_seq_length(tiny):
    _, tokenizer, model = tiny
    text = u"The baker opens the shop at six and [MASK] bread."
    tokens = inference.tokenize_with_masks(tokenizer, text)
    mask_piece = 1 + tokens.index("[MASK]")  # [CLS] is word piece 0
    ok = inference.fill_mask(model, tokenizer, [text], top_k=2, max_seq_length=mask_piece + 2)
    assert [m["position"] for m in ok[0]["masks"]] == [mask_piece]
    with pytest.raises(ValueError) as raised:
        inference.fill_mask(model, tokenizer, [u"a [MASK] here", text], top_k=2,
                            max_seq_length=mask_piece + 1)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("text 2 (%r): the [MASK] at word piece %d is beyond "
                              "--max_seq_length=%d" % (text, mask_piece, mask_piece + 1))
    # In a pair, the longer segment loses its end: here the [MASK] of B.
    pair = u"The baker opens. ||| The baker opens the shop at six and [MASK] bread."
    with pytest.raises(ValueError, match=r"the \[MASK\] at word piece %d is beyond "
                                         r"--max_seq_length=12"
                       % (len(tokenizer.tokenize(u"The baker opens.")) + 2 + mask_piece - 1)):
        inference.fill_mask(model, tokenizer, [pair], max_seq_length=12)


def test_fill_mask_top_k_must_be_positive(tiny):
    _, tokenizer, model = tiny
    for top_k in (0, -1):
        with pytest.raises(ValueError, match=r"^--top_k=%d: expected at least 1" % top_k):
            inference.fill_mask(model, tokenizer, [u"a [MASK]"], top_k=top_k)


def test_check_vocab_fits_is_predict_masked_rule():
    inference.check_vocab_fits(4000, 4000, "vocab.txt", "bert_config.json")
    for tokens in (3999, 4001, 21128):
        with pytest.raises(tokenization.VocabError) as raised:
            inference.check_vocab_fits(tokens, 4000, "vocab.txt", "bert_config.json")
        assert str(raised.value).startswith(
            "--vocab_file=vocab.txt has %d tokens but --bert_config_file=bert_config.json "
            "says vocab_size=4000" % tokens)
    with pytest.raises(tokenization.VocabError, match="but the model config says vocab_size=8"):
        inference.check_vocab_fits(7, 8, "v.txt")


def test_read_input_lines(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(u"\ufeffFirst line\r\n\nSecond ||| pair\nlast".encode("utf-8"))
    assert inference.read_input_lines(str(path)) == ["First line", "", "Second ||| pair", "last"]
    assert inference.read_input_lines(str(path), skip_blank=True) == [
        "First line", "Second ||| pair", "last"]
    path.write_bytes(b"good\nalso good\ncaf\xe9 au lait\n")
    with pytest.raises(ValueError) as raised:
        inference.read_input_lines(str(path))
    assert str(raised.value).startswith(
        "%s:3: not valid UTF-8 (byte 0xe9 at column 4)" % path)


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


def _run(script, args):
    result = script_runner.run([sys.executable, os.path.join(REPO_ROOT, "run", script)] + args,
                            capture_output=True, text=True, timeout=180,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_scripts_from_a_google_checkpoint(tmp_path, tiny, sample_vocab_file):
    """predict_masked.py and extract_features.py on a Google-format checkpoint."""
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    config, tokenizer, model = tiny
    model_dir = tmp_path / "uncased_tiny"
    model_dir.mkdir()
    config.to_json_file(str(model_dir / "bert_config.json"))
    prefix = checkpoints.save_google_checkpoint(model, str(model_dir / "bert_model.ckpt"))
    common = ["--bert_config_file=%s" % (model_dir / "bert_config.json"),
              "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix]

    out = str(tmp_path / "masks.jsonl")
    texts = [u"The baker opens the [MASK] at six.", u"今天天气很[MASK]。"]
    result = _run("predict_masked.py", common + ["--text=%s" % t for t in texts] +
                  ["--top_k=3", "--output_file=%s" % out])
    assert "[MASK] at" in result.stdout
    with open(out, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    expected = inference.fill_mask(model, tokenizer, texts, top_k=3)
    assert [r["text"] for r in records] == texts
    for record, exp in zip(records, expected):
        assert set(record) == {"text", "masks"}
        assert [m["position"] for m in record["masks"]] == [m["position"] for m in exp["masks"]]
        for got, want in zip(record["masks"], exp["masks"]):
            assert [p["token"] for p in got["predictions"]] == [p["token"] for p in want["predictions"]]
            np.testing.assert_allclose([p["probability"] for p in got["predictions"]],
                                       [p["probability"] for p in want["predictions"]], rtol=1e-4)

    inputs = tmp_path / "input.txt"
    inputs.write_text(u"The river runs to the sea.\nFish swim. ||| 鱼在游。\n", encoding="utf-8")
    features = str(tmp_path / "features.jsonl")
    _run("extract_features.py", common + ["--input_file=%s" % inputs, "--output_file=%s" % features,
                                           "--layers=-1,-2", "--max_seq_length=16"])
    with open(features, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    expected = list(inference.extract_features(model.encoder, tokenizer,
                                               [u"The river runs to the sea.", u"Fish swim. ||| 鱼在游。"],
                                               layers=[-1, -2], max_seq_length=16))
    assert [r["linex_index"] for r in records] == [0, 1]
    for record, exp in zip(records, expected):
        assert [t["token"] for t in record["features"]] == [t["token"] for t in exp["features"]]
        np.testing.assert_allclose(record["features"][1]["layers"][0]["values"],
                                   exp["features"][1]["layers"][0]["values"], atol=1e-5)
        np.testing.assert_allclose(record["mean_pooled_output"], exp["mean_pooled_output"], atol=1e-5)


def test_predict_masked_refuses_contradicting_casing(tmp_path, sample_vocab_file):
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "predict_masked.py"),
         "--bert_config_file=x.json", "--vocab_file=%s" % sample_vocab_file,
         "--init_checkpoint=/models/uncased_L-12_H-768_A-12/bert_model.ckpt",
         "--do_lower_case=False", "--text=a [MASK]"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert "uncased" in result.stderr and "Traceback" not in result.stderr


def _padded_batch(lengths, width, vocab_size, seed=0):
    rng = np.random.RandomState(seed)
    ids = np.zeros([len(lengths), width], np.int32)
    mask = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.randint(5, vocab_size, size=n)
        mask[row, :n] = 1
        segments[row, n // 2:n] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def test_compiled_encoder_cuts_padding_and_equals_the_eager_call(tiny):
    """Inputs padded to 40 columns, longest row 11: the compiled call runs on
    11 columns yet gives the eager 40-column call's values at every real
    token (and zeros at the padding), for a second batch shape too."""
    config, _, model = tiny
    compiled = inference.Encoder(model.encoder)
    for lengths, width in (([11, 4, 7], 40), ([3], 16)):
        features = _padded_batch(lengths, width, config.vocab_size)
        eager = model.encoder({k: tf.constant(v) for k, v in features.items()}, training=False)
        fast = compiled(features)
        assert fast["sequence_output"].shape == (len(lengths), width, config.hidden_size)
        np.testing.assert_allclose(fast["pooled_output"], eager["pooled_output"].numpy(),
                                   atol=1e-5)
        for row, n in enumerate(lengths):
            np.testing.assert_allclose(fast["sequence_output"][row, :n],
                                       eager["sequence_output"].numpy()[row, :n], atol=1e-5)
            for mine, theirs in zip(fast["encoder_outputs"], eager["encoder_outputs"]):
                np.testing.assert_allclose(mine[row, :n], theirs.numpy()[row, :n], atol=1e-5)
        assert not fast["sequence_output"][:, max(lengths):].any()
    # One trace serves every shape.
    assert compiled._call.experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def test_bf16_encoder_is_close_to_fp32_and_really_bf16(tiny):
    config, _, model = tiny
    features = _padded_batch([12, 9], 12, config.vocab_size, seed=1)
    exact = inference.Encoder(model.encoder)(features)
    approx = inference.Encoder(model.encoder, precision="bf16")
    assert approx.encoder is not model.encoder
    # The Dense products in bf16 (kernels cast once), the rest in float32.
    assert approx.encoder.precision == "bf16" and approx.encoder.num_quantized > 0
    out = approx(features)
    assert out["sequence_output"].dtype == np.float32
    diff = np.abs(out["sequence_output"] - exact["sequence_output"])
    # Layer-normed outputs (unit scale): bf16 keeps ~3 significant digits.
    assert 0 < diff.max() < 0.1, diff.max()
    assert np.abs(out["pooled_output"] - exact["pooled_output"]).max() < 0.05
    with pytest.raises(ValueError, match="--precision"):
        inference.Encoder(model.encoder, precision="fp8")
