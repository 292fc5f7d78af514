"""Token tagging / NER: CoNLL reading, label alignment to word pieces, seqeval-style
entity F1, the linear-chain CRF against brute force, and `run_ner.py` end to end.

The learning test fixes its data, budget and threshold in its docstring; its dev
sentences come from templates the training file never uses.
"""

import itertools
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import tokenization
from data.processors import conll
from data.processors.base import DataError
from modeling import bert as config_lib
from modeling import registry
from modeling.tasks import ner_job
from modeling.tasks import seqeval
from modeling.tasks import tagging

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO_ROOT, "run", "run_ner.py")

# ----------------------------------------------------------------- seqeval


def test_entities_follow_seqeval_default_mode():
    assert seqeval.get_entities(["B-PER", "I-PER", "O", "B-LOC"]) == [
        ("PER", 0, 1), ("LOC", 3, 3)]
    # An I- without a B- starts a chunk (conlleval style); a type change splits.
    assert seqeval.get_entities(["O", "I-PER", "I-PER", "I-LOC", "B-LOC", "I-LOC"]) == [
        ("PER", 1, 2), ("LOC", 3, 3), ("LOC", 4, 5)]
    # BIOES: S- is a chunk of its own, E- closes, I- after E- starts a new chunk.
    assert seqeval.get_entities(
        ["S-PER", "B-LOC", "I-LOC", "E-LOC", "I-LOC", "E-ORG", "O", "B-PER", "I-LOC"]) == [
        ("PER", 0, 0), ("LOC", 1, 3), ("LOC", 4, 4), ("ORG", 5, 5), ("PER", 7, 7),
        ("LOC", 8, 8)]
    assert seqeval.get_entities(["O", "E-PER", "B-ORG", "E-ORG"]) == [
        ("PER", 1, 1), ("ORG", 2, 3)]
    assert seqeval.get_entities([]) == []


def test_entity_scores_on_known_sequences():
    # seqeval's README example: precision = recall = f1 = 0.5.
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = seqeval.entity_scores(gold, pred)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.5, 0.5, 0.5)
    assert scores["per_type"]["PER"]["f1"] == 1.0 and scores["per_type"]["MISC"]["f1"] == 0.0
    # 3 gold, 4 predicted, 2 correct: p = 1/2, r = 2/3, f1 = 4/7.
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["S-ORG", "O"]]
    pred = [["B-PER", "I-PER", "B-LOC", "I-LOC"], ["S-ORG", "S-PER"]]
    scores = seqeval.entity_scores(gold, pred)
    assert scores["num_correct"] == 2 and scores["num_predicted"] == 4
    assert scores["num_gold"] == 3
    assert scores["precision"] == pytest.approx(0.5)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(4 / 7)
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                         "support": 1}
    assert scores["per_type"]["PER"]["precision"] == pytest.approx(0.5)
    assert scores["per_type"]["PER"]["recall"] == 1.0
    # Nothing predicted, nothing gold: zeros, not errors.
    empty = seqeval.entity_scores([["O"]], [["O"]])
    assert empty["f1"] == 0.0 and empty["per_type"] == {}
    with pytest.raises(ValueError, match="Sentence 0: 2 gold but 1 predicted"):
        seqeval.entity_scores([["O", "O"]], [["O"]])


# --------------------------------------------------------------------- CRF


def _brute_force(potentials, length, transitions, start, end):
    k = potentials.shape[1]
    scores = {}
    for tags in itertools.product(range(k), repeat=length):
        s = start[tags[0]] + end[tags[-1]] + sum(potentials[t, tags[t]] for t in range(length))
        s += sum(transitions[tags[t - 1], tags[t]] for t in range(1, length))
        scores[tags] = s
    values = np.array(list(scores.values()))
    log_z = values.max() + np.log(np.exp(values - values.max()).sum())
    return scores, log_z, max(scores, key=scores.get)


