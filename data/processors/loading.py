"""Processors by name, and user processors loaded from the user's own file.

`get_processor_class("mrpc")` for the built-in tasks (and GLUE's folder
names, e.g. "SST-2"); `register_processor(name, cls)` adds one; and
`get_processor_class(processor="path/to/my_task.py:MyProcessor")` loads a
processor from a file anywhere, so a user's task needs no change to this
project. A file that fails to import is reported with its file and line.
"""

import importlib
import os
import traceback

from data import user_files
from data.processors.base import ProcessorError
from data.processors.choice import ArctProcessor, MultipleChoiceProcessor, SwagProcessor
from data.processors.generic import GenericProcessor
from data.processors.glue import (ColaProcessor, MnliMismatchedProcessor, MnliProcessor,
                                  MrpcProcessor, QqpProcessor, Sst2Processor, StsbProcessor,
                                  XnliProcessor)
from data.processors.ids import IdsProcessor

__all__ = ["PROCESSORS", "register_processor", "load_processor_class", "get_processor_class"]

PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli_mismatched": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst2": Sst2Processor,
    "qqp": QqpProcessor,
    "stsb": StsbProcessor,
    "generic": GenericProcessor,
    "ids": IdsProcessor,
    "multiple_choice": MultipleChoiceProcessor,
    "arct": ArctProcessor,
    "swag": SwagProcessor,
}
# GLUE's folder names.
_ALIASES = {"sst-2": "sst2", "sts-b": "stsb", "mnli-mm": "mnli_mismatched"}


def register_processor(name, processor_class):
    """Makes `processor_class` available as `--task_name=<name>`."""
    PROCESSORS[name.lower()] = processor_class


def _is_processor_class(value):
    return isinstance(value, type) and all(
        callable(getattr(value, method, None))
        for method in ("get_train_examples", "get_dev_examples", "get_test_examples",
                       "get_labels"))


def load_processor_class(spec):
    """Loads a processor class from ``path/to/file.py:ClassName`` or ``package.module:ClassName``.

    A file is loaded from its path (`data.user_files.import_file`), so it can
    live anywhere; it may import this project (``from data import
    processors``). The class needs the DataProcessor methods; subclassing
    `DataProcessor` gives it the defaults (`task_type`, `eval_metrics`).

    Raises:
      ProcessorError: the spec is malformed, the file or class does not
        exist, or the file fails to import (with the file and line).
    """
    if ":" not in spec:
        raise ProcessorError("--processor=%r: expected path/to/file.py:ClassName "
                             "(or package.module:ClassName)." % spec)
    location, _, class_name = spec.rpartition(":")
    if not location or not class_name:
        raise ProcessorError("--processor=%r: expected path/to/file.py:ClassName." % spec)
    is_file = location.endswith(".py") or os.sep in location or "/" in location
    try:
        if is_file:
            path = os.path.abspath(os.path.expanduser(location))
            if not os.path.isfile(path):
                raise ProcessorError("Processor file %s does not exist." % location)
            module_name = "user_processor_%s_%x" % (
                os.path.splitext(os.path.basename(path))[0], abs(hash(path)))
            module = user_files.import_file(path, module_name)
        else:
            module = importlib.import_module(location)
    except ProcessorError:
        raise
    except Exception as e:  # pylint: disable=broad-except
        where = location
        if isinstance(e, SyntaxError) and e.lineno:
            where = "%s:%d" % (e.filename or location, e.lineno)
        else:
            frames = traceback.extract_tb(e.__traceback__)
            own = [f for f in frames if is_file and os.path.abspath(f.filename) == path]
            frames = own or [f for f in frames if not f.filename.startswith("<")]
            if frames:
                where = "%s:%d" % (frames[-1].filename, frames[-1].lineno)
        raise ProcessorError("Could not load the processor module %s (%s): %s: %s"
                             % (location, where, type(e).__name__, e)) from e
    value = getattr(module, class_name, None)
    if value is None:
        candidates = sorted(name for name, obj in vars(module).items()
                            if _is_processor_class(obj) and obj.__module__ == module.__name__)
        raise ProcessorError("%s defines no %r; processor classes defined there: %s."
                             % (location, class_name, ", ".join(candidates) or "none"))
    if not _is_processor_class(value):
        raise ProcessorError("%s:%s is not a DataProcessor (it needs get_train_examples, "
                             "get_dev_examples, get_test_examples and get_labels)."
                             % (location, class_name))
    return value


def get_processor_class(task_name=None, processor=None):
    """The processor class for `--processor=file.py:Class` or else `--task_name`."""
    if processor:
        return load_processor_class(processor)
    if not task_name:
        raise ProcessorError("Give --task_name (one of %s) or --processor=path/to/file.py:Class."
                             % ", ".join(sorted(PROCESSORS)))
    key = task_name.lower()
    key = _ALIASES.get(key, key)
    if key not in PROCESSORS:
        raise ProcessorError("Task not found: %s (known tasks: %s; or use "
                             "--processor=path/to/file.py:Class)."
                             % (task_name, ", ".join(sorted(PROCESSORS))))
    return PROCESSORS[key]
