"""torch.utils.data as a training loop uses it: Dataset, TensorDataset, the samplers (SequentialSampler, RandomSampler)
and DataLoader, which batches a dataset's items with default_collate (tensors and numbers stacked, tuples, lists and
dicts collated field by field, as PyTorch's). Everything is loaded in the main process: num_workers and pin_memory
are accepted and change nothing but the speed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from minigrad.array.backend import Generator
from minigrad.ops.creation import randint, randperm, tensor
from minigrad.ops.shapes import stack
from minigrad.tensor import Tensor

__all__ = ["DataLoader", "Dataset", "RandomSampler", "Sampler", "SequentialSampler", "TensorDataset",
           "default_collate", "default_convert"]


class Dataset:
    """A map-style dataset: subclasses give `__getitem__(index)` and `__len__()`, as torch.utils.data.Dataset."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")


class TensorDataset(Dataset):
    """Item i is (t[i] for each tensor): the tensors must share their first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if any(t.shape[:1] != tensors[0].shape[:1] for t in tensors):
            raise ValueError(f"TensorDataset: size mismatch between tensors: shapes {[t.shape for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Sampler:
    """The order in which a DataLoader reads a dataset's indices: an iterable of ints with a length."""

    def __init__(self, data_source: Any = None) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __len__(self) -> int:
        return len(self.data_source)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))


class RandomSampler(Sampler):
    """A random order of the indices, a new one each pass (mg.randperm; with replacement, num_samples uniform draws),
    from `generator` if given, else from the global stream of mg.manual_seed."""

    def __init__(self, data_source: Any, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        super().__init__(data_source)
        self.replacement, self.requested, self.generator = replacement, num_samples, generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:  # an empty dataset too, as PyTorch's
            raise ValueError(f"RandomSampler: num_samples should be a positive integer, got {self.num_samples!r}"
                             + (" (the dataset is empty)" if num_samples is None else ""))

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self.requested is None else self.requested

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.replacement:  # drawn 32 at a time, as PyTorch's: makemore asks for 1e10 samples, read a few at a time
            for start in range(0, self.num_samples, 32):
                yield from randint(0, n, (min(32, self.num_samples - start),), generator=self.generator).tolist()
            return
        for _ in range(self.num_samples // n):  # num_samples beyond n: whole permutations, then part of one
            yield from randperm(n, generator=self.generator).tolist()
        yield from randperm(n, generator=self.generator).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


def default_collate(batch: Sequence[Any]) -> Any:
    """A list of items as one batch, as PyTorch's default_collate: tensors (and NumPy arrays) stacked along a new first
    dim, NumPy scalars in their dtype (float32 stays float32), Python ints as int64 and floats as float64, bools as
    bool; tuples, lists and dicts field by field (a tuple's
    fields as a list, as PyTorch's; a namedtuple stays one); strings kept as a list."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray) and first.dtype.kind in "biuf":
        return stack([tensor(a) for a in batch])
    if isinstance(first, np.generic) and first.dtype.kind in "biuf":
        return tensor(list(batch), dtype=first.dtype)
    if isinstance(first, bool):
        return tensor(list(batch))
    if isinstance(first, numbers.Integral):
        return tensor(list(batch), dtype="int64")
    if isinstance(first, numbers.Real):
        return tensor(list(batch), dtype="float64")
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {key: default_collate([item[key] for item in batch]) for key in first}
    if isinstance(first, Sequence):
        if any(len(item) != len(first) for item in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        fields = [default_collate(list(field)) for field in zip(*batch, strict=True)]
        return type(first)(*fields) if hasattr(first, "_fields") else fields  # a namedtuple kept; a tuple: a list
    raise TypeError(f"default_collate: a batch must hold tensors, arrays, numbers, strings, or tuples, lists or dicts "
                    f"of them; got {type(first).__name__}")


def default_convert(item: Any) -> Any:
    """One item as a DataLoader with batch_size=None gives it, as PyTorch's default_convert: NumPy arrays as tensors,
    tuples and lists as lists (a namedtuple stays one), dicts key by key, anything else unchanged."""
    if isinstance(item, np.ndarray) and item.dtype.kind in "biuf":
        return tensor(item)
    if isinstance(item, Mapping):
        return {key: default_convert(value) for key, value in item.items()}
    if isinstance(item, Sequence) and not isinstance(item, (str, bytes)):
        fields = [default_convert(field) for field in item]
        return type(item)(*fields) if hasattr(item, "_fields") else fields
    return item


class DataLoader:
    """Batches of a dataset, as torch.utils.data.DataLoader: `batch_size` items at a time (None: one item at a time,
    through default_convert), in order or shuffled (a RandomSampler, with `generator`), the last short batch dropped
    with drop_last=True, each batch made by `collate_fn` (default_collate)."""

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterator[int] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, generator: Generator | None = None) -> None:
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size should be a positive integer or None, got {batch_size!r}")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.dataset, self.batch_size, self.sampler, self.drop_last = dataset, batch_size, sampler, drop_last
        self.collate_fn = collate_fn if collate_fn is not None else default_collate if batch_size is not None \
            else default_convert
        self.num_workers, self.pin_memory, self.generator = num_workers, pin_memory, generator

    def __iter__(self) -> Iterator[Any]:
        if self.batch_size is None:
            yield from (self.collate_fn(self.dataset[i]) for i in self.sampler)
            return
        batch = []
        for index in self.sampler:
            batch.append(self.dataset[index])
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self.batch_size is None:
            return len(self.sampler)
        rounding = math.floor if self.drop_last else math.ceil
        return rounding(len(self.sampler) / self.batch_size)
