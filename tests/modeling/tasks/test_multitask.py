"""MT-DNN multi-task learning: the task list, task sampling, per-task heads and losses,
and `run_multitask.py` end to end (data/multitask.py, modeling/tasks/multitask.py,
modeling/tasks/multitask_job.py).

The learning test fixes its data, budget and thresholds in its docstring; its dev
sentences are drawn apart from the training ones (checked disjoint).
"""

import json
import math
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import multitask as data_lib
from data import tokenization
from modeling import bert as config_lib
from modeling import checkpoints
from modeling import registry
from modeling.tasks import classification
from modeling.tasks import multitask as model_lib
from modeling.tasks import multitask_job
from modeling.tasks import span_qa
from modeling.tasks import tagging
from modeling.training import optimization

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_multitask.py")

COLOURS = ["red", "blue", "green", "yellow", "pink", "brown"]
ANIMALS = ["cat", "dog", "bird", "fish", "cow", "horse"]
FILLERS = ["the", "a", "saw", "near", "big", "small", "old", "man", "house", "tree", "car",
           "and"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + COLOURS + ANIMALS + FILLERS
SEQ = 12


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_bert")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=32,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=16,
                                   type_vocab_size=2)
    config.to_json_file(str(directory / "bert_config.json"))
    return directory


def _sentence(rng, words=6):
    """Random words; about half the sentences hold a colour, most an animal."""
    out = [rng.choice(FILLERS) for _ in range(words)]
    if rng.random() < 0.5:
        out[rng.randrange(words)] = rng.choice(COLOURS)
    if rng.random() < 0.7:
        out[rng.randrange(words)] = rng.choice(ANIMALS)
    return out


def _sentences(n, seed, avoid=()):
    rng, seen, out = random.Random(seed), set(avoid), []
    while len(out) < n:
        words = _sentence(rng, rng.randint(4, 8))
        if " ".join(words) not in seen:
            seen.add(" ".join(words))
            out.append(words)
    return out


def _write_classification(directory, train, dev):
    """Generic jsonl: label 1 iff the sentence names a colour."""
    os.makedirs(directory, exist_ok=True)
    for name, rows in (("train.jsonl", train), ("dev.jsonl", dev)):
        with open(os.path.join(directory, name), "w") as f:
            for words in rows:
                label = int(any(w in COLOURS for w in words))
                f.write(json.dumps({"text": " ".join(words), "label": str(label)}) + "\n")


def _tag(word):
    return "B-COL" if word in COLOURS else "B-ANI" if word in ANIMALS else "O"


def _write_tagging(directory, train, dev):
    os.makedirs(directory, exist_ok=True)
    for name, rows in (("train.txt", train), ("dev.txt", dev)):
        with open(os.path.join(directory, name), "w") as f:
            for words in rows:
                f.write("".join("%s %s\n" % (w, _tag(w)) for w in words) + "\n")


def _write_ranking(directory, n_train, n_dev, seed=0):
    """Query: an animal; two candidates, the right one holds the same animal."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for name, n in (("train.jsonl", n_train), ("dev.jsonl", n_dev)):
        with open(os.path.join(directory, name), "w") as f:
            for _ in range(n):
                animal, other = rng.sample(ANIMALS, 2)
                right = "the %s saw a %s" % (animal, rng.choice(FILLERS))
                wrong = "the %s saw a %s" % (other, rng.choice(FILLERS))
                label = rng.randrange(2)
                choices = [right, wrong] if label == 0 else [wrong, right]
                f.write(json.dumps({"context": "a " + animal, "choices": choices,
                                    "label": label}) + "\n")


def _write_squad(directory, n_train, n_dev, seed=0):
    """SQuAD JSON: 'which colour' over a sentence holding one colour word (the answer)."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for name, n in (("train.json", n_train), ("dev.json", n_dev)):
        paragraphs = []
        for i in range(n):
            words = [rng.choice(FILLERS) for _ in range(rng.randint(5, 9))]
            colour = rng.choice(COLOURS)
            position = rng.randrange(len(words))
            words[position] = colour
            context = " ".join(words)
            start = len(" ".join(words[:position])) + (1 if position else 0)
            assert context[start:start + len(colour)] == colour
            paragraphs.append({"context": context, "qas": [{
                "id": "%s-%d" % (name, i), "question": "which colour",
                "answers": [{"text": colour, "answer_start": start}]}]})
        with open(os.path.join(directory, name), "w") as f:
            json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]},
                      f)


