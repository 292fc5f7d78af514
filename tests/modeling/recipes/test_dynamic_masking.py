"""RoBERTa's pipeline: in-graph tokenization, packing, dynamic masking.

Expected windows are computed independently with the Python `FullTokenizer`
and `data.corpus.iter_documents`; each batch row is unmasked again (masked
positions get their labels back) and compared with them.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from data import corpus as corpus_lib
from data.pretraining import dynamic_masking
from data.tokenizers import wordpiece as graph_tokenizer
from data import input_pipeline
from data import tokenization

SAMPLE = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")),
                      "data", "sample")
VOCAB = os.path.join(SAMPLE, "vocab.txt")
SAMPLE_FILES = [os.path.join(SAMPLE, "sample_en.txt"), os.path.join(SAMPLE, "sample_zh.txt")]
SEQ, PRED, BATCH = 64, 12, 8


@pytest.fixture(scope="module")
def tok():
    return graph_tokenizer.GraphTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def py_tok():
    return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def vocab():
    return tokenization.load_vocab(VOCAB)


def _sentences(py_tok, path):
    """Token ids of each document's sentences (its lines with tokens), per document."""
    docs = []
    for doc in corpus_lib.iter_documents([path]):
        sentences = [py_tok.convert_tokens_to_ids(py_tok.tokenize(raw.decode("utf-8")))
                     for _, raw in doc.lines]
        sentences = [ids for ids in sentences if ids]
        if sentences:
            docs.append(sentences)
    return docs


def _documents(py_tok, path):
    """Token ids of each document of a file (Python reference)."""
    return [sum(doc, []) for doc in _sentences(py_tok, path)]


def _chunks(ids, size):
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def _pack_sentences(docs, window, sep, cross_documents):
    """RoBERTa's FULL-SENTENCES (DOC-SENTENCES without `cross_documents`), by hand.

    Sentences in order, whole while they fit in `window` tokens, one [SEP]
    between documents inside a window; a longer sentence is cut into pieces
    of `window` tokens, each placed like a sentence.
    """
    windows, current = [], []
    for d, doc in enumerate(docs):
        for s, sentence in enumerate(doc):
            for begin in range(0, len(sentence), window):
                piece = sentence[begin:begin + window]
                new_document = d > 0 and s == 0 and begin == 0
                extra = [sep] if cross_documents and new_document else []
                if current and ((new_document and not cross_documents)
                                or len(current) + len(extra) + len(piece) > window):
                    windows.append(current)
                    current = []
                current += (extra if current else []) + piece
    if current:
        windows.append(current)
    return windows


def _expected_full(py_tok, vocab, paths, window):
    return [w for path in paths
            for w in _pack_sentences(_sentences(py_tok, path), window, vocab["[SEP]"], True)]


def _expected_doc(py_tok, vocab, paths, window):
    return [w for path in paths
            for w in _pack_sentences(_sentences(py_tok, path), window, vocab["[SEP]"], False)]


def _expected_blocks(py_tok, vocab, paths, window):
    out = []
    for path in paths:
        stream = []
        for i, doc in enumerate(_documents(py_tok, path)):
            stream += ([vocab["[SEP]"]] if i else []) + doc
        out += _chunks(stream, window)
    return out


def _rows(dataset, num_rows):
    """(masked ids, unmasked ids, positions, labels) per row, as numpy lists."""
    rows = []
    for batch in dataset:
        b = {k: v.numpy() for k, v in batch.items()}
        for r in range(b["input_ids"].shape[0]):
            n = int(b["input_mask"][r].sum())
            k = int(b["masked_lm_weights"][r].sum())
            masked = b["input_ids"][r]
            pos = b["masked_lm_positions"][r][:k]
            labels = b["masked_lm_ids"][r][:k]
            original = masked.copy()
            original[pos] = labels
            rows.append(dict(masked=masked, original=original, n=n, pos=pos,
                             labels=labels, batch=b, row=r))
        if len(rows) >= num_rows:
            break
    return rows[:num_rows]


