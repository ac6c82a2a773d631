"""Tests for minigrad.nn and minigrad.serialization: parameter registration and names, modes, dtype
conversion, state dicts (and their refusals), seeded and GPT-2-style initialisation, and mg.save /
mg.load (round trip, atomic writes, corrupted and missing files).
"""

import math
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from models import GPT, GPTConfig

SMALL = dict(vocab_size=11, block_size=5, n_layer=2, n_head=2, n_embd=8)
BLOCK = ["ln_1.weight", "ln_1.bias", "attn.q_proj.weight", "attn.q_proj.bias", "attn.k_proj.weight", "attn.k_proj.bias",
         "attn.v_proj.weight", "attn.v_proj.bias", "attn.proj.weight", "attn.proj.bias",
         "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"]


def small_gpt(seed=0, **overrides):
    mg.manual_seed(seed)
    return GPT(GPTConfig(**{**SMALL, **overrides}))


def params_of(model):
    return {name: p.numpy().copy() for name, p in model.named_parameters()}


def assert_same_params(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# ---- registration and names ----

def test_named_parameters_gives_dotted_names_in_order():
    names = [name for name, _ in small_gpt().named_parameters()]
    expected = ["wte.weight", "wpe.weight"] + [f"blocks.{i}.{n}" for i in range(2) for n in BLOCK] + \
               ["ln_f.weight", "ln_f.bias"]
    assert names == expected  # no lm_head.weight: the head is wte.weight itself


def test_parameters_and_num_parameters():
    model = small_gpt()
    V, T, C, L = 11, 5, 8, 2
    per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
    assert model.num_parameters() == V * C + T * C + L * per_block + 2 * C
    params = list(model.parameters())
    assert [id(p) for p in params] == [id(p) for _, p in model.named_parameters()]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)


def test_without_bias_no_bias_parameters_are_registered():
    model = small_gpt(bias=False)
    assert not [name for name, _ in model.named_parameters() if name.endswith("bias")]
    assert model.blocks[0].attn.q_proj.bias is None


def test_shared_parameter_is_listed_once_and_reassignment_replaces():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight

    model = Tied()
    assert [name for name, _ in model.named_parameters()] == ["a.weight", "a.bias", "b.bias"]
    assert model.num_parameters() == 9 + 3 + 3
    model.a = nn.Dropout(0.1)  # a Module replaced by one without parameters
    assert sorted(name for name, _ in model.named_parameters()) == ["b.bias", "b.weight"]


def test_assigning_before_super_init_is_a_clear_error():
    class Forgetful(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))

    with pytest.raises(AttributeError, match="super\\(\\).__init__\\(\\)"):
        Forgetful()


def test_module_containers():
    seq = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.Linear(6, 2))
    assert len(seq) == 3 and isinstance(seq[1], nn.LayerNorm)
    assert [name for name, _ in seq.named_parameters()][:2] == ["0.weight", "0.bias"]
    x = mg.randn(5, 4)
    np.testing.assert_array_equal(seq(x).numpy(), seq[2](seq[1](seq[0](x))).numpy())


def test_zero_grad():
    model = small_gpt()
    model(np.zeros((1, 3), dtype=np.int64), np.ones((1, 3), dtype=np.int64))[1].backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# ---- modes ----

def test_train_and_eval_propagate_and_switch_dropout():
    model = small_gpt(dropout=0.5)
    modules = [model.drop, model.blocks[1].attn.attn_dropout, model.blocks[0].mlp.dropout, model.ln_f]
    assert model.eval() is model
    assert not model.training and not any(m.training for m in modules)
    idx = np.array([[1, 2, 3, 4]])
    np.testing.assert_array_equal(model(idx)[0].numpy(), model(idx)[0].numpy())  # eval: no randomness
    model.train()
    assert model.training and all(m.training for m in modules)
    assert not np.array_equal(model(idx)[0].numpy(), model(idx)[0].numpy())  # train: fresh masks each call


def test_dropout_layer_only_in_training():
    drop = nn.Dropout(0.5)
    x = mg.ones(1000)
    y = drop(x).numpy()
    assert set(np.unique(y)) == {0.0, 2.0}  # kept values are scaled by 1 / (1 - p)
    assert 400 < (y == 0).sum() < 600
    assert drop.eval()(x) is x
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout(1.5)


# ---- dtype conversion ----

