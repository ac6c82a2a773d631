"""torch.utils's names that training programs import: `minigrad.utils.data` (Dataset, TensorDataset, DataLoader and
the samplers), loaded in the main process.
"""

from minigrad.utils import data

__all__ = ["data"]
