"""The layers of a deep-learning course (issue 49) against PyTorch: F.conv*/pool*/pad/batch_norm and the composed
activations, values and float64 gradients (a random upstream gradient, and central differences for a few, with
second order); each nn layer's state_dict keys and shapes as PyTorch's, a PyTorch state_dict loaded giving PyTorch's
outputs and gradients (Conv, pooling, BatchNorm train/eval with its running statistics, RNN/LSTM/GRU and cells,
MultiheadAttention with masks, the Transformer layers and stacks), Module.double/float/half; on the CuPy stand-in too.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.nn import functional as F
from minigrad.nn.rnn import gru_cell, lstm_cell

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install 'minigrad[torch]'")
TF = torch.nn.functional


def compare(fn, t_fn, arrays, atol=1e-10, **kwargs):
    """fn(*tensors) against t_fn(*torch tensors) in float64: the values, then every input's gradient for one
    random upstream gradient."""
    xs = [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    y, t_y = fn(*xs, **kwargs), t_fn(*ts, **kwargs)
    np.testing.assert_allclose(y.numpy(), t_y.detach().numpy(), atol=atol, rtol=1e-7)
    dout = np.random.default_rng(1).standard_normal(t_y.shape)
    (y * mg.tensor(dout)).sum().backward()
    t_y.backward(torch.tensor(dout))
    for i, (x, t) in enumerate(zip(xs, ts, strict=True)):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=atol, rtol=1e-7, err_msg=f"input {i}")


R = np.random.default_rng(0)


def randn(*shape):
    return R.standard_normal(shape)


# ---- the functions: (name, ours, PyTorch's, input shapes, arguments) ----
FUNCTIONS = [
    ("conv2d", F.conv2d, TF.conv2d, [(2, 4, 7, 6), (6, 2, 3, 2), (6,)],
     {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2}),
    ("conv2d same", F.conv2d, TF.conv2d, [(2, 3, 5, 6), (4, 3, 3, 3)], {"padding": "same"}),
    ("conv2d unbatched", F.conv2d, TF.conv2d, [(3, 5, 6), (4, 3, 2, 2)], {}),
    ("conv1d", F.conv1d, TF.conv1d, [(2, 3, 9), (4, 3, 3), (4,)], {"stride": 2, "padding": 2}),
    ("conv1d depthwise", F.conv1d, TF.conv1d, [(2, 4, 9), (4, 1, 3)], {"groups": 4, "padding": "valid"}),
    ("conv_transpose2d", F.conv_transpose2d, TF.conv_transpose2d, [(2, 4, 5, 4), (4, 3, 3, 2), (3,)],
     {"stride": 2, "padding": 1, "output_padding": 1}),
    ("conv_transpose2d groups dilation", F.conv_transpose2d, TF.conv_transpose2d, [(2, 4, 3, 3), (4, 1, 3, 3)],
     {"stride": (1, 3), "padding": (0, 2), "groups": 2, "dilation": (2, 1)}),
    ("conv_transpose1d", F.conv_transpose1d, TF.conv_transpose1d, [(2, 3, 6), (3, 2, 4), (2,)],
     {"stride": 3, "padding": 2, "output_padding": 2}),
    ("max_pool2d", F.max_pool2d, TF.max_pool2d, [(2, 3, 7, 6)], {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool1d", F.max_pool1d, TF.max_pool1d, [(2, 3, 7)], {"kernel_size": 2, "dilation": 2}),
    ("avg_pool2d", F.avg_pool2d, TF.avg_pool2d, [(2, 3, 7, 6)], {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("avg_pool2d real count", F.avg_pool2d, TF.avg_pool2d, [(2, 3, 7, 6)],
     {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
    ("avg_pool2d divisor", F.avg_pool2d, TF.avg_pool2d, [(2, 3, 4, 4)], {"kernel_size": 2, "divisor_override": 3}),
    ("avg_pool1d", F.avg_pool1d, TF.avg_pool1d, [(2, 3, 7)], {"kernel_size": 3}),
    ("max_pool2d ceil_mode", F.max_pool2d, TF.max_pool2d, [(2, 3, 7, 8)],
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool2d ceil_mode", F.avg_pool2d, TF.avg_pool2d, [(2, 3, 7, 8)],
     {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}),
    ("avg_pool1d ceil_mode real count", F.avg_pool1d, TF.avg_pool1d, [(2, 3, 10)],
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("adaptive_avg_pool2d", F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, [(2, 3, 7, 5)], {"output_size": (3, 2)}),
    ("adaptive_avg_pool2d global", F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d, [(2, 3, 4, 5)], {"output_size": 1}),
    ("adaptive_avg_pool1d", F.adaptive_avg_pool1d, TF.adaptive_avg_pool1d, [(2, 3, 7)], {"output_size": 4}),
    ("adaptive_max_pool2d", F.adaptive_max_pool2d, TF.adaptive_max_pool2d, [(2, 3, 7, 5)], {"output_size": (3, 4)}),
    ("adaptive_max_pool1d", F.adaptive_max_pool1d, TF.adaptive_max_pool1d, [(2, 3, 7)], {"output_size": 3}),
    *[(f"pad {mode}", F.pad, TF.pad, [(2, 3, 5, 4)], {"pad": (1, 2, 2, 1), "mode": mode})
      for mode in ("constant", "reflect", "replicate", "circular")],
    ("pad crop and value", F.pad, TF.pad, [(2, 3, 5, 4)], {"pad": (-1, 2, 0, 1), "value": 0.5}),
    ("batch_norm train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True), [(4, 3, 2, 2), (3,), (3,)], {}),
    ("group_norm", lambda x, w, b: F.group_norm(x, 3, w, b), lambda x, w, b: TF.group_norm(x, 3, w, b),
     [(2, 6, 3, 2), (6,), (6,)], {}),
    *[(name, getattr(F, name), getattr(TF, name), [(3, 4)], kwargs) for name, kwargs in [
        ("elu", {"alpha": 0.7}), ("selu", {}), ("celu", {"alpha": 1.3}), ("softplus", {"beta": 2.0}),
        ("softsign", {}), ("hardtanh", {"min_val": -0.5, "max_val": 0.7}), ("relu6", {}), ("hardsigmoid", {}),
        ("hardswish", {}), ("mish", {}), ("logsigmoid", {}), ("tanhshrink", {}), ("softmin", {"dim": 1}),
        ("glu", {"dim": 1}), ("normalize", {"dim": 1})]],
    ("prelu", F.prelu, TF.prelu, [(2, 3, 4), (3,)], {}),
]


@pytest.mark.parametrize("name, fn, t_fn, shapes, kwargs", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_function_matches_pytorch_values_and_gradients(name, fn, t_fn, shapes, kwargs):
    arrays = [randn(*s) * (4 if name in ("relu6", "hardsigmoid", "hardswish") else 1) for s in shapes]
    compare(fn, t_fn, arrays, **kwargs)


@pytest.mark.parametrize("name, fn, args", [
    ("conv2d", lambda x, w: F.conv2d(x, w, stride=2, padding=1), [(1, 2, 4, 4), (2, 2, 3, 3)]),
    ("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1), [(1, 2, 3), (2, 2, 3)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [(1, 2, 4, 4)]),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False), [(1, 2, 6)]),
    ("batch_norm", lambda x, w: F.batch_norm(x, None, None, w, None, training=True), [(4, 3, 2), (3,)]),
    ("pad reflect", lambda x: F.pad(x, (2, 1), mode="reflect") ** 2, [(2, 4)]),
    ("lstm_cell", lambda x, h, c, w_ih, w_hh, b: sum(lstm_cell(x, (h, c), w_ih, w_hh, b, None)),
     [(2, 3), (2, 2), (2, 2), (8, 3), (8, 2), (8,)]),
    ("gru_cell", lambda x, h, w_ih, w_hh, b: gru_cell(x, h, w_ih, w_hh, None, b), [(2, 3), (2, 2), (6, 3), (6, 2),
                                                                                  (6,)]),
])
def test_composed_functions_pass_first_and_second_order_gradchecks(name, fn, args):
    inputs = [mg.tensor(randn(*s), dtype=mg.float64, requires_grad=True) for s in args]
    assert mg.gradcheck(fn, *inputs)
    if name != "max_pool2d":  # a max's second derivative is 0 almost everywhere: nothing to check
        assert mg.gradgradcheck(fn, *inputs)


@pytest.mark.parametrize("call, message", [
    (lambda: F.conv2d(mg.zeros(1, 3, 4, 4), mg.zeros(2, 2, 3, 3)), "does not fit an input of shape (1, 3, 4, 4)"),
    (lambda: F.conv2d(mg.zeros(3, 4), mg.zeros(2, 3, 3, 3)), "expected a 3-d (unbatched) or 4-d (batched) input"),
    (lambda: F.conv1d(mg.zeros(1, 3, 2), mg.zeros(2, 3, 3)),
     "conv1d: a kernel of (3,) (dilation (1,)) is larger than the padded input's (2,)"),
    (lambda: F.max_pool2d(mg.zeros(1, 1, 4, 4), 2, return_indices=True), "return_indices=True is not supported"),
    (lambda: F.pad(mg.zeros(2, 3), (3, 0), mode="reflect"), "must be smaller than the padded axis, of size 3"),
    (lambda: F.pad(mg.zeros(2, 3), (1,)), "two per padded axis"),
    (lambda: F.batch_norm(mg.zeros(1, 3), None, None, training=True), "more than 1 value per channel"),
    (lambda: F.avg_pool2d(mg.zeros(1, 1, 4, 4), 2, padding=2), "at most half of kernel_size"),
])
def test_bad_arguments_get_a_one_line_error_naming_them(call, message):
    with pytest.raises((ValueError, NotImplementedError)) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


# ---- layers: a PyTorch state_dict loads and gives PyTorch's outputs and gradients ----

def loaded(layer, t_layer):
    """Our layer in float64 with the PyTorch layer's (float64) state_dict loaded: same keys, same shapes."""
    layer.double()
    t_layer.double()
    t_state = t_layer.state_dict()
    ours = layer.state_dict()
    assert list(ours) == list(t_state)
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in t_state.items()}
    layer.load_state_dict({k: v.numpy() for k, v in t_state.items()})
    return layer


