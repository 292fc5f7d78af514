"""modeling/training/cpu_runtime.py: run/ scripts get TensorFlow's caching CPU allocator
and its oneDNN kernels, unless the user's environment says otherwise."""

import os
import subprocess
import sys

from modeling.training import cpu_runtime

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_defaults_and_user_choices():
    environ = {}
    cpu_runtime.configure(environ)
    assert environ["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert environ["TF_ENABLE_ONEDNN_OPTS"] == "1"
    # The limit is the machine's memory, not TensorFlow's fixed 64 GB.
    expected = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    assert environ["TF_CPU_BFC_MEM_LIMIT_IN_MB"] == str(expected)

    environ = {"TF_CPU_BFC_MEM_LIMIT_IN_MB": "1234"}
    assert cpu_runtime.use_caching_allocator(environ)
    assert environ["TF_CPU_BFC_MEM_LIMIT_IN_MB"] == "1234"

    for off in ("false", "0", "False"):
        environ = {"TF_CPU_ALLOCATOR_USE_BFC": off, "TF_ENABLE_ONEDNN_OPTS": off}
        assert not cpu_runtime.use_caching_allocator(environ)
        assert not cpu_runtime.use_onednn(environ)
        assert environ == {"TF_CPU_ALLOCATOR_USE_BFC": off, "TF_ENABLE_ONEDNN_OPTS": off}


def test_a_script_start_sets_up_tensorflow_so():
    """After `import script` (every run/ script), CPU tensors come from the BFC
    allocator and oneDNN's kernels are on.

    TensorFlow keeps allocation statistics only for its BFC allocator: with
    malloc, `get_memory_info` raises. It says at import whether oneDNN is on.
    """
    code = ("import sys; sys.path.insert(0, 'run'); import script; import tensorflow as tf; "
            "x = tf.ones([256, 1024]); info = tf.config.experimental.get_memory_info('CPU:0'); "
            "print(info['peak'] >= 256 * 1024 * 4); import os; "
            "print(os.environ['TF_ENABLE_ONEDNN_OPTS'])")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("TF_CPU_", "TF_ENABLE_ONEDNN"))}
    environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the user's: nothing filtered
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=environ,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-2:] == ["True", "1"]
    # (On CPUs with AVX-512 VNNI/BF16 or AMX TensorFlow says so without us.)
    assert "oneDNN custom operations are on" in result.stderr
