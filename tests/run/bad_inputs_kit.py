# coding=utf-8
"""What the bad-input cases share: running a script, reading its error line, artefacts.

`tests/run/test_bad_inputs.py` runs the cases; the cases themselves live there
and in `tests/bad_inputs_*.py`, each registered with `@case`. Every script
of `run/` needs at least `MIN_CASES_PER_SCRIPT` cases.
"""

import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import tensorflow as tf

import script_runner

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_DIR = os.path.join(REPO_ROOT, "run")
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "sample")
TIMEOUT = 120  # seconds per subprocess: a hang fails the case instead of blocking
PARALLEL = 2

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")

# The tiny model every case uses.
TINY_CONFIG = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
               "intermediate_size": 32, "max_position_embeddings": 32}
# run_pretraining.py on the tiny model and the seq-32 TFRecord.
PRETRAIN_FLAGS = ["--max_seq_length=32", "--max_predictions_per_seq=5",
                  "--train_batch_size=8", "--eval_batch_size=8", "--max_eval_steps=2",
                  "--num_warmup_steps=0", "--log_steps=1", "--seed=1"]


# ----------------------------------------------------------------- helpers

def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _hashes(paths):
    """{path: sha256} of every file under `paths` (files or directories)."""
    hashes = {}
    for path in paths:
        path = str(path)
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                for name in names:
                    hashes[os.path.join(root, name)] = _sha256(os.path.join(root, name))
        elif os.path.lexists(path):
            hashes[path] = _sha256(path)
        else:
            hashes[path] = None
    return hashes


