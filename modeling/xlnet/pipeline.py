"""XLNet's pre-training input ("xlnet"): SentencePiece text in memory-aligned streams.

Segment-level recurrence needs the batches in reading order: the network
remembers each row's last segment (`modeling.xlnet.network`), so row i of
batch t + 1 must be the text that follows row i of batch t. The pipeline
therefore cuts the corpus into `batch_size` streams, as Transformer-XL and
XLNet do, and never shuffles rows. Documents are dealt round-robin to the
streams (document j of a pass to stream `(j + pass) % streams`, so passes
differ); a stream is its documents' SentencePiece ids one after the other,
each document closed by `<eod>`. `mem_reset` is 1 on a stream's first row
of a pass, which empties that row's memory.

Rows have one of two layouts (recipe data `layout`):

* "two_segments" (the default, XLNet's `create_tfrecords`): a row is
  `reuse A <sep> B <sep> <cls>`. The reuse part is the stream's next
  `reuse_len` tokens (half the row by default); the network caches only
  it as memory (the config's `reuse_len`, set by `fit_config`), and the
  stream advances `reuse_len` tokens a row, so the memory of row t + 1 is
  the text just before it. A is the text right after the reuse part, up
  to a line (sentence) boundary; B is, half the time, A's continuation
  and otherwise whole lines of another document (`split_a_and_b`);
  segment ids 0 (reuse, A, the first `<sep>`), 1 (B, the second `<sep>`)
  and 2 (`<cls>`), so relative segment encoding sees both of its sides.
* "stream": a row is the stream's next `max_seq_length` tokens, segment
  ids all 0 (earlier versions of this project).

The positions to predict (about 1/K of the tokens, K the recipe's
`partial_prediction_k`, 6 by default) are, with `span_prediction` (the
default), XLNet's n-gram spans (`permutation.sample_span_mask`: lengths
1-5 with P(n) proportional to 1/n, starting at word-start pieces), each
part of a two-segment row with half the budget and its own random
factorisation order (`permutation.local_perm_mask`); the reuse part never
sees the rest of its row. `span_prediction: false` predicts single tokens
(the stream layout: the last 1/K of one random order of the row).

Training repeats passes forever, dropping the rows a pass cannot fill in
every stream. Evaluation (`is_training=False`) reads the input
`eval_passes` times (each pass under new orders, so more of the held-out
tokens are predicted) and pads the last rows, so every token is in some
row. The same seed gives the same batches, so the trainer's evaluation and
the baselines (`baseline_batches` with the evaluation batch size) score the
same targets.

Under a `tf.distribute` strategy each input pipeline reads its share of the
documents (`input_pipeline_id`) and makes `per-replica batch x replicas it
feeds` streams; its batches go to its replicas in turn, so every replica
sees consecutive segments of its own streams.

Features (int32 unless noted): `input_ids`, `input_mask` (1 real),
`segment_ids` `[batch, seq]`; `perm_mask` float32 `[batch, seq, seq]`;
`target_mapping` float32 `[batch, num_predict, seq]`; `target_ids`
`[batch, num_predict]`; `target_weights` float32 `[batch, num_predict]`;
`mem_reset` `[batch]`.
"""

import collections
import itertools

import numpy as np
import tensorflow as tf

from data import corpus as corpus_lib
from data import input_pipeline
from data.tokenizers import sentencepiece as sp_lib
from modeling import registry
from modeling.recipes.pipelines.base import RawTextPipeline
from modeling.xlnet import permutation

__all__ = ["LAYOUTS", "XLNetPipeline", "check_layout", "memory_aligned_rows", "split_a_and_b",
           "two_segment_rows", "xlnet_dataset"]

# Documents tokenized per tensorflow-text call.
_DOCUMENTS_PER_CALL = 64