def test_crf_log_partition_score_and_viterbi_match_brute_force():
    rng = np.random.RandomState(0)
    k, t = 3, 5
    lengths = np.array([5, 3, 1, 4], np.int32)
    potentials = rng.normal(size=(len(lengths), t, k)).astype(np.float32) * 2
    transitions = rng.normal(size=(k, k)).astype(np.float32) * 2
    start, end = rng.normal(size=k).astype(np.float32), rng.normal(size=k).astype(np.float32)
    gold = rng.randint(0, k, size=(len(lengths), t)).astype(np.int32)
    log_z = tagging.crf_log_norm(potentials, lengths, transitions, start, end).numpy()
    score = tagging.crf_sequence_score(potentials, gold, lengths, transitions, start,
                                       end).numpy()
    path = tagging.viterbi_decode(potentials, lengths, transitions, start, end).numpy()
    for b, n in enumerate(lengths):
        scores, expected_log_z, best = _brute_force(potentials[b, :n], n, transitions,
                                                    start, end)
        assert log_z[b] == pytest.approx(expected_log_z, abs=1e-4)
        assert score[b] == pytest.approx(scores[tuple(gold[b, :n])], abs=1e-4)
        assert tuple(path[b, :n]) == best
    # The likelihood is a distribution: the probabilities of all paths sum to 1.
    scores, expected_log_z, _ = _brute_force(potentials[1, :3], 3, transitions, start, end)
    assert sum(np.exp(s - expected_log_z) for s in scores.values()) == pytest.approx(1.0)
    # Sentences of one position and empty ones (padding).
    one = tagging.viterbi_decode(potentials[:, :1], np.array([1, 1, 0, 1]), transitions,
                                 start, end).numpy()
    assert one[0, 0] == np.argmax(potentials[0, 0] + start + end)
    assert tagging.crf_log_norm(potentials, np.array([0, 0, 0, 0]), transitions, start,
                                end).numpy().tolist() == [0.0] * 4


def test_crf_tagger_loss_is_negative_log_likelihood_of_compacted_words():
    """BertTagger with a CRF scores only label_mask positions, gathered in order."""
    config = config_lib.BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=16,
                                   max_position_embeddings=8, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0)
    model = tagging.BertTagger.from_config_object(config, num_labels=3, use_crf=True)
    rng = np.random.RandomState(1)
    model.transitions.assign(rng.normal(size=(3, 3)).astype(np.float32))
    model.start_transitions.assign(rng.normal(size=3).astype(np.float32))
    model.end_transitions.assign(rng.normal(size=3).astype(np.float32))
    features = {
        "input_ids": tf.constant([[2, 5, 6, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0, 0, 0]]),
        "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]),
        "segment_ids": tf.zeros([2, 8], tf.int32),
        "label_ids": tf.constant([[0, 1, 0, 2, 0, 0, 0, 0], [0, 2, 0, 0, 0, 0, 0, 0]]),
        "label_mask": tf.constant([[0, 1, 0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0]]),
        "is_real_example": tf.constant([1, 1]),
    }
    outputs = model(features, training=False)
    logits = outputs["logits"].numpy()
    params = [model.transitions.numpy(), model.start_transitions.numpy(),
              model.end_transitions.numpy()]
    words = [[1, 3, 4], [1]]
    golds = [(1, 2, 0), (2,)]
    expected = []
    for b, (positions, gold) in enumerate(zip(words, golds)):
        scores, log_z, best = _brute_force(logits[b, positions], len(positions), *params)
        expected.append(log_z - scores[gold])
        assert tuple(outputs["predicted_ids"].numpy()[b, positions]) == best
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    assert float(loss) == pytest.approx(np.mean(expected), abs=1e-4)
    assert float(metrics["accuracy"][1]) == 4.0  # labelled tokens only


# ------------------------------------------------------- reading, alignment

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "##son", "un",
         "##aff", "##able", "paris", "visited", ".", "北", "京", "欢", "迎", "你"]


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def _ids(tokens):
    return [VOCAB.index(t) for t in tokens]


def test_reader_skips_docstart_uses_first_and_last_columns(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nSmithson NNP I-NP I-PER\n"
                    "visited VBD B-VP O\n\n\nParis NNP B-NP B-LOC\n. . O O\n")
    sentences = conll.read_conll(str(path))
    assert [s.words for s in sentences] == [["John", "Smithson", "visited"], ["Paris", "."]]
    assert [s.tags for s in sentences] == [["B-PER", "I-PER", "O"], ["B-LOC", "O"]]
    assert sentences[1].sources == ["%s:8" % path, "%s:9" % path]
    assert conll.label_list_from(sentences) == ["O", "B-LOC", "B-PER", "I-PER"]