CLASSIFICATION_ENTRY = {"name": "colour", "processor": "generic", "data_dir": "colour",
                        "head": "classification",
                        "options": {"file_format": "jsonl", "text_a_column": "text",
                                    "label_column": "label"}}
TAGGING_ENTRY = {"name": "things", "processor": "ner", "data_dir": "things", "head": "tagging"}
RANKING_ENTRY = {"name": "match", "processor": "multiple_choice", "data_dir": "match",
                 "head": "ranking"}
SPAN_ENTRY = {"name": "which", "processor": "squad", "data_dir": "which", "head": "span_qa",
              "options": {"max_query_length": 4, "doc_stride": 3}}


def _task_list(directory, entries):
    path = os.path.join(str(directory), "tasks.json")
    with open(path, "w") as f:
        json.dump(entries, f)
    return path


def _job(bert_files, task_list, output_dir, **kwargs):
    values = dict(task_list_file=task_list, output_dir=str(output_dir),
                  vocab_file=str(bert_files / "vocab.txt"),
                  bert_config_file=str(bert_files / "bert_config.json"), max_seq_length=SEQ,
                  train_batch_size=16, eval_batch_size=16, learning_rate=1e-3,
                  warmup_proportion=0.1, log_steps=1000, steps_per_loop=20, seed=1)
    values.update(kwargs)
    return multitask_job.MultitaskJob(**values)


def test_registered_as_the_multitask_task():
    task = registry.tasks.get("multitask")
    assert task.job_class is multitask_job.MultitaskJob and task.run is multitask_job.run
    assert task.model_class is model_lib.MultiTaskModel


# ------------------------------------------------------------------ task list


