# coding=utf-8
"""Every script against bad input: nothing lost, nothing hangs, every mistake named.

Each case runs a script of `run/` on one mistake a user makes and checks what
`run/script.py` promises:

* bad input: exit status 1 and exactly one line ``<script>: error: <message>``
  on standard error (no traceback) naming the file, line, flag or field at
  fault; bad flags (absl's own checks): the same line, exit status 2;
  SIGTERM: 143;
* nothing of the user's is lost: every input is byte-identical afterwards
  (hashes); an output that is also an input is refused before anything is
  written;
* nothing is left half-written: no temporary (``.<name>.tmp-<host>-<pid>-<hex>``)
  and no TensorFlow ``*_temp`` directory stays in an output directory, and
  no output appears under its final name when the run failed; what a killed
  run left is swept by the next one;
* nothing hangs: every subprocess has a timeout, so a hang fails its case.

Scripts run forked from a server that has imported TensorFlow already
(`script_runner`, `zygote.py`), and the cases run two at a time: a module fixture runs every selected case function in a pool of two
threads, and `test_script[case]` reports that case's outcome (its own
assertion, with its traceback). Shared artefacts (a tiny config, a
pretraining TFRecord, a Google-format checkpoint) are built once, in this
process.

The cases live here and in `bad_inputs_analysis.py`, `bad_inputs_jobs.py`
and `bad_inputs_tools.py`; what they share is in `bad_inputs_kit.py`. Each
case counts for the script of `run/` it is about (it must run it), and every
script needs at least three (`test_every_script_of_run_has_its_cases`): a
new script is not done until it is in the table.
"""

import concurrent.futures
import gzip
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import script_runner
import bad_inputs_kit
from bad_inputs_kit import (  # pylint: disable=unused-import
    SAMPLE_DIR,
    build_artefacts,
    check_artefacts,
    run_case,
    PARALLEL,
    TINY_CONFIG,
    _sha256,
    _host,
    _temporaries,
    _leftovers,
    _dead_pid,
    run_script,
    assert_error,
    assert_ok,
    _checkpoint_tensors,
    _write_safetensors,
    CASES,
    case,
    Context,
    _cpd_flags,
    _start_writing_and_wait_for_temporary,
    _finished,
)


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory):
    a = build_artefacts(tmp_path_factory.mktemp("bad_inputs_shared"))
    yield a
    check_artefacts(a)


# Listed longest first, so that the pool of two stays busy to the end.

@case(script="run_pretraining")
def trained_run_takes_over_a_dead_lock_and_sweeps_leftovers(ctx):
    """A lock of a dead pid is taken over; a killed run's leftovers are swept; the run succeeds."""
    out = ctx.path("run")
    os.makedirs(out)
    dead = _dead_pid()
    with open(os.path.join(out, ".run.lock"), "w") as f:
        json.dump({"pid": dead, "host": socket.gethostname(), "started": "2024-01-01T00:00:00",
                   "command": "run_pretraining.py (killed)"}, f)
    os.makedirs(os.path.join(out, "ckpt-7_temp", "part-00000-of-00001"))
    with open(os.path.join(out, "ckpt-7_temp", "part-00000-of-00001", "data"), "wb") as f:
        f.write(b"\0" * 100)
    stale = os.path.join(out, ".ckpt-7.index.tmp-%s-%d-a1b2c3" % (_host(), dead))
    with open(stale, "wb") as f:
        f.write(b"half")
    # A temporary of a process that still runs (this one) is not anybody's leftover.
    alive = os.path.join(out, ".other.tmp-%s-%d-d4e5f6" % (_host(), os.getpid()))
    with open(alive, "wb") as f:
        f.write(b"in use")
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_train", "--num_train_steps=2", "--learning_rate=1e-3"),
        inputs=[ctx.a.tfrecord, ctx.a.config])
    assert_ok(result)
    assert "Taking over" in result.stderr and "pid %d" % dead in result.stderr
    for path in (os.path.join(out, "ckpt-7_temp"), stale):
        assert "Removed %s, left by a run that was killed" % path in result.stderr
    assert not os.path.exists(os.path.join(out, ".run.lock")), "the lock outlived the run"
    assert not os.path.exists(os.path.join(out, "ckpt-7_temp"))
    assert not os.path.exists(stale)
    assert os.path.exists(alive), "a live process's temporary was swept"
    os.remove(alive)
    assert not _leftovers(out)
    assert tf.train.latest_checkpoint(out).endswith("ckpt-2")
    return out


@case(script="run_pretraining")
def nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(ctx):
    out = ctx.path("run")
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_train", "--num_train_steps=10", "--save_checkpoints_steps=1",
        "--learning_rate=1e8"), inputs=[ctx.a.tfrecord, ctx.a.config], outputs=[out])
    line = assert_error(result, "run_pretraining", "--nan_policy", "NaN or infinite")
    step = int(re.search(r"step (\d+)", line).group(1))
    latest = tf.train.latest_checkpoint(out)
    assert latest is not None, "no checkpoint before the loss diverged: %s" % line
    saved = int(latest.rsplit("-", 1)[1])
    # It diverged within a few steps, and the last checkpoint is the step before.
    assert 1 <= saved == step - 1 <= 8, (line, latest)
    assert latest in line, line
    tensors = _checkpoint_tensors(latest)
    assert len(tensors) > 20
    bad = [name for name, value in tensors.items() if not np.all(np.isfinite(value))]
    assert not bad, "the last good checkpoint holds non-finite values: %s" % bad