def test_labels_go_on_first_word_pieces_and_truncation_cuts_words(tokenizer):
    sentence = conll.TaggedSentence("s", ["John", "Smithson", "unaffable", "visited", "Paris"],
                                    ["B-PER", "I-PER", "O", "O", "B-LOC"])
    label_map = {"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3}
    f = conll.convert_sentence(sentence, label_map, 12, tokenizer)
    tokens = ["[CLS]", "john", "smith", "##son", "un", "##aff", "##able", "visited", "paris",
              "[SEP]"]
    assert f.tokens == tokens
    assert f.input_ids == _ids(tokens) + [0, 0]
    assert f.input_mask == [1] * 10 + [0, 0]
    assert f.label_mask == [0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0]
    assert f.label_ids == [0, 1, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0]
    assert f.num_words == 5
    # max_seq_length 6: [CLS] john smith ##son un [SEP]: "unaffable" keeps its first
    # piece, "visited" and "Paris" are cut (predicted O by the job).
    f = conll.convert_sentence(sentence, label_map, 6, tokenizer)
    assert f.tokens == ["[CLS]", "john", "smith", "##son", "un", "[SEP]"]
    assert f.label_mask == [0, 1, 1, 0, 1, 0] and f.label_ids == [0, 1, 2, 0, 0, 0]
    assert f.num_words == 3
    predicted = np.array([[0, 1, 2, 2, 0, 0]])
    assert ner_job.tags_of([sentence], [f], predicted, ["O", "B-PER", "I-PER", "B-LOC"]) == [
        ["B-PER", "I-PER", "O", "O", "O"]]


def test_chinese_character_file_through_reader_and_alignment(tmp_path, tokenizer):
    path = tmp_path / "zh.txt"
    path.write_text("北 B-LOC\n京 I-LOC\n欢 O\n迎 O\n你 O\n\n你 S-PER\n", encoding="utf-8")
    sentences = conll.read_conll(str(path), scheme="bioes")
    assert sentences[0].words == ["北", "京", "欢", "迎", "你"]
    labels = conll.label_list_from(sentences)
    assert labels == ["O", "B-LOC", "I-LOC", "S-PER"]
    f = conll.convert_sentence(sentences[0], {l: i for i, l in enumerate(labels)}, 8, tokenizer)
    assert f.tokens == ["[CLS]", "北", "京", "欢", "迎", "你", "[SEP]"]
    assert f.label_mask == [0, 1, 1, 1, 1, 1, 0, 0]
    assert f.label_ids == [0, 1, 2, 0, 0, 0, 0, 0]


def test_bad_lines_and_tags_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("John B-PER\n\nParis B-LOC\nvisited\n")
    with pytest.raises(DataError, match=r"bad\.txt:4: expected a token and its tag"):
        conll.read_conll(str(path))
    path.write_text("John B-PER\nSmith E-PER\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: tag 'E-PER' is not in the bio scheme"):
        conll.read_conll(str(path), scheme="bio")
    assert conll.read_conll(str(path), scheme="bioes")[0].tags == ["B-PER", "E-PER"]
    sentence = conll.read_conll(str(path), scheme="bioes")[0]
    with pytest.raises(DataError, match=r"bad\.txt:2: tag 'E-PER' is not among the training"):
        conll.convert_sentence(sentence, {"O": 0, "B-PER": 1}, 8, None)


# -------------------------------------------------------------- end to end

PER = ["john", "mary", "peter", "anna"]
SURNAMES = ["smith", "jones", "lee", "smithson"]   # smithson = smith ##son
LOC = ["paris", "london", "berlin", "new york", "rome"]
ORG = ["google", "acme corp", "united bank", "globex"]
FILLERS = ["yesterday", "today", "visited", "met", "works", "for", "in", "a", "man",
           "called", "went", "to", "the", "office", "of", "saw"]
E2E_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##son"] + FILLERS + PER +
             [s for s in SURNAMES if s != "smithson"] +
             sorted({w for e in LOC + ORG for w in e.split()}))
TRAIN_TEMPLATES = ["{PER} visited {LOC} today", "{PER} works for {ORG}",
                   "yesterday {PER} met {PER} in {LOC}", "a man called {PER} went to {LOC}",
                   "the office of {ORG} saw {PER}"]
DEV_TEMPLATES = ["today {PER} went to {ORG} in {LOC}", "yesterday a man called {PER} visited "
                 "{LOC}", "{ORG} met {PER} today", "the office of {ORG} in {LOC}"]


def _entity(kind, rng):
    if kind == "PER":
        words = [rng.choice(PER)] + ([rng.choice(SURNAMES)] if rng.random() < 0.6 else [])
    else:
        words = rng.choice(LOC if kind == "LOC" else ORG).split()
    return words