def test_bad_task_lists_give_one_line_naming_file_entry_and_field(tmp_path, bert_files):
    os.makedirs(tmp_path / "colour")
    good = dict(CLASSIFICATION_ENTRY)

    def error(entries, raw=None):
        path = str(tmp_path / "tasks.json")
        with open(path, "w") as f:
            f.write(raw if raw is not None else json.dumps(entries, indent=1))
        with pytest.raises(data_lib.TaskListError) as info:
            data_lib.read_task_list(path)
        message = str(info.value)
        assert "\n" not in message and message.startswith(path), message
        return message[len(path):]

    assert error(None, raw="[{\"name\": \"a\",]") .startswith(":1:15: not valid JSON")
    assert "expected a non-empty JSON list" in error({"name": "a"})
    assert "expected a non-empty JSON list" in error([])
    assert error(["mrpc"]) == ': entry 0: expected a JSON object, got "mrpc"'
    assert error([good, {k: v for k, v in good.items() if k != "head"}]) == (
        ": entry 1 ('colour'): field 'head': missing (required: name, processor, "
        "data_dir, head)")
    assert error([dict(good, head="clasification")]) == (
        ": entry 0 ('colour'): field 'head': 'clasification': expected one of "
        "classification, regression, ranking, span_qa, tagging")
    assert error([good, good]) == (": entry 1 ('colour'): field 'name': 'colour' is already "
                                   "the name of entry 0; names must be unique")
    assert error([dict(good, weight=-1)]) == (
        ": entry 0 ('colour'): field 'weight': expected a positive number (the loss "
        "weight), got -1")
    assert "field 'weight'" in error([dict(good, weight="2")])
    assert error([dict(good, wieght=2)]).startswith(
        ": entry 0 ('colour'): field 'wieght': unknown field; the fields are name, ")
    assert error([dict(good, name="a b")]).startswith(": entry 0 ('a b'): field 'name'")
    assert error([dict(good, data_dir="nowhere")]) == (
        ": entry 0 ('colour'): field 'data_dir': %s is not a directory"
        % (tmp_path / "nowhere"))
    assert error([dict(good, options=[1])]).startswith(": entry 0 ('colour'): field 'options'")

    # Checks that need the head and the processor: raised by the job, before training.
    _write_classification(str(tmp_path / "colour"), _sentences(8, 0), _sentences(4, 1))
    out = tmp_path / "out"

    def job_error(entry):
        path = _task_list(tmp_path, [entry])
        with pytest.raises(multitask_job.MultitaskJobError) as info:
            multitask_job.run(_job(bert_files, path, out, do_train=True, num_train_steps=1))
        message = str(info.value)
        assert "\n" not in message and message.startswith(path + ": entry 0"), message
        return message[len(path):]

    assert job_error(dict(good, options={"tagging_scheme": "bio"})) == (
        ": entry 0 ('colour'): field 'options': 'tagging_scheme' is not an option of a "
        "classification task; its options: file_format, text_a_column, text_b_column, "
        "label_column, guid_column, has_header, labels, task_type, label_separator, "
        "train_file, dev_file, test_file, eval_metrics, ids_num_labels, "
        "ids_label_from_last_id, ids_cls_id, ids_sep_id, ids_offset, ids_keep, "
        "xnli_language, classifier, san_steps, san_step_dropout")
    # JSON booleans given as strings: refused, never read as true.
    assert job_error(dict(SPAN_ENTRY, data_dir="colour",
                          options={"version_2_with_negative": "false"})) == (
        ": entry 0 ('which'): field 'options': version_2_with_negative=\"false\": expected "
        "a JSON true or false")
    assert job_error(dict(good, options=dict(good["options"], has_header="false"))) == (
        ": entry 0 ('colour'): field 'options': has_header=\"false\": expected a JSON true "
        "or false")
    assert job_error(dict(good, head="tagging", options={})) == (
        ": entry 0 ('colour'): field 'processor': 'generic': a tagging task reads CoNLL "
        "files (processor \"ner\")")
    assert job_error(dict(good, head="ranking", options={})).startswith(
        ": entry 0 ('colour'): field 'processor': 'generic': a ranking task reads the "
        "multiple-choice JSON lines")
    assert "Task not found: nosuch" in job_error(dict(good, processor="nosuch"))
    assert job_error(dict(good, processor="stsb", options={})) == (
        ": entry 0 ('colour'): field 'head': 'classification', but the processor "
        "StsbProcessor is a regression task")
    # A bad data row: the task list entry, then the file and line.
    with open(tmp_path / "colour" / "train.jsonl", "a") as f:
        f.write("{\"text\": \"red cat\"}\n")
    message = job_error(good)
    assert "train.jsonl:9" in message and "'label'" in message, message


# ------------------------------------------------------------------- sampling


def test_sampling_probabilities_follow_size_to_the_one_over_temperature():
    assert data_lib.sampling_probabilities([300, 100], 1.0) == pytest.approx([0.75, 0.25])
    assert data_lib.sampling_probabilities([400, 100], 2.0) == pytest.approx([2 / 3, 1 / 3])
    assert data_lib.sampling_probabilities([400, 100, 7], math.inf) == pytest.approx(
        [1 / 3] * 3)
    # Huge sizes and small temperatures stay finite.
    assert data_lib.sampling_probabilities([1e9, 1e8], 0.01) == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError, match="sampling_temperature must be positive"):
        data_lib.sampling_probabilities([1, 2], 0.0)


@pytest.fixture(scope="module")
def three_tasks(tmp_path_factory, bert_files):
    """A classification (60 examples), a tagging (20), a ranking (15 queries) and a span
    QA task (8 questions, some split into several windows), prepared (records written)
    by the job's own code."""
    root = tmp_path_factory.mktemp("three_tasks")
    _write_classification(str(root / "colour"), _sentences(60, 0), _sentences(8, 1))
    _write_tagging(str(root / "things"), _sentences(20, 2), _sentences(8, 3))
    _write_ranking(str(root / "match"), 15, 6)
    _write_squad(str(root / "which"), 8, 4)
    path = _task_list(root, [CLASSIFICATION_ENTRY, TAGGING_ENTRY, RANKING_ENTRY, SPAN_ENTRY])
    job = _job(bert_files, path, root / "out", do_train=True, do_eval=True)
    os.makedirs(job.output_dir)
    tokenizer = tokenization.FullTokenizer(job.vocab_file, True)
    tasks = multitask_job.prepare_tasks(job, data_lib.read_task_list(path), tokenizer,
                                        len(VOCAB))
    return job, tasks