def _write(tmp_path, name, text):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.fixture(scope="module")
def sample(tok, py_tok, vocab):
    """Two epochs of the bundled corpus, file order, full-sentences packing."""
    expected = _expected_full(py_tok, vocab, SAMPLE_FILES, SEQ - 2)
    ds = dynamic_masking.roberta_dataset(
        SAMPLE_FILES, VOCAB, True, SEQ, PRED, BATCH, seed=3, is_training=False,
        repeat=True, tokenizer=tok)
    return ds, expected, _rows(ds, 2 * len(expected))


def test_features_match_the_static_spec(sample):
    ds = sample[0]
    spec = input_pipeline.pretraining_feature_spec(SEQ, PRED)
    assert set(ds.element_spec) == set(spec)
    for name, feature in spec.items():
        want = tf.int32 if feature.dtype == tf.int64 else feature.dtype
        assert ds.element_spec[name].dtype == want, name
        assert ds.element_spec[name].shape.as_list() == [BATCH] + list(feature.shape), name
    batch = sample[2][0]["batch"]
    assert not batch["segment_ids"].any() and not batch["next_sentence_labels"].any()


def test_token_stream_and_full_sentence_windows(sample, vocab):
    _, expected, rows = sample
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    epoch = rows[:len(expected)]
    for row, window in zip(epoch, expected):
        assert row["n"] == len(window) + 2
        assert row["original"][:row["n"]].tolist() == [cls] + window + [sep]
        assert not row["masked"][row["n"]:].any() and not row["batch"]["input_mask"][
            row["row"]][row["n"]:].any()
    # Whole sentences: windows close before a sentence that does not fit, so
    # most are a little short of full; documents inside a file are joined by
    # [SEP], so windows cross document boundaries.
    assert all(len(w) <= SEQ - 2 for w in expected)
    assert sum(len(w) < SEQ - 2 for w in expected) > len(expected) / 2
    assert any(sep in w[1:-1] for w in expected)


def test_full_sentences_pack_whole_sentences_by_hand(tmp_path, tok, vocab):
    # Window 10. One word is one token here; "a b" names sentences by their words.
    text = ("the baker opens the shop .\n"          # 6
            "rain fell .\n"                          # 3: fits (9)
            "the farmer opens the gate .\n"          # 6: next window
            "\n"
            "the town .\n"                           # 3: [SEP] + 3 fits (10)
            "the baker opens the shop at six in the morning and the farmer opens .\n"  # 15
            "rain fell .\n")
    path = _write(tmp_path, "a.txt", text)
    words = {w: vocab[w] for w in set(text.split())}
    ids = lambda line: [words[w] for w in line.split()]  # noqa: E731
    want = [ids("the baker opens the shop . rain fell ."),
            ids("the farmer opens the gate .") + [vocab["[SEP]"]] + ids("the town ."),
            ids("the baker opens the shop at six in the morning"),
            ids("and the farmer opens . rain fell .")]
    for lines_per_block in (1, 2, 256):
        ds = dynamic_masking.roberta_dataset(path, VOCAB, True, 12, 2, 1, seed=0,
                                             is_training=False, lines_per_block=lines_per_block,
                                             tokenizer=tok)
        got = [r["original"][1:r["n"] - 1].tolist() for r in _rows(ds, 100)]
        assert got == want, lines_per_block
    # DOC-SENTENCES: the second document starts a window; "blocks": every 10 tokens.
    ds = dynamic_masking.roberta_dataset(path, VOCAB, True, 12, 2, 1, seed=0, is_training=False,
                                         packing="doc_sentences", tokenizer=tok)
    got = [r["original"][1:r["n"] - 1].tolist() for r in _rows(ds, 100)]
    assert got == [want[0], ids("the farmer opens the gate ."), ids("the town ."),
                   want[2], want[3]]
    ds = dynamic_masking.roberta_dataset(path, VOCAB, True, 12, 2, 1, seed=0, is_training=False,
                                         packing="blocks", tokenizer=tok)
    got = [r["original"][1:r["n"] - 1].tolist() for r in _rows(ds, 100)]
    stream = want[0] + ids("the farmer opens the gate .") + [vocab["[SEP]"]] + ids(
        "the town .") + want[2] + want[3]
    assert got == _chunks(stream, 10)


