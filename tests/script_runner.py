"""`subprocess.Popen` / `subprocess.run` for the scripts tests start, through a fork server.

``script_runner.run([sys.executable, "run/x.py", ...], capture_output=True, ...)``
behaves as `subprocess.run` does (pipes, files, timeouts, return codes,
signals sent with `send_signal` / `terminate` / `kill` reach the script
itself), but the script runs in a child forked from a server that has
already imported TensorFlow (see `zygote.py` for how and what differs).
Commands of another shape (``python -c``, ``python -m``, interpreter
options, other programs), ``fork=False`` and ``BERT_FAMILY_TEST_FORK=0`` in
the environment start a real process.
"""

import os
import subprocess
import sys
import tempfile

_PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")

PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL
CompletedProcess = subprocess.CompletedProcess
TimeoutExpired = subprocess.TimeoutExpired


def _forkable(args):
    if os.environ.get("BERT_FAMILY_TEST_FORK", "1") == "0":
        return False
    if isinstance(args, (str, bytes)) or len(args) < 2:
        return False
    program, script = str(args[0]), str(args[1])
    return (os.path.realpath(program) == os.path.realpath(sys.executable)
            and script.endswith(".py") and os.path.isfile(script))


def _socket_dir():
    path = os.path.join(tempfile.gettempdir(), "bert-family-zygotes-%d" % os.getpid())
    os.makedirs(path, exist_ok=True)
    return path


class Popen(subprocess.Popen):
    """`subprocess.Popen`; a Python script runs forked from the server unless `fork` is False.

    `script_pid` is the pid of the process running the script (the same as
    `pid` for a real process); signals go to it.
    """

    def __init__(self, args, *, fork=True, **kwargs):
        if kwargs.get("shell") or not fork or not _forkable(args):
            super().__init__(args, **kwargs)
            self.script_pid = self.pid
            return
        args = [str(a) for a in args]
        read_fd, write_fd = os.pipe()
        command = [sys.executable, _PROXY, "proxy", str(write_fd), _socket_dir(),
                   str(os.getpid()), "--"] + args[1:]
        kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + (write_fd,)
        try:
            super().__init__(command, **kwargs)
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "rb") as control:
            pid = control.read().strip()
        self.args = args
        self.script_pid = int(pid) if pid else None

    def send_signal(self, sig):
        self.poll()
        if self.returncode is not None:
            return
        target = self.script_pid if self.script_pid is not None else self.pid
        try:
            os.kill(target, sig)
        except ProcessLookupError:
            pass


def run(args, *, input=None, capture_output=False, timeout=None, check=False,  # pylint: disable=redefined-builtin
        **kwargs):
    """`subprocess.run` with `Popen` above."""
    if capture_output:
        kwargs["stdout"] = PIPE
        kwargs["stderr"] = PIPE
    if input is not None:
        kwargs["stdin"] = PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            process.kill()
            e.stdout, e.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)
