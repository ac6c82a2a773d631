"""nn.init against torch.nn.init: the gains, the fans, the bounds and the statistics of each draw; that every draw
comes from mg.manual_seed's generator and lands in place; the layers' defaults (nn.Linear and nn.Embedding as
PyTorch's) and the GPT-2 init that the GPT and LLaMA models apply to themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import init
from models import GPT, GPTConfig, Llama, LlamaConfig

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")


@pytest.mark.parametrize("nonlinearity, param", [
    ("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None), ("selu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("leaky_relu", 0),
    ("conv_transpose3d", None),
])
def test_calculate_gain_is_torch_s(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(
        torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-15)


@pytest.mark.parametrize("shape", [(3, 4), (7, 1), (5, 3, 2, 2), (2, 6, 3)])
def test_fans_are_torch_s(shape):
    expected = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init.fan_in_and_fan_out(mg.zeros(*shape)) == expected


def test_a_vector_has_no_fans_and_bad_options_are_refused():
    with pytest.raises(ValueError, match=r"shape \(5,\) has no fans"):
        init.kaiming_uniform_(mg.zeros(5))
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out', got 'fan_avg'"):
        init.kaiming_normal_(mg.zeros(3, 4), mode="fan_avg")
    with pytest.raises(ValueError, match="unsupported nonlinearity 'gelu'"):
        init.kaiming_uniform_(mg.zeros(3, 4), nonlinearity="gelu")
    with pytest.raises(ValueError, match="negative_slope 'x' is not a number"):
        init.calculate_gain("leaky_relu", "x")
    with pytest.raises(TypeError, match="normal_: needs a floating-point tensor"):
        init.normal_(mg.zeros(3, dtype=mg.int64))
    with pytest.raises(ValueError, match="std must be >= 0"):
        init.normal_(mg.zeros(3), std=-1.0)


# (name, call on a tensor, the same call in torch, "uniform" or "normal")
DRAWS = [
    ("uniform_", lambda t: init.uniform_(t, -0.5, 2.0), lambda t: torch.nn.init.uniform_(t, -0.5, 2.0), "uniform"),
    ("normal_", lambda t: init.normal_(t, 0.3, 1.7), lambda t: torch.nn.init.normal_(t, 0.3, 1.7), "normal"),
    ("xavier_uniform_", lambda t: init.xavier_uniform_(t, gain=2.0),
     lambda t: torch.nn.init.xavier_uniform_(t, gain=2.0), "uniform"),
    ("xavier_normal_", init.xavier_normal_, torch.nn.init.xavier_normal_, "normal"),
    ("kaiming_uniform_ (Linear's)", lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)),
     lambda t: torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5)), "uniform"),
    ("kaiming_uniform_ relu fan_out", lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
     lambda t: torch.nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), "uniform"),
    ("kaiming_normal_", init.kaiming_normal_, torch.nn.init.kaiming_normal_, "normal"),
    ("kaiming_normal_ tanh fan_out", lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="tanh"),
     lambda t: torch.nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="tanh"), "normal"),
]


@pytest.mark.parametrize("name, fill, torch_fill, kind", DRAWS, ids=[d[0] for d in DRAWS])
def test_each_draw_has_torch_s_distribution(name, fill, torch_fill, kind):
    """Of a (300, 200) weight (60,000 draws): the same mean and std as torch's draw (3% of the std: the estimates'
    own spread is about 0.5%); a uniform one the same bounds, within 1% (its extremes are that close)."""
    mg.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = fill(mg.zeros(300, 200)).numpy(), torch_fill(torch.empty(300, 200)).numpy()
    std = theirs.std()
    assert abs(ours.mean() - theirs.mean()) < 0.03 * std and ours.std() == pytest.approx(std, rel=0.03)
    if kind == "uniform":
        assert ours.min() == pytest.approx(theirs.min(), rel=0.01)
        assert ours.max() == pytest.approx(theirs.max(), rel=0.01)
    else:  # normal: no bounds, but the tails of a normal (kurtosis 3, a uniform's is 1.8)
        assert np.mean(((ours - ours.mean()) / ours.std()) ** 4) == pytest.approx(3.0, abs=0.1)


def test_a_draw_is_in_place_seeded_and_keeps_dtype():
    w = mg.zeros(4, 5, dtype=mg.float64, requires_grad=True)
    array = w.array
    mg.manual_seed(3)
    assert init.kaiming_uniform_(w) is w and w.array is array and w.dtype == np.float64
    first = w.numpy().copy()
    mg.manual_seed(3)
    init.kaiming_uniform_(w)
    np.testing.assert_array_equal(w.numpy(), first)
    init.kaiming_uniform_(w)
    assert not np.array_equal(w.numpy(), first)  # the generator moved on


def test_constants_fill_in_place():
    w = mg.ones(2, 3)
    assert init.zeros_(w) is w and not w.numpy().any()
    np.testing.assert_array_equal(init.ones_(w).numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(init.constant_(w, 0.25).numpy(), np.full((2, 3), 0.25))
    view = mg.zeros(3, 4)
    init.uniform_(nn.Parameter(view.data[:, 1:3]))  # a view of another array: written through
    assert view.numpy()[:, 1:3].all() and not view.numpy()[:, [0, 3]].any()


def test_an_empty_weight_is_left_as_it_is():
    assert init.kaiming_uniform_(mg.zeros(0, 3)).shape == (0, 3)


# ---- the layers' defaults ----

def test_linear_starts_as_pytorch_s():
    """weight and bias from U(-1/sqrt(in), 1/sqrt(in)): a std of 1/sqrt(3 in), and draws near both bounds."""
    mg.manual_seed(0)
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    t_layer = torch.nn.Linear(400, 300)
    for ours, theirs in [(layer.weight.numpy(), t_layer.weight.detach().numpy()),
                         (layer.bias.numpy(), t_layer.bias.detach().numpy())]:
        assert np.abs(ours).max() <= bound and np.abs(ours).max() > 0.98 * bound
        assert ours.std() == pytest.approx(theirs.std(), rel=0.1) and ours.std() == pytest.approx(bound / math.sqrt(3),
                                                                                                   rel=0.1)
    assert layer.weight.dtype == np.float32 and layer.bias.dtype == np.float32


def test_embedding_starts_as_pytorch_s_standard_normal():
    mg.manual_seed(0)
    w = nn.Embedding(500, 64).weight.numpy()
    assert abs(w.mean()) < 0.02 and w.std() == pytest.approx(1.0, rel=0.02)


def test_layers_draw_from_mg_manual_seed():
    mg.manual_seed(5)
    a = nn.Linear(3, 4)
    mg.manual_seed(5)
    b = nn.Linear(3, 4)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())


# ---- the models' own GPT-2 init ----

@pytest.mark.parametrize("model_class, config, residual", [
    (GPT, GPTConfig(vocab_size=100, block_size=32, n_layer=3, n_head=2, n_embd=64), (".proj.weight",)),
    (Llama, LlamaConfig(vocab_size=100, block_size=32, n_layer=3, n_head=2, n_embd=64),
     ("attn.proj.weight", "mlp.w2.weight")),
])
def test_gpt_and_llama_apply_gpt2_s_init(model_class, config, residual):
    """Every Linear and Embedding weight N(0, 0.02), biases 0, the residual projections 0.02 / sqrt(2 n_layer):
    not the layers' PyTorch defaults (an embedding would be N(0, 1))."""
    mg.manual_seed(0)
    model = model_class(config)
    small = 0.02 / math.sqrt(2 * config.n_layer)
    kinds = set()
    for name, p in model.named_parameters():
        values = p.numpy()
        if name.endswith(residual):
            kinds.add("residual")
            assert values.std() == pytest.approx(small, rel=0.1), name
        elif name.endswith("bias") and "ln" not in name:
            kinds.add("bias")
            assert not values.any(), name
        elif p.ndim == 2:
            kinds.add("weight")
            assert values.std() == pytest.approx(0.02, rel=0.1), name
        else:  # LayerNorm / RMSNorm: ones, and LayerNorm's biases zeros
            kinds.add("norm")
            assert set(np.unique(values)) <= {0.0, 1.0}, name
    assert kinds >= {"residual", "weight", "norm"}

