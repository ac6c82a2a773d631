"""The mistakes the engine must refuse, each with an exception raised in the op where it is made and a
message that names the shapes or values at fault.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import minigrad as mg
from minigrad.array import backend
from minigrad.nn import functional as F


def shapes(*parts: str) -> str:
    """A regex that finds each part, literally and in order (for messages naming several shapes)."""
    return ".*".join(re.escape(p) for p in parts)


# ---- shapes ----

def test_matmul_inner_dimension_mismatch(rand) -> None:
    a, b = rand(2, 3), rand(4, 5)
    with pytest.raises(ValueError, match=shapes("matmul", "(2, 3)", "(4, 5)", "3", "4")):
        a @ b


def test_matmul_batch_dimension_mismatch(rand) -> None:
    a, b = rand(2, 3, 4), rand(5, 4, 2)
    with pytest.raises(ValueError, match=shapes("matmul", "(2, 3, 4)", "(5, 4, 2)")):
        a @ b


def test_matmul_of_a_scalar(rand) -> None:
    with pytest.raises(ValueError, match=shapes("matmul", "()", "(3, 2)")):
        mg.matmul(rand(), rand(3, 2))


@pytest.mark.parametrize("op, name", [(lambda a, b: a + b, "add"), (lambda a, b: a * b, "mul"),
                                      (lambda a, b: a - b, "sub"), (lambda a, b: a / b, "div")],
                         ids=["add", "mul", "sub", "div"])
def test_broadcast_mismatch(rand, op, name) -> None:
    a, b = rand(2, 3), rand(4,)
    with pytest.raises(ValueError, match=shapes(name, "(2, 3)", "(4,)")):
        op(a, b)


def test_linear_shapes(rand) -> None:
    with pytest.raises(ValueError, match=shapes("linear", "(2, 3)", "(5, 4)")):
        F.linear(rand(2, 3), rand(5, 4))
    with pytest.raises(ValueError, match=shapes("linear", "bias", "(4,)", "(5, 4)")):
        F.linear(rand(2, 4), rand(5, 4), rand(4))


def test_reshape_to_wrong_size(rand) -> None:
    with pytest.raises(ValueError, match=shapes("reshape", "(2, 3)")):
        rand(2, 3).reshape(4, 2)


@pytest.mark.parametrize("axes", [(0, 0), (0, 5), (0,), (0, 1, 2), (-3, 1)])
def test_permute_with_bad_axes(rand, axes) -> None:
    with pytest.raises(ValueError, match=shapes("permute", str(axes), "2 dimensions")):
        rand(2, 3).permute(*axes)


@pytest.mark.parametrize("dims", [(0, 2), (-3, 1)])
def test_transpose_with_a_dim_out_of_range(rand, dims) -> None:
    with pytest.raises(ValueError, match=shapes("transpose", f"dim {dims[0] if dims[0] == -3 else dims[1]}", "(2, 3)")):
        rand(2, 3).transpose(*dims)


def test_transpose_swaps_two_dims_as_torch_does(rand) -> None:
    """x.transpose(0, 1) swaps; NumPy's x.transpose(0, 1) would be the identity permutation of a matrix."""
    x = rand(2, 3)
    assert x.transpose(0, 1).shape == (3, 2)
    assert x.transpose(1, 0).shape == (3, 2)
    np.testing.assert_array_equal(x.transpose(0, 1).numpy(), x.numpy().T)
    y = rand(2, 3, 4)
    assert y.transpose(-2, -1).shape == (2, 4, 3)
    assert y.permute(2, 0, 1).shape == (4, 2, 3)
    with pytest.raises(TypeError):
        y.transpose(0, 2, 1)  # a whole permutation is permute's job


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [2, -3])
def test_softmax_axis_out_of_range(rand, op, axis) -> None:
    with pytest.raises(ValueError, match=shapes(op, f"dim {axis}", "(2, 3)")):
        getattr(F, op)(rand(2, 3), axis=axis)


def test_reduction_axis_out_of_range(rand) -> None:
    for reduce in ("sum", "mean", "max"):
        with pytest.raises(ValueError, match=shapes(reduce, "dim 2", "(2, 3)")):
            getattr(rand(2, 3), reduce)(axis=2)


def test_getitem_out_of_range(rand) -> None:
    with pytest.raises(IndexError, match=shapes("getitem", "(3, 4)")):
        rand(3, 4)[3]
    with pytest.raises(IndexError, match=shapes("getitem", "float64")):
        rand(3, 4)[np.array([0.0, 1.0])]


def test_cat_mismatch(rand) -> None:
    with pytest.raises(ValueError, match=shapes("cat", "(2, 3)", "(2, 4)")):
        mg.cat([rand(2, 3), rand(2, 4)], dim=0)
    with pytest.raises(ValueError, match=shapes("cat", "dim 2", "(2, 3)")):
        mg.cat([rand(2, 3)], dim=2)


# ---- backward ----

def test_backward_on_non_scalar_without_gradient(rand) -> None:
    y = rand(2, 3) * 2.0
    with pytest.raises(RuntimeError, match=shapes("(2, 3)", "not a scalar")):
        y.backward()


