"""SQuAD-style extractive QA data: examples, features, span decoding and evaluation.

What google-research/bert's `run_squad.py` does around the model, written for
this project (no model code here: `data/` knows no model):

* `read_squad_examples(path, is_training, version_2_with_negative)` reads
  SQuAD v1.1 / v2.0 JSON (or CMRC-style JSON: the same layout with Chinese
  paragraphs and character offsets) into `SquadExample`s. A paragraph is cut
  into `doc_tokens` at whitespace, and every CJK character is a doc token of
  its own, so a Chinese answer's character span maps onto whole doc tokens
  (Google's reader keeps a run of CJK characters as one "word", which makes a
  CMRC answer the whole paragraph).
* `convert_examples_to_features(...)` word-pieces the question (cut to
  `max_query_length`) and slides windows of `max_seq_length` over the
  document with stride `doc_stride`: ``[CLS] question [SEP] doc window [SEP]``.
  Each `SquadFeatures` keeps `token_to_orig_map` (window position -> doc
  token) and `token_is_max_context` (whether this window gives that token the
  most context of all windows holding it: min(left, right) + 0.01 * length).
  Training features carry `start_position` / `end_position` of the answer in
  the window, or 0 / 0 (the `[CLS]` token) when the answer is not wholly in
  it or the question has none.
* `write_features(features, path, is_training)` writes the TFRecords
  (`unique_ids`, `input_ids`, `input_mask`, `segment_ids`, and for training
  `start_positions`, `end_positions`, `is_impossible`) atomically;
  `input_fn_builder` reads them back.
* `postprocess(examples, features, results, ...)` turns start/end logits into
  answers: per example, the `n_best_size` best (start, end) pairs of every
  window whose start has its maximum context there, are legal (inside the
  document, end >= start, at most `max_answer_length` tokens), mapped back to
  the original text (`get_final_text`); under SQuAD 2.0 the null answer
  (score of [CLS] start + end, lowest over the windows) wins when
  ``null_score - best_non_null_score > null_score_diff_threshold``.
  `write_predictions` writes `predictions.json`, `nbest_predictions.json`
  and `null_odds.json` atomically.
* `evaluate(examples, predictions)`: exact match and F1 (in percent) with the
  official answer normalisation (lower case, drop punctuation, drop the
  articles a/an/the, collapse whitespace), the maximum over the gold answers;
  a question with no answer is right only when the prediction is empty.
  F1 counts tokens of the normalised text split at whitespace, and every CJK
  character is a token of its own (CMRC's character-level F1), which does not
  change anything for English text.

Every problem with an input file is a `SquadDataError` (a `ValueError`) whose
one-line message names the file and the question (`data[i].paragraphs[j]
.qas[k]`, with its id).
"""

import collections
import json
import math
import re
import string

from absl import logging
import numpy as np
import tensorflow as tf

from data import atomic
from data import tf_example
from data import tokenization

__all__ = ["SquadDataError", "SquadExample", "SquadFeatures", "read_squad_examples",
           "split_doc_tokens", "convert_examples_to_features", "write_features",
           "input_fn_builder", "get_final_text", "postprocess", "write_predictions",
           "normalize_answer", "exact_match_score", "f1_score", "evaluate",
           "has_gold_answers", "stack_results", "doc_spans_of", "feature_spec",
           "FIRST_UNIQUE_ID"]

FIRST_UNIQUE_ID = 1000000000


class SquadDataError(ValueError):
    """A SQuAD file is missing, not JSON, or has a question that cannot be used."""


