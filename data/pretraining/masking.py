# coding=utf-8
"""Static masked-LM masking strategies: token, whole word, span, n-gram.

Every strategy answers one question -- *which* positions of an instance are
predicted -- and leaves the rest to rules they all share:

* **Budget.** ``num_to_predict = min(max_predictions_per_seq, max(1,
  round(len(tokens) * masked_lm_prob)))`` positions (``len(tokens)`` counts
  ``[CLS]`` and ``[SEP]``, as Google's script does). ``[CLS]`` and ``[SEP]``
  are never chosen. A strategy never exceeds the budget; one that masks
  whole units may fall a little short when no remaining unit fits.
* **Corruption.** Each chosen position becomes ``[MASK]`` 80% of the time,
  stays itself 10%, becomes a random vocabulary token 10%. By default the
  draw is made per word piece, exactly as google-research/bert does; with
  ``replace_per_unit=True`` it is made once per chosen unit (a whole word, a
  span, an n-gram), so all its pieces are masked, all kept, or all replaced
  by random tokens. Span masking defaults to per-unit, as SpanBERT does.
* **Output.** Positions sorted ascending; labels are the original tokens.

The strategies (`MASKING_STRATEGIES`, selected by name):

``token``
  Google's per-WordPiece masking: shuffle all maskable positions, take the
  first ``num_to_predict``. Same random calls as Google's script.
``whole_word``
  Google's ``--do_whole_word_mask``: a word (a token and its ``##``
  continuations) is masked entirely or not at all; a word that would
  overshoot the budget is skipped. For Chinese every character is a token of
  its own, so ``##`` says nothing about words; with word boundaries from a
  segmenter (`tokenize_with_word_starts`, jieba) the characters of one
  segmented word form one unit, as in Chinese BERT-wwm -- the tokens stay
  plain characters, the grouping travels beside them as ``word_starts``.
``span``
  SpanBERT: span lengths in whole words drawn from a geometric distribution
  (p=0.2) truncated at 10 words and renormalised -- SpanBERT's "clipping",
  mean 3.8 words (a hard ``min(L, 10)`` would give 4.5) -- each placed at a
  random word where it fits, until the budget is spent.
``ngram``
  ALBERT: n-grams of n <= 3 whole words with P(n) proportional to 1/n
  (6/11, 3/11, 2/11), placed the same way.

Span and n-gram placement (shared): a length n is drawn, and the unit starts
at a word chosen uniformly among those where n consecutive words fit: inside
one segment (never across ``[SEP]``), not overlapping an earlier unit, and
with no more word pieces than the budget has left. If no such place exists --
typically for the last unit of an instance, which would overshoot the budget
-- the length is reduced one word at a time until one does; units never cut a
word, so masking stops when not even a single remaining word fits. Units thus
keep the drawn length except when the budget or the room in the sequence
forbids it.

Word boundaries are given per token as ``word_starts`` (True where a token
begins a word). Without them they are read off the WordPiece ``##`` marks.

No TensorFlow here: this runs in the data-generation worker processes.
"""

import abc
import bisect
import collections
import logging
import warnings

from data import tokenization
from data.pretraining import fast_random

SPECIAL_TOKENS = frozenset((tokenization.CLS_TOKEN, tokenization.SEP_TOKEN))

MaskingResult = collections.namedtuple(
    "MaskingResult", ["tokens", "positions", "labels", "units"])
MaskingResult.__doc__ = """The outcome of masking one instance.

tokens: the corrupted tokens; positions: the predicted positions, sorted;
labels: the original tokens at those positions; units: the chosen units
(lists of positions), in the order they were chosen.
"""


def num_to_predict(num_tokens, masked_lm_prob, max_predictions_per_seq):
    """The masked-LM budget of an instance of `num_tokens` tokens."""
    return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def wordpiece_word_starts(tokens):
    """Word starts read off WordPiece: a ``##`` piece continues a word."""
    return [not token.startswith("##") for token in tokens]


