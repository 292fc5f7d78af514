"""Pre-training recipes: the registry, and each recipe lowering its losses."""

import json
import os

import keras
import pytest
import tensorflow as tf

from data import dynamic_masking
from data import input_pipeline
from data import pretraining_data
from data import pretraining_writer
from data import tokenization
from modeling import config as config_lib
from modeling import optimization
from modeling import recipes
from modeling import trainer as trainer_lib

SEQ, PRED = 32, 5


def test_registry_and_declarative_files(tmp_path):
    assert recipes.list_recipes() == ["albert", "bert", "bert_wwm", "roberta", "spanbert"]
    assert recipes.load_recipe("roberta").data == {"dynamic": True, "packing": "full_sentences"}
    spanbert = recipes.load_recipe("spanbert")
    assert spanbert.objectives == ("masked_lm", "span_boundary")
    assert spanbert.data == {"masking": "span", "sentence_objective": "none"}
    # A user's own recipe file, recombining existing parts.
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "encoder": "albert",
                                "objectives": ["masked_lm", "span_boundary"],
                                "data": {"masking": "span", "sentence_objective": "none"}}))
    mine = recipes.load_recipe(str(path))
    model = recipes.build_pretrainer(mine, config_lib.AlbertConfig(
        vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32))
    assert [o.name for o in model.objectives] == ["masked_lm", "span_boundary"]
    with pytest.raises(recipes.RecipeError, match="known recipes"):
        recipes.load_recipe("bert_large_typo")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "encoder": "bert", "objectives": ["mlm"],
                               "data": {}}))
    with pytest.raises(recipes.RecipeError, match="unknown objective"):
        recipes.load_recipe(str(bad))


@pytest.mark.parametrize("name", ["bert", "bert_wwm", "spanbert", "albert", "roberta"])
def test_recipe_lowers_its_losses_on_the_sample_corpus(tmp_path, name, sample_corpus_files,
                                            sample_vocab_file):
    recipe = recipes.load_recipe(name)
    if recipe.data.get("dynamic"):
        # RoBERTa: raw text, tokenized and masked afresh inside tf.data.
        def input_fn(is_training):
            return dynamic_masking.roberta_input_fn_builder(
                sample_corpus_files, sample_vocab_file, True, SEQ, PRED,
                is_training=is_training, batch_size=32, seed=3, repeat=True,
                packing=recipe.data["packing"])
    else:
        data = str(tmp_path / "train.tfrecord")
        pretraining_writer.create_pretraining_data(
            sample_corpus_files, [data], pretraining_data.InstanceOptions(
                vocab_file=sample_vocab_file, do_lower_case=True, max_seq_length=SEQ,
                max_predictions_per_seq=PRED, random_seed=7, dupe_factor=2,
                masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False,
                **recipe.data))

        def input_fn(is_training):
            return input_pipeline.pretraining_input_fn_builder(
                data, SEQ, PRED, is_training=is_training, batch_size=32,
                **({"seed": 3} if is_training else {"repeat": True}))
    vocab_size = len(tokenization.load_vocab(sample_vocab_file))
    if recipe.encoder == "albert":
        config = config_lib.AlbertConfig(
            vocab_size=vocab_size, embedding_size=32, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=128, max_position_embeddings=64)
    else:
        config = config_lib.BertConfig(
            vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=128, max_position_embeddings=64, type_vocab_size=2)
    keras.utils.set_random_seed(1)
    steps = 150
    trainer = trainer_lib.Trainer(
        tf.distribute.get_strategy(), lambda: recipes.build_pretrainer(recipe, config),
        lambda: optimization.create_optimizer(3e-3, steps, 15),
        model_dir=str(tmp_path / "model"), train_batch_size=32, num_train_steps=steps,
        save_checkpoints_steps=steps, log_steps=50)
    trainer.train(input_fn(True))
    first, last = trainer.history[0][1], trainer.history[-1][1]
    losses = [k for k in last if k.endswith("_loss")]
    assert len(losses) == len(recipe.objectives), losses
    for key in losses:
        assert last[key] < first[key], (key, first[key], last[key])
    assert last["masked_lm_loss"] < first["masked_lm_loss"] - 0.3
    results = trainer.evaluate(input_fn(False), max_steps=5)
    assert set(losses) <= set(results)
