"""One output directory, one run: a lock file with the owner's pid and host.

Two runs writing checkpoints into one directory overwrite each other's
`ckpt-N` files while both report success. `OutputDirLock(dir)` creates
`dir/.run.lock` exclusively (O_CREAT | O_EXCL) holding JSON
``{"pid", "host", "started", "command"}``:

* another live process of this host holds it: `RunLockError`, naming the
  pid and the command;
* its process is dead (a crash, kill -9): the lock is taken over, with a
  warning;
* it belongs to another host, which cannot be checked from here: refused,
  saying which file to delete once that run is known to be gone.

Released on exit (the `with` block, `release()`, or interpreter exit).
Remote directories (`gs://`) are not locked (no exclusive create there);
a warning says so.
"""

import atexit
import glob
import json
import os
import shutil
import socket
import sys
import time

from absl import logging

from data import atomic
from data import termination

__all__ = ["LOCK_NAME", "OutputDirLock", "RunLockError", "sweep_partial_outputs"]

LOCK_NAME = ".run.lock"


class RunLockError(ValueError):
    """The output directory belongs to another run."""


class OutputDirLock(object):
    """Exclusive ownership of `directory` by this process."""

    def __init__(self, directory, flag="--output_dir"):
        self.directory = os.fspath(directory)
        self.flag = flag
        self.path = os.path.join(self.directory, LOCK_NAME)
        self.held = False

    def _describe(self):
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "command": " ".join(sys.argv)[:500]})

    def _read_owner(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def acquire(self):
        if "://" in self.directory:
            logging.warning("%s=%s is remote: not locked against a second run.",
                            self.flag, self.directory)
            return self
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            raise RunLockError("%s=%s is a file, expected a directory"
                               % (self.flag, self.directory))
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise RunLockError("%s=%s: cannot create the directory (%s)"
                               % (self.flag, self.directory, e.strerror or e)) from None
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._handle_existing()
                continue
            except OSError as e:
                raise RunLockError("%s=%s is not writable (%s)"
                                   % (self.flag, self.directory, e.strerror or e)) from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self._describe())
            self.held = True
            atexit.register(self.release)
            termination.at_forced_exit(self.release)
            sweep_partial_outputs(self.directory)
            return self
        raise RunLockError("%s=%s: could not take %s (another run keeps taking it)"
                           % (self.flag, self.directory, self.path))

    def _handle_existing(self):
        owner = self._read_owner()
        if owner is None:
            # Being written right now, or garbage: look again shortly.
            time.sleep(0.2)
            owner = self._read_owner()
        if isinstance(owner, dict):
            pid, host = owner.get("pid"), owner.get("host")
            if host == socket.gethostname() and isinstance(pid, int):
                if pid != os.getpid() and atomic.pid_alive(pid):
                    raise RunLockError(
                        "%s=%s is in use by another run (pid %d on this host, started %s: "
                        "%s); wait for it or choose another %s"
                        % (self.flag, self.directory, pid, owner.get("started", "?"),
                           owner.get("command", "?"), self.flag))
                logging.warning("Taking over %s from a run that is gone (pid %s).",
                                self.path, pid)
            else:
                raise RunLockError(
                    "%s=%s is in use by a run on host %s (pid %s, started %s); if that run "
                    "is gone, delete %s" % (self.flag, self.directory, host, pid,
                                            owner.get("started", "?"), self.path))
        else:
            logging.warning("Replacing unreadable lock file %s.", self.path)
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def release(self):
        if not self.held:
            return
        owner = self._read_owner()
        if isinstance(owner, dict) and owner.get("pid") == os.getpid():
            try:
                os.remove(self.path)
            except OSError:
                pass
        self.held = False

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def sweep_partial_outputs(directory):
    """Removes what a killed run left in `directory`; call only while holding its lock.

    That is: this project's temporaries of dead processes
    (`data.atomic.sweep_stale_temporaries`) and TensorFlow's half-written
    checkpoint directories (``ckpt-N_temp/``; the `checkpoint` index file
    only ever names complete checkpoints). Returns the paths removed.
    """
    directory = os.fspath(directory)
    if "://" in directory or not os.path.isdir(directory):
        return []
    removed = atomic.sweep_stale_temporaries(directory)
    for path in glob.glob(os.path.join(glob.escape(directory), "*_temp")):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for path in removed:
        logging.warning("Removed %s, left by a run that was killed.", path)
    return removed
