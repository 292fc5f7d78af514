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

The flags are the fields of `data.vocab_learning.VocabSettings`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import logging

import common_flags
from data import atomic
from data import corpus
from data import multilingual
from data import vocab_learning

common_flags.define_job_flags(vocab_learning.VocabSettings)


def sentencepiece_main(settings, files):
    stats = corpus.ReadStats()
    model = vocab_learning.learn_sentencepiece(
        vocab_learning.sentencepiece_training_lines(files, stats), settings.vocab_size,
        character_coverage=settings.character_coverage)
    vocab_learning.write_sentencepiece(model, settings.vocab_file)
    print("Read %d files; wrote a SentencePiece model of %d pieces to %s"
          % (len(files), settings.vocab_size, settings.vocab_file))
    for line in stats.describe():
        logging.warning("%s", line)


def byte_bpe_main(settings, files):
    if not settings.merges_file:
        raise ValueError("--merges_file is required with --vocab_type=byte_bpe")
    stats = corpus.ReadStats()
    vocab, merges = vocab_learning.learn_byte_bpe(
        vocab_learning.byte_bpe_training_lines(files, stats), settings.vocab_size,
        min_frequency=settings.min_frequency)
    vocab_learning.write_byte_bpe(vocab, merges, settings.vocab_file, settings.merges_file)
    print("Read %d files; wrote %d tokens to %s and %d merges to %s"
          % (len(files), len(vocab), settings.vocab_file, len(merges), settings.merges_file))
    for line in stats.describe():
        logging.warning("%s", line)


def main(_):
    settings = common_flags.job_from_flags(vocab_learning.VocabSettings)
    files = corpus.expand_file_patterns(settings.input_file)
    kind = settings.kind
    outputs = [("--vocab_file", settings.vocab_file)]
    if kind == "byte_bpe" and settings.merges_file:
        outputs.append(("--merges_file", settings.merges_file))
    # A vocabulary written over the corpus would destroy it.
    atomic.check_outputs(outputs, [("--input_file", path) for path in files])
    if kind == "byte_bpe":
        byte_bpe_main(settings, files)
        return
    if kind == "sentencepiece":
        sentencepiece_main(settings, files)
        return
    stats = corpus.ReadStats()
    if settings.language_sampling_alpha is not None:
        grouped = multilingual.files_by_language(settings.input_file, settings.languages)
        counts, report = multilingual.reweight_word_counts(
            {language: vocab_learning.count_words(group, settings.do_lower_case, stats)
             for language, group in grouped.items()}, settings.language_sampling_alpha)
        for language in sorted(report["q"]):
            print("%s: %d words, p=%.3f, q=%.3f (counts x%.2f)" % (
                language, report["sizes"][language], report["p"][language],
                report["q"][language], report["factors"][language]))
    else:
        counts = vocab_learning.count_words(files, settings.do_lower_case, stats)
    if not counts:
        raise corpus.CorpusError("No words found in %s." % ", ".join(files))
    tokens = vocab_learning.learn_vocab(
        counts, settings.vocab_size, num_unused=settings.num_unused,
        min_cjk_count=settings.min_cjk_count, max_unique_chars=settings.max_unique_chars,
        lower_thresh=settings.lower_thresh)
    vocab_learning.write_vocab(tokens, settings.vocab_file)
    print("Read %d files, %d distinct words; wrote %d tokens to %s"
          % (len(files), len(counts), len(tokens), settings.vocab_file))
    for line in stats.describe():
        logging.warning("%s", line)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "vocab_file"])
