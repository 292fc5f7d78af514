"""Job fields as command-line flags: a field's name, default and help are said once.

A job dataclass declares each of its settings with `option`::

    @dataclasses.dataclass
    class NerJob(settings.TrainerSettings):
        tagging_scheme: str = option("bio", "Tag scheme of the files: bio or bioes.",
                                     choices=("bio", "bioes"))
        use_crf: bool = option(False, "Score and decode with a linear-chain CRF.")

and its run script derives the flags from the class::

    options.define_flags(ner_job.NerJob)
    def main(_):
        ner_job.run(options.job_from_flags(ner_job.NerJob))

A flag gets the field's name, default and help; its kind comes from the
field's annotation (``bool``, ``int``, ``float``, ``str``, ``List[str]``, each
also as ``Optional[...]``; anything else is a string flag), ``choices`` make a
string an enum, ``lower_bound`` / ``upper_bound`` bound a number, ``aliases``
add other names for the same flag (Google's ``--iterations_per_loop``,
``--tpu_name``), ``check=(predicate, message)`` adds a validator, and
``flag=False`` keeps a field off the command line (a Python-only setting).
A subclass that does not offer some inherited fields on its command line
names them in ``CLI_EXCLUDE``.

Because the flag is made from the field, the two cannot drift apart: a
library call with no arguments and a script with no flags run the same job.
This module is the only one in the library that knows absl's flags, and it
takes the `FlagValues` to use as an argument (the global ``flags.FLAGS`` by
default), so library code still never reads flags.
"""

import dataclasses
import sys
import typing
from typing import Any, List, Optional, Union

from absl import flags

# Declared in data/ so that every layer's settings can use it; re-exported here.
from data.options import option  # pylint: disable=unused-import
from data.options import option_from  # pylint: disable=unused-import

__all__ = ["FlagSpec", "define_flags", "flag_specs", "job_from_flags", "option",
           "option_from", "present_values"]

_KEYS = ("help", "choices", "lower_bound", "upper_bound", "aliases", "check", "flag", "multi")


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """What one field's flag is: name, kind, default, help and its constraints."""

    name: str
    kind: str  # "bool", "integer", "float", "string", "enum", "list", "multi_string"
    default: Any
    help: str
    choices: Optional[tuple] = None
    lower_bound: Any = None
    upper_bound: Any = None
    aliases: tuple = ()
    check: Any = None


def _unwrap_optional(annotation):
    if typing.get_origin(annotation) is Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _kind(annotation, meta):
    annotation = _unwrap_optional(annotation)
    origin = typing.get_origin(annotation)
    if meta.get("multi"):
        return "multi_string"
    if meta.get("choices") is not None:
        return "enum"
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "integer"
    if annotation is float:
        return "float"
    if origin in (list, List, tuple):
        return "list"
    return "string"


def _default(field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise TypeError("%s has no default; a flag needs one" % field.name)


def flag_specs(job_class, exclude=()):
    """The `FlagSpec` of every field of `job_class` that is a flag, in field order."""
    hints = typing.get_type_hints(job_class)
    skipped = set(exclude) | set(getattr(job_class, "CLI_EXCLUDE", ()))
    specs = []
    for field in dataclasses.fields(job_class):
        meta = dict(field.metadata)
        if field.name in skipped or not meta.get("flag", True):
            continue
        choices = meta.get("choices")
        if callable(choices):
            choices = choices()
        if not meta.get("help"):
            raise TypeError("%s.%s has no help text: declare it with options.option(default, "
                            "help)" % (job_class.__name__, field.name))
        specs.append(FlagSpec(
            name=field.name, kind=_kind(hints.get(field.name, str), meta),
            default=_default(field), help=meta["help"],
            choices=tuple(choices) if choices is not None else None,
            lower_bound=meta.get("lower_bound"), upper_bound=meta.get("upper_bound"),
            aliases=tuple(meta.get("aliases") or ()), check=meta.get("check")))
    return specs


def _define(spec, flag_values, module_name):
    common = {"flag_values": flag_values, "module_name": module_name}
    if spec.kind == "bool":
        flags.DEFINE_bool(spec.name, spec.default, spec.help, **common)
    elif spec.kind in ("integer", "float"):
        define = flags.DEFINE_integer if spec.kind == "integer" else flags.DEFINE_float
        define(spec.name, spec.default, spec.help, lower_bound=spec.lower_bound,
               upper_bound=spec.upper_bound, **common)
    elif spec.kind == "enum":
        flags.DEFINE_enum(spec.name, spec.default, list(spec.choices), spec.help, **common)
    elif spec.kind == "list":
        default = None if spec.default is None else list(spec.default)
        flags.DEFINE_list(spec.name, default, spec.help, **common)
    elif spec.kind == "multi_string":
        flags.DEFINE_multi_string(spec.name, list(spec.default or []), spec.help, **common)
    else:
        flags.DEFINE_string(spec.name, spec.default, spec.help, **common)
    for alias in spec.aliases:
        flags.DEFINE_alias(alias, spec.name, flag_values=flag_values, module_name=module_name)
    if spec.check is not None:
        predicate, message = spec.check
        flags.register_validator(spec.name, predicate, message=message,
                                 flag_values=flag_values)


def define_flags(job_class, flag_values=None, exclude=(), module_name=None):
    """Defines a flag for every field of `job_class` (skipping `exclude` and flags already there).

    A flag that `flag_values` already holds (a script's own definition, or
    the same field of another job the script also runs) is left as it is.
    Returns the names of the flags defined.
    """
    flag_values = flags.FLAGS if flag_values is None else flag_values
    module_name = module_name or _caller_module()
    defined = []
    for spec in flag_specs(job_class, exclude):
        if spec.name in flag_values:
            continue
        _define(spec, flag_values, module_name)
        defined.append(spec.name)
    return defined


def _caller_module():
    # absl files a flag under the module that defined it (`--helpshort` lists
    # the main module's flags): the first caller outside the flag helpers,
    # named as absl names a script (its path) when it is __main__.
    frame = sys._getframe(1)  # pylint: disable=protected-access
    while frame is not None and frame.f_globals.get("__name__") in _HELPER_MODULES:
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "__main__") if frame is not None else "__main__"
    return sys.argv[0] if name == "__main__" else name


# Modules that define flags on their callers' behalf.
_HELPER_MODULES = {__name__, "common_flags"}


def job_from_flags(job_class, flag_values=None, **overrides):
    """A `job_class` whose fields take the values of the same-named flags (or `overrides`)."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    values = {}
    for field in dataclasses.fields(job_class):
        if not field.init:
            continue
        if field.name in overrides:
            values[field.name] = overrides[field.name]
        elif field.name in flag_values:
            value = flag_values[field.name].value
            if isinstance(_default_or_none(field), tuple) and isinstance(value, list):
                value = tuple(value)
            values[field.name] = value
    return job_class(**values)


def _default_or_none(field):
    try:
        return _default(field)
    except TypeError:
        return None


def present_values(job_class, flag_values=None):
    """{field: value} of the `job_class` fields whose flags were given on the command line."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    return {field.name: flag_values[field.name].value for field in dataclasses.fields(job_class)
            if field.name in flag_values and flag_values[field.name].present}
