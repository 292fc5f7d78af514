"""int8 and bf16 serving paths (`modeling.serving.quantization`).

The int8 kernels are oneDNN's, which this test process has off
(tests/conftest.py sets TF_ENABLE_ONEDNN_OPTS=0): the int8 checks run in a
child process with it on, as users have it, and print their measurements as
JSON for the assertions here. No wall-clock time is asserted.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from modeling import bert as config_lib
from modeling.serving import inference
from modeling.serving import quantization

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


def _child(code, tmp_path):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TF_NUM_INTRAOP_THREADS", None)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp_path),
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _tiny_encoder(seed=0):
    config = config_lib.BertConfig(vocab_size=60, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=128,
                                   max_position_embeddings=32, type_vocab_size=2)
    keras.utils.set_random_seed(seed)
    return config_lib.BertEncoder.from_config_object(config)


def test_int8_products_match_a_float_reference_in_tf_function_and_savedmodel(tmp_path):
    out = _child("""
        import json, os
        import numpy as np, keras, tensorflow as tf
        from modeling import bert as config_lib
        from modeling.serving import export, inference, quantization
        rng = np.random.RandomState(0)
        report = {}
        # One product: x W + b against numpy, in float64.
        x = (rng.randn(37, 96) * 2 + 0.5).astype(np.float32)
        w = (rng.randn(96, 80) * 0.05).astype(np.float32)
        b = rng.randn(80).astype(np.float32)
        q, scale, sums = quantization.quantize_kernel(w)
        got = tf.function(lambda t: quantization.int8_matmul(t, q, scale, sums, b))(x).numpy()
        xd, wd = x.astype(np.float64), w.astype(np.float64)
        exact = xd @ wd + b
        lo, hi = min(x.min(), 0), max(x.max(), 0)
        xs = (hi - lo) / 255
        xq = lo + xs * np.clip(np.round((xd - lo) / xs), 0, 255)
        emulated = xq @ (q.astype(np.float64) * scale) + b
        report["vs_emulated"] = float(np.abs(got - emulated).max())
        report["vs_exact"] = float(np.abs(got - exact).max())
        report["exact_scale"] = float(np.abs(exact).max())
        # Its zero point: a tensor of only positive values, and one of only negative.
        for name, shift in (("positive", 3.0), ("negative", -3.0)):
            xs_ = (np.abs(x) * np.sign(shift)).astype(np.float32)
            y = quantization.int8_matmul(tf.constant(xs_), q, scale, sums, b).numpy()
            report["rel_" + name] = float(np.abs(y - (xs_ @ w + b)).max() /
                                          np.abs(xs_ @ w + b).max())
        # A whole encoder: eager model call, Encoder (tf.function), SavedModel.
        config = config_lib.BertConfig(vocab_size=60, hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=128,
                                       max_position_embeddings=32, type_vocab_size=2)
        keras.utils.set_random_seed(0)
        encoder = config_lib.BertEncoder.from_config_object(config)
        ids = rng.randint(5, 60, size=(4, 14)).astype(np.int32)
        mask = np.ones_like(ids); mask[1, 9:] = 0
        features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
        fp32 = inference.Encoder(encoder)(features)
        compiled = inference.Encoder(encoder, "int8")
        int8 = compiled(features)
        report["num_quantized"] = compiled.encoder.num_quantized
        report["encoder_diff"] = float(np.abs(fp32["sequence_output"] -
                                              int8["sequence_output"]).max())
        report["encoder_scale"] = float(np.abs(fp32["sequence_output"]).max())
        eager = compiled.encoder({k: tf.constant(v) for k, v in features.items()},
                                 training=False)
        report["eager_vs_traced"] = float(np.abs(
            eager["pooled_output"].numpy() - int8["pooled_output"]).max())
        again = inference.Encoder(encoder)(features)
        report["float_unchanged"] = float(np.abs(again["sequence_output"] -
                                                 fp32["sequence_output"]).max())
        with open("vocab.txt", "w") as f:
            f.write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                              ["w%d" % i for i in range(55)]) + "\\n")
        pooled = lambda o: {"pooled_output": o["pooled_output"]}
        export.export_text_model(encoder, "int8", "vocab.txt", True, 16, pooled,
                                 precision="int8")
        export.export_text_model(encoder, "fp32", "vocab.txt", True, 16, pooled)
        texts = tf.constant(["w1 w2 w3 w4 w5", "w6 w7"])
        served = {p: tf.saved_model.load(p).signatures["serving_default"](text_a=texts)
                  ["pooled_output"].numpy() for p in ("int8", "fp32")}
        report["savedmodel_diff"] = float(np.abs(served["int8"] - served["fp32"]).max())
        names = tf.saved_model.load("int8").model_variables
        report["saved_int8"] = sum(v.dtype == tf.int8 for v in names)
        # Fill-mask (predict_masked.py's path): the encoder's and the MLM head's Dense.
        from data import tokenization
        from modeling import recipes
        keras.utils.set_random_seed(0)
        pretrainer = recipes.build_bert_pretrainer(config)
        tokenizer = tokenization.FullTokenizer("vocab.txt", True)
        texts = ["w1 w2 [MASK] w4 w5 w6", "w7 [MASK] w9 ||| w10 [MASK]"]
        masks = {p: inference.fill_mask(pretrainer, tokenizer, texts, top_k=3,
                                        max_seq_length=16, precision=p)
                 for p in ("fp32", "int8")}
        report["fill_mask_prob_diff"] = max(
            abs(a["probability"] - b["probability"])
            for ra, rb in zip(masks["fp32"], masks["int8"])
            for ma, mb in zip(ra["masks"], rb["masks"])
            for a, b in zip(ma["predictions"], mb["predictions"]))
        report["fill_mask_masks"] = sum(len(r["masks"]) for r in masks["int8"])
        print(json.dumps(report))
    """, tmp_path)
    # The kernel is the emulated arithmetic (integer sums exact; float32 rescaling).
    assert out["vs_emulated"] < 1e-4 * out["exact_scale"]
    # Against the float product: within what 8 bits allow (about 1% of the range here).
    assert out["vs_exact"] < 0.03 * out["exact_scale"]
    assert out["rel_positive"] < 0.03 and out["rel_negative"] < 0.03
    # 2 layers x (q, k, v, output, intermediate, output) + the pooler.
    assert out["num_quantized"] == 13
    assert 0 < out["encoder_diff"] < 0.05 * out["encoder_scale"]
    assert out["eager_vs_traced"] < 1e-5
    assert out["float_unchanged"] == 0.0
    assert out["savedmodel_diff"] < 0.05
    assert out["saved_int8"] == 13
    assert out["fill_mask_masks"] == 3 and out["fill_mask_prob_diff"] < 0.02


def test_fine_tuned_classifier_int8_labels_agree_with_fp32_on_held_out_data(tmp_path):
    # A BERT classifier fine-tuned here on a small task (is the first word piece of
    # the text among the lower half of the vocabulary; a fifth of the training
    # labels flipped, so that its probabilities are not all 0 or 1), then its held-out labels
    # and probabilities in int8 and bf16 against fp32.
    out = _child("""
        import json
        import numpy as np, keras, tensorflow as tf
        from modeling import bert as config_lib
        from modeling.serving import inference
        from modeling.tasks import classification
        config = config_lib.BertConfig(vocab_size=60, hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=128,
                                       max_position_embeddings=32, type_vocab_size=2,
                                       hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0)
        keras.utils.set_random_seed(1)
        model = classification.BertClassifier.from_config_object(config, num_labels=2)

        def data(n, seed):
            rng = np.random.RandomState(seed)
            lengths = rng.randint(4, 17, size=n)
            mask = (np.arange(16)[None, :] < lengths[:, None]).astype(np.int32)
            ids = rng.randint(5, 60, size=(n, 16)).astype(np.int32) * mask
            ids[:, 0] = 2
            labels = (ids[:, 1] < 32).astype(np.int32)
            # A fifth of the training labels flipped: the model is not certain.
            noisy = np.where(rng.uniform(size=n) < 0.2, 1 - labels, labels)
            return {"input_ids": ids, "input_mask": mask,
                    "segment_ids": np.zeros_like(ids)}, labels, noisy

        train, _, train_labels = data(4096, 0)
        held_out, held_labels, _ = data(600, 1)

        optimizer = keras.optimizers.Adam(1e-3)

        @tf.function
        def step(features, labels):
            with tf.GradientTape() as tape:
                logits = model(features, training=True)["logits"]
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels, logits))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for epoch in range(3):
            for start in range(0, 4096, 32):
                batch = {k: tf.constant(v[start:start + 32]) for k, v in train.items()}
                step(batch, tf.constant(train_labels[start:start + 32]))
        report = {}
        probabilities = {}
        for precision in ("fp32", "int8", "bf16"):
            low = inference.with_precision(model, precision)
            call = tf.function(lambda f: low(f, training=False)["probabilities"])
            probabilities[precision] = np.concatenate([
                call({k: tf.constant(v[s:s + 50]) for k, v in held_out.items()}).numpy()
                for s in range(0, 600, 50)])
        labels = {p: v.argmax(-1) for p, v in probabilities.items()}
        report["fp32_accuracy"] = float(np.mean(labels["fp32"] == held_labels))
        for p in ("int8", "bf16"):
            report[p + "_agreement"] = float(np.mean(labels[p] == labels["fp32"]))
            report[p + "_accuracy"] = float(np.mean(labels[p] == held_labels))
            diff = np.abs(probabilities[p] - probabilities["fp32"])
            report[p + "_max_prob_diff"] = float(diff.max())
            report[p + "_mean_prob_diff"] = float(diff.mean())
        report["fp32_mean_top_probability"] = float(probabilities["fp32"].max(-1).mean())
        print(json.dumps(report))
    """, tmp_path)
    print(out)
    assert out["fp32_accuracy"] >= 0.9, out  # the task was learnt
    assert out["fp32_mean_top_probability"] < 0.95, out  # and the probabilities are not saturated
    assert out["int8_agreement"] >= 0.99, out
    assert out["int8_mean_prob_diff"] < 0.01 and out["int8_max_prob_diff"] < 0.05, out
    assert out["bf16_agreement"] >= 0.99, out


def test_int8_without_onednn_is_refused_in_one_line():
    # This process runs with TF_ENABLE_ONEDNN_OPTS=0 (tests/conftest.py).
    if quantization.onednn_enabled():
        pytest.skip("oneDNN is on in this process")
    with pytest.raises(quantization.Int8Unavailable) as raised:
        inference.Encoder(_tiny_encoder(), "int8")
    assert "\n" not in str(raised.value) and "TF_ENABLE_ONEDNN_OPTS" in str(raised.value)


def test_int8_and_bf16_refuse_a_model_without_dense_layers_in_one_line():
    model = keras.Sequential([keras.Input((None, 8)), keras.layers.LSTM(8)])
    for precision in ("int8", "bf16"):
        if precision == "int8" and not quantization.onednn_enabled():
            continue  # refused earlier, for oneDNN (the test above)
        with pytest.raises(quantization.Int8Unavailable) as raised:
            quantization.LowPrecisionModel(model, precision)
        assert "\n" not in str(raised.value) and "Dense" in str(raised.value)


def test_bf16_keeps_short_products_in_fp32_and_long_ones_close():
    encoder = _tiny_encoder()
    rng = np.random.RandomState(0)

    def features(batch, length):
        ids = rng.randint(5, 60, size=(batch, length)).astype(np.int32)
        return {"input_ids": ids, "input_mask": np.ones_like(ids),
                "segment_ids": np.zeros_like(ids)}

    fp32, bf16 = inference.Encoder(encoder), inference.Encoder(encoder, "bf16")
    assert isinstance(bf16.encoder, quantization.LowPrecisionModel)
    short = features(1, quantization.BF16_MIN_ROWS - 1)  # every product below the threshold
    np.testing.assert_allclose(bf16(short)["sequence_output"], fp32(short)["sequence_output"],
                               atol=1e-5)
    long = features(4, 12)
    a, b = fp32(long)["sequence_output"], bf16(long)["sequence_output"]
    assert 0 < np.abs(a - b).max() < 0.1