@case(script="run_pretraining")
def nan_loss_with_nan_policy_skip_goes_on(ctx):
    out = ctx.path("run")
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_train", "--num_train_steps=4", "--save_checkpoints_steps=1",
        "--learning_rate=1e8", "--nan_policy=skip"),
        inputs=[ctx.a.tfrecord, ctx.a.config], outputs=[out])
    assert_ok(result)
    assert re.search(r"update\(s\) skipped .*--nan_policy=skip", result.stderr), (
        result.stderr[-3000:])
    latest = tf.train.latest_checkpoint(out)
    assert latest.endswith("ckpt-4")
    tensors = _checkpoint_tensors(latest)
    assert len(tensors) > 20
    # The weights and the optimizer's slots: everything a resumed run continues
    # from. The optimizer's `gradient_norm` is no state but the TensorBoard
    # record of the last update's gradient norm: NaN when that update was skipped.
    bad = [name for name, value in tensors.items()
           if not np.all(np.isfinite(value)) and "/_gradient_norm/" not in name]
    assert not bad, "the final checkpoint holds non-finite values: %s" % bad


@case(script="create_pretraining_data")
def sigterm_while_writing_leaves_nothing(ctx):
    out_dir = ctx.path("out")
    proc, output, corpus, _ = _start_writing_and_wait_for_temporary(ctx, out_dir)
    corpus_hash = _sha256(corpus)
    proc.send_signal(signal.SIGTERM)
    result = _finished(proc, ctx)
    assert result.returncode == 143, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "create_pretraining_data: terminated by SIGTERM" in result.stderr
    assert not _leftovers(out_dir), _leftovers(out_dir)
    assert not os.path.exists(output), "a half-written output under its final name"
    assert _sha256(corpus) == corpus_hash


@case(script="create_pretraining_data")
def sigkill_leaves_a_temporary_that_the_next_run_sweeps(ctx):
    out_dir = ctx.path("out")
    proc, output, _, temporaries = _start_writing_and_wait_for_temporary(ctx, out_dir)
    proc.send_signal(signal.SIGKILL)
    result = _finished(proc, ctx)
    assert result.returncode == -signal.SIGKILL
    left = _temporaries(out_dir)
    assert left == temporaries and "-%d-" % proc.script_pid in os.path.basename(left[0]), left
    assert not os.path.exists(output)
    # The same command again (on a small input): the dead run's temporary goes.
    result = run_script("create_pretraining_data",
                        _cpd_flags(ctx.a, [ctx.a.corpus], [output]),
                        inputs=[ctx.a.corpus, ctx.a.vocab], outputs=[out_dir])
    assert_ok(result)
    assert os.listdir(out_dir) == ["big.tfrecord"]


@case(needs=["trained_run_takes_over_a_dead_lock_and_sweeps_leftovers"],
      script="run_pretraining")
def num_train_steps_0_evaluates_an_existing_checkpoint(ctx):
    out = ctx.path("run")
    shutil.copytree(ctx.result_of("trained_run_takes_over_a_dead_lock_and_sweeps_leftovers"), out)
    checkpoint_files = [os.path.join(out, n) for n in os.listdir(out) if n.startswith("ckpt-")]
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_eval", "--num_train_steps=0"),
        inputs=[ctx.a.tfrecord, ctx.a.config] + checkpoint_files, outputs=[out])
    assert_ok(result)
    with open(os.path.join(out, "eval_results.txt")) as f:
        results = dict(line.strip().split(" = ") for line in f)
    assert float(results["global_step"]) == 2 and np.isfinite(float(results["loss"]))


@case()
def run_pretraining_refuses_a_directory_locked_by_a_live_run(ctx):
    out = ctx.path("run")
    os.makedirs(out)
    lock = os.path.join(out, ".run.lock")
    with open(lock, "w") as f:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(),
                   "started": "2024-01-01T00:00:00", "command": "pytest (the live run)"}, f)
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_train", "--num_train_steps=2"), inputs=[ctx.a.tfrecord, ctx.a.config, out])
    assert_error(result, "run_pretraining", "pid %d" % os.getpid(), out)
    assert os.listdir(out) == [".run.lock"]


def _cpd_refusal(ctx, inputs, outputs, *needles, keep=()):
    result = run_script("create_pretraining_data", _cpd_flags(ctx.a, inputs, outputs),
                        inputs=list(inputs) + [ctx.a.vocab] + list(keep),
                        outputs=[ctx.dir])
    assert_error(result, "create_pretraining_data", *needles)
    return result


@case()
def cpd_output_file_is_an_input_file(ctx):
    corpus = ctx.path("corpus.txt")
    shutil.copyfile(ctx.a.corpus, corpus)
    _cpd_refusal(ctx, [corpus], [corpus], "--output_file=%s" % corpus, "--input_file")


@case()
def cpd_output_file_is_the_vocab_file(ctx):
    # Its own copy: were it overwritten, the other cases would not notice.
    vocab = ctx.path("vocab.txt")
    shutil.copyfile(ctx.a.vocab, vocab)
    result = run_script("create_pretraining_data",
                        _cpd_flags(ctx.a, [ctx.a.corpus], [vocab], vocab=vocab),
                        inputs=[ctx.a.corpus, vocab], outputs=[ctx.dir])
    assert_error(result, "create_pretraining_data", "--output_file=%s" % vocab, "--vocab_file")


@case()
def cpd_same_output_named_twice(ctx):
    out = ctx.path("out", "a.tfrecord")
    _cpd_refusal(ctx, [ctx.a.corpus], [out, ctx.path("out", "b.tfrecord"), out],
                 "--output_file", out, "twice")
    assert not os.path.exists(ctx.path("out")), "something was written before the refusal"


@case()
def cpd_second_output_under_a_regular_file(ctx):
    blocker = ctx.path("not_a_directory")
    with open(blocker, "w") as f:
        f.write("a file of the user\n")
    first = ctx.path("first.tfrecord")
    _cpd_refusal(ctx, [ctx.a.corpus], [first, os.path.join(blocker, "second.tfrecord")],
                 blocker, "is a file, not a directory", keep=[blocker])
    assert not os.path.exists(first), "the first output exists although the run failed"
    assert not _temporaries(ctx.dir)


