"""HANS-style probing of NLI models (McCoy, Pavlick & Linzen 2019), with an own lexicon.

McCoy et al. ("Right for the Wrong Reasons", ACL 2019) named three
heuristics an NLI model trained on MNLI may have learnt instead of inference:

* **lexical overlap**: assume a premise entails every hypothesis built from
  its words ("The doctor saw the lawyer" -> "The lawyer saw the doctor"; here
  the hypothesis is never a contiguous subsequence, so the heuristics stay apart);
* **subsequence**: ... every contiguous subsequence of it ("The doctor near
  the actor danced" -> "The actor danced");
* **constituent**: ... every complete subtree of its parse ("If the doctor
  slept, the actor danced" -> "The doctor slept").

Each heuristic is probed by sub-cases (templates) where the heuristic's
answer is right (entailed) and where it is wrong (non-entailed): a model that
relies on the heuristic scores near 100% on the former and near 0% on the
latter. This module generates such pairs from templates over a small lexicon
of its own (`LEXICON`: nouns, transitive / intransitive / clause-taking
verbs, adjectives, adverbs, prepositions, locations, subordinators), seeded
(`generate(per_template, seed)`), with the sub-case names of the HANS release
(``ln_subject/object_swap``, ``sn_NP/S``, ``ce_adverb``, ...): 15
non-entailed and 15 entailed templates, 5 + 5 per heuristic. Every pair
satisfies its heuristic by construction (the hypothesis' words are all in the
premise; for subsequence and constituent they are a contiguous part of it;
for constituent a whole clause), and its label follows from how the
template combines the parts (role swaps, passives, embedding under "if" /
"believed that" / "perhaps" vs "since" / "knew that" / "certainly"); the
chosen parts are kept on the example (`HansExample.parts`) for checks.

Files (`write_hans`):

* ``hans.tsv``: HANS's columns ``gold_label`` (entailment / non-entailment),
  ``sentence1``, ``sentence2``, ``pairID``, ``heuristic``, ``subcase``,
  ``template`` (the release's parse columns are left out). `read_hans`
  reads this file and the HANS release itself (columns found by name).
  ``run_classifier --task_name=generic --text_a_column=sentence1
  --text_b_column=sentence2 --label_column=gold_label
  --labels=entailment,non-entailment --test_file=hans.tsv`` reads it as a
  two-class task.
* ``test_matched.tsv``: the same pairs in MNLI's GLUE layout (sentence1 and
  sentence2 in columns 9 and 10, gold_label last), so a model fine-tuned
  on MNLI predicts them with ``run_classifier --task_name=mnli --do_predict
  --data_dir=<this directory>``.

`evaluate_hans(predictions, examples)` scores predictions (labels, or rows of
class probabilities with their label list, e.g. run_classifier's
``test_results.tsv``) per heuristic x gold label and per sub-case. A 3-way
prediction of ``neutral`` or ``contradiction`` counts as non-entailment.
"""

import collections
import json
import os
import random
import re

from data import atomic
from data.processors.base import DataError
from data.processors.base import DataProcessor

__all__ = ["ENTAILMENT", "NON_ENTAILMENT", "HEURISTICS", "LEXICON", "TEMPLATES",
           "HansExample", "generate", "write_hans", "read_hans", "read_predictions",
           "evaluate_hans", "write_evaluation", "words"]

ENTAILMENT = "entailment"
NON_ENTAILMENT = "non-entailment"
HEURISTICS = ("lexical_overlap", "subsequence", "constituent")
MNLI_LABELS = ("contradiction", "entailment", "neutral")

