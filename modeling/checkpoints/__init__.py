"""Checkpoint conversion: Google TF1 BERT, Hugging Face safetensors, our own.

Users arrive with weights in one of three shapes and expect each to work as
`--init_checkpoint`:

* Google's TF1 releases (`bert_model.ckpt.{index,data-*}`, e.g.
  `uncased_L-12_H-768_A-12`, `chinese_L-12_H-768_A-12`) and anything trained
  with google-research/bert's `run_pretraining.py`: name-based checkpoints
  whose variable names (`bert/encoder/layer_3/attention/self/query/kernel`)
  are the contract.
* Hugging Face BERT exports (`model.safetensors`): PyTorch layout, Linear
  weights stored `[out, in]`.
* This project's own object-based checkpoints (`ckpt-N`, written by
  `modeling.trainer.Trainer` through `tf.train.CheckpointManager`).

`init_from_checkpoint(model, path)` tells them apart and loads whichever it
is; `load_google_checkpoint`, `load_hf_safetensors` and
`save_google_checkpoint` are the format-specific halves.

ALBERT (google-research/albert TF1 checkpoints, fully shared blocks under
`bert/encoder/transformer/group_g/inner_group_k/...`) has its own table,
`ALBERT_NAME_TABLE`, and loader, `load_albert_checkpoint`, with the same
policy; `init_from_checkpoint` sends ALBERT models there.

One name table
--------------
Google's and Hugging Face's names are both written down once, in
`NAME_TABLE`: one `NameEntry(google_name, getter, transform, hf_name,
hf_transform)` per weight, with `{layer}` standing for the block index. The
getter is an attribute path from one of three roots: `encoder` (the
`BertEncoder`), `mlm` (the `MaskedLMHead` of a pretrainer) and `nsp` (its
`NextSentenceHead`). A transform says how the stored array relates to the
Keras variable: `AS_IS`, or `TRANSPOSED` (Google's
`cls/seq_relationship/output_weights` is `[2, H]`, the Keras kernel
`[H, 2]`; every PyTorch Linear weight is `[out, in]`). Loading applies the
transform's `to_model`, saving its `from_model`, so the two directions
cannot drift apart; adding a weight is adding a row.

What must match, what is skipped (the policy)
---------------------------------------------
* Encoder weights are always required: every one the model has must be in
  the checkpoint with the right shape, and every encoder-namespace entry of
  the checkpoint (`bert/...`; HF `embeddings.*`, `encoder.*`, `pooler.*`)
  must have a place in the model. A deeper or wider checkpoint is an error,
  never a silent partial load.
* Pre-training heads (`cls/predictions/*`, `cls/seq_relationship/*`) are
  loaded when the model is a `BertPretrainer` with those objectives. If the
  checkpoint lacks them that is an error (continuing pre-training from an
  encoder-only export would otherwise restart the heads from random without
  anyone noticing), unless `allow_missing_heads=True`, in which case they
  keep their initial values and are listed in `LoadReport.missing_heads`.
* Heads the model does not have are skipped and listed (an encoder or a
  classifier loading a pre-training checkpoint), as are variables outside
  BERT's namespaces (`output_weights` of a fine-tuned classifier, ...).
* Optimizer state is skipped: Google's `*/adam_m`, `*/adam_v` slots, TF1
  `Adam`/`Adam_1`/`Momentum` slots, `global_step`, `beta{1,2}_power`; HF's
  `embeddings.position_ids` / `token_type_ids` buffers; the tied
  `cls.predictions.decoder.weight` (checked equal to the word embeddings
  when the model has the MLM head, since this model can only tie them).
* Any problem raises ONE `CheckpointMismatchError` listing all missing,
  unexpected and mis-shaped names (with both shapes, in the checkpoint's own
  layout), before any variable is touched: a failed load leaves the model
  as it was.

Example:

    >>> encoder = BertEncoder.from_config_object(
    ...     load_bert_config("uncased_L-12_H-768_A-12/bert_config.json"))
    >>> report = init_from_checkpoint(encoder, "uncased_L-12_H-768_A-12")
    >>> print(report)       # format, counts, what was skipped and why
"""

import collections
import dataclasses
import json
import os
import re
import struct
import uuid

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from modeling.bert import BertEncoder
from modeling.objectives import BertPretrainer, MaskedLMHead, NextSentenceHead

__all__ = [
    "ALBERT_NAME_TABLE",
    "AS_IS",
    "CheckpointMismatchError",
    "LoadReport",
    "NAME_TABLE",
    "NameEntry",
    "TRANSPOSED",
    "init_from_checkpoint",
    "load_albert_checkpoint",
    "load_google_checkpoint",
    "load_hf_safetensors",
    "read_safetensors",
    "resolve_checkpoint",
    "save_google_checkpoint",
]

GOOGLE_TF1 = "google_tf1"
OBJECT_BASED = "object_based"
HF_SAFETENSORS = "hf_safetensors"


# --------------------------------------------------------------- transforms


class _Layout:
    """How a stored array relates to the Keras variable it fills."""

    def __init__(self, name, transpose):
        self.name = name
        self.transpose = transpose

    def to_model(self, array):
        """Stored array -> value for the Keras variable."""
        return np.transpose(array) if self.transpose else array

    def from_model(self, array):
        """Keras variable value -> array to store."""
        return np.transpose(array) if self.transpose else array

    def stored_shape(self, model_shape):
        """The shape the checkpoint must have for a variable of `model_shape`."""
        shape = tuple(int(d) for d in model_shape)
        return shape[::-1] if self.transpose else shape

    def __repr__(self):
        return self.name


AS_IS = _Layout("AS_IS", transpose=False)
TRANSPOSED = _Layout("TRANSPOSED", transpose=True)


# --------------------------------------------------------------- name table


NameEntry = collections.namedtuple(
    "NameEntry", ["google_name", "getter", "transform", "hf_name", "hf_transform"]
)
NameEntry.__doc__ = """One weight under its Google and Hugging Face names.

    google_name: name in google-research/bert checkpoints (`{layer}` = block).
    getter: attribute path from a root (`encoder`, `mlm`, `nsp`) to the
        Keras variable, e.g.
        `encoder.transformer_layers[{layer}].ffn_sublayer.intermediate.kernel`.
    transform: Google array -> Keras variable (`AS_IS` or `TRANSPOSED`).
    hf_name: name in HF BERT state dicts (without the `bert.` prefix).
    hf_transform: HF array -> Keras variable.
"""

_L = "bert/encoder/layer_{layer}/"
_T = "encoder.transformer_layers[{layer}]."
_TA = _T + "attention_sublayer."
_TF = _T + "ffn_sublayer."
_H = "encoder.layer.{layer}."

