# coding=utf-8
"""Cloze knowledge probing (modeling/analysis/cloze.py, run/probe_cloze.py).

The hand-checkable model: a tiny BERT whose MLM transform LayerNorm has
gamma = beta = 0, so the head's input is zero and its logits are exactly the
output bias at every [MASK], whatever the statement says. With the bias set
by the test, every probability and rank is known in closed form.
"""

import itertools
import json
import math
import os
import re
import sys

import keras
import numpy as np
import pytest

import script_runner
from data import tokenization
from modeling import bert as config_lib
from modeling import recipes
from modeling.analysis import cloze

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLOZE_DIR = os.path.join(REPO_ROOT, "data", "sample", "cloze")

# Output-bias logits; every other token has logit 0.
BIAS_EN = {u"honey": 6.0, u"hive": 5.0, u"field": 4.0, u"yeast": -30.0}
BIAS_ZH = {u"蜂": 6.0, u"蜜": 5.0}


@pytest.fixture(scope="module")
def tiny(sample_vocab_file):
    tokenizer = tokenization.FullTokenizer(sample_vocab_file, do_lower_case=True)
    config = config_lib.BertConfig(
        vocab_size=len(tokenizer.vocab), hidden_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
        type_vocab_size=2)
    keras.utils.set_random_seed(5)
    model = recipes.build_bert_pretrainer(config)
    head = model.get_objective("masked_lm").head
    norm = head.transform_layer_norm
    norm.gamma.assign(np.zeros(norm.gamma.shape, np.float32))
    norm.beta.assign(np.zeros(norm.beta.shape, np.float32))
    return config, tokenizer, model


def _set_bias(model, tokenizer, biases):
    """Sets the MLM output bias; returns the closed-form probabilities.

    ``({token: e^b / Z}, 1 / Z)`` with Z = sum of e^b over the boosted tokens
    + the number of the others (logit 0): the probability of every token.
    """
    bias = np.zeros([len(tokenizer.vocab)], np.float32)
    for token, value in biases.items():
        bias[tokenizer.vocab[token]] = value
    model.get_objective("masked_lm").head.output_bias.assign(bias)
    z = sum(math.exp(v) for v in biases.values()) + len(tokenizer.vocab) - len(biases)
    return {token: math.exp(v) / z for token, v in biases.items()}, 1.0 / z


