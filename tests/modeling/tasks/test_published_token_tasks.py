"""NER, bi-encoders and SQuAD from a published folder of every encoder family, with its tokenizer.

One module fixture writes tiny random HF folders with `transformers` (the
writers of test_published_finetuning.py and test_published_tasks.py, and
GPT-2's here: RoBERTa's byte-level BPE, ALBERT's and XLNet's
`spiece.model`, DistilBERT's WordPiece, GPT-2's byte-level BPE; nothing is
downloaded). The records must equal what HF's `AutoTokenizer` of the same
folder gives: pre-split words read as `is_split_into_words=True` (with
`add_prefix_space=True` for the byte-level BPEs), the family's special tokens
and framing, padding on HF's side (XLNet's left, type id 3), the first
piece of each word tagged (HF's `word_ids()` rule); SQuAD windows equal
`tokenizer(question, context)`. A short run of each job on a folder alone
trains and predicts (the words' tags, the right shapes). A causal LM's folder
is refused in one line. Learning is test_published_tasks.py's (RoBERTa).
"""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

import test_published_finetuning as finetuning
import test_published_tasks as tasks
from data import input_pipeline
from data import squad
from data.processors import conll
from data.processors import pairs
from modeling.pretrained import folders
from modeling.tasks import ner_job
from modeling.tasks import siamese
from modeling.tasks import siamese_job
from modeling.tasks import squad_job
from modeling.tasks import tagging

MAX_SEQ_LENGTH = 24
# The task words (each one piece of the SentencePiece and WordPiece vocabularies
# written by test_published_finetuning) and words none of them has whole.
COLOURS, ANIMALS = finetuning.COLOURS, finetuning.ANIMALS
ODD_WORDS = ["Reddish", "cats", "blue-green", "Dogs!"]
LABELS = ["O", "B-ANI", "B-COL", "I-COL"]
ENCODERS = ("roberta", "albert", "xlnet", "distilbert")


def _sentences(n, offset=0):
    """CoNLL sentences `the COLOUR ANIMAL is here` (and odd words), tags B-COL / B-ANI."""
    out = []
    for k in range(n):
        colour, animal = COLOURS[(k + offset) % 6], ANIMALS[(k * 5 + offset) % 6]
        words = ["the", colour, animal, "is", "here"]
        tags = ["O", "B-COL", "B-ANI", "O", "O"]
        if k % 3 == 1:
            words[3:3] = [ODD_WORDS[k % 4], "and", "a", ANIMALS[k % 6]]
            tags[3:3] = ["B-COL" if k % 4 != 1 else "B-ANI", "O", "O", "B-ANI"]
        if k % 4 == 2:
            words[1:2], tags[1:2] = [colour, "blue-green"], ["B-COL", "I-COL"]
        out.append(conll.TaggedSentence("s-%d" % k, words, tags))
    return out


def _write_conll(path, sentences):
    path.write_text("".join("".join("%s %s\n" % wt for wt in zip(s.words, s.tags)) + "\n"
                            for s in sentences))