NAME_TABLE = (
    # Embeddings.
    NameEntry("bert/embeddings/word_embeddings", "encoder.embeddings.word_embeddings",
              AS_IS, "embeddings.word_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/position_embeddings",
              "encoder.embeddings.position_embeddings",
              AS_IS, "embeddings.position_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/token_type_embeddings",
              "encoder.embeddings.token_type_embeddings",
              AS_IS, "embeddings.token_type_embeddings.weight", AS_IS),
    NameEntry("bert/embeddings/LayerNorm/gamma", "encoder.embeddings.layer_norm.gamma",
              AS_IS, "embeddings.LayerNorm.weight", AS_IS),
    NameEntry("bert/embeddings/LayerNorm/beta", "encoder.embeddings.layer_norm.beta",
              AS_IS, "embeddings.LayerNorm.bias", AS_IS),
    # Transformer blocks. TF1 kernels are [in, out] like Keras; PyTorch's
    # Linear weights are [out, in].
    NameEntry(_L + "attention/self/query/kernel", _TA + "attention.query.kernel",
              AS_IS, _H + "attention.self.query.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/query/bias", _TA + "attention.query.bias",
              AS_IS, _H + "attention.self.query.bias", AS_IS),
    NameEntry(_L + "attention/self/key/kernel", _TA + "attention.key.kernel",
              AS_IS, _H + "attention.self.key.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/key/bias", _TA + "attention.key.bias",
              AS_IS, _H + "attention.self.key.bias", AS_IS),
    NameEntry(_L + "attention/self/value/kernel", _TA + "attention.value.kernel",
              AS_IS, _H + "attention.self.value.weight", TRANSPOSED),
    NameEntry(_L + "attention/self/value/bias", _TA + "attention.value.bias",
              AS_IS, _H + "attention.self.value.bias", AS_IS),
    NameEntry(_L + "attention/output/dense/kernel", _TA + "attention.output_dense.kernel",
              AS_IS, _H + "attention.output.dense.weight", TRANSPOSED),
    NameEntry(_L + "attention/output/dense/bias", _TA + "attention.output_dense.bias",
              AS_IS, _H + "attention.output.dense.bias", AS_IS),
    NameEntry(_L + "attention/output/LayerNorm/gamma", _TA + "layer_norm.gamma",
              AS_IS, _H + "attention.output.LayerNorm.weight", AS_IS),
    NameEntry(_L + "attention/output/LayerNorm/beta", _TA + "layer_norm.beta",
              AS_IS, _H + "attention.output.LayerNorm.bias", AS_IS),
    NameEntry(_L + "intermediate/dense/kernel", _TF + "intermediate.kernel",
              AS_IS, _H + "intermediate.dense.weight", TRANSPOSED),
    NameEntry(_L + "intermediate/dense/bias", _TF + "intermediate.bias",
              AS_IS, _H + "intermediate.dense.bias", AS_IS),
    NameEntry(_L + "output/dense/kernel", _TF + "output_dense.kernel",
              AS_IS, _H + "output.dense.weight", TRANSPOSED),
    NameEntry(_L + "output/dense/bias", _TF + "output_dense.bias",
              AS_IS, _H + "output.dense.bias", AS_IS),
    NameEntry(_L + "output/LayerNorm/gamma", _TF + "layer_norm.gamma",
              AS_IS, _H + "output.LayerNorm.weight", AS_IS),
    NameEntry(_L + "output/LayerNorm/beta", _TF + "layer_norm.beta",
              AS_IS, _H + "output.LayerNorm.bias", AS_IS),
    # Pooler.
    NameEntry("bert/pooler/dense/kernel", "encoder.pooler.kernel",
              AS_IS, "pooler.dense.weight", TRANSPOSED),
    NameEntry("bert/pooler/dense/bias", "encoder.pooler.bias",
              AS_IS, "pooler.dense.bias", AS_IS),
    # Masked-LM head (its decoder matrix is the tied word embedding table).
    NameEntry("cls/predictions/transform/dense/kernel", "mlm.transform_dense.kernel",
              AS_IS, "cls.predictions.transform.dense.weight", TRANSPOSED),
    NameEntry("cls/predictions/transform/dense/bias", "mlm.transform_dense.bias",
              AS_IS, "cls.predictions.transform.dense.bias", AS_IS),
    NameEntry("cls/predictions/transform/LayerNorm/gamma",
              "mlm.transform_layer_norm.gamma",
              AS_IS, "cls.predictions.transform.LayerNorm.weight", AS_IS),
    NameEntry("cls/predictions/transform/LayerNorm/beta",
              "mlm.transform_layer_norm.beta",
              AS_IS, "cls.predictions.transform.LayerNorm.bias", AS_IS),
    NameEntry("cls/predictions/output_bias", "mlm.output_bias",
              AS_IS, "cls.predictions.bias", AS_IS),
    # Next-sentence head: both Google and HF store [2, hidden].
    NameEntry("cls/seq_relationship/output_weights", "nsp.dense.kernel",
              TRANSPOSED, "cls.seq_relationship.weight", TRANSPOSED),
    NameEntry("cls/seq_relationship/output_bias", "nsp.dense.bias",
              AS_IS, "cls.seq_relationship.bias", AS_IS),
)

# Names that mean "part of the encoder" in each format: anything there that
# the model has no place for is an error, not something to skip.
_GOOGLE_ENCODER_PREFIXES = ("bert/",)
_GOOGLE_BERT_PREFIXES = ("bert/", "cls/")
_HF_ENCODER_PREFIXES = ("embeddings.", "encoder.", "pooler.")
_HF_BERT_PREFIXES = _HF_ENCODER_PREFIXES + ("cls.",)

# Optimizer state and counters in TF1 checkpoints (Google's
# AdamWeightDecayOptimizer slots, tf.train optimizers' slots and powers).
_TF1_OPTIMIZER_STATE = re.compile(
    r"(^|/)(adam_m|adam_v|Adam|Adam_1|Momentum|lamb_m|lamb_v)$"
    r"|^(global_step|beta1_power|beta2_power)$"
)
# HF buffers saved with the weights but not parameters.
_HF_BUFFERS = re.compile(r"(^|\.)(position_ids|token_type_ids)$")
# HF names that alias a table entry's name (newer transformers versions
# save the MLM bias as the decoder's bias).
_HF_ALIASES = {"cls.predictions.bias": ("cls.predictions.decoder.bias",)}
# HF weights tied to another one; this model can only tie them.
_HF_TIED = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"}


def _concrete_entries(num_layers):
    """The table with `{layer}` expanded: [(google, getter, t, hf, hf_t)]."""
    rows = []
    for entry in NAME_TABLE:
        for i in range(num_layers if "{layer}" in entry.getter else 1):
            rows.append(NameEntry(
                entry.google_name.format(layer=i),
                entry.getter.format(layer=i),
                entry.transform,
                entry.hf_name.format(layer=i),
                entry.hf_transform,
            ))
    return rows


_STEP = re.compile(r"^(\w+)(?:\[(\d+)\])?$")


def _resolve_getter(roots, getter):
    """Follows `root.attr[i].attr...` to the Keras variable."""
    parts = getter.split(".")
    obj = roots[parts[0]]
    for part in parts[1:]:
        match = _STEP.match(part)
        obj = getattr(obj, match.group(1))
        if match.group(2) is not None:
            obj = obj[int(match.group(2))]
    if not isinstance(obj, keras.Variable):
        raise TypeError(
            f"{getter} is a {type(obj).__name__}, not a Keras variable "
            "(LoRA or quantisation enabled?); it cannot be loaded or saved."
        )
    return obj


