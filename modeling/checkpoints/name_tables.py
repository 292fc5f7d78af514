"""Checkpoint name tables: which stored tensor fills which model variable.

Why tables
----------
A released checkpoint's names are a contract someone else wrote (Google's TF1
scripts: `bert/encoder/layer_3/attention/self/query/kernel`; Hugging Face's
PyTorch modules: `encoder.layer.3.attention.self.query.weight`), while the
attribute layout of our models is ours. A table writes the correspondence
down once, as data, per family and per format; one generic matcher
(`load_by_table`) reads with it and one generic writer (`table_arrays`)
writes with it. Reading and writing use the same rows, so the two directions
cannot drift apart, and a family gains a format by adding a table, not code.

Each family declares its tables in its own package
(`modeling/bert/checkpoint_names.py`, `modeling/albert/checkpoint_names.py`)
and registers them on its `registry.Family`:

    registry.Family(..., name_tables={"google_tf1": GOOGLE_TF1, "hf": HF},
                    checkpoint_heads={"mlm": (MaskedLMHead, "masked_lm")})

The keys are the formats (`GOOGLE_TF1_KEY` = "google_tf1" for TF1
name-based checkpoints, `HF_KEY` = "hf" for Hugging Face safetensors);
`checkpoint_heads` names the head roots the getters may start from. The
checkpoint code finds a model's family through `registry.families` and uses
the table of the format it is reading; a family without a table for a
format cannot read it (a one-line `CheckpointFormatError`).

Entries
-------
`Entry(name, getter, transform, optional=False)`, one per stored weight (or
per part of a fused one, below):

    name       the stored name. `{placeholders}` (e.g. `{layer}`) make it a
               template, repeated for every dict that the table's `repeat`
               returns for the encoder (`each_layer` gives `{"layer": i}`
               for i < num_hidden_layers).
    getter     attribute path from a root to the Keras variable, with the
               same placeholders, e.g.
               `encoder.transformer_layers[{layer}].ffn_sublayer.intermediate.kernel`.
               Roots: `encoder` (the family's encoder) and the head roots of
               `Family.checkpoint_heads` (BERT, ALBERT: `mlm`, `nsp`). A row
               whose root the model does not have (an encoder has no heads)
               is skipped; its stored tensor, if any, is reported as skipped.
    transform  how the stored array relates to the variable (below).
    optional   the row exists only when the model has the variable: a
               getter step reaching `None` (ALBERT's embedding projection,
               absent when embedding_size == hidden_size) drops the row
               instead of failing.

Transforms
----------
Each transform has `to_model(stored) -> value` (loading),
`from_model(value) -> stored` (writing) and `stored_shape(model_shape)` (the
shape the checkpoint must have, checked before anything is assigned).

    AS_IS        the stored array is the variable (TF1 kernels are [in, out]
                 like Keras Dense kernels; GPT-2's Conv1D weights are too).
    TRANSPOSED   the stored array is the variable's transpose: PyTorch
                 `nn.Linear` weights ([out, in]); Google's
                 `cls/seq_relationship/output_weights` ([2, hidden]).
    Split(part, parts, axis=-1, inner=AS_IS)
                 the variable is one of `parts` equal, contiguous blocks of
                 the stored array along `axis` (an axis of the STORED
                 array): block `part` (0-based), then `inner` applied to it.

Fused weights: one stored tensor, several variables
---------------------------------------------------
Some formats store several of our variables in one tensor. HF GPT-2's
`h.N.attn.c_attn.weight` is a Conv1D weight `[hidden, 3*hidden]`, already
[in, out] (so NOT transposed), whose three column blocks are the query, key
and value kernels; `h.N.attn.c_attn.bias` `[3*hidden]` holds the three
biases the same way. A table gives such a tensor one row per part, all with
the same name and a `Split` transform; `fused` writes those rows:

    from modeling.checkpoints.name_tables import (
        AS_IS, Entry, NameTable, Tied, each_layer, fused)

    _A = "encoder.blocks[{layer}].attention."      # the model's attribute path
    HF = NameTable(
        entries=(
            *fused("h.{layer}.attn.c_attn.weight",
                   [_A + "query.kernel", _A + "key.kernel", _A + "value.kernel"]),
            *fused("h.{layer}.attn.c_attn.bias",
                   [_A + "query.bias", _A + "key.bias", _A + "value.bias"]),
            Entry("h.{layer}.attn.c_proj.weight", _A + "output_dense.kernel", AS_IS),
            ...
        ),
        repeat=each_layer,
        encoder_prefixes=("wte.", "wpe.", "h.", "ln_f."),
        ignore=((r"\\.attn\\.(masked_)?bias$", "buffer, not a weight"),),
        tied=(Tied("lm_head.weight", "wte.weight", "encoder"),),
        rename=lambda name: name[len("transformer."):]
                            if name.startswith("transformer.") else name,
    )
    registry.Family(..., name_tables={"hf": HF})   # load_hf_safetensors uses it

`fused(name, getters, axis=-1, inner=AS_IS)` gives part i of `len(getters)`
to `getters[i]`, so the getters are listed in the stored order. The default
`axis=-1` is the column axis of a `[hidden, 3*hidden]` kernel and the only
axis of a `[3*hidden]` bias. A PyTorch `nn.Linear` fused the other way
(`[3*hidden, hidden]`, [out, in]) is `fused(name, getters, axis=0,
inner=TRANSPOSED)`: rows split first, then each block transposed.

When loading, every part is checked against the one stored tensor: it must
have exactly the shape of the parts' stored shapes laid side by side
(`[hidden, 3*hidden]` for three `[hidden, hidden]` kernels), else the name
is reported once as mis-shaped with both shapes; the tensor is read once
and each part assigned its block; `LoadReport.loaded` lists the name once.
When writing, the parts are concatenated back in part order. Shapes are
compared as they are: a 3-D `EinsumDense` kernel `[hidden, heads, head_dim]`
does not match a `[hidden, hidden]` block, so a family using `Split` keeps
those projections 2-D Dense kernels (as BERT's are). A table whose
rows share a name must make them a complete split (parts 0..n-1 of one
`parts` and `axis`), which `NameTable.rows` checks. Blocks are contiguous:
layouts that interleave the parts per head (BLOOM's and GPT-NeoX's
`query_key_value`, `[heads, 3, head_dim]`) would need another transform.

Tables
------
`NameTable(entries, repeat, encoder_prefixes, head_prefixes, ignore,
aliases, tied, rename)`; see its docstring. Besides the rows, a table says
which stored names belong to the family (so that an unused one is an error,
not something to skip silently) and which are not weights at all (buffers);
see `load_by_table` for the full policy.
"""

