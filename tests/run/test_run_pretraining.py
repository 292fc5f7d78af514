"""run/run_pretraining.py end to end: demo mode, eval_results.txt, kill and resume."""

import math
import os
import signal
import subprocess
import sys
import time

import pytest

import script_runner

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_pretraining.py")
# A very small demo job: the defaults of the demo mode, scaled down.
SMALL = ["--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=16",
         "--eval_batch_size=16", "--max_eval_steps=3", "--log_steps=5",
         "--num_warmup_steps=2"]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def _read_results(path):
    results = {}
    with open(path) as f:
        for line in f:
            key, value = line.strip().split(" = ")
            results[key] = float(value)
    return results


def test_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    out = str(tmp_path / "run")
    cmd = [sys.executable, SCRIPT, "--output_dir=%s" % out, "--save_checkpoints_steps=10"] + SMALL
    log = open(str(tmp_path / "first.log"), "w")
    proc = script_runner.Popen(cmd + ["--num_train_steps=100000"], stdout=log,
                            stderr=subprocess.STDOUT, env=_env())
    try:
        deadline = time.time() + 240
        while not os.path.exists(os.path.join(out, "ckpt-20.index")):
            assert proc.poll() is None, open(str(tmp_path / "first.log")).read()[-3000:]
            assert time.time() < deadline, "no checkpoint within the time limit"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        log.close()
    saved = sorted(int(f[len("ckpt-"):-len(".index")]) for f in os.listdir(out)
                   if f.startswith("ckpt-") and f.endswith(".index"))
    assert saved and saved[-1] >= 20
    last = saved[-1]

    result = script_runner.run(cmd + ["--num_train_steps=%d" % (last + 10)],
                            capture_output=True, text=True, timeout=300, env=_env())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Resumed from" in output and "at step %d" % last in output
    results = _read_results(os.path.join(out, "eval_results.txt"))
    assert results["global_step"] == last + 10
    for key in ("loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                "next_sentence_loss", "unigram_baseline_masked_lm_accuracy",
                "unigram_baseline_masked_lm_loss"):
        assert key in results
    assert 0.0 < results["unigram_baseline_masked_lm_accuracy"] < 0.2
    # Between a perfect model (0) and a uniform guess over the vocabulary.
    vocab_size = sum(1 for _ in open(os.path.join(REPO_ROOT, "data", "sample", "vocab.txt")))
    assert 3.0 < results["unigram_baseline_masked_lm_loss"] < math.log(vocab_size)
    assert os.path.exists(os.path.join(out, "bert_config.json"))
    assert "TensorBoard:" in output and "eval" in os.listdir(out) and "train" in os.listdir(out)


def test_bad_flags_give_clear_errors(tmp_path):
    result = script_runner.run(
        [sys.executable, SCRIPT, "--input_file=%s" % (tmp_path / "none-*.tfrecord"),
         "--output_dir=%s" % (tmp_path / "o"), "--bert_config_file=%s" % (tmp_path / "c.json"),
         "--do_train"], capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode != 0
    assert "c.json" in result.stderr
    assert "Traceback" not in result.stderr
    # Held-out files without training files: the demo holds out its own.
    result = script_runner.run(
        [sys.executable, SCRIPT, "--eval_input_file=%s" % (tmp_path / "e.tfrecord"),
         "--output_dir=%s" % (tmp_path / "o2")], capture_output=True, text=True, timeout=120,
        env=_env())
    assert result.returncode != 0
    assert "--eval_input_file needs --input_file" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "o2")


def test_own_data_with_held_out_eval_files_and_a_user_recipe(tmp_path):
    """--input_file / --eval_input_file / --recipe FILE / --recipe_module, end to end."""
    from conftest import SAMPLE_DIR  # pylint: disable=g-import-not-at-top
    from data import corpus  # pylint: disable=g-import-not-at-top
    from data.pretraining import instances, writer  # pylint: disable=g-import-not-at-top

    texts = [os.path.join(SAMPLE_DIR, "sample_en.txt")]
    train_texts, eval_texts = corpus.split_documents(texts, str(tmp_path / "text"))
    files = {}
    for split, split_texts in (("train", train_texts), ("eval", eval_texts)):
        files[split] = str(tmp_path / ("%s.tfrecord" % split))
        writer.create_pretraining_data(split_texts, [files[split]], instances.InstanceOptions(
            vocab_file=os.path.join(SAMPLE_DIR, "vocab.txt"), max_seq_length=32,
            max_predictions_per_seq=5, random_seed=3, dupe_factor=1, do_lower_case=True,
            masked_lm_prob=0.15, short_seq_prob=0.1))
    parts = tmp_path / "parts.py"
    parts.write_text(
        "from modeling import registry\n"
        "from modeling.objectives import MaskedLMObjective, head_kwargs\n"
        "@registry.objectives.register('masked_lm_x2')\n"
        "def doubled(config, family, **kwargs):\n"
        "    return MaskedLMObjective(loss_weight=2.0, hidden_act=family.activation(config),\n"
        "                             **head_kwargs(config), **kwargs)\n")
    recipe = tmp_path / "doubled.json"
    recipe.write_text('{"name": "doubled", "encoder": "bert", "objectives": ["masked_lm_x2"],'
                      ' "pipeline": "static_masked", "data": {}}')
    config = tmp_path / "bert_config.json"
    config.write_text('{"vocab_size": %d, "hidden_size": 32, "num_hidden_layers": 1, '
                      '"num_attention_heads": 2, "intermediate_size": 64, '
                      '"max_position_embeddings": 32}'
                      % sum(1 for _ in open(os.path.join(SAMPLE_DIR, "vocab.txt"))))
    out = str(tmp_path / "run")
    result = script_runner.run(
        [sys.executable, SCRIPT, "--input_file=%s" % files["train"],
         "--eval_input_file=%s" % files["eval"], "--output_dir=%s" % out,
         "--bert_config_file=%s" % config, "--recipe=%s" % recipe,
         "--recipe_module=%s" % parts, "--do_train", "--do_eval", "--num_train_steps=4",
         "--num_warmup_steps=1", "--max_seq_length=32", "--max_predictions_per_seq=5",
         "--train_batch_size=8", "--eval_batch_size=8", "--max_eval_steps=2"],
        capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    results = _read_results(os.path.join(out, "eval_results.txt"))
    # One objective, weighted 2: the total loss is twice its masked-LM loss
    # (up to how the two average over batches: per batch, or per masked token).
    assert results["loss"] == pytest.approx(2 * results["masked_lm_loss"], rel=0.05)
    assert "next_sentence_loss" not in results
    assert "unigram_baseline_masked_lm_loss" in results
    # The baseline was scored on the evaluation file: the same batches
    # scored on the training file give another value.
    from data.pretraining import baselines  # pylint: disable=g-import-not-at-top
    on_eval = baselines.unigram_masked_lm_statistics(files["train"], files["eval"], 32, 5,
                                                     vocab_size=None, max_eval_records=16)
    assert results["unigram_baseline_masked_lm_accuracy"] == pytest.approx(on_eval.accuracy)
