"""What a run knows of its machine (minigrad/array/machine.py) and the choices measured on it: the cache of measured
figures keyed by the machine, mg.compiled()'s sgemm and threads (kernels.choose_products), and the BLAS threads of
the default path (minigrad/array/blas_threads.py). No test asserts how fast anything is: the measurements are replaced
by recorded stand-ins where a choice is checked."""

from __future__ import annotations

import importlib.util
import json

import pytest

from minigrad.array import blas_threads, machine, runtime

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="Numba is not installed: pip install -e '.[compiled]'")
needs_threadpoolctl = pytest.mark.skipif(importlib.util.find_spec("threadpoolctl") is None,
                                         reason="threadpoolctl is not installed: pip install threadpoolctl")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIGRAD_CACHE_DIR", str(tmp_path))
    return tmp_path / machine.CACHE_FILE


def test_a_figure_is_measured_once_per_machine_and_again_on_another(cache, monkeypatch):
    measured = []

    def measure():
        measured.append(len(measured) + 1.5)
        return measured[-1]

    assert machine.remembered("figure", measure) == (1.5, False)
    assert machine.remembered("figure", measure) == (1.5, True)  # read back, not measured
    monkeypatch.setattr(machine, "key", lambda: "another CPU | avx2 | 2 cores")
    assert machine.remembered("figure", measure) == (2.5, False)
    assert machine.remembered("figure", measure) == (2.5, True)
    assert measured == [1.5, 2.5]
    assert len(json.loads(cache.read_text())) == 2  # both machines kept


def test_an_unreadable_cache_is_measured_past_and_written_anew(cache):
    cache.write_text("not json{")
    assert machine.remembered("figure", lambda: 7) == (7, False)
    assert machine.remembered("figure", lambda: 8) == (7, True)


def test_the_key_names_what_makes_the_machine():
    key = machine.key()
    assert machine.cpu_model() in key and f"{runtime.usable_cores()} cores" in key
    assert set(machine.vector_extensions()) <= set(machine.VECTOR_EXTENSIONS)
    for pool in machine.blas_pools():  # the BLAS's kernel and threads: another cap is another machine
        assert pool["internal_api"] in key and f"on {pool['num_threads']} threads" in key


def test_the_description_gives_the_cached_peak_and_says_so(cache):
    cache.write_text(json.dumps({machine.key(): {f"sgemm_peak_gflops {machine.PEAK_N}": 123.4}}))
    said = machine.describe()
    assert "123.4 GFLOP/s" in said and "cached in" in said and machine.cpu_model() in said
    assert said.splitlines()[1].startswith("BLAS: ")


# ---- mg.compiled()'s products: whose sgemm, on how many threads ----

@pytest.fixture
def kernels(monkeypatch, cache):
    """minigrad.kernels with two sgemms to choose from and its measurement recorded, not run."""
    if importlib.util.find_spec("numba") is None:
        pytest.skip("Numba is not installed: pip install -e '.[compiled]'")
    from minigrad import kernels

    for name in blas_threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(kernels.FORCE_SGEMM, raising=False)
    monkeypatch.setattr(kernels, "SGEMMS", {"OpenBLAS": 1, "MKL": 2})  # never called: the timing is a stand-in
    kernels.timed = []
    ms = {("OpenBLAS", 1): 9.0, ("OpenBLAS", 2): 5.0, ("MKL", 1): 8.0, ("MKL", 2): 6.0}
    monkeypatch.setattr(kernels, "_time_work", lambda name, n: kernels.timed.append((name, n)) or ms[(name, n)])
    return kernels


def test_the_products_choice_is_measured_then_read_from_the_cache(kernels, monkeypatch):
    name, threads, how = kernels.choose_products(2)
    assert (name, threads) == ("OpenBLAS", 2) and "measured now" in how and "MKL on 1: 8.00 ms" in how
    assert len(kernels.timed) == 4
    assert kernels.choose_products(2)[:2] == ("OpenBLAS", 2)
    assert len(kernels.timed) == 4 and "cached in" in kernels.choose_products(2)[2]  # not measured again
    monkeypatch.setattr(machine, "key", lambda: "another machine")
    kernels.choose_products(2)
    assert len(kernels.timed) == 8  # another machine: measured again