# ------------------------------------------------------------------ targets


@dataclasses.dataclass
class _Target:
    roots: dict          # "encoder" / "mlm" / "nsp" -> object
    description: str     # for messages
    has_heads: bool      # a BertPretrainer (head weights are wanted)


def _find_head(pretrainer, head_type, preferred_name):
    """The pretrainer's head of `head_type`, or None.

    Found by type, so ALBERT's sentence-order objective (a NextSentenceHead
    under another name) maps to `cls/seq_relationship` too; with several of
    one type, the objective called `preferred_name` is the one.
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


def _target(model):
    """Finds the encoder (and the heads, for a pretrainer) inside `model`."""
    if isinstance(model, BertEncoder):
        return _Target({"encoder": model}, f"BertEncoder {model.name!r}", False)
    if isinstance(model, BertPretrainer):
        if not isinstance(model.encoder, BertEncoder):
            raise TypeError(
                f"The pretrainer's encoder is a {type(model.encoder).__name__}; "
                "BERT checkpoints map onto a BertEncoder only."
            )
        roots = {"encoder": model.encoder}
        mlm = _find_head(model, MaskedLMHead, "masked_lm")
        nsp = _find_head(model, NextSentenceHead, "next_sentence")
        if mlm is not None:
            roots["mlm"] = mlm
        if nsp is not None:
            roots["nsp"] = nsp
        return _Target(roots, f"BertPretrainer {model.name!r}", True)
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, BertEncoder):
        return _Target({"encoder": encoder},
                       f"the encoder of {type(model).__name__} {getattr(model, 'name', '')!r}",
                       False)
    raise TypeError(
        "Expected a BertEncoder, a BertPretrainer or a model whose `.encoder` is a "
        f"BertEncoder; got {type(model).__name__}."
    )


# ------------------------------------------------------------------ reports


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model; lists every problem at once.

    Attributes:
        missing: names the model needs and the checkpoint lacks.
        unexpected: `(name, shape)` in BERT's namespaces of the checkpoint
            with no place in the model.
        mismatched: `(name, checkpoint_shape, expected_shape)`, both in the
            checkpoint's layout.
        conflicts: `(name, explanation)` for values that cannot be
            represented (e.g. an untied MLM decoder).
    """

    _MAX_LINES = 60

    def __init__(self, source, target, missing=(), unexpected=(), mismatched=(),
                 conflicts=(), hint=None):
        self.source = source
        self.target = target
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)
        self.conflicts = list(conflicts)
        self.hint = hint
        lines = [f"{source} does not match {target}:"]

        def section(title, items, fmt):
            if not items:
                return
            lines.append(f"  {len(items)} {title}:")
            for item in items[: self._MAX_LINES]:
                lines.append("    " + fmt(item))
            if len(items) > self._MAX_LINES:
                lines.append(f"    ... and {len(items) - self._MAX_LINES} more")

        section("missing (in the model, not in the checkpoint)", self.missing,
                lambda item: f"{item[0]}  expected shape {list(item[1])}")
        section("unexpected (in the checkpoint, no place in the model)",
                self.unexpected, lambda item: f"{item[0]}  shape {list(item[1])}")
        section("mis-shaped", self.mismatched,
                lambda item: f"{item[0]}: checkpoint {list(item[1])}, model expects {list(item[2])}")
        section("conflicting", self.conflicts, lambda item: f"{item[0]}: {item[1]}")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))

    def __reduce__(self):  # Picklable despite the custom constructor.
        return (type(self), (self.source, self.target, self.missing, self.unexpected,
                             self.mismatched, self.conflicts, self.hint))


@dataclasses.dataclass
class LoadReport:
    """What a load did.

    Attributes:
        path: the checkpoint actually read (prefix or file).
        format: "google_tf1", "object_based" or "hf_safetensors".
        target: which model (part) was filled.
        loaded: checkpoint names copied into the model.
        skipped: `(checkpoint name, reason)` for entries not used.
        missing_heads: head weights the checkpoint lacked and which kept
            their initial values (only with `allow_missing_heads=True`).
    """

    path: str
    format: str
    target: str
    loaded: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    missing_heads: list = dataclasses.field(default_factory=list)

    def __str__(self):
        lines = [f"Loaded {len(self.loaded)} variables from {self.path} "
                 f"({self.format}) into {self.target}."]
        reasons = collections.Counter(reason for _, reason in self.skipped)
        for reason, count in sorted(reasons.items()):
            lines.append(f"  skipped {count}: {reason}")
        if self.missing_heads:
            lines.append(f"  {len(self.missing_heads)} head variables not in the "
                         "checkpoint kept their initial values: "
                         + ", ".join(self.missing_heads))
        return "\n".join(lines)


# --------------------------------------------------------- generic matching


def _assign(variable, value):
    """Assigns a NumPy array, cast to the variable's dtype (float16/bfloat16 too)."""
    variable.assign(tf.cast(tf.convert_to_tensor(value), variable.dtype))


# Sources are name -> array stores with `description`, `names()`,
# `shape(name)` and `read(name)`: `_TF1Source`, `_SafetensorsSource`, `_HFSource`.


class _TF1Source:
    def __init__(self, prefix):
        self.description = f"Google TF1 checkpoint {prefix}"
        self._reader = tf.train.load_checkpoint(prefix)
        self._shapes = self._reader.get_variable_to_shape_map()

    def names(self):
        return list(self._shapes)

    def shape(self, name):
        return tuple(self._shapes[name])

    def read(self, name):
        return np.asarray(self._reader.get_tensor(name))