def test_to_float64_converts_in_place():
    """Parameters and their gradients are converted together (as PyTorch's Module.to): the gradients were dropped."""
    model = small_gpt()
    before = params_of(model)
    objects = [id(p) for p in model.parameters()]
    model(np.array([[1, 2]]), np.array([[2, 3]]))[1].backward()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    assert model.to(mg.float64) is model
    assert [id(p) for p in model.parameters()] == objects  # the same Parameters: optimizers keep working
    for name, p in model.named_parameters():
        assert p.dtype == mg.float64 and p.requires_grad and p.grad.dtype == np.float64, name
        np.testing.assert_array_equal(p.numpy(), before[name].astype(np.float64))
        np.testing.assert_array_equal(p.grad, grads[name].astype(np.float64))
    logits, loss = model(np.array([[1, 2]]), np.array([[2, 3]]))
    assert logits.dtype == mg.float64 and loss.dtype == mg.float64


def test_to_the_device_a_model_is_on_keeps_its_gradients_for_the_next_step():
    """model.to("cpu") on the CPU dropped every .grad: the next optimizer step did nothing (torch keeps them)."""
    model = small_gpt()
    model(np.array([[1, 2]]), np.array([[2, 3]]))[1].backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    versions = {name: p._version for name, p in model.named_parameters()}
    before = params_of(model)
    opt = optim.SGD(model.parameters(), lr=0.5)
    model.to("cpu").to(mg.float32)  # where it is already: nothing moves
    for name, p in model.named_parameters():
        assert p.grad is grads[name] and p._version == versions[name], name
    opt.step()
    moved = {name: not np.array_equal(p.numpy(), before[name]) for name, p in model.named_parameters()}
    # k_proj's bias shifts a query's every score alike, which softmax ignores: its gradient is 0 but for rounding
    assert all(m for name, m in moved.items() if not name.endswith("attn.k_proj.bias")), moved


# ---- state dicts ----

def test_state_dict_round_trips_exactly():
    source, target = small_gpt(seed=1), small_gpt(seed=2)
    assert not np.array_equal(source.wte.weight.numpy(), target.wte.weight.numpy())
    state = source.state_dict()
    assert list(state) == [name for name, _ in source.named_parameters()]
    target.load_state_dict(state)
    assert_same_params(params_of(target), params_of(source))
    idx = np.array([[3, 1, 4, 1, 5]])
    np.testing.assert_array_equal(target(idx)[0].numpy(), source(idx)[0].numpy())
    state["wte.weight"][0, 0] += 1.0  # the model holds its own copy
    assert target.wte.weight.numpy()[0, 0] != state["wte.weight"][0, 0]


def test_load_state_dict_keeps_the_models_dtype():
    model = small_gpt().to(mg.float64)
    model.load_state_dict(small_gpt(seed=3).state_dict())  # float32 arrays
    assert all(p.dtype == mg.float64 for p in model.parameters())


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("blocks.1.mlp.fc.bias"), "missing keys \\['blocks.1.mlp.fc.bias'\\]"),
    (lambda s: s.update({"lm_head.weight": s["wte.weight"]}), "unexpected keys \\['lm_head.weight'\\]"),
    (lambda s: s.update({"wpe.weight": np.zeros((6, 8), np.float32)}),
     "wrong shapes \\(wpe.weight: saved \\(6, 8\\), model \\(5, 8\\)\\)"),
])
def test_load_state_dict_refuses_and_leaves_the_model_untouched(change, message):
    model = small_gpt(seed=1)
    before = params_of(model)
    state = {name: a + 1 for name, a in small_gpt(seed=2).state_dict().items()}  # every other key is fine
    change(state)
    with pytest.raises(ValueError, match=message):
        model.load_state_dict(state)
    assert_same_params(params_of(model), before)


def test_load_state_dict_names_every_problem_at_once():
    model = small_gpt()
    state = model.state_dict()
    del state["ln_f.bias"]
    state["extra"] = np.zeros(1)
    state["wte.weight"] = np.zeros((3, 8))
    with pytest.raises(ValueError) as err:
        model.load_state_dict(state)
    assert "ln_f.bias" in str(err.value) and "extra" in str(err.value) and "wte.weight" in str(err.value)


# ---- initialisation ----

def test_construction_is_reproducible_under_manual_seed():
    assert_same_params(params_of(small_gpt(seed=5)), params_of(small_gpt(seed=5)))
    assert not np.array_equal(small_gpt(seed=5).wte.weight.numpy(), small_gpt(seed=6).wte.weight.numpy())


