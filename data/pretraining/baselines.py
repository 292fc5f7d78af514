"""Trivial baselines that a pre-trained model has to beat.

The unigram-frequency baseline of masked LM predicts, at every masked
position, the single most frequent target token of the training data. Its
accuracy is the share of that token among the evaluation targets: a model
that learned nothing from context cannot do better. Its loss is the
cross-entropy of the training targets' unigram distribution (add-one
smoothed over the vocabulary) on the evaluation targets: the masked-LM loss
of the best model that ignores context, which a learning model passes on
its way from ln(vocab_size) to something better.
"""

import collections
import math

from data import input_pipeline


def _masked_targets(input_patterns, max_seq_length, max_predictions_per_seq, max_records):
    if isinstance(input_patterns, (str, list, tuple)):
        dataset = input_pipeline.pretraining_dataset(
            input_patterns, max_seq_length, max_predictions_per_seq, batch_size=256,
            is_training=False, repeat=max_records is not None, drop_remainder=False)
    else:  # already a dataset of batches (e.g. dynamically masked raw text)
        dataset = input_patterns
    seen = 0
    for batch in dataset:
        ids = batch["masked_lm_ids"].numpy()
        weights = batch["masked_lm_weights"].numpy()
        for row_ids, row_weights in zip(ids, weights):
            if max_records is not None and seen >= max_records:
                return
            seen += 1
            yield row_ids[row_weights > 0]


UnigramBaseline = collections.namedtuple(
    "UnigramBaseline", ["accuracy", "token_id", "cross_entropy"])


def unigram_statistics(train_targets, eval_targets, num_classes=None, what="targets"):
    """Accuracy and loss of the add-one smoothed unigram model of the targets.

    Args:
      train_targets / eval_targets: iterables of 1-D integer arrays (or lists).
      num_classes: size of the target space (the vocabulary), for the add-one
        smoothing; None skips the cross-entropy.
      what: names the targets in error messages.

    Returns:
      `UnigramBaseline(accuracy, token_id, cross_entropy)` (see
      `unigram_masked_lm_statistics`).
    """
    counts = collections.Counter()
    for targets in train_targets:
        counts.update(int(t) for t in targets)
    if not counts:
        raise ValueError("No %s found in the training data for the unigram baseline" % what)
    if num_classes is not None and max(counts) >= num_classes:
        raise ValueError("training %s hold id %d, outside the vocabulary of %d classes"
                         % (what, max(counts), num_classes))
    token_id, _ = counts.most_common(1)[0]
    denominator = sum(counts.values()) + (num_classes or 0)
    hits = total = 0
    nll = 0.0
    for targets in eval_targets:
        targets = [int(t) for t in targets]
        hits += sum(1 for t in targets if t == token_id)
        total += len(targets)
        if num_classes is not None:
            if targets and max(targets) >= num_classes:
                raise ValueError("evaluation %s hold id %d, outside the vocabulary of %d "
                                 "classes" % (what, max(targets), num_classes))
            nll -= sum(math.log((counts.get(t, 0) + 1) / denominator) for t in targets)
    accuracy = hits / total if total else 0.0
    cross_entropy = nll / total if (num_classes is not None and total) else None
    return UnigramBaseline(accuracy, int(token_id), cross_entropy)


def unigram_masked_lm_statistics(train_patterns, eval_patterns, max_seq_length,
                                 max_predictions_per_seq, vocab_size=None,
                                 max_train_records=100000, max_eval_records=None):
    """The unigram baseline's masked-LM accuracy and loss.

    Args:
      train_patterns / eval_patterns: TFRecord globs (pre-training features),
        or `tf.data` datasets of such feature batches.
      vocab_size: size of the vocabulary, for the add-one smoothing of the
        cross-entropy (None: skip the cross-entropy).
      max_train_records: records counted for the frequencies (None: all).
      max_eval_records: records scored, read in order (None: all once).

    Returns:
      `UnigramBaseline(accuracy, token_id, cross_entropy)`: accuracy of
      always predicting `token_id` (the most frequent training target), and
      the mean negative log-likelihood (nats, like `masked_lm_loss`) of the
      evaluation targets under the smoothed training unigram distribution
      (None without `vocab_size`).
    """
    return unigram_statistics(
        _masked_targets(train_patterns, max_seq_length, max_predictions_per_seq,
                        max_train_records),
        _masked_targets(eval_patterns, max_seq_length, max_predictions_per_seq,
                        max_eval_records),
        num_classes=vocab_size, what="masked_lm_ids")


def unigram_masked_lm_baseline(train_patterns, eval_patterns, max_seq_length,
                               max_predictions_per_seq, max_train_records=100000,
                               max_eval_records=None):
    """Accuracy of always predicting the most frequent training target.

    See `unigram_masked_lm_statistics` (which also gives the loss).

    Returns:
      (accuracy, token_id).
    """
    stats = unigram_masked_lm_statistics(
        train_patterns, eval_patterns, max_seq_length, max_predictions_per_seq,
        max_train_records=max_train_records, max_eval_records=max_eval_records)
    return stats.accuracy, stats.token_id
