# coding=utf-8
"""Bad-input cases of the fine-tuning jobs (run_classifier, run_ner, run_siamese, run_multitask, run_cvt, run_distillation, run_siatl, run_translation).

Registered with `bad_inputs_kit.case`; `tests/test_bad_inputs.py` runs them.
Every case fails in the job's checks, before a model is built: none trains.
"""

import json
import os
import shutil

import numpy as np
import tensorflow as tf

from bad_inputs_kit import SAMPLE_DIR, TINY_CONFIG, assert_error, case, run_script

ELMO_VOCAB = os.path.join(SAMPLE_DIR, "elmo", "vocab.txt")
SENTENCES = ("the river runs", "fish swim", "the sun rises", "rain falls")


def _nothing_written(out):
    """`out` was not created, or holds nothing (a refused run may only have made it)."""
    assert not os.path.exists(out) or not os.listdir(out), os.listdir(out)


def _tsv(path, rows, header=("sentence", "label")):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(header) + "\n" + "".join("\t".join(row) + "\n" for row in rows))
    return path


def _generic_data(ctx, header=("sentence", "label")):
    """A generic-task folder (train.tsv, dev.tsv: four sentences, labels pos/neg)."""
    data = ctx.path("data")
    os.makedirs(data)
    rows = [(text, "pos" if i % 2 == 0 else "neg") for i, text in enumerate(SENTENCES)]
    for name in ("train.tsv", "dev.tsv"):
        _tsv(os.path.join(data, name), rows, header)
    return data


def _conll(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


GOOD_CONLL = ["John B-PER", "visited O", "Paris B-LOC", "", "Mary B-PER", "swims O"]


# ------------------------------------------------------------------------- run_cvt

def _cvt_refusal(ctx, train_lines, dev_lines, *needles, unlabeled=b"the river runs\n"):
    folder = ctx.path("conll")
    os.makedirs(folder)
    train = _conll(os.path.join(folder, "train.txt"), train_lines)
    dev = _conll(os.path.join(folder, "dev.txt"), dev_lines)
    text = os.path.join(folder, "unlabeled.txt")
    with open(text, "wb") as f:
        f.write(unlabeled)
    out = ctx.path("run")
    result = run_script("run_cvt", [
        "--train_file=%s" % train, "--dev_file=%s" % dev, "--unlabeled_file=%s" % text,
        "--output_dir=%s" % out, "--num_train_steps=2", "--train_batch_size=2",
        "--unlabeled_batch_size=2", "--eval_batch_size=2"],
        inputs=[folder], outputs=[ctx.dir])
    assert_error(result, "run_cvt", *[n.format(folder=folder) for n in needles])
    _nothing_written(out)


@case()
def run_cvt_unlabeled_file_not_utf8(ctx):
    # Latin-1 text: refused before the labelled records and label_list.txt are written.
    _cvt_refusal(ctx, GOOD_CONLL, GOOD_CONLL, "{folder}/unlabeled.txt:2:", "not valid UTF-8",
                 unlabeled="the river runs\nna\u00efve caf\u00e9 owners\n".encode("latin-1"))


@case()
def run_cvt_train_file_in_bioes(ctx):
    _cvt_refusal(ctx, ["John S-PER", "visited O", "New B-LOC", "York E-LOC"], GOOD_CONLL,
                 "{folder}/train.txt:1:", "'S-PER'", "bio scheme")


@case()
def run_cvt_dev_tag_not_among_the_training_labels(ctx):
    _cvt_refusal(ctx, GOOD_CONLL, GOOD_CONLL + ["", "Acme B-ORG", "hires O"],
                 "{folder}/dev.txt:8:", "'B-ORG'", "not among the training labels")


# ---------------------------------------------------------------- run_distillation

def _tf1_classifier(ctx, name="teacher", num_labels=2):
    """A Google TF1 classifier checkpoint: the tiny BERT plus a head (output_weights/_bias)."""
    from modeling.checkpoints import google_tf1  # pylint: disable=import-outside-toplevel
    reader = tf.train.load_checkpoint(ctx.a.checkpoint)
    arrays = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
              if n != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    arrays["output_weights"] = np.zeros([num_labels, TINY_CONFIG["hidden_size"]], np.float32)
    arrays["output_bias"] = np.zeros([num_labels], np.float32)
    prefix = ctx.path(name, "bert_model.ckpt")
    google_tf1.write_tf1_checkpoint(prefix, arrays)
    return prefix


def _distillation_refusal(ctx, teacher, *needles, student_config=None, extra=(), inputs=()):
    data = _generic_data(ctx)
    out = ctx.path("run")
    teacher_inputs = [teacher if os.path.isdir(teacher) else os.path.dirname(teacher)]
    result = run_script("run_distillation", [
        "--style=mtdnn", "--task_name=generic", "--data_dir=%s" % data,
        "--vocab_file=%s" % ctx.a.vocab, "--teacher_config_file=%s" % ctx.a.config,
        "--teacher_checkpoints=%s" % teacher,
        "--student_config_file=%s" % (student_config or ctx.a.config),
        "--do_train", "--do_eval", "--output_dir=%s" % out, "--max_seq_length=16",
        "--train_batch_size=2", "--eval_batch_size=2", "--num_train_steps=2"] + list(extra),
        inputs=[data, ctx.a.vocab, ctx.a.config] + teacher_inputs + list(inputs),
        outputs=[ctx.dir])
    assert_error(result, "run_distillation", *needles)
    _nothing_written(out)


@case()
def run_distillation_teacher_is_the_pretrained_bert(ctx):
    """The pre-trained model (no classifier head) as the teacher: refused before any record."""
    _distillation_refusal(ctx, ctx.a.checkpoint, ctx.a.checkpoint, "no classifier head",
                          "fine-tuned classifier")


@case()
def run_distillation_transfer_file_not_utf8(ctx):
    teacher = _tf1_classifier(ctx)
    transfer = ctx.path("unlabeled.txt")
    with open(transfer, "wb") as f:
        f.write("the river runs\nna\u00efve caf\u00e9 owners\n".encode("latin-1"))
    _distillation_refusal(ctx, teacher, "%s:2:" % transfer, "not UTF-8",
                          extra=["--transfer_file=%s" % transfer], inputs=[transfer])


@case()
def run_distillation_student_config_of_another_vocabulary(ctx):
    student = ctx.config("student_config.json", vocab_size=30522)
    _distillation_refusal(ctx, _tf1_classifier(ctx), "--student_config_file=%s" % student,
                          "vocab_size=30522", "--teacher_config_file=%s" % ctx.a.config,
                          "vocab_size=%d" % ctx.a.vocab_size, student_config=student,
                          inputs=[student])
