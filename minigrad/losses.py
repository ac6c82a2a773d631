"""Cross-entropy of integer targets under softmax(logits), one Function: dlogits = (softmax - one_hot) / n.
Shapes: N rows (all leading dimensions flattened), V classes (vocabulary).
Where an op lives: tensor math that PyTorch offers as torch.X / Tensor.X sits by kind in
elementwise.py, reductions.py, shapes.py and matmul.py; neural-network functions that PyTorch places in
torch.nn.functional sit in functional.py, normalization.py and losses.py (all re-exported as F).
The Function classes of the latter end in Function (LinearFunction, as in PyTorch's autograd docs), so none
shares its name with an nn layer (nn.Linear); tensor math keeps bare names (Add, MatMul).
"""

from __future__ import annotations

from typing import Any

from minigrad import backend
from minigrad.functional import stable_softmax
from minigrad.matmul import as_rows
from minigrad.shapes import _aux_array, _check_range
from minigrad.tensor import Function, Tensor

# ---- cross-entropy ----

class CrossEntropyFunction(Function):
    """loss = mean over counted rows of -log softmax(logits)[target];  dlogits = (softmax - one_hot) / n"""

    def forward(self, logits, targets, counted):
        xp = backend.get_array_module(logits)
        logp = stable_softmax(as_rows(logits), axis=1, log=True)  # (N, V)
        rows = xp.arange(logp.shape[0])
        nll = -logp[rows, targets]  # (N,): -log softmax(x)[target]
        n = counted.sum() if counted is not None else logp.shape[0]
        if counted is not None:
            nll *= counted
        probs = xp.exp(logp)  # (N, V), for backward
        self.probs, self.rows, self.targets, self.counted, self.n = probs, rows, targets, counted, n
        self.logits_shape = logits.shape
        return (nll.sum() / n).reshape(()) if n else xp.asarray(xp.nan, dtype=logits.dtype)

    def backward(self, dout):
        if not self.n:
            return (backend.get_array_module(dout).zeros(self.logits_shape, dtype=dout.dtype),)
        # in the forward pass this was: loss = mean(-log(probs[rows, targets]))
        scale = dout / self.n
        dx = self.probs * scale
        dx[self.rows, self.targets] -= scale
        if self.counted is not None:
            dx *= self.counted[:, None]
        return (dx.reshape(self.logits_shape),)


def cross_entropy(logits: Tensor, targets: Any, ignore_index: int | None = None) -> Tensor:
    """Mean negative log-likelihood of integer `targets` (shape logits.shape[:-1]) under softmax(logits).

    Targets equal to `ignore_index` are left out of the mean (NaN if every target is ignored).
    """
    targets = _aux_array("cross_entropy", targets, logits, "iu")
    if logits.ndim == 0 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} for logits of shape {logits.shape}; "
                         f"expected {logits.shape[:-1]}")
    _check_range("cross_entropy", targets, logits.shape[-1], "target", ignore_index)
    targets = targets.reshape(-1)
    counted = None
    if ignore_index is not None:
        counted = targets != ignore_index
        targets = targets * counted  # any valid class for ignored rows: their terms are zeroed
        counted = counted.astype(logits.dtype)
    return CrossEntropyFunction.apply(logits, targets=targets, counted=counted)
