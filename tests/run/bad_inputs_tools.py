# coding=utf-8
"""Bad-input cases of the retrieval, conversion and serving scripts (build_index, match, convert_checkpoint, data_service, zero_shot_transfer).

Registered with `bad_inputs_kit.case`; `tests/run/test_bad_inputs.py` runs them.
"""

import os
import shutil

from bad_inputs_kit import _sha256, assert_error, assert_ok, case, run_script  # pylint: disable=unused-import


# ------------------------------------------------------------ build_index

def _faq(ctx, text, name="faq.tsv"):
    path = ctx.path(name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


FAQ = "q1\thow do I reset my password\nq2\twhere is my invoice\nq3\tcan I change my email\n"


def _build_index(ctx, faq, output, *extra, checkpoint=True):
    """build_index.py on `faq` with the tiny model; `result`."""
    args = ["--input_file=%s" % faq, "--output_file=%s" % output,
            "--bert_config_file=%s" % ctx.a.config, "--vocab_file=%s" % ctx.a.vocab,
            "--max_seq_length=16"] + list(extra)
    if checkpoint:
        args.append("--init_checkpoint=%s" % ctx.a.checkpoint)
    return run_script("build_index", args,
                      inputs=[faq, ctx.a.config, ctx.a.vocab, ctx.a.model_dir],
                      outputs=[ctx.dir])


@case()
def build_index_row_without_a_tab(ctx):
    faq = _faq(ctx, "q1\thow do I reset my password\nq2 where is my invoice\n")
    output = ctx.path("out", "faq_index.npz")
    result = _build_index(ctx, faq, output)
    assert_error(result, "build_index", "%s:2:" % faq, "id<TAB>question", "1 column(s)")
    assert not os.path.exists(ctx.path("out"))


@case()
def build_index_duplicate_id(ctx):
    faq = _faq(ctx, FAQ + "q1\thow can I reset the password\n")
    output = ctx.path("out", "faq_index.npz")
    result = _build_index(ctx, faq, output)
    assert_error(result, "build_index", "%s:4:" % faq, "'q1' already used on line 1",
                 "unique ids")
    assert not os.path.exists(ctx.path("out"))


@case()
def build_index_output_file_is_its_input_file(ctx):
    faq = _faq(ctx, FAQ)
    result = _build_index(ctx, faq, faq)  # `inputs`: the questions are unchanged
    assert_error(result, "build_index", "--output_file=%s" % faq, "is also an input",
                 "--input_file")


@case()
def build_index_without_init_checkpoint(ctx):
    """Random weights make an index that every match.py run refuses: required."""
    faq = _faq(ctx, FAQ)
    output = ctx.path("out", "faq_index.npz")
    result = _build_index(ctx, faq, output, checkpoint=False)
    assert_error(result, "build_index", "--init_checkpoint", status=2)
    assert not os.path.exists(ctx.path("out"))


# ------------------------------------------------------------------ match

def _other_checkpoint(ctx):
    """A Google-format checkpoint of the tiny config with other (random) weights."""
    from modeling import bert as config_lib  # pylint: disable=import-outside-toplevel
    from modeling import checkpoints  # pylint: disable=import-outside-toplevel
    from modeling import recipes  # pylint: disable=import-outside-toplevel
    folder = ctx.path("other_model")
    os.makedirs(folder)
    return checkpoints.save_google_checkpoint(
        recipes.build_bert_pretrainer(config_lib.load_bert_config(ctx.a.config)),
        os.path.join(folder, "bert_model.ckpt"))


@case(script="match")
def match_init_checkpoint_is_another_model_than_the_index(ctx):
    """The index of the tiny model, queried through another checkpoint of the same shape."""
    faq = _faq(ctx, FAQ)
    index = ctx.path("index", "faq_index.npz")
    assert_ok(_build_index(ctx, faq, index))
    other = _other_checkpoint(ctx)
    output = ctx.path("out", "matches.jsonl")
    result = run_script("match", [
        "--index_file=%s" % index, "--query=reset my password", "--init_checkpoint=%s" % other,
        "--output_file=%s" % output], inputs=[index, os.path.dirname(other)], outputs=[ctx.dir])
    assert_error(result, "match", index, "another encoder", "probe sentence")
    assert not os.path.exists(ctx.path("out"))
    return index  # unchanged (checked): the index of the cases below


@case()
def match_index_file_is_the_question_file(ctx):
    faq = _faq(ctx, FAQ)
    result = run_script("match", ["--index_file=%s" % faq, "--query=reset my password"],
                        inputs=[faq], outputs=[ctx.dir])
    assert_error(result, "match", faq, "not an index written by build_index.py")


@case(needs=["match_init_checkpoint_is_another_model_than_the_index"])
def match_output_file_is_the_index_file(ctx):
    index = ctx.path("faq_index.npz")
    shutil.copyfile(ctx.result_of("match_init_checkpoint_is_another_model_than_the_index"),
                    index)
    result = run_script("match", [
        "--index_file=%s" % index, "--query=reset my password", "--output_file=%s" % index],
        inputs=[index, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "match", "--output_file=%s" % index, "is also an input",
                 "--index_file")


@case(needs=["match_init_checkpoint_is_another_model_than_the_index"])
def match_top_k_0(ctx):
    index = ctx.result_of("match_init_checkpoint_is_another_model_than_the_index")
    output = ctx.path("out", "matches.jsonl")
    result = run_script("match", ["--index_file=%s" % index, "--query=reset my password",
                                  "--top_k=0", "--output_file=%s" % output],
                        inputs=[index], outputs=[ctx.dir])
    assert_error(result, "match", "--top_k=0", "at least 1")
    assert not os.path.exists(ctx.path("out"))


# ----------------------------------------------------- convert_checkpoint

def _model_copy(ctx):
    """A copy of the tiny Google folder (checkpoint, bert_config.json, vocab.txt)."""
    folder = ctx.path("model")
    shutil.copytree(ctx.a.model_dir, folder)
    shutil.copyfile(ctx.a.config, os.path.join(folder, "bert_config.json"))
    shutil.copyfile(ctx.a.vocab, os.path.join(folder, "vocab.txt"))
    return folder


@case()
def convert_checkpoint_output_dir_holds_files(ctx):
    """A folder of the user's (another export, notes) is not overwritten, nor merged into."""
    folder = _model_copy(ctx)
    out = ctx.path("hf_model")
    os.makedirs(out)
    notes = os.path.join(out, "notes.txt")
    with open(notes, "w") as f:
        f.write("my earlier export\n")
    result = run_script("convert_checkpoint", [
        "--init_checkpoint=%s" % folder, "--output_format=hf", "--output_dir=%s" % out],
        inputs=[folder, out], outputs=[ctx.dir])
    assert_error(result, "convert_checkpoint", "--output_dir=%s" % out, "already holds files",
                 "new or empty folder")
    assert os.listdir(out) == ["notes.txt"]
    assert "Loaded" not in result.stderr, "refused only after loading the model"


@case()
def convert_checkpoint_output_dir_is_its_init_checkpoint_folder(ctx):
    folder = _model_copy(ctx)
    prefix = os.path.join(folder, os.path.basename(ctx.a.checkpoint))
    result = run_script("convert_checkpoint", [
        "--init_checkpoint=%s" % prefix, "--output_format=google", "--output_dir=%s" % folder],
        inputs=[folder], outputs=[ctx.dir])
    assert_error(result, "convert_checkpoint", "--output_dir=%s" % folder,
                 "would overwrite --init_checkpoint=%s" % prefix)


@case()
def convert_checkpoint_init_checkpoint_does_not_exist(ctx):
    """A mistyped checkpoint prefix (``bert_model.ckpt-1`` for ``bert_model.ckpt``)."""
    folder = _model_copy(ctx)
    missing = os.path.join(folder, "bert_model.ckpt-1")
    out = ctx.path("hf_model")
    result = run_script("convert_checkpoint", [
        "--init_checkpoint=%s" % missing, "--output_dir=%s" % out],
        inputs=[folder], outputs=[ctx.dir])
    assert_error(result, "convert_checkpoint", "--init_checkpoint=%s" % missing,
                 "no such file, folder or checkpoint prefix")
    assert not os.path.exists(out)


# ------------------------------------------------------------ data_service

@case()
def data_service_worker_dispatcher_address_without_protocol(ctx):
    result = run_script("data_service", ["--role=worker", "--dispatcher_address=localhost:5050",
                                         "--dispatcher_wait_seconds=0"], timeout=60)
    assert_error(result, "data_service", "--dispatcher_address=localhost:5050",
                 "PROTOCOL://HOST:PORT")


# ------------------------------------------------------ zero_shot_transfer

def _zero_shot_refusal(ctx, flag, *needles):
    """zero_shot_transfer.py with one bad `flag`: refused before anything is written."""
    out = ctx.path("zero_shot")
    result = run_script("zero_shot_transfer", ["--output_dir=%s" % out, flag],
                        outputs=[ctx.dir])
    assert_error(result, "zero_shot_transfer", *needles)
    assert not os.path.exists(out), "refused after writing %s" % os.listdir(out)


@case()
def zero_shot_transfer_language_sampling_alpha_above_1(ctx):
    _zero_shot_refusal(ctx, "--language_sampling_alpha=1.5", "--language_sampling_alpha=1.5",
                       "[0, 1]")


@case()
def zero_shot_transfer_pretrain_steps_0(ctx):
    _zero_shot_refusal(ctx, "--pretrain_steps=0", "--pretrain_steps=0", "positive integer")


@case()
def zero_shot_transfer_num_train_epochs_0(ctx):
    """Found only after both models were pre-trained (minutes) before the fix."""
    _zero_shot_refusal(ctx, "--num_train_epochs=0", "--num_train_epochs=0",
                       "finite positive number")


@case()
def zero_shot_transfer_learning_rate_minus_1(ctx):
    _zero_shot_refusal(ctx, "--learning_rate=-1", "--learning_rate=-1", "finite positive number")