import collections
import dataclasses
import re
import string
from typing import Callable, Optional

import keras
import numpy as np

from modeling.checkpoints.report import CheckpointFormatError
from modeling.checkpoints.report import CheckpointMismatchError
from modeling.checkpoints.report import LoadReport
from modeling.checkpoints.targets import assign

__all__ = [
    "AS_IS", "Entry", "GOOGLE_TF1_KEY", "HF_KEY", "Layout", "NameTable", "Split",
    "TRANSPOSED", "Tied", "conv1d_block_parts", "each_layer", "fused",
    "keras_hub_encoder_block_rows", "load_by_table", "resolve_getter", "strip_prefix",
    "table_arrays", "table_for",
]

GOOGLE_TF1_KEY = "google_tf1"
HF_KEY = "hf"


# --------------------------------------------------------------- transforms


class Layout:
    """A whole stored array <-> one variable, as is or transposed."""

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


AS_IS = Layout("AS_IS", transpose=False)
TRANSPOSED = Layout("TRANSPOSED", transpose=True)


class Split:
    """The variable is block `part` of `parts` of the stored array along `axis`.

    `axis` is an axis of the stored array; the block then goes through
    `inner` (`AS_IS` or `TRANSPOSED`). See the module docstring.
    """

    def __init__(self, part, parts, axis=-1, inner=AS_IS):
        if not (isinstance(parts, int) and parts >= 2 and 0 <= part < parts):
            raise ValueError(f"Split needs 0 <= part < parts and parts >= 2; got "
                             f"part={part!r}, parts={parts!r}.")
        if isinstance(inner, Split):
            raise ValueError("Split(inner=...) must be AS_IS or TRANSPOSED, not a Split.")
        self.part = part
        self.parts = parts
        self.axis = axis
        self.inner = inner

    def stored_shape(self, model_shape):
        """The whole fused tensor's shape, for one part of `model_shape`."""
        shape = list(self.inner.stored_shape(model_shape))
        shape[self.axis] *= self.parts
        return tuple(shape)

    def to_model(self, array):
        """Fused stored array -> this part's value for the Keras variable."""
        return self.inner.to_model(np.split(np.asarray(array), self.parts, axis=self.axis)[self.part])

    def from_model(self, array):
        """Keras variable value -> this part's block of the stored array."""
        return self.inner.from_model(array)

    def join(self, blocks):
        """The stored array from all parts' blocks, in part order."""
        return np.concatenate(blocks, axis=self.axis)

    def same_split(self, other):
        return (isinstance(other, Split) and other.parts == self.parts
                and other.axis == self.axis)

    def __repr__(self):
        return f"Split({self.part}, {self.parts}, axis={self.axis}, inner={self.inner!r})"