def test_masked_positions_labels_and_corruption(sample, vocab):
    _, _, rows = sample
    specials = {vocab["[CLS]"], vocab["[SEP]"], vocab["[PAD]"]}
    mask_id = vocab["[MASK]"]
    kinds = {"mask": 0, "same": 0, "random": 0}
    predicted = real = 0
    for row in rows:
        pos, n = row["pos"], row["n"]
        assert list(pos) == sorted(set(pos.tolist()))
        assert (pos > 0).all() and (pos < n - 1).all()
        assert not any(row["original"][p] in specials for p in pos)
        # Only masked positions differ from the original sequence.
        unmasked = np.ones(SEQ, bool)
        unmasked[pos] = False
        assert (row["masked"][unmasked] == row["original"][unmasked]).all()
        # The static budget: min(PRED, max(1, round(n * 0.15))).
        assert len(pos) == min(PRED, max(1, int(round(n * 0.15))))
        predicted += len(pos)
        real += n
        for p in pos:
            value, label = row["masked"][p], row["original"][p]
            kinds["mask" if value == mask_id else "same" if value == label else "random"] += 1
    assert abs(predicted / real - 0.15) < 0.01
    total = sum(kinds.values())
    assert abs(kinds["mask"] / total - 0.8) < 0.04
    assert abs(kinds["same"] / total - 0.1) < 0.03
    assert abs(kinds["random"] / total - 0.1) < 0.03