def _load_by_table(model, source, fmt, path, allow_missing_heads):
    """Matches `source` against `NAME_TABLE`; checks all, then assigns all.

    `source` is a `_TF1Source` or `_HFSource`; `fmt` picks the table's
    columns (Google or HF) and the namespaces that decide whether an unused
    name is an error or a skip.
    """
    target = _target(model)
    encoder = target.roots["encoder"]
    hf = fmt == HF_SAFETENSORS
    encoder_prefixes = _HF_ENCODER_PREFIXES if hf else _GOOGLE_ENCODER_PREFIXES
    bert_prefixes = _HF_BERT_PREFIXES if hf else _GOOGLE_BERT_PREFIXES

    available = set(source.names())
    used = set()
    plan, missing, missing_heads, mismatched, conflicts = [], [], [], [], []
    report = LoadReport(path=path, format=fmt, target=target.description)

    for entry in _concrete_entries(encoder.num_hidden_layers):
        name = entry.hf_name if hf else entry.google_name
        layout = entry.hf_transform if hf else entry.transform
        part = entry.getter.split(".")[0]
        candidates = (name,) + (_HF_ALIASES.get(name, ()) if hf else ())
        present = [c for c in candidates if c in available]
        if part not in target.roots:
            for c in present:
                used.add(c)
                report.skipped.append((c, "head not in the model"))
            continue
        variable = _resolve_getter(target.roots, entry.getter)
        expected = layout.stored_shape(variable.shape)
        if not present:
            if part != "encoder" and allow_missing_heads:
                missing_heads.append(name)
            else:
                missing.append((name, expected))
            continue
        used.update(present)
        for alias in present[1:]:
            report.skipped.append((alias, f"alias of {present[0]}"))
        stored = source.shape(present[0])
        if stored != expected:
            mismatched.append((present[0], stored, expected))
            continue
        if len(present) > 1 and not np.array_equal(source.read(present[0]),
                                                   source.read(present[1])):
            conflicts.append((present[1], f"differs from {present[0]}"))
            continue
        plan.append((present[0], variable, layout))

    if hf:
        for tied, tied_to in _HF_TIED.items():
            if tied not in available:
                continue
            used.add(tied)
            if "mlm" in target.roots and tied_to in available:
                if source.shape(tied) != source.shape(tied_to) or not np.array_equal(
                        source.read(tied), source.read(tied_to)):
                    conflicts.append((tied, f"is not tied to {tied_to}; this model's "
                                            "MLM decoder is the word embedding table"))
                    continue
            report.skipped.append((tied, f"tied to {tied_to}"))

    unexpected = []
    for name in sorted(available - used):
        if (not hf and _TF1_OPTIMIZER_STATE.search(name)):
            report.skipped.append((name, "optimizer state"))
        elif hf and _HF_BUFFERS.search(name):
            report.skipped.append((name, "buffer, not a weight"))
        elif name.startswith(encoder_prefixes):
            unexpected.append((name, source.shape(name)))
        elif name.startswith(bert_prefixes):
            if target.has_heads:
                unexpected.append((name, source.shape(name)))
            else:
                report.skipped.append((name, "head not in the model"))
        else:
            report.skipped.append((name, "not a BERT variable (task head?)"))

    if missing or unexpected or mismatched or conflicts:
        hint = None
        if any(not n.startswith(encoder_prefixes) for n, _ in missing):
            hint = ("The checkpoint has no pre-training heads; pass "
                    "allow_missing_heads=True to keep them initialised.")
        raise CheckpointMismatchError(source.description, target.description,
                                      missing, unexpected, mismatched, conflicts, hint)

    for name, variable, layout in plan:
        _assign(variable, layout.to_model(source.read(name)))
        report.loaded.append(name)
    report.missing_heads = missing_heads
    return report


# ---------------------------------------------------------- Google TF1 format


def load_google_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Loads a google-research/bert TF1 checkpoint into `model`.

    Args:
        model: a `BertEncoder`; a `BertPretrainer` (its masked-LM and
            next-sentence heads are loaded too); or a model whose `.encoder`
            is a `BertEncoder` (only the encoder is loaded).
        ckpt_prefix: e.g. `.../uncased_L-12_H-768_A-12/bert_model.ckpt`
            (the prefix of the `.index` / `.data-*` files).
        allow_missing_heads: for a pretrainer, let a checkpoint without
            `cls/*` heads load (the heads keep their initial values).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointMismatchError: see the module docstring; nothing is
            assigned in that case.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    return _load_by_table(model, _TF1Source(ckpt_prefix), GOOGLE_TF1, ckpt_prefix,
                          allow_missing_heads)


