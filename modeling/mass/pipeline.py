"""MASS's input: raw text, sentence by sentence, one masked fragment per sentence ("mass").

Everything happens in `tf.data`: text files in the corpus format (one
sentence per line; blank lines between documents are skipped) are read
line by line, tokenized in blocks by the in-graph WordPiece tokenizer
(`data.tokenizers.wordpiece.GraphTokenizer`, `FullTokenizer`'s ids), and
every sentence x of m tokens (cut to `max_seq_length - 2`) becomes one
example:

    k         = min(m, max(1, round(ratio * m)))     fragment length (round half
                                                     to even), ratio =
                                                     `mass_fragment_ratio`
    u         uniform in [0, m - k]                  fragment start in x
    encoder   [CLS] x_0 .. x_{u-1} r_u .. r_{u+k-1} x_{u+k} .. x_{m-1} [SEP]
              r_i: [MASK] with probability 0.8, a token drawn uniformly from
              the whole vocabulary with 0.1, x_i itself with 0.1 (each
              position on its own)
    decoder   inputs    [MASK] x_u .. x_{u+k-2}      (the fragment shifted right)
              positions u+1 .. u+k                   (the fragment's own positions
                                                     in the encoder's sequence)
              targets   x_u .. x_{u+k-1}

(Song et al. 2019: the decoder is fed only the fragment; the other
positions would hold [MASK] and carry nothing.) The 80/10/10 replacement of
the encoder's fragment is what the authors' code does (microsoft/MASS,
`mask_word` with `--word_mask_keep_rand 0.8,0.1,0.1`, the random token
drawn from the whole vocabulary), as BERT's masked LM does: the encoder
cannot learn that a [MASK]-free position is never predicted. The decoder
side does not change: it always reads and predicts the original fragment.
`fragment_replacement` names the scheme (`FRAGMENT_REPLACEMENTS`):

    "80/10/10"  the paper's implementation (default)
    "mask"      every fragment token becomes [MASK] (this module's earlier
                behaviour)

With "mask", the two ends of the ratio are exactly the paper's special
cases: with k = 1 the decoder's only input is a [MASK] and it predicts the
one masked token from the encoder alone -- BERT's masked LM; with k = m the
encoder sees only [MASK]s and the decoder predicts the sentence left to
right from its own prefix -- a language model (tests/modeling/mass/test_mass.py checks
both). With "80/10/10" they are so up to the 20% of fragment tokens that the
encoder sees kept or replaced.

Language ids (`segment_ids`, `decoder_segment_ids`; the network's
language embeddings): 1 for a sentence holding a CJK ideograph, 0
otherwise -- the bundled corpus's Chinese and English halves.

Fragments and their replacements are drawn with stateless random ops
seeded by (seed, input pipeline, example number), so two datasets built
with the same seed give the same batches (the evaluation and its unigram
baseline read the same fragments), while a repeated training set gets new
fragments every epoch.

Features (int32 unless noted), `L = max_seq_length`,
`D = max(1, round(ratio * (L - 2)))`:
    input_ids, input_mask, segment_ids                          [batch, L]
    decoder_input_ids, decoder_position_ids, decoder_input_mask,
    decoder_segment_ids, decoder_target_ids                     [batch, D]
    decoder_target_weights (float32)                            [batch, D]
"""

import numbers

import tensorflow as tf

from data import corpus as corpus_lib
from data import tokenization
from data.pretraining import text_windows
from data.tokenizers import wordpiece
from modeling import registry
from modeling.recipes.pipelines.base import RawTextPipeline

__all__ = ["DEFAULT_FRAGMENT_RATIO", "DEFAULT_FRAGMENT_REPLACEMENT", "FRAGMENT_REPLACEMENTS",
           "MassPipeline", "check_fragment_replacement", "decoder_length", "mass_dataset",
           "special_ids"]

DEFAULT_FRAGMENT_RATIO = 0.5

# What becomes of each encoder position inside the fragment: probabilities
# of (the [MASK] token, a uniformly random vocabulary token, the token kept).
FRAGMENT_REPLACEMENTS = {"80/10/10": (0.8, 0.1, 0.1), "mask": (1.0, 0.0, 0.0)}
DEFAULT_FRAGMENT_REPLACEMENT = "80/10/10"

# A sentence holding one of these is Chinese (language id 1).
_CJK_LINE = ".*[%s].*" % "".join(r"\x{%X}-\x{%X}" % r for r in tokenization.CJK_RANGES)

_no_autograph = tf.autograph.experimental.do_not_convert


def check_fragment_ratio(ratio, where="mass_fragment_ratio"):
    """`ratio` as a float in (0, 1], or a `ValueError` naming `where`."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ValueError("%s must be a number in (0, 1] (the masked share of each sentence; "
                         "0.5 in the MASS paper), got %r" % (where, ratio))
    return float(ratio)


def check_fragment_replacement(name, where="mass_fragment_replacement"):
    """`name`'s (mask, random, keep) probabilities, or a `ValueError` naming `where`."""
    if not isinstance(name, str) or name not in FRAGMENT_REPLACEMENTS:
        raise ValueError("%s must be one of %s (80/10/10: the MASS authors' code; mask: always "
                         "[MASK]), got %r" % (where, ", ".join(map(repr, FRAGMENT_REPLACEMENTS)),
                                              name))
    return FRAGMENT_REPLACEMENTS[name]