LEXICON = {
    # Regular plurals (+s) only: se_adjective uses bare plurals.
    "nouns": ("doctor", "lawyer", "artist", "student", "senator", "judge", "athlete",
              "banker", "author", "manager", "scientist", "president", "tourist", "actor",
              "professor", "dancer"),
    # Past tense = past participle (for passives and reduced relatives).
    "transitive": ("helped", "called", "admired", "recommended", "avoided", "thanked",
                   "encouraged", "supported", "contacted", "mentioned", "visited",
                   "watched"),
    "intransitive": ("slept", "waited", "laughed", "danced", "arrived", "smiled", "shouted",
                     "resigned", "ran", "stumbled"),
    # Take a noun phrase or a clause: "knew the athlete" / "knew the athlete left".
    "np_or_clause": ("knew", "believed", "forgot", "heard", "remembered", "suspected"),
    # Transitive or intransitive, for garden paths: "Since the doctor visited the ...".
    "optionally_transitive": ("visited", "called", "watched", "paid", "helped"),
    # Verb + its usual object, for understood objects: "read the book" -> "read".
    "understood_object": (("read", "book"), ("wrote", "letter"), ("studied", "report"),
                          ("painted", "picture"), ("cooked", "meal"), ("sang", "song"),
                          ("baked", "cake"), ("drew", "map"), ("played", "game")),
    "object_adjectives": ("old", "new", "long", "short", "famous", "simple", "strange",
                          "small"),
    "adjectives": ("happy", "famous", "tall", "old", "young", "quiet", "smart", "rich"),
    "prepositions": ("near", "behind", "beside"),
    "locations": ("office", "museum", "library", "hospital", "park"),
    # Clause-embedding verbs: factive (the clause is true) and not.
    "factive": ("knew", "forgot", "learned", "realized", "remembered", "noticed"),
    "nonfactive": ("believed", "hoped", "thought", "claimed", "suspected", "imagined"),
    # Sentence adverbs: the clause is asserted, or not.
    "veridical_adverbs": ("certainly", "clearly", "obviously", "definitely", "undoubtedly"),
    "nonveridical_adverbs": ("perhaps", "maybe", "probably", "supposedly", "hopefully"),
    # Subordinators whose clause is asserted (since ...), for ce_* templates.
    "veridical_subordinators": ("since", "because", "although", "after"),
    # Subordinators of the NP/Z garden path (the clause ends without a comma).
    "garden_subordinators": ("since", "while", "after", "before", "because"),
}


class HansExample(object):
    """One premise/hypothesis pair with its heuristic, sub-case, template and label."""

    __slots__ = ("pair_id", "premise", "hypothesis", "label", "heuristic", "subcase",
                 "template", "parts")

    def __init__(self, pair_id, premise, hypothesis, label, heuristic, subcase, template,
                 parts=None):
        self.pair_id = pair_id
        self.premise = premise
        self.hypothesis = hypothesis
        self.label = label
        self.heuristic = heuristic
        self.subcase = subcase
        self.template = template
        self.parts = dict(parts or {})

    def __repr__(self):
        return "HansExample(%r, %r -> %r, %s, %s)" % (
            self.pair_id, self.premise, self.hypothesis, self.label, self.subcase)


def words(sentence):
    """The lower-cased words of a sentence (punctuation dropped), for checks."""
    return re.findall(r"[a-z]+", sentence.lower())


def _sentence(tokens):
    """Tokens (with "," as its own token) -> a capitalised sentence ending in "."."""
    text = " ".join(tokens).replace(" ,", ",")
    return text[:1].upper() + text[1:] + "."


class _Picker(object):
    """Draws lexicon entries for one pair; nouns never repeat within a pair."""

    def __init__(self, rng):
        self.rng = rng
        self.used = set()

    def __call__(self, category):
        return self.rng.choice(LEXICON[category])

    def noun(self):
        choices = [n for n in LEXICON["nouns"] if n not in self.used]
        noun = self.rng.choice(choices)
        self.used.add(noun)
        return noun

    def np(self):
        return ["the", self.noun()]

    def clause(self):
        """A simple clause: "the doctor slept" or "the doctor helped the lawyer"."""
        if self.rng.random() < 0.5:
            return self.np() + [self("intransitive")]
        return self.np() + [self("transitive")] + self.np()


# Each template: pick -> (premise tokens, hypothesis tokens, parts).


def _ln_subject_object_swap(p):
    subj, verb, obj = p.np(), p("transitive"), p.np()
    return subj + [verb] + obj, obj + [verb] + subj, {"subject": subj, "object": obj}


def _ln_preposition(p):
    n1, prep, n2, verb, n3 = p.np(), p("prepositions"), p.np(), p("transitive"), p.np()
    return n1 + [prep] + n2 + [verb] + n3, n3 + [verb] + n2, {"head": n1, "pp_noun": n2,
                                                                "object": n3}


def _ln_relative_clause(p):
    n1, n2, v1, v2, n3 = p.np(), p.np(), p("transitive"), p("transitive"), p.np()
    return (n1 + ["who"] + n2 + [v1, v2] + n3, n2 + [v2] + n3,
            {"head": n1, "rc_subject": n2, "main_verb": v2})


