"""The Apache Beam pipeline writes the local writer's bytes; bad Beam flags are one line.

`data.pretraining.beam_pipeline` on Beam's DirectRunner with two worker
processes (``direct_num_workers=2``, ``direct_running_mode=multi_processing``)
must write, for the same corpus, options and chunking, the very files of
`data.pretraining.writer` -- for one output file and for three, over several
chunks -- and `run/create_pretraining_data.py --runner=beam` must do the same
from the command line, with Beam's worker chatter kept off standard error.

Multi-processing runs pay a fresh Python with TensorFlow per worker (about
10 s a run here), so they are made once, in module fixtures, and the script
run goes on in a subprocess meanwhile; the other cases use the in-process
DirectRunner (about a second).
"""

import concurrent.futures
import filecmp
import importlib
import os
import re
import subprocess
import sys

import pytest

from data import corpus as corpus_lib
from data.pretraining import beam_pipeline
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "create_pretraining_data.py")
MULTI_PROCESSING = "--direct_num_workers=2 --direct_running_mode=multi_processing"
DOCUMENTS_PER_CHUNK = 40  # the sample corpus (268 documents) makes 7 chunks
TIMEOUT = 300
# The script's quiet start is part of what is checked, so TF_CPP_MIN_LOG_LEVEL
# (conftest sets it for this process) is not passed on: a user's setting
# would turn the filtering off.
SCRIPT_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
SCRIPT_ENV["CUDA_VISIBLE_DEVICES"] = ""
# What must not reach the user's terminal from a beam run.
NOISE = re.compile(r"^INFO:|Worker: severity|cuInit|apitools|semi_persistent|prism|"
                   r"Discarding unparseable|Traceback|oneDNN|cuda drivers")


def _options(vocab_file, **overrides):
    fields = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=64,
                  max_predictions_per_seq=10, random_seed=12345, dupe_factor=2,
                  masked_lm_prob=0.15, short_seq_prob=0.1)
    fields.update(overrides)
    return pretraining_data.InstanceOptions(**fields)


def _paths(directory, stem, n):
    return [os.path.join(str(directory), "%s-%d.tfrecord" % (stem, k)) for k in range(n)]


def _same_bytes(a_files, b_files):
    return [filecmp.cmp(a, b, shallow=False) for a, b in zip(a_files, b_files)]


def _without_time(summary_text, paths):
    """Summary.describe() less its time line, output paths replaced by their index."""
    lines = [line for line in summary_text.splitlines() if not line.startswith("time:")]
    text = "\n".join(lines)
    for index, path in enumerate(paths):
        text = text.replace(path, "<output %d>" % index)
    return text


def _start_script(args):
    return subprocess.Popen([sys.executable, SCRIPT] + args, cwd=REPO_ROOT, env=SCRIPT_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sample_corpus_files, sample_vocab_file):
    """The local writer and the multi-processing Beam pipeline, 1 and 3 outputs, plus the script.

    Returns {name: (summary or CompletedProcess-like, output paths)}.
    """
    directory = tmp_path_factory.mktemp("beam")
    options = _options(sample_vocab_file)
    script_outputs = _paths(directory, "script", 2)
    script = _start_script([
        "--input_file=" + ",".join(sample_corpus_files),
        "--output_file=" + ",".join(script_outputs),
        "--vocab_file=" + sample_vocab_file, "--max_seq_length=64",
        "--max_predictions_per_seq=10", "--dupe_factor=2",
        "--documents_per_chunk=%d" % DOCUMENTS_PER_CHUNK, "--log_examples=1",
        "--runner=beam", "--beam_runner=DirectRunner",
        "--beam_pipeline_options=" + MULTI_PROCESSING])
    results = {}
    try:
        for n in (1, 2, 3):
            paths = _paths(directory, "local%d" % n, n)
            results["local", n] = (pretraining_writer.create_pretraining_data(
                sample_corpus_files, paths, options,
                documents_per_chunk=DOCUMENTS_PER_CHUNK), paths)
        for n in (1, 3):
            paths = _paths(directory, "beam%d" % n, n)
            results["beam", n] = (beam_pipeline.create_pretraining_data(
                sample_corpus_files, paths, options, pipeline_args=MULTI_PROCESSING,
                documents_per_chunk=DOCUMENTS_PER_CHUNK), paths)
        stdout, stderr = script.communicate(timeout=TIMEOUT)
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    results["script"] = ((script.returncode, stdout, stderr), script_outputs)
    results["directory"] = str(directory)
    return results


