"""Flags derived from job dataclasses (`modeling.training.options`), and every script's flags.

The unit tests build flags on a fresh `FlagValues`; the script tests load
every `run/` script once, in one process, and check that each job field is a
flag of the same name, default and help, and that Google's flag names and
defaults are still there.
"""

import dataclasses
import json
import os
import subprocess
import sys
from typing import List, Optional

from absl import flags
import pytest

from modeling.training import options
from modeling.training import settings
from modeling.training.options import option

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@dataclasses.dataclass
class _Job(settings.TrainerSettings):
    name: str = option("x", "A name.")
    count: int = option(3, "How many.", lower_bound=1)
    rate: float = option(0.5, "A rate.", upper_bound=1.0)
    verbose: bool = option(False, "Say more.")
    scheme: str = option("bio", "A scheme.", choices=("bio", "bioes"))
    words: Optional[List[str]] = option(None, "Some words.")
    texts: List[str] = option(help="Repeatable texts.", multi=True, default_factory=list)
    maybe: Optional[int] = option(None, "Maybe a number.", aliases=("perhaps",))
    even: int = option(2, "An even number.", check=(lambda v: v % 2 == 0, "--even must be even"))
    hidden: str = option("python-only", "Not on the command line.", flag=False)


@dataclasses.dataclass
class _SubJob(_Job):
    CLI_EXCLUDE = ("name",)
    extra: str = option("e", "One more.")


def _parsed(job_class, argv):
    values = flags.FlagValues()
    options.define_flags(job_class, values)
    values(["prog"] + list(argv))
    return values


def test_flags_take_kind_default_help_and_constraints_from_the_fields():
    values = flags.FlagValues()
    defined = options.define_flags(_Job, values)
    assert "hidden" not in defined and "hidden" not in values
    assert values["count"].flag_type() == "int" and values["count"].default == 3
    assert values["rate"].flag_type() == "float" and values["rate"].default == 0.5
    assert values["verbose"].flag_type() == "bool"
    assert values["scheme"].flag_type() == "string enum"
    assert values["scheme"].parser.enum_values == ["bio", "bioes"]
    assert values["words"].flag_type() == "comma separated list of strings"
    assert values["texts"].flag_type() == "multi string"
    assert values["name"].help == "A name."
    # The trainer's settings come with every job, Google's pointers included.
    assert values["steps_per_loop"].default == settings.TrainerSettings.steps_per_loop
    assert values["distribution_strategy"].parser.enum_values == [
        "one_device", "mirrored", "multi_worker_mirrored", "tpu"]
    for name in ("use_tpu", "tpu_name", "iterations_per_loop"):
        assert name in values


def test_parsed_flags_make_the_job_and_defaults_match_the_library():
    values = _parsed(_Job, [])
    assert options.job_from_flags(_Job, values) == _Job()
    values = _parsed(_Job, ["--count=7", "--words=a,b", "--texts=p", "--texts=q",
                            "--perhaps=4", "--scheme=bioes", "--verbose",
                            "--iterations_per_loop=9", "--tpu_name=my-tpu"])
    job = options.job_from_flags(_Job, values, name="given")
    assert (job.count, job.words, job.texts, job.maybe, job.scheme, job.verbose) == (
        7, ["a", "b"], ["p", "q"], 4, "bioes", True)
    assert (job.steps_per_loop, job.tpu, job.name, job.hidden) == (9, "my-tpu", "given",
                                                                    "python-only")
    assert options.present_values(_Job, values) == {
        "count": 7, "words": ["a", "b"], "texts": ["p", "q"], "maybe": 4, "scheme": "bioes",
        "verbose": True, "steps_per_loop": 9, "tpu": "my-tpu"}


@pytest.mark.parametrize("argv, message", [
    (["--count=0"], "count"), (["--rate=2"], "rate"), (["--scheme=iob"], "scheme"),
    (["--even=3"], "--even must be even"), (["--stlr_cut_frac=1.5"], "stlr_cut_frac"),
    (["--hidden=x"], "hidden")])
def test_out_of_range_and_unknown_values_are_flag_errors(argv, message):
    values = flags.FlagValues()
    options.define_flags(_Job, values)
    with pytest.raises(flags.Error, match=message):
        values(["prog"] + argv)


def test_subclass_excludes_inherited_fields_and_already_defined_flags_stay():
    values = flags.FlagValues()
    flags.DEFINE_integer("count", 99, "The script's own.", flag_values=values)
    defined = options.define_flags(_SubJob, values)
    assert "name" not in values and "extra" in defined and "count" not in defined
    assert values["count"].default == 99


def test_a_field_without_help_is_refused():
    @dataclasses.dataclass
    class Bad:
        undocumented: int = 3

    with pytest.raises(TypeError, match="Bad.undocumented has no help"):
        options.define_flags(Bad, flags.FlagValues())


