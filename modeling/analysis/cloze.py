"""Cloze knowledge probing (LAMA-style): does the masked LM fill in the fact?

Petroni et al. (2019) ask a pre-trained masked LM to complete statements
such as ``Water boils at [MASK] degrees Celsius at sea level.`` and count
how often the expected answer is its first guess (precision@1) or among its
first ten (precision@10), per relation and overall. Here any MLM checkpoint
the project loads (Google TF1, HF safetensors, its own pre-training
checkpoints) is probed through the same fill-mask machinery as
`run/predict_masked.py` (`modeling.serving.inference`).

The facts file is UTF-8 TSV, one fact a line::

    statement<TAB>answer[<TAB>relation]

Blank lines and lines starting with ``#`` are skipped. The relation (a free
label such as ``boiling-point``) groups the per-relation scores; without it
the fact counts under ``"-"``.

Answers of several word pieces. The answer is tokenized with the model's own
tokenizer into pieces ``p_1 .. p_n`` (a Chinese answer is one piece per
character, as Chinese BERT tokenizes it; ``bread`` may be one piece and
``millbrook`` three). Its place in the statement is marked either

* by one ``[MASK]``, which is widened to ``n`` consecutive ``[MASK]``
  tokens, or
* by exactly ``n`` ``[MASK]`` tokens written out (e.g. ``首都是[MASK][MASK]。``
  for a two-character answer); they are filled in order.

Any other count of ``[MASK]`` is an error naming the file and line. All
masks are predicted in one forward pass, independently (as BERT was trained
to predict masked positions), so a candidate answer's score is the product
of its pieces' probabilities at their positions. The model's ranking of
answers of ``n`` pieces is therefore the ranking of products of independent
per-position choices: its top 1 is the per-position argmax, and its exact
top ``k`` is found by a beam of width ``k`` (a product's prefix of a top-k
candidate is itself among the top-k prefixes, since every factor is at most
one). The fact is a hit at ``k`` when the expected answer is among those
``k`` candidates. A one-piece answer is the ordinary LAMA case.

An answer the vocabulary cannot spell (a piece is ``[UNK]``) can never be
predicted; such facts are left out and listed under ``"skipped"``, as LAMA
restricts its facts to the model's vocabulary.
"""

import collections
import dataclasses
import json
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from data import atomic
from data import packing
from data import tokenization
from modeling.serving import inference
from modeling.training.options import option

__all__ = ["ClozeSettings", "Fact", "ClozeError", "read_facts", "prepare_fact",
           "usable_facts", "top_k_products", "probe", "write_report"]

DEFAULT_RELATION = "-"
TOP_KS = (1, 10)


@dataclasses.dataclass
class ClozeSettings(inference.MaskedLMFiles):
    """A probe of one MLM checkpoint (`probe`); `run/probe_cloze.py`'s flags."""

    facts_file: Optional[str] = option(None, "TSV: statement<TAB>answer[<TAB>relation].")
    output_file: Optional[str] = option(None, "Write the JSON report here.")
    max_seq_length: int = option(128, "Word pieces per statement.", lower_bound=3)
    batch_size: int = option(32, "Statements per forward pass.", lower_bound=1)
    top_k: int = option(10, "Answers listed per fact (at least 10).", lower_bound=10)
    plot: bool = option(
        True, "With --output_file, also write cloze.png beside it (and as a TensorBoard "
        "image in tensorboard/ there).")

    def plot_file(self):
        """cloze.png beside `output_file` (None: no output file, or `plot` off)."""
        if self.output_file and self.plot:
            return os.path.join(os.path.dirname(self.output_file), "cloze.png")
        return None


class ClozeError(ValueError):
    """A bad facts file or a fact that does not fit the model (one line, file:line)."""


Fact = collections.namedtuple("Fact", ["line", "statement", "answer", "relation"])