@pytest.mark.parametrize("num_outputs", [1, 3])
def test_beam_writes_the_local_writers_bytes(runs, num_outputs):
    local, local_paths = runs["local", num_outputs]
    beam, beam_paths = runs["beam", num_outputs]
    assert local.chunks > 1 and beam.chunks == local.chunks
    assert all(os.path.getsize(p) > 0 for p in local_paths)
    assert _same_bytes(local_paths, beam_paths) == [True] * num_outputs
    assert (_without_time(beam.describe(), beam_paths)
            == _without_time(local.describe(), local_paths))


def test_nothing_is_left_beside_the_outputs(runs):
    names = sorted(os.listdir(runs["directory"]))
    assert not [name for name in names if name.startswith(".")], names


def test_script_runs_beam_quietly_with_the_same_bytes(runs):
    (returncode, stdout, stderr), paths = runs["script"]
    assert returncode == 0, stderr
    local, local_paths = runs["local", 2]
    assert _same_bytes(local_paths, paths) == [True, True]
    assert "instances:          %d" % local.instances in stdout
    assert [line for line in stderr.splitlines() if NOISE.search(line)] == []
    assert "*** Example ***" in stderr  # --log_examples, from the first chunk


def test_bad_line_in_a_chunk_is_reported_as_the_local_writer_does(tmp_path, sample_corpus_files,
                                                                  sample_vocab_file):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A first sentence.\nA second one.\n\n"
                    b"\xff\xfe\xfa\xfb\xfc\xfd\xf0\xf1\xf2 not text\n")
    inputs = [sample_corpus_files[0], str(bad)]
    options = _options(sample_vocab_file)
    outputs = [str(tmp_path / "out.tfrecord")]
    with open(outputs[0], "w") as f:
        f.write("previous run")
    with pytest.raises(corpus_lib.CorpusError) as local_error:
        pretraining_writer.create_pretraining_data(inputs, outputs, options,
                                                   documents_per_chunk=DOCUMENTS_PER_CHUNK)
    with pytest.raises(corpus_lib.CorpusError) as beam_error:
        beam_pipeline.create_pretraining_data(inputs, outputs, options,
                                              documents_per_chunk=DOCUMENTS_PER_CHUNK)
    assert str(beam_error.value) == str(local_error.value)
    assert "bad.txt:4: looks binary" in str(beam_error.value)
    with open(outputs[0]) as f:
        assert f.read() == "previous run"
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "out.tfrecord"]


def test_more_output_files_than_instances(tmp_path, sample_vocab_file):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("One two three.\nFour five six.\n", encoding="utf-8")
    options = _options(sample_vocab_file, dupe_factor=1)
    local_paths = _paths(tmp_path, "local", 3)
    beam_paths = _paths(tmp_path, "beam", 3)
    local = pretraining_writer.create_pretraining_data([str(corpus)], local_paths, options)
    beam = beam_pipeline.create_pretraining_data([str(corpus)], beam_paths, options)
    assert beam.instances == local.instances == 1
    assert _same_bytes(local_paths, beam_paths) == [True] * 3
    assert beam.empty_output_files == beam_paths[1:]


def test_empty_corpus_is_refused_before_any_pipeline(tmp_path, sample_vocab_file):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n\n", encoding="utf-8")
    with pytest.raises(corpus_lib.CorpusError, match="No pre-training instance"):
        beam_pipeline.create_pretraining_data([str(corpus)], [str(tmp_path / "o")],
                                              _options(sample_vocab_file))
    assert os.listdir(tmp_path) == ["empty.txt"]


