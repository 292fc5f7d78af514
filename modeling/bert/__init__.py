"""BERT (Devlin et al. 2018): config, encoder, checkpoint names; registers the family.

    from modeling.bert import BertConfig, BertEncoder
    encoder = BertEncoder.from_config_object(BertConfig.from_preset("bert_tiny", vocab_size=100))
"""

from modeling import registry
from modeling.bert.config import BertConfig
from modeling.bert.config import BertConfigError
from modeling.bert.config import list_presets
from modeling.bert.config import load_bert_config
from modeling.bert.encoder import BertEncoder

__all__ = ["BertConfig", "BertConfigError", "BertEncoder", "list_presets", "load_bert_config"]


def _demo_config(vocab_size):
    # Google's BERT-Tiny shape (2 layers, hidden 128).
    return BertConfig.from_preset("bert_tiny", vocab_size=vocab_size)


registry.encoders.register("bert", BertEncoder)
FAMILY = registry.families.register("bert", registry.Family(
    name="bert",
    config_class=BertConfig,
    load_config=load_bert_config,
    build_encoder=BertEncoder.from_config_object,
    demo_config=_demo_config,
    config_file_name="bert_config.json",
    is_encoder=lambda model: type(model) is BertEncoder,  # pylint: disable=unidiomatic-typecheck
))