def test_backward_with_wrongly_shaped_gradient(rand) -> None:
    y = rand(2, 3) * 2.0
    with pytest.raises(ValueError, match=shapes("gradient of shape (3,)", "shape (2, 3)")):
        y.backward(np.ones(3))
    with pytest.raises(ValueError, match=shapes("gradient of shape (1, 3)", "shape (2, 3)")):
        y.backward(np.ones((1, 3)))  # broadcastable is not enough: the gradient is per element


def test_backward_through_tensor_without_grad(rand) -> None:
    y = (rand(2, 3, requires_grad=False) * 2.0).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_backward_function_returning_wrong_shape(rand) -> None:
    class BadSum(mg.Function):
        def forward(self, x):
            return x.sum(keepdims=True).reshape(())

        def backward(self, dout):
            return (dout.reshape(1),)  # should be the input's shape

    with pytest.raises(RuntimeError, match=shapes("BadSum", "shape (1,)", "input of shape (2, 3)")):
        BadSum.apply(rand(2, 3)).backward()


# ---- dtypes and devices ----

def test_integer_tensor_cannot_require_grad(device) -> None:
    with pytest.raises(TypeError, match="int64"):
        mg.tensor([1, 2, 3], requires_grad=True, device=device)
    with pytest.raises(TypeError, match="bool"):
        mg.tensor([True], device=device).requires_grad_()
    with pytest.raises(TypeError, match="int64"):
        mg.arange(3, device=device).requires_grad_()


@pytest.mark.parametrize("op", [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a @ b.T, lambda a, b: F.linear(a, b),
    lambda a, b: mg.cat([a, b]), lambda a, b: a < b,
], ids=["add", "mul", "matmul", "linear", "cat", "compare"])
def test_float32_with_float64_is_refused(rand, op) -> None:
    a, b = rand(2, 3, dtype=mg.float32), rand(2, 3)
    with pytest.raises(TypeError, match=shapes("float32", "float64")):
        op(a, b)


def test_layer_norm_mixed_dtypes_refused_in_forward(rand) -> None:
    """Raised where the mistake is made, not later in backward."""
    x, w, b = rand(2, 4, dtype=mg.float32), rand(4), rand(4)
    with pytest.raises(TypeError, match=shapes("layernorm", "float32", "float64")):
        F.layer_norm(x, 4, w, b)


def test_an_array_operand_is_a_tensor_outside_the_graph_and_keeps_its_dtype(rand) -> None:
    """As torch takes one (x + ndarray is a tensor): so `p -= lr * p.grad` works, .grad being an array. Its dtype is
    its own, so float32 with a float64 array is refused, as two tensors would be; a list is still refused."""
    x = rand(2, 3)
    ones = backend.to_device(np.ones(3), x.device)  # an array of x's device (NumPy's or CuPy's)
    for y in (x + ones, ones + x):
        assert isinstance(y, mg.Tensor) and y.requires_grad
        np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)
    with pytest.raises(TypeError, match=shapes("add", "(2, 3) float32", "(3,) float64")):
        rand(2, 3, dtype=mg.float32) + ones
    with pytest.raises(TypeError, match=shapes("add", "got a list", "mg.tensor")):
        x + [1.0, 2.0, 3.0]


@pytest.mark.skipif(backend.cuda_available(), reason="tests the error shown where no GPU is found")
def test_cuda_without_gpu() -> None:
    for make in (lambda: mg.tensor([1.0], device="cuda"), lambda: mg.zeros(2, device="cuda"),
                 lambda: mg.randn(2, device="cuda"), lambda: mg.tensor([1.0]).to("cuda")):
        with pytest.raises(RuntimeError, match=shapes("cuda", "CuPy")):
            make()


def test_unknown_device() -> None:
    with pytest.raises(ValueError, match=shapes("'tpu'", "cpu", "cuda")):
        mg.tensor([1.0], device="tpu")


@pytest.mark.cuda  # mixes a 'cpu' and a 'cuda' tensor
def test_mixed_devices() -> None:
    a, b = mg.tensor([1.0, 2.0]), mg.tensor([1.0, 2.0], device="cuda")
    for op in (lambda: a + b, lambda: a * b, lambda: mg.cat([a, b]), lambda: a < b):
        with pytest.raises(RuntimeError, match=shapes("different devices", "cpu", "cuda")):
            op()


# ---- indices, targets, masks, parameters ----

# indices are checked where they are: NumPy arrays and lists on the host, before they are copied to the
# device; tensors on the device itself
AS = {"numpy": lambda a, device: a, "list": lambda a, device: a.tolist(),
      "tensor": lambda a, device: mg.tensor(a, device=device)}


@pytest.mark.parametrize("given_as", AS)
@pytest.mark.parametrize("bad, where", [(7, (1, 2)), (-1, (0, 1))])
def test_cross_entropy_target_out_of_range(rand, device, bad, where, given_as) -> None:
    targets = np.array([[1, 0, 4], [2, 2, 3]])
    targets[where] = bad
    with pytest.raises(IndexError, match=shapes("cross_entropy", f"target {bad}", f"position {where}", "[0, 5)")):
        F.cross_entropy(rand(2, 5, 3), AS[given_as](targets, device))  # (N, C, d1): the classes on axis 1


