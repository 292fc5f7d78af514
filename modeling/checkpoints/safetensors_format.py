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
file (only the tensors read are paged in) and needs no torch. The header is
also checked here first (`check_safetensors_header`), so that a damaged or
hostile file is refused with one line naming the file, the tensor and the
field, whatever the package's version says about it. BF16 tensors
come back as `ml_dtypes.bfloat16` (installed with TensorFlow) and are
widened, exactly, to float32; the other dtypes are kept.

Why pickles are refused: `pytorch_model.bin` (and `.pt`, `.pth`, ...) are
Python pickles, and unpickling runs whatever code the file names. A weights
file from the internet must not be able to do that, so those files are never
opened; the error says how to convert them to safetensors.
"""

import json
import math
import os
import struct

import numpy as np
import safetensors

from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.checkpoints.report import CheckpointFormatError

__all__ = ["HF_SAFETENSORS", "check_safetensors_header", "load_hf_safetensors",
           "open_safetensors", "read_safetensors", "refuse_pickle", "safetensors_path"]

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


# The format (https://github.com/huggingface/safetensors, "Format"): an
# unsigned little-endian 64-bit header length N, N bytes of UTF-8 JSON, then
# the data. The JSON maps each tensor name to {"dtype", "shape",
# "data_offsets": [begin, end]} (byte offsets into the data), plus an
# optional "__metadata__" object of strings. The tensors tile the data:
# no gaps, no overlaps, nothing after the last one.
_HEADER_LENGTH_BYTES = 8
# Headers beyond this are refused unread (the format's own limit is 100 MB).
MAX_HEADER_BYTES = 100_000_000
# Bits per element of each dtype the format defines.
_DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_safetensors_header(path):
    """Reads and checks the header of a `.safetensors` file.

    Checks that the file holds the 8-byte header length and that many
    bytes of header; that the header is UTF-8 JSON (any depth of nesting is
    an error, not a `RecursionError`) holding an object; that every tensor
    entry is an object with a known `dtype`, a `shape` of non-negative
    integers and `data_offsets` `[begin, end]` inside the data whose size is
    the dtype's size times the number of elements; and that the tensors
    tile the data exactly (no gap, overlap or trailing bytes).

    Args:
        path: a local `.safetensors` file.

    Returns:
        dict name -> (dtype, shape tuple, (begin, end)), in header order.

    Raises:
        CheckpointFormatError: one line naming the file and what is wrong.
        OSError: the file cannot be read.
    """
    path = os.fspath(path)

    def fail(message):
        return CheckpointFormatError(f"{path}: {message}")

    size = os.path.getsize(path)
    if size < _HEADER_LENGTH_BYTES:
        raise fail(f"not a safetensors file: {size} bytes, fewer than the "
                   f"{_HEADER_LENGTH_BYTES}-byte header length")
    with open(path, "rb") as f:
        (header_length,) = struct.unpack("<Q", f.read(_HEADER_LENGTH_BYTES))
        if header_length > size - _HEADER_LENGTH_BYTES:
            raise fail(f"header length {header_length} exceeds the {size}-byte file "
                       "(truncated, or not a safetensors file)")
        if header_length > MAX_HEADER_BYTES:
            raise fail(f"header length {header_length} exceeds the format's limit of "
                       f"{MAX_HEADER_BYTES} bytes")
        raw = f.read(header_length)
    if len(raw) != header_length:
        raise fail(f"expected {header_length} bytes of header, read {len(raw)}")
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise fail(f"the header is not UTF-8 text ({e.reason} at byte "
                   f"{_HEADER_LENGTH_BYTES + e.start})") from None
    except RecursionError:
        raise fail("the header's JSON is nested too deeply to be a safetensors "
                   "header") from None
    except ValueError as e:
        raise fail(f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise fail(f"the header is a JSON {type(header).__name__}, expected an object "
                   "of tensor entries")

    data_size = size - _HEADER_LENGTH_BYTES - header_length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(
                    isinstance(v, str) for v in entry.values()):
                raise fail("'__metadata__' must be an object of strings")
            continue
        where = f"tensor {name!r}"
        if not isinstance(entry, dict):
            raise fail(f"{where}: expected an object with dtype, shape and "
                       f"data_offsets, got a JSON {type(entry).__name__}")
        for field in ("dtype", "shape", "data_offsets"):
            if field not in entry:
                raise fail(f"{where}: no {field!r}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _DTYPE_BITS:
            raise fail(f"{where}: dtype {dtype!r} is not a safetensors dtype (one of "
                       f"{', '.join(_DTYPE_BITS)})")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise fail(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(_is_count(o) for o in offsets)):
            raise fail(f"{where}: data_offsets {offsets!r} is not [begin, end] of "
                       "non-negative integers")
        begin, end = offsets
        if begin > end or end > data_size:
            raise fail(f"{where}: data_offsets [{begin}, {end}] lie outside the "
                       f"{data_size} bytes of data")
        bits = _DTYPE_BITS[dtype] * math.prod(shape)
        if bits != 8 * (end - begin):
            raise fail(f"{where}: {dtype} of shape {shape} takes {bits / 8:g} bytes, but "
                       f"data_offsets [{begin}, {end}] hold {end - begin}")
        tensors[name] = (dtype, tuple(shape), (begin, end))

    covered = 0
    for name, (_, _, (begin, end)) in sorted(tensors.items(), key=lambda kv: kv[1][2]):
        if begin != covered:
            what = "overlaps the tensor before it" if begin < covered else "leaves a gap"
            raise fail(f"tensor {name!r}: data_offsets [{begin}, {end}] {what} (expected "
                       f"it to begin at byte {covered} of the data)")
        covered = end
    if covered != data_size:
        raise fail(f"the tensors cover {covered} of the {data_size} bytes of data "
                   "(trailing bytes, or a tensor missing from the header)")
    return tensors


class _SafetensorsFile:
    """One `.safetensors` file, through `safetensors.safe_open(..., "np")`."""

    def __init__(self, path):
        self.path = path
        try:
            check_safetensors_header(path)
        except OSError as e:
            raise CheckpointFormatError(f"{path} cannot be read: {e}") from e
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
            except RecursionError:
                raise CheckpointFormatError(
                    f"{path}: expected a safetensors shard index; its JSON is nested "
                    "too deeply.") from None
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise CheckpointFormatError(
                    f"{path}: expected a safetensors shard index with a 'weight_map' "
                    f"object ({type(e).__name__}: {e}).") from e
            if not isinstance(weight_map, dict):
                raise CheckpointFormatError(
                    f"{path}: 'weight_map' must be an object of tensor name -> shard "
                    f"file name, got a JSON {type(weight_map).__name__}.")
            directory = os.path.dirname(path)
            files = {}
            for name, filename in weight_map.items():
                if not isinstance(filename, str) or not filename or os.path.isabs(
                        filename) or ".." in filename.replace("\\", "/").split("/"):
                    raise CheckpointFormatError(
                        f"{path}: 'weight_map' entry {name!r} -> {filename!r}: expected "
                        "the file name of a shard beside the index.")
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
