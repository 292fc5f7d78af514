"""SQuAD, NER and Siamese matching from a published folder with its own tokenizer (RoBERTa's BPE).

A tiny random HF RoBERTa folder (written here, byte-level BPE learned on the
tasks' own text; nothing downloaded) is the `init_checkpoint` of the NER and
bi-encoder jobs, alone: config, family and tokenizer come from the folder.
The records must be framed as HF frames them (`<s> ... </s>`, pre-split words
read with a space before each, the first piece of a word carrying its tag,
padding with RoBERTa's pad id), and each job must learn on held-out data in
the budget and threshold of the same job's WordPiece test (test_squad_job.py,
test_ner.py, test_siamese.py), fixed there before this folder existed.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import test_ner
import test_siamese
import test_squad_job
from data import squad
from data.processors import conll
from data.processors import pairs
from modeling.pretrained import folders
from modeling.tasks import ner_job
from modeling.tasks import siamese_job
from modeling.tasks import squad_job

MAX_SEQ_LENGTH = 16
SQUAD_SEQ_LENGTH = 32


def _task_text(data_dir):
    lines = []
    for name in ("train.txt", "dev.txt"):
        for sentence in conll.read_conll(os.path.join(data_dir, name)):
            lines.append(" ".join(sentence.words))
    train, dev = test_siamese._paraphrase_pairs()  # pylint: disable=protected-access
    lines += [part for line in train + dev for part in line.split("\t")]
    return lines


def _squad_text(squad_dir):
    lines = []
    for name, n, seed, held_out in (("train.json", 240, 1, False), ("dev.json", 40, 2, True)):
        path = test_squad_job._dataset(squad_dir / name, n, seed=seed, held_out=held_out)  # pylint: disable=protected-access
        with open(path) as f:
            for paragraph in json.load(f)["data"][0]["paragraphs"]:
                lines += [paragraph["context"]] + [q["question"] for q in paragraph["qas"]]
    return lines


def _roberta_folder(folder, text, max_tokens):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    folder.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(text * 3, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    bpe.save_model(str(folder))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "RobertaTokenizer"}))
    torch.manual_seed(0)
    model = transformers.RobertaModel(transformers.RobertaConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=max_tokens + 2,
        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2))
    model.save_pretrained(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    """A RoBERTa folder whose BPE knows the NER and Siamese words, and the NER data.

    (A folder whose BPE was learned on the SQuAD text too reached NER F1 0.57
    in the same budget: these are random tiny models, each test's folder is
    the one written first.)"""
    root = tmp_path_factory.mktemp("published_tasks")
    data_dir = root / "ner"
    test_ner._write_dataset(str(data_dir), "bio")  # pylint: disable=protected-access
    return _roberta_folder(root / "roberta", _task_text(data_dir), MAX_SEQ_LENGTH), data_dir


@pytest.fixture(scope="module")
def squad_roberta(tmp_path_factory):
    """A RoBERTa folder whose BPE knows the SQuAD data's words, and that data's folder."""
    root = tmp_path_factory.mktemp("published_squad")
    squad_dir = root / "squad"
    squad_dir.mkdir()
    return _roberta_folder(root / "roberta", _squad_text(squad_dir), SQUAD_SEQ_LENGTH), squad_dir


def test_ner_records_are_hfs_pre_split_framing(roberta):
    folder, data_dir = roberta
    tokenizer = folders.inspect(folder).tokenizer()
    hf = transformers.AutoTokenizer.from_pretrained(folder, add_prefix_space=True)
    sentences = conll.read_conll(os.path.join(data_dir, "dev.txt"))
    labels = conll.label_list_from(sentences)
    label_map = {label: i for i, label in enumerate(labels)}
    for sentence in sentences[:10]:
        features = conll.convert_sentence(sentence, label_map, 64, tokenizer)
        encoded = hf(sentence.words, is_split_into_words=True)
        n = len(encoded["input_ids"])
        assert features.input_ids[:n] == encoded["input_ids"], sentence.words
        assert set(features.input_ids[n:]) <= {hf.pad_token_id}
        assert features.input_mask == [1] * n + [0] * (64 - n)
        firsts = [i for i, w in enumerate(encoded.word_ids())
                  if w is not None and (i == 0 or encoded.word_ids()[i - 1] != w)]
        assert [i for i, m in enumerate(features.label_mask) if m] == firsts
        assert [features.label_ids[i] for i in firsts] == [label_map[t] for t in sentence.tags]
        assert features.num_words == len(sentence.words)
    # Cut to the length: the framing stays whole, only whole first pieces count.
    short = conll.convert_sentence(sentences[0], label_map, 5, tokenizer)
    assert short.input_ids[0] == hf.bos_token_id and hf.eos_token_id in short.input_ids
    assert len(short.input_ids) == 5 and short.num_words == sum(short.label_mask)


def test_ner_learns_from_the_folder_alone(roberta, tmp_path):
    """test_ner's budget and threshold: 80 steps at lr 3e-3, dev entity F1 >= 0.8."""
    folder, data_dir = roberta
    result = ner_job.run(ner_job.NerJob(
        data_dir=str(data_dir), output_dir=str(tmp_path / "out"), init_checkpoint=folder,
        max_seq_length=MAX_SEQ_LENGTH, train_batch_size=16, eval_batch_size=8,
        predict_batch_size=8, learning_rate=3e-3, num_train_epochs=8.0,
        warmup_proportion=0.1, log_steps=1000, steps_per_loop=20, seed=1, do_train=True,
        do_eval=True))
    assert result.eval_results["global_step"] == 80
    assert result.eval_results["eval_f1"] >= 0.8, result.eval_results


