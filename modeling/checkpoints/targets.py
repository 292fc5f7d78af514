"""Which part of a model a checkpoint fills: its family, its encoder, its heads.

Every loader and writer starts here. The model's family is found through
`modeling.registry.families` (each `Family.is_encoder` is asked whether it
recognises the encoder), never by importing a family's classes, so a new
family's checkpoints work once the family is registered. Three kinds of model
are accepted:

* a family's encoder itself: only encoder weights are read or written;
* a pretrainer (`modeling.objectives.BertPretrainer`) around one: the
  encoder plus the pre-training heads the family names in
  `Family.checkpoint_heads`, found among the pretrainer's objectives by head
  type (so ALBERT's sentence-order objective, whose head is a
  `NextSentenceHead`, fills the same root as BERT's next-sentence one);
* any other model with an `.encoder` (a classifier, a tagger, ...): only the
  encoder, because a task's own head starts fresh.

The result, a `Target`, holds the roots (`"encoder"` and the head roots, e.g.
`"mlm"`, `"nsp"`) from which name-table getters are resolved.
"""

import dataclasses
from typing import Any

import tensorflow as tf

from modeling import registry
from modeling.objectives.base import BertPretrainer

__all__ = ["Target", "assign", "family_of", "find_head", "find_target"]


@dataclasses.dataclass
class Target:
    """The model parts a checkpoint is matched against.

    Attributes:
        family: the `registry.Family` of the encoder.
        roots: root name -> object ("encoder", and for a pretrainer the head
            roots of `family.checkpoint_heads` that it has).
        description: for messages.
        has_heads: the model is a pretrainer (head weights are wanted).
    """

    family: Any
    roots: dict
    description: str
    has_heads: bool

    @property
    def encoder(self):
        return self.roots["encoder"]


def family_of(obj):
    """The registered family whose `is_encoder` accepts `obj`, or None."""
    if obj is None:
        return None
    for _, family in registry.families.items():
        if family.is_encoder is not None and family.is_encoder(obj):
            return family
    return None


def find_head(pretrainer, head_type, preferred_name):
    """The pretrainer's head of `head_type`, or None.

    Found by type; with several of one type, the objective called
    `preferred_name` is the one.
    """
    found = [o for o in pretrainer.objectives
             if isinstance(getattr(o, "head", None), head_type)]
    if not found:
        return None
    if len(found) == 1:
        return found[0].head
    named = [o for o in found if o.name == preferred_name]
    if not named:
        raise ValueError(
            f"{pretrainer.name} has several {head_type.__name__}s and none is "
            f"named {preferred_name!r}; cannot tell which one to map."
        )
    return named[0].head


def find_target(model):
    """Finds the family, the encoder (and a pretrainer's heads) of `model`."""
    family = family_of(model)
    if family is not None:
        return Target(family, {"encoder": model},
                      f"{type(model).__name__} {model.name!r}", False)
    encoder = getattr(model, "encoder", None)
    family = family_of(encoder)
    if family is None:
        known = ", ".join(name for name, _ in registry.families.items())
        what = type(model).__name__
        if encoder is not None:
            what += f" (whose .encoder is a {type(encoder).__name__})"
        raise TypeError(
            f"Expected the encoder of a registered model family ({known}), a "
            f"pretrainer around one or a model whose `.encoder` is one; got {what}."
        )
    if isinstance(model, BertPretrainer):
        roots = {"encoder": encoder}
        for root, (head_type, preferred_name) in family.checkpoint_heads.items():
            head = find_head(model, head_type, preferred_name)
            if head is not None:
                roots[root] = head
        return Target(family, roots,
                      f"{type(model).__name__} {model.name!r} ({family.name})", True)
    return Target(family, {"encoder": encoder},
                  f"the {family.name} encoder of {type(model).__name__} "
                  f"{getattr(model, 'name', '')!r}", False)


def assign(variable, value):
    """Assigns a NumPy array, cast to the variable's dtype (float16/bfloat16 too)."""
    variable.assign(tf.cast(tf.convert_to_tensor(value), variable.dtype))