def _facts(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def test_precision_at_1_and_10_on_the_hand_made_model(tiny, tmp_path):
    _, tokenizer, model = tiny
    p, rest = _set_bias(model, tokenizer, BIAS_EN)
    path = _facts(tmp_path / "facts.tsv", [
        u"# comment line",
        u"Bees turn nectar into [MASK].\thoney\tanimals",      # rank 1
        u"Bees carry it to the [MASK].\thive\tanimals",         # rank 2
        u"",
        u"The cows walk to the [MASK].\tfield\tfarming",        # rank 3
        u"Bread needs flour and [MASK].\tyeast\tcooking",       # last: not in top 10
        u"The baker opens at [MASK].\tsix",                     # rank > 10 (ties at 0 logit)
        u"The sign is [MASK].\t\u2603\u2603\tnames",                    # [UNK]: skipped
    ])
    facts = cloze.read_facts(path)
    assert [f.line for f in facts] == [2, 3, 5, 6, 7, 8]
    assert facts[4].relation == cloze.DEFAULT_RELATION
    report = cloze.probe(model, tokenizer, facts, path=path, max_seq_length=32, batch_size=2)
    ranks = [r["rank"] for r in report["facts"]]
    # "six" has logit 0 like 2571 others, ties broken by smaller id: its rank is
    # 4 + the number of logit-0 tokens with smaller ids -- beyond 10 here.
    six = tokenizer.vocab[u"six"]
    zero_before = sum(1 for i in range(six) if tokenizer.inv_vocab[i] not in BIAS_EN)
    assert zero_before + 4 > 10
    assert ranks == [1, 2, 3, None, None]
    assert report["num_facts"] == 5
    assert [(s["line"], s["answer"]) for s in report["skipped"]] == [(8, u"\u2603\u2603")]
    assert "[UNK]" in report["skipped"][0]["reason"]
    assert report["precision_at_1"] == pytest.approx(1 / 5)
    assert report["precision_at_10"] == pytest.approx(3 / 5)
    assert report["mean_reciprocal_rank"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 5)
    assert report["per_relation"] == {
        "-": {"num_facts": 1, "precision_at_1": 0.0, "precision_at_10": 0.0},
        "animals": {"num_facts": 2, "precision_at_1": 0.5, "precision_at_10": 1.0},
        "cooking": {"num_facts": 1, "precision_at_1": 0.0, "precision_at_10": 0.0},
        "farming": {"num_facts": 1, "precision_at_1": 0.0, "precision_at_10": 1.0}}
    first = report["facts"][0]
    assert first["answer_probability"] == pytest.approx(p[u"honey"], rel=1e-4)
    assert [c["answer"] for c in first["predictions"][:3]] == [u"honey", u"hive", u"field"]
    assert len(first["predictions"]) == 10
    np.testing.assert_allclose([c["probability"] for c in first["predictions"][:4]],
                               [p[u"honey"], p[u"hive"], p[u"field"], rest], rtol=1e-4)
    assert report["facts"][3]["answer_probability"] == pytest.approx(p[u"yeast"], rel=1e-3)


def test_multi_piece_answers_widen_one_mask_and_score_the_product(tiny, tmp_path):
    _, tokenizer, model = tiny
    p, rest = _set_bias(model, tokenizer, BIAS_EN)
    # A one-word answer of several word pieces, and a two-word answer.
    word = u"honeys"
    pieces = tokenizer.tokenize(word)
    assert len(pieces) >= 2 and pieces[0] == u"honey", pieces
    path = _facts(tmp_path / "multi.tsv", [
        u"They make [MASK] all year.\thoney honey",      # widened to 2 masks: rank 1
        u"They make [MASK] [MASK] all year.\thive honey",  # written out: ties with honey hive
        u"They make [MASK] all year.\thoney hive",
        u"They make [MASK] today.\t%s" % word,
    ])
    facts = cloze.read_facts(path)
    tokens, positions, answer = cloze.prepare_fact(facts[0], tokenizer, 32, path)
    assert answer == [u"honey", u"honey"]
    assert [tokens[i] for i in positions] == ["[MASK]", "[MASK]"]
    assert positions[1] == positions[0] + 1
    report = cloze.probe(model, tokenizer, facts, path=path, max_seq_length=32)
    ranks = [r["rank"] for r in report["facts"]]
    # (honey, hive) and (hive, honey) have the same product; the smaller id first.
    honey_first = tokenizer.vocab[u"honey"] < tokenizer.vocab[u"hive"]
    assert ranks[:3] == [1, 3 if honey_first else 2, 2 if honey_first else 3]
    assert report["facts"][1]["answer_probability"] == pytest.approx(
        p[u"hive"] * p[u"honey"], rel=1e-4)
    assert report["facts"][0]["predictions"][0]["answer"] == u"honey honey"
    # honey ##s: the second piece has logit 0, so the answer is honey x (rest).
    assert report["facts"][3]["answer_probability"] == pytest.approx(
        p[u"honey"] * rest, rel=1e-4)


def test_chinese_answers_are_one_mask_per_character(tiny, tmp_path):
    _, tokenizer, model = tiny
    p, _ = _set_bias(model, tokenizer, BIAS_ZH)
    path = _facts(tmp_path / "zh.tsv", [
        u"蜜蜂把花蜜酿成[MASK][MASK]。\t蜂蜜\tanimals",
        u"蜜蜂把花蜜酿成[MASK]。\t蜂蜜\tanimals",   # one mask widened to two characters
        u"这是[MASK]。\t蜂\tanimals",
    ])
    report = cloze.probe(model, tokenizer, cloze.read_facts(path), path=path, max_seq_length=32)
    first, widened, single = report["facts"]
    assert first["answer_pieces"] == [u"蜂", u"蜜"]
    assert first["predictions"][0]["answer"] == u"蜂蜂"  # CJK joined without a space
    ids_first = tokenizer.vocab[u"蜂"] < tokenizer.vocab[u"蜜"]
    assert first["rank"] == (2 if ids_first else 3)
    assert widened["rank"] == first["rank"]
    assert first["answer_probability"] == pytest.approx(p[u"蜂"] * p[u"蜜"], rel=1e-4)
    assert single["rank"] == 1
    assert report["precision_at_1"] == pytest.approx(1 / 3)
    assert report["precision_at_10"] == 1.0


def test_top_k_products_equals_brute_force():
    rng = np.random.RandomState(0)
    probs = rng.dirichlet(np.ones(9) * 0.5, size=3)
    every = sorted(((ids, float(np.prod([probs[i, t] for i, t in enumerate(ids)])))
                    for ids in itertools.product(range(9), repeat=3)),
                   key=lambda c: (-c[1], c[0]))
    got = cloze.top_k_products(probs, 10)
    assert [ids for ids, _ in got] == [ids for ids, _ in every[:10]]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in every[:10]], rtol=1e-12)


@pytest.mark.parametrize("line,expected", [
    (u"no tab here", r"^{path}:2: 1 tab-separated columns; expected statement<TAB>answer"),
    (u"a [MASK]\tb\tc\td", r"^{path}:2: 4 tab-separated columns"),
    (u"no mask\tanswer", r"^{path}:2: the statement has no \[MASK\]"),
    (u"a [MASK]\t \trel", r"^{path}:2: empty answer"),
])
def test_bad_lines_are_one_line_errors_with_file_and_line(tmp_path, line, expected):
    path = _facts(tmp_path / "bad.tsv", [u"fine [MASK].\tok", line])
    with pytest.raises(cloze.ClozeError) as raised:
        cloze.read_facts(path)
    message = str(raised.value)
    assert "\n" not in message
    assert re.match(expected.format(path=re.escape(path)), message), message


