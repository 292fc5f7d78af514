# coding=utf-8
"""SavedModel export: in-graph tokenization and packing, outputs equal Keras."""

import os

import keras
import numpy as np
import tensorflow as tf

from data import tokenization
from modeling import bert as config_lib
from modeling.serving import export
from modeling.serving import inference
from modeling.bert import BertEncoder


class PooledProbabilities(keras.Model):
    """A stand-in task model: softmax over a projection of the pooled output."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.dense = keras.layers.Dense(3)

    def call(self, features, training=False):
        pooled = self.encoder(features, training=training)["pooled_output"]
        return {"probabilities": tf.nn.softmax(self.dense(pooled), axis=-1)}


def test_exported_model_matches_keras_with_python_tokenization(tmp_path, sample_vocab_file):
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = config_lib.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
        type_vocab_size=2)
    keras.utils.set_random_seed(5)
    model = PooledProbabilities(BertEncoder.from_config_object(config))
    max_seq_length = 12
    export_dir = str(tmp_path / "export")
    export.export_text_model(model, export_dir, sample_vocab_file, True, max_seq_length)
    assert sorted(os.listdir(str(tmp_path))) == ["export"]
    reloaded = tf.saved_model.load(export_dir)

    singles = [u"The baker opens the shop at six in the morning, every day of the week.",
               u"面包师每天早上六点开门。", u"Owls hunt at night!"]
    pairs_a = [u"The river runs to the sea.", u"今天下雨了。"]
    pairs_b = [u"Fish swim in the river and the farmers water the fields nearby.", u"我们在家。"]

    def keras_probabilities(token_pairs):
        packed = [inference._pack(a, b, max_seq_length) for a, b in token_pairs]
        features = inference._batch_features([t for t, _ in packed], [s for _, s in packed],
                                             tokenizer, max_seq_length)
        return model(features, training=False)["probabilities"].numpy()

    expected = keras_probabilities([(tokenizer.tokenize(t), None) for t in singles])
    got = reloaded.signatures["serving_default"](text_a=tf.constant(singles))
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)

    expected = keras_probabilities([(tokenizer.tokenize(a), tokenizer.tokenize(b))
                                    for a, b in zip(pairs_a, pairs_b)])
    got = reloaded.serve_pair(tf.constant(pairs_a), tf.constant(pairs_b))
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)
    # Truncation really happened on the long inputs, and rows sum to one.
    assert len(tokenizer.tokenize(singles[0])) > max_seq_length
    np.testing.assert_allclose(got["probabilities"].numpy().sum(-1), 1.0, rtol=1e-5)


def test_packing_matches_googles_truncation(sample_vocab_file):
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    server = export.TextModelServer(lambda f, training=False: f, sample_vocab_file, True, 9)
    for len_a, len_b in [(10, 3), (5, 5), (2, 9), (3, 2), (1, 1), (12, 12)]:
        a = list(range(1000, 1000 + len_a))
        b = list(range(2000, 2000 + len_b))
        packed = server.pack([tf.ragged.constant([a]), tf.ragged.constant([b])])
        tokens_a = [str(x) for x in a]
        tokens_b = [str(x) for x in b]
        expected_tokens, expected_segments = inference._pack(tokens_a, tokens_b, 9)
        ids = packed["input_ids"][0].numpy().tolist()
        length = int(packed["input_mask"][0].numpy().sum())
        expected_ids = [server.cls_id if t == "[CLS]" else server.sep_id if t == "[SEP]"
                        else int(t) for t in expected_tokens]
        assert ids[:length] == expected_ids, (len_a, len_b)
        assert packed["segment_ids"][0].numpy().tolist()[:length] == expected_segments
        assert not any(ids[length:])
