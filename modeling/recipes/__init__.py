"""Pre-training recipes: a model family x objectives x an input pipeline.

A recipe is a small JSON file (`modeling/recipes/presets/NAME.json`, or any
path) naming registered parts, each of which lives once:

    {"name": "spanbert", "encoder": "bert",
     "objectives": ["masked_lm", "span_boundary"],
     "pipeline": "static_masked",
     "data": {"masking": "span", "sentence_objective": "none"}}

* `encoder`: a model family of `modeling.registry.families` (its config,
  encoder/network, demo size, checkpoint names);
* `objectives`: names in `modeling.registry.objectives`;
* `pipeline`: a name in `modeling.registry.pipelines` (how raw text or
  TFRecords become feature batches; `modeling.recipes.pipelines`), with
  `data` its options;
* `objective_options` (optional): keyword arguments of an objective's
  registered factory, by objective name (ULMFiT's
  `{"word_lm": {"alpha": 2, "beta": 1}}`); a name the factory does not take
  is refused when the recipe is read.

Nothing here branches on a family's name: a new family, objective or
pipeline registers itself, and a recipe file names it. A user's own parts
register from the user's own module (`registry.load_user_module(path)`,
`run_pretraining.py --recipe_module=path.py`).
"""

import dataclasses
import inspect
import json
import os

from modeling import registry
from modeling.objectives.base import BertPretrainer

__all__ = ["Recipe", "RecipeError", "build_albert_pretrainer", "build_bert_pretrainer",
           "build_pretrainer", "list_recipes", "load_recipe"]

PRESETS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets")


class RecipeError(ValueError):
    """An unknown recipe name, or a recipe file that does not describe one."""


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One pre-training recipe (see the module docstring)."""

    name: str
    description: str
    encoder: str
    objectives: tuple
    data: dict
    pipeline: str = "static_masked"
    # Settings of the demo job that differ for this recipe (PretrainingJob
    # fields, e.g. fewer steps for a model that would memorise the corpus).
    demo: dict = dataclasses.field(default_factory=dict)
    # Config values of the demo job's model that differ for this recipe (e.g.
    # BERT's dropout: its sentence-pair objective memorises the small corpus).
    demo_model: dict = dataclasses.field(default_factory=dict)
    # Keyword arguments of each objective's factory, by objective name.
    objective_options: dict = dataclasses.field(default_factory=dict)

    @property
    def family(self):
        return registry.families.get(self.encoder)

    def load_config(self, path):
        """Reads the family's config file (its own JSON, or HF `config.json`)."""
        return self.family.load_config(path)

    def demo_config(self, vocab_size):
        """The tiny config of the demo job: the family's, with the recipe's `demo_model`."""
        config = self.family.demo_config(vocab_size)
        if not self.demo_model:
            return config
        values = config.to_dict()
        unknown = sorted(set(self.demo_model) - set(values))
        if unknown:
            raise RecipeError("Recipe %s: `demo_model` names %s, not fields of the %s config "
                              "(%s)" % (self.name, ", ".join(unknown), self.encoder,
                                        ", ".join(sorted(values))))
        values.update(self.demo_model)
        return type(config).from_dict(values)

    def build_model(self, config, dtype=None, **encoder_kwargs):
        """The family's encoder trained by the recipe's objectives."""
        kwargs = {} if dtype is None else {"dtype": dtype}
        family = self.family
        encoder = family.build_encoder(config, **kwargs, **encoder_kwargs)
        parts = [registry.objectives.get(name)(config, family, **kwargs,
                                               **self.objective_options.get(name, {}))
                 for name in self.objectives]
        return BertPretrainer(encoder, parts, name="%s_pretrainer" % self.name, **kwargs)

    def build_pipeline(self, options):
        """The recipe's input pipeline for `options` (a `PipelineOptions`)."""
        return registry.pipelines.get(self.pipeline)(self.data, options)


def list_recipes():
    return sorted(f[:-len(".json")] for f in os.listdir(PRESETS_DIR) if f.endswith(".json"))


