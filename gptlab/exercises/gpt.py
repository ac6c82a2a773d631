"""The last exercise, backprop ninja's: a one-block GPT's loss whose whole backward the learner writes, each step's
gradient kept in self.grads and compared with autograd's (tiny_gpt), in backward's order.
"""

from __future__ import annotations

import numpy as np

import minigrad.nn.functional as F
from gptlab.exercises.exercise import Case, Exercise, floats, masked_scores
from minigrad.tensor import Tensor


def tiny_gpt(wte: Tensor, wpe: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, w1: Tensor, w2: Tensor,
             w_head: Tensor, idx: np.ndarray, targets: np.ndarray, keep: dict[str, Tensor] | None = None) -> Tensor:
    """A one-block GPT's loss, one head, layer norms without their affine part: the composition whose autograd is
    the answer to the exercise `gpt`; keep gets each step, its gradient retained, under the stub's names."""
    keep = {} if keep is None else keep

    def kept(name: str, t: Tensor) -> Tensor:
        keep[name] = t
        t.retain_grad()
        return t

    c = (wte.shape[1],)
    x = kept("x", F.embedding(idx, wte) + wpe)  # (B, T, C)
    a = kept("a", F.layer_norm(x, c))
    q, k, v = kept("q", a @ wq), kept("k", a @ wk), kept("v", a @ wv)  # (B, T, C): one head, hs = C
    att = kept("att", F.softmax(masked_scores(q, k), -1))  # (B, T, T)
    heads = kept("heads", att @ v)
    y = kept("y", x + heads @ wo)  # the attention's residual
    n2 = kept("n2", F.layer_norm(y, c))
    hpre = kept("hpre", n2 @ w1)  # (B, T, 4C)
    h = kept("h", F.gelu(hpre, approximate="tanh"))
    m = kept("m", y + h @ w2)  # the MLP's residual
    n3 = kept("n3", F.layer_norm(m, c))
    logits = kept("logits", n3 @ w_head)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def gpt_case(rng: np.random.Generator, b: int, t: int, c: int, v: int) -> Case:
    shapes = (v, c), (t, c), (c, c), (c, c), (c, c), (c, c), (c, 4 * c), (4 * c, c), (c, v)
    return [0.5 * w for w in floats(rng, *shapes)], {"idx": rng.integers(0, v, (b, t)),
                                                      "targets": rng.integers(0, v, (b, t))}


GPT_FORWARD = """    def forward(self, wte, wpe, wq, wk, wv, wo, w1, w2, w_head, idx, targets):
        # idx, targets (B, T) ints; wte (V, C), wpe (T, C), wq wk wv wo (C, C), w1 (C, 4C), w2 (4C, C), w_head (C, V)
        xp = backend.get_array_module(wte)
        B, T = idx.shape
        self.idx, self.targets, self.wte_shape = idx, targets, wte.shape
        self.wq, self.wk, self.wv, self.wo, self.w1, self.w2, self.w_head = wq, wk, wv, wo, w1, w2, w_head
        self.x = wte[idx] + wpe  # (B, T, C): token and position embeddings
        self.a, self.a_rstd = norm(self.x)  # (B, T, C), (B, T, 1)
        self.q, self.k, self.v = self.a @ wq, self.a @ wk, self.a @ wv  # (B, T, C) each: one head, hs = C
        scores = self.q @ xp.swapaxes(self.k, -1, -2) / math.sqrt(wq.shape[1])  # (B, T, T)
        scores = xp.where(xp.tril(xp.ones((T, T), dtype=bool)), scores, -xp.inf)  # causal
        self.att = stable_softmax(scores, -1)  # (B, T, T)
        self.heads = self.att @ self.v  # (B, T, C)
        self.y = self.x + self.heads @ wo  # the attention's residual
        self.n2, self.n2_rstd = norm(self.y)
        self.hpre = self.n2 @ w1  # (B, T, 4C)
        self.h = gelu(self.hpre)
        self.m = self.y + self.h @ w2  # the MLP's residual
        self.n3, self.n3_rstd = norm(self.m)
        self.logits = self.n3 @ w_head  # (B, T, V)
        self.probs = stable_softmax(self.logits, -1)  # (B, T, V)
        rows = self.probs.reshape(B * T, -1)
        return -xp.log(rows[xp.arange(B * T), targets.reshape(-1)]).mean()  # the mean over B * T positions
"""

GPT_HELPERS = '''from minigrad.array.arrays import stable_softmax

GELU_C, GELU_K = math.sqrt(2 / math.pi), 0.044715


def norm(x, eps=1e-5):
    """Layer norm without its affine part, over the last axis: xhat (..., C) and rstd (..., 1)."""
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1 / backend.get_array_module(x).sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (x - mean) * rstd, rstd


def gelu(x):
    """GPT-2's GELU: 0.5 x (1 + tanh(c (x + k x^3)))."""
    return 0.5 * x * (1 + backend.get_array_module(x).tanh(GELU_C * (x + GELU_K * x ** 3)))'''


GPT = Exercise(
    "gpt", "a tiny GPT's full backward, every step by hand (backprop ninja)", "TinyGPT",
    ("wte", "wpe", "wq", "wk", "wv", "wo", "w1", "w2", "w_head"),
    "loss = cross_entropy(ln(m) @ w_head),  m = y + gelu(ln(y) @ w1) @ w2,  y = x + attention(ln(x)) @ wo,  "
    "x = wte[idx] + wpe", GPT_FORWARD,
    "(dwte, dwpe, dwq, dwk, dwv, dwo, dw1, dw2, dw_head), each of its weight's shape; and on the way, in\n"
    "        # self.grads (a dict), the gradient of each step forward kept (of its shape), in this order:\n"
    "        # 'logits', 'n3', 'm', 'h', 'hpre', 'n2', 'y', 'heads', 'att', 'v', 'k', 'q', 'a', 'x'",
    lambda rng: [gpt_case(rng, 1, 2, 2, 3), gpt_case(rng, 2, 3, 4, 5)], tiny_gpt, (tiny_gpt,),
    "The graph: topological order, and tensors used twice",
    ("Go up from the loss, one line of forward at a time, and keep each gradient in self.grads under the "
     "step's name: dlogits first (the exercise cross_entropy, the mean over B * T positions).",
     "A matmul line z = u @ w gives du = dz @ w^T and dw = the sum over B, T of u^T dz (the exercise matmul); "
     "each layer norm line is the exercise layer_norm without w and b; gelu's is the exercise gelu.",
     "A residual line y = x + f(x) sends dy to x twice, directly and through f: the two add up (dx = dy + ...); "
     "x = wte[idx] + wpe: dwte is the exercise embedding, dwpe the sum of dx over the batch."),
    imports=GPT_HELPERS,
    intermediates=("logits", "n3", "m", "h", "hpre", "n2", "y", "heads", "att", "v", "k", "q", "a", "x"))
