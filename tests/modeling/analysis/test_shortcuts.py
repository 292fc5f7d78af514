"""Shortcut probing: data/probing/arct.py, data/probing/hans.py, run/analyze_shortcuts.py.

No model: cue statistics against values computed by hand on small data sets,
the ARCT ablation / adversarial writers read back through `ArctProcessor`
(the adversarial set's cues at chance, by the module's own statistics),
the claim negation rules one by one, the HANS templates' structure per
sub-case, and the per-heuristic evaluation against hand-computed accuracies.
"""

import json
import os
import sys

import pytest

import script_runner
from data import processors
from data.probing import arct
from data.probing import hans

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "run", "analyze_shortcuts.py")
# The script's own quiet start is part of what is checked (no TF_CPP_MIN_LOG_LEVEL;
# a real start, fork=False, where standard error is compared line by line).
RUN = dict(capture_output=True, text=True, cwd=ROOT, timeout=300,
           env={k: v for k, v in dict(os.environ, CUDA_VISIBLE_DEVICES="").items()
                if k != "TF_CPP_MIN_LOG_LEVEL"})
ARCT_HEADER = ("#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle"
               "\tdebateInfo")


def write_arct(directory, rows, name="train-full.txt"):
    """rows: (id, warrant0, warrant1, label, reason, claim)."""
    os.makedirs(directory, exist_ok=True)
    lines = [ARCT_HEADER] + ["\t".join(row + ("Title %s" % row[0], "Info %s" % row[0]))
                             for row in rows]
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# "not" occurs in one warrant only in rows 1-5 and is in the correct one in 1-4;
# row 6 has it in both warrants (not applicable).
CUE_ROWS = [
    ("r1", "it is not cheap", "it is cheap", "0", "reason one", "claim one"),
    ("r2", "they do not care", "they care", "0", "reason two", "claim two"),
    ("r3", "people care", "people do not care", "1", "reason three", "claim three"),
    ("r4", "phones are useful", "phones are not useful", "1", "reason four", "claim four"),
    ("r5", "it is not fair", "it is fair", "1", "reason five", "claim five"),
    ("r6", "tests are not fun", "tests are not easy", "0", "reason six", "claim six"),
]


def arct_examples(tmp_path, rows=CUE_ROWS):
    write_arct(str(tmp_path), rows)
    return arct.load_examples(str(tmp_path), "train", "arct")


def by_cue(report):
    return {row["cue"]: row for row in report["cues"]}


def test_arct_cue_statistics_equal_hand_computed_values(tmp_path):
    report = arct.cue_statistics(arct_examples(tmp_path))
    cues = by_cue(report)
    assert report["kind"] == "choice" and report["n"] == 6 and report["chance"] == 0.5
    # alpha, productive, pi, xi computed by hand from CUE_ROWS.
    expected = {
        "not": (5, 4, 0.8, 5 / 6),
        "is not": (2, 1, 0.5, 2 / 6),       # r1 right, r5 wrong
        "not care": (2, 2, 1.0, 2 / 6),     # r2 (warrant0), r3 (warrant1)
        "do not": (2, 2, 1.0, 2 / 6),
        "do": (2, 2, 1.0, 2 / 6),
        "are not": (1, 1, 1.0, 1 / 6),      # r4 only: in both warrants of r6
        "easy": (1, 0, 0.0, 1 / 6),
        "fun": (1, 1, 1.0, 1 / 6),
    }
    for cue, (alpha, productive, pi, xi) in expected.items():
        row = cues[cue]
        assert (row["applicability"], row["productive"]) == (alpha, productive), cue
        assert row["productivity"] == pytest.approx(pi) and row["coverage"] == pytest.approx(xi)
        assert row["order"] == len(cue.split())
    # In both warrants wherever they occur: never applicable.
    for cue in ("care", "cheap", "it", "phones", "useful", "tests are"):
        assert cue not in cues
    # Ranked by productivity, then coverage, then the cue.
    assert [r["cue"] for r in report["cues"][:3]] == ["do", "do not", "not care"]
    assert report["cues"][-1]["productivity"] == 0.0
    # Unigrams only; a threshold on applicability.
    unigrams = arct.cue_statistics(arct_examples(tmp_path), orders=(1,), min_applicability=2)
    assert sorted(r["cue"] for r in unigrams["cues"]) == ["do", "not"]


