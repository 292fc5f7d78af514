"""bilm-tf's released ELMo (`options.json` + `weights.hdf5`) in and out of `ElmoNetwork`.

AllenNLP published the original ELMo models as two files written by
bilm-tf (`bin/dump_weights.py`): the options (`modeling.elmo.config` reads
their names) and an HDF5 file of the biLM's weights, without the softmax.
This module reads such a pair into an `ElmoNetwork` whose outputs are
bilm-tf's (`BidirectionalLanguageModel`'s layers), and writes a network back
in the same layout:

    >>> network = from_bilm_tf("elmo_small/")            # options.json + weights.hdf5
    >>> network = from_bilm_tf("x_options.json", "x_weights.hdf5")
    >>> load_bilm_tf_weights(network, "weights.hdf5")    # into a network of those options
    >>> save_bilm_tf(network, "out/")                    # bilm-tf / allennlp read it

The datasets (names as in the file; `d` 0 = forward, 1 = backward; `l` the layer):

    char_embed                    [n_characters - 1, dim]  character ids 1.. (bilm-tf's
                                  Batcher adds 1 so that 0 is a padded word; its row 0
                                  is zeros, not stored). The ids are `data.word_vocab`'s.
    CNN/W_cnn_{i}, CNN/b_cnn_{i}  [1, width, dim, count], [count]   (conv2d over 1 x width)
    CNN_high_{i}/W_carry|b_carry|W_transform|b_transform   [n, n], [n]: the carry gate
                                  sigmoid(x W_carry + b_carry) multiplies the relu
                                  transform: gate * transform + (1 - gate) * x
    CNN_proj/W_proj, b_proj       [n, projection_dim], [projection_dim]; absent when
                                  the filters count projection_dim
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0   [input + out, 4 dim], gates i, j, f, o
                                  (TF's LSTMCell: [x; m] @ W_0)
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/B     [4 dim], without the forget bias 1.0
                                  that TF's cell adds
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0 [dim, projection_dim]; absent when
                                  projection_dim = dim

`ElmoNetwork`'s "lstmp" cell and "padded" character pooling keep these
layouts and semantics (`modeling.elmo.network`), so loading is copying, the
highway's two matrices side by side, and the embedding shifted by one row.

What is not bilm-tf's: bilm-tf's inference graph is stateful (each batch
starts from the previous batch's final LSTM states, hence its README's
"warm up" advice); `ElmoNetwork` starts every batch from zeros, which is
bilm-tf's first batch. Padded word slots give zero vectors here, bilm-tf's
are masked downstream; real words agree.

Bad input is one line naming the file: a missing, mis-shaped or unexpected
dataset (`BilmTfError`), an options file with an unknown key
(`ElmoConfigError`), a network that is not bilm-tf's ("lstm_dense", "word").
"""

import json
import os

import numpy as np

from data import word_vocab as vocabulary
from modeling.checkpoints.report import CheckpointFormatError
from modeling.elmo.config import ElmoConfig
from modeling.elmo.config import ElmoConfigError
from modeling.elmo.network import ElmoNetwork

__all__ = ["BilmTfError", "OPTIONS_FILE", "WEIGHTS_FILE", "bilm_tf_arrays", "find_files",
           "from_bilm_tf", "is_bilm_tf_folder", "load_bilm_tf_weights", "read_bilm_tf_options",
           "save_bilm_tf"]

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"


class BilmTfError(CheckpointFormatError):
    """A bilm-tf weights file (or folder) that does not fit the network; one line."""


def _h5py():
    try:
        import h5py  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - h5py comes with TensorFlow
        raise BilmTfError("reading bilm-tf's weights.hdf5 needs the h5py package "
                          "(pip install h5py)") from None
    return h5py


# ------------------------------------------------------------------ files

def _single(folder, suffix):
    names = sorted(n for n in os.listdir(folder) if n.endswith(suffix))
    return os.path.join(folder, names[0]) if len(names) == 1 else None


