"""The machine a run is on: the CPU's model and vector extensions, NumPy's BLAS and the kernel it runs, the threads,
and the float32 sgemm peak. What is measured is measured once and kept per machine in a cache file
(~/.cache/minigrad/machine.json; XDG_CACHE_HOME or MINIGRAD_CACHE_DIR move it), under a key made of what makes the
machine. benchmarks/bench.py and benchmarks/nanogpt.py print it; minigrad/speed/kernels.py keeps its measured choice
there.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from minigrad.array import runtime

# the extensions that decide which kernels a BLAS and a compiler use (x86's, then Arm's), in /proc/cpuinfo's names
VECTOR_EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                     "amx_tile", "asimd", "sve", "sve2")
PEAK_N = 2048  # the square float32 product whose speed is the peak: large enough that the BLAS runs at full speed
CACHE_FILE = "machine.json"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo's, else platform's)."""
    for line in _cpuinfo():
        if line.startswith(("model name", "Model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def vector_extensions() -> list[str]:
    """Those of VECTOR_EXTENSIONS the CPU has (from /proc/cpuinfo's flags; [] where it has none)."""
    for line in _cpuinfo():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [name for name in VECTOR_EXTENSIONS if name in have]
    return []


def _cpuinfo() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read().splitlines()
    except OSError:
        return []


def blas_pools() -> list[dict[str, Any]]:
    """The BLAS thread pools NumPy uses, as threadpoolctl sees them ([] without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [i for i in threadpool_info() if i["user_api"] == "blas"]


def describe_blas() -> str:
    """NumPy's BLAS in a few words: its name, version, threads and kernel (threadpoolctl's architecture)."""
    pools = blas_pools()
    if not pools:
        return "unknown (pip install threadpoolctl to see)"
    return ", ".join(f"{i['internal_api']} {i['version']} {i['num_threads']} threads ({i.get('architecture', '?')})"
                     for i in pools)


def key() -> str:
    """What makes the machine, for the cache: the CPU, its extensions, the cores, NumPy, its BLAS's kernel and
    threads (a cap such as OPENBLAS_NUM_THREADS=1 is another machine). A figure measured under another key is
    measured again."""
    blas = ",".join(f"{i['internal_api']} {i['version']} {i.get('architecture', '?')} on {i['num_threads']} threads"
                    for i in blas_pools())
    return (f"{cpu_model()} | {' '.join(vector_extensions())} | {runtime.usable_cores()} cores | "
            f"NumPy {np.__version__} | {blas or 'BLAS unknown'}")


def cache_path() -> Path:
    """Where measured figures are kept: $MINIGRAD_CACHE_DIR/machine.json, else $XDG_CACHE_HOME/minigrad/ (~/.cache
    without the variable). Delete the file to measure again (after a measurement taken on a busy machine)."""
    if os.environ.get("MINIGRAD_CACHE_DIR"):
        return Path(os.environ["MINIGRAD_CACHE_DIR"]) / CACHE_FILE
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "minigrad" / CACHE_FILE


def remembered(name: str, measure: Callable[[], Any]) -> tuple[Any, bool]:
    """(value, whether it came from the cache): `name`'s value for this machine from the cache file, else measure()
    stored there. A cache that cannot be read or written is measured past, not an error."""
    path, here = cache_path(), key()
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        entries = {}
    if not isinstance(entries, dict):
        entries = {}
    mine = entries.get(here) if isinstance(entries.get(here), dict) else {}
    if name in mine:
        return mine[name], True
    value = measure()
    entries[here] = {**mine, name: value}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # whole or not at all: written beside it, renamed
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    return value, False


def product_gflops(n: int = PEAK_N, place: Callable[[Any], Any] = lambda a: a, wait: Callable[[], None] = lambda: None,
                   repeats: int = 5) -> float:
    """GFLOP/s of a float32 n x n x n product a @ b (2 n^3 operations), the best of `repeats` after one untimed;
    place(array) puts a and b where they are multiplied (a GPU's memory), wait() after each (a GPU's synchronize)."""
    rng = np.random.default_rng(0)
    a, b = (place(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
    a @ b
    wait()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        wait()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def sgemm_peak(n: int = PEAK_N) -> tuple[float, bool]:
    """(GFLOP/s of NumPy's float32 n x n x n product on this machine's cores, whether it came from the cache)."""
    return remembered(f"sgemm_peak_gflops {n}", lambda: round(product_gflops(n), 1))


def describe() -> str:
    """The machine in two lines: CPU, extensions, cores; the BLAS and the sgemm peak (measured or cached)."""
    peak, cached = sgemm_peak()
    extensions = " ".join(vector_extensions()) or "none found"
    return (f"CPU: {cpu_model()}; vector extensions: {extensions}; {runtime.usable_cores()} usable cores\n"
            f"BLAS: {describe_blas()}; float32 sgemm peak ({PEAK_N}^3): {peak:.1f} GFLOP/s "
            f"({'cached in ' + str(cache_path()) if cached else 'measured now'})")


def forget() -> bool:
    """Drop this machine's measured figures from the cache (the next use measures again); whether there were any."""
    path = cache_path()
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(entries, dict) or entries.pop(key(), None) is None:
        return False
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    """python -m minigrad.array.machine [--forget]: the machine and what is cached for it (--forget: drop that
    first)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m minigrad.array.machine", description=main.__doc__)
    p.add_argument("--forget", action="store_true", help="drop this machine's measured figures first (measure again: "
                   "after a measurement taken while the machine was busy)")
    args = p.parse_args(argv)
    if args.forget:
        print(f"forgot this machine's figures in {cache_path()}" if forget() else "nothing cached for this machine")
    print(describe())
    try:
        mine = json.loads(cache_path().read_text()).get(key(), {})
    except (OSError, ValueError, AttributeError):
        mine = {}
    for name, value in mine.items():
        print(f"cached: {name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
