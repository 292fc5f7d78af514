"""Trivial baselines that a pre-trained model has to beat.

The unigram-frequency baseline of masked LM predicts, at every masked
position, the single most frequent target token of the training data. Its
accuracy is the share of that token among the evaluation targets: a model
that learned nothing from context cannot do better.
"""

import collections

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


def unigram_masked_lm_baseline(train_patterns, eval_patterns, max_seq_length,
                               max_predictions_per_seq, max_train_records=100000,
                               max_eval_records=None):
    """Accuracy of always predicting the most frequent training target.

    Args:
      train_patterns / eval_patterns: TFRecord globs (pre-training features),
        or `tf.data` datasets of such feature batches.
      max_train_records: records counted for the frequencies (None: all).
      max_eval_records: records scored, read in order (None: all once).

    Returns:
      (accuracy, token_id).
    """
    counts = collections.Counter()
    for targets in _masked_targets(train_patterns, max_seq_length, max_predictions_per_seq,
                                   max_train_records):
        counts.update(targets.tolist())
    if not counts:
        raise ValueError("No masked LM targets found in %s" % train_patterns)
    token_id, _ = counts.most_common(1)[0]
    hits = total = 0
    for targets in _masked_targets(eval_patterns, max_seq_length, max_predictions_per_seq,
                                   max_eval_records):
        hits += int((targets == token_id).sum())
        total += len(targets)
    return (hits / total if total else 0.0), int(token_id)
