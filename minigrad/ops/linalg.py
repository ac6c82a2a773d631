"""torch.linalg, as mg.linalg: vector_norm, matrix_norm and norm, whose code is in minigrad/ops/algebra.py (beside
torch's einsum, diag, norm and cdist, which build on them). A face: it re-exports, nothing more.
"""

from minigrad.ops.algebra import linalg_norm as norm
from minigrad.ops.algebra import matrix_norm, vector_norm

__all__ = ["matrix_norm", "norm", "vector_norm"]
