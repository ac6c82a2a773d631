"""micrograd's demo written the PyTorch way with minigrad: a 2-16-16-1 ReLU MLP separates two moons (100 points)
with a max-margin loss and SGD whose rate decays from 1.0 to 0.1 over 100 steps. `python -m examples.micrograd_demo`
prints the final training accuracy over 10 seeds, and PyTorch's on the same data where torch is installed.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np

import minigrad as mg
from minigrad import nn, optim
from minigrad.nn import functional as F
from minigrad.optim.lr_scheduler import LambdaLR


def make_moons(n: int = 100, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved half circles, as sklearn.datasets.make_moons draws them, with labels -1 (the upper moon)
    and +1 (the lower one): points X (n, 2) and labels y (n,)."""
    upper, lower = n // 2, n - n // 2
    t_upper, t_lower = np.linspace(0, np.pi, upper), np.linspace(0, np.pi, lower)
    X = np.concatenate([np.stack([np.cos(t_upper), np.sin(t_upper)], axis=1),
                        np.stack([1 - np.cos(t_lower), 0.5 - np.sin(t_lower)], axis=1)])
    X += noise * np.random.default_rng(seed).standard_normal(X.shape)
    return X, np.concatenate([-np.ones(upper), np.ones(lower)])


def train(seed: int, steps: int = 100) -> float:
    """micrograd's demo in minigrad, on the moons of `seed`; returns the training accuracy after the last step."""
    X, y = make_moons(100, 0.1, seed)
    mg.manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = optim.SGD(model.parameters(), lr=1.0)
    schedule = LambdaLR(opt, lambda k: 1.0 - 0.9 * k / steps)  # micrograd's decay: 1.0 at step 0, 0.1 at the end
    inputs, labels = mg.tensor(X, dtype=mg.float32), mg.tensor(y, dtype=mg.float32)
    for _ in range(steps):
        scores = model(inputs).reshape(-1)  # (100,): > 0 means the lower moon
        margin_loss = F.relu(1 - labels * scores).mean()  # the SVM's hinge: 0 once a point is right by a margin of 1
        loss = margin_loss + 1e-4 * sum((p * p).sum() for p in model.parameters())  # and a little L2
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    with mg.no_grad():
        scores = model(inputs).reshape(-1)
    return float(((scores.numpy() > 0) == (y > 0)).mean())


def train_torch(seed: int, steps: int = 100) -> float:
    """The same program in PyTorch, on the same moons (its own initial weights, from torch's generator)."""
    import torch  # optional: the reference, where it is installed

    X, y = make_moons(100, 0.1, seed)
    torch.manual_seed(seed)
    tnn = torch.nn
    model = tnn.Sequential(tnn.Linear(2, 16), tnn.ReLU(), tnn.Linear(16, 16), tnn.ReLU(), tnn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 - 0.9 * k / steps)
    inputs, labels = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    for _ in range(steps):
        scores = model(inputs).reshape(-1)
        loss = torch.relu(1 - labels * scores).mean() + 1e-4 * sum((p * p).sum() for p in model.parameters())
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    with torch.no_grad():
        scores = model(inputs).reshape(-1)
    return float(((scores.numpy() > 0) == (y > 0)).mean())


def accuracies(run: Callable[[int], float], seeds: int) -> list[float]:
    return [run(seed) for seed in range(seeds)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.micrograd_demo", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    runs = {"minigrad": train}
    try:
        import torch  # noqa: F401
        runs["torch"] = train_torch
    except ImportError:
        print("(PyTorch is not installed: minigrad only)")
    for name, run in runs.items():
        found = accuracies(run, args.seeds)
        print(f"{name:<9} median {statistics.median(found):.0%}  by seed: {' '.join(f'{a:.0%}' for a in found)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