def word_units(tokens, word_starts=None, split_at_special=False):
    """Groups the maskable positions of `tokens` into words.

    Args:
      tokens: the instance's tokens, with ``[CLS]``/``[SEP]``.
      word_starts: per token, True where a word begins; None reads them off
        the ``##`` marks.
      split_at_special: if False (Google's rule, kept for exact
        compatibility) a continuation right after ``[SEP]`` -- left there when
        truncation cut a word -- joins the last word before it; if True it
        starts a unit of its own, so no unit crosses a special token.

    Returns:
      a list of units, each a list of ascending positions.
    """
    units = []
    after_special = True
    for i, token in enumerate(tokens):
        if token in SPECIAL_TOKENS:
            after_special = True
            continue
        starts = (word_starts[i] if word_starts is not None
                  else not token.startswith("##"))
        if units and not starts and not (split_at_special and after_special):
            units[-1].append(i)
        else:
            units.append([i])
        after_special = False
    return units


# ---------------------------------------------------------------------------
# Corruption (80% [MASK] / 10% keep / 10% random), shared by all strategies.
# ---------------------------------------------------------------------------

_MASK, _KEEP, _RANDOM = range(3)


def _draw_action(rng):
    # The same draws as Google's script: one for [MASK], a second for keep
    # versus random.
    if rng.random() < 0.8:
        return _MASK
    if rng.random() < 0.5:
        return _KEEP
    return _RANDOM


def _replacement(action, token, vocab_words, rng):
    if action == _MASK:
        return tokenization.MASK_TOKEN
    if action == _KEEP:
        return token
    return vocab_words[rng.randint(0, len(vocab_words) - 1)]


def apply_masking(tokens, units, vocab_words, rng, replace_per_unit=False):
    """Corrupts the positions of `units` and collects the masked-LM targets.

    Args:
      tokens: the original tokens.
      units: chosen units (lists of positions), in the order they were chosen;
        the random draws follow this order.
      vocab_words: the vocabulary, for random replacements.
      rng: a `random.Random`.
      replace_per_unit: draw 80/10/10 once per unit instead of per position.

    Returns:
      a `MaskingResult`.
    """
    output = list(tokens)
    positions = []
    if replace_per_unit:
        for unit in units:
            action = _draw_action(rng)
            for index in unit:
                output[index] = _replacement(action, tokens[index], vocab_words, rng)
            positions.extend(unit)
    else:
        # _replacement(_draw_action(rng), ...) per position, inlined (the
        # same draws in the same order): this runs for every masked token.
        draw = rng.random
        last_word = len(vocab_words) - 1
        mask = tokenization.MASK_TOKEN
        for unit in units:
            for index in unit:
                if draw() < 0.8:
                    output[index] = mask
                elif draw() >= 0.5:
                    output[index] = vocab_words[rng.randint(0, last_word)]
            positions.extend(unit)
    positions.sort()
    return MaskingResult(tokens=output, positions=positions,
                         labels=[tokens[i] for i in positions],
                         # The strategies' units are fresh lists: no copy.
                         units=list(units))


def _mask_tokens(tokens, budget, vocab_words, rng):
    """Google's token masking in one function: ``TokenMasking.select`` then
    ``apply_masking`` per position, the same draws in the same order
    (the default recipe runs this for every instance)."""
    chosen = maskable_positions(tokens)
    fast_random.shuffle(rng, chosen)
    del chosen[budget:]
    output = list(tokens)
    draw = rng.random
    last_word = len(vocab_words) - 1
    mask = tokenization.MASK_TOKEN
    for index in chosen:
        if draw() < 0.8:
            output[index] = mask
        elif draw() >= 0.5:
            output[index] = vocab_words[rng.randint(0, last_word)]
    positions = sorted(chosen)
    return MaskingResult(tokens=output, positions=positions,
                         labels=[tokens[i] for i in positions],
                         units=[[i] for i in chosen])


def maskable_positions(tokens):
    """Positions of `tokens` other than ``[CLS]``/``[SEP]``, ascending.

    The special tokens are found with `list.index` (a scan in C): an
    instance holds only three of them, and this runs for every instance.
    """
    specials = []
    for special in SPECIAL_TOKENS:
        start = 0
        try:
            while True:
                start = tokens.index(special, start) + 1
                specials.append(start - 1)
        except ValueError:
            pass
    if not specials:
        return list(range(len(tokens)))
    specials.sort()
    positions = []
    previous = 0
    for special in specials:
        positions.extend(range(previous, special))
        previous = special + 1
    positions.extend(range(previous, len(tokens)))
    return positions