def read_facts(path):
    """The facts of a TSV file ``statement<TAB>answer[<TAB>relation]``.

    Returns:
      a list of `Fact` (line numbers 1-based).

    Raises:
      ClozeError ``"FILE:LINE: ..."`` for a line without an answer column,
      with more than three columns, with an empty statement or answer, or
      without ``[MASK]``; ValueError for bytes that are not UTF-8.
    """
    facts = []
    for lineno, text in enumerate(inference.read_input_lines(path), 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        columns = text.split("\t")
        if len(columns) not in (2, 3):
            raise ClozeError(
                "%s:%d: %d tab-separated columns; expected statement<TAB>answer"
                "[<TAB>relation]" % (path, lineno, len(columns)))
        statement, answer = columns[0].strip(), columns[1].strip()
        relation = columns[2].strip() if len(columns) == 3 else ""
        if not statement or not answer:
            raise ClozeError("%s:%d: empty %s; expected statement<TAB>answer[<TAB>relation]"
                             % (path, lineno, "statement" if not statement else "answer"))
        if tokenization.MASK_TOKEN not in statement:
            raise ClozeError("%s:%d: the statement has no %s; expected one (or one per "
                             "word piece of the answer)"
                             % (path, lineno, tokenization.MASK_TOKEN))
        facts.append(Fact(lineno, statement, answer, relation or DEFAULT_RELATION))
    if not facts:
        raise ClozeError("%s: no facts; expected lines statement<TAB>answer[<TAB>relation]"
                         % path)
    return facts


def prepare_fact(fact, tokenizer, max_seq_length, path="facts"):
    """Word pieces of a fact: ``(tokens, mask_positions, answer_pieces)``.

    `tokens` is ``[CLS] statement [SEP]`` with the answer's place as
    ``len(answer_pieces)`` ``[MASK]`` tokens (see the module docstring);
    `mask_positions` index `tokens`. `answer_pieces` may hold ``[UNK]``
    (the caller skips such facts).

    Raises:
      ClozeError ``"PATH:LINE: ..."`` when the number of ``[MASK]`` is
      neither one nor the number of answer pieces, when the answer has no
      word pieces, or when the statement does not fit `max_seq_length`.
    """
    answer_pieces = tokenizer.tokenize(fact.answer)
    if not answer_pieces:
        raise ClozeError("%s:%d: the answer %r has no word pieces; expected a word"
                         % (path, fact.line, fact.answer))
    statement_tokens = inference.tokenize_with_masks(tokenizer, fact.statement)
    masks = statement_tokens.count(tokenization.MASK_TOKEN)
    if masks == 1 and len(answer_pieces) > 1:
        at = statement_tokens.index(tokenization.MASK_TOKEN)
        statement_tokens = (statement_tokens[:at] +
                            [tokenization.MASK_TOKEN] * len(answer_pieces) +
                            statement_tokens[at + 1:])
    elif masks != len(answer_pieces):
        raise ClozeError(
            "%s:%d: %d %s in the statement but the answer %r has %d word pieces (%s); "
            "expected one [MASK] (widened to the answer) or one per piece"
            % (path, fact.line, masks, tokenization.MASK_TOKEN, fact.answer,
               len(answer_pieces), " ".join(answer_pieces)))
    if len(statement_tokens) + 2 > max_seq_length:
        raise ClozeError("%s:%d: %d word pieces with [CLS] and [SEP] exceed "
                         "--max_seq_length=%d; expected a shorter statement"
                         % (path, fact.line, len(statement_tokens) + 2, max_seq_length))
    tokens, _ = packing.pack(statement_tokens, None, max_seq_length)
    positions = [i for i, t in enumerate(tokens) if t == tokenization.MASK_TOKEN]
    return tokens, positions, answer_pieces


def usable_facts(facts, tokenizer, max_seq_length, path="facts"):
    """The facts the vocabulary can answer, prepared, and the skipped ones.

    Returns:
      ``(prepared, skipped)``: ``(fact, tokens, mask_positions, answer_pieces)``
      per usable fact (`prepare_fact`), and ``{line, answer, reason}`` per fact
      whose answer has an ``[UNK]`` piece (see the module docstring).

    Raises:
      ClozeError naming `path` for a bad fact (`prepare_fact`), and when no
      fact is usable: a precision over no fact measures nothing.
    """
    prepared, skipped = [], []
    for fact in facts:
        tokens, positions, pieces = prepare_fact(fact, tokenizer, max_seq_length, path)
        if tokenization.UNK_TOKEN in pieces:
            skipped.append({"line": fact.line, "answer": fact.answer,
                            "reason": "answer has a word piece outside the vocabulary "
                                      "(%s)" % " ".join(pieces)})
            continue
        prepared.append((fact, tokens, positions, pieces))
    if not prepared:
        first = skipped[0] if skipped else None
        raise ClozeError(
            "%s: no usable fact: the answers of all %d facts have a word piece outside the "
            "vocabulary (%s), so none can be predicted%s; expected answers the "
            "vocabulary spells" % (path, len(facts), tokenization.UNK_TOKEN,
                                   " (e.g. line %d: %r)" % (first["line"], first["answer"])
                                   if first else ""))
    return prepared, skipped


def top_k_products(probabilities, k):
    """The `k` most probable sequences of independent choices, best first.

    Args:
      probabilities: float array ``[positions, vocab]``, one distribution per
        position.
      k: how many sequences.

    Returns:
      list of ``(ids tuple, product of probabilities)``, sorted by product
      descending (ties: smaller ids first, position by position). Exact: a
      beam of width `k` cannot lose a top-k sequence, because every factor
      is at most 1, so a top-k sequence's prefix is a top-k prefix.
    """
    probabilities = np.asarray(probabilities, np.float64)
    beam = [((), 1.0)]
    for row in probabilities:
        best = np.argsort(-row, kind="stable")[:k]
        candidates = [(ids + (int(i),), score * float(row[i]))
                      for ids, score in beam for i in best]
        candidates.sort(key=lambda c: (-c[1], c[0]))
        beam = candidates[:k]
    return beam


def _join_pieces(pieces):
    """Word pieces back to text (``mill ##brook`` -> ``millbrook``; CJK without spaces)."""
    text = ""
    for piece in pieces:
        if piece.startswith("##"):
            text += piece[2:]
        elif text and not (_is_cjk(piece) and _is_cjk(text[-1])):
            text += " " + piece
        else:
            text += piece
    return text


def _is_cjk(text):
    return tokenization.is_cjk_char(text)


def _precision(hits, count):
    return float(hits) / count if count else 0.0


def probe(pretrainer, tokenizer, facts, path="facts", max_seq_length=128, batch_size=32,
          top_k=10):
    """Precision@1 and @10 (overall and per relation) of a masked LM on `facts`.

    Args:
      pretrainer: a `BertPretrainer` with a "masked_lm" objective.
      tokenizer: the model's `FullTokenizer`.
      facts: `Fact`s (see `read_facts`).
      path: the facts file's name, for error messages.
      max_seq_length: word pieces per statement, [CLS] and [SEP] included.
      batch_size: statements per forward pass.
      top_k: candidates listed per fact (at least 10, the P@10 cut-off).

    Returns:
      a JSON-ready dict: ``num_facts``, ``precision_at_1``,
      ``precision_at_10``, ``mean_reciprocal_rank`` (over the top `top_k`;
      0 beyond), ``per_relation`` {relation: {num_facts, precision_at_1,
      precision_at_10}}, ``facts`` (per fact: line, statement, answer,
      relation, answer_pieces, answer_probability, rank (1-based, None
      beyond `top_k`), predictions [{answer, probability}]) and
      ``skipped`` [{line, answer, reason}].
    """
    top_k = max(int(top_k), max(TOP_KS))
    prepared, skipped = usable_facts(facts, tokenizer, max_seq_length, path)
    probabilities_fn = inference.masked_lm_probabilities(pretrainer)

    records = []
    for start in range(0, len(prepared), batch_size):
        chunk = prepared[start:start + batch_size]
        length = max(len(tokens) for _, tokens, _, _ in chunk)
        features = packing.pad_batch(
            [tokenizer.convert_tokens_to_ids(tokens) for _, tokens, _, _ in chunk],
            [[0] * len(tokens) for _, tokens, _, _ in chunk], length)
        width = max(len(positions) for _, _, positions, _ in chunk)
        # Rows with fewer masks repeat their first position (ignored below).
        position_rows = [positions + [positions[0]] * (width - len(positions))
                         for _, _, positions, _ in chunk]
        probs = probabilities_fn({name: tf.constant(value) for name, value in features.items()},
                                 tf.constant(position_rows, tf.int32)).numpy()
        for row, (fact, _, positions, pieces) in enumerate(chunk):
            dist = probs[row, :len(positions)]
            answer_ids = tokenizer.convert_tokens_to_ids(pieces)
            answer_probability = float(np.prod(
                [dist[i, a] for i, a in enumerate(answer_ids)], dtype=np.float64))
            best = top_k_products(dist, top_k)
            rank = None
            for r, (ids, _) in enumerate(best, 1):
                if list(ids) == answer_ids:
                    rank = r
                    break
            records.append({
                "line": fact.line, "statement": fact.statement, "answer": fact.answer,
                "relation": fact.relation, "answer_pieces": pieces,
                "answer_probability": answer_probability, "rank": rank,
                "predictions": [{"answer": _join_pieces(tokenizer.convert_ids_to_tokens(ids)),
                                 "probability": score} for ids, score in best]})

    records.sort(key=lambda r: r["line"])

    def scores(group):
        return {"num_facts": len(group),
                "precision_at_1": _precision(sum(r["rank"] == 1 for r in group), len(group)),
                "precision_at_10": _precision(
                    sum(r["rank"] is not None and r["rank"] <= 10 for r in group), len(group))}

    by_relation = collections.OrderedDict()
    for record in records:
        by_relation.setdefault(record["relation"], []).append(record)
    report = scores(records)
    report["mean_reciprocal_rank"] = _precision(
        sum(1.0 / r["rank"] for r in records if r["rank"]), len(records))
    report["per_relation"] = {name: scores(group) for name, group in sorted(by_relation.items())}
    report["facts"] = records
    report["skipped"] = skipped
    return report


def write_report(report, path, extra=None):
    """Writes `report` (plus the `extra` fields first) as indented JSON, atomically."""
    payload = dict(extra or {})
    payload.update(report)
    atomic.write_text(path, json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
    return path
