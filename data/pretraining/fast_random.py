"""Python's `random.Random.shuffle`, the same draws and result, several times faster.

Google's pre-training data script shuffles every instance's maskable
positions with `random.shuffle`; the output of this project must be its
output, so the masked positions have to come from exactly the same draws of
the same Mersenne Twister. `random.shuffle` spends most of its time in
Python-level calls (a `_randbelow` frame per element); `shuffle` here makes
the same draws with far fewer calls:

* ``random.Random.shuffle`` (CPython 3.x) swaps ``x[i]`` with ``x[j]`` for
  ``i = n-1 .. 1``, where ``j = _randbelow(i + 1)``; `_randbelow(m)` takes
  ``k = m.bit_length()`` bits, ``getrandbits(k)``, i.e. the top ``k`` bits
  of one 32-bit Mersenne Twister output, and draws again while the result
  is ``>= m`` (rejection).
* ``getrandbits(32 * w)`` returns the next ``w`` outputs at once (the first
  one in the lowest bits). A shuffle that still has ``i`` swaps to make
  needs at least ``i`` more outputs, so exactly that many are taken in one
  call and consumed in a plain loop; rejections leave swaps over, for which
  the next (smaller) block is taken. The generator is never advanced past
  what `random.shuffle` would have used, so every later draw is unchanged.

`shuffle` checks itself against `random.Random.shuffle` once, on first use,
and falls back to it (and for any generator that is not exactly a
`random.Random`) should the interpreter's algorithm ever differ.
"""

import random
import struct

# 32 - m.bit_length() for m = 0 .. _SHIFT_LIMIT: the shift that turns a 32-bit
# output into getrandbits(m.bit_length()).
_SHIFT_LIMIT = 1 << 16
_SHIFTS = [32 - m.bit_length() for m in range(_SHIFT_LIMIT + 1)]

_verified = None  # None: not checked yet; then True / False


def _shuffle_exact(x, getrandbits):
    # m: the bound of the next draw (random.shuffle's i + 1).
    m = len(x)
    shifts = _SHIFTS
    unpack = struct.unpack
    while m > 1:
        # At least m - 1 more outputs are needed (one per swap left).
        n = m - 1
        words = unpack("<%dI" % n, getrandbits(32 * n).to_bytes(4 * n, "little"))
        shift = shifts[m]
        for word in words:
            j = word >> shift
            if j < m:
                m -= 1
                x[m], x[j] = x[j], x[m]
                shift = shifts[m]


def _self_check():
    for seed in (0, 1, 12345, "3/7"):
        for n in (0, 1, 2, 3, 5, 17, 64, 65, 127, 128, 129, 1000):
            expected, reference = list(range(n)), random.Random(seed)
            reference.shuffle(expected)
            got, ours = list(range(n)), random.Random(seed)
            _shuffle_exact(got, ours.getrandbits)
            if got != expected or ours.random() != reference.random():
                return False
    return True


def shuffle(rng, x):
    """Shuffles list `x` in place exactly as ``rng.shuffle(x)`` would.

    Args:
      rng: a `random.Random` (anything else is simply asked to shuffle).
      x: a list.
    """
    global _verified
    if type(rng) is not random.Random or len(x) > _SHIFT_LIMIT:
        rng.shuffle(x)
        return
    if _verified is None:
        _verified = _self_check()
    if _verified:
        _shuffle_exact(x, rng.getrandbits)
    else:
        rng.shuffle(x)
