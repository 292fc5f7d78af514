"""Batched in-graph BERT tokenizer on tensorflow-text, with `FullTokenizer`'s ids.

See the module docstring of `data.tokenization` for the rules both follow and
for why the text is normalised here before tensorflow-text sees it.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from data import wordpiece_vocab


# Words are split at spaces (dropped) and around punctuation and CJK
# ideographs (kept as words of their own). The text reaching the split has
# been normalised, so a space is the only whitespace left. Punctuation is
# Unicode P* plus every printable non-alphanumeric ASCII character.
_KEEP_DELIMS = "|".join(
    [r"[!-/]", r"[:-@]", r"[\[-`]", r"[{-~]", r"\p{P}"] +
    [r"[\x{%X}-\x{%X}]" % (low, high) for low, high in wordpiece_vocab.CJK_RANGES])
_DELIMS = " +|" + _KEEP_DELIMS
# Whitespace that becomes a plain space: tab, newline, carriage return, the
# Unicode space separators (Zs) other than the space itself, and the line and
# paragraph separators (see `normalize`). tests/data/test_tokenization.py checks
# the Zs list against Python's unicodedata.
ZS_OTHER_THAN_SPACE = ((0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x202F, 0x202F),
                       (0x205F, 0x205F), (0x3000, 0x3000))
_OTHER_WHITESPACE = "[\\t\\n\\r\\x{2028}\\x{2029}%s]" % "".join(
    r"\x{%X}-\x{%X}" % (low, high) for low, high in ZS_OTHER_THAN_SPACE)
# A row that is valid UTF-8 (RE2 matches no invalid byte).
_VALID_UTF8 = r"(?s).*"
# Characters on which Google's normalisation is the identity, apart from
# ASCII lower-casing: printable ASCII and the space, the common CJK ideographs,
# CJK and general punctuation, full-width punctuation, digits and lower-case
# letters. No whitespace other than the space, no control or format
# character, no combining mark, no character that lower-casing or NFD
# changes (tests/data/test_tokenization.py checks every one against unicodedata
# and against FullTokenizer). Rows made only of these skip the normalisation.
CLEAN_RANGES = ((0x20, 0x7E), (0x2010, 0x2027), (0x2030, 0x205E), (0x3001, 0x3029),
                (0x3030, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xFF01, 0xFF20),
                (0xFF3B, 0xFF64))
_CLEAN_ROW = "[%s]*" % "".join(r"\x{%X}-\x{%X}" % r for r in CLEAN_RANGES)


class GraphTokenizer(tf.Module):
    """Turns a batch of strings into WordPiece ids inside the TensorFlow graph.

    Usable in `tf.data` (``dataset.map(tokenizer.tokenize)``) and in
    SavedModels: it is a `tf.Module` and its vocabulary is a graph constant.

    Example:

    >>> tokenizer = GraphTokenizer("vocab.txt", do_lower_case=True)
    >>> ids = tokenizer.tokenize(tf.constant(["Hello world!", "你好"]))
    >>> ids.to_list()   # a RaggedTensor: one row of int32 ids per string

    Args:
      vocab_file: Google-format vocabulary, one token per line.
      do_lower_case: lower-case and strip accents (uncased models).
      max_input_chars_per_word: longer words become `[UNK]`.
      token_out_type: dtype of the ids.
    """

    def __init__(self, vocab_file, do_lower_case=True,
                 max_input_chars_per_word=wordpiece_vocab.MAX_INPUT_CHARS_PER_WORD,
                 token_out_type=tf.int32, name=None):
        super().__init__(name=name)
        vocab = wordpiece_vocab.read_vocab_list(vocab_file)
        wordpiece_vocab.check_vocab_special_tokens(
            {t: i for i, t in enumerate(vocab) if t is not None}, vocab_file,
            required=(wordpiece_vocab.UNK_TOKEN,))
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.vocab_size = len(vocab)
        # A line that cannot be looked up by its position (blank, or a token
        # listed again further down, whose id is then the later line) gets a
        # placeholder no word can produce (words never hold a space), so every
        # other id keeps its line.
        lookup = [t if t is not None else "unusable line %d" % i
                  for i, t in enumerate(vocab)]
        # Two WordPiece models over the same vocabulary. The end-to-end one
        # splits on whitespace and punctuation itself (with BERT's
        # definitions) and is several times faster than a regex split; the
        # other takes words split by `tokenize_words`. Characters, not bytes,
        # decide [UNK] for long words (see `tokenize`); a UTF-8 character
        # takes at most 4 bytes, so the byte limit never triggers first.
        common = dict(vocab=lookup, suffix_indicator="##",
                      max_bytes_per_word=4 * max_input_chars_per_word,
                      token_out_type=token_out_type,
                      unknown_token=wordpiece_vocab.UNK_TOKEN,
                      support_detokenization=False)
        self._wordpiece = tf_text.FastWordpieceTokenizer(no_pretokenization=True, **common)
        self._end_to_end = tf_text.FastWordpieceTokenizer(no_pretokenization=False, **common)
        # A row holding a run of more non-space characters than the word limit
        # might hold an over-long word; batches with such a row take the path
        # that measures every word.
        # CJK ideographs are words of their own, so they break a run too.
        self._long_run = r".*[^ %s]{%d}.*" % (
            "".join(r"\x{%X}-\x{%X}" % r for r in wordpiece_vocab.CJK_RANGES),
            max_input_chars_per_word + 1)
        self._id_to_token = tf.constant([t or "" for t in vocab])

    def normalize(self, text):
        """Google's clean-up, lower-casing and accent stripping, in the graph."""
        text = tf.convert_to_tensor(text, dtype=tf.string)
        # Invalid UTF-8 becomes U+FFFD, which is deleted below together with
        # the control characters: the result of Python's decode(errors="ignore").
        # Checking validity costs a fraction of transcoding, so a batch of
        # valid text (the usual case) is not transcoded.
        text = tf.cond(
            tf.reduce_all(tf.strings.regex_full_match(text, _VALID_UTF8)),
            lambda: text,
            lambda: tf.strings.unicode_transcode(
                text, input_encoding="UTF-8", output_encoding="UTF-8",
                errors="replace", replacement_char=0xFFFD))
        # Whitespace other than the plain space, Unicode Zs included, becomes a
        # plain space (RE2's \s is ASCII only). Plain spaces are left out of
        # the pattern: replacing every space by itself was the slowest step.
        # U+2028/U+2029 are not whitespace to Google's clean-up, but its
        # str.split() splits on them, which comes to the same.
        text = tf.strings.regex_replace(text, _OTHER_WHITESPACE, " ")
        # Control and format characters, NUL and U+FFFD are deleted, not
        # turned into spaces ("a\x00b" is one word).
        text = tf.strings.regex_replace(text, r"[\p{Cc}\p{Cf}\x{FFFD}]", "")
        if self.do_lower_case:
            # Full Unicode lower-casing as Python's str.lower (final sigma
            # included), not tensorflow-text's NFKC case folding.
            text = tf.strings.lower(text, encoding="utf-8")
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, r"\p{Mn}", "")
        return text

    def tokenize_words(self, text):
        """Basic tokenization only: words per input string (RaggedTensor)."""
        return tf_text.regex_split(self.normalize(text), _DELIMS, _KEEP_DELIMS)

    def tokenize(self, text):
        """WordPiece ids: [batch, (tokens)] for a batch, [tokens] for a scalar.

        Rows made only of characters that Google's normalisation leaves alone
        (`CLEAN_RANGES`: ASCII, common CJK text and punctuation) are only
        lower-cased (ASCII rules, the only case there) and go straight to
        WordPiece; the other rows take the full normalisation. A batch of
        either kind runs one path; a mixed batch is split by row and put back
        together in order. The end-to-end WordPiece splits CJK ideographs
        into words of their own with Google's ranges, so they need no spaces
        around them (tests/data/test_tokenization.py sweeps every code point).
        """
        text = tf.convert_to_tensor(text, dtype=tf.string)
        if text.shape.rank == 0:
            return self.tokenize(tf.reshape(text, [1]))[0]
        clean = tf.strings.regex_full_match(text, _CLEAN_ROW)

        def _mixed():
            clean_rows = tf.reshape(tf.where(clean), [-1])
            other_rows = tf.reshape(tf.where(tf.logical_not(clean)), [-1])
            ids = tf.concat([self._tokenize_clean(tf.gather(text, clean_rows)),
                             self._tokenize_any(tf.gather(text, other_rows))], axis=0)
            order = tf.concat([clean_rows, other_rows], axis=0)
            return tf.gather(ids, tf.math.invert_permutation(order))

        return tf.cond(
            tf.reduce_all(clean), lambda: self._tokenize_clean(text),
            lambda: tf.cond(tf.reduce_any(clean), _mixed, lambda: self._tokenize_any(text)))

    def _tokenize_clean(self, text):
        """Rows of `CLEAN_RANGES` characters only: nothing to normalise."""
        if self.do_lower_case:
            text = tf.strings.lower(text)  # ASCII letters only; bytes >= 0x80 unchanged
        return self._wordpieces(text)

    def _tokenize_any(self, text):
        return self._wordpieces(self.normalize(text))

    def _wordpieces(self, normalized):
        """WordPiece ids of normalised rows."""
        limit = self.max_input_chars_per_word

        def _fast():
            return self._end_to_end.tokenize(normalized)

        def _exact():
            words = tf_text.regex_split(normalized, _DELIMS, _KEEP_DELIMS)

            def _unk_if_too_long(flat_words):
                too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > limit
                return tf.where(too_long, wordpiece_vocab.UNK_TOKEN, flat_words)

            words = tf.ragged.map_flat_values(_unk_if_too_long, words)
            # [batch, (words), (pieces)] -> [batch, (pieces)]
            return self._wordpiece.tokenize(words).merge_dims(-2, -1)

        maybe_long = tf.reduce_any(tf.strings.regex_full_match(normalized, self._long_run))
        return tf.cond(maybe_long, _exact, _fast)

    def id_to_token(self, ids):
        """Maps ids back to their vocabulary strings (no `##` merging)."""
        return tf.ragged.map_flat_values(tf.gather, self._id_to_token, ids) \
            if isinstance(ids, tf.RaggedTensor) else tf.gather(self._id_to_token, ids)

    def __call__(self, text):
        return self.tokenize(text)


