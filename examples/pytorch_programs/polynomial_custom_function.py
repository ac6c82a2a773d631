# Follows a PyTorch tutorial closely: its BSD-3-Clause notice applies (NOTICE.md in this folder).
"""Fitting sin(x) with y = a + b P3(c + d x), P3 the third Legendre polynomial written as a custom autograd
Function, in the style of PyTorch's tutorial polynomial_custom_function.py (written anew for minigrad's tests)."""
import argparse
import math

import torch

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--steps', type=int, default=300)
args = parser.parse_args()


class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = (5 x^3 - 3 x) / 2, with its own forward and backward."""

    @staticmethod
    def forward(ctx, input):
        # keep the input for backward
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        # dP3/dx = 1.5 (5 x^2 - 1)
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


dtype = torch.float
device = torch.device("cpu")
torch.manual_seed(args.seed)

# input and output tensors, outside the graph
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)

# the weights, near the answer so that a few hundred steps suffice
a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)
with torch.no_grad():
    for w in (a, b, c, d):
        w.add_(0.01 * torch.randn(()))

learning_rate = 5e-6
for t in range(args.steps):
    # the Function is called through its apply method
    P3 = LegendrePolynomial3.apply

    y_pred = a + b * P3(c + d * x)

    loss = (y_pred - y).pow(2).sum()
    if t % 100 == 99:
        print(t, loss.item())

    loss.backward()

    # update the weights by hand, outside the graph
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad

        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None

final_loss = loss.item()
print(f'Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)')