def test_multiple_choice_and_pair_cues(tmp_path):
    # Three candidates: a cue is applicable when in some but not all of them.
    with open(tmp_path / "train.jsonl", "w") as f:
        f.write(json.dumps({"context": "c", "choices": ["a red x", "a red y", "a blue z"],
                            "label": 0}) + "\n")
        f.write(json.dumps({"context": "c", "choices": ["red", "blue", "green"],
                            "label": 2}) + "\n")
    report = arct.cue_statistics(
        arct.load_examples(str(tmp_path), "train", "multiple_choice"), orders=(1,))
    cues = by_cue(report)
    assert report["chance"] == pytest.approx(1 / 3)
    assert (cues["red"]["applicability"], cues["red"]["productivity"]) == (2, 0.5)
    assert (cues["blue"]["applicability"], cues["blue"]["productivity"]) == (2, 0.0)
    assert (cues["green"]["applicability"], cues["green"]["productivity"]) == (1, 1.0)
    assert "a" not in cues  # in all three candidates, or in none

    # Pairs (generic processor): cues of text_b that are not in text_a.
    with open(tmp_path / "train.tsv", "w") as f:
        f.write("premise\thypothesis\tlabel\n"
                "a man sleeps\ta man does not sleep\tcontradiction\n"
                "a dog runs\tnobody runs\tcontradiction\n"
                "a cat eats\ta cat does not eat fish\tneutral\n"
                "a kid plays\ta kid plays\tentailment\n"
                "a man is not here\ta man is not here\tentailment\n")
    examples = arct.load_examples(str(tmp_path), "train", "generic", text_a_column="premise",
                                  text_b_column="hypothesis", label_column="label")
    report = arct.cue_statistics(examples)
    cues = by_cue(report)
    assert report["kind"] == "pair" and report["n"] == 5
    assert report["chance"] == pytest.approx(1 / 3)
    assert cues["not"]["applicability"] == 2 and cues["not"]["coverage"] == pytest.approx(0.4)
    assert cues["not"]["label_counts"] == {"contradiction": 1, "neutral": 1}
    assert cues["not"]["productivity"] == 0.5 and cues["not"]["label"] == "contradiction"
    assert (cues["nobody"]["productivity"], cues["nobody"]["label"]) == (1.0, "contradiction")
    assert cues["eat fish"]["label"] == "neutral"
    assert "a" not in cues and "man" not in cues and "plays" not in cues

    json_path, tsv_path = arct.write_cues(report, str(tmp_path / "out"), top=3)
    lines = open(tsv_path).read().splitlines()
    assert lines[0].split("\t") == ["rank", "cue", "order", "applicability", "productive",
                                    "productivity", "coverage", "label"]
    assert len(lines) == 4 and lines[1].split("\t")[:2] == ["1", report["cues"][0]["cue"]]
    assert json.load(open(json_path))["cues"] == report["cues"][:3]


def test_ablations_read_back_by_arct_processor(tmp_path):
    data = tmp_path / "arct"
    write_arct(str(data), CUE_ROWS[:3])
    write_arct(str(data), CUE_ROWS[3:], name="dev-full.txt")
    out = tmp_path / "ablations"
    expected_context = {
        "warrant_only": lambda row: "",
        "no_claim": lambda row: row[4],
        "no_reason": lambda row: row[5],
    }
    for ablation, context in expected_context.items():
        counts = arct.write_ablation(str(data), str(out / ablation), ablation)
        assert counts == {"train": 3, "dev": 3}
        processor = processors.ArctProcessor(data_dir=str(out / ablation))
        for split, rows in (("train", CUE_ROWS[:3]), ("dev", CUE_ROWS[3:])):
            examples = getattr(processor, "get_%s_examples" % split)(str(out / ablation))
            assert [e.guid for e in examples] == [r[0] for r in rows]
            assert [e.text_a for e in examples] == [context(r) for r in rows]
            assert [e.choices for e in examples] == [[r[1], r[2]] for r in rows]
            assert [e.label for e in examples] == [r[3] for r in rows]
            assert [e.fields["debateTitle"] for e in examples] == ["Title " + r[0] for r in rows]
    with pytest.raises(ValueError, match="also --data_dir"):
        arct.write_ablation(str(data), str(data), "no_claim")
    with pytest.raises(ValueError, match="unknown ablation"):
        arct.write_ablation(str(data), str(out), "no_warrant")


