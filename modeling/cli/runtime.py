"""The process runtime of every script in `run/`: a quiet start, one-line errors, SIGTERM.

Importing this module does nothing to the process. A script calls `start()`
FIRST, before anything imports TensorFlow (``run/script.py`` does it when a
script's first line, ``import script``, runs), and hands its `main` to
`run`::

    from modeling.cli import runtime
    runtime.start()                    # quiet TensorFlow start, SIGTERM, CPU settings
    ...
    if __name__ == "__main__":
        runtime.run(main, required_flags=["input_file"])

The console entry points of the package (``bert-run-classifier``, ...:
`modeling.cli.entry`) do the same for the script they start.

* **Quiet start.** On a CPU machine TensorFlow prints half a dozen C++ lines
  while it loads ("failed call to cuInit: ... CUDA error", "oneDNN custom
  operations are on", "Could not find cuda drivers", "This TensorFlow binary
  is optimized to use ...") that read like failures. They are printed before
  TensorFlow's log level applies, so this module holds standard error while
  TensorFlow loads and finds its devices, and then passes on every line that
  is not one of these known start-up notices. C++ INFO lines are hidden
  afterwards (``TF_CPP_MIN_LOG_LEVEL=1``). Nothing is hidden when the user
  sets ``TF_CPP_MIN_LOG_LEVEL`` or passes ``--verbosity`` / ``-v``.
* **One-line errors.** Bad input of any kind (the library raises
  `ValueError` subclasses naming the file, line, flag or field), a missing
  or unreadable file (`OSError`), a corrupt input file TensorFlow rejects
  (`tf.errors.OpError`), a registry miss: ``<script>: error: <message>``
  on one line, exit status 1. `--verbosity=1` re-raises, for the traceback.
* **SIGTERM** (`timeout`, schedulers) ends the run as an exception, so
  every temporary file is removed; a training loop first saves a checkpoint
  (`data.termination`). Exit status 143; Ctrl-C gives 130.
* **CPU settings.** TensorFlow's caching (BFC) allocator holds CPU tensors,
  and its oneDNN kernels are on (`modeling.training.cpu_runtime`;
  ``TF_CPU_ALLOCATOR_USE_BFC=false`` / ``TF_ENABLE_ONEDNN_OPTS=0`` turn
  them off).
* **Quiet child processes.** ``with script.filtered_stderr(noise):`` drops,
  from what this process and the processes it starts write to standard
  error, the lines matching `noise` and TensorFlow's start-up notices (each
  Beam DirectRunner worker is a fresh Python process that prints both);
  everything else passes on as it comes. Nothing is dropped when verbose.
"""

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
import threading

from absl import app
from absl import flags
from absl import logging

from data import termination
from modeling import registry
from modeling.training import cpu_runtime

__all__ = ["filtered_stderr", "one_line", "run", "start", "user_errors"]

# TensorFlow's start-up notices on machines without a GPU, or with the
# usual duplicate-registration warnings of GPU builds.
_NOISE = re.compile("|".join([
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"port\.cc:\d+\] oneDNN custom operations are on",
    r"cudart_stub\.cc:\d+\] Could not find cuda drivers",
    r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized",
    r"^To enable the following instructions: .* rebuild TensorFlow",
    r"failed call to cuInit",
    r"Unable to register cu(DNN|FFT|BLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
    r"Attempting to register factory for plugin cu(DNN|FFT|BLAS)",
]))


def _wants_verbose(argv, environ):
    if "TF_CPP_MIN_LOG_LEVEL" in environ:
        return True
    for arg in argv[1:]:
        if arg == "--":
            break
        if arg.startswith("--verbosity") or arg == "-v" or arg.startswith("-v="):
            return True
    return False


@contextlib.contextmanager
def _start_notices_filtered():
    """Holds standard error while TensorFlow loads; passes on what is not a start-up notice."""
    if _wants_verbose(sys.argv, _USER_ENVIRON):
        yield
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "1"
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    capture = tempfile.TemporaryFile()
    try:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
    finally:
        capture.seek(0)
        text = capture.read().decode("utf-8", errors="replace")
        capture.close()
        for line in text.splitlines():
            if line.strip() and not _NOISE.search(line):
                sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _quiet_tensorflow_start():
    """Imports TensorFlow and finds its devices with the start-up notices filtered out."""
    with _start_notices_filtered():
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        tf.config.list_physical_devices()


