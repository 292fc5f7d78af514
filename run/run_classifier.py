"""Fine-tunes BERT for sequence (pair) classification or regression.

google-research/bert's `run_classifier.py`: the same flags, defaults, data
processors, TFRecords (`train.tf_record`, `eval.tf_record`,
`predict.tf_record` in `--output_dir`) and outputs (`eval_results.txt`,
`test_results.tsv`), trained through this project's one trainer
(`tf.distribute`, checkpoints and resume, TensorBoard) instead of
TPUEstimator.

    python run/run_classifier.py --task_name=MRPC --do_train --do_eval \
      --data_dir=glue_data/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output

Tasks: `--task_name` = cola, mnli, mnli_mismatched, mrpc, xnli, sst2, qqp,
stsb (GLUE/XNLI file layouts), generic (any tsv/csv/jsonl, configured with
`--file_format`, `--text_a_column`, `--text_b_column`, `--label_column`,
`--has_header`, `--labels`, `--task_type`, ...) or ids (lines of integer ids,
no tokenizer; `--ids_*` flags); or your own `DataProcessor` subclass in your
own file: `--processor=path/to/my_task.py:MyProcessor`.

eval_results.txt holds Google's keys (eval_accuracy, eval_loss, global_step,
loss) plus the task's metrics: eval_f1 (MRPC, QQP), eval_mcc (CoLA),
eval_pearson and eval_spearman (STS-B, where there is no eval_accuracy).
test_results.tsv holds one tab-separated row of class probabilities per test
example (one predicted score for regression), in the order of the test file.
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import processors as processors_lib
from data import tokenization
from modeling import checkpoints
from modeling.tasks import classification as classifier_lib
from modeling import bert as config_lib
from modeling.training import distribute
from modeling.serving import export
from modeling.training import optimization
from modeling.training import trainer as trainer_lib

FLAGS = flags.FLAGS

# Google's flags.
flags.DEFINE_string("data_dir", None,
                    "The input data dir. Should contain the .tsv files (or other data files) "
                    "for the task.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model): a Google "
                    "bert_model.ckpt prefix, a checkpoint of this project, or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models "
                  "and False for cased models.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Sequences longer than this will be truncated, and sequences shorter "
                     "than this will be padded.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training to perform linear learning rate warmup for. "
                   "E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
# Your own processor.
flags.DEFINE_string("processor", None,
                    "A DataProcessor in your own file: path/to/my_task.py:MyProcessor "
                    "(or package.module:MyProcessor). Overrides --task_name.")
# --task_name=generic.
flags.DEFINE_enum("file_format", "tsv", ["tsv", "csv", "jsonl"], "generic: data file format.")
flags.DEFINE_string("text_a_column", "0", "generic: column of text_a (index or header name/key).")
flags.DEFINE_string("text_b_column", None,
                    "generic: column of text_b (index or name); unset for single sentences.")
flags.DEFINE_string("label_column", "1", "generic: column of the label (index or name).")
flags.DEFINE_string("guid_column", None, "generic: column of an example id (optional).")
flags.DEFINE_bool("has_header", True, "generic: tsv/csv files start with a header row.")
flags.DEFINE_list("labels", None,
                  "generic, ids: the label list (comma-separated); default: inferred from "
                  "the training file.")
flags.DEFINE_enum("task_type", "classification", list(processors_lib.TASK_TYPES),
                  "generic: classification (one label), multi_label (several labels per "
                  "example, separated by --label_separator) or regression (a float label).")
flags.DEFINE_string("label_separator", ",", "generic: separator of the labels of a multi-label field.")
flags.DEFINE_string("train_file", None, "generic, ids: training file name in --data_dir.")
flags.DEFINE_string("dev_file", None, "generic, ids: dev file name in --data_dir.")
flags.DEFINE_string("test_file", None, "generic, ids: test file name in --data_dir.")
flags.DEFINE_list("eval_metrics", None,
                  "generic, ids: metrics besides eval_accuracy/eval_loss, from accuracy, f1, "
                  "mcc, pearson, spearman, micro_f1, macro_f1.")
# --task_name=ids.
flags.DEFINE_integer("ids_num_labels", None, "ids: labels are the integers 0..N-1.")
flags.DEFINE_bool("ids_label_from_last_id", False,
                  "ids: each line is only ids and the last one is the label (next-id prediction).")
flags.DEFINE_integer("ids_cls_id", None, "ids: token id put first (like [CLS]); none if unset.")
flags.DEFINE_integer("ids_sep_id", None, "ids: token id ending each sequence (like [SEP]).")
flags.DEFINE_integer("ids_offset", 0, "ids: added to every input id.")
flags.DEFINE_enum("ids_keep", "first", ["first", "last"],
                  "ids: which ids a too-long sequence keeps.")
# --task_name=xnli.
flags.DEFINE_string("xnli_language", "zh", "xnli: the language to train and evaluate on.")
# tf.distribute instead of TPUEstimator (as run_pretraining.py).
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
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints to keep.")
flags.DEFINE_integer("log_steps", 100, "Steps between progress lines and TensorBoard points.")
flags.DEFINE_string("export_dir", None,
                    "Write a SavedModel for serving here: raw strings in (text_a, or "
                    "text_a and text_b with the serving_pair signature), probabilities out, "
                    "tokenizer inside the graph.")
flags.DEFINE_integer("seed", None, "Random seed for weights, dropout and input shuffling.")


class RunError(ValueError):
    """Bad flags or inputs, reported as one line."""


def _require(name):
    if not FLAGS[name].value:
        raise RunError("--%s is required." % name)


def _build_processor(bert_config):
    processor_class = processors_lib.get_processor_class(FLAGS.task_name, FLAGS.processor)
    if issubclass(processor_class, processors_lib.GenericProcessor):
        files = {k: getattr(FLAGS, k) for k in ("train_file", "dev_file", "test_file")
                 if getattr(FLAGS, k)}
        return processor_class(
            data_dir=FLAGS.data_dir, file_format=FLAGS.file_format,
            text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
            label_column=FLAGS.label_column, guid_column=FLAGS.guid_column,
            has_header=FLAGS.has_header, labels=FLAGS.labels, task_type=FLAGS.task_type,
            label_separator=FLAGS.label_separator, eval_metrics=FLAGS.eval_metrics, **files)
    if issubclass(processor_class, processors_lib.IdsProcessor):
        files = {k: getattr(FLAGS, k) for k in ("train_file", "dev_file", "test_file")
                 if getattr(FLAGS, k)}
        return processor_class(
            data_dir=FLAGS.data_dir, labels=FLAGS.labels, num_labels=FLAGS.ids_num_labels,
            label_from_last_id=FLAGS.ids_label_from_last_id, cls_id=FLAGS.ids_cls_id,
            sep_id=FLAGS.ids_sep_id, id_offset=FLAGS.ids_offset, keep=FLAGS.ids_keep,
            vocab_size=bert_config.vocab_size, eval_metrics=FLAGS.eval_metrics, **files)
    if issubclass(processor_class, processors_lib.XnliProcessor):
        return processor_class(language=FLAGS.xnli_language)
    return processor_class()


def _check_vocab(bert_config):
    """The tokenizer, after checking the vocabulary against the config."""
    _require("vocab_file")
    vocab = tokenization.load_vocab(FLAGS.vocab_file)
    tokenization.check_vocab_special_tokens(vocab, FLAGS.vocab_file,
                                            required=("[UNK]", "[CLS]", "[SEP]"))
    if len(vocab) != bert_config.vocab_size:
        raise RunError(
            "The vocabulary %s has %d tokens but the BERT config %s says vocab_size=%d; "
            "use the vocab.txt that belongs to the model."
            % (FLAGS.vocab_file, len(vocab), FLAGS.bert_config_file, bert_config.vocab_size))
    return tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)


def _write_summaries(model_dir, step, values):
    writer = tf.summary.create_file_writer(os.path.join(model_dir, "eval"))
    with writer.as_default(step=step):
        for name, value in values.items():
            if np.isfinite(value):
                tf.summary.scalar(name, value)
    writer.flush()


def _write_test_results(path, rows):
    """Google's test_results.tsv: one tab-separated row per example (atomic)."""
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as writer:
        for row in rows:
            writer.write("\t".join(str(value) for value in row) + "\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)


def main(_):
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise RunError("At least one of `do_train`, `do_eval` or `do_predict` must be True.")
    for name in ("data_dir", "bert_config_file", "output_dir"):
        _require(name)
    if not FLAGS.task_name and not FLAGS.processor:
        raise RunError("Give --task_name (%s) or --processor=path/to/my_task.py:MyProcessor."
                       % ", ".join(sorted(processors_lib.PROCESSORS)))
    try:
        tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    except ValueError as e:
        raise RunError(str(e)) from e
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise RunError(
            "Cannot use sequence length %d because the BERT model (%s) was only trained up "
            "to sequence length %d (max_position_embeddings)."
            % (FLAGS.max_seq_length, FLAGS.bert_config_file, bert_config.max_position_embeddings))
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        if FLAGS[name].value < 1:
            raise RunError("--%s must be positive." % name)

    processor = _build_processor(bert_config)
    task_type = getattr(processor, "task_type", processors_lib.CLASSIFICATION)
    if task_type not in processors_lib.TASK_TYPES:
        raise RunError("%s.task_type is %r; expected one of %s."
                       % (type(processor).__name__, task_type,
                          ", ".join(processors_lib.TASK_TYPES)))
    tokenizer = None
    if getattr(processor, "needs_tokenizer", True):
        tokenizer = _check_vocab(bert_config)
    label_list = processor.get_labels()
    if task_type == processors_lib.REGRESSION:
        label_list, num_labels = None, 1
    else:
        if not label_list:
            raise RunError("The processor's get_labels() returned no labels.")
        label_list = list(label_list)
        num_labels = len(label_list)
    eval_metrics = tuple(getattr(processor, "eval_metrics", ("accuracy",)))
    unknown = [m for m in eval_metrics if m not in classifier_lib.METRICS]
    if unknown:
        raise RunError("Unknown eval metric(s) %s; known: %s."
                       % (", ".join(unknown), ", ".join(classifier_lib.METRICS)))
    logging.info("Task: %s (%s), labels: %s", type(processor).__name__, task_type, label_list)

    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)
    if FLAGS.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_" + FLAGS.mixed_precision)
    strategy = distribute.get_strategy(FLAGS.distribution_strategy, FLAGS.num_gpus,
                                       FLAGS.tpu, FLAGS.all_reduce_alg)
    logging.info("Strategy: %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    output_dir = FLAGS.output_dir
    tf.io.gfile.makedirs(output_dir)
    seq = FLAGS.max_seq_length

    # Read and convert every split that is needed before training anything:
    # bad rows and labels are reported before any time is spent.
    num_train_steps = num_warmup_steps = 0
    train_file = eval_file = predict_file = None
    if FLAGS.do_train:
        train_examples = processor.get_train_examples(FLAGS.data_dir)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size *
                              FLAGS.num_train_epochs)
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        if num_train_steps < 1:
            raise RunError("%d training examples, --train_batch_size=%d and "
                           "--num_train_epochs=%s make no training step."
                           % (len(train_examples), FLAGS.train_batch_size,
                              FLAGS.num_train_epochs))
        train_file = os.path.join(output_dir, "train.tf_record")
        processors_lib.file_based_convert_examples_to_features(
            train_examples, label_list, seq, tokenizer, train_file, task_type)
        logging.info("***** Running training *****")
        logging.info("  Num examples = %d", len(train_examples))
        logging.info("  Batch size = %d", FLAGS.train_batch_size)
        logging.info("  Num steps = %d", num_train_steps)
    if FLAGS.do_eval:
        eval_examples = processor.get_dev_examples(FLAGS.data_dir)
        num_actual_eval_examples = len(eval_examples)
        if not eval_examples:
            raise RunError("The dev set in %s has no examples." % FLAGS.data_dir)
        eval_examples = processors_lib.pad_examples(eval_examples, FLAGS.eval_batch_size)
        eval_file = os.path.join(output_dir, "eval.tf_record")
        processors_lib.file_based_convert_examples_to_features(
            eval_examples, label_list, seq, tokenizer, eval_file, task_type)
    if FLAGS.do_predict:
        predict_examples = processor.get_test_examples(FLAGS.data_dir)
        num_actual_predict_examples = len(predict_examples)
        if not predict_examples:
            raise RunError("The test set in %s has no examples." % FLAGS.data_dir)
        predict_examples = processors_lib.pad_examples(predict_examples,
                                                       FLAGS.predict_batch_size)
        predict_file = os.path.join(output_dir, "predict.tf_record")
        processors_lib.file_based_convert_examples_to_features(
            predict_examples, label_list, seq, tokenizer, predict_file, task_type)

    encoder_kwargs = {}
    if "layer_norm_epsilon" in bert_config.extra:
        encoder_kwargs["layer_norm_epsilon"] = float(bert_config.extra["layer_norm_epsilon"])

    def model_fn():
        return classifier_lib.BertClassifier.from_config_object(
            bert_config, num_labels=num_labels, task_type=task_type, **encoder_kwargs)

    def init_fn(model):
        if FLAGS.init_checkpoint:
            checkpoints.init_from_checkpoint(model, FLAGS.init_checkpoint)
            logging.info("Initialised the encoder from %s", FLAGS.init_checkpoint)
        else:
            logging.warning("No --init_checkpoint: the encoder starts from random weights.")

    trainer = trainer_lib.Trainer(
        strategy, model_fn=model_fn,
        optimizer_fn=lambda: optimization.create_optimizer(
            FLAGS.learning_rate, max(1, num_train_steps), num_warmup_steps,
            jit_update=FLAGS.xla_optimizer_update),
        model_dir=output_dir, train_batch_size=FLAGS.train_batch_size,
        num_train_steps=num_train_steps, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, log_steps=FLAGS.log_steps,
        use_xla=FLAGS.use_xla, init_fn=init_fn)

    def input_fn(path, batch_size, is_training):
        # Eval and predict sets are padded to whole batches: every batch is
        # full, so shapes are static (TPUs) and replicas get equal shares.
        return processors_lib.file_based_input_fn_builder(
            path, seq, is_training=is_training, drop_remainder=True,
            batch_size=batch_size, task_type=task_type, num_labels=num_labels,
            seed=FLAGS.seed)

    if FLAGS.do_train:
        trainer.train(input_fn(train_file, FLAGS.train_batch_size, True))
    else:
        # Eval/predict only: the latest checkpoint in output_dir, else --init_checkpoint.
        trainer.restore_or_initialize()

    if FLAGS.do_eval:
        logging.info("***** Running evaluation *****")
        logging.info("  Num examples = %d (%d actual, %d padding)", len(eval_examples),
                     num_actual_eval_examples, len(eval_examples) - num_actual_eval_examples)
        eval_input_fn = input_fn(eval_file, FLAGS.eval_batch_size, False)
        raw = trainer.evaluate(eval_input_fn, max_steps=None, restore=False)
        results = {"global_step": raw.pop("global_step")}
        for name, value in raw.items():
            results["eval_" + name] = value
        # Google's Estimator also reports the mean loss as `loss`.
        results["loss"] = results["eval_loss"]
        extra = [m for m in eval_metrics if "eval_" + m not in results]
        if extra:
            output = "predictions" if task_type == processors_lib.REGRESSION else "probabilities"
            predictions = trainer.predict(eval_input_fn, [output, "label_ids", "is_real_example"],
                                          restore=False)
            values = classifier_lib.compute_metrics(
                extra, predictions[output], predictions["label_ids"], task_type,
                predictions["is_real_example"])
            for name, value in values.items():
                results["eval_" + name] = value
            if trainer.is_chief:
                _write_summaries(output_dir, results["global_step"], values)
        if trainer.is_chief:
            trainer_lib.write_eval_results(results, os.path.join(output_dir, "eval_results.txt"))
        print("***** Eval results *****")
        for key in sorted(results):
            print("  %s = %s" % (key, results[key]))

    if FLAGS.do_predict:
        logging.info("***** Running prediction *****")
        logging.info("  Num examples = %d (%d actual, %d padding)", len(predict_examples),
                     num_actual_predict_examples,
                     len(predict_examples) - num_actual_predict_examples)
        output = "predictions" if task_type == processors_lib.REGRESSION else "probabilities"
        predictions = trainer.predict(input_fn(predict_file, FLAGS.predict_batch_size, False),
                                      [output], restore=False)
        values = predictions[output][:num_actual_predict_examples]
        if len(values) != num_actual_predict_examples:
            raise RunError("Predicted %d examples but the test set has %d."
                           % (len(values), num_actual_predict_examples))
        rows = values.reshape(len(values), -1)
        if trainer.is_chief:
            _write_test_results(os.path.join(output_dir, "test_results.tsv"), rows)
        print("Wrote %d predictions to %s" % (len(rows), os.path.join(output_dir,
                                                                      "test_results.tsv")))
    if FLAGS.export_dir and trainer.is_chief:
        if not getattr(processor, "needs_tokenizer", True):
            raise RunError("--export_dir needs a text task (the serving signature takes raw "
                           "strings); this processor reads token ids.")
        if not FLAGS.do_train:
            trainer.restore_or_initialize()
        output = "predictions" if task_type == processors_lib.REGRESSION else "probabilities"
        export.export_text_model(trainer.model, FLAGS.export_dir, FLAGS.vocab_file,
                                 FLAGS.do_lower_case, seq,
                                 output_fn=lambda outputs: {output: outputs[output]})
        print("SavedModel:   %s (serving_default(text_a), serving_pair(text_a, text_b))"
              % os.path.abspath(FLAGS.export_dir))
    print("Checkpoints:  %s" % os.path.abspath(output_dir))
    print("TensorBoard:  tensorboard --logdir %s" % os.path.abspath(output_dir))


def _run(argv):
    try:
        main(argv)
    except (ValueError, FileNotFoundError) as e:
        # Bad flags, data, labels, vocabulary, config or checkpoint: every
        # such error of the library is a ValueError subclass with a message
        # naming the file (and line) at fault.
        print("run_classifier: error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(_run)