@pytest.mark.parametrize("claim, negated, rule", [
    ("Google is a harmful monopoly", "Google is not a harmful monopoly", "add_not"),
    ("Schools should not require uniforms", "Schools should require uniforms", "remove_not"),
    ("Comment sections have failed", "Comment sections have not failed", "add_not"),
    ("Russia can be a partner", "Russia cannot be a partner", "add_not"),
    ("Russia cannot be a partner", "Russia can be a partner", "remove_cannot"),
    ("Russia can't be a partner", "Russia can be a partner", "remove_nt"),
    ("Zoos won't survive", "Zoos will survive", "remove_nt"),
    ("Schools shouldn\u2019t ban phones", "Schools should ban phones", "remove_nt"),
    ("Fracking isn't safe", "Fracking is safe", "remove_nt"),
    ("There is no need for zoos", "There is some need for zoos", "no_to_some"),
    ("No schools need uniforms", "Some schools need uniforms", "no_to_some"),
    ("Some workers unionize", "No workers unionize", "some_to_no"),
    ("Not every vote counts", "Every vote counts", "remove_not"),
])
def test_negation_rules(claim, negated, rule):
    assert arct.negate_claim(claim) == (negated, rule)


@pytest.mark.parametrize("claim, reason", [
    ("People have rights", "no_auxiliary"),
    ("Nobody should vote", "other_negation"),
    ("Zoos are no longer needed", "other_negation"),
    ("Voters who can read should vote", "several_auxiliaries"),
    ("It is not true that zoos are not needed", "several_negations"),
    ("Ads don't work and can't work", "several_negations"),
    ("", "empty"),
])
def test_negation_refuses_what_the_rules_do_not_cover(claim, reason):
    assert arct.negate_claim(claim) == (None, reason)


def test_adversarial_set_is_each_negatable_row_then_its_negated_copy(tmp_path):
    # Niven & Kao (IKMLab/arct2 make_adversarial): originals + copies with the
    # claim negated and the label flipped, warrants in their columns.
    rows = [
        ("a1", "w0 of a1", "w1 of a1", "0", "r1", "Google is a harmful monopoly"),
        ("a2", "w0 of a2", "w1 of a2", "1", "r2", "Schools should not require uniforms"),
        ("a3", "w0 of a3", "w1 of a3", "1", "r3", "People have rights"),    # unsupported
        ("a4", "w0 of a4", "w1 of a4", "0", "r4", "Nobody should vote"),    # unsupported
        ("a5", "w0 of a5", "w1 of a5", "1", "r5", "There is no need for zoos"),
    ]
    data, out = tmp_path / "arct", tmp_path / "adv"
    write_arct(str(data), rows)
    write_arct(str(data), rows[2:4], name="dev-full.txt")  # nothing negatable
    report = arct.write_adversarial(str(data), str(out))
    train = report["train"]
    assert (train["rows"], train["negated"], train["unsupported"], train["written"]) == (5, 3, 2, 6)
    assert train["unsupported_reasons"] == {"no_auxiliary": 1, "other_negation": 1}
    assert train["unsupported_ids"] == ["a3", "a4"]
    assert [(u["id"], u["claim"], u["reason"], u["source"].rsplit(":", 1)[1])
            for u in train["unsupported_rows"]] == [
        ("a3", "People have rights", "no_auxiliary", "4"),
        ("a4", "Nobody should vote", "other_negation", "5")]
    assert train["rules"] == {"add_not": 1, "remove_not": 1, "no_to_some": 1}
    assert (report["dev"]["written"], report["dev"]["unsupported"]) == (0, 2)
    assert json.load(open(out / "adversarial_report.json")) == report
    examples = processors.ArctProcessor(data_dir=str(out)).get_train_examples(str(out))
    # Exactly twice the negatable rows; the unsupported ones in neither half.
    assert [e.guid for e in examples] == ["a1", "a2", "a5", "a1-adv", "a2-adv", "a5-adv"]
    originals, copies = examples[:3], examples[3:]
    source = {r[0]: r for r in rows}
    for original, copy in zip(originals, copies):
        row = source[original.guid]
        assert (original.choices, original.label, original.fields["claim"]) == (
            [row[1], row[2]], row[3], row[5])
        assert copy.fields["claim"] == arct.negate_claim(row[5])[0] != row[5]
        assert copy.choices == original.choices          # the warrants stay in their columns
        assert copy.label == str(1 - int(original.label))  # ... and exchange roles:
        assert copy.choices[int(copy.label)] == original.choices[1 - int(original.label)]
        assert copy.fields["reason"] == row[4]
        assert copy.fields["debateTitle"] == original.fields["debateTitle"]
    assert [e.fields["claim"] for e in copies] == [
        "Google is not a harmful monopoly", "Schools should require uniforms",
        "There is some need for zoos"]

    # The copies alone: an option (not balanced, see the next test).
    alone = arct.write_adversarial(str(data), str(tmp_path / "alone"), keep_original=False)
    assert alone["train"]["written"] == 3
    examples = processors.ArctProcessor().get_train_examples(str(tmp_path / "alone"))
    assert [(e.guid, e.label) for e in examples] == [("a1-adv", "1"), ("a2-adv", "0"),
                                                     ("a5-adv", "0")]