def test_cross_entropy_ignore_index_is_not_out_of_range_but_others_are(rand) -> None:
    targets = np.array([[1, -100, 4], [-100, 2, 3]])
    assert np.isfinite(F.cross_entropy(rand(2, 5, 3), targets, ignore_index=-100).item())
    targets[1, 2] = -3
    with pytest.raises(IndexError, match=shapes("target -3", "position (1, 2)")):
        F.cross_entropy(rand(2, 5, 3), targets, ignore_index=-100)


def test_cross_entropy_targets_of_wrong_shape(rand) -> None:
    with pytest.raises(ValueError, match=shapes("cross_entropy", "targets of shape (3,)", "(2, 5)", "(2,)")):
        F.cross_entropy(rand(2, 5), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=shapes("targets of shape (2, 1)", "(2, 5)")):
        F.cross_entropy(rand(2, 5), np.array([[0], [1]]))


def test_cross_entropy_float_targets(rand) -> None:
    with pytest.raises(TypeError, match=shapes("cross_entropy", "integer", "float64")):
        F.cross_entropy(rand(2, 5), np.array([0.0, 1.0]))


@pytest.mark.parametrize("given_as", AS)
@pytest.mark.parametrize("bad, where", [(5, (1, 0)), (-2, (0, 2))])
def test_embedding_index_out_of_range(rand, device, bad, where, given_as) -> None:
    indices = np.array([[0, 2, 0], [4, 2, 2]])
    indices[where] = bad
    with pytest.raises(IndexError, match=shapes("embedding", f"index {bad}", f"position {where}", "[0, 5)")):
        F.embedding(AS[given_as](indices, device), rand(5, 3))


def test_embedding_weight_not_2d(rand) -> None:
    with pytest.raises(ValueError, match=shapes("embedding", "(5, 3, 2)")):
        F.embedding(np.array([0, 1]), rand(5, 3, 2))


@pytest.mark.parametrize("mask_shape", [(3,), (2, 2, 4), (4, 4)])
def test_masked_fill_mask_that_does_not_broadcast(rand, mask_shape) -> None:
    with pytest.raises(ValueError, match=shapes("masked_fill", f"mask of shape {mask_shape}", "(2, 4)")):
        F.masked_fill(rand(2, 4), np.zeros(mask_shape, dtype=bool), 0.0)


def test_masked_fill_mask_must_be_boolean(rand) -> None:
    with pytest.raises(TypeError, match=shapes("masked_fill", "boolean", "int64")):
        F.masked_fill(rand(2, 4), np.zeros((2, 4), dtype=np.int64), 0.0)


def test_layer_norm_parameter_of_wrong_shape(rand) -> None:
    with pytest.raises(ValueError, match=shapes("layer_norm", "weight of shape (3,)", "shape (4,)", "(2, 4)")):
        F.layer_norm(rand(2, 4), 4, rand(3), rand(4))
    with pytest.raises(ValueError, match=shapes("layer_norm", "bias of shape (4, 1)", "(2, 4)")):
        F.layer_norm(rand(2, 4), (4,), rand(4), rand(4, 1))
    with pytest.raises(ValueError, match=shapes("layer_norm", "normalized_shape (3,)", "trailing", "(2, 4)")):
        F.layer_norm(rand(2, 4), 3)
    with pytest.raises(TypeError, match=shapes("layer_norm", "normalized_shape", "got a tensor of shape (4,)",
                                               "F.layer_norm(x, normalized_shape, weight)")):
        F.layer_norm(rand(2, 4), rand(4), rand(4))  # the order before: weight where normalized_shape goes


def test_dropout_probability_out_of_range(rand) -> None:
    with pytest.raises(ValueError, match=shapes("dropout", "1.5")):
        F.dropout(rand(2), 1.5)


def test_causal_mask_bad_sizes() -> None:
    with pytest.raises(ValueError, match=shapes("causal_mask", "T=4", "T_k=3")):
        F.causal_mask(4, 3)


def test_item_and_truth_of_a_non_scalar(rand) -> None:
    """The exception types PyTorch raises: RuntimeError for item() and truth, ValueError for float() and int()."""
    with pytest.raises(RuntimeError, match=shapes("item", "(2, 3)")):
        rand(2, 3).item()
    with pytest.raises(RuntimeError, match=shapes("(2, 3)", "ambiguous")):
        bool(rand(2, 3))
    with pytest.raises(ValueError, match=shapes("float", "(2, 3)")):
        float(rand(2, 3))
    with pytest.raises(ValueError, match=shapes("int", "(2, 3)")):
        int(rand(2, 3))


def test_non_numeric_data_is_refused() -> None:
    with pytest.raises(TypeError, match="not a number type"):
        mg.tensor("abc")


def test_mean_of_an_integer_tensor_names_mean(device) -> None:
    with pytest.raises(TypeError, match="mean: needs a floating-point tensor, got int64"):
        mg.arange(4, device=device).mean()
