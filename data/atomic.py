"""Writing a whole file so that nothing half-written is ever seen.

The text goes to a temporary file beside the target (same directory, so the
rename stays on one file system), is flushed to disk, gets the permissions an
ordinary `open(path, "w")` would give (mkstemp's are private), and is then
renamed over the target in one step: a reader sees the old file or the new
one, and a crash or a kill leaves at most the temporary, removed on every
exit path this process controls. Remote paths (`gs://...`) go through
`tf.io.gfile` with a temporary name and a rename.
"""

import os
import tempfile

__all__ = ["write_text"]


def _is_remote(path):
    return "://" in path


def write_text(path, text):
    """Writes `text` (UTF-8, "\\n" line ends) to `path` atomically; returns `path`."""
    path = os.fspath(path)
    if _is_remote(path):
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        tmp = "%s.tmp-%d" % (path, os.getpid())
        try:
            with tf.io.gfile.GFile(tmp, "w") as writer:
                writer.write(text)
            tf.io.gfile.rename(tmp, path, overwrite=True)
        finally:
            if tf.io.gfile.exists(tmp):
                tf.io.gfile.remove(tmp)
        return path
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as writer:
            writer.write(text)
            writer.flush()
            os.fsync(writer.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
