"""The xlnet recipe: memory-aligned streams, permutation features, the objective, and
the demo job that beats its unigram baseline on held-out documents.

The learning test's budget was fixed before its first run: 600 steps of the
recipe's demo job (16 streams of 32-token SentencePiece segments, learning
rate 1e-3, the demo model: width 64, 2 layers, memory 32), evaluated on the
held-out tenth of the bundled corpus read 6 times under new orders. The
held-out permutation-LM loss must be below the unigram baseline's on the
same predicted tokens.
"""

import os

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from modeling import recipes
from modeling import registry
from modeling.objectives.base import Pretrainer
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.xlnet import XLNetConfig
from modeling.xlnet import XLNetNetwork
from modeling.xlnet import pipeline as xlnet_pipeline
from modeling.xlnet.objective import PermutationLMObjective

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPIECE = os.path.join(REPO_ROOT, "data", "sample", "xlnet", "spiece.model")
SAMPLE = [os.path.join(REPO_ROOT, "data", "sample", name)
          for name in ("sample_en.txt", "sample_zh.txt")]
STEPS = 600


def _reference_streams(files, num_streams):
    """Stream i's tokens, computed here: documents dealt round-robin, each one's
    lines through the Python SentencePiece processor, then <eod>."""
    processor = sentencepiece.SentencePieceProcessor(model_file=SPIECE)
    eod = processor.piece_to_id("<eod>")
    streams = [[] for _ in range(num_streams)]
    j = 0
    for path in files:
        text = open(path, encoding="utf-8").read()
        for block in text.split("\n\n"):
            lines = [line.strip() for line in block.split("\n") if line.strip()]
            if not lines:
                continue
            ids = [i for line in lines for i in processor.encode(line)]
            streams[j % num_streams].extend(ids + [eod])
            j += 1
    return streams


def test_xlnet_parts_are_registered():
    recipe = recipes.load_recipe("xlnet")
    assert (recipe.encoder, recipe.objectives, recipe.pipeline) == (
        "xlnet", ("permutation_lm",), "xlnet")
    assert registry.families.get("xlnet").config_file_name == "config.json"
    for path in registry.pipelines.get("xlnet").demo_vocab_files.values():
        assert os.path.isfile(os.path.join(REPO_ROOT, path))


def test_batches_are_memory_aligned_streams():
    """Row i of consecutive evaluation batches is stream i's text, in order, with
    mem_reset only on its first segment; each row's targets are its tokens at the
    target_mapping positions, about 1/6 of them, under a valid permutation mask."""
    seq, streams = 16, 4
    dataset = xlnet_pipeline.xlnet_dataset(SAMPLE, SPIECE, seq, streams, is_training=False,
                                           seed=3, eval_passes=1)
    batches = [{k: v.numpy() for k, v in b.items()} for b in dataset]
    expected = _reference_streams(SAMPLE, streams)
    for i in range(streams):
        got = np.concatenate([b["input_ids"][i][b["input_mask"][i] > 0] for b in batches])
        np.testing.assert_array_equal(got, expected[i])
        resets = [int(b["mem_reset"][i]) for b in batches]
        assert resets == [1] + [0] * (len(batches) - 1)
    total_real = sum(int(b["input_mask"].sum()) for b in batches)
    total_targets = sum(float(b["target_weights"].sum()) for b in batches)
    assert total_real == sum(len(s) for s in expected)
    assert abs(total_targets / total_real - 1 / 6) < 0.03
    for b in batches[:5]:
        for row in range(streams):
            weights = b["target_weights"][row] > 0
            positions = np.argmax(b["target_mapping"][row], axis=-1)[weights]
            np.testing.assert_array_equal(b["target_ids"][row][weights],
                                          b["input_ids"][row][positions])
            perm = b["perm_mask"][row]
            # Only predicted positions are hidden, and each from itself.
            hidden = np.nonzero(perm.max(axis=0))[0]
            assert set(hidden) == set(positions)
            assert all(perm[p, p] == 1 for p in positions)