# ---------------------------------------------------------------------------
# Strategies: which units to predict.
# ---------------------------------------------------------------------------

class MaskingStrategy(abc.ABC):
    """Chooses the units to predict; see the module docstring for the rules.

    Subclasses set `name`, `replace_per_unit_default` and `option_names` (the
    constructor arguments `create_masking_strategy` passes on) and implement
    `select`.
    """

    name = None
    replace_per_unit_default = False
    option_names = ()

    @abc.abstractmethod
    def select(self, tokens, word_starts, budget, rng):
        """Returns the chosen units (lists of positions) in the order chosen.

        Args:
          tokens: the instance's tokens, with ``[CLS]``/``[SEP]``.
          word_starts: per token, True where a word begins, or None (read
            off the ``##`` marks).
          budget: the most positions to choose (`num_to_predict`).
          rng: a `random.Random`; all randomness comes from it.
        """

    def __repr__(self):
        args = ", ".join("%s=%r" % (name, getattr(self, name)) for name in self.option_names)
        return "%s(%s)" % (type(self).__name__, args)


class TokenMasking(MaskingStrategy):
    """Google's per-WordPiece masking: every maskable token is a unit."""

    name = "token"

    def select(self, tokens, word_starts, budget, rng):
        # Google shuffles one-position units; shuffling the positions
        # themselves makes the same draws and the same order.
        positions = maskable_positions(tokens)
        fast_random.shuffle(rng, positions)
        return [[i] for i in positions[:budget]]


class WholeWordMasking(MaskingStrategy):
    """Google's whole-word masking, with optional external word boundaries.

    Words are shuffled and taken in turn; a word that would overshoot the
    budget is skipped (not cut), so an instance may end a little short.
    """

    name = "whole_word"

    def select(self, tokens, word_starts, budget, rng):
        units = word_units(tokens, word_starts)
        fast_random.shuffle(rng, units)
        chosen = []
        count = 0
        for unit in units:
            if count >= budget:
                break
            if count + len(unit) > budget:
                continue
            chosen.append(unit)
            count += len(unit)
        return chosen


def _cumulative(weights):
    total = 0.0
    cumulative = []
    for weight in weights:
        total += weight
        cumulative.append(total)
    return cumulative


class _ContiguousWordMasking(MaskingStrategy):
    """Masks runs of consecutive whole words whose length `sample_length` draws.

    Placement: see the module docstring.
    """

    # Subclasses fill these in their constructor.
    lengths = ()
    length_probabilities = ()
    _RANDOM_TRIES = 8

    def _set_length_weights(self, weights):
        total = float(sum(weights))
        self.lengths = tuple(range(1, len(weights) + 1))
        self.length_probabilities = tuple(w / total for w in weights)
        self._cumulative = _cumulative(self.length_probabilities)

    def mean_length(self):
        """Mean of the length distribution, in words."""
        return sum(n * p for n, p in zip(self.lengths, self.length_probabilities))

    def sample_length(self, rng):
        index = bisect.bisect_right(self._cumulative, rng.random() * self._cumulative[-1])
        return self.lengths[min(index, len(self.lengths) - 1)]

    def select(self, tokens, word_starts, budget, rng):
        words = word_units(tokens, word_starts, split_at_special=True)
        num_words = len(words)
        if not num_words:
            return []
        # Consecutive words belong to one segment when their positions touch
        # (nothing, in particular no [SEP], lies between them).
        segment = [0] * num_words
        for k in range(1, num_words):
            segment[k] = segment[k - 1] + (words[k][0] != words[k - 1][-1] + 1)
        size_prefix = [0]
        for word in words:
            size_prefix.append(size_prefix[-1] + len(word))
        covered = [False] * num_words
        chosen = []
        remaining = budget

        def fits(start, length):
            end = start + length
            return (end <= num_words
                    and segment[start] == segment[end - 1]
                    and size_prefix[end] - size_prefix[start] <= remaining
                    and not any(covered[start:end]))

        while remaining > 0:
            length = self.sample_length(rng)
            # A uniform start among the words where the unit fits: a few
            # random tries (enough while the sequence is mostly free), then
            # all candidates, shortening the unit until some place fits.
            start = None
            for _ in range(self._RANDOM_TRIES):
                candidate = rng.randrange(num_words)
                if fits(candidate, length):
                    start = candidate
                    break
            while start is None and length >= 1:
                starts = [k for k in range(num_words - length + 1) if fits(k, length)]
                if starts:
                    start = starts[rng.randrange(len(starts))]
                else:
                    length -= 1
            if start is None:
                break
            unit = []
            for k in range(start, start + length):
                covered[k] = True
                unit.extend(words[k])
            chosen.append(unit)
            remaining -= len(unit)
        return chosen