def save_google_checkpoint(model, ckpt_prefix, global_step=None):
    """Writes `model` as a TF1 checkpoint with google-research/bert's names.

    The result loads with Google's `run_classifier.py --init_checkpoint`,
    `tf.train.load_checkpoint`, HF's `load_tf_weights_in_bert`, and
    `load_google_checkpoint`. A `BertPretrainer` writes the encoder plus its
    `cls/predictions/*` and `cls/seq_relationship/*` heads; a `BertEncoder`
    or a model with an `.encoder` writes the encoder (`bert/*`) only.

    Atomicity: the files are written under a temporary prefix in the same
    directory and then renamed, data file first and index last, so a reader
    (which opens the `.index`) sees either the old checkpoint or the
    complete new one, and a crash leaves at most a hidden temporary file.

    Args:
        model: see `load_google_checkpoint`.
        ckpt_prefix: output prefix, e.g. `out/bert_model.ckpt`; the directory
            is created if needed.
        global_step: optional int written as `global_step` (int64), as
            Google's Estimator checkpoints carry.

    Returns:
        `ckpt_prefix`.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    target = _target(model)
    names, tensors = [], []
    for entry in _concrete_entries(target.roots["encoder"].num_hidden_layers):
        if entry.getter.split(".")[0] not in target.roots:
            continue
        variable = _resolve_getter(target.roots, entry.getter)
        value = entry.transform.from_model(tf.convert_to_tensor(variable).numpy())
        names.append(entry.google_name)
        tensors.append(tf.constant(np.ascontiguousarray(value, dtype=np.float32)))
    if global_step is not None:
        names.append("global_step")
        tensors.append(tf.constant(int(global_step), tf.int64))

    directory, base = os.path.split(ckpt_prefix)
    directory = directory or "."
    tf.io.gfile.makedirs(directory)
    tmp_prefix = os.path.join(directory, f".{base}.tmp-{uuid.uuid4().hex}")
    data_suffix = ".data-00000-of-00001"
    try:
        with tf.device("/cpu:0"):
            tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                              shape_and_slices=[""] * len(names), tensors=tensors)
        tf.io.gfile.rename(tmp_prefix + data_suffix, ckpt_prefix + data_suffix,
                           overwrite=True)
        tf.io.gfile.rename(tmp_prefix + ".index", ckpt_prefix + ".index", overwrite=True)
    finally:
        for leftover in tf.io.gfile.glob(tmp_prefix + "*"):
            tf.io.gfile.remove(leftover)
    # Shards of an older, differently-sharded checkpoint at the same prefix
    # would be dead weight next to the new index.
    for stale in tf.io.gfile.glob(ckpt_prefix + ".data-*-of-*"):
        if not stale.endswith(data_suffix):
            tf.io.gfile.remove(stale)
    return ckpt_prefix


# ------------------------------------------------------------- safetensors


# safetensors dtype -> (numpy little-endian dtype, bytes per element).
# BF16 has no numpy dtype: it is read as uint16 and widened exactly to
# float32 (bfloat16 is the top half of a float32).
_ST_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}


class _SafetensorsFile:
    """One `.safetensors` file, parsed with NumPy (no torch, no safetensors).

    Layout: an 8-byte little-endian header length N, N bytes of JSON
    `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
    {...}}`, then the raw little-endian tensor bytes, offsets relative to the
    end of the header. The data is memory-mapped, so only the tensors read
    are paged in.
    """

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ValueError(f"{path} is not a safetensors file (too short).")
            (header_len,) = struct.unpack("<Q", raw)
            if header_len > size - 8 or header_len > 100 * 2**20:
                raise ValueError(f"{path} is not a safetensors file "
                                 f"(header length {header_len}, file size {size}).")
            try:
                header = json.loads(f.read(header_len).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"{path}: unreadable safetensors header: {e}") from e
        if not isinstance(header, dict):
            raise ValueError(f"{path}: safetensors header is not a JSON object.")
        header.pop("__metadata__", None)
        self._data_start = 8 + header_len
        self._data_size = size - self._data_start
        self._entries = header
        self._mmap = None

    def names(self):
        return list(self._entries)

    def shape(self, name):
        return tuple(int(d) for d in self._entries[name]["shape"])

    def read(self, name):
        info = self._entries[name]
        dtype = info["dtype"]
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{self.path}: tensor {name!r} has unsupported dtype "
                             f"{dtype} (supported: {', '.join(_ST_DTYPES)}).")
        np_dtype = np.dtype(_ST_DTYPES[dtype])
        shape = self.shape(name)
        begin, end = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= self._data_size or end - begin != count * np_dtype.itemsize:
            raise ValueError(f"{self.path}: tensor {name!r} has data_offsets "
                             f"[{begin}, {end}] inconsistent with {dtype}{list(shape)}.")
        if self._mmap is None:
            self._mmap = np.memmap(self.path, dtype=np.uint8, mode="r")
        array = np.frombuffer(self._mmap, dtype=np_dtype, count=count,
                              offset=self._data_start + begin).reshape(shape)
        if dtype == "BF16":
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array.astype(np_dtype.newbyteorder("="))


class _SafetensorsSource:
    """One file, or the shards named by `model.safetensors.index.json`."""

    def __init__(self, path):
        self.path = path
        self.description = f"safetensors checkpoint {path}"
        self._owner = {}
        if path.endswith(".index.json"):
            with open(path, "r", encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
            directory = os.path.dirname(path)
            files = {}
            for name, filename in weight_map.items():
                if filename not in files:
                    files[filename] = _SafetensorsFile(os.path.join(directory, filename))
                self._owner[name] = files[filename]
        else:
            single = _SafetensorsFile(path)
            self._owner = {name: single for name in single.names()}

    def names(self):
        return list(self._owner)

    def shape(self, name):
        return self._owner[name].shape(name)

    def read(self, name):
        return self._owner[name].read(name)


def _safetensors_path(path):
    """A `.safetensors` file, or the file/index inside a folder; else None."""
    if os.path.isfile(path) and (path.endswith(".safetensors")
                                 or path.endswith(".safetensors.index.json")):
        return path
    if os.path.isdir(path):
        for name in ("model.safetensors", "model.safetensors.index.json"):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
    return None


def read_safetensors(path, names=None):
    """Reads tensors from a `.safetensors` file (or folder) into NumPy arrays.

    No torch and no `safetensors` package needed. F32/F16/F64 and the
    integer types keep their dtype; BF16 is widened (exactly) to float32.

    Args:
        path: a `.safetensors` file, a sharded `*.safetensors.index.json`, or
            a folder holding `model.safetensors` (or its index).
        names: optional iterable of names; default all.

    Returns:
        dict name -> `np.ndarray`, in the file's (PyTorch) layout and names.
    """
    resolved = _safetensors_path(os.fspath(path))
    if resolved is None:
        raise FileNotFoundError(f"No safetensors file at {path}")
    source = _SafetensorsSource(resolved)
    wanted = source.names() if names is None else list(names)
    return {name: source.read(name) for name in wanted}


class _HFSource:
    """HF names normalised: `bert.` prefix dropped, old `gamma`/`beta` renamed.

    A `BertModel` is saved without a prefix, `BertForPreTraining` and the
    task models with `bert.`; checkpoints from pytorch-pretrained-bert name
    LayerNorm parameters `gamma`/`beta` instead of `weight`/`bias`.
    """

    def __init__(self, path):
        self._inner = _SafetensorsSource(path)
        self.description = self._inner.description
        self._map = {}
        for raw in self._inner.names():
            name = raw[len("bert."):] if raw.startswith("bert.") else raw
            name = re.sub(r"\.gamma$", ".weight", name)
            name = re.sub(r"\.beta$", ".bias", name)
            if name in self._map:
                raise ValueError(f"{path}: {raw!r} and {self._map[name]!r} both map to "
                                 f"{name!r}.")
            self._map[name] = raw

    def names(self):
        return list(self._map)

    def shape(self, name):
        return self._inner.shape(self._map[name])

    def read(self, name):
        return self._inner.read(self._map[name])


def load_hf_safetensors(model, path, allow_missing_heads=False):
    """Loads Hugging Face BERT weights (`.safetensors`, PyTorch layout).

    Linear weights are transposed (`[out, in]` -> Keras `[in, out]`),
    LayerNorm `weight`/`bias` (or `gamma`/`beta`) fill `gamma`/`beta`, and a
    `bert.` prefix is optional. For a `BertPretrainer`,
    `cls.predictions.transform.*`, `cls.predictions.bias` (or
    `.decoder.bias`) and `cls.seq_relationship.*` fill the heads; the tied
    `cls.predictions.decoder.weight` is checked to equal the word
    embeddings. F32, F16 and BF16 weights are cast to the variables' dtype.

    Args:
        model: see `load_google_checkpoint`.
        path: a `.safetensors` file, a sharded `model.safetensors.index.json`,
            or an HF model folder holding either.
        allow_missing_heads: see `load_google_checkpoint` (HF `BertModel`
            exports have no `cls.*` heads).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointMismatchError: see the module docstring.
    """
    path = os.fspath(path)
    resolved = _safetensors_path(path)
    if resolved is None:
        raise FileNotFoundError(f"No .safetensors file or model.safetensors in {path}")
    return _load_by_table(model, _HFSource(resolved), HF_SAFETENSORS, resolved,
                          allow_missing_heads)


# ----------------------------------------------- own object-based checkpoints


_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_EMBEDDING_SUFFIX = "embeddings/word_embeddings"


# Block variable paths of checkpoints written before TransformerBlock was
# split into an attention and a feed-forward sublayer.
_LEGACY_BLOCK_PATHS = (
    ("attention/", "attention_sublayer/attention/"),
    ("attention_LayerNorm/", "attention_sublayer/LayerNorm/"),
    ("intermediate/", "ffn_sublayer/intermediate/"),
    ("output_dense/", "ffn_sublayer/output_dense/"),
    ("output_LayerNorm/", "ffn_sublayer/LayerNorm/"),
)
_LEGACY_BLOCK_RE = re.compile(
    r"(^|/)(layer_\d+)/(%s)" % "|".join(re.escape(old) for old, _ in _LEGACY_BLOCK_PATHS))


def legacy_block_path(path):
    """A variable path of an older checkpoint, in today's block layout.

    `bert_encoder/layer_3/attention_LayerNorm/gamma` becomes
    `bert_encoder/layer_3/attention_sublayer/LayerNorm/gamma`; current paths
    are returned unchanged.
    """
    renames = dict(_LEGACY_BLOCK_PATHS)
    return _LEGACY_BLOCK_RE.sub(
        lambda m: m.group(1) + m.group(2) + "/" + renames[m.group(3)], path, count=1)


class _ObjectGraph:
    """The trackable object graph of an object-based (TF2) checkpoint.

    Why not `tf.train.Checkpoint(model=model).restore(...)`: under Keras 3
    the object graph only records attributes that are layers or variables;
    lists of layers (the encoder's `transformer_layers`, the pretrainer's
    `objectives`) are not tracked. The trainer's checkpoints still hold
    every model variable, reached through the optimizer's
    `_trainable_variables` list, with its Keras path (`bert_encoder/
    layer_3/attention_sublayer/attention/query/kernel`) as the variable's `full_name`. So
    variables are matched here by path, relative to the encoder's own name,
    which also lets the encoder of one model load into another.
    """

    def __init__(self, reader):
        from tensorflow.core.protobuf import trackable_object_graph_pb2

        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor(_GRAPH_KEY))
        self.nodes = graph.nodes

    def _child(self, node_id, name):
        for child in self.nodes[node_id].children:
            if child.local_name == name:
                return child.node_id
        return None

    def _value(self, node_id):
        for attribute in self.nodes[node_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                return attribute.full_name, attribute.checkpoint_key
        return None

    def model_variables(self):
        """{full_name: checkpoint_key} of the model's variables.

        Those reachable from the root's `model` child, plus the entries of any
        optimizer's `_trainable_variables` list (the model's trainable
        variables); optimizer slots and counters are not among them.
        """
        starts = []
        model = self._child(0, "model")
        if model is not None:
            starts.append(model)
        stack, seen = [0], set()
        while stack:  # Find every `_trainable_variables` list under `optimizer`.
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for child in self.nodes[node].children:
                if child.local_name == "_trainable_variables":
                    starts.append(child.node_id)
                elif child.local_name != "model":
                    stack.append(child.node_id)
        found, stack, seen = {}, list(starts), set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            value = self._value(node)
            if value is not None and value[0]:
                found.setdefault(value[0], value[1])
            stack.extend(child.node_id for child in self.nodes[node].children)
        return found

    def encoder_prefix(self, variables):
        """The path prefix of the checkpoint's BERT encoder variables."""
        for path in (("model", "encoder", "embeddings", "word_embeddings"),
                     ("model", "embeddings", "word_embeddings")):
            node = 0
            for name in path:
                node = self._child(node, name) if node is not None else None
            if node is not None and self._value(node):
                full_name = self._value(node)[0]
                if full_name.endswith(_EMBEDDING_SUFFIX):
                    return full_name[: -len(_EMBEDDING_SUFFIX)]
        candidates = [n for n in variables if n.endswith("/" + _EMBEDDING_SUFFIX)]
        if len(candidates) == 1:
            return candidates[0][: -len(_EMBEDDING_SUFFIX)]
        raise ValueError(
            "Cannot find a BERT encoder in the checkpoint (no unique "
            f"'.../{_EMBEDDING_SUFFIX}' variable; candidates: {candidates})."
        )


