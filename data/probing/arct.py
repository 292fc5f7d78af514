"""Cue analysis (Niven & Kao 2019) and ARCT's ablation and adversarial data sets.

Niven & Kao, "Probing Neural Network Comprehension of Natural Language
Arguments" (ACL 2019), found that BERT's 77% on the Argument Reasoning
Comprehension Task came from cues: words such as "not" that occur in one
warrant but not the other and are, more often than not, in the right one.

**Cue statistics** (`cue_statistics`). For a cue k (a unigram or bigram of
the lower-cased word tokens, `tokenize`) and n labelled data points:

* multiple choice (ARCT, SWAG, the JSON-lines format: `ChoiceExample`s):
  k is *applicable* to a data point when it occurs in at least one candidate
  but not in all of them; applicability alpha_k counts those data points;
  productivity pi_k is the fraction of them in which k occurs in the correct
  candidate; coverage xi_k = alpha_k / n. With two candidates this is Niven &
  Kao's definition (k in one warrant but not the other).
* sentence pairs (`InputExample(text_a, text_b, label)`, e.g. MNLI through
  the GLUE or generic processors): k is applicable when it occurs in text_b
  (the hypothesis) but not in text_a -- the hypothesis-only cues ("not",
  "nobody" in contradictions); single sentences (no text_b): when it occurs
  in text_a. Productivity is the share of the most frequent label among the
  applicable data points, and that label is reported with the cue.

A cue is worth a look when its productivity is well above chance (1 / number
of candidates or labels) and its coverage large. Cues are ranked by
productivity, then coverage, then the cue itself.

**Ablations** (`write_ablation`): ARCT's TSV files with columns emptied --
``warrant_only`` (no claim, no reason), ``no_claim`` (reason + warrants),
``no_reason`` (claim + warrants) -- in the same layout, so ``run_classifier
--task_name=arct --data_dir=<output>`` trains on them unchanged. A model that
does as well without the claim and reason cannot be using them.

**Adversarial data set** (`write_adversarial`, Niven & Kao section 4, as
their code IKMLab/arct2 builds it): for every row, a copy with the claim
negated and the label flipped -- the warrants stay in their columns, but
the alternative warrant, with the same reason, is the one that supports the
negated claim, so the two warrants exchange roles. The set is the original
rows *plus* their copies: every warrant cue (say "not" in warrant0) then
occurs once in the correct warrant and once in the wrong one, its
productivity is exactly 1/2, and a model that learnt the cues is at chance.
The copies alone (``keep_original=False``) only mirror the cues (a cue of
productivity 0.8 becomes 0.2, which a model could as well learn); that is
an option, not the default. The negation is a small rule-based one
(`negate_claim`); a row it cannot negate is left out of *both* halves (kept
on the original side only it would unbalance the cues again) and reported:
count, reason and id, in the returned report and ``adversarial_report.json``,
next to the cue balance of the data set before and after (`cue_balance`).

The rules, tried in this order:

1. Any negation other than those below ("never", "nobody", "nothing",
   "none", "nowhere", "neither", "nor", "no one", "no longer", "no more",
   "no matter", "ain't") -> unsupported (``other_negation``).
2. Two or more of "not", "cannot", "no" and "n't" -> unsupported
   (``several_negations``: which one to remove is a guess).
3. One "not" -> removed ("is not a" -> "is a"; ``remove_not``); "cannot" ->
   "can" (``remove_cannot``); a "n't" contraction -> the auxiliary
   ("isn't" -> "is", "don't" -> "do", "can't" -> "can", "won't" -> "will",
   "shan't" -> "shall"; ``remove_nt``); the determiner "no" -> "some"
   ("there is no need" -> "there is some need"; ``no_to_some``).
4. No negation: the claim's auxiliary -- a form of "be", a modal (can,
   could, may, might, must, shall, should, will, would) or "have"/"has"/
   "had" before a participle (a word ending in -ed or -en, or "been") -- gets
   a "not" after it ("is" -> "is not", "can" -> "cannot"; ``add_not``);
   two or more auxiliaries -> unsupported (``several_auxiliaries``: the
   main clause's cannot be told from a relative clause's).
5. No auxiliary: one "some" -> "no" ("some workers unionize" -> "no
   workers unionize"; ``some_to_no``); otherwise unsupported
   (``no_auxiliary``: negating a lexical verb needs do-support and
   morphology the rules do not attempt).

Capitalisation of a replaced first word is kept ("No schools" -> "Some
schools"). Curly apostrophes count as apostrophes.
"""

import collections
import json
import os
import re