def _tokenized_sentences(files, tokenizer, eod_id, stats=None):
    """Yields each document as its sentences' ids: one list per line, then `[<eod>]`.

    A line is a sentence, as in XLNet's `_create_data` (where every line and
    every `<eod>` gets its own sentence id): segment A may end and B start
    only at such a boundary.
    """
    documents = corpus_lib.iter_documents(files, stats)
    while True:
        chunk = list(itertools.islice(documents, _DOCUMENTS_PER_CALL))
        if not chunk:
            return
        lines, owners = [], []
        for index, document in enumerate(chunk):
            for lineno, raw in document.lines:
                text = corpus_lib.decode_line(raw, document.path, lineno, stats).strip()
                if text:
                    lines.append(text)
                    owners.append(index)
        ids = tokenizer.tokenize(tf.constant(lines, tf.string)).to_list() if lines else []
        sentences = [[] for _ in chunk]
        for owner, row in zip(owners, ids):
            if row:
                sentences[owner].append(row)
        for document in sentences:
            if document:
                yield document + [[eod_id]]


def _tokenized_documents(files, tokenizer, eod_id, stats=None):
    """Yields each document's ids (its lines' SentencePiece ids, then `<eod>`)."""
    for sentences in _tokenized_sentences(files, tokenizer, eod_id, stats):
        yield [i for sentence in sentences for i in sentence]


def memory_aligned_rows(documents_fn, num_streams, seq_length, pad_id, passes=None,
                        pad_last=False):
    """Yields `(ids, real_length, mem_reset)` rows: step by step, stream by stream.

    Args:
        documents_fn: `pass_index -> iterable of token id lists` (one pass).
        num_streams: rows per step.
        seq_length: tokens per row.
        pad_id: id of the padding of incomplete rows.
        passes: number of passes (None: forever).
        pad_last: at the end of a pass, emit the streams' last tokens in
            padded rows (until every stream is empty) instead of dropping them.
    """
    for pass_index in (itertools.count() if passes is None else range(passes)):
        buffers = [[] for _ in range(num_streams)]
        started = [False] * num_streams
        any_row = False

        def emit_step():
            rows = []
            for s in range(num_streams):
                take = buffers[s][:seq_length]
                del buffers[s][:seq_length]
                rows.append((take + [pad_id] * (seq_length - len(take)), len(take),
                             0 if started[s] else 1))
                started[s] = True
            return rows

        for j, document in enumerate(documents_fn(pass_index)):
            buffers[(j + pass_index) % num_streams].extend(document)
            while all(len(b) >= seq_length for b in buffers):
                any_row = True
                yield from emit_step()
        if pad_last:
            while any(buffers):
                any_row = True
                yield from emit_step()
        if not any_row and passes is None:
            raise corpus_lib.CorpusError(
                "the input holds too little text for %d streams of %d-token segments; "
                "expected at least %d tokens (lower the batch size or --max_seq_length)"
                % (num_streams, seq_length, num_streams * seq_length))


def split_a_and_b(rng, tokens, sentence_ids, begin, tot_len, random_b):
    """Segments A and B of `tot_len` tokens from `tokens[begin:]` (XLNet's `_split_a_and_b`).

    A starts at `begin` and may end at any sentence boundary less than
    `tot_len` tokens on (the cut points). Half the time (and always when
    there is no cut point) B is random text, `random_b(length)` of about
    `tot_len - len(A)` tokens (whole sentences of another document);
    otherwise B is A's continuation, from the cut point to the first boundary
    at least `tot_len` tokens past `begin`. The longer of the two then loses
    tokens on its right until they hold `tot_len` together.

    Args:
        rng: a `numpy.random.Generator`.
        tokens, sentence_ids: int arrays, the stream's text and each token's
            sentence number (a boundary is where it changes); the text after
            `begin` must hold more than `tot_len` tokens and end at a boundary.
        begin: where A starts.
        tot_len: tokens of A and B together.
        random_b: `length -> (ids list)` of random text.

    Returns:
        `(a, b, is_next)`, is_next 1 when B continues A.
    """
    data_len = len(tokens)
    end = begin + 1
    cut_points = []
    while end < data_len:
        if sentence_ids[end] != sentence_ids[end - 1]:
            if end - begin >= tot_len:
                break
            cut_points.append(end)
        end += 1
    if not cut_points or rng.random() < 0.5:
        is_next = 0
        a_end = int(rng.choice(cut_points)) if cut_points else end
        b = list(random_b(max(1, tot_len - (a_end - begin))))
    else:
        is_next = 1
        a_end = int(rng.choice(cut_points))
        b = list(tokens[a_end:end])
    a = list(tokens[begin:a_end])
    while len(a) + len(b) > tot_len:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b, is_next