@case()
def cpd_binary_input(ctx):
    gz = ctx.path("corpus.txt.gz")
    with open(ctx.a.corpus, "rb") as src, gzip.open(gz, "wb") as dst:
        dst.write(src.read())
    out = ctx.path("out.tfrecord")
    _cpd_refusal(ctx, [gz], [out], "%s:1:" % gz, "binary")
    assert not os.path.exists(out)


@case()
def cpd_only_line_longer_than_max_line_bytes(ctx):
    corpus = ctx.path("long.txt")
    with open(corpus, "w") as f:
        f.write("word " * 400 + "\n")
    out = ctx.path("out.tfrecord")
    result = run_script("create_pretraining_data",
                        _cpd_flags(ctx.a, [corpus], [out], "--max_line_bytes=1000"),
                        inputs=[corpus, ctx.a.vocab], outputs=[ctx.dir])
    assert_error(result, "create_pretraining_data", corpus,
                 "1 line(s) longer than --max_line_bytes=1000 were skipped")
    assert not os.path.exists(out)


@case()
def cpd_more_output_files_than_instances(ctx):
    corpus = ctx.path("tiny.txt")
    with open(corpus, "w") as f:
        f.write("One two three.\nFour five six.\nSeven eight nine.\n")
    outputs = [ctx.path("out", "%d.tfrecord" % i) for i in range(4)]
    result = run_script("create_pretraining_data", _cpd_flags(ctx.a, [corpus], outputs),
                        inputs=[corpus, ctx.a.vocab], outputs=[ctx.dir])
    assert_ok(result)
    assert re.search(r"warning: 3 of 4 output files hold no instance: .*%s"
                     % re.escape(outputs[3]), result.stdout), result.stdout
    assert sorted(os.listdir(ctx.path("out"))) == ["%d.tfrecord" % i for i in range(4)]


@case()
def create_vocab_vocab_file_is_an_input_file(ctx):
    corpus = ctx.path("corpus.txt")
    shutil.copyfile(ctx.a.corpus, corpus)
    result = run_script("create_vocab", ["--input_file=%s" % corpus, "--vocab_file=%s" % corpus],
                        inputs=[corpus], outputs=[ctx.dir])
    assert_error(result, "create_vocab", "--vocab_file=%s" % corpus, "--input_file")


@case()
def create_vocab_empty_input(ctx):
    corpus = ctx.path("empty.txt")
    open(corpus, "w").close()
    vocab = ctx.path("out", "vocab.txt")
    result = run_script("create_vocab", ["--input_file=%s" % corpus, "--vocab_file=%s" % vocab],
                        inputs=[corpus], outputs=[ctx.dir])
    assert_error(result, "create_vocab", corpus)
    assert not os.path.exists(vocab)


def _create_vocab_flag_refusal(ctx, flag, status=1):
    """create_vocab.py on the shared corpus with one bad `flag`: refused, nothing written."""
    vocab = ctx.path("out", "vocab.txt")
    result = run_script("create_vocab", ["--input_file=%s" % ctx.a.corpus,
                                         "--vocab_file=%s" % vocab, flag],
                        inputs=[ctx.a.corpus], outputs=[ctx.dir])
    assert_error(result, "create_vocab", flag, status=status)
    assert not os.path.exists(ctx.path("out"))


@case()
def create_vocab_vocab_size_too_small(ctx):
    _create_vocab_flag_refusal(ctx, "--vocab_size=10")


def _pretrain_refusal(ctx, extra, *needles, config=None, input_file=None, inputs=()):
    out = ctx.path("run")
    flags = ctx.pretrain_flags(out, *extra, config=config, input_file=input_file)
    result = run_script("run_pretraining", flags,
                        inputs=[input_file or ctx.a.tfrecord, config or ctx.a.config] +
                        list(inputs), outputs=[ctx.dir])
    line = assert_error(result, "run_pretraining", *needles)
    if os.path.isdir(out):  # nothing but the model config, written atomically
        assert set(os.listdir(out)) <= {"bert_config.json"}, os.listdir(out)
    return line


@case()
def run_pretraining_empty_tfrecord(ctx):
    empty = ctx.path("empty.tfrecord")
    open(empty, "wb").close()
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], empty, "no records",
                      input_file=empty)


@case()
def run_pretraining_tfrecord_cut_inside_a_record_header(ctx):
    with open(ctx.a.tfrecord, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    boundary = 8 + 4 + length + 4  # the end of the first record
    cut = ctx.path("cut.tfrecord")
    with open(cut, "wb") as f:
        f.write(data[:boundary + 5])
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], cut, "header",
                      input_file=cut)


@case()
def run_pretraining_text_file_as_tfrecord(ctx):
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], ctx.a.corpus,
                      "not a TFRecord file", input_file=ctx.a.corpus)


@case()
def run_pretraining_tfrecord_of_another_max_seq_length(ctx):
    # A position table of 64, so that only the file contradicts --max_seq_length=64.
    config = ctx.config(max_position_embeddings=64)
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2", "--max_seq_length=64"],
                      ctx.a.tfrecord, "--max_seq_length=64", config=config)


@case()
def run_pretraining_output_dir_is_a_file(ctx):
    out = ctx.path("run")
    with open(out, "w") as f:
        f.write("the user's file\n")
    result = run_script("run_pretraining", ctx.pretrain_flags(
        out, "--do_train", "--num_train_steps=2"),
        inputs=[ctx.a.tfrecord, ctx.a.config, out])
    assert_error(result, "run_pretraining", "--output_dir=%s" % out)


def _learning_rate_case(value):
    def fn(ctx):
        _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2",
                                "--learning_rate=%s" % value], "--learning_rate=")
        assert not os.path.exists(ctx.path("run")), "refused after creating --output_dir"
    fn.__name__ = "run_pretraining_learning_rate_%s" % value.replace("-", "minus_")
    return case()(fn)


for _value in ("nan", "inf", "-1"):
    _learning_rate_case(_value)


@case()
def run_pretraining_num_train_steps_0_with_do_train(ctx):
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=0"], "--num_train_steps=0",
                      "--do_train")


