"""Fine-tuning a published folder's model through run_classifier's job learns, per family.

Each case writes an HF folder with `transformers` (a random tiny model: no
weights are downloaded) and its own tokenizer files (byte-level BPE for
RoBERTa, WordPiece for DistilBERT, `spiece.model` for ALBERT and XLNet),
then runs the classifier job with `init_checkpoint=FOLDER` alone: the
config, the family, the tokenizer and its framing all come from the folder.

The task is lexical (does the sentence name a colour or an animal?), the
dev set is held out: its sentences use templates that training never sees.
The budget is fixed in advance; the check is dev accuracy >= 0.9 where
chance is 0.5. RoBERTa: 12 epochs of 36 examples, batch 4 (108 steps),
learning rate 1e-3. DistilBERT, ALBERT and XLNet: 60 epochs (540 steps),
learning rate 1e-4 (why: `FOLDERS` and the docstring of
`test_albert_and_xlnet_folders_fine_tune_and_learn_on_held_out_data`).
"""

import dataclasses
import io
import itertools
import json
import os

import numpy as np
import pytest
import torch
import transformers

from data import processors
from modeling import pretrained
from modeling.tasks import classifier_job

COLOURS = ["red", "blue", "green", "yellow", "purple", "orange"]
ANIMALS = ["cat", "dog", "bird", "fish", "horse", "sheep"]
TRAIN_TEMPLATES = ["the {} is here", "i saw a {} today", "my {} is big"]
DEV_TEMPLATES = ["look at that {} now", "we like the {} a lot"]
MAX_SEQ_LENGTH = 32


def _examples(templates, set_type):
    examples = []
    for t, template in enumerate(templates):
        for words, label in ((COLOURS, "1"), (ANIMALS, "0")):
            for w, word in enumerate(words):
                examples.append(processors.InputExample(
                    "%s-%d-%s-%d" % (set_type, t, label, w), template.format(word), label=label))
    return examples


class ColourOrAnimal(processors.DataProcessor):
    def get_train_examples(self, data_dir):
        return _examples(TRAIN_TEMPLATES, "train")

    def get_dev_examples(self, data_dir):
        return _examples(DEV_TEMPLATES, "dev")

    def get_labels(self):
        return ["0", "1"]


def _all_text():
    return [e.text_a for e in _examples(TRAIN_TEMPLATES + DEV_TEMPLATES, "all")]


def _roberta_folder(folder):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_all_text() * 4, vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    bpe.save_model(str(folder))
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "RobertaTokenizer"}')
    vocab = len(json.loads((folder / "vocab.json").read_text()))
    return transformers.RobertaModel(transformers.RobertaConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=40, type_vocab_size=1,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5))


def _distilbert_folder(folder):
    words = sorted({w for text in _all_text() for w in text.split()})
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    (folder / "tokenizer_config.json").write_text(
        '{"do_lower_case": true, "tokenizer_class": "DistilBertTokenizer"}')
    return transformers.DistilBertModel(transformers.DistilBertConfig(
        vocab_size=len(words) + 5, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
        max_position_embeddings=40))


# Every word of the task once beside every other: a corpus from which
# SentencePiece learns each word as one piece. From the task's own 60
# sentences it learns characters and pairs of them ("red" is "_", "re", "d"),
# which a released 30k vocabulary is not.
_WORD_PAIRS = [" ".join(pair) for pair in itertools.permutations(
    sorted({w for text in _all_text() for w in text.split()}), 2)]


def _albert_folder(folder):
    import sentencepiece  # pylint: disable=import-outside-toplevel
    model = io.BytesIO()
    # ALBERT's ids: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4.
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_WORD_PAIRS), model_writer=model, vocab_size=100,
        hard_vocab_limit=False, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1,
        eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    (folder / "spiece.model").write_bytes(model.getvalue())
    transformers.AlbertTokenizer(str(folder / "spiece.model")).save_pretrained(str(folder))
    vocab = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue()).get_piece_size()
    return transformers.AlbertModel(transformers.AlbertConfig(
        vocab_size=vocab, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=40))


def _xlnet_folder(folder):
    import sentencepiece  # pylint: disable=import-outside-toplevel
    from data import vocab_learning  # pylint: disable=import-outside-toplevel
    # XLNet's symbols (<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>);
    # 59 pieces are all that SentencePiece finds in the word pairs.
    (folder / "spiece.model").write_bytes(vocab_learning.learn_sentencepiece(_WORD_PAIRS, 59))
    transformers.XLNetTokenizer(str(folder / "spiece.model")).save_pretrained(str(folder))
    vocab = sentencepiece.SentencePieceProcessor(
        model_file=str(folder / "spiece.model")).get_piece_size()
    return transformers.XLNetModel(transformers.XLNetConfig(
        vocab_size=vocab, d_model=32, n_layer=2, n_head=2, d_inner=64, ff_activation="gelu",
        mem_len=None))


