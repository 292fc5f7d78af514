"""UNILM's inputs: pre-training batches with per-example attention masks, and seq2seq pairs.

"unilm" (pre-training): Google-format TFRecords of contiguous segment pairs
`[CLS] A [SEP] B [SEP]` (B is the text that follows A, never swapped or
drawn from another document: UNILM's source and target), cloze-masked by
the "unilm" strategy (whole words, 20% of the time 2-3-grams;
`data.pretraining.masking.UnilmMasking`). Each batch is read as the static
pipeline reads it, then every example draws its language model
(`modeling.unilm.masks.sample_modes`, the recipe's `mix`, default the
paper's 1/3 bidirectional, 1/3 seq2seq, 1/6 each direction), the layout
and segment ids of its LM (`layout_for_modes`: the left-to-right and
right-to-left LMs read one text stream `[CLS] text [SEP]`, the others the
pair; segment ids per LM as the authors' `--new_segment_ids`, recipe data
`unilm_segment_ids`, `masks.SEGMENT_IDS`), and the matching
`attention_mask` `[seq, seq]` and `unilm_mode` features. The draw
is a stateless function of the run's seed and the batch's index, so an
evaluation and its baseline read the same masks.

"unilm_seq2seq" (fine-tuning): text files of `source<TAB>target` lines.
Each pair becomes `[CLS] source [SEP] target [SEP]` (the seq2seq segment
ids, 4 and 5 with the paper's ids; the
longer side is cut first when the pair does not fit `max_seq_length`), and
only target tokens are masked, each with probability `target_mask_prob`
(0.7 by default) and always by [MASK], the final [SEP] included so that the
model learns where to stop, at most `max_predictions_per_seq` per pair. The
masks are drawn afresh every time a pair is read (stateless in the seed and
the read's index), and the attention mask is always seq2seq. Decoding
(`modeling.unilm.decoding`) fills [MASK]s at the end of the same layout.
Its demo pairs are consecutive sentences of the bundled corpus's documents
(generate the next sentence), from the training and held-out documents.
"""

import os

import numpy as np
import tensorflow as tf

from data import atomic
from data import corpus
from data import packing
from data import tokenization
from modeling import registry
from modeling.recipes.pipelines.base import Pipeline
from modeling.recipes.pipelines.static_masked import StaticMaskedPipeline
from modeling.unilm import masks

__all__ = ["PairFileError", "Seq2SeqPipeline", "UnilmPipeline", "read_pairs",
           "write_adjacent_sentence_pairs"]


def _mix(data, where):
    mix = data.get("mix", masks.PAPER_MIX)
    if isinstance(mix, dict):
        unknown = sorted(set(mix) - set(masks.MODES))
        if unknown:
            raise ValueError("%s: unknown UNILM mode(s) %s in `mix`; known: %s"
                             % (where, ", ".join(unknown), ", ".join(masks.MODES)))
        mix = [float(mix.get(name, 0.0)) for name in sorted(masks.MODES,
                                                            key=masks.MODES.get)]
    mix = [float(w) for w in mix]
    if len(mix) != 4 or min(mix) < 0 or sum(mix) <= 0:
        raise ValueError("%s: `mix` must give four non-negative weights (bidirectional, "
                         "left_to_right, right_to_left, seq2seq) with a positive sum, got %r"
                         % (where, data.get("mix")))
    return tuple(w / sum(mix) for w in mix)


def _segment_ids(data):
    return masks.check_segment_ids(data.get("unilm_segment_ids", "paper"),
                                   "the recipe data option unilm_segment_ids")


def _fit_config(config, demo, scheme):
    """The model config for `scheme`'s segment ids (called by the pre-training job).

    The demo job's tiny config gets the token types the ids need (6 with the
    paper's ids, as the authors' `type_vocab_size = 6`); a user's config
    (`--bert_config_file`) is never changed, since its checkpoint's
    token-type table has that many rows: one too small is a one-line error
    naming `type_vocab_size` and the option that fits it ("two").
    """
    need = masks.min_type_vocab_size(scheme)
    if demo and config.type_vocab_size < need:
        return config.replace(type_vocab_size=need)
    masks.check_type_vocab_size(config, scheme)
    return config


