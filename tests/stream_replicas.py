"""Shared by the tests of stateful stream pipelines (XLNet's memory, ULMFiT's LSTM state):
one metric of consecutive steps of a recipe's model under a `tf.distribute` strategy."""

import numpy as np
import tensorflow as tf

from modeling import recipes
from modeling.recipes.pipelines.base import PipelineOptions


def step_metric(strategy, recipe_name, config, weights, options, inputs, metric, reset_key,
                is_training=False, steps=3, forget=False, batch_size=4):
    """Per step, `metric`'s (sum, count) summed over the replicas, as a `[steps, 2]` array.

    The recipe's model (`config`, then `weights`) reads `batch_size` streams of the
    recipe's pipeline (`options`, a `PipelineOptions` dict) over `inputs`; with `forget`
    every row's `reset_key` is 1 (nothing carried from the previous step).
    """
    recipe = recipes.load_recipe(recipe_name)
    pipe = recipe.build_pipeline(PipelineOptions(**options))
    with strategy.scope():
        model = recipe.build_model(config)
    model.set_weights(weights)
    dataset = strategy.distribute_datasets_from_function(
        pipe.input_fn(inputs, is_training, batch_size))

    @tf.function
    def step(batch):
        def replica(features):
            if forget:
                features = dict(features, **{reset_key: tf.ones_like(features[reset_key])})
            return model.compute_loss_and_metrics(features, training=is_training)[1][metric]
        per_replica = strategy.run(replica, args=(batch,))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, t, axis=None) for t in per_replica]

    return np.array([[float(t) for t in step(batch)]
                     for batch, _ in zip(dataset, range(steps))])
