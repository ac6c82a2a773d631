"""Train the same run (train.py's, same flags and seed, no dropout) on two devices and check that the evaluated loss
(the training and held-out estimates, then all held-out examples) and the gradient norm agree to --rtol at every
point (a step of scripts/gpu_check.sh; `--devices cpu cpu` is the self-test): `python -m scripts.compare_curves`.
Exit 0 they agree, 1 they differ or are incomplete, 2 no device.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import train
from gptlab.settings import DTYPES
from minigrad.array import backend


def record_run(device: str, flags: list[str], out: str) -> tuple[int, dict[str, list[float]]]:
    """train.py's exit status and curves for one run on `device`."""
    curves: dict[str, list[float]] = {"evaluated loss": [], "gradient norm": []}
    evaluate, clip = train.evaluate, train.clip_grad_norm_

    def recording_evaluate(*args: Any, **kwargs: Any) -> tuple[float, float]:
        loss, accuracy = evaluate(*args, **kwargs)
        curves["evaluated loss"].append(loss)
        return loss, accuracy

    def recording_clip(*args: Any, **kwargs: Any) -> float:
        norm = clip(*args, **kwargs)
        curves["gradient norm"].append(norm)
        return norm

    train.evaluate, train.clip_grad_norm_ = recording_evaluate, recording_clip
    try:
        code = train.main([*flags, "--device", device, "--out", out])
    finally:
        train.evaluate, train.clip_grad_norm_ = evaluate, clip
    return code, curves


def relative_difference(x: float, y: float) -> float:
    return abs(x - y) / max(abs(x), abs(y), 1e-12)


def compare(a: list[float], b: list[float], expected: int, rtol: float) -> tuple[bool, float, str]:
    """(agree, largest relative difference, why not): both complete, finite, and within rtol point by point."""
    if len(a) != expected or len(b) != expected:
        return False, math.nan, f"incomplete: {len(a)} and {len(b)} points, expected {expected}"
    if not all(math.isfinite(v) for v in a + b):
        return False, math.nan, "a point is not finite (NaN never counts as a match)"
    worst = max((relative_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    return worst <= rtol, worst, "" if worst <= rtol else f"largest relative difference {worst:.2e} > {rtol:.0e}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", nargs=2, default=["cpu", "cuda"], choices=list(backend.DEVICES))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--eval-interval", type=int, default=5)
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--rtol", type=float, default=None,
                   help="largest relative difference allowed (default 1e-3 in float32, 1e-8 in float64)")
    p.add_argument("--out", help="folder for the two runs' checkpoints (default: a temporary one)")
    args = p.parse_args(argv)
    rtol = args.rtol if args.rtol is not None else (1e-3 if args.dtype == "float32" else 1e-8)
    for device in args.devices:
        try:
            backend.check_device(device)
        except RuntimeError as err:
            print(f"compare_curves: {err}", file=sys.stderr)
            return 2
    flags = ["--steps", str(args.steps), "--eval-interval", str(args.eval_interval), "--dtype", args.dtype,
             "--dropout", "0", "--samples", "0", "--no-explain"]
    out = Path(args.out or tempfile.mkdtemp(prefix="compare_curves."))
    runs = []
    for i, device in enumerate(args.devices):
        print(f"== run {i + 1}: train.py {' '.join(flags)} --device {device}", flush=True)
        runs.append(record_run(device, flags, str(out / f"run{i + 1}-{device}")))
    (code_a, curves_a), (code_b, curves_b) = runs
    # each evaluation: the training and the held-out estimate; at the end, all the held-out examples
    expected = {"evaluated loss": 2 * -(-args.steps // args.eval_interval) + 1, "gradient norm": args.steps}
    passed = code_a == code_b == 0
    print(f"\n{args.dtype}, {args.steps} steps; exit status {code_a} and {code_b}")
    for name, n in expected.items():
        a, b = curves_a[name], curves_b[name]
        print(f"{name:<14} {args.devices[0]:>14} {args.devices[1]:>14}  relative difference")
        for x, y in itertools.zip_longest(a, b, fillvalue=math.nan):  # a missing point shows as nan
            print(f"{'':<14} {x:>14.8g} {y:>14.8g}  {relative_difference(x, y):.1e}")
        ok, worst, why = compare(a, b, n, rtol)
        print(f"{name}: {'agree' if ok else 'FAIL: ' + why} (largest relative difference {worst:.2e}, rtol {rtol:.0e})")
        passed &= ok
    print("curves agree" if passed else "FAIL: the curves do not agree")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