def test_a_field_from_a_shared_group_keeps_its_help_with_its_own_default():
    @dataclasses.dataclass
    class Job(settings.TextSettings, settings.EvalSettings):
        max_seq_length: int = options.option_from(settings.TextSettings, "max_seq_length", 384)
        texts: List[str] = options.option_from(_Job, "texts")

    specs = {spec.name: spec for spec in options.flag_specs(Job)}
    shared = {spec.name: spec for spec in options.flag_specs(settings.TextSettings)}
    assert specs["max_seq_length"].default == 384 and Job().max_seq_length == 384
    assert specs["max_seq_length"].help == shared["max_seq_length"].help
    assert specs["vocab_file"] == shared["vocab_file"]
    assert specs["eval_batch_size"].default == 8
    assert specs["texts"].kind == "multi_string" and Job().texts == []


def test_use_tpu_points_at_the_tpu_strategy():
    assert settings.TrainerSettings(use_tpu=True).strategy_name == "tpu"
    assert settings.TrainerSettings(use_tpu=True,
                                    distribution_strategy="tpu").strategy_name == "tpu"
    assert settings.TrainerSettings().strategy_name == "one_device"
    with pytest.raises(ValueError, match="--use_tpu .* --distribution_strategy=mirrored"):
        settings.TrainerSettings(use_tpu=True, distribution_strategy="mirrored").strategy_name


# Every script's flags, loaded in one process: each script is run as a module
# (not as __main__), its flags recorded, then removed for the next one.
_DUMP = r"""
import dataclasses, json, os, runpy, sys
sys.path.insert(0, "run")
from absl import flags
F = flags.FLAGS
base = set(F)
out = {}
for name in sorted(os.listdir("run")):
    if not name.endswith(".py") or name in ("script.py", "common_flags.py"):
        continue
    sys.argv = ["run/" + name]
    namespace = runpy.run_path("run/" + name, run_name="loaded_script")
    record = {}
    for flag_name in sorted(set(F) - base):
        flag = F[flag_name]
        if type(flag).__name__ == "_FlagAlias":  # help: "Alias for --original."
            record[flag_name] = {"alias_of": flag.help.split("--", 1)[1].rstrip(".")}
        else:
            record[flag_name] = {"type": flag.flag_type(), "default": flag.default,
                                 "help": flag.help}
    jobs = {}
    for value in namespace.values():
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            jobs[value.__module__ + "." + value.__qualname__] = True
    out[name] = {"flags": record, "jobs": sorted(jobs)}
    for flag_name in set(F) - base:
        delattr(F, flag_name)
print("@@" + json.dumps(out, default=repr))
"""


@pytest.fixture(scope="module")
def script_flags():
    result = subprocess.run([sys.executable, "-c", _DUMP], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("@@")]
    assert lines, result.stderr[-3000:]
    return json.loads(lines[0][2:])


# Script -> the job dataclass whose fields are its flags.
JOB_SCRIPTS = {
    "run_classifier.py": ("modeling.tasks.classifier_job", "ClassifierJob"),
    "run_ner.py": ("modeling.tasks.ner_job", "NerJob"),
    "run_squad.py": ("modeling.tasks.squad_job", "SquadJob"),
    "run_siamese.py": ("modeling.tasks.siamese_job", "SiameseJob"),
    "run_multitask.py": ("modeling.tasks.multitask_job", "MultitaskJob"),
    "run_pretraining.py": ("modeling.recipes.pretraining", "PretrainingJob"),
    "run_distillation.py": ("modeling.distillation.job", "DistillationJob"),
    "run_cvt.py": ("modeling.cvt.job", "CvtJob"),
    "run_siatl.py": ("modeling.siatl.job", "SiatlJob"),
    "run_translation.py": ("modeling.mass.translation", "TranslationJob"),
    "compare_models.py": ("modeling.experiments.comparison", "CompareJob"),
    "zero_shot_transfer.py": ("modeling.experiments.zero_shot", "ZeroShotJob"),
    # Data, serving and analysis scripts: the settings of the library call they make.
    "create_pretraining_data.py": ("data.pretraining.writer", "PretrainingDataSettings"),
    "create_vocab.py": ("data.vocab_learning", "VocabSettings"),
    "data_service.py": ("data.input_pipeline", "DataServiceServerSettings"),
    "resample_languages.py": ("data.multilingual", "ResampleSettings"),
    "analyze_shortcuts.py": ("data.probing.shortcuts", "ShortcutSettings"),
    "extract_features.py": ("modeling.serving.inference", "FeatureExtractionSettings"),
    "predict_masked.py": ("modeling.serving.inference", "FillMaskSettings"),
    "generate.py": ("modeling.serving.generation", "GenerationSettings"),
    "build_index.py": ("modeling.serving.matching", "IndexSettings"),
    "match.py": ("modeling.serving.matching", "MatchSettings"),
    "probe_cloze.py": ("modeling.analysis.cloze", "ClozeSettings"),
    "analyze_attention.py": ("modeling.analysis.attention", "AttentionAnalysisSettings"),
    "prune_heads.py": ("modeling.analysis.heads", "PruningSettings"),
    "compress_classifier.py": ("modeling.analysis.compression", "CompressionSettings"),
    "convert_checkpoint.py": ("modeling.pretrained.convert", "ConvertSettings"),
}


