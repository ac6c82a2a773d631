"""torch.utils's names that training programs import: `minigrad.utils.data` (Dataset, TensorDataset, DataLoader and
the samplers), loaded in the main process; also as `minigrad.utils.data.dataloader`, the module that makemore and
minGPT import DataLoader from in PyTorch (`from torch.utils.data.dataloader import DataLoader`), and as
`minigrad.utils.data.dataset` (`from torch.utils.data.dataset import Dataset`); and
`minigrad.utils.tensorboard.SummaryWriter`, whose scalars go to TensorBoard's event files, or without the tensorboard
package to a JSON-lines file (makemore imports it).
"""

import sys

from minigrad.utils import data

sys.modules[__name__ + ".data.dataloader"] = data  # one module under two names, as minigrad.nn.functional
sys.modules[__name__ + ".data.dataset"] = data  # torch.utils.data.dataset, where programs import Dataset from

__all__ = ["data"]
