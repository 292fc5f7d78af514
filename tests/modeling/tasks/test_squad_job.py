"""modeling/tasks/squad_job.py and run/run_squad.py: SQuAD fine-tuning end to end.

The learning test's data, step budget and threshold are fixed here, before any
run: a randomly initialised 2-layer BERT (hidden 32) trains on 240 generated
questions ("which animal has a colour ?" about a paragraph of filler words, one
"<colour> <animal>" pair and a bare distractor animal; the answer is the pair)
for 5 epochs of batch 16 (75 steps), then answers 40 held-out questions whose
(colour, animal) pairs never occur in training. Passing: exact match >= 60 and
F1 >= 70, where the same model untrained scores exact match <= 10 (it scored 0,
F1 9-19, in seeds 3-6; trained, exact match 72.5-85 and F1 83-90).
Paragraphs are long enough for two windows at max_seq_length 32 and
doc_stride 8, so decoding across windows is part of the run.
"""

import json
import os
import random
import sys

import numpy as np
import pytest

import script_runner
from modeling import bert as config_lib
from modeling import registry
from modeling.tasks import span_qa
from modeling.tasks import squad_job

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_squad.py")
COLOURS = ["red", "blue", "green", "yellow", "black", "white"]
ANIMALS = ["cat", "dog", "fox", "owl", "bee", "cow"]
FILLERS = ["the", "box", "near", "old", "big", "small", "tree", "house", "river", "park",
           "and", "under", "by", "stone", "hill", "road"]
QUESTION = "Which animal has a colour?"
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "which", "animal", "has", "a",
          "colour", "?", "."] + COLOURS + ANIMALS + FILLERS)


def _pairs(held_out):
    return [(c, a) for i, c in enumerate(COLOURS) for j, a in enumerate(ANIMALS)
            if ((i + j) % 4 == 0) == held_out]


def _dataset(path, n, seed, held_out):
    rng = random.Random(seed)
    pairs = _pairs(held_out)
    qas_paragraphs = []
    for k in range(n):
        colour, animal = rng.choice(pairs)
        words = [rng.choice(FILLERS) for _ in range(rng.randint(14, 22))]
        distractor = rng.choice([a for a in ANIMALS if a != animal])
        words.insert(rng.randint(0, len(words)), distractor)
        position = rng.randint(0, len(words))
        words[position:position] = [colour.capitalize() if rng.random() < 0.3 else colour,
                                    animal]
        context = " ".join(words) + "."
        answer = " ".join(words[position:position + 2])
        start = len(" ".join(words[:position])) + (1 if position else 0)
        assert context[start:start + len(answer)] == answer
        qas_paragraphs.append({"context": context, "qas": [
            {"id": "%s-%d" % ("dev" if held_out else "train", k), "question": QUESTION,
             "answers": [{"text": answer, "answer_start": start}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "generated", "paragraphs": qas_paragraphs}]}))
    return str(path)


@pytest.fixture
def model_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=64,
                                   max_position_embeddings=32, type_vocab_size=2,
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    return tmp_path


def _job(model_files, **kwargs):
    values = dict(bert_config_file=str(model_files / "bert_config.json"),
                  vocab_file=str(model_files / "vocab.txt"),
                  output_dir=str(model_files / "out"), max_seq_length=32, doc_stride=8,
                  max_query_length=8, train_batch_size=16, predict_batch_size=16,
                  learning_rate=3e-3, num_train_epochs=5.0, warmup_proportion=0.1,
                  log_steps=25, save_checkpoints_steps=1000, steps_per_loop=25, seed=3)
    values.update(kwargs)
    return squad_job.SquadJob(**values)


def test_registered_as_the_squad_task():
    task = registry.tasks.get("squad")
    assert task.job_class is squad_job.SquadJob and task.run is squad_job.run


def test_span_model_masks_padding_and_averages_start_and_end_cross_entropy(model_files):
    config = config_lib.BertConfig.from_json_file(str(model_files / "bert_config.json"))
    model = span_qa.BertSpanQA.from_config_object(config)
    assert [tuple(w.shape) for w in (model.output_weights, model.output_bias)] == [(2, 32), (2,)]
    rng = np.random.RandomState(0)
    features = {"input_ids": rng.randint(5, len(VOCAB), size=(3, 10)).astype("int32"),
                "input_mask": np.array([[1] * 10, [1] * 7 + [0] * 3, [1] * 4 + [0] * 6],
                                       "int32"),
                "segment_ids": np.array([[0] * 4 + [1] * 6] * 3, "int32"),
                "start_positions": np.array([3, 0, 2], "int32"),
                "end_positions": np.array([5, 0, 3], "int32"),
                "unique_ids": np.array([7, 8, 9], "int64")}
    outputs = model(features, training=False)
    start, end = outputs["start_logits"].numpy(), outputs["end_logits"].numpy()
    assert start.shape == end.shape == (3, 10)
    assert (start[1, 7:] < -5000).all() and (end[2, 4:] < -5000).all()
    assert (np.abs(start[0]) < 100).all()

    def cross_entropy(logits, labels):
        logits = logits - logits.max(axis=1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return -log_probs[np.arange(len(labels)), labels]

    expected = np.mean((cross_entropy(start, features["start_positions"]) +
                        cross_entropy(end, features["end_positions"])) / 2)
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["loss"][1]) == 3.0
    # The config round trip rebuilds the same model.
    clone = span_qa.BertSpanQA.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(features)["end_logits"].numpy(), end, atol=1e-5)


