"""ALBERT (Lan et al. 2019): config, encoder, checkpoint names, HF folders; registers the family.

    from modeling.albert import AlbertConfig, AlbertEncoder
    encoder = AlbertEncoder.from_config_object(AlbertConfig.from_preset("albert_base"))
"""

from modeling import registry
from modeling.albert import checkpoint_names
from modeling.albert import hf_format
from modeling.albert.config import ALBERT_VOCAB_SIZE
from modeling.albert.config import HEADS_PER_GROUP_KEY
from modeling.albert.config import AlbertConfig
from modeling.albert.config import list_albert_presets
from modeling.albert.config import load_albert_config
from modeling.albert.encoder import SHARING_MODES
from modeling.albert.encoder import AlbertEncoder
from modeling.albert.encoder import albert_activation

__all__ = ["ALBERT_VOCAB_SIZE", "AlbertConfig", "AlbertEncoder", "SHARING_MODES",
           "albert_activation", "list_albert_presets", "load_albert_config"]


def _demo_config(vocab_size):
    # The BERT demo's depth and width (hidden 64) with E=32 factorised embeddings.
    return AlbertConfig(
        vocab_size=vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=256, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        max_position_embeddings=128)


def _head_units_of_config(config):
    # Head pruning's unit is a group: its layers share one attention block, so
    # a head goes at every depth of the group. google-research/albert's layer
    # -> group formula (`AlbertEncoder.group_of_layer`), float division included.
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    extra = getattr(config, "extra", None) or {}
    return ([int(layer / layers * groups) for layer in range(layers)],
            extra.get(HEADS_PER_GROUP_KEY, [config.num_attention_heads] * groups))


def _extract_features(settings, layers):
    # run/extract_features.py: the encoder's outputs, laid out as BERT's.
    from modeling.serving import inference  # pylint: disable=g-import-not-at-top
    return inference.encoder_features_from_files(FAMILY, settings, layers)


FAMILY = registry.families.register("albert", registry.network_family(
    "albert", AlbertEncoder, AlbertConfig, load_albert_config, _demo_config,
    "albert_config.json",
    name_tables={"google_tf1": checkpoint_names.GOOGLE_TF1, "hf": checkpoint_names.HF,
                 "keras_hub": checkpoint_names.KERAS_HUB},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    head_activation=lambda config: albert_activation(config.hidden_act),
    head_pruning=registry.HeadPruning(units_of_config=_head_units_of_config,
                                      counts_key=HEADS_PER_GROUP_KEY,
                                      checkpoint_name="model.ckpt", shared=True),
    attention_maps=True,
    feature_extractor=_extract_features,
    hf=hf_format.HF_FORMAT,
    presets=list_albert_presets,
))
