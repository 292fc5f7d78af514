"""Entity-level precision, recall and F1 of tag sequences, as seqeval computes them.

The default (conlleval-style) mode of seqeval, written here from its
definition: a chunk is ``(type, start, end)`` (end inclusive), found by
scanning the tags with the same start/end rules for BIO and BIOES:

* a chunk ends before the current tag when the previous tag was ``E-`` or
  ``S-``; when ``B-``/``I-`` is followed by ``B-``, ``S-`` or ``O``; or when
  the type changes;
* a chunk starts at ``B-`` and ``S-``; at ``I-``/``E-`` after ``O``, ``E-``
  or ``S-``; and wherever the type changes. So an ``I-`` without a
  preceding ``B-`` starts a chunk (as conlleval does).

A predicted chunk is correct when a gold chunk has the same type, start and
end. Precision = correct / predicted, recall = correct / gold, F1 = their
harmonic mean (0 when undefined), micro-averaged over all chunks and per type:

    >>> get_entities(["B-PER", "I-PER", "O", "I-LOC"])
    [('PER', 0, 1), ('LOC', 3, 3)]
    >>> entity_scores([["B-PER", "I-PER"]], [["B-PER", "O"]])["f1"]
    0.0
"""

import collections

__all__ = ["get_entities", "entity_scores", "format_report"]


def _split(tag):
    """("B", "PER") of "B-PER"; ("O", "_") of "O" (seqeval's '_' for no type)."""
    if not tag or tag == "O":
        return "O", "_"
    prefix, type_ = tag[0], tag[1:].split("-", 1)[-1]
    return prefix, type_ or "_"


def _end_of_chunk(prev_tag, tag, prev_type, type_):
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _start_of_chunk(prev_tag, tag, prev_type, type_):
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags):
    """The chunks ``(type, start, end)`` of one tag sequence (end inclusive)."""
    chunks = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, chunk_tag in enumerate(list(tags) + ["O"]):
        tag, type_ = _split(chunk_tag)
        if _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_scores(gold_sequences, predicted_sequences):
    """Micro-averaged and per-type entity scores over sentences.

    Args:
        gold_sequences, predicted_sequences: lists of tag lists, sentence by
            sentence (same lengths).

    Returns:
        dict: ``precision``, ``recall``, ``f1``, ``num_gold``,
        ``num_predicted``, ``num_correct`` and ``per_type``:
        {type: {"precision", "recall", "f1", "support"}} (support = gold count).
    """
    gold_sequences, predicted_sequences = list(gold_sequences), list(predicted_sequences)
    if len(gold_sequences) != len(predicted_sequences):
        raise ValueError("%d gold but %d predicted sentences."
                         % (len(gold_sequences), len(predicted_sequences)))
    counts = collections.defaultdict(lambda: [0, 0, 0])  # correct, predicted, gold
    for i, (gold, predicted) in enumerate(zip(gold_sequences, predicted_sequences)):
        if len(gold) != len(predicted):
            raise ValueError("Sentence %d: %d gold but %d predicted tags."
                             % (i, len(gold), len(predicted)))
        gold_chunks = set(get_entities(gold))
        predicted_chunks = set(get_entities(predicted))
        for chunk in gold_chunks:
            counts[chunk[0]][2] += 1
        for chunk in predicted_chunks:
            counts[chunk[0]][1] += 1
            if chunk in gold_chunks:
                counts[chunk[0]][0] += 1
    totals = [sum(c[k] for c in counts.values()) for k in range(3)]
    precision, recall, f1 = _prf(*totals)
    per_type = {}
    for type_ in sorted(counts):
        p, r, f = _prf(*counts[type_])
        per_type[type_] = {"precision": p, "recall": r, "f1": f, "support": counts[type_][2]}
    return {"precision": precision, "recall": recall, "f1": f1, "num_correct": totals[0],
            "num_predicted": totals[1], "num_gold": totals[2], "per_type": per_type}


def format_report(scores):
    """A seqeval-like text table of `entity_scores`' result."""
    lines = ["%-12s %9s %9s %9s %9s" % ("", "precision", "recall", "f1-score", "support")]
    for type_, s in scores["per_type"].items():
        lines.append("%-12s %9.4f %9.4f %9.4f %9d" % (type_, s["precision"], s["recall"],
                                                      s["f1"], s["support"]))
    lines.append("%-12s %9.4f %9.4f %9.4f %9d" % ("micro avg", scores["precision"],
                                                  scores["recall"], scores["f1"],
                                                  scores["num_gold"]))
    return "\n".join(lines) + "\n"