def _host():
    """The host part of a temporary's name (data/atomic.py's naming)."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def _temporaries(directory):
    """The temporaries (files or directories) anywhere under `directory`."""
    found = []
    for root, dirs, files in os.walk(str(directory)):
        found += [os.path.join(root, n) for n in dirs + files if ".tmp-" in n]
    return sorted(found)


def _leftovers(directory, lock=True):
    """Temporaries, ``*_temp`` directories and (with `lock`) a run lock under `directory`."""
    found = _temporaries(directory)
    for root, dirs, files in os.walk(str(directory)):
        found += [os.path.join(root, n) for n in dirs if n.endswith("_temp")]
        if lock and ".run.lock" in files:
            found.append(os.path.join(root, ".run.lock"))
    return sorted(set(found))


def _dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    proc = script_runner.Popen(["true"])
    proc.wait()
    return proc.pid


def _command(script, args):
    """The command line of run/<script>.py (noted as run by the current case)."""
    scripts_run = getattr(_CURRENT, "scripts", None)
    if scripts_run is not None:
        scripts_run.add(script)
    return [sys.executable, os.path.join(RUN_DIR, script + ".py")] + [str(a) for a in args]


def run_script(script, args, inputs=(), outputs=(), timeout=TIMEOUT):
    """Runs run/<script>.py; checks that `inputs` are unchanged and `outputs` hold no leftovers.

    Args:
      script: the script's name without ".py".
      args: its flags.
      inputs: files or directories of the user that must be byte-identical afterwards.
      outputs: output directories that must hold no temporary, ``*_temp``
        directory or run lock afterwards.
    """
    before = _hashes(inputs)
    result = script_runner.run(_command(script, args), capture_output=True, text=True,
                            timeout=timeout, env=ENV)
    after = _hashes(inputs)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert not changed, "%s changed or removed input files: %s\n%s" % (
        script, changed, result.stderr[-3000:])
    for directory in outputs:
        assert not _leftovers(directory), "%s left %s\n%s" % (
            script, _leftovers(directory), result.stderr[-3000:])
    return result


def error_line(result, script, status=1):
    """The one ``<script>: error:`` line of a failed run (after checking the status)."""
    output = "--- stdout\n%s\n--- stderr\n%s" % (result.stdout[-2000:], result.stderr[-4000:])
    assert result.returncode == status, "exit status %d, expected %d\n%s" % (
        result.returncode, status, output)
    assert "Traceback" not in result.stderr, output
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("%s: error:" % script)]
    assert len(lines) == 1, "expected one '%s: error:' line\n%s" % (script, output)
    return lines[0]


def assert_error(result, script, *needles, status=1):
    """Exit `status` and one error line naming every one of `needles`; returns the line."""
    line = error_line(result, script, status)
    for needle in needles:
        assert str(needle) in line, "%r not in the error line: %s" % (str(needle), line)
    return line


def assert_ok(result):
    assert result.returncode == 0, "exit status %d\n--- stdout\n%s\n--- stderr\n%s" % (
        result.returncode, result.stdout[-2000:], result.stderr[-4000:])
    assert "Traceback" not in result.stderr, result.stderr[-4000:]


def _checkpoint_tensors(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name)
            for name, dtype in reader.get_variable_to_dtype_map().items()
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and dtype.is_floating}


def _write_safetensors(path, header_bytes, data=b""):
    """A safetensors file written by hand: u64 header length, JSON header, data."""
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        f.write(data)
    return str(path)


# --------------------------------------------------------------- artefacts

class Artefacts(object):
    """What the cases share, built once (see `artefacts`)."""


def build_artefacts(base):
    """Builds the shared artefacts under `base`; `check_artefacts(a)` afterwards."""
    import keras  # pylint: disable=g-import-not-at-top
    from data.pretraining import instances  # pylint: disable=g-import-not-at-top
    from data.pretraining import writer  # pylint: disable=g-import-not-at-top
    from modeling import bert as config_lib  # pylint: disable=g-import-not-at-top
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling import recipes  # pylint: disable=g-import-not-at-top

    a = Artefacts()
    a.base = base
    # Copies: a case that fails to refuse an overwrite destroys a copy, not the repository.
    a.corpus = str(base / "corpus.txt")
    shutil.copyfile(os.path.join(SAMPLE_DIR, "sample_en.txt"), a.corpus)
    a.vocab = str(base / "vocab.txt")
    shutil.copyfile(os.path.join(SAMPLE_DIR, "vocab.txt"), a.vocab)
    with open(a.vocab, encoding="utf-8") as f:
        a.vocab_size = sum(1 for _ in f)
    a.config_dict = dict(TINY_CONFIG, vocab_size=a.vocab_size)
    a.config = str(base / "bert_config.json")
    with open(a.config, "w") as f:
        json.dump(a.config_dict, f)
    a.tfrecord = str(base / "train.tfrecord")
    summary = writer.create_pretraining_data([a.corpus], [a.tfrecord], instances.InstanceOptions(
        vocab_file=a.vocab, do_lower_case=True, max_seq_length=32, max_predictions_per_seq=5,
        random_seed=3, dupe_factor=1, masked_lm_prob=0.15, short_seq_prob=0.1))
    assert summary.instances > 100
    model_dir = base / "tiny_bert"
    model_dir.mkdir()
    keras.utils.set_random_seed(1)
    a.checkpoint = checkpoints.save_google_checkpoint(
        recipes.build_bert_pretrainer(config_lib.load_bert_config(a.config)),
        str(model_dir / "bert_model.ckpt"))
    a.model_dir = str(model_dir)
    a.hashes = _hashes([a.corpus, a.vocab, a.config, a.tfrecord, a.model_dir])
    return a


def check_artefacts(a):
    assert _hashes([a.corpus, a.vocab, a.config, a.tfrecord, a.model_dir]) == a.hashes, (
        "a shared artefact changed")


# ------------------------------------------------------------------- cases

CASES = {}  # name -> (fn, needs, script)
# The scripts of run/ (their bad-input cases are counted), and the shorter
# names some cases begin with.
SCRIPTS = sorted(name[:-3] for name in os.listdir(RUN_DIR)
                 if name.endswith(".py") and name not in ("common_flags.py", "script.py"))
SHORT_NAMES = {"cpd": "create_pretraining_data", "config": "run_pretraining",
               "squad": "run_squad", "multitask": "run_multitask", "siamese": "run_siamese"}
MIN_CASES_PER_SCRIPT = 3

_CURRENT = threading.local()  # the scripts the case running in this thread has run


def _script_of(name):
    for script in sorted(SCRIPTS, key=len, reverse=True):
        if name.startswith(script + "_"):
            return script
    short = name.split("_", 1)[0]
    return SHORT_NAMES.get(short)


def case(needs=(), script=None):
    """Registers a case function `fn(ctx)`.

    Args:
      needs: cases whose return value it uses.
      script: the script of run/ that the case is about (it must run it);
        by default the one its name begins with (or a `SHORT_NAMES` key).
    """
    def register(fn):
        about = script or _script_of(fn.__name__)
        if about not in SCRIPTS:
            raise ValueError("case %s: name a script of run/ with script= (got %r)"
                             % (fn.__name__, about))
        if fn.__name__ in CASES:
            raise ValueError("case %s is defined twice" % fn.__name__)
        CASES[fn.__name__] = (fn, tuple(needs), about)
        return fn
    return register


def run_case(name, ctx):
    """Runs case `name`; returns (its return value, the scripts it ran)."""
    _CURRENT.scripts = set()
    try:
        return CASES[name][0](ctx), _CURRENT.scripts
    finally:
        _CURRENT.scripts = None


class Context(object):
    """One case's artefacts, its own directory, and the results of the cases it needs."""

    def __init__(self, artefacts, directory, futures):
        self.a = artefacts
        self.dir = directory
        self._futures = futures

    def path(self, *parts):
        return os.path.join(str(self.dir), *parts)

    def config(self, name="bert_config.json", **changes):
        values = dict(self.a.config_dict)
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        path = self.path(name)
        with open(path, "w") as f:
            json.dump(values, f)
        return path

    def result_of(self, name):
        return self._futures[name].result()[0]

    def pretrain_flags(self, output_dir, *extra, config=None, input_file=None):
        return ["--input_file=%s" % (input_file or self.a.tfrecord),
                "--bert_config_file=%s" % (config or self.a.config),
                "--output_dir=%s" % output_dir] + PRETRAIN_FLAGS + list(extra)