def test_each_batch_holds_one_task_drawn_with_binomial_frequencies(three_tasks):
    """N = 1500 batches per temperature; each task's count must be within 4.5 binomial
    standard deviations of N p_t, p_t = n_t^(1/T) / sum n^(1/T), with n = (60, 20, 15, w)
    (w: the span task's document windows); every batch holds one task's rows only."""
    job, tasks = three_tasks
    windows = tasks[3].num_train
    assert [t.num_train for t in tasks[:3]] == [60, 20, 15] and windows > 8
    assert tasks[2].num_choices == 2
    n = 1500
    for temperature in (1.0, 2.0):
        sizes = np.array([60.0, 20.0, 15.0, windows])
        expected = sizes ** (1 / temperature) / np.sum(sizes ** (1 / temperature))
        probabilities = data_lib.sampling_probabilities([t.num_train for t in tasks],
                                                        temperature)
        assert probabilities == pytest.approx(expected)
        dataset = multitask_job.train_input_fn(tasks, probabilities, SEQ, 4, seed=7)()
        counts = np.zeros(4)
        for batch in dataset.take(n).as_numpy_iterator():
            assert set(batch) == set(data_lib.UNION_KEYS)
            ids = batch["task_id"]
            task = int(ids[0])
            assert ids.shape == (4,) and (ids == task).all()     # one task per batch
            assert batch["input_ids"].shape == (4, SEQ)
            counts[task] += 1
            tagged = batch["label_mask"].sum()
            answers = batch["start_positions"].sum() + batch["end_positions"].sum()
            assert (tagged > 0) == (task == 1)
            if task == 2:                                # 2 queries x 2 candidates
                assert batch["label_ids"].reshape(2, 2).sum(axis=1).tolist() == [1, 1]
            if task != 3:
                assert answers == 0
            else:
                assert (batch["end_positions"] >= batch["start_positions"]).all()
        sigma = np.sqrt(n * expected * (1 - expected))
        assert np.all(np.abs(counts - n * expected) <= 4.5 * sigma), (temperature, counts,
                                                                     n * expected)


# ------------------------------------------------------------ model and heads


ALL_TASKS = [{"name": "cls", "head": "classification", "num_labels": 3},
             {"name": "reg", "head": "regression", "weight": 0.5},
             {"name": "rank", "head": "ranking", "num_choices": 3},
             {"name": "tags", "head": "tagging", "num_labels": 4},
             {"name": "qa", "head": "span_qa"}]


def _config():
    return config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64,
                                 max_position_embeddings=16, type_vocab_size=2)


def _batch(task_id, rows, rng):
    ids = rng.randint(5, len(VOCAB), size=(rows, SEQ))
    mask = np.ones((rows, SEQ), np.int32)
    mask[:, SEQ - 3:] = 0
    ids[mask == 0] = 0
    label_mask = np.zeros((rows, SEQ), np.int32)
    label_mask[:, 1:6] = 1
    return {"input_ids": ids.astype(np.int32), "input_mask": mask,
            "segment_ids": np.zeros((rows, SEQ), np.int32),
            "task_id": np.full([rows], task_id, np.int32),
            "is_real_example": np.ones([rows], np.int32),
            "label_ids": rng.randint(0, 3, size=rows).astype(np.int32),
            "label_values": rng.normal(size=rows).astype(np.float32),
            "tag_ids": rng.randint(0, 4, size=(rows, SEQ)).astype(np.int32),
            "label_mask": label_mask,
            "start_positions": rng.randint(0, SEQ - 3, size=rows).astype(np.int32),
            "end_positions": rng.randint(0, SEQ - 3, size=rows).astype(np.int32)}


