"""The documentation: README.md is the landing page, docs/ a MkDocs site.

* the site builds with ``mkdocs build --strict`` (no broken link or anchor, no page
  left out of the navigation) and every page of docs/ is in mkdocs.yml's nav;
* README.md stays a landing page (at most 15 KB) whose first two ```bash blocks are
  the set-up commands: the main job's, and the test command CI runs (.ci/run);
* the commands are exercised against the scripts: every ``run/<script>.py`` the README
  or a page names exists, and every ``python run/X.py ...`` command passes only flags
  that X defines (what ``X --helpfull`` lists, absl's own flags included);
* the Python examples import what the library has and call it with parameters it
  takes (imports and attribute look-ups only: nothing is run).
"""

import ast
import concurrent.futures
import dataclasses
import functools
import importlib
import inspect
import os
import re
import subprocess
import sys

import pytest
import yaml

import script_runner

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(REPO_ROOT, "docs")
README = os.path.join(REPO_ROOT, "README.md")
README_MAX_BYTES = 15 * 1024
MAIN_JOB_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && "
                    ".venv/bin/python run/run_pretraining.py")
# Flags absl handles itself before any definition is looked up.
ABSL_SPECIAL_FLAGS = {"flagfile", "undefok"}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _pages():
    """Every Markdown page under docs/, as a path relative to docs/."""
    pages = []
    for folder, _, files in os.walk(DOCS):
        for name in files:
            if name.endswith(".md"):
                pages.append(os.path.relpath(os.path.join(folder, name), DOCS).replace(os.sep, "/"))
    return sorted(pages)


def _documents():
    """(name shown in failures, text) of README.md and every page."""
    return [("README.md", _read(README))] + [
        ("docs/" + page, _read(os.path.join(DOCS, page))) for page in _pages()]


def _nav_pages(entries):
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                if isinstance(value, str):
                    yield value
                else:
                    yield from _nav_pages(value)
        else:
            yield from _nav_pages(entry)


