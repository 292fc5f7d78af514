"""Pre-training recipes: the registry, user parts, and each recipe learning on held-out text.

The learning test runs every preset recipe through the library call that
`run/run_pretraining.py` makes for its demo job (`modeling.recipes.pretraining`):
the bundled corpus is split by documents (every tenth held out), the recipe's
pipeline makes its inputs from each part, the family's demo model trains on
one part and is evaluated on the other, and every objective's context-free
baseline is scored on the same held-out batches. The step budget (steps of
32 sequences of 32 tokens, learning rate 1e-3) is the same for every recipe;
a recipe that needs more fails this test rather than getting a budget of its
own. It was 1,500 steps, fixed before the recipes were run; for the suite's
time it is now 1,000, after a run at 1,000 steps measured every recipe's
margin below its baseline (albert 0.53, bert 0.67, bert_wwm 0.70, roberta
0.59, spanbert 0.64 nats; the bar stays 0.3). With the demo BERT's dropout
raised to 0.3 (chosen on a validation split of the training documents) they
were 0.63, 0.67, 0.62 and 0.63, and the second objectives' margins (NSP of
bert and bert_wwm 0.16 and 0.19, spanbert's span boundaries 0.66) got a bar
of 0.05, set after that one run.

The causal-LM recipes (GPT-2, GPT) and those of the families added later (UNILM, MASS,
XLNet) are tested the same way in their own modules, each with a smaller
budget fixed in advance there (the suite's time limit), and
`test_every_preset_has_a_learning_test` keeps a new preset from slipping
through untested.
"""

import glob
import json
import os

import pytest

from modeling import recipes
from modeling import registry
from modeling.albert import AlbertConfig
from modeling.recipes import pretraining

STEPS = 1000

# The presets this module trains; every other preset names the test module
# that trains it on held-out text.
LEARNING_TESTED_HERE = ("albert", "bert", "bert_wwm", "roberta", "spanbert")
LEARNING_TESTED_ELSEWHERE = {"elmo": "test_elmo_recipe.py",
                             "gpt": "test_gpt_recipe.py", "gpt2": "test_gpt2_recipe.py",
                             "mass": "test_mass.py", "ulmfit": "test_ulmfit_recipe.py",
                             "unilm": "test_unilm.py",
                             "unilm_seq2seq": "test_unilm.py",
                             "xlnet": "test_xlnet_pretraining.py"}
LEARNING_TESTED_ELSEWHERE.update({"cove": "test_cove.py"})


def test_registry_and_declarative_files(tmp_path):
    assert {"albert", "bert", "bert_wwm", "roberta", "spanbert"} <= set(recipes.list_recipes())
    roberta = recipes.load_recipe("roberta")
    assert roberta.pipeline == "dynamic_masked"
    assert roberta.data == {"packing": "full_sentences"}
    spanbert = recipes.load_recipe("spanbert")
    assert spanbert.objectives == ("masked_lm", "span_boundary")
    assert spanbert.pipeline == "static_masked"
    assert spanbert.data == {"masking": "span", "sentence_objective": "none",
                             "short_seq_prob": 0.0}
    # A user's own recipe file, recombining existing parts.
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "encoder": "albert",
                                "objectives": ["masked_lm", "span_boundary"],
                                "pipeline": "static_masked",
                                "data": {"masking": "span", "sentence_objective": "none"}}))
    mine = recipes.load_recipe(str(path))
    model = mine.build_model(AlbertConfig(
        vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32))
    assert [o.name for o in model.objectives] == ["masked_lm", "span_boundary"]
    assert model.encoder.embedding_table.shape == (50, 8)
    with pytest.raises(recipes.RecipeError, match="known recipes"):
        recipes.load_recipe("bert_large_typo")
    for field, value, message in (("objectives", ["mlm"], "unknown objective 'mlm'"),
                                  ("encoder", "bret", "unknown encoder 'bret'"),
                                  ("pipeline", "streaming", "unknown pipeline 'streaming'")):
        raw = {"name": "bad", "encoder": "bert", "objectives": ["masked_lm"], "data": {}}
        raw[field] = value
        bad = tmp_path / ("bad_%s.json" % field)
        bad.write_text(json.dumps(raw))
        with pytest.raises(recipes.RecipeError, match=message):
            recipes.load_recipe(str(bad))
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"name": "typo", "encoder": "bert", "objectives": ["masked_lm"],
                                "pipeline": "static_masked", "data": {"maskin": "span"}}))
    with pytest.raises(recipes.RecipeError, match="takes no data option 'maskin'"):
        recipes.load_recipe(str(typo))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(recipes.RecipeError, match="broken.json is not valid JSON"):
        recipes.load_recipe(str(broken))


