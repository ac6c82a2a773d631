"""Where minigrad answers differently from PyTorch on purpose, one test each, as docs/pytorch-way.md lists them
("Where minigrad differs, on purpose"); the others live beside the code they concern and the page names them."""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the differences are shown against it")


def test_the_array_underneath_is_x_array_and_grad_and_data_are_tensors():
    x = mg.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    assert isinstance(x.array, np.ndarray) and not hasattr(torch.ones(3), "array")
    assert isinstance(x.grad, mg.Tensor) and isinstance(x.data, mg.Tensor)


def test_create_graph_needs_a_backward_written_against_xp_for_a_function_of_your_own():
    """Gradients of gradients run each primitive's one backward on tensors; a Function in minigrad's own protocol,
    whose backward is on arrays, is refused under create_graph=True until it is written against xp and self.saved
    (graph_backward = True). PyTorch's Function differentiates its backward as written."""

    class Square(mg.Function):
        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, dout):
            return (2 * self.x * dout,)

    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="create_graph=True: Square.backward computes on arrays"):
        mg.autograd.grad(Square.apply(x).sum(), [x], create_graph=True)
    (g,) = mg.autograd.grad((x * x).sum(), [x], create_graph=True)  # the primitives have theirs
    assert g.requires_grad


def test_size_is_a_plain_tuple_and_a_dim_out_of_range_is_a_value_error():
    assert type(mg.ones(2, 3).size()) is tuple and type(torch.ones(2, 3).size()) is torch.Size
    with pytest.raises(ValueError, match="out of range"):
        mg.ones(2, 3).size(5)
    with pytest.raises(IndexError):
        torch.ones(2, 3).size(5)


def test_view_of_a_dtype_is_refused():
    with pytest.raises(TypeError, match="view"):
        mg.ones(2).view(mg.int32)
    assert torch.ones(2).view(torch.int32).tolist() == [1065353216, 1065353216]  # the bits, read as int32


def test_save_refuses_a_module_naming_its_state_dict(tmp_path):
    with pytest.raises(TypeError, match="save its state_dict"):
        mg.save(nn.Linear(2, 2), tmp_path / "model.bin")


def test_decoupled_weight_decay_is_the_adamw_class_not_a_setting_of_adam():
    with pytest.raises(TypeError, match="decoupled_weight_decay"):
        optim.Adam([nn.Parameter(mg.ones(2))], decoupled_weight_decay=True)
    assert issubclass(optim.AdamW, optim.Adam)


def test_a_second_backward_through_mean_needs_retain_graph():
    x = mg.ones(3, requires_grad=True)
    y = x.mean()
    y.backward()
    with pytest.raises(RuntimeError, match="already used"):
        y.backward()
    t = torch.ones(3, requires_grad=True)
    u = t.mean()
    u.backward()
    u.backward()  # PyTorch's mean saves nothing


def test_a_child_module_set_to_none_is_unregistered():
    layer = nn.Linear(2, 2)
    layer.sub = nn.Linear(2, 2)
    layer.sub = None
    layer.sub = 3  # a plain attribute now
    assert layer.sub == 3 and not list(layer.named_children())
    theirs = torch.nn.Linear(2, 2)
    theirs.sub = torch.nn.Linear(2, 2)
    theirs.sub = None
    with pytest.raises(TypeError):
        theirs.sub = 3  # PyTorch keeps the None entry, which only a Module or None may fill


def test_module_hooks_have_no_always_call_and_no_backward_hooks():
    with pytest.raises(TypeError, match="always_call"):
        nn.Linear(2, 2).register_forward_hook(lambda *args: None, always_call=True)
    assert not hasattr(nn.Linear(2, 2), "register_full_backward_hook")
    assert hasattr(torch.nn.Linear(2, 2), "register_full_backward_hook")
