"""`option`: a dataclass field declared once with its help text, for the library and its flags.

A library call's settings are a dataclass whose fields say their default
and their help::

    @dataclasses.dataclass
    class VocabSettings:
        vocab_size: int = option(8000, "Target vocabulary size, reserved tokens included.")

and a script derives its command line from them
(`modeling.training.options.define_flags`, `run/common_flags.py`). The
declaration is plain Python (the field's metadata), so every layer can use
it, `data/` included; only `modeling.training.options` knows absl's flags.
"""

import dataclasses

__all__ = ["option", "option_from"]


def option(default=None, help="", *, choices=None, lower_bound=None, upper_bound=None,
           aliases=(), check=None, flag=True, multi=False, default_factory=None):
    """A dataclass field that is also a command-line flag (`modeling.training.options`).

    Args:
        default: the field's and the flag's default.
        help: the flag's help text (required for a flag).
        choices: allowed values of a string field (a sequence, or a callable
            returning one when the flags are defined: a registry's names).
        lower_bound, upper_bound: bounds of a number field's flag.
        aliases: other flag names for the same field.
        check: ``(predicate, message)``: a flag validator.
        flag: False keeps the field off the command line.
        multi: a repeatable string flag (``List[str]``; ``--text=a --text=b``).
        default_factory: for a mutable default (the flag's default is its value).
    """
    metadata = {"help": help, "choices": choices, "lower_bound": lower_bound,
                "upper_bound": upper_bound, "aliases": tuple(aliases), "check": check,
                "flag": flag, "multi": multi}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_SAME = object()


def option_from(settings_class, name, default=_SAME):
    """`settings_class`'s field `name` (its help, kind and constraints), for another class.

    With `default`, the field with another default: for a job that composes a
    shared group of fields but whose flag has its own default (SQuAD's
    ``--max_seq_length=384``)::

        max_seq_length: int = option_from(TextSettings, "max_seq_length", 384)
    """
    field, = [f for f in dataclasses.fields(settings_class) if f.name == name]
    if default is _SAME:
        if field.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=field.default_factory,
                                     metadata=field.metadata)
        default = field.default
    return dataclasses.field(default=default, metadata=field.metadata)
