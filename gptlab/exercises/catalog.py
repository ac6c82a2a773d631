"""The exercises, in the reading route's order: each one the forward of a Function whose backward the learner
writes, the cases it is checked on (smallest first, odd shapes, broadcasting), the engine's reference (its own
Function, or autograd of the same composition), the hints (the derivation, a line at a time) and what to read next.
"""

from __future__ import annotations

import math

import numpy as np

import minigrad.nn.functional as F
from gptlab.exercises.exercise import Exercise, causal, floats, masked_scores
from gptlab.exercises.gpt import GPT
from minigrad.ops.activations import GeluFunction, LogSoftmaxFunction, SoftmaxFunction
from minigrad.ops.elementwise import Add, MaskedFillFunction, Mul, Tanh
from minigrad.ops.losses import CrossEntropyFunction
from minigrad.ops.matmul import MatMul
from minigrad.ops.normalization import LayerNormFunction
from minigrad.ops.sdpa import ScaledDotProductAttentionFunction, scores_backward
from minigrad.ops.shapes import EmbeddingFunction
from minigrad.tensor import Tensor


def attention_head(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor) -> Tensor:
    """One causal attention head, in the walkthrough's steps (models/attention.py): the composition whose autograd
    is the answer to the exercise `head`."""
    q, k, v = x @ wq, x @ wk, x @ wv  # (B, T, hs) each
    scores = (q @ k.transpose(-2, -1) * (1 / math.sqrt(wq.shape[1]))).masked_fill(~causal(x.shape[1]), -math.inf)
    return F.softmax(scores, -1) @ v  # (B, T, T) @ (B, T, hs)


BINARY_CASES = ((3,), (3,)), ((2, 3), (3,)), ((2, 1, 4), (3, 1))
SOFTMAX_SHAPES = (1, 3), (2, 5), (2, 3, 4)
STABLE_SOFTMAX = "from minigrad.array.arrays import stable_softmax"
SHIFT = ("{op} does not change when a constant is added to a row of x, so moving x along (1, ..., 1) changes "
         "nothing and dx must sum to 0 along each row; yours does not: {term}")