@pytest.mark.parametrize("script", sorted(JOB_SCRIPTS))
def test_every_job_field_is_a_flag_with_the_fields_default_and_help(script, script_flags):
    import importlib  # pylint: disable=import-outside-toplevel
    module_name, class_name = JOB_SCRIPTS[script]
    job_class = getattr(importlib.import_module(module_name), class_name)
    recorded = script_flags[script]["flags"]
    specs = options.flag_specs(job_class)
    assert specs, job_class
    for spec in specs:
        assert spec.name in recorded, "%s: no --%s" % (script, spec.name)
        flag = recorded[spec.name]
        default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
        assert flag["default"] == default, (script, spec.name)
        # (absl puts an enum's values before its help: "<a|b>: help", and adds
        # ";\n    repeat this option to specify a list of values" to a repeatable one's)
        help_text = flag["help"].split(";\n    repeat this option", 1)[0]
        assert help_text.endswith(spec.help), (script, spec.name)
    if not issubclass(job_class, settings.TrainerSettings):
        return
    assert recorded["use_tpu"]["default"] is False
    assert recorded["tpu_name"] == {"alias_of": "tpu"}
    assert recorded["iterations_per_loop"] == {"alias_of": "steps_per_loop"}


# Google's run_classifier.py / run_pretraining.py / run_squad.py flags and
# defaults that users type (TPU-only flags give way to --distribution_strategy,
# with --use_tpu and --tpu_name kept as pointers).
GOOGLE_FLAGS = {
    "run_classifier.py": {
        "data_dir": None, "bert_config_file": None, "task_name": None, "vocab_file": None,
        "output_dir": None, "init_checkpoint": None, "do_lower_case": True,
        "max_seq_length": 128, "do_train": False, "do_eval": False, "do_predict": False,
        "train_batch_size": 32, "eval_batch_size": 8, "predict_batch_size": 8,
        "learning_rate": 5e-5, "num_train_epochs": 3.0, "warmup_proportion": 0.1,
        "save_checkpoints_steps": 1000, "iterations_per_loop": None, "use_tpu": False,
        "tpu_name": None},
    "run_pretraining.py": {
        "bert_config_file": None, "input_file": None, "output_dir": None,
        "init_checkpoint": None, "max_seq_length": 128, "max_predictions_per_seq": 20,
        "do_train": False, "do_eval": False, "train_batch_size": 32, "eval_batch_size": 8,
        "learning_rate": 5e-5, "num_train_steps": 100000, "num_warmup_steps": 10000,
        "save_checkpoints_steps": 1000, "iterations_per_loop": None, "max_eval_steps": 100,
        "use_tpu": False, "tpu_name": None},
    "run_squad.py": {
        "bert_config_file": None, "vocab_file": None, "output_dir": None, "train_file": None,
        "predict_file": None, "init_checkpoint": None, "do_lower_case": True,
        "max_seq_length": 384, "doc_stride": 128, "max_query_length": 64, "do_train": False,
        "do_predict": False, "train_batch_size": 32, "predict_batch_size": 8,
        "learning_rate": 5e-5, "num_train_epochs": 3.0, "warmup_proportion": 0.1,
        "save_checkpoints_steps": 1000, "iterations_per_loop": None, "n_best_size": 20,
        "max_answer_length": 30, "version_2_with_negative": False,
        "null_score_diff_threshold": 0.0, "use_tpu": False, "tpu_name": None},
    "create_pretraining_data.py": {
        "input_file": None, "output_file": None, "vocab_file": None, "do_lower_case": True,
        "do_whole_word_mask": False, "max_seq_length": 128, "max_predictions_per_seq": 20,
        "random_seed": 12345, "dupe_factor": 10, "masked_lm_prob": 0.15,
        "short_seq_prob": 0.1},
}


@pytest.mark.parametrize("script", sorted(GOOGLE_FLAGS))
def test_googles_flag_names_and_defaults_are_kept(script, script_flags):
    recorded = script_flags[script]["flags"]
    for name, default in GOOGLE_FLAGS[script].items():
        assert name in recorded, "%s lost Google's --%s" % (script, name)
        if "alias_of" in recorded[name]:
            continue  # iterations_per_loop -> steps_per_loop, tpu_name -> tpu
        assert recorded[name]["default"] == default, (script, name)


def test_every_script_has_help_for_every_flag(script_flags):
    assert len(script_flags) >= 25
    for script, record in script_flags.items():
        for name, flag in record["flags"].items():
            assert "alias_of" in flag or flag["help"].strip(), (script, name)
