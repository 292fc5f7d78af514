"""TensorFlow on CPUs: the caching allocator for host tensors, and oneDNN's kernels.

Every `run/` script calls `configure()` before TensorFlow is imported (and
`benchmarks/bench_training.py` does for "this project"); a user's own value
of each variable is kept.

**Allocator.** By default TensorFlow takes each CPU tensor from malloc.
glibc serves a request above its mmap threshold (at most 32 MB) with a
fresh mapping and returns it to the kernel when the tensor dies, so every
large tensor of every step is page-faulted and zeroed anew. In BERT
pre-training the masked-LM logits are such tensors (batch x predictions x
vocabulary: 78 MB for a BERT-tiny batch of 32 x 20 over 30,522 words), and
so are their softmax and gradient; with Eigen's kernels those faults are
a visible part of a step, with oneDNN's they are not (the measurements:
docs/speed.md and docs/benchmarks.md). ``TF_CPU_ALLOCATOR_USE_BFC=true`` makes
TensorFlow keep freed blocks and hand them out again (the allocator GPUs
use). TensorFlow reads it when it makes its CPU allocator, at the first op,
so `use_caching_allocator()` also works after ``import tensorflow`` as long
as nothing has run. The allocator grows as needed up to
``TF_CPU_BFC_MEM_LIMIT_IN_MB`` (TensorFlow's default: 64 GB), set here to
the machine's physical memory unless given.

**oneDNN.** TensorFlow turns its oneDNN kernels on by itself only on CPUs
with AVX-512 VNNI/BF16 or AMX. On an AVX2-only CPU they made a BERT-tiny
pre-training step faster too (docs/speed.md), so
`use_onednn()` asks for them (``TF_ENABLE_ONEDNN_OPTS=1``). TensorFlow
reads this variable when it is imported: set it before.
``TF_ENABLE_ONEDNN_OPTS=0`` keeps Eigen's kernels; results differ from
oneDNN's by float rounding only.
"""

import os

__all__ = ["configure", "use_caching_allocator", "use_onednn"]

_SWITCH = "TF_CPU_ALLOCATOR_USE_BFC"
_LIMIT = "TF_CPU_BFC_MEM_LIMIT_IN_MB"
_ONEDNN = "TF_ENABLE_ONEDNN_OPTS"


def _physical_memory_mb():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (AttributeError, OSError, ValueError):
        return None


def _on(value):
    # As TensorFlow reads a boolean variable: lower-cased, not stripped.
    return value.lower() in ("true", "1")


def use_caching_allocator(environ=None):
    """Asks TensorFlow for its caching CPU allocator unless the environment says otherwise.

    Args:
      environ: the mapping to set (default `os.environ`, which is what
        TensorFlow reads).

    Returns:
      True if the caching allocator is what TensorFlow will use.
    """
    environ = os.environ if environ is None else environ
    environ.setdefault(_SWITCH, "true")
    if not _on(environ[_SWITCH]):
        return False
    if _LIMIT not in environ:
        memory = _physical_memory_mb()
        if memory:
            environ[_LIMIT] = str(memory)
    return True


def use_onednn(environ=None):
    """Asks for TensorFlow's oneDNN CPU kernels unless the environment says otherwise.

    Returns:
      True if they are asked for (they take effect only if TensorFlow is
      imported afterwards).
    """
    environ = os.environ if environ is None else environ
    environ.setdefault(_ONEDNN, "1")
    return _on(environ[_ONEDNN])


def configure(environ=None):
    """Both of the above (call before importing TensorFlow)."""
    use_caching_allocator(environ)
    use_onednn(environ)
