"""mg.save / mg.load: nested dicts of arrays and plain values in one .npz file, without pickle.

Arrays become npz entries named by their path ("model/wte.weight"); everything else (numbers,
strings, lists, None) goes into one JSON entry. Writes are atomic: a temporary file in the same
folder, flushed to disk, then renamed over the target, so an interrupted save leaves the old file.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

_JSON_KEY = "__json__"


def save(path: str | os.PathLike, tree: dict[str, Any]) -> None:
    """Write `tree` (nested dicts; leaves are arrays, tensors or JSON values) to `path` atomically."""
    arrays: dict[str, np.ndarray] = {}
    plain = _split(tree, "", arrays)
    arrays[_JSON_KEY] = np.array(json.dumps(plain))
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _split(tree: dict[str, Any], prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Move array leaves into `arrays` under their path; return the rest of the tree."""
    plain: dict[str, Any] = {}
    for key, value in tree.items():
        if "/" in key or key == _JSON_KEY:
            raise ValueError(f"save: key {key!r} may not contain '/' or be {_JSON_KEY!r}")
        if isinstance(value, dict):
            plain[key] = _split(value, f"{prefix}{key}/", arrays)
        elif isinstance(value, Tensor):
            arrays[prefix + key] = value.numpy()
        elif hasattr(value, "dtype"):  # a NumPy or CuPy array (or NumPy scalar)
            arrays[prefix + key] = backend.to_numpy(value)
        else:
            plain[key] = value
    return plain


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by save(): the same nested dicts, with NumPy arrays as leaves."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            tree = json.loads(str(npz[_JSON_KEY]))
            for name in npz.files:
                if name == _JSON_KEY:
                    continue
                *parents, leaf = name.split("/")
                node = tree
                for p in parents:
                    node = node.setdefault(p, {})
                node[leaf] = npz[name]
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as err:  # TypeError: a .npy
        raise ValueError(f"load: {path} is not a readable minigrad checkpoint ({type(err).__name__}: {err})") from None
    return tree