# ------------------------------------------------------------------ entries


Entry = collections.namedtuple("Entry", ["name", "getter", "transform", "optional"],
                               defaults=(False,))
Entry.__doc__ = """One stored weight (or one part of a fused one) in one format.

    name: stored name, may hold `{placeholders}` (see the module docstring).
    getter: attribute path from a root to the Keras variable.
    transform: `AS_IS`, `TRANSPOSED` or a `Split`.
    optional: the row exists only when the getter reaches a variable.
"""

Tied = collections.namedtuple("Tied", ["name", "tied_to", "root"])
Tied.__doc__ = """A stored weight that must equal another one (a tied copy).

    name: the stored name of the copy (HF's `cls.predictions.decoder.weight`).
    tied_to: the stored name it must equal (`embeddings.word_embeddings.weight`).
    root: when the model has this root (`mlm`), the two are checked equal,
        because in the model they are one variable; otherwise the copy is
        just skipped.
"""


def fused(name, getters, axis=-1, inner=AS_IS, optional=False):
    """Rows for one stored tensor holding `len(getters)` variables side by side.

    Part i of the stored tensor (along `axis`, then `inner`) fills
    `getters[i]`. See the module docstring (GPT-2's `c_attn`).
    """
    getters = list(getters)
    return tuple(Entry(name, getter, Split(i, len(getters), axis, inner), optional)
                 for i, getter in enumerate(getters))


def each_layer(encoder):
    """`repeat` for tables of one block per layer: `{"layer": i}`."""
    return [{"layer": i} for i in range(encoder.num_hidden_layers)]


def strip_prefix(prefix):
    """A `rename` that drops `prefix` from the stored names starting with it
    (HF's head models keep the encoder under `transformer.`)."""
    def rename(name):
        return name[len(prefix):] if name.startswith(prefix) else name
    return rename


def conv1d_block_parts():
    """The rows of HF's Conv1D block (`h.{layer}.`: GPT's and GPT-2's names) for a
    `TransformerBlock` at `encoder.transformer_layers[{layer}]`.

    Conv1D kernels are stored `[in, out]`, as Keras keeps them; `c_attn`
    holds query, key and value side by side. Returns the parts `(attn, ln_1,
    mlp, ln_2)`, which a family lists in its checkpoints' order; `ln_1` is
    the attention half's LayerNorm and `ln_2` the feed-forward half's,
    before (GPT-2) or after (GPT) each half.
    """
    stored = "h.{layer}."
    attention = "encoder.transformer_layers[{layer}].attention_sublayer."
    ffn = "encoder.transformer_layers[{layer}].ffn_sublayer."

    def pair(name, getter, suffixes):
        return tuple(Entry(stored + name + "." + stored_suffix, getter + suffix, AS_IS)
                     for stored_suffix, suffix in suffixes)

    dense = (("weight", ".kernel"), ("bias", ".bias"))
    norm = (("weight", ".gamma"), ("bias", ".beta"))
    attn = (
        *(entry for suffix, variable in dense for entry in fused(
            stored + "attn.c_attn." + suffix,
            [attention + "attention." + part + variable for part in ("query", "key", "value")])),
        *pair("attn.c_proj", attention + "attention.output_dense", dense),
    )
    mlp = (*pair("mlp.c_fc", ffn + "intermediate", dense),
           *pair("mlp.c_proj", ffn + "output_dense", dense))
    return attn, pair("ln_1", attention + "layer_norm", norm), mlp, \
        pair("ln_2", ffn + "layer_norm", norm)


