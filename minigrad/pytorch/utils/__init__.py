"""torch.utils's names that training programs import: `minigrad.utils.data` (Dataset, TensorDataset, DataLoader and
the samplers), loaded in the main process; also as `minigrad.utils.data.dataloader`, the module that makemore and
minGPT import DataLoader from in PyTorch (`from torch.utils.data.dataloader import DataLoader`), and as
`minigrad.utils.data.dataset` (`from torch.utils.data.dataset import Dataset`); and
`minigrad.utils.tensorboard.SummaryWriter`, whose scalars go to TensorBoard's event files, or without the tensorboard
package to a JSON-lines file (makemore imports it).
"""

import sys

from minigrad.pytorch.utils import data

# one module under several names, as minigrad.nn.modules is minigrad.nn: torch.utils.data.dataloader and
# torch.utils.data.dataset, where programs import DataLoader and Dataset from, under PyTorch's path (minigrad.utils)
# and this package's
for path in ("minigrad.utils.data", data.__name__):
    sys.modules[path + ".dataloader"] = sys.modules[path + ".dataset"] = data

__all__ = ["data"]