EXERCISES = (
    Exercise(
        "add", "add with broadcasting (unbroadcast)", "Add", ("a", "b"), "z = a + b  (a and b broadcast)",
        "    def forward(self, a, b):\n        self.a_shape, self.b_shape = a.shape, b.shape\n        return a + b\n",
        "(da, db): da of shape self.a_shape, db of shape self.b_shape",
        lambda rng: [(floats(rng, *shapes), {}) for shapes in BINARY_CASES], lambda a, b: a + b, (Add,),
        "Broadcasting: the adjoint of a copy is a sum",
        ("z = a + b, so dz/da = 1 and dz/db = 1: each starts as dout, of the broadcast shape.",
         "Where broadcasting copied a (axes added in front, axes of length 1 stretched), the copies' gradients add "
         "up: sum dout over those axes (keepdims=True on the stretched ones), then reshape to a's shape.")),
    Exercise(
        "mul", "mul with broadcasting", "Mul", ("a", "b"), "z = a * b  (a and b broadcast)",
        "    def forward(self, a, b):\n        self.a, self.b = a, b\n        return a * b\n",
        "(da, db): da of shape self.a.shape, db of shape self.b.shape",
        lambda rng: [(floats(rng, *shapes), {}) for shapes in BINARY_CASES], lambda a, b: a * b, (Mul,),
        "Broadcasting: the adjoint of a copy is a sum",
        ("z = a * b, so dz/da = b: da = dout * b, of the broadcast shape, and db = dout * a.",
         "Then each is summed back over the axes its input was broadcast along, as in the exercise add "
         "(minigrad.array.arrays.unbroadcast does it)."),
        imports="from minigrad.array.arrays import unbroadcast  # the sum you wrote in the exercise add"),
    Exercise(
        "matmul", "matmul with batches", "MatMul", ("a", "b"), "z = a @ b  (a (..., n, k), b (..., k, m): batch axes "
        "broadcast)",
        "    def forward(self, a, b):\n        self.a, self.b = a, b\n        return a @ b  # (..., n, m)\n",
        "(da, db): da of shape self.a.shape, db of shape self.b.shape",
        lambda rng: [(floats(rng, *shapes), {}) for shapes in (((2, 3), (3, 4)), ((2, 2, 3), (3, 4)),
                                                                ((2, 1, 2, 3), (3, 3, 4)))],
        lambda a, b: a @ b, (MatMul,), "Matrix product",
        ("z_ij = sum_k a_ik b_kj, so dz_ij/da_ik = b_kj: da = dout @ b^T (swap b's last two axes), of a's shape "
         "but for the batch axes.",
         "dz_ij/db_kj = a_ik: db = a^T @ dout; each then summed over the batch axes its input was broadcast along."),
        imports="from minigrad.array.arrays import unbroadcast  # the sum you wrote in the exercise add"),
    Exercise(
        "tanh", "tanh", "Tanh", ("x",), "y = tanh(x)",
        "    def forward(self, x):\n        self.y = backend.get_array_module(x).tanh(x)\n        return self.y\n",
        "(dx,): of shape x's, which is dout's", lambda rng: [(floats(rng, s), {}) for s in ((3,), (2, 3))],
        lambda x: x.tanh(), (Tanh,), "Every backward, derived",
        ("tanh(x) = (e^x - e^-x) / (e^x + e^-x); its derivative is 1 - tanh(x)^2, which forward already has as y.",
         "dx = dout * (1 - y^2): take y with self.saved(self.y, \"output\").")),
    Exercise(
        "gelu", "GELU (GPT-2's tanh form)", "Gelu", ("x",),
        "y = x h,  h = 0.5 (1 + tanh(u)),  u = c (x + 0.044715 x^3),  c = sqrt(2 / pi)",
        "    def forward(self, x):\n        self.x = x\n        u = C * (x + K * x * x * x)\n"
        "        return 0.5 * x * (1 + backend.get_array_module(x).tanh(u))\n",
        "(dx,): of shape x's", lambda rng: [(floats(rng, s), {}) for s in ((3,), (2, 5))],
        GeluFunction.apply, (GeluFunction,), "GELU (tanh form)",
        ("y = x h, so dy/dx = h + x dh/dx (the product rule).",
         "dh/dx = 0.5 (1 - tanh(u)^2) du/dx, du/dx = c (1 + 3 * 0.044715 x^2); and 0.5 (1 - tanh(u)^2) = 2 h (1 - h).",
         "dx = dout * (h + x * 2 h (1 - h) * c (1 + 3 * 0.044715 x^2)), h recomputed from the saved x."),
        imports="C, K = math.sqrt(2 / math.pi), 0.044715"),
    Exercise(
        "softmax", "softmax", "Softmax", ("x",), "y = exp(x - max) / sum(exp(x - max)) along the last axis",
        "    def forward(self, x):\n        self.y = stable_softmax(x, -1)\n        return self.y\n",
        "(dx,): of shape x's", lambda rng: [(floats(rng, s), {}) for s in SOFTMAX_SHAPES],
        SoftmaxFunction.apply, (SoftmaxFunction,), "Softmax",
        ("Every y_j depends on every x_i (through the sum): dy_j/dx_i = y_j (delta_ij - y_i).",
         "dx_i = sum_j dout_j dy_j/dx_i = y_i dout_i - y_i sum_j dout_j y_j: the sum along the last axis, keepdims."),
        {"x": SHIFT.format(op="softmax", term="softmax's sum term is missing (y depends on every x through the sum)")},
        STABLE_SOFTMAX),
    Exercise(
        "log_softmax", "log-softmax", "LogSoftmax", ("x",), "y = x - max - log(sum(exp(x - max))) along the last axis",
        "    def forward(self, x):\n        self.y = stable_softmax(x, -1, log=True)\n        return self.y\n",
        "(dx,): of shape x's", lambda rng: [(floats(rng, s), {}) for s in SOFTMAX_SHAPES],
        LogSoftmaxFunction.apply, (LogSoftmaxFunction,), "log_softmax and cross-entropy",
        ("y_j = x_j - log(sum_i exp(x_i)), so dy_j/dx_i = delta_ij - softmax(x)_i, and softmax(x) = exp(y).",
         "dx_i = dout_i - exp(y_i) * sum_j dout_j: the sum along the last axis, keepdims."),
        {"x": SHIFT.format(op="log_softmax", term="the sum term is missing (every y depends on every x through "
                                                "log(sum(exp(x))))")},
        STABLE_SOFTMAX),
    Exercise(
        "cross_entropy", "cross-entropy (mean over rows)", "CrossEntropy", ("logits",),
        "loss = mean_i -log softmax(logits_i)[t_i]  (logits (N, V), targets t (N,))",
        "    def forward(self, logits, targets, counted=None, smoothing=0.0, reduction=\"mean\"):\n"
        "        # here every row is counted, no smoothing, the mean over the N rows (the engine's options)\n"
        "        xp = backend.get_array_module(logits)\n"
        "        self.probs, self.targets = stable_softmax(logits, -1), targets  # (N, V), (N,)\n"
        "        return -xp.log(self.probs[xp.arange(logits.shape[0]), targets]).mean()\n",
        "(dlogits,): of shape (N, V); dout is a 0-d array (the loss is one number)",
        lambda rng: [([rng.standard_normal((n, v))], {"targets": t, "counted": np.ones(n), "smoothing": 0.0,
                                                       "reduction": "mean"})
                     for n, v, t in ((1, 3, np.array([2])), (4, 5, np.array([1, 0, 4, 1])))],
        lambda logits, targets, **_: F.cross_entropy(logits, targets), (CrossEntropyFunction,),
        "log_softmax and cross-entropy",
        ("loss_i = -log softmax(x_i)[t_i] = log(sum_c exp(x_ic)) - x_it: d loss_i / d x_ic = softmax(x_i)_c - "
         "one_hot(t_i)_c.",
         "The mean over N rows multiplies each row's by 1/N, and the chain rule by dout: dlogits = dout * "
         "(probs - one_hot) / N."),
        {"logits": "dlogits must sum to 0 along each row (softmax's sum is 1, and the one-hot's too); yours does not: "
            "the softmax term or the one-hot term is missing"},
        STABLE_SOFTMAX),
    Exercise(
        "layer_norm", "layer norm", "LayerNorm", ("x", "w", "b"),
        "y = xhat * w + b,  xhat = (x - mean) * rstd over the last axis,  rstd = 1 / sqrt(var + eps)",
        "    def forward(self, x, w, b, eps):\n        xp = backend.get_array_module(x)\n"
        "        mean = x.mean(axis=-1, keepdims=True)  # (..., 1)\n"
        "        rstd = 1 / xp.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)  # (..., 1)\n"
        "        self.xhat, self.rstd, self.w = (x - mean) * rstd, rstd, w  # (..., C), (..., 1), (C,)\n"
        "        return self.xhat * w + b\n",
        "(dx, dw, db): dx of x's shape, dw and db of shape (C,)",
        lambda rng: [(floats(rng, s, s[-1:], s[-1:]), {"eps": 1e-5}) for s in ((1, 4), (3, 5), (2, 3, 4))],
        lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps=eps), (LayerNormFunction,),
        "Layer norm: three paths",
        ("In the forward pass this was y = xhat * w + b: dw = sum of dout * xhat over every row, db = sum of dout, "
         "dxhat = dout * w.",
         "xhat = (x - mean) * rstd, and x enters three ways: directly, through mean, and through rstd; one term each.",
         "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), the means along the last axis, keepdims."),
        {"x": SHIFT.format(op="layer norm", term="the mean's term is missing (x enters through mean(x) too)")}),
    Exercise(
        "embedding", "embedding", "Embedding", ("w",), "y = w[indices]  (w (num, C), indices of any shape)",
        "    def forward(self, w, indices, padding_idx=None):\n        # here there is no padding row\n"
        "        self.w_shape, self.indices = w.shape, indices\n        return w[indices]  # (*indices.shape, C)\n",
        "(dw,): of shape self.w_shape", lambda rng: [
            ([rng.standard_normal((4, 3))], {"indices": np.array([1]), "padding_idx": None}),
            ([rng.standard_normal((5, 3))], {"indices": np.array([[0, 2], [2, 4], [4, 4]]), "padding_idx": None})],
        lambda w, indices, padding_idx: F.embedding(indices, w), (EmbeddingFunction,), "Embedding: scatter-add",
        ("Row indices[n] of w was copied into row n of y: its gradient is the sum of the rows of dout it went to.",
         "dw = zeros of w's shape with each row of dout added at its index; a repeated index must add up (x[i] += v "
         "does not, with repeats): xp.added_at(rows, (flat_indices,), self.w_shape).")),
    Exercise(
        "scores", "masked attention scores", "MaskedScores", ("q", "k"),
        "S = Q K^T / sqrt(E), -inf where query t may not see key s > t  (q, k (B, T, E))",
        "    def forward(self, q, k):\n        xp = backend.get_array_module(q)\n        T, E = q.shape[-2:]\n"
        "        self.q, self.k, self.scale = q, k, 1 / math.sqrt(E)\n"
        "        self.allowed = xp.tril(xp.ones((T, T), dtype=bool))  # (T, T): True where query t may see key s\n"
        "        return xp.where(self.allowed, q @ xp.swapaxes(k, -1, -2) * self.scale, -xp.inf)  # (B, T, T)\n",
        "(dq, dk): each of shape (B, T, E)",
        lambda rng: [(floats(rng, s, s), {}) for s in ((1, 2, 3), (2, 4, 3))], masked_scores,
        (MaskedFillFunction, MatMul), "The causal mask, and why masked positions get exactly zero gradient",
        ("A masked score is the constant -inf: it does not depend on q or k, so the dout that reaches it goes "
         "nowhere: dS = where(allowed, dout, 0).",
         "S = Q K^T * scale: dq = dS @ k * scale, dk = dS^T @ q * scale (swap dS's last two axes)."),
    ),
    Exercise(
        "attention", "scaled dot-product attention (causal)", "Attention", ("q", "k", "v"),
        "out = P V,  P = softmax(S) along the keys,  S = Q K^T * scale, -inf where a key is not allowed",
        "    def forward(self, q, k, v, allowed, scale, dropout_p=0.0):\n"
        "        # q (..., L, E), k (..., S, E), v (..., S, Ev), allowed (L, S); batch axes broadcast; no dropout\n"
        "        xp = backend.get_array_module(q)\n        self.q, self.k, self.v, self.scale = q, k, v, scale\n"
        "        s = xp.where(allowed, q @ xp.swapaxes(k, -1, -2) * scale, -xp.inf)  # S, (..., L, S)\n"
        "        self.p = stable_softmax(s, -1)  # P, (..., L, S)\n        return self.p @ v  # (..., L, Ev)\n",
        "(dq, dk, dv): each of its input's shape (summed over the batch axes it was broadcast along)",
        lambda rng: [(floats(rng, *shapes), {"allowed": causal(shapes[0][-2]), "scale": 1 / math.sqrt(shapes[0][-1]),
                                             "dropout_p": 0.0})
                     for shapes in (((1, 3, 2), (1, 3, 2), (1, 3, 2)), ((2, 4, 3), (1, 4, 3), (1, 4, 5)))],
        lambda q, k, v, **_: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        (ScaledDotProductAttentionFunction, scores_backward), "Scaled dot-product attention",
        ("out = P @ V: dV = P^T @ dout and dP = dout @ V^T (the exercise matmul).",
         "P = softmax(S) row by row: dS = P * (dP - sum(dP * P)) along the keys (the exercise softmax); masked "
         "entries have P = 0, so their dS is 0 by itself.",
         "S = Q K^T * scale: dQ = dS @ K * scale, dK = dS^T @ Q * scale; then unbroadcast each to its input's shape."),
        imports=STABLE_SOFTMAX
        + "\nfrom minigrad.array.arrays import unbroadcast  # the sum you wrote in the exercise add"),
    Exercise(
        "head", "a whole causal attention head (a composition)", "Head", ("x", "wq", "wk", "wv"),
        "out = softmax(masked(q k^T / sqrt(hs))) v,  q = x wq, k = x wk, v = x wv  (x (B, T, C), w (C, hs))",
        "    def forward(self, x, wq, wk, wv):\n        xp = backend.get_array_module(x)\n"
        "        T, hs = x.shape[1], wq.shape[1]\n        self.x, self.wq, self.wk, self.wv = x, wq, wk, wv\n"
        "        self.q, self.k, self.v = x @ wq, x @ wk, x @ wv  # (B, T, hs) each\n"
        "        allowed = xp.tril(xp.ones((T, T), dtype=bool))  # (T, T)\n"
        "        scores = self.q @ xp.swapaxes(self.k, -1, -2) / math.sqrt(hs)  # (B, T, T)\n"
        "        scores = xp.where(allowed, scores, -xp.inf)  # -inf where query t may not see key s > t\n"
        "        self.weights = stable_softmax(scores, -1)  # (B, T, T)\n"
        "        return self.weights @ self.v  # (B, T, hs)\n",
        "(dx, dwq, dwk, dwv): dx of shape (B, T, C), each dw of shape (C, hs)",
        lambda rng: [(floats(rng, (b, t, c), (c, hs), (c, hs), (c, hs)), {})
                     for b, t, c, hs in ((1, 3, 2, 2), (2, 4, 3, 2))],
        attention_head, (attention_head,), "Scaled dot-product attention",
        ("Undo the forward from the last line up: dv and dweights from out = weights @ v, then dscores from the "
         "softmax (masked entries get 0), then dq and dk from the scores.",
         "q = x @ wq: dwq = sum over the batch of x^T @ dq, and x gets one term from each of q, k and v: "
         "dx = dq @ wq^T + dk @ wk^T + dv @ wv^T."),
        imports=STABLE_SOFTMAX),
    GPT,
)

BY_NAME = {e.name: e for e in EXERCISES}
