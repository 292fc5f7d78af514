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
name), `keras_hub_config` (`backbone config dict -> config`),
`keras_hub_tokenizer` (`(folder, tokenizer config dict, config) ->
PretrainedTokenizer`) and, when keras-hub lays a weight out otherwise than
the family's encoder does, `keras_hub_weights` (the merged arrays
rewritten exactly, before the table matches them: RoBERTa's positions).
"""

import json
import os

import numpy as np

from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.checkpoints.report import CheckpointFormatError
from modeling.pretrained import loading
from modeling.pretrained.formats import TokenizerFormatError

__all__ = ["KERAS_HUB_KEY", "is_preset", "load_into", "load_preset", "preset_config",
           "preset_tokenizer"]

KERAS_HUB_KEY = "keras_hub"


class _BackboneSource:
    """A keras-hub backbone's variables by path, attention kernels merged to 2-D."""

    def __init__(self, backbone, description, rewrite=None):
        self.description = description
        self._variables = {v.path: v for v in backbone.weights}
        self._arrays = None
        if rewrite is not None:
            # The family's exact rewrite of the merged arrays (`HFFormat.keras_hub_weights`).
            merged = {name: self._read_variable(name) for name in self._variables}
            self._arrays = {name: np.asarray(value) for name, value in rewrite(merged).items()}

    def names(self):
        return list(self._variables if self._arrays is None else self._arrays)

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
        if self._arrays is not None:
            return tuple(int(d) for d in self._arrays[name].shape)
        return self._merged(name, self._variables[name].shape)

    def _read_variable(self, name):
        variable = self._variables[name]
        return np.reshape(np.asarray(variable.numpy()), self._merged(name, variable.shape))

    def read(self, name):
        if self._arrays is not None:
            return self._arrays[name]
        return self._read_variable(name)


def _family_format(folder):
    hf_format = folder.family.hf
    if hf_format is None or hf_format.keras_hub_config is None:
        raise CheckpointFormatError("%s: the %s family reads no keras-hub presets"
                                    % (folder.path, folder.family.name))
    return hf_format


def _preset_json(folder, name):
    return _preset_json_file(os.path.join(folder.path, name))


def _preset_json_file(path, error=CheckpointFormatError):
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except FileNotFoundError:
        raise error("%s: no such file (the keras-hub preset's %s)"
                    % (path, os.path.basename(path))) from None
    except (OSError, ValueError, RecursionError) as e:
        raise error("%s: cannot read the keras-hub preset file: %s"
                    % (path, str(e).splitlines()[0])) from None
    if not isinstance(values, dict):
        raise error("%s: expected a JSON object, got %s" % (path, type(values).__name__))
    return values


def preset_config(folder):
    """The family's config for a keras-hub preset folder (from its `config.json`)."""
    values = _preset_json(folder, "config.json")
    try:
        return _family_format(folder).keras_hub_config(values.get("config", {}))
    except KeyError as e:
        raise CheckpointFormatError("%s: the keras-hub %s config has no %s"
                                    % (os.path.join(folder.path, "config.json"),
                                       values.get("class_name"), e)) from None


def preset_tokenizer(folder, config):
    """The `PretrainedTokenizer` of a keras-hub preset folder (its `tokenizer.json`, `assets/`)."""
    values = _preset_json_file(os.path.join(folder.path, "tokenizer.json"), TokenizerFormatError)
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
    A preset holds no pre-training heads: a model with heads is refused
    unless `allow_missing_heads` (they keep their initial values and are
    listed in the report's `missing_heads`).
    """
    import keras_hub  # pylint: disable=import-outside-toplevel
    target = targets.find_target(model)
    heads = sorted(root for root in target.roots if root != "encoder")
    if heads and not allow_missing_heads:
        # A preset holds the backbone only: heads would keep their initial values.
        raise CheckpointFormatError(
            "%s: a keras-hub preset holds the backbone only, no %s head for %s (pass "
            "allow_missing_heads=True to keep them initialised)"
            % (path, ", ".join(heads), target.description))
    table = name_tables.table_for(target, KERAS_HUB_KEY, "keras-hub preset %s" % path)
    hf_format = target.family.hf
    config_json = os.path.join(os.fspath(path), "config.json")
    class_name = _preset_json_file(config_json).get("class_name")
    expected = None if hf_format is None else hf_format.keras_hub_backbone
    if class_name != expected:
        raise CheckpointFormatError(
            "%s: a keras-hub %s, not the %s family's %s; it cannot be read into %s"
            % (config_json, class_name, target.family.name, expected, target.description))
    backbone = keras_hub.models.Backbone.from_preset(os.fspath(path))
    source = _BackboneSource(backbone, "keras-hub preset %s" % path,
                             None if hf_format is None else hf_format.keras_hub_weights)
    report = name_tables.load_by_table(target, source, table, KERAS_HUB_KEY, os.fspath(path))
    report.missing_heads = list(report.missing_heads) + heads
    return report


def load_preset(folder, config, objectives=(), dtype=None, **encoder_kwargs):
    """(model, LoadReport): the family's model with the preset's backbone weights."""
    if objectives:
        raise CheckpointFormatError("%s: keras-hub presets hold the backbone only; no %s head"
                                    % (folder.path, ", ".join(objectives)))
    model = loading.build_model(folder.family, config, (), dtype, **encoder_kwargs)
    return model, load_into(model, folder.path)