def test_gpt2_initialisation_statistics():
    n_layer = 4
    model = small_gpt(vocab_size=64, block_size=64, n_layer=n_layer, n_head=4, n_embd=64)
    residual_std = 0.02 / math.sqrt(2 * n_layer)
    matrices = 0
    for name, p in model.named_parameters():
        w = p.numpy()
        if name.endswith(".proj.weight"):  # attention and MLP output projections write into the residual stream
            assert w.std() == pytest.approx(residual_std, rel=0.05), name
            assert abs(w.mean()) < 3 * residual_std / math.sqrt(w.size), name
            matrices += 1
        elif p.ndim == 2:  # wte, wpe, q_proj, k_proj, v_proj, fc
            assert w.std() == pytest.approx(0.02, rel=0.05), name
            assert abs(w.mean()) < 3 * 0.02 / math.sqrt(w.size), name
            matrices += 1
        elif name.endswith("bias"):
            assert (w == 0).all(), name
        else:  # LayerNorm weights
            assert name.split(".")[-2].startswith("ln") and (w == 1).all(), name
    assert matrices == 2 + 6 * n_layer


# ---- mg.save / mg.load ----

def test_save_and_load_round_trip(tmp_path):
    model = small_gpt()
    tree = {
        "model": model.state_dict(),
        "nested": {"deeper": {"ints": np.arange(6, dtype=np.int64).reshape(2, 3), "scalar": np.float64(2.5)},
                   "empty": {}},
        "tensor": mg.tensor([[1.0, 2.0]], dtype=mg.float64),
        "config": {"name": "tiny", "lr": 3e-4, "steps": 10, "flag": True, "nothing": None, "sizes": [1, 2, 3]},
    }
    path = tmp_path / "checkpoint.npz"
    mg.save(tree, path)
    loaded = mg.load(path)
    assert set(loaded) == set(tree)
    assert_same_params(loaded["model"], {k: np.asarray(v) for k, v in tree["model"].items()})
    ints = loaded["nested"]["deeper"]["ints"]
    assert ints.dtype == np.int64 and ints.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert loaded["nested"]["deeper"]["scalar"] == 2.5 and loaded["nested"]["empty"] == {}
    assert isinstance(loaded["tensor"], mg.Tensor) and loaded["tensor"].tolist() == [[1.0, 2.0]]
    assert loaded["config"] == tree["config"]
    fresh = small_gpt(seed=9)
    fresh.load_state_dict(loaded["model"])
    assert_same_params(params_of(fresh), params_of(model))


def test_save_takes_the_object_first_and_refuses_the_old_order_a_non_file_and_a_module(tmp_path):
    """torch.save(obj, f)'s order; the old path-first call is refused with the new one spelled out."""
    path = tmp_path / "w.npz"
    with pytest.raises(TypeError, match=r"the object comes first, then the path, as in torch.save\(obj, f\): "
                                        r"mg.save\(tree, '.*w.npz'\)"):
        mg.save(path, {"w": np.zeros(2)})
    with pytest.raises(TypeError, match="f must be a path .* or a binary file open for writing, got int"):
        mg.save({"w": np.zeros(2)}, 3)
    with pytest.raises(TypeError, match=r"the object is a Linear module.*save its state_dict\(\)"):
        mg.save(nn.Linear(2, 2), path)
    assert not path.exists()


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.npz"
    mg.save({"w": np.arange(4.0), "step": 1}, path)

    def failing_write(entry, array, **options):
        entry.write(b"\x93NUMPY half an array")  # a partial write, then the disk fills up
        raise OSError("No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", failing_write)
    with pytest.raises(OSError, match="No space left"):
        mg.save({"w": np.zeros(4), "step": 2}, path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["checkpoint.npz"]  # no temporary file left behind
    loaded = mg.load(path)
    assert loaded["step"] == 1 and loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "foreign npz", "npy"])
def test_load_refuses_a_damaged_file_with_a_clear_error(tmp_path, damage):
    path = tmp_path / "checkpoint.npz"
    mg.save(small_gpt().state_dict(), path)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a checkpoint at all" * 10)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "foreign npz":  # a valid .npz that mg.save did not write
        np.savez(path, w=np.zeros(3))
    else:  # one array saved with np.save: np.load gives an array, not an archive
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    with pytest.raises(ValueError, match="is not a readable minigrad checkpoint"):
        mg.load(path)


def test_load_of_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        mg.load(tmp_path / "nothing_here.npz")
