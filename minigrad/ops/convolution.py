"""Convolution, pooling and padding (F.conv1d/conv2d, F.conv_transpose1d/2d, F.max_pool*, F.avg_pool*,
F.adaptive_*_pool*, F.pad), written as compositions of the primitives, so each has first and higher-order gradients
and runs on CuPy with no backward of its own. One idea serves them all: `windows` gathers every window of the input
by one strided slice per kernel offset (im2col); a convolution is then one matmul, a pooling a max or a mean over the
window axis, a transposed convolution a convolution of the input spread out by the stride. docs/layers.md derives it.
Shapes: B batch, C channels, O output channels, G groups, K elements of a window, L window positions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from minigrad.core import Tensor
from minigrad.ops.creation import full, ones
from minigrad.ops.shapes import cat, stack

Size = int | Sequence[int]


def _tuple(op: str, name: str, value: Size, n: int) -> tuple[int, ...]:
    """An int or n ints as n ints (kernel_size=3 is (3, 3) in 2-d), each checked to be an int."""
    values = (value,) * n if hasattr(value, "__index__") else tuple(value)
    if len(values) != n or not all(hasattr(v, "__index__") and not isinstance(v, bool) for v in values):
        raise ValueError(f"{op}: {name} must be an int or {n} ints, got {value!r}")
    return tuple(int(v) for v in values)


def _batched(op: str, x: Tensor, n: int) -> tuple[Tensor, bool]:
    """x as (B, C, *n spatial axes): an unbatched (C, *spatial) input gets a batch axis of 1, as PyTorch allows."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}-d (unbatched) or {n + 2}-d (batched) input, got shape {x.shape}")
    return (x.unsqueeze(0), True) if x.ndim == n + 1 else (x, False)


# ---- padding ----