def _encoder_prefix(encoder):
    path = encoder.embeddings.word_embeddings.path
    if not path.endswith(_EMBEDDING_SUFFIX):
        raise ValueError(f"Unexpected word embedding path {path!r}.")
    return path[: -len(_EMBEDDING_SUFFIX)]


def _load_object_based(model, prefix, allow_missing_heads=False):
    """Restores the model part of a checkpoint written by `modeling.trainer`.

    Encoder variables are matched by their path below the encoder (so a
    classifier's encoder loads from a pretrainer's checkpoint); for a
    `BertPretrainer`, its other weights (the objectives' heads) are matched
    by full path. The optimizer's state is ignored.
    """
    target = _target(model)
    encoder = target.roots["encoder"]
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    graph = _ObjectGraph(reader)
    stored = graph.model_variables()
    ckpt_prefix = graph.encoder_prefix(stored)
    model_prefix = _encoder_prefix(encoder)

    # Key "encoder:<relative path>" for the encoder, the full path otherwise.
    def key_of(path, prefix_):
        return "encoder:" + path[len(prefix_):] if path.startswith(prefix_) else path

    report = LoadReport(path=prefix, format=OBJECT_BASED, target=target.description)
    available = {}
    for full_name, checkpoint_key in stored.items():
        if "seed_generator" in full_name:
            # Dropout RNG state: not a weight, and not in `model.weights`.
            report.skipped.append((full_name, "RNG state"))
            continue
        available[key_of(legacy_block_path(full_name), ckpt_prefix)] = (
            full_name, checkpoint_key)

    wanted = {}
    variables = list(encoder.weights)
    if target.has_heads:
        encoder_ids = {id(v) for v in variables}
        variables += [v for v in model.weights if id(v) not in encoder_ids]
    for variable in variables:
        key = key_of(variable.path, model_prefix)
        if key in wanted:
            raise ValueError(f"Two variables of the model share the path {variable.path!r}.")
        wanted[key] = variable

    plan, missing, mismatched, missing_heads = [], [], [], []
    for key, variable in wanted.items():
        shape = tuple(int(d) for d in variable.shape)
        if key not in available:
            shown = variable.path
            if key.startswith("encoder:") or not allow_missing_heads:
                missing.append((shown, shape))
            else:
                missing_heads.append(shown)
            continue
        full_name, checkpoint_key = available[key]
        stored_shape = tuple(shapes[checkpoint_key])
        if stored_shape != shape:
            mismatched.append((full_name, stored_shape, shape))
            continue
        plan.append((full_name, checkpoint_key, variable))
    unexpected = []
    for key in sorted(set(available) - set(wanted)):
        full_name, checkpoint_key = available[key]
        if key.startswith("encoder:"):
            unexpected.append((full_name, tuple(shapes[checkpoint_key])))
        else:
            report.skipped.append((full_name, "not part of the target model"))
    model_keys = set(stored.values())
    for checkpoint_key in sorted(shapes):
        if checkpoint_key not in model_keys and checkpoint_key != _GRAPH_KEY:
            report.skipped.append((checkpoint_key, "optimizer state"))
    if missing or unexpected or mismatched:
        hint = None
        if any(not n.startswith(model_prefix) for n, _ in missing):
            hint = ("Some head variables are not in the checkpoint; pass "
                    "allow_missing_heads=True to keep them initialised.")
        raise CheckpointMismatchError(f"Checkpoint {prefix}", target.description,
                                      missing, unexpected, mismatched, (), hint)
    for full_name, checkpoint_key, variable in plan:
        _assign(variable, reader.get_tensor(checkpoint_key))
        report.loaded.append(full_name)
    report.missing_heads = missing_heads
    return report


# ---------------------------------------------------------------- dispatch


def _has_index(prefix):
    return tf.io.gfile.exists(prefix + ".index")


