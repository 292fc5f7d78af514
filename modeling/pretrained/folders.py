"""What a model folder is: its kind, its family, its config, weights and tokenizer.

Users arrive with one of four kinds of folder, and one path should be
enough for every script (`--init_checkpoint=FOLDER`) and for
`modeling.pretrained.from_pretrained(FOLDER)`:

* **hf**: a Hugging Face model folder: `config.json` with `model_type`,
  `model.safetensors` (or a sharded index), tokenizer files. The family is
  the registered one whose `Family.hf.model_types` holds the `model_type`
  (so a new family's folders load once it registers its `HFFormat`).
* **keras_hub**: a keras-hub preset folder (`config.json` naming a
  `keras_hub` class, `metadata.json`, `model.weights.h5`, `tokenizer.json`,
  `assets/`). keras-hub itself reads it (`modeling.pretrained.keras_hub`).
* **google**: a Google release folder: `bert_config.json` (or
  `albert_config.json`), `vocab.txt` (or a SentencePiece `*.model`) and a
  TF1 checkpoint (`bert_model.ckpt.*`, `model.ckpt-N.*`).
* **project**: this project's own output directory: a `checkpoint` state
  file of object-based `ckpt-N` checkpoints next to the family's config file
  (the job writes it there), and the vocabulary if the job copied one.

A file path inside such a folder (`.../bert_model.ckpt`, `.../ckpt-5`,
`.../model.safetensors`) names the same folder, with that checkpoint.

`inspect(path)` answers with a `ModelFolder`; nothing is built or loaded
until asked. Every problem is one line naming the folder and what was
expected: no config, an unknown `model_type` (with the known ones), a
`config.json` without `model_type`, a PyTorch pickle in place of weights.
"""

import dataclasses
import json
import os
from typing import Any, Optional

from modeling import registry
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import UnknownModelTypeError

__all__ = ["HF", "KERAS_HUB", "GOOGLE", "PROJECT", "FolderError", "ModelFolder", "fill_settings",
           "hf_family", "inspect", "is_model_folder", "published_folder"]

HF = "hf"
KERAS_HUB = "keras_hub"
GOOGLE = "google"
PROJECT = "project"

# Google's release config names -> family; SentencePiece vocabularies of
# Google's ALBERT releases (`30k-clean.model`) are found by suffix.
_GOOGLE_CONFIGS = (("bert_config.json", "bert"), ("albert_config.json", "albert"))
_CHECKPOINT_STATE = "checkpoint"


class FolderError(ValueError):
    """A path that is not a model folder of a kind this project reads (one line)."""


@dataclasses.dataclass
class ModelFolder:
    """A model folder, inspected (see the module docstring).

    Attributes:
        path: the folder.
        kind: `HF`, `KERAS_HUB`, `GOOGLE` or `PROJECT`.
        family: the registered `registry.Family`.
        config_file: the family config's file in the folder.
        checkpoint: what `modeling.checkpoints.init_from_checkpoint` reads
            (the folder, a file or a TF checkpoint prefix; a keras-hub
            preset's folder, which keras-hub reads).
        hf_config: the parsed `config.json` of an HF folder (else None).
        vocab_file: the vocabulary file (`vocab.txt`, `vocab.json`,
            `spiece.model`, ...) if the folder has one, else None.
        merges_file: BPE merges (`merges.txt`) if any.
    """

    path: str
    kind: str
    family: Any
    config_file: str
    checkpoint: Optional[str]
    hf_config: Optional[dict] = None
    vocab_file: Optional[str] = None
    merges_file: Optional[str] = None

    def config(self):
        """The family's config object for this folder."""
        if self.kind == KERAS_HUB:
            from modeling.pretrained import keras_hub  # pylint: disable=import-outside-toplevel
            return keras_hub.preset_config(self)
        if self.kind == HF:
            return self.family.hf.config_from_hf(self.hf_config)
        return self.family.load_config(self.config_file)

    def tokenizer(self, config=None):
        """The folder's `PretrainedTokenizer` (ids equal to HF's for HF folders)."""
        hf_format = self.family.hf
        config = config if config is not None else self.config()
        if self.kind == KERAS_HUB:
            from modeling.pretrained import keras_hub  # pylint: disable=import-outside-toplevel
            return keras_hub.preset_tokenizer(self, config)
        if hf_format is None:
            raise TokenizerFormatError(
                "%s: the %s family has no tokenizer reader for model folders"
                % (self.path, self.family.name))
        return hf_format.read_tokenizer(self.path, config)

    def describe(self):
        return "%s (%s folder, %s family)" % (self.path, self.kind, self.family.name)


