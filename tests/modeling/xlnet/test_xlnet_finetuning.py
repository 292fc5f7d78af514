"""XLNet fine-tuning: `A <sep> B <sep> <cls>` packing, the last-token summary, and a
tiny classifier that learns a pair task on held-out sentences."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from data.tokenizers.sentencepiece import SentencePieceTokenizer
from modeling.tasks.classification import BertClassifier
from modeling.xlnet import XLNetConfig
from modeling.xlnet import XLNetNetwork
from modeling.xlnet import finetuning

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPIECE = os.path.join(REPO_ROOT, "data", "sample", "xlnet", "spiece.model")
SEP, CLS, PAD = 4, 3, 5


def test_pack_pair_is_xlnets_layout():
    packed = finetuning.pack_pair([10, 11, 12], [20, 21], 10, SEP, CLS, PAD)
    np.testing.assert_array_equal(packed["input_ids"], [5, 5, 10, 11, 12, 4, 20, 21, 4, 3])
    np.testing.assert_array_equal(packed["input_mask"], [0, 0, 1, 1, 1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(packed["segment_ids"], [4, 4, 0, 0, 0, 0, 1, 1, 1, 2])
    single = finetuning.pack_pair([10, 11], None, 5, SEP, CLS, PAD)
    np.testing.assert_array_equal(single["input_ids"], [5, 10, 11, 4, 3])
    np.testing.assert_array_equal(single["segment_ids"], [4, 0, 0, 0, 2])
    # Truncation: one token at a time from the end of the longer text.
    long = finetuning.pack_pair(list(range(100, 110)), [200, 201, 202], 10, SEP, CLS, PAD)
    np.testing.assert_array_equal(long["input_ids"], [100, 101, 102, 103, 4, 200, 201, 202, 4, 3])
    with pytest.raises(ValueError, match="max_seq_length=3"):
        finetuning.pack_pair([1], [2], 3, SEP, CLS, PAD)
    tokenizer = SentencePieceTokenizer(SPIECE)
    text = finetuning.pack_text_pair(tokenizer, "The baker opens the shop.", "面包师开门。", 32)
    ids = text["input_ids"][text["input_mask"] > 0].tolist()
    assert ids == (tokenizer.encode("The baker opens the shop.") + [SEP]
                   + tokenizer.encode("面包师开门。") + [SEP, CLS])


def _network(**overrides):
    values = dict(vocab_size=2000, d_model=32, n_layer=2, n_head=2, d_inner=64, dropout=0.0)
    values.update(overrides)
    return XLNetNetwork.from_config_object(XLNetConfig(**values))


def test_pooled_output_is_the_cls_summary_and_ignores_left_padding():
    """The summary reads the last position (<cls>); with relative positions a pair
    packed to two lengths (more left padding) gives the same summary."""
    network = _network()
    tokenizer = SentencePieceTokenizer(SPIECE)
    short = finetuning.pack_text_pair(tokenizer, "Rain fell over the town.", "雨下了一整天。", 24)
    long = finetuning.pack_text_pair(tokenizer, "Rain fell over the town.", "雨下了一整天。", 40)
    outputs = [network({k: v[np.newaxis] for k, v in f.items()}) for f in (short, long)]
    np.testing.assert_allclose(outputs[0]["pooled_output"].numpy(),
                               outputs[1]["pooled_output"].numpy(), atol=1e-5)
    last = outputs[0]["sequence_output"].numpy()[:, -1]
    dense = network.sequence_summary
    np.testing.assert_allclose(outputs[0]["pooled_output"].numpy(),
                               np.tanh(last @ dense.kernel.numpy() + dense.bias.numpy()),
                               atol=1e-5)
    # A different padding token changes nothing.
    repadded = dict(short, input_ids=np.where(short["input_mask"] > 0, short["input_ids"], 77))
    np.testing.assert_allclose(network({k: v[np.newaxis] for k, v in repadded.items()})
                               ["pooled_output"].numpy(),
                               outputs[0]["pooled_output"].numpy(), atol=1e-5)


def _sentences(name):
    path = os.path.join(REPO_ROOT, "data", "sample", name)
    return [line.strip() for line in open(path, encoding="utf-8") if line.strip()]


def _pairs(tokenizer, english, chinese, rng, count, seq):
    """(A, B) pairs labelled 1 when both are in the same language, 0 otherwise."""
    features = {"input_ids": [], "input_mask": [], "segment_ids": [], "label_ids": []}
    pools = (english, chinese)
    for _ in range(count):
        first, second = rng.integers(0, 2), rng.integers(0, 2)
        a = pools[first][rng.integers(len(pools[first]))]
        b = pools[second][rng.integers(len(pools[second]))]
        packed = finetuning.pack_text_pair(tokenizer, a, b, seq)
        for key, value in packed.items():
            features[key].append(value)
        features["label_ids"].append(int(first == second))
    return {k: np.stack(v) if k != "label_ids" else np.array(v, np.int32)
            for k, v in features.items()}


def test_tiny_classifier_learns_a_pair_task_on_held_out_sentences():
    """Whether A and B are in the same language: the answer needs both texts, read
    through <cls> at the end. Budget fixed before the first run: 300 Adam steps
    (lr 1e-3) of 32 pairs, 2 layers of width 32, from scratch; every tenth line of
    the corpus held out; held-out accuracy must reach 0.8 (chance 0.5)."""
    keras.utils.set_random_seed(0)
    tokenizer = SentencePieceTokenizer(SPIECE)
    english, chinese = _sentences("sample_en.txt"), _sentences("sample_zh.txt")
    split = lambda lines, held: [s for i, s in enumerate(lines) if (i % 10 == 0) == held]
    rng = np.random.default_rng(0)
    seq = 48
    train = _pairs(tokenizer, split(english, False), split(chinese, False), rng, 32 * 300, seq)
    held_out = _pairs(tokenizer, split(english, True), split(chinese, True), rng, 256, seq)
    assert not set(split(english, True)) & set(split(english, False))
    model = BertClassifier(_network(dropout=0.1), num_labels=2, dropout_rate=0.1)
    optimizer = keras.optimizers.Adam(1e-3)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss, _ = model.compute_loss_and_metrics(batch, training=True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for i in range(300):
        batch = {k: v[i * 32:(i + 1) * 32] for k, v in train.items()}
        batch["is_real_example"] = np.ones([32], np.int32)
        losses.append(float(step(batch)))
    probabilities = model({k: v for k, v in held_out.items() if k != "label_ids"},
                          training=False)["probabilities"].numpy()
    accuracy = float(np.mean(np.argmax(probabilities, -1) == held_out["label_ids"]))
    print("xlnet pair classifier: loss %.3f -> %.3f, held-out accuracy %.3f"
          % (np.mean(losses[:20]), np.mean(losses[-20:]), accuracy))
    assert np.mean(losses[-20:]) < np.mean(losses[:20])
    assert accuracy >= 0.8, accuracy
