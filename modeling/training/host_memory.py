"""Host memory: TensorFlow's caching (BFC) allocator for CPU tensors.

By default TensorFlow takes each CPU tensor from malloc. glibc serves a
request above its mmap threshold (at most 32 MB) with a fresh mapping and
returns it to the kernel when the tensor dies, so every large tensor of
every step is page-faulted and zeroed anew. In BERT pre-training the
masked-LM logits are such tensors (batch x predictions x vocabulary: 78 MB
for a BERT-tiny batch of 32 x 20 over 30,522 words, and their softmax,
gradient, ...); on a 2-core CPU the faults cost about a sixth of a step
(`benchmarks/bench_training.py`, README "Speed").

`TF_CPU_ALLOCATOR_USE_BFC=true` makes TensorFlow keep freed blocks and hand
them out again (the allocator GPUs use for their memory). TensorFlow reads
the variable when it makes its CPU allocator, at the first op, so
`use_caching_allocator()` works after ``import tensorflow`` too, as long as
nothing has run yet. The allocator grows as needed up to
`TF_CPU_BFC_MEM_LIMIT_IN_MB` (TensorFlow's default: 64 GB), set here to the
machine's physical memory unless given. Every `run/` script calls it; a
user's value of either variable is kept (``TF_CPU_ALLOCATOR_USE_BFC=false``
brings back malloc).
"""

import os

__all__ = ["use_caching_allocator"]

_SWITCH = "TF_CPU_ALLOCATOR_USE_BFC"
_LIMIT = "TF_CPU_BFC_MEM_LIMIT_IN_MB"


def _physical_memory_mb():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (AttributeError, OSError, ValueError):
        return None


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
    if environ[_SWITCH].strip().lower() not in ("true", "1"):
        return False
    if _LIMIT not in environ:
        memory = _physical_memory_mb()
        if memory:
            environ[_LIMIT] = str(memory)
    return True