def keras_hub_encoder_block_rows():
    """(variable path, getter) of keras-hub's post-LN `TransformerEncoder` block
    (`transformer_layer_{layer}/`, the BERT-style backbones' layers) for a
    `TransformerBlock` at `encoder.transformer_layers[{layer}]`, both stored as they are
    (`modeling.pretrained.keras_hub` shows the EinsumDense attention kernels merged to 2-D).
    """
    stored = "transformer_layer_{layer}/"
    attention = "encoder.transformer_layers[{layer}].attention_sublayer."
    ffn = "encoder.transformer_layers[{layer}].ffn_sublayer."
    return (
        *((stored + "self_attention_layer/%s/%s" % (theirs, part),
           attention + "attention.%s.%s" % (ours, part))
          for theirs, ours in (("query", "query"), ("key", "key"), ("value", "value"),
                               ("attention_output", "output_dense"))
          for part in ("kernel", "bias")),
        (stored + "self_attention_layer_norm/gamma", attention + "layer_norm.gamma"),
        (stored + "self_attention_layer_norm/beta", attention + "layer_norm.beta"),
        (stored + "feedforward_intermediate_dense/kernel", ffn + "intermediate.kernel"),
        (stored + "feedforward_intermediate_dense/bias", ffn + "intermediate.bias"),
        (stored + "feedforward_output_dense/kernel", ffn + "output_dense.kernel"),
        (stored + "feedforward_output_dense/bias", ffn + "output_dense.bias"),
        (stored + "feedforward_layer_norm/gamma", ffn + "layer_norm.gamma"),
        (stored + "feedforward_layer_norm/beta", ffn + "layer_norm.beta"),
    )


def _fields(template):
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


@dataclasses.dataclass(frozen=True)
class NameTable:
    """One family's names in one checkpoint format.

    Attributes:
        entries: the `Entry` rows (templates; see the module docstring).
        repeat: `encoder -> [dict]`: the placeholder values of every
            repeated block (`each_layer`). It may raise
            `CheckpointFormatError` for an encoder that has no layout in
            this format (ALBERT without full sharing).
        encoder_prefixes: stored names that belong to the encoder: one the
            model has no place for is an error (a deeper or wider
            checkpoint), never a silent partial load.
        head_prefixes: stored names of the family's pre-training heads: an
            unused one is an error for a pretrainer, skipped otherwise.
        ignore: `(regex, reason)` pairs: stored names that are not weights
            (HF's `position_ids` buffers), skipped with `reason` when unused.
        aliases: table name -> other stored names of the same weight (newer
            `transformers` save BERT's MLM bias also as the decoder's bias);
            when both are present they must be equal.
        tied: `Tied` copies of another stored weight.
        rename: `stored name -> table name`, applied to every name of the
            checkpoint before matching (HF's optional `bert.` prefix, old
            LayerNorm `gamma`/`beta`); two names renamed alike are an error.
        may_be_absent: regexes of table names a checkpoint may lack (HF's
            RoBERTa task models are saved without the pooler): their
            variables keep their values and are listed in
            `LoadReport.missing_heads`, as HF re-initialises them.
    """

    entries: tuple
    repeat: Optional[Callable] = None
    encoder_prefixes: tuple = ()
    head_prefixes: tuple = ()
    ignore: tuple = ()
    aliases: dict = dataclasses.field(default_factory=dict)
    tied: tuple = ()
    rename: Optional[Callable] = None
    may_be_absent: tuple = ()

    def rows(self, encoder):
        """The concrete rows for `encoder`: templates expanded, fused groups checked."""
        repeats = None
        rows = []
        for entry in self.entries:
            fields = _fields(entry.name) | _fields(entry.getter)
            if not fields:
                rows.append(entry)
                continue
            if repeats is None:
                if self.repeat is None:
                    raise ValueError(f"Name table entry {entry.name!r} has placeholders "
                                     f"{sorted(fields)} but the table has no `repeat`.")
                repeats = list(self.repeat(encoder))
            for values in repeats:
                try:
                    rows.append(entry._replace(name=entry.name.format(**values),
                                               getter=entry.getter.format(**values)))
                except KeyError as e:
                    raise ValueError(f"Name table entry {entry.name!r} uses {{{e.args[0]}}}, "
                                     f"which `repeat` does not provide ({sorted(values)}).") from e
        _check_shared_names(rows)
        return rows

    def __call__(self, encoder):
        return self.rows(encoder)


