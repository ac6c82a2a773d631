"""CASES, the table of every primitive (several shapes each) that gradcheck runs over, and its command line:
`python -m minigrad.check.gradcheck_cases` prints one line per case; the tests run the same table.
A new op adds its rows to CASES: a name, a function of float64 tensors, and the input shapes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minigrad import nn
from minigrad.array import backend
from minigrad.check.finite_differences import gradcheck
from minigrad.nn import functional as F
from minigrad.ops import elementwise, indexing, shapes
from minigrad.tensor import Tensor

# ---- the table: every primitive, several shapes ----

@dataclass
class Case:
    """fn applied to float64 inputs of these shapes, drawn from N(0, 1) (or U(0.5, 2) if positive)."""
    name: str
    fn: Callable[..., Tensor]
    shapes: tuple[tuple[int, ...], ...]
    positive: bool = False

    def inputs(self, device: str = "cpu", seed: int = 0) -> list[Tensor]:
        rng = np.random.default_rng(seed)
        draw = (lambda s: rng.uniform(0.5, 2.0, s)) if self.positive else rng.standard_normal
        return [Tensor.leaf(draw(s), requires_grad=True, device=device) for s in self.shapes]


def _seeded_dropout(x: Tensor) -> Tensor:
    backend.manual_seed(0)  # the same mask at every evaluation, so finite differences make sense
    return F.dropout(x, 0.3, training=True)


def _attention_head(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor) -> Tensor:
    """One causal attention head: softmax(mask(q k^T / sqrt(d))) v."""
    q, k, v = x @ wq, x @ wk, x @ wv  # (B, T, hs)
    scores = q @ k.transpose(-2, -1) * (1.0 / np.sqrt(q.shape[-1]))  # (B, T, T)
    # -inf where a key is in the future
    scores = elementwise.where(F.causal_mask(x.shape[1], device=x.device), scores, -np.inf)
    return F.softmax(scores) @ v


_TARGETS = np.array([[1, 0, 4], [2, 2, 3]])
_IGNORED = np.array([[1, -100, 4], [-100, 2, 3]])
_TOKENS = np.array([[0, 2, 0], [4, 2, 2]])
_MASK_2D = np.array([[True, False, False, True], [False, True, False, False], [False, False, True, True]])

CASES: list[Case] = [
    Case("add", lambda a, b: a + b, ((3, 4), (3, 4))),
    Case("add broadcast", lambda a, b: a + b, ((3, 1), (1, 4))),
    Case("add scalar tensor", lambda a, b: a + b, ((), (2, 3))),
    Case("add trailing", lambda a, b: a + b, ((2, 3, 4), (4,))),
    Case("sub broadcast", lambda a, b: a - b, ((3, 1), (1, 4))),
    Case("sub x - x", lambda x: x - x, ((2, 3),)),
    Case("mul", lambda a, b: a * b, ((2, 3), (2, 3))),
    Case("mul broadcast", lambda a, b: a * b, ((3, 1), (1, 4))),
    Case("mul x * x", lambda x: x * x, ((2, 3),)),
    Case("mul x * x of a scalar", lambda x: x * x, ((),)),
    Case("(x + x) * x of a scalar", lambda x: (x + x) * x, ((),)),
    Case("mul python scalar", lambda x: 2.5 * x, ((2, 3),)),
    Case("div", lambda a, b: a / b, ((2, 3), (2, 3)), positive=True),
    Case("div broadcast", lambda a, b: a / b, ((3, 1), (1, 4)), positive=True),
    Case("rdiv python scalar", lambda x: 1.0 / x, ((2, 3),), positive=True),
    Case("pow scalar exponent", lambda x: x**3, ((2, 3),)),
    Case("pow tensor exponent", lambda a, b: a**b, ((3, 1), (1, 4)), positive=True),
    Case("neg", lambda x: -x, ((2, 3),)),
    Case("exp", lambda x: x.exp(), ((2, 3, 4),)),
    Case("log", lambda x: x.log(), ((2, 3, 4),), positive=True),
    Case("sqrt", lambda x: x.sqrt(), ((2, 3, 4),), positive=True),
    Case("tanh", lambda x: x.tanh(), ((2, 3, 4),)),
    Case("sum all", lambda x: x.sum(), ((2, 3, 4),)),
    Case("sum axis 0", lambda x: x.sum(axis=0), ((2, 3, 4),)),
    Case("sum axes (0, 2) keepdims", lambda x: x.sum(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("mean all", lambda x: x.mean(), ((2, 3, 4),)),
    Case("mean axis 1", lambda x: x.mean(axis=1), ((2, 3, 4),)),
    Case("mean axis -1 keepdims", lambda x: x.mean(axis=-1, keepdims=True), ((3, 5),)),
    Case("max all", lambda x: x.max(), ((2, 3, 4),)),
    Case("amax axis 1", lambda x: x.amax(axis=1), ((2, 3, 4),)),
    Case("amax axes (0, 2) keepdims", lambda x: x.amax(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("max dim 1 values", lambda x: x.max(dim=1).values, ((2, 3, 4),)),
    Case("max dim 0 keepdim values", lambda x: x.max(0, keepdim=True)[0], ((4, 3),)),
    Case("reshape", lambda x: x.reshape(6, 4), ((2, 3, 4),)),
    Case("reshape -1", lambda x: x.reshape(-1), ((2, 3, 4),)),
    Case("permute", lambda x: x.permute(2, 0, 1), ((2, 3, 4),)),
    Case("transpose two dims", lambda x: x.transpose(0, -1), ((2, 3, 4),)),
    Case("transpose .T", lambda x: x.T, ((3, 5),)),
    Case("swapaxes", lambda x: x.swapaxes(0, 2), ((2, 3, 4),)),
    Case("getitem slices", lambda x: x[1:, ::2], ((3, 5),)),
    Case("getitem int and None", lambda x: x[1, None, :, -1], ((3, 4, 5),)),
    Case("getitem repeated ints", lambda x: x[[0, 2, 0, 0]], ((3, 4),)),
    Case("getitem columns", lambda x: x[:, np.array([1, 1, 3])], ((2, 5),)),
    Case("matmul", lambda a, b: a @ b, ((3, 4), (4, 5))),
    Case("matmul batched @ 2-D", lambda a, b: a @ b, ((2, 3, 4), (4, 5))),
    Case("matmul broadcast batch", lambda a, b: a @ b, ((2, 1, 3, 4), (5, 4, 2))),
    Case("matmul transposed inputs", lambda a, b: a.T @ b.T, ((4, 3), (5, 4))),
    Case("matmul vector @ matrix", lambda a, b: a @ b, ((4,), (4, 5))),
    Case("matmul matrix @ vector", lambda a, b: a @ b, ((3, 4), (4,))),
    Case("matmul vector @ vector", lambda a, b: a @ b, ((4,), (4,))),
    Case("linear", lambda x, w, b: F.linear(x, w, b), ((2, 3, 4), (5, 4), (5,))),
    Case("linear no bias", lambda x, w: F.linear(x, w), ((3, 4), (2, 4))),
    Case("softmax last axis", lambda x: F.softmax(x), ((2, 3, 5),)),
    Case("softmax axis 0", lambda x: F.softmax(x, axis=0), ((4, 3),)),
    Case("softmax axis 1", lambda x: F.softmax(x, axis=1), ((2, 4, 3),)),
    Case("log_softmax last axis", lambda x: F.log_softmax(x), ((2, 3, 5),)),
    Case("log_softmax axis 0", lambda x: F.log_softmax(x, axis=0), ((4, 3),)),
    Case("softmax of a scalar", lambda x: F.softmax(x), ((),)),
    Case("log_softmax of a scalar", lambda x: F.log_softmax(x), ((),)),
    Case("masked_fill broadcast mask", lambda x: F.masked_fill(x, _MASK_2D, -7.0), ((2, 3, 4),)),
    Case("masked_fill row mask", lambda x: F.masked_fill(x, _MASK_2D[:1], 0.0), ((3, 4),)),
    Case("layer_norm", lambda x, w, b: F.layer_norm(x, 8, w, b), ((2, 3, 8), (8,), (8,))),
    Case("layer_norm no affine", lambda x: F.layer_norm(x, (6,)), ((4, 6),)),
    Case("layer_norm over two axes", lambda x, w, b: F.layer_norm(x, (3, 4), w, b), ((2, 3, 4), (3, 4), (3, 4))),
    Case("cross_entropy", lambda x: F.cross_entropy(x, _TARGETS), ((2, 5, 3),)),
    Case("cross_entropy ignore_index", lambda x: F.cross_entropy(x, _IGNORED, ignore_index=-100), ((2, 5, 3),)),
    Case("embedding repeated indices", lambda w: F.embedding(_TOKENS, w), ((5, 3),)),
    Case("gelu tanh", lambda x: F.gelu(x, approximate="tanh"), ((2, 3, 4),)),
    Case("gelu tanh of a scalar", lambda x: F.gelu(x, approximate="tanh"), ((),)),
    Case("relu", lambda x: F.relu(x), ((2, 3, 4),)),
    Case("dropout", _seeded_dropout, ((3, 4),)),
    Case("cat dim 1", lambda a, b: shapes.cat([a, b], dim=1), ((2, 3), (2, 1))),
    Case("cat three", lambda a, b, c: shapes.cat([a, b, c]), ((1, 3), (2, 3), (1, 3))),
    Case("composite linear + layer_norm + gelu",
         lambda x, w, b, g, h: F.gelu(F.layer_norm(x @ w + b, g.shape, g, h), approximate="tanh"),
         ((2, 3, 4), (4, 6), (6,), (6,), (6,))),
    Case("composite attention head", _attention_head, ((2, 4, 6), (6, 3), (6, 3), (6, 3))),
]

# ---- more math (issue 11): elementwise, activations, reductions ----

CASES += [
    Case("sigmoid", lambda x: x.sigmoid(), ((2, 3, 4),)),
    Case("sigmoid of large values", lambda x: (x * 20.0).sigmoid(), ((3, 5),)),
    Case("silu", lambda x: F.silu(x), ((2, 3, 4),)),
    Case("leaky_relu", lambda x: F.leaky_relu(x), ((2, 3, 4),)),
    Case("leaky_relu slope 0.2", lambda x: F.leaky_relu(x, negative_slope=0.2), ((3, 5),)),
    Case("abs", lambda x: x.abs(), ((3, 5),)),
    Case("rsqrt", lambda x: x.rsqrt(), ((2, 3, 4),), positive=True),
    Case("sin", lambda x: x.sin(), ((2, 3, 4),)),
    Case("cos", lambda x: x.cos(), ((2, 3, 4),)),
    Case("erf", lambda x: x.erf(), ((2, 3, 4),)),
    Case("erf of large values", lambda x: (x * 4.0).erf(), ((3, 5),)),
    Case("erfc", lambda x: x.erfc(), ((2, 3, 4),)),
    Case("gelu exact (default)", lambda x: F.gelu(x), ((2, 3, 4),)),
    Case("maximum broadcast", lambda a, b: a.maximum(b), ((3, 1), (1, 4))),
    Case("maximum batched", lambda a, b: elementwise.maximum(a, b), ((2, 3, 4), (4,))),
    Case("maximum python scalar", lambda x: elementwise.maximum(x, 0.25), ((3, 5),)),
    Case("minimum broadcast", lambda a, b: a.minimum(b), ((2, 1, 4), (3, 1))),
    Case("where broadcast", lambda a, b: elementwise.where(_MASK_2D, a, b), ((3, 1), (1, 4))),
    Case("where batched", lambda a, b: elementwise.where(_MASK_2D, a, b), ((2, 3, 4), (4,))),
    Case("where python scalar", lambda x: x.where(_MASK_2D, 0.5), ((3, 4),)),
    Case("clamp", lambda x: x.clamp(min=-0.5, max=0.7), ((3, 5),)),
    Case("clamp min only", lambda x: x.clamp(min=0.1), ((2, 3, 4),)),
    Case("clip max only", lambda x: x.clip(max=-0.2), ((2, 3, 4),)),
    Case("min all", lambda x: x.min(), ((2, 3, 4),)),
    Case("amin axis 1", lambda x: x.amin(axis=1), ((2, 3, 4),)),
    Case("amin axes (0, 2) keepdims", lambda x: x.amin(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("min dim 1 values", lambda x: x.min(dim=1).values, ((2, 3, 4),)),
    Case("min dim 0 keepdim values", lambda x: x.min(0, keepdim=True)[0], ((4, 3),)),
    Case("var all", lambda x: x.var(), ((2, 3, 4),)),
    Case("var axis 1 correction 0", lambda x: x.var(1, correction=0), ((2, 3, 4),)),
    Case("var axes (0, 2) keepdims", lambda x: x.var((0, 2), keepdims=True), ((2, 3, 4),)),
    Case("var unbiased=False", lambda x: x.var(-1, unbiased=False), ((3, 5),)),
    Case("std axis -1", lambda x: x.std(-1), ((3, 5),)),
    Case("std all correction 2", lambda x: x.std(correction=2), ((2, 3, 4),)),
    Case("prod all", lambda x: x.prod(), ((2, 3),)),
    Case("prod axis 1", lambda x: x.prod(axis=1), ((3, 4),)),
    Case("prod axes (0, 2) keepdims", lambda x: x.prod(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("logsumexp axis 1", lambda x: x.logsumexp(1), ((2, 3, 4),)),
    Case("logsumexp axes (0, 2) keepdims", lambda x: x.logsumexp((0, 2), keepdims=True), ((2, 3, 4),)),
    Case("logsumexp axis -1", lambda x: x.logsumexp(-1), ((3, 5),)),
    Case("cumsum axis 0", lambda x: x.cumsum(0), ((3, 4),)),
    Case("cumsum axis -1", lambda x: x.cumsum(-1), ((2, 3, 4),)),
    Case("cumsum axis 1", lambda x: x.cumsum(1), ((2, 3, 4),)),
    Case("composite SwiGLU feed-forward", lambda x, w1, w2, w3: (F.silu(x @ w1) * (x @ w2)) @ w3,
         ((2, 3, 4), (4, 6), (4, 6), (6, 4))),
    Case("composite RMS norm by rsqrt", lambda x, g: x * ((x * x).mean(axis=-1, keepdims=True) + 1e-6).rsqrt() * g,
         ((2, 3, 8), (8,))),
]


# ---- PyTorch's shape ops, RMS norm, attention, and cross-entropy's options ----

def _split_sizes(x: Tensor) -> Tensor:
    """Pieces of sizes 1, 3, 2 put back in another order, each used differently."""
    a, b, c = x.split([1, 3, 2], dim=1)
    return shapes.cat([c * 2.0, a, b * b], dim=1)


def _split_one_unused(x: Tensor) -> Tensor:
    a, _, c = x.split(2, dim=-1)  # the middle piece gets no gradient: its part of dx must be 0
    return a * c


def _split_piece_twice(x: Tensor) -> Tensor:
    a, b = x.split(2, dim=1)
    return a * b + a


def _split_uneven(x: Tensor) -> Tensor:
    a, b, c = x.split(2)  # 5 rows: 2, 2, 1
    return shapes.cat([a * 3.0, b, c * c])


def _chunk_broadcast(x: Tensor) -> Tensor:
    a, b, c = x.chunk(3, dim=-1)  # 7 columns: 3, 3, 1
    return a * b + c


def _seeded_attention_dropout(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    backend.manual_seed(0)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)


_GATHER_1 = np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]])
_GATHER_0 = np.array([[[3, 0], [1, 1]], [[2, 2], [0, 3]]])
_SEES = np.array([[True, True, False, False, True], [False, False, False, False, False],
                  [True, False, True, True, True]])  # query 1 may see no key: its output and gradient are 0

CASES += [
    Case("stack dim 1", lambda a, b, c: shapes.stack([a, b, c], dim=1), ((2, 3), (2, 3), (2, 3))),
    Case("stack dim -1 batched", lambda a, b: shapes.stack([a, b], dim=-1), ((2, 3, 4), (2, 3, 4))),
    Case("split sizes list", _split_sizes, ((2, 6),)),
    Case("split a piece unused", _split_one_unused, ((2, 3, 6),)),
    Case("split a piece used twice", _split_piece_twice, ((3, 4),)),
    Case("split uneven", _split_uneven, ((5, 3),)),
    Case("chunk uneven broadcast", _chunk_broadcast, ((2, 4, 7),)),
    Case("squeeze all", lambda x: x.squeeze(), ((2, 1, 3, 1),)),
    Case("squeeze dims", lambda x: shapes.squeeze(x, (0, 1)), ((2, 1, 3),)),
    Case("unsqueeze outer product", lambda x: x.unsqueeze(-1) * shapes.unsqueeze(x, 1), ((2, 3),)),
    Case("expand", lambda x: x.expand(2, -1, 4), ((3, 1),)),
    Case("broadcast_to", lambda x: shapes.broadcast_to(x, (2, 3, 4)), ((3, 1),)),
    Case("expand new and stretched axes", lambda x, y: x.expand(2, 3, 4) * y, ((1, 4), (2, 3, 4))),
    Case("flatten", lambda x: x.flatten(1), ((2, 3, 4),)),
    Case("flatten middle", lambda x: shapes.flatten(x, 1, 2), ((2, 3, 4, 2),)),
    Case("unflatten", lambda x: x.unflatten(1, (3, -1)), ((2, 12),)),
    Case("flip two dims", lambda x: x.flip(0, 2), ((2, 3, 4),)),
    Case("flip last dim", lambda x: shapes.flip(x, -1), ((3, 5),)),
    Case("tril batched", lambda x: x.tril(), ((2, 3, 4),)),
    Case("tril diagonal -1", lambda x: shapes.tril(x, -1), ((4, 3),)),
    Case("triu diagonal 1", lambda x: x.triu(1), ((2, 3, 5),)),
    Case("repeat", lambda x: x.repeat(2, 3), ((2, 3),)),
    Case("repeat new axis", lambda x: x.repeat(2, 1, 3), ((3, 2),)),
    Case("gather dim 1 repeated", lambda x: x.gather(1, _GATHER_1), ((3, 4),)),
    Case("gather dim 0 smaller index", lambda x: shapes.gather(x, 0, _GATHER_0), ((4, 3, 2),)),
    Case("scatter_add repeated places", lambda x, s: indexing.scatter_add(x, 1, _GATHER_1, s), ((3, 4), (3, 3))),
    Case("index_add", lambda x, s: indexing.index_add(x, 0, [2, 0, 2], s, alpha=0.5), ((3, 4), (3, 4))),
    Case("log10 log2 log1p", lambda x: x.log10() * x.log2() + x.log1p(), ((2, 3, 4),), positive=True),
    Case("expm1", lambda x: x.expm1(), ((2, 3, 4),)),
    Case("rms_norm", lambda x, w: F.rms_norm(x, (8,), w, eps=1e-5), ((2, 3, 8), (8,))),
    Case("rms_norm two axes eps None", lambda x, w: F.rms_norm(x, (3, 4), w), ((2, 3, 4), (3, 4))),
    Case("rms_norm no weight", lambda x: F.rms_norm(x, 5), ((3, 5),)),
    Case("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), ((2, 3, 4), (2, 5, 4), (2, 5, 6))),
    Case("sdpa causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         ((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 5))),
    Case("sdpa causal T_q < T_k", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         ((1, 2, 2, 3), (1, 2, 5, 3), (1, 2, 5, 3))),
    Case("sdpa bool mask broadcast batch", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, _SEES),
         ((2, 1, 3, 4), (1, 2, 5, 4), (5, 3))),
    Case("sdpa float mask and scale", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, scale=0.3),
         ((2, 3, 4), (2, 5, 4), (2, 5, 2), (3, 5))),
    Case("sdpa dropout", _seeded_attention_dropout, ((2, 3, 4), (2, 3, 4), (2, 3, 4))),
    Case("cross_entropy sum", lambda x: F.cross_entropy(x, _TARGETS, reduction="sum"), ((2, 5, 3),)),
    Case("cross_entropy none ignore_index", lambda x: F.cross_entropy(x, _IGNORED, reduction="none"), ((2, 5, 3),)),
    Case("cross_entropy smoothing ignore_index",
         lambda x: F.cross_entropy(x, _IGNORED, label_smoothing=0.2), ((2, 5, 3),)),
    Case("cross_entropy probabilities", lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1),
         ((2, 3, 5), (2, 3, 5))),
    Case("cross_entropy probabilities none", lambda x, p: F.cross_entropy(x, p, reduction="none"), ((4, 5), (4, 5))),
]


# ---- regression and binary losses ----

_PROBS = np.array([[0.0, 0.3, 1.0, 0.7], [0.5, 1.0, 0.0, 0.2], [0.9, 0.1, 0.4, 1.0]])  # targets in [0, 1]
_CLASS_WEIGHT = np.array([0.5, 2.0, 1.0, 0.1])  # one per class, the last axis
_ROW_WEIGHT = np.array([[1.5], [0.2], [1.0]])
_POS_WEIGHT = np.array([3.0, 0.5, 1.0, 2.0])

CASES += [
    Case("mse_loss", lambda x, y: F.mse_loss(x, y), ((3, 4), (3, 4))),
    Case("mse_loss sum", lambda x, y: F.mse_loss(x, y, reduction="sum"), ((2, 3, 4), (2, 3, 4))),
    Case("mse_loss none", lambda x, y: F.mse_loss(x, y, reduction="none"), ((3, 5), (3, 5))),
    Case("mse_loss array target", lambda x: F.mse_loss(x, _PROBS), ((3, 4),)),
    Case("bce_with_logits", lambda x: F.binary_cross_entropy_with_logits(x, _PROBS), ((3, 4),)),
    Case("bce_with_logits target gradient", lambda x, t: F.binary_cross_entropy_with_logits(x, t), ((2, 5), (2, 5))),
    Case("bce_with_logits weight pos_weight sum",
         lambda x, t: F.binary_cross_entropy_with_logits(x, t, _CLASS_WEIGHT, pos_weight=_POS_WEIGHT, reduction="sum"),
         ((3, 4), (3, 4))),
    Case("bce_with_logits row weight none",
         lambda x: F.binary_cross_entropy_with_logits(x, _PROBS, _ROW_WEIGHT, reduction="none"), ((3, 4),)),
    Case("bce_with_logits large logits",
         lambda x: F.binary_cross_entropy_with_logits(x * 30.0, _PROBS, pos_weight=_POS_WEIGHT), ((3, 4),)),
    Case("CrossEntropyLoss layer smoothing", lambda x: nn.CrossEntropyLoss(label_smoothing=0.1)(x, _IGNORED),
         ((2, 5, 3),)),
    Case("MSELoss layer sum", lambda x, y: nn.MSELoss(reduction="sum")(x, y), ((4, 3), (4, 3))),
    Case("BCEWithLogitsLoss layer", lambda x: nn.BCEWithLogitsLoss(pos_weight=_POS_WEIGHT)(x, _PROBS), ((3, 4),)),
]

def run_table(cases: list[Case], device: str = "cpu") -> bool:
    """Check every case and print one line each; True when all pass."""
    print(f"{'op':<38} {'input shapes':<38} {'max abs err':>11} {'max rel err':>11}  result")
    all_passed = True
    for case in cases:
        result = gradcheck(case.fn, *case.inputs(device), raise_exception=False)
        shapes = ", ".join(str(s) for s in case.shapes)
        verdict = "pass" if result else "FAIL  " + "; ".join(result.failures())
        print(f"{case.name:<38} {shapes:<38} {result.max_abs_err:>11.2e} {result.max_rel_err:>11.2e}  {verdict}")
        all_passed &= result.passed
    print(f"\n{len(cases)} checks on {device}: {'all passed' if all_passed else 'SOME FAILED'}")
    return all_passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minigrad.check.gradcheck_cases",
        description="Check every primitive's backward against finite differences (float64).")
    parser.add_argument("--device", choices=backend.DEVICES, default="cpu")
    parser.add_argument("-k", metavar="TEXT", help="only the ops whose name contains TEXT")
    args = parser.parse_args(argv)
    try:
        backend.check_device(args.device)
    except RuntimeError as err:
        parser.exit(2, f"error: {err}\n")
    cases = [c for c in CASES if args.k is None or args.k in c.name]
    if not cases:  # a filter that checks nothing must not report "all passed"
        parser.exit(2, f"error: -k {args.k!r} matches no case; the cases are named as the first column of "
                       "`python -m minigrad.check.gradcheck_cases` prints them\n")
    return 0 if run_table(cases, args.device) else 1


if __name__ == "__main__":
    sys.exit(main())
