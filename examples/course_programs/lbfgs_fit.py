# Fitting a small network to a curve with L-BFGS and its line search, in double precision, as physics-informed and
# curve-fitting notebooks do: the optimizer calls the closure as often as its line search needs.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)).double()
# ---- training ----
x = torch.linspace(-2, 2, 32, dtype=torch.float64).unsqueeze(1)
y = torch.sin(2 * x) + 0.1 * torch.tensor(np.random.default_rng(0).standard_normal((32, 1)))
optimizer = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=10, history_size=10, line_search_fn="strong_wolfe")
loss_fn = nn.MSELoss()
losses = []


def closure():
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss


for step in range(3):
    losses.append(optimizer.step(closure).item())
final_loss = loss_fn(model(x), y).item()