def flat(y):
    """An output, or the tensors of nested tuples (an LSTM's (output, (h, c))) as one tuple."""
    return tuple(t for part in y for t in flat(part)) if isinstance(y, tuple) else (y,)


def compare_layers(layer, t_layer, arrays, outputs=flat, atol=1e-9, **kwargs):
    """Load t_layer's state into layer; the outputs, the inputs' and every parameter's gradient, as PyTorch's."""
    loaded(layer, t_layer)
    xs = [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    ys, t_ys = outputs(layer(*xs, **kwargs)), outputs(t_layer(*ts, **kwargs))
    loss, t_loss = 0, 0
    for i, (y, t_y) in enumerate(zip(ys, t_ys, strict=True)):
        np.testing.assert_allclose(y.numpy(), t_y.detach().numpy(), atol=atol, rtol=1e-7, err_msg=f"output {i}")
        dout = np.random.default_rng(i).standard_normal(t_y.shape)
        loss, t_loss = loss + (y * mg.tensor(dout)).sum(), t_loss + (t_y * torch.tensor(dout)).sum()
    loss.backward()
    t_loss.backward()
    for x, t in zip(xs, ts, strict=True):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=atol, rtol=1e-7)
    t_params = dict(t_layer.named_parameters())
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=atol, rtol=1e-7, err_msg=name)