class _QuietTensorFlowLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with the start-up notices filtered out."""

    def __init__(self, spec):
        self._spec = spec

    def create_module(self, spec):
        return self._spec.loader.create_module(self._spec)

    def exec_module(self, module):
        module.__spec__ = self._spec
        module.__loader__ = self._spec.loader
        with _start_notices_filtered():
            self._spec.loader.exec_module(module)
            module.config.list_physical_devices()


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Makes the first ``import tensorflow``, wherever it happens, a quiet one."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        quiet = importlib.util.spec_from_loader(name, _QuietTensorFlowLoader(spec),
                                                origin=spec.origin, is_package=True)
        quiet.submodule_search_locations = spec.submodule_search_locations
        quiet.has_location = spec.has_location
        quiet.cached = spec.cached
        return quiet


def _lazy_tensorflow_wanted():
    """Whether the running script asked for TensorFlow only when something needs it.

    A script that does not always need TensorFlow (a few seconds to import)
    sets ``IMPORT_TENSORFLOW_LAZILY = True`` before ``import script``.
    """
    # A worker process that multiprocessing spawns runs the script again as
    # __mp_main__.
    wanted = any(getattr(sys.modules.get(name), "IMPORT_TENSORFLOW_LAZILY", False)
                 for name in ("__main__", "__mp_main__"))
    return wanted and "tensorflow" not in sys.modules


def _pump(read_fd, write_fd, noise):
    """Copies lines from `read_fd` to `write_fd` until end of file, less the noise."""
    pending = b""
    with os.fdopen(read_fd, "rb", buffering=0) as source, \
            os.fdopen(write_fd, "wb", buffering=0) as sink:
        while True:
            try:
                data = source.read(65536)
            except OSError:
                data = b""
            lines = (pending + data).split(b"\n")
            pending = lines.pop() if data else b""
            for line in lines:
                text = line.decode("utf-8", errors="replace")
                if not text.strip() or _NOISE.search(text) or (noise and noise.search(text)):
                    continue
                try:
                    sink.write(line + b"\n")
                except OSError:
                    pass
            if not data:
                return


@contextlib.contextmanager
def filtered_stderr(noise=None, quiet_loggers=()):
    """Standard error of this process and of those it starts, less the noise.

    Args:
      noise: a compiled regular expression; matching lines are dropped, as
        are TensorFlow's start-up notices.
      quiet_loggers: names of Python loggers (e.g. a library's chatty INFO
        messages) held at WARNING meanwhile.

    Nothing is dropped when the run is verbose (``--verbosity``,
    ``TF_CPP_MIN_LOG_LEVEL`` set by the user).
    """
    if _wants_verbose(sys.argv, _USER_ENVIRON):
        yield
        return
    import logging as python_logging  # pylint: disable=g-import-not-at-top
    loggers = [python_logging.getLogger(name) for name in quiet_loggers]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), python_logging.WARNING))
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(read_fd, os.dup(saved), noise),
                            name="filtered_stderr", daemon=True)
    pump.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe ends when no child holds it any more
        os.close(saved)
        pump.join(timeout=5)
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


# What the user set, before `start` sets TF_CPP_MIN_LOG_LEVEL.
_USER_ENVIRON = dict(os.environ)
_STARTED = []


def start():
    """Prepares this process to be a script; once, before anything imports TensorFlow.

    SIGTERM ends the process in an orderly way from here on (imports
    included), TensorFlow's caching CPU allocator and oneDNN kernels are
    asked for (`modeling.training.cpu_runtime`), and TensorFlow is imported
    with its start-up notices filtered (now, or at its first import when the
    script set ``IMPORT_TENSORFLOW_LAZILY = True``).
    """
    if _STARTED:
        return
    _STARTED.append(True)
    global _USER_ENVIRON  # pylint: disable=global-statement
    _USER_ENVIRON = dict(os.environ)
    termination.install()
    cpu_runtime.configure()
    if _lazy_tensorflow_wanted():
        sys.meta_path.insert(0, _QuietTensorFlowFinder())
    else:
        _quiet_tensorflow_start()
    global USER_ERRORS  # pylint: disable=global-statement
    USER_ERRORS = user_errors()



def _tensorflow_op_error():
    """tf.errors.OpError when TensorFlow is loaded (else nothing can raise it)."""
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    return getattr(errors, "OpError", None)


def _first_line(text):
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def one_line(error):
    """The message of `error` on one line, with the file name where there is one."""
    op_error = _tensorflow_op_error()
    if op_error is not None and isinstance(error, op_error):
        message = _first_line(error.message)
        # Graph-node decorations add nothing for the user.
        message = re.sub(r"\s*\[\[\{\{node [^}]*\}\}\]\].*$", "", message)
        return "%s (%s)" % (message, type(error).__name__)
    if isinstance(error, OSError) and error.filename and error.strerror:
        text = "%s: %s" % (error.filename, error.strerror)
        if error.filename2:
            text += " (%s)" % error.filename2
        return text
    if isinstance(error, RecursionError):
        return "input nested too deeply to read (%s)" % _first_line(error)
    if isinstance(error, MemoryError):
        return "out of memory%s" % (": " + _first_line(error) if str(error) else "")
    if isinstance(error, KeyError) and len(error.args) == 1:
        return _first_line(error.args[0])
    return " ".join(line.strip() for line in str(error).strip().splitlines() if line.strip())


# What bad input or a bad environment raises; anything else is a bug and
# keeps its traceback.
_BASE_USER_ERRORS = (ValueError, OSError, registry.RegistryError, RecursionError,
                     MemoryError)


def user_errors():
    """The exception classes of bad input: `USER_ERRORS`, plus tf.errors.OpError once
    TensorFlow is loaded."""
    op_error = _tensorflow_op_error()
    return _BASE_USER_ERRORS + ((op_error,) if op_error is not None else ())


USER_ERRORS = user_errors()


def _script_name():
    return os.path.splitext(os.path.basename(sys.argv[0] or "script"))[0]


def _exit_if_dropped():
    """Exits with 143 if SIGTERM's exit was caught and dropped somewhere."""
    dropped = termination.dropped()
    if dropped:
        termination.acknowledge()
        print("%s: %s" % (_script_name(), dropped), file=sys.stderr)
        sys.exit(termination.EXIT_STATUS)