class _RandomText:
    """Random whole sentences of the documents read so far this pass (XLNet's random B).

    The authors draw B at a random place of the whole shard; a stream read
    once cannot look ahead, so B comes from a pool of the last `pool_size`
    documents read, never one whose text is in the row when another exists.
    """

    def __init__(self, rng, pool_size=1000):
        self.rng = rng
        self.pool = collections.deque(maxlen=pool_size)

    def add(self, number, tokens, sentence_ids):
        self.pool.append((number, tokens, sentence_ids))

    def sample(self, length, exclude):
        candidates = [entry for entry in self.pool if entry[0] not in exclude] or list(self.pool)
        index = int(self.rng.integers(len(candidates)))
        _, tokens, sentence_ids = candidates[index]
        k = int(self.rng.integers(len(tokens)))
        while k > 0 and sentence_ids[k - 1] == sentence_ids[k]:
            k -= 1  # back to the start of its sentence
        out = []
        while True:
            out.append(tokens[k])
            k += 1
            at_boundary = k == len(tokens) or sentence_ids[k] != sentence_ids[k - 1]
            if len(out) >= length and at_boundary:
                return out
            if k == len(tokens):  # on into the next document of the pool
                index = (index + 1) % len(candidates)
                _, tokens, sentence_ids = candidates[index]
                k = 0


def two_segment_rows(documents_fn, num_streams, seq_length, reuse_len, sep_id, cls_id,
                     pad_id, rng, passes=None, pad_last=False, pool_size=1000):
    """Yields XLNet's pre-training rows: `reuse A <sep> B <sep> <cls>`, stream by stream.

    Each stream (documents dealt round-robin as in `memory_aligned_rows`)
    advances `reuse_len` tokens a step: a row is the stream's next
    `reuse_len` tokens (the part the network caches as memory, so the memory
    of step t + 1 is the text before its reuse part), then A from the text
    right after them and B (`split_a_and_b`), then `<sep> B <sep> <cls>`.
    Segment ids: 0 for the reuse part, A and the first `<sep>`; 1 for B and
    the second `<sep>`; 2 (XLNet's SEG_ID_CLS) for `<cls>`, as in the
    authors' `create_tfrecords`.

    Yields `(ids, segment_ids, real_length, mem_reset, is_next)`; with
    `pad_last` (evaluation) a stream whose text is spent gives padded rows
    (length 0, is_next -1) until every stream is spent.
    """
    tot_len = seq_length - reuse_len - 3
    need = reuse_len + tot_len + 1
    for pass_index in (itertools.count() if passes is None else range(passes)):
        tokens = [[] for _ in range(num_streams)]
        sentences = [[] for _ in range(num_streams)]
        owners = [[] for _ in range(num_streams)]
        position = [0] * num_streams
        started = [False] * num_streams
        random_text = _RandomText(rng, pool_size)
        sentence_number = 0
        any_row = False

        def ready(s):
            return len(tokens[s]) - position[s] >= need

        def emit_step():
            rows = []
            for s in range(num_streams):
                reset = 0 if started[s] else 1
                started[s] = True
                if not ready(s):
                    rows.append(([pad_id] * seq_length, [0] * seq_length, 0, reset, -1))
                    continue
                p = position[s]
                text, sids = tokens[s][p:], sentences[s][p:]
                exclude = set(owners[s][p:p + need])
                a, b, is_next = split_a_and_b(
                    rng, text, sids, reuse_len, tot_len,
                    lambda length, exclude=exclude: random_text.sample(length, exclude))
                ids = text[:reuse_len] + a + [sep_id] + b + [sep_id, cls_id]
                segment_ids = [0] * (reuse_len + len(a) + 1) + [1] * (len(b) + 1) + [2]
                assert len(ids) == seq_length == len(segment_ids)
                rows.append((ids, segment_ids, seq_length, reset, is_next))
                position[s] = p + reuse_len
                if position[s] > 4 * need:  # drop the text read
                    for buffer in (tokens[s], sentences[s], owners[s]):
                        del buffer[:position[s]]
                    position[s] = 0
            return rows

        for j, document in enumerate(documents_fn(pass_index)):
            flat, sids = [], []
            for sentence in document:
                flat.extend(sentence)
                sids.extend([sentence_number] * len(sentence))
                sentence_number += 1
            random_text.add(j, flat, sids)
            s = (j + pass_index) % num_streams
            tokens[s].extend(flat)
            sentences[s].extend(sids)
            owners[s].extend([j] * len(flat))
            while all(ready(i) for i in range(num_streams)):
                any_row = True
                yield from emit_step()
        if pad_last:
            while any(ready(i) for i in range(num_streams)):
                any_row = True
                yield from emit_step()
        if not any_row and passes is None:
            raise corpus_lib.CorpusError(
                "the input holds too little text for %d streams of %d-token rows; expected "
                "at least %d tokens per stream (lower the batch size or --max_seq_length)"
                % (num_streams, seq_length, need))


