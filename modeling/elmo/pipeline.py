"""ELMo's input: raw text, one sentence per example, as word ids and character ids ("elmo").

Inputs are plain-text files in the corpus format (one sentence per line, a
blank line between documents). Each non-blank line is split into words
(`data.word_vocab`: `BasicTokenizer`, CJK characters one by one)
and becomes one example

    words        <S> w_1 .. w_n </S>     cut to `max_seq_length` words
    input_ids    [max_seq_length]        word ids (unknown words: <UNK>)
    input_mask   [max_seq_length]        1 for a word, 0 for padding (at the end)
    char_ids     [max_seq_length, max_characters_per_token]
                                         each word's character ids, 0 for padding

(bilm-tf streams sentences into fixed windows; one sentence per example is
the same language model without context across sentences, and makes every
held-out sentence one evaluation example.)

Reading and tokenizing run in Python (`tf.data.Dataset.from_generator`,
streamed file by file; a word's character ids are computed once), batching
and shuffling in `tf.data`. Training reads the files in a seeded shuffled
order, forever, through a shuffle buffer; evaluation and the baselines read
every sentence once, in file order. With several input pipelines each takes
every k-th sentence.

Recipe `data` option: `max_characters_per_token` (50, ELMo's).
"""

import random

import numpy as np
import tensorflow as tf

from data import corpus as corpus_lib
from data import tokenization
from data import word_vocab as vocab_lib
from data.pretraining.generated_input import generated_input_fn
from modeling import registry
from modeling.recipes.pipelines.base import RawTextPipeline
from modeling.recipes.pipelines.base import WordPipeline

__all__ = ["ElmoPipeline", "sentence_features"]


class _Encoder:
    """Words -> (word ids, char ids), with a cache of each word's character ids."""

    def __init__(self, vocab, max_characters_per_token):
        self.vocab = vocab
        self.max_chars = max_characters_per_token
        self._chars = {}

    def chars(self, word):
        ids = self._chars.get(word)
        if ids is None:
            ids = vocab_lib.word_char_ids(word, self.max_chars)
            if len(self._chars) < 200000:
                self._chars[word] = ids
        return ids


def sentence_features(words, vocab, max_seq_length, max_characters_per_token=50,
                      encoder=None):
    """The features of one sentence (a list of words, without <S> and </S>) as NumPy arrays."""
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3 (<S>, a word, </S>), got %d"
                         % max_seq_length)
    encoder = encoder or _Encoder(vocab, max_characters_per_token)
    words = ([vocab_lib.BOS] + list(words) + [vocab_lib.EOS])[:max_seq_length]
    n = len(words)
    input_ids = np.zeros([max_seq_length], np.int32)
    input_mask = np.zeros([max_seq_length], np.int32)
    char_ids = np.zeros([max_seq_length, max_characters_per_token], np.int32)
    input_ids[:n] = vocab.ids(words)
    input_mask[:n] = 1
    char_ids[:n] = [encoder.chars(w) for w in words]
    return {"input_ids": input_ids, "input_mask": input_mask, "char_ids": char_ids}


@registry.pipelines.register("elmo")
class ElmoPipeline(RawTextPipeline, WordPipeline):
    """Raw text -> ELMo's sentences (see the module docstring)."""

    data_options = ("max_characters_per_token",)
    pipeline_name = "elmo"

    demo_vocab_files = {"vocab_file": "data/sample/elmo/vocab.txt"}

    def __init__(self, recipe_data, options):
        super().__init__(recipe_data, options)
        value = self.data.get("max_characters_per_token", 50)
        if isinstance(value, bool) or not isinstance(value, int) or value < 3:
            raise ValueError("the recipe's data option max_characters_per_token must be an "
                             "integer >= 3 (ELMo's is 50), got %r" % (value,))
        self.max_characters_per_token = value

    def _documents(self, files, shuffle_seed=None):
        """Yields each document as its sentences' words (blank lines and wordless ones
        left out); files in a seeded shuffled order when `shuffle_seed` is given."""
        tokenizer = tokenization.BasicTokenizer(self.options.do_lower_case)
        files = list(files)
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(files)
        stats = corpus_lib.ReadStats()
        for document in corpus_lib.iter_documents(files, stats):
            sentences = []
            for lineno, raw in document.lines:
                words = tokenizer.tokenize(
                    corpus_lib.decode_line(raw, document.path, lineno, stats))
                if words:
                    sentences.append(words)
            if sentences:
                yield sentences

    def _sentences(self, files, shuffle_seed):
        """Yields each sentence's words; files in a seeded shuffled order when training."""
        for sentences in self._documents(files, shuffle_seed):
            yield from sentences

    def input_fn(self, inputs, is_training, batch_size):
        files = corpus_lib.expand_file_patterns(inputs)
        vocab = self.vocabulary()
        max_len = self.options.max_seq_length
        max_chars = self.max_characters_per_token
        encoder = _Encoder(vocab, max_chars)
        signature = {
            "input_ids": tf.TensorSpec([max_len], tf.int32),
            "input_mask": tf.TensorSpec([max_len], tf.int32),
            "char_ids": tf.TensorSpec([max_len, max_chars], tf.int32),
        }
        return generated_input_fn(
            lambda shuffle_seed: self._sentences(files, shuffle_seed),
            lambda words: sentence_features(words, vocab, max_len, max_chars, encoder),
            signature, is_training, batch_size, self.options.seed)
