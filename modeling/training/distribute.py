"""Choosing a `tf.distribute` strategy from plain arguments.

`get_strategy("one_device" | "mirrored" | "multi_worker_mirrored" | "tpu")`
is what every run script calls with its `--distribution_strategy` flag.
Multi-worker runs take their cluster from the `TF_CONFIG` environment
variable, as TensorFlow defines it::

    TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                "task": {"type": "worker", "index": 0}}'
"""

import json
import os

import tensorflow as tf

from data import termination

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(distribution_strategy="one_device", num_gpus=None, tpu=None,
                 all_reduce_alg=None):
    """Returns a `tf.distribute.Strategy`.

    Args:
      distribution_strategy: one of `STRATEGIES`.
      num_gpus: GPUs to use (mirrored / one_device). None: all visible GPUs.
        With no GPU, "mirrored" mirrors over the visible (logical) CPUs.
      tpu: TPU name or grpc address for "tpu" ("" or "local" for a TPU VM).
      all_reduce_alg: "nccl" or "ring" for multi-worker collectives, or
        "hierarchical_copy" / "nccl" for mirrored; None: TensorFlow's choice.
    """
    name = (distribution_strategy or "one_device").lower()
    if name not in STRATEGIES:
        raise ValueError("Unknown --distribution_strategy=%r; expected one of %s"
                         % (distribution_strategy, ", ".join(STRATEGIES)))
    if name == "multi_worker_mirrored":
        # Must come before anything initialises the TensorFlow runtime
        # (even listing devices does): collectives are set up at start-up.
        return _multi_worker_strategy(all_reduce_alg)
    if name == "tpu":
        return _tpu_strategy(tpu)
    gpus = tf.config.list_logical_devices("GPU")
    if num_gpus is not None:
        if num_gpus > len(gpus):
            raise ValueError("--num_gpus=%d but only %d GPU(s) are visible"
                             % (num_gpus, len(gpus)))
        gpus = gpus[:num_gpus]
    if name == "one_device":
        if len(gpus) <= 1:
            # TensorFlow's default strategy already runs everything on the one
            # device (the GPU if there is one). OneDeviceStrategy would do the
            # same through explicit placement, measured 1.7x slower per step
            # for a tiny BERT on CPU.
            return tf.distribute.get_strategy()
        return tf.distribute.OneDeviceStrategy(gpus[0].name)
    if name == "mirrored":
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        cross_device_ops = None
        if all_reduce_alg == "nccl":
            cross_device_ops = tf.distribute.NcclAllReduce()
        elif all_reduce_alg == "hierarchical_copy":
            cross_device_ops = tf.distribute.HierarchicalCopyAllReduce()
        elif not gpus:
            # Logical CPUs of one process: sum on one device. TensorFlow's
            # default there is collective ops, whose instance keys collide with
            # those of an earlier MirroredStrategy of the same process ("Shape
            # mismatch in the collective instance 100", tensorflow#62790).
            cross_device_ops = tf.distribute.ReductionToOneDevice()
        return tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops)


def _multi_worker_strategy(all_reduce_alg):
    if "TF_CONFIG" not in os.environ:
        raise ValueError("--distribution_strategy=multi_worker_mirrored needs the "
                         "cluster in the TF_CONFIG environment variable")
    try:
        json.loads(os.environ["TF_CONFIG"])
    except ValueError as e:
        raise ValueError("TF_CONFIG is not valid JSON: %s" % e) from e
    implementation = {
        "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
        "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    }.get(all_reduce_alg, tf.distribute.experimental.CommunicationImplementation.AUTO)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=implementation))
    # The strategy's coordination service took SIGTERM for a C++ handler; the
    # trainer's own (data.termination) hears it again, and the workers agree
    # on when to stop inside the training loop (an all-reduce of the flags).
    termination.reclaim()
    return strategy


def _tpu_strategy(tpu):
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu="" if tpu in (None, "local") else tpu)
    if tpu not in (None, "", "local"):
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy):
    """True for the worker that writes checkpoints and summaries."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    cluster = resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and "chief" not in cluster
