"""Learning vocabularies from a corpus: WordPiece (Google's layout) and byte-level BPE.

Byte-level BPE (GPT-2's `vocab.json` + `merges.txt`, `learn_byte_bpe`) is
learned with the HF `tokenizers` library over the corpus lines, the 256 byte
symbols first and `<|endoftext|>` last; see the end of this module. The rest
of this docstring is about WordPiece.

Words are counted with this project's own `BasicTokenizer` (exactly the
splitting the model will later see), then tensorflow-text's WordPiece learner
picks the pieces. CJK ideographs are handled apart from the learner: the
tokenizer always splits them into single characters, so each one seen often
enough becomes a token of its own and no ``##`` variant of them is kept (it
could never be produced).

The vocabulary starts with Google's reserved block::

    [PAD] [unused0] ... [unused98] [UNK] [CLS] [SEP] [MASK]

so ``[PAD]`` is id 0 and, with the default 99 unused slots, ``[UNK]``,
``[CLS]``, ``[SEP]``, ``[MASK]`` are 100-103 as in Google's English vocabularies.
The unused slots let a user add task-specific tokens later without resizing
the embedding table.
"""

import collections
import dataclasses
import itertools
import json
import logging
from typing import Optional

from data import atomic
from data import corpus as corpus_lib
from data import tokenization
from data.options import option


@dataclasses.dataclass
class VocabSettings:
    """What `run/create_vocab.py` learns, from which files; the fields are its flags.

    `kind` is what is learned: `model` if given, else `vocab_type`
    (``wordpiece`` by `learn_vocab`, ``byte_bpe`` by `learn_byte_bpe`,
    ``sentencepiece`` by `learn_sentencepiece`).
    """

    input_file: Optional[str] = option(
        None, "Input raw text file (or comma-separated list of files/globs).")
    vocab_file: Optional[str] = option(None, "Where to write the vocabulary.")
    vocab_size: int = option(8000, "Target vocabulary size, reserved tokens included.")
    do_lower_case: bool = option(True, "Lower-case and strip accents (uncased model).")
    num_unused: int = option(99, "Number of [unusedN] slots after [PAD] (0 or more).",
                             lower_bound=0)
    min_cjk_count: int = option(
        1, "CJK characters seen fewer times are left out of the vocabulary.")
    max_unique_chars: int = option(1000, "Alphabet size for non-CJK text.")
    lower_thresh: int = option(1, "Lowest piece frequency the learner may accept.")
    language_sampling_alpha: Optional[float] = option(
        None, "Multilingual WordPiece: each comma-separated --input_file pattern is one "
        "language, whose word counts are scaled by q_i/p_i with q_i = p_i^alpha / "
        "sum p_j^alpha (mBERT: 0.7); unset = counts as they are.")
    languages: Optional[str] = option(
        None, "Names of the --input_file patterns' languages, in order (e.g. en,zh); "
        "default: each pattern's first file name.")
    vocab_type: str = option(
        "wordpiece", "wordpiece: Google's vocab.txt. byte_bpe: GPT-2's vocab.json + "
        "merges.txt (needs --merges_file).", choices=("wordpiece", "byte_bpe"))
    merges_file: Optional[str] = option(
        None, "Where to write merges.txt (--vocab_type=byte_bpe).")
    min_frequency: int = option(2, "byte_bpe: pairs seen fewer times are never merged.")
    model: Optional[str] = option(
        None, "What to learn; overrides --vocab_type. sentencepiece: a SentencePiece "
        "unigram model with XLNet's special symbols, written to --vocab_file "
        "(spiece.model).", choices=("wordpiece", "byte_bpe", "sentencepiece"))
    character_coverage: float = option(
        0.9995, "sentencepiece: share of the characters seen that get a piece of their own.")

    @property
    def kind(self):
        """wordpiece, byte_bpe or sentencepiece: `model`, else `vocab_type`."""
        return self.model or self.vocab_type


