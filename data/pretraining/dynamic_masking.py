"""RoBERTa's input pipeline: raw text, in-graph tokenization, dynamic masking.

Liu et al. (2019) drop BERT's static masking (``dupe_factor`` masked copies of
every instance written to disk) and next-sentence prediction. Here raw text
shards are read, tokenized and packed inside `tf.data`, and a fresh mask is
drawn every time a sequence is seen. The batches carry exactly the feature
names, shapes and dtypes of the static pipeline
(`data.input_pipeline.pretraining_feature_spec` after decoding), so the
pre-training model consumes them unchanged; ``segment_ids`` and
``next_sentence_labels`` are all 0.

Stages (`roberta_dataset`):

1. **Read and tokenize.** Each file is read line by line
   (`tf.data.TextLineDataset`); lines are grouped into blocks of
   ``lines_per_block`` and each block is tokenized with one call of
   `data.tokenizers.wordpiece.GraphTokenizer` (parallel map), which gives the ids
   of the Python `FullTokenizer`. Corpus format as in `data.corpus`: one
   sentence per line, a blank line (ASCII whitespace only) between documents,
   and a file end also ends a document; lines over ``max_line_bytes`` are
   skipped.
2. **Pack.** A `tf.data.Dataset.scan` over a file's blocks numbers the
   documents (a running count of blank lines) and packs the sentences into
   windows of at most ``max_seq_length - 2`` tokens, carrying the open
   window from block to block and closing it at the end of the file. The
   modes are the paper's (Liu et al. 2019, section 4.2) and fairseq's
   ``--sample-break-mode``:

   ``full_sentences`` (fairseq ``complete``, the paper's choice): whole
   sentences, taken in order while they fit, across document boundaries,
   with an extra ``[SEP]`` between two documents (none at a window's start,
   itself a boundary). A window closes when the next sentence does not fit,
   so windows are usually a little short of full; a sentence longer than a
   window is cut into pieces of a window's length (the last piece shorter),
   each placed as a sentence would be.
   ``doc_sentences`` (``complete_doc``): the same, but a window never holds
   two documents (a new document starts a new window).
   ``blocks`` (``none``): the token stream, ``[SEP]`` between documents, cut
   every ``max_seq_length - 2`` tokens regardless of sentences: every window
   is full except the last one of a file.

   A window never spans two files: a file is the unit of parallel reading
   (``interleave``) and of sharding between input pipelines.
3. **Shuffle** windows (training), **batch** (``drop_remainder``), then
4. **Mask dynamically** per batch: ``[CLS] window [SEP]`` rows go through
   `tensorflow_text.mask_language_model` with `StatelessRandomItemSelector`
   and `StatelessMaskValuesChooser`, then are padded to ``max_seq_length``
   (``input_mask``) and ``max_predictions_per_seq``.

Masking rules are those of the static pipeline (`data.pretraining.masking`): a row of
``n`` tokens (``[CLS]`` and ``[SEP]`` counted) gets
``min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))``
predictions chosen uniformly among its maskable tokens (``[CLS]``, ``[SEP]``
and ``[PAD]`` never are -- so the ``[SEP]`` between two documents is not
masked either); a chosen token becomes ``[MASK]`` 80%, stays 10%, becomes a
random vocabulary id 10%. As in fairseq (whose random tokens skip its four
special symbols ``<s> <pad> </s> <unk>``), the random id is never ``[CLS]``,
``[PAD]``, ``[SEP]`` or ``[UNK]``. Positions are sorted ascending, padded
with 0.

Reproducibility. tensorflow-text's selector and chooser draw from stateful
random ops, whose values inside `tf.data` depend on the global seed and on op
creation order. The two subclasses here use stateless random ops instead,
seeded per batch from ``(seed, input pipeline id, batch index)`` by
`tf.random.experimental.stateless_fold_in`. The batch index counts batches
across repeats, so the same sequence seen in a later epoch gets a different
mask, while two datasets built with the same ``seed`` (and the same other
arguments) produce identical batches: file and window shuffling use the same
``seed`` and parallel stages keep their order. With ``seed=None`` a random
seed is drawn once when the dataset is built.

Example:

>>> ds = roberta_dataset("corpus-*.txt", "vocab.txt", do_lower_case=True,
...                      max_seq_length=128, max_predictions_per_seq=20,
...                      batch_size=32, seed=1)
>>> sorted(next(iter(ds)))   # the keys of pretraining_feature_spec
"""

