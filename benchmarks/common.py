"""What every benchmark records beside its numbers: machine, versions, JSON lines.

    from benchmarks import common          # or `import common` from benchmarks/
    common.append_result("bench_tokenization", {
        "config": {...}, "times_s": [...], "derived": {...}})

Each call appends one JSON object (one line) to
``benchmarks/results/<name>.jsonl``; the record gets the benchmark name, a UTC
timestamp, `machine_info()` (CPU flags, core count, thread settings and the
machine kind), `machine_peak()` (the matrix-product peak of TensorFlow on
this machine, measured once per benchmark run in a fresh process) and, when
the caller passes no ``versions`` of its own, `library_versions()` of the
usual libraries. `bert_flops` is the FLOP count every benchmark divides by
the peak (model FLOPs utilisation). Nothing here imports TensorFlow (the
peak is measured in a child process).
"""

import datetime
import functools
import importlib
import json
import os
import platform
import resource
import subprocess
import sys
import time

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# CPU flags that decide which kernels TensorFlow / oneDNN can use.
CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16",
                         "amx_tile", "amx_int8")

# Environment variables that set threads and kernels (recorded with every result).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                    "TF_ENABLE_ONEDNN_OPTS", "TF_CPU_ALLOCATOR_USE_BFC", "ONEDNN_MAX_CPU_ISA",
                    "KMP_AFFINITY", "KMP_BLOCKTIME")

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
    cpu_flags = {flag: flag in flags for flag in CPU_FLAGS_OF_INTEREST}
    return {
        "cpu_model": model or platform.processor() or None,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_flags": cpu_flags,
        "kind": machine_kind(cpu_flags),
        "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "mem_total_gb": mem_total_gb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


# Machine kinds, fastest matrix units first: (kind, flags any of which make it).
MACHINE_KINDS = (("amx", ("amx_bf16", "amx_tile")), ("avx512-bf16", ("avx512_bf16",)),
                 ("avx512", ("avx512f",)), ("avx2", ("avx2",)))


def machine_kind(cpu_flags):
    """The kind of matrix units a CPU has, from its flags: amx, avx512-bf16, avx512, avx2, other.

    Args:
      cpu_flags: dict flag -> bool (`machine_info()["cpu_flags"]`), or None
        for a record that predates the flags (kind "unknown").
    """
    if not cpu_flags:
        return "unknown"
    for kind, any_of in MACHINE_KINDS:
        if any(cpu_flags.get(flag) for flag in any_of):
            return kind
    return "other"


def has_bf16_units(cpu_flags):
    """True when the CPU multiplies bf16 in hardware (AVX512-BF16 or AMX-BF16)."""
    return bool(cpu_flags) and bool(cpu_flags.get("avx512_bf16") or cpu_flags.get("amx_bf16"))


# --------------------------------------------------------- the machine's peak

PEAK_SIZE = 2048
PEAK_WARMUP = 3
PEAK_REPEATS = 20


def _peak_child(size=PEAK_SIZE, warmup=PEAK_WARMUP, repeats=PEAK_REPEATS, precisions=("fp32",)):
    """In a fresh process: the best GFLOP/s of a size^3 tf.linalg.matmul, per precision."""
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    result = {"intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
              "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads()}
    dtypes = {"fp32": tf.float32, "bf16": tf.bfloat16}
    for precision in precisions:
        a = tf.cast(tf.random.stateless_normal([size, size], [1, 2]), dtypes[precision])
        b = tf.cast(tf.random.stateless_normal([size, size], [3, 4]), dtypes[precision])

        @tf.function
        def product(a, b):
            # One element back to the host: the whole product is computed.
            return tf.cast(tf.linalg.matmul(a, b)[0, 0], tf.float32)

        for _ in range(warmup):
            product(a, b).numpy()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            product(a, b).numpy()
            times.append(time.perf_counter() - start)
        result[precision + "_gflops"] = 2.0 * size ** 3 / min(times) / 1e9
        result[precision + "_seconds"] = times
    return result


@functools.lru_cache(maxsize=None)
def machine_peak(cpuinfo_path="/proc/cpuinfo"):
    """`measure_peak()`, once per process (what `append_result` records by default)."""
    return measure_peak(cpuinfo_path)


def measure_peak(cpuinfo_path="/proc/cpuinfo"):
    """The matrix-product peak of TensorFlow on this machine, measured now.

    A 2048 x 2048 by 2048 x 2048 `tf.linalg.matmul` (oneDNN's kernels:
    ``TF_ENABLE_ONEDNN_OPTS=1`` unless the environment says otherwise) in a
    `tf.function`, in a fresh interpreter, 3 untimed calls then the best of
    20 timed ones: in fp32, and in bf16 where the CPU has bf16 units
    (AVX512-BF16 or AMX). The best, not the median, because other work on a
    shared machine only ever slows a repeat down.

    Returns:
      a dict: ``fp32_gflops``, ``bf16_gflops`` (None without bf16 units),
      ``matmul`` (what was timed), ``intra_op_threads`` /
      ``inter_op_threads`` (TensorFlow's, 0 = one per core), the thread
      variables of the environment, ``load_average`` (1-minute, before and
      after) and ``measured_at``; ``error`` instead of figures if the child
      failed.
    """
    flags = machine_info(cpuinfo_path)["cpu_flags"]
    precisions = ("fp32", "bf16") if has_bf16_units(flags) else ("fp32",)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    code = ("import json, sys; sys.path.insert(0, %r); from benchmarks import common; "
            "print(%r + json.dumps(common._peak_child(precisions=%r)))"
            % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), RESULT_PREFIX,
               precisions))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    peak = {"matmul": "%d^3 tf.linalg.matmul in tf.function, oneDNN, best of %d after %d "
                      "warm-up calls" % (PEAK_SIZE, PEAK_REPEATS, PEAK_WARMUP),
            "fp32_gflops": None, "bf16_gflops": None,
            "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
            "load_average": [load_before,
                             os.getloadavg()[0] if hasattr(os, "getloadavg") else None],
            "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}
    if not lines:
        peak["error"] = out.stderr.strip().splitlines()[-1:] or ["no output"]
        return peak
    measured = json.loads(lines[-1][len(RESULT_PREFIX):])
    peak.update({k: v for k, v in measured.items() if not k.endswith("_seconds")})
    return peak


def best_peak(*peaks):
    """The highest of several `machine_peak()` measurements, per precision.

    Benchmarks measure the peak before every case: on a machine shared with
    other jobs a single measurement may land in a busy moment, and the
    utilisation is then held to the best the machine showed in the run.
    Returns a copy of the last peak with ``fp32_gflops`` / ``bf16_gflops``
    the maxima and ``measurements`` their count.
    """
    peaks = [p for p in peaks if p]
    if not peaks:
        return None
    best = dict(peaks[-1])
    for key in ("fp32_gflops", "bf16_gflops"):
        values = [p.get(key) for p in peaks if p.get(key)]
        best[key] = max(values) if values else None
    best["measurements"] = sum(p.get("measurements", 1) for p in peaks)
    if best.get("fp32_gflops"):
        best.pop("error", None)
    return best


def peak_for(peak, precision):
    """GFLOP/s of `peak` (a `machine_peak()` dict or None) for a case's precision, or None.

    "bf16" (mixed bf16, autocast) cases are held to the bf16 peak, everything
    else to fp32's.
    """
    if not peak:
        return None
    return peak.get("bf16_gflops" if precision == "bf16" else "fp32_gflops")


def mfu(flops, seconds, peak, precision):
    """Model FLOPs utilisation: `flops` done in `seconds` over the peak of `precision`, or None."""
    gflops = peak_for(peak, precision)
    if not gflops or not seconds:
        return None
    return flops / seconds / 1e9 / gflops


# ---------------------------------------------------------------- FLOP counts

def bert_flops(layers, hidden, intermediate, seq_length, vocab_size=0, predictions=0,
               training=True, pooler=True, next_sentence=True):
    """FLOPs of BERT's matrix products for ONE sequence: the exact count, not 6 x params.

    Counted (2 FLOPs per multiply-add), per sequence of `seq_length` tokens:

    * encoder products: ``2 x (4 h^2 + 2 h i) x L x seq``
      (query, key, value, output projections; the two feed-forward products);
    * attention products: ``4 x L x seq^2 x h`` (scores Q K^T and scores x V,
      all heads together);
    * the pooler (``2 h^2``, the first token) and the NSP classifier (``4 h``);
    * the masked-LM head on `predictions` gathered positions: its transform
      (``2 h^2`` each) and the output layer against the vocabulary
      (``2 h V`` each).

    Training (forward + backward) is 3 x that: the backward pass of each
    product is two products of the same size (gradient of the input and of
    the weight; the embeddings train, so the first layer's input gradient is
    needed too). That is ``6 x params-in-products x tokens + 12 x L x seq^2 x h``
    plus the heads, per sequence. Not counted: embedding lookups, softmax,
    GELU, layer norms, dropout, the loss, the optimizer update (none is a
    matrix product; together a few percent of the step's FLOPs).

    BERT-base (L=12, h=768, i=3072), seq 128, 20 predictions, V=30,522:
    69.9 GFLOP per trained sequence; inference of one sentence of 30 tokens
    (sequence and pooled outputs, no masked-LM head): 5.13 GFLOP.
    """
    h, i, L, s = hidden, intermediate, layers, seq_length
    forward = 2 * (4 * h * h + 2 * h * i) * L * s + 4 * L * s * s * h
    if pooler:
        forward += 2 * h * h
    if next_sentence:
        forward += 2 * h * 2
    forward += predictions * (2 * h * h + 2 * h * vocab_size)
    return 3 * forward if training else forward


FLOP_FORMULA = ("FLOPs per sequence = k x [2 (4h^2 + 2hi) L s + 4 L s^2 h + 2h^2 (pooler) "
                "+ 4h (NSP) + P (2h^2 + 2hV) (masked-LM head on P positions)], k = 3 for a "
                "training step (forward + backward), 1 for inference; matrix products only, "
                "exact count (benchmarks/common.py: bert_flops)")


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

    ``benchmark``, ``timestamp`` (UTC, ISO 8601), ``machine``, ``peak``
    (`machine_peak()`, measured at this process's first record) and
    ``versions`` are filled in unless `record` has them. Returns the path.
    """
    results_dir = results_dir or RESULTS_DIR
    os.makedirs(results_dir, exist_ok=True)
    full = {"benchmark": name,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}
    full.update(record)
    full.setdefault("machine", machine_info())
    full.setdefault("peak", machine_peak())
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
