"""Every model out: HF, keras-hub and Google folders that those projects load.

`save_pretrained(model, tokenizer, output_dir, output_format)` writes

* "hf": `model.safetensors` under the family's HF names (the same name
  table that reads them, `modeling.checkpoints.name_tables.table_arrays`),
  `config.json` (`HFFormat.config_to_hf` + `architectures` of the model's
  role: the encoder alone, or with its pre-training heads) and the
  tokenizer's files. `transformers.AutoModel` / `AutoTokenizer` load it
  with the same outputs and ids (tested per family).
* "keras_hub": a keras-hub preset: the HF folder is written first and
  keras-hub's own converter reads it (`Backbone.from_preset`,
  `Tokenizer.from_preset`) and saves the preset (`save_to_preset`), so the
  preset is exactly what keras-hub makes of the HF release.
* "google": Google's TF1 checkpoint (`bert_model.ckpt`), the family's
  config file and `vocab.txt`, as google-research/bert's scripts expect.

The output folder must not exist or be empty: everything is written into a
temporary folder beside it, which is renamed into place only when complete,
so an interrupted export leaves nothing half-written.
"""

import contextlib
import json
import os
import shutil
import tempfile

import numpy as np

from data import atomic
from modeling.checkpoints import name_tables
from modeling.checkpoints import targets

__all__ = ["FORMATS", "ExportError", "config_of", "save_google", "save_hf", "save_keras_hub",
           "save_pretrained"]

FORMATS = ("hf", "keras_hub", "google")


class ExportError(ValueError):
    """A model that cannot be written in the asked format (one line)."""


def config_of(model):
    """The family config of `model`'s encoder.

    BERT-shaped encoders describe themselves (`bert_config()`,
    `albert_config()`); networks built from their config's fields
    (`modeling.layers.config_fields.ConfigFields`: GPT-2, GPT, XLNet, ...)
    give them back as the family's `config_class` (`config_object`), so a
    new family of that kind needs no method of its own here.
    """
    target = targets.find_target(model)
    encoder = target.encoder
    for method in ("bert_config", "albert_config"):
        if hasattr(encoder, method):
            return getattr(encoder, method)()
    if hasattr(encoder, "config_object") and target.family.config_class is not None:
        return encoder.config_object(target.family.config_class)
    raise ExportError("%s cannot describe its config; pass config=" % type(encoder).__name__)


def _is_classifier(model, target):
    """A fine-tuned sentence classifier (`modeling.tasks.classification.BertClassifier`)."""
    return (not target.has_heads and model is not target.encoder
            and getattr(model, "output_weights", None) is not None)


def _is_causal_lm(model):
    """A pretrainer with the "causal_lm" objective (GPT, GPT-2).

    Its head is the token table itself (tied), so it has no head root in the
    family's name table and the roots alone cannot tell it from the bare
    network: the objective says it. HF's `*LMHeadModel` ties `lm_head` to
    the embeddings the same way, so its file holds the network's weights
    only (under `with_prefix`).
    """
    from modeling.objectives.causal_lm import CausalLMObjective  # pylint: disable=import-outside-toplevel
    return any(isinstance(o, CausalLMObjective) for o in getattr(model, "objectives", ()) or ())


def _role(target, hf_format, model=None):
    """HF's architecture role: encoder, classifier, masked_lm, pretraining or causal_lm."""
    if model is not None and _is_classifier(model, target):
        if hf_format.classifier_table is None or "classifier" not in hf_format.architectures:
            raise ExportError("the %s family's HF format has no sequence-classification head "
                              "layout; export the encoder alone (model.encoder)"
                              % target.family.name)
        return "classifier"
    if not target.has_heads:
        return "encoder"
    if _is_causal_lm(model) and "causal_lm" in hf_format.architectures:
        return "causal_lm"
    roots = set(target.roots) - {"encoder"}
    for role, needs in (("pretraining", {"mlm", "nsp"}), ("masked_lm", {"mlm"}),
                        ("causal_lm", {"lm"})):
        if needs <= roots and role in hf_format.architectures:
            return role
    return "masked_lm" if "masked_lm" in hf_format.architectures else "encoder"


def hf_arrays(model, prefixed=None):
    """(`{HF name: array}`, architecture role) of `model` under its family's HF names.

    `prefixed`: put `HFFormat.with_prefix` before the encoder's names (None:
    as HF saves the role: task and pre-training models prefixed, the bare
    encoder not).
    """
    target = targets.find_target(model)
    hf_format = target.family.hf
    if hf_format is None or hf_format.table not in target.family.name_tables:
        raise ExportError("the %s family has no Hugging Face format" % target.family.name)
    table = target.family.name_tables[hf_format.table]
    arrays = name_tables.table_arrays(target, table)
    role = _role(target, hf_format, model)
    if prefixed is None:
        prefixed = role != "encoder"
    if prefixed and hf_format.with_prefix:
        prefixes = tuple(table.encoder_prefixes)
        arrays = {(hf_format.with_prefix + name if name.startswith(prefixes) else name): value
                  for name, value in arrays.items()}
    if role == "classifier":
        # `classifier_table`: {HF name: (attribute of the classifier, transpose)}.
        for name, (attribute, transpose) in hf_format.classifier_table().items():
            variable = model
            for step in attribute.split("."):
                variable = getattr(variable, step)
            value = np.asarray(variable.numpy())
            arrays[name] = value.T if transpose else value
    return {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in
            arrays.items()}, role