import tensorflow as tf
import tensorflow_text as tf_text

from data import corpus as corpus_lib
from data.pretraining import text_windows
from data.tokenizers import wordpiece as graph_tokenizer_lib
from data import tokenization

PACKING_MODES = ("full_sentences", "doc_sentences", "blocks")


def masked_lm_budget(num_tokens, masked_lm_prob, max_predictions_per_seq):
    """`data.pretraining.masking.num_to_predict` on a tensor of row lengths (int64)."""
    num_tokens = tf.cast(num_tokens, tf.float64)
    # tf.round rounds half to even, like Python's round().
    budget = tf.cast(tf.round(num_tokens * masked_lm_prob), tf.int64)
    return tf.minimum(tf.cast(max_predictions_per_seq, tf.int64),
                      tf.maximum(tf.constant(1, tf.int64), budget))


class StatelessRandomItemSelector(tf_text.RandomItemSelector):
    """`RandomItemSelector` drawing from stateless random ops, static budget.

    Each row of a ``[batch, (tokens)]`` RaggedTensor gets
    ``min(max_selections_per_batch, max(1, round(row_length * selection_rate)))``
    selections (never more than its selectable items), chosen uniformly among
    the items `get_selectable` allows, by ranking stateless uniform scores
    drawn from ``seed``. The base class instead uses
    ``ceil(selectable * rate)`` and a stateful shuffle per row.

    Args:
      max_selections_per_batch: most selections per row.
      selection_rate: fraction of a row's length to select.
      seed: shape [2] integer tensor for the stateless ops.
      unselectable_ids: ids never selected.
    """

    def __init__(self, max_selections_per_batch, selection_rate, seed,
                 unselectable_ids=None):
        super().__init__(max_selections_per_batch, selection_rate,
                         unselectable_ids=unselectable_ids)
        self._seed = seed

    def get_selection_mask(self, input_ids, axis=1):
        if axis != 1 or input_ids.ragged_rank != 1:
            raise ValueError("StatelessRandomItemSelector selects along axis 1 "
                             "of a [batch, (tokens)] RaggedTensor")
        selectable = self.get_selectable(input_ids, axis)
        lengths = input_ids.row_lengths()
        budget = masked_lm_budget(lengths, self.selection_rate,
                                  self.max_selections_per_batch)
        scores = tf.random.stateless_uniform(
            tf.shape(selectable.flat_values), seed=self._seed)
        # Unselectable items sort after every selectable one.
        scores = tf.where(selectable.flat_values, scores, 2.0)
        dense = selectable.with_flat_values(scores).to_tensor(default_value=3.0)
        order = tf.argsort(dense, axis=1, stable=True)
        rank = tf.argsort(order, axis=1, stable=True)
        chosen = tf.cast(rank, tf.int64) < budget[:, None]
        chosen = tf.RaggedTensor.from_tensor(chosen, lengths=lengths)
        return tf.logical_and(chosen, selectable)