def _squad_file(path, n):
    paragraphs = []
    for k in range(n):
        colour, animal = COLOURS[k % 6], ANIMALS[(k * 5) % 6]
        before = "i saw a %s today . " % ANIMALS[(k + 2) % 6] * (1 + k % 3)
        context = before + "look at that %s %s now" % (colour, animal)
        answer = "%s %s" % (colour, animal)
        paragraphs.append({"context": context, "qas": [{
            "id": "q-%d" % k, "question": "we like the %s" % ANIMALS[(k + 1) % 6],
            "answers": [{"text": answer, "answer_start": context.index(answer)}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "t", "paragraphs": paragraphs}]}))
    return str(path)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """family -> (folder, HF's AutoTokenizer of it, the same for pre-split words), and the
    task data's folder."""
    root = tmp_path_factory.mktemp("token_tasks")
    out = {}
    # pylint: disable=protected-access
    text = finetuning._all_text() + [" ".join(s.words) for s in _sentences(12)]
    out["roberta"] = tasks._roberta_folder(root / "roberta", text, 64)
    for family, write in (("albert", finetuning._albert_folder),
                          ("xlnet", finetuning._xlnet_folder),
                          ("distilbert", finetuning._distilbert_folder)):
        folder = root / family
        folder.mkdir()
        torch.manual_seed(0)
        write(folder).save_pretrained(folder)
        out[family] = str(folder)
    # pylint: enable=protected-access
    out["gpt2"] = _gpt2_folder(root / "gpt2", text)
    hf = {}
    for family, folder in out.items():
        # Pre-split words: the byte-level BPEs need HF's `add_prefix_space=True`.
        byte_level = family in ("roberta", "gpt2")
        hf[family] = (transformers.AutoTokenizer.from_pretrained(folder),
                      transformers.AutoTokenizer.from_pretrained(
                          folder, **({"add_prefix_space": True} if byte_level else {})))
        assert hf[family][1].is_fast, family
    data = root / "data"
    data.mkdir()
    _write_conll(data / "train.txt", _sentences(16))
    _write_conll(data / "dev.txt", _sentences(6, offset=3))
    _write_conll(data / "test.txt", _sentences(5, offset=1))
    pair_lines = ["the %s %s is here\ti saw a %s %s today" % (c, a, c, a)
                  for c in COLOURS for a in ANIMALS[:2]]
    (data / "train.tsv").write_text("\n".join(pair_lines) + "\n")
    (data / "dev.tsv").write_text("\n".join(pair_lines[:8]) + "\n")
    _squad_file(data / "train.json", 16)
    _squad_file(data / "dev.json", 6)
    return {f: (out[f],) + hf[f] for f in out}, data


@pytest.fixture(scope="module", autouse=True)
def _protobuf_for_the_converter():
    """HF's converter of `spiece.model` to its fast tokenizer, in this environment: as in
    tests/modeling/albert/test_albert_hf.py (its protobuf module is newer than
    TensorFlow's pin; transformers ships a copy that reads the same file)."""
    # pylint: disable=import-outside-toplevel
    import sentencepiece
    with pytest.MonkeyPatch.context() as patch:
        try:
            from sentencepiece import sentencepiece_model_pb2  # noqa: F401
        except Exception:  # pylint: disable=broad-except
            from transformers.utils import sentencepiece_model_pb2_new
            patch.setitem(sys.modules, "sentencepiece.sentencepiece_model_pb2",
                          sentencepiece_model_pb2_new)
            patch.setattr(sentencepiece, "sentencepiece_model_pb2", sentencepiece_model_pb2_new,
                          raising=False)
        yield


def _gpt2_folder(folder, text):
    from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
    folder.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=300, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    bpe.save_model(str(folder))
    eot = bpe.token_to_id("<|endoftext|>")
    transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=bpe.get_vocab_size(), n_positions=64, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=eot, eos_token_id=eot)).save_pretrained(str(folder))
    return str(folder)


def _word_starts(encoded):
    ids = encoded.word_ids()
    return [i for i, w in enumerate(ids) if w is not None and (i == 0 or ids[i - 1] != w)]


# ------------------------------------------------------------------- NER


