"""DistilBERT (Sanh et al. 2019): config, encoder, HF names and folder format; registers the family.

The published DistilBERT models (HF folders, `model_type` "distilbert")
are BERT's encoder without token types and pooler, under HF's own names;
this family reads and writes them:

    from modeling import checkpoints
    from modeling.distilbert import DistilBertEncoder, load_distilbert_config
    encoder = DistilBertEncoder.from_config_object(load_distilbert_config(folder))
    checkpoints.init_from_checkpoint(encoder, folder)

Not to be confused with `modeling.distillation`'s "distilbert" style: that
distils a BERT-family teacher into a *BERT* student with half its layers
(DistilBERT's recipe); the student is a `BertEncoder` with a pooler and
token types, saved as BERT. This package is the architecture of the
released DistilBERT weights. The family has no pooler (`has_pooler=False`),
so the jobs that classify the pooled output refuse it.
"""

from modeling import registry
from modeling.distilbert import checkpoint_names
from modeling.distilbert import hf_format
from modeling.distilbert.config import DistilBertConfig
from modeling.distilbert.config import DistilBertConfigError
from modeling.distilbert.config import load_distilbert_config
from modeling.distilbert.encoder import DistilBertEncoder
from modeling.distilbert.hf_format import DistilBertTokenizer

__all__ = ["DistilBertConfig", "DistilBertConfigError", "DistilBertEncoder",
           "DistilBertTokenizer", "load_distilbert_config"]


def _demo_config(vocab_size):
    # The BERT demo's size (2 layers, width 64, 2 heads).
    return DistilBertConfig(vocab_size=vocab_size, dim=64, n_layers=2, n_heads=2,
                            hidden_dim=256, max_position_embeddings=128)


FAMILY = registry.families.register("distilbert", registry.network_family(
    "distilbert", DistilBertEncoder, DistilBertConfig, load_distilbert_config, _demo_config,
    "config.json",
    name_tables={"hf": checkpoint_names.HF, "keras_hub": checkpoint_names.KERAS_HUB},
    checkpoint_heads=checkpoint_names.CHECKPOINT_HEADS,
    is_encoder=lambda model: type(model) is DistilBertEncoder,  # pylint: disable=unidiomatic-typecheck
    has_pooler=False,
    # Its classifier reads the first token through `pre_classifier` (HF's head).
    sentence_vector="first_token",
    hf=hf_format.HF_FORMAT,
))
