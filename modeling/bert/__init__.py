"""BERT (Devlin et al. 2018): config, encoder, checkpoint names; registers the family.

    from modeling.bert import BertConfig, BertEncoder
    encoder = BertEncoder.from_config_object(BertConfig.from_preset("bert_tiny", vocab_size=100))
"""

from modeling import registry
from modeling.bert import checkpoint_names
from modeling.bert import hf_format
from modeling.bert.config import BertConfig
from modeling.bert.config import BertConfigError
from modeling.bert.config import HEADS_PER_LAYER_KEY
from modeling.bert.config import list_presets
from modeling.bert.config import load_bert_config
from modeling.bert.encoder import BertEncoder

__all__ = ["BertConfig", "BertConfigError", "BertEncoder", "list_presets", "load_bert_config"]


def _demo_config(vocab_size):
    # Half of Google's BERT-Tiny (2 layers, hidden 64, 2 heads): on the bundled
    # 50 KB corpus it leaves the unigram stage within the demo's steps at a
    # learning rate of 1e-3 (BERT-Tiny itself needs a lower rate and ~3x the time).
    # The recipes with next-sentence prediction raise the dropout to 0.3
    # (`demo_model` in presets/bert.json, bert_wwm.json): with Google's 0.1 the
    # model memorises the corpus's sentence pairs (NSP accuracy 0.97 on training
    # text, held-out NSP loss 0.92-1.0 against the label-frequency baseline's
    # 0.62). Chosen on a validation split of the *training* documents (every
    # tenth of them): NSP loss 1.16 (hidden/attention 0.1/0.1), 1.06 (0.3/0.1),
    # 0.59 (0.3/0.3), 0.59 (0.4/0.1), 0.69 (0.2/0.1) against 0.68; masked LM
    # 6.21-6.28 against 6.90 for all.
    return BertConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=256,
                      max_position_embeddings=128, type_vocab_size=2)


def _head_units_of_config(config):
    # Head pruning's unit is a layer: its heads are the config's, or a pruned
    # model's own per-layer counts.
    layers = config.num_hidden_layers
    extra = getattr(config, "extra", None) or {}
    return (list(range(layers)),
            extra.get(HEADS_PER_LAYER_KEY, [config.num_attention_heads] * layers))


def _extract_features(settings, layers):
    # run/extract_features.py: Google's extract_features output of the encoder.
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top
    return inference.encoder_features_from_files(FAMILY, settings, layers)


FAMILY = registry.families.register("bert", registry.network_family(
    "bert", BertEncoder, BertConfig, load_bert_config, _demo_config, "bert_config.json",
    name_tables={"google_tf1": checkpoint_names.GOOGLE_TF1, "hf": checkpoint_names.HF,
                 "keras_hub": checkpoint_names.KERAS_HUB},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    is_encoder=lambda model: type(model) is BertEncoder,  # pylint: disable=unidiomatic-typecheck
    head_pruning=registry.HeadPruning(units_of_config=_head_units_of_config,
                                      counts_key=HEADS_PER_LAYER_KEY,
                                      checkpoint_name="bert_model.ckpt"),
    attention_maps=True,
    feature_extractor=_extract_features,
    hf=hf_format.HF_FORMAT,
    presets=list_presets,
))
