"""mg.save / mg.load, as torch.save and torch.load's weights-only loading: any object of tensors, arrays and Python
values in one .npz file, without pickle: the tensors and arrays as numbered .npy entries, the rest as one JSON entry
whose objects are tags ({"tensor": "0"}, {"tuple": [...]}, {"dict": [[key, value], ...]}), and the format's version.
Writes to a path are atomic (a temporary file in the same folder as the file a symlink points to, flushed, given the
old file's mode, then renamed over it), so an interrupted save leaves the old file. Files of format 1 (minigrad 0.3)
still read.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import stat
import zipfile
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from minigrad.array import backend
from minigrad.tensor import Tensor

FORMAT_VERSION = 2  # 1: minigrad 0.3's nested dicts of arrays; 2: any object of tensors, arrays and Python values
_FORMAT_KEY = "__format__"
_JSON_KEY = "__json__"
_INT_KEYS = "__int_keys__"  # format 1: the paths of the keys that were ints (an optimizer's state by parameter number)


def save(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """Write `obj`, any nesting of tensors, arrays, NumPy scalars, numbers, strings, None, lists, tuples and dicts (keys
    None, bools, numbers or strings), to the path `f` atomically or into a binary file open for writing, as
    torch.save(obj, f): a symlink is written through (its target replaced, the link kept) and a file written over
    keeps its permissions; a new one gets those the user's umask gives. load() gives it back as it was, tensors as
    tensors (with requires_grad), arrays as arrays, tuples as tuples, a tensor saved twice as one. A module is refused
    (save its state_dict(), as PyTorch's weights-only load refuses the module itself), as is anything else load()
    could not give back without unpickling code, before anything is written."""
    if isinstance(obj, (str, os.PathLike)) and isinstance(f, dict):
        raise TypeError(f"save: the object comes first, then the path, as in torch.save(obj, f): "
                        f"mg.save(tree, {os.fspath(obj)!r}) (minigrad's save took the path first before)")
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save: f must be a path (str or os.PathLike) or a binary file open for writing, got "
                        f"{type(f).__name__}")
    arrays: dict[str, np.ndarray] = {}
    skeleton = _encode(obj, arrays, {}, "the object")
    arrays[_JSON_KEY] = np.array(json.dumps(skeleton))
    arrays[_FORMAT_KEY] = np.array(FORMAT_VERSION)
    if not isinstance(f, (str, os.PathLike)):  # an open file: written in place (only a path is replaced atomically)
        _write_entries(f, arrays)
        return
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


def _encode(obj: Any, arrays: dict[str, np.ndarray], seen: dict[int, Any], where: str) -> Any:
    """obj as JSON, its tensors and arrays moved into `arrays` as numbered entries; every JSON object is a tag:
    {"tensor": n}, {"array": n}, {"scalar": n}, {"tuple": [...]} or {"dict": [[key, value], ...]}."""
    if isinstance(obj, np.generic):  # before the numbers: np.float64 is a float, and would come back as one
        return _entry("scalar", np.asarray(obj), arrays, where)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if id(obj) in seen:  # the same tensor or array again (a tied weight): one entry, one object when loaded
        return seen[id(obj)]
    if isinstance(obj, Tensor):
        node = _entry("tensor", backend.to_numpy(obj.array), arrays, where)
        seen[id(obj)] = node = {**node, "requires_grad": True} if obj.requires_grad else node
        return node
    if backend.is_array(obj):
        seen[id(obj)] = node = _entry("array", backend.to_numpy(obj), arrays, where)
        return node
    if isinstance(obj, list):
        return [_encode(v, arrays, seen, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, arrays, seen, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, dict):
        for key in obj:
            if not (key is None or isinstance(key, (bool, int, float, str))):
                raise TypeError(f"save: {where} has the key {key!r:.40}, a {type(key).__name__}; keys are None, bools, "
                                "numbers or strings")
        return {"dict": [[key, _encode(v, arrays, seen, f"{where}[{key!r:.40}]")] for key, v in obj.items()]}
    if hasattr(obj, "state_dict") and hasattr(obj, "parameters"):
        raise TypeError(f"save: {where} is a {type(obj).__name__} module, which load() could not rebuild without "
                        "unpickling code; save its state_dict(): mg.save(model.state_dict(), f)")
    raise TypeError(f"save: {where} is a {type(obj).__name__}, which load() could not give back without unpickling "
                    "code; save tensors, arrays, numbers, strings, None, lists, tuples and dicts of them")


def _entry(kind: str, array: np.ndarray, arrays: dict[str, np.ndarray], where: str) -> dict[str, str]:
    if array.dtype.kind not in "biuf":
        raise TypeError(f"save: {where} is an array of dtype {array.dtype}, which load() could not read back without "
                        "pickle; save numbers (bool, integer or float)")
    name = str(len(arrays))
    arrays[name] = array
    return {kind: name}


def load(f: str | os.PathLike | BinaryIO, map_location: str | None = None, weights_only: bool | None = None) -> Any:
    """Read what save() wrote, from a path or a binary file open for reading, as torch.load(f, map_location=...,
    weights_only=...): the object as it was saved, its tensors and arrays on the host, or on map_location ("cpu",
    "cuda" or an mg.device; a dict or a function, which remap the devices PyTorch's files record, is refused: a
    minigrad file records none). weights_only: any value reads the same way, without pickle, which is what
    weights_only=True asks of PyTorch. A file of format 1 (minigrad 0.3: nested dicts, tensors saved as arrays)
    reads as it always did.

    Anything else, damaged or crafted, is a ValueError saying the file is not a readable checkpoint.
    """
    if map_location is not None and not (isinstance(map_location, str)
                                         and map_location.partition(":")[0] in backend.DEVICES):
        raise TypeError(f"load: map_location {map_location!r:.60} is not supported: a minigrad file records no devices "
                        "to remap; pass 'cpu' or 'cuda' (or an mg.device), or None for the host")
    device = "cpu" if map_location is None else backend.check_device(backend.device(map_location).type)
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", type(f).__name__)
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(name):
        raise FileNotFoundError(f"load: no checkpoint at {name}")
    try:
        entries = _entries(f)
        if _FORMAT_KEY not in entries:
            return _moved(_read_format_1(entries), device)
        version = entries.pop(_FORMAT_KEY)
        if version.shape != () or version.dtype.kind not in "iu" or not 2 <= int(version) <= FORMAT_VERSION:
            raise ValueError(f"its format is {version!r:.40}; this minigrad reads formats 1 to {FORMAT_VERSION} (a "
                             "newer minigrad wrote it?)")
        skeleton = json.loads(str(entries.pop(_JSON_KEY)))
        return _decode(skeleton, entries, device, {})
    except Exception as err:  # whatever zipfile, NumPy or json raise on a damaged or crafted file
        raise ValueError(f"load: {name} is not a readable minigrad checkpoint ({type(err).__name__}: {err})") from None


def _decode(node: Any, entries: dict[str, np.ndarray], device: str, made: dict[str, Any]) -> Any:
    """What _encode wrote, back: JSON values as they are, the tags as tensors, arrays, scalars, tuples and dicts."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, entries, device, made) for v in node]
    if not isinstance(node, dict) or not node:
        raise ValueError(f"it holds {node!r:.40} where a value was expected")
    kind = next(iter(node))
    if kind == "tuple" and len(node) == 1 and isinstance(node[kind], list):
        return tuple(_decode(v, entries, device, made) for v in node[kind])
    if kind == "dict" and len(node) == 1 and isinstance(node[kind], list):
        pairs = [pair for pair in node[kind] if isinstance(pair, list) and len(pair) == 2
                 and (pair[0] is None or isinstance(pair[0], (bool, int, float, str)))]
        if len(pairs) != len(node[kind]):
            raise ValueError("a dict of it holds something other than [key, value] pairs")
        return {key: _decode(v, entries, device, made) for key, v in pairs}
    name = node.get(kind)
    if kind not in ("tensor", "array", "scalar") or not isinstance(name, str) or name not in entries \
            or set(node) - {kind, "requires_grad"}:
        raise ValueError(f"it holds the tag {node!r:.60}, which names no entry")
    if name not in made:  # a tensor or array saved twice comes back as one object
        array = entries[name]
        if kind == "scalar":
            made[name] = array[()]
        elif kind == "array":
            made[name] = backend.to_device(array, device)
        else:
            made[name] = Tensor.leaf(array, requires_grad=node.get("requires_grad") is True, device=device, copy=False)
    return made[name]


def _moved(tree: dict[Any, Any], device: str) -> dict[Any, Any]:
    """The tree with every array on `device`."""
    return {k: _moved(v, device) if isinstance(v, dict) else backend.to_device(v, device) if backend.is_array(v)
            else v for k, v in tree.items()}


def _read_format_1(entries: dict[str, np.ndarray]) -> dict[str, Any]:
    """A file of minigrad 0.3: a JSON tree of dicts, its arrays at their paths ("model/wte.weight"), int keys noted."""
    tree = json.loads(str(entries[_JSON_KEY]))
    if not isinstance(tree, dict):
        raise ValueError(f"its {_JSON_KEY} entry is {type(tree).__name__}, not a JSON object")
    for name, array in entries.items():
        if name not in (_JSON_KEY, _INT_KEYS):
            _place(tree, name, array)
    int_keys = json.loads(str(entries[_INT_KEYS])) if _INT_KEYS in entries else []
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


def _entries(f: Any) -> dict[str, np.ndarray]:
    """Every entry of the archive, each an .npy array whose header agrees with the entry's size (so that a crafted
    header cannot make NumPy allocate more memory than the file holds), read without pickle, by name."""
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    entries = {}
    with zipfile.ZipFile(f) as archive:
        for info in archive.infolist():
            with archive.open(info) as entry:
                version = np.lib.format.read_magic(entry) if info.filename.endswith(".npy") else None
                if version not in readers:
                    raise ValueError(f"entry {info.filename!r} is not an array in .npy format 1.0 or 2.0")
                shape, _, dtype = readers[version](entry)
                if math.prod(shape) * dtype.itemsize != info.file_size - entry.tell():
                    raise ValueError(f"entry {info.filename!r} declares shape {shape} of {dtype} but holds "
                                     f"{info.file_size - entry.tell()} bytes")
            with archive.open(info) as entry:
                entries[info.filename.removesuffix(".npy")] = np.lib.format.read_array(entry, allow_pickle=False)
    if _JSON_KEY not in entries:
        raise ValueError(f"it has no {_JSON_KEY} entry")
    return entries


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


# ---- torch.serialization's allow-list, which a program calls before torch.load(weights_only=True) ----

def add_safe_globals(safe_globals: list[Any]) -> None:
    """Accepted and kept for nothing, as torch.serialization.add_safe_globals: mg.load unpickles nothing, so it has
    no globals to allow (a class of your own is refused by mg.save, whatever this list holds)."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals: expected a list of classes or functions, got {type(safe_globals).__name__}")


@contextlib.contextmanager
def safe_globals(safe_globals: list[Any]) -> Iterator[None]:
    """add_safe_globals for the duration of a with block, as torch.serialization.safe_globals."""
    add_safe_globals(safe_globals)
    yield
