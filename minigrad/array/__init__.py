"""The array layer, below the core: backend.py (NumPy on the CPU, CuPy on the GPU: the one module that knows CuPy),
dtypes.py (the number types and their rules), arrays.py (helpers on raw arrays: as_array, unbroadcast, as_rows,
...), global_settings.py (printing and matmul precision) and runtime.py (process-wide settings that change no code
path). Nothing here imports a tensor; docs/layout.md maps the packages.
"""
