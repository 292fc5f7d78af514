"""Causal-LM input (GPT-2): raw text -> byte-level BPE ids -> fixed windows, in `tf.data`.

GPT-2 is trained on a plain token stream: there is nothing to mask and no
sentence pairs, so the whole corpus is tokenized, documents are separated by
the end-of-text token (so the model learns where a text stops, and
generation can stop there), and the stream is cut into consecutive windows
of `max_seq_length` tokens. Every window is full except the last one of a
file, which is padded (`input_mask` 0 on the padding; the causal-LM
objective ignores it).

Corpus format (`data.corpus`): one sentence per line, a blank line between
documents; the end of a file ends its last document. Each line is tokenized
as `line + "\\n"` (line ending normalised), so a newline token ("Ċ") ends
every line, as in the text the lines came from; lines over
`max_line_bytes` are skipped without ending their document. Every document
is followed by `<|endoftext|>`:

    doc1 line1\\n doc1 line2\\n <|endoftext|> doc2 line1\\n <|endoftext|> ...

Tokenization runs in the graph (`data.tokenizers.byte_bpe.GraphByteBPETokenizer`,
the same ids as the Python `ByteBPETokenizer`); `file_windows` is the same
packing in plain Python, the reference the tests compare against.

A window never spans two files: a file is the unit of parallel reading and
of sharding between input pipelines (`input_context`, files when there are
enough of them, windows otherwise), as in `data.pretraining.dynamic_masking`.

Features: int32 `input_ids` and `input_mask` `[batch, max_seq_length]`.
"""

import tensorflow as tf

from data import corpus as corpus_lib
from data.pretraining import text_windows
from data.tokenizers import byte_bpe

__all__ = ["causal_lm_dataset", "causal_lm_input_fn_builder", "file_windows"]

_no_autograph = tf.autograph.experimental.do_not_convert


def _end_of_text_id(tokenizer, vocab_file):
    if tokenizer.eos_id is None:
        raise byte_bpe.ByteBPEError("vocab file %s has no %s token: the causal-LM pipeline "
                                    "separates documents with it"
                                    % (vocab_file, byte_bpe.END_OF_TEXT))
    return tokenizer.eos_id


# ------------------------------------------------------------- Python reference


def file_windows(path, tokenizer, max_seq_length,
                 max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES):
    """The windows of one file, in Python: `[(ids, length)]`, ids padded with eot.

    `tokenizer` is a `ByteBPETokenizer`. The reference of `causal_lm_dataset`
    (same stream, same cuts).
    """
    eot = _end_of_text_id(tokenizer, path)
    stream = []
    stats = corpus_lib.ReadStats()
    for document in corpus_lib.iter_documents([path], stats, max_line_bytes):
        for lineno, raw in document.lines:
            text = corpus_lib.decode_line(raw, path, lineno, stats)
            stream.extend(tokenizer.encode(text.rstrip("\r\n") + "\n"))
        stream.append(eot)
    windows = []
    for start in range(0, len(stream), max_seq_length):
        ids = stream[start:start + max_seq_length]
        windows.append((ids + [eot] * (max_seq_length - len(ids)), len(ids)))
    return windows


# ------------------------------------------------------------------ tf.data


