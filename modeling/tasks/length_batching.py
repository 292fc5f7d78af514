"""Length-aware batching in the fine-tuning jobs: `data.input_pipeline`'s, applied.

Every job's dataclass carries `data.input_pipeline.LengthBatchingSettings`
(``--trim_batches``, on by default; ``--group_by_length``, off by default)
and wraps each input function it hands to the trainer with `input_fn`:

* training: batches trimmed to their bucketed longest row, and with
  ``--group_by_length`` made of examples of one length bucket;
* evaluation: trimmed (losses and metrics are sums: order does not matter);
* prediction: grouped by length and trimmed, the outputs put back in input
  order (`predict`), per-position outputs padded back to `max_seq_length`.

Under ``--use_xla`` the batches keep their bucketed widths: XLA compiles one
program per width, at most `len(length_buckets(max_seq_length))` of them.
"""

from data import input_pipeline

__all__ = ["input_fn", "predict", "PaddedOutputs"]

TRAIN, EVAL, PREDICT = "train", "eval", "predict"


def input_fn(job, base_input_fn, batch_size, mode,
             groups=input_pipeline.STANDARD_SEQUENCE_FEATURES, enabled=True):
    """`base_input_fn` with the job's length-aware batching for `mode` (train, eval, predict).

    `enabled=False` (an input format whose features are not Google's
    layout) returns `base_input_fn` as it is.
    """
    trim = enabled and getattr(job, "trim_batches", True)
    if not trim:
        return base_input_fn
    return input_pipeline.length_batched_input_fn(
        base_input_fn, job.max_seq_length, batch_size, is_training=mode == TRAIN,
        groups=groups, trim=True,
        group_by_length=(mode == PREDICT or (mode == TRAIN and job.group_by_length)),
        keep_order=mode == PREDICT)


class PaddedOutputs:
    """A model whose per-position outputs are padded back to `max_seq_length`.

    What `predict` hands the trainer for the duration of one prediction, so
    that the outputs of batches of different widths stack.
    """

    def __init__(self, model, names, max_seq_length, value=0.0):
        self.model, self.names = model, tuple(names)
        self.max_seq_length, self.value = max_seq_length, value

    def __call__(self, features, training=False):
        outputs = self.model(features, training=training)
        return input_pipeline.pad_sequence_outputs(
            outputs, [n for n in self.names if n in outputs], self.max_seq_length, self.value)


def predict(trainer, predict_input_fn, output_names, job, sequence_outputs=(), pad_value=0.0):
    """`trainer.predict` of an input function made by `input_fn`, in input order.

    `sequence_outputs`: outputs with a position axis (`[batch, length]`),
    padded back to `job.max_seq_length` with `pad_value` when batches are
    trimmed (so that batches of different widths stack).
    """
    keeps_order = getattr(predict_input_fn, "keeps_order", False)
    names = list(output_names) + ([input_pipeline.ORDER_FEATURE] if keeps_order else [])
    model = trainer.model
    if sequence_outputs and getattr(job, "trim_batches", True):
        trainer.model = PaddedOutputs(model, sequence_outputs, job.max_seq_length, pad_value)
    try:
        outputs = trainer.predict(predict_input_fn, names, restore=False)
    finally:
        trainer.model = model
    return input_pipeline.restore_input_order(outputs) if keeps_order else outputs
