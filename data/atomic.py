"""Writing files so that nothing half-written is ever seen, and nothing is lost.

Every output goes to a temporary file beside its target (same directory, so
the rename stays on one file system) and is renamed over the target in one
step when complete: a reader sees the old file or the new one. Temporary
names say who made them::

    .<name>.tmp-<host>-<pid>-<random>

so that temporaries are

* removed on every exit path this process sees: exceptions, `sys.exit`,
  SIGTERM (see `data.termination`, which turns it into an exception) and
  interpreter exit (`atexit`) -- `live_temporaries()` lists what is open;
* swept at the next start (`sweep_stale_temporaries(directory)`) when a
  kill -9 or a power cut left them: a temporary whose process (same host)
  no longer runs is removed.

`check_outputs(outputs, inputs, directories)` refuses, before anything is
written, an output that is also an input (or named twice), so a mistyped
flag cannot replace a corpus, a vocabulary or a checkpoint (an input
checkpoint counts as all its files: a prefix's ``.index`` and ``.data-*``, a
folder's ``checkpoint`` file, shards and configs), and an output directory
that is the folder of an input, so that a run cannot resume from, rotate
away or overwrite the checkpoint or corpus it starts from.

Remote paths (`gs://...`) go through `tf.io.gfile` with the same names.
"""

import atexit
import contextlib
import os
import re
import shutil
import socket
import threading

from data import termination

__all__ = ["OutputConflictError", "TemporaryOutputs", "atomic_output", "check_outputs",
           "commit", "discard", "input_files", "input_folder", "live_temporaries", "pid_alive",
           "sweep_stale_temporaries", "temporary_name", "write_text"]

_LOCK = threading.Lock()
_LIVE = set()
# A temporary, or a file whose prefix is one (checkpoint shards: `.index`, ...).
_TEMP_PATTERN = re.compile(
    r"^\.(?P<name>.+)\.tmp-(?P<host>[^-]+)-(?P<pid>\d+)-[0-9a-f]{6}(\..*)?$")


class OutputConflictError(ValueError):
    """An output path is also an input, or is named twice."""


def is_remote(path):
    """Whether `path` names a file system other than the local one (`gs://...`)."""
    return "://" in str(path)


def _gfile():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf.io.gfile


def _host():
    # Hyphens would make the name ambiguous; the host is only compared.
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def temporary_name(path):
    """A fresh temporary path beside `path` (not created), registered for clean-up."""
    path = os.fspath(path)
    directory, base = os.path.split(path)
    # os.urandom, not the `random` module: drawing from the global generator
    # would shift every later seed drawn from it (Keras draws its dropout
    # seeds there), so a run's numbers would depend on which files it wrote.
    name = ".%s.tmp-%s-%d-%s" % (base, _host(), os.getpid(), os.urandom(3).hex())
    tmp = os.path.join(directory, name) if directory else name
    with _LOCK:
        _LIVE.add(tmp)
    return tmp


def live_temporaries():
    """The temporaries of this process that still exist (or may)."""
    with _LOCK:
        return sorted(_LIVE)


def _forget(tmp):
    with _LOCK:
        _LIVE.discard(tmp)


def _exists(path):
    return _gfile().exists(path) if is_remote(path) else os.path.lexists(path)


def _remove(path):
    """Removes a file or a directory tree, quietly."""
    try:
        if is_remote(path):
            gfile = _gfile()
            if gfile.isdir(path):
                gfile.rmtree(path)
            elif gfile.exists(path):
                gfile.remove(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)
    except Exception:  # pylint: disable=broad-except
        pass


def discard(tmp):
    """Removes a temporary (if it exists) and stops tracking it."""
    _remove(tmp)
    _forget(tmp)


def commit(tmp, path):
    """Renames the complete temporary `tmp` over `path`."""
    if is_remote(path):
        _gfile().rename(tmp, path, overwrite=True)
    else:
        umask = os.umask(0)
        os.umask(umask)
        try:
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's files are private
        except OSError:
            pass
        os.replace(tmp, path)
    _forget(tmp)


