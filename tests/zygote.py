"""A fork server for the scripts tests start: TensorFlow imported once, not per script.

A test that runs ``python run/<script>.py ...`` pays TensorFlow's import
(6-12 s of CPU on a small machine) before the script does anything; the
suite starts about a hundred such processes. `script_runner.Popen` starts
this file instead, as a *proxy* (a plain Python process that imports
nothing heavy), which asks a long-lived *server* to fork a child that runs
the script:

* the server (``zygote.py serve SOCKET OWNER_PID``) imports NumPy,
  TensorFlow, Keras and this checkout's library (`data`, `modeling`) once, creates no TensorFlow context (no thread pool
  exists to be copied by fork), listens on a Unix socket and forks one child
  per request; it exits a second after its owner (the pytest process) is
  gone, or after ten idle minutes;
* the child takes the proxy's standard input, output and error (passed over
  the socket), its environment, working directory and arguments, and runs
  the script as ``__main__`` with `runpy` and ends as the interpreter
  would (exit status, uncaught tracebacks, non-daemon threads, atexit,
  flushing: `_run_as_main`), but without the second of module teardown;
  it kills itself if the proxy dies (end of file on the socket);
* the proxy (``zygote.py proxy CONTROL_FD SOCKET_DIR OWNER_PID -- script
  args``) starts the server on first use, writes the child's pid to
  CONTROL_FD, forwards the signals it receives to the child and exits with
  the child's status (or dies of the child's signal), so `subprocess`'s
  pipes, timeouts and return codes work unchanged.

What differs from a fresh interpreter: NumPy, TensorFlow, Keras and the
library are already imported (with the environment the server started with: one server
per distinct set of the variables in `_KEY_PREFIXES`), so a test of what a
script prints while TensorFlow loads, or of whether it imports TensorFlow at
all, must start a real process (``script_runner.Popen(..., fork=False)``).
``BERT_FAMILY_TEST_FORK=0`` makes every run a real process, and
``BERT_FAMILY_TEST_PRELOAD=0`` leaves the library to each child.
"""

import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time

# Environment variables read while the server imports its libraries: a
# request whose values differ goes to another server.
_KEY_PREFIXES = ("TF_", "CUDA_", "KERAS_", "XLA_", "PYTHON", "OMP_", "KMP_", "MKL",
                 "OPENBLAS", "LD_", "LANG", "LC_", "TMPDIR", "BERT_FAMILY_TEST_PRELOAD")
_IDLE_SECONDS = 600
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
              signal.SIGUSR1, signal.SIGUSR2)