def _ln_passive(p):
    n1, verb, n2 = p.np(), p("transitive"), p.np()
    return n1 + ["was", verb, "by"] + n2, n1 + [verb] + n2, {"patient": n1, "agent": n2}


def _ln_conjunction(p):
    n1, n2, verb, n3 = p.np(), p.np(), p("transitive"), p.np()
    return n1 + ["and"] + n2 + [verb] + n3, n3 + [verb] + n2, {"agents": [n1, n2],
                                                                "patient": n3}


def _le_relative_clause(p):
    n1, n2, v1, v2, n3 = p.np(), p.np(), p("transitive"), p("transitive"), p.np()
    return (n1 + ["who"] + n2 + [v1, v2] + n3, n2 + [v1] + n1,
            {"head": n1, "rc_subject": n2, "rc_verb": v1})


def _le_around_prepositional_phrase(p):
    n1, prep, n2, verb, n3 = p.np(), p("prepositions"), p.np(), p("transitive"), p.np()
    return n1 + [prep] + n2 + [verb] + n3, n1 + [verb] + n3, {"head": n1, "pp_noun": n2}


def _le_around_relative_clause(p):
    n1, v1, n2, v2, n3 = p.np(), p("transitive"), p.np(), p("transitive"), p.np()
    return (n1 + ["who", v1] + n2 + [v2] + n3, n1 + [v2] + n3,
            {"head": n1, "rc_object": n2, "main_verb": v2})


def _le_passive(p):
    n1, verb, n2 = p.np(), p("transitive"), p.np()
    return n1 + ["was", verb, "by"] + n2, n2 + [verb] + n1, {"patient": n1, "agent": n2}


def _le_conjunction(p):
    n1, n2, verb, n3 = p.np(), p.np(), p("transitive"), p.np()
    # The first conjunct: with the second the hypothesis would be a subsequence.
    return n1 + ["and"] + n2 + [verb] + n3, n1 + [verb] + n3, {"agents": [n1, n2],
                                                                "patient": n3}


def _sn_np_s(p):
    n1, verb, n2, v2, n3 = p.np(), p("np_or_clause"), p.np(), p("transitive"), p.np()
    return n1 + [verb] + n2 + [v2] + n3, n1 + [verb] + n2, {"clause": n2 + [v2] + n3}


def _sn_pp_on_subject(p):
    n1, prep, n2, verb = p.np(), p("prepositions"), p.np(), p("intransitive")
    return n1 + [prep] + n2 + [verb], n2 + [verb], {"head": n1, "pp_noun": n2}


def _sn_relative_clause_on_subject(p):
    n1, v1, n2, verb = p.np(), p("transitive"), p.np(), p("intransitive")
    return n1 + ["who", v1] + n2 + [verb], n2 + [verb], {"head": n1, "rc_object": n2}


def _sn_past_participle(p):
    n1, participle, place, verb = p.np(), p("optionally_transitive"), p("locations"), \
        p("intransitive")
    reduced = n1 + [participle, "in", "the", place]
    return reduced + [verb], reduced, {"head": n1, "participle": participle}


def _sn_np_z(p):
    sub, n1, verb, n2, v2 = (p("garden_subordinators"), p.np(), p("optionally_transitive"),
                             p.np(), p("intransitive"))
    return [sub] + n1 + [verb] + n2 + [v2], n1 + [verb] + n2, {"subordinate": n1 + [verb],
                                                                "main": n2 + [v2]}


def _se_adjective(p):
    adj, noun, verb, n2 = p("adjectives"), p.noun() + "s", p("transitive"), p.np()
    return [adj, noun, verb] + n2, [noun, verb] + n2, {"adjective": adj}


def _se_conjunction(p):
    # "The actor and the doctor saw the judge" -> "The doctor saw the judge".
    n1, n2, verb, n3 = p.np(), p.np(), p("transitive"), p.np()
    return n1 + ["and"] + n2 + [verb] + n3, n2 + [verb] + n3, {"agents": [n1, n2],
                                                                "patient": n3}


def _se_understood_object(p):
    n1 = p.np()
    verb, obj = p.rng.choice(LEXICON["understood_object"])
    adjective = p.rng.choice((None,) + LEXICON["object_adjectives"])
    obj = ["the"] + ([adjective] if adjective else []) + [obj]
    return n1 + [verb] + obj, n1 + [verb], {"object": obj}