def layout_for_modes(features, modes, scheme):
    """Each example of a batch of `[CLS] A [SEP] B [SEP]` pairs in the layout of its mode.

    Bidirectional and seq2seq examples keep the pair, with their mode's two
    segment ids. Left-to-right and right-to-left examples become one text
    stream `[CLS] A B [SEP]` (the paper's unidirectional LMs read one
    segment): A and B are one contiguous stretch of the document (the
    "contiguous" objective cuts only at its outer ends), so dropping the
    [SEP] between them leaves the text itself; every token takes the mode's
    one segment id and the masked positions after the dropped [SEP] move one
    to the left ([SEP] is never masked). Padding keeps segment id 0.
    """
    features = dict(features)
    input_mask = tf.cast(features["input_mask"], tf.int32)
    old_segments = tf.cast(features["segment_ids"], tf.int32)
    seq = tf.shape(input_mask)[1]
    single = tf.reduce_any(tf.equal(modes[:, tf.newaxis],
                                    tf.constant(masks.SINGLE_STREAM_MODES, tf.int32)), axis=1)
    # Index of A's [SEP]: the last real token of segment 0.
    sep = tf.reduce_sum(input_mask * tf.cast(tf.equal(old_segments, 0), tf.int32), axis=1) - 1
    shift = tf.cast(single, tf.int32)[:, tf.newaxis]
    positions = tf.range(seq)[tf.newaxis, :]
    source = positions + shift * tf.cast(positions >= sep[:, tf.newaxis], tf.int32)
    inside = source < seq
    source = tf.minimum(source, seq - 1)

    def moved(name):
        values = tf.gather(features[name], source, batch_dims=1)
        return tf.where(inside, values, tf.zeros_like(values))

    input_ids = moved("input_ids")
    input_mask = moved("input_mask")
    second = moved("segment_ids")
    table = tf.gather(masks.segment_table(scheme), modes)        # [batch, 2]
    ids = tf.where(tf.equal(tf.cast(second, tf.int32), 1), table[:, 1:2], table[:, 0:1])
    real = tf.cast(input_mask, tf.bool)
    features["input_ids"] = input_ids
    features["input_mask"] = input_mask
    features["segment_ids"] = tf.cast(tf.where(real, ids, 0), features["segment_ids"].dtype)
    lm_positions = features["masked_lm_positions"]
    after = tf.logical_and(tf.cast(lm_positions, tf.int32) > sep[:, tf.newaxis],
                           tf.cast(shift, tf.bool))
    features["masked_lm_positions"] = lm_positions - tf.cast(after, lm_positions.dtype)
    return features


@registry.pipelines.register("unilm")
class UnilmPipeline(StaticMaskedPipeline):
    """Static TFRecords plus one UNILM attention mask per example (see the module docstring)."""

    data_options = StaticMaskedPipeline.data_options + ("mix", "unilm_segment_ids")

    def __init__(self, recipe_data, options):
        data = {"masking": "unilm", "sentence_objective": "contiguous"}
        data.update(recipe_data or {})
        super().__init__(data, options)
        self.mix = _mix(self.data, "the unilm pipeline")
        self.segment_ids = _segment_ids(self.data)
        # What the TFRecord writer takes (`InstanceOptions`).
        self.data = {k: v for k, v in self.data.items()
                     if k not in ("mix", "unilm_segment_ids")}

    def fit_config(self, config, demo):
        return _fit_config(config, demo, self.segment_ids)

    def input_fn(self, inputs, is_training, batch_size):
        records_input_fn = super().input_fn(inputs, is_training, batch_size)
        seed = self.options.seed or 0
        mix = self.mix
        scheme = self.segment_ids

        def input_fn(input_context=None):
            dataset = records_input_fn(input_context)
            pipeline_id = input_context.input_pipeline_id if input_context else 0

            def add_masks(index, features):
                batch = tf.shape(features["input_ids"])[0]
                modes = masks.sample_modes(
                    batch, tf.stack([tf.constant(seed, tf.int64) * 1000003 + pipeline_id,
                                     index]), mix)
                features = layout_for_modes(features, modes, scheme)
                features["unilm_mode"] = modes
                features["attention_mask"] = masks.attention_mask(
                    modes, features["segment_ids"], features["input_mask"],
                    target_id=masks.target_segment_id(scheme))
                return features

            return dataset.enumerate().map(add_masks, num_parallel_calls=tf.data.AUTOTUNE)

        return input_fn