from data import atomic
from data.processors.base import DataError
from data.processors.choice import ArctProcessor
from data.processors.choice import ChoiceExample

__all__ = ["ABLATIONS", "ARCT_LABEL_COLUMN", "tokenize", "ngrams", "cue_statistics",
           "write_cues", "load_examples", "negate_claim", "write_ablation",
           "write_adversarial", "cue_balance", "SPLITS"]

SPLITS = ("train", "dev", "test")
ARCT_LABEL_COLUMN = ArctProcessor.LABEL_COLUMN

# The columns each ablation empties.
ABLATIONS = {
    "warrant_only": ("claim", "reason"),
    "no_claim": ("claim",),
    "no_reason": ("reason",),
}

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def tokenize(text):
    """Lower-cased word tokens; punctuation dropped, "don't" one token."""
    return [w.replace("\u2019", "'") for w in _WORD.findall((text or "").lower())]


def ngrams(tokens, order):
    """The set of `order`-grams of `tokens`, each a space-joined string."""
    return {" ".join(tokens[i:i + order]) for i in range(len(tokens) - order + 1)}


def _cue_sets(text, orders):
    tokens = tokenize(text)
    cues = set()
    for order in orders:
        cues |= ngrams(tokens, order)
    return cues


def _check_orders(orders):
    orders = tuple(orders)
    if not orders or any(isinstance(o, bool) or not isinstance(o, int) or o < 1
                         for o in orders):
        raise ValueError("ngram orders must be positive integers, got %r" % (orders,))
    return orders


def cue_statistics(examples, orders=(1, 2), min_applicability=1):
    """Applicability, productivity and coverage of every cue (see the module docstring).

    Args:
      examples: `ChoiceExample`s (multiple choice) or `InputExample`s (pairs
        or single sentences), all of one kind. Unlabelled examples are skipped
        (and counted).
      orders: n-gram orders of the cues (1 = unigrams, 2 = bigrams).
      min_applicability: cues applicable to fewer data points are left out.

    Returns:
      a dict: ``kind`` ("choice" or "pair"), ``n`` (labelled data points),
      ``skipped_unlabeled``, ``chance`` (1 / candidates or labels) and
      ``cues``: a ranked list of dicts ``cue``, ``order``, ``applicability``,
      ``productive`` (count), ``productivity``, ``coverage`` (pairs also
      ``label``, the cue's most frequent label, and ``label_counts``).
    """
    orders = _check_orders(orders)
    examples = list(examples)
    kinds = {isinstance(e, ChoiceExample) for e in examples}
    if len(kinds) > 1:
        raise ValueError("cue_statistics: a mix of multiple-choice and pair examples")
    kind = "choice" if kinds == {True} else "pair"
    applicable = collections.Counter()
    productive = collections.Counter()
    label_counts = collections.defaultdict(collections.Counter)
    labels_seen = set()
    num_choices = None
    n = skipped = 0
    for example in examples:
        if example.label is None or str(example.label).strip() == "":
            skipped += 1
            continue
        n += 1
        label = str(example.label)
        if kind == "choice":
            num_choices = len(example.choices)
            try:
                correct = int(label)
            except ValueError:
                raise DataError("%s: the label %r is not a candidate index"
                                % (example.describe(), label)) from None
            sets = [_cue_sets(choice, orders) for choice in example.choices]
            union = set().union(*sets)
            everywhere = set.intersection(*sets)
            for cue in union - everywhere:
                applicable[cue] += 1
                if cue in sets[correct]:
                    productive[cue] += 1
        else:
            labels_seen.add(label)
            if example.text_b is None:
                cues = _cue_sets(example.text_a, orders)
            else:
                cues = _cue_sets(example.text_b, orders) - _cue_sets(example.text_a, orders)
            for cue in cues:
                applicable[cue] += 1
                label_counts[cue][label] += 1
    rows = []
    for cue, alpha in applicable.items():
        if alpha < min_applicability:
            continue
        row = {"cue": cue, "order": cue.count(" ") + 1, "applicability": alpha}
        if kind == "choice":
            row["productive"] = productive[cue]
        else:
            counts = label_counts[cue]
            best = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0]
            row["label"] = best[0]
            row["productive"] = best[1]
            row["label_counts"] = dict(sorted(counts.items()))
        row["productivity"] = row["productive"] / alpha
        row["coverage"] = alpha / n
        rows.append(row)
    rows.sort(key=lambda r: (-r["productivity"], -r["coverage"], r["cue"]))
    if kind == "choice":
        chance = 1.0 / num_choices if num_choices else None
    else:
        chance = 1.0 / len(labels_seen) if labels_seen else None
    return {"kind": kind, "n": n, "skipped_unlabeled": skipped, "orders": list(orders),
            "chance": chance, "cues": rows}


