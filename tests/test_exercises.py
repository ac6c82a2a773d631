"""python -m gptlab.exercises: each exercise's check passes with the engine's own Function and with a correct answer
written another way, and names each mistake pattern where it applies; start writes outside the package and never
overwrites. The answers are written into the stub that `start` makes, as a learner would.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gptlab.exercises.__main__ import checked, hint, main, solution, start
from gptlab.exercises.catalog import BY_NAME, EXERCISES
from gptlab.exercises.check import check

ROOT = Path(__file__).resolve().parents[1]
TODO = '        raise NotImplementedError("backward: yours to write")\n'

# a correct backward for each exercise, written otherwise than the engine's
RIGHT = {
    "add": """
        def back(shape):  # the added axes summed away, then the stretched ones
            d = dout.sum(axis=tuple(range(dout.ndim - len(shape))))
            return d.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)
        return back(self.a_shape), back(self.b_shape)""",
    "mul": "return unbroadcast(self.b * dout, self.a.shape), unbroadcast(self.a * dout, self.b.shape)",
    "matmul": """
        da = unbroadcast(dout @ xp.swapaxes(self.b, -1, -2), self.a.shape)
        db = unbroadcast(xp.swapaxes(xp.swapaxes(dout, -1, -2) @ self.a, -1, -2), self.b.shape)
        return da, db""",
    "tanh": """
        y = self.saved(self.y, "output")
        return (dout - dout * y * y,)""",
    "gelu": """
        x = self.saved(self.x, 0)
        t = xp.tanh(C * (x + K * x ** 3))
        return (dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C * (1 + 3 * K * x * x)),)""",
    "softmax": """
        y = self.y
        return (y * dout - y * (dout * y).sum(axis=-1, keepdims=True),)""",
    "log_softmax": "return (dout - xp.exp(self.y) * xp.sum(dout, axis=-1, keepdims=True),)",
    "cross_entropy": """
        n, v = self.probs.shape
        return (dout * (self.probs - xp.eye(v)[self.targets]) / n,)""",
    "layer_norm": """
        xhat, c, lead = self.xhat, self.xhat.shape[-1], tuple(range(dout.ndim - 1))
        dxhat = dout * self.w
        dx = (c * dxhat - dxhat.sum(-1, keepdims=True) - xhat * (dxhat * xhat).sum(-1, keepdims=True)) * self.rstd / c
        return dx, (dout * xhat).sum(axis=lead), dout.sum(axis=lead)""",
    "embedding": """
        dw = xp.zeros(self.w_shape)
        xp.add.at(dw, self.indices.reshape(-1), dout.reshape(-1, self.w_shape[1]))
        return (dw,)""",
    "scores": """
        ds = dout * self.allowed
        return ds @ self.k * self.scale, xp.swapaxes(ds, -1, -2) @ self.q * self.scale""",
    "attention": """
        p, dv = self.p, xp.swapaxes(self.p, -1, -2) @ dout
        dp = dout @ xp.swapaxes(self.v, -1, -2)
        ds = p * dp - p * (p * dp).sum(axis=-1, keepdims=True)
        dq, dk = ds @ self.k * self.scale, xp.swapaxes(ds, -1, -2) @ self.q * self.scale
        return unbroadcast(dq, self.q.shape), unbroadcast(dk, self.k.shape), unbroadcast(dv, self.v.shape)""",
    "head": """
        p, t = self.weights, xp.swapaxes
        dv = t(p, -1, -2) @ dout
        dp = dout @ t(self.v, -1, -2)
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) / math.sqrt(self.wq.shape[1])
        dq, dk = ds @ self.k, t(ds, -1, -2) @ self.q
        rows = lambda a: a.reshape(-1, a.shape[-1])  # noqa: E731
        dx = dq @ self.wq.T + dk @ self.wk.T + dv @ self.wv.T
        return dx, rows(self.x).T @ rows(dq), rows(self.x).T @ rows(dk), rows(self.x).T @ rows(dv)""",
    "gpt": """
        t, flat = (lambda a: xp.swapaxes(a, -1, -2)), (lambda a: a.reshape(-1, a.shape[-1]))

        def norm_back(dn, n, rstd):  # the exercise layer_norm, without w and b
            return rstd * (dn - dn.mean(-1, keepdims=True) - n * (dn * n).mean(-1, keepdims=True))

        g = self.grads = {}
        B, T = self.idx.shape
        g["logits"] = dout * (self.probs - xp.eye(self.probs.shape[-1])[self.targets]) / (B * T)
        g["n3"] = g["logits"] @ self.w_head.T
        g["m"] = norm_back(g["n3"], self.n3, self.n3_rstd)
        g["h"] = g["m"] @ self.w2.T
        u = xp.tanh(GELU_C * (self.hpre + GELU_K * self.hpre ** 3))
        slope = 0.5 * (1 + u) + 0.5 * self.hpre * (1 - u * u) * GELU_C * (1 + 3 * GELU_K * self.hpre ** 2)
        g["hpre"] = g["h"] * slope
        g["n2"] = g["hpre"] @ self.w1.T
        g["y"] = g["m"] + norm_back(g["n2"], self.n2, self.n2_rstd)
        g["heads"] = g["y"] @ self.wo.T
        g["att"] = g["heads"] @ t(self.v)
        g["v"] = t(self.att) @ g["heads"]
        ds = self.att * (g["att"] - (g["att"] * self.att).sum(-1, keepdims=True)) / math.sqrt(self.wq.shape[1])
        g["k"], g["q"] = t(ds) @ self.q, ds @ self.k
        g["a"] = g["q"] @ self.wq.T + g["k"] @ self.wk.T + g["v"] @ self.wv.T
        g["x"] = g["y"] + norm_back(g["a"], self.a, self.a_rstd)
        dwte = xp.zeros(self.wte_shape)
        xp.add.at(dwte, self.idx.reshape(-1), flat(g["x"]))
        dw = [flat(u).T @ flat(g[d]) for u, d in ((self.a, "q"), (self.a, "k"), (self.a, "v"), (self.heads, "y"),
                                                   (self.n2, "hpre"), (self.h, "m"), (self.n3, "logits"))]
        return (dwte, g["x"].sum(0), *dw)""",
}

# (exercise, a wrong backward, the words the check must say)
WRONG = [
    ("add", "return dout, dout", "a missing sum over a broadcast axis"),
    ("add", RIGHT["add"].replace("back(self.b_shape)", "-back(self.b_shape)"), "db has the wrong sign"),
    ("mul", "return self.b * dout, unbroadcast(self.a * dout, self.b.shape)", "a missing sum over a broadcast axis"),
    ("mul", "return unbroadcast(self.b * dout, self.a.shape), unbroadcast(2 * self.a * dout, self.b.shape)",
     "db is off by a constant factor: yours is 2 times"),
    ("matmul", "return unbroadcast(dout @ xp.swapaxes(self.b, -1, -2), self.a.shape), xp.swapaxes(dout, -1, -2) "
               "@ self.a", "db is transposed"),
    ("tanh", "return (dout * (self.y ** 2 - 1),)", "dx has the wrong sign"),
    ("tanh", "return (0.5 * dout * (1 - self.y ** 2),)", "dx is off by a constant factor: yours is 0.5 times"),
    ("softmax", "return (self.y * dout,)", "softmax's sum term is missing"),
    ("log_softmax", "return (dout,)", "the sum term is missing"),
    ("cross_entropy", "return (dout * (self.probs - xp.eye(self.probs.shape[1])[self.targets]),)",
     "case 2 of 2 (logits (4, 5)): dlogits is off by a constant factor: yours is 4 times"),
    ("cross_entropy", "return (dout * self.probs / self.probs.shape[0],)", "the softmax term or the one-hot term"),
    ("layer_norm", """
        lead = tuple(range(dout.ndim - 1))
        dxhat = dout * self.w
        dx = self.rstd * (dxhat - self.xhat * (dxhat * self.xhat).mean(-1, keepdims=True))
        return dx, (dout * self.xhat).sum(axis=lead), dout.sum(axis=lead)""", "the mean's term is missing"),
    ("layer_norm", """
        dxhat, xhat = dout * self.w, self.xhat
        dx = self.rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
        return dx, dout * xhat, dout.sum(axis=tuple(range(dout.ndim - 1)))""",
     "dw has shape (1, 4) but w has shape (4,): it was broadcast"),
    ("scores", "return dout @ self.k * self.scale, xp.swapaxes(dout, -1, -2) @ self.q * self.scale",
     "dq: the masked positions are not zero"),
    ("attention", """
        p, dv = self.p, xp.swapaxes(self.p, -1, -2) @ dout
        dp = dout @ xp.swapaxes(self.v, -1, -2)
        ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
        return ds @ self.k, xp.swapaxes(ds, -1, -2) @ self.q * self.scale, dv""",
     "dq is off by a constant factor: yours is 1.414 times"),
    ("attention", """
        p, dv = self.p, xp.swapaxes(self.p, -1, -2) @ dout
        dp = dout @ xp.swapaxes(self.v, -1, -2)
        ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
        return ds @ self.k * self.scale, xp.swapaxes(ds, -1, -2) @ self.q * self.scale, dv""",
     "dk has shape (2, 4, 3) but k has shape (1, 4, 3): it was broadcast"),
    ("gpt", RIGHT["gpt"].replace('g["m"] + norm_back(g["n2"]', 'norm_back(g["n2"]'),
     "the first wrong step is y: dy is wrong"),
    ("gpt", RIGHT["gpt"].replace("/ (B * T)", ""),
     "the first wrong step is logits: dlogits is off by a constant factor"),
    ("head", RIGHT["head"].replace("rows(self.x).T @ rows(dq)", "rows(dq).T @ rows(self.x)"), "dwq is transposed"),
]


def answer(tmp_path: Path, name: str, body: str) -> tuple[bool, str]:
    """start the exercise in tmp_path, write `body` as its backward, and check it."""
    start(BY_NAME[name], tmp_path)
    path = tmp_path / f"{name}.py"
    stub = path.read_text()
    assert stub.count(TODO) == 1
    path.write_text(stub.replace(TODO, textwrap.indent(textwrap.dedent(body).strip(), " " * 8) + "\n"))
    return checked(BY_NAME[name], path)


@pytest.mark.parametrize("name", [e.name for e in EXERCISES if inspect.isclass(e.solution[0])
                                  and e.solution[0].__name__ != "MaskedFillFunction"])
def test_the_engine_s_own_function_passes(name):
    passed, words = check(BY_NAME[name], BY_NAME[name].solution[0])
    assert passed, words


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_correct_answer_written_otherwise_passes_and_says_what_to_read_next(tmp_path, name):
    passed, words = answer(tmp_path, name, RIGHT[name])
    assert passed, words
    assert f'docs/backward.md, "{BY_NAME[name].section}"' in words


def test_second_derivatives_are_reported_not_required(tmp_path):
    assert "gives the engine's second derivatives too" in check(BY_NAME["softmax"], BY_NAME["softmax"].solution[0])[1]
    passed, words = answer(tmp_path, "softmax", RIGHT["softmax"])  # self.y, not self.saved(self.y, "output")
    assert passed and "for second derivatives take everything forward kept through self.saved" in words


def test_every_exercise_has_a_right_answer_here():
    assert sorted(RIGHT) == sorted(BY_NAME)


@pytest.mark.parametrize("name, body, words", WRONG, ids=[f"{n}-{w[:24]}" for n, _, w in WRONG])
def test_each_mistake_is_named(tmp_path, name, body, words):
    passed, said = answer(tmp_path, name, body)
    assert not passed
    assert words in said, said
    assert "expected" in said and ("the smallest failing case:" in said or "the first wrong step" in said)


def test_the_stub_checks_its_forward_then_asks_for_a_backward(tmp_path):
    start(BY_NAME["softmax"], tmp_path)
    passed, words = checked(BY_NAME["softmax"], tmp_path / "softmax.py")
    assert not passed and "backward is not written yet" in words and "--hint" in words


def test_a_file_that_does_not_run_is_answered_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"softmax.py, line 2[0-9]: "):
        answer(tmp_path, "softmax", "return (dout,")


def test_start_writes_into_the_learner_s_folder_and_never_overwrites(tmp_path):
    folder = tmp_path / "mine"
    start(BY_NAME["add"], folder)
    written = (folder / "add.py").read_text()
    assert "class Add(Primitive)" in written and "xp = namespace(dout)" in written
    (folder / "add.py").write_text("my work")
    with pytest.raises(SystemExit, match="does not overwrite"):
        start(BY_NAME["add"], folder)
    assert (folder / "add.py").read_text() == "my work"
    with pytest.raises(SystemExit, match="inside the package"):
        start(BY_NAME["add"], ROOT / "gptlab" / "exercises")
    assert not (ROOT / "gptlab" / "exercises" / "add.py").exists()


def test_hints_come_a_line_at_a_time(tmp_path):
    e = BY_NAME["layer_norm"]
    assert [hint(e, None, tmp_path) for _ in e.hints] == [hint(e, n, tmp_path) for n in range(1, len(e.hints) + 1)]
    assert e.hints[0] in hint(e, 1, tmp_path) and e.hints[1] in hint(e, 2, tmp_path)


def test_the_solution_is_the_engine_s_source_and_its_derivation_is_a_real_section():
    headings = [line.lstrip("#").strip() for line in (ROOT / "docs" / "backward.md").read_text().splitlines()
                if line.startswith("#")]
    for e in EXERCISES:
        assert e.section in headings, e.name
    assert "class SoftmaxFunction" in solution(BY_NAME["softmax"])


def test_the_command_lists_the_exercises_in_the_reading_route_s_order(tmp_path, capsys):
    assert main([]) == 0
    listed = capsys.readouterr().out
    positions = [listed.index(f" {e.name} ") for e in EXERCISES]
    assert positions == sorted(positions)
    assert main(["start", "tanh", "--dir", str(tmp_path)]) == 0 and (tmp_path / "tanh.py").exists()
    assert main(["check", "tanh", "--dir", str(tmp_path)]) == 1
    done = subprocess.run([sys.executable, "-m", "gptlab.exercises", "list"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines()[1:] == listed.splitlines()[1:]