def test_the_spanbert_demo_makes_no_short_sequences(tmp_path, monkeypatch, sample_corpus_files):
    # SpanBERT drops BERT's short sequences (short_seq_prob 0.1): always full blocks.
    from data.pretraining import writer  # pylint: disable=import-outside-toplevel
    from modeling.recipes.pipelines.base import PipelineOptions  # pylint: disable=import-outside-toplevel
    made = {}

    def fake_writer(texts, outputs, options):
        made[outputs[0]] = options
        return type("Summary", (), {"instances": 0})()

    monkeypatch.setattr(writer, "create_pretraining_data", fake_writer)
    vocab = os.path.join(pretraining.SAMPLE_DIR, "vocab.txt")
    for name, short in (("spanbert", 0.0), ("bert", 0.1)):
        made.clear()
        recipe = recipes.load_recipe(name)
        recipe.build_pipeline(PipelineOptions(vocab_file=vocab)).demo_inputs(
            sample_corpus_files[:1], sample_corpus_files[1:], str(tmp_path / name))
        assert [o.short_seq_prob for o in made.values()] == [short, short], name


def test_a_recipe_sets_its_demo_models_config_values(tmp_path):
    bert = recipes.load_recipe("bert")
    config = bert.demo_config(vocab_size=50)
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.3, 0.3)
    plain = recipes.load_recipe("spanbert").demo_config(vocab_size=50)
    assert plain.hidden_dropout_prob == 0.1 and plain.hidden_size == config.hidden_size
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "encoder": "bert", "objectives": ["masked_lm"],
                                "data": {}, "demo_model": {"hidden_dropout": 0.3}}))
    with pytest.raises(recipes.RecipeError, match="hidden_dropout, not fields of the bert"):
        recipes.load_recipe(str(path)).demo_config(vocab_size=50)


def test_a_recipe_passes_its_objective_options_to_the_objectives(tmp_path):
    from modeling.ulmfit import AwdLstmConfig  # pylint: disable=import-outside-toplevel
    config = AwdLstmConfig(vocab_size=20, embedding_size=4, hidden_size=6)
    ulmfit = recipes.load_recipe("ulmfit")
    assert ulmfit.objective_options == {"word_lm": {"alpha": 2, "beta": 1}}
    objective = ulmfit.build_model(config).get_objective("word_lm")
    assert (objective.alpha, objective.beta) == (2.0, 1.0)
    raw = {"name": "mine", "encoder": "ulmfit", "objectives": ["word_lm"], "pipeline": "elmo",
           "data": {}, "objective_options": {"word_lm": {"alpha": 0.5}}}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(raw))
    objective = recipes.load_recipe(str(path)).build_model(config).get_objective("word_lm")
    assert (objective.alpha, objective.beta) == (0.5, 0.0)
    for options, message in (({"word_lm": {"gamma": 1}},
                               "objective 'word_lm' takes no option 'gamma' \\(it takes: "
                               "alpha, beta\\)"),
                             ({"causal_lm": {}}, "names 'causal_lm', not one of its objectives"),
                             ({"word_lm": 2}, "`objective_options` must be a JSON object")):
        path.write_text(json.dumps(dict(raw, objective_options=options)))
        with pytest.raises(recipes.RecipeError, match=message):
            recipes.load_recipe(str(path))


def test_parts_register_from_a_user_module(tmp_path):
    parts = tmp_path / "my_parts.py"
    parts.write_text(
        "from modeling import registry\n"
        "from modeling.objectives import MaskedLMObjective, head_kwargs\n"
        "@registry.objectives.register('half_masked_lm')\n"
        "def half(config, family, **kwargs):\n"
        "    return MaskedLMObjective(loss_weight=0.5, hidden_act=family.activation(config),\n"
        "                             **head_kwargs(config), **kwargs)\n")
    registry.load_user_module(str(parts))
    assert "half_masked_lm" in registry.objectives.names()
    recipe_path = tmp_path / "half.json"
    recipe_path.write_text(json.dumps({"name": "half", "encoder": "bert",
                                       "objectives": ["half_masked_lm"], "data": {}}))
    recipe = recipes.load_recipe(str(recipe_path))
    config = recipe.demo_config(vocab_size=40)
    model = recipe.build_model(config)
    assert [o.loss_weight for o in model.objectives] == [0.5]
    with pytest.raises(FileNotFoundError, match="no_such_parts.py"):
        registry.load_user_module(str(tmp_path / "no_such_parts.py"))
    with pytest.raises(registry.RegistryError, match="registered twice"):
        registry.objectives.register("masked_lm", lambda config, family: None)


