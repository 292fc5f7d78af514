"""ULMFiT's three stages: the ulmfit recipe beats its unigram baseline on held-out text, a
target-domain LM starts from it, and run_classifier's ulmfit classifier starts from it.

Budgets, fixed before the runs (the suite's time limit, not tuning):

* general-domain LM: `PretrainingJob.for_demo(recipe="ulmfit")` -- the bundled
  corpus split by documents, every tenth held out, the bundled word vocabulary
  of the training documents (2,275 words) -- with a smaller AWD-LSTM than the
  demo's (`SMALL`: embeddings 32, LSTMs 64, 64, 32, fastai's LM dropouts) for
  120 steps of 32 BPTT streams (the recipe's: variable lengths around 32
  words, the state carried, AR alpha 2 and TAR beta 1), learning rate 3e-3,
  12 warm-up steps. The held-out `word_lm_loss` (nats per word, on the held-out
  streams, every word predicted from the text before it) must beat the unigram
  model's by 0.3 nats. (It was 150 steps, fixed before the first run, which
  beat the baseline by 0.61 nats; for the suite's time it is now 120, after a
  run at 120 measured 0.49; the bar stays 0.3. The recipe's move from one
  sentence per example to streams changed neither budget nor bar: the first
  run on streams beat the baseline by 0.73 nats, 5.757 against 6.490.)
* target-domain LM: `run_pretraining`'s job on the English training sentences
  only (`--input_file`), from the general LM (`--init_checkpoint`), 20 steps at
  1e-3 (first 40, cut for time after a 30-step run improved 5.865 -> 5.695):
  on the English held-out documents it must do better than the general LM
  it started from (and the job's loader must have copied the general LM exactly).
* classifier: `run_classifier`'s job with `--model_family=ulmfit` from the general
  LM on a generated task (is a sentence of the corpus English or Chinese: 64
  training sentences from the training documents, 32 from the held-out ones),
  3 epochs of batches of 16 with gradual unfreezing slower than the run
  (`unfreeze_steps=1000`), so only the head trains: held-out accuracy >= 0.9,
  and the classifier's network after training is the general LM's, weight for
  weight.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoints
from modeling import recipes
from modeling.checkpoints import object_based
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.tasks import classifier_job
from modeling.ulmfit import AwdLstm
from modeling.ulmfit import AwdLstmConfig
from modeling.ulmfit import load_awd_lstm_config

STEPS = 120
SMALL = dict(vocab_size=2275, embedding_size=32, hidden_size=64, num_hidden_layers=3,
             embed_p=0.02, input_p=0.25, weight_p=0.2, hidden_p=0.15, output_p=0.1,
             initrange=0.5)
VOCAB = os.path.join(pretraining.REPO_ROOT, "data", "sample", "elmo", "vocab.txt")


@pytest.fixture(scope="module")
def general(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("ulmfit_lm"))
    config_file = str(tmp_path_factory.mktemp("ulmfit_config") / "ulmfit_config.json")
    AwdLstmConfig(**SMALL).to_json_file(config_file)
    settings = dict(recipe="ulmfit", output_dir=output_dir, bert_config_file=config_file,
                    num_train_steps=STEPS, num_warmup_steps=12, learning_rate=3e-3,
                    train_batch_size=32, eval_batch_size=32, max_seq_length=32,
                    save_checkpoints_steps=STEPS, log_steps=STEPS, steps_per_loop=50,
                    seed=12345)
    results = pretraining.run(pretraining.PretrainingJob.for_demo(**settings))
    return output_dir, results


def _stored_network(model_dir):
    """{variable path: value} of the AWD-LSTM in a trainer checkpoint."""
    prefix = tf.train.latest_checkpoint(model_dir)
    reader = tf.train.load_checkpoint(prefix)
    return {path: reader.get_tensor(key)
            for path, key in object_based.model_variable_keys(reader, prefix).items()
            if path.startswith("awd_lstm/")}


def test_ulmfit_recipe_parts():
    recipe = recipes.load_recipe("ulmfit")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == ("ulmfit", ("word_lm",),
                                                                    "ulmfit")
    config = recipe.demo_config(2275)
    assert config.num_hidden_layers == 3 and config.layer_sizes() == [256, 256, 64]


def test_ulmfit_recipe_beats_the_unigram_baseline_on_held_out_documents(general):
    output_dir, results = general
    text_dir = os.path.join(output_dir, "data", "text")
    for name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    assert results["global_step"] == STEPS
    loss, baseline = results["word_lm_loss"], results["unigram_baseline_word_lm_loss"]
    print("ulmfit after %d steps: held-out loss %.3f (perplexity %.1f), unigram %.3f (%.1f)"
          % (STEPS, loss, results["word_lm_perplexity"], baseline,
             results["unigram_baseline_word_lm_perplexity"]))
    assert loss < baseline - 0.3, (loss, baseline)
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        text = f.read()
    assert "word_lm_loss = " in text and "unigram_baseline_word_lm_loss = " in text
    assert load_awd_lstm_config(output_dir) == AwdLstmConfig(**SMALL)


def test_target_domain_lm_starts_from_the_general_lm(general, tmp_path):
    general_dir, _ = general
    text_dir = os.path.join(general_dir, "data", "text")
    target_train = os.path.join(text_dir, "train", "sample_en.txt")
    target_eval = os.path.join(text_dir, "eval", "sample_en.txt")
    config_file = os.path.join(general_dir, "ulmfit_config.json")
    # What the job's --init_checkpoint loader does: the general LM, exactly.
    recipe = recipes.load_recipe("ulmfit")
    model = recipe.build_model(load_awd_lstm_config(config_file))
    checkpoints.init_from_checkpoint(model, general_dir, allow_missing_heads=True)
    stored = _stored_network(general_dir)
    assert len(stored) == 10
    for variable in model.encoder.weights:
        if "seed_generator" not in variable.path:
            np.testing.assert_array_equal(np.asarray(variable), stored[variable.path])

    # The general LM on the target's held-out text.
    pipeline = recipe.build_pipeline(PipelineOptions(vocab_file=VOCAB, max_seq_length=32,
                                                     seed=7))
    total = count = 0.0
    for features in pipeline.input_fn(target_eval, False, 32)(None):
        _, metrics = model.compute_loss_and_metrics(features, training=False)
        total += float(metrics["word_lm_loss"][0])
        count += float(metrics["word_lm_loss"][1])
    general_on_target = total / count
    # The same command with --init_checkpoint and the target text (`run_pretraining.py
    # --recipe=ulmfit --init_checkpoint=DIR --input_file=... --bert_config_file=...`).
    after = pretraining.run(pretraining.PretrainingJob(
        recipe="ulmfit", input_file=target_train, eval_input_file=target_eval,
        init_checkpoint=general_dir, bert_config_file=config_file, vocab_file=VOCAB,
        output_dir=str(tmp_path / "target"), do_train=True, do_eval=True,
        num_train_steps=20, num_warmup_steps=2, learning_rate=1e-3, max_seq_length=32,
        train_batch_size=32, eval_batch_size=32, max_eval_steps=20, seed=7, log_steps=20,
        save_checkpoints_steps=20, steps_per_loop=20))
    print("target-domain held-out loss: general LM %.3f -> fine-tuned %.3f (unigram %.3f)"
          % (general_on_target, after["word_lm_loss"],
             after["unigram_baseline_word_lm_loss"]))
    assert after["global_step"] == 20
    assert after["word_lm_loss"] < general_on_target


def _language_id_task(text_dir, data_dir):
    """Sentences labelled en / zh: train from the training documents, dev from the held-out."""
    os.makedirs(data_dir, exist_ok=True)
    for split, source, per_language in (("train", "train", 32), ("dev", "eval", 16)):
        rows = ["sentence\tlabel"]
        for language in ("en", "zh"):
            path = os.path.join(text_dir, source, "sample_%s.txt" % language)
            lines = [line.strip().replace("\t", " ")
                     for line in open(path, encoding="utf-8") if line.strip()]
            rows += ["%s\t%s" % (line, language) for line in lines[:per_language]]
        with open(os.path.join(data_dir, "%s.tsv" % split), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")


def test_classifier_job_fine_tunes_from_the_general_lm(general, tmp_path):
    general_dir, _ = general
    data_dir = str(tmp_path / "task")
    _language_id_task(os.path.join(general_dir, "data", "text"), data_dir)
    output_dir = str(tmp_path / "classifier")
    result = classifier_job.run(classifier_job.ClassifierJob(
        model_family="ulmfit", task_name="generic", data_dir=data_dir,
        text_a_column="sentence", label_column="label",
        bert_config_file=os.path.join(general_dir, "ulmfit_config.json"), vocab_file=VOCAB,
        init_checkpoint=general_dir, output_dir=output_dir, do_train=True, do_eval=True,
        max_seq_length=24, train_batch_size=16, eval_batch_size=16, learning_rate=1e-2,
        num_train_epochs=3.0, warmup_proportion=0.1, lr_schedule="stlr",
        layer_lr_decay=2.6, unfreeze_steps=1000, save_checkpoints_steps=1000, seed=3))
    print("ulmfit classifier (head only): %s" % result.eval_results)
    assert result.eval_results["global_step"] == 12
    assert result.eval_results["eval_accuracy"] >= 0.9
    # The network was loaded from the general LM and (frozen by gradual unfreezing)
    # is still exactly it; the head trained.
    general_weights = _stored_network(general_dir)
    classifier_weights = _stored_network(output_dir)
    assert sorted(classifier_weights) == sorted(general_weights)
    for path, value in general_weights.items():
        np.testing.assert_array_equal(classifier_weights[path], value, err_msg=path)
    network = AwdLstm.from_config_object(load_awd_lstm_config(general_dir))
    assert sorted(general_weights) == sorted(
        v.path for v in network.weights if "seed_generator" not in v.path)