class BulkTokenizer(object):
    """`FullTokenizer.tokenize` for many lines at once, computed in the graph.

    Gives, line for line, the token strings `full_tokenizer` gives, but
    tokenizes batches of lines with a `GraphTokenizer` over the same
    vocabulary (many times faster than the pure-Python tokenizer). Used by the
    pre-training data writer, which tokenizes whole chunks of a corpus.

    Belt and braces for the hard requirement of identical tokens: the graph
    tokenizer's character classes come from ICU and RE2, the Python
    tokenizer's from Python's `unicodedata`, and the two may follow different
    Unicode versions. So every distinct non-ASCII character is checked once
    (per process) by tokenizing a few probe strings with both; a line holding
    a character on which they disagree is tokenized by `full_tokenizer`.

    Args:
      full_tokenizer: a `tokenization.FullTokenizer`; its vocabulary file and
        casing configure the graph tokenizer.
      batch_size, batch_bytes: most lines and bytes per graph call (batches
        of about half a megabyte stay in cache: long lines run 1.5x as fast
        as in batches of 4 MB).
    """

    def __init__(self, full_tokenizer, batch_size=4096, batch_bytes=512 << 10):
        self.full_tokenizer = full_tokenizer
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.graph_tokenizer = GraphTokenizer(full_tokenizer.vocab_file,
                                              full_tokenizer.do_lower_case)
        inv_vocab = full_tokenizer.inv_vocab
        # id -> the token string FullTokenizer produces for it (None for the
        # ids no token maps to; the graph tokenizer never produces those).
        self._id_to_token = [inv_vocab.get(i) for i in range(max(inv_vocab) + 1)]
        # Eagerly: batches are large enough that running op by op costs
        # nothing measurable, and tracing a tf.function would cost each
        # worker process over a second.
        self._tokenize_batch = self.graph_tokenizer.tokenize
        self._agrees = {}  # non-ASCII char -> both tokenizers treat it alike
        self._disagreeing = set()

    def _check_characters(self, chars):
        new = sorted(c for c in chars if c not in self._agrees)
        if not new:
            return
        probes = []
        for char in new:
            probes.extend((char, u"a%sb" % char, char * 2 + u" x" + char))
        got = self._ids_of(probes)
        full = self.full_tokenizer
        for k, char in enumerate(new):
            agrees = all(
                got[3 * k + p] == full.convert_tokens_to_ids(full.tokenize(probes[3 * k + p]))
                for p in range(3))
            self._agrees[char] = agrees
            if not agrees:
                self._disagreeing.add(char)

    def _ids_of(self, texts, id_map=None):
        """Graph-tokenizer ids of `texts` (lists of ints), batch by batch.

        `id_map`, if given, maps each id (e.g. to its token string) on the
        way, in one pass over the batch.
        """
        out = []
        start = 0
        while start < len(texts):
            end = start
            size = 0
            while end < len(texts) and end - start < self.batch_size and (
                    end == start or size + len(texts[end]) <= self.batch_bytes):
                size += len(texts[end])
                end += 1
            ids = self._tokenize_batch(tf.constant(texts[start:end]))
            flat = ids.flat_values.numpy().tolist()
            if id_map is not None:
                flat = list(map(id_map, flat))
            splits = ids.row_splits.numpy().tolist()
            out.extend([flat[a:b] for a, b in zip(splits, splits[1:])])
            start = end
        return out

    def tokenize(self, texts):
        """Token lists of `texts` (str), exactly `FullTokenizer.tokenize`'s."""
        # A line's end of line is whitespace to both tokenizers; without it
        # an ASCII line takes the graph tokenizer's fast ASCII path.
        texts = [t.rstrip(u"\r\n") for t in texts]
        non_ascii = [k for k, t in enumerate(texts) if not t.isascii()]
        if non_ascii:
            self._check_characters(set(u"".join(texts[k] for k in non_ascii)))
        python_rows = []
        if self._disagreeing:
            python_rows = [k for k in non_ascii
                           if not self._disagreeing.isdisjoint(texts[k])]
        if python_rows:
            python_set = set(python_rows)
            graph_rows = [k for k in range(len(texts)) if k not in python_set]
        else:
            graph_rows = None
        graph_texts = texts if graph_rows is None else [texts[k] for k in graph_rows]
        tokens = self._ids_of(graph_texts, self._id_to_token.__getitem__)
        if graph_rows is None:
            return tokens
        result = [None] * len(texts)
        for k, row in zip(graph_rows, tokens):
            result[k] = row
        for k in python_rows:
            result[k] = self.full_tokenizer.tokenize(texts[k])
        return result
