"""CoVe features in `run_classifier.py --model_family=cove`.

McCann et al. (2017) feed a task model `[GloVe(w) ; CoVe(w)]` per word; here
`CoveNetwork.features()`: the translation model's own word vectors next to
its encoder's top BiLSTM outputs, computed by the frozen pre-trained network
(its weights are not trained, and its dropout is off) under the shared task
model of word-level families (`modeling.tasks.word_input_format`:
`FrozenFeatureClassifier`, a task BiLSTM, max-pooling, a dense layer; the
decoder's weights are loaded too but unused).

    python run/run_classifier.py --model_family=cove --task_name=generic ... \\
      --vocab_file=data/sample/elmo/vocab.txt \\
      --bert_config_file=/tmp/cove/cove_config.json --init_checkpoint=/tmp/cove

Inputs are `<S> words </S>` of the job's word vocabulary (the pre-training
`--vocab_file`; its size must be the config's `vocab_size`); a text pair is
`<S> a </S> b </S>`, read by the encoder as one sentence.
"""

from modeling.cove.network import CoveNetwork
from modeling.tasks import input_formats
from modeling.tasks import word_input_format as wif

__all__ = ["CoveInputFormat", "build_cove_classifier", "cove_features"]


def cove_features(network, features, training=False):
    """`[batch, words, E + 2H]`: [word vectors ; encoder outputs] of the (frozen) network."""
    return network.features(features["input_ids"], features["input_mask"], training=training)


def build_cove_classifier(config, num_labels, task_type, hidden_size=64, dropout_rate=0.2):
    """A `FrozenFeatureClassifier` over a (fresh) CoVe network of `config`."""
    network = CoveNetwork.from_config_object(config)
    return wif.FrozenFeatureClassifier(
        network, cove_features, num_labels, network.feature_size, task_type,
        hidden_size=hidden_size, dropout_rate=dropout_rate, name="cove_classifier")


class CoveInputFormat(wif.WordInputFormat):
    """Words of the translation model's vocabulary, and its frozen encoder under a task model."""

    uses_char_ids = False

    def build_model(self, num_labels, task_type):
        return build_cove_classifier(self.config, num_labels, task_type)

    def init_model(self, model, checkpoint):
        """Loads the translation pre-training's network (output dir or ckpt-N prefix)."""
        return wif.load_network_weights(model.encoder, checkpoint)


input_formats.FORMATS.register("cove", CoveInputFormat)
