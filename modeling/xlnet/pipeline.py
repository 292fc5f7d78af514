"""XLNet's pre-training input ("xlnet"): SentencePiece text in memory-aligned streams.

Segment-level recurrence needs the batches in reading order: the network
remembers each row's last segment (`modeling.xlnet.network`), so row i of
batch t + 1 must be the text that follows row i of batch t. The pipeline
therefore cuts the corpus into `batch_size` streams, as Transformer-XL and
XLNet do, and never shuffles rows:

* documents are dealt round-robin to the streams (document j of a pass to
  stream `(j + pass) % streams`, so passes differ); a stream is its
  documents' SentencePiece ids one after the other, each document closed
  by `<eod>`;
* batch t holds segment t (`max_seq_length` tokens) of every stream, in
  stream order; `mem_reset` is 1 on a stream's first segment of a pass, which
  empties that row's memory (the end of one pass is not the text before the
  next);
* each row gets its own random factorisation order with partial prediction
  (`modeling.xlnet.permutation`, about 1/K of the tokens predicted, K = the
  recipe's `partial_prediction_k`, 6 by default).

Training repeats passes forever, dropping the segments a pass cannot fill in
every stream. Evaluation (`is_training=False`) reads the input
`eval_passes` times (each pass under new orders, so more of the held-out
tokens are predicted) and pads the last segments, so every token is in some
row. The same seed gives the same batches, so the trainer's evaluation and
the baselines (`baseline_batches` with the evaluation batch size) score the
same targets.

Under a `tf.distribute` strategy each input pipeline reads its share of the
documents (`input_pipeline_id`) and makes `per-replica batch x replicas it
feeds` streams; its batches go to its replicas in turn, so every replica
sees consecutive segments of its own streams.

Features (int32 unless noted): `input_ids`, `input_mask` (1 real),
`segment_ids` (zeros) `[batch, seq]`; `perm_mask` float32 `[batch, seq,
seq]`; `target_mapping` float32 `[batch, num_predict, seq]`; `target_ids`
`[batch, num_predict]`; `target_weights` float32 `[batch, num_predict]`;
`mem_reset` `[batch]`.
"""

import itertools

import numpy as np
import tensorflow as tf

from data import corpus as corpus_lib
from data.tokenizers import sentencepiece as sp_lib
from modeling import registry
from modeling.recipes.pipelines.base import Pipeline
from modeling.xlnet import permutation

__all__ = ["XLNetPipeline", "memory_aligned_rows", "xlnet_dataset"]

# Documents tokenized per tensorflow-text call.
_DOCUMENTS_PER_CALL = 64


def _tokenized_documents(files, tokenizer, eod_id, stats=None):
    """Yields each document's ids (its lines' SentencePiece ids, then `<eod>`)."""
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
        pieces = [[] for _ in chunk]
        for owner, row in zip(owners, ids):
            pieces[owner].extend(row)
        for row in pieces:
            if row:
                yield row + [eod_id]


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


def xlnet_dataset(files, model_file, seq_length, batch_size, is_training, seed,
                  k=6, eval_passes=1, input_context=None):
    """The `tf.data.Dataset` of the module docstring (per-replica batches)."""
    files = corpus_lib.expand_file_patterns(files)
    tokenizer = sp_lib.SentencePieceTokenizer(model_file)
    special = tokenizer.special_ids()
    for symbol in ("<eod>", "<pad>"):
        if symbol not in special:
            raise sp_lib.SentencePieceError(
                "--vocab_file=%s: the SentencePiece model has no %s piece; expected one "
                "learned by run/create_vocab.py --model=sentencepiece (XLNet's symbols)"
                % (model_file, symbol))
    eod_id, pad_id = special["<eod>"], special["<pad>"]
    streams_per_replica = batch_size
    replicas_here, shard, num_shards = 1, 0, 1
    if input_context is not None:
        streams_per_replica = input_context.get_per_replica_batch_size(batch_size)
        replicas_here = max(1, input_context.num_replicas_in_sync
                            // input_context.num_input_pipelines)
        shard, num_shards = input_context.input_pipeline_id, input_context.num_input_pipelines
    num_streams = streams_per_replica * replicas_here
    num_predict = permutation.num_predict_for(seq_length, k)

    def documents(pass_index):
        del pass_index
        docs = _tokenized_documents(files, tokenizer, eod_id)
        return (d for j, d in enumerate(docs) if j % num_shards == shard)

    def generate():
        rng = np.random.default_rng([seed, shard])
        rows = memory_aligned_rows(documents, num_streams, seq_length, pad_id,
                                   passes=None if is_training else eval_passes,
                                   pad_last=not is_training)
        for ids, length, reset in rows:
            ids = np.asarray(ids, np.int32)
            mask = (np.arange(seq_length) < length).astype(np.int32)
            features = permutation.sample_permutation(rng, ids, mask, num_predict, k)
            features.update(input_ids=ids, input_mask=mask,
                            segment_ids=np.zeros([seq_length], np.int32),
                            mem_reset=np.int32(reset))
            yield features

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
    d = tf.data.Dataset.from_generator(generate, output_signature=signature)
    # In order: a batch is one step of `streams_per_replica` consecutive streams.
    d = d.batch(streams_per_replica, drop_remainder=True)
    return d.prefetch(tf.data.AUTOTUNE)


@registry.pipelines.register("xlnet")
class XLNetPipeline(Pipeline):
    """Raw text -> SentencePiece streams with factorisation orders (module docstring).

    Recipe `data` options: `partial_prediction_k` (K, 6), `eval_passes`
    (readings of the evaluation input under new orders, 1).
    """

    data_options = ("partial_prediction_k", "eval_passes")

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

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        del work_dir  # nothing to build: the text is read as it is
        return list(train_texts), list(eval_texts)

    def input_fn(self, inputs, is_training, batch_size):
        options = self.options
        k = int(self.data.get("partial_prediction_k", 6))
        eval_passes = int(self.data.get("eval_passes", 1))
        if k < 1 or eval_passes < 1:
            raise ValueError("xlnet recipe data: partial_prediction_k and eval_passes must be "
                             ">= 1, got %r and %r" % (k, eval_passes))
        seed = options.seed if options.seed is not None else 0

        def input_fn(input_context=None):
            return xlnet_dataset(inputs, self._model_file(), options.max_seq_length,
                                 batch_size, is_training, seed, k=k, eval_passes=eval_passes,
                                 input_context=input_context)
        return input_fn
