"""The installable package: dependencies declared, Beam's --setup_file, console commands, no import side effects."""

import os
import subprocess
import sys
import tarfile
import tomllib

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_importing_the_runtime_changes_nothing_in_the_process():
    code = ("import os, signal, sys; before = dict(os.environ); "
            "from modeling.cli import runtime, entry; "
            "assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, 'SIGTERM handler'; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; "
            "assert dict(os.environ) == before, 'environment changed'; "
            "runtime.start(); "
            "assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL; "
            "assert 'tensorflow' in sys.modules; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_the_library_imports_only_declared_distributions():
    declared = {spec.split("=")[0].split("[")[0].strip().lower()
                for spec in _pyproject()["project"]["dependencies"]}
    # Top-level modules of third-party imports in data/ and modeling/ -> distribution.
    provided_by = {"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text",
                   "safetensors": "safetensors", "absl": "absl-py", "jieba": "jieba",
                   "regex": "regex", "tokenizers": "tokenizers", "google": "protobuf",
                   "sentencepiece": "sentencepiece", "numba": "numba",
                   "google_crc32c": "google-crc32c", "matplotlib": "matplotlib",
                   "tensorboard": "tensorboard", "keras_hub": "keras-hub",
                   "sacrebleu": "sacrebleu",
                   # Installed with tensorflow (its own requirements).
                   "keras": "tensorflow", "numpy": "tensorflow", "h5py": "tensorflow",
                   "PIL": "matplotlib",  # pillow, matplotlib's own requirement
                   # Optional: imported only by the paths that need them, named in the extras.
                   "apache_beam": "apache-beam", "transformers": "transformers",
                   "torch": "torch"}
    # Used when present, with a fallback when not (compression: TensorFlow's own interpreter).
    optional_with_fallback = {"ai_edge_litert"}
    extras = {spec.split("=")[0].strip().lower()
              for specs in _pyproject()["project"]["optional-dependencies"].values()
              for spec in specs}
    import ast  # pylint: disable=import-outside-toplevel
    stdlib = set(sys.stdlib_module_names)
    unknown = {}
    for package in ("data", "modeling"):
        for directory, _, files in os.walk(os.path.join(REPO_ROOT, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        tops = [alias.name.split(".")[0] for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        tops = [node.module.split(".")[0]]
                    else:
                        continue
                    for top in tops:
                        if top in stdlib or top in ("data", "modeling") or \
                                top in optional_with_fallback:
                            continue
                        dist = provided_by.get(top)
                        if dist is None or (dist not in declared and dist not in extras):
                            unknown.setdefault(top, os.path.relpath(path, REPO_ROOT))
    assert not unknown, "imports with no declared distribution: %s" % unknown
    for required in ("tensorflow", "tensorflow-text", "absl-py", "safetensors", "keras-hub"):
        assert required in declared


def test_beam_setup_file_builds_an_sdist_with_the_library_and_its_dependencies(tmp_path):
    """What Beam's stager does with --setup_file=./pyproject.toml for remote workers."""
    stager = pytest.importorskip("apache_beam.runners.portability.stager")
    tarball = stager.Stager._build_setup_package(  # pylint: disable=protected-access
        os.path.join(REPO_ROOT, "pyproject.toml"), str(tmp_path), None)
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        info_name = next(n for n in names if n.endswith("/PKG-INFO") and n.count("/") == 1)
        info = archive.extractfile(info_name).read().decode("utf-8")
    root = names[0].split("/")[0]
    for relative in ("modeling/registry.py", "modeling/cli/runtime.py",
                     "data/pretraining/beam_pipeline.py", "data/sample/sample_en.txt",
                     "modeling/recipes/presets/bert.json"):
        assert "%s/%s" % (root, relative) in names, relative
    assert "Requires-Dist: tensorflow==2.21.0" in info
    assert "Requires-Dist: tensorflow-text==2.21.1" in info


def test_console_commands_run_the_scripts():
    scripts = _pyproject()["project"]["scripts"]
    assert scripts["bert-run-classifier"] == "modeling.cli.entry:run_classifier"
    for command, target in scripts.items():
        name = target.split(":")[1]
        assert command == "bert-" + name.replace("_", "-")
        assert os.path.isfile(os.path.join(REPO_ROOT, "run", name + ".py")), name
    command = os.path.join(os.path.dirname(sys.executable), "bert-run-ner")
    argv = [command] if os.path.exists(command) else [
        sys.executable, "-c", "from modeling.cli import entry; entry.run_ner()"]
    result = subprocess.run(argv + ["--do_train", "--output_dir=/nonexistent/x"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    # The script itself answered: its own one-line error for the missing flags.
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == \
        "run_ner: error: --bert_config_file is required."