@contextlib.contextmanager
def _staged(output_dir):
    """A temporary folder renamed to `output_dir` when the block completes."""
    output_dir = os.path.abspath(os.fspath(output_dir))
    if os.path.exists(output_dir):
        if not os.path.isdir(output_dir):
            raise ExportError("%s exists and is not a folder" % output_dir)
        if os.listdir(output_dir):
            raise ExportError("%s already holds files; export into a new or empty folder"
                              % output_dir)
    parent = os.path.dirname(output_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix="." + os.path.basename(output_dir) + ".tmp-", dir=parent)
    try:
        yield staging
        if os.path.isdir(output_dir):
            os.rmdir(output_dir)
        os.rename(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_hf(model, tokenizer, folder, config, prefixed=None, rewrite=None):
    import safetensors.numpy  # pylint: disable=import-outside-toplevel
    hf_format = targets.find_target(model).family.hf
    arrays, role = hf_arrays(model, prefixed)
    if rewrite is not None:
        arrays = rewrite(arrays)
    safetensors.numpy.save_file(arrays, os.path.join(folder, "model.safetensors"),
                                metadata={"format": "pt"})
    values = hf_format.config_to_hf(config)
    values["architectures"] = [hf_format.architectures[role]]
    if role == "classifier":
        num_labels = int(model.output_weights.shape[0])
        values["id2label"] = {str(i): "LABEL_%d" % i for i in range(num_labels)}
        values["label2id"] = {"LABEL_%d" % i: i for i in range(num_labels)}
        values["problem_type"] = {"classification": "single_label_classification",
                                  "multi_label": "multi_label_classification",
                                  "regression": "regression"}[model.task_type]
    atomic.write_text(os.path.join(folder, "config.json"), json.dumps(values, indent=2) + "\n")
    if tokenizer is not None:
        tokenizer.save(folder)
    return folder


def save_hf(model, tokenizer, output_dir, config=None):
    """Writes an HF model folder (see the module docstring); returns `output_dir`."""
    config = config if config is not None else config_of(model)
    with _staged(output_dir) as folder:
        _write_hf(model, tokenizer, folder, config)
    return os.fspath(output_dir)


def save_keras_hub(model, tokenizer, output_dir, config=None):
    """Writes a keras-hub preset folder through keras-hub's own HF converter."""
    import keras_hub  # pylint: disable=import-outside-toplevel
    target = targets.find_target(model)
    if target.family.hf is None or not target.family.hf.keras_hub_backbone:
        raise ExportError("keras-hub has no backbone for the %s family" % target.family.name)
    if target.has_heads:
        model = target.encoder  # keras-hub presets hold the backbone and the tokenizer
    config = config if config is not None else config_of(model)
    with tempfile.TemporaryDirectory() as hf_folder, _staged(output_dir) as folder:
        # keras-hub's converters read the names of HF's released (task-model) files.
        _write_hf(model, tokenizer, hf_folder, config, prefixed=True,
                  rewrite=target.family.hf.keras_hub_arrays)
        backbone = keras_hub.models.Backbone.from_preset(hf_folder)
        backbone.save_to_preset(folder)
        if tokenizer is not None:
            keras_hub.tokenizers.Tokenizer.from_preset(hf_folder).save_to_preset(folder)
    return os.fspath(output_dir)


def save_google(model, tokenizer, output_dir, config=None):
    """Writes Google's TF1 checkpoint, the family's config file and the vocabulary."""
    from modeling.checkpoints import save_google_checkpoint  # pylint: disable=import-outside-toplevel
    target = targets.find_target(model)
    config = config if config is not None else config_of(model)
    with _staged(output_dir) as folder:
        name = "model.ckpt" if target.family.name == "albert" else "bert_model.ckpt"
        save_google_checkpoint(model, os.path.join(folder, name))
        config.to_json_file(os.path.join(folder, target.family.config_file_name))
        if tokenizer is not None:
            for path in tokenizer.save(folder):
                if os.path.basename(path) in ("tokenizer_config.json", "special_tokens_map.json"):
                    os.remove(path)  # Google's folders hold the vocabulary alone.
    return os.fspath(output_dir)


def save_pretrained(model, tokenizer, output_dir, output_format="hf", config=None):
    """Writes `model` (and `tokenizer`) as an `output_format` folder: "hf", "keras_hub", "google"."""
    writers = {"hf": save_hf, "keras_hub": save_keras_hub, "google": save_google}
    if output_format not in writers:
        raise ExportError("output_format %r: expected one of %s" % (output_format,
                                                                   ", ".join(FORMATS)))
    return writers[output_format](model, tokenizer, output_dir, config)
