"""Dimension and shape arguments, read as PyTorch reads them.

`dim=` and `keepdim=` are the names; NumPy's `axis=` and `keepdims=` are accepted too, as PyTorch's own
reductions accept them (`torch.sum(x, axis=0, keepdims=True)`), through one decorator, `numpy_aliases`.
`as_axes` and `as_axis` turn dims into the axis indices an array method takes, `int_tuple` a shape
given as f(2, 3) or f((2, 3)), and `broadcasts_to` says whether a mask fits its input.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Fn = TypeVar("Fn", bound=Callable[..., Any])
Dims = int | Sequence[int] | None

_ALIASES = {"axis": ("dim", "dims"), "keepdims": ("keepdim",)}  # NumPy's name -> PyTorch's, whichever fn has


def numpy_aliases(fn: Fn) -> Fn:
    """fn, which takes PyTorch's dim= (or dims=) and keepdim=, also taking NumPy's axis= and keepdims=.
    Giving both spellings of one argument is a TypeError."""
    signature = inspect.signature(fn)
    renames = {numpy_name: name for numpy_name, names in _ALIASES.items()
               for name in names if name in signature.parameters}

    @functools.wraps(fn)
    def with_aliases(*args: Any, **kwargs: Any) -> Any:
        for numpy_name, name in renames.items():
            if numpy_name in kwargs:
                if name in kwargs or name in signature.bind_partial(*args).arguments:
                    raise TypeError(f"{fn.__name__}: got both {name} and {numpy_name} (NumPy's name for "
                                    f"{name}); give one")
                kwargs[name] = kwargs.pop(numpy_name)
        return fn(*args, **kwargs)

    return with_aliases  # type: ignore[return-value]


def as_axes(op: str, dim: Dims, shape: tuple[int, ...], *, one: bool = False) -> tuple[int, ...]:
    """`dim`, None (every axis), an int or a sequence of ints (negative ones count from the end), as a
    sorted tuple of axes of a tensor of `shape`; one=True: one int only. A 0-d tensor takes dim 0 or -1,
    as in PyTorch, meaning its one value: no axis. Naming an axis twice is refused."""
    if dim is None and not one:
        return tuple(range(len(shape)))
    dims = dim if isinstance(dim, (tuple, list)) and not one else (dim,)
    found = tuple(_in_range(op, d, len(shape) or 1, shape) for d in dims)  # 0-d: dim 0 or -1
    if len(set(found)) != len(found):
        raise ValueError(f"{op}: dims {found} name an axis twice")
    return tuple(sorted(found)) if shape else ()


def as_axis(op: str, dim: int, shape: tuple[int, ...], *, new: bool = False) -> int:
    """One int dim (negative counts from the end) as an axis of a tensor of `shape`, which has at least
    one; new=True: where a new axis goes (stack, unsqueeze), in [-ndim - 1, ndim]."""
    return _in_range(op, dim, len(shape) + new, shape)


def _in_range(op: str, dim: int, n: int, shape: tuple[int, ...]) -> int:
    if not hasattr(dim, "__index__") or isinstance(dim, bool):  # an int: not 1.0, "0", None or True
        raise TypeError(f"{op}: dim must be one int, got {dim!r}")
    if not -n <= dim < n:
        raise ValueError(f"{op}: dim {dim!r} is out of range [{-n}, {n - 1}] for a tensor of shape {shape}")
    return dim % n


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of `shape` broadcasts to `target` unchanged (a mask to its input's shape)."""
    lead = len(target) - len(shape)
    return lead >= 0 and all(n in (1, target[lead + i]) for i, n in enumerate(shape))


def int_tuple(op: str, args: tuple) -> tuple[int, ...]:
    """f(2, 3) and f((2, 3)) both give (2, 3): shapes (zeros, reshape) and axes (transpose), integers."""
    values = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    if not all(hasattr(v, "__index__") for v in values):  # an int, not 2.0, "2" or None
        raise TypeError(f"{op}: expected integers, got {values}")
    return values