def resolve_checkpoint(path):
    """Works out what `path` is: returns `(format, resolved_path)`.

    Accepted: a TF checkpoint prefix (`.../bert_model.ckpt`, `.../ckpt-5`)
    or its `.index` file; a `.safetensors` file or sharded index; a
    directory holding a `checkpoint` state file (the latest is taken), a
    `bert_model.ckpt`, exactly one other `*.index`, or `model.safetensors`.
    A TF checkpoint with an object graph is "object_based", otherwise
    "google_tf1". TF checkpoints may live on any `tf.io.gfile` file system
    (`gs://`); safetensors files are memory-mapped, so they must be local.

    Raises:
        FileNotFoundError: nothing recognisable at `path`.
        ValueError: a directory with several checkpoints and no state file.
    """
    path = os.fspath(path)
    prefix = None
    if path.endswith(".index") and tf.io.gfile.exists(path):
        prefix = path[: -len(".index")]
    elif _safetensors_path(path) is not None and not tf.io.gfile.isdir(path):
        return HF_SAFETENSORS, path
    elif _has_index(path):
        prefix = path
    elif tf.io.gfile.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None and _has_index(os.path.join(path, "bert_model.ckpt")):
            prefix = os.path.join(path, "bert_model.ckpt")
        if prefix is None:
            indexes = sorted(tf.io.gfile.glob(os.path.join(path, "*.index")))
            if len(indexes) > 1:
                raise ValueError(
                    f"{path} holds several checkpoints and no 'checkpoint' state "
                    f"file; pass one prefix: {[i[:-6] for i in indexes]}"
                )
            if indexes:
                prefix = indexes[0][: -len(".index")]
        if prefix is None:
            safetensors = _safetensors_path(path)
            if safetensors is not None:
                return HF_SAFETENSORS, safetensors
    if prefix is None:
        raise FileNotFoundError(
            f"No checkpoint at {path}: not a TF checkpoint prefix (no .index), "
            "not a .safetensors file, and not a directory holding either."
        )
    reader = tf.train.load_checkpoint(prefix)
    if _GRAPH_KEY in reader.get_variable_to_shape_map():
        return OBJECT_BASED, prefix
    return GOOGLE_TF1, prefix


def init_from_checkpoint(model, path, allow_missing_heads=False):
    """The one `--init_checkpoint` loader of every script.

    Args:
        model: a `BertEncoder`; a `BertPretrainer` (encoder and heads); or
            any task model with an `.encoder` that is a `BertEncoder` (a
            classifier, a tagger, ...): then only the encoder is loaded and
            every head in the checkpoint (Google's `cls/*`, HF's `cls.*`, a
            trainer checkpoint's objectives, a fine-tuned task head) is
            skipped, because a task's own head starts fresh.
        path: a Google TF1 checkpoint prefix, a checkpoint written by
            `modeling.trainer` (prefix or model dir; the model part is
            restored, the optimizer ignored), a directory holding either,
            or an HF `.safetensors` file or model folder. See
            `resolve_checkpoint`.
        allow_missing_heads: see `load_google_checkpoint`.

    ALBERT: a model built around a `modeling.albert.AlbertEncoder` reads
    google-research/albert TF1 checkpoints through `load_albert_checkpoint`;
    other formats are refused for it (ValueError).

    Returns:
        A `LoadReport` (also logged).
    """
    fmt, resolved = resolve_checkpoint(path)
    if _is_albert(model):
        # ALBERT models read google-research/albert's TF1 names only.
        if fmt != GOOGLE_TF1:
            raise ValueError(f"{resolved} is a {fmt} checkpoint; ALBERT models load "
                             "google-research/albert TF1 checkpoints.")
        report = load_albert_checkpoint(model, resolved, allow_missing_heads)
        logging.info("%s", report)
        return report
    if fmt == HF_SAFETENSORS:
        report = load_hf_safetensors(model, resolved, allow_missing_heads)
    elif fmt == OBJECT_BASED:
        report = _load_object_based(model, resolved, allow_missing_heads)
    else:
        report = load_google_checkpoint(model, resolved, allow_missing_heads)
    logging.info("%s", report)
    return report


# ------------------------------------------------------ ALBERT (TF1 names)

# google-research/albert's names for "all" sharing: `{group}` and `{inner}`
# index the shared blocks (group_g/inner_group_k), `{block}` is the matching
# index into the encoder's sublayer lists (g * inner_group_num + k). Every
# kernel is stored [in, out] like the Keras Dense kernel (ALBERT's 3-D
# attention projections are reshaped views of 2-D variables), except
# `cls/seq_relationship/output_weights` ([2, H]).
_AG = "bert/encoder/transformer/group_{group}/inner_group_{inner}/"
_AA = "encoder.attention_sublayers[{block}]."
_AF = "encoder.ffn_sublayers[{block}]."

AlbertNameEntry = collections.namedtuple(
    "AlbertNameEntry", ["google_name", "getter", "transform"])
AlbertNameEntry.__doc__ = """One weight of an ALBERT TF1 checkpoint.

    google_name: name in google-research/albert checkpoints.
    getter: attribute path from a root (`encoder` = `AlbertEncoder`, `mlm`,
        `nsp`) to the Keras variable.
    transform: stored array -> Keras variable (`AS_IS` or `TRANSPOSED`).
"""

