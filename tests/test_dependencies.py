"""The directions of dependence (the README's layout, docs/architecture.md), checked on the source.

Every module under data/ and modeling/ is parsed (`ast`, nothing is imported)
and every import statement counts, at module level or inside a function.
`RULES` is the table: the modules of a scope may not import the modules named
in `forbidden`. A failure names the importing file, the line and the import.

A family package is a package of `modeling` that registers a model family
(`registry.families.register` in its `__init__.py`), or one of
`OTHER_MODEL_PACKAGES`. Shared code is everything else in `modeling` except
`modeling/experiments/`, the layer above tasks and families, which may import
anything in the library. Shared code reaches a family through
`modeling.registry` by name, never by import.

Exceptions are explicit: `ALLOWED` (a family built on another's parts, as the
docs say) and `PENDING` (violations in files that are being changed
elsewhere; each entry is to go). An entry that no longer matches an import
fails too, so the lists only shrink.
"""

import ast
import dataclasses
import os
from typing import Tuple

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("data", "modeling")

# Packages of `modeling` that belong to a model but register no family of their own.
OTHER_MODEL_PACKAGES = {
    "unilm": "UNILM's masks, pipelines and decoder over BERT's encoder",
    "siatl": "SiATL's model and job (an AWD-LSTM LM as an auxiliary loss)",
    "cvt": "CVT's tagger and job",
    "distillation": "distillers and students of any registered family",
}

# Markers in `RULES` (expanded by `_in_scope` and `_matches`).
FAMILY = "<family>"  # a family package
OTHER_FAMILY = "<other-family>"  # a family package other than the importer's
OTHER_SHARED = "<other-shared>"  # shared code without a row of its own (recipes, objectives, ...)
BELOW_EXPERIMENTS = "<below-experiments>"  # the library outside modeling/experiments/
RUN = "<run>"  # run/ (its scripts import each other as top-level modules: `import script`)

# Shared code with rows of their own in `RULES`.
NAMED_SHARED = ("modeling.layers", "modeling.training", "modeling.tasks", "modeling.serving",
                "modeling.analysis")

# (importing file, imported module) -> why a family package may import another one.
ALLOWED = {
    ("modeling/albert/config.py", "modeling.bert.config"): "ALBERT's config extends BERT's",
    ("modeling/mass/config.py", "modeling.bert.config"): "MASS's config extends BERT's",
    ("modeling/gpt/network.py", "modeling.gpt2.network"): "GPT is GPT-2's stack, post-LN",
    ("modeling/roberta/config.py", "modeling.bert.config"): "RoBERTa's config extends BERT's",
    ("modeling/roberta/encoder.py", "modeling.bert.encoder"):
        "RoBERTa's encoder is BERT's with RoBERTa's position ids",
    ("modeling/roberta/checkpoint_names.py", "modeling.bert.checkpoint_names"):
        "RoBERTa's HF encoder names are BERT's",
    ("modeling/distilbert/encoder.py", "modeling.bert.encoder"):
        "DistilBERT's encoder is BERT's without token types and pooler",
    ("modeling/ulmfit/pipeline.py", "modeling.elmo.pipeline"):
        "ULMFiT's streams read ELMo's word sentences (its \"sentences\" layout is ELMo's "
        "pipeline)",
}

# (importing file, imported module) -> what is to change; files being edited elsewhere.
PENDING = {}


@dataclasses.dataclass(frozen=True)
class Rule:
    scope: str  # a module prefix ("modeling.tasks") or a marker
    forbidden: Tuple[str, ...]  # module prefixes or markers
    why: str
    unless: Tuple[str, ...] = ()  # files exempt from the rule


RULES = (
    Rule("data", ("modeling", RUN), "data/ knows no model and no script"),
    Rule("modeling", (RUN,), "nothing in the library imports run/"),
    Rule("modeling.layers", (FAMILY,), "the shared building blocks know no family"),
    Rule("modeling.training", (FAMILY, "modeling.recipes", "modeling.tasks"),
         "the trainer knows no family, recipe or task"),
    Rule("modeling.training", ("modeling.registry",),
         "the trainer finds nothing by name; only its job does",
         unless=("modeling/training/job.py",)),
    Rule("modeling.tasks", (FAMILY,), "tasks reach families through modeling.registry"),
    Rule("modeling.serving", (FAMILY,), "serving reaches families through modeling.registry"),
    Rule("modeling.analysis", (FAMILY,), "analysis reaches families through modeling.registry"),
    Rule(OTHER_SHARED, (FAMILY,), "recipes, objectives, checkpoints, ... reach families "
         "through modeling.registry"),
    Rule(FAMILY, (OTHER_FAMILY,), "a family imports no other family (except ALLOWED)"),
    Rule(BELOW_EXPERIMENTS, ("modeling.experiments",), "experiments are above tasks and families"),
)