def _pack_file(path, tokenizer, window, eot, lines_per_block, max_line_bytes):
    """Windows `(ids [window] padded with eot, length)` of one text file."""
    lines = tf.data.TextLineDataset(path).batch(lines_per_block)

    @_no_autograph
    def tokenize_block(block):
        block = tf.strings.regex_replace(block, "\r$", "")
        blank = tf.equal(tf.strings.length(tf.strings.strip(block)), 0)
        # Over-long lines give no tokens and do not end a document.
        skipped = tf.strings.length(block) > max_line_bytes
        text = tf.where(tf.logical_or(blank, skipped), "", block + "\n")
        ids = tokenizer.tokenize(text)  # one row per line, empty for those
        return ids.flat_values, ids.row_lengths(), blank, tf.constant(False)

    blocks = text_windows.tokenized_blocks(lines, tokenize_block)

    # State: a document is open (a non-blank line since the last eot), and
    # the tokens of the unfinished window.
    initial_state = (tf.constant(False), tf.zeros([0], tf.int32))

    @_no_autograph
    def step(state, block):
        doc_open, carry = state
        tokens, lengths, blank, is_final = block
        # A blank line closes the open document: eot before its (no) tokens.
        before = tf.concat([[doc_open], tf.logical_not(blank[:-1])], 0)
        eot_here = tf.logical_and(blank, before[:tf.size(blank)])
        rows = tf.RaggedTensor.from_row_lengths(tokens, lengths)
        eots = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(eot_here, tf.int32))], eot),
            tf.cast(eot_here, tf.int64))
        stream = tf.concat([eots, rows], axis=1).flat_values
        doc_open = tf.cond(tf.size(blank) > 0,
                           lambda: tf.logical_not(blank[-1]), lambda: doc_open)
        # The end of the file closes its last document.
        final_eot = tf.logical_and(is_final, doc_open)
        stream = tf.concat([stream, tf.fill([tf.cast(final_eot, tf.int32)], eot)], 0)
        doc_open = tf.logical_and(doc_open, tf.logical_not(is_final))
        ids = tf.concat([carry, stream], 0)
        n = tf.size(ids)
        full = n // window
        # At the end of the file the unfinished window goes out padded.
        out_count = full + tf.cast(tf.logical_and(is_final, n % window > 0), tf.int32)
        padded = tf.concat([ids, tf.fill([tf.maximum(0, out_count * window - n)], eot)], 0)
        padded = padded[:out_count * window]
        out = tf.reshape(padded, [-1, window])
        out_lengths = tf.minimum(window, n - tf.range(out_count) * window)
        carry = tf.cond(is_final, lambda: tf.zeros([0], tf.int32),
                        lambda: ids[full * window:])
        return (doc_open, carry), (out, out_lengths)

    return blocks.scan(initial_state, step).unbatch()


def causal_lm_dataset(input_patterns, vocab_file, merges_file, max_seq_length, batch_size,
                      is_training=True, seed=None, input_context=None, repeat=None,
                      shuffle_buffer_size=1000, cycle_length=4, lines_per_block=256,
                      max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES, drop_remainder=None,
                      tokenizer=None):
    """Batches of causal-LM windows from raw text files.

    Args:
      input_patterns: comma-separated globs (or a list) of text files in the
        corpus format.
      vocab_file, merges_file: GPT-2 `vocab.json` (with `<|endoftext|>`)
        and `merges.txt`.
      max_seq_length: window length.
      batch_size: this pipeline's batch size; with `input_context`, the
        global one (the per-replica size is derived from it).
      is_training: shuffle files and windows, interleave files.
      seed: seeds the shuffles; None draws one.
      input_context: a `tf.distribute.InputContext`, or None.
      repeat: repeat forever; default `is_training`.
      shuffle_buffer_size: windows in the shuffle buffer (training).
      cycle_length: files read in parallel (training).
      lines_per_block: lines tokenized per tokenizer call.
      max_line_bytes: longer lines are skipped, as `data.corpus` does.
      drop_remainder: drop a last partial batch; default `is_training`
        (evaluation scores every window once).
      tokenizer: a `GraphByteBPETokenizer` to reuse.

    Returns:
      A `tf.data.Dataset` of `{"input_ids", "input_mask"}` int32
      `[batch, max_seq_length]`.
    """
    if max_seq_length < 2:
        raise ValueError("max_seq_length must be at least 2, got %d" % max_seq_length)
    files, repeat, seed, batch_size = text_windows.read_settings(
        input_patterns, is_training, batch_size, repeat, seed, input_context)
    if drop_remainder is None:
        drop_remainder = is_training
    if tokenizer is None:
        tokenizer = byte_bpe.GraphByteBPETokenizer(vocab_file, merges_file)
    eot = _end_of_text_id(tokenizer, vocab_file)

    @_no_autograph
    def pack(path):
        return _pack_file(path, tokenizer, max_seq_length, eot, lines_per_block,
                          max_line_bytes)

    d = text_windows.batched_windows(
        files, pack, batch_size, is_training, input_context=input_context, repeat=repeat,
        seed=seed, cycle_length=cycle_length, shuffle_buffer_size=shuffle_buffer_size,
        drop_remainder=drop_remainder)

    @_no_autograph
    def features(ids, lengths):
        mask = tf.sequence_mask(lengths, max_seq_length, dtype=tf.int32)
        return {"input_ids": ids, "input_mask": mask}

    return d.map(features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def causal_lm_input_fn_builder(input_files, vocab_file, merges_file, max_seq_length,
                               is_training, batch_size, **kwargs):
    """`input_fn(input_context=None)` for `causal_lm_dataset`, for
    `strategy.distribute_datasets_from_function`."""
    def input_fn(input_context=None):
        return causal_lm_dataset(input_files, vocab_file, merges_file, max_seq_length,
                                 batch_size, is_training=is_training,
                                 input_context=input_context, **kwargs)
    return input_fn
