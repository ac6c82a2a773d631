"""The neural-network functions, imported as F (torch.nn.functional's names): a face that only re-exports.
Each lives with its kind: activations.py, normalization.py, losses.py, sdpa.py, matmul.py (linear), shapes.py
(embedding, one_hot, causal_mask), elementwise.py (masked_fill, sigmoid, tanh); the compositions of those:
convolution.py (conv, pooling, pad) and composed.py (batch_norm, the other activations and losses).
"""

from minigrad.ops.activations import dropout, gelu, leaky_relu, log_softmax, relu, silu, softmax
from minigrad.ops.composed import (
    batch_norm,
    binary_cross_entropy,
    celu,
    cosine_embedding_loss,
    elu,
    glu,
    group_norm,
    hardsigmoid,
    hardswish,
    hardtanh,
    huber_loss,
    kl_div,
    l1_loss,
    logsigmoid,
    margin_ranking_loss,
    mish,
    normalize,
    prelu,
    relu6,
    selu,
    smooth_l1_loss,
    softmin,
    softplus,
    softsign,
    tanhshrink,
)
from minigrad.ops.convolution import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv_transpose1d,
    conv_transpose2d,
    max_pool1d,
    max_pool2d,
    pad,
)
from minigrad.ops.elementwise import masked_fill, sigmoid, tanh
from minigrad.ops.losses import binary_cross_entropy_with_logits, cross_entropy, mse_loss, nll_loss
from minigrad.ops.matmul import linear
from minigrad.ops.normalization import layer_norm, rms_norm
from minigrad.ops.sdpa import scaled_dot_product_attention
from minigrad.ops.shapes import causal_mask, embedding, one_hot

__all__ = ["binary_cross_entropy_with_logits", "causal_mask", "cross_entropy", "dropout", "embedding", "gelu",
           "layer_norm", "leaky_relu", "linear", "log_softmax", "masked_fill", "mse_loss", "nll_loss", "one_hot",
           "relu", "rms_norm", "scaled_dot_product_attention", "sigmoid", "silu", "softmax", "tanh",
           # convolution.py
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
           "avg_pool2d", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d",
           "pad",
           # composed.py
           "batch_norm", "celu", "elu", "glu", "group_norm", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid",
           "mish", "normalize", "prelu", "relu6", "selu", "softmin", "softplus", "softsign", "tanhshrink",
           "binary_cross_entropy", "cosine_embedding_loss", "huber_loss", "kl_div", "l1_loss", "margin_ranking_loss",
           "smooth_l1_loss"]
