"""Registries: the parts of the library find each other by name.

A part registers itself next to its definition:

    from modeling import registry

    @registry.encoders.register("bert")
    class BertEncoder(EncoderBase): ...

and whoever needs it asks by name (`registry.encoders.get("bert")`), so that
recipes, run scripts, the checkpoint loaders and the trainer never branch on a
family's name. The registries:

    families     a model family: its config class, config loader, encoder
                 class, demo config and checkpoint name tables, and what
                 the shared tools may do with it (`Family`: frozen features,
                 head pruning, attention maps, feature extraction)
    encoders     encoder/network classes (`from_config_object(config)`)
    objectives   pre-training objectives: `factory(config, family) -> Objective`
    pipelines    pre-training input pipelines (`modeling.recipes.pipelines`)
    tasks        fine-tuning task models
    decoders     ways to generate text (`Decoder`; `run/generate.py --recipe`)

A shared tool offers what the families registered (`families_with(capability)`,
`default_first`), so a new family is added by touching its own package only.

Built-in parts live in the packages of `modeling` and `data`; they register
when imported, and `discover()` imports them all (every sub-package of
`modeling`, every module of `modeling.objectives`, `modeling.tasks` and
`modeling.recipes.pipelines`). A user's own module registers its parts the
same way and is loaded with `load_user_module(path)` (`--recipe_module`).
"""

import dataclasses
import importlib
import os
import pkgutil
import sys
from typing import Any, Callable, Optional

from data import user_files

__all__ = ["DEFAULT_DECODER", "DEFAULT_FAMILY", "Decoder", "Family", "HeadPruning", "Registry",
           "RegistryError", "decoders", "default_first", "discover", "families", "encoders",
           "objectives", "pipelines", "tasks", "load_user_module", "families_with",
           "network_family", "build_encoder"]

# The family of a script or task model not told one (`--model_family`'s
# default). The one place a default family is named.
DEFAULT_FAMILY = "bert"
# `run/generate.py`'s default `--recipe`, and the causal-LM family that
# `modeling.serving.generation.load_generator` builds when not told one.
DEFAULT_DECODER = "gpt2"


