"""The regression and binary losses and the loss layers, beyond the gradient-check table: PyTorch's values and
gradients in float32 at logits where a naive formula overflows, the edge cases (empty input, every option of the
layers), and the errors a PyTorch user's slip meets, each raised where the mistake is made.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
TF = torch.nn.functional


def pair(array: np.ndarray, requires_grad: bool = True):
    """The same values as a minigrad tensor and a torch tensor, both leaves."""
    return mg.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_is_finite_where_exp_overflows_float32(reduction):
    """exp(200) is inf in float32: the loss and its gradient come from exp(-|x|) instead, as PyTorch's."""
    x = np.array([[-200.0, -90.0, -3.0, 0.0], [0.5, 20.0, 90.0, 200.0]], dtype=np.float32)
    t = np.array([[1.0, 0.0, 0.2, 1.0], [0.0, 1.0, 0.7, 0.0]], dtype=np.float32)
    pos_weight = np.array([2.0, 0.5, 1.0, 3.0], dtype=np.float32)
    mx, tx = pair(x)
    loss = F.binary_cross_entropy_with_logits(mx, t, pos_weight=pos_weight, reduction=reduction)
    t_loss = TF.binary_cross_entropy_with_logits(tx, torch.tensor(t), pos_weight=torch.tensor(pos_weight),
                                                 reduction=reduction)
    assert loss.dtype == np.float32 and np.isfinite(loss.numpy()).all()
    np.testing.assert_allclose(loss.numpy(), t_loss.detach().numpy(), rtol=1e-6)
    dout = np.random.default_rng(0).standard_normal(loss.shape).astype(np.float32)
    loss.backward(dout)
    t_loss.backward(torch.tensor(dout))
    assert np.isfinite(mx.grad.numpy()).all()
    np.testing.assert_allclose(mx.grad, tx.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_bce_with_logits_without_pos_weight_is_sigmoid_minus_target():
    x, t = np.array([[-2.0, 0.0, 3.0]]), np.array([[0.0, 0.5, 1.0]])
    mx = mg.tensor(x, requires_grad=True)
    F.binary_cross_entropy_with_logits(mx, t, reduction="sum").backward()
    np.testing.assert_allclose(mx.grad, 1 / (1 + np.exp(-x)) - t, rtol=1e-12)


@pytest.mark.parametrize("fn, t_fn", [(F.mse_loss, TF.mse_loss),
                                      (F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_an_empty_input_as_pytorch(fn, t_fn, reduction):
    """A mean of nothing is NaN, a sum of nothing 0; the gradient of nothing is empty."""
    mx, tx = pair(np.zeros((0, 3)))
    loss, t_loss = fn(mx, np.zeros((0, 3)), reduction=reduction), t_fn(tx, torch.zeros(0, 3, dtype=torch.float64),
                                                                      reduction=reduction)
    np.testing.assert_array_equal(loss.numpy(), t_loss.detach().numpy())  # NaN equals NaN here
    assert loss.shape == tuple(t_loss.shape)


def test_integer_targets_are_taken_in_the_input_s_dtype():
    """mse_loss(x, long tensor) works in PyTorch; so do arrays and lists here."""
    x = np.array([[0.5, 2.0], [1.0, -1.0]])
    tx = torch.tensor(x)
    expected = TF.mse_loss(tx, torch.tensor([[1, 2], [0, 0]])).item()
    for target in (mg.tensor([[1, 2], [0, 0]]), np.array([[1, 2], [0, 0]]), [[1, 2], [0, 0]]):
        assert F.mse_loss(mg.tensor(x), target).item() == pytest.approx(expected, rel=1e-12)


def test_a_target_tensor_gets_its_gradient():
    x, t = np.array([[0.3, -1.2, 2.0]]), np.array([[0.1, 0.9, 0.5]])
    for fn, t_fn in [(F.mse_loss, TF.mse_loss),
                     (F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits)]:
        (mx, tx), (mt, tt) = pair(x), pair(t)
        fn(mx, mt).backward()
        t_fn(tx, tt).backward()
        np.testing.assert_allclose(mt.grad, tt.grad.numpy(), rtol=1e-12)


def test_the_loss_layers_match_pytorch_s_with_their_options():
    rng = np.random.default_rng(1)
    logits, classes = rng.standard_normal((6, 5)), np.array([0, 4, -1, 2, 2, -1])
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    probs = rng.uniform(size=(4, 3))
    pairs = [
        (nn.CrossEntropyLoss(ignore_index=-1, reduction="sum", label_smoothing=0.3),
         torch.nn.CrossEntropyLoss(ignore_index=-1, reduction="sum", label_smoothing=0.3), logits, classes),
        (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), logits, np.abs(classes)),
        (nn.MSELoss(reduction="none"), torch.nn.MSELoss(reduction="none"), x, y),
        (nn.BCEWithLogitsLoss(np.array([1.0, 0.5, 2.0]), reduction="sum", pos_weight=np.array([3.0, 1.0, 0.2])),
         torch.nn.BCEWithLogitsLoss(torch.tensor(np.array([1.0, 0.5, 2.0])), reduction="sum",
                                    pos_weight=torch.tensor(np.array([3.0, 1.0, 0.2]))), x, probs),
    ]
    for layer, t_layer, inputs, target in pairs:
        mx, tx = pair(inputs)
        loss, t_loss = layer(mx, target), t_layer(tx, torch.tensor(target))
        np.testing.assert_allclose(loss.numpy(), t_loss.detach().numpy(), rtol=1e-12, err_msg=type(layer).__name__)
        dout = np.ones(loss.shape)
        loss.backward(dout)
        t_loss.backward(torch.tensor(dout))
        np.testing.assert_allclose(mx.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=type(layer).__name__)
        assert list(layer.parameters()) == []  # weight and pos_weight are constants, as PyTorch's buffers


def test_a_loss_trains_a_model_through_the_layer():
    mg.manual_seed(0)
    model, loss_fn = nn.Linear(3, 1), nn.MSELoss()
    x = mg.tensor(np.random.default_rng(0).standard_normal((32, 3)), dtype=mg.float32)
    y = x @ mg.tensor(np.array([[1.0], [-2.0], [0.5]]), dtype=mg.float32) + 0.3
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    first = None
    for _ in range(100):
        loss = loss_fn(model(x), y)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-4 * first
    np.testing.assert_allclose(model.weight.numpy(), [[1.0, -2.0, 0.5]], atol=1e-2)


# ---- errors, raised where the mistake is made ----

@pytest.mark.parametrize("call, message", [
    (lambda: F.mse_loss(mg.zeros(3, 4), mg.zeros(4)), "target of shape (4,) for input of shape (3, 4)"),
    (lambda: F.mse_loss(mg.zeros(3), mg.zeros(3), reduction="avg"), "reduction must be 'mean', 'sum' or 'none'"),
    (lambda: F.mse_loss(mg.zeros(3, dtype=mg.int64), mg.zeros(3)), "mse_loss: needs a floating-point tensor"),
    (lambda: F.mse_loss(np.zeros(3), mg.zeros(3)), "mse_loss: input must be a tensor"),
    (lambda: F.binary_cross_entropy_with_logits(mg.zeros(3, 4), mg.zeros(3)), "target of shape (3,)"),
    (lambda: F.binary_cross_entropy_with_logits(mg.zeros(3, 4), mg.zeros(3, 4), pos_weight=np.ones(3)),
     "pos_weight of shape (3,) does not broadcast to the input's shape (3, 4)"),
    (lambda: F.binary_cross_entropy_with_logits(mg.zeros(3, 4), mg.zeros(3, 4), np.ones((2, 3, 4))),
     "weight of shape (2, 3, 4) does not broadcast"),
    (lambda: F.binary_cross_entropy_with_logits(mg.zeros(2), mg.zeros(2), mg.ones(2, requires_grad=True)),
     "weight requires grad, but the loss is not differentiable in it"),
    (lambda: nn.MSELoss(reduction="elementwise_mean"), "MSELoss: reduction must be"),
    (lambda: nn.BCEWithLogitsLoss(reduction=None), "BCEWithLogitsLoss: reduction must be"),
    (lambda: nn.CrossEntropyLoss(reduction="avg"), "CrossEntropyLoss: reduction must be"),
    (lambda: nn.CrossEntropyLoss(label_smoothing=1.5), "label_smoothing must be a number in [0, 1]"),
])
def test_bad_arguments_are_refused_naming_what_is_wrong(call, message):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert message in str(err.value)


def test_pytorch_s_positional_size_average_cannot_land_in_an_option():
    """torch.nn.MSELoss(size_average, reduce, reduction): the options here are keyword-only."""
    with pytest.raises(TypeError):
        nn.MSELoss(True)
    with pytest.raises(TypeError):
        nn.CrossEntropyLoss(None)  # torch's first argument is a per-class weight, which minigrad does not have
    with pytest.raises(TypeError):
        F.binary_cross_entropy_with_logits(mg.zeros(2), mg.zeros(2), None, True)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 5, 3), (2, 5, 3, 4)], ids=["C", "N C", "N C d1", "N C d1 d2"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll_loss_take_the_classes_on_axis_1_as_torch(shape, reduction):
    """(N, C, d1, ...) logits with (N, d1, ...) targets: the classes on axis 1, PyTorch's layout, values and
    gradients compared in float64, for F.cross_entropy, nn.CrossEntropyLoss and nn.NLLLoss after LogSoftmax(1)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    target = rng.integers(0, 5, shape[:1] + shape[2:] if len(shape) > 1 else ())
    if target.ndim:
        target.reshape(-1)[0] = -100  # ignored
    dim = 0 if len(shape) == 1 else 1
    ours = {"F": lambda m: F.cross_entropy(m, target, reduction=reduction, label_smoothing=0.1),
            "layer": lambda m: nn.CrossEntropyLoss(reduction=reduction)(m, target),
            "nll": lambda m: nn.NLLLoss(reduction=reduction)(nn.LogSoftmax(dim=dim)(m), target)}
    tt = torch.tensor(target)
    theirs = {"F": lambda t: TF.cross_entropy(t, tt, reduction=reduction, label_smoothing=0.1),
              "layer": lambda t: torch.nn.CrossEntropyLoss(reduction=reduction)(t, tt),
              "nll": lambda t: torch.nn.NLLLoss(reduction=reduction)(torch.nn.LogSoftmax(dim=dim)(t), tt)}
    for name in ours:
        mx, tx = pair(x)
        loss, expected = ours[name](mx), theirs[name](tx)
        assert loss.shape == tuple(expected.shape), name
        np.testing.assert_allclose(loss.numpy(), expected.detach().numpy(), rtol=1e-12, err_msg=name)
        dout = rng.standard_normal(loss.shape)
        loss.backward(mg.tensor(dout))
        expected.backward(torch.tensor(dout))
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)


def test_cross_entropy_of_equal_sizes_reads_axis_1_and_a_sequence_model_flattens():
    """(B, T, V) with T == V: both read as (N, C, d1), silently, as PyTorch's does; nanoGPT's flattening
    (logits.view(-1, V)) gives the per-token loss, a different number."""
    rng = np.random.default_rng(4)
    x, target = rng.standard_normal((2, 4, 4)), rng.integers(0, 4, (2, 4))
    mx, tx = pair(x, requires_grad=False)
    loss = F.cross_entropy(mx, target).item()
    assert loss == pytest.approx(TF.cross_entropy(tx, torch.tensor(target)).item(), rel=1e-12)
    flat = F.cross_entropy(mx.view(-1, 4), target.reshape(-1)).item()
    assert flat == pytest.approx(TF.cross_entropy(tx.view(-1, 4), torch.tensor(target).view(-1)).item(), rel=1e-12)
    assert flat != pytest.approx(loss)


def test_cross_entropy_of_a_sequence_model_s_logits_unflattened_says_how_to_flatten():
    with pytest.raises(ValueError, match=r"targets of shape \(2, 3\) for logits of shape \(2, 3, 7\); expected "
                                         r"\(2, 7\) \(the classes are on axis 1\); for \(B, T, V\) scores, flatten"):
        F.cross_entropy(mg.randn(2, 3, 7), np.zeros((2, 3), dtype=np.int64))