def reserved_tokens(num_unused=99):
    """[PAD], `num_unused` [unusedN] slots, [UNK], [CLS], [SEP], [MASK]; ValueError for a
    `num_unused` that is not an integer >= 0."""
    if isinstance(num_unused, bool) or not isinstance(num_unused, int) or num_unused < 0:
        raise ValueError("--num_unused=%s: expected a number of [unusedN] slots >= 0"
                         % (num_unused,))
    return (["[PAD]"] + ["[unused%d]" % i for i in range(num_unused)] +
            [tokenization.UNK_TOKEN, tokenization.CLS_TOKEN,
             tokenization.SEP_TOKEN, tokenization.MASK_TOKEN])


def count_words(files, do_lower_case=True, stats=None):
    """Counts basic-tokenized words over `files` (streamed line by line)."""
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    stats = stats if stats is not None else corpus_lib.ReadStats()
    counts = collections.Counter()
    for document in corpus_lib.iter_documents(files, stats):
        for lineno, raw in document.lines:
            text = corpus_lib.decode_line(raw, document.path, lineno, stats)
            counts.update(basic.tokenize(text))
    if not counts:
        raise corpus_lib.CorpusError("No words found in %s; expected UTF-8 text, one "
                                     "sentence per line" % ", ".join(files))
    return counts


def _learner_alphabet(other_counts, max_unique_chars, max_token_length):
    """The characters the WordPiece learner keeps as tokens (and as ## pieces).

    The learner's own rule: words longer than `max_token_length` are left out,
    the `max_unique_chars` most frequent characters form the alphabet, words
    with any other character are left out, and every character of the words
    that remain becomes a token, alone and with ``##``.
    """
    words = [(w, n) for w, n in other_counts.items() if len(w) <= max_token_length]
    char_counts = collections.Counter()
    for word, count in words:
        for char in word:
            char_counts[char] += count
    ranked = sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    allowed = {char for char, _ in ranked[:max_unique_chars]}
    alphabet = set()
    for word, _ in words:
        if all(char in allowed for char in word):
            alphabet.update(word)
    return sorted(alphabet)


def _check_vocab_size(vocab_size, num_reserved, num_cjk, num_chars):
    minimum = num_reserved + num_cjk + num_chars
    if vocab_size < minimum:
        raise ValueError(
            "--vocab_size=%d is too small for this corpus: the vocabulary must hold at "
            "least %d tokens (%d reserved, %d CJK characters, %d single characters with "
            "their ## forms); expected --vocab_size >= %d (or a higher --min_cjk_count)"
            % (vocab_size, minimum, num_reserved, num_cjk, num_chars, minimum))