LAYERS = [
    ("Conv2d", lambda m: m.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, groups=2), [(2, 4, 7, 6)]),
    ("Conv2d reflect", lambda m: m.Conv2d(3, 2, 3, padding=1, padding_mode="reflect", bias=False), [(2, 3, 5, 5)]),
    ("Conv2d circular", lambda m: m.Conv2d(3, 2, 3, padding=(1, 2), padding_mode="circular"), [(1, 3, 5, 5)]),
    ("Conv1d", lambda m: m.Conv1d(3, 4, 3, dilation=2, padding="same"), [(2, 3, 8)]),
    ("Conv2d same replicate", lambda m: m.Conv2d(2, 3, (2, 3), padding="same", padding_mode="replicate"),
     [(2, 2, 5, 5)]),
    ("ConvTranspose2d", lambda m: m.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2), [(2, 4, 3, 3)]),
    ("ConvTranspose1d", lambda m: m.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1, bias=False), [(2, 3, 5)]),
    ("MaxPool2d", lambda m: m.MaxPool2d(2), [(2, 3, 4, 6)]),
    ("AvgPool2d", lambda m: m.AvgPool2d(3, stride=1, padding=1), [(2, 3, 4, 6)]),
    ("AdaptiveAvgPool2d", lambda m: m.AdaptiveAvgPool2d((2, 3)), [(2, 3, 5, 7)]),
    ("MaxPool1d", lambda m: m.MaxPool1d(3, stride=2), [(2, 3, 9)]),
    ("AvgPool1d", lambda m: m.AvgPool1d(2), [(2, 3, 9)]),
    ("AdaptiveMaxPool1d", lambda m: m.AdaptiveMaxPool1d(4), [(2, 3, 9)]),
    ("RNN", lambda m: m.RNN(3, 4, num_layers=2, nonlinearity="relu"), [(5, 2, 3)]),
    ("RNN bidirectional batch_first", lambda m: m.RNN(3, 4, batch_first=True, bidirectional=True), [(2, 5, 3)]),
    ("LSTM", lambda m: m.LSTM(3, 4, num_layers=2, bidirectional=True), [(5, 2, 3)]),
    ("LSTM batch_first no bias", lambda m: m.LSTM(3, 4, bias=False, batch_first=True), [(2, 5, 3)]),
    ("LSTM unbatched", lambda m: m.LSTM(3, 4), [(5, 3)]),
    ("GRU", lambda m: m.GRU(3, 4, num_layers=2, batch_first=True), [(2, 5, 3)]),
    ("GRU bidirectional", lambda m: m.GRU(3, 4, bidirectional=True), [(5, 2, 3)]),
    ("RNNCell", lambda m: m.RNNCell(3, 4), [(2, 3), (2, 4)]),
    ("LSTMCell", lambda m: m.LSTMCell(3, 4), [(2, 3)]),
    ("GRUCell", lambda m: m.GRUCell(3, 4), [(2, 3), (2, 4)]),
    ("GRUCell unbatched", lambda m: m.GRUCell(3, 4), [(3,)]),
    ("MultiheadAttention", lambda m: m.MultiheadAttention(8, 2), [(5, 2, 8), (4, 2, 8), (4, 2, 8)]),
    ("MultiheadAttention kdim batch_first", lambda m: m.MultiheadAttention(8, 4, kdim=6, vdim=5, batch_first=True),
     [(2, 5, 8), (2, 3, 6), (2, 3, 5)]),
    ("TransformerEncoderLayer", lambda m: m.TransformerEncoderLayer(8, 2, 16, dropout=0.0), [(5, 2, 8)]),
    ("TransformerEncoderLayer norm_first gelu", lambda m: m.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True), [(2, 5, 8)]),
    ("TransformerDecoderLayer", lambda m: m.TransformerDecoderLayer(8, 2, 16, dropout=0.0), [(4, 2, 8), (5, 2, 8)]),
    ("TransformerDecoderLayer norm_first", lambda m: m.TransformerDecoderLayer(
        8, 2, 16, dropout=0.0, norm_first=True, batch_first=True), [(2, 4, 8), (2, 5, 8)]),
    ("Transformer", lambda m: m.Transformer(8, 2, 2, 1, 16, dropout=0.0), [(5, 2, 8), (4, 2, 8)]),
    ("PReLU", lambda m: m.PReLU(3), [(2, 3, 4)]),
    ("LSTM dropout, evaluated", lambda m: m.LSTM(3, 4, num_layers=3, dropout=0.5).eval(), [(5, 2, 3)]),
    ("TransformerEncoderLayer dropout, evaluated", lambda m: m.TransformerEncoderLayer(8, 2, 16).eval(), [(5, 2, 8)]),
    ("MultiheadAttention dropout, evaluated", lambda m: m.MultiheadAttention(8, 2, dropout=0.5).eval(),
     [(5, 2, 8), (4, 2, 8), (4, 2, 8)]),
    ("BatchNorm1d eval", lambda m: m.BatchNorm1d(3).eval(), [(4, 3)]),
    ("BatchNorm2d eval", lambda m: m.BatchNorm2d(3, affine=False).eval(), [(4, 3, 2, 2)]),
    ("GroupNorm", lambda m: m.GroupNorm(2, 4), [(3, 4, 5)]),
    ("BatchNorm1d eval no bias", lambda m: m.BatchNorm1d(3, bias=False).eval(), [(4, 3, 5)]),
]


