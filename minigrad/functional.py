"""The neural-network functions, imported as F (torch.nn.functional's names): a face that only re-exports.
Each lives with its kind: activations.py, normalization.py, losses.py, sdpa.py, matmul.py (linear), shapes.py
(embedding, one_hot, causal_mask), elementwise.py (masked_fill, sigmoid, tanh).
"""

from minigrad.activations import dropout, gelu, leaky_relu, log_softmax, relu, silu, softmax
from minigrad.elementwise import masked_fill, sigmoid, tanh
from minigrad.losses import binary_cross_entropy_with_logits, cross_entropy, mse_loss, nll_loss
from minigrad.matmul import linear
from minigrad.normalization import layer_norm, rms_norm
from minigrad.sdpa import scaled_dot_product_attention
from minigrad.shapes import causal_mask, embedding, one_hot

__all__ = ["binary_cross_entropy_with_logits", "causal_mask", "cross_entropy", "dropout", "embedding", "gelu",
           "layer_norm", "leaky_relu", "linear", "log_softmax", "masked_fill", "mse_loss", "nll_loss", "one_hot",
           "relu", "rms_norm", "scaled_dot_product_attention", "sigmoid", "silu", "softmax", "tanh"]
