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

The flags are the fields of `data.pretraining.writer.PretrainingDataSettings`.
"""

import os

# Google's defaults need no TensorFlow here (compiled instances, ASCII lines
# tokenized in Rust, records framed in Python): it is imported, quietly, only
# if something needs it (a large non-ASCII corpus, remote files, Beam).
IMPORT_TENSORFLOW_LAZILY = True

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order,wrong-import-position

from absl import logging  # pylint: disable=wrong-import-position

import common_flags  # pylint: disable=wrong-import-position
from data import atomic
from data.pretraining import writer as pretraining_writer

common_flags.define_job_flags(pretraining_writer.PretrainingDataSettings)


def main(_):
    settings = common_flags.job_from_flags(pretraining_writer.PretrainingDataSettings)
    # Beam's flags are checked before anything else happens.
    beam_lib, beam_options = _beam_flags(settings)
    options = settings.instance_options()
    output_files = settings.output_files()
    input_files = settings.input_files()
    # An output that is also an input (or the vocabulary) would replace it.
    atomic.check_outputs([("--output_file", path) for path in output_files],
                         [("--input_file", path) for path in input_files] +
                         [("--vocab_file", settings.vocab_file)])
    for directory in sorted({os.path.dirname(os.path.abspath(p)) for p in output_files}):
        atomic.sweep_stale_temporaries(directory)
    logging.info("*** Reading from %d input files ***", len(input_files))
    if beam_lib is not None:
        with script.filtered_stderr(beam_lib.WORKER_NOISE, quiet_loggers=["apache_beam"]):
            summary = beam_lib.create_pretraining_data(
                input_files, output_files, options, runner=settings.beam_runner,
                pipeline_args=beam_options, documents_per_chunk=settings.documents_per_chunk,
                max_line_bytes=settings.max_line_bytes,
                log_first_instances=settings.log_examples)
    else:
        summary = pretraining_writer.create_pretraining_data(
            input_files, output_files, options, num_workers=settings.num_workers,
            documents_per_chunk=settings.documents_per_chunk,
            max_line_bytes=settings.max_line_bytes, log_first_instances=settings.log_examples)
    print(summary.describe())


def _beam_flags(settings):
    """(beam_pipeline module, PipelineOptions) for --runner=beam, else (None, None)."""
    given = common_flags.present_flag_values(pretraining_writer.PretrainingDataSettings)
    if settings.runner != "beam":
        for name in ("beam_runner", "beam_pipeline_options"):
            if name in given:
                raise ValueError("--%s applies to --runner=beam (this is --runner=local)"
                                 % name)
        return None, None
    if "num_workers" in given:
        raise ValueError("--num_workers applies to --runner=local; with --runner=beam the "
                         "runner's options set the parallelism, e.g. --beam_pipeline_options="
                         "\"--direct_num_workers=2 --direct_running_mode=multi_processing\"")
    from data.pretraining import beam_pipeline  # pylint: disable=g-import-not-at-top
    return beam_pipeline, beam_pipeline.pipeline_options(settings.beam_runner,
                                                         settings.beam_pipeline_options)


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "vocab_file"])
