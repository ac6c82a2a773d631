"""torch.onnx's name, so that a program importing it runs up to the export: export refuses in one line, as minigrad
has no graph exporter (save the weights with mg.save(model.state_dict(), f) instead)."""

from __future__ import annotations

from typing import Any

__all__ = ["export", "is_in_onnx_export"]


def export(model: Any, *args: Any, **kwargs: Any) -> None:
    raise NotImplementedError(f"onnx.export: minigrad cannot export a model to ONNX (got a {type(model).__name__}); "
                              "save its weights with mg.save(model.state_dict(), f), or export from PyTorch")


def is_in_onnx_export() -> bool:
    return False