def decoder_length(max_seq_length, ratio):
    """`D`: the longest fragment of a sentence of at most `max_seq_length - 2` tokens."""
    # Python's round is half-to-even, as tf.round.
    return max(1, int(round(ratio * (max_seq_length - 2))))


def special_ids(vocab_file):
    """`{"cls", "sep", "mask"}` ids of a WordPiece vocabulary, or a `ValueError` naming it."""
    vocab = tokenization.load_vocab(vocab_file)
    ids = {}
    for key, token in (("cls", tokenization.CLS_TOKEN), ("sep", tokenization.SEP_TOKEN),
                       ("mask", tokenization.MASK_TOKEN)):
        if token not in vocab:
            raise ValueError("--vocab_file=%s has no %s token (MASS needs [CLS], [SEP] "
                             "and [MASK])" % (vocab_file, token))
        ids[key] = vocab[token]
    return ids


def _pad(x, length):
    x = tf.pad(x, [[0, length - tf.size(x)]])
    x.set_shape([length])
    return x


def make_example(ids, language, seed, max_seq_length, ratio, cls_id, sep_id, mask_id,
                 replacement=DEFAULT_FRAGMENT_REPLACEMENT, vocab_size=None):
    """The features of one sentence (see the module docstring).

    Args:
        ids: int32 `[m]` token ids, 1 <= m (cut to `max_seq_length - 2` here).
        language: int32 scalar language id.
        seed: int64 `[2]` stateless seed of this example.
        replacement: a name of `FRAGMENT_REPLACEMENTS`: what the encoder sees
            at the fragment's positions.
        vocab_size: the random tokens are drawn from [0, vocab_size); needed
            unless `replacement` is "mask".
    """
    p_mask, p_random, _ = check_fragment_replacement(replacement, "replacement")
    if p_random > 0 and (isinstance(vocab_size, bool)
                         or not isinstance(vocab_size, numbers.Integral) or vocab_size < 1):
        raise ValueError("vocab_size must be a positive integer for the %r fragment replacement "
                         "(its random tokens), got %r" % (replacement, vocab_size))
    dec_len = decoder_length(max_seq_length, ratio)
    ids = tf.cast(ids[:max_seq_length - 2], tf.int32)
    m = tf.size(ids)
    k = tf.cast(tf.round(ratio * tf.cast(m, tf.float64)), tf.int32)
    k = tf.clip_by_value(k, 1, tf.minimum(m, dec_len))
    start = tf.random.stateless_uniform([], seed=seed, minval=0, maxval=m - k + 1,
                                        dtype=tf.int32)
    index = tf.range(m)
    in_fragment = (index >= start) & (index < start + k)
    if p_mask == 1.0:
        encoder_tokens = tf.where(in_fragment, mask_id, ids)
    else:
        # Independent streams of the example's seed (the start keeps `seed`
        # itself, so the fragments do not depend on the replacement).
        choice = tf.random.stateless_uniform(
            [m], seed=tf.random.experimental.stateless_fold_in(seed, 1), dtype=tf.float32)
        random_tokens = tf.random.stateless_uniform(
            [m], seed=tf.random.experimental.stateless_fold_in(seed, 2), minval=0,
            maxval=vocab_size, dtype=tf.int32)
        replaced = tf.where(choice < p_mask, mask_id,
                            tf.where(choice < p_mask + p_random, random_tokens, ids))
        encoder_tokens = tf.where(in_fragment, replaced, ids)
    input_ids = tf.concat([[cls_id], encoder_tokens, [sep_id]], 0)
    fragment = ids[start:start + k]
    real = tf.ones([k], tf.int32)
    return {
        "input_ids": _pad(input_ids, max_seq_length),
        "input_mask": _pad(tf.ones([m + 2], tf.int32), max_seq_length),
        "segment_ids": _pad(tf.fill([m + 2], language), max_seq_length),
        "decoder_input_ids": _pad(tf.concat([[mask_id], fragment[:-1]], 0), dec_len),
        "decoder_position_ids": _pad(tf.range(start + 1, start + k + 1), dec_len),
        "decoder_input_mask": _pad(real, dec_len),
        "decoder_segment_ids": _pad(tf.fill([k], language), dec_len),
        "decoder_target_ids": _pad(fragment, dec_len),
        "decoder_target_weights": _pad(tf.ones([k], tf.float32), dec_len),
    }


