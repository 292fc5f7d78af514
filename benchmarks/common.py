"""What every benchmark records beside its numbers: machine, versions, JSON lines.

    from benchmarks import common          # or `import common` from benchmarks/
    common.append_result("bench_tokenization", {
        "config": {...}, "times_s": [...], "derived": {...}})

Each call appends one JSON object (one line) to
``benchmarks/results/<name>.jsonl``; the record gets the benchmark name, a UTC
timestamp, `machine_info()` and, when the caller passes no ``versions`` of
its own, `library_versions()` of the usual libraries. Nothing here imports
TensorFlow.
"""

import datetime
import importlib
import json
import os
import platform
import resource
import subprocess
import sys

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# CPU flags that decide which kernels TensorFlow / oneDNN can use.
CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                         "amx_tile", "amx_int8")

DEFAULT_LIBRARIES = ("tensorflow", "tensorflow_text", "keras", "numpy", "numba", "tokenizers",
                     "transformers", "keras_hub", "protobuf")


def machine_info(cpuinfo_path="/proc/cpuinfo"):
    """The CPU model, core count, CPU flags of interest, memory and platform.

    Returns:
      a dict: ``cpu_model`` (str or None), ``cores`` (logical CPUs of the
      machine), ``usable_cores`` (this process's affinity), ``cpu_flags``
      (dict flag -> bool, for `CPU_FLAGS_OF_INTEREST`), ``mem_total_gb``,
      ``platform``, ``python``.
    """
    model = None
    flags = set()
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model is None:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    mem_total_gb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_total_gb = round(int(line.split()[1]) * 1024 / 1e9, 1)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu_model": model or platform.processor() or None,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_flags": {flag: flag in flags for flag in CPU_FLAGS_OF_INTEREST},
        "mem_total_gb": mem_total_gb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


def library_versions(names=DEFAULT_LIBRARIES):
    """{name: version} of the importable modules among `names` (None if absent).

    Modules already imported are asked directly; the others are looked up in
    the installed distributions' metadata first, so that asking for
    TensorFlow's version does not import TensorFlow.
    """
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    distribution_names = {"tensorflow_text": "tensorflow-text", "keras_hub": "keras-hub"}
    versions = {}
    for name in names:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None) if module is not None else None
        if version is None:
            try:
                version = metadata.version(distribution_names.get(name, name))
            except metadata.PackageNotFoundError:
                try:
                    version = getattr(importlib.import_module(name), "__version__", None)
                except ImportError:
                    version = None
        versions[name] = version
    return versions


def append_result(name, record, results_dir=None):
    """Appends `record` as one JSON line to ``<results_dir>/<name>.jsonl``.

    ``benchmark``, ``timestamp`` (UTC, ISO 8601), ``machine`` and
    ``versions`` are filled in unless `record` has them. Returns the path.
    """
    results_dir = results_dir or RESULTS_DIR
    os.makedirs(results_dir, exist_ok=True)
    full = {"benchmark": name,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}
    full.update(record)
    full.setdefault("machine", machine_info())
    full.setdefault("versions", library_versions())
    path = os.path.join(results_dir, "%s.jsonl" % name)
    with open(path, "a") as f:
        f.write(json.dumps(full, sort_keys=False, default=str) + "\n")
    return path


# ------------------------------------------------------------ child processes
#
# Every measurement runs in a fresh process (imports, allocator and thread
# pools start cold and equal for every peer); the parent runs the rounds and
# the child prints one `RESULT <json>` line.

RESULT_PREFIX = "RESULT "


def print_child_result(result):
    """The child's side: one line the parent reads back."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(script, case, extra_args=(), cwd=None):
    """Runs `script --child=<case as JSON> extra_args` in a fresh interpreter.

    Returns the child's result dict, or None after printing the tail of its
    stderr when it printed none (a crashed or failing peer).
    """
    out = subprocess.run([sys.executable, os.path.abspath(script), "--child",
                          json.dumps(case)] + list(extra_args),
                         capture_output=True, text=True, cwd=cwd)
    lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        print("  %s failed:\n%s" % (case, out.stderr[-2000:]))
        return None
    return json.loads(lines[-1][len(RESULT_PREFIX):])


def rss_mb():
    """This process's resident set size now, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_mb():
    """This process's peak resident set size so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
