"""The elmo recipe beats its unigram baseline on held-out text, and resumes from its checkpoint.

Budget, fixed before the run (the suite's time limit, not tuning):
`PretrainingJob.for_demo(recipe="elmo")` -- the bundled corpus split by
documents, every tenth held out, the bundled word vocabulary of the
training documents (2,275 words) -- with a smaller biLM than the demo's
(`SMALL`: character embeddings 8, filters of widths 1..7 with 8-16
channels, one highway layer, two layers of LSTM 64 -> projection 32 per
direction) for 100 steps of 32 sentences of at most 32 words, learning rate
2e-3, 10 warm-up steps. The held-out `bidirectional_lm_loss` (both
directions, nats per word) must beat the context-free unigram model's by
0.3 nats, and each direction alone must beat it.

Then the same job with `do_train=False` restores the trainer's checkpoint
and must reproduce the evaluation exactly.
"""

import os

import pytest

from modeling import recipes
from modeling.elmo import ElmoConfig
from modeling.recipes import pretraining

STEPS = 100
SMALL = dict(vocab_size=2275, char_embedding_dim=8,
             filters=[[1, 8], [2, 8], [3, 16], [4, 16], [5, 16], [6, 16], [7, 16]],
             n_highway=1, lstm_dim=64, projection_dim=32, n_layers=2, dropout=0.1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("elmo_demo"))
    options = str(tmp_path_factory.mktemp("elmo_options") / "elmo_options.json")
    ElmoConfig(**SMALL).to_json_file(options)
    settings = dict(recipe="elmo", output_dir=output_dir, bert_config_file=options,
                    num_train_steps=STEPS, num_warmup_steps=10, learning_rate=2e-3,
                    train_batch_size=32,
                    eval_batch_size=32, max_seq_length=32, save_checkpoints_steps=STEPS,
                    log_steps=100, steps_per_loop=50, seed=12345)
    results = pretraining.run(pretraining.PretrainingJob.for_demo(**settings))
    return output_dir, settings, results


def test_elmo_recipe_parts():
    recipe = recipes.load_recipe("elmo")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == (
        "elmo", ("bidirectional_lm",), "elmo")
    config = recipe.demo_config(2275)
    assert [w for w, _ in config.filters] == [1, 2, 3, 4, 5, 6, 7]
    assert config.n_layers == 2 and config.use_skip_connections


def test_elmo_recipe_beats_the_unigram_baseline_on_held_out_documents(trained):
    output_dir, _, results = trained
    text_dir = os.path.join(output_dir, "data", "text")
    for name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    assert results["global_step"] == STEPS
    loss = results["bidirectional_lm_loss"]
    baseline = results["unigram_baseline_bidirectional_lm_loss"]
    print("elmo after %d steps: held-out loss %.3f (perplexity %.1f; forward %.3f, backward "
          "%.3f), unigram %.3f (%.1f)" % (
              STEPS, loss, results["bidirectional_lm_perplexity"],
              results["bidirectional_lm_forward_loss"],
              results["bidirectional_lm_backward_loss"], baseline,
              results["unigram_baseline_bidirectional_lm_perplexity"]))
    assert loss < baseline - 0.3, (loss, baseline)
    # Each direction on its own beats the context-free model too.
    assert results["bidirectional_lm_forward_loss"] < baseline
    assert results["bidirectional_lm_backward_loss"] < baseline
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        text = f.read()
    assert "bidirectional_lm_loss = " in text
    assert "unigram_baseline_bidirectional_lm_loss = " in text
    assert os.path.isfile(os.path.join(output_dir, "elmo_options.json"))


def test_evaluation_only_run_restores_the_checkpoint(trained):
    output_dir, settings, results = trained
    again = pretraining.run(pretraining.PretrainingJob.for_demo(
        **dict(settings, do_train=False)))
    assert again["global_step"] == STEPS
    for key in ("bidirectional_lm_loss", "bidirectional_lm_accuracy",
                "unigram_baseline_bidirectional_lm_loss"):
        assert again[key] == pytest.approx(results[key], abs=1e-6), key