def find_files(path):
    """`(options file, weights file)` of a bilm-tf folder, or None for either.

    `options.json` and `weights.hdf5`, else the folder's only `*options.json`
    and only `*.hdf5` (AllenNLP's downloads are named
    `elmo_2x4096_512_2048cnn_2xhighway_options.json` / `..._weights.hdf5`).
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        return None, None
    options = os.path.join(path, OPTIONS_FILE)
    weights = os.path.join(path, WEIGHTS_FILE)
    return (options if os.path.isfile(options) else _single(path, "options.json"),
            weights if os.path.isfile(weights) else _single(path, ".hdf5"))


def _options_in(folder):
    """The options file of a bilm-tf folder (`find_files`); `FileNotFoundError` if none."""
    options, _ = find_files(folder)
    if options is None:
        raise FileNotFoundError("%s: no bilm-tf options file (%s or one *options.json)"
                                % (folder, OPTIONS_FILE))
    return options


def is_bilm_tf_folder(path):
    """True for a folder holding a bilm-tf options file and an HDF5 weights file."""
    options, weights = find_files(path)
    return options is not None and weights is not None


def read_bilm_tf_options(path, vocab_size=None):
    """bilm-tf's `options.json` (or a folder holding it) as an `ElmoConfig`.

    The released files carry no `n_tokens_vocab` (the softmax is not
    released): it is `vocab_size` when given, else the three special words
    (`data.word_vocab.SPECIAL_WORDS`), which only the objective would read.
    A file that has it keeps its own. Unknown keys are errors naming the file.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = _options_in(path)
    if not os.path.isfile(path):
        raise FileNotFoundError("bilm-tf options file not found: %s" % path)
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise ElmoConfigError("bilm-tf options file %s is not valid JSON: %s" % (path, e)) from None
    if isinstance(values, dict) and "n_tokens_vocab" not in values:
        values = dict(values, n_tokens_vocab=(len(vocabulary.SPECIAL_WORDS)
                                              if vocab_size is None else vocab_size))
    try:
        return ElmoConfig.from_dict(values)
    except (ElmoConfigError, TypeError) as e:
        raise ElmoConfigError("Invalid bilm-tf options file %s: %s" % (path, e)) from None


# ------------------------------------------------------------- the layout

def _check_bilm_tf_network(network, what):
    if not isinstance(network, ElmoNetwork):
        raise BilmTfError("%s: bilm-tf weights load into an ElmoNetwork, got %s"
                          % (what, type(network).__name__))
    if network.lstm_cell != "lstmp" or network.char_pooling != "padded":
        raise BilmTfError(
            "%s: the network is not bilm-tf's (lstm.cell=%r, char_cnn.pooling=%r; bilm-tf's "
            "are \"lstmp\" and \"padded\")" % (what, network.lstm_cell, network.char_pooling))


def _entries(network):
    """(dataset name, variables, to_file, from_file) for every weight of `network`.

    `to_file(values)` turns the variables' values into the dataset's array,
    `from_file(array)` the dataset into the variables' values (a list).
    """
    encoder = network.char_encoder
    entries = [("char_embed", [encoder.char_embeddings.embeddings],
                lambda v: v[0][1:],
                lambda a: [np.concatenate([np.zeros_like(a[:1]), a], axis=0)])]
    for i, conv in enumerate(encoder.convolutions):
        entries.append(("CNN/W_cnn_%d" % i, [conv.kernel], lambda v: v[0][None],
                        lambda a: [a[0]]))
        entries.append(("CNN/b_cnn_%d" % i, [conv.bias], lambda v: v[0], lambda a: [a]))
    n = encoder.num_filters
    for i, highway in enumerate(encoder.highways):
        # The Dense's kernel is [transform | gate]; the gate is bilm-tf's carry gate.
        for name, part in (("W_transform", 0), ("W_carry", 1)):
            entries.append(("CNN_high_%d/%s" % (i, name), [highway.kernel],
                            lambda v, p=part: v[0][:, p * n:(p + 1) * n], None))
        for name, part in (("b_transform", 0), ("b_carry", 1)):
            entries.append(("CNN_high_%d/%s" % (i, name), [highway.bias],
                            lambda v, p=part: v[0][p * n:(p + 1) * n], None))
    if encoder.projection is not None:
        entries.append(("CNN_proj/W_proj", [encoder.projection.kernel], lambda v: v[0],
                        lambda a: [a]))
        entries.append(("CNN_proj/b_proj", [encoder.projection.bias], lambda v: v[0],
                        lambda a: [a]))
    for d, lstms in enumerate((network.forward_lstms, network.backward_lstms)):
        for layer, lstm in enumerate(lstms):
            root = "RNN_%d/RNN/MultiRNNCell/Cell%d/LSTMCell/" % (d, layer)
            entries.append((root + "W_0", [lstm.kernel], lambda v: v[0], lambda a: [a]))
            entries.append((root + "B", [lstm.bias], lambda v: v[0], lambda a: [a]))
            if lstm.projection is not None:
                entries.append((root + "W_P_0", [lstm.projection], lambda v: v[0],
                                lambda a: [a]))
    return entries


def bilm_tf_arrays(network):
    """`{dataset name: float32 array}` of `network` in bilm-tf's `weights.hdf5` layout."""
    _check_bilm_tf_network(network, network.name)
    return {name: np.asarray(to_file([np.asarray(v) for v in variables]), np.float32)
            for name, variables, to_file, _ in _entries(network)}


