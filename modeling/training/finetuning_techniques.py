"""ULMFiT's three fine-tuning techniques, for every model and training script.

Howard & Ruder (2018), "Universal Language Model Fine-tuning for Text
Classification", fine-tune a pre-trained network with:

* **Discriminative learning rates**: each layer group trains at its own
  rate, the group `k` levels below the top at `learning_rate / decay**k`
  (the paper: decay 2.6).
* **Slanted triangular learning rates** (STLR): a short linear increase
  over the first `cut_frac` of the updates, then a long linear decay, from
  and to `peak / ratio` (the paper: cut_frac 0.1, ratio 32). It is a
  schedule like Google's warm-up/decay: `optimization.SlantedTriangular`,
  chosen with `create_optimizer(..., lr_schedule="stlr")`.
* **Gradual unfreezing**: at first only the top group trains, then one
  more group below it joins at each stage (the paper: one per epoch) until
  the whole network trains.

Both the first and the last are per-variable learning-rate factors: this
module's `LayerwiseLearningRates` gives the factor of each variable at
each update, and the optimizers of `modeling.training.optimization` apply
it (`learning_rate_multipliers`). A frozen variable has factor 0: the
optimizer then leaves it and its Adam moments exactly as they were, and
keeps its gradient out of the global-norm clipping (as if, as in PyTorch,
it had no gradient), so nothing but the unfrozen groups moves. The factors
depend only on the update counter, which every checkpoint holds, so a
resumed run continues the same plan.

Layer groups (bottom to top), from the variables' paths alone, so they
work for every family and task head without their help:

    embeddings  every variable with a path component containing "emb"
                (BERT's `embeddings/...`, ALBERT's `embedding_hidden_mapping_in`,
                XLNet's `word_embedding`) and no layer index;
    layer N     every variable whose path has a component `layer_N`
                (BERT, GPT, GPT-2, XLNet), `attention_N` / `ffn_N` (ALBERT:
                its shared layer is one group) or `lstm_N`; the first such
                component counts, so XLNet's `layer_3/ff/layer_1/kernel` is
                layer 3; groups are ordered by N;
    top         everything else: the pooler, final layer norms, the task head.

Only the groups that have variables count. With `G` groups the factor of
group `g` (0 = bottom) at update `t` (the optimizer's `iterations`, so
updates, not micro-batches) is

    decay ** -(G - 1 - g)    if t >= (G - 1 - g) * unfreeze_steps,   else 0.

For a BERT classifier with L layers (G = L + 2): the task head and pooler
train at `lr`, layer L-1 at `lr / 2.6`, layer 0 at `lr / 2.6**L`, the
embeddings at `lr / 2.6**(L+1)`; with `unfreeze_steps=N` stage k (updates
k*N .. k*N + N - 1) trains the top k+1 groups, and from update (G-1)*N on
everything trains. The flags of every training script
(`run/common_flags.py`): `--layer_lr_decay`, `--lr_schedule=stlr`
(`--stlr_cut_frac`, `--stlr_ratio`), `--unfreeze_steps`.

`variable_groups(model)` lists the groups of a model (for inspection; a
model with an `encoder` attribute puts every variable outside the encoder
in the top group).
"""

import math
import re

from absl import logging
import keras
import tensorflow as tf

__all__ = [
    "EMBEDDINGS",
    "TOP",
    "LayerwiseLearningRates",
    "group_of_path",
    "layer_groups",
    "variable_groups",
]

EMBEDDINGS = "embeddings"
TOP = "top"
_LAYER_COMPONENT = re.compile(r"^(?:layer|attention|ffn|lstm)_(\d+)$")
_EMBEDDING_COMPONENT = re.compile(r"emb")


def group_of_path(path):
    """The group key of a variable path: `(0, "embeddings")`, `(1, N)` (layer N) or `(2, "top")`."""
    components = str(path).split("/")
    for component in components:
        match = _LAYER_COMPONENT.match(component)
        if match:
            return (1, int(match.group(1)))
    if any(_EMBEDDING_COMPONENT.search(c) for c in components):
        return (0, EMBEDDINGS)
    return (2, TOP)


def _group_name(key):
    kind, value = key
    return "layer_%d" % value if kind == 1 else value


def layer_groups(paths):
    """Groups of variable paths, bottom to top.

    Args:
        paths: variable paths (`variable.path`), e.g.
            `bert_encoder/layer_0/attention_sublayer/LayerNorm/gamma`.

    Returns:
        `(group_ids, names)`: for each path the index of its group (0 = the
        bottom group), and the names of the non-empty groups bottom to top
        ("embeddings", "layer_0", ..., "top").
    """
    keys = [group_of_path(p) for p in paths]
    ordered = sorted(set(keys))
    index = {key: i for i, key in enumerate(ordered)}
    return [index[k] for k in keys], [_group_name(k) for k in ordered]


def _path(variable):
    return getattr(variable, "path", None) or variable.name


