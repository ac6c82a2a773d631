"""mg.save / mg.load: nested dicts of arrays and plain values in one .npz file, without pickle: arrays as entries
named by their path ("model/wte.weight"), the rest as one JSON entry. Writes are atomic (a temporary file in the
same folder, flushed, then renamed), so an interrupted save leaves the old file.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import zipfile
from typing import Any

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

_JSON_KEY = "__json__"


def save(path: str | os.PathLike, tree: dict[str, Any]) -> None:
    """Write `tree` (nested dicts; leaves are arrays, tensors or JSON values) to `path` atomically, with the
    permissions the user's umask gives. What load() could not give back (keys that are not plain strings, object
    arrays, other values) is refused before anything is written."""
    if not isinstance(tree, dict):
        raise TypeError(f"save: expected a dict, got {type(tree).__name__}")
    arrays: dict[str, np.ndarray] = {}
    plain = _split(tree, "", arrays)
    arrays[_JSON_KEY] = np.array(json.dumps(plain))
    path = os.fspath(path)
    fd, tmp = _create_temporary(os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _create_temporary(folder: str) -> tuple[int, str]:
    """A new file in `folder`, opened for writing. Unlike tempfile.mkstemp, whose files are 0600, its
    mode is 0666 less the user's umask, as for any file the user creates."""
    while True:
        tmp = os.path.join(folder, f".tmp-{secrets.token_hex(8)}.npz")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # another writer drew the same name: draw again
            continue


def _split(tree: dict[str, Any], prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Move array leaves into `arrays` under their path; return the rest of the tree, checked."""
    plain: dict[str, Any] = {}
    for key, value in tree.items():
        if not isinstance(key, str) or not key or "/" in key or key == _JSON_KEY:
            raise ValueError(f"save: key {key!r} (at {prefix or 'the top level'}) must be a non-empty string; "
                             f"it may not contain '/' or be {_JSON_KEY!r}")
        if isinstance(value, dict):
            plain[key] = _split(value, f"{prefix}{key}/", arrays)
        elif isinstance(value, Tensor) or hasattr(value, "dtype"):  # a tensor, a NumPy or CuPy array or scalar
            array = backend.to_numpy(value.data if isinstance(value, Tensor) else value)
            if array.dtype.kind in "OV":
                raise TypeError(f"save: {prefix}{key} is an array of dtype {array.dtype}, which load() could not "
                                "read back without pickle")
            arrays[prefix + key] = array
        else:
            _check_json(value, prefix + key)
            plain[key] = value
    return plain


def _check_json(value: Any, where: str) -> None:
    """Refuse a value that JSON would not write, or would give back as something else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"save: {where} has the key {key!r}; keys must be strings")
            _check_json(item, f"{where}[{key!r}]")
    else:
        raise TypeError(f"save: {where} is a {type(value).__name__}, neither an array nor a JSON value "
                        "(None, bool, int, float, str, list, dict)")


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by save(): the same nested dicts, with NumPy arrays as leaves.

    Anything else, damaged or crafted, is a ValueError saying the file is not a readable checkpoint.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint at {path}")
    try:
        return _read(path)
    except Exception as err:  # whatever zipfile, NumPy or json raise on a damaged or crafted file
        raise ValueError(f"load: {path} is not a readable minigrad checkpoint ({type(err).__name__}: {err})") from None


def _read(path: str) -> dict[str, Any]:
    _check_entries(path)
    with np.load(path, allow_pickle=False) as npz:
        tree = json.loads(str(npz[_JSON_KEY]))
        if not isinstance(tree, dict):
            raise ValueError(f"its {_JSON_KEY} entry is {type(tree).__name__}, not a JSON object")
        for name in npz.files:
            if name != _JSON_KEY:
                _place(tree, name, npz[name])
    return tree


def _check_entries(path: str) -> None:
    """Every entry must be an .npy array whose header agrees with the entry's size, so that a crafted
    header cannot make np.load allocate more memory than the file holds."""
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            with archive.open(info) as f:
                version = np.lib.format.read_magic(f) if info.filename.endswith(".npy") else None
                if version not in readers:
                    raise ValueError(f"entry {info.filename!r} is not an array in .npy format 1.0 or 2.0")
                shape, _, dtype = readers[version](f)
                if math.prod(shape) * dtype.itemsize != info.file_size - f.tell():
                    raise ValueError(f"entry {info.filename!r} declares shape {shape} of {dtype} but holds "
                                     f"{info.file_size - f.tell()} bytes")


def _place(tree: dict[str, Any], name: str, array: np.ndarray) -> None:
    """Put `array` at its path ("model/wte.weight") in `tree`, refusing a name that save() would not write."""
    *parents, leaf = name.split("/")
    if not all(parents + [leaf]) or _JSON_KEY in parents + [leaf]:
        raise ValueError(f"entry name {name!r} is not a path of keys")
    node = tree
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"entry {name!r} runs through {p!r}, which holds a {type(node).__name__}")
    if leaf in node:
        raise ValueError(f"entry {name!r} names a place that already holds a value")
    node[leaf] = array