def test_pipeline_options_are_parsed_by_beam():
    options = beam_pipeline.pipeline_options("DirectRunner", MULTI_PROCESSING)
    direct = options.get_all_options()
    assert direct["direct_num_workers"] == 2
    assert direct["direct_running_mode"] == "multi_processing"
    assert direct["runner"] == "DirectRunner"
    flink = beam_pipeline.pipeline_options(
        "FlinkRunner", ["--flink_master=localhost:8081", "--environment_type", "LOOPBACK"])
    assert flink.get_all_options()["flink_master"] == "localhost:8081"


@pytest.mark.parametrize("runner,args,message", [
    ("Nope", "", "--beam_runner=Nope: expected one of DirectRunner, DataflowRunner"),
    ("DirectRunner", "--direct_num_workers=2 '--x", "No closing quotation"),
    ("DirectRunner", "direct_num_workers=2", "'direct_num_workers=2' is not an option"),
    ("DirectRunner", "--no_such_option=1", "unknown Beam option --no_such_option"),
    ("DirectRunner", "--direct_num_workers=two", "invalid int value: 'two'"),
    ("DirectRunner", "--direct_running_mode=fast", "invalid choice: 'fast'"),
    ("DirectRunner", "--runner=FlinkRunner", "choose the runner with --beam_runner"),
])
def test_bad_pipeline_options_are_one_line(runner, args, message, capfd):
    with pytest.raises(beam_pipeline.BeamOptionsError) as error:
        beam_pipeline.pipeline_options(runner, args)
    text = str(error.value)
    assert message in text and "\n" not in text
    assert capfd.readouterr().err == ""  # argparse's usage text is not printed


def test_dataflow_without_googles_extras_is_one_line():
    try:
        importlib.import_module("apache_beam.runners.dataflow.internal.apiclient")
    except ImportError:
        pass
    else:
        pytest.skip("apache-beam[gcp] is installed")
    with pytest.raises(beam_pipeline.BeamOptionsError, match=r"apache-beam\[gcp\]"):
        beam_pipeline.pipeline_options("DataflowRunner", "--project=p")


def _run_script(args):
    completed = subprocess.run([sys.executable, SCRIPT] + args, cwd=REPO_ROOT, env=SCRIPT_ENV,
                               capture_output=True, text=True, timeout=TIMEOUT)
    return completed.returncode, completed.stderr


def test_script_bad_beam_flags_are_one_line(tmp_path, sample_corpus_files, sample_vocab_file):
    common = ["--input_file=" + sample_corpus_files[0],
              "--output_file=" + str(tmp_path / "out.tfrecord"),
              "--vocab_file=" + sample_vocab_file]
    cases = {
        "unknown runner": (common + ["--runner=beam", "--beam_runner=Nope"], 2,
                           "flag --beam_runner=Nope: value should be one of <%s>"
                           % "|".join(beam_pipeline.RUNNERS)),
        "malformed options": (common + ["--runner=beam", "--beam_pipeline_options=--a='b"], 1,
                              "create_pretraining_data: error: --beam_pipeline_options: "
                              "No closing quotation"),
        "beam flag, local runner": (common + ["--beam_runner=DirectRunner"], 1,
                                    "--beam_runner applies to --runner=beam"),
    }
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        futures = {name: pool.submit(_run_script, args)
                   for name, (args, _, _) in cases.items()}
        outcomes = {name: future.result() for name, future in futures.items()}
    for name, (_, status, message) in cases.items():
        returncode, stderr = outcomes[name]
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert (returncode, len(lines)) == (status, 1), (name, stderr)
        assert lines[0].startswith("create_pretraining_data: error: "), (name, lines[0])
        assert message in lines[0], (name, lines[0])
    assert os.listdir(tmp_path) == []
