"""This project's own checkpoints: object-based ones written by the trainer.

`modeling.training.trainer.Trainer` saves model + optimizer through
`tf.train.CheckpointManager` (`model_dir/ckpt-N`). Such a checkpoint used as
`--init_checkpoint` (a classifier fine-tuned from one's own pre-training, a
second pre-training stage) should restore the model part only, whatever
family the model is: the names here are the variables' Keras paths, not a
name table, so every family reads them without declaring anything.

Two compatibility concerns live here: a checkpoint's model may be a
different model around the same encoder (so encoder variables are matched by
their path below the encoder), and checkpoints written before the
transformer block was split into attention and feed-forward sublayers use
older block paths (`legacy_block_path` maps them).
"""

import re

import tensorflow as tf

from modeling.checkpoints import google_tf1
from modeling.checkpoints import targets
from modeling.checkpoints.report import CheckpointMismatchError
from modeling.checkpoints.report import LoadReport

__all__ = ["GRAPH_KEY", "OBJECT_BASED", "legacy_block_path", "load_object_based",
           "model_variable_keys"]

OBJECT_BASED = "object_based"

# The variable of every object-based checkpoint (TF2), absent from TF1 ones.
GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_EMBEDDING_SUFFIX = "embeddings/word_embeddings"


# Block variable paths of checkpoints written before TransformerBlock was
# split into an attention and a feed-forward sublayer.
_LEGACY_BLOCK_PATHS = (
    ("attention/", "attention_sublayer/attention/"),
    ("attention_LayerNorm/", "attention_sublayer/LayerNorm/"),
    ("intermediate/", "ffn_sublayer/intermediate/"),
    ("output_dense/", "ffn_sublayer/output_dense/"),
    ("output_LayerNorm/", "ffn_sublayer/LayerNorm/"),
)
_LEGACY_BLOCK_RE = re.compile(
    r"(^|/)(layer_\d+)/(%s)" % "|".join(re.escape(old) for old, _ in _LEGACY_BLOCK_PATHS))


def legacy_block_path(path):
    """A variable path of an older checkpoint, in today's block layout.

    `bert_encoder/layer_3/attention_LayerNorm/gamma` becomes
    `bert_encoder/layer_3/attention_sublayer/LayerNorm/gamma`; current paths
    are returned unchanged.
    """
    renames = dict(_LEGACY_BLOCK_PATHS)
    return _LEGACY_BLOCK_RE.sub(
        lambda m: m.group(1) + m.group(2) + "/" + renames[m.group(3)], path, count=1)


