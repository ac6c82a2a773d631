"""The teaching primitives, each a Function with forward and backward side by side and its derivative in the
docstring: elementwise.py, pointwise.py, reductions.py, shapes.py, indexing.py, sorting.py, matmul.py, algebra.py
(linalg.py names its norms as torch.linalg), activations.py, normalization.py, losses.py, sdpa.py; creation.py makes
new leaves; convolution.py and composed.py compose the others and add no backward; promotion.py gives a binary op's
two operands one dtype. An op module imports only the layers below (the core, autograd/, array/) and the op modules
before it, never tensor.py: it builds on the core's Tensor and makes results as the core does (core.TENSOR), and
tensor.py, above, gives mg.Tensor its methods and operators from here. docs/layout.md maps the packages.
"""

from minigrad.autograd.versions import Function


class Primitive(Function):
    """The Function minigrad's ops are written on: mg.Function whose backward is written once against xp =
    namespace(dout) and self.saved, so that the same lines give first-order gradients on arrays and, under
    create_graph=True, higher-order ones on tensors (a user's Function sets graph_backward itself, if it is so)."""

    graph_backward = True