@pytest.mark.parametrize("family", ENCODERS + ("gpt2",))
def test_ner_records_are_hfs_split_words_and_word_ids(family, published):
    folder, _, hf = published[0][family]
    tokenizer = folders.inspect(folder).tokenizer()
    label_map = {label: i for i, label in enumerate(LABELS)}
    length = 48  # every sentence whole
    padded = hf.pad_token is not None   # GPT-2 has no padding token: compare the ids
    for sentence in _sentences(8):
        features = conll.convert_sentence(sentence, label_map, length, tokenizer)
        encoded = hf(sentence.words, is_split_into_words=True,
                     **({"padding": "max_length", "max_length": length} if padded
                        else {}))
        n = len(encoded["input_ids"])
        assert features.input_ids[:n] == encoded["input_ids"], (family, sentence.words)
        if padded:
            assert features.input_mask == encoded["attention_mask"]
            if "token_type_ids" in encoded:
                assert features.segment_ids == encoded["token_type_ids"]
        assert [i for i, m in enumerate(features.label_mask) if m] == _word_starts(encoded)
        assert [features.label_ids[i] for i in _word_starts(encoded)] == [
            label_map[t] for t in sentence.tags]
        assert features.num_words == len(sentence.words)
    # Padding on HF's side: XLNet's on the left, its `<cls>` last.
    features = conll.convert_sentence(_sentences(1)[0], label_map, MAX_SEQ_LENGTH, tokenizer)
    if family == "xlnet":
        assert features.input_mask[0] == 0 and features.input_ids[-1] == hf.cls_token_id
    else:
        assert features.input_mask[0] == 1
    # Cut to the length: the framing stays whole, only whole first pieces count.
    short = conll.convert_sentence(_sentences(2)[1], label_map, 6, tokenizer)
    assert len(short.input_ids) == 6 and short.num_words == sum(short.label_mask) < 9
    if hf.cls_token_id is not None:
        assert hf.cls_token_id in short.input_ids and hf.sep_token_id in short.input_ids


def test_word_predictions_do_not_depend_on_the_padding_side_or_the_cut(published):
    """The tagger's word-order predictions, of left-padded XLNet rows cut to their length,
    are the predictions at the words' first pieces of the whole rows."""
    folder = published[0]["xlnet"][0]
    loaded = folders.inspect(folder)
    tokenizer = loaded.tokenizer()
    label_map = {label: i for i, label in enumerate(LABELS)}
    rows = [conll.convert_sentence(s, label_map, MAX_SEQ_LENGTH, tokenizer)
            for s in _sentences(3)]
    features = {name: tf.constant([getattr(r, name) for r in rows])
                for name in conll.FEATURE_NAMES}
    model = tagging.BertTagger.from_config_object(loaded.config(), num_labels=len(LABELS),
                                                  family=loaded.family)
    whole = model(features)
    cut = model(input_pipeline.trim_batch(features, MAX_SEQ_LENGTH,
                                          (("input_mask", conll.FEATURE_NAMES),)))
    assert cut["predicted_ids"].shape[1] < MAX_SEQ_LENGTH
    for b, row in enumerate(rows):
        starts = [i for i, m in enumerate(row.label_mask) if m]
        expected = whole["predicted_ids"].numpy()[b, starts]
        np.testing.assert_array_equal(whole["word_predicted_ids"].numpy()[b, :len(starts)],
                                      expected)
        np.testing.assert_array_equal(cut["word_predicted_ids"].numpy()[b, :len(starts)],
                                      expected)


@pytest.mark.parametrize("family", ["albert", "xlnet", "distilbert"])
def test_ner_job_trains_and_predicts_from_a_folder_alone(family, published, tmp_path):
    (folder, _, hf), data = published[0][family], published[1]
    result = ner_job.run(ner_job.NerJob(
        data_dir=str(data), output_dir=str(tmp_path / "out"), init_checkpoint=folder,
        max_seq_length=MAX_SEQ_LENGTH, train_batch_size=8, eval_batch_size=4,
        predict_batch_size=4, learning_rate=1e-3, num_train_epochs=1.0, log_steps=1000,
        seed=1, do_train=True, do_eval=True, do_predict=True,
        # Batches cut to their length (one program per width) for XLNet's left padding
        # only, to keep the test short; the cut itself is the test above's.
        trim_batches=family == "xlnet"))
    assert result.eval_results["global_step"] == 2
    assert 0.0 <= result.eval_results["eval_accuracy"] <= 1.0
    # test_predictions.txt: every word of the test file, its gold tag and a label.
    test = _sentences(5, offset=1)
    blocks = (tmp_path / "out" / "test_predictions.txt").read_text().strip().split("\n\n")
    assert len(blocks) == len(test)
    for sentence, block in zip(test, blocks):
        lines = [line.split(" ") for line in block.split("\n")]
        assert [line[:2] for line in lines] == [list(p) for p in zip(sentence.words,
                                                                     sentence.tags)]
        assert all(len(line) == 3 and line[2] in LABELS for line in lines)
    # The records hold HF's ids for the words, padded on HF's side.
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "out" / "train.tf_record"))))
    values = tf.train.Example.FromString(record.numpy()).features.feature
    first = _sentences(1)[0]
    expected = hf(first.words, is_split_into_words=True, padding="max_length",
                  max_length=MAX_SEQ_LENGTH)
    assert list(values["input_ids"].int64_list.value) == expected["input_ids"]
    assert list(values["input_mask"].int64_list.value) == expected["attention_mask"]


