"""NER and Siamese matching from a published folder with its own tokenizer (RoBERTa's BPE).

A tiny random HF RoBERTa folder (written here, byte-level BPE learned on the
tasks' own text; nothing downloaded) is the `init_checkpoint` of the NER and
bi-encoder jobs, alone: config, family and tokenizer come from the folder.
The records must be framed as HF frames them (`<s> ... </s>`, pre-split words
read with a space before each, the first piece of a word carrying its tag,
padding with RoBERTa's pad id), and each job must learn on held-out data in
the budget and threshold of the same job's WordPiece test (test_ner.py,
test_siamese.py), fixed there before this folder existed.
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
from data.processors import conll
from data.processors import pairs
from modeling.pretrained import folders
from modeling.tasks import ner_job
from modeling.tasks import siamese_job

MAX_SEQ_LENGTH = 16


def _task_text(data_dir):
    lines = []
    for name in ("train.txt", "dev.txt"):
        for sentence in conll.read_conll(os.path.join(data_dir, name)):
            lines.append(" ".join(sentence.words))
    train, dev = test_siamese._paraphrase_pairs()  # pylint: disable=protected-access
    lines += [part for line in train + dev for part in line.split("\t")]
    return lines


@pytest.fixture(scope="module")
def roberta(tmp_path_factory):
    """A RoBERTa folder whose BPE knows the tasks' words, and the tasks' data."""
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    root = tmp_path_factory.mktemp("published_tasks")
    data_dir = root / "ner"
    test_ner._write_dataset(str(data_dir), "bio")  # pylint: disable=protected-access
    folder = root / "roberta"
    folder.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_task_text(data_dir) * 3, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    bpe.save_model(str(folder))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "RobertaTokenizer"}))
    torch.manual_seed(0)
    model = transformers.RobertaModel(transformers.RobertaConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=MAX_SEQ_LENGTH + 2, type_vocab_size=1, pad_token_id=1,
        bos_token_id=0, eos_token_id=2))
    model.save_pretrained(str(folder))
    return str(folder), data_dir


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