def learn_vocab(word_counts, vocab_size, num_unused=99, min_cjk_count=1,
                max_unique_chars=1000, lower_thresh=1, max_token_length=50):
    """Learns a vocabulary of at most `vocab_size` tokens from word counts.

    Args:
      word_counts: mapping word -> count (from `count_words`).
      vocab_size: the target size, reserved tokens and CJK characters included.
      num_unused: number of ``[unusedN]`` slots in the reserved block.
      min_cjk_count: CJK characters seen fewer times are left out (they
        become ``[UNK]``).
      max_unique_chars: alphabet size for non-CJK text; words holding rarer
        characters are not learned from.
      lower_thresh: lowest token frequency the learner may accept.
      max_token_length: longest piece the learner considers.

    Returns:
      the vocabulary as a list of tokens, index = id.

    Raises:
      ValueError when `word_counts` is empty, or when `vocab_size` cannot hold
      the reserved tokens, the CJK characters and every other character of
      the corpus alone and as a ``##`` piece (the message names the minimum).
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner  # pylint: disable=g-import-not-at-top

    if not word_counts:
        raise ValueError("word_counts is empty: no word to learn a vocabulary from; "
                         "expected the counts of a corpus with text (see count_words)")
    reserved = reserved_tokens(num_unused)
    cjk_counts = collections.Counter()
    other_counts = {}
    for word, count in word_counts.items():
        if tokenization.is_cjk_char(word):
            cjk_counts[word] += count
        else:
            other_counts[word] = count
    cjk_tokens = [c for c, n in sorted(cjk_counts.items(), key=lambda kv: (-kv[1], kv[0]))
                  if n >= min_cjk_count]
    # Every character of the alphabet is needed alone and as a ## piece: a
    # word with a character missing becomes [UNK] as a whole.
    alphabet = _learner_alphabet(other_counts, max_unique_chars, max_token_length)
    _check_vocab_size(vocab_size, len(reserved), len(cjk_tokens), 2 * len(alphabet))
    budget = vocab_size - len(reserved) - len(cjk_tokens)
    learned = []
    if other_counts:
        learned = learner.learn(
            other_counts, vocab_size=budget, reserved_tokens=[],
            lower_thresh=lower_thresh, max_token_length=max_token_length,
            max_unique_chars=max_unique_chars, include_joiner_token=True,
            joiner="##")
    vocab = list(reserved)
    seen = set(vocab)
    for token in cjk_tokens + learned:
        if token.startswith("##") and tokenization.is_cjk_char(token[2:]):
            continue  # never produced: CJK characters are always split apart.
        if token not in seen and token.strip() == token and token:
            seen.add(token)
            vocab.append(token)
    if len(vocab) > vocab_size:
        # The learner may overshoot its budget; the pieces of more than one
        # character it ranked last go, never a character (alone or ##).
        fixed = len(reserved) + len(cjk_tokens)
        characters = {t for t in vocab[fixed:]
                      if len(t) == 1 or (t.startswith("##") and len(t) == 3)}
        _check_vocab_size(vocab_size, len(reserved), len(cjk_tokens), len(characters))
        droppable = [i for i in range(fixed, len(vocab)) if vocab[i] not in characters]
        dropped = set(droppable[len(droppable) - (len(vocab) - vocab_size):])
        vocab = [t for i, t in enumerate(vocab) if i not in dropped]
    return vocab


def write_vocab(tokens, vocab_file):
    """Writes one token per line, atomically (temp file, then rename)."""
    atomic.write_text(vocab_file, "".join(token + "\n" for token in tokens))
    logging.info("Wrote %d tokens to %s", len(tokens), vocab_file)


# ------------------------------------------------------- byte-level BPE (GPT-2)


def byte_bpe_training_lines(files, stats=None):
    """The strings a byte-level BPE vocabulary is learned from: each line + "\\n".

    The causal-LM pipeline (`data.pretraining.causal_packing`) tokenizes a
    corpus line by line, each line with its newline, so the learner sees the
    same words (a newline ends a line's last word's run, "Ċ").
    """
    stats = stats if stats is not None else corpus_lib.ReadStats()
    any_text = False
    for document in corpus_lib.iter_documents(files, stats):
        for lineno, raw in document.lines:
            text = corpus_lib.decode_line(raw, document.path, lineno, stats)
            any_text = True
            yield text.rstrip("\r\n") + "\n"
    if not any_text:
        raise corpus_lib.CorpusError("No text found in %s; expected UTF-8 text, one "
                                     "sentence per line" % ", ".join(files))


def learn_byte_bpe(lines, vocab_size, min_frequency=2, special_tokens=("<|endoftext|>",)):
    """Learns GPT-2-style byte-level BPE with the HF `tokenizers` library.

    Args:
      lines: iterable of strings (see `byte_bpe_training_lines`).
      vocab_size: target size, the 256 byte symbols and the special tokens
        included, so at least 256 + len(special_tokens) (a small corpus may
        run out of pairs seen `min_frequency` times before reaching it).
      min_frequency: pairs seen fewer times are never merged.
      special_tokens: put at the END of the vocabulary, as in GPT-2 (whose
        `<|endoftext|>` is the last id, 50256), so that ids 0.. are the byte
        symbols followed by the merges in the order they were learned.

    Returns:
      (vocab, merges): `{token: id}` and `[(left, right), ...]` in rank order.
    """
    from tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
    from tokenizers import models, pre_tokenizers, trainers  # pylint: disable=g-import-not-at-top

    # The 256 byte symbols and the special tokens are always in the vocabulary.
    minimum = 256 + len(set(special_tokens))
    if vocab_size < minimum:
        raise ValueError(
            "--vocab_size=%d is too small for byte-level BPE: the vocabulary must hold at "
            "least %d tokens (256 byte symbols, %d special); expected --vocab_size >= %d"
            % (vocab_size, minimum, len(set(special_tokens)), minimum))
    lines = iter(lines)
    first = next(lines, None)
    if first is None:
        raise ValueError("lines is empty: no text to learn byte-level BPE from; expected "
                         "the lines of a corpus (see byte_bpe_training_lines)")
    lines = itertools.chain([first], lines)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
              for m in model["merges"]]
    learned = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in learned if t not in special_tokens] + list(special_tokens)
    vocab = {token: i for i, token in enumerate(tokens)}
    for left, right in merges:
        if left + right not in vocab:
            raise ValueError("merge %r %r makes a token missing from the vocabulary" % (left, right))
    return vocab, merges


def _write_atomically(path, text):
    atomic.write_text(path, text)


def write_byte_bpe(vocab, merges, vocab_file, merges_file):
    """Writes GPT-2's `vocab.json` and `merges.txt` (`#version: 0.2` header), atomically."""
    ordered = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    _write_atomically(vocab_file, json.dumps(ordered, ensure_ascii=False) + "\n")
    _write_atomically(merges_file, "#version: 0.2\n"
                      + "".join("%s %s\n" % pair for pair in merges))
    logging.info("Wrote %d tokens to %s and %d merges to %s", len(vocab), vocab_file,
                 len(merges), merges_file)


