#!/usr/bin/env bash
# Prove the CuPy backend on an NVIDIA GPU, in one run (about 10 minutes on an H200):
#   1. the whole test suite with CUDA available: no test may skip for want of a GPU;
#   2. the same 50 training steps on CPU and GPU, from the same seed and weights, give the same losses
#      (to float32 rounding);
#   3. the training-step benchmark on the GPU against PyTorch eager on the same GPU;
#   4. the default task trained on the GPU with train.py.
# Needs numpy, cupy, torch, pytest and tqdm in the python3 it runs (the H200 image has them all).
# Writes its logs to $OUT (default /tmp/gpu_check). Exit status 0 only if every step passed.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

echo "== 0. the GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import minigrad, cupy; assert minigrad.cuda_available(), 'CuPy finds no GPU'; print('cupy', cupy.__version__)"

echo "== 1. tests, CUDA included"
python3 -m pytest -q -rs -p no:cacheprovider 2>&1 | tee "$out/pytest.log"
if grep -E "SKIPPED.*(GPU|CuPy|cuda)" "$out/pytest.log"; then
    echo "FAIL: the tests above skipped their CUDA case on a machine with a GPU"; exit 1
fi

echo "== 2. the same 50 steps on CPU and GPU"
for device in cpu cuda; do
    python3 train.py --steps 50 --eval-interval 5 --device "$device" --out "$out/curve-$device" --samples 0 \
        --no-explain > "$out/curve-$device.log"
done
python3 - "$out/curve-cpu.log" "$out/curve-cuda.log" <<'PY'
import re, sys
curves = [[float(v) for v in re.findall(r"train loss ([\d.]+)", open(f).read())] for f in sys.argv[1:]]
print("step  cpu loss   cuda loss")
for i, (a, b) in enumerate(zip(*curves)):
    print(f"{5 * (i + 1):4d}  {a:.4f}    {b:.4f}")
worst = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(*curves))
print(f"largest relative difference {worst:.2e}")
sys.exit(0 if len(curves[0]) == 10 and worst < 1e-2 else "FAIL: CPU and GPU loss curves differ")
PY

echo "== 3. benchmark on the GPU"
python3 benchmarks/bench.py --device cuda --configs small gpt2 --steps 10 --pairs 3 --json "$out/bench.json"

echo "== 4. the default task on the GPU"
python3 train.py --device cuda --out "$out/default" | tee "$out/train.log"
echo "gpu_check: all passed"