def test_every_preset_has_a_learning_test():
    tests_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for name, module in LEARNING_TESTED_ELSEWHERE.items():
        found = glob.glob(os.path.join(tests_root, "**", module), recursive=True)
        assert len(found) == 1, (name, module, found)
        text = open(found[0], encoding="utf-8").read()
        assert "beats" in text and name in text, (name, module)
    assert sorted(set(LEARNING_TESTED_HERE) | set(LEARNING_TESTED_ELSEWHERE)) == \
        recipes.list_recipes()


@pytest.mark.parametrize("name", LEARNING_TESTED_HERE)
def test_recipe_beats_its_context_free_baselines_on_held_out_documents(tmp_path, name):
    recipe = recipes.load_recipe(name)
    job = pretraining.PretrainingJob.for_demo(
        recipe=name, output_dir=str(tmp_path / name), max_seq_length=32,
        max_predictions_per_seq=5, num_train_steps=STEPS, num_warmup_steps=100,
        learning_rate=1e-3, train_batch_size=32, eval_batch_size=32, max_eval_steps=10,
        save_checkpoints_steps=STEPS, log_steps=STEPS, steps_per_loop=100)
    results = pretraining.run(job)
    # Held out: the evaluation text is documents the training text does not hold.
    text_dir = os.path.join(str(tmp_path / name), "data", "text")
    for file_name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", file_name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", file_name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    assert results["global_step"] == STEPS
    model = recipe.build_model(recipe.demo_config(vocab_size=10))
    for objective in model.objectives:
        loss_key = "%s_loss" % objective.name
        baseline_key = "%s_baseline_%s_loss" % (objective.baseline_kind, objective.name)
        assert loss_key in results and baseline_key in results, sorted(results)
    # The language-model objective (the first one) learns from context: its
    # held-out loss is well below the best context-free model's. The others
    # (next-sentence prediction, span boundaries) beat theirs too: a demo
    # BERT that memorised its sentence pairs used to lose to the label
    # frequencies on held-out documents (see `modeling.bert._demo_config`).
    for index, objective in enumerate(model.objectives):
        loss = results["%s_loss" % objective.name]
        baseline = results["%s_baseline_%s_loss" % (objective.baseline_kind, objective.name)]
        margin = 0.3 if index == 0 else 0.05
        assert loss < baseline - margin, (name, objective.name, loss, baseline)


def test_a_failed_import_is_named_and_spares_the_other_parts(monkeypatch):
    monkeypatch.setitem(registry._FAILED_IMPORTS, "modeling.some_family",  # pylint: disable=protected-access
                        "ModuleNotFoundError: No module named 'its_dependency'")
    assert registry.families.get("bert").name == "bert"
    with pytest.raises(registry.RegistryError,
                       match="modeling.some_family could not be imported .*its_dependency"):
        registry.families.get("some_family")
    assert registry._try_import("modeling.no_such_module_here") is None  # pylint: disable=protected-access
    assert "modeling.no_such_module_here" in registry._FAILED_IMPORTS  # pylint: disable=protected-access


def test_raw_text_pipelines_need_their_vocabulary_files(tmp_path, sample_corpus_files):
    config = recipes.load_recipe("roberta").demo_config(vocab_size=100)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    job = pretraining.PretrainingJob(
        recipe="roberta", input_file=",".join(sample_corpus_files),
        output_dir=str(tmp_path / "out"), bert_config_file=str(tmp_path / "bert_config.json"),
        do_train=True, num_train_steps=1)
    with pytest.raises(ValueError, match="--vocab_file is required"):
        pretraining.run(job)
    recipes.load_recipe("gpt2").demo_config(vocab_size=3000).to_json_file(
        str(tmp_path / "config.json"))
    job.recipe = "gpt2"
    job.vocab_file = os.path.join(pretraining.SAMPLE_DIR, "gpt2", "vocab.json")
    job.bert_config_file = str(tmp_path / "config.json")
    with pytest.raises(ValueError, match="--merges_file is required"):
        pretraining.run(job)
