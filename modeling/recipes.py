"""Pre-training recipes: an encoder x a masking strategy x objectives x packing.

A recipe is a small JSON file under `modeling/presets/recipes/` naming its
parts; each part lives once, in a registry here (encoders, objectives) or in
`data/` (masking strategies and sentence objectives of the static data, see
`data/masking.py`). Adding a variant means adding its new part and one JSON
file, not a new training script:

    {"name": "spanbert", "encoder": "bert",
     "objectives": ["masked_lm", "span_boundary"],
     "data": {"masking": "span", "sentence_objective": "none"}}

`run/run_pretraining.py --recipe=NAME` builds the model with
`build_pretrainer(recipe, config)` and, for the demo job, the data with
`recipe.data` (the options of `run/create_pretraining_data.py`).
"""

import dataclasses
import json
import os

from modeling import config as config_lib
from modeling import objectives as objectives_lib
from modeling import span_boundary
from modeling.bert import BertEncoder

PRESETS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets", "recipes")


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
    with open(path, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except ValueError as e:
            raise RecipeError("Recipe file %s is not valid JSON: %s" % (path, e)) from e
    missing = [k for k in ("name", "encoder", "objectives", "data") if k not in raw]
    if missing:
        raise RecipeError("Recipe file %s lacks %s" % (path, ", ".join(missing)))
    recipe = Recipe(name=raw["name"], description=raw.get("description", ""),
                    encoder=raw["encoder"], objectives=tuple(raw["objectives"]),
                    data=dict(raw["data"]))
    if recipe.encoder not in ENCODERS:
        raise RecipeError("Recipe %s: unknown encoder %r (known: %s)"
                         % (path, recipe.encoder, ", ".join(sorted(ENCODERS))))
    unknown = [o for o in recipe.objectives if o not in OBJECTIVES]
    if unknown:
        raise RecipeError("Recipe %s: unknown objective(s) %s (known: %s)"
                         % (path, ", ".join(unknown), ", ".join(sorted(OBJECTIVES))))
    return recipe


# --- Parts ---------------------------------------------------------------------

def _bert_encoder(config):
    return BertEncoder.from_config_object(config)


def _albert_encoder(config):
    from modeling.albert import AlbertEncoder  # pylint: disable=g-import-not-at-top
    return AlbertEncoder.from_config_object(config)


ENCODERS = {"bert": _bert_encoder, "albert": _albert_encoder}


def _head_kwargs(config):
    kwargs = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  initializer_range=config.initializer_range)
    embedding_size = getattr(config, "embedding_size", None)
    if embedding_size and embedding_size != config.hidden_size:
        kwargs["embedding_size"] = embedding_size
    return kwargs


def _activation(config, encoder_name):
    if encoder_name == "albert":
        from modeling.albert import albert_activation  # pylint: disable=g-import-not-at-top
        return albert_activation(config.hidden_act)
    return config.hidden_act


OBJECTIVES = {
    "masked_lm": lambda config, enc: objectives_lib.MaskedLMObjective(
        hidden_act=_activation(config, enc), **_head_kwargs(config)),
    "next_sentence": lambda config, enc: objectives_lib.NextSentenceObjective(
        hidden_size=config.hidden_size, initializer_range=config.initializer_range),
    # ALBERT stores the sentence-order label as `next_sentence_labels`.
    "sentence_order": lambda config, enc: objectives_lib.NextSentenceObjective(
        hidden_size=config.hidden_size, initializer_range=config.initializer_range,
        label_feature="next_sentence_labels", metric_prefix="sentence_order",
        name="sentence_order"),
    "span_boundary": lambda config, enc: span_boundary.SpanBoundaryObjective(
        hidden_act=_activation(config, enc), **_head_kwargs(config)),
}


def build_pretrainer(recipe, config):
    """The recipe's encoder with its objectives, as one `BertPretrainer`."""
    encoder = ENCODERS[recipe.encoder](config)
    parts = [OBJECTIVES[name](config, recipe.encoder) for name in recipe.objectives]
    return objectives_lib.BertPretrainer(encoder, parts, name="%s_pretrainer" % recipe.name)


def demo_config(recipe, vocab_size):
    """The tiny config of the demo job (BERT-Tiny shape; ALBERT with E=64)."""
    if recipe.encoder == "albert":
        return config_lib.AlbertConfig(
            vocab_size=vocab_size, embedding_size=64, hidden_size=128, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=512, hidden_act="gelu",
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return config_lib.BertConfig.from_preset("bert_tiny", vocab_size=vocab_size)


def load_config(recipe, path):
    """Reads the model config for the recipe's encoder (BERT or ALBERT json)."""
    if recipe.encoder == "albert":
        return config_lib.load_albert_config(path)
    return config_lib.load_bert_config(path)
