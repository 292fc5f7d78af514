"""SentencePiece for XLNet: the model learned by run/create_vocab.py --model=sentencepiece,
and tensorflow-text's ids against the `sentencepiece` Python processor's."""

import os
import sys

import pytest
import sentencepiece
import tensorflow as tf

import script_runner
from data import vocab_learning
from data.tokenizers import sentencepiece as sp_lib

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPIECE = os.path.join(REPO_ROOT, "data", "sample", "xlnet", "spiece.model")
SAMPLE = [os.path.join(REPO_ROOT, "data", "sample", name)
          for name in ("sample_en.txt", "sample_zh.txt")]

# Text the model never saw, beside the corpus: mixed scripts, spacing, rare characters.
EXTRA = ["The lighthouse keeper's cat, aged 12, sleeps on 3.5 km of rope!",
         "  leading and   repeated spaces  ", "Ünïcödé façade — naïve café",
         "饺子和汤圆是冬天常吃的食物。", "XLNet 用排列语言模型预训练。", "emoji 🙂 and tabs\tinside",
         "", "<eop> written in text"]


def _corpus_lines():
    lines = []
    for path in SAMPLE:
        lines.extend(line.strip() for line in open(path, encoding="utf-8") if line.strip())
    return lines


def test_graph_ids_equal_the_python_processor_on_english_and_chinese():
    tokenizer = sp_lib.SentencePieceTokenizer(SPIECE)
    processor = sentencepiece.SentencePieceProcessor(model_file=SPIECE)
    lines = _corpus_lines() + EXTRA
    assert any("的" in line for line in lines) and any("the" in line for line in lines)
    graph = tokenizer.tokenize(tf.constant(lines)).to_list()
    for line, ids in zip(lines, graph):
        assert ids == processor.encode(line), line
        assert ids == tokenizer.encode(line)
    # In a tf.data map too (what the pipelines do).
    dataset = tf.data.Dataset.from_tensor_slices(lines[:50]).map(tokenizer.tokenize)
    for line, ids in zip(lines[:50], dataset):
        assert ids.numpy().tolist() == processor.encode(line)


def test_bundled_model_has_xlnet_symbols_and_is_what_create_vocab_writes(tmp_path):
    """The bundled model is reproducible: create_vocab.py writes the same bytes."""
    tokenizer = sp_lib.SentencePieceTokenizer(SPIECE)
    assert tokenizer.vocab_size() == 2000
    assert tokenizer.special_ids() == {s: i for i, s in enumerate(sp_lib.SPECIAL_SYMBOLS)}
    # Control symbols never come out of text; <eop> (user-defined) does.
    ids = tokenizer.encode("<cls> <sep> <eop>")
    assert 3 not in ids and 4 not in ids and 8 in ids
    output = tmp_path / "spiece.model"
    script_runner.run([sys.executable, os.path.join(REPO_ROOT, "run", "create_vocab.py"),
                    "--model=sentencepiece", "--input_file=" + ",".join(SAMPLE),
                    "--vocab_file=" + str(output), "--vocab_size=2000"],
                   check=True, capture_output=True, cwd=REPO_ROOT)
    assert output.read_bytes() == open(SPIECE, "rb").read()


def test_bad_inputs_get_one_line_errors(tmp_path):
    not_a_model = tmp_path / "spiece.model"
    not_a_model.write_text("hello\n")
    with pytest.raises(sp_lib.SentencePieceError, match="spiece.model is not a SentencePiece"):
        sp_lib.SentencePieceTokenizer(str(not_a_model))
    with pytest.raises(sp_lib.SentencePieceError, match="no such file"):
        sp_lib.SentencePieceTokenizer(str(tmp_path / "missing.model"))
    with pytest.raises(ValueError, match="--vocab_size=5 is too small"):
        vocab_learning.learn_sentencepiece(["a b c"], 5)
    with pytest.raises(ValueError, match="could not learn 50000 pieces"):
        vocab_learning.learn_sentencepiece(_corpus_lines()[:20], 50000)