def _check_shared_names(rows):
    """Rows sharing a stored name must be the complete parts of one Split."""
    by_name = collections.defaultdict(list)
    for entry in rows:
        by_name[entry.name].append(entry.transform)
    for name, transforms in by_name.items():
        if len(transforms) == 1 and not isinstance(transforms[0], Split):
            continue
        first = transforms[0]
        if not (isinstance(first, Split) and all(first.same_split(t) for t in transforms)
                and sorted(t.part for t in transforms) == list(range(first.parts))):
            raise ValueError(
                f"Name table: the rows of {name!r} must be parts 0..n-1 of one Split "
                f"(same parts and axis); got {transforms}.")


_STEP = re.compile(r"^(\w+)(?:\[(\d+)\])?$")


def resolve_getter(roots, getter, optional=False):
    """Follows `root.attr[i].attr...` to the Keras variable.

    Returns None when `optional` and a step reaches None.
    """
    parts = getter.split(".")
    obj = roots[parts[0]]
    for part in parts[1:]:
        match = _STEP.match(part)
        if match is None:
            raise ValueError(f"Name table getter {getter!r}: bad step {part!r}.")
        if obj is None and optional:
            return None
        if not hasattr(obj, match.group(1)):
            raise AttributeError(f"Name table getter {getter!r}: {type(obj).__name__} "
                                 f"has no attribute {match.group(1)!r}.")
        obj = getattr(obj, match.group(1))
        if match.group(2) is not None and obj is not None:
            obj = obj[int(match.group(2))]
    if obj is None and optional:
        return None
    if not isinstance(obj, keras.Variable):
        raise TypeError(
            f"{getter} is a {type(obj).__name__}, not a Keras variable "
            "(LoRA or quantisation enabled?); it cannot be loaded or saved."
        )
    return obj


def table_for(target, key, description):
    """`target.family`'s table for format `key`; a one-line error if it has none."""
    tables = target.family.name_tables
    if key not in tables:
        raise CheckpointFormatError(
            f"{description} cannot be read into {target.description}: the "
            f"{target.family.name} family has no {key!r} name table (it has: "
            f"{', '.join(sorted(tables)) or 'none'})."
        )
    return tables[key]


# ------------------------------------------------------------------ sources


class _Renamed:
    """A source seen through a table's `rename`."""

    def __init__(self, source, rename):
        self.description = source.description
        self._source = source
        self._map = {}
        for raw in source.names():
            name = rename(raw)
            if name in self._map:
                raise CheckpointFormatError(
                    f"{source.description}: {raw!r} and {self._map[name]!r} both "
                    f"stand for {name!r}.")
            self._map[name] = raw

    def names(self):
        return list(self._map)

    def shape(self, name):
        return self._source.shape(self._map[name])

    def read(self, name):
        return self._source.read(self._map[name])


def _reason(name, patterns):
    for pattern, reason in patterns:
        if re.search(pattern, name):
            return reason
    return None


# ----------------------------------------------------------------- matching


