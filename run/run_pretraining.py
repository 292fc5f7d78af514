"""Pre-trains BERT (masked LM + next sentence prediction) on TFRecords.

Google's flags and outputs (checkpoints and `eval_results.txt` in
`--output_dir`), trained through `tf.distribute` instead of TPUEstimator.

With no flags at all it runs the demo job: it builds TFRecords from the
bundled sample corpus (`data/sample/`) if they are missing, pre-trains a tiny
BERT for a few minutes on the CPU, evaluates it, and compares its masked-LM
accuracy with the unigram-frequency baseline:

    python run/run_pretraining.py
    tensorboard --logdir output/pretraining_sample

On your own data (Google's usage):

    python run/run_pretraining.py --input_file=/data/pretrain-*.tfrecord \
      --output_dir=/models/my_bert --bert_config_file=bert_config.json \
      --do_train --do_eval --train_batch_size=256 --num_train_steps=100000 \
      --num_warmup_steps=10000 --learning_rate=1e-4 \
      --distribution_strategy=mirrored
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging
import keras
import tensorflow as tf

from data import baselines
from data import corpus
from data import dynamic_masking
from data import input_pipeline
from data import pretraining_data
from data import pretraining_writer
from data import tokenization
from modeling import checkpoints
from modeling import config as config_lib
from modeling import distribute
from modeling import optimization
from modeling import recipes
from modeling import trainer as trainer_lib

FLAGS = flags.FLAGS

# Google's flags.
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated). "
                    "Not given: the bundled sample corpus is used (demo job).")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model).")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
# tf.distribute instead of TPUEstimator.
flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                  "How to distribute training. multi_worker_mirrored reads TF_CONFIG.")
flags.DEFINE_string("tpu", None, "TPU name or address (with --distribution_strategy=tpu).")
flags.DEFINE_integer("num_gpus", None, "GPUs to use (default: all visible).")
flags.DEFINE_string("all_reduce_alg", None, "nccl, ring or hierarchical_copy.")
flags.DEFINE_bool("use_xla", False, "Compile the forward/backward pass with XLA.")
flags.DEFINE_bool("xla_optimizer_update", True,
                  "Run each variable's optimizer update as one XLA computation (same "
                  "arithmetic, faster); --noxla_optimizer_update where XLA is unavailable.")
flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                  "Compute in half precision (float16 uses dynamic loss scaling).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Micro-batches of --train_batch_size per optimizer update.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints to keep.")
flags.DEFINE_integer("log_steps", 100, "Steps between progress lines and TensorBoard points.")
flags.DEFINE_integer("seed", None, "Random seed for weights and input shuffling.")
# Only used by the demo job, to build its data.
flags.DEFINE_string("vocab_file", None,
                    "Vocabulary of the demo job's data, and of --recipe=roberta's raw text.")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case raw text (--recipe=roberta tokenizes in the input pipeline).")
flags.DEFINE_string("recipe", "bert",
                    "Pre-training recipe: a name (%s) or a recipe JSON file. With "
                    "--input_file, make the TFRecords with the recipe's masking and "
                    "sentence objective (see README)." % ", ".join(recipes.list_recipes()))

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "sample")

# The demo job: a tiny BERT trained for a few minutes on two CPU cores.
# Each value applies only when the flag is not given on the command line.
SAMPLE_DEFAULTS = dict(
    output_dir=os.path.join("output", "pretraining_sample"),
    do_train=True, do_eval=True, train_batch_size=32, eval_batch_size=32,
    learning_rate=1e-3, num_train_steps=1000, num_warmup_steps=100,
    save_checkpoints_steps=500, max_eval_steps=50, max_seq_length=64,
    max_predictions_per_seq=10, seed=12345, log_steps=100,
)


def _apply_sample_defaults():
    for name, value in SAMPLE_DEFAULTS.items():
        if not FLAGS[name].present:
            FLAGS[name].value = value


def _build_sample_data(output_dir, vocab_file, recipe):
    """TFRecords of the bundled corpus (train: dupe 10; eval: other masks)."""
    data_dir = os.path.join(output_dir, "data")
    tag = "%s_seq%d_pred%d" % (recipe.name, FLAGS.max_seq_length,
                               FLAGS.max_predictions_per_seq)
    files = {}
    for split, seed, dupe in (("train", 12345, 10), ("eval", 54321, 1)):
        path = os.path.join(data_dir, "sample_%s_%s.tfrecord" % (split, tag))
        if not tf.io.gfile.exists(path):
            options = pretraining_data.InstanceOptions(
                vocab_file=vocab_file, do_lower_case=True,
                max_seq_length=FLAGS.max_seq_length,
                max_predictions_per_seq=FLAGS.max_predictions_per_seq,
                random_seed=seed, dupe_factor=dupe, masked_lm_prob=0.15,
                short_seq_prob=0.1, do_whole_word_mask=False, **recipe.data)
            summary = pretraining_writer.create_pretraining_data(
                sorted(tf.io.gfile.glob(os.path.join(SAMPLE_DIR, "sample_*.txt"))),
                [path], options)
            logging.info("Built %s: %d instances", path, summary.instances)
        files[split] = path
    return files


def _load_bert_config(vocab_file, recipe):
    if FLAGS.bert_config_file:
        return recipes.load_config(recipe, FLAGS.bert_config_file)
    if FLAGS.input_file:
        raise ValueError("--bert_config_file is required with --input_file")
    # Demo job: Google's BERT-Tiny shape (2 layers, hidden 128) over the sample vocab.
    return recipes.demo_config(recipe, len(tokenization.load_vocab(vocab_file)))


def main(_):
    sample_mode = not FLAGS.input_file
    if sample_mode:
        _apply_sample_defaults()
    elif not FLAGS.output_dir:
        raise app.UsageError("--output_dir is required with --input_file")
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise ValueError("At least one of `do_train` or `do_eval` must be True.")
    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)
    if FLAGS.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_" + FLAGS.mixed_precision)

    output_dir = FLAGS.output_dir
    tf.io.gfile.makedirs(output_dir)
    vocab_file = FLAGS.vocab_file or os.path.join(SAMPLE_DIR, "vocab.txt")
    recipe = recipes.load_recipe(FLAGS.recipe)
    logging.info("Recipe %s: %s", recipe.name, recipe.description)
    bert_config = _load_bert_config(vocab_file, recipe)
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError("--max_seq_length=%d exceeds max_position_embeddings=%d of the "
                         "BERT config" % (FLAGS.max_seq_length,
                                          bert_config.max_position_embeddings))
    config_path = os.path.join(output_dir, "bert_config.json")
    if not tf.io.gfile.exists(config_path):
        bert_config.to_json_file(config_path)

    dynamic = bool(recipe.data.get("dynamic"))
    if sample_mode and dynamic:
        # Raw text, tokenized and masked on the fly: nothing to build.
        train_files = eval_files = sorted(tf.io.gfile.glob(os.path.join(SAMPLE_DIR, "sample_*.txt")))
    elif sample_mode:
        files = _build_sample_data(output_dir, vocab_file, recipe)
        train_files, eval_files = files["train"], files["eval"]
    else:
        train_files = eval_files = FLAGS.input_file
        corpus.expand_file_patterns(FLAGS.input_file)  # clear error if nothing matches

    strategy = distribute.get_strategy(FLAGS.distribution_strategy, FLAGS.num_gpus,
                                       FLAGS.tpu, FLAGS.all_reduce_alg)
    logging.info("Strategy: %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)

    def init_fn(model):
        if FLAGS.init_checkpoint:
            # Google TF1 checkpoints, this project's, or HF safetensors; a
            # checkpoint without pre-training heads starts them fresh.
            checkpoints.init_from_checkpoint(model, FLAGS.init_checkpoint,
                                             allow_missing_heads=True)

    trainer = trainer_lib.Trainer(
        strategy,
        model_fn=lambda: recipes.build_pretrainer(recipe, bert_config),
        optimizer_fn=lambda: optimization.create_optimizer(
            FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
            optimizer_type=FLAGS.optimizer,
            gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
            jit_update=FLAGS.xla_optimizer_update),
        model_dir=output_dir, train_batch_size=FLAGS.train_batch_size,
        num_train_steps=FLAGS.num_train_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, log_steps=FLAGS.log_steps,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        use_xla=FLAGS.use_xla, init_fn=init_fn)

    def input_fn(files, is_training, batch_size):
        if dynamic:
            # RoBERTa: --input_file is raw text (one sentence per line, blank
            # line between documents), masked afresh at every epoch.
            return dynamic_masking.roberta_input_fn_builder(
                files, vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                FLAGS.max_predictions_per_seq, is_training=is_training,
                batch_size=batch_size, packing=recipe.data.get("packing", "full_sentences"),
                seed=FLAGS.seed, repeat=True)
        return input_pipeline.pretraining_input_fn_builder(
            files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            is_training=is_training, batch_size=batch_size,
            **({"seed": FLAGS.seed} if is_training else {"repeat": True}))

    if FLAGS.do_train:
        trainer.train(input_fn(train_files, True, FLAGS.train_batch_size))

    if FLAGS.do_eval:
        results = trainer.evaluate(input_fn(eval_files, False, FLAGS.eval_batch_size),
                                   FLAGS.max_eval_steps)
        if dynamic:
            baseline_train = input_fn(train_files, False, 256)(None)
            baseline_eval = input_fn(eval_files, False, FLAGS.eval_batch_size)(None)
        else:
            baseline_train, baseline_eval = train_files, eval_files
        unigram = baselines.unigram_masked_lm_statistics(
            baseline_train, baseline_eval, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            vocab_size=bert_config.vocab_size,
            max_train_records=100000 if not dynamic else 20000,
            max_eval_records=FLAGS.max_eval_steps * FLAGS.eval_batch_size)
        baseline, baseline_id = unigram.accuracy, unigram.token_id
        results["unigram_baseline_masked_lm_accuracy"] = baseline
        if unigram.cross_entropy is not None:
            results["unigram_baseline_masked_lm_loss"] = unigram.cross_entropy
        if trainer.is_chief:
            trainer_lib.write_eval_results(results, os.path.join(output_dir, "eval_results.txt"))
        print("***** Eval results *****")
        for key in sorted(results):
            print("  %s = %s" % (key, results[key]))
        better = results["masked_lm_accuracy"] - baseline
        print("masked LM accuracy %.3f vs unigram baseline %.3f (always predicting id %d): "
              "%s by %.3f" % (results["masked_lm_accuracy"], baseline, baseline_id,
                              "better" if better > 0 else "NOT better", abs(better)))
        if unigram.cross_entropy is not None:
            print("masked LM loss %.3f vs unigram baseline loss %.3f" % (
                results["masked_lm_loss"], unigram.cross_entropy))
    print("Checkpoints:  %s" % os.path.abspath(output_dir))
    print("TensorBoard:  tensorboard --logdir %s" % os.path.abspath(output_dir))


def _run(argv):
    try:
        main(argv)
    except (corpus.CorpusError, tokenization.VocabError, config_lib.BertConfigError,
            recipes.RecipeError,
            checkpoints.CheckpointMismatchError, FileNotFoundError) as e:
        print("run_pretraining: error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(_run)
