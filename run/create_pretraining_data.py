"""Creates BERT pre-training TFRecords from raw text (Google's flags and format).

    python run/create_pretraining_data.py \
      --input_file=data/sample/sample_en.txt,data/sample/sample_zh.txt \
      --output_file=/tmp/pretrain.tfrecord \
      --vocab_file=data/sample/vocab.txt --do_lower_case=True \
      --max_seq_length=128 --max_predictions_per_seq=20 \
      --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10 --num_workers=2

Other recipes' static masking and sentence objectives are picked by name, e.g.
SpanBERT-style spans in single segments, ALBERT's n-grams with sentence order
prediction, or Chinese whole-word masking over jieba words:

    --masking=span --sentence_objective=none
    --masking=ngram --sentence_objective=sop
    --masking=whole_word --chinese_word_segmentation

The same files from an Apache Beam pipeline (data/pretraining/beam_pipeline.py),
here on this machine's DirectRunner with two worker processes; Dataflow, Flink
and Spark take their own options the same way:

    --runner=beam --beam_runner=DirectRunner \
      --beam_pipeline_options="--direct_num_workers=2 --direct_running_mode=multi_processing"
"""

import os

# Google's defaults need no TensorFlow here (compiled instances, ASCII lines
# tokenized in Rust, records framed in Python): it is imported, quietly, only
# if something needs it (a large non-ASCII corpus, remote files, Beam).
IMPORT_TENSORFLOW_LAZILY = True

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order,wrong-import-position

from absl import flags  # pylint: disable=wrong-import-position
from absl import logging  # pylint: disable=wrong-import-position

from data import atomic
from data import corpus
from data.pretraining import masking
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files/globs).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files).")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased "
                  "models and False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking "
                  "(an alias of --masking=whole_word).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the "
                   "maximum length.")
# Beyond Google's script.
flags.DEFINE_integer("num_workers", 1,
                     "Worker processes. The output does not depend on this number.")
flags.DEFINE_integer("documents_per_chunk", 10000,
                     "Documents processed together (memory is bounded by this, not by "
                     "the corpus size); the random next segment comes from the same chunk.")
flags.DEFINE_integer("max_line_bytes", corpus.DEFAULT_MAX_LINE_BYTES,
                     "Input lines longer than this are skipped and reported.")
flags.DEFINE_integer("log_examples", 5, "Instances of the first chunk to log.")
flags.DEFINE_enum("runner", "local", ["local", "beam"],
                  "local: this machine's processes (--num_workers); beam: an Apache Beam "
                  "pipeline (--beam_runner, --beam_pipeline_options), the same output.")
# The names of data.pretraining.beam_pipeline.RUNNERS (imported only for --runner=beam).
flags.DEFINE_enum("beam_runner", "DirectRunner",
                  ["DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"],
                  "--runner=beam: the Beam runner.")
flags.DEFINE_string("beam_pipeline_options", "",
                    "--runner=beam: Beam's own options, as on a command line (split as a "
                    "shell would), e.g. \"--direct_num_workers=2 "
                    "--direct_running_mode=multi_processing\" or \"--project=P --region=R "
                    "--temp_location=gs://B/tmp --setup_file=./pyproject.toml\".")
flags.DEFINE_enum("masking", "token", list(masking.MASKING_STRATEGIES),
                  "Which positions are predicted: token (Google's, per WordPiece), "
                  "whole_word (--do_whole_word_mask), span (SpanBERT), ngram (ALBERT).")
flags.DEFINE_enum("sentence_objective", "nsp", list(pretraining_data.SENTENCE_OBJECTIVES),
                  "nsp: next sentence prediction (Google's); sop: sentence order "
                  "prediction (ALBERT; next_sentence_labels 1 = swapped); none: one "
                  "segment of consecutive sentences (next_sentence_labels 0).")
flags.DEFINE_bool("chinese_word_segmentation", False,
                  "Segment each sentence with jieba and use its words as the units of "
                  "whole_word/span/ngram masking (Chinese whole-word masking); tokens "
                  "stay single characters.")
flags.DEFINE_float("span_geometric_p", 0.2,
                   "span masking: p of the geometric distribution of span lengths (words).")
flags.DEFINE_integer("max_span_length", 10,
                     "span masking: longest span, in words (the distribution is truncated "
                     "here and renormalised, as SpanBERT does).")
flags.DEFINE_integer("max_ngram", 3, "ngram masking: longest n-gram, in words.")
flags.DEFINE_bool("replace_per_unit", None,
                  "Decide 80/10/10 ([MASK]/keep/random) once per masked unit (word, span, "
                  "n-gram) instead of per word piece. Unset: per span for span masking, "
                  "per word piece otherwise.")


def main(_):
    # Beam's flags are checked before anything else happens.
    beam_lib, beam_options = _beam_flags()
    options = pretraining_data.InstanceOptions(
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
        do_whole_word_mask=FLAGS.do_whole_word_mask, masking=FLAGS.masking,
        sentence_objective=FLAGS.sentence_objective,
        chinese_word_segmentation=FLAGS.chinese_word_segmentation,
        span_geometric_p=FLAGS.span_geometric_p, max_span_length=FLAGS.max_span_length,
        max_ngram=FLAGS.max_ngram, replace_per_unit=FLAGS.replace_per_unit)
    output_files = [p.strip() for p in FLAGS.output_file.split(",") if p.strip()]
    input_files = corpus.expand_file_patterns(FLAGS.input_file)
    # An output that is also an input (or the vocabulary) would replace it.
    atomic.check_outputs([("--output_file", path) for path in output_files],
                         [("--input_file", path) for path in input_files] +
                         [("--vocab_file", FLAGS.vocab_file)])
    for directory in sorted({os.path.dirname(os.path.abspath(p)) for p in output_files}):
        atomic.sweep_stale_temporaries(directory)
    logging.info("*** Reading from %d input files ***", len(input_files))
    if beam_lib is not None:
        with script.filtered_stderr(beam_lib.WORKER_NOISE, quiet_loggers=["apache_beam"]):
            summary = beam_lib.create_pretraining_data(
                input_files, output_files, options, runner=FLAGS.beam_runner,
                pipeline_args=beam_options, documents_per_chunk=FLAGS.documents_per_chunk,
                max_line_bytes=FLAGS.max_line_bytes, log_first_instances=FLAGS.log_examples)
    else:
        summary = pretraining_writer.create_pretraining_data(
            input_files, output_files, options, num_workers=FLAGS.num_workers,
            documents_per_chunk=FLAGS.documents_per_chunk,
            max_line_bytes=FLAGS.max_line_bytes, log_first_instances=FLAGS.log_examples)
    print(summary.describe())


def _beam_flags():
    """(beam_pipeline module, PipelineOptions) for --runner=beam, else (None, None)."""
    if FLAGS.runner != "beam":
        for name in ("beam_runner", "beam_pipeline_options"):
            if FLAGS[name].present:
                raise ValueError("--%s applies to --runner=beam (this is --runner=local)"
                                 % name)
        return None, None
    if FLAGS["num_workers"].present:
        raise ValueError("--num_workers applies to --runner=local; with --runner=beam the "
                         "runner's options set the parallelism, e.g. --beam_pipeline_options="
                         "\"--direct_num_workers=2 --direct_running_mode=multi_processing\"")
    from data.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
    return beam_pipeline, beam_pipeline.pipeline_options(FLAGS.beam_runner,
                                                         FLAGS.beam_pipeline_options)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "vocab_file"])