def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """input padded as torch.nn.functional.pad: `pad` gives (before, after) pairs from the last axis backwards
    ((left, right, top, bottom) pads the last two); mode "constant" (with `value`, 0 by default; a negative width
    crops), "reflect" (mirror, the edge not repeated), "replicate" (the edge repeated) or "circular" (wrap around)."""
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim or not all(hasattr(p, "__index__") for p in pad):
        raise ValueError(f"pad: pad must be an even number of ints, two per padded axis, at most {2 * input.ndim} "
                         f"for an input of shape {input.shape}, got {pad}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if mode != "constant" and value:
        raise ValueError(f"pad: a value ({value}) is for mode 'constant' only, not {mode!r}")
    x = input
    for i in range(len(pad) // 2):
        axis, before, after = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before == after == 0:
            continue
        x = _pad_constant(x, axis, before, after, value or 0) if mode == "constant" else \
            _pad_by_index(x, axis, before, after, mode)
    return x


def _pad_constant(x: Tensor, axis: int, before: int, after: int, value: float) -> Tensor:
    """`before` and `after` values added along `axis` (a negative count crops there)."""
    n = x.shape[axis]
    x = x[(slice(None),) * axis + (slice(max(-before, 0), n - max(-after, 0)),)]
    before_x, after_x = [[full((*x.shape[:axis], width, *x.shape[axis + 1:]), value, dtype=x.dtype, device=x.device)]
                         if width > 0 else [] for width in (before, after)]
    return cat([*before_x, x, *after_x], dim=axis)


def _pad_by_index(x: Tensor, axis: int, before: int, after: int, mode: str) -> Tensor:
    """x gathered along `axis` at the positions -before ... n - 1 + after, each brought inside [0, n) by `mode`."""
    n = x.shape[axis]
    if mode == "reflect" and (before >= n or after >= n):
        raise ValueError(f"pad: reflect padding of ({before}, {after}) must be smaller than the padded axis, of size "
                         f"{n}, in an input of shape {x.shape}")
    if mode == "circular" and (before > n or after > n):
        raise ValueError(f"pad: circular padding of ({before}, {after}) may wrap around once, not more than the "
                         f"padded axis, of size {n}, in an input of shape {x.shape}")
    if mode == "reflect":  # ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
        i = [abs(j) if abs(j) < n else 2 * (n - 1) - abs(j) for j in range(-before, n + after)]
    else:
        i = [min(max(j, 0), n - 1) if mode == "replicate" else j % n for j in range(-before, n + after)]
    return x[(slice(None),) * axis + (i,)]


# ---- windows (im2col) and convolution ----

def windows(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
            op: str = "windows") -> Tensor:
    """Every window of x (B, C, *spatial, already padded) as (B, C, K, *out): K = prod(kernel) elements per window,
    one strided slice of x per kernel offset, so element k of every window comes from one view of x."""
    out = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(x.shape[2:], kernel, stride, dilation, strict=True)]
    if min(out) <= 0:
        raise ValueError(f"{op}: a kernel of {kernel} (dilation {dilation}) is larger than the padded input's "
                         f"{tuple(x.shape[2:])}")
    offsets = itertools.product(*(range(k) for k in kernel))
    return stack([x[(slice(None), slice(None), *(slice(o * d, o * d + s * (m - 1) + 1, s)
                                                 for o, d, s, m in zip(offset, dilation, stride, out, strict=True)))]
                  for offset in offsets], dim=2)  # (B, C, K, *out)


def _conv(op: str, n: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Size, padding: Size | str,
          dilation: Size, groups: int) -> Tensor:
    """y[b, o] = bias[o] + sum over c, k of weight[o, c, k] * window k of x[b, c]: the windows (im2col), then one
    matmul per group."""
    x, unbatched = _batched(op, input, n)
    stride, dilation = _tuple(op, "stride", stride, n), _tuple(op, "dilation", dilation, n)
    B, C = x.shape[:2]
    O, kernel = weight.shape[0], tuple(weight.shape[2:])  # noqa: E741  (O: output channels, as the shapes say)
    if weight.ndim != n + 2 or C % groups or O % groups or weight.shape[1] != C // groups:
        raise ValueError(f"{op}: a weight of shape {weight.shape} (out_channels, in_channels / groups, *kernel) does "
                         f"not fit an input of shape {input.shape} with groups={groups}")
    pairs = padding_pairs(op, padding, kernel, stride, dilation)  # (before, after) per spatial axis
    x = pad(x, [p for before_after in reversed(pairs) for p in before_after])
    cols = windows(x, kernel, stride, dilation, op)  # (B, C, K, *out)
    out = cols.shape[3:]
    cols = cols.reshape(B, groups, weight[0].numel(), math.prod(out))  # (B, G, C/G * K, L)
    w = weight.reshape(groups, O // groups, weight[0].numel())  # (G, O/G, C/G * K)
    y = (w @ cols).reshape(B, O, *out)  # (B, G, O/G, L) -> (B, O, *out)
    if bias is not None:
        y = y + bias.reshape(O, *(1,) * n)
    return y.squeeze(0) if unbatched else y


def padding_pairs(op: str, padding: Size | str, kernel: tuple[int, ...], stride: tuple[int, ...],
             dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    """(before, after) per spatial axis: "valid" is none, "same" keeps the size (stride 1; an odd total puts the
    extra one after, as PyTorch), an int or ints the same on both sides."""
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' needs stride 1, got stride {stride}")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or ints, got {padding!r}")
    return [(p, p) for p in _tuple(op, "padding", padding, len(kernel))]


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Size = 1, padding: Size | str = 0,
           dilation: Size = 1, groups: int = 1) -> Tensor:
    """(B, C, L) -> (B, O, L_out) with weight (O, C / groups, k), as torch.nn.functional.conv1d (a cross-correlation,
    as every deep-learning library's convolution)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Size = 1, padding: Size | str = 0,
           dilation: Size = 1, groups: int = 1) -> Tensor:
    """(B, C, H, W) -> (B, O, H_out, W_out) with weight (O, C / groups, kh, kw), as torch.nn.functional.conv2d."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


# ---- transposed convolution: a convolution of the input spread out by the stride ----

def _conv_transpose(op: str, n: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Size,
                    padding: Size, output_padding: Size, groups: int, dilation: Size) -> Tensor:
    """The gradient of a convolution with respect to its input, as a layer: x spread out by the stride (s - 1 zeros
    between neighbours), padded by d (k - 1) - p on each side (and output_padding more after), then convolved with
    stride 1 by the weight flipped in space, its in and out channels exchanged within each group."""
    x, unbatched = _batched(op, input, n)
    stride, padding = _tuple(op, "stride", stride, n), _tuple(op, "padding", padding, n)
    output_padding, dilation = _tuple(op, "output_padding", output_padding, n), _tuple(op, "dilation", dilation, n)
    C, kernel = x.shape[1], tuple(weight.shape[2:])
    if weight.ndim != n + 2 or weight.shape[0] != C or C % groups:
        raise ValueError(f"{op}: a weight of shape {weight.shape} (in_channels, out_channels / groups, *kernel) does "
                         f"not fit an input of shape {input.shape} with groups={groups}")
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than the stride {stride} or the "
                         f"dilation {dilation}")
    for axis, s in zip(range(2, 2 + n), stride, strict=True):  # spread out: (.., L, ..) -> (.., (L - 1) s + 1, ..)
        if s > 1:
            zeros = full(x.shape, 0.0, dtype=x.dtype, device=x.device)
            x = stack([x] + [zeros] * (s - 1), dim=axis + 1).flatten(axis, axis + 1)  # (.., L s, ..)
            x = x[(slice(None),) * axis + (slice(0, x.shape[axis] - s + 1),)]
    widths = [(d * (k - 1) - p, d * (k - 1) - p + o)
              for k, p, o, d in zip(kernel, padding, output_padding, dilation, strict=True)]
    x = pad(x, [w for pair in reversed(widths) for w in pair])
    G, O = groups, weight.shape[1] * groups  # noqa: E741  (O: output channels)
    w = weight.reshape(G, C // G, O // G, *kernel).transpose(1, 2).reshape(O, C // G, *kernel)
    y = _conv(op, n, x, w.flip(list(range(2, 2 + n))), bias, 1, 0, dilation, groups)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Size = 1, padding: Size = 0,
                     output_padding: Size = 0, groups: int = 1, dilation: Size = 1) -> Tensor:
    """(B, C, L) -> (B, O, (L - 1) s - 2 p + d (k - 1) + output_padding + 1) with weight (C, O / groups, k), as
    torch.nn.functional.conv_transpose1d: an upsampling layer (a decoder's, a GAN generator's)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Size = 1, padding: Size = 0,
                     output_padding: Size = 0, groups: int = 1, dilation: Size = 1) -> Tensor:
    """(B, C, H, W) -> (B, O, H_out, W_out) with weight (C, O / groups, kh, kw), as
    torch.nn.functional.conv_transpose2d."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# ---- pooling: a max or a mean over each window ----

class Pooling(NamedTuple):
    """A pooling's windows (B, C, K, *out) and how they were made: padding on both sides, then `extra` fill values
    after it (ceil_mode's last window), per spatial axis."""

    cols: Tensor
    unbatched: bool
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    extra: tuple[int, ...]


def _pool(op: str, n: int, input: Tensor, kernel_size: Size, stride: Size | None, padding: Size, dilation: Size,
          ceil_mode: bool, fill: float) -> Pooling:
    """The windows of the input padded with `fill`; with ceil_mode, PyTorch's rule for one more window: it may
    start in the right padding, never past it."""
    x, unbatched = _batched(op, input, n)
    kernel = _tuple(op, "kernel_size", kernel_size, n)
    stride = kernel if stride is None or stride == [] else _tuple(op, "stride", stride, n)
    padding, dilation = _tuple(op, "padding", padding, n), _tuple(op, "dilation", dilation, n)
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise ValueError(f"{op}: padding {padding} must be at most half of kernel_size {kernel}")
    extra = []
    for size, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation, strict=True):
        span = size + 2 * p - d * (k - 1) - 1  # the room the first window leaves
        out = -(-span // s) + 1 if ceil_mode else span // s + 1
        if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside the input or its padding
            out -= 1
        extra.append(max((out - 1) * s + d * (k - 1) + 1 - (size + 2 * p), 0))
    x = pad(x, [w for p, e in reversed(list(zip(padding, extra, strict=True))) for w in (p, p + e)], value=fill)
    return Pooling(windows(x, kernel, stride, dilation, op), unbatched, kernel, stride, padding, tuple(extra))


def _max_pool(op: str, n: int, input: Tensor, kernel_size: Size, stride: Size | None, padding: Size, dilation: Size,
              ceil_mode: bool, return_indices: bool) -> Tensor:
    if return_indices:
        raise NotImplementedError(f"{op}: return_indices=True is not supported (there is no max_unpool to use them)")
    pooled = _pool(op, n, input, kernel_size, stride, padding, dilation, ceil_mode, -math.inf)
    y = pooled.cols.amax(2)  # (B, C, *out); ties share the gradient (PyTorch gives it to the first)
    return y.squeeze(0) if pooled.unbatched else y


def max_pool1d(input: Tensor, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """The largest value of each window, as torch.nn.functional.max_pool1d (padding counts as -inf)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size: Size, stride: Size | None = None, padding: Size = 0, dilation: Size = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """The largest value of each window, as torch.nn.functional.max_pool2d (padding counts as -inf)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(op: str, n: int, input: Tensor, kernel_size: Size, stride: Size | None, padding: Size,
              ceil_mode: bool, count_include_pad: bool, divisor_override: int | None) -> Tensor:
    pooled = _pool(op, n, input, kernel_size, stride, padding, 1, ceil_mode, 0.0)
    cols = pooled.cols  # (B, C, K, *out)
    if divisor_override:
        y = cols.sum(2) / divisor_override
    elif not any(pooled.extra) and (count_include_pad or not any(pooled.padding)):
        y = cols.mean(2)
    else:  # divide by the count of the elements counted (the padding's too, if count_include_pad; never ceil_mode's
        # extra): the windows of a tensor of ones over what counts, zeros elsewhere
        counted = ones(1, 1, *input.shape[-n:], dtype=cols.dtype, device=cols.device)
        counted = pad(counted, [w for p in reversed(pooled.padding) for w in (p, p)], value=float(count_include_pad))
        counted = pad(counted, [w for e in reversed(pooled.extra) for w in (0, e)])
        y = cols.sum(2) / windows(counted, pooled.kernel, pooled.stride, (1,) * n).sum(2)
    return y.squeeze(0) if pooled.unbatched else y


def avg_pool1d(input: Tensor, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """The mean of each window, as torch.nn.functional.avg_pool1d (padding counts as 0, and in the count unless
    count_include_pad=False)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size: Size, stride: Size | None = None, padding: Size = 0,
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """The mean of each window, as torch.nn.functional.avg_pool2d (divisor_override: the sum divided by it)."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive(op: str, n: int, input: Tensor, output_size: Any, reduce: str) -> Tensor:
    """Output cell i of an axis of size L reduces input[floor(i L / out) : ceil((i + 1) L / out)], PyTorch's bins; a
    box's mean (or max) is taken one axis after another, which gives the same number."""
    x, unbatched = _batched(op, input, n)
    sizes = (output_size,) * n if output_size is None or hasattr(output_size, "__index__") else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"{op}: output_size must be an int or {n} ints (None keeps an axis), got {output_size!r}")
    for axis, out in zip(range(x.ndim - n, x.ndim), sizes, strict=True):
        size = x.shape[axis]
        out = size if out is None else out
        if out <= 0:
            raise ValueError(f"{op}: output_size must be positive, got {output_size!r}")
        bins = [x[(slice(None),) * axis + (slice(i * size // out, -(-(i + 1) * size // out)),)] for i in range(out)]
        x = cat([getattr(b, reduce)(axis, keepdim=True) for b in bins], dim=axis)
    return x.squeeze(0) if unbatched else x


def adaptive_avg_pool1d(input: Tensor, output_size: int) -> Tensor:
    """(B, C, L) -> (B, C, output_size): the mean of each of output_size near-equal bins."""
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size, "mean")


def adaptive_avg_pool2d(input: Tensor, output_size: Size) -> Tensor:
    """(B, C, H, W) -> (B, C, *output_size): the mean of each bin (output_size=1 is a global average pool)."""
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size, "mean")


def adaptive_max_pool1d(input: Tensor, output_size: int) -> Tensor:
    """(B, C, L) -> (B, C, output_size): the largest value of each bin."""
    return _adaptive("adaptive_max_pool1d", 1, input, output_size, "amax")


def adaptive_max_pool2d(input: Tensor, output_size: Size) -> Tensor:
    """(B, C, H, W) -> (B, C, *output_size): the largest value of each bin."""
    return _adaptive("adaptive_max_pool2d", 2, input, output_size, "amax")