def write_cues(report, output_dir, top=None):
    """Writes ``cues.json`` (the whole report) and ``cues.tsv`` (a ranked table), atomically.

    Returns the two paths.
    """
    cues = report["cues"][:top] if top else report["cues"]
    json_path = os.path.join(output_dir, "cues.json")
    tsv_path = os.path.join(output_dir, "cues.tsv")
    pair = report["kind"] == "pair"
    header = ["rank", "cue", "order", "applicability", "productive", "productivity",
              "coverage"] + (["label"] if pair else [])
    lines = ["\t".join(header)]
    for rank, row in enumerate(cues, 1):
        values = [rank, row["cue"], row["order"], row["applicability"], row["productive"],
                  "%.6f" % row["productivity"], "%.6f" % row["coverage"]]
        if pair:
            values.append(row["label"])
        lines.append("\t".join(str(v) for v in values))
    atomic.write_text(json_path, json.dumps(dict(report, cues=cues), indent=1) + "\n")
    atomic.write_text(tsv_path, "\n".join(lines) + "\n")
    return json_path, tsv_path


def load_examples(data_dir, split="train", task_name=None, processor=None,
                  **generic_kwargs):
    """A split's examples through the project's processors (`--task_name` / `--processor`).

    Multiple-choice processors get `data_dir`; `generic` gets `data_dir` and
    `generic_kwargs` (file_format, text_a_column, ...); other processors are
    built without arguments, as run_classifier does.
    """
    # pylint: disable=g-import-not-at-top
    from data.processors.generic import GenericProcessor
    from data.processors.choice import MultipleChoiceProcessor
    from data.processors.ids import IdsProcessor
    from data.processors.loading import get_processor_class
    if split not in SPLITS:
        raise ValueError("split must be one of %s, not %r" % (", ".join(SPLITS), split))
    processor_class = get_processor_class(task_name, processor)
    if issubclass(processor_class, IdsProcessor):
        raise ValueError("--task_name=%s holds token ids, not text: no word cues to count"
                         % task_name)
    if issubclass(processor_class, GenericProcessor):
        instance = processor_class(data_dir=data_dir, **generic_kwargs)
    elif issubclass(processor_class, MultipleChoiceProcessor):
        instance = processor_class(data_dir=data_dir)
    else:
        instance = processor_class()
    return list(getattr(instance, "get_%s_examples" % split)(data_dir))


# ------------------------------------------------------------- negation

_OTHER_NEGATIONS = {"never", "nobody", "nothing", "none", "nowhere", "neither", "nor",
                    "ain't"}
_NO_PHRASES = {"one", "longer", "more", "matter"}
_BE = {"is", "are", "was", "were", "am"}
_MODALS = {"can", "could", "may", "might", "must", "shall", "should", "will", "would"}
_HAVE = {"have", "has", "had"}
_NT_SPECIAL = {"can't": "can", "won't": "will", "shan't": "shall"}


def _words(text):
    """(start, end, lower-cased word with straight apostrophes) of each word."""
    return [(m.start(), m.end(), m.group(0).lower().replace("\u2019", "'"))
            for m in _WORD.finditer(text)]


def _cased(replacement, original):
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _replace(text, start, end, replacement):
    return text[:start] + _cased(replacement, text[start:end]) + text[end:]


def _is_participle(word):
    return word == "been" or (len(word) > 3 and word.endswith(("ed", "en")))