def test_a_thread_count_in_the_environment_is_kept(kernels, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert kernels.choose_products(1)[:2] == ("MKL", 1)
    assert sorted(kernels.timed) == [("MKL", 1), ("OpenBLAS", 1)]


def test_the_override_forces_the_choice_without_measuring(kernels, monkeypatch):
    monkeypatch.setenv(kernels.FORCE_SGEMM, "mkl")
    assert kernels.choose_products(2) == ("MKL", 2, f"{kernels.FORCE_SGEMM}=mkl")
    monkeypatch.setenv(kernels.FORCE_SGEMM, "NumPy")
    assert kernels.choose_products(2)[0] is None
    assert kernels.timed == []
    monkeypatch.setenv(kernels.FORCE_SGEMM, "cuBLAS")
    with pytest.raises(ValueError, match=r"MINIGRAD_SGEMM='cuBLAS': expected one of OpenBLAS, MKL, NumPy"):
        kernels.choose_products(2)


@needs_numba
def test_compiled_says_what_it_chose_and_how(monkeypatch, cache):
    import minigrad as mg
    from minigrad import core, kernels

    if "OpenBLAS" not in kernels.SGEMMS:
        pytest.skip("no sgemm to call here: NumPy's OpenBLAS and a threading layer (OpenMP or TBB) are needed")
    for name in ("PRODUCTS", "CHOSEN_BY", "_chosen"):
        monkeypatch.setattr(kernels, name, getattr(kernels, name))  # put back after the test
    monkeypatch.setenv(kernels.FORCE_SGEMM, "OpenBLAS")
    with mg.compiled():
        assert kernels.PRODUCTS == "OpenBLAS"
        assert f"OpenBLAS's sgemm on those threads, chosen by {kernels.FORCE_SGEMM}=OpenBLAS" in kernels.describe()
    monkeypatch.setenv(kernels.FORCE_SGEMM, "NumPy")  # the override changed: chosen again at the next entry
    with mg.compiled():
        assert kernels.PRODUCTS is None and "by NumPy (its BLAS)" in kernels.describe()
    monkeypatch.setenv(kernels.FORCE_SGEMM, "cuBLAS")  # refused at the entry, every setting left as it was
    before = (dict(core.modes.implementations), [p["num_threads"] for p in machine.blas_pools()])
    with pytest.raises(ValueError, match="MINIGRAD_SGEMM='cuBLAS'"), mg.compiled():
        pass
    assert not mg.is_compiled_enabled()
    assert (core.modes.implementations, [p["num_threads"] for p in machine.blas_pools()]) == before


# ---- the default path's BLAS threads ----

class FakeBlas:
    """threadpoolctl's controller as BlasThreads uses it: limit() records the count in force."""

    def __init__(self, found: int) -> None:
        self.found, self.count = found, found

    def limit(self, limits: int):
        self.count = limits
        blas = self

        class Limiter:
            def restore_original_limits(self) -> None:
                blas.count = blas.found
        return Limiter()


@pytest.mark.parametrize("busy", [False, True], ids=["quiet: two threads faster", "busy: one thread faster"])
def test_the_steps_choose_the_faster_count_and_try_again_later(busy):
    blas = FakeBlas(2)
    tuner = blas_threads.BlasThreads(blas, [2, 1], warmup=2, trial=3, every=10)
    per_step = {2: 0.2 if busy else 0.02, 1: 0.03}  # a step's seconds at each count
    counts, said = [], []
    for _ in range(24):
        counts.append(blas.count)
        said.append(tuner.after_step(per_step[blas.count]))
    best = 1 if busy else 2
    assert counts[:2] == [2, 2] and counts[2:8] == [2, 1, 2, 1, 2, 1]  # warm-up, then trials taking turns
    assert counts[8:18] == [best] * 10 and tuner.chosen == best
    # tried again after `every` steps; beside the busy program, two threads for one step only (over twice as slow)
    assert counts[18:24] == ([2, 1, 1, 1, 1, 1] if busy else [2, 1, 2, 1, 2, 1])
    assert tuner.chosen == best and tuner.every == 20  # the same choice again: the next round comes later
    assert [s for s in said if s] == [said[7]] and f"BLAS threads: {best} " in said[7]  # said once
    tuner.close()
    assert blas.count == 2


def test_a_choice_that_changes_is_followed():
    blas = FakeBlas(2)
    tuner = blas_threads.BlasThreads(blas, [2, 1], warmup=0, trial=2, every=4)
    for _ in range(4):
        tuner.after_step(0.01 if blas.count == 2 else 0.05)
    assert tuner.chosen == 2
    for _ in range(12):  # the machine became busy
        tuner.after_step(0.5 if blas.count == 2 else 0.05)
    assert tuner.chosen == 1 and blas.count == 1


def test_a_user_s_count_or_a_single_thread_leaves_the_blas_alone(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert blas_threads.for_training(None) == (None, None, None)
    assert blas_threads.fixed_by_environment() == "OPENBLAS_NUM_THREADS=2"
    with pytest.raises(ValueError, match=r"two or more thread counts of at least 1, got \[1\]"):
        blas_threads.BlasThreads(FakeBlas(1), [1])


@needs_threadpoolctl
def test_blas_threads_flag_fixes_the_count_for_the_run():
    from threadpoolctl import threadpool_info

    def counts():
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    before = counts()
    tuner, fixed, said = blas_threads.for_training(1)
    try:
        assert tuner is None and said == "BLAS threads: 1 (--blas-threads)" and counts() == {1}
    finally:
        fixed.restore_original_limits()
    assert counts() == before


@needs_threadpoolctl
def test_train_py_chooses_its_blas_threads_and_says_so_once(tmp_path, capsys, monkeypatch):
    import train

    for name in blas_threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if min((p["num_threads"] for p in machine.blas_pools()), default=1) < 2:
        pytest.skip("NumPy's BLAS runs on one thread here: there is nothing to choose")
    argv = ["--steps", "12", "--samples", "0", "--no-explain", "--eval-interval", "12"]
    assert train.main([*argv, "--out", str(tmp_path / "chosen")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("BLAS threads: ")]
    assert len(said) == 1 and "median of 3 at each: 2 threads" in said[0] and "1 thread " in said[0]
    assert train.main([*argv, "--out", str(tmp_path / "fixed"), "--blas-threads", "1"]) == 0
    assert "BLAS threads: 1 (--blas-threads)" in capsys.readouterr().err.splitlines()


def test_blas_threads_flag_is_refused_where_it_would_change_nothing(tmp_path, capsys):
    import train

    assert train.main(["--blas-threads", "2", "--compiled", "--out", str(tmp_path)]) == 2
    assert "--blas-threads 2 is for NumPy's BLAS on the CPU in one process" in capsys.readouterr().err
    assert train.main(["--blas-threads", "0", "--out", str(tmp_path)]) == 2
    assert "--blas-threads must be 1 or more, got 0" in capsys.readouterr().err


def test_the_command_shows_the_cache_and_forgets_it(cache, capsys):
    cache.write_text(json.dumps({machine.key(): {f"sgemm_peak_gflops {machine.PEAK_N}": 123.4, "choice": "x"},
                                 "another machine": {"choice": "y"}}))
    assert machine.main([]) == 0
    printed = capsys.readouterr().out
    assert "123.4 GFLOP/s (cached in" in printed and "cached: choice: x" in printed and "choice: y" not in printed
    assert machine.forget() and not machine.forget()
    assert json.loads(cache.read_text()) == {"another machine": {"choice": "y"}}  # another machine's figures stay
