"""Fine-tunes a Siamese bi-encoder (Sentence-BERT style) for sentence matching.

    python run/run_siamese.py --do_train --do_eval --data_dir=faq_pairs \
      --vocab_file=$MODEL_DIR/vocab.txt --bert_config_file=$MODEL_DIR/config.json \
      --init_checkpoint=$MODEL_DIR/model.safetensors --do_lower_case=True \
      --max_seq_length=64 --train_batch_size=32 --learning_rate=2e-5 \
      --num_train_epochs=1.0 --pooling=mean --similarity=cosine --loss=in_batch \
      --scale=20 --output_dir=/tmp/siamese

Files: `--data_dir` with train.tsv and dev.tsv (or `--train_file`,
`--dev_file`), tab-separated: ``query<TAB>positive`` (--loss=in_batch: the
other positives of the batch are the negatives), ``a<TAB>b<TAB>label``
(--loss=softmax, Sentence-BERT's classifier over [u; v; |u-v|]) or
``a<TAB>b<TAB>score`` (--loss=cosine, MSE of cos(u, v) with the score).
One encoder encodes both texts; --pooling=cls|mean|max;
--similarity=cosine|dot; --scale (or --temperature = 1 / scale) multiplies
the in-batch similarities.

Outputs in `--output_dir`: eval_results.txt (eval_loss; eval_recall_at_1,
eval_recall_at_5, eval_mrr for in_batch: every dev query against every
distinct dev positive; eval_accuracy for softmax; eval_pearson,
eval_spearman for cosine), checkpoints (the `--init_checkpoint` of
run/build_index.py), label_list.txt (softmax).

This script only parses flags: the run is `modeling.tasks.siamese_job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

import common_flags
from modeling.tasks import siamese_job

FLAGS = flags.FLAGS
# --scale and --temperature are the script's: either gives SiameseJob.scale (not a derived
# flag, see its field), so --scale has no default of its own.
flags.DEFINE_float("scale", None, "Multiplier of the in-batch similarities (default 20).")
flags.DEFINE_float("temperature", None, "1 / --scale (give one of the two).")
common_flags.define_job_flags(siamese_job.SiameseJob)


def main(_):
    if FLAGS.scale is not None and FLAGS.temperature is not None:
        raise ValueError("--scale=%s and --temperature=%s: give one of the two (scale = "
                         "1 / temperature)" % (FLAGS.scale, FLAGS.temperature))
    scale = FLAGS.scale
    if FLAGS.temperature is not None:
        if not FLAGS.temperature > 0:
            raise ValueError("--temperature=%s: expected a positive number" % FLAGS.temperature)
        scale = 1.0 / FLAGS.temperature
    if scale is None:
        scale = siamese_job.SiameseJob.scale
    siamese_job.run(common_flags.job_from_flags(siamese_job.SiameseJob, scale=scale))


if __name__ == "__main__":
    script.run(main)