class PairFileError(ValueError):
    """A line of a pair file is not `source<TAB>target`."""


def read_pairs(path):
    """`[(source, target)]` of a `source<TAB>target` file (blank lines skipped)."""
    pairs = []
    for lineno, line in corpus.text_lines(path, PairFileError):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise PairFileError("%s:%d: expected `source<TAB>target` (two non-empty "
                                "fields), got %d field(s)" % (path, lineno, len(fields)))
        pairs.append((fields[0], fields[1]))
    return pairs


def write_adjacent_sentence_pairs(text_files, output_path):
    """Writes `sentence<TAB>next sentence` of every document of `text_files` (atomic)."""
    lines = []
    stats = corpus.ReadStats()
    for document in corpus.iter_documents(text_files, stats):
        sentences = [corpus.decode_line(raw, document.path, lineno, stats).strip()
                     for lineno, raw in document.lines]
        sentences = [s.replace("\t", " ") for s in sentences if s]
        lines.extend("%s\t%s\n" % pair for pair in zip(sentences, sentences[1:]))
    atomic.write_text(output_path, "".join(lines))
    return len(lines)


def encode_pair(tokenizer, vocab, source, target, max_seq_length, source_id=0, target_id=1):
    """`(input_ids, segment_ids)` of `[CLS] source [SEP] target [SEP]`, cut to fit.

    `source_id` / `target_id`: the seq2seq mode's segment ids (4 / 5 with the
    paper's ids, `masks.SEGMENT_IDS`)."""
    tokens_a = tokenizer.tokenize(source)
    tokens_b = tokenizer.tokenize(target)
    packing.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    tokens = ([tokenization.CLS_TOKEN] + tokens_a + [tokenization.SEP_TOKEN] + tokens_b
              + [tokenization.SEP_TOKEN])
    segment_ids = [source_id] * (len(tokens_a) + 2) + [target_id] * (len(tokens_b) + 1)
    return tokenization.convert_tokens_to_ids(vocab, tokens), segment_ids


def mask_targets(features, seed, mask_id, max_predictions, mask_prob, target_id=1):
    """Masks target tokens (segment `target_id`) of one example (stateless in `seed`, int `[2]`)."""
    input_ids = features["input_ids"]
    length = tf.shape(input_ids)[0]
    draws = tf.random.stateless_uniform([length], seed)
    eligible = tf.logical_and(tf.equal(features["segment_ids"], target_id),
                              tf.equal(features["input_mask"], 1))
    chosen = tf.logical_and(eligible, draws < mask_prob)
    # The `max_predictions` chosen positions with the smallest draws.
    keys = tf.where(chosen, draws, 2.0)
    k = tf.minimum(max_predictions, length)
    _, picked = tf.math.top_k(-keys, k=k)
    valid = tf.gather(keys, picked) < 2.0
    positions = tf.sort(tf.where(valid, picked, length))
    valid = positions < length
    positions = tf.where(valid, positions, 0)
    pad = max_predictions - k
    ids = tf.where(valid, tf.gather(input_ids, positions), 0)
    updates = tf.scatter_nd(positions[:, tf.newaxis], tf.cast(valid, tf.int32), [length]) > 0
    features = dict(features)
    features["input_ids"] = tf.where(updates, mask_id, input_ids)
    features["masked_lm_positions"] = tf.pad(positions, [[0, pad]])
    features["masked_lm_ids"] = tf.pad(ids, [[0, pad]])
    features["masked_lm_weights"] = tf.pad(tf.cast(valid, tf.float32), [[0, pad]])
    return features