def negate_claim(text):
    """(negated claim, rule) or (None, reason it is unsupported); rules in the module docstring."""
    words = _words(text)
    if not words:
        return None, "empty"
    for i, (_, _, w) in enumerate(words):
        following = words[i + 1][2] if i + 1 < len(words) else None
        if w in _OTHER_NEGATIONS or (w == "no" and following in _NO_PHRASES):
            return None, "other_negation"
    markers = [i for i, (_, _, w) in enumerate(words)
               if w in ("not", "cannot", "no") or w.endswith("n't")]
    if len(markers) > 1:
        return None, "several_negations"
    if markers:
        i = markers[0]
        start, end, w = words[i]
        if w == "not":
            # "is not a" -> "is a": the word and the blank before it.
            before = start
            while before > 0 and text[before - 1] in " \t":
                before -= 1
            if before == 0:  # a claim starting with "Not": the blank after it
                while end < len(text) and text[end] in " \t":
                    end += 1
                return text[end:][:1].upper() + text[end:][1:], "remove_not"
            return text[:before] + text[end:], "remove_not"
        if w == "cannot":
            return _replace(text, start, end, "can"), "remove_cannot"
        if w == "no":
            if i + 1 >= len(words):
                return None, "other_negation"
            return _replace(text, start, end, "some"), "no_to_some"
        base = _NT_SPECIAL.get(w, w[:-3])
        if not base:
            return None, "other_negation"
        return _replace(text, start, end, base), "remove_nt"
    auxiliaries = [i for i, (_, _, w) in enumerate(words)
                   if w in _BE or w in _MODALS or (
                       w in _HAVE and i + 1 < len(words) and _is_participle(words[i + 1][2]))]
    if len(auxiliaries) > 1:
        return None, "several_auxiliaries"
    if auxiliaries:
        start, end, w = words[auxiliaries[0]]
        if w == "can":
            return _replace(text, start, end, "cannot"), "add_not"
        return text[:end] + " not" + text[end:], "add_not"
    some = [i for i, (_, _, w) in enumerate(words) if w == "some"]
    if len(some) == 1:
        start, end, _ = words[some[0]]
        return _replace(text, start, end, "no"), "some_to_no"
    return None, "no_auxiliary"


# ------------------------------------------------------------ ARCT files


def _arct_files(data_dir, files=None):
    """{split: path} of the ARCT files present in `data_dir`."""
    names = dict(zip(SPLITS, files or ArctProcessor.FILES))
    found = {split: os.path.join(data_dir, name) for split, name in names.items()
             if os.path.isfile(os.path.join(data_dir, name))}
    if not found:
        raise DataError("%s: none of the ARCT files %s is there" % (
            data_dir, ", ".join(names.values())))
    return found


def _read_arct(data_dir, split, path):
    """(header, [(example, fields)]) of one ARCT file, checked by `ArctProcessor`."""
    name = os.path.basename(path)
    files = {"train_file": name, "dev_file": name, "test_file": name}
    processor = ArctProcessor(**files)
    examples = getattr(processor, "get_%s_examples" % split)(os.path.dirname(path) or ".")
    header = [h.strip() for h in ArctProcessor._read_tsv(path)[0]]  # pylint: disable=protected-access
    return header, examples


def _tsv_line(header, fields, location):
    values = []
    for column in header:
        value = fields.get(column, "")
        if "\t" in value or "\n" in value or "\r" in value:
            raise DataError("%s: column %s holds a tab or a line break; an ARCT TSV cell "
                            "cannot" % (location, column))
        values.append(value)
    return "\t".join(values)


def _write_arct(path, header, rows):
    lines = ["\t".join(header)] + rows
    atomic.write_text(path, "\n".join(lines) + "\n")


def _check_dirs(data_dir, output_dir):
    if os.path.abspath(data_dir) == os.path.abspath(output_dir):
        raise atomic.OutputConflictError(
            "--output_dir=%s is also --data_dir: refusing to overwrite the data set; choose "
            "another output directory" % output_dir)


def write_ablation(data_dir, output_dir, ablation, files=None):
    """Writes ARCT's files from `data_dir` with the ablation's columns emptied.

    Args:
      data_dir: the ARCT files (`ArctProcessor.FILES`, or `files`).
      output_dir: where the files of the same names are written (atomically).
      ablation: a key of `ABLATIONS`.

    Returns:
      {split: number of rows written}.
    """
    if ablation not in ABLATIONS:
        raise ValueError("unknown ablation %r (expected one of %s)"
                         % (ablation, ", ".join(ABLATIONS)))
    _check_dirs(data_dir, output_dir)
    outputs = []  # every split read and checked before any file is written
    for split, path in _arct_files(data_dir, files).items():
        header, examples = _read_arct(data_dir, split, path)
        rows = []
        for example in examples:
            fields = dict(example.fields)
            for column in ABLATIONS[ablation]:
                fields[column] = ""
            rows.append(_tsv_line(header, fields, example.source))
        outputs.append((split, path, header, rows))
    counts = {}
    for split, path, header, rows in outputs:
        _write_arct(os.path.join(output_dir, os.path.basename(path)), header, rows)
        counts[split] = len(rows)
    return counts