def _concat(a, b):
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def _metric(metrics, name):
    total, count = metrics[name]
    return float(total) / float(count)


def test_each_task_loss_equals_its_single_task_model_with_the_same_weights():
    """Same encoder and head weights: the multi-task loss of each task equals the
    single-task model's loss (BertClassifier, BertTagger, BertSpanQA; ranking against a
    numpy softmax over each query's candidates), also when a batch mixes two tasks; the
    total is sum_t weight_t loss_t."""
    tf.random.set_seed(0)
    rng = np.random.RandomState(0)
    config = _config()
    model = model_lib.MultiTaskModel.from_config_object(config, ALL_TASKS)
    heads = {task["name"]: head for task, head in zip(model.tasks, model.heads)}
    for head in model.heads:   # non-zero biases, so a wrong bias would show
        head.output_bias.assign(rng.normal(size=head.output_bias.shape).astype(np.float32))

    def single(cls, name, **kwargs):
        other = cls.from_config_object(config, **kwargs)
        other.encoder.set_weights(model.encoder.get_weights())
        other.output_weights.assign(heads[name].output_weights.numpy())
        other.output_bias.assign(heads[name].output_bias.numpy())
        return other

    def single_loss(other, features):
        loss, _ = other.compute_loss_and_metrics(features, training=False)
        return float(loss)

    # Classification: labels as in a classifier batch; a batch of task 0 only.
    batch = _batch(0, 6, rng)
    loss, metrics = model.compute_loss_and_metrics(batch, training=False)
    reference = single_loss(single(classification.BertClassifier, "cls", num_labels=3),
                            {"input_ids": batch["input_ids"], "input_mask": batch["input_mask"],
                             "segment_ids": batch["segment_ids"],
                             "label_ids": batch["label_ids"],
                             "is_real_example": batch["is_real_example"]})
    assert _metric(metrics, "cls/loss") == pytest.approx(reference, rel=1e-5)
    assert float(loss) == pytest.approx(reference, rel=1e-5)
    for other in ("reg", "rank", "tags", "qa"):
        assert [float(v) for v in metrics[other + "/loss"]] == [0.0, 0.0]

    # Regression (weight 0.5) mixed with tagging rows in one batch.
    reg, tags = _batch(1, 4, rng), _batch(3, 5, rng)
    loss, metrics = model.compute_loss_and_metrics(_concat(reg, tags), training=False)
    reg_reference = single_loss(single(classification.BertClassifier, "reg",
                                       task_type="regression"),
                                {**{k: reg[k] for k in ("input_ids", "input_mask",
                                                        "segment_ids", "is_real_example")},
                                 "label_ids": reg["label_values"]})
    tag_reference = single_loss(single(tagging.BertTagger, "tags", num_labels=4),
                                {**{k: tags[k] for k in ("input_ids", "input_mask",
                                                         "segment_ids", "is_real_example",
                                                         "label_mask")},
                                 "label_ids": tags["tag_ids"]})
    assert _metric(metrics, "reg/loss") == pytest.approx(reg_reference, rel=1e-5)
    assert _metric(metrics, "tags/loss") == pytest.approx(tag_reference, rel=1e-5)
    assert float(loss) == pytest.approx(0.5 * reg_reference + tag_reference, rel=1e-5)

    # Span QA.
    qa = _batch(4, 5, rng)
    _, metrics = model.compute_loss_and_metrics(qa, training=False)
    qa_reference = single_loss(single(span_qa.BertSpanQA, "qa"),
                               {k: qa[k] for k in ("input_ids", "input_mask", "segment_ids",
                                                   "start_positions", "end_positions")})
    assert _metric(metrics, "qa/loss") == pytest.approx(qa_reference, rel=1e-5)

    # Ranking: 3 queries x 3 candidates; numpy softmax over each query's rows.
    rank = _batch(2, 9, rng)
    gold = np.array([2, 0, 1])
    rank["label_ids"] = np.eye(3, dtype=np.int32)[gold].reshape(-1)
    rank["is_real_example"][6:] = 0                      # the third query is padding
    outputs = model(rank, training=False)
    _, metrics = model.compute_loss_and_metrics(rank, training=False)
    pooled = model.encoder({k: rank[k] for k in ("input_ids", "input_mask", "segment_ids")},
                           training=False)["pooled_output"].numpy()
    scores = (pooled @ heads["rank"].output_weights.numpy().T)[:, 0] + \
        heads["rank"].output_bias.numpy()[0]
    np.testing.assert_allclose(outputs["rank/scores"].numpy(), scores, rtol=1e-5, atol=1e-6)
    grouped = scores.reshape(3, 3)
    log_softmax = grouped - np.log(np.exp(grouped).sum(axis=1, keepdims=True))
    per_query = -log_softmax[np.arange(3), gold]
    assert [float(v) for v in metrics["rank/loss"]] == pytest.approx(
        [per_query[:2].sum(), 2.0], rel=1e-5)
    right = (grouped.argmax(axis=1) == gold)[:2].sum()
    assert [float(v) for v in metrics["rank/accuracy"]] == pytest.approx([right, 2.0])