@registry.pipelines.register("unilm_seq2seq")
class Seq2SeqPipeline(Pipeline):
    """`source<TAB>target` files -> target-masked seq2seq batches (see the module docstring)."""

    data_options = ("target_mask_prob", "unilm_segment_ids")

    def __init__(self, recipe_data, options):
        super().__init__(recipe_data, options)
        self.segment_ids = _segment_ids(self.data)
        self.target_mask_prob = float(self.data.get("target_mask_prob", 0.7))
        if not 0.0 < self.target_mask_prob <= 1.0:
            raise ValueError("the unilm_seq2seq pipeline: target_mask_prob must be in (0, 1], "
                             "got %r" % self.data.get("target_mask_prob"))
        self._tokenizer = None

    def fit_config(self, config, demo):
        return _fit_config(config, demo, self.segment_ids)

    def _vocab(self):
        if self._tokenizer is None:
            self._tokenizer = tokenization.FullTokenizer(self.options.vocab_file,
                                                         self.options.do_lower_case)
        return self._tokenizer

    def vocab_size(self):
        return len(tokenization.load_vocab(self.options.vocab_file))

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        outputs = []
        for split, texts in (("train", train_texts), ("eval", eval_texts)):
            path = os.path.join(work_dir, "pairs_%s.tsv" % split)
            if not os.path.exists(path):
                write_adjacent_sentence_pairs(list(texts), path)
            outputs.append(path)
        return outputs[0], outputs[1]

    def check_inputs(self, inputs):
        self.check_vocab_files()
        files = corpus.expand_file_patterns(inputs)
        if not any(read_pairs(path) for path in files):
            raise PairFileError("%s: no `source<TAB>target` pair in %s"
                                % (inputs, "the file" if len(files) == 1 else "any file"))

    def encode_files(self, inputs):
        """NumPy `input_ids`, `segment_ids`, `input_mask` `[pairs, max_seq_length]`."""
        tokenizer = self._vocab()
        seq = self.options.max_seq_length
        rows = []
        for path in corpus.expand_file_patterns(inputs):
            for source, target in read_pairs(path):
                rows.append(encode_pair(tokenizer, tokenizer.vocab, source, target, seq,
                                        *masks.SEGMENT_IDS[self.segment_ids][masks.SEQ2SEQ]))
        if not rows:
            raise PairFileError("%s: no `source<TAB>target` pair" % (inputs,))
        ids = np.zeros([len(rows), seq], np.int32)
        segments = np.zeros([len(rows), seq], np.int32)
        mask = np.zeros([len(rows), seq], np.int32)
        for i, (row_ids, row_segments) in enumerate(rows):
            ids[i, :len(row_ids)] = row_ids
            segments[i, :len(row_ids)] = row_segments
            mask[i, :len(row_ids)] = 1
        return {"input_ids": ids, "segment_ids": segments, "input_mask": mask}

    def input_fn(self, inputs, is_training, batch_size):
        arrays = self.encode_files(inputs)
        mask_id = self._vocab().vocab[tokenization.MASK_TOKEN]
        options = self.options
        seed = options.seed or 0
        prob = self.target_mask_prob
        target_id = masks.target_segment_id(self.segment_ids)

        def input_fn(input_context=None):
            per_replica = batch_size
            dataset = tf.data.Dataset.from_tensor_slices(arrays)
            if input_context is not None:
                per_replica = input_context.get_per_replica_batch_size(batch_size)
                dataset = dataset.shard(input_context.num_input_pipelines,
                                        input_context.input_pipeline_id)
            if is_training:
                dataset = dataset.shuffle(len(arrays["input_ids"]), seed=seed,
                                          reshuffle_each_iteration=True)
            dataset = dataset.repeat()

            def masked(index, features):
                features = mask_targets(features, tf.stack([tf.constant(seed, tf.int64),
                                                            index]),
                                        mask_id, options.max_predictions_per_seq, prob,
                                        target_id)
                features["attention_mask"] = masks.attention_mask(
                    masks.SEQ2SEQ, features["segment_ids"][tf.newaxis],
                    features["input_mask"][tf.newaxis], target_id=target_id)[0]
                return features

            dataset = dataset.enumerate().map(masked, num_parallel_calls=tf.data.AUTOTUNE)
            return dataset.batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

        return input_fn
