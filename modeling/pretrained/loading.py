"""`from_pretrained`: a model folder -> the family's model with its weights, and its tokenizer."""

import dataclasses
from typing import Any

from modeling import registry
from modeling.pretrained import folders

__all__ = ["Pretrained", "build_model", "from_pretrained", "load_pretrained"]


@dataclasses.dataclass
class Pretrained:
    """What `load_pretrained` found and built.

    Attributes:
        model: the family's encoder, or a `BertPretrainer` around it with
            the requested objectives' heads.
        tokenizer: the folder's `PretrainedTokenizer` (None when not asked).
        config: the family's config object.
        folder: the inspected `folders.ModelFolder`.
        report: the `modeling.checkpoints.LoadReport` of the weights.
    """

    model: Any
    tokenizer: Any
    config: Any
    folder: Any
    report: Any


def build_model(family, config, objectives=(), dtype=None, **encoder_kwargs):
    """The family's encoder for `config`, built; with `objectives`, a pretrainer around it."""
    from modeling.objectives.base import BertPretrainer  # pylint: disable=import-outside-toplevel
    kwargs = {} if dtype is None else {"dtype": dtype}
    encoder = family.build_encoder(config, **kwargs, **encoder_kwargs)
    if not encoder.built:
        encoder.build()
    if not objectives:
        return encoder
    parts = [registry.objectives.get(name)(config, family, **kwargs) for name in objectives]
    return BertPretrainer(encoder, parts, name="%s_pretrainer" % family.name, **kwargs)


def load_pretrained(path, objectives=(), config=None, tokenizer=True, dtype=None,
                    allow_missing_heads=False, **encoder_kwargs):
    """A `Pretrained` from the model folder (or checkpoint inside one) at `path`.

    Args:
        path: an HF, keras-hub, Google or project folder (see
            `modeling.pretrained.folders`), or a checkpoint file/prefix in one.
        objectives: registered objective names ("masked_lm",
            "next_sentence", "causal_lm", ...) whose heads are built and
            loaded too; () gives the encoder alone.
        config: overrides the folder's config (the family's config object).
        tokenizer: also read the tokenizer.
        dtype: the model's dtype policy (None: the global one).
        allow_missing_heads: see `modeling.checkpoints.init_from_checkpoint`.
        encoder_kwargs: passed to the family's `build_encoder`.
    """
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    folder = folders.inspect(path)
    if config is None:
        config = folder.config()
    if folder.kind == folders.KERAS_HUB:
        from modeling.pretrained import keras_hub  # pylint: disable=import-outside-toplevel
        model, report = keras_hub.load_preset(folder, config, objectives, dtype, **encoder_kwargs)
    else:
        model = build_model(folder.family, config, objectives, dtype, **encoder_kwargs)
        report = checkpoints.init_from_checkpoint(model, folder.checkpoint, allow_missing_heads)
    return Pretrained(model, folder.tokenizer(config) if tokenizer else None, config, folder,
                      report)


def from_pretrained(path, objectives=(), **kwargs):
    """`(model, tokenizer)` of the model folder at `path` (see `load_pretrained`)."""
    loaded = load_pretrained(path, objectives, **kwargs)
    return loaded.model, loaded.tokenizer
