"""Learns a WordPiece vocabulary (Google's layout), byte-level BPE (GPT-2) or a SentencePiece
model (XLNet) from corpus files.

    python run/create_vocab.py --input_file=data/sample/*.txt \
        --vocab_file=/tmp/vocab.txt --vocab_size=8000

    python run/create_vocab.py --vocab_type=byte_bpe \
        --input_file=data/sample/sample_en.txt,data/sample/sample_zh.txt \
        --vocab_file=/tmp/vocab.json --merges_file=/tmp/merges.txt --vocab_size=3000

    python run/create_vocab.py --model=sentencepiece \
        --input_file=data/sample/sample_en.txt,data/sample/sample_zh.txt \
        --vocab_file=data/sample/xlnet/spiece.model --vocab_size=2000
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags
from absl import logging

from data import atomic
from data import corpus
from data import multilingual
from data import vocab_learning

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files/globs).")
flags.DEFINE_string("vocab_file", None, "Where to write the vocabulary.")
flags.DEFINE_integer("vocab_size", 8000, "Target vocabulary size, reserved tokens included.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased model).")
flags.DEFINE_integer("num_unused", 99, "Number of [unusedN] slots after [PAD].")
flags.DEFINE_integer("min_cjk_count", 1,
                     "CJK characters seen fewer times are left out of the vocabulary.")
flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size for non-CJK text.")
flags.DEFINE_integer("lower_thresh", 1, "Lowest piece frequency the learner may accept.")
flags.DEFINE_float("language_sampling_alpha", None,
                   "Multilingual WordPiece: each comma-separated --input_file pattern is one "
                   "language, whose word counts are scaled by q_i/p_i with q_i = p_i^alpha / "
                   "sum p_j^alpha (mBERT: 0.7); unset = counts as they are.")
flags.DEFINE_string("languages", None,
                    "Names of the --input_file patterns' languages, in order (e.g. en,zh); "
                    "default: each pattern's first file name.")
flags.DEFINE_enum("vocab_type", "wordpiece", ["wordpiece", "byte_bpe"],
                  "wordpiece: Google's vocab.txt. byte_bpe: GPT-2's vocab.json + merges.txt "
                  "(needs --merges_file).")
flags.DEFINE_string("merges_file", None, "Where to write merges.txt (--vocab_type=byte_bpe).")
flags.DEFINE_integer("min_frequency", 2,
                     "byte_bpe: pairs seen fewer times are never merged.")
flags.DEFINE_enum("model", None, ["wordpiece", "byte_bpe", "sentencepiece"],
                  "What to learn; overrides --vocab_type. sentencepiece: a SentencePiece "
                  "unigram model with XLNet's special symbols, written to --vocab_file "
                  "(spiece.model).")
flags.DEFINE_float("character_coverage", 0.9995,
                   "sentencepiece: share of the characters seen that get a piece of their own.")


def sentencepiece_main(files):
    stats = corpus.ReadStats()
    model = vocab_learning.learn_sentencepiece(
        vocab_learning.sentencepiece_training_lines(files, stats), FLAGS.vocab_size,
        character_coverage=FLAGS.character_coverage)
    vocab_learning.write_sentencepiece(model, FLAGS.vocab_file)
    print("Read %d files; wrote a SentencePiece model of %d pieces to %s"
          % (len(files), FLAGS.vocab_size, FLAGS.vocab_file))
    for line in stats.describe():
        logging.warning("%s", line)


def byte_bpe_main(files):
    if not FLAGS.merges_file:
        raise ValueError("--merges_file is required with --vocab_type=byte_bpe")
    stats = corpus.ReadStats()
    vocab, merges = vocab_learning.learn_byte_bpe(
        vocab_learning.byte_bpe_training_lines(files, stats), FLAGS.vocab_size,
        min_frequency=FLAGS.min_frequency)
    vocab_learning.write_byte_bpe(vocab, merges, FLAGS.vocab_file, FLAGS.merges_file)
    print("Read %d files; wrote %d tokens to %s and %d merges to %s"
          % (len(files), len(vocab), FLAGS.vocab_file, len(merges), FLAGS.merges_file))
    for line in stats.describe():
        logging.warning("%s", line)


def main(_):
    files = corpus.expand_file_patterns(FLAGS.input_file)
    kind = FLAGS.model or FLAGS.vocab_type
    outputs = [("--vocab_file", FLAGS.vocab_file)]
    if kind == "byte_bpe" and FLAGS.merges_file:
        outputs.append(("--merges_file", FLAGS.merges_file))
    # A vocabulary written over the corpus would destroy it.
    atomic.check_outputs(outputs, [("--input_file", path) for path in files])
    if kind == "byte_bpe":
        byte_bpe_main(files)
        return
    if kind == "sentencepiece":
        sentencepiece_main(files)
        return
    stats = corpus.ReadStats()
    if FLAGS.language_sampling_alpha is not None:
        grouped = multilingual.files_by_language(FLAGS.input_file, FLAGS.languages)
        counts, report = multilingual.reweight_word_counts(
            {language: vocab_learning.count_words(group, FLAGS.do_lower_case, stats)
             for language, group in grouped.items()}, FLAGS.language_sampling_alpha)
        for language in sorted(report["q"]):
            print("%s: %d words, p=%.3f, q=%.3f (counts x%.2f)" % (
                language, report["sizes"][language], report["p"][language],
                report["q"][language], report["factors"][language]))
    else:
        counts = vocab_learning.count_words(files, FLAGS.do_lower_case, stats)
    if not counts:
        raise corpus.CorpusError("No words found in %s." % ", ".join(files))
    tokens = vocab_learning.learn_vocab(
        counts, FLAGS.vocab_size, num_unused=FLAGS.num_unused,
        min_cjk_count=FLAGS.min_cjk_count, max_unique_chars=FLAGS.max_unique_chars,
        lower_thresh=FLAGS.lower_thresh)
    vocab_learning.write_vocab(tokens, FLAGS.vocab_file)
    print("Read %d files, %d distinct words; wrote %d tokens to %s"
          % (len(files), len(counts), len(tokens), FLAGS.vocab_file))
    for line in stats.describe():
        logging.warning("%s", line)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "vocab_file"])
