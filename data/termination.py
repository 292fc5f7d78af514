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

A process that is a run script (`install(strict=True)`, as `run/script.py`
does) must end once SIGTERM came, even if the `Terminated` raised in it
was caught and dropped on the way (a broad ``except`` in some library, a
``__del__`` that Python ran at that moment). The request then stays: a
`graceful()` block entered later raises `Terminated` at once,
`requested()` stays true, the script raises it again when `main` returns
(`raise_if_dropped`), and the watchdog ends a process whose exit was
dropped and not raised again within `grace_seconds` (an exit still on its
way up through slow clean-ups is left alone). Each says where the dropped
exception was raised. In-process users (tests) keep the default, where a
caught `Terminated` is over.

Python runs signal handlers only between bytecodes of the main thread, so a
main thread stuck inside one long C++ call (a TensorFlow op that never
returns) would never see SIGTERM. A watchdog thread hears the signal through
`signal.set_wakeup_fd`; if the handler has not run `grace_seconds` later
(longer inside `graceful()`, where a step and a checkpoint may have to
finish), it runs the registered clean-ups (temporaries, the run lock; see
`at_forced_exit`) and ends the process with status 143.
"""

import contextlib
import os
import signal
import sys
import threading
import time
import weakref

__all__ = ["EXIT_STATUS", "Terminated", "acknowledge", "at_forced_exit", "dropped", "graceful",
           "install", "raise_if_dropped", "reclaim", "requested"]

EXIT_STATUS = 128 + signal.SIGTERM
GRACE_SECONDS = 20.0
GRACEFUL_GRACE_SECONDS = 300.0

_state = {"depth": 0, "requested": False, "installed": False, "handled": 0, "received": 0,
          "strict": False, "raised": 0, "raised_where": None, "exit": None,
          "acknowledged": False}
_forced_exit_hooks = []
_request_hooks = []


def at_forced_exit(fn):
    """Registers `fn()` to run if the watchdog has to end a stuck process."""
    _forced_exit_hooks.append(fn)
    return fn


class Terminated(SystemExit):
    """Raised in the main thread when the process received SIGTERM."""

    def __init__(self, message="terminated by SIGTERM"):
        super().__init__(EXIT_STATUS)
        self.message = message

    def __str__(self):
        return self.message


def _handler(signum, frame):  # pylint: disable=unused-argument
    # `handled` last: the watchdog reads the rest once it sees the count.
    if _state["depth"] > 0 and not _state["requested"]:
        _state["requested"] = True
        _state["handled"] += 1
        return
    if frame is not None:
        _state["raised_where"] = "%s:%d in %s" % (
            frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    _state["raised"] += 1
    try:
        # No local name for it: this frame, in its traceback, would keep a
        # dropped exit alive in a reference cycle.
        raise _watched(Terminated())
    finally:
        _state["handled"] += 1


def _watched(error):
    """`error`, the exit the watchdog now follows (a weak reference: an exit that
    is dropped is freed, one on its way up is not)."""
    _state["exit"] = weakref.ref(error)
    return error


def _strict_pending():
    return _state["strict"] and _state["raised"] > 0 and not _state["acknowledged"]


def dropped():
    """In strict mode, after SIGTERM raised `Terminated` and the process still runs:
    a message saying where the exception was raised (it was caught and dropped
    somewhere); else None."""
    if not _strict_pending():
        return None
    return ("terminated by SIGTERM (the exit it raised at %s was caught and dropped; "
            "stopping now)" % (_state["raised_where"] or "an unknown place"))


def raise_if_dropped():
    """Raises `Terminated` again if an earlier one was dropped (see `dropped`)."""
    message = dropped()
    if message:
        raise _watched(Terminated(message))


def acknowledge():
    """Says the process is ending because of SIGTERM (the script caught its
    `Terminated` at the top): the watchdog lets the exit finish."""
    _state["acknowledged"] = True


def install(strict=False):
    """Installs the SIGTERM handler (main thread only; a no-op elsewhere).

    Args:
      strict: this process is a run script: once SIGTERM came it must end
        (see the module docstring). Stays on once set.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if strict:
        _state["strict"] = True
        _quiet_unraisable_exits()
    signal.signal(signal.SIGTERM, _handler)
    if not _state["installed"]:
        _start_watchdog()
    _state["installed"] = True
    return True


def reclaim():
    """Puts this module's SIGTERM handler back after a library replaced it.

    TensorFlow's coordination service (started with
    `MultiWorkerMirroredStrategy`) installs a C++ SIGTERM handler of its own
    for `PreemptionCheckpointHandler`, which silently takes the signal away
    from `install()`'s: the trainer would never hear it. Called after such a
    strategy is made; a no-op when `install()` was not called.
    """
    if _state["installed"] and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handler)
        return True
    return False


