"""Recurrent layers (nn.RNN, nn.LSTM, nn.GRU and their cells), as torch.nn's: the same arguments, initialisation
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), parameter names (weight_ih_l0, weight_hh_l0_reverse, ...) and gate
layouts (LSTM: i, f, g, o; GRU: r, z, n), so that a PyTorch state_dict loads. Each cell is its paper's equations in
the primitives; a layer runs its cell over time, layer by layer, each direction on its own.
Shapes: T time, B batch, C input features, H hidden size, D directions (1 or 2).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn.init import uniform_
from minigrad.nn.layers import Module, empty
from minigrad.ops.creation import zeros
from minigrad.ops.shapes import cat, stack
from minigrad.tensor import Tensor

State = Tensor | tuple[Tensor, Tensor]  # h, or (h, c) for an LSTM


# ---- one step of each cell: the equations ----

def rnn_cell(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None,
             nonlinearity: str = "tanh") -> Tensor:
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)   (relu instead of tanh if asked)"""
    pre = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def lstm_cell(x: Tensor, state: tuple[Tensor, Tensor], w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
              b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    """i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (x W_ih^T + b_ih + h W_hh^T + b_hh), cut in four;
    c' = f * c + i * g;  h' = o * tanh(c')   (Hochreiter & Schmidhuber, with Gers' forget gate)"""
    h, c = state
    gates = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)  # (B, 4H)
    i, f, g, o = gates.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def gru_cell(x: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor:
    """r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr);  z the same with W_iz, W_hz;
    n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn));  h' = (1 - z) * n + z * h   (Cho et al.)"""
    x_r, x_z, x_n = F.linear(x, w_ih, b_ih).chunk(3, -1)  # each (B, H)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (1 - z) * n + z * h


GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(mode: str, x: Tensor, state: State, weights: list[Tensor | None]) -> State:
    if mode == "LSTM":
        return lstm_cell(x, state, *weights)
    if mode == "GRU":
        return gru_cell(x, state, *weights)
    return rnn_cell(x, state, *weights, nonlinearity="tanh" if mode == "RNN_TANH" else "relu")


def _init_uniform(module: Module, hidden_size: int) -> None:
    """Every weight and bias from U(-1/sqrt(H), 1/sqrt(H)), as PyTorch's recurrent layers."""
    bound = 1 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for p in module.parameters():
        uniform_(p, -bound, bound)


# ---- the layers ----

class RNNBase(Module):
    """The layers' common part: for layer l and direction d, weight_ih_l{l}[_reverse] (G H, C or D H), weight_hh
    (G H, H), bias_ih and bias_hh (G H,), G the gates. forward(input, hx) takes (T, B, C) ((B, T, C) if batch_first,
    (T, C) unbatched) and gives the last layer's outputs (T, B, D H) and each layer's last state (L D, B, H)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, *, dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        name = type(self).__name__
        if not (hasattr(hidden_size, "__index__") and hidden_size > 0 and hasattr(num_layers, "__index__")
                and num_layers > 0):
            raise ValueError(f"{name}: hidden_size and num_layers must be positive ints, got {hidden_size!r}, "
                             f"{num_layers!r}")
        if not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {dropout}")
        if dropout and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} acts between layers, after all but the last, so with "
                          "num_layers=1 it does nothing (as PyTorch's, which warns too)", stacklevel=3)
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, dropout, bidirectional
        self.proj_size = 0
        gate_size, directions = GATES[mode] * hidden_size, 2 if bidirectional else 1
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:directions]:
                inputs = input_size if layer == 0 else hidden_size * directions
                setattr(self, f"weight_ih_l{layer}{suffix}", empty((gate_size, inputs), dtype, device))
                setattr(self, f"weight_hh_l{layer}{suffix}", empty((gate_size, hidden_size), dtype, device))
                if bias:
                    setattr(self, f"bias_ih_l{layer}{suffix}", empty((gate_size,), dtype, device))
                    setattr(self, f"bias_hh_l{layer}{suffix}", empty((gate_size,), dtype, device))
        _init_uniform(self, hidden_size)

    def weights(self, layer: int, suffix: str) -> list[Tensor | None]:
        """[w_ih, w_hh, b_ih, b_hh] of one layer and direction (biases None where bias=False)."""
        return [getattr(self, f"{kind}_l{layer}{suffix}", None) for kind in ("weight_ih", "weight_hh", "bias_ih",
                                                                             "bias_hh")]

    def forward(self, input: Tensor, hx: State | None = None) -> tuple[Tensor, State]:
        name, lstm = type(self).__name__, self.mode == "LSTM"
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected an input of shape (T, B, {self.input_size}) (batch_first: (B, T, "
                             f"{self.input_size}); unbatched (T, {self.input_size})), got {input.shape}")
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else input.transpose(0, 1) if self.batch_first else input  # (T, B, C)
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, x.shape[1], self.hidden_size)  # (L D, B, H)
        if hx is None:
            h0 = zeros(*shape, dtype=x.dtype, device=x.device)
            hx = (h0, h0) if lstm else h0
        else:
            hx = tuple(h.unsqueeze(1) for h in hx) if lstm and unbatched else hx.unsqueeze(1) if unbatched else hx
            for h in (hx if lstm else (hx,)):
                if h.shape != shape:
                    raise ValueError(f"{name}: expected an initial state of shape {shape} ((L D, H) unbatched), got "
                                     f"{h.shape[:1] + h.shape[2:] if unbatched else h.shape}")
        last: list[State] = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                state = (hx[0][k], hx[1][k]) if lstm else hx[k]
                steps = range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))
                out = [None] * x.shape[0]
                for t in steps:
                    state = _step(self.mode, x[t], state, self.weights(layer, suffix))
                    out[t] = state[0] if lstm else state
                outputs.append(stack(out))  # (T, B, H)
                last.append(state)
            x = cat(outputs, dim=-1) if directions == 2 else outputs[0]  # (T, B, D H)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        if lstm:
            h_n = (stack([s[0] for s in last]), stack([s[1] for s in last]))
        else:
            h_n = stack(last)  # (L D, B, H)
        if unbatched:
            return x.squeeze(1), (tuple(h.squeeze(1) for h in h_n) if lstm else h_n.squeeze(1))
        return (x.transpose(0, 1) if self.batch_first else x), h_n

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        s += "" if self.num_layers == 1 else f", num_layers={self.num_layers}"
        s += "" if self.bias else ", bias=False"
        s += ", batch_first=True" if self.batch_first else ""
        s += f", dropout={self.dropout}" if self.dropout else ""
        return s + (", bidirectional=True" if self.bidirectional else "")


class RNN(RNNBase):
    """h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (nonlinearity="relu": relu), as torch.nn.RNN."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 **kwargs: Any) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """lstm_cell over time; forward(input, (h_0, c_0)) gives (output, (h_n, c_n)), as torch.nn.LSTM."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 **kwargs: Any) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         **kwargs)


class GRU(RNNBase):
    """gru_cell over time, as torch.nn.GRU."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 **kwargs: Any) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         **kwargs)


# ---- the cells: one step, as torch.nn.RNNCell, LSTMCell, GRUCell ----

class RNNCellBase(Module):
    """weight_ih (G H, C), weight_hh (G H, H), bias_ih and bias_hh (G H,); forward(input (B, C) or (C,), state)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True, *,
                 dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gate_size = GATES[self.mode] * hidden_size
        self.weight_ih = empty((gate_size, input_size), dtype, device)
        self.weight_hh = empty((gate_size, hidden_size), dtype, device)
        self.bias_ih = empty((gate_size,), dtype, device) if bias else None
        self.bias_hh = empty((gate_size,), dtype, device) if bias else None
        _init_uniform(self, hidden_size)

    def forward(self, input: Tensor, hx: State | None = None) -> State:
        name, lstm = type(self).__name__, self.mode == "LSTM"
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected an input of shape (B, {self.input_size}) or ({self.input_size},), "
                             f"got {input.shape}")
        x = input.unsqueeze(0) if input.ndim == 1 else input
        if hx is None:
            h0 = zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            hx = (h0, h0) if lstm else h0
        elif input.ndim == 1:
            hx = tuple(h.unsqueeze(0) for h in hx) if lstm else hx.unsqueeze(0)
        weights = [self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh]
        out = _step(self.mode, x, hx, weights)
        if input.ndim == 1:
            return tuple(h.squeeze(0) for h in out) if lstm else out.squeeze(0)
        return out

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu), one step."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 **kwargs: Any) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, bias, **kwargs)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    """lstm_cell, one step: forward(input, (h, c)) gives (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, **kwargs: Any) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, **kwargs)


class GRUCell(RNNCellBase):
    """gru_cell, one step."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, **kwargs: Any) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, **kwargs)