class SquadExample(object):
    """One question about one paragraph.

    Attributes:
        qas_id: the question's id.
        question_text: the question.
        context: the paragraph, as in the file.
        doc_tokens: the paragraph cut at whitespace, every CJK character alone.
        doc_token_spans: (start, end) character offsets of each doc token in
            `context` (end exclusive).
        orig_answer_text: the (first) answer's text; "" for none.
        start_position, end_position: doc token indices of that answer
            (training, and wherever the answer is found); None otherwise.
        is_impossible: SQuAD 2.0's no-answer question.
        answers: every gold answer text (for evaluation); [] for none.
    """

    def __init__(self, qas_id, question_text, context, doc_tokens, doc_token_spans,
                 orig_answer_text="", start_position=None, end_position=None,
                 is_impossible=False, answers=None):
        self.qas_id = qas_id
        self.question_text = question_text
        self.context = context
        self.doc_tokens = doc_tokens
        self.doc_token_spans = doc_token_spans
        self.orig_answer_text = orig_answer_text
        self.start_position = start_position
        self.end_position = end_position
        self.is_impossible = is_impossible
        self.answers = list(answers or [])

    def __repr__(self):
        return ("SquadExample(qas_id=%r, question_text=%r, doc_tokens=[%s], start_position=%r, "
                "end_position=%r, is_impossible=%r)"
                % (self.qas_id, self.question_text, " ".join(self.doc_tokens[:20]),
                   self.start_position, self.end_position, self.is_impossible))


class SquadFeatures(object):
    """One window of one example: the model's input and the maps back to the document."""

    def __init__(self, unique_id, example_index, doc_span_index, tokens, token_to_orig_map,
                 token_is_max_context, input_ids, input_mask, segment_ids,
                 start_position=0, end_position=0, is_impossible=False):
        self.unique_id = unique_id
        self.example_index = example_index
        self.doc_span_index = doc_span_index
        self.tokens = tokens
        self.token_to_orig_map = token_to_orig_map
        self.token_is_max_context = token_is_max_context
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.start_position = start_position
        self.end_position = end_position
        self.is_impossible = is_impossible


# ------------------------------------------------------------------ reading


def _is_whitespace(char):
    return char in " \t\r\n" or ord(char) == 0x202F or char.isspace()


def split_doc_tokens(text):
    """(doc_tokens, spans, char_to_token): `text` cut at whitespace, each CJK character alone.

    `spans[i]` is the (start, end) character range of token i; `char_to_token[c]`
    the token holding character c (whitespace: the token before it, -1 at the
    start), as Google's `char_to_word_offset`.
    """
    tokens, spans, char_to_token = [], [], []
    start = None
    for i, char in enumerate(text):
        if _is_whitespace(char):
            if start is not None:
                tokens.append(text[start:i])
                spans.append((start, i))
                start = None
            char_to_token.append(len(tokens) - 1)
            continue
        if tokenization.is_cjk_char(char):
            if start is not None:
                tokens.append(text[start:i])
                spans.append((start, i))
                start = None
            tokens.append(char)
            spans.append((i, i + 1))
            char_to_token.append(len(tokens) - 1)
            continue
        if start is None:
            start = i
        char_to_token.append(len(tokens))
    if start is not None:
        tokens.append(text[start:])
        spans.append((start, len(text)))
    return tokens, spans, char_to_token


def _field(obj, key, kind, where):
    if not isinstance(obj, dict) or key not in obj:
        raise SquadDataError("%s: missing %r" % (where, key))
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise SquadDataError("%s: %r should be a %s, not a JSON true/false"
                             % (where, key, "/".join(k.__name__ for k in kinds)))
    if not isinstance(value, kind):
        raise SquadDataError("%s: %r should be a %s, not %s"
                             % (where, key, kind.__name__ if isinstance(kind, type)
                                else "/".join(k.__name__ for k in kind), type(value).__name__))
    return value