def cue_balance(examples, orders=(1, 2), cue="not"):
    """How far a multiple-choice set's warrant cues are from chance (`cue_statistics`).

    Returns ``n`` (labelled data points), ``cues`` (cues applicable at least
    once), ``unbalanced`` (how many of them have a productivity other than
    chance), ``max_productivity`` and, for `cue`, its ``applicability`` and
    ``productivity`` (None when it is never applicable). Niven & Kao's
    combined adversarial set has ``unbalanced`` 0: that is what it is for.
    """
    report = cue_statistics(examples, orders)
    rows = report["cues"]
    chance = report["chance"]
    # productive / applicability == 1 / choices, in integers: no float equality.
    choices = round(1 / chance) if chance else None
    unbalanced = sum(1 for r in rows if r["productive"] * choices != r["applicability"])
    named = next((r for r in rows if r["cue"] == cue), None)
    return {"n": report["n"], "cues": len(rows), "unbalanced": unbalanced,
            "max_productivity": max((r["productivity"] for r in rows), default=None),
            "cue": cue,
            "applicability": named["applicability"] if named else 0,
            "productivity": named["productivity"] if named else None}


def _negated_copy(fields, negated_claim):
    """The adversarial twin of one row: claim negated, label flipped, warrants in place."""
    fields = dict(fields, claim=negated_claim)
    label = fields.get(ARCT_LABEL_COLUMN, "").strip()
    if label:
        # Two warrants: the alternative one is the negated claim's warrant.
        fields[ARCT_LABEL_COLUMN] = "1" if label == "0" else "0"
    if fields.get(ArctProcessor.ID_COLUMN):
        fields[ArctProcessor.ID_COLUMN] += "-adv"
    return fields


def write_adversarial(data_dir, output_dir, keep_original=True, files=None):
    """Writes Niven & Kao's adversarial ARCT files: each row, then its negated copy.

    Each split's file holds the rows whose claim `negate_claim` can negate
    (in file order) followed by their negated copies in the same order (ids
    ``<id>-adv``, claim negated, label flipped, warrants in place): twice the
    negatable rows, every warrant cue at productivity 1/2 (module docstring).
    Rows it cannot negate are in neither half, and reported.

    Args:
      data_dir: the ARCT files (`ArctProcessor.FILES`, or `files`).
      output_dir: where the files of the same names are written (atomically).
      keep_original: False writes the negated copies only (not balanced: the
        cues mirrored, not cancelled).
      files: other file names for train, dev, test.

    Returns:
      a report dict per split: ``rows`` read, ``negated``, ``written``,
      ``unsupported`` (count), ``rules`` (count per rule), ``unsupported_reasons``
      (count per reason), ``unsupported_ids``, ``unsupported_rows`` (id,
      ``file:line``, claim and reason of each) and ``cue_balance``
      (`cue_balance` of the rows read, ``original``, and of the rows written,
      ``written``). Also written to ``adversarial_report.json`` in `output_dir`.
    """
    _check_dirs(data_dir, output_dir)
    planned = []  # every split read, checked and negated before any file is written
    for split, path in _arct_files(data_dir, files).items():
        header, examples = _read_arct(data_dir, split, path)
        originals, adversarial, unsupported = [], [], []
        rules, reasons = collections.Counter(), collections.Counter()
        for example in examples:
            fields = dict(example.fields)
            negated, rule = negate_claim(fields["claim"])
            if negated is None:
                reasons[rule] += 1
                unsupported.append({"id": example.guid, "source": example.source,
                                    "claim": fields["claim"], "reason": rule})
                continue
            rules[rule] += 1
            originals.append(_tsv_line(header, fields, example.source))
            adversarial.append(_tsv_line(header, _negated_copy(fields, negated),
                                         example.source))
        rows = (originals if keep_original else []) + adversarial
        planned.append((split, path, header, examples, rows, adversarial, unsupported, rules,
                        reasons))
    report = {}
    for split, path, header, examples, rows, adversarial, unsupported, rules, reasons in planned:
        out_path = os.path.join(output_dir, os.path.basename(path))
        _write_arct(out_path, header, rows)
        # The balance of what was written, read back as run_classifier will read it.
        _, written = _read_arct(output_dir, split, out_path)
        report[split] = {"file": os.path.basename(path), "rows": len(examples),
                         "negated": len(adversarial), "written": len(rows),
                         "keep_original": keep_original,
                         "unsupported": len(unsupported), "rules": dict(rules),
                         "unsupported_reasons": dict(reasons),
                         "unsupported_ids": [u["id"] for u in unsupported],
                         "unsupported_rows": unsupported,
                         "cue_balance": {"original": cue_balance(examples),
                                         "written": cue_balance(written)}}
    atomic.write_text(os.path.join(output_dir, "adversarial_report.json"),
                      json.dumps(report, indent=1) + "\n")
    return report
