"""script_runner / zygote.py: a forked script behaves as `python script.py` does."""

import os
import signal
import subprocess
import sys
import time

import pytest

import script_runner

PROBE = r'''
import json, os, sys
mode = sys.argv[1]
if mode == "report":
    import numpy
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("PROBE_VALUE"),
                      "tensorflow_loaded": "tensorflow" in sys.modules,
                      "path0": sys.path[0], "name": __name__,
                      "random": float(numpy.random.random()), "pid": os.getpid()}))
    sys.stderr.write("to stderr\n")
elif mode == "exit":
    sys.stdout.write("partial")  # unflushed at exit: the interpreter flushes it
    sys.exit(int(sys.argv[2]))
elif mode == "raise":
    raise ValueError("boom")
elif mode == "echo":
    print(sys.stdin.read().upper(), end="")
elif mode == "ending":
    # What the interpreter does when a script ends: each must happen in a forked child too.
    import atexit, threading, time
    log = open(sys.argv[2], "w")  # never closed: the end of the process flushes it
    log.write("written without close\n")
    atexit.register(lambda: print("atexit ran", flush=True))
    def late():
        time.sleep(0.5)
        print("non-daemon thread finished", flush=True)
    threading.Thread(target=late).start()
    sys.exit(sys.argv[3] if len(sys.argv) > 3 else None)
elif mode == "interrupt":
    raise KeyboardInterrupt
elif mode == "sleep":
    import signal, time
    if len(sys.argv) > 2:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(os.getpid(), flush=True)
    time.sleep(60)
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    path = tmp_path_factory.mktemp("probe") / "probe.py"
    path.write_text(PROBE)
    return str(path)


def _report(probe, tmp_path, **kwargs):
    import json  # pylint: disable=g-import-not-at-top
    result = script_runner.run([sys.executable, probe, "report", "x y"], capture_output=True,
                               text=True, timeout=300, cwd=str(tmp_path),
                               env=dict(os.environ, PROBE_VALUE="v1"), **kwargs)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "to stderr\n"
    return json.loads(result.stdout)


def test_forked_script_gets_arguments_environment_and_directory(probe, tmp_path):
    forked = _report(probe, tmp_path)
    real = _report(probe, tmp_path, fork=False)
    for report in (forked, real):
        assert report["argv"] == [probe, "report", "x y"]
        assert report["cwd"] == str(tmp_path)
        assert report["env"] == "v1"
        assert report["path0"] == os.path.dirname(probe)
        assert report["name"] == "__main__"
    # The forked one started with TensorFlow imported (the server's), the real one not.
    assert forked["tensorflow_loaded"] and not real["tensorflow_loaded"]
    # Each forked child's global NumPy generator is seeded afresh, as in a new process.
    assert _report(probe, tmp_path)["random"] != forked["random"]


def test_exit_status_tracebacks_and_standard_input(probe):
    done = script_runner.run([sys.executable, probe, "exit", "7"], capture_output=True,
                             text=True, timeout=300)
    assert (done.returncode, done.stdout) == (7, "partial")
    done = script_runner.run([sys.executable, probe, "raise"], capture_output=True, text=True,
                             timeout=300)
    assert done.returncode == 1
    assert done.stderr.rstrip().splitlines()[-1] == "ValueError: boom"
    assert "Traceback (most recent call last)" in done.stderr
    done = script_runner.run([sys.executable, probe, "echo"], input="abc", capture_output=True,
                             text=True, timeout=300)
    assert (done.returncode, done.stdout) == (0, "ABC")
    with pytest.raises(subprocess.CalledProcessError):
        script_runner.run([sys.executable, probe, "exit", "3"], capture_output=True,
                          timeout=300, check=True)


@pytest.mark.parametrize("fork", [True, False])
def test_a_script_ends_as_in_a_real_interpreter(probe, tmp_path, fork):
    """Threads joined, atexit run, files flushed, SystemExit's message and status, SIGINT.

    The forked child skips the module teardown of a real process
    (`zygote._run_as_main`); none of this may differ.
    """
    log = tmp_path / ("log%d.txt" % fork)
    done = script_runner.run([sys.executable, probe, "ending", str(log)], capture_output=True,
                             text=True, timeout=300, fork=fork)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "non-daemon thread finished\natexit ran\n"
    assert log.read_text() == "written without close\n"
    done = script_runner.run([sys.executable, probe, "ending", str(log), "it failed"],
                             capture_output=True, text=True, timeout=300, fork=fork)
    assert done.returncode == 1 and done.stderr.splitlines()[-1] == "it failed"
    assert done.stdout.endswith("atexit ran\n")
    done = script_runner.run([sys.executable, probe, "interrupt"], capture_output=True,
                             text=True, timeout=300, fork=fork)
    assert done.returncode == -signal.SIGINT
    assert done.stderr.rstrip().splitlines()[-1] == "KeyboardInterrupt"


def _alive(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return "zombie" not in f.read().lower()
    except FileNotFoundError:
        return False


def _start_sleeper(probe, *extra):
    proc = script_runner.Popen([sys.executable, probe, "sleep"] + list(extra),
                               stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    assert pid == proc.script_pid != proc.pid
    return proc, pid


@pytest.mark.parametrize("sig,status", [(signal.SIGKILL, -signal.SIGKILL),
                                        (signal.SIGTERM, -signal.SIGTERM)])
def test_signals_reach_the_script_and_its_status_comes_back(probe, sig, status):
    proc, pid = _start_sleeper(probe)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == status
    assert not _alive(pid)
    proc.stdout.close()


def test_a_handled_sigterm_gives_the_scripts_own_status(probe):
    proc, _ = _start_sleeper(probe, "handle")
    proc.terminate()
    assert proc.wait(timeout=60) == 143
    proc.stdout.close()


def test_a_timeout_kills_the_script(probe):
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        script_runner.run([sys.executable, probe, "sleep"], capture_output=True, text=True,
                          timeout=3)
    pid = int(timed_out.value.stdout)
    assert pid != os.getpid() and not _alive(pid)


def test_killing_the_proxy_kills_the_script(probe):
    proc, pid = _start_sleeper(probe)
    os.kill(proc.pid, signal.SIGKILL)  # the proxy, not the script
    proc.wait(timeout=60)
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)
    proc.stdout.close()


def test_other_commands_start_real_processes():
    proc = script_runner.Popen([sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE)
    assert proc.script_pid == proc.pid
    assert proc.communicate(timeout=60)[0] == b"1\n"