def test_a_batch_trains_its_own_head_and_the_encoder_and_no_other_head():
    """One batch of task 'cls': its head and the encoder get gradients, every other head
    exactly zero. With the job's optimizer (AdamW, weight decay 0.01): a step on a 'reg'
    batch, then a step on a 'cls' batch; the second step leaves the 'reg' head exactly as
    the first left it (no momentum, no decay) while the encoder and the 'cls' head move.
    The plain AdamW, given the same two steps, does move the idle 'reg' head."""
    tf.random.set_seed(1)
    rng = np.random.RandomState(1)
    model = model_lib.MultiTaskModel.from_config_object(_config(), ALL_TASKS)
    variables = model.trainable_variables
    initial = [v.numpy().copy() for v in variables]
    cls_batch = {k: tf.constant(v) for k, v in _batch(0, 6, rng).items()}
    reg_batch = {k: tf.constant(v) for k, v in _batch(1, 6, rng).items()}

    def gradients(batch):
        with tf.GradientTape() as tape:
            loss, _ = model.compute_loss_and_metrics(batch, training=True)
        return dict(zip([id(v) for v in variables], tape.gradient(loss, variables)))

    grads = gradients(cls_batch)

    def norm(layer):
        return sum(float(tf.reduce_sum(tf.square(tf.convert_to_tensor(grads[id(v)]))))
                   for v in layer.trainable_variables if grads[id(v)] is not None)

    assert norm(model.encoder) > 0 and norm(model.heads[0]) > 0
    for head in model.heads[1:]:
        assert norm(head) == 0.0, head.name

    job = multitask_job.MultitaskJob(learning_rate=1e-2)
    for guarded in (True, False):
        for v, value in zip(variables, initial):
            v.assign(value)
        optimizer = (multitask_job.create_optimizer(job, 10, 0) if guarded else
                     optimization.create_optimizer(1e-2, 10, 0))
        for batch in (reg_batch, cls_batch):
            before = {id(v): v.numpy().copy() for v in variables}
            grads = gradients(batch)
            optimizer.apply_gradients([(grads[id(v)], v) for v in variables])
        moved = {id(v): not np.array_equal(before[id(v)], v.numpy()) for v in variables}
        reg_head, cls_head = model.heads[1], model.heads[0]
        assert all(moved[id(v)] for v in cls_head.trainable_variables)
        assert any(moved[id(v)] for v in model.encoder.trainable_variables)
        # output_weights: both momentum and decay apply to it.
        assert moved[id(reg_head.output_weights)] is not guarded
        for head in model.heads[2:]:   # never trained: unchanged with the guard
            assert not guarded or not any(moved[id(v)] for v in head.trainable_variables)


# ------------------------------------------------------------------ end to end