class StatelessMaskValuesChooser(tf_text.MaskValuesChooser):
    """`MaskValuesChooser` drawing its 80/10/10 decisions from stateless ops.

    Args:
      vocab_size: random replacements are drawn from ``[0, vocab_size)``...
      mask_token: the ``[MASK]`` id.
      seed: shape [2] integer tensor for the stateless ops.
      mask_token_rate: chance of ``[MASK]``.
      random_token_rate: chance of a random id (the rest stay unchanged).
      excluded_ids: ...less these ids (none by default).
    """

    def __init__(self, vocab_size, mask_token, seed, mask_token_rate=0.8,
                 random_token_rate=0.1, excluded_ids=()):
        if mask_token_rate + random_token_rate > 1:
            raise ValueError("mask_token_rate + random_token_rate must be <= 1")
        super().__init__(vocab_size, mask_token, mask_token_rate=mask_token_rate,
                         random_token_rate=random_token_rate)
        excluded = set(int(i) for i in excluded_ids)
        self._replacement_ids = tf.constant(
            [i for i in range(vocab_size) if i not in excluded], tf.int64)
        self._seed = seed

    def get_mask_values(self, masked_lm_ids):
        flat = masked_lm_ids.flat_values
        decide_seed = tf.random.experimental.stateless_fold_in(self._seed, 0)
        token_seed = tf.random.experimental.stateless_fold_in(self._seed, 1)
        u = tf.random.stateless_uniform(tf.shape(flat), seed=decide_seed)
        random_ids = tf.gather(self._replacement_ids, tf.random.stateless_uniform(
            tf.shape(flat), seed=token_seed, minval=0,
            maxval=tf.size(self._replacement_ids, out_type=tf.int64), dtype=tf.int64))
        mask_rate = self._mask_token_rate
        values = tf.where(u < mask_rate, tf.cast(self.mask_token, flat.dtype), flat)
        values = tf.where((u >= mask_rate) & (u < mask_rate + self.random_token_rate),
                          tf.cast(random_ids, flat.dtype), values)
        return masked_lm_ids.with_flat_values(values)


# The mapped functions hold no Python control flow on tensors; skipping
# AutoGraph's source conversion (of them and of the tensorflow-text code they
# call) makes building a dataset several times faster.
_no_autograph = tf.autograph.experimental.do_not_convert


def _special_id(vocab, token):
    if token not in vocab:
        raise ValueError("The vocabulary has no %s token" % token)
    return vocab[token]


def _pack_file(path, tokenizer, window, packing, sep_id, lines_per_block,
               max_line_bytes):
    """Windows ``(ids [window] zero-padded, length)`` of one text file."""
    lines = tf.data.TextLineDataset(path).batch(lines_per_block)

    @_no_autograph
    def tokenize_block(block):
        blank = tf.equal(tf.strings.length(tf.strings.strip(block)), 0)
        # Over-long lines are skipped (no tokens) without ending a document.
        block = tf.where(tf.strings.length(block) > max_line_bytes, "", block)
        ids = tokenizer.tokenize(block)
        return ids.flat_values, ids.row_lengths(), blank, tf.constant(False)

    blocks = text_windows.tokenized_blocks(lines, tokenize_block)
    # State: documents counted so far, document of the last token seen (-1:
    # none yet), and the tokens of the open (last, unfinished) window.
    initial_state = (tf.constant(0, tf.int64), tf.constant(-1, tf.int64),
                     tf.zeros([0], tf.int32))
    return blocks.scan(initial_state, _block_packer(window, packing, sep_id)).unbatch()


def _block_packer(window, packing, sep_id):
    """`_pack_file`'s scan step: (state, block of lines) -> (state, finished windows)."""
    window = int(window)

    @_no_autograph
    def step(state, block):
        num_docs, last_doc, open_ids = state
        tokens, lengths, blank, is_final = block
        # Document of each line: blank lines so far (gaps in the numbering
        # from runs of blank lines do not matter).
        line_doc = num_docs + tf.cumsum(tf.cast(blank, tf.int64))
        token_doc = tf.repeat(line_doc, lengths)
        num_docs = num_docs + tf.reduce_sum(tf.cast(blank, tf.int64))
        previous = tf.concat([[last_doc], token_doc[:-1]], 0)
        new_last_doc = tf.cond(tf.size(token_doc) > 0,
                               lambda: token_doc[-1], lambda: last_doc)
        # The first token of a document that some token of the file precedes.
        doc_start = tf.logical_and(previous >= 0, token_doc != previous)
        if packing == "blocks":
            ids, window_id, num_windows = _fixed_windows(open_ids, tokens, doc_start,
                                                         window, sep_id)
        else:
            ids, window_id, num_windows = _sentence_windows(
                open_ids, tokens, lengths, doc_start, window, sep_id,
                cross_documents=packing == "full_sentences")
        windows = tf.RaggedTensor.from_value_rowids(ids, window_id, nrows=num_windows)
        window_lengths = windows.row_lengths()
        # The last window stays open until the file ends: sentences of the
        # next block may still join it ("blocks": unless it is full).
        keep_open = tf.logical_and(num_windows > 0, tf.logical_not(is_final))
        if packing == "blocks":
            keep_open = tf.logical_and(keep_open,
                                       tf.reduce_any(window_lengths[-1:] < window))
        num_out = num_windows - tf.cast(keep_open, tf.int64)
        cut = tf.reduce_sum(window_lengths[:num_out])
        out = windows[:num_out]
        return (num_docs, new_last_doc, ids[cut:]), (
            out.to_tensor(0, shape=[None, window]), tf.cast(out.row_lengths(), tf.int32))

    return step