def _se_relative_clause_on_obj(p):
    n1, verb, n2, v2 = p.np(), p("transitive"), p.np(), p("intransitive")
    return n1 + [verb] + n2 + ["who", v2], n1 + [verb] + n2, {"object": n2}


def _se_pp_on_obj(p):
    n1, verb, n2, prep, n3 = p.np(), p("transitive"), p.np(), p("prepositions"), p.np()
    return n1 + [verb] + n2 + [prep] + n3, n1 + [verb] + n2, {"object": n2}


def _cn_embedded_under_if(p):
    c1, c2 = p.clause(), p.clause()
    return ["if"] + c1 + [","] + c2, c1, {"operator": "if", "clause": c1}


def _cn_after_if_clause(p):
    c1, c2 = p.clause(), p.clause()
    return ["unless"] + c1 + [","] + c2, c2, {"operator": "unless", "clause": c2}


def _cn_embedded_under_verb(p):
    n1, verb, c1 = p.np(), p("nonfactive"), p.clause()
    return n1 + [verb, "that"] + c1, c1, {"operator": verb, "clause": c1}


def _cn_disjunction(p):
    c1, c2 = p.clause(), p.clause()
    return c1 + [",", "or"] + c2, p.rng.choice([c1, c2]), {"operator": "or",
                                                            "conjuncts": [c1, c2]}


def _cn_adverb(p):
    adverb, c1 = p("nonveridical_adverbs"), p.clause()
    return [adverb] + c1, c1, {"operator": adverb, "clause": c1}


def _ce_embedded_under_since(p):
    sub, c1, c2 = p("veridical_subordinators"), p.clause(), p.clause()
    return [sub] + c1 + [","] + c2, c1, {"operator": sub, "clause": c1}


def _ce_after_since_clause(p):
    sub, c1, c2 = p("veridical_subordinators"), p.clause(), p.clause()
    return [sub] + c1 + [","] + c2, c2, {"operator": sub, "clause": c2}


def _ce_embedded_under_verb(p):
    n1, verb, c1 = p.np(), p("factive"), p.clause()
    return n1 + [verb, "that"] + c1, c1, {"operator": verb, "clause": c1}


def _ce_conjunction(p):
    c1, c2 = p.clause(), p.clause()
    return c1 + [",", "and"] + c2, p.rng.choice([c1, c2]), {"operator": "and",
                                                             "conjuncts": [c1, c2]}


def _ce_adverb(p):
    adverb, c1 = p("veridical_adverbs"), p.clause()
    return [adverb] + c1, c1, {"operator": adverb, "clause": c1}


# (heuristic, sub-case, builder); the label is in the sub-case's second letter.
_TEMPLATE_LIST = (
    ("lexical_overlap", "ln_subject/object_swap", _ln_subject_object_swap),
    ("lexical_overlap", "ln_preposition", _ln_preposition),
    ("lexical_overlap", "ln_relative_clause", _ln_relative_clause),
    ("lexical_overlap", "ln_passive", _ln_passive),
    ("lexical_overlap", "ln_conjunction", _ln_conjunction),
    ("lexical_overlap", "le_relative_clause", _le_relative_clause),
    ("lexical_overlap", "le_around_prepositional_phrase", _le_around_prepositional_phrase),
    ("lexical_overlap", "le_around_relative_clause", _le_around_relative_clause),
    ("lexical_overlap", "le_passive", _le_passive),
    ("lexical_overlap", "le_conjunction", _le_conjunction),
    ("subsequence", "sn_NP/S", _sn_np_s),
    ("subsequence", "sn_PP_on_subject", _sn_pp_on_subject),
    ("subsequence", "sn_relative_clause_on_subject", _sn_relative_clause_on_subject),
    ("subsequence", "sn_past_participle", _sn_past_participle),
    ("subsequence", "sn_NP/Z", _sn_np_z),
    ("subsequence", "se_adjective", _se_adjective),
    ("subsequence", "se_conjunction", _se_conjunction),
    ("subsequence", "se_understood_object", _se_understood_object),
    ("subsequence", "se_relative_clause_on_obj", _se_relative_clause_on_obj),
    ("subsequence", "se_PP_on_obj", _se_pp_on_obj),
    ("constituent", "cn_embedded_under_if", _cn_embedded_under_if),
    ("constituent", "cn_after_if_clause", _cn_after_if_clause),
    ("constituent", "cn_embedded_under_verb", _cn_embedded_under_verb),
    ("constituent", "cn_disjunction", _cn_disjunction),
    ("constituent", "cn_adverb", _cn_adverb),
    ("constituent", "ce_embedded_under_since", _ce_embedded_under_since),
    ("constituent", "ce_after_since_clause", _ce_after_since_clause),
    ("constituent", "ce_embedded_under_verb", _ce_embedded_under_verb),
    ("constituent", "ce_conjunction", _ce_conjunction),
    ("constituent", "ce_adverb", _ce_adverb),
)