def variable_groups(model, trainable_only=True):
    """`[(name, [variables])]` of a model's layer groups, bottom to top.

    As `layer_groups` on the variables' paths, except that with an
    `encoder` attribute (every task model here has one) the variables that
    are not the encoder's go to the top group whatever their names.
    """
    variables = list(model.trainable_variables if trainable_only else model.variables)
    encoder = getattr(model, "encoder", None)
    inside = None
    if encoder is not None:
        inside = {id(v) for v in encoder.variables}
    keys = []
    for v in variables:
        if inside is not None and id(v) not in inside:
            keys.append((2, TOP))
        else:
            keys.append(group_of_path(_path(v)))
    ordered = sorted(set(keys))
    groups = [(_group_name(k), []) for k in ordered]
    position = {k: i for i, k in enumerate(ordered)}
    for key, v in zip(keys, variables):
        groups[position[key]][1].append(v)
    return groups


def _check_number(value, name, flag, minimum, strict=False):
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number) or (
            number <= minimum if strict else number < minimum):
        raise ValueError("%s (--%s) must be a finite number %s %s, got %r."
                         % (name, flag, ">" if strict else ">=", minimum, value))
    return number


@keras.saving.register_keras_serializable(package="bert_family")
class LayerwiseLearningRates(object):
    """Per-variable learning-rate factors: discriminative rates and gradual unfreezing.

    An optimizer's `learning_rate_multipliers` (see
    `modeling.training.optimization`): called as `rates(paths, step)` with
    the paths of all the optimizer's variables and the update counter, it
    returns one factor per path (the module docstring has the formula).

    Args:
        layer_lr_decay: a group's rate is the one above divided by this
            (ULMFiT: 2.6; 1 = the same rate everywhere). Must be > 0.
        unfreeze_steps: updates per gradual-unfreezing stage; 0 = every
            group trains from the start.
    """

    def __init__(self, layer_lr_decay=1.0, unfreeze_steps=0):
        self.layer_lr_decay = _check_number(layer_lr_decay, "layer_lr_decay",
                                            "layer_lr_decay", 0, strict=True)
        if isinstance(unfreeze_steps, bool) or not isinstance(unfreeze_steps, int) and not (
                isinstance(unfreeze_steps, float) and unfreeze_steps.is_integer()):
            raise ValueError("unfreeze_steps (--unfreeze_steps) must be an integer >= 0, got %r."
                             % (unfreeze_steps,))
        if unfreeze_steps < 0:
            raise ValueError("unfreeze_steps (--unfreeze_steps) must be >= 0, got %r."
                             % (unfreeze_steps,))
        self.unfreeze_steps = int(unfreeze_steps)
        self._described = set()

    def plan(self, paths):
        """`[(group name, factor, first step it trains, [paths])]`, bottom to top."""
        ids, names = layer_groups(paths)
        top = len(names) - 1
        members = [[] for _ in names]
        for path, g in zip(paths, ids):
            members[g].append(path)
        return [(name, self.layer_lr_decay ** -(top - g), (top - g) * self.unfreeze_steps,
                 members[g]) for g, name in enumerate(names)]

    def factors(self, paths):
        """The discriminative factor of each path (no unfreezing)."""
        ids, names = layer_groups(paths)
        top = len(names) - 1
        return [self.layer_lr_decay ** -(top - g) for g in ids]

    def first_steps(self, paths):
        """The update at which each path starts to train (0 without unfreezing)."""
        ids, names = layer_groups(paths)
        top = len(names) - 1
        return [(top - g) * self.unfreeze_steps for g in ids]

    def describe(self, paths):
        """One line per group: name, variables, rate factor, first update."""
        lines = []
        for name, factor, first, members in reversed(self.plan(paths)):
            lines.append("  %-12s %4d variables  lr x %.6g  trains from update %d"
                         % (name, len(members), factor, first))
        return "\n".join(lines)

    def __call__(self, paths, step):
        paths = tuple(paths)
        if paths not in self._described:
            self._described.add(paths)
            logging.info("Layer groups, top first (layer_lr_decay=%g, unfreeze_steps=%d):\n%s",
                         self.layer_lr_decay, self.unfreeze_steps, self.describe(paths))
        plan = self.plan(paths)
        ids, _ = layer_groups(paths)
        if not self.unfreeze_steps:
            per_group = [factor for _, factor, _, _ in plan]
        else:
            step = tf.cast(step, tf.int64)
            per_group = [
                tf.where(step >= first, tf.constant(factor, tf.float32),
                         tf.constant(0.0, tf.float32)) if first else factor
                for _, factor, first, _ in plan]
        return [per_group[g] for g in ids]

    def get_config(self):
        return {"layer_lr_decay": self.layer_lr_decay, "unfreeze_steps": self.unfreeze_steps}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return "LayerwiseLearningRates(layer_lr_decay=%g, unfreeze_steps=%d)" % (
            self.layer_lr_decay, self.unfreeze_steps)