def hf_family(model_type, where="config.json"):
    """The registered family that reads HF `model_type`; one-line error naming the known ones."""
    registry.discover()
    known = {}
    for _, family in registry.families.items():
        if family.hf is not None:
            for name in family.hf.model_types:
                known[name] = family
    if model_type not in known:
        raise UnknownModelTypeError(
            "%s: model_type %r is not a family this project reads (known: %s)"
            % (where, model_type, ", ".join(sorted(known))))
    return known[model_type]


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise FolderError("%s: not a readable JSON file: %s"
                          % (path, str(e).splitlines()[0] if str(e) else type(e).__name__)) \
            from None
    if not isinstance(value, dict):
        raise FolderError("%s: expected a JSON object, got %s" % (path, type(value).__name__))
    return value


def _first_file(folder, names):
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def _vocab_files(folder):
    vocab = _first_file(folder, ("vocab.txt", "vocab.json", "spiece.model", "tokenizer.json"))
    if vocab is None:
        models = sorted(n for n in os.listdir(folder) if n.endswith(".model"))
        vocab = os.path.join(folder, models[0]) if models else None
    return vocab, _first_file(folder, ("merges.txt",))


def _split(path):
    """(folder, checkpoint path or None) of a folder or of a file/prefix inside one."""
    path = os.fspath(path).rstrip("/") or "/"
    if os.path.isdir(path):
        return path, None
    folder = os.path.dirname(path) or "."
    if os.path.isfile(path) or os.path.isfile(path + ".index") or path.endswith(".index"):
        return folder, path
    raise FolderError("%s: no such file or folder" % path)


def is_model_folder(path):
    """Whether `path` (or the folder of the file it names) holds a config `inspect` reads."""
    try:
        folder, _ = _split(path)
    except FolderError:
        return False
    names = ("config.json",) + tuple(name for name, _ in _GOOGLE_CONFIGS)
    if _first_file(folder, names) is not None:
        return True
    return any(os.path.isfile(os.path.join(folder, _family_config(f)))
               for _, f in registry.families.items() if _family_config(f))


def _family_config(family):
    return family.config_file_name


def inspect(path, family=None):
    """The `ModelFolder` at `path` (a folder, or a checkpoint file/prefix inside one).

    `family`: the family to assume when the folder cannot tell (this
    project's GPT, GPT-2 or XLNet output: a `config.json` without
    `model_type`), a registered name; None: the folder must tell.

    Raises:
        FolderError: not a folder of a known kind (one line, names the path).
        UnknownModelTypeError: an HF `config.json` whose `model_type` no
            family reads.
    """
    registry.discover()
    folder, checkpoint = _split(path)
    vocab, merges = _vocab_files(folder)
    config_json = os.path.join(folder, "config.json")
    if os.path.isfile(config_json):
        values = _read_json(config_json)
        if str(values.get("module", "")).startswith("keras_hub"):
            return _keras_hub_folder(folder, config_json, values)
        if "model_type" in values:
            family = hf_family(values["model_type"], config_json)
            state = os.path.isfile(os.path.join(folder, _CHECKPOINT_STATE))
            kind = PROJECT if state and checkpoint is None else HF
            if kind == HF and checkpoint is None:
                checkpoint = folder
            return ModelFolder(folder, kind, family, config_json, checkpoint or folder,
                               hf_config=values if kind == HF else None,
                               vocab_file=vocab, merges_file=merges)
        families = [f for _, f in registry.families.items()
                    if f.config_file_name == "config.json"]
        if family is not None and family in [f.name for f in families]:
            state = os.path.isfile(os.path.join(folder, _CHECKPOINT_STATE))
            return ModelFolder(folder, PROJECT if state else GOOGLE, registry.families.get(family),
                               config_json, checkpoint or folder, vocab_file=vocab,
                               merges_file=merges)
        if not os.path.isfile(os.path.join(folder, _CHECKPOINT_STATE)) or len(families) != 1:
            raise FolderError(
                "%s has no `model_type`: cannot tell the model family (give --model_family, "
                "or add \"model_type\" as HF writes it)" % config_json)
    for name, family_name in _GOOGLE_CONFIGS:
        config_file = os.path.join(folder, name)
        if os.path.isfile(config_file):
            kind = PROJECT if os.path.isfile(os.path.join(folder, _CHECKPOINT_STATE)) else GOOGLE
            return ModelFolder(folder, kind, registry.families.get(family_name), config_file,
                               checkpoint or folder, vocab_file=vocab, merges_file=merges)
    for _, family in registry.families.items():
        config_file = os.path.join(folder, family.config_file_name)
        if family.config_file_name != "config.json" and os.path.isfile(config_file):
            return ModelFolder(folder, PROJECT, family, config_file, checkpoint or folder,
                               vocab_file=vocab, merges_file=merges)
    raise FolderError(
        "%s: not a model folder: no config.json (Hugging Face, keras-hub), bert_config.json or "
        "albert_config.json (Google), nor a family's config file" % folder)