def test_site_builds_in_strict_mode(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert os.path.isfile(tmp_path / "site" / "index.html")
    assert os.path.isfile(tmp_path / "site" / "benchmarks" / "index.html")
    # The README is outside the site: its links into docs/ are checked here, against
    # the pages and the headings' anchors of the built site.
    broken = []
    for target, anchor in re.findall(r"\]\(docs/([^)#\s]+)(?:#([^)\s]+))?\)", _read(README)):
        if not os.path.isfile(os.path.join(DOCS, target)):
            broken.append(target)
        elif anchor:
            page = re.sub(r"(index)?\.md$", "", target)
            built = _read(os.path.join(tmp_path, "site", page, "index.html"))
            if 'id="%s"' % anchor not in built:
                broken.append("%s#%s" % (target, anchor))
    assert not broken, "README.md links to what docs/ does not have: %s" % broken


def test_every_page_is_in_the_nav():
    with open(os.path.join(REPO_ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    assert config["docs_dir"] == "docs"
    nav = list(_nav_pages(config["nav"]))
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert sorted(nav) == _pages()
    # Nothing but pages and their pictures in the site's sources (scripts live in tools/).
    for folder, _, files in os.walk(DOCS):
        for name in files:
            assert name.endswith((".md", ".png")), os.path.join(folder, name)


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_readme_is_a_landing_page_with_the_two_commands():
    with open(README, "rb") as f:
        size = len(f.read())
    assert size <= README_MAX_BYTES, "README.md is %d bytes (at most %d)" % (size, README_MAX_BYTES)
    with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci_lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    test_command = ci_lines[-1]  # .ci/run's last line: the test command
    blocks = _bash_blocks(_read(README))
    assert blocks[0] == MAIN_JOB_COMMAND + "\n"
    assert blocks[1] == test_command + "\n"
    # The docs' overview shows the same two commands.
    assert _bash_blocks(_read(os.path.join(DOCS, "index.md")))[:2] == blocks[:2]


def test_every_script_a_page_names_exists():
    missing = []
    for name, text in _documents():
        for number, line in enumerate(text.split("\n"), 1):
            for script in re.findall(r"(?<![\w./-])run/(\w+)\.py", line):
                if not os.path.isfile(os.path.join(REPO_ROOT, "run", script + ".py")):
                    missing.append("%s:%d: run/%s.py" % (name, number, script))
    assert not missing, "scripts that do not exist:\n" + "\n".join(missing)


def _commands(text):
    """(line number, script, flags) of every `python run/X.py ...` command in `text`.

    A command runs to the end of its line, across `\\` continuations, and stops at a
    closing backtick (inline code) or a `#` comment; quoted values are left out, so
    the options a flag carries (`--beam_pipeline_options="--direct_num_workers=2"`)
    are not taken for the script's flags.
    """
    lines = text.split("\n")
    found = []
    for index, line in enumerate(lines):
        for match in re.finditer(r"python3? run/(\w+)\.py", line):
            command, at = line[match.end():], index
            while command.rstrip().endswith("\\") and at + 1 < len(lines):
                at += 1
                command = command.rstrip()[:-1] + " " + lines[at]
            command = command.split("`")[0]
            command = re.sub(r"\"[^\"]*\"|'[^']*'", "''", command)
            command = re.split(r"\s#", command)[0]
            flags = re.findall(r"(?:^|(?<=[\s\[]))--([A-Za-z]\w*)", command)
            found.append((index + 1, match.group(1), flags))
    return found


def test_commands_are_found_the_way_they_are_written():
    text = ("```bash\npython run/a.py --one=1 \\\n  --two [--three] ...  # --not_a_flag\n```\n"
            "Inline: `python run/b.py --four --beam_pipeline_options=\"--five --six\"` and "
            "`.venv/bin/python run/c.py`, prose --seven.\n")
    assert _commands(text) == [(2, "a", ["one", "two", "three"]),
                               (5, "b", ["four", "beam_pipeline_options"]), (5, "c", [])]


@functools.lru_cache(maxsize=None)
def _defined_flags(script):
    """The flags `run/<script>.py --helpfull` lists (absl's own included)."""
    result = script_runner.run([sys.executable, os.path.join(REPO_ROOT, "run", script + ".py"),
                                "--helpfull"], capture_output=True, text=True, timeout=300,
                               cwd=REPO_ROOT)
    flags = set(ABSL_SPECIAL_FLAGS)
    for negatable, name in re.findall(r"^  (?:-\w+,)?--(\[no\])?(\w+):", result.stdout, re.M):
        flags.add(name)
        if negatable:
            flags.add("no" + name)
    assert "helpfull" in flags and len(flags) > 20, (
        "run/%s.py --helpfull listed no flags:\n%s" % (script, (result.stdout + result.stderr)[-3000:]))
    return frozenset(flags)


def test_every_command_passes_only_flags_its_script_defines():
    commands = [(name, number, script, flags) for name, text in _documents()
                for number, script, flags in _commands(text)]
    scripts = sorted({script for _, _, script, _ in commands
                      if os.path.isfile(os.path.join(REPO_ROOT, "run", script + ".py"))})
    assert len(scripts) >= 20  # the README and the docs show most scripts
    # Each script's flags once; two at a time (the fork server imported TensorFlow once).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        defined = dict(zip(scripts, pool.map(_defined_flags, scripts)))
    unknown = []
    for name, number, script, flags in commands:
        if script not in defined:
            unknown.append("%s:%d: run/%s.py does not exist" % (name, number, script))
            continue
        for flag in flags:
            if flag not in defined[script]:
                unknown.append("%s:%d: run/%s.py has no --%s" % (name, number, script, flag))
    assert not unknown, "commands with flags their scripts do not define:\n" + "\n".join(unknown)


def _python_blocks():
    for name, text in _documents():
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            yield name, block


def _dotted(node):
    """`a.b.c` of an Attribute/Name chain, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


def _check_block(block):
    """What in `block` does not exist or does not take the arguments given."""
    tree = ast.parse(block)
    imported, problems = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(module, alias.name):
                    imported[alias.asname or alias.name] = getattr(module, alias.name)
                else:
                    try:
                        imported[alias.asname or alias.name] = importlib.import_module(
                            "%s.%s" % (node.module, alias.name))
                    except ImportError:
                        problems.append("from %s import %s" % (node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("data", "modeling"):
                    imported[alias.asname or alias.name.split(".")[0]] = importlib.import_module(
                        alias.name if alias.asname else alias.name.split(".")[0])

    def resolve(node):
        parts = _dotted(node)
        if not parts or parts[0] not in imported:
            return None
        value = imported[parts[0]]
        for index, part in enumerate(parts[1:], 1):
            if not hasattr(value, part):
                problems.append("%s has no %s" % (".".join(parts[:index]), part))
                return None
            value = getattr(value, part)
        return value

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
            resolve(node)
        if isinstance(node, ast.Call):
            callee = resolve(node.func)
            if callee is None or any(isinstance(a, ast.Starred) for a in node.args):
                continue
            keywords = {k.arg: None for k in node.keywords if k.arg is not None}
            if dataclasses.is_dataclass(callee) and isinstance(callee, type):
                fields = {f.name for f in dataclasses.fields(callee)}
                problems.extend("%s has no field %s" % (callee.__name__, k)
                                for k in keywords if k not in fields)
                continue
            try:
                signature = inspect.signature(callee)
            except (TypeError, ValueError):
                continue
            try:
                signature.bind_partial(*[None] * len(node.args), **keywords)
            except TypeError as e:
                problems.append("%s(...): %s" % (".".join(_dotted(node.func)), e))
    return problems


def test_python_examples_use_what_the_library_has():
    problems = []
    for name, block in _python_blocks():
        if not re.search(r"^\s*(from|import) (data|modeling)\b", block, re.M):
            continue  # a file of the user's own (the processor example is run elsewhere)
        problems.extend("%s: %s" % (name, p) for p in _check_block(block))
    assert not problems, "\n".join(problems)


def test_the_readme_quick_start_is_real_library_calls():
    blocks = [block for name, block in _python_blocks() if name == "README.md"]
    assert any("pretraining.run(pretraining.PretrainingJob.for_demo(" in b for b in blocks)
    assert any("classifier_job.run(classifier_job.ClassifierJob(" in b for b in blocks)
    # The checker does catch a renamed call or parameter.
    assert _check_block("from modeling.tasks import classifier_job\n"
                        "classifier_job.ClassifierJob(no_such_field=1)\n")
    assert _check_block("from modeling.recipes import pretraining\npretraining.no_such_run()\n")


@pytest.mark.parametrize("page", ["fine-tuning.md"])
def test_the_processor_example_is_on_its_page(page):
    """tests/run/test_run_classifier.py runs the DataProcessor example of this page."""
    assert "class MyProcessor(processors.DataProcessor)" in _read(os.path.join(DOCS, page))