def _nearest_occurrence(context, text, offset):
    best = None
    position = context.find(text)
    while position != -1:
        if best is None or abs(position - offset) < abs(best - offset):
            best = position
        position = context.find(text, position + 1)
    return best


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Reads a SQuAD (or CMRC-style) JSON file into a list of `SquadExample`.

    Training needs exactly one answer per answerable question, found at its
    `answer_start` (when the text is not there but elsewhere in the
    paragraph, its occurrence nearest to `answer_start` is used, with a
    warning); an answer that is not in the paragraph is an error naming the
    question. Outside training the answers, if any, are kept for evaluation.
    """
    if not tf.io.gfile.exists(input_file):
        raise SquadDataError("%s: no such file" % input_file)
    with tf.io.gfile.GFile(input_file, "r") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SquadDataError("%s: not valid JSON: %s" % (input_file, e)) from None
    entries = _field(data, "data", list, input_file)
    examples = []
    seen_ids = {}  # id as text -> where it was first used
    for i, entry in enumerate(entries):
        paragraphs = _field(entry, "paragraphs", list, "%s: data[%d]" % (input_file, i))
        for j, paragraph in enumerate(paragraphs):
            where_p = "%s: data[%d].paragraphs[%d]" % (input_file, i, j)
            context = _field(paragraph, "context", str, where_p)
            doc_tokens, spans, char_to_token = split_doc_tokens(context)
            for k, qa in enumerate(_field(paragraph, "qas", list, where_p)):
                where = "%s.qas[%d]" % (where_p, k)
                qas_id = _field(qa, "id", (str, int), where)
                # predictions.json is keyed by the id as text: 1 and "1" are one id.
                first_use = seen_ids.get(str(qas_id))
                where = "%s (id %s)" % (where, qas_id)
                if first_use is not None:
                    raise SquadDataError(
                        "%s: the id %s is already the id of %s; expected unique question ids "
                        "(ids are compared as text, so 1 and \"1\" are the same id)"
                        % (where, json.dumps(qas_id), first_use))
                seen_ids[str(qas_id)] = "data[%d].paragraphs[%d].qas[%d]" % (i, j, k)
                question = _field(qa, "question", str, where)
                is_impossible = qa.get("is_impossible", False)
                if not isinstance(is_impossible, bool):
                    raise SquadDataError(
                        "%s: field 'is_impossible' is %s; expected a JSON true or false"
                        % (where, json.dumps(is_impossible)))
                if is_impossible and not version_2_with_negative:
                    raise SquadDataError(
                        "%s: \"is_impossible\": true (a SQuAD 2.0 question without an "
                        "answer), but --version_2_with_negative is not set; expected "
                        "--version_2_with_negative for a SQuAD 2.0 file" % where)
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise SquadDataError("%s: 'answers' should be a list" % where)
                answer_texts = []
                for a, answer in enumerate(answers):
                    answer_texts.append(_field(answer, "text", str, "%s: answers[%d]" % (where, a)))
                orig_answer_text, start_position, end_position = "", None, None
                if is_training and not is_impossible:
                    if len(answers) != 1:
                        raise SquadDataError(
                            "%s: a training question needs exactly one answer, it has %d"
                            % (where, len(answers)))
                if answers and not is_impossible:
                    answer = answers[0]
                    orig_answer_text = answer_texts[0]
                    offset = _field(answer, "answer_start", int, "%s: answers[0]" % where)
                    length = len(orig_answer_text)
                    if (orig_answer_text.strip() and 0 <= offset
                            and context[offset:offset + length] != orig_answer_text):
                        # A wrong offset (CMRC 2018 has a few): the occurrence
                        # of the text nearest to it, if the text is there.
                        found = _nearest_occurrence(context, orig_answer_text, offset)
                        if found is not None:
                            logging.warning("%s: answer %r is not at answer_start=%d; using "
                                            "its occurrence at %d", where, orig_answer_text,
                                            offset, found)
                            offset = found
                    if (offset < 0 or not orig_answer_text.strip()
                            or offset + length > len(context)
                            or context[offset:offset + length] != orig_answer_text):
                        if is_training:
                            raise SquadDataError(
                                "%s: answer %r is not in the context (answer_start=%d has %r)"
                                % (where, orig_answer_text, offset,
                                   context[max(0, offset):max(0, offset) + length]))
                    else:
                        # Skip leading/trailing whitespace inside the answer text.
                        first = offset + len(orig_answer_text) - len(orig_answer_text.lstrip())
                        last = offset + len(orig_answer_text.rstrip()) - 1
                        start_position = char_to_token[first]
                        end_position = char_to_token[last]
                if is_training and is_impossible:
                    start_position = end_position = -1
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question, context=context,
                    doc_tokens=doc_tokens, doc_token_spans=spans,
                    orig_answer_text=orig_answer_text, start_position=start_position,
                    end_position=end_position, is_impossible=is_impossible,
                    answers=answer_texts if not is_impossible else []))
    return examples


def has_gold_answers(examples):
    """True when the examples can be scored: some question has answers or is marked impossible."""
    return any(e.answers or e.is_impossible for e in examples)


# ----------------------------------------------------------------- features


def _improve_answer_span(doc_tokens, start, end, tokenizer, orig_answer_text):
    """The tightest word-piece span that tokenizes like the answer text.

    "(1895-1943)." is one doc token; an answer "1895" should span the piece
    "1895", not the whole token.
    """
    answer = " ".join(_word_pieces(tokenizer, orig_answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def _word_pieces(tokenizer, text, first=False):
    """Pieces of a document word (or the answer's words): a model folder's tokenizer
    (`PretrainedTokenizer`) reads each word after the space that precedes it in the
    document (RoBERTa's `Ġword`, SentencePiece's `▁word`), the first word without one, so
    a window equals HF's `tokenizer(question, context)`; WordPiece as Google does."""
    if hasattr(tokenizer, "build_inputs") and not first:
        return tokenizer.tokenize(" " + text)
    return tokenizer.tokenize(text)


class _Framing:
    """Where a window's query and document go: Google's ``[CLS] q [SEP] d [SEP]``, or a
    model folder's tokenizer's own pair framing (RoBERTa's ``<s> q </s></s> d </s>``)."""

    def __init__(self, tokenizer, query_tokens):
        self.tokenizer = tokenizer
        self.folder = hasattr(tokenizer, "build_inputs")
        if self.folder:
            self.query_ids = tokenizer.convert_tokens_to_ids(query_tokens)
            marker = -1
            framed = tokenizer.build_inputs(self.query_ids, [marker])
            self.doc_start = list(framed.input_ids).index(marker)
            self.specials = len(tokenizer.build_inputs([], []).input_ids)
            self.pad_id = tokenizer.pad_id
        else:
            self.query_tokens = query_tokens
            self.doc_start = len(query_tokens) + 2
            self.specials = 3
            self.pad_id = 0
        self.room = len(query_tokens) + self.specials

    def window(self, doc_tokens):
        """`(tokens, input_ids, segment_ids)` of the query with these document pieces."""
        tokenizer = self.tokenizer
        if self.folder:
            encoded = tokenizer.build_inputs(self.query_ids,
                                             tokenizer.convert_tokens_to_ids(doc_tokens))
            ids = list(encoded.input_ids)
            return tokenizer.convert_ids_to_tokens(ids), ids, list(encoded.segment_ids)
        tokens = ["[CLS]"] + self.query_tokens + ["[SEP]"] + list(doc_tokens) + ["[SEP]"]
        segment_ids = [0] * (len(self.query_tokens) + 2) + [1] * (len(doc_tokens) + 1)
        vocab = tokenizer.vocab
        return tokens, [vocab.get(t, vocab.get("[UNK]")) for t in tokens], segment_ids


def _max_context_score(span_start, span_length, position):
    left = position - span_start
    right = span_start + span_length - 1 - position
    return min(left, right) + 0.01 * span_length


def _check_is_max_context(doc_spans, span_index, position):
    """Whether window `span_index` gives the token at `position` its most context."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(doc_spans):
        if not start <= position < start + length:
            continue
        score = _max_context_score(start, length, position)
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == span_index


def doc_spans_of(num_tokens, max_tokens_for_doc, doc_stride):
    """(start, length) windows over `num_tokens` document pieces, as Google's loop."""
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    if not spans:
        spans.append((0, 0))
    return spans


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training,
                                 first_unique_id=FIRST_UNIQUE_ID):
    """`SquadExample`s -> `SquadFeatures` (one per document window); see the module docstring."""
    if max_query_length < 1:
        raise ValueError("max_query_length must be positive, got %d" % max_query_length)
    if doc_stride < 1:
        raise ValueError("doc_stride must be positive, got %d" % doc_stride)
    if max_seq_length < max_query_length + 4:
        raise ValueError("max_seq_length (%d) must exceed max_query_length (%d) + 3 so a "
                         "window holds some document" % (max_seq_length, max_query_length))
    features = []
    unique_id = first_unique_id
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig_index, orig_to_tok_index, all_doc_tokens = [], [], []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            for piece in _word_pieces(tokenizer, token, first=i == 0):
                tok_to_orig_index.append(i)
                all_doc_tokens.append(piece)

        tok_start = tok_end = None
        if is_training and example.is_impossible:
            tok_start = tok_end = -1
        if is_training and not example.is_impossible:
            tok_start = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end = len(all_doc_tokens) - 1
            tok_start, tok_end = _improve_answer_span(all_doc_tokens, tok_start, tok_end,
                                                      tokenizer, example.orig_answer_text)

        framing = _Framing(tokenizer, query_tokens)
        max_tokens_for_doc = max_seq_length - framing.room
        doc_spans = doc_spans_of(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
        for span_index, (span_start, span_length) in enumerate(doc_spans):
            token_to_orig_map, token_is_max_context = {}, {}
            for i in range(span_length):
                position = span_start + i
                token_to_orig_map[framing.doc_start + i] = tok_to_orig_index[position]
                token_is_max_context[framing.doc_start + i] = _check_is_max_context(
                    doc_spans, span_index, position)
            tokens, input_ids, segment_ids = framing.window(
                all_doc_tokens[span_start:span_start + span_length])
            input_mask = [1] * len(input_ids)
            padding = max_seq_length - len(input_ids)
            input_ids += [framing.pad_id] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding

            start_position = end_position = 0
            span_impossible = example.is_impossible
            if is_training and not example.is_impossible:
                if span_start <= tok_start and tok_end < span_start + span_length:
                    offset = framing.doc_start - span_start
                    start_position, end_position = tok_start + offset, tok_end + offset
                else:
                    span_impossible = True  # the answer is not (wholly) in this window
            features.append(SquadFeatures(
                unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
                tokens=tokens, token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context, input_ids=input_ids,
                input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position,
                is_impossible=span_impossible))
            unique_id += 1
    return features


def write_features(features, output_file, is_training):
    """Writes `SquadFeatures` as TFRecords (temporary file, then rename); returns the count."""
    outputs = atomic.TemporaryOutputs([output_file])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for f in features:
                ints = collections.OrderedDict()
                ints["unique_ids"] = [f.unique_id]
                ints["input_ids"] = f.input_ids
                ints["input_mask"] = f.input_mask
                ints["segment_ids"] = f.segment_ids
                if is_training:
                    ints["start_positions"] = [f.start_position]
                    ints["end_positions"] = [f.end_position]
                    ints["is_impossible"] = [int(f.is_impossible)]
                writer.write(tf_example.serialize_example(ints))
        outputs.commit()
    finally:
        outputs.discard()
    return len(features)


def feature_spec(seq_length, is_training):
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
    }
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["is_impossible"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def input_fn_builder(input_file, seq_length, is_training, batch_size, seed=None):
    """`input_fn(input_context=None)` over `write_features` records.

    Training: shuffled, repeated, whole batches. Prediction: once, in file
    order, a last partial batch kept. `unique_ids` stays int64 (ids above 2^31
    as Google's); everything else comes back int32.
    """
    spec = feature_spec(seq_length, is_training)

    def decode(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        return {name: t if name == "unique_ids" else tf.cast(t, tf.int32)
                for name, t in parsed.items()}

    def input_fn(input_context=None):
        per_replica = (input_context.get_per_replica_batch_size(batch_size)
                       if input_context is not None else batch_size)
        d = tf.data.TFRecordDataset(input_file)
        if input_context is not None and input_context.num_input_pipelines > 1:
            d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if is_training:
            d = d.repeat().shuffle(1000, seed=seed)
        d = d.batch(per_replica, drop_remainder=is_training)
        d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        return d.prefetch(tf.data.AUTOTUNE)

    return input_fn


# ------------------------------------------------------------ post-processing


def _strip_whitespace_with_map(text):
    kept, index_map = [], []
    for i, char in enumerate(text):
        if _is_whitespace(char):
            continue
        index_map.append(i)
        kept.append(char)
    return "".join(kept), index_map


def get_final_text(pred_text, orig_text, do_lower_case):
    """The part of `orig_text` (whole doc tokens, original casing) that `pred_text` covers.

    `pred_text` is the predicted word pieces joined and de-##-ed, so it is
    lower cased, accent stripped and punctuation split; it is found in the
    BasicTokenizer's version of `orig_text` and the position mapped back
    character by character (whitespace ignored). When that fails, the whole
    `orig_text` is the answer, as in Google's heuristic.
    """
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(basic.tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_stripped, orig_map = _strip_whitespace_with_map(orig_text)
    tok_stripped, tok_map = _strip_whitespace_with_map(tok_text)
    if len(orig_stripped) != len(tok_stripped):
        return orig_text
    tok_to_stripped = {tok_index: i for i, tok_index in enumerate(tok_map)}
    if start not in tok_to_stripped or end not in tok_to_stripped:
        return orig_text
    return orig_text[orig_map[tok_to_stripped[start]]:orig_map[tok_to_stripped[end]] + 1]


def _best_indexes(logits, n_best_size):
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    return order[:n_best_size]


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _pred_text_of(feature, start, end):
    pieces = " ".join(feature.tokens[start:end + 1])
    pieces = pieces.replace(" ##", "").replace("##", "")
    return " ".join(pieces.strip().split())


def postprocess(examples, features, results, n_best_size=20, max_answer_length=30,
                do_lower_case=True, version_2_with_negative=False,
                null_score_diff_threshold=0.0):
    """Start/end logits -> answers.

    Args:
        examples, features: from `read_squad_examples` / `convert_examples_to_features`.
        results: {unique_id: (start_logits, end_logits)} (sequences over the
            window's positions).

    Returns:
        (predictions {qas_id: text}, nbest {qas_id: [{text, probability,
        start_logit, end_logit}, ...]}, null_odds {qas_id: null score minus
        best non-null score}, empty unless `version_2_with_negative`).
    """
    features_by_example = collections.defaultdict(list)
    for feature in features:
        features_by_example[feature.example_index].append(feature)
    predictions = collections.OrderedDict()
    all_nbest = collections.OrderedDict()
    null_odds = collections.OrderedDict()
    for example_index, example in enumerate(examples):
        prelim = []  # (score, feature_index, start, end, start_logit, end_logit)
        null_score = null_start = null_end = None
        for feature_index, feature in enumerate(features_by_example[example_index]):
            if feature.unique_id not in results:
                raise ValueError("No model output for feature %d of question %s"
                                 % (feature.unique_id, example.qas_id))
            start_logits, end_logits = results[feature.unique_id]
            start_logits = [float(x) for x in start_logits[:len(feature.tokens)]]
            end_logits = [float(x) for x in end_logits[:len(feature.tokens)]]
            if version_2_with_negative:
                score = start_logits[0] + end_logits[0]
                if null_score is None or score < null_score:
                    null_score, null_start, null_end = score, start_logits[0], end_logits[0]
            for start in _best_indexes(start_logits, n_best_size):
                for end in _best_indexes(end_logits, n_best_size):
                    if start not in feature.token_to_orig_map:
                        continue
                    if end not in feature.token_to_orig_map:
                        continue
                    if not feature.token_is_max_context.get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    prelim.append((start_logits[start] + end_logits[end], feature_index,
                                   start, end, start_logits[start], end_logits[end]))
        if version_2_with_negative and null_score is not None:
            prelim.append((null_score, -1, 0, 0, null_start, null_end))
        prelim.sort(key=lambda p: -p[0])

        nbest, seen = [], set()
        example_features = features_by_example[example_index]
        for score, feature_index, start, end, start_logit, end_logit in prelim:
            if len(nbest) >= n_best_size:
                break
            if feature_index >= 0:
                feature = example_features[feature_index]
                orig_start = feature.token_to_orig_map[start]
                orig_end = feature.token_to_orig_map[end]
                orig_text = example.context[example.doc_token_spans[orig_start][0]:
                                            example.doc_token_spans[orig_end][1]]
                text = get_final_text(_pred_text_of(feature, start, end), orig_text,
                                      do_lower_case)
            else:
                text = ""
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit})
        if version_2_with_negative and "" not in seen and null_score is not None:
            nbest.append({"text": "", "start_logit": null_start, "end_logit": null_end})
        if not nbest:
            nbest.append({"text": "empty", "start_logit": 0.0, "end_logit": 0.0})
        probabilities = _softmax([e["start_logit"] + e["end_logit"] for e in nbest])
        entries = [{"text": e["text"], "probability": p, "start_logit": e["start_logit"],
                    "end_logit": e["end_logit"]} for e, p in zip(nbest, probabilities)]
        all_nbest[example.qas_id] = entries
        best_non_null = next((e for e in entries if e["text"]), None)
        if not version_2_with_negative:
            predictions[example.qas_id] = entries[0]["text"]
        else:
            if best_non_null is None:
                diff = float("inf")
                predictions[example.qas_id] = ""
            else:
                diff = null_score - best_non_null["start_logit"] - best_non_null["end_logit"]
                predictions[example.qas_id] = ("" if diff > null_score_diff_threshold
                                               else best_non_null["text"])
            null_odds[example.qas_id] = diff
    return predictions, all_nbest, null_odds


def _json(obj):
    return json.dumps(obj, indent=4, ensure_ascii=False) + "\n"


def write_predictions(output_dir, predictions, nbest, null_odds=None):
    """predictions.json, nbest_predictions.json (and null_odds.json), each atomically."""
    paths = {"predictions": tf.io.gfile.join(output_dir, "predictions.json"),
             "nbest": tf.io.gfile.join(output_dir, "nbest_predictions.json")}
    atomic.write_text(paths["predictions"], _json(predictions))
    atomic.write_text(paths["nbest"], _json(nbest))
    if null_odds is not None:
        paths["null_odds"] = tf.io.gfile.join(output_dir, "null_odds.json")
        atomic.write_text(paths["null_odds"], _json(
            {k: (v if math.isfinite(v) else 1e30) for k, v in null_odds.items()}))
    return paths


# ---------------------------------------------------------------- evaluation

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """The official SQuAD normalisation: lower case, no punctuation, no a/an/the, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _answer_tokens(text):
    tokens = []
    for word in normalize_answer(text).split():
        current = ""
        for char in word:
            if tokenization.is_cjk_char(char):
                if current:
                    tokens.append(current)
                    current = ""
                tokens.append(char)
            else:
                current += char
        if current:
            tokens.append(current)
    return tokens


def exact_match_score(prediction, gold):
    """1.0 when the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction, gold):
    """Token-overlap F1 of the normalised texts (CJK characters count as tokens)."""
    pred_tokens, gold_tokens = _answer_tokens(prediction), _answer_tokens(gold)
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def evaluate(examples, predictions):
    """{"exact_match", "f1", "total"} in percent (plus HasAns_/NoAns_ splits when both occur).

    Gold answers whose normalisation is empty are dropped; a question left
    with none (SQuAD 2.0's impossible ones) has the gold answer "".
    A question without a prediction scores 0.
    """
    scores = {"HasAns": ([], []), "NoAns": ([], [])}
    for example in examples:
        golds = [a for a in example.answers if normalize_answer(a)]
        if not golds:
            golds = [""]
        prediction = predictions.get(example.qas_id)
        key = "HasAns" if golds != [""] else "NoAns"
        if prediction is None:
            em = f1 = 0.0
        else:
            em = max(exact_match_score(prediction, g) for g in golds)
            f1 = max(f1_score(prediction, g) for g in golds)
        scores[key][0].append(em)
        scores[key][1].append(f1)
    all_em = scores["HasAns"][0] + scores["NoAns"][0]
    all_f1 = scores["HasAns"][1] + scores["NoAns"][1]
    total = len(all_em)
    results = collections.OrderedDict([
        ("exact_match", 100.0 * sum(all_em) / total if total else 0.0),
        ("f1", 100.0 * sum(all_f1) / total if total else 0.0),
        ("total", total)])
    if scores["HasAns"][0] and scores["NoAns"][0]:
        for key, (ems, f1s) in scores.items():
            results[key + "_exact_match"] = 100.0 * sum(ems) / len(ems)
            results[key + "_f1"] = 100.0 * sum(f1s) / len(f1s)
            results[key + "_total"] = len(ems)
    return dict(results)


def stack_results(unique_ids, start_logits, end_logits):
    """{unique_id: (start_logits, end_logits)} from batched predict outputs."""
    unique_ids = np.asarray(unique_ids).reshape(-1)
    return {int(u): (s, e) for u, s, e in zip(unique_ids, start_logits, end_logits)}
