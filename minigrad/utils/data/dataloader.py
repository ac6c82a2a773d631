"""torch.utils.data.dataloader, the module path makemore imports DataLoader from: the same class as
minigrad.utils.data's."""

from minigrad.utils.data import DataLoader, default_collate

__all__ = ["DataLoader", "default_collate"]