def test_mask_count_and_length_errors(tiny, tmp_path):
    _, tokenizer, _ = tiny
    path = _facts(tmp_path / "f.tsv", [u"[MASK] [MASK] [MASK] x\thoney hive",
                                       u"the [MASK] " + u"the " * 40 + u"\thoney"])
    facts = cloze.read_facts(path)
    with pytest.raises(cloze.ClozeError, match=r"^%s:1: 3 \[MASK\] in the statement but the "
                       r"answer 'honey hive' has 2 word pieces" % path):
        cloze.prepare_fact(facts[0], tokenizer, 32, path)
    with pytest.raises(cloze.ClozeError, match=r"^%s:2: 44 word pieces .* exceed "
                       r"--max_seq_length=32" % path):
        cloze.prepare_fact(facts[1], tokenizer, 32, path)
    empty = _facts(tmp_path / "empty.tsv", [u"# nothing"])
    with pytest.raises(cloze.ClozeError, match=r"^%s: no facts" % empty):
        cloze.read_facts(empty)


def test_a_file_of_no_usable_fact_is_an_error(tiny, tmp_path):
    _, tokenizer, _ = tiny
    path = _facts(tmp_path / "unk.tsv", [u"# every answer is [UNK]",
                                         u"The sign is [MASK].\t\u2603\u2603",
                                         u"It snows [MASK].\t\u2603"])
    with pytest.raises(cloze.ClozeError) as error:
        cloze.usable_facts(cloze.read_facts(path), tokenizer, 32, path)
    assert str(error.value).startswith(
        "%s: no usable fact: the answers of all 2 facts have a word piece outside the "
        "vocabulary ([UNK]), so none can be predicted (e.g. line 2: " % path), str(error.value)
    good = _facts(tmp_path / "good.tsv", [u"Bees make [MASK].\thoney",
                                          u"The sign is [MASK].\t\u2603\u2603"])
    prepared, skipped = cloze.usable_facts(cloze.read_facts(good), tokenizer, 32, good)
    assert [p[0].line for p in prepared] == [1] and [s["line"] for s in skipped] == [2]


def test_bundled_fact_files_are_well_formed(tiny):
    _, tokenizer, _ = tiny
    for name, count in ((u"en.tsv", 20), (u"zh.tsv", 20)):
        path = os.path.join(CLOZE_DIR, name)
        facts = cloze.read_facts(path)
        assert len(facts) == count
        for fact in facts:
            _, _, pieces = cloze.prepare_fact(fact, tokenizer, 64, path)
            assert tokenization.UNK_TOKEN not in pieces, fact


def test_probe_cloze_script_on_a_google_checkpoint(tiny, tmp_path, sample_vocab_file):
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    config, tokenizer, model = tiny
    _set_bias(model, tokenizer, BIAS_ZH)
    model_dir = tmp_path / "tiny"
    model_dir.mkdir()
    config.to_json_file(str(model_dir / "bert_config.json"))
    prefix = checkpoints.save_google_checkpoint(model, str(model_dir / "bert_model.ckpt"))
    facts_file = os.path.join(CLOZE_DIR, "zh.tsv")
    out = tmp_path / "report.json"
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "probe_cloze.py"),
         "--bert_config_file=%s" % (model_dir / "bert_config.json"),
         "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
         "--facts_file=%s" % facts_file, "--output_file=%s" % out],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "P@1" in result.stdout
    assert os.path.getsize(tmp_path / "cloze.png") > 0  # --plot (default) beside --output_file
    with open(out, encoding="utf-8") as f:
        written = json.load(f)
    expected = cloze.probe(model, tokenizer, cloze.read_facts(facts_file), path=facts_file)
    assert written["init_checkpoint"] == prefix
    assert [r["rank"] for r in written["facts"]] == [r["rank"] for r in expected["facts"]]
    assert written["precision_at_10"] == pytest.approx(expected["precision_at_10"])
    # The only correct 1-character answers under this model: none is 蜂, so P@1 is 0.
    assert written["precision_at_1"] == 0.0
    bad = tmp_path / "bad.tsv"
    bad.write_text(u"ok [MASK].\tok\nbroken line\n", encoding="utf-8")
    result = script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "probe_cloze.py"),
         "--bert_config_file=%s" % (model_dir / "bert_config.json"),
         "--vocab_file=%s" % sample_vocab_file, "--init_checkpoint=%s" % prefix,
         "--facts_file=%s" % bad],
        capture_output=True, text=True, timeout=180,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "probe_cloze: error: %s:2: 1 tab-separated columns; expected "
        "statement<TAB>answer[<TAB>relation]" % bad)