def _quiet_unraisable_exits():
    """Python reports an exception raised where it cannot propagate (a `__del__`, a
    weakref callback: SIGTERM's handler ran inside one) as "Exception ignored in ...
    Traceback ...". For `Terminated` that report is noise: the exit was dropped, and
    strict mode raises it again (`raise_if_dropped`, the watchdog), so the script still
    ends with 143 and says where. Other unraisable exceptions keep Python's report."""
    previous = sys.unraisablehook
    if getattr(previous, "_quiet_exits", False):
        return

    def hook(unraisable):
        if isinstance(unraisable.exc_value, Terminated):
            return
        previous(unraisable)

    hook._quiet_exits = True  # pylint: disable=protected-access
    sys.unraisablehook = hook


def _start_watchdog():
    try:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (OSError, ValueError):
        return

    def watch():
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM not in data:
                continue
            _state["received"] += data.count(signal.SIGTERM)
            received = _state["received"]
            if _state["depth"] > 0:
                for hook in list(_request_hooks):
                    try:
                        hook()
                    except Exception:  # pylint: disable=broad-except
                        pass
            grace = GRACEFUL_GRACE_SECONDS if _state["depth"] > 0 else GRACE_SECONDS
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                if _state["handled"] >= received:
                    break
                time.sleep(0.05)
            else:
                _forced_exit()
            if _strict_pending():
                _watch_exit()

    threading.Thread(target=watch, name="sigterm-watchdog", daemon=True).start()


def _watch_exit():
    """Ends the process if the exit SIGTERM raised was dropped and nothing raised
    it again within the grace time. An exit still on its way up (slow clean-ups)
    and one the script acknowledged are left alone."""
    dropped_since = None
    while not _state["acknowledged"]:
        ref = _state["exit"]
        now = time.monotonic()
        if ref is not None and ref() is not None:
            dropped_since = None
        elif dropped_since is None:
            dropped_since = now
        elif now - dropped_since >= GRACE_SECONDS:
            _forced_exit(dropped())
        time.sleep(0.1)


def _forced_exit(message=None):
    message = message or ("terminated by SIGTERM (the main thread was stuck; temporaries "
                          "removed, no checkpoint saved)")
    try:
        sys.stderr.write("%s: %s\n" % (os.path.basename(sys.argv[0] or "python"), message))
        sys.stderr.flush()
    except Exception:  # pylint: disable=broad-except
        pass
    for hook in _forced_exit_hooks:
        try:
            hook()
        except Exception:  # pylint: disable=broad-except
            pass
    os._exit(EXIT_STATUS)  # pylint: disable=protected-access


@contextlib.contextmanager
def on_request(fn):
    """Within this block, `fn()` runs in a helper thread as soon as SIGTERM arrives.

    For work that does not return to Python between safe points (a graph
    loop of many training steps): `fn` can set a flag that the loop reads,
    so it stops at its next step. Only inside `graceful()` blocks. If the
    request came before this block, `fn()` runs at once in the calling
    thread; it may run twice, so it must be idempotent.
    """
    _request_hooks.append(fn)
    if requested():
        # SIGTERM came between the block's start and this hook's.
        fn()
    try:
        yield
    finally:
        _request_hooks.remove(fn)


def requested():
    """True once SIGTERM arrived inside a `graceful()` block (in strict mode, also
    once a `Terminated` it raised was dropped)."""
    return _state["requested"] or _strict_pending()


@contextlib.contextmanager
def graceful():
    """Within this block SIGTERM is a request to stop at the next safe point.

    Only in the main thread, where signal handlers run; elsewhere the block
    does nothing (a worker thread's block must not turn the main thread's
    SIGTERM into a request that nothing polls).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raise_if_dropped()
    _state["depth"] += 1
    try:
        yield
    except BaseException as error:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            pending = _state["requested"]
            _state["requested"] = False
            if pending and _state["strict"] and not isinstance(error, SystemExit):
                # The stop request must outlive an error its block ended
                # with (a caller may catch that one and go on).
                text = " ".join(str(error).split())
                raise Terminated("terminated by SIGTERM (the stop it asked for came with "
                                 "%s%s)" % (type(error).__name__,
                                            ": " + text if text else "")) from error
        raise
    _state["depth"] -= 1
    if _state["depth"] == 0 and _state["requested"]:
        _state["requested"] = False
        # The block ended without acting on the request: act now.
        raise Terminated()