def _datasets(handle):
    names = {}

    def visit(name, item):
        if hasattr(item, "shape") and hasattr(item, "dtype"):
            names[name] = item

    handle.visititems(visit)
    return names


def load_bilm_tf_weights(network, weights_file):
    """Loads bilm-tf's `weights.hdf5` into `network` (an `ElmoNetwork` of its options).

    Every weight of the network must be in the file with its shape, and
    every dataset of the file must have a place in the network; otherwise
    one `BilmTfError` line names the file and each offending dataset, and
    no variable has been touched.

    Returns:
        The sorted dataset names that were loaded.
    """
    weights_file = os.fspath(weights_file)
    _check_bilm_tf_network(network, weights_file)
    if not os.path.isfile(weights_file):
        raise BilmTfError("bilm-tf weights file not found: %s" % weights_file)
    h5py = _h5py()
    try:
        handle = h5py.File(weights_file, "r")
    except OSError as e:
        raise BilmTfError("%s: not an HDF5 file of bilm-tf weights (%s)"
                          % (weights_file, str(e).splitlines()[0] if str(e) else "?")) from None
    entries = _entries(network)
    with handle:
        datasets = _datasets(handle)
        problems = []
        expected = {}
        for name, variables, to_file, _ in entries:
            shape = tuple(np.shape(to_file([np.zeros(v.shape, np.float32) for v in variables])))
            expected[name] = shape
            if name not in datasets:
                problems.append("dataset %s is missing (expected shape %s)" % (name, list(shape)))
            elif tuple(datasets[name].shape) != shape:
                problems.append("dataset %s has shape %s, the options give %s"
                                % (name, list(datasets[name].shape), list(shape)))
        for name in sorted(set(datasets) - set(expected)):
            problems.append("dataset %s %s has no place in the network"
                            % (name, list(datasets[name].shape)))
        if problems:
            raise BilmTfError("%s does not fit the ELMo network of its options: %s"
                              % (weights_file, "; ".join(problems)))
        arrays = {name: np.asarray(datasets[name][...], np.float32) for name in expected}
    # Every shape fits: assign. The highway's halves go into one Dense.
    for name, variables, _, from_file in entries:
        if from_file is not None:
            for variable, value in zip(variables, from_file(arrays[name])):
                variable.assign(value.astype(variable.dtype))
    for i, highway in enumerate(network.char_encoder.highways):
        root = "CNN_high_%d/" % i
        highway.kernel.assign(np.concatenate(
            [arrays[root + "W_transform"], arrays[root + "W_carry"]], axis=1))
        highway.bias.assign(np.concatenate([arrays[root + "b_transform"],
                                            arrays[root + "b_carry"]]))
    return sorted(expected)


def from_bilm_tf(path, weights_file=None, vocab_size=None, **network_kwargs):
    """An `ElmoNetwork` with bilm-tf's released weights.

    Args:
        path: a folder holding the options and weights files (`find_files`),
            or the options file itself (then `weights_file` is required).
        weights_file: the `weights.hdf5`; default: found in the folder.
        vocab_size: `n_tokens_vocab` for options files without it
            (`read_bilm_tf_options`).
        **network_kwargs: to the network's constructor (`name`, `dtype`).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        options = _options_in(path)
        if weights_file is None:
            _, found = find_files(path)
            if found is None:
                raise FileNotFoundError("%s: no bilm-tf weights file (%s or one *.hdf5)"
                                        % (path, WEIGHTS_FILE))
            weights_file = found
    else:
        options = path
        if weights_file is None:
            raise ValueError("from_bilm_tf(%s): pass weights_file (the weights.hdf5) with an "
                             "options file" % path)
    config = read_bilm_tf_options(options, vocab_size)
    network = ElmoNetwork.from_config_object(config, **network_kwargs)
    load_bilm_tf_weights(network, weights_file)
    return network


def save_bilm_tf(network, folder):
    """Writes `options.json` and `weights.hdf5` of `network` in bilm-tf's layout.

    bilm-tf's `BidirectionalLanguageModel` and AllenNLP's `Elmo` read the
    pair (the options keep `n_tokens_vocab` and `dropout`, which both ignore).
    """
    arrays = bilm_tf_arrays(network)
    config = network.config_object(ElmoConfig)
    os.makedirs(folder, exist_ok=True)
    config.to_json_file(os.path.join(folder, OPTIONS_FILE))
    h5py = _h5py()
    path = os.path.join(folder, WEIGHTS_FILE)
    temporary = path + ".partial"
    with h5py.File(temporary, "w") as handle:
        for name, array in sorted(arrays.items()):
            handle.create_dataset(name, data=array, dtype="float32")
    os.replace(temporary, path)
    return folder
