"""Console entry points: ``bert-run-classifier --task_name=MRPC ...`` runs ``run/run_classifier.py``.

`pyproject.toml` declares one command per main script (``bert-<script name
with dashes>``); each starts the script as ``python run/<script>.py`` would:
same arguments, ``__main__``, its folder first on ``sys.path`` (the scripts
import their neighbours ``script`` and ``common_flags``). The scripts are
the source tree's ``run/`` files, so the commands work where the project is
installed from its source tree (the README's editable install, ``pip install
-e .``); a wheel holds the library only (`data`, `modeling`), which is what a
Beam worker needs.
"""

import os
import runpy
import sys

__all__ = ["SCRIPTS", "main", "script_path"]

# The commands pyproject.toml declares: bert-<name with dashes>.
SCRIPTS = (
    "create_pretraining_data", "create_vocab", "run_pretraining", "run_classifier",
    "run_squad", "run_ner", "run_siamese", "run_multitask", "run_distillation",
    "extract_features", "predict_masked", "generate", "analyze_attention", "prune_heads",
    "convert_checkpoint",
)

_SOURCE_RUN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "run")


def script_path(name):
    """The file of script `name` (``run_classifier``); FileNotFoundError naming where it looked."""
    path = os.path.join(_SOURCE_RUN_DIR, name + ".py")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            "bert-%s: %s not found: the commands run the scripts of the source tree; install "
            "the project from it (pip install -e .)" % (name.replace("_", "-"), path))
    return path


def main(name, argv=None):
    """Runs script `name` as ``python run/<name>.py argv...`` would."""
    path = script_path(name)
    sys.argv = [path] + list(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")


def _command(name):
    def command():
        main(name)
    command.__name__ = name
    command.__doc__ = "The ``bert-%s`` command: ``python run/%s.py``." % (
        name.replace("_", "-"), name)
    return command


for _name in SCRIPTS:
    globals()[_name] = _command(_name)