# ------------------------------------------------------ SentencePiece (XLNet)


def sentencepiece_training_lines(files, stats=None):
    """The sentences a SentencePiece model is learned from: each corpus line, stripped."""
    stats = stats if stats is not None else corpus_lib.ReadStats()
    any_text = False
    for document in corpus_lib.iter_documents(files, stats):
        for lineno, raw in document.lines:
            text = corpus_lib.decode_line(raw, document.path, lineno, stats).strip()
            if text:
                any_text = True
                yield text
    if not any_text:
        raise corpus_lib.CorpusError("No text found in %s; expected UTF-8 text, one "
                                     "sentence per line" % ", ".join(files))


def learn_sentencepiece(lines, vocab_size, model_type="unigram", character_coverage=0.9995):
    """Learns a SentencePiece model with XLNet's special symbols; returns its bytes.

    The trainer runs on one thread over the sentences in the order given
    (no sampling, no shuffling), so the same corpus gives the same model
    bytes. Ids 0-8 are `data.tokenizers.sentencepiece.SPECIAL_SYMBOLS`
    (`<unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop>`), as in XLNet's
    `spiece.model`.

    Args:
      lines: iterable of sentences (see `sentencepiece_training_lines`).
      vocab_size: pieces in the model, the special symbols included.
      model_type: "unigram" (XLNet's) or "bpe".
      character_coverage: share of the characters seen that get a piece of
        their own (the rarest others become <unk>); 0.9995 is the
        SentencePiece advice for Chinese and Japanese.
    """
    import io  # pylint: disable=g-import-not-at-top
    import sentencepiece  # pylint: disable=g-import-not-at-top
    from data.tokenizers import sentencepiece as sp_lib  # pylint: disable=g-import-not-at-top

    minimum = len(sp_lib.SPECIAL_SYMBOLS) + 1
    if vocab_size < minimum:
        raise ValueError("--vocab_size=%d is too small for a SentencePiece model with XLNet's "
                         "%d special symbols; expected --vocab_size >= %d"
                         % (vocab_size, len(sp_lib.SPECIAL_SYMBOLS), minimum))
    sentences = list(lines)
    if not sentences:
        raise ValueError("lines is empty: no text to learn a SentencePiece model from")
    model = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            control_symbols=",".join(sp_lib.CONTROL_SYMBOLS),
            user_defined_symbols=",".join(sp_lib.USER_SYMBOLS),
            num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
            minloglevel=2)
    except RuntimeError as e:
        message = str(e).splitlines()[0] if str(e) else "the trainer failed"
        raise ValueError("SentencePiece could not learn %d pieces from %d sentences: %s"
                         % (vocab_size, len(sentences), message)) from None
    return model.getvalue()


def write_sentencepiece(model_bytes, model_file):
    """Writes a SentencePiece model atomically (temp file, then rename)."""
    with atomic.atomic_output(model_file, "wb") as f:
        f.write(model_bytes)
    logging.info("Wrote a SentencePiece model to %s", model_file)