@pytest.mark.parametrize("name, make, shapes", LAYERS, ids=[f[0] for f in LAYERS])
def test_layer_loads_a_pytorch_state_dict_and_matches_its_outputs_and_gradients(name, make, shapes):
    torch.manual_seed(0)
    t_layer = make(torch.nn)
    if "BatchNorm" in name:  # running statistics that are not 0 and 1, so that evaluation reads them
        t_layer.running_mean.uniform_(-1, 1)
        t_layer.running_var.uniform_(0.5, 2)
    arrays = [randn(*s) for s in shapes]
    compare_layers(make(nn), t_layer, arrays, flat)


def test_dropout_between_recurrent_layers_and_on_attention_weights_acts_in_training_only():
    mg.manual_seed(0)
    x = mg.tensor(randn(5, 2, 3), dtype=mg.float32)
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    evaluated = lstm.eval()(x)[0].numpy()
    assert not np.allclose(lstm.train()(x)[0].numpy(), evaluated)
    with pytest.warns(UserWarning, match="with num_layers=1 it does nothing"):
        one_layer = nn.LSTM(3, 4, dropout=0.5)  # no layer after the last: nothing to drop
    assert np.allclose(one_layer.train()(x)[0].numpy(), one_layer.eval()(x)[0].numpy())
    mha = nn.MultiheadAttention(6, 2, dropout=0.5)
    q = mg.tensor(randn(4, 2, 6), dtype=mg.float32)
    weights = mha.train()(q, q, q)[1].numpy()
    assert not np.allclose(weights, mha.eval()(q, q, q)[1].numpy())


