"""A fork server for the scripts tests start: TensorFlow imported once, not per script.

A test that runs ``python run/<script>.py ...`` pays TensorFlow's import
(6-12 s of CPU on a small machine) before the script does anything; the
suite starts about a hundred such processes. `script_runner.Popen` starts
this file instead, as a *proxy* (a plain Python process that imports
nothing heavy), which asks a long-lived *server* to fork a child that runs
the script:

* the server (``zygote.py serve SOCKET OWNER_PID``) imports NumPy,
  TensorFlow and Keras once, creates no TensorFlow context (no thread pool
  exists to be copied by fork), listens on a Unix socket and forks one child
  per request; it exits a second after its owner (the pytest process) is
  gone, or after ten idle minutes;
* the child takes the proxy's standard input, output and error (passed over
  the socket), its environment, working directory and arguments, and runs
  the script as ``__main__`` with `runpy`, so the interpreter's own exit
  handling (exit status, uncaught tracebacks, atexit, flushing) applies;
  it kills itself if the proxy dies (end of file on the socket);
* the proxy (``zygote.py proxy CONTROL_FD SOCKET_DIR OWNER_PID -- script
  args``) starts the server on first use, writes the child's pid to
  CONTROL_FD, forwards the signals it receives to the child and exits with
  the child's status (or dies of the child's signal), so `subprocess`'s
  pipes, timeouts and return codes work unchanged.

What differs from a fresh interpreter: NumPy, TensorFlow and Keras are
already imported (with the environment the server started with: one server
per distinct set of the variables in `_KEY_PREFIXES`), so a test of what a
script prints while TensorFlow loads, or of whether it imports TensorFlow at
all, must start a real process (``script_runner.Popen(..., fork=False)``).
``BERT_FAMILY_TEST_FORK=0`` makes every run a real process.
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
                 "OPENBLAS", "LD_", "LANG", "LC_", "TMPDIR")
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

def _preload():
    """Imports the libraries every script needs, as a script's start would."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as run/script.py sets it
    import numpy  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    import tensorflow  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    import keras  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top


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
    import numpy  # pylint: disable=g-import-not-at-top
    numpy.random.seed()  # a fresh process's global generator is seeded from the OS
    threading.Thread(target=_watch_proxy, args=(conn,), name="zygote-proxy-watch",
                     daemon=True).start()
    runpy.run_path(script, run_name="__main__")


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
