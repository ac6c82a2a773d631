"""nn.ModuleDict, nn.Embedding(padding_idx=...), optim.clip_grad_value_, the walks over a model's modules and the
small layers (Tanh, Sigmoid, Flatten), as PyTorch's: names and order of the registered modules, the padding row that
starts at zero and never gets a gradient, gradients clamped in place.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")


# ---- ModuleDict ----

def test_module_dict_registers_its_modules_under_their_keys_in_order():
    heads = nn.ModuleDict({"b": nn.Linear(2, 3), "a": nn.Linear(2, 1, bias=False)})
    heads["norm"] = nn.LayerNorm(3)
    assert list(heads) == ["b", "a", "norm"] and list(heads.keys()) == ["b", "a", "norm"]
    assert len(heads) == 3 and "a" in heads and "c" not in heads
    assert [name for name, _ in heads.named_parameters()] == ["b.weight", "b.bias", "a.weight", "norm.weight",
                                                              "norm.bias"]
    t_heads = torch.nn.ModuleDict({"b": torch.nn.Linear(2, 3), "a": torch.nn.Linear(2, 1, bias=False)})
    t_heads["norm"] = torch.nn.LayerNorm(3)
    assert [name for name, _ in heads.named_parameters()] == [name for name, _ in t_heads.named_parameters()]
    replaced = nn.Linear(2, 2)
    heads["b"] = replaced  # replacing keeps its place
    assert list(heads) == ["b", "a", "norm"] and heads["b"] is replaced and dict(heads.items())["b"] is replaced


def test_module_dict_follows_train_eval_state_dict_and_removal():
    model = nn.Sequential(nn.ModuleDict([("drop", nn.Dropout(0.5)), ("proj", nn.Linear(2, 2))]))
    model.eval()
    assert not model[0]["drop"].training
    state = model.state_dict()
    assert sorted(state) == ["0.proj.bias", "0.proj.weight"]
    other = nn.Sequential(nn.ModuleDict({"drop": nn.Dropout(0.5), "proj": nn.Linear(2, 2)}))
    other.load_state_dict(state)
    np.testing.assert_array_equal(other[0]["proj"].weight.numpy(), model[0]["proj"].weight.numpy())
    removed = model[0].pop("proj")
    assert isinstance(removed, nn.Linear) and list(model.parameters()) == []
    model[0].update({"x": nn.Linear(1, 1)})
    del model[0]["x"]
    model[0].clear()
    assert len(model[0]) == 0


@pytest.mark.parametrize("key, value, error, message", [
    ("a.b", nn.ReLU(), KeyError, "without '.'"),
    ("", nn.ReLU(), KeyError, "non-empty string"),
    (3, nn.ReLU(), KeyError, "got 3"),
    ("a", np.zeros(2), TypeError, "expected a Module, got ndarray"),
    ("keys", nn.ReLU(), KeyError, "the key 'keys' is the name of an attribute"),  # torch: "attribute ... exists"
    ("training", nn.ReLU(), KeyError, "the key 'training' is the name of an attribute"),
])
def test_module_dict_refuses_bad_keys_and_values(key, value, error, message):
    with pytest.raises(error, match=message):
        nn.ModuleDict()[key] = value


# ---- Embedding(padding_idx) ----

@pytest.mark.parametrize("padding_idx", [2, -1])
def test_the_padding_row_starts_at_zero_and_gets_no_gradient(padding_idx):
    mg.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=padding_idx).to(mg.float64)
    row = padding_idx % 5
    assert emb.padding_idx == row and not emb.weight.numpy()[row].any() and emb.weight.numpy()[row - 1].all()
    t_emb = torch.nn.Embedding(5, 3, padding_idx=padding_idx).double()
    with torch.no_grad():
        t_emb.weight.copy_(torch.from_numpy(emb.weight.numpy()))
    ids = np.array([[row, 1, row], [0, row, 3]])
    dout = np.random.default_rng(0).standard_normal((2, 3, 3))
    out, t_out = emb(ids), t_emb(torch.from_numpy(ids))
    np.testing.assert_array_equal(out.numpy(), t_out.detach().numpy())
    out.backward(dout)
    t_out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(emb.weight.grad, t_emb.weight.grad.numpy(), rtol=1e-12)
    assert not emb.weight.grad[row].any() and emb.weight.grad[1].any()


def test_the_padding_row_stays_put_in_training():
    mg.manual_seed(0)
    emb = nn.Embedding(4, 2, padding_idx=0)
    opt = optim.SGD(emb.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (emb(np.array([0, 1, 0, 2])) ** 2).sum().backward()
        opt.step()
    assert not emb.weight.numpy()[0].any() and emb.weight.numpy()[1:3].any()


def test_f_embedding_takes_padding_idx_too():
    w = mg.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    F.embedding([1, 2, 1], w, padding_idx=-2).sum().backward()
    np.testing.assert_array_equal(w.grad, [[0, 0], [0, 0], [1, 1]])


@pytest.mark.parametrize("padding_idx", [5, -6, 1.0, True])
def test_a_padding_idx_outside_the_table_is_refused(padding_idx):
    with pytest.raises(ValueError, match=r"padding_idx must be an integer in \[-5, 4\] for 5 embeddings"):
        nn.Embedding(5, 2, padding_idx=padding_idx)


# ---- clip_grad_value_ ----

def test_clip_grad_value_clamps_each_element_in_place_as_torch():
    grads = [np.array([[-3.0, 0.5], [2.0, -0.1]]), np.array([1.5, -1.5, 0.2])]
    params = [nn.Parameter(np.zeros(g.shape)) for g in grads]
    t_params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, tp, g in zip(params, t_params, grads, strict=True):
        p.grad, tp.grad = mg.tensor(g), torch.from_numpy(g.copy())
    kept = params[0].grad
    assert optim.clip_grad_value_(params, 1.0) is None
    torch.nn.utils.clip_grad_value_(t_params, 1.0)
    assert params[0].grad is kept  # in place
    for p, tp in zip(params, t_params, strict=True):
        np.testing.assert_array_equal(p.grad, tp.grad.numpy())


def test_clip_grad_value_takes_one_tensor_and_skips_missing_gradients():
    p, q = nn.Parameter(np.zeros(3)), nn.Parameter(np.zeros(2))
    p.grad = mg.tensor(np.array([5.0, -5.0, 0.0]))
    optim.clip_grad_value_(p, 2)
    optim.clip_grad_value_([p, q], 2)  # q has no gradient
    np.testing.assert_array_equal(p.grad, [2.0, -2.0, 0.0])
    assert q.grad is None
    with pytest.raises(ValueError, match="clip_value must be a number >= 0, got -1"):
        optim.clip_grad_value_(p, -1)


# ---- walking the modules, and the small layers ----

def test_module_apply_and_modules_walk_every_layer_once():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), nn.Sequential(nn.Linear(2, 3), shared))
    assert [type(m).__name__ for m in model.modules()] == ["Sequential", "Linear", "ReLU", "Sequential", "Linear"]
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Linear", "Sequential", "Sequential"]  # children first, as torch
    t_model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(),
                                  torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(2, 2)))
    t_seen = []
    t_model.apply(lambda m: t_seen.append(type(m).__name__))
    assert seen == t_seen


def test_named_modules_and_children_are_torch_s():
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Sequential(nn.Linear(3, 3), nn.Sigmoid()), nn.Flatten(0))
    t_model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(),
                                  torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sigmoid()), torch.nn.Flatten(0))
    assert [(n, type(m).__name__) for n, m in model.named_modules()] == \
        [(n, type(m).__name__) for n, m in t_model.named_modules()]
    assert [type(m).__name__ for m in model.children()] == [type(m).__name__ for m in t_model.children()]


def test_the_small_layers_compute_what_torch_s_do():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for layer, t_layer in [(nn.Tanh(), torch.nn.Tanh()), (nn.Sigmoid(), torch.nn.Sigmoid()),
                           (nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 1), torch.nn.Flatten(0, 1))]:
        out, t_out = layer(mg.tensor(x)), t_layer(torch.from_numpy(x))
        assert out.shape == tuple(t_out.shape)
        np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-12)


# ---- a module under two names, containers sliced and grown, load_state_dict(strict=False) ----

def shared_twice(lib):
    """A model holding one Linear under two names, as a tied layer is: (model, torch-or-minigrad nn)."""
    model = lib.nn.Module() if lib is torch else nn.Module()
    layer = lib.nn.Linear(2, 2) if lib is torch else nn.Linear(2, 2)
    model.first, model.again = layer, layer
    model.last = lib.nn.ReLU() if lib is torch else nn.ReLU()
    return model


def test_a_module_under_two_names_is_one_child_and_applied_once_as_torch():
    model, t_model = shared_twice(mg), shared_twice(torch)
    assert [n for n, _ in model.named_children()] == [n for n, _ in t_model.named_children()] == ["first", "last"]
    assert len(list(model.children())) == len(list(t_model.children())) == 2
    assert len(list(model.modules())) == len(list(t_model.modules())) == 3
    seen, t_seen = [], []
    model.apply(lambda m: seen.append(type(m).__name__))
    t_model.apply(lambda m: t_seen.append(type(m).__name__))
    assert seen == t_seen == ["Linear", "ReLU", "Module"]


def test_slices_of_sequential_and_module_list_are_containers_of_their_class_as_torch():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    t_layers = [torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)]
    seq, t_seq = nn.Sequential(*layers), torch.nn.Sequential(*t_layers)
    for s in [slice(None, -1), slice(1, None), slice(None, None, 2)]:
        part, t_part = seq[s], t_seq[s]
        assert type(part) is nn.Sequential and list(part.state_dict()) == list(t_part.state_dict())
        assert list(part) == layers[s]  # the modules themselves, not copies
        listed, t_listed = nn.ModuleList(layers)[s], torch.nn.ModuleList(t_layers)[s]
        assert type(listed) is nn.ModuleList and list(listed.state_dict()) == list(t_listed.state_dict())
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(seq[:-1](mg.tensor(x)).numpy(), layers[1](layers[0](mg.tensor(x))).numpy())
    assert seq[-1] is layers[-1] and nn.ModuleList(layers)[1] is layers[1]  # an index is still the module


def test_module_list_and_sequential_grow_and_return_as_torch():
    a, b, c = nn.Linear(1, 1), nn.ReLU(), nn.Tanh()
    listed = nn.ModuleList([a])
    assert listed.append(b) is listed and listed.extend([c]) is listed  # torch's return self, so calls chain
    t_listed = torch.nn.ModuleList([torch.nn.Linear(1, 1)])
    assert t_listed.append(torch.nn.ReLU()) is t_listed and t_listed.extend([torch.nn.Tanh()]) is t_listed
    assert listed.insert(1, nn.GELU()) is None and t_listed.insert(1, torch.nn.GELU()) is None
    assert [type(m).__name__ for m in listed] == [type(m).__name__ for m in t_listed] == \
        ["Linear", "GELU", "ReLU", "Tanh"]
    assert list(listed._modules) == list(t_listed._modules) == ["0", "1", "2", "3"]
    assert listed[0] is a and listed[2] is b and listed[3] is c
    seq = nn.Sequential(a)
    assert seq.append(b) is seq and seq.insert(0, c) is seq and seq.extend([nn.GELU()]) is seq
    assert [type(m).__name__ for m in seq] == ["Tanh", "Linear", "ReLU", "GELU"]


def mlp(lib, seed):
    if lib is torch:
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)).double()
    mg.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)).to(mg.float64)


def test_load_state_dict_strict_false_loads_what_matches_and_returns_the_keys_as_torch():
    source = mlp(mg, 1).state_dict()
    state = {k: v.copy() for k, v in source.items() if k != "2.bias"} | {"head.weight": np.zeros((1, 3))}
    model, t_model = mlp(mg, 2), mlp(torch, 2)
    bias_before = model[2].bias.numpy()
    result = model.load_state_dict(state, strict=False)
    t_result = t_model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    assert result == t_result == (["2.bias"], ["head.weight"])
    assert (result.missing_keys, result.unexpected_keys) == (t_result.missing_keys, t_result.unexpected_keys)
    for name, value in model.state_dict().items():  # what matched is loaded, the rest left as it was
        np.testing.assert_array_equal(value, state[name] if name in state else bias_before)
    full = model.load_state_dict(source)  # strict: returns the empty lists, as torch's
    assert full == t_model.load_state_dict({k: torch.from_numpy(v) for k, v in source.items()}) == ([], [])
    assert repr(full) == "<All keys matched successfully>"


def test_load_state_dict_strict_false_still_refuses_a_wrong_shape_and_leaves_the_model():
    model = mlp(mg, 3)
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"wrong shapes \(0.weight: saved \(2, 2\), model \(3, 2\)\)"):
        model.load_state_dict({"0.weight": np.zeros((2, 2)), "2.bias": np.ones(1)}, strict=False)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    with pytest.raises(RuntimeError, match="size mismatch"):  # torch refuses too
        mlp(torch, 3).load_state_dict({"0.weight": torch.zeros(2, 2)}, strict=False)
