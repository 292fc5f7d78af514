# coding=utf-8
"""Bad-input cases of the analysis and inspection scripts (analyze_attention, analyze_shortcuts, probe_cloze, prune_heads, compare_models, predict_masked).

Registered with `bad_inputs_kit.case`; `tests/run/test_bad_inputs.py` runs them.
"""

import os
import shutil

from bad_inputs_kit import assert_error, case, run_script  # pylint: disable=unused-import


def _model_flags(ctx, config=None, checkpoint=None):
    return ["--bert_config_file=%s" % (config or ctx.a.config), "--vocab_file=%s" % ctx.a.vocab,
            "--init_checkpoint=%s" % (checkpoint or ctx.a.checkpoint)]


def _model_copy(ctx):
    """A copy of the tiny checkpoint folder with its bert_config.json: (config, prefix)."""
    folder = ctx.path("model")
    shutil.copytree(ctx.a.model_dir, folder)
    config = os.path.join(folder, "bert_config.json")
    shutil.copyfile(ctx.a.config, config)
    return folder, config, os.path.join(folder, os.path.basename(ctx.a.checkpoint))


# ------------------------------------------------------------ analyze_attention

def _analyze_attention(ctx, mode, text, *extra):
    path = ctx.path("input.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    out = ctx.path("out")
    result = run_script("analyze_attention", [
        "--mode=%s" % mode, "--input_file=%s" % path, "--output_dir=%s" % out] +
        _model_flags(ctx) + list(extra),
        inputs=[path, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    return result, path, out


@case()
def analyze_attention_probe_line_without_a_tag(ctx):
    result, path, out = _analyze_attention(
        ctx, "probe", "The DT\nriver\nruns VBZ\n\nFish NN\nswim VBP\n")
    assert_error(result, "analyze_attention", "%s:2:" % path, "a token and its tag", "'river'")
    assert not os.path.exists(out)


@case()
def analyze_attention_max_seq_length_beyond_the_model(ctx):
    result, _, out = _analyze_attention(ctx, "stats", "The river runs.\nFish swim.\n",
                                        "--max_seq_length=64")
    assert_error(result, "analyze_attention", "--max_seq_length=64",
                 "max_position_embeddings=32", ctx.a.config)
    assert not os.path.exists(out)


# ------------------------------------------------------------ analyze_shortcuts

ARCT_HEADER = ("#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\t"
               "debateInfo\n")


def _arct_dir(ctx):
    """ARCT files whose train file is good and whose dev file has a label 2 on line 3."""
    data = ctx.path("arct")
    os.makedirs(data)
    with open(os.path.join(data, "train-full.txt"), "w") as f:
        f.write(ARCT_HEADER +
                "1\tit is not safe\tit is safe\t0\tcars are fast\tspeed limits are needed\tt\ti\n"
                "2\tthey can pay\tthey cannot pay\t1\tcosts rise\tschools should be free\tt\ti\n")
    with open(os.path.join(data, "dev-full.txt"), "w") as f:
        f.write(ARCT_HEADER +
                "3\tit is cheap\tit is dear\t1\tprices fall\ttrains are good\tt\ti\n"
                "4\tit is old\tit is new\t2\tthey last\thouses should stay\tt\ti\n")
    return data


def _arct_dev_label_case(mode):
    def fn(ctx):
        data = _arct_dir(ctx)
        out = ctx.path("out")
        result = run_script("analyze_shortcuts", [
            "--mode=%s" % mode, "--data_dir=%s" % data, "--output_dir=%s" % out],
            inputs=[data], outputs=[ctx.dir])
        assert_error(result, "analyze_shortcuts", os.path.join(data, "dev-full.txt") + ":3:",
                     "correctLabelW0orW1 '2'")
        # The good train file's output is not written either.
        assert not os.path.exists(out), sorted(os.walk(out))
    fn.__name__ = "analyze_shortcuts_%s_bad_label_in_the_dev_file" % mode
    return case()(fn)


_arct_dev_label_case("arct_ablations")
_arct_dev_label_case("arct_adversarial")


@case()
def analyze_shortcuts_arct_cues_ngram_order_0(ctx):
    data = _arct_dir(ctx)
    out = ctx.path("out")
    result = run_script("analyze_shortcuts", [
        "--mode=arct_cues", "--data_dir=%s" % data, "--ngram_orders=1,0",
        "--output_dir=%s" % out], inputs=[data], outputs=[ctx.dir])
    assert_error(result, "analyze_shortcuts", "--ngram_orders=1,0", "positive integers")
    assert not os.path.exists(out)


@case()
def analyze_shortcuts_hans_generate_per_template_0(ctx):
    out = ctx.path("hans")
    result = run_script("analyze_shortcuts", [
        "--mode=hans_generate", "--per_template=0", "--output_dir=%s" % out])
    assert_error(result, "analyze_shortcuts", "--per_template=0", status=2)
    assert not os.path.exists(out)


@case()
def analyze_shortcuts_hans_predictions_of_another_file(ctx):
    hans_dir = ctx.path("hans")
    os.makedirs(hans_dir)
    hans_tsv = os.path.join(hans_dir, "hans.tsv")
    with open(hans_tsv, "w") as f:
        f.write("gold_label\tsentence1\tsentence2\tpairID\theuristic\tsubcase\ttemplate\n"
                "entailment\tThe cat slept .\tThe cat slept .\tex0\tlexical_overlap\tln_x\tt1\n"
                "non-entailment\tThe cat saw the dog .\tThe dog saw the cat .\tex1\t"
                "lexical_overlap\tln_subject/object_swap\tt2\n"
                "entailment\tThe dog ran .\tThe dog ran .\tex2\tlexical_overlap\tln_x\tt1\n")
    predictions = ctx.path("test_results.tsv")  # of a two-example file
    with open(predictions, "w") as f:
        f.write("0.9\t0.1\n0.2\t0.8\n")
    out = ctx.path("eval")
    result = run_script("analyze_shortcuts", [
        "--mode=hans_evaluate", "--input=%s" % hans_dir, "--predictions_file=%s" % predictions,
        "--output_dir=%s" % out], inputs=[hans_dir, predictions], outputs=[ctx.dir])
    assert_error(result, "analyze_shortcuts", "--predictions_file=%s has 2 rows" % predictions,
                 "--input=%s 3 examples" % hans_tsv)
    assert not os.path.exists(out)


# ------------------------------------------------------------------ probe_cloze

@case()
def probe_cloze_fact_without_an_answer_column(ctx):
    facts = ctx.path("facts.tsv")
    with open(facts, "w", encoding="utf-8") as f:
        f.write("The river is [MASK].\twet\nThe sky is [MASK]. blue\n")
    output = ctx.path("out", "cloze.json")
    result = run_script("probe_cloze", _model_flags(ctx) + [
        "--facts_file=%s" % facts, "--output_file=%s" % output],
        inputs=[facts, ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    assert_error(result, "probe_cloze", "%s:2:" % facts, "1 tab-separated columns",
                 "statement<TAB>answer")
    assert not os.path.exists(ctx.path("out"))


@case()
def probe_cloze_output_file_is_the_models_config(ctx):
    folder, config, prefix = _model_copy(ctx)
    facts = ctx.path("facts.tsv")
    with open(facts, "w", encoding="utf-8") as f:
        f.write("The river is [MASK].\twet\n")
    result = run_script("probe_cloze", _model_flags(ctx, config, prefix) + [
        "--facts_file=%s" % facts, "--output_file=%s" % config],
        inputs=[folder, facts, ctx.a.vocab], outputs=[ctx.dir])
    assert_error(result, "probe_cloze", "--output_file=%s" % config, "is also an input",
                 "--bert_config_file")
    assert not os.path.exists(os.path.join(folder, "cloze.png"))


# ------------------------------------------------------------------ prune_heads

def _prune_heads(ctx, *extra):
    out = ctx.path("pruned")
    result = run_script("prune_heads", _model_flags(ctx) + [
        "--max_seq_length=16", "--output_dir=%s" % out] + list(extra),
        inputs=[ctx.a.vocab, ctx.a.config, ctx.a.model_dir], outputs=[ctx.dir])
    return result, out


@case()
def prune_heads_head_beyond_the_layers_heads(ctx):
    result, out = _prune_heads(ctx, "--heads_to_prune=0:1,0:2")
    assert_error(result, "prune_heads", "--heads_to_prune", "0:2", "head 2 is out of range",
                 "heads 0..1")
    assert not os.path.exists(out)


@case()
def prune_heads_prune_fraction_without_labelled_data(ctx):
    result, out = _prune_heads(ctx, "--prune_fraction=0.5")
    assert_error(result, "prune_heads", "--prune_fraction", "labelled data", "--data_dir")
    assert not os.path.exists(out)


# --------------------------------------------------------------- compare_models

def _compare_refusal(ctx, flag, *needles, status=1):
    out = ctx.path("compare")
    result = run_script("compare_models", ["--output_dir=%s" % out, flag], outputs=[ctx.dir])
    assert_error(result, "compare_models", *needles, status=status)
    assert not os.path.exists(out)  # refused before the task is written


@case()
def compare_models_unknown_model(ctx):
    _compare_refusal(ctx, "--models=bert,gpt2", "--models", "unknown model(s) gpt2",
                     "bert,elmo,ulmfit,siatl,cove")


@case()
def compare_models_no_models(ctx):
    _compare_refusal(ctx, "--models=", "--models", "none given")


@case()
def compare_models_same_model_twice(ctx):
    _compare_refusal(ctx, "--models=bert,elmo,bert", "--models", "bert twice")


@case()
def compare_models_pretrain_steps_0(ctx):
    _compare_refusal(ctx, "--pretrain_steps=0", "--pretrain_steps=0", status=2)


@case()
def compare_models_num_train_epochs_0(ctx):
    # Unchecked, every model pre-trained for minutes before its fine-tuning failed.
    _compare_refusal(ctx, "--num_train_epochs=0", "--num_train_epochs", status=2)


# --------------------------------------------------------------- predict_masked

@case()
def predict_masked_output_file_is_the_checkpoints_index(ctx):
    folder, config, prefix = _model_copy(ctx)
    index = prefix + ".index"
    result = run_script("predict_masked", _model_flags(ctx, config, prefix) + [
        "--text=the river [MASK]", "--output_file=%s" % index],
        inputs=[folder, ctx.a.vocab], outputs=[ctx.dir])
    assert_error(result, "predict_masked", "--output_file=%s" % index, "is also an input",
                 "--init_checkpoint=%s" % prefix)
    assert "[MASK] at" not in result.stdout, result.stdout
