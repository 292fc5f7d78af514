# coding=utf-8
"""Byte-level BPE (GPT-2): our Python and in-graph tokenizers give HF GPT2Tokenizer's ids;
the bundled vocabulary is what run/create_vocab.py makes."""

import json
import os
import random
import sys
import unicodedata

import pytest
import regex
import tensorflow as tf

import script_runner
from data.tokenizers import byte_bpe

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GPT2_DIR = os.path.join(REPO_ROOT, "data", "sample", "gpt2")
VOCAB = os.path.join(GPT2_DIR, "vocab.json")
MERGES = os.path.join(GPT2_DIR, "merges.txt")

HANDPICKED = [
    "Hello world", "Hello, World!", " leading space", "   three leading spaces",
    "trailing spaces   ", "don't", "I'm here", "we'll see, they've gone, he'd say, it's",
    "DON'T SHOUT", "x  's", "x  'sam", "x  'll's", "'s's's", "rock 'n' roll",
    "a\n\nb", "a \n b", "line\n", "\n\n\n", "tabs\t\tand\nnew lines\n", "\r\n windows\r\n",
    "面包师每天早上六点开门。", "她先点燃烤炉，然后把面粉、水和盐放进大碗里。", "中文 English 混合 text",
    "digits 12345 and 3.14159, 1,000,000", "٣ arabic-indic digits", "½ ² ⅷ numbers",
    "emoji 😀👍🏽 ok", "👨‍👩‍👧 family", "...!!!???", "---==>>", "email@example.com",
    "https://example.com/path?q=1&r=2", "\u3000全角\u3000空格", "a\u00a0b", "a\u2028b\u2029c",
    "\x00nul\x01ctl\x1c\x1d", "zero\u200bwidth", "\ufeffbom", "Ġ not a space", "ċĊ",
    "", " ", "  ", "\t", "naïve café résumé", "Ελληνικά Русский עברית العربية हिन्दी",
    "  multiple   spaces   between   words  ", "end with newline\n", "mixed \t\n whitespace",
]


@pytest.fixture(scope="module")
def ours():
    return byte_bpe.ByteBPETokenizer(VOCAB, MERGES)


@pytest.fixture(scope="module")
def graph():
    return byte_bpe.GraphByteBPETokenizer(VOCAB, MERGES)


@pytest.fixture(scope="module")
def hf_slow():
    transformers = pytest.importorskip("transformers")
    return transformers.GPT2Tokenizer(VOCAB, MERGES)


def _fuzz(count, seed):
    rng = random.Random(seed)
    alphabet = (list(" \t\n\r\x0b\x0c\u00a0\u3000\u2009\x85\x00\x1c")
                + list("'''sStTrRvVmMlLdD") + list("abcXYZéß") + list("0123٣²")
                + list(".,!?-\"(") + list("面包师。，") + ["😀", "👍🏽", "\u200b", "\ufeff", "ⅷ"])
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
            for _ in range(count)]


def _corpus_lines():
    lines = []
    for name in ("sample_en.txt", "sample_zh.txt"):
        with open(os.path.join(REPO_ROOT, "data", "sample", name), encoding="utf-8") as f:
            lines.extend(f.read().split("\n"))
    return lines


def test_python_and_graph_ids_equal_hf_gpt2_tokenizer(ours, graph, hf_slow):
    texts = HANDPICKED + _corpus_lines() + _fuzz(3000, seed=1)
    graph_ids = graph.tokenize(tf.constant([t.encode("utf-8") for t in texts])).to_list()
    mismatches = []
    for text, from_graph in zip(texts, graph_ids):
        reference = hf_slow.encode(text)
        mine = ours.encode(text)
        if mine != reference or from_graph != reference:
            mismatches.append((text, reference, mine, from_graph))
    assert not mismatches, mismatches[:5]
    # The sample corpus is really split into learned pieces, not bytes.
    corpus = "\n".join(_corpus_lines())
    assert len(ours.encode(corpus)) < 0.5 * len(corpus.encode("utf-8"))


def test_words_and_symbols_match_hf(ours, hf_slow):
    for text in HANDPICKED:
        assert ours.tokenize(text) == hf_slow.tokenize(text), text


def test_decode_round_trip(ours, hf_slow):
    for text in HANDPICKED + _fuzz(300, seed=2):
        ids = ours.encode(text)
        assert ours.decode(ids) == text
        assert ours.decode(ids) == hf_slow.decode(ids)
    # Half a UTF-8 character decodes with a replacement character, as HF does.
    ids = ours.encode("面")
    assert ours.decode(ids[:1]) == hf_slow.decode(ids[:1])


def test_special_token_in_text(ours, graph, hf_slow):
    """Python: <|endoftext|> written in the text is one id, as in HF. Graph: plain text
    (documented divergence; the pipeline inserts the id itself)."""
    text = "end.<|endoftext|>Next doc"
    eot = ours.eos_id
    assert eot == len(ours.encoder) - 1
    assert ours.encode(text) == hf_slow.encode(text)
    assert eot in ours.encode(text)
    from_graph = graph.tokenize(tf.constant([text])).to_list()[0]
    assert eot not in from_graph
    assert ours.decode(from_graph) == text


