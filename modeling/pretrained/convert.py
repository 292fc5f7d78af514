"""`run/convert_checkpoint.py`: any model folder or checkpoint in, an HF / keras-hub / Google folder out.

    python run/convert_checkpoint.py --init_checkpoint=out/pretraining \
        --output_format=hf --output_dir=out/hf_model

The input is whatever `--init_checkpoint` takes everywhere (an HF, keras-hub,
Google or project folder, or a checkpoint inside one); the family, config
and tokenizer come from its folder unless `--bert_config_file` /
`--vocab_file` / `--model_family` say otherwise. With `--heads=auto` the
pre-training heads the checkpoint holds go out too (masked LM and next
sentence: HF's `*ForPreTraining` / `*ForMaskedLM`); `--heads=none` writes
the encoder alone.
"""

import dataclasses
import os
from typing import Optional

from data.options import option
from modeling import registry
from modeling.checkpoints import targets
from modeling.pretrained import export
from modeling.pretrained import folders
from modeling.pretrained import loading

__all__ = ["ConvertSettings", "convert"]

# What --heads=auto tries, most complete first.
_HEAD_SETS = (("masked_lm", "next_sentence"), ("masked_lm",), ("causal_lm",), ())


@dataclasses.dataclass
class ConvertSettings:
    """What to convert into what; `run/convert_checkpoint.py`'s flags."""

    init_checkpoint: Optional[str] = option(
        None, "The model: an HF, keras-hub, Google or project folder, or a checkpoint in one.")
    output_dir: Optional[str] = option(None, "The folder to write (new or empty).")
    output_format: str = option("hf", "hf (transformers), keras_hub (a preset) or google "
                                "(TF1 checkpoint + config + vocab.txt).",
                                choices=export.FORMATS)
    bert_config_file: Optional[str] = option(
        None, "The model's config file (default: the one in the model's folder).")
    vocab_file: Optional[str] = option(
        None, "The vocabulary (default: the one in the model's folder); its folder's "
        "tokenizer files are read.")
    model_family: Optional[str] = option(
        None, "The model family (default: told from the folder).",
        choices=lambda: registry.default_first(registry.families.names()))
    heads: str = option("auto", "auto: the pre-training heads the checkpoint has; none: the "
                        "encoder alone.", choices=("auto", "none"))

    def check(self):
        for name in ("init_checkpoint", "output_dir"):
            if not getattr(self, name):
                raise ValueError("--%s is required" % name)
        for name in ("bert_config_file", "vocab_file"):
            path = getattr(self, name)
            if path and not os.path.isfile(path):
                raise ValueError("--%s=%s: no such file" % (name, path))
        target = os.path.abspath(self.output_dir)
        source = os.path.abspath(self.init_checkpoint)
        if not (os.path.exists(source) or os.path.isfile(source + ".index")):
            raise ValueError("--init_checkpoint=%s: no such file, folder or checkpoint prefix"
                             % self.init_checkpoint)
        if target == source or source.startswith(target + os.sep):
            raise ValueError("--output_dir=%s would overwrite --init_checkpoint=%s"
                             % (self.output_dir, self.init_checkpoint))
        # Before the model is loaded (export refuses the same, but only then).
        if os.path.isfile(target):
            raise ValueError("--output_dir=%s is a file; expected a new or empty folder"
                             % self.output_dir)
        if os.path.isdir(target) and os.listdir(target):
            raise ValueError("--output_dir=%s already holds files; expected a new or empty "
                             "folder" % self.output_dir)


def _tokenizer(settings, folder, config):
    """The folder's tokenizer, or the one of the folder holding `--vocab_file` (another
    file than the folder's own vocabulary, which `fill_settings` puts there: a keras-hub
    preset's `assets/tokenizer/` is no tokenizer folder of its own)."""
    own = folder.vocab_file is not None and settings.vocab_file and (
        os.path.realpath(settings.vocab_file) == os.path.realpath(folder.vocab_file))
    if settings.vocab_file and not own:
        return folder.family.hf.read_tokenizer(
            os.path.dirname(os.path.abspath(settings.vocab_file)), config)
    return folder.tokenizer(config)


