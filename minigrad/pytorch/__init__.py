"""What exists so that PyTorch programs run: the modules behind PyTorch's namespaces that are not the engine, each
also under PyTorch's path for good (minigrad.amp is minigrad.pytorch.amp, minigrad.utils.data is
minigrad.pytorch.utils.data, ...: minigrad/__init__.py's PYTORCH_PATHS): amp.py and cuda.py (pass-throughs),
backends.py and accelerator.py (flags and answers), distributed.py (MPI data parallelism), serialization.py
(mg.save, mg.load), onnx.py (an export that refuses), distributions.py and utils/ (data loading, TensorBoard).
Above tensor.py and the ops, below nn/; docs/layout.md maps the packages.
"""