def test_rnn_initial_states_and_lstm_cell_state_pairs_match_pytorch():
    torch.manual_seed(0)
    lstm, t_lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True), \
        torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    x, h0, c0 = randn(2, 5, 3), randn(4, 2, 4), randn(4, 2, 4)
    loaded(lstm, t_lstm)
    out, (h, c) = lstm(mg.tensor(x, dtype=mg.float64), (mg.tensor(h0), mg.tensor(c0)))
    t_out, (t_h, t_c) = t_lstm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    for a, b in ((out, t_out), (h, t_h), (c, t_c)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-10)
    cell, t_cell = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
    loaded(cell, t_cell)
    h1, c1 = cell(mg.tensor(x[:, 0]), (mg.tensor(h0[0]), mg.tensor(c0[0])))
    t_h1, t_c1 = t_cell(torch.tensor(x[:, 0]), (torch.tensor(h0[0]), torch.tensor(c0[0])))
    np.testing.assert_allclose(h1.numpy(), t_h1.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(c1.numpy(), t_c1.detach().numpy(), atol=1e-10)
    with pytest.raises(ValueError, match=r"expected an initial state of shape \(4, 2, 4\)"):
        lstm(mg.tensor(x), (mg.tensor(h0[:2]), mg.tensor(c0[:2])))


def test_multihead_attention_masks_follow_pytorch_conventions():
    """Boolean masks: True = may NOT attend; float masks are added; key_padding_mask hides keys per batch row; the
    weights are averaged over heads unless asked not to."""
    torch.manual_seed(0)
    mha, t_mha = nn.MultiheadAttention(8, 2, batch_first=True), torch.nn.MultiheadAttention(8, 2, batch_first=True)
    loaded(mha, t_mha)
    q, kv = randn(2, 4, 8), randn(2, 5, 8)
    bool_mask = R.random((4, 5)) < 0.3
    bool_mask[:, 0] = False  # every query sees a key
    float_mask = randn(2 * 2, 4, 5)
    padding = np.array([[False, False, False, True, True], [False] * 5])
    for kwargs in ({"attn_mask": bool_mask}, {"attn_mask": float_mask, "average_attn_weights": False},
                   {"key_padding_mask": padding, "attn_mask": bool_mask}):
        ours = mha(mg.tensor(q), mg.tensor(kv), mg.tensor(kv), **{k: mg.tensor(v) if k != "average_attn_weights"
                                                                 else v for k, v in kwargs.items()})
        theirs = t_mha(torch.tensor(q), torch.tensor(kv), torch.tensor(kv),
                       **{k: torch.tensor(v) if k != "average_attn_weights" else v for k, v in kwargs.items()})
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-6)
    causal = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(causal.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    with pytest.raises(RuntimeError, match="give the attn_mask too"):
        mha(mg.tensor(q), mg.tensor(kv), mg.tensor(kv), is_causal=True)


def test_transformer_encoder_with_causal_and_padding_masks_matches_pytorch():
    torch.manual_seed(0)
    make = lambda m: m.TransformerEncoder(m.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),  # noqa: E731
                                          num_layers=2, norm=m.LayerNorm(8))
    enc, t_enc = make(nn), make(torch.nn)
    loaded(enc, t_enc)
    x, padding = randn(2, 5, 8), np.array([[False] * 4 + [True], [False] * 5])
    y = enc(mg.tensor(x), mask=nn.Transformer.generate_square_subsequent_mask(5, dtype=mg.float64),
            src_key_padding_mask=mg.tensor(padding))
    t_y = t_enc(torch.tensor(x), mask=torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64),
                src_key_padding_mask=torch.tensor(padding))
    np.testing.assert_allclose(y.numpy(), t_y.detach().numpy(), atol=1e-9)


