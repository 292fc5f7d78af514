"""ELMo as features of a downstream classifier: run_classifier's `--model_family=elmo`.

    python run/run_pretraining.py --recipe=elmo --output_dir=/tmp/elmo
    python run/run_classifier.py --model_family=elmo --task_name=generic ... \
        --bert_config_file=/tmp/elmo/elmo_options.json \
        --vocab_file=data/sample/elmo/vocab.txt --init_checkpoint=/tmp/elmo

`--init_checkpoint` may also be bilm-tf's released biLM (a folder with its
options file and `weights.hdf5`, `--bert_config_file` its options file):
`load_elmo_weights`.

The biLM is frozen (Peters et al. 2018, section 3.3): its layers (the
character-CNN token layer, duplicated for both directions, and each
biLSTM layer) are combined by a trainable `ScalarMix` (softmax-normalised
weights and the gamma scale), and a task model (`FrozenFeatureClassifier`:
BiLSTM, max-pooling, dense) is trained on the mix. Examples are framed as
in pre-training, ``<S> words </S>`` with each word's character ids
(`modeling.tasks.word_input_format`).

`extract_features` is `run/extract_features.py --model_family=elmo`: each
word's vectors of the chosen biLM layers (0 = the token layer, 1.. = the
biLSTM layers) in Google's JSON-lines layout, plus the equal-weight mix
(`elmo_average`) and its mean over the words.
"""

import os

import numpy as np
import tensorflow as tf

from modeling.elmo import bilm_tf
from modeling.elmo.network import ElmoNetwork
from modeling.elmo.scalar_mix import ScalarMix
from modeling.tasks import input_formats
from modeling.tasks import word_input_format

__all__ = ["ElmoInputFormat", "build_elmo_classifier", "elmo_layers", "extract_features",
           "features_from_files", "load_elmo_weights"]


def elmo_layers(network, features, training=False):
    """The biLM's `elmo_layers` (token layer, then each biLSTM layer) for classifier features."""
    return network({"char_ids": features["char_ids"], "input_mask": features["input_mask"]},
                   training=training)["elmo_layers"]


def build_elmo_classifier(config, num_labels, task_type, hidden_size=64, dropout_rate=0.2,
                          do_layer_norm=False, l2_coef=0.0):
    """A `FrozenFeatureClassifier` over a (fresh) ELMo biLM of `config` with a `ScalarMix`
    (`do_layer_norm`, `l2_coef`: the paper's options of the mix, off as in bilm-tf)."""
    network = ElmoNetwork.from_config_object(config)
    return word_input_format.FrozenFeatureClassifier(
        network, elmo_layers, num_labels, 2 * config.projection_dim, task_type,
        combiner=ScalarMix(config.n_layers + 1, do_layer_norm=do_layer_norm, l2_coef=l2_coef,
                           name="scalar_mix"),
        hidden_size=hidden_size, dropout_rate=dropout_rate, name="elmo_classifier")


class ElmoInputFormat(word_input_format.WordInputFormat):
    """Words with their character ids, and a frozen biLM under a task model."""

    uses_char_ids = True

    def build_model(self, num_labels, task_type):
        return build_elmo_classifier(self.config, num_labels, task_type)

    def init_model(self, model, checkpoint):
        return load_elmo_weights(model.encoder, checkpoint)


def load_elmo_weights(network, checkpoint):
    """`--init_checkpoint` for an ELMo biLM: run_pretraining's output, or bilm-tf's release.

    A folder holding bilm-tf's options and `weights.hdf5`, or the `.hdf5`
    itself, loads through `modeling.elmo.bilm_tf` (the network must be of
    those options: `--bert_config_file` is the release's options.json);
    anything else is this project's checkpoint. Returns the number of
    weights loaded.
    """
    path = os.fspath(checkpoint)
    if path.endswith(".hdf5") or bilm_tf.is_bilm_tf_folder(path):
        if not path.endswith(".hdf5"):
            path = bilm_tf.find_files(path)[1]
        return len(bilm_tf.load_bilm_tf_weights(network, path))
    return word_input_format.load_network_weights(network, checkpoint)


