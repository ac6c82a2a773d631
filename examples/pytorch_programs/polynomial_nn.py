# Follows a PyTorch tutorial closely: its BSD-3-Clause notice applies (NOTICE.md in this folder).
"""Fitting sin(x) with a third-order polynomial written as nn.Sequential, in the style of PyTorch's tutorial
polynomial_nn.py (written anew for minigrad's tests): plain gradient descent by hand under no_grad."""
import argparse
import math

import torch

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--steps', type=int, default=700)
args = parser.parse_args()
torch.manual_seed(args.seed)

# input and output tensors
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)

# y is a linear function of (x, x^2, x^3): a tensor of those three features, shape (2000, 3)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

# the model: a linear layer of three inputs, flattened to a vector to match y
model = torch.nn.Sequential(
    torch.nn.Linear(3, 1),
    torch.nn.Flatten(0, 1)
)

# mean squared error, summed
loss_fn = torch.nn.MSELoss(reduction='sum')

learning_rate = 3e-6  # the tutorial: 1e-6 for 2000 steps
for t in range(args.steps):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())

    model.zero_grad()
    loss.backward()

    # update the weights by hand, outside the graph
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad

final_loss = loss.item()
linear_layer = model[0]
print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
      f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