class RegistryError(KeyError):
    """An unknown name, or a name registered twice."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class Registry:
    """A name -> object table with a clear error for unknown names."""

    def __init__(self, kind):
        self.kind = kind
        self._items = {}

    def register(self, name, obj=None, *, override=False):
        """Registers `obj` under `name`; without `obj`, returns a decorator."""
        def add(value):
            if not override and name in self._items and self._items[name] is not value:
                raise RegistryError("%s %r is registered twice (%r and %r)"
                                    % (self.kind, name, self._items[name], value))
            self._items[name] = value
            return value
        return add if obj is None else add(obj)

    def get(self, name):
        if name not in self._items:
            discover()
        if name not in self._items:
            failed = "".join("; %s could not be imported (%s)" % item
                             for item in sorted(_FAILED_IMPORTS.items()))
            raise RegistryError("unknown %s %r; known: %s%s"
                                % (self.kind, name, ", ".join(self.names()) or "none", failed))
        return self._items[name]

    def __contains__(self, name):
        if name not in self._items:
            discover()
        return name in self._items

    def names(self):
        discover()
        return sorted(self._items)

    def items(self):
        discover()
        return sorted(self._items.items())


@dataclasses.dataclass(frozen=True)
class Family:
    """What the generic code needs to know about one model family.

    Attributes:
        name: registry name ("bert", "albert", "gpt2", ...).
        config_class: its config class (`from_dict`, `to_json_file`, ...).
        load_config: `path -> config`; reads the family's own JSON format and,
            where the family has one, HF's `config.json`.
        build_encoder: `(config, **kwargs) -> encoder/network`.
        demo_config: `vocab_size -> config` of the tiny model of demo jobs.
        config_file_name: the file name the family's config is saved under
            (`bert_config.json`, `albert_config.json`, `config.json`).
        name_tables: checkpoint name tables by format ("google_tf1" for TF1
            name-based checkpoints, "hf" for Hugging Face safetensors):
            `modeling.checkpoints.name_tables.NameTable`s, whose rows map
            stored names to getters from the roots `encoder` and
            `checkpoint_heads`. A format without a table is refused for the
            family's models.
        checkpoint_heads: head roots of those getters: root name ->
            `(head class, preferred objective name)`. A pretrainer's head of
            that class fills the root (with several, the objective of the
            preferred name), e.g. `{"mlm": (MaskedLMHead, "masked_lm")}`.
        head_activation: `config -> activation` of the pre-training heads
            (ALBERT's "gelu" is the tanh approximation).
        is_encoder: a callable telling whether a model object is this
            family's encoder/network.
        has_pooler: its encoder returns a `pooled_output` (sentence-level
            tasks such as classification read it).
        frozen_features: the family's network is used frozen, its outputs as
            features under a task model (ELMo's scalar-mixed biLM layers,
            CoVe's encoder states): `run_classifier.py --features=NAME`.
        head_pruning: a `HeadPruning`: the family's attention heads can be
            scored and removed (`modeling.analysis.heads`,
            `run/prune_heads.py --model_family=NAME`); None: they cannot.
        attention_maps: its encoder, called on `input_ids` / `input_mask` /
            `segment_ids` of a WordPiece vocabulary with
            `output_attention_probs=True`, returns each layer's attention
            probabilities under `attention_probs` and its hidden states
            under `encoder_outputs` (`modeling.analysis.attention` and
            `probing`: `run/analyze_attention.py --model_family=NAME`).
        feature_extractor: `(settings, layers) -> (texts, records, what)`,
            what `run/extract_features.py --model_family=NAME` runs:
            `settings` has the script's flags as attributes
            (`bert_config_file`, `init_checkpoint`, `vocab_file`,
            `input_file`, `do_lower_case`, `max_seq_length`, `batch_size`,
            `precision`), `layers` is the parsed `--layers` (None: not
            given). It checks the files and loads the model, and returns the
            input texts, an iterable of one JSON-able dict per text (written
            as it is consumed) and the noun of the summary line ("features").
            None: the family has no feature extraction.
        sentence_vector: what a sentence classifier reads: "pooled" (the
            pooled output) or "first_token" (the first position through a
            ReLU layer, DistilBERT's head: families without a pooler).
        hf: a `modeling.pretrained.formats.HFFormat`: the family reads (and
            writes) Hugging Face model folders of those `model_type`s;
            `modeling.pretrained` finds the family of a folder through it.
            None: no HF folder format.
        presets: `() -> names` of the family's named model sizes
            (`config_class.from_preset(name, vocab_size=...)` builds one):
            every script's config flag takes such a name instead of a file
            (`--bert_config_file=bert_base`), see `config_from`. None: none.
    """

    name: str
    config_class: Any
    load_config: Callable
    build_encoder: Callable
    demo_config: Callable
    config_file_name: str = "bert_config.json"
    name_tables: dict = dataclasses.field(default_factory=dict)
    checkpoint_heads: dict = dataclasses.field(default_factory=dict)
    head_activation: Optional[Callable] = None
    is_encoder: Optional[Callable] = None
    has_pooler: bool = True
    frozen_features: bool = False
    head_pruning: Optional["HeadPruning"] = None
    attention_maps: bool = False
    feature_extractor: Optional[Callable] = None
    hf: Optional[Any] = None
    sentence_vector: str = "pooled"
    presets: Optional[Callable] = None

    def preset_names(self):
        return list(self.presets()) if self.presets is not None else []

    def config_from(self, path_or_preset, vocab_size=None):
        """The config of a file (`load_config`) or of a preset name (`presets`).

        A preset takes `vocab_size` (None: the preset's own default, e.g.
        30522 for BERT). Neither a file nor a preset: `FileNotFoundError`
        naming the path and the family's presets.
        """
        if os.path.exists(path_or_preset) or "://" in str(path_or_preset):
            return self.load_config(path_or_preset)
        if path_or_preset in self.preset_names():
            kwargs = {} if vocab_size is None else {"vocab_size": int(vocab_size)}
            return self.config_class.from_preset(path_or_preset, **kwargs)
        raise FileNotFoundError(
            "%s: no such file%s" % (path_or_preset, (
                ", nor a preset of the %s family (%s)" % (self.name, ", ".join(
                    self.preset_names()))) if self.presets is not None else ""))

    def activation(self, config):
        if self.head_activation is not None:
            return self.head_activation(config)
        return getattr(config, "hidden_act", "gelu")


def build_encoder(config, family=DEFAULT_FAMILY, **kwargs):
    """A fresh encoder of `family` (a registered name, or a `Family`) for `config`."""
    if isinstance(family, str):
        family = families.get(family)
    return family.build_encoder(config, **kwargs)


def network_family(name, network, config_class, load_config, demo_config, config_file_name,
                   **fields):
    """The `Family` `name` whose encoder is the class `network`, which it registers in `encoders`.

    `build_encoder` is `network.from_config_object`; `is_encoder` (unless
    given in `fields`) is `isinstance(model, network)`. `fields`: the other
    `Family` attributes. A family's `__init__` registers the result:
    `FAMILY = registry.families.register(name, registry.network_family(...))`.
    """
    encoders.register(name, network)
    fields.setdefault("is_encoder", lambda model: isinstance(model, network))
    return Family(name=name, config_class=config_class, load_config=load_config,
                  build_encoder=network.from_config_object, demo_config=demo_config,
                  config_file_name=config_file_name, **fields)


@dataclasses.dataclass(frozen=True)
class HeadPruning:
    """How a family's attention heads are counted and removed (`Family.head_pruning`).

    Head pruning (`modeling.analysis.heads`) removes heads of *units*: a unit
    is one layer (BERT), or a group of layers that share one attention block
    (ALBERT), whose heads can only go at every depth of the group at once.

    Attributes:
        units_of_config: `config -> (unit_of_layer, heads_per_unit)`: the
            unit of each layer and the heads of each unit, as the family's
            config describes them (a pruned model's own counts included), so
            `--heads_to_prune` is checked before any model is built.
        shared: the units are groups sharing an attention block (False:
            one unit per layer).
        counts_key: the key of the pruned model's heads per unit, in its
            config file and in its encoder's `get_config()`.
        checkpoint_name: the file name the pruned model's Google TF1
            checkpoint is written under (`bert_model.ckpt`, `model.ckpt`).
    """

    units_of_config: Callable
    counts_key: str
    checkpoint_name: str
    shared: bool = False


@dataclasses.dataclass(frozen=True)
class Decoder:
    """One way to generate text: what `run/generate.py --recipe=NAME` runs.

    Registered in `decoders` by the package that owns the model (a causal-LM
    family's, or a recipe's such as UNILM's seq2seq). `settings` has the
    script's flags as attributes (`init_checkpoint`, `config_file`,
    `vocab_file`, `merges_file`, `max_new_tokens`, `decoding`, ...).

    Attributes:
        name: the `--recipe` value.
        required_flags: the flags that must be given, in the order they are
            checked.
        input_flags: the file flags it reads (besides `--input_file`), which
            must not be the output file.
        check: `settings -> None`: rejects bad option values (a ValueError
            naming the flag) before any file is read.
        generate: `(settings, prompts) -> records`: loads the model and
            returns one JSON-able dict per prompt (`prompt`, `prompt_ids`,
            `generated_ids`, `text`, ...).
    """

    name: str
    required_flags: tuple
    input_flags: tuple
    check: Callable
    generate: Callable


families = Registry("model family")
encoders = Registry("encoder")
objectives = Registry("objective")
pipelines = Registry("input pipeline")
tasks = Registry("task")
decoders = Registry("decoder")

_DISCOVERING = []
_DISCOVERED = []
# Built-in modules that failed to import: name -> error, shown by `get`.
_FAILED_IMPORTS = {}
_PACKAGES_TO_SCAN = ("modeling.objectives", "modeling.tasks", "modeling.recipes.pipelines")


def _try_import(module_name):
    """Imports one module; a failure is recorded, not fatal to the others.

    A family whose optional dependency is missing must not take the other
    families down with it: its parts are just absent, and asking for one of
    them names the import error.
    """
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        _FAILED_IMPORTS[module_name] = "%s: %s" % (type(e).__name__, e)
        return None


def discover():
    """Imports every built-in part once, so that all of them are registered."""
    if _DISCOVERED or _DISCOVERING:
        return
    _DISCOVERING.append(True)  # lookups made while importing do not recurse
    try:
        import modeling  # pylint: disable=g-import-not-at-top
        for info in pkgutil.iter_modules(modeling.__path__):
            if info.ispkg and not info.name.startswith("_"):
                _try_import("modeling.%s" % info.name)
        for package_name in _PACKAGES_TO_SCAN:
            package = _try_import(package_name)
            if package is None:
                continue
            for info in pkgutil.iter_modules(package.__path__):
                if not info.name.startswith("_"):
                    _try_import("%s.%s" % (package_name, info.name))
        _DISCOVERED.append(True)
    finally:
        _DISCOVERING.pop()


def families_with(capability):
    """Names of the registered families whose `Family.<capability>` is set (sorted)."""
    return sorted(name for name, family in families.items() if getattr(family, capability, None))


def default_first(names, default=DEFAULT_FAMILY):
    """`names` sorted, `default` first if it is among them (a flag's choices)."""
    names = sorted(names)
    return ([default] if default in names else []) + [n for n in names if n != default]


def load_user_module(path):
    """Imports a user's Python file (which registers its own parts by import)."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise FileNotFoundError("--recipe_module: no such file %s" % path)
    name = "user_parts_%s" % os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:
        return sys.modules[name]
    return user_files.import_file(path, name)