# CUE_ROWS with claims the rules negate, and a row whose claim they cannot,
# holding "not" in the right warrant: kept on one side only it would tip "not".
BALANCE_ROWS = [row[:5] + ("Zoos are needed",) for row in CUE_ROWS] + [
    ("r7", "it is not bad", "it is bad", "0", "reason seven", "People have rights")]


def test_adversarial_set_puts_every_warrant_cue_at_chance(tmp_path):
    data, out = tmp_path / "arct", tmp_path / "adv"
    write_arct(str(data), BALANCE_ROWS)
    before = by_cue(arct.cue_statistics(arct.load_examples(str(data), "train", "arct")))
    assert before["not"]["productivity"] == pytest.approx(5 / 6)  # r1-r4 and r7 of r1-r5, r7
    assert {r["productivity"] for r in before.values()} != {0.5}
    report = arct.write_adversarial(str(data), str(out))["train"]
    assert report["unsupported_ids"] == ["r7"] and report["written"] == 12
    after = arct.cue_statistics(arct.load_examples(str(out), "train", "arct"))
    cues = by_cue(after)
    assert after["n"] == 12 and set(cues) >= set(before) - {"bad", "is bad", "not bad"}
    # Every cue of the warrants: once right, once wrong.
    assert {r["productivity"] for r in after["cues"]} == {0.5}
    assert (cues["not"]["applicability"], cues["not"]["productive"]) == (10, 5)
    assert cues["not"]["coverage"] == pytest.approx(10 / 12)
    assert "bad" not in cues  # r7: in neither half
    assert report["cue_balance"]["written"] == {
        "n": 12, "cues": len(cues), "unbalanced": 0, "max_productivity": 0.5, "cue": "not",
        "applicability": 10, "productivity": 0.5}
    original = report["cue_balance"]["original"]
    assert (original["n"], original["applicability"]) == (7, 6)
    assert original["productivity"] == pytest.approx(5 / 6)
    assert original["unbalanced"] == sum(1 for r in before.values() if r["productivity"] != 0.5)
    # The copies alone only mirror the cues: "not" 4/5 -> 1/5.
    alone = arct.write_adversarial(str(data), str(tmp_path / "alone"), keep_original=False)
    mirrored = by_cue(arct.cue_statistics(
        arct.load_examples(str(tmp_path / "alone"), "train", "arct")))
    assert mirrored["not"]["productivity"] == pytest.approx(1 / 5)
    assert alone["train"]["cue_balance"]["written"]["unbalanced"] > 0


