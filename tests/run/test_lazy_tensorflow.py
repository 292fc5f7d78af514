"""Scripts that set IMPORT_TENSORFLOW_LAZILY import TensorFlow only when needed, quietly.

`run/create_pretraining_data.py` with Google's defaults on an English corpus
never imports TensorFlow (a few seconds of every run); when something does
import it later (here: a script importing it after `import script`), the
start-up notices are still filtered and TensorFlow is the real, whole module.
"""

import os
import subprocess
import sys

import tensorflow as tf

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN = os.path.join(REPO, "run")
# The quiet start is part of what is checked: no TF_CPP_MIN_LOG_LEVEL from the tests.
ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}

_RUN_AND_REPORT = r"""
import atexit, runpy, sys
sys.path.insert(0, %(run)r)
atexit.register(lambda: print("TENSORFLOW_LOADED=%%s" %% ("tensorflow" in sys.modules)))
sys.argv = [%(script)r] + sys.argv[1:]
runpy.run_path(%(script)r, run_name="__main__")
"""


def _create_pretraining_data(tmp_path, corpus_lines, sample_vocab_file):
    corpus = os.path.join(str(tmp_path), "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus_lines) + "\n")
    output = os.path.join(str(tmp_path), "out.tfrecord")
    script = os.path.join(RUN, "create_pretraining_data.py")
    code = _RUN_AND_REPORT % {"run": RUN, "script": script}
    result = subprocess.run(
        [sys.executable, "-c", code, "--input_file=%s" % corpus, "--output_file=%s" % output,
         "--vocab_file=%s" % sample_vocab_file, "--max_seq_length=32",
         "--max_predictions_per_seq=5", "--dupe_factor=2", "--log_examples=0"],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=REPO)
    assert result.returncode == 0, result.stderr
    return result, output


def test_english_corpus_runs_without_tensorflow(tmp_path, sample_vocab_file,
                                                sample_corpus_files):
    with open(sample_corpus_files[0], encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:400]
    result, output = _create_pretraining_data(tmp_path, lines, sample_vocab_file)
    assert "TENSORFLOW_LOADED=False" in result.stdout
    count = sum(1 for _ in tf.data.TFRecordDataset(output))
    assert count > 50 and ("instances:          %d" % count) in result.stdout


def test_late_import_is_quiet_and_whole(tmp_path):
    path = os.path.join(str(tmp_path), "late.py")
    with open(path, "w") as f:
        f.write("IMPORT_TENSORFLOW_LAZILY = True\n"
                "import sys\n"
                "sys.path.insert(0, %r)\n"
                "import script\n"
                "assert 'tensorflow' not in sys.modules\n"
                "import tensorflow as tf\n"
                "from tensorflow.python.framework import ops\n"
                "print(type(tf.__spec__.loader).__name__, tf.__spec__.origin.endswith("
                "'__init__.py'), float(tf.reduce_sum(tf.ones([3]))))\n" % RUN)
    result = subprocess.run([sys.executable, path], capture_output=True, text=True,
                            timeout=300, env=ENV, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["SourceFileLoader", "True", "3.0"]
    assert result.stderr.strip() == ""