# Read when a script runs, not at import: any value shares a server.
_NOT_KEY = ("TF_CONFIG", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def _key(environ):
    items = sorted((k, v) for k, v in environ.items()
                   if k.startswith(_KEY_PREFIXES) and k not in _NOT_KEY)
    return hashlib.sha1(json.dumps(items).encode()).hexdigest()[:16]


def _recv_exact(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes" % (len(data), size))
        data += chunk
    return data


def _send_request(conn, payload, fds):
    data = json.dumps(payload).encode()
    message = struct.pack("<Q", len(data)) + data
    sent = socket.send_fds(conn, [message], fds)
    conn.sendall(message[sent:])


def _receive_request(conn):
    first, fds, _, _ = socket.recv_fds(conn, 1 << 16, 8)
    if len(first) < 8:
        first += _recv_exact(conn, 8 - len(first))
    size = struct.unpack("<Q", first[:8])[0]
    data = first[8:]
    if len(data) < size:
        data += _recv_exact(conn, size - len(data))
    return json.loads(data.decode()), fds


def _send_int(conn, tag, value):
    conn.sendall(tag + struct.pack("<q", value))


def _recv_int(conn, tag):
    data = _recv_exact(conn, 9)
    if data[:1] != tag:
        raise EOFError("expected %r, got %r" % (tag, data[:1]))
    return struct.unpack("<q", data[1:])[0]


# ------------------------------------------------------------------ server

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The project's packages the server imports too (`_preload_project`), and the
# modules left to each child: the process runtime (state of its own process)
# and Apache Beam's pipeline (Beam starts threads).
_PROJECT_PACKAGES = ("data", "modeling")
_LEFT_TO_THE_CHILD = ("modeling.cli", "data.pretraining.beam_pipeline")


def _preload():
    """Imports the libraries every script needs, as a script's start would."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as run/script.py sets it
    import numpy  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    import tensorflow  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    import keras  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    if os.environ.get("BERT_FAMILY_TEST_PRELOAD", "1") != "0":
        _preload_project()
    import gc  # pylint: disable=g-import-not-at-top
    gc.collect()
    gc.freeze()  # what is loaded stays shared: no child's collection walks or touches it


def _preload_project():
    """Imports this checkout's library modules (0.6-0.7 s a script would spend).

    None of them starts a thread or a TensorFlow context on import (checked
    here: a module that does is dropped again, as is one that fails to
    import, and the child imports it itself). The repository root is on
    `sys.path` only while they load, so a child's path is a fresh
    process's; a script from another checkout gets none of them (`become`).
    """
    import importlib  # pylint: disable=g-import-not-at-top
    import pkgutil  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top
    from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
    before = set(sys.modules)
    threads = threading.active_count()
    sys.path.insert(0, REPO_ROOT)
    try:
        for package in _PROJECT_PACKAGES:
            module = importlib.import_module(package)
            for info in pkgutil.walk_packages(module.__path__, package + "."):
                if info.name.startswith(_LEFT_TO_THE_CHILD):
                    continue
                try:
                    importlib.import_module(info.name)
                except Exception:  # pylint: disable=broad-except
                    pass  # the child meets the error itself, as a fresh process would
    finally:
        sys.path.remove(REPO_ROOT)
    if threading.active_count() != threads or context.context()._context_handle is not None:  # pylint: disable=protected-access
        for name in set(sys.modules) - before:
            if name.split(".")[0] in _PROJECT_PACKAGES:
                del sys.modules[name]


def _forget_project_modules():
    for name in list(sys.modules):
        if name.split(".")[0] in _PROJECT_PACKAGES:
            del sys.modules[name]


def _owner_alive(owner):
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(path, owner):
    """Runs the server; returns (connection, request, fds) in each forked child only."""
    import select  # pylint: disable=g-import-not-at-top
    _preload()
    sys.stdout.flush()
    sys.stderr.flush()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path)
    listener.listen(64)
    children = {}  # pid -> connection of its proxy
    last_request = time.time()
    last_owner_check = 0.0
    while True:
        ready, _, _ = select.select([listener], [], [], 0.05)
        if ready:
            conn, _ = listener.accept()
            try:
                conn.settimeout(30)
                request, fds = _receive_request(conn)
                conn.settimeout(None)
            except (OSError, EOFError, ValueError):
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in children.values():
                    other.close()
                return conn, request, fds
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            last_request = time.time()
            try:
                _send_int(conn, b"P", pid)
            except OSError:
                pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    _send_int(conn, b"S", os.waitstatus_to_exitcode(status))
                except OSError:
                    pass
                conn.close()
        now = time.time()
        if now - last_owner_check > 1.0:
            last_owner_check = now
            if not children and (not _owner_alive(owner) or now - last_request > _IDLE_SECONDS):
                listener.close()
                try:
                    os.unlink(path)
                except OSError:
                    pass
                os._exit(0)  # pylint: disable=protected-access


def _watch_proxy(conn):
    """Kills this process when its proxy is gone (the test killed it, or died)."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def become(conn, request, fds):
    """Turns a forked child into ``python script args`` as the proxy was asked to run."""
    import runpy  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    environ = request["env"]
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(request["cwd"])
    # sys.stdin/stdout/stderr stay the objects they are (now on the proxy's
    # descriptors; the server flushed them before forking): loggers hold
    # them, and their buffering came from the same environment
    # (PYTHONUNBUFFERED is part of the server's key).
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    if not os.path.realpath(script).startswith(os.path.realpath(REPO_ROOT) + os.sep):
        _forget_project_modules()  # another checkout: its own modules, not these
    import numpy  # pylint: disable=g-import-not-at-top
    numpy.random.seed()  # a fresh process's global generator is seeded from the OS
    threading.Thread(target=_watch_proxy, args=(conn,), name="zygote-proxy-watch",
                     daemon=True).start()
    os._exit(_run_as_main(runpy, script))  # pylint: disable=protected-access


def _run_as_main(runpy, script):
    """Runs `script` as ``__main__`` and ends as the interpreter would; returns the status.

    What Python does when a script ends, up to the point where nothing of it
    can be seen any more: the exit status of `SystemExit` (its message on
    standard error), the traceback of an uncaught exception, the wait for
    non-daemon threads, the atexit handlers, the flushing of every file still
    open and a garbage collection (closing the unreachable ones). The
    teardown of every module that follows in a real process (about a second
    with TensorFlow and Keras loaded) is skipped: the caller `os._exit`s.
    """
    import atexit  # pylint: disable=g-import-not-at-top
    import gc  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT  # a real interpreter dies of SIGINT
    except BaseException:  # pylint: disable=broad-except
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    atexit._clear()  # pylint: disable=protected-access
    # Files still open (held by a module, or by garbage in a cycle) are flushed
    # first, as teardown would close them: a collection alone can close a
    # file's descriptor before its buffer (CPython's bpo-17852).
    import io  # pylint: disable=g-import-not-at-top
    for stream in [o for o in gc.get_objects() if isinstance(o, io.IOBase)] + [
            sys.stdout, sys.stderr]:
        try:
            if not stream.closed and stream.writable():
                stream.flush()
        except (OSError, ValueError):
            pass
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code & 0xFF


# ------------------------------------------------------------------- proxy

def _connect(path):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return None
    return conn


def _connect_or_start(path, owner):
    conn = _connect(path)
    if conn is not None:
        return conn
    import fcntl  # pylint: disable=g-import-not-at-top
    import subprocess  # pylint: disable=g-import-not-at-top
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(path)
        if conn is not None:
            return conn
        log_path = path + ".log"
        with open(log_path, "ab") as log:
            server = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "serve", path, str(owner)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 300
        while True:
            conn = _connect(path)
            if conn is not None:
                return conn
            if server.poll() is not None or time.time() > deadline:
                with open(log_path, errors="replace") as f:
                    tail = f.read()[-3000:]
                raise RuntimeError("the fork server did not start (exit %s); %s:\n%s"
                                   % (server.returncode, log_path, tail))
            time.sleep(0.05)


def proxy(control_fd, socket_dir, owner, argv):
    path = os.path.join(socket_dir, "zygote-%s.sock" % _key(os.environ))
    child = []
    pending = []

    def forward(signum, _):
        if child:
            try:
                os.kill(child[0], signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    try:
        conn = _connect_or_start(path, owner)
        _send_request(conn, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()},
                      [0, 1, 2])
        child.append(_recv_int(conn, b"P"))
    finally:
        os.write(control_fd, str(child[0] if child else "").encode())
        os.close(control_fd)
    for signum in pending:
        forward(signum, None)
    try:
        code = _recv_int(conn, b"S")
    except (OSError, EOFError) as e:
        print("zygote proxy: lost the fork server (%s)" % e, file=sys.stderr)
        os._exit(255)  # pylint: disable=protected-access
    if code >= 0:
        os._exit(code)  # pylint: disable=protected-access
    if -code in _FORWARDED:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # pylint: disable=protected-access


def main():
    mode = sys.argv[1]
    if mode == "serve":
        return serve(sys.argv[2], int(sys.argv[3]))
    if mode == "proxy":
        separator = sys.argv.index("--")
        control_fd, socket_dir, owner = sys.argv[2:separator]
        proxy(int(control_fd), socket_dir, int(owner), sys.argv[separator + 1:])
        return None
    raise SystemExit("usage: zygote.py serve SOCKET OWNER | proxy FD DIR OWNER -- ARGV")


if __name__ == "__main__":
    _child = main()
    if _child is not None:
        del main
        become(*_child)