@case()
def run_pretraining_train_batch_size_0(ctx):
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2", "--train_batch_size=0"],
                      "--train_batch_size=0")


@case()
def config_without_hidden_size(ctx):
    config = ctx.config(hidden_size=None)
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], config, "hidden_size",
                      config=config)


@case()
def config_with_misspelt_key(ctx):
    config = ctx.config(hidden_size=None, hiddensize=16)
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], config, "hiddensize",
                      config=config)


@case()
def config_with_unknown_hidden_act(ctx):
    config = ctx.config(hidden_act="nonsense")
    _pretrain_refusal(ctx, ["--do_train", "--num_train_steps=2"], config, "hidden_act",
                      "nonsense", config=config)


def _extract_features(ctx, *extra, input_file=None, vocab=None, checkpoint=None):
    input_file = input_file or ctx.path("input.txt")
    if not os.path.exists(input_file):
        with open(input_file, "w", encoding="utf-8") as f:
            f.write("The river runs to the sea.\nFish swim. ||| They swim.\n")
    out_dir = ctx.path("out")
    output = os.path.join(out_dir, "features.jsonl")
    vocab = vocab or ctx.a.vocab
    checkpoint = checkpoint or ctx.a.checkpoint
    args = ["--input_file=%s" % input_file, "--output_file=%s" % output,
            "--vocab_file=%s" % vocab, "--bert_config_file=%s" % ctx.a.config,
            "--init_checkpoint=%s" % checkpoint, "--max_seq_length=16",
            "--layers=-1"] + list(extra)
    inputs = [input_file, vocab, ctx.a.config, checkpoint if os.path.isfile(checkpoint)
              else ctx.a.model_dir]
    existed = os.path.exists(output)
    result = run_script("extract_features", args, inputs=inputs + ([output] if existed else []),
                        outputs=[ctx.dir])
    return result, output


@case()
def extract_features_bad_layers(ctx):
    result, output = _extract_features(ctx, "--layers=-1,x")
    assert_error(result, "extract_features", "--layers=-1,x")
    assert not os.path.exists(output)


@case()
def extract_features_invalid_utf8_input(ctx):
    input_file = ctx.path("input.txt")
    with open(input_file, "wb") as f:
        f.write(b"The river runs to the sea.\nabc \xff\xfe def\n")
    # A previous run's output must survive the failed one.
    os.makedirs(ctx.path("out"))
    with open(ctx.path("out", "features.jsonl"), "w") as f:
        f.write('{"linex_index": 0}\n')
    result, _ = _extract_features(ctx, input_file=input_file)
    assert_error(result, "extract_features", "%s:2:" % input_file, "UTF-8")
    assert os.listdir(ctx.path("out")) == ["features.jsonl"]


@case()
def extract_features_vocab_smaller_than_the_config(ctx):
    vocab = ctx.path("small_vocab.txt")
    with open(ctx.a.vocab, encoding="utf-8") as src, open(vocab, "w", encoding="utf-8") as dst:
        dst.writelines(list(src)[:2000])
    result, output = _extract_features(ctx, vocab=vocab)
    assert_error(result, "extract_features", "--vocab_file=%s" % vocab, "2000",
                 "vocab_size=%d" % ctx.a.vocab_size)
    assert not os.path.exists(output)


def _safetensors_case(name, header, *needles):
    def fn(ctx):
        path = _write_safetensors(ctx.path("model.safetensors"), header())
        result, output = _extract_features(ctx, checkpoint=path)
        assert_error(result, "extract_features", path, *needles)
        assert not os.path.exists(output)
    fn.__name__ = "extract_features_safetensors_" + name
    return case()(fn)


_safetensors_case("header_without_dtype", lambda: json.dumps(
    {"bert.embeddings.word_embeddings.weight": {"shape": [2], "data_offsets": [0, 8]}}
).encode(), "no 'dtype'")
_safetensors_case("header_with_a_non_object_entry", lambda: json.dumps(
    {"bert.embeddings.word_embeddings.weight": [1, 2, 3]}).encode(), "expected an object")
_safetensors_case("header_nested_200000_levels", lambda: (
    b'{"a":' * 200000 + b"1" + b"}" * 200000), "nested too deeply")


@case()
def predict_masked_mask_beyond_max_seq_length(ctx):
    text = "one two three four five six seven eight nine ten [MASK]"
    result = run_script("predict_masked", [
        "--bert_config_file=%s" % ctx.a.config, "--vocab_file=%s" % ctx.a.vocab,
        "--init_checkpoint=%s" % ctx.a.checkpoint, "--max_seq_length=8", "--text=%s" % text],
        inputs=[ctx.a.config, ctx.a.vocab, ctx.a.model_dir])
    assert_error(result, "predict_masked", "--max_seq_length=8", "[MASK]")


@case()
def predict_masked_negative_top_k(ctx):
    result = run_script("predict_masked", [
        "--bert_config_file=%s" % ctx.a.config, "--vocab_file=%s" % ctx.a.vocab,
        "--init_checkpoint=%s" % ctx.a.checkpoint, "--top_k=-1", "--text=a [MASK] b"],
        inputs=[ctx.a.config, ctx.a.vocab, ctx.a.model_dir])
    assert_error(result, "predict_masked", "--top_k", status=2)


