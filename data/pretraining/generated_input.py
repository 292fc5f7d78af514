"""An `input_fn` over examples that Python makes, one pass of the files per epoch.

The word-level pipelines (ELMo's sentences, CoVe's sentence pairs) read their
text in Python: `generated_input_fn` turns `examples(shuffle_seed)`, an
iterable of one epoch's examples, and `features(example)`, an example's
feature dict, into the `input_fn(input_context=None)` a recipe returns. Training reads epoch after epoch, each with its own seed
(`seed + 1000003 * epoch`: the files in another order), shuffles 4096
examples and drops a last partial batch; evaluation reads one pass in order
with no seed. Under a distribution strategy, input pipeline `i` of `n` keeps
examples `i, i + n, ...` (only those are made features); batches are the per-replica size.
"""

import random

import tensorflow as tf

__all__ = ["generated_input_fn"]

_EPOCH_SEED_STEP = 1000003
_SHUFFLE_BUFFER = 4096


def generated_input_fn(examples, features, signature, is_training, batch_size, seed=None):
    """The `input_fn` of `features` of `examples(shuffle_seed)` (see the module docstring).

    `signature`: the feature dict's `tf.TensorSpec`s; `seed`: None draws one.
    """
    if seed is None:
        seed = random.SystemRandom().randrange(2 ** 31)

    def input_fn(input_context=None):
        pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        per_replica = (input_context.get_per_replica_batch_size(batch_size)
                       if input_context else batch_size)
        epochs = [0]

        def generate():
            epoch_seed = None
            if is_training:
                epoch_seed = seed + _EPOCH_SEED_STEP * epochs[0]
                epochs[0] += 1
            for number, example in enumerate(examples(epoch_seed)):
                if number % pipelines == pipeline_id:
                    yield features(example)

        d = tf.data.Dataset.from_generator(generate, output_signature=signature)
        if is_training:
            d = d.repeat().shuffle(_SHUFFLE_BUFFER, seed=seed)
        d = d.batch(per_replica, drop_remainder=is_training)
        return d.prefetch(tf.data.AUTOTUNE)

    return input_fn