def _module_of(path):
    parts = os.path.relpath(path, REPO_ROOT)[:-len(".py")].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _library_files():
    for top in LIBRARY:
        for directory, subdirectories, names in os.walk(os.path.join(REPO_ROOT, top)):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    yield os.path.join(directory, name)


def _imports(path):
    """(line, module name) of every import in `path`; `from a import b` gives `a.b`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    module = _module_of(path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                yield node.lineno, "%s.%s" % (base, alias.name) if alias.name != "*" else base


def _registers_a_family(init_path):
    with open(init_path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), init_path)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register" and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "families"):
            return True
    return False


def _family_packages():
    root = os.path.join(REPO_ROOT, "modeling")
    found = {name for name in os.listdir(root)
             if os.path.isfile(os.path.join(root, name, "__init__.py"))
             and _registers_a_family(os.path.join(root, name, "__init__.py"))}
    return found | set(OTHER_MODEL_PACKAGES)


FAMILIES = _family_packages()
RUN_MODULES = {"run"} | {name[:-3] for name in os.listdir(os.path.join(REPO_ROOT, "run"))
                         if name.endswith(".py")}


def _family_of(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "modeling" and parts[1] in FAMILIES \
        else None


def _under(module, prefix):
    return module == prefix or module.startswith(prefix + ".")


def _in_scope(module, scope):
    if scope == FAMILY:
        return _family_of(module) is not None
    if scope == OTHER_SHARED:
        return (_under(module, "modeling") and _family_of(module) is None
                and not any(_under(module, p) for p in NAMED_SHARED + ("modeling.experiments",)))
    if scope == BELOW_EXPERIMENTS:
        return not _under(module, "modeling.experiments")
    return _under(module, scope)


def _matches(importer, imported, forbidden):
    if forbidden == RUN:
        return imported.split(".")[0] in RUN_MODULES
    if forbidden == FAMILY:
        return _family_of(imported) is not None
    if forbidden == OTHER_FAMILY:
        return _family_of(imported) not in (None, _family_of(importer))
    return _under(imported, forbidden)


def _exception(relpath, imported):
    for table in (ALLOWED, PENDING):
        for (file, module) in table:
            if file == relpath and _under(imported, module):
                return file, module
    return None


def _all_imports():
    for path in _library_files():
        relpath = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
        module = _module_of(path)
        for line, imported in _imports(path):
            yield relpath, module, line, imported


IMPORTS = list(_all_imports())


def _violations(rule):
    """(file:line imports name, the exception entry that excuses it or None)."""
    for relpath, module, line, imported in IMPORTS:
        if not _in_scope(module, rule.scope) or relpath in rule.unless:
            continue
        for forbidden in rule.forbidden:
            if _matches(module, imported, forbidden):
                yield "%s:%d imports %s" % (relpath, line, imported), _exception(relpath, imported)
                break


def test_the_scan_sees_the_library():
    assert len(IMPORTS) > 500, len(IMPORTS)
    assert {"bert", "albert", "gpt2", "elmo"} <= FAMILIES, FAMILIES
    assert not FAMILIES & {"layers", "tasks", "training", "serving", "analysis", "experiments"}


def _rule_id(rule):
    return "%s-not-%s" % (rule.scope.strip("<>"), "+".join(f.strip("<>") for f in rule.forbidden))


@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_directions_of_dependence(rule):
    found = [what for what, excused in _violations(rule) if excused is None]
    assert not found, "%s (%s may not import %s):\n  %s" % (
        rule.why, rule.scope, ", ".join(rule.forbidden), "\n  ".join(found))


def test_every_exception_is_still_needed():
    used = {excused for rule in RULES for _, excused in _violations(rule) if excused}
    stale = [entry for entry in list(ALLOWED) + list(PENDING) if entry not in used]
    assert not stale, ("ALLOWED/PENDING entries that no import needs any more (remove them): %s"
                       % stale)


def test_every_scope_and_module_named_in_the_rules_exists():
    modules = {module for _, module, _, _ in IMPORTS}
    for rule in RULES:
        for name in (rule.scope,) + rule.forbidden:
            if not name.startswith("<"):
                assert any(_under(m, name) for m in modules), (rule, name)
        for file in rule.unless:
            assert os.path.isfile(os.path.join(REPO_ROOT, file)), (rule, file)
