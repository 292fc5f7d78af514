# coding=utf-8
"""Bad-input cases of the fine-tuning jobs (run_classifier, run_ner, run_siamese, run_multitask, run_cvt, run_distillation, run_siatl, run_translation).

Registered with `bad_inputs_kit.case`; `tests/run/test_bad_inputs.py` runs them.
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


# ------------------------------------------------------------------ run_classifier

@case()
def run_classifier_output_dir_is_its_init_checkpoint_folder(ctx):
    """Google's model folder as --output_dir too: the run would write its records and
    checkpoints beside (and resume from) the model it starts from."""
    data = _generic_data(ctx)
    folder = ctx.path("model")
    shutil.copytree(ctx.a.model_dir, folder)
    prefix = os.path.join(folder, os.path.basename(ctx.a.checkpoint))
    for init_checkpoint in (folder, prefix):
        result = run_script("run_classifier", [
            "--task_name=generic", "--data_dir=%s" % data, "--do_train", "--do_eval",
            "--output_dir=%s" % folder, "--vocab_file=%s" % ctx.a.vocab,
            "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % init_checkpoint,
            "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1"],
            inputs=[folder, data, ctx.a.vocab, ctx.a.config], outputs=[ctx.dir])
        assert_error(result, "run_classifier", "--output_dir=%s" % folder,
                     "is the folder of --init_checkpoint=%s" % init_checkpoint)


@case()
def run_classifier_dev_row_with_an_extra_column(ctx):
    """A bad dev row is refused before train.tf_record is written (every split is read first)."""
    data = _generic_data(ctx)
    dev = _tsv(os.path.join(data, "dev.tsv"), [("the river runs", "pos"),
                                               ("fish swim", "in the sea", "neg")])
    out = ctx.path("run")
    result = run_script("run_classifier", [
        "--task_name=generic", "--data_dir=%s" % data, "--do_train", "--do_eval",
        "--output_dir=%s" % out, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--max_seq_length=16", "--train_batch_size=2", "--num_train_epochs=1"],
        inputs=[data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_classifier", "%s:3:" % dev, "3 columns, expected 2")
    _nothing_written(out)


# ------------------------------------------------------------------------- run_ner

def _ner_refusal(ctx, train_lines, dev_lines, *needles):
    conll = ctx.path("conll")
    os.makedirs(conll)
    _conll(os.path.join(conll, "train.txt"), train_lines)
    _conll(os.path.join(conll, "dev.txt"), dev_lines)
    out = ctx.path("run")
    result = run_script("run_ner", [
        "--do_train", "--do_eval", "--data_dir=%s" % conll, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--output_dir=%s" % out, "--max_seq_length=16", "--train_batch_size=2",
        "--num_train_epochs=1"],
        inputs=[conll, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_ner", *[n.format(conll=conll) for n in needles])
    _nothing_written(out)


@case()
def run_ner_train_line_without_a_tag(ctx):
    _ner_refusal(ctx, ["John B-PER", "visited", "Paris B-LOC"], GOOD_CONLL,
                 "{conll}/train.txt:2:", "expected a token and its tag", "'visited'")


@case()
def run_ner_dev_tag_not_among_the_training_labels(ctx):
    _ner_refusal(ctx, GOOD_CONLL, GOOD_CONLL + ["", "Acme B-ORG", "hires O"],
                 "{conll}/dev.txt:8:", "'B-ORG'", "not among the training labels")


# --------------------------------------------------------------------- run_siamese

@case()
def run_siamese_softmax_loss_with_one_training_label(ctx):
    data = ctx.path("pairs")
    os.makedirs(data)
    for name in ("train.tsv", "dev.tsv"):
        with open(os.path.join(data, name), "w") as f:
            f.write("car\tauto\tsame\nsun\tstar\tsame\nfish\tswim\tsame\n")
    out = ctx.path("run")
    result = run_script("run_siamese", [
        "--do_train", "--do_eval", "--data_dir=%s" % data, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--loss=softmax", "--max_seq_length=16", "--output_dir=%s" % out],
        inputs=[data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_siamese", "--loss=softmax", "one label (same)",
                 "at least two")
    _nothing_written(out)


# ------------------------------------------------------------------- run_multitask

def _multitask_refusal(ctx, task_list_text, *needles):
    data = _generic_data(ctx)
    tasks = ctx.path("tasks.json")
    with open(tasks, "w") as f:
        f.write(task_list_text)
    out = ctx.path("run")
    result = run_script("run_multitask", [
        "--task_list_file=%s" % tasks, "--vocab_file=%s" % ctx.a.vocab,
        "--bert_config_file=%s" % ctx.a.config, "--init_checkpoint=%s" % ctx.a.checkpoint,
        "--do_train", "--output_dir=%s" % out, "--max_seq_length=16"],
        inputs=[tasks, data, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "run_multitask", tasks, *[n.format(base=ctx.dir) for n in needles])
    _nothing_written(out)


@case()
def run_multitask_task_list_with_a_trailing_comma(ctx):
    _multitask_refusal(ctx, '[{"name": "sent", "processor": "generic", "data_dir": "data",\n'
                            '  "head": "classification"},\n]\n', ":3:1:", "not valid JSON")


@case()
def run_multitask_task_data_dir_misspelt(ctx):
    _multitask_refusal(ctx, json.dumps([
        {"name": "sent", "processor": "generic", "data_dir": "data", "head": "classification"},
        {"name": "other", "processor": "generic", "data_dir": "dta",
         "head": "classification"}]), "entry 1", "'data_dir'", os.path.join("{base}", "dta"),
        "is not a directory")


@case()
def run_multitask_bad_row_in_the_second_tasks_training_file(ctx):
    """Every task's files are read before any task's records are written: the first
    task's folder and records must not appear when the second task's train.tsv is bad."""
    other = ctx.path("other")
    os.makedirs(other)
    with open(os.path.join(other, "train.tsv"), "w") as f:
        f.write("sentence\tlabel\nthe sun rises\tpos\nbirds fly\tsouth\tneg\n")
    _tsv(os.path.join(other, "dev.tsv"), [("the moon", "pos")])
    _multitask_refusal(ctx, json.dumps([
        {"name": "sent", "processor": "generic", "data_dir": "data", "head": "classification"},
        {"name": "other", "processor": "generic", "data_dir": "other",
         "head": "classification"}]), "entry 1", os.path.join(other, "train.tsv") + ":3:",
        "columns")


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


# ---------------------------------------------------------------------- run_siatl

def _ulmfit_lm(ctx):
    """A folder as run_pretraining.py --recipe=ulmfit leaves it: ulmfit_config.json (the
    sample word vocabulary's size, a tiny AWD-LSTM) and a checkpoint."""
    folder = ctx.path("lm")
    os.makedirs(folder)
    with open(ELMO_VOCAB, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    config = os.path.join(folder, "ulmfit_config.json")
    with open(config, "w") as f:
        json.dump({"vocab_size": vocab_size, "emb_sz": 16, "n_hid": 16, "n_layers": 2}, f)
    module = tf.Module()
    module.embedding = tf.Variable(tf.zeros([vocab_size, 16]))
    tf.train.Checkpoint(model=module).save(os.path.join(folder, "ckpt"))
    return folder, config


def _siatl_refusal(ctx, *needles, vocab=ELMO_VOCAB, extra=(), output_dir=None):
    data = _generic_data(ctx, header=("text", "label"))
    folder, config = _ulmfit_lm(ctx)
    out = output_dir or ctx.path("run")
    result = run_script("run_siatl", [
        "--task_name=generic", "--data_dir=%s" % data, "--text_a_column=text",
        "--label_column=label", "--vocab_file=%s" % vocab, "--bert_config_file=%s" % config,
        "--init_checkpoint=%s" % folder, "--do_train", "--do_eval",
        "--output_dir=%s" % out, "--max_seq_length=16", "--train_batch_size=2",
        "--eval_batch_size=2"] + list(extra),
        inputs=[data, folder, vocab], outputs=[ctx.dir])
    assert_error(result, "run_siatl", *[n.format(lm=folder) for n in needles])
    if output_dir is None:
        _nothing_written(out)


@case()
def run_siatl_output_dir_is_the_language_models_folder(ctx):
    """Its records, stages and eval_results.txt would go beside the LM's own files."""
    _siatl_refusal(ctx, "--output_dir={lm}", "is the folder of --init_checkpoint={lm}",
                   output_dir=ctx.path("lm"))


@case()
def run_siatl_vocab_file_is_the_bert_wordpiece_vocabulary(ctx):
    _siatl_refusal(ctx, "--vocab_file", ctx.a.vocab, "<S> </S> <UNK>", vocab=ctx.a.vocab)


@case()
def run_siatl_exponential_aux_weight_decay_to_0(ctx):
    _siatl_refusal(ctx, "--aux_lm_weight_decay=exponential", "--aux_lm_weight_end=0.0",
                   "use linear", extra=["--aux_lm_weight_end=0"])


# ---------------------------------------------------------------- run_translation

def _translation_refusal(ctx, *needles, extra=(), inputs=()):
    config = ctx.config("mass_config.json", type_vocab_size=2)
    out = ctx.path("run")
    result = run_script("run_translation", [
        "--config_file=%s" % config, "--output_dir=%s" % out, "--num_train_steps=1",
        "--num_warmup_steps=0", "--train_batch_size=2"] + list(extra),
        inputs=[config] + list(inputs), outputs=[ctx.dir])
    assert_error(result, "run_translation", *needles)
    assert not os.path.exists(out)


@case()
def run_translation_parallel_line_without_a_tab(ctx):
    parallel = ctx.path("pairs.tsv")
    with open(parallel, "w", encoding="utf-8") as f:
        f.write("The river runs.\t\u6cb3\u6d41\u3002\nFish swim. \u9c7c\u6e38\u3002\n")
    _translation_refusal(ctx, "%s:2:" % parallel, "expected source<TAB>target",
                         extra=["--parallel_file=%s" % parallel], inputs=[parallel])


@case()
def run_translation_target_language_id_beyond_the_models(ctx):
    _translation_refusal(ctx, "--target_language_id=2", "2 language ids (type_vocab_size)",
                         extra=["--target_language_id=2"])
