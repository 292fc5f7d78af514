# coding=utf-8
"""Tokenization: Google's behaviour, real vocabularies, in-graph parity."""

import os
import random

import pytest
import tensorflow as tf

from data import tokenization
from data.tokenizers.wordpiece import GraphTokenizer

GOOGLE_TEST_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
                     "runn", "##ing", ","]


def _vocab(tmp_path, tokens, name="vocab.txt"):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return path


# --- Google's tokenization_test cases ---------------------------------------

def test_full_tokenizer(tmp_path):
    tokenizer = tokenization.FullTokenizer(_vocab(tmp_path, GOOGLE_TEST_VOCAB))
    tokens = tokenizer.tokenize(u"UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens


def test_chinese():
    tokenizer = tokenization.BasicTokenizer()
    assert tokenizer.tokenize(u"ah\u535A\u63A8zz") == [u"ah", u"\u535A", u"\u63A8", u"zz"]


def test_basic_tokenizer_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(u" \tHeLLo!how  \n Are yoU?  ") == [
        "hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize(u"H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(u" \tHeLLo!how  \n Are yoU?  ") == [
        "HeLLo", "!", "how", "Are", "yoU", "?"]
    # Accents are kept when not lower-casing.
    assert tokenizer.tokenize(u"H\u00E9llo") == [u"H\u00E9llo"]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(
        ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"])}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_words_over_200_characters_are_unk():
    vocab = {"[UNK]": 0, "a": 1, "##a": 2}
    tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]


def test_convert_tokens_to_ids():
    vocab = {token: i for i, token in enumerate(
        ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"])}
    assert tokenization.convert_tokens_to_ids(
        vocab, ["un", "##want", "##ed", "runn", "##ing"]) == [7, 4, 5, 8, 9]


def test_is_whitespace():
    for char in (u" ", u"\t", u"\r", u"\n", u"\u00A0", u"\u3000"):
        assert tokenization._is_whitespace(char), repr(char)
    for char in (u"A", u"-", u"\u2028"):
        assert not tokenization._is_whitespace(char), repr(char)


def test_is_control():
    assert tokenization._is_control(u"\u0005")
    assert tokenization._is_control(u"\u200b")  # Cf: zero-width space
    for char in (u"A", u" ", u"\t", u"\r", u"\U0001F4A9"):
        assert not tokenization._is_control(char), repr(char)


def test_is_punctuation():
    for char in (u"-", u"$", u"`", u".", u"\u3002", u"\uff0c"):
        assert tokenization._is_punctuation(char), repr(char)
    for char in (u"A", u" ", u"\u535A"):
        assert not tokenization._is_punctuation(char), repr(char)


def test_clean_text_deletes_controls_and_normalises_whitespace():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    # NUL, a control and a zero-width space glue "a", "b", "c", "d" together.
    assert tokenizer.tokenize(u"a\x00b\x07c\u200bd e\u3000f\u00a0g\tH") == [
        "abcd", "e", "f", "g", "H"]
    assert tokenizer.tokenize(u"\ufffd") == []


def test_convert_to_unicode_drops_invalid_bytes():
    assert tokenization.convert_to_unicode(b"ab\xffc\xe4\xb8") == u"abc"
    assert tokenization.convert_to_unicode(u"\u535a") == u"\u535a"
    with pytest.raises(ValueError):
        tokenization.convert_to_unicode(3)


def test_validate_case_matches_checkpoint():
    tokenization.validate_case_matches_checkpoint(
        True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt")
    tokenization.validate_case_matches_checkpoint(
        False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt")
    tokenization.validate_case_matches_checkpoint(False, "/my/own/model.ckpt")
    with pytest.raises(ValueError, match="uncased"):
        tokenization.validate_case_matches_checkpoint(
            False, "/models/chinese_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match="cased"):
        tokenization.validate_case_matches_checkpoint(
            True, "gs://bucket/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


def test_load_vocab_last_duplicate_wins_and_errors_name_the_file(tmp_path):
    vocab = tokenization.load_vocab(_vocab(tmp_path, ["[UNK]", "a", "b", "a"]))
    assert vocab["a"] == 3 and vocab["b"] == 2
    with pytest.raises(tokenization.VocabError, match="missing.txt"):
        tokenization.load_vocab(os.path.join(str(tmp_path), "missing.txt"))
    empty = _vocab(tmp_path, [], "empty.txt")
    with pytest.raises(tokenization.VocabError, match="empty.txt"):
        tokenization.FullTokenizer(empty)
    no_unk = _vocab(tmp_path, ["[CLS]", "a"], "no_unk.txt")
    with pytest.raises(tokenization.VocabError, match=r"no_unk\.txt.*\[UNK\]"):
        tokenization.FullTokenizer(no_unk)
    with pytest.raises(tokenization.VocabError, match=r"no_unk\.txt.*\[UNK\]"):
        GraphTokenizer(no_unk)


# --- Real vocabularies --------------------------------------------------------

def test_real_chinese_vocab(chinese_vocab_file):
    tokenizer = tokenization.FullTokenizer(chinese_vocab_file, do_lower_case=True)
    assert len(tokenizer.vocab) == 21128
    assert tokenizer.vocab["[PAD]"] == 0
    assert [tokenizer.vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        100, 101, 102, 103]
    tokens = tokenizer.tokenize(u"我爱北京天安门，Hello World！")
    assert tokens[:8] == [u"我", u"爱", u"北", u"京", u"天", u"安", u"门", u"，"]
    assert tokens[-1] == u"！"
    assert "[UNK]" not in tokens


def test_real_english_uncased_vocab(english_uncased_vocab_file):
    tokenizer = tokenization.FullTokenizer(english_uncased_vocab_file, do_lower_case=True)
    assert len(tokenizer.vocab) == 30522
    assert tokenizer.vocab["[CLS]"] == 101 and tokenizer.vocab["[MASK]"] == 103
    assert tokenizer.tokenize(u"UNAFFABLE jumps") == ["una", "##ffa", "##ble", "jumps"]
    assert tokenizer.tokenize(u"Héllo, naïve café!") == [
        "hello", ",", "naive", "cafe", "!"]
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(u"the quick brown fox"))
    assert ids == [1996, 4248, 2829, 4419]


# --- In-graph tokenizer parity --------------------------------------------------

# Characters that exercise every rule: ASCII letters and symbols, all the
# kinds of whitespace and control characters, accents (precomposed and
# combining), casing traps (sharp s, dotted I, final sigma), CJK and its
# full-width punctuation, full-width Latin, ligatures, emoji with modifiers
# and joiners, kana and Hangul, and a lone replacement character.
_POOL = (list(u"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789      "
              u".,!?'\"-()[]{}#$%^&*~`\\/:;<>|@_+=") +
         list(u" \t\n\r\x00\x01\x07\x0b\x0c\x1b\x1f\x7f\x85\xa0\xad\u200b\u200d\u2028"
              u"\u2029\u3000\ufeff\ufffd") +
         list(u"éèêëÉÈàÀçÇñÑöÖüÜßẞİıŞşĞğΣσςΟΔΑΒΓΩωабвгдАБВГДёЁ\u0301\u0308\u0327") +
         list(u"我爱北京天安门你好世界中文字符测试，。！？、“”《》：；（）【】") +
         list(u"ＡＢＣａｂｃ０１２！？ﬁﬂⅧ²½™©®°€£¥") +
         list(u"😀👍🏽🇨🇳❤️‍🔥") + list(u"あいうえおアイウエオ한국어\u064b\u0915\u093f"))

CURATED = [
    u"UNwant\u00E9d,running", u"ah\u535A\u63A8zz", u" \tHeLLo!how  \n Are yoU?  ",
    u"H\u00E9llo", u"ＡＢＣ ß straße ΟΔΟΣ. İstanbul", u"a\x00b\x07c d\u200be\ufeff f\u3000g",
    u"emoji 😀 👍🏽 ok", u"我爱北京天安门，你呢？", u"x" * 250 + u" y", u"$^` ~ naïve café",
    u"\u2028line\u2029para\x85nel\x0bvt\x0cff", u"ﬁnance Ⅷ ² ½", u"", u"   ", u"[MASK] [CLS]",
]


def _random_texts(seed, count):
    rng = random.Random(seed)
    return [u"".join(rng.choice(_POOL) for _ in range(rng.randint(0, 60)))
            for _ in range(count)]


def _assert_parity(vocab_file, do_lower_case, texts):
    python_tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    graph_tokenizer = GraphTokenizer(vocab_file, do_lower_case)
    expected = [python_tokenizer.convert_tokens_to_ids(python_tokenizer.tokenize(t))
                for t in texts]
    # A batch without any long run of non-space characters takes the fast
    # end-to-end path; one that holds the 250-character word takes the path
    # that measures every word. Both must agree with Python.
    short = [i for i, t in enumerate(texts) if len(t) <= 200]
    assert len(short) < len(texts)
    for indices in (short, list(range(len(texts)))):
        got = graph_tokenizer.tokenize(tf.constant([texts[i] for i in indices])).to_list()
        mismatches = [(texts[i], expected[i], ids) for i, ids in zip(indices, got)
                      if ids != expected[i]]
        assert not mismatches, "first mismatches: %r" % mismatches[:3]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_parity_english_vocab(english_uncased_vocab_file, do_lower_case):
    _assert_parity(english_uncased_vocab_file, do_lower_case,
                   CURATED + _random_texts(1 + do_lower_case, 1500))


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_parity_chinese_vocab(chinese_vocab_file, do_lower_case):
    _assert_parity(chinese_vocab_file, do_lower_case,
                   CURATED + _random_texts(3 + do_lower_case, 1500))


def test_graph_normalisation_traps(english_uncased_vocab_file):
    """The three tensorflow-text differences the pre-normalisation must undo."""
    graph_tokenizer = GraphTokenizer(english_uncased_vocab_file, do_lower_case=True)
    python_tokenizer = tokenization.FullTokenizer(english_uncased_vocab_file, True)
    words = graph_tokenizer.tokenize_words(tf.constant([
        u"ＡＢＣ", u"straße", u"a\x00b", u"x\u3000y\u00a0z"])).to_list()
    words = [[w.decode("utf-8") for w in row] for row in words]
    # Full-width letters stay full-width (no NFKC), sharp s stays (no case folding).
    assert words[0] == [u"ａｂｃ"]
    assert words[1] == [u"straße"]
    # Controls are deleted, not turned into spaces; Unicode spaces split words.
    assert words[2] == [u"ab"]
    assert words[3] == [u"x", u"y", u"z"]
    for text, row in zip([u"ＡＢＣ", u"straße", u"a\x00b", u"x\u3000y\u00a0z"], words):
        assert python_tokenizer.basic_tokenizer.tokenize(text) == row


def test_graph_invalid_utf8_matches_python(english_uncased_vocab_file):
    texts = [b"caf\xc3\xa9 bad \xff\xfe bytes \xe4\xb8", b"\x80\x81ok"]
    python_tokenizer = tokenization.FullTokenizer(english_uncased_vocab_file, True)
    graph_tokenizer = GraphTokenizer(english_uncased_vocab_file, True)
    got = graph_tokenizer.tokenize(tf.constant(texts)).to_list()
    for text, ids in zip(texts, got):
        assert ids == python_tokenizer.convert_tokens_to_ids(python_tokenizer.tokenize(text))


def test_graph_tokenizer_vocab_with_duplicates_and_blank_lines(tmp_path):
    path = _vocab(tmp_path, ["[PAD]", "[UNK]", "", "run", "##ning", "run", "x"])
    python_tokenizer = tokenization.FullTokenizer(path)
    graph_tokenizer = GraphTokenizer(path)
    texts = [u"running x run", u"runx"]
    got = graph_tokenizer.tokenize(tf.constant(texts)).to_list()
    assert got[0] == [5, 4, 6, 5]  # the duplicate "run" maps to its last line
    for text, ids in zip(texts, got):
        assert ids == python_tokenizer.convert_tokens_to_ids(python_tokenizer.tokenize(text))


def test_graph_tokenizer_in_tf_data_and_savedmodel(tmp_path, sample_vocab_file):
    graph_tokenizer = GraphTokenizer(sample_vocab_file, do_lower_case=True)
    python_tokenizer = tokenization.FullTokenizer(sample_vocab_file, True)
    texts = [u"The baker opens the shop at six.", u"面包师每天早上开门。", u"Owls hunt at night!"]
    expected = [python_tokenizer.convert_tokens_to_ids(python_tokenizer.tokenize(t))
                for t in texts]

    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(graph_tokenizer.tokenize)
    rows = [row for batch in dataset for row in batch.to_list()]
    assert rows == expected

    class Serving(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(self, text):
            return self.tokenizer.tokenize(text).to_tensor(default_value=-1)

    export_dir = os.path.join(str(tmp_path), "saved")
    tf.saved_model.save(Serving(graph_tokenizer), export_dir)
    reloaded = tf.saved_model.load(export_dir)
    padded = reloaded.tokenize(tf.constant(texts)).numpy().tolist()
    assert [[i for i in row if i != -1] for row in padded] == expected


def test_graph_tokenizer_scalar_input_and_id_to_token(sample_vocab_file):
    graph_tokenizer = GraphTokenizer(sample_vocab_file)
    ids = graph_tokenizer.tokenize(tf.constant(u"the bread"))
    tokens = [t.decode() for t in graph_tokenizer.id_to_token(ids).numpy()]
    assert tokens == ["the", "bread"]


# --- Fast paths of the in-graph tokenizer and the bulk tokenizer --------------

def test_whitespace_list_is_pythons_space_separators():
    import sys
    import unicodedata
    from data.tokenizers import wordpiece
    listed = {c for low, high in wordpiece.ZS_OTHER_THAN_SPACE for c in range(low, high + 1)}
    python = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Zs"}
    assert listed == python - {0x20}


def test_clean_characters_need_no_normalisation():
    """Rows of CLEAN_RANGES skip the normalisation: it must be the identity there."""
    import unicodedata
    from data.tokenizers import wordpiece
    for low, high in wordpiece.CLEAN_RANGES:
        for char in map(chr, range(low, high + 1)):
            if char == " ":
                continue
            assert unicodedata.category(char) not in ("Cc", "Cf", "Cn", "Zs", "Zl", "Zp", "Mn")
            assert char.isascii() or char.lower() == char, hex(ord(char))
            assert unicodedata.normalize("NFD", char) == char, hex(ord(char))


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_graph_parity_on_clean_rows_and_mixed_batches(english_uncased_vocab_file,
                                                      chinese_vocab_file, do_lower_case):
    """Every CLEAN_RANGES character, alone and in random rows; clean rows mixed
    with rows that need normalisation keep their order."""
    from data.tokenizers import wordpiece
    clean = [chr(c) for low, high in wordpiece.CLEAN_RANGES for c in range(low, high + 1)]
    rng = random.Random(7)
    texts = [u"a%sB %s%s" % (c, c, c) for c in clean]
    texts += [u"".join(rng.choice(clean) for _ in range(rng.randint(0, 80))) for _ in range(500)]
    texts += [u"".join(rng.choice(clean + _POOL) for _ in range(rng.randint(0, 40)))
              for _ in range(500)]
    rng.shuffle(texts)
    for vocab in (english_uncased_vocab_file, chinese_vocab_file):
        _assert_parity(vocab, do_lower_case, texts + [u"x" * 250])


def test_graph_parity_across_unicode(chinese_vocab_file):
    """Every code point sampled, CJK ideographs' edges included (the end-to-end
    WordPiece splits them itself, no spaces are put around them).

    The graph tokenizer's character classes come from a newer Unicode than
    Python's `unicodedata` (14.0 in Python 3.11): characters that Python does
    not know yet (category Cn) may be treated differently, e.g. U+13439, a
    format character since Unicode 15 that the graph deletes. All other
    characters must agree; `BulkTokenizer` finds the others by probing and
    leaves their lines to Python.
    """
    import unicodedata
    from data.tokenizers import wordpiece
    points = set(range(0x3000, 0x3100)) | set(range(0xFF00, 0xFFF0)) | set(range(0x13430, 0x13440))
    for low, high in tokenization.CJK_RANGES:
        points |= set(range(low - 3, low + 3)) | set(range(high - 3, high + 3))
    points |= set(range(0x20, 0x110000, 61))
    points = sorted(p for p in points if not 0xD800 <= p <= 0xDFFF)
    texts = [u"a%sb%s%s c" % (chr(p), chr(p), chr(p)) for p in points]
    full = tokenization.FullTokenizer(chinese_vocab_file)
    expected = [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]
    got = GraphTokenizer(chinese_vocab_file).tokenize(tf.constant(texts)).to_list()
    differ = [p for p, e, g in zip(points, expected, got) if e != g]
    assert 0x13439 in differ  # the known case: the test still sees what it guards
    assert [hex(p) for p in differ if unicodedata.category(chr(p)) != "Cn"] == []
    bulk = wordpiece.BulkTokenizer(full)
    assert bulk.tokenize(texts) == [full.tokenize(t) for t in texts]
    assert not bulk._agrees[chr(0x13439)]


def _bulk_texts():
    rng = random.Random(11)
    long_words = u" ".join(u"word%d" % i for i in range(2000))  # a ~14,000-character line
    return (CURATED + _random_texts(5, 800) + [long_words, u"我" * 3000, u"y" * 201 + u" ok",
                                              u"trailing newline\n", u"crlf\r\n", u"\n"] +
            [u"".join(rng.choice(u"abc 我爱北京，。ÉÀ") for _ in range(rng.randint(0, 300)))
             for _ in range(200)])


@pytest.mark.parametrize("vocab_name", ["english_uncased_vocab_file", "chinese_vocab_file"])
def test_bulk_tokenizer_gives_full_tokenizer_tokens(request, vocab_name):
    from data.tokenizers import wordpiece
    vocab_file = request.getfixturevalue(vocab_name)
    for do_lower_case in (True, False):
        full = tokenization.FullTokenizer(vocab_file, do_lower_case)
        bulk = wordpiece.BulkTokenizer(full, batch_size=97)  # several batches
        texts = _bulk_texts()
        assert bulk.tokenize(texts) == [full.tokenize(t) for t in texts]


def test_bulk_tokenizer_sends_lines_with_disputed_characters_to_python(sample_vocab_file):
    from data.tokenizers import wordpiece
    full = tokenization.FullTokenizer(sample_vocab_file)
    bulk = wordpiece.BulkTokenizer(full)
    texts = [u"the cat", u"naïve café", u"北京 the", u"plain"]
    bulk.tokenize(texts)  # probes the characters (with both tokenizers)
    # Pretend the two tokenizers disagreed on "é": its lines go to Python.
    bulk._agrees[u"é"] = False
    bulk._disagreeing.add(u"é")
    seen = []
    original = full.tokenize
    full.tokenize = lambda text: seen.append(text) or original(text)
    assert bulk.tokenize(texts) == [original(t) for t in texts]
    assert seen == [u"naïve café"]
    # Probing marked every other non-ASCII character as agreeing.
    assert all(bulk._agrees[c] for c in u"ï北京")
