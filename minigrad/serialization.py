"""mg.save / mg.load: nested dicts of arrays and plain values in one .npz file, without pickle: arrays as entries
named by their path ("model/wte.weight"), the rest as one JSON entry. Writes are atomic (a temporary file in the
same folder as the file a symlink points to, flushed, given the old file's mode, then renamed over it), so an
interrupted save leaves the old file.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import stat
import zipfile
from typing import Any

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

_JSON_KEY = "__json__"
_INT_KEYS = "__int_keys__"  # the paths of the keys that were ints (an optimizer's state by parameter number)


def save(tree: dict[str, Any], f: str | os.PathLike) -> None:
    """Write `tree` (nested dicts; leaves are arrays, tensors or JSON values) to the path `f` atomically, the object
    first, as torch.save(obj, f). As torch.save, a symlink is written through (its target replaced, the link kept)
    and a file written over keeps its permissions; a new file gets those the user's umask gives. Keys are strings or
    ints, given back as they were; tuples come back as lists. What load() could not give back (other keys, a key with
    '/' or a control character, object arrays, other values) is refused before anything is written, and the old file
    is only replaced by a complete new one."""
    if isinstance(tree, (str, os.PathLike)) and isinstance(f, dict):
        raise TypeError(f"save: the object comes first, then the path, as in torch.save(obj, f): "
                        f"mg.save(tree, {os.fspath(tree)!r}) (minigrad's save took the path first before)")
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"save: f must be a path (str or os.PathLike), got {type(f).__name__}; the file is written by "
                        "its path, atomically, not into an open file object")
    if not isinstance(tree, dict):
        hint = "; save its state_dict()" if hasattr(tree, "state_dict") else ""
        raise TypeError(f"save: expected a dict, got {type(tree).__name__}{hint}")
    arrays: dict[str, np.ndarray] = {}
    int_keys: list[list[str]] = []
    plain = _split(tree, [], arrays, int_keys)
    arrays[_JSON_KEY] = np.array(json.dumps(plain))
    if int_keys:
        arrays[_INT_KEYS] = np.array(json.dumps(int_keys))
    path = os.path.realpath(f)  # through symlinks: the rename below replaces the file, not the link
    if os.path.exists(path) and not os.access(path, os.W_OK):  # as open(path, "wb") would: no rename around it
        raise PermissionError(f"save: {path!r} is read-only (mode {os.stat(path).st_mode & 0o777:o}), as open() would "
                              "find it; make it writable (chmod u+w) or save elsewhere")
    fd, tmp = _create_temporary(os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            if os.path.exists(path):
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # the old file's mode, as writing into it
            _write_entries(f, arrays)
            f.flush()
            os.fsync(f.fileno())
        with zipfile.ZipFile(tmp) as archive:  # every entry readable under its own name, or no file at all
            if sorted(archive.namelist()) != sorted(name + ".npy" for name in arrays):
                raise ValueError(f"save: the file would not read back as written ({archive.namelist()[:5]})")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _write_entries(f: Any, arrays: dict[str, np.ndarray]) -> None:
    """The arrays as .npy entries of a zip archive (the .npz layout), each named by its key: the keys are data,
    written as entry names, never passed as keyword arguments (np.savez would take `file` or `allow_pickle`)."""
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(name + ".npy", mode="w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, np.asanyarray(array), allow_pickle=False)


def _create_temporary(folder: str) -> tuple[int, str]:
    """A new file in `folder`, opened for writing. Unlike tempfile.mkstemp, whose files are 0600, its
    mode is 0666 less the user's umask, as for any file the user creates."""
    while True:
        tmp = os.path.join(folder, f".tmp-{secrets.token_hex(8)}.npz")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # another writer drew the same name: draw again
            continue


