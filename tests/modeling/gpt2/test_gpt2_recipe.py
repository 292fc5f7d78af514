"""The gpt2 recipe: registered parts, and the demo job end to end; gpt2 beats its unigram baseline.

Learning budget, fixed before its first run and the same as the gpt recipe's
(`tests/modeling/gpt/test_gpt_recipe.py`): `PretrainingJob.for_demo(recipe="gpt2")` on the
bundled corpus split by documents (every tenth held out), 400 steps of 32
windows of 32 tokens, learning rate 1e-3, 40 warm-up steps; the held-out
causal-LM loss must beat the context-free unigram model's by 0.1 nats. (It
was `tests/modeling/recipes/test_recipes.py`'s 1,500-step test, the suite's slowest.)
"""

import math
import os

import pytest

from modeling import recipes
from modeling import registry
from modeling.recipes import pretraining
from modeling.serving import generation

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
STEPS = 400


def test_gpt2_parts_are_registered():
    recipe = recipes.load_recipe("gpt2")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == ("gpt2", ("causal_lm",),
                                                                    "causal_lm")
    family = registry.families.get("gpt2")
    assert family.config_file_name == "config.json" and "hf" in family.name_tables
    assert "causal_lm" in registry.objectives and "causal_lm" in registry.pipelines
    pipeline_class = registry.pipelines.get("causal_lm")
    for path in pipeline_class.demo_vocab_files.values():
        assert os.path.isfile(os.path.join(REPO_ROOT, path))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("gpt2_demo"))
    job = pretraining.PretrainingJob.for_demo(
        recipe="gpt2", output_dir=output_dir, num_train_steps=STEPS, num_warmup_steps=40,
        learning_rate=1e-3, train_batch_size=32, eval_batch_size=32, max_seq_length=32,
        save_checkpoints_steps=STEPS, log_steps=100, steps_per_loop=100, seed=12345)
    return output_dir, pretraining.run(job)


def test_gpt2_recipe_beats_the_unigram_baseline_on_held_out_documents(demo_run):
    output_dir, results = demo_run
    text_dir = os.path.join(output_dir, "data", "text")
    for name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    assert results["causal_lm_loss"] < results["unigram_baseline_causal_lm_loss"] - 0.1, results


def test_demo_job_reports_perplexity_against_the_unigram_baseline(demo_run):
    output_dir, results = demo_run
    for key in ("causal_lm_loss", "causal_lm_accuracy", "causal_lm_perplexity",
                "unigram_baseline_causal_lm_loss", "unigram_baseline_causal_lm_perplexity"):
        assert key in results, sorted(results)
    assert results["causal_lm_perplexity"] == pytest.approx(math.exp(results["causal_lm_loss"]))
    assert results["global_step"] == STEPS
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        assert "causal_lm_perplexity" in f.read()
    # The job's config.json is GPT-2's format; its checkpoint generates.
    generator = generation.load_generator(
        os.path.join(output_dir, "config.json"), output_dir,
        os.path.join(REPO_ROOT, "data", "sample", "gpt2", "vocab.json"),
        os.path.join(REPO_ROOT, "data", "sample", "gpt2", "merges.txt"))
    records = generation.generate_records(generator, ["The baker opens"],
                                          generation.DecodingOptions(max_new_tokens=5))
    assert len(records[0]["generated_ids"]) <= 5 and records[0]["prompt_ids"]
    print("demo after %d steps: held-out perplexity %.1f (loss %.3f), unigram %.1f (loss %.3f)"
          % (STEPS, results["causal_lm_perplexity"], results["causal_lm_loss"],
             results["unigram_baseline_causal_lm_perplexity"],
             results["unigram_baseline_causal_lm_loss"]))