def test_script_writes_the_adversarial_set_and_reports_it(tmp_path):
    data, out = tmp_path / "arct", tmp_path / "adv"
    write_arct(str(data), BALANCE_ROWS)
    done = script_runner.run([sys.executable, SCRIPT, "--mode=arct_adversarial",
                              "--data_dir=%s" % data, "--output_dir=%s" % out], **RUN)
    assert done.returncode == 0, done.stderr
    report = json.load(open(out / "adversarial_report.json"))["train"]
    assert done.stdout.splitlines() == [
        'train-full.txt: 7 rows, 6 negated, 1 unsupported {"no_auxiliary": 1}, 12 written',
        "  claims not negated, rows left out: r7",
        '  original %d cues, %d off chance; "not" productivity 0.833'
        % (report["cue_balance"]["original"]["cues"],
           report["cue_balance"]["original"]["unbalanced"]),
        '  written  %d cues, 0 off chance; "not" productivity 0.500'
        % report["cue_balance"]["written"]["cues"]]
    assert [e.guid for e in processors.ArctProcessor().get_train_examples(str(out))] == [
        "r1", "r2", "r3", "r4", "r5", "r6", "r1-adv", "r2-adv", "r3-adv", "r4-adv", "r5-adv",
        "r6-adv"]
    done = script_runner.run([sys.executable, SCRIPT, "--mode=arct_adversarial",
                              "--nokeep_original", "--data_dir=%s" % data,
                              "--output_dir=%s" % (tmp_path / "alone")], **RUN)
    assert done.returncode == 0, done.stderr
    assert "1 unsupported" in done.stdout and "6 written" in done.stdout


# ------------------------------------------------------------------ HANS


def contiguous(sub, seq):
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def sub_at(sub, seq):
    return [i for i in range(len(seq) - len(sub) + 1) if seq[i:i + len(sub)] == sub]


def _preceded_by(ex, operators):
    """The hypothesis is a clause of the premise right after one of `operators`."""
    p, h = hans.words(ex.premise), hans.words(ex.hypothesis)
    assert h == ex.parts["clause"]
    starts = sub_at(h, p)
    assert len(starts) == 1 and starts[0] > 0
    if p[starts[0] - 1] == "that":
        return p[starts[0] - 2] in operators
    return p[starts[0] - 1] in operators


L = hans.LEXICON
# Per sub-case: the structure that makes the label hold (premise words p,
# hypothesis words h, parts x).
STRUCTURE = {
    "ln_subject/object_swap": lambda p, h, x: h == x["object"] + [p[2]] + x["subject"]
    and p == x["subject"] + [p[2]] + x["object"] and x["subject"] != x["object"],
    "ln_preposition": lambda p, h, x: p[2] in L["prepositions"]
    and h == x["object"] + [p[5]] + x["pp_noun"],
    "ln_relative_clause": lambda p, h, x: p[2] == "who" and h[:2] == x["rc_subject"]
    and h[2] == x["main_verb"] == p[6],
    "ln_passive": lambda p, h, x: p[2:5:2] == ["was", "by"] and h == x["patient"] + [p[3]]
    + x["agent"],
    "ln_conjunction": lambda p, h, x: p[2] == "and" and h == x["patient"] + [p[5]]
    + x["agents"][1],
    "le_relative_clause": lambda p, h, x: h == x["rc_subject"] + [x["rc_verb"]] + x["head"]
    and p[:3] == x["head"] + ["who"],
    "le_around_prepositional_phrase": lambda p, h, x: h == p[:2] + p[5:],
    "le_around_relative_clause": lambda p, h, x: h == p[:2] + p[6:] and p[2] == "who",
    "le_passive": lambda p, h, x: p[2:5:2] == ["was", "by"] and h == x["agent"] + [p[3]]
    + x["patient"],
    "le_conjunction": lambda p, h, x: h == p[:2] + p[5:] and p[2] == "and",
    "sn_NP/S": lambda p, h, x: h == p[:5] and p[2] in L["np_or_clause"] and len(p) == 8,
    "sn_PP_on_subject": lambda p, h, x: h == p[3:] and p[2] in L["prepositions"],
    "sn_relative_clause_on_subject": lambda p, h, x: h == p[4:] and p[2] == "who",
    "sn_past_participle": lambda p, h, x: h == p[:-1] and p[3] == "in"
    and p[-1] in L["intransitive"],
    "sn_NP/Z": lambda p, h, x: h == p[1:6] and p[0] in L["garden_subordinators"]
    and p[3] in L["optionally_transitive"] and p[-1] in L["intransitive"],
    "se_adjective": lambda p, h, x: h == p[1:] and p[0] in L["adjectives"],
    "se_conjunction": lambda p, h, x: p[2] == "and" and h == p[3:] == x["agents"][1]
    + [p[5]] + x["patient"],
    "se_understood_object": lambda p, h, x: p == h + x["object"],
    "se_relative_clause_on_obj": lambda p, h, x: p == h + ["who", p[-1]],
    "se_PP_on_obj": lambda p, h, x: p[:5] == h and p[5] in L["prepositions"],
    "cn_embedded_under_if": lambda p, h, x: p[0] == "if" and p[1:1 + len(h)] == h,
    "cn_after_if_clause": lambda p, h, x: p[0] == "unless" and p[-len(h):] == h,
    "cn_embedded_under_verb": lambda p, h, x: _preceded_by(x["ex"], L["nonfactive"]),
    "cn_disjunction": lambda p, h, x: "or" in p and h in x["conjuncts"],
    "cn_adverb": lambda p, h, x: p[0] in L["nonveridical_adverbs"] and p[1:] == h,
    "ce_embedded_under_since": lambda p, h, x: p[0] in L["veridical_subordinators"]
    and p[1:1 + len(h)] == h,
    "ce_after_since_clause": lambda p, h, x: p[0] in L["veridical_subordinators"]
    and p[-len(h):] == h,
    "ce_embedded_under_verb": lambda p, h, x: _preceded_by(x["ex"], L["factive"]),
    "ce_conjunction": lambda p, h, x: "and" in p and h in x["conjuncts"],
    "ce_adverb": lambda p, h, x: p[0] in L["veridical_adverbs"] and p[1:] == h,
}


