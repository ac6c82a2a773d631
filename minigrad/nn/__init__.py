"""torch.nn's names: Module, Parameter and the layers (layers.py: Linear, Embedding, LayerNorm, RMSNorm, Dropout,
GELU, ModuleList, Sequential, the loss layers, ...; and one file per concept of a course: activation.py, batchnorm.py,
conv.py, loss.py, rnn.py, transformer.py), gathered here; nn.functional (functional.py, also mg.functional), nn.init
(init.py), nn.utils and nn.parallel are this package's modules, as torch.nn's. It only re-exports.
"""

from minigrad.nn import functional, init, parallel, utils  # noqa: F401  (torch.nn's submodules)
from minigrad.nn.activation import (  # noqa: F401  (nn.X names)
    CELU,
    ELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    Identity,
    LeakyReLU,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanhshrink,
)
from minigrad.nn.batchnorm import BatchNorm1d, BatchNorm2d, GroupNorm  # noqa: F401  (nn.X names)
from minigrad.nn.conv import (  # noqa: F401  (nn.X names)
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    MaxPool1d,
    MaxPool2d,
)
from minigrad.nn.layers import (  # noqa: F401  (nn.X names)
    GELU,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    IncompatibleKeys,
    LayerNorm,
    Linear,
    LogSoftmax,
    Module,
    ModuleDict,
    ModuleList,
    MSELoss,
    NLLLoss,
    Parameter,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    Tanh,
    constant,
    empty,
)
from minigrad.nn.loss import (  # noqa: F401  (nn.X names)
    BCELoss,
    CosineEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    SmoothL1Loss,
)
from minigrad.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401  (nn.X names)
from minigrad.nn.transformer import (  # noqa: F401  (nn.X names)
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