def mass_dataset(input_patterns, vocab_file, do_lower_case, max_seq_length, batch_size,
                 fragment_ratio=DEFAULT_FRAGMENT_RATIO,
                 fragment_replacement=DEFAULT_FRAGMENT_REPLACEMENT, seed=None, is_training=True,
                 input_context=None, repeat=None, shuffle_buffer_size=2000,
                 lines_per_block=256, cycle_length=4,
                 max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES, tokenizer=None):
    """Batches of MASS features from raw text (see the module docstring).

    Args:
      input_patterns: comma-separated globs (or a list) of text files.
      vocab_file: WordPiece vocabulary with [CLS], [SEP] and [MASK].
      do_lower_case: as for `FullTokenizer`.
      max_seq_length: encoder length L (sentences are cut to L - 2 tokens).
      batch_size: global batch size (per replica with `input_context`).
      fragment_ratio: the masked share of each sentence, in (0, 1].
      fragment_replacement: "80/10/10" (the paper's implementation) or "mask"
        (every fragment token [MASK]); see the module docstring.
      seed: seeds file/sentence shuffling and the fragments; None draws one.
      is_training: shuffle; drop a last partial batch.
      input_context: a `tf.distribute.InputContext`, or None.
      repeat: read forever; defaults to `is_training`.
      shuffle_buffer_size: sentences in the shuffle buffer (training).
      lines_per_block: lines tokenized per tokenizer call.
      cycle_length: files read in parallel (training).
      max_line_bytes: longer lines are skipped, as `data.corpus` does.
      tokenizer: a `GraphTokenizer` to reuse.

    Returns:
      A `tf.data.Dataset` of feature dicts.
    """
    ratio = check_fragment_ratio(fragment_ratio)
    check_fragment_replacement(fragment_replacement)
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3, got %d" % max_seq_length)
    files, repeat, seed, batch_size = text_windows.read_settings(
        input_patterns, is_training, batch_size, repeat, seed, input_context)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    ids = special_ids(vocab_file)
    vocab_size = len(tokenization.load_vocab(vocab_file))
    if tokenizer is None:
        tokenizer = wordpiece.GraphTokenizer(vocab_file, do_lower_case)

    d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    if repeat:
        d = d.repeat()
    if is_training:
        d = d.shuffle(len(files), seed=seed)
        d = d.interleave(tf.data.TextLineDataset, cycle_length=min(cycle_length, len(files)),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        d = d.flat_map(tf.data.TextLineDataset)
    d = d.filter(lambda line: tf.logical_and(
        tf.strings.length(tf.strings.strip(line)) > 0,
        tf.strings.length(line) <= max_line_bytes))
    if num_pipelines > 1:
        d = d.shard(num_pipelines, pipeline_id)
    if is_training:
        d = d.shuffle(shuffle_buffer_size, seed=seed)

    @_no_autograph
    def tokenize_block(lines):
        language = tf.cast(tf.strings.regex_full_match(lines, _CJK_LINE), tf.int32)
        return tokenizer.tokenize(lines), language

    d = d.batch(lines_per_block).map(tokenize_block, num_parallel_calls=tf.data.AUTOTUNE)
    d = d.unbatch().filter(lambda tokens, language: tf.size(tokens) > 0)
    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    @_no_autograph
    def features(number, example):
        tokens, language = example
        example_seed = tf.random.experimental.stateless_fold_in(base_seed, number)
        return make_example(tokens, language, example_seed, max_seq_length, ratio,
                            ids["cls"], ids["sep"], ids["mask"],
                            replacement=fragment_replacement, vocab_size=vocab_size)

    d = d.enumerate().map(features, num_parallel_calls=tf.data.AUTOTUNE)
    d = d.batch(batch_size, drop_remainder=is_training)
    return d.prefetch(tf.data.AUTOTUNE)


@registry.pipelines.register("mass")
class MassPipeline(RawTextPipeline):
    """Raw text -> MASS examples in `tf.data` (see the module docstring).

    Recipe `data` options: `mass_fragment_ratio` (default 0.5) and
    `mass_fragment_replacement` ("80/10/10", the default, or "mask").
    """

    data_options = ("mass_fragment_ratio", "mass_fragment_replacement")

    def __init__(self, recipe_data, options):
        super().__init__(recipe_data, options)
        self.fragment_ratio = check_fragment_ratio(
            self.data.get("mass_fragment_ratio", DEFAULT_FRAGMENT_RATIO),
            "the recipe's data option mass_fragment_ratio")
        self.fragment_replacement = self.data.get("mass_fragment_replacement",
                                                  DEFAULT_FRAGMENT_REPLACEMENT)
        check_fragment_replacement(self.fragment_replacement,
                                   "the recipe's data option mass_fragment_replacement")

    def vocab_size(self):
        return len(tokenization.load_vocab(self.options.vocab_file))

    def input_fn(self, inputs, is_training, batch_size):
        options = self.options
        special_ids(options.vocab_file)  # a vocabulary without [MASK] fails here, by name
        tokenizer = wordpiece.GraphTokenizer(options.vocab_file, options.do_lower_case)

        def input_fn(input_context=None):
            return mass_dataset(inputs, options.vocab_file, options.do_lower_case,
                                options.max_seq_length, batch_size,
                                fragment_ratio=self.fragment_ratio,
                                fragment_replacement=self.fragment_replacement,
                                seed=options.seed,
                                is_training=is_training, input_context=input_context,
                                tokenizer=tokenizer)

        return input_fn
