"""ULMFiT's "ulmfit" pipeline: the corpus as contiguous BPTT streams, AWD-LSTM's
variable-length BPTT, the state resets, replicas with their own streams, refusals.

References are computed here: a small corpus of numbered words written by the test
(each document's words distinct, so a stream can be read back as documents), split
into streams by slicing, and the authors' length draw sampled many times.
"""

import json
import os
import types

import numpy as np
import pytest
import stream_replicas
import tensorflow as tf

from modeling import recipes
from modeling.elmo.pipeline import ElmoPipeline
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.ulmfit import AwdLstmConfig
from modeling.ulmfit import pipeline as ulmfit_pipeline

SAMPLE = [os.path.join(pretraining.SAMPLE_DIR, name) for name in ("sample_en.txt",
                                                                  "sample_zh.txt")]
SAMPLE_VOCAB = os.path.join(pretraining.SAMPLE_DIR, "elmo", "vocab.txt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """12 documents of 1-3 lines; word k of the corpus is `wk` (id k + 3)."""
    folder = tmp_path_factory.mktemp("ulmfit_corpus")
    rng = np.random.RandomState(0)
    documents, lines, k = [], [], 0
    for _ in range(12):
        document = []
        for _ in range(rng.randint(1, 4)):
            n = rng.randint(2, 7)
            document.append(["w%d" % (k + j) for j in range(n)])
            k += n
        documents.append(document)
        lines += [" ".join(words) for words in document] + [""]
    text = folder / "corpus.txt"
    text.write_text("\n".join(lines), encoding="utf-8")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["<S>", "</S>", "<UNK>"] + ["w%d" % i for i in range(k)]) + "\n",
                     encoding="utf-8")
    # Each document's stream words, by hand: <S>, then each line's words and </S>.
    ids = [np.array([0] + [i for words in document for i in
                           [int(w[1:]) + 3 for w in words] + [1]], np.int32)
           for document in documents]
    return str(text), str(vocab), ids


def pipeline_for(vocab, bptt, seed=0, **data):
    recipe = recipes.Recipe(name="t", description="", encoder="ulmfit",
                            objectives=("word_lm",), data=data, pipeline="ulmfit")
    return recipe.build_pipeline(PipelineOptions(vocab_file=vocab, max_seq_length=bptt,
                                                 seed=seed))


def steps_of(dataset, count=None):
    out = []
    for batch in dataset:
        out.append({k: v.numpy() for k, v in batch.items()})
        if count is not None and len(out) == count:
            break
    return out


def read_back(streams_text, documents):
    """The order in which whole `documents` make up `streams_text` (the last one may be
    cut short): each document starts with its own first word."""
    by_first = {int(d[1]): j for j, d in enumerate(documents)}
    order, p = [], 0
    while p < len(streams_text):
        assert streams_text[p] == 0, p  # <S>: a document starts here
        j = by_first[int(streams_text[p + 1])]
        document = documents[j]
        np.testing.assert_array_equal(streams_text[p:p + len(document)],
                                      document[:len(streams_text) - p])
        order.append(j)
        p += len(document)
    return order


def test_evaluation_rows_are_the_corpus_in_order_as_contiguous_streams(corpus):
    text, vocab, documents = corpus
    tokens = np.concatenate(documents)
    num_streams, bptt = 4, 5
    n = len(tokens) // num_streams
    expected = tokens[:n * num_streams].reshape(num_streams, n)  # AWD-LSTM's batchify
    pipe = pipeline_for(vocab, bptt)
    steps = steps_of(pipe.input_fn(text, False, num_streams)(None))
    assert len(steps) == -(-(n - 1) // bptt)
    for t, step in enumerate(steps):
        assert step["input_ids"].shape == (num_streams, bptt)
        np.testing.assert_array_equal(step["state_reset"], [int(t == 0)] * num_streams)
        lengths = step["input_mask"].sum(1)
        assert set(lengths) == {min(bptt, n - 1 - t * bptt)}
    for s in range(num_streams):
        inputs = np.concatenate([st["input_ids"][s][st["input_mask"][s] > 0] for st in steps])
        targets = np.concatenate([st["target_ids"][s][st["input_mask"][s] > 0]
                                  for st in steps])
        np.testing.assert_array_equal(inputs, expected[s, :-1])
        np.testing.assert_array_equal(targets, expected[s, 1:])
    # The baselines read the same rows (the objective's targets: every real position).
    model = recipes.load_recipe("ulmfit").build_model(AwdLstmConfig(
        vocab_size=int(tokens.max()) + 1, embedding_size=4, hidden_size=4))
    batch = next(pipe.baseline_batches(text, 100, batch_size=num_streams))
    np.testing.assert_array_equal(model.get_objective("word_lm").baseline_targets(batch),
                                  expected[:, 1:bptt + 1].reshape(-1))


def test_training_passes_are_shuffled_documents_in_streams_that_reset_at_each_pass(corpus):
    text, vocab, documents = corpus
    num_streams, bptt = 3, 6
    pipe = pipeline_for(vocab, bptt, seed=5)
    steps = steps_of(pipe.input_fn(text, True, num_streams)(None), 60)
    # Deterministic (a resumed run skips the batches it trained on and sees the rest).
    again = steps_of(pipe.input_fn(text, True, num_streams)(None), 60)
    for a, b in zip(steps, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    starts = [t for t, step in enumerate(steps) if step["state_reset"].any()]
    assert starts[0] == 0 and len(starts) >= 3
    for step in steps:
        assert len(set(step["state_reset"])) == 1  # all the rows of a step, or none
        assert len(set(step["input_mask"].sum(1))) == 1  # one length a step
    orders = []
    total = sum(len(d) for d in documents)
    n = total // num_streams
    for begin, end in zip(starts, starts[1:]):
        rows = []
        for s in range(num_streams):
            inputs = [st["input_ids"][s][st["input_mask"][s] > 0] for st in steps[begin:end]]
            targets = [st["target_ids"][s][st["input_mask"][s] > 0] for st in steps[begin:end]]
            # Each step continues the row: its first word is the last step's last target.
            for t in range(1, len(inputs)):
                assert inputs[t][0] == targets[t - 1][-1]
            rows.append(np.concatenate(inputs + [targets[-1][-1:]]))
            assert len(rows[-1]) == n
        order = read_back(np.concatenate(rows), documents)
        assert len(order) >= len(documents) - 1 and len(set(order)) == len(order)
        orders.append(order)
    assert orders[0] != orders[1]  # each pass its own order


def test_training_lengths_follow_awd_lstms_variable_bptt():
    rng = np.random.default_rng(0)
    draws = np.array([ulmfit_pipeline.bptt_length(rng, 70) for _ in range(20000)])
    half = draws < 52  # bptt / 2 (35) or bptt (70), each with its normal spread of 5
    assert 0.04 < half.mean() < 0.06
    full = draws[~half]
    assert abs(full.mean() - 69.5) < 0.2 and 4.8 < full.std() < 5.2  # int(N(70, 5))
    assert abs(draws[half].mean() - 34.5) < 0.5
    small = [ulmfit_pipeline.bptt_length(rng, 4) for _ in range(2000)]
    assert min(small) == ulmfit_pipeline.MIN_LENGTH
    # The pipeline's steps on the bundled corpus: drawn lengths, padded to bptt + 15.
    pipe = pipeline_for(SAMPLE_VOCAB, 32, seed=1)
    steps = steps_of(pipe.input_fn(SAMPLE, True, 4)(None), 400)
    assert {step["input_ids"].shape for step in steps} == {(4, 47)}
    last_of_pass = {t - 1 for t, step in enumerate(steps) if t and step["state_reset"][0]}
    lengths = np.array([step["input_mask"][0].sum() for t, step in enumerate(steps)
                        if t not in last_of_pass])
    assert lengths.min() >= 5 and lengths.max() <= 47
    assert 0.02 < (lengths < 24).mean() < 0.1
    assert abs(lengths[lengths >= 24].mean() - 31.5) < 1.0
    assert 1.0 < lengths[lengths >= 24].std() < 6.0
    # variable_bptt false: bptt words a step, rows of bptt.
    fixed = steps_of(pipeline_for(SAMPLE_VOCAB, 32, variable_bptt=False).input_fn(
        SAMPLE, True, 4)(None), 50)
    assert {step["input_ids"].shape for step in fixed} == {(4, 32)}
    assert {int(step["input_mask"][0].sum()) for step in fixed[:40]} == {32}


def _step_losses(strategy, weights, config, is_training, forget=False):
    """Per step, the summed (word_lm_loss sum, count) on batches of 4 streams."""
    return stream_replicas.step_metric(
        strategy, "ulmfit", config, weights,
        dict(vocab_file=SAMPLE_VOCAB, max_seq_length=8, seed=3), SAMPLE, "word_lm_loss",
        "state_reset", is_training=is_training, forget=forget)


@pytest.mark.parametrize("is_training", [False, True])
def test_two_replicas_each_carry_the_state_of_their_own_streams(is_training):
    """Under MirroredStrategy on two logical CPUs (2 streams per replica) the summed
    losses of consecutive steps equal one device's (4 streams), in evaluation and in
    training (variable lengths, the training state; no dropout): each replica carries
    its own rows. Without the carried state the later steps differ."""
    config = AwdLstmConfig(vocab_size=2275, embedding_size=8, hidden_size=12,
                           num_hidden_layers=2, embed_p=0.0, input_p=0.0, weight_p=0.0,
                           hidden_p=0.0, output_p=0.0, initrange=0.5)
    weights = recipes.load_recipe("ulmfit").build_model(config).get_weights()
    rng = np.random.default_rng(0)
    weights = [w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in weights]
    one = _step_losses(tf.distribute.OneDeviceStrategy("/cpu:0"), weights, config, is_training)
    two = _step_losses(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), weights, config,
                       is_training)
    np.testing.assert_allclose(two, one, rtol=1e-4)
    forgetting = _step_losses(tf.distribute.OneDeviceStrategy("/cpu:0"), weights, config,
                              is_training, forget=True)
    np.testing.assert_allclose(forgetting[0], one[0], rtol=1e-4)
    assert np.abs(forgetting[1:, 0] - one[1:, 0]).max() > 1e-3


def test_the_sentences_layout_is_one_sentence_per_example():
    pipe = pipeline_for(SAMPLE_VOCAB, 16, layout="sentences")
    elmo = ElmoPipeline({}, PipelineOptions(vocab_file=SAMPLE_VOCAB, max_seq_length=16, seed=0))
    ours = steps_of(pipe.input_fn(SAMPLE, False, 8)(None), 3)
    theirs = steps_of(elmo.input_fn(SAMPLE, False, 8)(None), 3)
    for a, b in zip(ours, theirs):
        assert sorted(a) == sorted(b) == ["char_ids", "input_ids", "input_mask"]
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_refusals_name_the_setting(tmp_path):
    for data, message in (({"layout": "windows"}, "layout must be one of stream, sentences"),
                          ({"variable_bptt": "yes"}, "variable_bptt must be true or false")):
        with pytest.raises(ValueError, match=message):
            pipeline_for(SAMPLE_VOCAB, 16, **data)
    with pytest.raises(ValueError, match="--max_seq_length must be at least 2"):
        pipeline_for(SAMPLE_VOCAB, 1)
    pipe = pipeline_for(SAMPLE_VOCAB, 16)
    with pytest.raises(ValueError, match="--data_service_address: the ulmfit stream layout"):
        pipe.check_job(types.SimpleNamespace(data_service_address="grpc://x:1",
                                             strategy_name="one_device"))
    with pytest.raises(ValueError, match="--use_xla: the ulmfit stream layout"):
        pipe.check_job(types.SimpleNamespace(data_service_address=None,
                                             strategy_name="one_device", use_xla=True))
    pipeline_for(SAMPLE_VOCAB, 16, layout="sentences").check_job(
        types.SimpleNamespace(data_service_address="grpc://x:1", strategy_name="tpu",
                              use_xla=True))
    # Through the job, before anything is written.
    output_dir = tmp_path / "out"
    with pytest.raises(ValueError, match="--distribution_strategy=tpu: the ulmfit stream "
                                         "layout keeps the LSTM states"):
        pretraining.run(pretraining.PretrainingJob.for_demo(
            recipe="ulmfit", output_dir=str(output_dir), distribution_strategy="tpu"))
    assert not output_dir.exists()
    # Too little text for the streams: named, with what is expected.
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("one two\n", encoding="utf-8")
    with pytest.raises(Exception, match="4 words for 4 BPTT streams; expected at least 8"):
        steps_of(pipe.input_fn(str(tiny), False, 4)(None))
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"name": "r", "encoder": "ulmfit", "objectives": ["word_lm"],
                                  "pipeline": "ulmfit", "data": {"bptt": 70}}))
    with pytest.raises(recipes.RecipeError, match="takes no data option 'bptt'"):
        recipes.load_recipe(str(recipe))
