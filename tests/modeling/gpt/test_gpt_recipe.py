"""The gpt recipe beats its unigram baseline on held-out text, and a GPT fine-tunes end to end.

Budgets, fixed before any run (the suite's time limit, not tuning):

* pre-training: `PretrainingJob.for_demo(recipe="gpt")` (the demo's
  one-layer, width-32 GPT on the bundled corpus split by documents, every
  tenth held out) for 400 steps of 32 windows of 32 tokens, learning rate
  1e-3, 40 warm-up steps; it must beat the context-free unigram model's
  held-out loss by 0.1 nats.
* fine-tuning: `run/run_classifier.py --model_family=gpt` from that
  checkpoint on a two-way multiple-choice task built from the same split --
  which of a sentence and the same sentence with its words (Chinese: its
  characters) in reverse order is the real one, after the previous sentence
  of its document as context -- trained on sentences of the training
  documents for 3 epochs (batch 16, learning rate 1e-3, the paper's
  `--lm_loss_weight=0.5`), evaluated on the held-out documents' sentences:
  accuracy must exceed 0.75 (chance is 0.5).
"""

import json
import os
import random
import sys

import numpy as np
import pytest

import script_runner
from modeling import recipes
from modeling.recipes import pretraining

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "vocab.json")
MERGES = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "merges.txt")
STEPS = 400


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("gpt_demo"))
    job = pretraining.PretrainingJob.for_demo(
        recipe="gpt", output_dir=output_dir, num_train_steps=STEPS, num_warmup_steps=40,
        learning_rate=1e-3, train_batch_size=32, eval_batch_size=32, max_seq_length=32,
        save_checkpoints_steps=STEPS, log_steps=100, seed=12345)
    return output_dir, pretraining.run(job)


def test_gpt_recipe_parts():
    recipe = recipes.load_recipe("gpt")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == ("gpt", ("causal_lm",),
                                                                    "causal_lm")
    assert recipe.family.config_file_name == "config.json" and "hf" in recipe.family.name_tables


def test_gpt_recipe_beats_the_unigram_baseline_on_held_out_documents(pretrained):
    output_dir, results = pretrained
    text_dir = os.path.join(output_dir, "data", "text")
    for name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    assert results["global_step"] == STEPS
    loss, baseline = results["causal_lm_loss"], results["unigram_baseline_causal_lm_loss"]
    print("gpt after %d steps: held-out loss %.3f (perplexity %.1f), unigram %.3f (%.1f)"
          % (STEPS, loss, results["causal_lm_perplexity"], baseline,
             results["unigram_baseline_causal_lm_perplexity"]))
    assert loss < baseline - 0.1, (loss, baseline)
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        text = f.read()
    assert "causal_lm_loss" in text and "unigram_baseline_causal_lm_loss" in text
    with open(os.path.join(output_dir, "config.json")) as f:
        assert json.load(f)["afn"] == "gelu"


def _reversed(sentence, chinese):
    if chinese:
        return "".join(reversed(sentence))
    return " ".join(reversed(sentence.split()))


def _choice_examples(path, rng):
    """(context, [choices], label) of every sentence after the first of each document."""
    chinese = path.endswith("_zh.txt")
    text = open(path, encoding="utf-8").read()
    rows = []
    for document in text.split("\n\n"):
        lines = [l.strip() for l in document.split("\n") if l.strip()]
        for previous, sentence in zip(lines, lines[1:]):
            wrong = _reversed(sentence, chinese)
            if wrong == sentence:
                continue
            label = rng.randint(0, 1)
            choices = [sentence, wrong] if label == 0 else [wrong, sentence]
            rows.append({"context": previous, "choices": choices, "label": label})
    return rows


def test_run_classifier_fine_tunes_gpt_on_held_out_multiple_choice(pretrained, tmp_path):
    output_dir, _ = pretrained
    text_dir = os.path.join(output_dir, "data", "text")
    rng = random.Random(7)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    splits = {"train": "train", "dev": "eval", "test": "eval"}
    for split, source in splits.items():
        rows = []
        for name in sorted(os.listdir(os.path.join(text_dir, source))):
            rows.extend(_choice_examples(os.path.join(text_dir, source, name), rng))
        if split == "test":
            rows = [dict(row, label=None) for row in rows[:10]]
        with open(data_dir / ("%s.jsonl" % split), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    output = tmp_path / "cloze"
    command = [
        sys.executable, os.path.join(REPO_ROOT, "run", "run_classifier.py"),
        "--model_family=gpt", "--task_name=multiple_choice", "--data_dir=%s" % data_dir,
        "--bert_config_file=%s" % os.path.join(output_dir, "config.json"),
        "--vocab_file=%s" % VOCAB, "--merges_file=%s" % MERGES,
        "--init_checkpoint=%s" % output_dir, "--lm_loss_weight=0.5",
        "--max_seq_length=64", "--train_batch_size=16", "--eval_batch_size=16",
        "--predict_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=3",
        "--do_train", "--do_eval", "--do_predict", "--seed=3", "--log_steps=50",
        "--output_dir=%s" % output,
    ]
    process = script_runner.run(command, capture_output=True, text=True, cwd=REPO_ROOT,
                             timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    results = {}
    with open(output / "eval_results.txt") as f:
        for line in f:
            key, _, value = line.partition(" = ")
            results[key] = float(value)
    print("gpt multiple choice on held-out documents: accuracy %.3f, loss %.3f, lm_loss %.3f"
          % (results["eval_accuracy"], results["eval_loss"], results["eval_lm_loss"]))
    assert results["eval_accuracy"] > 0.75, results
    assert results["eval_total_loss"] > results["eval_loss"] and results["eval_lm_loss"] > 0
    rows = np.loadtxt(output / "test_results.tsv", ndmin=2)
    assert rows.shape == (10, 2)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)


def test_generation_from_the_pretrained_gpt_is_its_greedy_continuation(pretrained):
    """run/generate.py --recipe=gpt's library call: cached greedy decoding of a GPT
    equals taking the argmax of the full network, one token at a time."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from modeling.gpt import GPTNetwork  # pylint: disable=g-import-not-at-top
    from modeling.serving import generation  # pylint: disable=g-import-not-at-top

    output_dir, _ = pretrained
    generator = generation.load_generator(os.path.join(output_dir, "config.json"),
                                          output_dir, VOCAB, MERGES, family="gpt")
    assert isinstance(generator.network, GPTNetwork)
    prompt = generator.tokenizer.encode("The baker opens")
    records = generation.generate_records(
        generator, ["The baker opens"], generation.DecodingOptions(max_new_tokens=6))
    ids = list(prompt)
    for _ in range(6):
        outputs = generator.network({"input_ids": tf.constant([ids])}, training=False)
        logits = generator.network.logits(outputs["sequence_output"])[0, -1].numpy()
        ids.append(int(np.argmax(logits)))
        if ids[-1] == generator.eos_id:
            break
    assert records[0]["generated_ids"] == ids[len(prompt):]