# -------------------------------------------------------------- bi-encoder


@pytest.mark.parametrize("family", ENCODERS)
def test_each_side_is_hfs_framing_and_pools_hfs_states_over_the_mask(family, published):
    """Ids of each text as HF's `tokenizer(text)`; the mean over the mask of the folder's
    encoder equals the mean of HF's `last_hidden_state` (right padding for every family:
    the vector does not depend on the side)."""
    folder, hf, _ = published[0][family]
    tokenizer = folders.inspect(folder).tokenizer()
    texts = ["the red cat is here", "i saw a blue-green dog today", "my fish"]
    rows = []
    for text in texts:
        ids, segments = pairs.encode_text(text, tokenizer, MAX_SEQ_LENGTH)
        assert ids == hf(text)["input_ids"], (family, text)
        rows.append((ids, segments))
    from modeling.pretrained import from_pretrained  # pylint: disable=import-outside-toplevel
    encoder, _ = from_pretrained(folder)
    batch = {"input_ids": np.full((3, MAX_SEQ_LENGTH), tokenizer.pad_id, np.int32),
             "input_mask": np.zeros((3, MAX_SEQ_LENGTH), np.int32),
             "segment_ids": np.zeros((3, MAX_SEQ_LENGTH), np.int32)}
    for b, (ids, segments) in enumerate(rows):
        batch["input_ids"][b, :len(ids)] = ids
        batch["input_mask"][b, :len(ids)] = 1
        batch["segment_ids"][b, :len(ids)] = segments
    sequence = encoder(batch, training=False)["sequence_output"]
    ours = siamese.pool(sequence, batch["input_mask"], "mean").numpy()
    hf_model = transformers.AutoModel.from_pretrained(folder).eval()
    for b, text in enumerate(texts):
        with torch.no_grad():
            states = hf_model(**hf(text, return_tensors="pt")).last_hidden_state[0].numpy()
        np.testing.assert_allclose(ours[b], states.mean(0), atol=1e-4)
    # "cls" reads the family's summary token: XLNet's is the last real one.
    position = siamese_job._cls_position(tokenizer)  # pylint: disable=protected-access
    cls = siamese.pool(sequence, batch["input_mask"], "cls", position).numpy()
    where = [len(ids) - 1 if family == "xlnet" else 0 for ids, _ in rows]
    np.testing.assert_allclose(cls, np.stack([sequence.numpy()[b, p]
                                              for b, p in enumerate(where)]), atol=1e-6)