@case()
def run_classifier_generic_row_with_an_extra_column(ctx):
    data = ctx.path("data")
    os.makedirs(data)
    train = os.path.join(data, "train.tsv")
    with open(train, "w") as f:
        f.write("sentence\tlabel\nthe river runs\tpos\nfish swim\tin the sea\tneg\n"
                "the sun rises\tpos\n")
    out = ctx.path("run")
    result = run_script("run_classifier", [
        "--task_name=generic", "--data_dir=%s" % data, "--do_train",
        "--output_dir=%s" % out, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1"],
        inputs=[data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_classifier", "%s:3:" % train, "columns")
    assert not os.path.exists(os.path.join(out, "checkpoint"))


@case()
def run_classifier_eval_loss_overflows_on_a_score_of_1e30(ctx):
    """A dev score of 1e30 (finite, so accepted) makes the squared error infinite: the
    run stops naming the evaluation and the checkpoint; no eval_results.txt saying inf."""
    data = ctx.path("data")
    os.makedirs(data)
    rows = ["the river runs\t1.5", "fish swim in the sea\t3.0", "the sun rises\t4.5",
            "birds fly south\t2.0"]
    with open(os.path.join(data, "train.tsv"), "w") as f:
        f.write("sentence\tscore\n" + "\n".join(rows) + "\n")
    with open(os.path.join(data, "dev.tsv"), "w") as f:
        f.write("sentence\tscore\n" + rows[0] + "\nthe moon shines\t1e30\n")
    out = ctx.path("run")
    result = run_script("run_classifier", [
        "--task_name=generic", "--task_type=regression", "--data_dir=%s" % data,
        "--do_train", "--do_eval", "--output_dir=%s" % out, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--max_seq_length=16", "--train_batch_size=2", "--eval_batch_size=2",
        "--num_train_epochs=1"],
        inputs=[data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_classifier", "evaluation of the model at step 2 (%s" % out,
                 "loss = inf", "--nan_policy=skip")
    assert not os.path.exists(os.path.join(out, "eval_results.txt"))
    assert tf.train.latest_checkpoint(out)  # the trained model is kept


# ------------------------------------- issue 33: probe rows 7-9, 11-14, 17

GPT2_SAMPLE_DIR = os.path.join(SAMPLE_DIR, "gpt2")


def _tiny_gpt2(ctx, n_positions=16):
    """An HF GPT-2 folder (config.json, model.safetensors) of the sample vocabulary, random."""
    import safetensors.numpy  # pylint: disable=g-import-not-at-top
    folder = ctx.path("gpt2")
    os.makedirs(folder)
    with open(os.path.join(GPT2_SAMPLE_DIR, "vocab.json"), encoding="utf-8") as f:
        vocab_size = len(json.load(f))
    e, inner = 16, 32
    rng = np.random.RandomState(0)
    shapes = {"wte.weight": [vocab_size, e], "wpe.weight": [n_positions, e],
              "ln_f.weight": [e], "ln_f.bias": [e]}
    for name, shape in (("ln_1.weight", [e]), ("ln_1.bias", [e]),
                        ("attn.c_attn.weight", [e, 3 * e]), ("attn.c_attn.bias", [3 * e]),
                        ("attn.c_proj.weight", [e, e]), ("attn.c_proj.bias", [e]),
                        ("ln_2.weight", [e]), ("ln_2.bias", [e]),
                        ("mlp.c_fc.weight", [e, inner]), ("mlp.c_fc.bias", [inner]),
                        ("mlp.c_proj.weight", [inner, e]), ("mlp.c_proj.bias", [e])):
        shapes["h.0." + name] = shape
    safetensors.numpy.save_file(
        {name: (rng.normal(size=shape) * 0.02).astype(np.float32)
         for name, shape in shapes.items()}, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "vocab_size": vocab_size, "n_positions": n_positions,
                   "n_embd": e, "n_layer": 1, "n_head": 2, "n_inner": inner}, f)
    return folder


def _generate(ctx, *extra, merges=None):
    """run/generate.py on a tiny GPT-2; returns (result, output file)."""
    folder = _tiny_gpt2(ctx)
    merges = merges or os.path.join(GPT2_SAMPLE_DIR, "merges.txt")
    vocab = os.path.join(GPT2_SAMPLE_DIR, "vocab.json")
    output = ctx.path("out", "generated.jsonl")
    inputs = [folder, vocab, merges] + [a.split("=", 1)[1] for a in extra
                                        if a.startswith("--input_file=")]
    result = run_script("generate", [
        "--init_checkpoint=%s" % os.path.join(folder, "model.safetensors"),
        "--config_file=%s" % os.path.join(folder, "config.json"), "--vocab_file=%s" % vocab,
        "--merges_file=%s" % merges, "--output_file=%s" % output, "--max_new_tokens=2"]
        + list(extra), inputs=inputs, outputs=[ctx.dir])
    return result, output


def _merges_case(name, text):
    def fn(ctx):
        merges = ctx.path("merges.txt")
        with open(merges, "w", encoding="utf-8") as f:
            f.write(text)
        result, output = _generate(ctx, "--prompt=The baker opens", merges=merges)
        assert_error(result, "generate", "--merges_file", merges, "holds no merges")
        assert not os.path.exists(output)
    fn.__name__ = "generate_merges_file_" + name
    return case()(fn)


_merges_case("empty", "")
_merges_case("of_only_the_version_header", "#version: 0.2\n")


@case()
def generate_prompt_longer_than_the_model(ctx):
    prompts = ctx.path("prompts.txt")
    with open(prompts, "w", encoding="utf-8") as f:
        f.write("The baker opens\n" + "the baker sells bread " * 6 + "\n")
    result, output = _generate(ctx, "--input_file=%s" % prompts)
    line = assert_error(result, "generate", "--input_file=%s line 2" % prompts,
                        "the prompt has", "16 positions")
    assert "--max_new_tokens" not in line, line
    assert not os.path.exists(output)


def _squad_file(ctx, name, questions):
    question = {"question": "Where did the cat sit?",
                "answers": [{"text": "mat", "answer_start": 19}]}
    path = ctx.path(name)
    with open(path, "w") as f:
        json.dump({"version": "2.0", "data": [{"title": "t", "paragraphs": [{
            "context": "The cat sat on the mat.",
            "qas": [dict(question, **q) for q in questions]}]}]}, f)
    return path


def _squad_refusal(ctx, train, *needles, extra=()):
    out = ctx.path("run")
    result = run_script("run_squad", [
        "--vocab_file=%s" % ctx.a.vocab, "--bert_config_file=%s" % ctx.a.config,
        "--init_checkpoint=%s" % ctx.a.checkpoint, "--do_train", "--train_file=%s" % train,
        "--output_dir=%s" % out, "--max_seq_length=32", "--doc_stride=8",
        "--max_query_length=8"] + list(extra),
        inputs=[train, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    line = assert_error(result, "run_squad", train, *needles)
    assert not os.path.exists(out) or not os.listdir(out), os.listdir(out)
    return line


def _is_impossible_case(version_2):
    def fn(ctx):
        train = _squad_file(ctx, "train.json", [{"id": "q1", "is_impossible": "false"}])
        line = _squad_refusal(ctx, train, "'is_impossible'", '"false"',
                              "expected a JSON true or false",
                              extra=["--version_2_with_negative=%s" % version_2])
        assert "is true" not in line, line
    fn.__name__ = "squad_is_impossible_as_a_string_version_2_%s" % version_2.lower()
    return case()(fn)


_is_impossible_case("true")
_is_impossible_case("false")


@case()
def squad_question_ids_1_and_quoted_1(ctx):
    train = _squad_file(ctx, "train.json", [{"id": 1}, {"id": "1"}])
    _squad_refusal(ctx, train, 'the id "1"', "qas[1]", "already the id of")


@case()
def multitask_version_2_with_negative_as_a_string(ctx):
    data = ctx.path("which")
    os.makedirs(data)
    _squad_file(ctx, os.path.join("which", "train.json"), [{"id": "q1"}])
    tasks = ctx.path("tasks.json")
    with open(tasks, "w") as f:
        json.dump([{"name": "which", "processor": "squad", "data_dir": "which",
                    "head": "span_qa", "options": {"version_2_with_negative": "false"}}], f)
    out = ctx.path("run")
    result = run_script("run_multitask", [
        "--task_list_file=%s" % tasks, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--do_train", "--output_dir=%s" % out, "--max_seq_length=32"],
        inputs=[tasks, data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_multitask", tasks, "'options'", 'version_2_with_negative="false"',
                 "expected a JSON true or false")
    assert not os.path.exists(out) or not os.listdir(out), os.listdir(out)


def _siamese_score_case(split, score):
    def fn(ctx):
        data = ctx.path("pairs")
        os.makedirs(data)
        for name in ("train.tsv", "dev.tsv"):
            with open(os.path.join(data, name), "w") as f:
                f.write("car\tauto\t0.9\nsun\tmoon\t%s\n" % (score if name == split else "0.1"))
        out = ctx.path("run")
        result = run_script("run_siamese", [
            "--do_train", "--do_eval", "--data_dir=%s" % data, "--vocab_file=%s" % ctx.a.vocab,
            "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
            "--loss=cosine", "--max_seq_length=16", "--output_dir=%s" % out],
            inputs=[data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
        assert_error(result, "run_siamese", "%s:2:" % os.path.join(data, split),
                     "'%s' is not a finite number" % score)
        assert not os.path.exists(out) or not os.listdir(out), os.listdir(out)
    fn.__name__ = "siamese_%s_score_in_%s" % (score, split.split(".")[0])
    return case()(fn)


_siamese_score_case("train.tsv", "nan")
_siamese_score_case("dev.tsv", "inf")


def _max_texts_case(value):
    def fn(ctx):
        texts = ctx.path("texts.txt")
        with open(texts, "w") as f:
            f.write("The river runs.\nFish swim.\n")
        out = ctx.path("out")
        result = run_script("analyze_attention", [
            "--mode=stats", "--input_file=%s" % texts, "--output_dir=%s" % out,
            "--init_checkpoint=%s" % ctx.a.checkpoint, "--bert_config_file=%s" % ctx.a.config,
            "--vocab_file=%s" % ctx.a.vocab, "--max_texts=%d" % value],
            inputs=[texts, ctx.a.vocab, ctx.a.config, ctx.a.model_dir])
        assert_error(result, "analyze_attention", "--max_texts=%d" % value, status=2)
        assert not os.path.exists(out)
    fn.__name__ = "analyze_attention_max_texts_%s" % str(value).replace("-", "minus_")
    return case()(fn)


_max_texts_case(0)
_max_texts_case(-1)


@case()
def probe_cloze_every_answer_is_unk(ctx):
    facts = ctx.path("facts.tsv")
    with open(facts, "w", encoding="utf-8") as f:
        f.write("The sign is [MASK].\t\u2603\u2603\nIt snows [MASK].\t\u2603\n")
    output = ctx.path("out", "cloze.json")
    result = run_script("probe_cloze", [
        "--bert_config_file=%s" % ctx.a.config, "--vocab_file=%s" % ctx.a.vocab,
        "--init_checkpoint=%s" % ctx.a.checkpoint, "--facts_file=%s" % facts,
        "--output_file=%s" % output], inputs=[facts, ctx.a.vocab, ctx.a.config, ctx.a.model_dir],
        outputs=[ctx.dir])
    assert_error(result, "probe_cloze", facts, "no usable fact", "[UNK]")
    assert "facts: 0" not in result.stdout, result.stdout
    assert not os.path.exists(ctx.path("out"))


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


@case()
def data_service_dispatcher_on_a_port_in_use(ctx):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run_script("data_service", ["--role=dispatcher", "--port=%d" % port])
    assert_error(result, "data_service", "--port=%d" % port, "already in use")


@case()
def data_service_worker_whose_dispatcher_is_not_there(ctx):
    address = "grpc://localhost:%d" % _free_port()  # nothing listens there
    start = time.monotonic()
    result = run_script("data_service", ["--role=worker", "--dispatcher_address=%s" % address,
                                         "--dispatcher_wait_seconds=2"], timeout=60)
    assert_error(result, "data_service", "--dispatcher_address=%s" % address,
                 "no dispatcher accepts connections", "--dispatcher_wait_seconds")
    assert time.monotonic() - start < 50  # an answer, not a hang


@case()
def create_vocab_negative_num_unused(ctx):
    _create_vocab_flag_refusal(ctx, "--num_unused=-3", status=2)  # absl's lower bound


@case()
def compress_classifier_num_labels_contradicts_the_head(ctx):
    model_dir = ctx.path("classifier")
    module = tf.Module()
    module.output_weights = tf.Variable(tf.zeros([3, TINY_CONFIG["hidden_size"]]))
    prefix = tf.train.Checkpoint(model=module).write(os.path.join(model_dir, "ckpt-1"))
    output = ctx.path("out", "compression.json")
    result = run_script("compress_classifier", [
        "--bert_config_file=%s" % ctx.a.config, "--checkpoint=%s" % prefix,
        "--num_labels=2", "--max_seq_length=16", "--output_file=%s" % output],
        inputs=[model_dir, ctx.a.config], outputs=[ctx.dir])
    line = assert_error(result, "compress_classifier", "--num_labels=2", prefix, "3 labels")
    assert "--bert_config_file" not in line, line
    assert not os.path.exists(ctx.path("out"))


# ------------------------------------- issue 33: probe rows 2-6, 10 (outputs onto inputs)

def _two_languages(ctx, folder="corpora"):
    """Copies of the bundled English and Chinese halves in `folder`; returns (folder, files)."""
    folder = ctx.path(folder)
    os.makedirs(folder)
    files = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        files.append(os.path.join(folder, name))
        shutil.copyfile(os.path.join(SAMPLE_DIR, name), files[-1])
    return folder, files


@case()
def resample_languages_output_dir_is_the_folder_of_its_inputs(ctx):
    folder, files = _two_languages(ctx)
    result = run_script("resample_languages", [
        "--input_file=%s" % ",".join(files), "--output_dir=%s" % folder, "--noplot"],
        inputs=[folder])  # the folder's hashes: nothing replaced, nothing added
    assert_error(result, "resample_languages", "--output_dir=%s" % folder,
                 "is the folder of --input_file=%s" % files[0])


def case_per_value(name, values):
    """Registers `fn(ctx, value)` as one case per value, `<name>_<value>` ("-" -> "minus_")."""
    def register(fn):
        for value in values:
            def one(ctx, value=value):
                return fn(ctx, value)
            one.__name__ = "%s_%s" % (name, str(value).replace("-", "minus_"))
            case()(one)
        return fn
    return register


@case_per_value("resample_languages_total_words", (0, -5))
def _total_words(ctx, value):
    folder, files = _two_languages(ctx)
    out = ctx.path("out")
    result = run_script("resample_languages", [
        "--input_file=%s" % ",".join(files), "--output_dir=%s" % out,
        "--total_words=%d" % value], inputs=[folder])
    assert_error(result, "resample_languages", "--total_words=%d" % value, status=2)
    assert not os.path.exists(out)


@case()
def resample_languages_one_file_as_two_languages(ctx):
    folder, files = _two_languages(ctx)
    out = ctx.path("out")
    result = run_script("resample_languages", [
        "--input_file=%s,%s" % (files[0], files[0]), "--languages=en,zh",
        "--output_dir=%s" % out], inputs=[folder])
    assert_error(result, "resample_languages", files[0], "language en and of language zh")
    assert not os.path.exists(out)


def _model_copy_refusal(ctx, script, args, *needles):
    """`script` on a copy of the tiny checkpoint folder (with its bert_config.json), refused.

    `args` and `needles` are formatted with {folder}, {prefix} (the checkpoint's),
    {config} and {vocab}; the folder must stay byte-identical.
    """
    folder = ctx.path("model")
    shutil.copytree(ctx.a.model_dir, folder)
    names = dict(folder=folder, prefix=os.path.join(folder, os.path.basename(ctx.a.checkpoint)),
                 config=os.path.join(folder, "bert_config.json"), vocab=ctx.a.vocab)
    shutil.copyfile(ctx.a.config, names["config"])
    result = run_script(script, [arg.format(**names) for arg in args],
                        inputs=[folder, ctx.a.vocab])
    assert_error(result, script, *[needle.format(**names) for needle in needles])


@case()
def extract_features_output_file_is_the_checkpoints_index(ctx):
    _model_copy_refusal(ctx, "extract_features", [
        "--init_checkpoint={prefix}", "--bert_config_file={config}", "--vocab_file={vocab}",
        "--input_file=%s" % os.path.join(SAMPLE_DIR, "sample_en.txt"), "--max_seq_length=16",
        "--output_file={prefix}.index"],
        "--output_file={prefix}.index", "is also an input", "--init_checkpoint={prefix}")


@case()
def prune_heads_output_dir_is_its_init_checkpoint_folder(ctx):
    _model_copy_refusal(ctx, "prune_heads", [
        "--init_checkpoint={folder}", "--bert_config_file={config}", "--vocab_file={vocab}",
        "--heads_to_prune=0:1", "--max_seq_length=16", "--output_dir={folder}"],
        "--output_dir={folder}", "is the folder of --init_checkpoint={folder}")


@case()
def generate_output_file_is_the_checkpoints_index(ctx):
    _model_copy_refusal(ctx, "generate", [
        "--recipe=unilm", "--init_checkpoint={prefix}", "--config_file={config}",
        "--vocab_file={vocab}", "--prompt=the river", "--max_new_tokens=2",
        "--output_file={prefix}.index"],
        "--output_file={prefix}.index", "is also an input", "--init_checkpoint={prefix}")


@case()
def run_translation_output_dir_is_the_mass_pretraining_folder(ctx):
    mass = ctx.path("mass")
    assert_ok(run_script("run_pretraining", [
        "--recipe=mass", "--output_dir=%s" % mass, "--num_train_steps=1",
        "--num_warmup_steps=0", "--save_checkpoints_steps=1", "--train_batch_size=4",
        "--eval_batch_size=4", "--max_eval_steps=1", "--max_seq_length=32", "--seed=1"]))
    assert tf.train.latest_checkpoint(mass).endswith("ckpt-1")
    for init_checkpoint in (mass, os.path.join(mass, "ckpt-1")):
        result = run_script("run_translation", [
            "--init_checkpoint=%s" % init_checkpoint, "--output_dir=%s" % mass,
            "--num_train_steps=1", "--num_warmup_steps=0", "--save_checkpoints_steps=1"],
            inputs=[mass])
        assert_error(result, "run_translation", "--output_dir=%s" % mass,
                     "is the folder of --init_checkpoint=%s" % init_checkpoint)


@case()
def run_ner_output_dir_and_init_checkpoint_are_a_classifiers_folder(ctx):
    data = ctx.path("data")
    os.makedirs(data)
    for name in ("train.tsv", "dev.tsv"):
        with open(os.path.join(data, name), "w") as f:
            f.write("sentence\tlabel\nthe river runs\tpos\nfish swim\tneg\n"
                    "the sun rises\tpos\nrain falls\tneg\n")
    classifier = ctx.path("classifier")
    assert_ok(run_script("run_classifier", [
        "--task_name=generic", "--data_dir=%s" % data, "--do_train",
        "--do_eval", "--output_dir=%s" % classifier, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1"]))
    assert tf.train.latest_checkpoint(classifier)
    conll = ctx.path("conll")
    os.makedirs(conll)
    for name in ("train.txt", "dev.txt"):
        with open(os.path.join(conll, name), "w") as f:
            f.write("John B-PER\nvisited O\nParis B-LOC\n\nMary B-PER\nswims O\n")
    result = run_script("run_ner", [
        "--do_train", "--do_eval", "--data_dir=%s" % conll, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % classifier,
        "--output_dir=%s" % classifier, "--max_seq_length=16", "--train_batch_size=2",
        "--num_train_epochs=1"], inputs=[classifier, conll, ctx.a.vocab, ctx.a.config])
    assert_error(result, "run_ner", "--output_dir=%s" % classifier,
                 "is the folder of --init_checkpoint=%s" % classifier)
    return classifier  # unchanged (checked): compress_classifier's model


def _compress_a_trained_classifier(ctx, *flags):
    """compress_classifier on a copy of the run_ner case's classifier; `(result, model_dir)`."""
    model_dir = ctx.path("classifier")
    shutil.copytree(
        ctx.result_of("run_ner_output_dir_and_init_checkpoint_are_a_classifiers_folder"),
        model_dir)
    result = run_script("compress_classifier", [
        "--bert_config_file=%s" % ctx.a.config, "--model_dir=%s" % model_dir,
        "--max_seq_length=16", "--variants=float16", "--repeats=1", "--noplot"] + [
            flag.format(model_dir=model_dir) for flag in flags],
        inputs=[model_dir, ctx.a.config], outputs=[ctx.dir])
    return result, model_dir


@case(needs=["run_ner_output_dir_and_init_checkpoint_are_a_classifiers_folder"])
def compress_classifier_output_file_is_the_model_dirs_checkpoint_file(ctx):
    result, model_dir = _compress_a_trained_classifier(
        ctx, "--output_file={model_dir}/checkpoint")
    assert_error(result, "compress_classifier",
                 "--output_file=%s" % os.path.join(model_dir, "checkpoint"),
                 "--model_dir=%s" % model_dir)


@case(needs=["run_ner_output_dir_and_init_checkpoint_are_a_classifiers_folder"])
def compress_classifier_output_file_is_one_of_its_tflite_models(ctx):
    tflite_dir = ctx.path("tflite")
    output = os.path.join(tflite_dir, "model_float16.tflite")
    result, _ = _compress_a_trained_classifier(
        ctx, "--output_file=%s" % output, "--tflite_dir=%s" % tflite_dir)
    assert_error(result, "compress_classifier", "--tflite_dir names %s twice" % output,
                 "--output_file")
    assert not os.path.exists(tflite_dir)


# The cases of the other scripts, in their own modules (registered on import).
import bad_inputs_analysis  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
import bad_inputs_jobs  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
import bad_inputs_tools  # pylint: disable=g-import-not-at-top,unused-import,wrong-import-position


# ------------------------------------------------------------------ runner

def _selected(request):
    """The cases the session's selection (-k, node ids) includes, with what they need."""
    this_file = os.path.abspath(__file__)
    names = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if (callspec is not None and "name" in callspec.params and
                os.path.abspath(str(item.fspath)) == this_file):
            names.add(callspec.params["name"])
    pending = list(names)
    while pending:
        for need in CASES[pending.pop()][1]:
            if need not in names:
                names.add(need)
                pending.append(need)
    return [name for name in CASES if name in names]  # definition order: needs first


@pytest.fixture(scope="module")
def outcomes(request, artefacts, tmp_path_factory):
    names = _selected(request)
    directories = {name: tmp_path_factory.mktemp(name[:40]) for name in names}
    futures = {}
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        for name in names:
            futures[name] = pool.submit(run_case, name,
                                        Context(artefacts, directories[name], futures))
    sys.stderr.write("\n%d script cases in %.0f s\n" % (len(names), time.time() - start))
    return futures


@pytest.mark.parametrize("name", list(CASES))
def test_script(outcomes, name):
    _, scripts_run = outcomes[name].result()  # re-raises the case's own assertion
    script = CASES[name][2]
    assert script in scripts_run, "case %s is counted for %s but runs only %s" % (
        name, script, ", ".join(sorted(scripts_run)) or "no script")


def test_every_script_of_run_has_its_cases():
    """A script of run/ is not done until it has MIN_CASES_PER_SCRIPT hostile cases here."""
    counts = {script: 0 for script in bad_inputs_kit.SCRIPTS}
    for _, _, script in CASES.values():
        counts[script] += 1
    short = {script: count for script, count in counts.items()
             if count < bad_inputs_kit.MIN_CASES_PER_SCRIPT}
    assert not short, "scripts with fewer than %d bad-input cases: %s" % (
        bad_inputs_kit.MIN_CASES_PER_SCRIPT,
        ", ".join("%s (%d)" % item for item in sorted(short.items())))