def _insert_separators(tokens, sep_before, sep_id, *parallel):
    """`tokens` with `sep_id` inserted before each token where `sep_before`.

    Each tensor of `parallel` (one value per token) gets its token's value
    at the inserted separator too. Returns the new tokens, then the new
    `parallel` tensors.
    """
    keep = tf.reshape(tf.stack([sep_before, tf.ones_like(sep_before)], 1), [-1])
    out = [tf.boolean_mask(tf.reshape(tf.stack([tf.fill(tf.shape(tokens), sep_id), tokens],
                                               1), [-1]), keep)]
    out += [tf.boolean_mask(tf.reshape(tf.stack([values, values], 1), [-1]), keep)
            for values in parallel]
    return out


def _fixed_windows(open_ids, tokens, doc_start, window, sep_id):
    """"blocks": the token stream, [SEP] between documents, cut every `window` tokens."""
    stream, = _insert_separators(tokens, doc_start, sep_id)
    ids = tf.concat([open_ids, stream], 0)
    n = tf.size(ids, out_type=tf.int64)
    window_id = tf.range(n) // window
    return ids, window_id, (n + window - 1) // window


def _sentence_windows(open_ids, tokens, lengths, doc_start, window, sep_id, cross_documents):
    """Whole sentences packed greedily into windows of at most `window` tokens.

    A sentence longer than a window is cut into pieces of `window` tokens
    (the last piece shorter); every piece is placed whole. A piece joins the
    open window if it fits (with the [SEP] before a new document's first
    piece, for `cross_documents`), else it starts the next window (dropping
    that [SEP]: a window's start is a boundary anyway). Without
    `cross_documents` a new document always starts a new window.

    Returns (ids, window id of each id, number of windows), ids being the
    open window's tokens followed by this block's.
    """
    num_tokens = tf.size(tokens, out_type=tf.int64)
    line_starts = tf.cumsum(lengths, exclusive=True)
    position = tf.range(num_tokens) - tf.repeat(line_starts, lengths)
    piece_start = tf.equal(position % window, 0)
    piece_of_token = tf.cumsum(tf.cast(piece_start, tf.int64)) - 1
    num_pieces = tf.reduce_sum(tf.cast(piece_start, tf.int64))
    piece_length = tf.math.unsorted_segment_sum(
        tf.ones_like(piece_of_token), piece_of_token, num_pieces)
    piece_doc_start = tf.boolean_mask(doc_start, piece_start)

    def place(state, piece):
        window_index, fill, _ = state
        length, starts_document = piece
        sep = tf.cast(tf.logical_and(starts_document, cross_documents), tf.int64)
        overflow = fill + sep + length > window
        if not cross_documents:
            overflow = tf.logical_or(overflow, starts_document)
        new_window = tf.logical_and(fill > 0, overflow)
        sep_here = tf.logical_and(tf.logical_and(sep > 0, fill > 0),
                                  tf.logical_not(new_window))
        fill = tf.where(new_window, tf.constant(0, tf.int64), fill)
        return (window_index + tf.cast(new_window, tf.int64),
                fill + tf.cast(sep_here, tf.int64) + length, sep_here)

    open_length = tf.size(open_ids, out_type=tf.int64)
    piece_window, _, piece_sep = tf.scan(
        place, (piece_length, piece_doc_start),
        initializer=(tf.constant(0, tf.int64), open_length, tf.constant(False)))
    token_window = tf.gather(piece_window, piece_of_token)
    sep_before = tf.logical_and(piece_start, tf.gather(piece_sep, piece_of_token))
    stream, stream_window = _insert_separators(tokens, sep_before, sep_id, token_window)
    ids = tf.concat([open_ids, stream], 0)
    window_id = tf.concat([tf.zeros([open_length], tf.int64), stream_window], 0)
    last_window = tf.cond(num_pieces > 0, lambda: piece_window[-1],
                          lambda: tf.constant(0, tf.int64))
    num_windows = tf.where(tf.size(ids) > 0, last_window + 1, tf.constant(0, tf.int64))
    return ids, window_id, num_windows


