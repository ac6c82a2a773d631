#!/usr/bin/env bash
# Prove the CuPy backend on an NVIDIA GPU in one run. Every step runs, under its own time limit,
# whatever happened to the steps before it; a table at the end says how each went, and the exit status
# is 1 if any failed.
#
#   OUT=/some/folder bash scripts/gpu_check.sh    # one NAME.log per step in $OUT (default: a new temporary folder)
#
# $OUT gets the 7 logs and bench.json, nothing else; the runs' checkpoints go to a temporary folder.
#
#   step       limit  what
#   env          35s  versions of numpy, cupy and torch; does torch see CUDA; one CuPy elementwise kernel
#                     and one cupy.add.at, checked against the right answer
#   tests       180s  MINIGRAD_REQUIRE_CUDA=1 pytest -k cuda -x (-n 8 with pytest-xdist): every CUDA test; one
#                     that cannot run fails
#                     (tests meant for machines without a GPU still skip, and are listed)
#   gradcheck    35s  python -m minigrad.check.gradcheck_cases --device cuda: every backward pass, float64
#   curves       45s  python -m scripts.compare_curves: 50 steps on the CPU and the GPU from the same seed give
#                     the same curves, in float32 and in float64
#   resume       45s  train.py --device cuda --dropout 0.1: 20 steps, then --resume up to 40, with
#                     samples and the attention explanation
#   explain      20s  train.py explain --device cuda on that checkpoint
#   bench       100s  python -m benchmarks.bench --device cuda --pairs 1: minigrad (plain and fused) against PyTorch
#                     on the same GPU, each measurement in a fresh process, for `small` and GPT-2 small's shape
#
# The limits add up to 460 s (plus 2 s of grace each): under 8 minutes on an H200, CuPy's kernel
# compilation included (a fresh machine has no kernel cache, and the tests step compiles most of them).
# On a machine without a GPU every step fails within seconds. Needs numpy, cupy, pytest and tqdm in
# $PYTHON (default python3), and torch, a CUDA build, for the benchmark's comparison.
# shellcheck disable=SC2317  # the check_ functions are called indirectly, by `timeout bash -c check_NAME`
set -uo pipefail  # no -e: a failed step is recorded, and the next one runs

cd "$(dirname "$0")/.." || exit 1
out="${OUT:-$(mktemp -d -t gpu_check.XXXXXX)}"
mkdir -p "$out" || exit 1
work="$(mktemp -d -t gpu_check_runs.XXXXXX)" || exit 1
PYTHON="${PYTHON:-python3}"
export out work PYTHON PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

check_env() {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"
    "$PYTHON" - <<'PY'
import importlib
import sys

import numpy

print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}")
for name in ("pytest", "tqdm"):
    module = importlib.import_module(name)  # fails here, by name, if missing
    print(f"{name} {module.__version__}")
try:
    import torch
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}; torch sees CUDA: {torch.cuda.is_available()}"
          + ("" if torch.cuda.is_available() else " (the bench step will fail)"))
except ImportError:
    print("torch: not installed (the bench step will time minigrad alone)")
import cupy  # fails here if CuPy is missing

print(f"cupy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
      f"{cupy.cuda.runtime.getDeviceCount()} GPU(s): {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
x = cupy.arange(6, dtype=cupy.float32)
assert (x * 2 + 1).get().tolist() == [1, 3, 5, 7, 9, 11], "CuPy elementwise kernel"
target = cupy.zeros(3, dtype=cupy.float32)
cupy.add.at(target, cupy.asarray([0, 2, 0]), cupy.asarray([1, 2, 3], dtype=cupy.float32))
assert target.get().tolist() == [4, 0, 2], "cupy.add.at with a repeated index"
import minigrad

assert minigrad.cuda_available(), "minigrad finds no GPU"
print("CuPy elementwise kernel, cupy.add.at and minigrad.cuda_available(): ok")
PY
}

check_tests() {
    local spread=()
    # with a GPU and pytest-xdist (the H200 image has it), 8 processes share the tests and CuPy's kernel compiling
    "$PYTHON" -c "import sys, xdist, minigrad; sys.exit(not minigrad.cuda_available())" 2> /dev/null && spread=(-n 8)
    # -o addopts=: without pyproject's --nbmake, whose plugin the H200 image lacks (no notebook names cuda)
    MINIGRAD_REQUIRE_CUDA=1 "$PYTHON" -m pytest tests -o addopts= -q -x -k cuda -rs -p no:cacheprovider "${spread[@]}"
}

check_gradcheck() {
    "$PYTHON" -m minigrad.check.gradcheck_cases --device cuda
}

check_curves() {
    local status=0
    "$PYTHON" -m scripts.compare_curves --dtype float32 --out "$work/curves-float32" || status=1
    "$PYTHON" -m scripts.compare_curves --dtype float64 --out "$work/curves-float64" || status=1
    return "$status"
}

check_resume() {
    local run=(--device cuda --out "$work/run") resumed
    "$PYTHON" train.py --dropout 0.1 --steps 20 --samples 0 --no-explain "${run[@]}" || return
    resumed=$("$PYTHON" train.py --resume --steps 40 --samples 2 "${run[@]}") || { echo "$resumed"; return 1; }
    echo "$resumed"
    grep -q "resumed from .* at step 20" <<< "$resumed" || { echo "FAIL: did not resume at step 20"; return 1; }
    grep -Eq "^final: step=40 train_loss=[0-9.]+ val_loss=[0-9.]+ " <<< "$resumed" \
        || { echo "FAIL: no finite final loss at step 40"; return 1; }
}

check_explain() {
    local explained
    explained=$("$PYTHON" train.py explain --device cuda --out "$work/run") || { echo "$explained"; return 1; }
    echo "$explained"
    grep -q "^Attention in layer" <<< "$explained" || { echo "FAIL: no explanation printed"; return 1; }
}

check_bench() {
    "$PYTHON" -m benchmarks.bench --device cuda --configs small gpt2 --steps 10 --pairs 1 --json "$out/bench.json"
}

export -f check_env check_tests check_gradcheck check_curves check_resume check_explain check_bench

names=() verdicts=() seconds=()
run_step() {  # run_step NAME LIMIT: run check_NAME under `timeout`, log it to $out/NAME.log, record how it went
    local name=$1 limit=$2 start=$SECONDS status verdict
    echo "== $name (limit ${limit}s)"
    timeout --kill-after=2 "$limit" bash -c "check_$name" > "$out/$name.log" 2>&1
    status=$?
    case $status in
        0) verdict="pass" ;;
        124 | 137) verdict="FAIL: timed out after ${limit}s" ;;
        *) verdict="FAIL: exit status $status" ;;
    esac
    tail -n "$([[ $status == 0 ]] && echo 6 || echo 30)" "$out/$name.log" | sed 's/^/    /'
    names+=("$name") verdicts+=("$verdict") seconds+=($((SECONDS - start)))
}

run_step env 35
run_step tests 180
run_step gradcheck 35
run_step curves 45
run_step resume 45
run_step explain 20
run_step bench 100

failed=0
printf '\n%-10s %8s  %s\n' step seconds result
for i in "${!names[@]}"; do
    printf '%-10s %8s  %s\n' "${names[$i]}" "${seconds[$i]}" "${verdicts[$i]}"
    [[ ${verdicts[$i]} == pass ]] || failed=1
done
echo "logs: $out"
exit "$failed"