class _ObjectGraph:
    """The trackable object graph of an object-based (TF2) checkpoint.

    Why not `tf.train.Checkpoint(model=model).restore(...)`: under Keras 3
    the object graph only records attributes that are layers or variables;
    lists of layers (the encoder's `transformer_layers`, the pretrainer's
    `objectives`) are not tracked. The trainer's checkpoints still hold
    every model variable, reached through the optimizer's
    `_trainable_variables` list, with its Keras path (`bert_encoder/
    layer_3/attention_sublayer/attention/query/kernel`) as the variable's `full_name`. So
    variables are matched here by path, relative to the encoder's own name,
    which also lets the encoder of one model load into another.
    """

    def __init__(self, reader, path):
        from tensorflow.core.protobuf import trackable_object_graph_pb2

        self.path = path
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(google_tf1.read_tensor(reader, GRAPH_KEY, path))
        self.nodes = graph.nodes

    def _child(self, node_id, name):
        for child in self.nodes[node_id].children:
            if child.local_name == name:
                return child.node_id
        return None

    def _value(self, node_id):
        for attribute in self.nodes[node_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                return attribute.full_name, attribute.checkpoint_key
        return None

    def model_variables(self):
        """{full_name: checkpoint_key} of the model's variables.

        Those reachable from the root's `model` child, plus the entries of any
        optimizer's `_trainable_variables` list (the model's trainable
        variables); optimizer slots and counters are not among them.
        """
        starts = []
        model = self._child(0, "model")
        if model is not None:
            starts.append(model)
        stack, seen = [0], set()
        while stack:  # Find every `_trainable_variables` list under `optimizer`.
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for child in self.nodes[node].children:
                if child.local_name == "_trainable_variables":
                    starts.append(child.node_id)
                elif child.local_name != "model":
                    stack.append(child.node_id)
        found, stack, seen = {}, list(starts), set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            value = self._value(node)
            if value is not None and value[0]:
                found.setdefault(value[0], value[1])
            stack.extend(child.node_id for child in self.nodes[node].children)
        return found

    def encoder_prefix(self, variables, suffix):
        """The path prefix of the checkpoint's encoder variables.

        `suffix` is the word embedding table's path below the encoder
        (`embeddings/word_embeddings`): the checkpoint's variable with that
        path is its encoder's, preferably the one at `model.encoder`.
        """
        steps = tuple(suffix.split("/"))
        for path in (("model", "encoder") + steps, ("model",) + steps):
            node = 0
            for name in path:
                node = self._child(node, name) if node is not None else None
            if node is not None and self._value(node):
                full_name = self._value(node)[0]
                if full_name.endswith(suffix):
                    return full_name[: -len(suffix)]
        candidates = [n for n in variables if n.endswith("/" + suffix)]
        if len(candidates) == 1:
            return candidates[0][: -len(suffix)]
        raise ValueError(
            f"{self.path}: cannot find the encoder in the checkpoint (no unique "
            f"'.../{suffix}' variable; candidates: {candidates})."
        )


def model_variable_keys(reader, path):
    """{Keras variable path: checkpoint key} of every model variable of a trainer checkpoint.

    `reader` is `tf.train.load_checkpoint(path)`; the paths are the
    variables' Keras paths (`bert_classifier/output_weights`), see
    `_ObjectGraph`.
    """
    return _ObjectGraph(reader, path).model_variables()


def _encoder_prefix(encoder):
    """`(prefix, suffix)` of the encoder's word embedding path.

    The prefix (`bert_encoder/`) is what every encoder variable path starts
    with; the suffix (`embeddings/word_embeddings`) finds the same table in a
    checkpoint.
    """
    path = encoder.embedding_table.path
    own = encoder.name + "/"
    if path.startswith(own):
        return own, path[len(own):]
    if path.endswith("/" + _EMBEDDING_SUFFIX):
        return path[: -len(_EMBEDDING_SUFFIX)], _EMBEDDING_SUFFIX
    raise ValueError(f"Unexpected word embedding path {path!r} of encoder {encoder.name!r}.")


def load_object_based(model, prefix, allow_missing_heads=False):
    """Restores the model part of a checkpoint written by `modeling.training.trainer`.

    Encoder variables are matched by their path below the encoder (so a
    classifier's encoder loads from a pretrainer's checkpoint); for a
    pretrainer, its other weights (the objectives' heads) are matched by
    full path. The optimizer's state is ignored. Works for every family:
    the names are the variables' own paths.

    Args:
        model: a family's encoder, a pretrainer around one, or a model whose
            `.encoder` is one.
        prefix: the checkpoint prefix (`model_dir/ckpt-N`).
        allow_missing_heads: a pretrainer's head variables absent from the
            checkpoint keep their initial values instead of being an error.

    Returns:
        A `LoadReport`.
    """
    target = targets.find_target(model)
    encoder = target.roots["encoder"]
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    graph = _ObjectGraph(reader, prefix)
    stored = graph.model_variables()
    model_prefix, suffix = _encoder_prefix(encoder)
    ckpt_prefix = graph.encoder_prefix(stored, suffix)

    # Key "encoder:<relative path>" for the encoder, the full path otherwise.
    def key_of(path, prefix_):
        return "encoder:" + path[len(prefix_):] if path.startswith(prefix_) else path

    report = LoadReport(path=prefix, format=OBJECT_BASED, target=target.description)
    available = {}
    for full_name, checkpoint_key in stored.items():
        if "seed_generator" in full_name:
            # Dropout RNG state: not a weight, and not in `model.weights`.
            report.skipped.append((full_name, "RNG state"))
            continue
        available[key_of(legacy_block_path(full_name), ckpt_prefix)] = (
            full_name, checkpoint_key)

    wanted = {}
    variables = list(encoder.weights)
    if target.has_heads:
        encoder_ids = {id(v) for v in variables}
        variables += [v for v in model.weights if id(v) not in encoder_ids]
    for variable in variables:
        key = key_of(variable.path, model_prefix)
        if key in wanted:
            raise ValueError(f"Two variables of the model share the path {variable.path!r}.")
        wanted[key] = variable

    plan, missing, mismatched, missing_heads = [], [], [], []
    for key, variable in wanted.items():
        shape = tuple(int(d) for d in variable.shape)
        if key not in available:
            shown = variable.path
            if key.startswith("encoder:") or not allow_missing_heads:
                missing.append((shown, shape))
            else:
                missing_heads.append(shown)
            continue
        full_name, checkpoint_key = available[key]
        stored_shape = tuple(shapes[checkpoint_key])
        if stored_shape != shape:
            mismatched.append((full_name, stored_shape, shape))
            continue
        plan.append((full_name, checkpoint_key, variable))
    unexpected = []
    for key in sorted(set(available) - set(wanted)):
        full_name, checkpoint_key = available[key]
        if key.startswith("encoder:"):
            unexpected.append((full_name, tuple(shapes[checkpoint_key])))
        else:
            report.skipped.append((full_name, "not part of the target model"))
    model_keys = set(stored.values())
    for checkpoint_key in sorted(shapes):
        if checkpoint_key not in model_keys and checkpoint_key != GRAPH_KEY:
            report.skipped.append((checkpoint_key, "optimizer state"))
    if missing or unexpected or mismatched:
        hint = None
        if any(not n.startswith(model_prefix) for n, _ in missing):
            hint = ("Some head variables are not in the checkpoint; pass "
                    "allow_missing_heads=True to keep them initialised.")
        raise CheckpointMismatchError(f"Checkpoint {prefix}", target.description,
                                      missing, unexpected, mismatched, (), hint)
    for full_name, checkpoint_key, variable in plan:
        targets.assign(variable, google_tf1.read_tensor(reader, checkpoint_key, prefix))
        report.loaded.append(full_name)
    report.missing_heads = missing_heads
    return report