@pytest.mark.parametrize("family,pooling", [("distilbert", "mean"), ("xlnet", "cls")])
def test_siamese_job_trains_and_scores_from_a_folder_alone(family, pooling, published,
                                                          tmp_path):
    (folder, hf, _), data = published[0][family], published[1]
    result = siamese_job.run(siamese_job.SiameseJob(
        data_dir=str(data), init_checkpoint=folder, output_dir=str(tmp_path / "out"),
        max_seq_length=MAX_SEQ_LENGTH, train_batch_size=4, eval_batch_size=4,
        learning_rate=1e-3, num_train_epochs=1.0, log_steps=1000, seed=1, pooling=pooling,
        do_train=True, do_eval=True, trim_batches=False))
    assert result.eval_results["global_step"] == 3
    assert 0.0 <= result.eval_results["eval_recall_at_1"] <= 1.0
    record = next(iter(tf.data.TFRecordDataset(str(tmp_path / "out" / "train.tf_record"))))
    values = tf.train.Example.FromString(record.numpy()).features.feature
    first = (data / "train.tsv").read_text().split("\n")[0].split("\t")
    for prefix, text in zip(("a_", "b_"), first):
        ids = hf(text)["input_ids"]
        assert list(values[prefix + "input_ids"].int64_list.value) == ids + [hf.pad_token_id] * (
            MAX_SEQ_LENGTH - len(ids))


# ------------------------------------------------------------------ SQuAD


@pytest.mark.parametrize("family", ["roberta", "albert", "distilbert"])
def test_squad_windows_are_hfs_question_context_framing(family, published):
    (folder, hf, _), data = published[0][family], published[1]
    tokenizer = folders.inspect(folder).tokenizer()
    examples = squad.read_squad_examples(str(data / "train.json"), True)
    whole = squad.convert_examples_to_features(examples, tokenizer, 128, 64, 32, True)
    assert len(whole) == len(examples)   # one window each at this length
    for example, feature in zip(examples, whole):
        expected = hf(example.question_text, example.context)["input_ids"]
        assert feature.input_ids[:len(expected)] == expected
        assert set(feature.input_ids[len(expected):]) <= {hf.pad_token_id}
        pieces = feature.input_ids[feature.start_position:feature.end_position + 1]
        assert hf.decode(pieces).strip() == example.orig_answer_text
    # Windows with a stride: every window holding the answer labels its pieces.
    for feature in squad.convert_examples_to_features(examples, tokenizer, 24, 6, 8, True):
        example = examples[feature.example_index]
        if feature.start_position:
            pieces = feature.input_ids[feature.start_position:feature.end_position + 1]
            assert hf.decode(pieces).strip() == example.orig_answer_text


def test_squad_job_trains_and_predicts_from_an_albert_folder_alone(published, tmp_path):
    folder = published[0]["albert"][0]
    data = published[1]
    squad_job.run(squad_job.SquadJob(
        init_checkpoint=folder, output_dir=str(tmp_path / "out"), max_seq_length=32,
        doc_stride=8, max_query_length=8, train_batch_size=8, predict_batch_size=4,
        learning_rate=1e-3, num_train_epochs=1.0, log_steps=1000, seed=1, do_train=True,
        trim_batches=False, train_file=str(data / "train.json"), do_predict=True,
        predict_file=str(data / "dev.json")))
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    contexts = {q["id"]: p["context"] for p in json.loads((data / "dev.json").read_text())[
        "data"][0]["paragraphs"] for q in p["qas"]}
    assert sorted(predictions) == sorted(contexts)
    assert all(text.lower() in contexts[qid] for qid, text in predictions.items())


# ------------------------------------------------------------- refusals


def test_a_causal_lm_folder_is_refused_in_one_line(published, tmp_path):
    folder = published[0]["gpt2"][0]
    data = published[1]
    common = dict(init_checkpoint=folder, output_dir=str(tmp_path / "out"), do_train=True)
    jobs = [(ner_job, ner_job.NerJob(data_dir=str(data), **common), "NER tags the words"),
            (siamese_job, siamese_job.SiameseJob(data_dir=str(data), **common),
             "the bi-encoder pools"),
            (squad_job, squad_job.SquadJob(train_file=str(data / "train.json"), **common),
             "span QA packs")]
    for module, job, task in jobs:
        with pytest.raises(ValueError) as error:
            module.run(job)
        message = str(error.value)
        assert "\n" not in message and folder in message and task in message, message
        assert "causal language model" in message
    assert not os.path.exists(tmp_path / "out" / "train.tf_record")
