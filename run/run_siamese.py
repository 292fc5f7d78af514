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
flags.DEFINE_string("model_family", "bert", "The encoder's model family (bert, albert, ...).")
flags.DEFINE_string("data_dir", None, "Directory with train.tsv and dev.tsv.")
flags.DEFINE_string("train_file", None, "Training pairs (a path, or a name in --data_dir).")
flags.DEFINE_string("dev_file", None, "Dev pairs (a path, or a name in --data_dir).")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model "
                    "(Google's bert_config.json or HF's config.json).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: a Google bert_model.ckpt prefix, a checkpoint of "
                    "this project, or HF safetensors (e.g. all-MiniLM-L6-v2).")
flags.DEFINE_bool("do_lower_case", True, "Lower case the input (True for uncased models).")
flags.DEFINE_integer("max_seq_length", 64, "Maximum word pieces per text with [CLS] and [SEP].")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32,
                     "Total batch size for training (the in-batch loss's negatives).")
flags.DEFINE_integer("eval_batch_size", 32, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 2e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 1.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training with linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_enum("pooling", "mean", ["cls", "mean", "max"],
                  "Sentence vector: [CLS] vector, mean or max over the real tokens.")
flags.DEFINE_enum("similarity", "cosine", ["cosine", "dot"], "Score of two sentence vectors.")
flags.DEFINE_enum("loss", "in_batch", ["in_batch", "softmax", "cosine"],
                  "in_batch: multiple-negatives ranking over the batch; softmax: "
                  "Sentence-BERT classifier over (u, v, |u-v|); cosine: MSE of cos(u, v).")
flags.DEFINE_float("scale", None, "Multiplier of the in-batch similarities (default 20).")
flags.DEFINE_float("temperature", None, "1 / --scale (give one of the two).")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")
common_flags.define_trainer_flags()


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