def extract_features(network, tokenizer, texts, layers=None, max_seq_length=128,
                     batch_size=32):
    """ELMo's per-word vectors in Google's extract_features layout.

    Args:
        network: an `ElmoNetwork` (weights loaded).
        tokenizer: a `word_input_format.WordTokenizer` (its vocabulary only
            names the words; ELMo reads their characters, so no word is unknown).
        texts: strings; ``text_a ||| text_b`` for pairs (``<S> a </S> b </S>``).
        layers: indexes into the network's ``elmo_layers`` (0 = token layer;
            negative from the top); None = all.
        max_seq_length: words per text, ``<S>`` and ``</S>`` included.

    Yields:
        one dict per text: ``{"linex_index", "features": [{"token", "layers":
        [{"index", "values"}], "elmo_average"}], "mean_elmo_average"}``.
    """
    num_layers = network.n_layers + 1
    layers = list(range(num_layers)) if layers is None else list(layers)
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise ValueError("--layers has %d but the ELMo network has %d layers (0 = token "
                             "layer, 1..%d = biLSTM layers)" % (index, num_layers,
                                                                num_layers - 1))
    chars = network.max_characters_per_token

    @tf.function(reduce_retracing=True)
    def run(char_ids, input_mask):
        return elmo_layers(network, {"char_ids": char_ids, "input_mask": input_mask})

    texts = list(texts)
    for start in range(0, len(texts), batch_size):
        chunk, rows = texts[start:start + batch_size], []
        for text in chunk:
            text_a, _, text_b = text.partition("|||")
            words_a = tokenizer.tokenize(text_a.strip())
            words_b = tokenizer.tokenize(text_b.strip()) if text_b else None
            _, mask, _, char_ids = word_input_format.word_features(
                words_a, words_b, tokenizer, max_seq_length, chars)
            words, _ = word_input_format.packed_words(words_a, words_b, max_seq_length)
            rows.append((words, mask, char_ids))
        length = max(len(words) for words, _, _ in rows)
        outputs = run(tf.constant(np.stack([c[:length] for _, _, c in rows]), tf.int32),
                      tf.constant(np.stack([m[:length] for _, m, _ in rows]), tf.int32))
        outputs = [o.numpy() for o in outputs]
        average = sum(outputs) / float(num_layers)
        for row, (words, _, _) in enumerate(rows):
            token_features = [{
                "token": word,
                "layers": [{"index": index,
                            "values": [round(float(x), 6) for x in outputs[index][row, i]]}
                           for index in layers],
                "elmo_average": [round(float(x), 6) for x in average[row, i]],
            } for i, word in enumerate(words)]
            mean = average[row, :len(words)].mean(axis=0)
            yield {"linex_index": start + row, "features": token_features,
                   "mean_elmo_average": [round(float(x), 6) for x in mean]}


input_formats.FORMATS.register("elmo", ElmoInputFormat)


def features_from_files(settings, layers):
    """The family's `feature_extractor`: `run/extract_features.py --model_family=elmo`.

    `settings.bert_config_file` is the biLM's elmo_options.json,
    `settings.vocab_file` its word vocabulary and `settings.init_checkpoint`
    run_pretraining's output. Returns `(texts, records, what)`; the records
    (`extract_features`) are computed as they are consumed.
    """
    from data import word_vocab as vocab_lib  # pylint: disable=g-import-not-at-top
    from modeling.elmo.config import load_elmo_config  # pylint: disable=g-import-not-at-top
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top

    network = ElmoNetwork.from_config_object(load_elmo_config(settings.bert_config_file))
    load_elmo_weights(network, settings.init_checkpoint)
    tokenizer = word_input_format.WordTokenizer(vocab_lib.WordVocabulary(settings.vocab_file),
                                                settings.do_lower_case)
    texts = inference.read_input_lines(settings.input_file)
    return texts, extract_features(network, tokenizer, texts, layers, settings.max_seq_length,
                                   settings.batch_size), "ELMo features"
