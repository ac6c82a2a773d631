"""torch.autograd's names: grad (gradients of chosen inputs, returned without touching any .grad), Function, and the
grad-mode switches. Everything here is defined in tensor.py, beside backward(), whose sweep grad() runs.
"""

from minigrad.tensor import Function, enable_grad, grad, no_grad, set_grad_enabled

__all__ = ["Function", "enable_grad", "grad", "no_grad", "set_grad_enabled"]