def test_random_replacements_skip_the_special_ids(tmp_path):
    # fairseq draws random tokens uniformly over its vocabulary less its four
    # special symbols <s> <pad> </s> <unk>: here [CLS] [PAD] [SEP] [UNK].
    vocab_file = _write(tmp_path, "vocab.txt",
                        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    text = _write(tmp_path, "text.txt", "a b a b a b a b a b\n" * 200)
    ds = dynamic_masking.roberta_dataset(text, vocab_file, True, 12, 10, 20, seed=5,
                                         is_training=False, masked_lm_prob=0.9,
                                         mask_token_rate=0.0, random_token_rate=1.0)
    replaced = []
    for batch in ds.take(5):
        weights = batch["masked_lm_weights"].numpy() > 0
        values = np.take_along_axis(batch["input_ids"].numpy(),
                                    batch["masked_lm_positions"].numpy(), 1)
        replaced += values[weights].tolist()
    counts = np.bincount(replaced, minlength=7)
    assert counts[:4].sum() == 0 and counts[4:].min() > 0.25 * len(replaced), counts


def test_new_epoch_gives_new_masks(sample):
    _, expected, rows = sample
    first, second = rows[:len(expected)], rows[len(expected):]
    changed = 0
    for a, b in zip(first, second):
        assert (a["original"] == b["original"]).all()
        changed += not np.array_equal(a["pos"], b["pos"]) or not np.array_equal(
            a["masked"], b["masked"])
    assert changed > 0.9 * len(first)


def test_seed_reproducibility(tok, sample):
    def build(seed, is_training):
        return dynamic_masking.roberta_dataset(
            SAMPLE_FILES, VOCAB, True, SEQ, PRED, BATCH, seed=seed,
            is_training=is_training, shuffle_buffer_size=64, tokenizer=tok)

    def take(ds, n=3):
        return [{k: v.numpy() for k, v in b.items()} for b in ds.take(n)]

    a, b = take(build(11, True)), take(build(11, True))
    for x, y in zip(a, b):
        for name in x:
            np.testing.assert_array_equal(x[name], y[name])
    # Training shuffles windows: not the file order.
    # Training shuffles windows: the first batch is not the file order.
    shuffled = a[0]["input_ids"].copy()
    for r in range(BATCH):
        k = int(a[0]["masked_lm_weights"][r].sum())
        shuffled[r, a[0]["masked_lm_positions"][r][:k]] = a[0]["masked_lm_ids"][r][:k]
    in_order = np.stack([r["original"] for r in sample[2][:BATCH]])
    assert not np.array_equal(shuffled, in_order)
    # Another seed, same order (evaluation): same sequences, other masks.
    other = _rows(build(4, False), 3 * BATCH)
    ref = sample[2][:3 * BATCH]
    assert all((o["original"] == r["original"]).all() for o, r in zip(other, ref))
    assert sum(not np.array_equal(o["masked"], r["masked"])
               for o, r in zip(other, ref)) > 0.9 * len(ref)


SMALL_DOCS = [
    "\n\nAlpha beta gamma.\nThe baker opens the shop.\n",
    "\n\n\nShort one.\n",
    "\nThe farmer opens the gate at five in the morning. His cows walk slowly from "
    "the barn to the green field beside the river, and in the evening he counts "
    "them again.\nRain fell over the town.\n",
    " \t\n你好世界。\n",
]


def test_doc_sentences_windows_stay_in_one_document(tmp_path, tok, py_tok, vocab):
    a = _write(tmp_path, "a.txt", "".join(SMALL_DOCS[:3]))
    b = _write(tmp_path, "b.txt", SMALL_DOCS[3] + "\n" + SMALL_DOCS[0])
    seq, pred = 12, 2
    ds = dynamic_masking.roberta_dataset(
        [a, b], VOCAB, True, seq, pred, 1, packing="doc_sentences", seed=0,
        is_training=False, lines_per_block=2, tokenizer=tok)
    rows = _rows(ds, 1000)
    expected = _expected_doc(py_tok, vocab, [a, b], seq - 2)
    docs = [d for p in (a, b) for d in _documents(py_tok, p)]
    assert len(docs) == 5 and any(len(d) > 2 * (seq - 2) for d in docs)
    got = [r["original"][1:r["n"] - 1].tolist() for r in rows]
    assert got == expected
    # Each window holds whole sentences of one document (or a piece of a
    # longer one), and the windows, in order, are the documents.
    assert sum(got, []) == sum(docs, [])
    assert all(vocab["[SEP]"] not in w for w in got)
    assert got != [c for d in docs for c in _chunks(d, seq - 2)]
    assert all(len(r["pos"]) == min(pred, max(1, int(round(r["n"] * 0.15))))
               for r in rows)


@pytest.mark.parametrize("packing", ["full_sentences", "blocks"])
def test_windows_sharded_by_file(tmp_path, tok, py_tok, vocab, packing):
    # Two input pipelines, two files: pipeline 1 packs file b alone.
    a = _write(tmp_path, "a.txt", SMALL_DOCS[1])
    b = _write(tmp_path, "b.txt", "".join(SMALL_DOCS))
    context = tf.distribute.InputContext(2, 1, 2)
    ds = dynamic_masking.roberta_dataset(
        [a, b], VOCAB, True, 12, 2, 2, seed=0, is_training=False, lines_per_block=3,
        input_context=context, packing=packing, tokenizer=tok)
    assert ds.element_spec["input_ids"].shape.as_list() == [1, 12]
    got = [r["original"][1:r["n"] - 1].tolist() for r in _rows(ds, 1000)]
    if packing == "blocks":
        # The stream cut every 10 tokens: full windows, every boundary a [SEP].
        assert got == _expected_blocks(py_tok, vocab, [b], 10)
        assert all(len(w) == 10 for w in got[:-1])
        assert sum(got, []).count(vocab["[SEP]"]) == len(_documents(py_tok, b)) - 1 == 3
    else:
        assert got == _expected_full(py_tok, vocab, [b], 10)
        assert not all(len(w) == 10 for w in got[:-1])


def test_each_repeat_of_one_sequence_is_masked_afresh(tmp_path, tok):
    # One window, batch size 1: every batch holds the same sequence in the
    # same layout, so only the per-batch seed can change the mask.
    path = _write(tmp_path, "one.txt", "The baker opens the shop at six in the morning.\n")
    ds = dynamic_masking.roberta_dataset(
        path, VOCAB, True, 24, 3, 1, seed=7, is_training=False, repeat=True,
        masked_lm_prob=0.3, tokenizer=tok)
    rows = _rows(ds, 6)
    assert all((r["original"] == rows[0]["original"]).all() for r in rows)
    masks = {(tuple(r["pos"]), tuple(r["masked"])) for r in rows}
    assert len(masks) >= 4