def test_multitask_run_learns_three_tasks_on_held_out_data_and_its_encoder_loads(
        tmp_path, bert_files):
    """Budget and thresholds fixed in advance: a 1-layer BERT (hidden 32) from random
    weights trained on three generated tasks at once, 'colour' (classification: does the
    sentence name a colour; 96 training sentences), 'things' (tagging: B-COL, B-ANI or
    O per word; 96 sentences) and 'which' (span QA: the colour word of a sentence; 96
    questions, cut into windows), batches of 16 drawn with T=1, 160 updates at lr 1e-3.
    Dev: 40 other sentences per task (disjoint from training for the first two). Must
    reach dev accuracy >= 0.9 on 'colour' (the majority class is about 0.5), entity F1
    >= 0.8 on 'things' and exact match >= 80 on 'which' (answers decoded from the
    windows as run_squad.py does; the untrained model gets 12.5). Then the multi-task
    checkpoint's encoder loads into a single-task BertTagger and BertClassifier (the
    models of run_ner.py and run_classifier.py) with the trained multi-task encoder's
    weights."""
    train = _sentences(192, 10)
    dev = _sentences(80, 11, avoid=[" ".join(s) for s in train])
    _write_classification(str(tmp_path / "colour"), train[:96], dev[:40])
    _write_tagging(str(tmp_path / "things"), train[96:], dev[40:])
    _write_squad(str(tmp_path / "which"), 96, 40, seed=5)
    path = _task_list(tmp_path, [CLASSIFICATION_ENTRY, TAGGING_ENTRY, SPAN_ENTRY])
    out = tmp_path / "out"
    result = multitask_job.run(_job(bert_files, path, out, do_train=True, do_eval=True,
                                    num_train_steps=160))
    results = result.eval_results
    assert results["global_step"] == 160
    windows = result.tasks[2].num_train
    assert result.probabilities == pytest.approx(np.array([96, 96, windows]) /
                                                 (192 + windows))
    majority = max(np.mean([any(w in COLOURS for w in s) for s in dev[:40]]), 0.5)
    assert results["colour/eval_accuracy"] >= 0.9 > majority, results
    assert results["things/eval_f1"] >= 0.8, results
    assert results["things/eval_accuracy"] >= 0.9, results
    assert results["which/eval_exact_match"] >= 80.0, results
    with open(out / "which" / "predictions.json") as f:
        assert sorted(json.load(f)) == sorted("dev.json-%d" % i for i in range(40))
    text = (out / "eval_results.txt").read_text()
    assert "colour/eval_accuracy = " in text and "things/eval_f1 = " in text
    assert "which/eval_f1 = " in text
    assert (out / "task_sampling.txt").read_text().splitlines()[:2] == [
        "colour\tclassification\t96\t%.6f" % result.probabilities[0],
        "things\ttagging\t96\t%.6f" % result.probabilities[1]]

    trained = [w.copy() for w in result.model.encoder.get_weights()]
    config = _config()
    for single in (tagging.BertTagger.from_config_object(config, num_labels=5),
                   classification.BertClassifier.from_config_object(config, num_labels=2)):
        before = single.encoder.get_weights()
        checkpoints.init_from_checkpoint(single, str(out))
        loaded = single.encoder.get_weights()
        assert len(loaded) == len(trained)
        for a, b in zip(loaded, trained):
            np.testing.assert_array_equal(a, b)
        assert not all(np.array_equal(a, b) for a, b in zip(before, loaded))


def test_script_reports_a_bad_task_list_in_one_line(tmp_path, bert_files):
    path = _task_list(tmp_path, [dict(CLASSIFICATION_ENTRY, head="sentiment")])
    os.makedirs(tmp_path / "colour")
    proc = script_runner.run(
        [sys.executable, SCRIPT, "--task_list_file=" + path, "--do_train",
         "--vocab_file=%s" % (bert_files / "vocab.txt"),
         "--bert_config_file=%s" % (bert_files / "bert_config.json"),
         "--max_seq_length=12", "--output_dir=%s" % (tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1] == ("run_multitask: error: %s: entry 0 ('colour'): field 'head': "
                         "'sentiment': expected one of classification, regression, "
                         "ranking, span_qa, tagging" % path), proc.stderr