ALBERT_NAME_TABLE = (
    AlbertNameEntry("bert/embeddings/word_embeddings",
                    "encoder.embeddings.word_embeddings", AS_IS),
    AlbertNameEntry("bert/embeddings/position_embeddings",
                    "encoder.embeddings.position_embeddings", AS_IS),
    AlbertNameEntry("bert/embeddings/token_type_embeddings",
                    "encoder.embeddings.token_type_embeddings", AS_IS),
    AlbertNameEntry("bert/embeddings/LayerNorm/gamma",
                    "encoder.embeddings.layer_norm.gamma", AS_IS),
    AlbertNameEntry("bert/embeddings/LayerNorm/beta",
                    "encoder.embeddings.layer_norm.beta", AS_IS),
    # Only when embedding_size != hidden_size (see _albert_entries).
    AlbertNameEntry("bert/encoder/embedding_hidden_mapping_in/kernel",
                    "encoder.embedding_projection.kernel", AS_IS),
    AlbertNameEntry("bert/encoder/embedding_hidden_mapping_in/bias",
                    "encoder.embedding_projection.bias", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/query/kernel", _AA + "attention.query.kernel", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/query/bias", _AA + "attention.query.bias", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/key/kernel", _AA + "attention.key.kernel", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/key/bias", _AA + "attention.key.bias", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/value/kernel", _AA + "attention.value.kernel", AS_IS),
    AlbertNameEntry(_AG + "attention_1/self/value/bias", _AA + "attention.value.bias", AS_IS),
    AlbertNameEntry(_AG + "attention_1/output/dense/kernel",
                    _AA + "attention.output_dense.kernel", AS_IS),
    AlbertNameEntry(_AG + "attention_1/output/dense/bias",
                    _AA + "attention.output_dense.bias", AS_IS),
    AlbertNameEntry(_AG + "LayerNorm/gamma", _AA + "layer_norm.gamma", AS_IS),
    AlbertNameEntry(_AG + "LayerNorm/beta", _AA + "layer_norm.beta", AS_IS),
    AlbertNameEntry(_AG + "ffn_1/intermediate/dense/kernel", _AF + "intermediate.kernel", AS_IS),
    AlbertNameEntry(_AG + "ffn_1/intermediate/dense/bias", _AF + "intermediate.bias", AS_IS),
    AlbertNameEntry(_AG + "ffn_1/intermediate/output/dense/kernel",
                    _AF + "output_dense.kernel", AS_IS),
    AlbertNameEntry(_AG + "ffn_1/intermediate/output/dense/bias",
                    _AF + "output_dense.bias", AS_IS),
    AlbertNameEntry(_AG + "LayerNorm_1/gamma", _AF + "layer_norm.gamma", AS_IS),
    AlbertNameEntry(_AG + "LayerNorm_1/beta", _AF + "layer_norm.beta", AS_IS),
    AlbertNameEntry("bert/pooler/dense/kernel", "encoder.pooler.kernel", AS_IS),
    AlbertNameEntry("bert/pooler/dense/bias", "encoder.pooler.bias", AS_IS),
    # Heads: BERT's, with the MLM transform projecting to embedding_size.
    AlbertNameEntry("cls/predictions/transform/dense/kernel",
                    "mlm.transform_dense.kernel", AS_IS),
    AlbertNameEntry("cls/predictions/transform/dense/bias", "mlm.transform_dense.bias", AS_IS),
    AlbertNameEntry("cls/predictions/transform/LayerNorm/gamma",
                    "mlm.transform_layer_norm.gamma", AS_IS),
    AlbertNameEntry("cls/predictions/transform/LayerNorm/beta",
                    "mlm.transform_layer_norm.beta", AS_IS),
    AlbertNameEntry("cls/predictions/output_bias", "mlm.output_bias", AS_IS),
    AlbertNameEntry("cls/seq_relationship/output_weights", "nsp.dense.kernel", TRANSPOSED),
    AlbertNameEntry("cls/seq_relationship/output_bias", "nsp.dense.bias", AS_IS),
)


def _albert_entries(encoder):
    """`ALBERT_NAME_TABLE` expanded for `encoder`'s groups and inner groups."""
    rows = []
    for entry in ALBERT_NAME_TABLE:
        if "embedding_projection" in entry.getter and encoder.embedding_projection is None:
            continue
        if "{block}" not in entry.getter:
            rows.append(entry)
            continue
        for group in range(encoder.num_hidden_groups):
            for inner in range(encoder.inner_group_num):
                index = dict(group=group, inner=inner,
                             block=group * encoder.inner_group_num + inner)
                rows.append(AlbertNameEntry(entry.google_name.format(**index),
                                            entry.getter.format(**index),
                                            entry.transform))
    return rows


def _is_albert(model):
    from modeling.albert import AlbertEncoder

    return isinstance(model, AlbertEncoder) or isinstance(
        getattr(model, "encoder", None), AlbertEncoder)


def _albert_target(model):
    """Like `_target`, for an `AlbertEncoder` or a model around one."""
    from modeling.albert import AlbertEncoder

    if isinstance(model, AlbertEncoder):
        target = _Target({"encoder": model}, f"AlbertEncoder {model.name!r}", False)
    elif isinstance(model, BertPretrainer) and isinstance(model.encoder, AlbertEncoder):
        roots = {"encoder": model.encoder}
        mlm = _find_head(model, MaskedLMHead, "masked_lm")
        sop = _find_head(model, NextSentenceHead, "sentence_order")
        if mlm is not None:
            roots["mlm"] = mlm
        if sop is not None:
            roots["nsp"] = sop
        target = _Target(roots, f"BertPretrainer {model.name!r} (ALBERT)", True)
    elif isinstance(getattr(model, "encoder", None), AlbertEncoder):
        target = _Target({"encoder": model.encoder},
                         f"the ALBERT encoder of {type(model).__name__} "
                         f"{getattr(model, 'name', '')!r}", False)
    else:
        raise TypeError(
            "Expected an AlbertEncoder, a BertPretrainer around one or a model "
            f"whose `.encoder` is one; got {type(model).__name__}.")
    encoder = target.roots["encoder"]
    if encoder.share_parameters != "all":
        raise ValueError(
            "google-research/albert checkpoints hold fully shared blocks "
            "(group_g/inner_group_k); an AlbertEncoder with "
            f"share_parameters={encoder.share_parameters!r} has no such layout.")
    return target


def load_albert_checkpoint(model, ckpt_prefix, allow_missing_heads=False):
    """Loads a google-research/albert TF1 checkpoint (`model.ckpt-N`).

    Same policy as `load_google_checkpoint`: every encoder weight must be
    present with its shape, every `bert/*` entry must have a place in the
    model, head weights (`cls/*`) are loaded into a pretrainer's masked-LM
    and sentence-order heads (required unless `allow_missing_heads`) and
    skipped otherwise, optimizer state (`adam_m`, `adam_v`, `global_step`,
    ...) is skipped, and any problem raises one `CheckpointMismatchError`
    before a variable is touched.

    Args:
        model: an `AlbertEncoder` with `share_parameters="all"` (the only
            layout ALBERT checkpoints have), a `BertPretrainer` around one
            (e.g. from `build_albert_pretrainer`), or a model whose
            `.encoder` is one.
        ckpt_prefix: the checkpoint prefix (the path before `.index`).
        allow_missing_heads: see `load_google_checkpoint`.

    Returns:
        A `LoadReport`.
    """
    ckpt_prefix = os.fspath(ckpt_prefix)
    target = _albert_target(model)
    source = _TF1Source(ckpt_prefix)
    available = set(source.names())
    used = set()
    plan, missing, missing_heads, mismatched = [], [], [], []
    report = LoadReport(path=ckpt_prefix, format=GOOGLE_TF1, target=target.description)

    for entry in _albert_entries(target.roots["encoder"]):
        name = entry.google_name
        part = entry.getter.split(".")[0]
        if part not in target.roots:
            if name in available:
                used.add(name)
                report.skipped.append((name, "head not in the model"))
            continue
        variable = _resolve_getter(target.roots, entry.getter)
        expected = entry.transform.stored_shape(variable.shape)
        if name not in available:
            if part != "encoder" and allow_missing_heads:
                missing_heads.append(name)
            else:
                missing.append((name, expected))
            continue
        used.add(name)
        stored = source.shape(name)
        if stored != expected:
            mismatched.append((name, stored, expected))
            continue
        plan.append((name, variable, entry.transform))

    unexpected = []
    for name in sorted(available - used):
        if _TF1_OPTIMIZER_STATE.search(name):
            report.skipped.append((name, "optimizer state"))
        elif name.startswith(_GOOGLE_ENCODER_PREFIXES):
            unexpected.append((name, source.shape(name)))
        elif name.startswith(_GOOGLE_BERT_PREFIXES):
            if target.has_heads:
                unexpected.append((name, source.shape(name)))
            else:
                report.skipped.append((name, "head not in the model"))
        else:
            report.skipped.append((name, "not an ALBERT variable (task head?)"))

    if missing or unexpected or mismatched:
        hint = None
        if any(not n.startswith(_GOOGLE_ENCODER_PREFIXES) for n, _ in missing):
            hint = ("The checkpoint has no pre-training heads; pass "
                    "allow_missing_heads=True to keep them initialised.")
        raise CheckpointMismatchError(source.description, target.description,
                                      missing, unexpected, mismatched, (), hint)
    for name, variable, layout in plan:
        _assign(variable, layout.to_model(source.read(name)))
        report.loaded.append(name)
    report.missing_heads = missing_heads
    return report