def test_hans_templates_build_the_intended_pairs():
    examples = hans.generate(per_template=20, seed=3)
    assert len(examples) == 30 * 20 and set(STRUCTURE) == set(hans.TEMPLATES)
    assert [e.premise for e in hans.generate(20, seed=3)] == [e.premise for e in examples]
    assert [e.premise for e in hans.generate(20, seed=4)] != [e.premise for e in examples]
    for heuristic in hans.HEURISTICS:
        labels = [e.label for e in examples if e.heuristic == heuristic]
        assert labels.count(hans.ENTAILMENT) == labels.count(hans.NON_ENTAILMENT) == 100
    for ex in examples:
        p, h = hans.words(ex.premise), hans.words(ex.hypothesis)
        assert ex.premise.endswith(".") and ex.premise[0].isupper() and p != h
        # Every pair satisfies its heuristic ...
        assert set(h) <= set(p), ex
        if ex.heuristic == "lexical_overlap":
            assert not contiguous(h, p), ex  # ... and lexical overlap only that one
        else:
            assert contiguous(h, p), ex
        assert ex.label == (hans.ENTAILMENT if ex.subcase[1] == "e" else hans.NON_ENTAILMENT)
        assert STRUCTURE[ex.subcase](p, h, dict(ex.parts, ex=ex)), ex
    assert len({(e.premise, e.hypothesis) for e in examples}) == len(examples)
    sample = {e.subcase: (e.premise, e.hypothesis) for e in examples}
    assert sample["ln_passive"][0].split()[2:4] == ["was", sample["ln_passive"][1].split()[2]]
    with pytest.raises(ValueError, match="unknown HANS sub-case"):
        hans.generate(2, subcases=["ln_nothing"])


def test_hans_files_read_back(tmp_path):
    examples = hans.generate(per_template=2, seed=0)
    hans_path, mnli_path = hans.write_hans(examples, str(tmp_path))
    back = hans.read_hans(hans_path)
    assert [(e.premise, e.hypothesis, e.label, e.heuristic, e.subcase, e.template)
            for e in back] == [(e.premise, e.hypothesis, e.label, e.heuristic, e.subcase,
                                e.template) for e in examples]
    mnli = processors.MnliProcessor().get_test_examples(str(tmp_path))
    assert [(e.text_a, e.text_b) for e in mnli] == [(e.premise, e.hypothesis) for e in examples]
    generic = processors.GenericProcessor(
        data_dir=str(tmp_path), text_a_column="sentence1", text_b_column="sentence2",
        label_column="gold_label", labels=["entailment", "non-entailment"],
        test_file="hans.tsv").get_test_examples(str(tmp_path))
    assert [e.label for e in generic] == [e.label for e in examples]


