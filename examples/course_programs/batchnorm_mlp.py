# An MLP with batch normalisation, as makemore's part 3 writes it with torch.nn: Linear without bias, BatchNorm1d,
# Tanh; the running statistics it keeps are then used in evaluation.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

n_embd, n_hidden, block_size, vocab_size = 6, 32, 3, 11
torch.manual_seed(0)
model = nn.Sequential(
    nn.Embedding(vocab_size, n_embd), nn.Flatten(),
    nn.Linear(n_embd * block_size, n_hidden, bias=False), nn.BatchNorm1d(n_hidden), nn.Tanh(),
    nn.Linear(n_hidden, n_hidden, bias=False), nn.BatchNorm1d(n_hidden, momentum=0.001), nn.Tanh(),
    nn.Linear(n_hidden, vocab_size),
)
# ---- training ----
with torch.no_grad():
    model[-1].weight *= 0.1  # a less confident last layer at the start
rng = np.random.default_rng(0)
Xtr = torch.tensor(rng.integers(0, vocab_size, (64, block_size)))
Ytr = torch.tensor(rng.integers(0, vocab_size, 64))
parameters = list(model.parameters())
losses = []
for i in range(20):
    ix = torch.tensor(rng.integers(0, Xtr.shape[0], 16))
    logits = model(Xtr[ix])
    loss = F.cross_entropy(logits, Ytr[ix])
    for p in parameters:
        p.grad = None
    loss.backward()
    lr = 0.1 if i < 15 else 0.01
    for p in parameters:
        p.data += -lr * p.grad
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    eval_loss = F.cross_entropy(model(Xtr), Ytr).item()
running_mean = model[3].running_mean
final_loss = eval_loss
