"""What a checkpoint load reports: a `LoadReport`, or one error listing everything.

These live apart from `modeling.checkpoints/__init__` (which re-exports them)
because every format module raises and returns them, and the package's
`__init__` imports the format modules: keeping them here avoids an import
cycle inside the package.

Two kinds of failure, two exceptions, both `ValueError`s:

* `CheckpointMismatchError`: the checkpoint is of a format this model reads,
  but its content does not fit (missing, unexpected, mis-shaped or
  conflicting variables). It lists every problem at once, so that one run
  tells the user everything that is wrong.
* `CheckpointFormatError`: the checkpoint cannot be read into this model at
  all (a PyTorch pickle, a format the model's family has no names for, an
  unreadable file). One line naming the file and what was expected.
"""

import collections
import dataclasses

__all__ = ["CheckpointFormatError", "CheckpointMismatchError", "LoadReport"]


class CheckpointFormatError(ValueError):
    """A checkpoint this model cannot read at all (wrong or refused format)."""


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model; lists every problem at once.

    Attributes:
        missing: `(name, expected_shape)` the model needs and the checkpoint
            lacks.
        unexpected: `(name, shape)` in the family's namespaces of the
            checkpoint with no place in the model.
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
        loaded: checkpoint names copied into the model (a fused tensor that
            fills several variables is listed once).
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