class SpanMasking(_ContiguousWordMasking):
    """SpanBERT span masking.

    Span lengths (in words) follow Geometric(`geometric_p`) restricted to
    1..`max_span_length` and renormalised; for p=0.2 and 10 words the mean is
    3.8 words. The 80/10/10 corruption is decided per span by default.
    """

    name = "span"
    replace_per_unit_default = True
    option_names = ("geometric_p", "max_span_length")

    def __init__(self, geometric_p=0.2, max_span_length=10):
        if not 0.0 < geometric_p <= 1.0:
            raise ValueError("span_geometric_p must be in (0, 1], got %r" % (geometric_p,))
        if max_span_length < 1:
            raise ValueError("max_span_length must be >= 1, got %r" % (max_span_length,))
        self.geometric_p = geometric_p
        self.max_span_length = int(max_span_length)
        self._set_length_weights([geometric_p * (1.0 - geometric_p) ** (n - 1)
                                  for n in range(1, self.max_span_length + 1)])


class NgramMasking(_ContiguousWordMasking):
    """ALBERT n-gram masking: n <= `max_ngram` words, P(n) proportional to 1/n."""

    name = "ngram"
    option_names = ("max_ngram",)

    def __init__(self, max_ngram=3):
        if max_ngram < 1:
            raise ValueError("max_ngram must be >= 1, got %r" % (max_ngram,))
        self.max_ngram = int(max_ngram)
        self._set_length_weights([1.0 / n for n in range(1, self.max_ngram + 1)])


class UnilmMasking(_ContiguousWordMasking):
    """UNILM's cloze: whole words 80% of the time, else a bigram or a trigram.

    Lengths in words: 1 with probability 0.8, 2 and 3 with 0.1 each (the
    paper's "20% of the time a bigram or a trigram", split evenly).
    """

    name = "unilm"
    option_names = ()

    def __init__(self):
        self._set_length_weights([0.8, 0.1, 0.1])


MASKING_STRATEGIES = collections.OrderedDict([
    ("token", TokenMasking),
    ("whole_word", WholeWordMasking),
    ("span", SpanMasking),
    ("ngram", NgramMasking),
    ("unilm", UnilmMasking),
])

# Strategies whose units are words (and so use word boundaries).
WORD_LEVEL_STRATEGIES = frozenset(("whole_word", "span", "ngram", "unilm"))


def create_masking_strategy(name, **options):
    """Builds the strategy registered as `name`.

    `options` may hold the options of every strategy (for example
    ``geometric_p``, ``max_span_length``, ``max_ngram``); each strategy takes
    those it knows and ignores the rest, so one set of options configures any
    of them.
    """
    if name not in MASKING_STRATEGIES:
        raise ValueError("Unknown masking strategy %r; choose one of: %s"
                         % (name, ", ".join(MASKING_STRATEGIES)))
    cls = MASKING_STRATEGIES[name]
    return cls(**{key: options[key] for key in cls.option_names if key in options})