def test_training_streams_repeat_with_resets_and_other_orders():
    seq, streams = 32, 8
    dataset = xlnet_pipeline.xlnet_dataset(SAMPLE, SPIECE, seq, streams, is_training=True,
                                           seed=1)
    batches = [{k: v.numpy() for k, v in b.items()} for b in dataset.take(120)]
    resets = np.array([b["mem_reset"] for b in batches])
    starts = np.nonzero(resets[:, 0])[0]
    assert starts[0] == 0 and len(starts) >= 2  # a second pass started
    assert (resets[starts] == 1).all() and resets.sum() == len(starts) * streams
    # The second pass deals the documents to other streams.
    assert not np.array_equal(batches[starts[0]]["input_ids"], batches[starts[1]]["input_ids"])
    assert all(b["input_mask"].all() for b in batches)  # training rows are full


def test_permutation_lm_objective_is_cross_entropy_through_the_tied_table():
    network = XLNetNetwork.from_config_object(XLNetConfig(
        vocab_size=50, d_model=16, n_layer=1, n_head=2, d_inner=32, dropout=0.0))
    objective = PermutationLMObjective(vocab_size=50)
    model = Pretrainer(network, [objective])
    objective.lm_bias.assign(np.linspace(-1, 1, 50).astype(np.float32))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, (2, 8)).astype(np.int32)
    mapping = np.zeros([2, 2, 8], np.float32)
    mapping[:, 0, 3] = mapping[:, 1, 6] = 1.0
    perm = np.zeros([2, 8, 8], np.float32)
    perm[:, :, [3, 6]] = 1.0
    features = {"input_ids": ids, "perm_mask": perm, "target_mapping": mapping,
                "target_ids": ids[:, [3, 6]], "target_weights": np.array([[1, 1], [1, 0]],
                                                                         np.float32)}
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    query = network(features)["query_output"].numpy()
    logits = query @ network.word_embedding.numpy().T + objective.lm_bias.numpy()
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, features["target_ids"][..., None], -1)[..., 0]
    expected = (ce * features["target_weights"]).sum() / 3.0
    np.testing.assert_allclose(metrics["permutation_lm_loss"][0].numpy() / 3.0, expected,
                               rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-4)
    targets = objective.baseline_targets({k: np.asarray(v) for k, v in features.items()})
    np.testing.assert_array_equal(targets, [ids[0, 3], ids[0, 6], ids[1, 3]])
    with pytest.raises(ValueError, match="perm_mask and target_mapping"):
        objective(network({"input_ids": ids}), {"input_ids": ids})


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("xlnet_demo"))
    job = pretraining.PretrainingJob.for_demo(
        recipe="xlnet", output_dir=output_dir, num_train_steps=STEPS,
        save_checkpoints_steps=STEPS, log_steps=STEPS, steps_per_loop=100, seed=12345)
    return output_dir, job, pretraining.run(job)


def test_xlnet_beats_its_unigram_baseline_on_held_out_documents(demo_run):
    output_dir, job, results = demo_run
    assert (job.train_batch_size, job.max_seq_length) == (16, 32)
    assert results["global_step"] == STEPS
    text_dir = os.path.join(output_dir, "data", "text")
    for file_name in os.listdir(os.path.join(text_dir, "eval")):
        train_text = open(os.path.join(text_dir, "train", file_name), encoding="utf-8").read()
        held_out = open(os.path.join(text_dir, "eval", file_name), encoding="utf-8").read()
        documents = [d for d in held_out.split("\n\n") if d.strip()]
        assert documents and not any(d.strip() in train_text for d in documents)
    loss = results["permutation_lm_loss"]
    baseline = results["unigram_baseline_permutation_lm_loss"]
    print("xlnet after %d steps: held-out permutation LM loss %.3f (perplexity %.1f), "
          "unigram %.3f (perplexity %.1f)" % (STEPS, loss, results["permutation_lm_perplexity"],
                                              baseline,
                                              results["unigram_baseline_permutation_lm_perplexity"]))
    assert loss < baseline, (loss, baseline)
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        text = f.read()
    assert "permutation_lm_loss" in text and "unigram_baseline_permutation_lm_loss" in text