# subcase -> (heuristic, label, template id, builder)
TEMPLATES = collections.OrderedDict(
    (subcase, (heuristic, ENTAILMENT if subcase[1] == "e" else NON_ENTAILMENT,
               "temp%d" % (i + 1), builder))
    for i, (heuristic, subcase, builder) in enumerate(_TEMPLATE_LIST))


def generate(per_template=100, seed=0, subcases=None):
    """`per_template` distinct pairs of every template (or of `subcases`), seeded.

    Returns a list of `HansExample`s, template by template; the same seed
    gives the same list.
    """
    if isinstance(per_template, bool) or not isinstance(per_template, int) or per_template < 1:
        raise ValueError("per_template must be a positive integer, got %r" % (per_template,))
    subcases = list(subcases or TEMPLATES)
    for subcase in subcases:
        if subcase not in TEMPLATES:
            raise ValueError("unknown HANS sub-case %r (expected one of %s)"
                             % (subcase, ", ".join(TEMPLATES)))
    rng = random.Random(seed)
    examples = []
    for subcase in subcases:
        heuristic, label, template, builder = TEMPLATES[subcase]
        seen = set()
        attempts = 0
        while len(seen) < per_template:
            attempts += 1
            if attempts > 50 * per_template + 1000:
                raise ValueError("the lexicon gives only %d distinct %s pairs, fewer than %d"
                                 % (len(seen), subcase, per_template))
            premise, hypothesis, parts = builder(_Picker(rng))
            pair = (_sentence(premise), _sentence(hypothesis))
            if pair in seen:
                continue
            seen.add(pair)
            examples.append(HansExample("ex%d" % len(examples), pair[0], pair[1], label,
                                        heuristic, subcase, template, parts))
    return examples


HANS_COLUMNS = ("gold_label", "sentence1", "sentence2", "pairID", "heuristic", "subcase",
                "template")
MNLI_COLUMNS = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                "sentence2", "label1", "gold_label")


def write_hans(examples, output_dir):
    """Writes ``hans.tsv`` and ``test_matched.tsv`` (see the module docstring); returns the paths."""
    hans_lines = ["\t".join(HANS_COLUMNS)]
    mnli_lines = ["\t".join(MNLI_COLUMNS)]
    for i, ex in enumerate(examples):
        hans_lines.append("\t".join((ex.label, ex.premise, ex.hypothesis, ex.pair_id,
                                     ex.heuristic, ex.subcase, ex.template)))
        mnli_lines.append("\t".join((str(i), str(i), ex.pair_id, "hans", "", "", "", "",
                                     ex.premise, ex.hypothesis, ex.label, ex.label)))
    hans_path = os.path.join(output_dir, "hans.tsv")
    mnli_path = os.path.join(output_dir, "test_matched.tsv")
    atomic.write_text(hans_path, "\n".join(hans_lines) + "\n")
    atomic.write_text(mnli_path, "\n".join(mnli_lines) + "\n")
    return hans_path, mnli_path