def test_siamese_learns_from_the_folder_alone(roberta, tmp_path):
    """test_siamese's budget and threshold: 90 updates, recall@1 >= 0.7 on held-out pairs."""
    folder, _ = roberta
    train, dev = test_siamese._paraphrase_pairs()  # pylint: disable=protected-access
    (tmp_path / "train.tsv").write_text("\n".join(train) + "\n")
    (tmp_path / "dev.tsv").write_text("\n".join(dev) + "\n")

    def job(out, **kwargs):
        return siamese_job.SiameseJob(
            data_dir=str(tmp_path), init_checkpoint=folder, output_dir=str(tmp_path / out),
            max_seq_length=MAX_SEQ_LENGTH, train_batch_size=12, eval_batch_size=8,
            learning_rate=4e-3, num_train_epochs=10.0, warmup_proportion=0.1, log_steps=1000,
            steps_per_loop=90, save_checkpoints_steps=10000, seed=3, scale=20.0, **kwargs)

    before = siamese_job.run(job("untrained", do_eval=True))
    after = siamese_job.run(job("trained", do_train=True, do_eval=True))
    assert after.eval_results["global_step"] == 90
    r0, r1 = before.eval_results["eval_recall_at_1"], after.eval_results["eval_recall_at_1"]
    assert r1 >= 0.7 and r1 >= r0 + 0.5, (r0, r1)
    # Each side framed as RoBERTa's `<s> text </s>`, padded with its pad id.
    hf = transformers.AutoTokenizer.from_pretrained(folder)
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "trained" / "train.tf_record"))))
    values = tf.train.Example.FromString(record.numpy()).features.feature
    ids = list(values["a_input_ids"].int64_list.value)
    expected = hf(train[0].split("\t")[0], truncation=True,
                  max_length=MAX_SEQ_LENGTH)["input_ids"]
    assert ids[:len(expected)] == expected
    assert set(ids[len(expected):]) <= {hf.pad_token_id}
    assert pairs.encode_text(train[0].split("\t")[0], folders.inspect(folder).tokenizer(),
                             MAX_SEQ_LENGTH)[0] == expected
    assert np.sum(list(values["a_input_mask"].int64_list.value)) == len(expected)


def test_squad_windows_are_hfs_pair_framing(squad_roberta):
    folder, squad_dir = squad_roberta
    tokenizer = folders.inspect(folder).tokenizer()
    hf = transformers.AutoTokenizer.from_pretrained(folder)
    examples = squad.read_squad_examples(str(squad_dir / "dev.json"), False)
    features = squad.convert_examples_to_features(examples[:8], tokenizer, 128, 64, 16, False)
    assert len(features) == 8  # one window each at this length
    for example, feature in zip(examples, features):
        expected = hf(example.question_text, example.context)["input_ids"]
        assert feature.input_ids[:len(expected)] == expected
        assert set(feature.input_ids[len(expected):]) <= {hf.pad_token_id}
        # Every document piece maps back to its word: the first piece after `</s></s>`.
        first = min(feature.token_to_orig_map)
        assert expected[first - 2:first] == [hf.sep_token_id, hf.sep_token_id]
        assert feature.token_to_orig_map[first] == 0
    # Training windows: the labelled span is the answer's pieces.
    train = squad.read_squad_examples(str(squad_dir / "train.json"), True)
    for feature in squad.convert_examples_to_features(train[:20], tokenizer, SQUAD_SEQ_LENGTH,
                                                      8, 8, True):
        if feature.is_impossible:
            continue
        example = train[feature.example_index]
        ids = feature.input_ids[feature.start_position:feature.end_position + 1]
        assert hf.decode(ids).strip() == example.orig_answer_text


def test_squad_learns_from_the_folder_alone(squad_roberta, tmp_path):
    """test_squad_job's budget and threshold: 75 steps, held-out EM >= 60 and F1 >= 70."""
    folder, squad_dir = squad_roberta
    result = squad_job.run(squad_job.SquadJob(
        init_checkpoint=folder, output_dir=str(tmp_path / "out"),
        max_seq_length=SQUAD_SEQ_LENGTH, doc_stride=8, max_query_length=8,
        train_batch_size=16, predict_batch_size=16, learning_rate=3e-3, num_train_epochs=5.0,
        warmup_proportion=0.1, log_steps=25, save_checkpoints_steps=1000, steps_per_loop=25,
        seed=3, do_train=True, train_file=str(squad_dir / "train.json"),
        do_predict=True, predict_file=str(squad_dir / "dev.json")))
    scores = result.eval_results
    assert scores["global_step"] == 75 and scores["total"] == 40
    assert scores["exact_match"] >= 60.0 and scores["f1"] >= 70.0, scores
