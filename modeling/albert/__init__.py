"""ALBERT (Lan et al. 2019): config, encoder, checkpoint names; registers the family.

    from modeling.albert import AlbertConfig, AlbertEncoder
    encoder = AlbertEncoder.from_config_object(AlbertConfig.from_preset("albert_base"))
"""

from modeling import registry
from modeling.albert import checkpoint_names
from modeling.albert.config import ALBERT_VOCAB_SIZE
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


registry.encoders.register("albert", AlbertEncoder)
FAMILY = registry.families.register("albert", registry.Family(
    name="albert",
    config_class=AlbertConfig,
    load_config=load_albert_config,
    build_encoder=AlbertEncoder.from_config_object,
    demo_config=_demo_config,
    config_file_name="albert_config.json",
    name_tables={"google_tf1": checkpoint_names.GOOGLE_TF1},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    head_activation=lambda config: albert_activation(config.hidden_act),
    is_encoder=lambda model: isinstance(model, AlbertEncoder),
))