def _split(tree: dict[Any, Any], path: list[str], arrays: dict[str, np.ndarray],
           int_keys: list[list[str]]) -> dict[str, Any]:
    """Move array leaves into `arrays` under their path ("model/wte.weight"); return the rest of the tree, its
    keys as strings (each int key's path noted in `int_keys`), checked."""
    plain: dict[str, Any] = {}
    names: set[str] = set()
    where = "/".join(path) or "the top level"
    for key, value in tree.items():
        if isinstance(key, int) and not isinstance(key, bool):
            name = str(key)
            int_keys.append([*path, name])
        elif isinstance(key, str):
            name = key
        else:
            raise TypeError(f"save: key {key!r} (at {where}) is a {type(key).__name__}; keys are strings or ints")
        if not name or any(c in name for c in "/\\") or any(ord(c) < 32 for c in name) \
                or name in (_JSON_KEY, _INT_KEYS) or not _encodable(name):
            raise ValueError(f"save: key {key!r} (at {where}) cannot be written: keys must be non-empty, without '/', "
                             f"'\\' or control characters (such as NUL), encodable as UTF-8, and not {_JSON_KEY!r} or "
                             f"{_INT_KEYS!r}")
        if name in names:
            raise ValueError(f"save: keys {key!r} and {name!r} (at {where}) would be written as one")
        names.add(name)
        if isinstance(value, dict):
            plain[name] = _split(value, [*path, name], arrays, int_keys)
        elif isinstance(value, Tensor) or hasattr(value, "dtype"):  # a tensor, a NumPy or CuPy array or scalar
            array = backend.to_numpy(value.array if isinstance(value, Tensor) else value)
            if array.dtype.kind in "OV":
                raise TypeError(f"save: {where}/{name} is an array of dtype {array.dtype}, which load() could not "
                                "read back without pickle")
            arrays["/".join([*path, name])] = array
        else:
            _check_json(value, "/".join([*path, name]))
            plain[name] = value
    return plain


def _encodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


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


def load(path: str | os.PathLike, map_location: str | None = None, weights_only: bool | None = None) -> dict[str, Any]:
    """Read a file written by save(): the same nested dicts, with NumPy arrays as leaves (CuPy arrays with
    map_location="cuda"), as torch.load(path, map_location=..., weights_only=...). The file records no device, so
    map_location is where the arrays go: None, "cpu", "cuda" or an mg.device; a dict or a function (which remap
    the devices PyTorch's files record) is refused. weights_only: any value reads the same way, without pickle, which
    is what weights_only=True asks of PyTorch.

    Anything else, damaged or crafted, is a ValueError saying the file is not a readable checkpoint.
    """
    if map_location is not None and not (isinstance(map_location, str)
                                         and map_location.partition(":")[0] in backend.DEVICES):
        raise TypeError(f"load: map_location {map_location!r:.60} is not supported: a minigrad file records no devices "
                        "to remap; pass 'cpu' or 'cuda' (or an mg.device), or None for the host")
    device = None if map_location is None else backend.check_device(backend.device(map_location).type)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint at {path}")
    try:
        tree = _read(path)
    except Exception as err:  # whatever zipfile, NumPy or json raise on a damaged or crafted file
        raise ValueError(f"load: {path} is not a readable minigrad checkpoint ({type(err).__name__}: {err})") from None
    return tree if device in (None, "cpu") else _moved(tree, device)


def _moved(tree: dict[Any, Any], device: str) -> dict[Any, Any]:
    """The tree with every array on `device`."""
    return {k: _moved(v, device) if isinstance(v, dict) else backend.to_device(v, device) if backend.is_array(v)
            else v for k, v in tree.items()}


def _read(path: str) -> dict[str, Any]:
    _check_entries(path)
    with np.load(path, allow_pickle=False) as npz:
        tree = json.loads(str(npz[_JSON_KEY]))
        if not isinstance(tree, dict):
            raise ValueError(f"its {_JSON_KEY} entry is {type(tree).__name__}, not a JSON object")
        for name in npz.files:
            if name not in (_JSON_KEY, _INT_KEYS):
                _place(tree, name, npz[name])
        int_keys = json.loads(str(npz[_INT_KEYS])) if _INT_KEYS in npz.files else []
    for key_path in sorted(int_keys, key=len, reverse=True):  # the deepest first: their parents' keys are still strings
        _restore_int_key(tree, key_path)
    return tree


def _restore_int_key(tree: dict[str, Any], key_path: Any) -> None:
    """The key at `key_path` (strings) back to the int it was saved as."""
    if not isinstance(key_path, list) or not key_path or not all(isinstance(k, str) for k in key_path):
        raise ValueError(f"its {_INT_KEYS} entry holds {key_path!r}, not a path of keys")
    node = tree
    for key in key_path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    leaf = key_path[-1]
    if not isinstance(node, dict) or leaf not in node or leaf != str(_as_int(leaf)):
        raise ValueError(f"its {_INT_KEYS} entry names {'/'.join(key_path)!r}, which holds no int key")
    node[int(leaf)] = node.pop(leaf)


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


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