def test_graph_unicode_tables_differ_only_on_newer_code_points(graph, ours):
    """RE2's letter/number tables are older than the `regex` package's: the graph
    splits differently only around code points unassigned in Python's Unicode data."""
    points = [c for c in range(0, 0x110000, 7) if not 0xD800 <= c <= 0xDFFF]
    texts = ["a%sb 1%s2 %s" % (chr(c), chr(c), chr(c)) for c in points]
    words = graph.split_words(tf.constant([t.encode("utf-8") for t in texts])).to_list()
    differing = [c for c, text, got in zip(points, texts, words)
                 if ours.split_words(text) != [w.decode("utf-8") for w in got]]
    assert all(unicodedata.category(chr(c)) == "Cn" for c in differing), \
        [hex(c) for c in differing if unicodedata.category(chr(c)) != "Cn"][:10]
    assert len(differing) < 0.05 * len(points)


def test_graph_tokenizer_in_tf_function_and_long_words(graph, ours):
    @tf.function
    def run(texts):
        return graph.tokenize(texts)

    texts = ["abc " * 50, "x" * 3000, ""]
    got = run(tf.constant(texts)).to_list()
    assert got[0] == ours.encode(texts[0])
    assert got[2] == []
    # A word longer than max_word_bytes merges within 1000-byte chunks only.
    assert ours.decode(got[1]) == texts[1]


def test_bytes_to_unicode_is_gpt2s_table():
    table = byte_bpe.bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    assert all(not c.isspace() and c.isprintable() for c in table.values())


def test_bad_files_name_the_file(tmp_path):
    bad_json = tmp_path / "vocab.json"
    bad_json.write_text("{not json")
    with pytest.raises(byte_bpe.ByteBPEError, match="vocab.json"):
        byte_bpe.load_vocab(bad_json)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"a": 0}))
    with pytest.raises(byte_bpe.ByteBPEError, match="partial.json.*byte symbols"):
        byte_bpe.load_vocab(partial)
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\na b\nabc\n")
    with pytest.raises(byte_bpe.ByteBPEError, match="merges.txt line 3"):
        byte_bpe.load_merges(merges)
    with pytest.raises(byte_bpe.ByteBPEError, match="not found"):
        byte_bpe.load_merges(tmp_path / "missing.txt")


@pytest.mark.parametrize("text", ["", "#version: 0.2\n"])
def test_a_merges_file_of_no_merge_beside_merged_tokens_is_refused(tmp_path, text):
    """An empty (or header-only) merges.txt would encode every text byte by byte."""
    merges = tmp_path / "merges.txt"
    merges.write_text(text)
    assert byte_bpe.load_merges(merges) == []
    for tokenizer in (byte_bpe.ByteBPETokenizer, byte_bpe.GraphByteBPETokenizer):
        with pytest.raises(byte_bpe.ByteBPEError) as error:
            tokenizer(VOCAB, merges)
        assert str(error.value).startswith(
            "merges file %s holds no merges (it is empty or only a '#version' header) but "
            "vocab file %s has 2743 merged tokens" % (merges, VOCAB)), str(error.value)
    # A vocabulary of only the byte symbols and special tokens needs no merge.
    with open(VOCAB, encoding="utf-8") as f:
        vocab = json.load(f)
    symbols = set(byte_bpe.bytes_to_unicode().values()) | {byte_bpe.END_OF_TEXT}
    small = tmp_path / "vocab.json"
    small.write_text(json.dumps({t: i for i, t in enumerate(t for t in vocab if t in symbols)}))
    assert byte_bpe.ByteBPETokenizer(small, merges).encode("hi") == [
        byte_bpe.load_vocab(small)["h"], byte_bpe.load_vocab(small)["i"]]


def test_bundled_vocab_is_what_the_tool_makes(tmp_path, sample_corpus_files):
    """data/sample/gpt2/{vocab.json,merges.txt} are reproducible with run/create_vocab.py."""
    vocab, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_vocab.py"),
         "--vocab_type=byte_bpe", "--input_file=%s" % ",".join(sample_corpus_files),
         "--vocab_file=%s" % vocab, "--merges_file=%s" % merges, "--vocab_size=3000"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    for made, bundled in ((vocab, VOCAB), (merges, MERGES)):
        with open(made, encoding="utf-8") as a, open(bundled, encoding="utf-8") as b:
            assert a.read() == b.read(), bundled
    tokens = json.loads(open(VOCAB, encoding="utf-8").read())
    assert len(tokens) == 3000 and tokens[byte_bpe.END_OF_TEXT] == 2999
    assert set(byte_bpe.bytes_to_unicode().values()) <= set(tokens)
    # Every merge's result is a token, and the pre-tokenizer's regex is GPT-2's.
    for left, right in byte_bpe.load_merges(MERGES):
        assert left + right in tokens
    assert regex.compile(byte_bpe.GPT2_SPLIT_PATTERN).findall("it's 12 go!") == \
        ["it", "'s", " 12", " go", "!"]


def test_create_vocab_byte_bpe_needs_merges_file(tmp_path, sample_corpus_files):
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "create_vocab.py"),
         "--vocab_type=byte_bpe", "--input_file=%s" % sample_corpus_files[0],
         "--vocab_file=%s" % (tmp_path / "v.json")],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert "create_vocab: error: --merges_file is required" in result.stderr