def test_batch_norm_training_updates_running_statistics_and_counts_batches_as_pytorch():
    for momentum in (0.1, None):
        torch.manual_seed(0)
        bn, t_bn = nn.BatchNorm2d(3, momentum=momentum), torch.nn.BatchNorm2d(3, momentum=momentum)
        loaded(bn, t_bn)
        for step in range(3):
            x = randn(4, 3, 2, 2) * (step + 1) + step
            y, t_y = bn(mg.tensor(x)), t_bn(torch.tensor(x))
            np.testing.assert_allclose(y.numpy(), t_y.detach().numpy(), atol=1e-10)
        for key, value in t_bn.state_dict().items():
            np.testing.assert_allclose(bn.state_dict()[key], value.numpy(), atol=1e-12, err_msg=key)
        assert bn.num_batches_tracked.dtype == mg.int64 and int(bn.num_batches_tracked.item()) == 3
        bn.eval(), t_bn.eval()
        x = randn(2, 3, 2, 2)
        np.testing.assert_allclose(bn(mg.tensor(x)).numpy(), t_bn(torch.tensor(x)).detach().numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="expected a 2-d or 3-d input, got shape"):
        nn.BatchNorm1d(3)(mg.zeros(2, 3, 4, 5))


def test_layers_start_from_pytorch_initial_distributions():
    mg.manual_seed(0)
    conv = nn.Conv2d(16, 8, 3)
    bound = 1 / np.sqrt(16 * 9)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.weight.numpy()).max() > 0.9 * bound
    assert np.abs(conv.bias.numpy()).max() <= bound
    lstm = nn.LSTM(5, 25)
    for p in lstm.parameters():
        assert np.abs(p.numpy()).max() <= 0.2 and np.abs(p.numpy()).max() > 0.18
    mha = nn.MultiheadAttention(16, 4)
    assert np.all(mha.in_proj_bias.numpy() == 0) and np.all(mha.out_proj.bias.numpy() == 0)
    xavier = np.sqrt(6 / (16 + 48))
    assert np.abs(mha.in_proj_weight.numpy()).max() <= xavier
    bn = nn.BatchNorm1d(4)
    assert bn.weight.numpy().tolist() == [1] * 4 and bn.running_var.numpy().tolist() == [1] * 4
    assert [k for k, _ in bn.state_dict().items()] == ["weight", "bias", "running_mean", "running_var",
                                                        "num_batches_tracked"]


def test_activation_layers_are_the_functions():
    x = mg.tensor(randn(3, 4), dtype=mg.float32)
    t_x = torch.tensor(x.numpy())
    for name, args in [("Identity", ()), ("Softmax", (1,)), ("Softmin", (0,)), ("SiLU", ()), ("LeakyReLU", (0.2,)),
                       ("ELU", (0.5,)), ("SELU", ()), ("CELU", ()), ("Softplus", (2.0, 10.0)), ("Softsign", ()),
                       ("Hardtanh", (-0.3, 0.4)), ("ReLU6", ()), ("Hardsigmoid", ()), ("Hardswish", ()),
                       ("Mish", ()), ("LogSigmoid", ()), ("Tanhshrink", ()), ("GLU", (1,)), ("PReLU", ())]:
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        np.testing.assert_allclose(ours(x).detach().numpy(), theirs(t_x).detach().numpy(), atol=1e-6,
                                   err_msg=name)
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    layer = nn.LeakyReLU(0.2)
    layer.negative_slope = 0.5  # a setting changed later counts, as in PyTorch
    np.testing.assert_allclose(layer(x).numpy(), torch.nn.LeakyReLU(0.5)(t_x).numpy(), atol=1e-7)