def test_bad_jobs_are_refused_with_one_line(model_files):
    with pytest.raises(squad_job.SquadJobError, match="--model_family=gpt: span QA packs"):
        squad_job.run(_job(model_files, do_predict=True, predict_file=str(model_files),
                           model_family="gpt"))
    with pytest.raises(squad_job.SquadJobError, match="At least one of `do_train`"):
        squad_job.run(squad_job.SquadJob())
    with pytest.raises(squad_job.SquadJobError, match="`train_file` must be specified"):
        squad_job.run(_job(model_files, do_train=True))
    with pytest.raises(squad_job.SquadJobError,
                       match=r"The max_seq_length \(32\) must be greater than max_query_length"):
        squad_job.run(_job(model_files, do_predict=True, predict_file=str(model_files),
                           max_query_length=29))
    bad = model_files / "bad.json"
    bad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "red cat.", "qas": [
        {"id": "q", "question": "which?", "answers": [{"text": "dog", "answer_start": 0}]}]}]}]}))
    with pytest.raises(squad_job.SquadJobError) as error:
        squad_job.run(_job(model_files, do_train=True, train_file=str(bad)))
    assert str(error.value) == ("%s: data[0].paragraphs[0].qas[0] (id q): answer 'dog' is not "
                                "in the context (answer_start=0 has 'red')" % bad)
    assert not (model_files / "out").exists()  # refused before writing anything


def test_learns_to_answer_held_out_questions(model_files):
    train = _dataset(model_files / "train.json", 240, seed=1, held_out=False)
    dev = _dataset(model_files / "dev.json", 40, seed=2, held_out=True)
    out = model_files / "out"
    # The same model untrained (no checkpoint): the baseline.
    untrained = squad_job.run(_job(model_files, do_predict=True, predict_file=dev,
                                   output_dir=str(model_files / "untrained")))
    assert untrained.eval_results["global_step"] == 0
    assert untrained.eval_results["exact_match"] <= 10.0, untrained.eval_results
    result = squad_job.run(_job(model_files, do_train=True, train_file=train, do_predict=True,
                                predict_file=dev))
    scores = result.eval_results
    print(scores)
    assert scores["global_step"] == 75  # int(240 / 16 * 5)
    assert scores["total"] == 40
    assert scores["exact_match"] >= 60.0 and scores["f1"] >= 70.0, scores
    with open(out / "predictions.json") as f:
        assert json.load(f) == result.predictions
    with open(out / "nbest_predictions.json") as f:
        nbest = json.load(f)
    assert set(nbest) == set(result.predictions) and len(nbest) == 40
    for qid, entries in nbest.items():
        assert entries[0]["text"] == result.predictions[qid]
        assert len(entries) <= 20
        assert abs(sum(e["probability"] for e in entries) - 1.0) < 1e-6
    with open(out / "eval_results.json") as f:
        assert json.load(f) == pytest.approx(scores)
    assert not (out / "null_odds.json").exists()
    # Predict again from the checkpoint, as SQuAD 2.0: null_odds.json appears and
    # an answerable question keeps its answer unless the null answer scores higher.
    again = squad_job.run(_job(model_files, do_predict=True, predict_file=dev,
                               version_2_with_negative=True,
                               null_score_diff_threshold=1e9))
    assert again.predictions == result.predictions
    assert set(again.null_odds) == set(result.predictions)
    assert (out / "null_odds.json").exists()


def test_the_script_refuses_a_bad_flag_with_one_line(model_files):
    _dataset(model_files / "x.json", 2, seed=0, held_out=False)
    result = script_runner.run(
        [sys.executable, SCRIPT, "--do_train", "--train_file=%s" % (model_files / "x.json"),
         "--bert_config_file=%s" % (model_files / "bert_config.json"),
         "--vocab_file=%s" % (model_files / "vocab.txt"),
         "--output_dir=%s" % (model_files / "o"), "--doc_stride=0"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    # (TensorFlow's own start-up lines from C++ may come first.)
    ours = [line for line in result.stderr.splitlines() if line.startswith("run_squad:")]
    assert ours == ["run_squad: error: --doc_stride must be positive, got 0."], result.stderr
    assert result.stderr.rstrip().endswith(ours[0])
    assert not (model_files / "o").exists()
