"""Batched in-graph BERT tokenizer on tensorflow-text, with `FullTokenizer`'s ids.

See the module docstring of `data.tokenization` for the rules both follow and
for why the text is normalised here before tensorflow-text sees it.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from data import tokenization


# Words are split at spaces (dropped) and around punctuation and CJK
# ideographs (kept as words of their own). The text reaching the split has
# been normalised, so a space is the only whitespace left. Punctuation is
# Unicode P* plus every printable non-alphanumeric ASCII character.
_KEEP_DELIMS = "|".join(
    [r"[!-/]", r"[:-@]", r"[\[-`]", r"[{-~]", r"\p{P}"] +
    [r"[\x{%X}-\x{%X}]" % (low, high) for low, high in tokenization.CJK_RANGES])
_DELIMS = " +|" + _KEEP_DELIMS
_CJK_CHAR = "(%s)" % "|".join(
    r"[\x{%X}-\x{%X}]" % (low, high) for low, high in tokenization.CJK_RANGES)


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
                 max_input_chars_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD,
                 token_out_type=tf.int32, name=None):
        super().__init__(name=name)
        vocab = tokenization.read_vocab_list(vocab_file)
        tokenization.check_vocab_special_tokens(
            {t: i for i, t in enumerate(vocab) if t is not None}, vocab_file,
            required=(tokenization.UNK_TOKEN,))
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
                      unknown_token=tokenization.UNK_TOKEN,
                      support_detokenization=False)
        self._wordpiece = tf_text.FastWordpieceTokenizer(no_pretokenization=True, **common)
        self._end_to_end = tf_text.FastWordpieceTokenizer(no_pretokenization=False, **common)
        # A row holding a run of more non-space characters than the word limit
        # might hold an over-long word; batches with such a row take the path
        # that measures every word.
        self._long_run = r".*[^ ]{%d}.*" % (max_input_chars_per_word + 1)
        self._id_to_token = tf.constant([t or "" for t in vocab])

    def normalize(self, text):
        """Google's clean-up, lower-casing and accent stripping, in the graph."""
        text = tf.convert_to_tensor(text, dtype=tf.string)
        # Invalid UTF-8 becomes U+FFFD, which is deleted below together with
        # the control characters: the result of Python's decode(errors="ignore").
        text = tf.strings.unicode_transcode(
            text, input_encoding="UTF-8", output_encoding="UTF-8",
            errors="replace", replacement_char=0xFFFD)
        # Whitespace, Unicode Zs included, becomes a plain space (RE2's \s is
        # ASCII only). U+2028/U+2029 are not whitespace to Google's clean-up,
        # but its str.split() splits on them, which comes to the same.
        text = tf.strings.regex_replace(text, r"[\t\n\r\p{Zs}\x{2028}\x{2029}]", " ")
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
        """WordPiece ids: [batch, (tokens)] for a batch, [tokens] for a scalar."""
        text = tf.convert_to_tensor(text, dtype=tf.string)
        if text.shape.rank == 0:
            return self.tokenize(tf.reshape(text, [1]))[0]
        normalized = self.normalize(text)
        # CJK ideographs become words of their own.
        spaced = tf.strings.regex_replace(normalized, _CJK_CHAR, r" \1 ")
        limit = self.max_input_chars_per_word

        def _fast():
            return self._end_to_end.tokenize(spaced)

        def _exact():
            words = tf_text.regex_split(normalized, _DELIMS, _KEEP_DELIMS)

            def _unk_if_too_long(flat_words):
                too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > limit
                return tf.where(too_long, tokenization.UNK_TOKEN, flat_words)

            words = tf.ragged.map_flat_values(_unk_if_too_long, words)
            # [batch, (words), (pieces)] -> [batch, (pieces)]
            return self._wordpiece.tokenize(words).merge_dims(-2, -1)

        maybe_long = tf.reduce_any(tf.strings.regex_full_match(spaced, self._long_run))
        return tf.cond(maybe_long, _exact, _fast)

    def id_to_token(self, ids):
        """Maps ids back to their vocabulary strings (no `##` merging)."""
        return tf.ragged.map_flat_values(tf.gather, self._id_to_token, ids) \
            if isinstance(ids, tf.RaggedTensor) else tf.gather(self._id_to_token, ids)

    def __call__(self, text):
        return self.tokenize(text)