def load_recipe(name_or_path):
    """Reads a recipe by name (a preset) or from a JSON file path."""
    path = name_or_path
    if not name_or_path.endswith(".json"):
        path = os.path.join(PRESETS_DIR, name_or_path + ".json")
        if not os.path.isfile(path):
            raise RecipeError("Unknown recipe %r; known recipes: %s"
                              % (name_or_path, ", ".join(list_recipes())))
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise RecipeError("Cannot read recipe file %s: %s" % (path, e)) from e
    except ValueError as e:
        raise RecipeError("Recipe file %s is not valid JSON: %s" % (path, e)) from e
    if not isinstance(raw, dict):
        raise RecipeError("Recipe file %s must hold a JSON object" % path)
    missing = [k for k in ("name", "encoder", "objectives") if k not in raw]
    if missing:
        raise RecipeError("Recipe file %s lacks %s" % (path, ", ".join(missing)))
    data = dict(raw.get("data", {}))
    pipeline = raw.get("pipeline") or ("dynamic_masked" if data.pop("dynamic", False)
                                       else "static_masked")
    demo = raw.get("demo", {})
    if not isinstance(demo, dict):
        raise RecipeError("Recipe %s: `demo` must be a JSON object of job settings" % path)
    demo_model = raw.get("demo_model", {})
    if not isinstance(demo_model, dict):
        raise RecipeError("Recipe %s: `demo_model` must be a JSON object of config values"
                          % path)
    objective_options = raw.get("objective_options", {})
    if not isinstance(objective_options, dict) or not all(
            isinstance(v, dict) for v in objective_options.values()):
        raise RecipeError("Recipe %s: `objective_options` must be a JSON object of objective "
                          "name -> object of options" % path)
    recipe = Recipe(name=raw["name"], description=raw.get("description", ""),
                    encoder=raw["encoder"], objectives=tuple(raw["objectives"]),
                    data=data, pipeline=pipeline, demo=dict(demo),
                    demo_model=dict(demo_model),
                    objective_options={k: dict(v) for k, v in objective_options.items()})
    _check_names(recipe, path)
    _check_objective_options(recipe, path)
    pipeline_class = registry.pipelines.get(recipe.pipeline)
    allowed = getattr(pipeline_class, "data_options", None)
    unknown = sorted(set(recipe.data) - set(allowed)) if allowed is not None else []
    if unknown:
        raise RecipeError("Recipe %s: the %r pipeline takes no data option %s (it takes: %s)"
                          % (path, recipe.pipeline, ", ".join(map(repr, unknown)),
                             ", ".join(allowed) or "none"))
    return recipe


def _check_names(recipe, path):
    for kind, names in (("encoder", [recipe.encoder]), ("objective", recipe.objectives),
                        ("pipeline", [recipe.pipeline])):
        table = {"encoder": registry.families, "objective": registry.objectives,
                 "pipeline": registry.pipelines}[kind]
        unknown = [n for n in names if n not in table]
        if unknown:
            raise RecipeError("Recipe %s: unknown %s %s (known: %s)"
                              % (path, kind, ", ".join(map(repr, unknown)),
                                 ", ".join(table.names())))


def _check_objective_options(recipe, path):
    """Each `objective_options` entry names an objective of the recipe and options its
    registered factory takes (keyword parameters other than `config` and `family`)."""
    for name, options in recipe.objective_options.items():
        if name not in recipe.objectives:
            raise RecipeError("Recipe %s: `objective_options` names %r, not one of its "
                              "objectives (%s)" % (path, name, ", ".join(recipe.objectives)))
        parameters = inspect.signature(registry.objectives.get(name)).parameters
        taken = [p for p, spec in parameters.items() if p not in ("config", "family")
                 and spec.kind in (spec.POSITIONAL_OR_KEYWORD, spec.KEYWORD_ONLY)]
        unknown = sorted(set(options) - set(taken))
        if unknown:
            raise RecipeError("Recipe %s: objective %r takes no option %s (it takes: %s)"
                              % (path, name, ", ".join(map(repr, unknown)),
                                 ", ".join(taken) or "none"))


def build_pretrainer(recipe, config, dtype=None, **encoder_kwargs):
    """`recipe.build_model(config)`; `recipe` may be a name, a path or a `Recipe`."""
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    return recipe.build_model(config, dtype=dtype, **encoder_kwargs)


def build_bert_pretrainer(bert_config, dtype=None, **encoder_kwargs):
    """BERT as Google pre-trains it: encoder + masked LM + next sentence."""
    return build_pretrainer("bert", bert_config, dtype=dtype, **encoder_kwargs)


def build_albert_pretrainer(albert_config, dtype=None, **encoder_kwargs):
    """ALBERT as google-research/albert pre-trains it: encoder + MLM + sentence order.

    `encoder_kwargs` go to `AlbertEncoder.from_config_object` (e.g.
    `share_parameters="none"`).
    """
    return build_pretrainer("albert", albert_config, dtype=dtype, **encoder_kwargs)
