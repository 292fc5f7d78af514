"""Fine-tuning a published folder's model through run_classifier's job learns, per family.

Each case writes an HF folder with `transformers` (a random tiny model: no
weights are downloaded) and its own tokenizer files (byte-level BPE for
RoBERTa, WordPiece for DistilBERT), then runs the
classifier job with `init_checkpoint=FOLDER` alone: the config, the family,
the tokenizer and its framing all come from the folder.

The task is lexical (does the sentence name a colour or an animal?), the
dev set is held out: its sentences use templates that training never sees.
The budget is fixed in advance (12 epochs of 36 examples, batch 4: 108
steps, learning rate 1e-3); the check is dev accuracy >= 0.9 where chance is 0.5.
"""

import dataclasses
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


# Not yet among them, with the same budget fixed before any run: a random
# tiny ALBERT folder stays at chance, and so does HF's own
# AlbertForSequenceClassification trained in torch on the same folder and
# schedule (learning rates 1e-4 to 3e-3): at initializer_range 0.02 its [CLS]
# vectors agree to a cosine of 0.99999 on every training sentence, so a
# random ALBERT is no stand-in for a released one, which cannot be downloaded
# here. A random tiny XLNet folder reaches 0.67. Their loading is tested for
# parity in test_albert_hf.py and test_xlnet_hf.py.
FOLDERS = {"roberta": _roberta_folder, "distilbert": _distilbert_folder}


@pytest.mark.parametrize("family", sorted(FOLDERS))
def test_a_published_folder_fine_tunes_and_learns_on_held_out_data(family, tmp_path):
    folder = tmp_path / family
    folder.mkdir()
    torch.manual_seed(0)
    FOLDERS[family](folder).save_pretrained(folder)
    loaded = pretrained.inspect(str(folder))
    assert loaded.family.name == family
    # Every sentence fits whole (the word that decides the label is never cut off).
    tokenizer = loaded.tokenizer()
    assert max(len(tokenizer.encode(text).input_ids) for text in _all_text()) <= MAX_SEQ_LENGTH
    job = classifier_job.ClassifierJob(
        processor=ColourOrAnimal(), data_dir=str(tmp_path), init_checkpoint=str(folder),
        output_dir=str(tmp_path / "out"), max_seq_length=MAX_SEQ_LENGTH, do_train=True, do_eval=True,
        train_batch_size=4, eval_batch_size=8, num_train_epochs=12.0, learning_rate=1e-3,
        warmup_proportion=0.1, log_steps=50, seed=1)
    runner = classifier_job.ClassifierRunner(job)
    assert runner.job.model_family == family
    result = classifier_job.run(job)
    assert result.eval_results["global_step"] == 108  # int(36 / 4 * 12)
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