def _sentence(template, rng, scheme):
    words, tags = [], []
    for part in template.split():
        if part.startswith("{"):
            kind = part[1:-1]
            entity = _entity(kind, rng)
            if scheme == "bioes" and len(entity) == 1:
                entity_tags = ["S-" + kind]
            elif scheme == "bioes":
                entity_tags = (["B-" + kind] + ["I-" + kind] * (len(entity) - 2)
                               + ["E-" + kind])
            else:
                entity_tags = ["B-" + kind] + ["I-" + kind] * (len(entity) - 1)
            words += entity
            tags += entity_tags
        else:
            words.append(part)
            tags.append("O")
    return "".join("%s %s\n" % (w.capitalize() if i == 0 else w, t)
                   for i, (w, t) in enumerate(zip(words, tags))) + "\n"


def _write_dataset(directory, scheme, seed=0):
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    splits = {"train.txt": (TRAIN_TEMPLATES, 160), "dev.txt": (DEV_TEMPLATES, 40),
              "test.txt": (DEV_TEMPLATES, 8)}
    for name, (templates, n) in splits.items():
        text = "-DOCSTART- O\n\n" + "".join(_sentence(templates[i % len(templates)], rng,
                                                      scheme) for i in range(n))
        with open(os.path.join(directory, name), "w") as f:
            f.write(text)


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny_bert")
    (directory / "vocab.txt").write_text("\n".join(E2E_VOCAB) + "\n")
    config = config_lib.BertConfig(vocab_size=len(E2E_VOCAB), hidden_size=32,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=16,
                                   type_vocab_size=2)
    config.to_json_file(str(directory / "bert_config.json"))
    return directory


def _job(bert_files, data_dir, output_dir, **kwargs):
    values = dict(data_dir=str(data_dir), output_dir=str(output_dir),
                  vocab_file=str(bert_files / "vocab.txt"),
                  bert_config_file=str(bert_files / "bert_config.json"), max_seq_length=16,
                  train_batch_size=16, eval_batch_size=8, predict_batch_size=8,
                  learning_rate=3e-3, num_train_epochs=8.0, warmup_proportion=0.1,
                  log_steps=1000, steps_per_loop=20, seed=1)
    values.update(kwargs)
    return ner_job.NerJob(**values)


def test_registered_as_the_ner_task():
    task = registry.tasks.get("ner")
    assert task.job_class is ner_job.NerJob and task.run is ner_job.run


@pytest.mark.parametrize("scheme,use_crf", [("bio", False), ("bioes", True)])
def test_learns_entities_of_held_out_templates(tmp_path, bert_files, scheme, use_crf):
    """Budget and threshold fixed in advance: a 1-layer BERT (hidden 32) from random
    weights, 160 training sentences from 5 templates, 8 epochs at batch 16 (80 steps,
    lr 3e-3); dev: 40 sentences from 4 other templates (entity words drawn from the same
    lists, some split into word pieces). Entity F1 on dev must reach 0.8; the same model
    after one step at lr 1e-9 (the untrained baseline) stays below 0.4. The BIOES run
    trains the CRF. Then eval-only and predict-only
    runs restore the checkpoint and label list, and the predictions file is CoNLL."""
    data_dir = tmp_path / "data"
    _write_dataset(str(data_dir), scheme)
    baseline = ner_job.run(_job(bert_files, data_dir, tmp_path / "baseline",
                                tagging_scheme=scheme, use_crf=use_crf, do_train=True,
                                do_eval=True, learning_rate=1e-9, num_train_epochs=0.1))
    assert baseline.eval_results["global_step"] == 1
    assert baseline.eval_results["eval_f1"] < 0.4, baseline.eval_results
    out = tmp_path / "out"
    result = ner_job.run(_job(bert_files, data_dir, out, tagging_scheme=scheme,
                              use_crf=use_crf, do_train=True, do_eval=True))
    results = result.eval_results
    assert results["global_step"] == 80
    assert results["eval_f1"] >= 0.8, results
    for kind in ("PER", "LOC", "ORG"):
        assert "eval_%s_f1" % kind in results
    with open(out / "eval_results.txt") as f:
        written = dict(line.strip().split(" = ") for line in f)
    assert float(written["eval_f1"]) == pytest.approx(results["eval_f1"])
    assert "eval_precision" in written and "eval_recall" in written
    # Predict without training: label_list.txt and the checkpoint are reused.
    predicted = ner_job.run(_job(bert_files, data_dir, out, tagging_scheme=scheme,
                                 use_crf=use_crf, do_predict=True))
    lines = (out / "test_predictions.txt").read_text().split("\n\n")
    sentences = conll.read_conll(str(data_dir / "test.txt"), scheme)
    assert len([b for b in lines if b.strip()]) == len(sentences) == 8
    first = [line.split() for line in lines[0].splitlines()]
    assert [row[0] for row in first] == sentences[0].words
    assert [row[1] for row in first] == sentences[0].tags
    assert [row[2] for row in first] == predicted.test_predictions[0]
    scores = seqeval.entity_scores([s.tags for s in sentences], predicted.test_predictions)
    assert predicted.test_results["test_f1"] == pytest.approx(scores["f1"])