def test_demo_config_gives_a_network_with_memory_across_batches(demo_run):
    """The job's config.json is XLNet's (HF names), and a network made from it
    carries its memory (mem_len 32) from one pipeline batch to the next."""
    output_dir, _, _ = demo_run
    config = registry.families.get("xlnet").load_config(os.path.join(output_dir, "config.json"))
    assert config.mem_len == 32 and config.d_model == 64
    network = XLNetNetwork.from_config_object(config)
    dataset = xlnet_pipeline.xlnet_dataset(SAMPLE, SPIECE, 32, 2, is_training=False, seed=0)
    first, second = [{k: v for k, v in b.items()} for b in dataset.take(2)]
    network(first, training=False)
    kept = network(second, training=False)["sequence_output"]
    fresh = network(dict(second, mem_reset=tf.ones([2], tf.int32)),
                    training=False)["sequence_output"]
    assert np.max(np.abs(kept.numpy() - fresh.numpy())) > 1e-4


def _step_metrics(strategy, weights, config, steps=3, forget=False):
    """Per-step summed permutation-LM (loss sum, count) of the recipe's model under
    `strategy`, on evaluation batches of 4 streams (`forget`: every row resets)."""
    recipe = recipes.load_recipe("xlnet")
    pipe = recipe.build_pipeline(PipelineOptions(vocab_file=SPIECE, max_seq_length=8, seed=3))
    with strategy.scope():
        model = recipe.build_model(config)
    model.set_weights(weights)
    dataset = strategy.distribute_datasets_from_function(pipe.input_fn(SAMPLE, False, 4))

    @tf.function
    def step(batch):
        def replica(features):
            if forget:
                features = dict(features, mem_reset=tf.ones_like(features["mem_reset"]))
            return model.compute_loss_and_metrics(features, training=False)[1][
                "permutation_lm_loss"]
        per_replica = strategy.run(replica, args=(batch,))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, t, axis=None) for t in per_replica]

    results = []
    for batch, _ in zip(dataset, range(steps)):
        results.append([float(t) for t in step(batch)])
    return np.array(results)


def test_two_replicas_each_keep_the_memory_of_their_own_streams():
    """Under MirroredStrategy on two logical CPUs (2 streams per replica), the
    summed metrics of consecutive memory-aligned steps equal one device's (4
    streams): each replica remembers its own rows. Without the memory the
    later steps' losses differ, so the comparison is not vacuous."""
    config = XLNetConfig(vocab_size=2000, d_model=16, n_layer=1, n_head=2, d_inner=32,
                         mem_len=8, dropout=0.0)
    recipe = recipes.load_recipe("xlnet")
    weights = recipe.build_model(config).get_weights()
    rng = np.random.default_rng(0)
    weights = [w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in weights]
    one = _step_metrics(tf.distribute.OneDeviceStrategy("/cpu:0"), weights, config)
    two = _step_metrics(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), weights, config)
    np.testing.assert_allclose(two, one, rtol=1e-4)
    forgetting = _step_metrics(tf.distribute.OneDeviceStrategy("/cpu:0"), weights, config,
                               forget=True)
    np.testing.assert_allclose(forgetting[0], one[0], rtol=1e-4)
    assert np.abs(forgetting[1:, 0] - one[1:, 0]).max() > 1e-3


def test_bad_inputs_get_one_line_errors(tmp_path):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("Only one short line.\n", encoding="utf-8")
    dataset = xlnet_pipeline.xlnet_dataset([str(tiny)], SPIECE, 32, 16, is_training=True,
                                           seed=0)
    with pytest.raises(Exception, match="too little text for 16 streams of 32-token"):
        next(iter(dataset))
    recipe = recipes.load_recipe("xlnet")
    wordpiece = os.path.join(REPO_ROOT, "data", "sample", "vocab.txt")
    pipe = recipe.build_pipeline(PipelineOptions(vocab_file=wordpiece, max_seq_length=32))
    with pytest.raises(ValueError, match="vocab.txt is not a SentencePiece model"):
        pipe.check_inputs(SAMPLE)