def read_hans(path):
    """`HansExample`s of a HANS TSV (this module's ``hans.tsv`` or the HANS release)."""
    rows = DataProcessor._read_tsv(path)  # pylint: disable=protected-access
    if not rows:
        raise DataError("%s: empty; expected a header with %s" % (path, ", ".join(HANS_COLUMNS)))
    header = [name.strip() for name in rows[0]]
    needed = ("gold_label", "sentence1", "sentence2", "heuristic", "subcase")
    missing = [name for name in needed if name not in header]
    if missing:
        raise DataError("%s:%d: the header has no column %s (expected HANS's columns %s)"
                        % (path, rows[0].line_number, ", ".join(missing),
                           ", ".join(HANS_COLUMNS)))
    examples = []
    for row in rows[1:]:
        if len(row) != len(header):
            raise DataError("%s: %d columns, but the header has %d" % (row.location, len(row),
                                                                      len(header)))
        fields = dict(zip(header, row))
        label = fields["gold_label"].strip()
        if label not in (ENTAILMENT, NON_ENTAILMENT):
            raise DataError("%s: gold_label %r is not %s or %s"
                            % (row.location, label, ENTAILMENT, NON_ENTAILMENT))
        examples.append(HansExample(fields.get("pairID", "line%d" % row.line_number),
                                    fields["sentence1"], fields["sentence2"], label,
                                    fields["heuristic"].strip(), fields["subcase"].strip(),
                                    fields.get("template", "").strip()))
    return examples


def read_predictions(path, label_list=None):
    """Predicted labels from run_classifier's ``test_results.tsv`` (class probabilities).

    Args:
      label_list: the classifier's labels in column order; default MNLI's
        (contradiction, entailment, neutral) for three columns and
        (entailment, non-entailment) -- the generic processor's sorted
        order -- for two.
    """
    rows = DataProcessor._read_tsv(path)  # pylint: disable=protected-access
    if not rows:
        raise DataError("%s: no predictions" % path)
    width = len(rows[0])
    if label_list is None:
        defaults = {3: MNLI_LABELS, 2: (ENTAILMENT, NON_ENTAILMENT)}
        if width not in defaults:
            raise DataError("%s:%d: %d columns of probabilities; give the label list "
                            "(--label_list) for them" % (path, rows[0].line_number, width))
        label_list = defaults[width]
    label_list = list(label_list)
    predictions = []
    for row in rows:
        if len(row) != len(label_list):
            raise DataError("%s: %d columns, expected one probability per label (%s)"
                            % (row.location, len(row), ", ".join(label_list)))
        try:
            values = [float(v) for v in row]
        except ValueError:
            raise DataError("%s: not a row of numbers: %r" % (row.location, "\t".join(row))) \
                from None
        predictions.append(label_list[max(range(len(values)), key=values.__getitem__)])
    return predictions


def _binary(label, index):
    value = str(label).strip().lower()
    if value == ENTAILMENT:
        return ENTAILMENT
    if value in (NON_ENTAILMENT, "neutral", "contradiction", "not_entailment"):
        return NON_ENTAILMENT
    raise ValueError("prediction %d: %r is not an NLI label (entailment, non-entailment, "
                     "neutral, contradiction, not_entailment)" % (index, label))


def _accuracy(correct, count):
    return {"accuracy": correct / count if count else None, "correct": correct,
            "count": count}


def evaluate_hans(predictions, examples):
    """Accuracy per heuristic x gold label, per sub-case and overall.

    Args:
      predictions: one predicted label per example, in order (3-way labels
        are folded: neutral/contradiction -> non-entailment).
      examples: the `HansExample`s predicted.

    Returns:
      ``{"overall": {...}, "by_heuristic": {heuristic: {label: {...}}},
      "by_subcase": {subcase: {...}}}``, each ``{...}`` holding
      ``accuracy``, ``correct`` and ``count``.
    """
    predictions, examples = list(predictions), list(examples)
    if len(predictions) != len(examples):
        raise ValueError("%d predictions for %d examples: they must be one per example, in "
                         "order" % (len(predictions), len(examples)))
    cells = collections.defaultdict(lambda: [0, 0])
    subcases = collections.defaultdict(lambda: [0, 0])
    total = [0, 0]
    for i, (prediction, ex) in enumerate(zip(predictions, examples)):
        right = int(_binary(prediction, i) == ex.label)
        for counter in (cells[(ex.heuristic, ex.label)], subcases[ex.subcase], total):
            counter[0] += right
            counter[1] += 1
    by_heuristic = {}
    for (heuristic, label), (correct, count) in sorted(cells.items()):
        by_heuristic.setdefault(heuristic, {})[label] = _accuracy(correct, count)
    return {"overall": _accuracy(*total),
            "by_heuristic": by_heuristic,
            "by_subcase": {s: _accuracy(*v) for s, v in sorted(subcases.items())}}


def write_evaluation(result, path):
    """Writes `evaluate_hans`'s result as JSON, atomically."""
    atomic.write_text(path, json.dumps(result, indent=1, sort_keys=True) + "\n")
    return path