def test_evaluate_hans_on_hand_made_predictions(tmp_path):
    def ex(heuristic, label, subcase):
        return hans.HansExample("x", "p", "h", label, heuristic, subcase, "t")
    E, N = hans.ENTAILMENT, hans.NON_ENTAILMENT
    examples = [ex("lexical_overlap", E, "le_passive"), ex("lexical_overlap", E, "le_passive"),
                ex("lexical_overlap", N, "ln_passive"), ex("subsequence", N, "sn_NP/S"),
                ex("subsequence", N, "sn_NP/S"), ex("subsequence", E, "se_adjective"),
                ex("constituent", N, "cn_adverb")]
    predictions = ["entailment", "neutral", "contradiction", "entailment", "neutral",
                   "entailment", "non-entailment"]
    result = hans.evaluate_hans(predictions, examples)
    assert result["overall"] == {"accuracy": 5 / 7, "correct": 5, "count": 7}
    acc = {h: {label: cell["accuracy"] for label, cell in cells.items()}
           for h, cells in result["by_heuristic"].items()}
    assert acc == {"lexical_overlap": {E: 0.5, N: 1.0}, "subsequence": {E: 1.0, N: 0.5},
                   "constituent": {N: 1.0}}
    assert result["by_subcase"]["sn_NP/S"]["accuracy"] == 0.5
    path = hans.write_evaluation(result, str(tmp_path / "out" / "hans_results.json"))
    assert json.load(open(path)) == json.loads(json.dumps(result))
    # The same from run_classifier's test_results.tsv (MNLI's label order).
    rows = {"contradiction": "0.7\t0.2\t0.1", "entailment": "0.1\t0.8\t0.1",
            "neutral": "0.2\t0.3\t0.5", "non-entailment": "0.6\t0.3\t0.1"}
    (tmp_path / "test_results.tsv").write_text("\n".join(rows[p] for p in predictions) + "\n")
    read = hans.read_predictions(str(tmp_path / "test_results.tsv"))
    assert hans.evaluate_hans(read, examples) == dict(result)
    with pytest.raises(ValueError, match="7 predictions for 6 examples"):
        hans.evaluate_hans(predictions, examples[:6])
    with pytest.raises(ValueError, match="prediction 0: 'yes' is not an NLI label"):
        hans.evaluate_hans(["yes"], examples[:1])
    (tmp_path / "bad.tsv").write_text("0.1\t0.9\t0.0\n0.5\t0.5\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: 2 columns, expected one probability"):
        hans.read_predictions(str(tmp_path / "bad.tsv"))


def test_script_generates_and_refuses_bad_input_in_one_line(tmp_path):
    out = tmp_path / "hans"
    done = script_runner.run([sys.executable, SCRIPT, "--mode=hans_generate", "--per_template=1",
                           "--output_dir=%s" % out], **RUN)
    assert done.returncode == 0, done.stderr
    assert "30 pairs" in done.stdout
    examples = hans.read_hans(str(out / "hans.tsv"))
    assert [(e.premise, e.hypothesis, e.label) for e in examples] == [
        (e.premise, e.hypothesis, e.label) for e in hans.generate(1, seed=0)]
    assert os.path.isfile(out / "test_matched.tsv")
    (tmp_path / "short.tsv").write_text("0.1\t0.8\t0.1\n")
    done = script_runner.run([sys.executable, SCRIPT, "--mode=hans_evaluate", "--input=%s" % out,
                           "--predictions_file=%s" % (tmp_path / "short.tsv"),
                           "--output_dir=%s" % out], fork=False, **RUN)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "analyze_shortcuts: error: --predictions_file=%s has 1 rows, --input=%s 30 examples: "
        "predict exactly that file" % (tmp_path / "short.tsv", out / "hans.tsv")]
