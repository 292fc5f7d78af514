"""SIGTERM as an orderly exit: clean-up runs, and training saves first.

`timeout`, schedulers (Slurm, Kubernetes, Borg) and `kill` send SIGTERM,
whose default action ends the process at once: no `finally`, no `atexit`,
temporaries left behind. After `install()`:

* outside a `graceful()` block, SIGTERM raises `Terminated` (a
  `SystemExit` with status 143 = 128 + SIGTERM) in the main thread, so every
  `finally` and `atexit` clean-up runs;
* inside a `graceful()` block (the trainer's loop), the first SIGTERM only
  sets a flag that the loop polls (`requested()`) between steps: it then
  saves a checkpoint and raises `Terminated` itself. A second SIGTERM raises
  at once.

SIGINT (Ctrl-C) keeps Python's KeyboardInterrupt, which runs the same
clean-up.
"""

import contextlib
import signal
import threading

__all__ = ["EXIT_STATUS", "Terminated", "graceful", "install", "requested"]

EXIT_STATUS = 128 + signal.SIGTERM

_state = {"depth": 0, "requested": False, "installed": False}


class Terminated(SystemExit):
    """Raised in the main thread when the process received SIGTERM."""

    def __init__(self, message="terminated by SIGTERM"):
        super().__init__(EXIT_STATUS)
        self.message = message

    def __str__(self):
        return self.message


def _handler(signum, frame):  # pylint: disable=unused-argument
    if _state["depth"] > 0 and not _state["requested"]:
        _state["requested"] = True
        return
    raise Terminated()


def install():
    """Installs the SIGTERM handler (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGTERM, _handler)
    _state["installed"] = True
    return True


def requested():
    """True once SIGTERM arrived inside a `graceful()` block."""
    return _state["requested"]


@contextlib.contextmanager
def graceful():
    """Within this block SIGTERM is a request to stop at the next safe point."""
    _state["depth"] += 1
    try:
        yield
    except BaseException:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            _state["requested"] = False
        raise
    _state["depth"] -= 1
    if _state["depth"] == 0 and _state["requested"]:
        _state["requested"] = False
        # The block ended without acting on the request: act now.
        raise Terminated()