def roberta_dataset(input_patterns, vocab_file, do_lower_case, max_seq_length,
                    max_predictions_per_seq, batch_size, packing="full_sentences",
                    masked_lm_prob=0.15, seed=None, is_training=True,
                    input_context=None, repeat=None, shuffle_buffer_size=1000,
                    cycle_length=4, lines_per_block=256,
                    mask_token_rate=0.8, random_token_rate=0.1,
                    max_line_bytes=corpus_lib.DEFAULT_MAX_LINE_BYTES,
                    tokenizer=None):
    """Batches of dynamically masked pre-training features from raw text.

    Args:
      input_patterns: comma-separated globs (or a list of them) of text files
        in the pre-training corpus format.
      vocab_file: WordPiece vocabulary (must hold [CLS], [SEP], [MASK]).
      do_lower_case: as for `FullTokenizer`.
      max_seq_length: sequence length; windows hold at most
        ``max_seq_length - 2`` tokens, framed by [CLS] and [SEP].
      max_predictions_per_seq: most masked positions per sequence.
      batch_size: batch size of this input pipeline; with `input_context`,
        the global batch size (the per-replica size is derived from it).
      packing: "full_sentences", "doc_sentences" or "blocks" (module docstring).
      masked_lm_prob: fraction of a sequence's tokens to predict.
      seed: seeds file and window shuffling and the masks; None draws one.
      is_training: shuffle and interleave files, shuffle windows.
      input_context: a `tf.distribute.InputContext`, or None. Files are
        sharded between input pipelines when there are enough of them,
        windows otherwise.
      repeat: repeat forever; defaults to `is_training`. Every repetition
        draws new masks.
      shuffle_buffer_size: windows in the shuffle buffer (training).
      cycle_length: files read in parallel (training).
      lines_per_block: lines tokenized per tokenizer call.
      mask_token_rate, random_token_rate: the 80/10/10 split.
      max_line_bytes: longer lines are skipped, as `data.corpus` does.
      tokenizer: a `GraphTokenizer` to reuse (built from `vocab_file` when
        None).

    Returns:
      A `tf.data.Dataset` of dicts: int32 ``input_ids``, ``input_mask``,
      ``segment_ids`` [batch, max_seq_length]; int32 ``masked_lm_positions``,
      ``masked_lm_ids`` and float32 ``masked_lm_weights``
      [batch, max_predictions_per_seq]; int32 ``next_sentence_labels``
      [batch, 1].
    """
    if packing not in PACKING_MODES:
        raise ValueError("packing must be one of %s, got %r" % (PACKING_MODES, packing))
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3, got %d" % max_seq_length)
    if max_predictions_per_seq < 1:
        raise ValueError("max_predictions_per_seq must be at least 1")
    files, repeat, seed, batch_size = text_windows.read_settings(
        input_patterns, is_training, batch_size, repeat, seed, input_context)
    pipeline_id = input_context.input_pipeline_id if input_context else 0

    vocab = tokenization.load_vocab(vocab_file)
    cls_id = _special_id(vocab, tokenization.CLS_TOKEN)
    sep_id = _special_id(vocab, tokenization.SEP_TOKEN)
    mask_id = _special_id(vocab, tokenization.MASK_TOKEN)
    unselectable = [cls_id, sep_id]
    if tokenization.PAD_TOKEN in vocab:
        unselectable.append(vocab[tokenization.PAD_TOKEN])
    # fairseq's random tokens skip its special symbols <s> <pad> </s> <unk>.
    not_random = [vocab[token] for token in (tokenization.CLS_TOKEN, tokenization.PAD_TOKEN,
                                             tokenization.SEP_TOKEN, tokenization.UNK_TOKEN)
                  if token in vocab]
    if tokenizer is None:
        tokenizer = graph_tokenizer_lib.GraphTokenizer(vocab_file, do_lower_case)
    vocab_size = tokenizer.vocab_size
    window = max_seq_length - 2

    @_no_autograph
    def pack(path):
        return _pack_file(path, tokenizer, window, packing, sep_id,
                          lines_per_block, max_line_bytes)

    d = text_windows.batched_windows(
        files, pack, batch_size, is_training, input_context=input_context, repeat=repeat,
        seed=seed, cycle_length=cycle_length, shuffle_buffer_size=shuffle_buffer_size,
        drop_remainder=True)

    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    @_no_autograph
    def make_features(batch_index, batch):
        windows, lengths = batch
        batch_seed = tf.random.experimental.stateless_fold_in(base_seed, batch_index)
        body = tf.RaggedTensor.from_tensor(windows, lengths=lengths)
        rows = tf.shape(windows, out_type=tf.int64)[:1]
        cls = tf.fill(tf.concat([rows, [1]], 0), cls_id)
        sep = tf.fill(tf.concat([rows, [1]], 0), sep_id)
        original = tf.concat([cls, body, sep], axis=1)
        selector = StatelessRandomItemSelector(
            max_predictions_per_seq, masked_lm_prob,
            seed=tf.random.experimental.stateless_fold_in(batch_seed, 0),
            unselectable_ids=unselectable)
        chooser = StatelessMaskValuesChooser(
            vocab_size, mask_id,
            seed=tf.random.experimental.stateless_fold_in(batch_seed, 1),
            mask_token_rate=mask_token_rate, random_token_rate=random_token_rate,
            excluded_ids=not_random)
        masked, positions, labels = tf_text.mask_language_model(
            original, selector, chooser)
        seq_shape = [batch_size, max_seq_length]
        pred_shape = [batch_size, max_predictions_per_seq]
        return {
            "input_ids": masked.to_tensor(0, shape=seq_shape),
            "input_mask": tf.ones_like(original).to_tensor(0, shape=seq_shape),
            "segment_ids": tf.zeros(seq_shape, tf.int32),
            "masked_lm_positions": tf.cast(positions, tf.int32).to_tensor(
                0, shape=pred_shape),
            "masked_lm_ids": labels.to_tensor(0, shape=pred_shape),
            "masked_lm_weights": tf.ones_like(positions, tf.float32).to_tensor(
                0.0, shape=pred_shape),
            "next_sentence_labels": tf.zeros([batch_size, 1], tf.int32),
        }

    d = d.enumerate().map(make_features, num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def roberta_input_fn_builder(input_files, vocab_file, do_lower_case, max_seq_length,
                             max_predictions_per_seq, is_training, batch_size,
                             **kwargs):
    """Returns ``input_fn(input_context=None)`` for `roberta_dataset`.

    The function can be handed to ``strategy.distribute_datasets_from_function``.
    """
    def input_fn(input_context=None):
        return roberta_dataset(input_files, vocab_file, do_lower_case, max_seq_length,
                               max_predictions_per_seq, batch_size,
                               is_training=is_training, input_context=input_context,
                               **kwargs)
    return input_fn
