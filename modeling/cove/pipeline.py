"""CoVe's input pipeline ("cove"): parallel text, `source<TAB>target` per line.

Each side is split into words by `data.tokenization.BasicTokenizer`
(punctuation split off, every CJK character a word, optional lower casing),
so English sentences become words and Chinese sentences characters, and
mapped to ids by one word vocabulary (`--vocab_file`: ELMo's format,
`data.word_vocab`: `<S> </S> <UNK>`, then words; the bundled
`data/sample/elmo/vocab.txt` holds the bundled corpus's English words and
Chinese characters, so it serves both sides). One example per line:

    input_ids    [max_seq_length] int32   <S> source words </S>, cut, 0-padded
    input_mask   [max_seq_length] int32   1 for a word, 0 for padding
    target_ids   [max_seq_length] int32   <S> target words </S>, cut, 0-padded
    target_mask  [max_seq_length] int32

A line that is not `source<TAB>target` with two non-empty sides stops the
run with one line naming the file and line (`ParallelFileError`); blank lines
are skipped.

The demo job (`run_pretraining.py --recipe=cove`, no input flags) reads the
bundled `data/sample/parallel_en_zh.tsv` (English and Chinese, line-aligned)
and holds out every tenth pair (the 10th, 20th, ...), written to
`<output_dir>/data/{train,eval}.tsv`. Reading runs in Python
(`tf.data.Dataset.from_generator`); training reads the files in a seeded
shuffled order, forever, through a shuffle buffer; evaluation and the
baseline read every pair once, in file order. With several input pipelines
each takes every k-th pair.
"""

import os
import random

import numpy as np
import tensorflow as tf

from data import atomic
from data import corpus as corpus_lib
from data import tokenization
from data import word_vocab as vocab_lib
from data.parallel_text import EVAL_EVERY
from data.parallel_text import ParallelFileError
from data.parallel_text import read_pairs
from data.parallel_text import split_pairs
from data.pretraining.generated_input import generated_input_fn
from modeling import registry
from modeling.recipes.pipelines.base import WordPipeline

__all__ = ["CovePipeline", "ParallelFileError", "pair_features", "read_pairs", "split_pairs"]

SAMPLE_PARALLEL_FILE = "data/sample/parallel_en_zh.tsv"


def _ids(words, vocab, max_seq_length):
    words = ([vocab_lib.BOS] + list(words) + [vocab_lib.EOS])[:max_seq_length]
    ids = np.zeros([max_seq_length], np.int32)
    mask = np.zeros([max_seq_length], np.int32)
    ids[:len(words)] = vocab.ids(words)
    mask[:len(words)] = 1
    return ids, mask


def pair_features(source_words, target_words, vocab, max_seq_length):
    """The features of one pair (lists of words, without <S> and </S>) as NumPy arrays."""
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3 (<S>, a word, </S>), got %d"
                         % max_seq_length)
    input_ids, input_mask = _ids(source_words, vocab, max_seq_length)
    target_ids, target_mask = _ids(target_words, vocab, max_seq_length)
    return {"input_ids": input_ids, "input_mask": input_mask,
            "target_ids": target_ids, "target_mask": target_mask}


@registry.pipelines.register("cove")
class CovePipeline(WordPipeline):
    """Parallel text -> CoVe's translation examples (see the module docstring)."""

    data_options = ()
    pipeline_name = "cove"

    demo_vocab_files = {"vocab_file": "data/sample/elmo/vocab.txt"}

    # The demo reads its own bundled data (line-aligned pairs), not the
    # sample corpus split by documents (`demo_inputs_from_files`).
    demo_data_files = (SAMPLE_PARALLEL_FILE,)

    def demo_inputs_from_files(self, files, work_dir):
        """Every tenth pair of `files` held out: `([train.tsv], [eval.tsv])` in `work_dir`."""
        pairs = []
        for path in files:
            pairs.extend((source, target) for _, source, target in read_pairs(path))
        train, held_out = split_pairs(pairs)
        if not held_out:
            raise ParallelFileError("%s: %d pairs are too few to hold out every %d-th"
                                    % (",".join(files), len(pairs), EVAL_EVERY))
        outputs = []
        for name, part in (("train.tsv", train), ("eval.tsv", held_out)):
            path = os.path.join(work_dir, name)
            atomic.write_text(path, "".join("%s\t%s\n" % pair for pair in part))
            outputs.append([path])
        return outputs[0], outputs[1]

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        # The demo job calls demo_inputs_from_files (demo_data_files is set).
        raise ValueError("the cove pipeline reads parallel text (source<TAB>target), not "
                         "the sample corpus's plain text")

    def check_inputs(self, inputs):
        """Every line of every file is `source<TAB>target`; at least one pair."""
        files = corpus_lib.expand_file_patterns(inputs)
        self.check_vocab_files()
        count = 0
        for path in files:
            count += sum(1 for _ in read_pairs(path))
        if not count:
            raise ParallelFileError("%s: no sentence pairs; expected source<TAB>target lines"
                                    % ",".join(files))

    def _pairs(self, files, shuffle_seed):
        tokenizer = tokenization.BasicTokenizer(self.options.do_lower_case)
        files = list(files)
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(files)
        for path in files:
            for _, source, target in read_pairs(path):
                yield tokenizer.tokenize(source), tokenizer.tokenize(target)

    def input_fn(self, inputs, is_training, batch_size):
        files = corpus_lib.expand_file_patterns(inputs)
        vocab = self.vocabulary()
        max_len = self.options.max_seq_length
        spec = tf.TensorSpec([max_len], tf.int32)
        signature = {"input_ids": spec, "input_mask": spec,
                     "target_ids": spec, "target_mask": spec}
        return generated_input_fn(
            lambda shuffle_seed: self._pairs(files, shuffle_seed),
            lambda pair: pair_features(pair[0], pair[1], vocab, max_len),
            signature, is_training, batch_size, self.options.seed)
