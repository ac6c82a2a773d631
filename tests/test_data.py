"""minigrad.utils.data against torch.utils.data: the batches a DataLoader gives (shapes, dtypes, order, lengths,
drop_last, collate_fn), default_collate's rules, and the samplers' orders, shuffled ones seeded by a Generator.
"""

from __future__ import annotations

import numpy as np
import pytest
from minigrad.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset, default_collate

import minigrad as mg

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these cases compare with it")
tdata = torch.utils.data


def described(batch):
    """A batch as nested plain values, the same for minigrad's and torch's: (shape, dtype, values) per tensor."""
    if isinstance(batch, (mg.Tensor, torch.Tensor)):
        return tuple(batch.shape), str(batch.dtype).removeprefix("torch."), batch.tolist()
    if isinstance(batch, dict):
        return {k: described(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch).__name__, [described(b) for b in batch]
    return batch


class Squares(Dataset):
    def __init__(self, n, make):
        self.n, self.make = n, make

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": self.make([float(i), float(i * i)]), "y": i, "w": 0.5 * i, "name": f"item{i}", "ok": i % 2 == 0}


@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (3, False), (3, True), (10, False), (4, True)])
def test_sequential_batches_as_torch(batch_size, drop_last):
    x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10) % 3
    mine = DataLoader(TensorDataset(mg.tensor(x), mg.tensor(y)), batch_size=batch_size, drop_last=drop_last)
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size,
                              drop_last=drop_last)
    assert len(mine) == len(theirs)
    assert [described(b) for b in mine] == [described(b) for b in theirs]


def test_default_collate_of_dicts_numbers_strings_and_bools_as_torch():
    mine = list(DataLoader(Squares(5, mg.tensor), batch_size=2))
    theirs = list(tdata.DataLoader(Squares(5, torch.tensor), batch_size=2))
    assert [described(b) for b in mine] == [described(b) for b in theirs]
    items = [(np.ones(2, dtype=np.float32), [1, 2.5]), (np.zeros(2, dtype=np.float32), [3, 4.5])]
    assert described(default_collate(items)) == described(tdata.default_collate(items))
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int64", "int16", "uint8", "bool"])
def test_default_collate_keeps_a_numpy_scalar_s_dtype_as_torch(dtype):
    values = np.array([1.5, 0.0, -2.0]).astype(dtype)
    items = [(value, {"x": value}) for value in values]  # np.float32 etc., bare and inside a dict
    assert described(default_collate(items)) == described(tdata.default_collate(items))
    assert default_collate(list(values)).dtype == values.dtype


def test_a_shuffled_loader_of_an_empty_dataset_is_refused_when_made_as_torch():
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        tdata.DataLoader([], shuffle=True)
    with pytest.raises(ValueError, match=r"num_samples should be a positive integer, got 0 \(the dataset is empty\)"):
        DataLoader([], shuffle=True)
    assert list(DataLoader([])) == list(tdata.DataLoader([])) == []  # in order, an empty dataset gives no batch


def test_collate_fn_and_no_batching():
    data = TensorDataset(mg.arange(6))
    assert [b for b in DataLoader(data, batch_size=4, collate_fn=lambda items: len(items))] == [4, 2]
    unbatched = list(DataLoader(data, batch_size=None))
    theirs = list(tdata.DataLoader(tdata.TensorDataset(torch.arange(6)), batch_size=None))
    assert [described(b) for b in unbatched] == [described(b) for b in theirs]
    items = [(np.ones(2), {"a": (1, "s")})]
    assert described(list(DataLoader(items, batch_size=None))) == described(list(tdata.DataLoader(items,
                                                                                                  batch_size=None)))


def test_shuffle_is_a_permutation_each_epoch_and_a_generator_repeats_it():
    data = TensorDataset(mg.arange(10))
    loader = DataLoader(data, batch_size=3, shuffle=True, generator=mg.Generator().manual_seed(1))
    epochs = [[v for (b,) in loader for v in b.tolist()] for _ in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs) and epochs[0] != epochs[1]
    again = DataLoader(data, batch_size=3, shuffle=True, generator=mg.Generator().manual_seed(1))
    assert [v for (b,) in again for v in b.tolist()] == epochs[0]
    mg.manual_seed(3)  # without a generator: the global stream
    first = [v for (b,) in DataLoader(data, batch_size=4, shuffle=True) for v in b.tolist()]
    mg.manual_seed(3)
    assert [v for (b,) in DataLoader(data, batch_size=4, shuffle=True) for v in b.tolist()] == first
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(data, shuffle=True, sampler=SequentialSampler(data))
    with pytest.raises(ValueError):
        tdata.DataLoader(tdata.TensorDataset(torch.arange(3)), shuffle=True, sampler=[0, 1, 2])


def test_samplers_as_torch():
    data = list(range(7))
    assert list(SequentialSampler(data)) == list(tdata.SequentialSampler(data))
    for kwargs in ({}, {"num_samples": 16}, {"num_samples": 3}, {"replacement": True, "num_samples": 50}):
        mine, theirs = RandomSampler(data, **kwargs), tdata.RandomSampler(data, **kwargs)
        drawn = list(mine)
        assert len(mine) == len(theirs) == len(drawn) == len(list(theirs))
        assert set(drawn) <= set(data) and all(isinstance(i, int) for i in drawn)
        if not kwargs.get("replacement"):  # each whole pass is a permutation
            assert all(sorted(drawn[k:k + 7]) == data for k in range(0, len(drawn) - len(drawn) % 7, 7))
            assert len(set(drawn[len(drawn) - len(drawn) % 7:])) == len(drawn) % 7
    with pytest.raises(ValueError, match="positive integer"):
        RandomSampler(data, num_samples=0)
    assert len(DataLoader(TensorDataset(mg.arange(7)), batch_size=2, sampler=RandomSampler(data))) == 4


def test_tensor_dataset_refuses_tensors_of_different_lengths():
    with pytest.raises(AssertionError):
        tdata.TensorDataset(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match=r"size mismatch between tensors: shapes \[\(3,\), \(4,\)\]"):
        TensorDataset(mg.zeros(3), mg.zeros(4))


def test_random_sampler_with_replacement_draws_as_it_goes_as_torch():
    """makemore's infinite loader: RandomSampler(replacement=True, num_samples=int(1e10)) yields its first batches
    at once (drawn 32 at a time, as PyTorch's), instead of drawing 1e10 indices first."""
    data = list(range(5))
    mine = iter(DataLoader(TensorDataset(mg.arange(5)), batch_size=4,
                           sampler=RandomSampler(data, replacement=True, num_samples=int(1e10))))
    theirs = iter(tdata.DataLoader(tdata.TensorDataset(torch.arange(5)), batch_size=4,
                                   sampler=tdata.RandomSampler(data, replacement=True, num_samples=int(1e10))))
    for _ in range(3):
        (batch,), (expected,) = next(mine), next(theirs)
        assert batch.shape == tuple(expected.shape) == (4,) and set(batch.tolist()) <= set(data)