@pytest.mark.parametrize("make", [
    lambda m: m.Conv2d(1, 4, 3, padding=1), lambda m: m.Conv1d(2, 4, 3, stride=2, bias=False, groups=2,
                                                               padding_mode="reflect"),
    lambda m: m.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1),
    lambda m: m.MaxPool2d(2), lambda m: m.AvgPool2d(3, stride=1, padding=1), lambda m: m.AdaptiveAvgPool2d((1, 1)),
    lambda m: m.BatchNorm1d(4), lambda m: m.BatchNorm2d(4, affine=False), lambda m: m.GroupNorm(2, 4),
    lambda m: m.LSTM(8, 16, 2, batch_first=True),
    lambda m: m.GRUCell(3, 4), lambda m: m.RNN(3, 4, nonlinearity="relu", bidirectional=True),
    lambda m: m.LeakyReLU(0.2), lambda m: m.ELU(), lambda m: m.Softmax(dim=1), lambda m: m.Softplus(),
    lambda m: m.Hardtanh(), lambda m: m.Identity(), lambda m: m.PReLU(), lambda m: m.KLDivLoss(reduction="batchmean"),
    lambda m: m.ReLU(inplace=True), lambda m: m.Dropout(0.2, inplace=True),
])
def test_layers_print_as_pytorch_s(make):
    assert repr(make(nn)) == repr(make(torch.nn))


def test_module_double_float_half_convert_parameters_and_float_buffers_only():
    model = nn.Sequential(nn.Conv1d(2, 3, 3), nn.BatchNorm1d(3))
    assert model.double() is model
    assert {p.dtype for p in model.parameters()} == {mg.float64}
    assert model[1].running_mean.dtype == mg.float64 and model[1].num_batches_tracked.dtype == mg.int64
    model.half()
    assert {p.dtype for p in model.parameters()} == {mg.float16}
    model.float()
    assert {p.dtype for p in model.parameters()} == {mg.float32}
    assert model(mg.randn(2, 2, 5)).dtype == mg.float32


@pytest.mark.cuda
def test_the_layers_run_on_the_gpu_backend_as_on_the_cpu():
    """A small CNN with batch norm, an LSTM, an encoder layer, padded and transposed convolutions, on "cuda"
    (the CuPy stand-in in CI) and on the CPU from one state: the same outputs and gradients."""
    mg.manual_seed(0)
    models = [nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.GroupNorm(2, 4), nn.ReLU(),
                            nn.MaxPool2d(2),
                            nn.AvgPool2d(2, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten()),
              nn.LSTM(3, 4, batch_first=True, bidirectional=True),
              nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
              nn.Sequential(nn.Conv1d(3, 2, 3, padding=1, padding_mode="reflect"), nn.ELU(), nn.MaxPool1d(2),
                            nn.Conv1d(2, 2, 3, padding=2, padding_mode="circular")),
              nn.Sequential(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())]
    inputs = [randn(2, 2, 6, 6), randn(2, 5, 3), randn(2, 5, 8), randn(2, 3, 8), randn(2, 2, 3, 3)]
    for model, x in zip(models, inputs, strict=True):
        gpu = copy.deepcopy(model).to("cuda")
        outs = []
        for m, device in ((model, "cpu"), (gpu, "cuda")):
            y = m(mg.tensor(x, dtype=mg.float32, device=device))
            y = y[0] if isinstance(y, tuple) else y
            (y * y).sum().backward()
            outs.append((y.cpu().numpy(), [p.grad.cpu().numpy() for p in m.parameters()]))
        np.testing.assert_allclose(outs[0][0], outs[1][0], atol=1e-5)
        for a, b in zip(outs[0][1], outs[1][1], strict=True):
            np.testing.assert_allclose(a, b, atol=1e-4)
