"""A Python file of the user's, imported from its path (`--processor`, `--recipe_module`)."""

import importlib.util
import sys

__all__ = ["import_file"]


def import_file(path, module_name):
    """Imports the Python file `path` as module `module_name` (in `sys.modules`).

    A file that fails to import leaves no half-made module behind: the error
    propagates and `module_name` is removed from `sys.modules` again.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
