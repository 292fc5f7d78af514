"""keras-hub preset folders in: keras-hub reads its own preset, the family's table maps the weights.

A preset (`config.json` naming a keras-hub backbone, `model.weights.h5`,
`tokenizer.json`, `assets/`) is loaded by keras-hub itself
(`keras_hub.models.Backbone.from_preset`), so whatever keras-hub version
wrote it, keras-hub's own reader decides what it holds. Its variables are
then matched to the family's encoder through the family's `"keras_hub"`
name table (`modeling/<family>/checkpoint_names.py`), with the same
all-or-nothing checks as every other format
(`modeling.checkpoints.name_tables.load_by_table`).

keras-hub keeps attention projections as `EinsumDense` kernels
`[hidden, heads, head_dim]` (and `[heads, head_dim, hidden]` for the
output); this project's are 2-D `Dense` kernels, so the source below shows
them merged to 2-D (a reshape, no reordering: the head axis is the slower
one in both).

The family supplies, on its `HFFormat`: `keras_hub_backbone` (the class
name), `keras_hub_config` (`backbone config dict -> config`) and
`keras_hub_tokenizer` (`(folder, tokenizer config dict, config) ->
PretrainedTokenizer`).
"""

import json
import os

import numpy as np

from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.checkpoints.report import CheckpointFormatError
from modeling.pretrained import loading

__all__ = ["KERAS_HUB_KEY", "is_preset", "load_into", "load_preset", "preset_config",
           "preset_tokenizer"]

KERAS_HUB_KEY = "keras_hub"


class _BackboneSource:
    """A keras-hub backbone's variables by path, attention kernels merged to 2-D."""

    def __init__(self, backbone, description):
        self.description = description
        self._variables = {v.path: v for v in backbone.weights}

    def names(self):
        return list(self._variables)

    @staticmethod
    def _merged(name, shape):
        shape = tuple(int(d) for d in shape)
        if len(shape) == 3:
            # [heads, head_dim, hidden] output kernels; [hidden, heads, head_dim] the others.
            if name.endswith("attention_output/kernel"):
                return (shape[0] * shape[1], shape[2])
            return (shape[0], shape[1] * shape[2])
        if len(shape) == 2 and name.endswith("/bias"):
            return (shape[0] * shape[1],)
        return shape

    def shape(self, name):
        return self._merged(name, self._variables[name].shape)

    def read(self, name):
        return np.reshape(np.asarray(self._variables[name].numpy()), self.shape(name))


def _family_format(folder):
    hf_format = folder.family.hf
    if hf_format is None or hf_format.keras_hub_config is None:
        raise CheckpointFormatError("%s: the %s family reads no keras-hub presets"
                                    % (folder.path, folder.family.name))
    return hf_format


def _preset_json(folder, name):
    path = os.path.join(folder.path, name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointFormatError("%s: cannot read the keras-hub preset file: %s"
                                    % (path, str(e).splitlines()[0])) from None


def preset_config(folder):
    """The family's config for a keras-hub preset folder (from its `config.json`)."""
    values = _preset_json(folder, "config.json")
    return _family_format(folder).keras_hub_config(values.get("config", {}))


def preset_tokenizer(folder, config):
    """The `PretrainedTokenizer` of a keras-hub preset folder (its `tokenizer.json`, `assets/`)."""
    values = _preset_json(folder, "tokenizer.json")
    return _family_format(folder).keras_hub_tokenizer(folder.path, values.get("config", {}),
                                                      config)


def is_preset(path):
    """Whether `path` is a keras-hub preset folder (its `config.json` names a keras_hub class)."""
    config = os.path.join(os.fspath(path), "config.json")
    if not os.path.isfile(config):
        return False
    try:
        with open(config, encoding="utf-8") as f:
            return str(json.load(f).get("module", "")).startswith("keras_hub")
    except (OSError, ValueError, AttributeError):
        return False


def load_into(model, path, allow_missing_heads=False):
    """Fills `model` (a family's encoder, or a model around one) from the preset at `path`.

    The `--init_checkpoint` reader of keras-hub presets
    (`modeling.checkpoints.init_from_checkpoint`); returns a `LoadReport`.
    """
    del allow_missing_heads  # A preset holds the backbone only; heads start fresh.
    import keras_hub  # pylint: disable=import-outside-toplevel
    backbone = keras_hub.models.Backbone.from_preset(os.fspath(path))
    target = targets.find_target(model)
    table = name_tables.table_for(target, KERAS_HUB_KEY, "keras-hub preset %s" % path)
    source = _BackboneSource(backbone, "keras-hub preset %s" % path)
    return name_tables.load_by_table(target, source, table, KERAS_HUB_KEY, os.fspath(path))


def load_preset(folder, config, objectives=(), dtype=None, **encoder_kwargs):
    """(model, LoadReport): the family's model with the preset's backbone weights."""
    if objectives:
        raise CheckpointFormatError("%s: keras-hub presets hold the backbone only; no %s head"
                                    % (folder.path, ", ".join(objectives)))
    model = loading.build_model(folder.family, config, (), dtype, **encoder_kwargs)
    return model, load_into(model, folder.path)
