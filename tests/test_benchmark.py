"""The benchmark harness runs and reports what it measured (never how fast: no test asserts on time),
the per-primitive profile adds up, and a float32 training step never makes a float64 array."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minigrad as mg
from benchmarks import bench
from minigrad.tensor import intercept

TINY = ["--configs", "tiny", "--pairs", "1", "--steps", "2", "--warmup", "1"]
NO_TORCH = "PyTorch is not installed: pip install 'minigrad[torch]' to run the benchmark against it"
MINE = ["minigrad", "minigrad-fused"]  # the kinds these tests spawn (the compiled kind: tested in-process below)
REFERENCES = ["--frameworks", *MINE, "torch", "torch-sdpa"]


@pytest.mark.parametrize("fused", [False, True], ids=["attention written out", "attention as one node"])
@pytest.mark.parametrize("config", ["tiny", "small"])
def test_float32_training_step_makes_no_float64_array(config, fused):
    model, _, x, y = bench.minigrad_setup(bench.CONFIGS[config])
    with mg.fused(fused):
        assert bench.float64_free(model, x, y)


def test_the_float64_detector_can_fail(monkeypatch):
    """A primitive that keeps a float64 array must be caught, even one its backward never uses (the
    engine itself already refuses a float64 gradient for a float32 input)."""
    from minigrad.ops.activations import GeluFunction

    forward = GeluFunction.forward

    def upcasting(self, x):
        y = forward(self, x)
        self.spare = x.astype("float64")
        return y

    monkeypatch.setattr(GeluFunction, "forward", upcasting)  # the test's own fault, planted
    model, _, x, y = bench.minigrad_setup(bench.CONFIGS["tiny"])
    assert not bench.float64_free(model, x, y)


def _check_minigrad_result(r, steps, pairs):
    c = bench.CONFIGS["tiny"]
    m = r["frameworks"]["minigrad"]
    assert r["float64_free"] is True and r["steps"] == steps
    assert r["params"] == bench.GPT(bench.GPTConfig(**{k: v for k, v in c.items() if k != "batch"})).num_parameters()
    assert all(m["ms"][phase] > 0 for phase in bench.PHASES)
    assert m["tokens_per_s"] == pytest.approx(c["batch"] * c["block_size"] / m["ms"]["step"] * 1e3)
    assert m["gflops"] == pytest.approx(bench.step_flops(c) / m["ms"]["step"] / 1e6)
    assert m["peak_mib"] > 0
    assert [len(p["step_ms"]) for p in m["processes"]] == [steps] * pairs


def test_benchmark_without_torch_reports_minigrad_alone(tmp_path, capsys):
    out = tmp_path / "bench.json"
    bench.main([*TINY, "--frameworks", "minigrad", "--json", str(out)])
    report = json.loads(out.read_text())
    (r,) = report["results"]
    assert list(r["frameworks"]) == ["minigrad"] and r["ratios"] == {}
    _check_minigrad_result(r, steps=2, pairs=1)
    assert len(report["ceiling_runs"]) == 2 and report["ceiling_gflops"] == max(report["ceiling_runs"]) > 0
    printed = capsys.readouterr().out
    assert "fresh process" in printed and "tiny (vocab 32" in printed
    # the machine first, and each path's model GFLOP/s as a share of its sgemm peak (the header's)
    assert printed.startswith(f"CPU: {bench.machine.cpu_model()}; vector extensions: ") and "sgemm peak" in printed
    assert report["settings"]["versions"]["sgemm_peak"] == report["ceiling_runs"][0]
    m = r["frameworks"]["minigrad"]
    assert f"{100 * m['gflops'] / report['ceiling_runs'][0]:>6.0f}% " in printed and "% peak" in printed


def test_benchmark_against_torch_in_separate_processes_with_the_same_threads(tmp_path, capsys):
    pytest.importorskip("torch", reason=NO_TORCH)
    out = tmp_path / "bench.json"
    bench.main([*TINY, *REFERENCES, "--threads", "1", "--json", str(out)])
    (r,) = json.loads(out.read_text())["results"]
    assert list(r["frameworks"]) == [*MINE, "torch", "torch-sdpa"]
    _check_minigrad_result(r, steps=2, pairs=1)
    assert "1 threads" in r["frameworks"]["minigrad"]["threads"]  # OPENBLAS_NUM_THREADS reached minigrad's worker
    assert set(r["ratios"]) == {f"{m} / {t}" for m in MINE for t in ("torch", "torch-sdpa")} \
        | {"minigrad / minigrad-fused"}
    for fw in ("torch", "torch-sdpa"):
        theirs = r["frameworks"][fw]
        assert theirs["threads"] == 1 and theirs["peak_mib"] > 0 and len(theirs["processes"]) == 1
    for label, ratio in r["ratios"].items():
        mine, theirs = (r["frameworks"][fw]["processes"] for fw in label.split(" / "))
        expected = [m["ms"]["step"] / t["ms"]["step"] for m, t in zip(mine, theirs, strict=True)]
        assert ratio["pairs"] == pytest.approx(expected)
        assert ratio["min"] <= ratio["median"] <= ratio["max"]
    printed = capsys.readouterr().out
    assert "PyTorch SDPA" in printed and "pairs: 1" in printed and "torch.set_num_threads(1)" in printed
    assert "minigrad / minigrad fused:" in printed


def test_the_heap_setting_is_made_in_minigrad_workers_only_and_fused_kernels_run_in_fused_ones(monkeypatch):
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    calls = []
    monkeypatch.setattr(bench.runtime, "keep_large_blocks_in_heap", lambda: calls.append("heap"))  # not here
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # leave this test process's threads alone

    def record(node, method, run):
        calls.append(type(node).__name__)
        return run()

    made = {}
    for kind in ("minigrad", "minigrad-fused", "torch", "torch-sdpa"):
        calls.clear()
        with intercept(record):
            bench.worker(kind, "tiny", steps=1, warmup=0, device="cpu", threads=1)
        made[kind] = ("heap" in calls, "FastAttention" in calls, "SoftmaxFunction" in calls)
    assert made == {"minigrad": (True, False, True), "minigrad-fused": (True, True, False),
                    "torch": (False, False, False), "torch-sdpa": (False, False, False)}
    for kind, fused in (("minigrad-profile", False), ("minigrad-fused-profile", True)):
        calls.clear()
        profile = bench.worker(kind, "tiny", steps=1, warmup=0, device="cpu", threads=1)
        assert calls == ["heap"]
        assert ("FastAttention" in {r["name"] for r in profile["primitives"]}) == fused


def test_a_failing_worker_says_which_and_why():
    args = bench.argparse.Namespace(warmup=0, device="cpu", threads=1)
    with pytest.raises(RuntimeError, match="(?s)worker `--worker nonsense.*unknown worker kind 'nonsense'"):
        bench.spawn("nonsense", args)


@pytest.mark.parametrize("fused", [False, True], ids=["attention written out", "attention as one node"])
def test_profile_covers_every_primitive_of_a_step_and_adds_up(fused):
    model, _, x, y = bench.minigrad_setup(bench.CONFIGS["tiny"])
    used = set()

    def recording(node, method, run):
        used.add(type(node).__name__)
        return run()

    with mg.fused(fused), intercept(recording):
        model(x, y)

    profile = bench.profile_primitives("tiny", steps=2, warmup=1, fused=fused)

    assert {r["name"] for r in profile["primitives"]} == used
    assert ("FastAttention" in used) == fused
    rows = bench.profile_rows(profile)
    assert all(t >= 0 for _, fwd, bwd, total in rows for t in (fwd or 0, bwd or 0, total))  # [engine] too
    assert [label for label, *_ in rows[-2:]] == ["[engine]", "[optimizer]"]
    phases = profile["phases_ms"]
    assert sum(total for *_, total in rows) == pytest.approx(phases["step"])
    assert sum(fwd for _, fwd, _, _ in rows[:-1]) == pytest.approx(phases["forward"])
    # by kind of work: the products are the matrix products' primitives, and the four kinds add up to the step
    assert {r["name"] for r in profile["primitives"] if r["product"]} == {"LinearFunction", "MatMul"} - \
        ({"MatMul"} if fused else set())  # attention's products are inside its one node when fused
    kinds = bench.kinds_of_work(profile)
    assert list(kinds) == ["products", "other array work", "optimizer", "engine (Python)"]
    assert sum(kinds.values()) == pytest.approx(phases["step"]) and min(kinds.values()) >= 0


def test_profile_counts_a_primitive_inside_another_once():
    from minigrad.tensor import Function

    class Inner(Function):
        def forward(self, a):
            return a * 2

    class Outer(Function):
        def forward(self, a):
            return Inner().forward(a) + 1

    timer = bench.PrimitiveTimer()
    with intercept(timer):
        Outer.apply(mg.tensor(np.ones(3)))
    assert set(timer.seconds) == {("Outer", "forward")}


def test_the_compiled_kind_is_a_default_with_numba_and_runs_fused_and_compiled(monkeypatch):
    assert ("minigrad-compiled" in bench.DEFAULT_FRAMEWORKS) == bench.HAS_NUMBA
    if not bench.HAS_NUMBA:
        pytest.skip("Numba is not installed: pip install -e '.[compiled]' to run the compiled kind")
    from minigrad.speed import kernels

    seen = []
    monkeypatch.setattr(kernels, "gelu_tanh", lambda *a, _k=kernels.gelu_tanh, **kw: seen.append(1) or _k(*a, **kw))
    result = bench.worker("minigrad-compiled", "tiny", 2, 1, "cpu", 1)  # in this process: no spawn
    assert all(result["ms"][phase] > 0 for phase in bench.PHASES) and len(result["step_ms"]) == 2
    assert seen and not mg.is_compiled_enabled()  # its kernels ran, and the switch is off again
    profile = bench.profile_primitives("tiny", 1, 0, fused=True, compiled=True)
    assert any(r["name"] == "CompiledAttention" for r in profile["primitives"])


def test_the_compiled_kind_is_refused_by_name_off_the_cpu_and_left_out_by_default(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--device", "cuda", "--frameworks", "minigrad", "minigrad-compiled"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "minigrad-compiled" in err and ("run on the CPU" in err or "needs Numba" in err)


def test_profile_command_prints_both_breakdowns(tmp_path, capsys):
    pytest.importorskip("torch", reason=NO_TORCH)
    out = tmp_path / "profile.json"
    bench.main(["--profile", "--configs", "tiny", "--steps", "1", "--warmup", "0", *REFERENCES, "--json", str(out)])
    *ours, theirs, sdpa = json.loads(out.read_text())["profiles"]
    assert len(ours) == len(MINE)
    for p in ours:
        assert p["phases_ms"]["step"] > 0 and p["primitives"]
    assert any(r["name"] == "FastAttention" for r in ours[1]["primitives"])  # fused
    for p in (theirs, sdpa):
        assert p["clock"] == "CPU" and p["ops"] and p["total_self_ms"] >= sum(op["self_ms"] for op in p["ops"])
    assert any("scaled_dot_product" in op["name"] for op in sdpa["ops"])
    printed = capsys.readouterr().out
    assert "[whole step]" in printed and "torch.profiler" in printed


def test_sdpa_reference_is_the_written_out_attention():
    """PyTorch's second reference computes the same loss and gradients as the first (float64)."""
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    from models.torch_reference import from_minigrad

    model, _, x, y = bench.minigrad_setup(bench.CONFIGS["tiny"])
    grads = []
    for sdpa in (False, True):
        ref = from_minigrad(model, sdpa=sdpa)
        _, loss = ref(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        grads.append({n: p.grad for n, p in ref.named_parameters()} | {"loss": loss.detach()})
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("missing, argv, message", [
    ("torch", [], "it trains nanoGPT in PyTorch beside train.py, and torch is not installed: pip install -e "),
    ("numba", ["--speed", "compiled"], "--speed compiled needs Numba, which is not installed"),
    (None, ["--data", "no/such.txt"], "--data no/such.txt: no such file"),
])
def test_the_nanogpt_comparison_says_what_is_missing_before_any_work(monkeypatch, capsys, missing, argv, message):
    """Without torch it trained train.py for minutes, then failed with a traceback cut mid-word."""
    import importlib.util

    from benchmarks import nanogpt

    find_spec = importlib.util.find_spec
    # the one missing; the others there, installed or not (the README's test venv has neither torch nor numba)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else
                        find_spec(name, *a) or (object() if name in ("torch", "numba") else None))
    monkeypatch.setattr(nanogpt, "compare", lambda *a, **k: pytest.fail("the comparison started"))
    assert nanogpt.main(["--data", "README.md", *argv]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"python -m benchmarks.nanogpt: error: {message}")


def test_the_twins_benchmark_measures_each_twin_against_its_teaching_function_in_turn(capsys):
    """benchmarks.twins: a row per twin, with steps timed on both sides, and whether the configuration runs it (tiny
    runs the tanh GELU and attention, not the exact GELU); the table it switches is restored after each twin."""
    from benchmarks import twins
    from minigrad.core import modes

    rows = {row["twin"]: row for row in twins.measure("tiny", rounds=2, warmup=1)}
    assert set(rows) == {cls.__name__ for cls in twins.FUSED.values()}
    assert rows["FastGelu"]["runs"] and rows["FastAttention"]["runs"] and not rows["FastGeluErf"]["runs"]
    assert all(row["with_ms"] > 0 and row["without_ms"] > 0 and row["ratio"] > 0 for row in rows.values())
    assert modes.implementations == {}
    twins.main(["--configs", "tiny", "--rounds", "2"])
    out = capsys.readouterr().out
    assert "FastAttention" in out and "not run here: noise" in out
    with pytest.raises(SystemExit):
        twins.main(["--rounds", "1"])
    assert "--rounds must be at least 2" in capsys.readouterr().err