def _wrap(main):
    def wrapped(argv):
        name = _script_name()
        try:
            main(argv)
            # SIGTERM's exit may have been caught somewhere and the run gone on.
            termination.raise_if_dropped()
        except termination.Terminated as e:
            termination.acknowledge()
            sys.stdout.flush()
            print("%s: %s" % (name, e), file=sys.stderr)
            sys.exit(termination.EXIT_STATUS)
        except KeyboardInterrupt:
            sys.stdout.flush()
            print("%s: interrupted" % name, file=sys.stderr)
            sys.exit(130)
        except user_errors() as e:
            if logging.get_verbosity() >= logging.DEBUG:
                raise
            sys.stdout.flush()
            print("%s: error: %s" % (name, one_line(e)), file=sys.stderr)
            _exit_if_dropped()
            sys.exit(1)
    return wrapped


def _parse_flags(argv):
    # absl's own parse errors are two lines and a usage hint; one line here.
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        print("%s: error: %s" % (_script_name(), _first_line(e)), file=sys.stderr)
        sys.exit(2)


def run(main, required_flags=()):
    """`absl.app.run(main)` with one-line errors, SIGTERM handling and required flags.

    Exit status: 0 done, 1 bad input or environment (one line on standard
    error), 2 bad flags, 130 Ctrl-C, 143 SIGTERM.
    """
    start()  # (a script that called it first is already started)
    # Strict: this process is the script, and must end once SIGTERM came
    # (not set by start: tests start scripts' code in their own process).
    termination.install(strict=True)
    _exit_if_dropped()  # dropped during the imports, before strict mode
    if required_flags:
        flags.mark_flags_as_required(list(required_flags))
    app.run(_wrap(main), flags_parser=_parse_flags)