def test_script_reports_a_bad_line_in_one_line(tmp_path, bert_files):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "train.txt").write_text("John B-PER\nvisited O\n\nParis\n")
    result = script_runner.run(
        [sys.executable, SCRIPT, "--do_train", "--data_dir=%s" % data_dir,
         "--output_dir=%s" % (tmp_path / "out"), "--vocab_file=%s" % (bert_files / "vocab.txt"),
         "--bert_config_file=%s" % (bert_files / "bert_config.json"), "--max_seq_length=16"],
        capture_output=True, text=True, timeout=240,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "train.txt:4: expected a token and its tag" in last, result.stderr
    assert last.startswith("run_ner: error:"), last


def test_bad_jobs_are_refused_before_training(tmp_path, bert_files):
    data_dir = tmp_path / "data"
    _write_dataset(str(data_dir), "bio")
    with pytest.raises(ner_job.NerJobError, match="At least one of `do_train`"):
        ner_job.run(ner_job.NerJob())
    with pytest.raises(ner_job.NerJobError, match="--tagging_scheme=iob1: expected one of"):
        ner_job.run(_job(bert_files, data_dir, tmp_path / "o1", do_train=True,
                         tagging_scheme="iob1"))
    with pytest.raises(ner_job.NerJobError, match="Cannot use sequence length 32"):
        ner_job.run(_job(bert_files, data_dir, tmp_path / "o2", do_train=True,
                         max_seq_length=32))
    # A dev tag the training file never has: named with its file and line.
    with open(data_dir / "dev.txt", "a") as f:
        f.write("Zurich B-GPE\n")
    lines = (data_dir / "dev.txt").read_text().splitlines()
    with pytest.raises(ner_job.NerJobError,
                       match=r"dev\.txt:%d: tag 'B-GPE' is not among the training labels"
                       % len(lines)):
        ner_job.run(_job(bert_files, data_dir, tmp_path / "o3", do_train=True, do_eval=True))
    assert not (tmp_path / "o3" / "eval.tf_record").exists()
    # Eval without a training run in output_dir: no label list to use.
    with pytest.raises(ner_job.NerJobError, match="label_list.txt.*does not exist"):
        ner_job.run(_job(bert_files, data_dir, tmp_path / "o4", do_eval=True))


def test_a_later_run_never_changes_a_finished_runs_labels(tmp_path, bert_files):
    """A finished run's label_list.txt, records and checkpoint stay byte for byte when a
    second run into its --output_dir has other training labels (with a good or a bad
    dev file): refused first, naming the file and the difference; eval-only still works."""
    data_dir = tmp_path / "data"
    _write_dataset(str(data_dir), "bio")
    out = tmp_path / "out"
    ner_job.run(_job(bert_files, data_dir, out, do_train=True, num_train_epochs=0.1))
    before = {name: (out / name).read_bytes() for name in os.listdir(out)
              if (out / name).is_file()}
    assert "label_list.txt" in before and any(n.startswith("ckpt-") for n in before)
    other = tmp_path / "other"
    _write_dataset(str(other), "bio", seed=5)
    with open(other / "train.txt", "a") as f:
        f.write("Zurich B-GPE\n\n")
    for bad_dev in (False, True):
        if bad_dev:
            with open(other / "dev.txt", "a") as f:
                f.write("Bern B-XYZ\n")
        with pytest.raises(ner_job.NerJobError,
                           match=r"label_list\.txt holds the labels of the run already trained "
                                 r"in --output_dir .*new: B-GPE"):
            ner_job.run(_job(bert_files, other, out, do_train=True, do_eval=True))
        after = {name: (out / name).read_bytes() for name in os.listdir(out)
                 if (out / name).is_file()}
        assert after == before
    # The same labels: the run resumes there as before; eval-only reads them back.
    result = ner_job.run(_job(bert_files, data_dir, out, do_eval=True))
    assert result.eval_results["global_step"] >= 1
    assert (out / "label_list.txt").read_bytes() == before["label_list.txt"]