def _keras_hub_folder(folder, config_json, values):
    """A keras-hub preset: the family is the one whose HF format names the backbone."""
    class_name = str(values.get("class_name", ""))
    for _, family in registry.families.items():
        hf_format = family.hf
        if hf_format is not None and hf_format.keras_hub_backbone == class_name:
            assets = os.path.join(folder, "assets", "tokenizer")
            vocab = _first_file(assets, ("vocabulary.txt", "vocabulary.json", "vocabulary.spm"))
            return ModelFolder(folder, KERAS_HUB, family, config_json, folder,
                               vocab_file=vocab, merges_file=_first_file(assets, ("merges.txt",)))
    raise FolderError("%s: keras-hub backbone %r is not one this project reads"
                      % (config_json, class_name))


# Settings fields a model folder can fill, and the `ModelFolder` attribute each takes.
SETTINGS_FIELDS = (("bert_config_file", "config_file"), ("config_file", "config_file"),
                   ("vocab_file", "vocab_file"), ("merges_file", "merges_file"))


def _folder_case(folder):
    """`do_lower_case` of the folder's `tokenizer_config.json` (HF) or `tokenizer.json`
    (keras-hub's `lowercase`), or None if it does not say."""
    for name, read in (("tokenizer_config.json", lambda v: v.get("do_lower_case")),
                       ("tokenizer.json", lambda v: v.get("config", {}).get("lowercase"))):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                value = read(json.load(f))
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, bool):
            return value
    return None


def fill_settings(settings, checkpoint_field="init_checkpoint"):
    """`settings` completed from the model folder its `init_checkpoint` names (a copy).

    A model folder as `--init_checkpoint` is enough, for every script and
    library job: when it is (or is inside) an HF, Google or project folder,
    the empty config, vocabulary and merges fields take the folder's files
    and a default `model_family` (None or the registry's default) takes the
    folder's family (flags given explicitly win), and `do_lower_case`
    follows the folder's `tokenizer_config.json` when it says (the case its
    weights were trained with). Anything else is returned as it is.

    Raises:
        FolderError, UnknownModelTypeError: the folder cannot be read (one line).
    """
    path = getattr(settings, checkpoint_field, None)
    if not dataclasses.is_dataclass(settings) or not isinstance(path, str) or not path or \
            not is_model_folder(path):
        return settings
    family = getattr(settings, "model_family", "absent")
    explicit = family if family not in (None, "absent", registry.DEFAULT_FAMILY) else None
    try:
        folder = inspect(path, family=explicit)
    except FolderError:
        if any(getattr(settings, field, None) for field in ("bert_config_file", "config_file")):
            return settings  # Everything was given explicitly: the folder is not needed.
        raise
    changes = {}
    if family in (None, registry.DEFAULT_FAMILY) and family != folder.family.name:
        changes["model_family"] = folder.family.name
    if getattr(settings, "recipe", None) == registry.DEFAULT_DECODER and \
            folder.family.name in registry.decoders and folder.family.name != settings.recipe:
        changes["recipe"] = folder.family.name  # run/generate.py: the folder's causal LM
    for field, attribute in SETTINGS_FIELDS:
        if hasattr(settings, field) and not getattr(settings, field) and getattr(folder, attribute):
            changes[field] = getattr(folder, attribute)
    case = _folder_case(folder.path)
    if case is not None and getattr(settings, "do_lower_case", case) != case:
        changes["do_lower_case"] = case
    return dataclasses.replace(settings, **changes) if changes else settings


def published_folder(settings, fields=("bert_config_file", "config_file", "vocab_file",
                                       "merges_file"), checkpoint_field="init_checkpoint"):
    """The HF or keras-hub `ModelFolder` that `settings` reads whole, else None.

    A script reads a published folder through its own tokenizer (HF's ids,
    any family) when its checkpoint field names such a folder and each of
    `fields` the settings have is empty or names the folder's own file (as
    `fill_settings` fills them). A file given in their place wins: the
    script then reads the files it was given, the way it always has.
    """
    path = getattr(settings, checkpoint_field, None)
    if not isinstance(path, str) or not path or not is_model_folder(path):
        return None
    folder = inspect(path)
    if folder.kind not in (HF, KERAS_HUB):
        return None
    own = dict(SETTINGS_FIELDS)
    for field in fields:
        given = getattr(settings, field, None)
        mine = getattr(folder, own[field]) if field in own else None
        if given and (mine is None or os.path.realpath(given) != os.path.realpath(mine)):
            return None
    return folder