def load_by_table(target, source, table, fmt, path, allow_missing_heads=False, skip=()):
    """Matches `source` against `table` for `target`; checks all, then assigns all.

    The policy:

    * Every row whose root the model has must find its stored tensor, with
      the row's stored shape. A missing head row (a root other than
      `encoder`) is tolerated with `allow_missing_heads` and listed in
      `LoadReport.missing_heads`.
    * Stored tensors of rows whose root the model lacks are skipped ("head
      not in the model").
    * Unused stored names: `skip` (the format's, e.g. TF1 optimizer slots)
      and `table.ignore` patterns are skipped with their reason; names under
      `table.encoder_prefixes` are unexpected (an error); under
      `table.head_prefixes` unexpected for a pretrainer, skipped otherwise;
      anything else is skipped as not the family's (a task head).
    * Any problem raises ONE `CheckpointMismatchError` before a variable is
      touched: a failed load leaves the model as it was.

    Args:
        target: a `targets.Target`.
        source: an object with `description`, `names()`, `shape(name)` and
            `read(name) -> np.ndarray`.
        table: a `NameTable`.
        fmt: the format's name for the report ("google_tf1", ...).
        path: the checkpoint path for the report.
        allow_missing_heads: see above.
        skip: `(regex, reason)` pairs of the format.

    Returns:
        A `LoadReport`.
    """
    if table.rename is not None:
        source = _Renamed(source, table.rename)
    available = set(source.names())
    used = set()
    plan, missing_heads, conflicts = [], [], []
    missing, mismatched = {}, {}
    heads_missing = False
    report = LoadReport(path=path, format=fmt, target=target.description)

    def mark_used(names, reason=None):
        for name in names:
            if name not in used:
                used.add(name)
                if reason:
                    report.skipped.append((name, reason))

    for entry in table.rows(target.encoder):
        root = entry.getter.split(".")[0]
        candidates = (entry.name,) + tuple(table.aliases.get(entry.name, ()))
        present = [c for c in candidates if c in available]
        if root not in target.roots:
            mark_used(present, "head not in the model")
            continue
        variable = resolve_getter(target.roots, entry.getter, entry.optional)
        if variable is None:
            continue  # An optional weight this model does not have.
        expected = entry.transform.stored_shape(variable.shape)
        if not present:
            if (root != "encoder" and allow_missing_heads) or any(
                    re.search(pattern, entry.name) for pattern in table.may_be_absent):
                if entry.name not in missing_heads:
                    missing_heads.append(entry.name)
            else:
                missing.setdefault(entry.name, (entry.name, expected))
                heads_missing |= root != "encoder"
            continue
        mark_used(present[:1])
        mark_used(present[1:], f"alias of {present[0]}")
        stored = source.shape(present[0])
        if stored != expected:
            mismatched.setdefault(present[0], (present[0], stored, expected))
            continue
        if len(present) > 1 and not np.array_equal(source.read(present[0]),
                                                   source.read(present[1])):
            conflicts.append((present[1], f"differs from {present[0]}"))
            continue
        plan.append((present[0], variable, entry.transform))

    for tied in table.tied:
        if tied.name not in available:
            continue
        used.add(tied.name)
        if tied.root in target.roots and tied.tied_to in available:
            if source.shape(tied.name) != source.shape(tied.tied_to) or not np.array_equal(
                    source.read(tied.name), source.read(tied.tied_to)):
                conflicts.append((tied.name, f"is not tied to {tied.tied_to}; in this "
                                             "model they are one variable"))
                continue
        report.skipped.append((tied.name, f"tied to {tied.tied_to}"))

    unexpected = []
    for name in sorted(available - used):
        reason = _reason(name, tuple(skip) + tuple(table.ignore))
        if reason:
            report.skipped.append((name, reason))
        elif name.startswith(tuple(table.encoder_prefixes)):
            unexpected.append((name, source.shape(name)))
        elif name.startswith(tuple(table.head_prefixes)):
            if target.has_heads:
                unexpected.append((name, source.shape(name)))
            else:
                report.skipped.append((name, "head not in the model"))
        else:
            report.skipped.append((name, f"not a {target.family.name} variable (task head?)"))

    if missing or unexpected or mismatched or conflicts:
        hint = None
        if heads_missing:
            hint = ("The checkpoint has no pre-training heads; pass "
                    "allow_missing_heads=True to keep them initialised.")
        raise CheckpointMismatchError(source.description, target.description,
                                      list(missing.values()), unexpected,
                                      list(mismatched.values()), conflicts, hint)

    remaining = collections.Counter(name for name, _, _ in plan)
    cache = {}
    for name, variable, transform in plan:
        if name not in cache:
            cache[name] = source.read(name)  # A fused tensor is read once.
        assign(variable, transform.to_model(cache[name]))
        remaining[name] -= 1
        if not remaining[name]:
            del cache[name]
            report.loaded.append(name)
    report.missing_heads = missing_heads
    return report


def table_arrays(target, table):
    """`{stored name: array}` of `target`'s variables under `table`'s names.

    In table order, in the stored layout (each transform's `from_model`);
    the parts of a fused tensor are concatenated in part order. Rows whose
    root the model lacks, and optional rows the model does not have, are
    left out.
    """
    arrays, parts = {}, {}
    for entry in table.rows(target.encoder):
        if entry.getter.split(".")[0] not in target.roots:
            continue
        variable = resolve_getter(target.roots, entry.getter, entry.optional)
        if variable is None:
            continue
        value = entry.transform.from_model(np.asarray(variable.numpy()))
        if isinstance(entry.transform, Split):
            arrays.setdefault(entry.name, None)  # Keeps the table order.
            parts.setdefault(entry.name, {})[entry.transform.part] = (entry.transform, value)
        else:
            arrays[entry.name] = value
    for name, blocks in parts.items():
        split = next(iter(blocks.values()))[0]
        if len(blocks) != split.parts:
            raise ValueError(f"{name}: the model has parts {sorted(blocks)} of "
                             f"{split.parts} only; the fused tensor cannot be written.")
        arrays[name] = split.join([blocks[i][1] for i in range(split.parts)])
    return arrays