# (folder, epochs, learning rate): RoBERTa 108 steps at 1e-3; DistilBERT 540 steps at
# 1e-4, the budget of ALBERT and XLNet below, because at 108 steps and 1e-3 it passed
# only 2 of 7 folder seeds (this test's seed among them) and at 540 / 1e-4 7 of 7
# (measured across seeds before this budget was set, not on this seed alone).
FOLDERS = {"roberta": (_roberta_folder, 12.0, 1e-3),
           "distilbert": (_distilbert_folder, 60.0, 1e-4)}


@pytest.mark.parametrize("family", sorted(FOLDERS))
def test_a_published_folder_fine_tunes_and_learns_on_held_out_data(family, tmp_path):
    folder = tmp_path / family
    folder.mkdir()
    torch.manual_seed(0)
    make_folder, epochs, learning_rate = FOLDERS[family]
    make_folder(folder).save_pretrained(folder)
    loaded = pretrained.inspect(str(folder))
    assert loaded.family.name == family
    # Every sentence fits whole (the word that decides the label is never cut off).
    tokenizer = loaded.tokenizer()
    assert max(len(tokenizer.encode(text).input_ids) for text in _all_text()) <= MAX_SEQ_LENGTH
    job = classifier_job.ClassifierJob(
        processor=ColourOrAnimal(), data_dir=str(tmp_path), init_checkpoint=str(folder),
        output_dir=str(tmp_path / "out"), max_seq_length=MAX_SEQ_LENGTH, do_train=True, do_eval=True,
        train_batch_size=4, eval_batch_size=8, num_train_epochs=epochs,
        learning_rate=learning_rate, warmup_proportion=0.1, log_steps=50, seed=1)
    runner = classifier_job.ClassifierRunner(job)
    assert runner.job.model_family == family
    result = classifier_job.run(job)
    assert result.eval_results["global_step"] == int(36 / 4 * epochs)
    assert result.eval_results["eval_accuracy"] >= 0.9, result.eval_results
    # The records were framed by the folder's tokenizer (e.g. RoBERTa's <s> ... </s>).
    first = tokenizer.encode(_examples(TRAIN_TEMPLATES, "x")[0].text_a).input_ids
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "out" / "train.tf_record"))))
    ids = tf.train.Example.FromString(record.numpy()).features.feature["input_ids"]
    assert list(ids.int64_list.value[:len(first)]) == first
    assert np.all(np.array(ids.int64_list.value[len(first):])
                  == (tokenizer.token_id("pad") if "pad" in tokenizer.special_tokens else 0))

    # The fine-tuned classifier goes out as HF's *ForSequenceClassification,
    # with the job's probabilities on the dev texts.
    from modeling.pretrained import convert  # pylint: disable=import-outside-toplevel
    summary = convert.convert(convert.ConvertSettings(
        init_checkpoint=str(tmp_path / "out"),
        bert_config_file=str(folder / "config.json"), output_dir=str(tmp_path / "hf_out")))
    assert summary["heads"] == ["classifier"]
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(tmp_path / "hf_out")).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf_out"))
    dev = [e.text_a for e in _examples(DEV_TEMPLATES, "dev")]
    batch = hf_tokenizer(dev, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = torch.softmax(hf(**batch).logits, -1).numpy()
    ours = convert._classifier(  # pylint: disable=protected-access
        dataclasses.replace(loaded, checkpoint=str(tmp_path / "out")), loaded.config())
    mask = batch["attention_mask"].numpy()
    ids = np.where(mask == 1, batch["input_ids"].numpy(),
                   tokenizer.token_id("pad") if "pad" in tokenizer.special_tokens else 0)
    np.testing.assert_allclose(
        ours({"input_ids": ids, "input_mask": mask,
              "segment_ids": np.zeros_like(ids)})["probabilities"], theirs, atol=1e-5)
    labels = np.array([int(e.label) for e in _examples(DEV_TEMPLATES, "dev")])
    assert np.mean(theirs.argmax(-1) == labels) == pytest.approx(
        result.eval_results["eval_accuracy"])


SLOWER_LEARNERS = {"albert": _albert_folder, "xlnet": _xlnet_folder}


@pytest.mark.parametrize("family", sorted(SLOWER_LEARNERS))
def test_albert_and_xlnet_folders_fine_tune_and_learn_on_held_out_data(family, tmp_path):
    """ALBERT and XLNet folders learn the held-out task: 540 steps at 1e-4, dev >= 0.9.

    Budget and threshold, fixed before this test's first run: 60 epochs of
    the 36 training examples, batch 4 (540 steps), learning rate 1e-4 with
    Google's AdamW (10% warm-up, linear decay), dev accuracy >= 0.9; the
    seeds are the other test's (torch 0 for the folder, 1 for the job).

    How it was chosen, and what failed before:

    * A first try (the last session) at the other families' budget, 108
      steps at 1e-3, with `spiece.model` learned from the task's own
      sentences: ALBERT stayed at 0.5, XLNet reached 0.67 (0.875 to 0.917
      in 3 runs of this session). That vocabulary is characters and pairs
      of them, so the word that decides the label is no token. With it
      ALBERT fits the training set but not the held-out templates (0.5 to
      0.625: 3 of 3 job seeds at 108 steps and 1e-3, 7 of 7 folders at the
      budget below). Learned from every pair of the task's words instead,
      each word is one piece, as in a released vocabulary; the test checks
      that. (RoBERTa's BPE above splits these words too and learns all the
      same; ALBERT does not.)
    * With that vocabulary and 108 steps at 1e-3, ALBERT was a coin flip:
      7 of 14 (folder seed, job seed) pairs reached 0.9, the others ended at
      0.5 to 0.75 (three never left loss ln 2). Not a bug in the training
      path: ALBERT's and XLNet's per-variable gradient norms equal HF's
      torch ones on the same folder and batch; weight decay skips exactly
      the LayerNorm and bias variables (ALBERT's shared blocks and
      `embedding_hidden_mapping_in` included); the job's records equal the
      folder tokenizer's ids; and a plain loop with the same optimizer
      fails on the job's own batch order and learns on others. The likely
      reason: a random ALBERT's projected embeddings have an RMS of 0.08 (a
      16 -> 32 projection drawn at 0.02; RoBERTa's first layer reads 1.0),
      and Google's AdamW, which has no bias correction, steps 3 to 6.5
      times as far as a bias-corrected Adam at the same rate in the first
      100 updates; in a failing run that projection grows fourfold in 20
      steps while the output only learns the batches' label mix. More steps
      (270), longer warm-up (30%, 50%), batch 8 or 12, rates 3e-4 to 3e-3
      and LAMB at 1e-2 did not make it reliable; at 3e-3 RoBERTa fails too
      (3 of 4). DistilBERT at its own budget passes 2 of 7 folder seeds (its
      test's seed 0 among them). XLNet with the word vocabulary at that
      budget: 13 of 14 pairs; it shares ALBERT's budget so that one test
      holds both.
    * At 540 steps and 1e-4 (exploratory runs, before this test was
      written): ALBERT 19 of 21 pairs >= 0.9 (the other two reached 0.75,
      and 1.0 at 810 steps), XLNet 8 of 8, DistilBERT 7 of 7.
    """
    folder = tmp_path / family
    folder.mkdir()
    torch.manual_seed(0)
    SLOWER_LEARNERS[family](folder).save_pretrained(folder)
    loaded = pretrained.inspect(str(folder))
    assert loaded.family.name == family
    tokenizer = loaded.tokenizer()
    words = sorted({w for text in _all_text() for w in text.split()})
    assert all(len(tokenizer.tokenize(word)) == 1 for word in words)
    assert max(len(tokenizer.encode(text).input_ids) for text in _all_text()) <= MAX_SEQ_LENGTH
    job = classifier_job.ClassifierJob(
        processor=ColourOrAnimal(), data_dir=str(tmp_path), init_checkpoint=str(folder),
        output_dir=str(tmp_path / "out"), max_seq_length=MAX_SEQ_LENGTH, do_train=True,
        do_eval=True, train_batch_size=4, eval_batch_size=8, num_train_epochs=60.0,
        learning_rate=1e-4, warmup_proportion=0.1, log_steps=100, seed=1)
    assert classifier_job.ClassifierRunner(job).job.model_family == family
    result = classifier_job.run(job)
    assert result.eval_results["global_step"] == 540  # int(36 / 4 * 60)
    assert result.eval_results["eval_accuracy"] >= 0.9, result.eval_results

    # The records hold the folder tokenizer's ids, padded with its pad id:
    # after them for ALBERT ([CLS] a [SEP]), before them for XLNet (a <sep>
    # <cls>, whose summary is read at the last position).
    first = tokenizer.encode(_examples(TRAIN_TEMPLATES, "x")[0].text_a).input_ids
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "out" / "train.tf_record"))))
    features = tf.train.Example.FromString(record.numpy()).features.feature
    ids = list(features["input_ids"].int64_list.value)
    pads = [tokenizer.pad_id] * (MAX_SEQ_LENGTH - len(first))
    assert ids == (pads + first if family == "xlnet" else first + pads)