class Masker(object):
    """A strategy plus the shared budget and corruption rules.

    >>> masker = Masker(create_masking_strategy("span"), 0.15, 20, vocab_words)
    >>> result = masker(tokens, rng)            # a MaskingResult
    """

    def __init__(self, strategy, masked_lm_prob, max_predictions_per_seq, vocab_words,
                 replace_per_unit=None):
        if not 0.0 < masked_lm_prob < 1.0:
            raise ValueError("masked_lm_prob must be in (0, 1), got %r" % (masked_lm_prob,))
        if max_predictions_per_seq < 1:
            raise ValueError("max_predictions_per_seq must be >= 1, got %r"
                             % (max_predictions_per_seq,))
        self.strategy = strategy
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.vocab_words = vocab_words
        self.replace_per_unit = (strategy.replace_per_unit_default
                                 if replace_per_unit is None else bool(replace_per_unit))

    def __call__(self, tokens, rng, word_starts=None):
        """Masks one instance; `word_starts` as in `MaskingStrategy.select`."""
        budget = num_to_predict(len(tokens), self.masked_lm_prob,
                                self.max_predictions_per_seq)
        if type(self.strategy) is TokenMasking and not self.replace_per_unit:
            return _mask_tokens(tokens, budget, self.vocab_words, rng)
        units = self.strategy.select(tokens, word_starts, budget, rng)
        return apply_masking(tokens, units, self.vocab_words, rng, self.replace_per_unit)


def build_masker(name, masked_lm_prob, max_predictions_per_seq, vocab_words,
                 replace_per_unit=None, **strategy_options):
    """`Masker` for the strategy registered as `name` (see `create_masking_strategy`)."""
    return Masker(create_masking_strategy(name, **strategy_options), masked_lm_prob,
                  max_predictions_per_seq, vocab_words, replace_per_unit)


# ---------------------------------------------------------------------------
# Word boundaries for Chinese: jieba segmentation aligned to the tokens.
# ---------------------------------------------------------------------------

_JIEBA = None


def _load_jieba():
    """Imports and initialises jieba once per process, without its chatter."""
    global _JIEBA
    if _JIEBA is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pkg_resources deprecation notes
            import jieba  # pylint: disable=g-import-not-at-top
        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        _JIEBA = jieba
    return _JIEBA


class ChineseWordSegmenter(object):
    """Segments text into words with jieba's default dictionary (deterministic)."""

    def __init__(self):
        self._jieba = _load_jieba()

    def __call__(self, text):
        return self._jieba.lcut(text)


def tokenize_with_word_starts(tokenizer, text, segment):
    """Tokenizes `text` and marks where words begin, using a word segmenter.

    The tokens are exactly ``tokenizer.tokenize(text)``. Word starts follow
    the ``##`` marks, except that consecutive CJK characters that `segment`
    puts into one word form one word (their tokens stay single characters).
    Non-CJK characters inside a segmented word ("T恤") keep their own
    WordPiece words.

    Args:
      tokenizer: a `tokenization.FullTokenizer` (its basic and WordPiece
        tokenizers are used, in the order `FullTokenizer.tokenize` uses them).
      text: one sentence, as read from the corpus.
      segment: callable text -> list of words whose concatenation is `text`
        (for example `ChineseWordSegmenter`).

    Returns:
      (tokens, word_starts).
    """
    # The tokenizer makes every CJK character a word of its own and never
    # drops one, so the k-th CJK token is the k-th CJK character of the text.
    cjk_word_ids = [index for index, word in enumerate(segment(text))
                    for char in word if tokenization.is_cjk_char(char)]
    basic_tokens = tokenizer.basic_tokenizer.tokenize(text)
    num_cjk = sum(1 for token in basic_tokens if tokenization.is_cjk_char(token))
    aligned = num_cjk == len(cjk_word_ids)
    tokens = []
    word_starts = []
    cjk_index = 0
    previous_word = None
    for basic_token in basic_tokens:
        pieces = tokenizer.wordpiece_tokenizer.tokenize(basic_token)
        if tokenization.is_cjk_char(basic_token):
            word = cjk_word_ids[cjk_index] if aligned else None
            cjk_index += 1
            for k, piece in enumerate(pieces):
                tokens.append(piece)
                word_starts.append(k == 0 and (word is None or word != previous_word))
            previous_word = word
        else:
            for k, piece in enumerate(pieces):
                tokens.append(piece)
                word_starts.append(k == 0)
            previous_word = None
    return tokens, word_starts