LAYOUTS = ("two_segments", "stream")


def check_layout(seq_length, layout, reuse_len):
    """The reuse length of `layout` for rows of `seq_length` (one-line ValueErrors)."""
    if layout not in LAYOUTS:
        raise ValueError("xlnet recipe data: layout must be one of %s, got %r"
                         % (", ".join(LAYOUTS), layout))
    if layout == "stream":
        return None
    reuse_len = seq_length // 2 if reuse_len is None else int(reuse_len)
    if reuse_len < 1 or seq_length - reuse_len - 3 < 2:
        raise ValueError("xlnet recipe data: reuse_len must leave at least 2 tokens for A and "
                         "B beside <sep> <sep> <cls> in --max_seq_length=%d rows, got %r"
                         % (seq_length, reuse_len))
    return reuse_len


def xlnet_dataset(files, model_file, seq_length, batch_size, is_training, seed,
                  k=6, eval_passes=1, input_context=None, layout="two_segments",
                  reuse_len=None, span_prediction=True):
    """The `tf.data.Dataset` of the module docstring (per-replica batches).

    `layout`: "two_segments" (XLNet's `reuse A <sep> B <sep> <cls>` rows,
    `two_segment_rows`; `reuse_len` defaults to half the row) or "stream"
    (plain stream segments, segment ids all 0). `span_prediction`: the
    targets are spans (`permutation.sample_span_mask`) or, False, single
    random tokens (with the stream layout: the last 1/K of a random order,
    `permutation.sample_permutation`).
    """
    reuse_len = check_layout(seq_length, layout, reuse_len)
    files = corpus_lib.expand_file_patterns(files)
    tokenizer = sp_lib.SentencePieceTokenizer(model_file)
    special = tokenizer.special_ids()
    symbols = ("<eod>", "<pad>") + (("<sep>", "<cls>") if layout == "two_segments" else ())
    for symbol in symbols:
        if symbol not in special:
            raise sp_lib.SentencePieceError(
                "--vocab_file=%s: the SentencePiece model has no %s piece; expected one "
                "learned by run/create_vocab.py --model=sentencepiece (XLNet's symbols)"
                % (model_file, symbol))
    eod_id, pad_id = special["<eod>"], special["<pad>"]
    is_start = permutation.start_piece_table(tokenizer.id_to_piece, tokenizer.vocab_size())
    streams_per_replica = batch_size
    replicas_here, shard, num_shards = 1, 0, 1
    if input_context is not None:
        streams_per_replica = input_context.get_per_replica_batch_size(batch_size)
        replicas_here = max(1, input_context.num_replicas_in_sync
                            // input_context.num_input_pipelines)
        shard, num_shards = input_context.input_pipeline_id, input_context.num_input_pipelines
    num_streams = streams_per_replica * replicas_here
    num_predict = permutation.num_predict_for(seq_length, k)
    passes = None if is_training else eval_passes

    def documents(pass_index):
        del pass_index
        docs = _tokenized_documents(files, tokenizer, eod_id)
        return (d for j, d in enumerate(docs) if j % num_shards == shard)

    def sentence_documents(pass_index):
        del pass_index
        docs = _tokenized_sentences(files, tokenizer, eod_id)
        return (d for j, d in enumerate(docs) if j % num_shards == shard)

    def stream_features(rng):
        rows = memory_aligned_rows(documents, num_streams, seq_length, pad_id,
                                   passes=passes, pad_last=not is_training)
        for ids, length, reset in rows:
            ids = np.asarray(ids, np.int32)
            mask = (np.arange(seq_length) < length).astype(np.int32)
            if span_prediction:
                features = _stream_span_features(rng, ids, length, is_start, num_predict, k)
            else:
                features = permutation.sample_permutation(rng, ids, mask, num_predict, k)
            features.update(input_ids=ids, input_mask=mask,
                            segment_ids=np.zeros([seq_length], np.int32),
                            mem_reset=np.int32(reset))
            yield features

    def two_segment_features(rng):
        sep_id, cls_id = special["<sep>"], special["<cls>"]
        rows = two_segment_rows(sentence_documents, num_streams, seq_length, reuse_len, sep_id,
                                cls_id, pad_id, rng, passes=passes, pad_last=not is_training)
        for ids, segment_ids, length, reset, _ in rows:
            ids = np.asarray(ids, np.int32)
            if length:
                features = permutation.two_part_features(
                    rng, ids, is_start[ids], (ids == sep_id) | (ids == cls_id), reuse_len,
                    num_predict, span=span_prediction)
                del features["spans"]
            else:  # a spent stream's padded row: nothing seen, nothing predicted
                features = permutation.sample_permutation(
                    rng, ids, np.zeros([seq_length], np.int32), num_predict, k)
            features.update(input_ids=ids, input_mask=np.full([seq_length], int(length > 0),
                                                              np.int32),
                            segment_ids=np.asarray(segment_ids, np.int32),
                            mem_reset=np.int32(reset))
            yield features

    def generate():
        rng = np.random.default_rng([seed, shard])
        if layout == "stream":
            return stream_features(rng)
        return two_segment_features(rng)

    signature = {
        "input_ids": tf.TensorSpec([seq_length], tf.int32),
        "input_mask": tf.TensorSpec([seq_length], tf.int32),
        "segment_ids": tf.TensorSpec([seq_length], tf.int32),
        "perm_mask": tf.TensorSpec([seq_length, seq_length], tf.float32),
        "target_mapping": tf.TensorSpec([num_predict, seq_length], tf.float32),
        "target_ids": tf.TensorSpec([num_predict], tf.int32),
        "target_weights": tf.TensorSpec([num_predict], tf.float32),
        "mem_reset": tf.TensorSpec([], tf.int32),
    }
    return input_pipeline.stream_dataset(generate, signature, streams_per_replica)


def _stream_span_features(rng, ids, length, is_start, num_predict, k):
    """Span targets over a stream row's real tokens (no functional tokens, one order)."""
    seq_length = len(ids)
    features = permutation.sample_permutation(rng, ids, np.zeros([seq_length]), num_predict, k)
    if not length:
        return features
    budget = min(num_predict, permutation.num_predict_for(length, k))
    mask, _ = permutation.sample_span_mask(rng, is_start[ids[:length]], budget)
    part, is_target = permutation.local_perm_mask(rng, mask, np.zeros([length], bool))
    perm_mask = np.zeros([seq_length, seq_length], np.float32)
    perm_mask[:length, :length] = part
    features = permutation.target_features(ids, np.nonzero(is_target)[0], num_predict)
    features["perm_mask"] = perm_mask
    return features


@registry.pipelines.register("xlnet")
class XLNetPipeline(RawTextPipeline):
    """Raw text -> SentencePiece streams with factorisation orders (module docstring).

    Recipe `data` options: `partial_prediction_k` (K, 6), `eval_passes`
    (readings of the evaluation input under new orders, 1), `layout`
    ("two_segments", XLNet's `reuse A <sep> B <sep> <cls>` rows; "stream":
    the plain stream segments of earlier versions), `reuse_len` (the reuse
    part, null: half the row; the network's config must cache the same
    `reuse_len`), `span_prediction` (true: XLNet's n-gram spans; false:
    single tokens).
    """

    data_options = ("partial_prediction_k", "eval_passes", "layout", "reuse_len",
                    "span_prediction")

    demo_vocab_files = {"vocab_file": "data/sample/xlnet/spiece.model"}

    def _model_file(self):
        if not self.options.vocab_file:
            raise sp_lib.SentencePieceError(
                "the xlnet pipeline needs --vocab_file (a SentencePiece spiece.model)")
        return self.options.vocab_file

    def vocab_size(self):
        return sp_lib.SentencePieceTokenizer(self._model_file()).vocab_size()

    def check_vocab_files(self):
        super().check_vocab_files()
        sp_lib.load_model_proto(self._model_file())

    def _settings(self):
        """`(k, eval_passes, layout, reuse_len, span_prediction)` of the recipe data."""
        k = int(self.data.get("partial_prediction_k", 6))
        eval_passes = int(self.data.get("eval_passes", 1))
        if k < 1 or eval_passes < 1:
            raise ValueError("xlnet recipe data: partial_prediction_k and eval_passes must be "
                             ">= 1, got %r and %r" % (k, eval_passes))
        layout = self.data.get("layout", "two_segments")
        reuse_len = check_layout(self.options.max_seq_length, layout, self.data.get("reuse_len"))
        span_prediction = self.data.get("span_prediction", True)
        if not isinstance(span_prediction, bool):
            raise ValueError("xlnet recipe data: span_prediction must be true or false, got %r"
                             % (span_prediction,))
        return k, eval_passes, layout, reuse_len, span_prediction

    def check_job(self, job):
        """Memory-aligned rows must reach each replica in order, and the network's memory
        lives in variables of dynamic shape (one-line errors otherwise)."""
        if getattr(job, "data_service_address", None):
            raise ValueError(
                "--data_service_address: the xlnet pipeline's rows continue the text of the "
                "previous batch's rows (the network's memory), which the tf.data service "
                "(batches dealt to any worker) would break; leave it out")
        for flag, broken in (("--distribution_strategy=tpu",
                              getattr(job, "strategy_name", None) == "tpu"),
                             ("--use_xla", getattr(job, "use_xla", False))):
            if broken:
                raise ValueError(
                    "%s: the xlnet network keeps each row's memory in variables of dynamic "
                    "shape, which XLA cannot assign; leave it out" % flag)

    def fit_config(self, config, demo):
        """The network caches what the rows' layout makes reusable (called by the job).

        Two-segment rows advance `reuse_len` tokens a step, so only their
        first `reuse_len` positions may become the next step's memory
        (caching A and B would show the next row its own text). The demo
        config gets the pipeline's `reuse_len`; a user's config with a memory
        must already have it (one-line error naming `reuse_len`).
        """
        reuse_len = self._settings()[3]
        if config.mem_len == 0 or config.reuse_len == reuse_len:
            return config
        if demo:
            return config.replace(reuse_len=reuse_len)
        raise ValueError(
            "reuse_len=%r in the model config, but the xlnet pipeline's %s rows of "
            "--max_seq_length=%d cache %r tokens as memory; expected \"reuse_len\": %s in the "
            "config (or the recipe data's reuse_len to match it)"
            % (config.reuse_len, self.data.get("layout", "two_segments"),
               self.options.max_seq_length, reuse_len,
               "null" if reuse_len is None else reuse_len))

    def input_fn(self, inputs, is_training, batch_size):
        options = self.options
        k, eval_passes, layout, reuse_len, span_prediction = self._settings()
        seed = options.seed if options.seed is not None else 0

        def input_fn(input_context=None):
            return xlnet_dataset(inputs, self._model_file(), options.max_seq_length,
                                 batch_size, is_training, seed, k=k, eval_passes=eval_passes,
                                 input_context=input_context, layout=layout,
                                 reuse_len=reuse_len, span_prediction=span_prediction)
        return input_fn