def _cpd_flags(a, inputs, outputs, *extra, vocab=None):
    return (["--input_file=%s" % ",".join(map(str, inputs)),
             "--output_file=%s" % ",".join(map(str, outputs)),
             "--vocab_file=%s" % (vocab or a.vocab), "--max_seq_length=32",
             "--max_predictions_per_seq=5", "--dupe_factor=1", "--log_examples=0"] +
            list(extra))


def _big_corpus(ctx, copies=10):
    path = ctx.path("big_corpus.txt")
    with open(ctx.a.corpus, "rb") as f:
        text = f.read()
    with open(path, "wb") as f:
        for _ in range(copies):
            f.write(text + b"\n")
    return path


def _start_writing_and_wait_for_temporary(ctx, out_dir):
    """Starts a long create_pretraining_data.py run and waits until its temporary holds data.

    Returns:
      (process, final output path, corpus path, temporaries with data).
    """
    corpus = _big_corpus(ctx)
    output = os.path.join(out_dir, "big.tfrecord")
    args = ["--input_file=%s" % corpus, "--output_file=%s" % output,
            "--vocab_file=%s" % ctx.a.vocab, "--dupe_factor=40", "--documents_per_chunk=20",
            "--log_examples=0"]
    stdout = open(ctx.path("stdout.txt"), "w")
    stderr = open(ctx.path("stderr.txt"), "w")
    proc = script_runner.Popen(_command("create_pretraining_data", args), stdout=stdout,
                            stderr=stderr, env=ENV)
    stdout.close()
    stderr.close()
    deadline = time.time() + TIMEOUT
    while True:
        temporaries = [p for p in _temporaries(out_dir) if os.path.getsize(p) > 0]
        if temporaries:
            return proc, output, corpus, temporaries
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("no temporary with data appeared (exit %s)\n%s"
                                 % (proc.returncode, open(ctx.path("stderr.txt")).read()[-3000:]))
        time.sleep(0.02)


def _finished(proc, ctx):
    try:
        proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("did not stop within %d s" % TIMEOUT) from None
    with open(ctx.path("stdout.txt")) as out, open(ctx.path("stderr.txt")) as err:
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())

