"""Hugging Face safetensors checkpoints, read with the `safetensors` package.

HF exports (`model.safetensors`, or shards listed in
`model.safetensors.index.json`) are in PyTorch layout under PyTorch module
names; the family's `"hf"` name table (`modeling/<family>/checkpoint_names.py`)
says which tensor fills which variable and how (`nn.Linear` weights are
transposed, fused tensors split). This module is the format half: finding
the file(s), reading tensors as NumPy arrays, and refusing what must not be
read.

Why the `safetensors` package, with its NumPy API (`safe_open(path,
framework="np")`): it validates the header and offsets, memory-maps the
file (only the tensors read are paged in) and needs no torch. BF16 tensors
come back as `ml_dtypes.bfloat16` (installed with TensorFlow) and are
widened, exactly, to float32; the other dtypes are kept.

Why pickles are refused: `pytorch_model.bin` (and `.pt`, `.pth`, ...) are
Python pickles, and unpickling runs whatever code the file names. A weights
file from the internet must not be able to do that, so those files are never
opened; the error says how to convert them to safetensors.
"""

import json
import os

import numpy as np
import safetensors

from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.checkpoints.report import CheckpointFormatError

__all__ = ["HF_SAFETENSORS", "load_hf_safetensors", "open_safetensors",
           "read_safetensors", "refuse_pickle", "safetensors_path"]

HF_SAFETENSORS = "hf_safetensors"

# File names of PyTorch's pickle-based checkpoints.
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".bin.index.json")
_PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")


def refuse_pickle(path):
    """Raises `CheckpointFormatError` if `path` names a pickle, or a folder of one.

    A folder is refused only when it holds a PyTorch pickle checkpoint and no
    `model.safetensors` (callers look for safetensors first).
    """
    path = os.fspath(path)
    found = None
    if os.path.basename(path.rstrip("/")).endswith(_PICKLE_SUFFIXES):
        found = path
    elif os.path.isdir(path):
        for name in _PICKLE_FILES:
            if os.path.isfile(os.path.join(path, name)):
                found = os.path.join(path, name)
                break
    if found is not None:
        raise CheckpointFormatError(
            f"{found} is a PyTorch pickle checkpoint, which is never loaded "
            "(unpickling can run arbitrary code); convert it to model.safetensors "
            "first (transformers: model.save_pretrained(dir, safe_serialization=True)).")


def safetensors_path(path):
    """A `.safetensors` file or shard index, or the one inside a folder; else None."""
    path = os.fspath(path)
    if os.path.isfile(path) and (path.endswith(".safetensors")
                                 or path.endswith(".safetensors.index.json")):
        return path
    if os.path.isdir(path):
        for name in ("model.safetensors", "model.safetensors.index.json"):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
    return None


class _SafetensorsFile:
    """One `.safetensors` file, through `safetensors.safe_open(..., "np")`."""

    def __init__(self, path):
        self.path = path
        try:
            self._file = safetensors.safe_open(path, framework="np")
            self._shapes = {}
            self._dtypes = {}
            for name in self._file.keys():
                info = self._file.get_slice(name)
                self._shapes[name] = tuple(int(d) for d in info.get_shape())
                self._dtypes[name] = info.get_dtype()
        except (safetensors.SafetensorError, OSError) as e:
            raise CheckpointFormatError(
                f"{path} is not a readable safetensors file: {e}") from e

    def names(self):
        return list(self._shapes)

    def shape(self, name):
        return self._shapes[name]

    def read(self, name):
        try:
            array = self._file.get_tensor(name)
        except (safetensors.SafetensorError, TypeError, KeyError, ValueError) as e:
            raise CheckpointFormatError(
                f"{self.path}: tensor {name!r} ({self._dtypes[name]}) cannot be read "
                f"as a NumPy array: {e}") from e
        if array.dtype.name == "bfloat16":
            return array.astype(np.float32)  # Exact: bfloat16 is float32's top half.
        return array


class SafetensorsSource:
    """One file, or the shards named by a `*.safetensors.index.json`."""

    def __init__(self, path):
        path = os.fspath(path)
        self.path = path
        self.description = f"safetensors checkpoint {path}"
        self._owner = {}
        if path.endswith(".index.json"):
            try:
                with open(path, "r", encoding="utf-8") as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise CheckpointFormatError(
                    f"{path}: expected a safetensors shard index with a 'weight_map' "
                    f"object ({type(e).__name__}: {e}).") from e
            directory = os.path.dirname(path)
            files = {}
            for name, filename in weight_map.items():
                refuse_pickle(filename)
                if filename not in files:
                    files[filename] = _SafetensorsFile(os.path.join(directory, filename))
                self._owner[name] = files[filename]
        else:
            single = _SafetensorsFile(path)
            self._owner = {name: single for name in single.names()}

    def names(self):
        return list(self._owner)

    def shape(self, name):
        return self._owner[name].shape(name)

    def read(self, name):
        return self._owner[name].read(name)


def open_safetensors(path):
    """A source (`names`, `shape`, `read`) over a safetensors file, index or folder."""
    path = os.fspath(path)
    resolved = safetensors_path(path)
    if resolved is None:
        refuse_pickle(path)
        raise FileNotFoundError(
            f"No safetensors checkpoint at {path}: expected a .safetensors file, a "
            "*.safetensors.index.json, or a folder holding model.safetensors.")
    return SafetensorsSource(resolved)


def read_safetensors(path, names=None):
    """Reads tensors from a `.safetensors` file (or folder) into NumPy arrays.

    F32/F16/F64 and the integer types keep their dtype; BF16 is widened
    (exactly) to float32.

    Args:
        path: a `.safetensors` file, a sharded `*.safetensors.index.json`, or
            a folder holding `model.safetensors` (or its index).
        names: optional iterable of names; default all.

    Returns:
        dict name -> `np.ndarray`, in the file's (PyTorch) layout and names.
    """
    source = open_safetensors(path)
    wanted = source.names() if names is None else list(names)
    return {name: source.read(name) for name in wanted}


def load_hf_safetensors(model, path, allow_missing_heads=False):
    """Loads Hugging Face weights (`.safetensors`, PyTorch layout) into `model`.

    The names are the model family's `"hf"` name table. For BERT: Linear
    weights are transposed (`[out, in]` -> Keras `[in, out]`), LayerNorm
    `weight`/`bias` (or `gamma`/`beta`) fill `gamma`/`beta`, and a `bert.`
    prefix is optional; for a pretrainer, `cls.predictions.transform.*`,
    `cls.predictions.bias` (or `.decoder.bias`) and `cls.seq_relationship.*`
    fill the heads, and the tied `cls.predictions.decoder.weight` is checked
    to equal the word embeddings. F32, F16 and BF16 weights are cast to the
    variables' dtype.

    Args:
        model: a family's encoder, a pretrainer around one, or a model whose
            `.encoder` is one (see `load_google_checkpoint`).
        path: a `.safetensors` file, a sharded `model.safetensors.index.json`,
            or an HF model folder holding either. PyTorch pickles
            (`pytorch_model.bin`) are refused.
        allow_missing_heads: see `load_google_checkpoint` (HF `BertModel`
            exports have no `cls.*` heads).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointMismatchError: see `name_tables.load_by_table`.
        CheckpointFormatError: a pickle, an unreadable file, or a family
            without HF names.
    """
    target = targets.find_target(model)
    source = open_safetensors(path)
    table = name_tables.table_for(target, name_tables.HF_KEY, source.description)
    return name_tables.load_by_table(target, source, table, HF_SAFETENSORS, source.path,
                                     allow_missing_heads)