def _folder(settings):
    """The input's `ModelFolder`; a checkpoint outside one (a run_classifier.py output
    directory) with `--bert_config_file` given is read as this project's."""
    try:
        folder = folders.inspect(settings.init_checkpoint)
    except folders.FolderError:
        if not settings.bert_config_file:
            raise
        if folders.is_model_folder(settings.bert_config_file):
            # The config of a model folder (the one fine-tuned): its family and tokenizer.
            base = folders.inspect(os.path.dirname(os.path.abspath(settings.bert_config_file)))
            return dataclasses.replace(base, kind=folders.PROJECT,
                                       checkpoint=settings.init_checkpoint)
        family = registry.families.get(settings.model_family or registry.DEFAULT_FAMILY)
        folder = folders.ModelFolder(
            os.path.dirname(os.path.abspath(settings.vocab_file or settings.bert_config_file)),
            folders.PROJECT, family, settings.bert_config_file, settings.init_checkpoint,
            vocab_file=settings.vocab_file)
    if settings.model_family and settings.model_family != folder.family.name:
        folder = dataclasses.replace(folder, family=registry.families.get(settings.model_family))
    return folder


# A fine-tuned classifier's head in a run_classifier.py checkpoint.
_CLASSIFIER_KEY = "model/output_weights/.ATTRIBUTES/VARIABLE_VALUE"


def _classifier(folder, config):
    """A `BertClassifier` (or the family's `HFFormat.build_classifier`) restored from a
    run_classifier.py checkpoint, or None for other checkpoints."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    if folder.checkpoint is None:
        return None
    fmt, prefix = checkpoints.resolve_checkpoint(folder.checkpoint)
    if fmt != checkpoints.OBJECT_BASED:
        return None
    shapes = dict(tf.train.list_variables(prefix))
    if _CLASSIFIER_KEY not in shapes:
        return None
    from modeling.analysis import compression  # pylint: disable=import-outside-toplevel
    from modeling.tasks import classification  # pylint: disable=import-outside-toplevel
    num_labels = shapes[_CLASSIFIER_KEY][0]
    build = folder.family.hf.build_classifier if folder.family.hf is not None else None
    if build is not None:  # the family's own classifier (its HFFormat's)
        model = build(config, num_labels)
    else:
        model = classification.BertClassifier.from_config_object(
            config, num_labels=num_labels, family=folder.family.name)
    model({"input_ids": tf.zeros((1, 2), tf.int32), "input_mask": tf.ones((1, 2), tf.int32),
           "segment_ids": tf.zeros((1, 2), tf.int32)})
    compression.restore_classifier(model, prefix)
    return model


def convert(settings):
    """Loads `settings.init_checkpoint` and writes it as `settings.output_format`; returns a summary.

    A run_classifier.py checkpoint goes out with its classifier head (HF's
    `*ForSequenceClassification`) unless `--heads=none`.
    """
    from modeling.checkpoints import CheckpointMismatchError  # pylint: disable=import-outside-toplevel
    settings.check()
    folder = _folder(settings)
    config = (folder.family.load_config(settings.bert_config_file) if settings.bert_config_file
              else folder.config())
    tokenizer = _tokenizer(settings, folder, config)
    classifier = _classifier(folder, config) if settings.heads == "auto" else None
    if classifier is not None:
        export.save_pretrained(classifier, tokenizer, settings.output_dir,
                               settings.output_format, config)
        return {"input": folder.describe(), "output_dir": settings.output_dir,
                "output_format": settings.output_format, "heads": ["classifier"],
                "weights": len(classifier.weights)}
    head_sets = _HEAD_SETS if settings.heads == "auto" else ((),)
    last_error = None
    for objectives in head_sets:
        if any(name not in registry.objectives for name in objectives):
            continue
        model = loading.build_model(folder.family, config, objectives)
        if len(targets.find_target(model).roots) - 1 < len(objectives):
            continue  # A head the family's checkpoints have no names for.
        try:
            from modeling import checkpoints  # pylint: disable=import-outside-toplevel
            report = checkpoints.init_from_checkpoint(model, folder.checkpoint)
        except CheckpointMismatchError as e:
            last_error = e
            continue
        except ValueError as e:  # A head this family cannot build.
            last_error = e
            continue
        break
    else:
        raise last_error
    export.save_pretrained(model, tokenizer, settings.output_dir, settings.output_format, config)
    return {"input": folder.describe(), "output_dir": settings.output_dir,
            "output_format": settings.output_format, "heads": list(objectives),
            "weights": len(report.loaded)}