@atexit.register
def _remove_all_live():
    for tmp in live_temporaries():
        discard(tmp)


termination.at_forced_exit(_remove_all_live)


def pid_alive(pid):
    """Whether process `pid` of this host exists (a PermissionError means it does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def sweep_stale_temporaries(directory):
    """Removes temporaries in `directory` left by dead processes of this host.

    Returns the paths removed. Temporaries of live processes, and of other
    hosts (which cannot be checked from here), are left alone.
    """
    directory = os.fspath(directory) or "."
    removed = []
    try:
        names = (_gfile().listdir(directory) if is_remote(directory)
                 else os.listdir(directory))
    except (OSError, Exception):  # pylint: disable=broad-except
        return removed
    host = _host()
    for name in names:
        match = _TEMP_PATTERN.match(name.rstrip("/"))
        if not match or match.group("host") != host:
            continue
        pid = int(match.group("pid"))
        if pid == os.getpid() or pid_alive(pid):
            continue
        path = os.path.join(directory, name.rstrip("/"))
        _remove(path)
        removed.append(path)
    return removed


def _same_file(a, b):
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


# The files of a checkpoint folder besides its prefixes' shards: TensorFlow's
# state file, HF weights, and the model's config (bert_config.json, config.json,
# mass_config.json, elmo_options.json, ...).
_CHECKPOINT_FILE = re.compile(
    r"^(checkpoint|.+\.index|.+\.data-\d{5}-of-\d{5}|.+\.safetensors|(.+_)?config\.json|"
    r"(.+_)?options\.json)$")


def _listdir(directory):
    try:
        return _gfile().listdir(directory) if is_remote(directory) else os.listdir(directory)
    except Exception:  # pylint: disable=broad-except
        return []


def _isdir(path):
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def _join(directory, name):
    return directory.rstrip("/") + "/" + name if is_remote(directory) else os.path.join(
        directory, name)


def _dirname(path):
    if is_remote(path):
        return path.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(path))


def _is_prefix(path):
    """Whether `path` names a TensorFlow checkpoint by its prefix (`ckpt-3` of `ckpt-3.index`)."""
    return not _exists(path) and _exists(path + ".index")


def _checkpoint_folder_files(directory):
    return [_join(directory, name.rstrip("/")) for name in sorted(_listdir(directory))
            if _CHECKPOINT_FILE.match(name.rstrip("/"))]


def input_files(path):
    """The existing files the input `path` stands for, to be refused as outputs.

    A file is itself; a checkpoint prefix its shards (``.index``,
    ``.data-*``) and its folder's ``checkpoint`` file and configs; a folder
    the checkpoint files in it (``checkpoint``, shards, ``*.safetensors``,
    ``*config.json``, ``*options.json``).
    """
    path = os.fspath(path)
    if not path:
        return []
    if _isdir(path):
        return _checkpoint_folder_files(path)
    if _exists(path):
        return [path]
    if _is_prefix(path):
        directory = _dirname(path)
        base = os.path.basename(path.rstrip("/"))
        shards = [_join(directory, name) for name in sorted(_listdir(directory))
                  if name == base + ".index" or re.match(
                      re.escape(base) + r"\.data-\d{5}-of-\d{5}$", name)]
        state = [p for p in _checkpoint_folder_files(directory)
                 if not re.search(r"\.(index|data-\d{5}-of-\d{5})$", p)]
        return shards + state
    return []


def input_folder(path):
    """The folder holding the input `path` (itself if a folder; None if it does not exist)."""
    path = os.fspath(path)
    if not path:
        return None
    if _isdir(path):
        return path
    if _exists(path) or _is_prefix(path):
        return _dirname(path)
    return None


def check_outputs(outputs, inputs=(), directories=()):
    """Refuses outputs that are also inputs, or that are named twice.

    Args:
      outputs: list of (flag, path) pairs, e.g. [("--output_file", "a.tfrecord")].
      inputs: list of (flag, path) pairs the run reads: files, checkpoint
        prefixes or folders (see `input_files`: each counts as all its files).
      directories: list of (flag, path) pairs of output directories, e.g.
        [("--output_dir", "out")]: refused when one is the folder of an input
        (a run there would resume from, rotate away or overwrite it).

    Raises:
      OutputConflictError naming both flags, before anything is written.
    """
    outputs = [(flag, os.fspath(path)) for flag, path in outputs]
    inputs = [(flag, os.fspath(path)) for flag, path in inputs if path]
    for i, (flag, path) in enumerate(outputs):
        for other_flag, other in outputs[:i]:
            if _same_file(path, other) or (
                    not is_remote(path) and
                    os.path.abspath(path) == os.path.abspath(other)):
                raise OutputConflictError(
                    "%s names %s twice (also in %s): each output must be a different file"
                    % (flag, path, other_flag))
        if not _exists(path):
            continue
        for input_flag, input_path in inputs:
            if is_remote(path) != is_remote(input_path):
                continue
            for member in input_files(input_path):
                if not _same_file(path, member):
                    continue
                if member == input_path:
                    raise OutputConflictError(
                        "%s=%s is also an input (%s): refusing to overwrite it; choose "
                        "another output path" % (flag, path, input_flag))
                raise OutputConflictError(
                    "%s=%s is also an input (a file of %s=%s): refusing to overwrite it; "
                    "choose another output path" % (flag, path, input_flag, input_path))
    for flag, directory in directories:
        if not directory or not _isdir(os.fspath(directory)):
            continue
        directory = os.fspath(directory)
        for input_flag, input_path in inputs:
            if is_remote(directory) != is_remote(input_path):
                continue
            folder = input_folder(input_path)
            if folder is not None and _same_file(directory, folder):
                raise OutputConflictError(
                    "%s=%s is the folder of %s=%s, an input: refusing to write there (the "
                    "run would overwrite or resume from what it reads); choose another %s"
                    % (flag, directory, input_flag, input_path, flag))


class TemporaryOutputs(object):
    """Temporaries for several outputs, renamed into place together.

        outputs = TemporaryOutputs(paths)
        try:
            ... write to outputs.temporaries ...
            outputs.commit()
        finally:
            outputs.discard()      # no-op after commit

    Until `commit`, nothing exists under the final names; after an error
    (or SIGTERM, or exit) the temporaries are removed.
    """

    def __init__(self, paths):
        self.paths = [os.fspath(p) for p in paths]
        for path in self.paths:
            directory = os.path.dirname(path)
            if directory:
                if is_remote(directory):
                    _gfile().makedirs(directory)
                else:
                    _make_directory(directory, path)
        self.temporaries = [temporary_name(p) for p in self.paths]
        self.committed = False

    def commit(self):
        for tmp, path in zip(self.temporaries, self.paths):
            commit(tmp, path)
        self.committed = True

    def discard(self):
        if not self.committed:
            for tmp in self.temporaries:
                discard(tmp)


def _make_directory(directory, path):
    """`os.makedirs`, with a file in the way named as such."""
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = directory
        while blocker and not os.path.exists(blocker):
            blocker = os.path.dirname(blocker)
        raise OutputConflictError(
            "cannot write %s: %s is a file, not a directory" % (path, blocker)) from None


@contextlib.contextmanager
def atomic_output(path, mode="w", encoding="utf-8"):
    """`with atomic_output(path) as f:` writes `f` to `path` only if the block succeeds."""
    path = os.fspath(path)
    if is_remote(path):
        tmp = temporary_name(path)
        try:
            with _gfile().GFile(tmp, mode) as handle:
                yield handle
            commit(tmp, path)
        finally:
            discard(tmp)
        return
    directory = os.path.dirname(os.path.abspath(path))
    _make_directory(directory, path)
    tmp = temporary_name(path)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
        with open(tmp, mode.replace("w", "x"), **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        commit(tmp, path)
    finally:
        discard(tmp)


def write_text(path, text):
    """Writes `text` (UTF-8, "\\n" line ends) to `path` atomically; returns `path`."""
    with atomic_output(path) as handle:
        handle.write(text)
    return os.fspath(path)

