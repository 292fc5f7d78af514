"""The JSON file side of the word-level families' configs (ELMo, ULMFiT, CoVe).

A config class defines `from_dict`/`to_dict` and its checks; `JsonConfig`
adds what every such class needs around a file: writing it atomically,
reading it with one-line errors that name the file, equality and a
readable repr, and `load` of a file or of a model folder holding the
family's file name.
"""

import difflib
import json
import os

from data import atomic

__all__ = ["JsonConfig", "check_int"]


def check_int(name, value, minimum, error):
    """`value` as an int: a whole number (not a bool) of at least `minimum`, else
    `error`, one line naming the field, `minimum` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()) or value < minimum:
        raise error("`%s` must be an integer >= %d, got %r" % (name, minimum, value))
    return int(value)


class JsonConfig:
    """Mixin: set `KIND` ("ELMo options"), `ERROR` (the family's error class), `FILE_NAME`."""

    KIND = "config"
    ERROR = ValueError
    FILE_NAME = "config.json"

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the file atomically (a temporary file renamed over `path`)."""
        atomic.write_text(path, self.to_json_string())

    @classmethod
    def from_json_file(cls, path):
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError("%s file not found: %s" % (cls.KIND, path))
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except (OSError, ValueError) as e:
            raise cls.ERROR("%s file %s is not valid JSON: %s" % (cls.KIND, path, e)) from None
        try:
            return cls.from_dict(values)
        except (cls.ERROR, TypeError) as e:
            raise cls.ERROR("Invalid %s file %s: %s" % (cls.KIND, path, e)) from None

    @classmethod
    def check_object(cls, values, known, required=(), article="a"):
        """`from_dict`'s first checks: `values` is a JSON object, each key is one of `known`
        (the first that is not is named, with the closest known key) and the `required` keys
        are there; else `ERROR` (``a <KIND> must be a JSON object, ...``)."""
        if not isinstance(values, dict):
            raise cls.ERROR("%s %s must be a JSON object, got %s"
                            % (article, cls.KIND, type(values).__name__))
        for key in values:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                raise cls.ERROR("unknown %s key `%s`%s; known: %s" % (
                    cls.KIND, key, " (did you mean `%s`?)" % close[0] if close else "",
                    ", ".join(known)))
        for key in required:
            if key not in values:
                raise cls.ERROR("missing %s key `%s`" % (cls.KIND, key))

    @classmethod
    def load(cls, path):
        """Reads a config file, or `FILE_NAME` in a model folder."""
        path = os.fspath(path)
        if os.path.isdir(path):
            candidate = os.path.join(path, cls.FILE_NAME)
            if not os.path.isfile(candidate):
                raise FileNotFoundError("No %s in directory %s" % (cls.FILE_NAME, path))
            path = candidate
        return cls.from_json_file(path)

    def __eq__(self, other):
        if not isinstance(other, type(self)):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, json.dumps(self.to_dict(), sort_keys=True))
