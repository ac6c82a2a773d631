"""Explain mode teaches on its own: its default is the interesting position (被 in the passive sentence), it
says why it chose that position and that head, every column of its table has a legend line, 'share' stays
within 0 to 100%, and the heatmap has its tokens on both axes, a colour bar and a title.
(Its errors and the --png file: tests/test_cli.py and tests/test_train.py.)
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
import types

import numpy as np
import pytest

import minigrad as mg
import train
from gptlab import explain
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.explain import (
    attention_figure,
    attention_steps,
    choose_head,
    choose_query,
    choose_target,
    default_ids,
    explain_example,
    shares,
    trace_attention,
    trace_gradients,
)
from gptlab.settings import HELDOUT_SEED, UsageError
from gptlab.tasks import make_task, split
from models import GPT, GPTConfig, Llama, LlamaConfig

SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "2", "--batch-size", "16", "--samples", "0",
         "--eval-interval", "20"]
ROW = re.compile(r"^\s+(\d+)\s+\S+\s+(-?[\d.]+)\s+(kept|-inf)\s+([\d.]+)%(?:\s+(-?[\d.]+)%)?$", flags=re.M)


def tiny_model(task, seed: int = 0) -> GPT:
    mg.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=len(task.vocab), block_size=task.seq_len - 1, n_layer=2, n_head=2, n_embd=16))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[str, str]:
    """A run of the default task, 2 steps: its --out folder and what train.py printed."""
    out, printed = tmp_path_factory.mktemp("run"), io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert train.main(["--steps", "2", "--out", str(out), *SMALL]) == 0
    return str(out), printed.getvalue()


# ---- the default: the passive sentence at 被 ----

def test_default_is_a_held_out_passive_sentence_at_bei(trained, capsys):
    assert train.main(["explain", "--out", trained[0]]) == 0
    out = capsys.readouterr().out
    task = make_task("sentences")
    sentence = task.decode(split(task, seed=HELDOUT_SEED).heldout[0][0][:-1])  # as the model reads it
    tokens = sentence.split()
    assert len(tokens) == 8 and tokens[5] == "被" and tokens[6] == tokens[0], "the subject comes back after 被"
    assert f"for position 5 (被) of {sentence!r}" in out
    assert "why position 5: the sentences task's default: after 被 comes the subject, at position 0" in out


def test_end_of_training_shows_what_explain_shows_by_default(trained, capsys):
    out, trained_out = trained
    assert train.main(["explain", "--out", out]) == 0
    explained = capsys.readouterr().out
    table = explained[explained.index("Attention in layer"):]
    assert len(table.splitlines()) > 10 and table in trained_out


@pytest.mark.parametrize("task_name, prompt, position, why", [
    ("sentences", "我 吃 蘋果 ， 蘋果 被 我", 5, "after 被 comes the subject"),
    ("sentences", "我 吃 蘋果", 2, "the last one (the default; --query picks another)"),  # no 被: the last
    ("sort", "3 1 4 1 5 9 = 1", 6, "after = comes the smallest digit"),
    ("add", "1 2 3 + 4 5 6 =", 7, "after = comes the sum's last digit"),
])
def test_default_position_is_the_task_s_focus(task_name, prompt, position, why):
    task = make_task(task_name)
    query, reason = choose_query(task, task.encode(prompt), None)
    assert query == position and why in reason
    assert choose_query(task, task.encode(prompt), 1) == (1, "--query 1")


def test_text_task_has_no_focus_and_explains_the_last_position(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("the cat sat on the mat. " * 10, encoding="utf-8")
    task = make_task("text", data=str(data), seq_len=17)
    ids = default_ids(task)
    assert len(ids) == task.seq_len - 1 and choose_query(task, ids, None)[0] == len(ids) - 1


def test_a_long_prompt_s_lines_are_wrapped_or_cut_with_a_note(tmp_path, capsys):
    """A 64-token text prompt: its b line (764 characters on one line before) wraps with every term kept, and the title
    shows the prompt's start and end, saying how long it is: no line grows with the prompt."""
    data = tmp_path / "data.txt"
    data.write_text("the cat sat on the mat; the dog sat on the log. " * 20, encoding="utf-8")
    task = make_task("text", data=str(data), seq_len=65)
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(task.vocab), block_size=64, n_layer=1, n_head=2, n_embd=16))
    ids = default_ids(task)
    steps = explain_example(model, task, ids)
    out = capsys.readouterr().out
    assert len(ids) == 64 and max(len(line) for line in out.splitlines()) < 150
    text = steps.text
    assert f"of {text[:24] + '…' + text[-24:]!r} (cut: 64 characters); hs = 8:" in out
    b_lines = out[out.index(f"  b{steps.query} = "):].splitlines()
    assert len(b_lines) > 1 and all(line.startswith(" " * len(f"  b{steps.query} = ")) for line in b_lines[1:])
    assert max(len(line) for line in b_lines) <= explain.TABLE_WIDTH
    terms = " ".join(line.strip() for line in b_lines).split(" = ", 1)[1].split(" + ")
    layer, head, _ = steps.heads[steps.query]
    assert terms == [f"{w:.2f}·v{j}" for j, w in enumerate(steps.weights[layer, head, steps.query])]


# ---- how the head is chosen ----

def test_choose_head_takes_the_head_that_reaches_furthest_back():
    T, query = 4, 3
    weights = [np.zeros((3, T, T)) for _ in range(2)]  # 2 layers, 3 heads
    for w in weights:
        w[:, query, query] = 1.0  # every head looks at the query's own position (distance 0) ...
    weights[1][2, query] = [0.0, 0.5, 0.5, 0.0]  # ... but layer 1 head 2 looks 1.5 back on average
    weights[0][1, query] = [0.25, 0.0, 0.0, 0.75]  # and layer 0 head 1 0.75 back
    layer, head, why = choose_head(weights, query, None, None)
    assert (layer, head) == (1, 2) and "of all 6 heads" in why and "sum_j weight_j (3 - j) = 1.50" in why
    layer, head, why = choose_head(weights, query, 0, None)
    assert (layer, head) == (0, 1) and "of the 3 heads of layer 0" in why and "= 0.75" in why
    assert choose_head(weights, query, None, 0)[:2] == (0, 0)  # a tie: the first
    assert choose_head(weights, query, 0, 2) == (0, 2, "--layer 0 --head 2")


def test_the_printed_head_is_the_one_that_reaches_furthest_back(capsys):
    task = make_task("sentences")
    model = tiny_model(task)
    ids = task.encode("我 吃 蘋果 ， 蘋果 被 我 吃")
    explain_example(model, task, ids)
    out = capsys.readouterr().out
    layer, head = map(int, re.search(r"Attention in layer (\d+), head (\d+)", out).groups())
    reach = np.array([[float(t["weights"].numpy()[0, h, 5, :6] @ np.arange(5, -1, -1)) for h in range(2)]
                      for t in trace_attention(model, ids)])  # (layer, head)
    assert reach[layer, head] == reach.max()
    assert f"why head {head} of layer {layer}: of all 4 heads, the one that reaches furthest back from position 5: " \
           f"sum_j weight_j (5 - j) = {reach.max():.2f}" in out


# ---- one set of numbers: the table reads attention_steps ----

def test_the_table_prints_the_numbers_of_attention_steps(capsys):
    task = make_task("sentences")
    model = tiny_model(task, seed=1)
    ids = task.encode("我 吃 蘋果 ， 蘋果 被 我 吃")
    steps = attention_steps(model, task, ids, layer=1, head=0, query=4)
    assert explain_example(model, task, ids, layer=1, head=0, query=4).heads == steps.heads
    rows = ROW.findall(capsys.readouterr().out)
    assert [int(r[0]) for r in rows] == list(range(len(ids)))
    for j, score, mask, weight, share in rows:
        j = int(j)
        assert score == f"{steps.scores[1, 0, 4, j]:.3f}" and mask == ("kept" if j <= 4 else "-inf")
        assert weight == f"{100 * steps.weights[1, 0, 4, j]:.1f}"
        assert share == (f"{100 * steps.shares[1, 0, 4, j]:.1f}" if j <= 4 else "")


@pytest.mark.parametrize("arch", ["gpt", "llama-gqa"])
def test_steps_are_the_model_s_own_numbers(arch):
    task = make_task("sentences")
    mg.manual_seed(2)
    sizes = dict(vocab_size=len(task.vocab), block_size=task.seq_len - 1, n_layer=2, n_head=4, n_embd=16)
    model = GPT(GPTConfig(**sizes)) if arch == "gpt" else Llama(LlamaConfig(**sizes, n_kv_head=2))
    ids = task.encode("我 吃 蘋果 ， 蘋果 被 我")
    steps, traces = attention_steps(model, task, ids), trace_attention(model, ids)
    T, hs = len(ids), 4
    assert steps.scores.shape == steps.weights.shape == steps.shares.shape == (2, 4, T, T)
    assert steps.products.shape == (2, 4, T, T, hs) and steps.query == 5 and len(steps.heads) == T
    for layer, trace in enumerate(traces):
        np.testing.assert_array_equal(steps.scores[layer], trace["scores"].numpy()[0])  # step 1, before the mask
        np.testing.assert_array_equal(steps.weights[layer], trace["weights"].numpy()[0])
    np.testing.assert_array_equal(steps.kept, np.tril(np.ones((T, T), dtype=bool)))
    assert (steps.weights[..., ~steps.kept] == 0).all() and (steps.shares[..., ~steps.kept] == 0).all()
    np.testing.assert_allclose(steps.shares.sum(-1), 1, rtol=1e-12)
    # the neuron view's products add up to the score the model computed in float32
    np.testing.assert_allclose(steps.products.sum(-1) / np.sqrt(hs), steps.scores, rtol=1e-5, atol=1e-6)
    layer, head, why = steps.heads[steps.query]
    assert (layer, head, why) == choose_head(list(steps.weights), steps.query, None, None)


def test_steps_refuse_a_layer_head_or_query_out_of_range():
    task = make_task("sort")
    model, ids = tiny_model(task), task.encode("3 1 4 1 5 9 =")
    for flag, kwargs in (("--layer 2", {"layer": 2}), ("--head -1", {"head": -1}), ("--query 7", {"query": 7})):
        with pytest.raises(UsageError, match=f"{flag} is out of range: this model/prompt has 0 to "):
            attention_steps(model, task, ids, **kwargs)


# ---- the legend and 'share' ----

def test_every_column_has_its_legend_line(trained):
    out = trained[1]  # the end of a training run
    header = re.search(r"^\s+pos\s+token\s+1 score\s+2 mask\s+3 weight\s+4 share$", out, flags=re.M)
    assert header is not None
    legend = out[out.index("Attention in layer"):header.start()]
    for step, what in ((1, "score_j = q . k_j / sqrt(hs)"), (2, "causal mask"), (3, "softmax"),
                       (4, "output b = sum_j weight_j v_j")):
        assert re.search(rf"^\s+step {step}\s+.*{re.escape(what)}", legend, flags=re.M), step
    assert "share_j = weight_j |v_j| / sum_i weight_i |v_i|" in legend
    assert "why position" in legend and "why head" in legend


def test_share_is_a_part_of_the_output_between_0_and_1():
    # two values that point against each other: b's projection on them would give 259% and -159%
    w, v = np.array([0.6, 0.4]), np.array([[1.0, 0.0], [-1.0, 0.2]])
    b = w @ v
    projection = (w[:, None] * v) @ b / (b @ b)
    assert projection.max() > 1 and projection.min() < 0
    sizes = np.array([0.6 * 1.0, 0.4 * np.hypot(1.0, 0.2)])
    np.testing.assert_allclose(shares(w, v), sizes / sizes.sum(), rtol=1e-12)

    rng = np.random.default_rng(0)
    for _ in range(200):
        T = int(rng.integers(1, 9))
        scores = rng.normal(scale=rng.choice([0.1, 3.0, 30.0]), size=T)
        w = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
        s = shares(w, rng.normal(size=(T, 4)) * rng.choice([1e-3, 1.0, 1e3], size=(T, 1)))
        assert (s >= 0).all() and (s <= 1).all() and abs(s.sum() - 1) < 1e-12
    np.testing.assert_array_equal(shares(np.array([0.5, 0.5]), np.zeros((2, 3))), [0.0, 0.0])


def test_printed_shares_stay_within_0_and_100_percent(capsys):
    task = make_task("sentences")
    model = tiny_model(task, seed=3)
    ids = task.encode("我 吃 蘋果 ， 蘋果 被 我 吃")
    for layer in range(2):
        for head in range(2):
            for query in range(len(ids)):
                explain_example(model, task, ids, layer, head, query)
                rows = ROW.findall(capsys.readouterr().out)
                kept = [float(r[4]) for r in rows if r[2] == "kept"]
                assert len(kept) == query + 1 and all(0 <= s <= 100 for s in kept)
                assert abs(sum(kept) - 100) < 0.1 * len(kept)  # each printed to 0.1%


# ---- the heatmap ----

def tick_texts(labels) -> list[str]:
    return [label.get_text() for label in labels]


def test_heatmap_has_token_labels_colour_bar_and_title():
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    import matplotlib.pyplot as plt

    task = make_task("sort")  # digits: every font draws them
    ids = task.encode("3 1 4 1 5 9 = 1 1 3 4")
    model = tiny_model(task)
    fig = attention_figure(model, task, ids)
    try:
        heatmaps = [ax for ax in fig.axes if ax.get_images()]
        colour_bars = [ax for ax in fig.axes if not ax.get_images()]
        assert len(heatmaps) == 2 * 2 and len(colour_bars) == 1
        assert "attention weight" in colour_bars[0].get_ylabel()
        labels = [f"{j} {token}" for j, token in enumerate("3 1 4 1 5 9 = 1 1 3 4".split())]
        bottom_left = heatmaps[2]  # layer 1, head 0: both axes' labels show
        assert bottom_left.get_title() == "layer 1, head 0"
        assert tick_texts(bottom_left.get_xticklabels()) == labels
        assert tick_texts(bottom_left.get_yticklabels()) == labels
        assert bottom_left.get_xlabel().startswith("key") and bottom_left.get_ylabel().startswith("query")
        assert "Attention weights of every head for '3 1 4 1 5 9 = 1 1 3 4'" in fig.get_suptitle()
        drawn = bottom_left.get_images()[0].get_array()
        np.testing.assert_array_equal(drawn, trace_attention(model, ids)[1]["weights"].numpy()[0, 0])
    finally:
        plt.close(fig)


def test_heatmap_labels_chinese_tokens_with_a_font_that_has_them():
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    import matplotlib.pyplot as plt

    task = make_task("sentences")
    ids = task.encode("我 吃 蘋果 ， 蘋果 被 我 吃")
    font = explain.label_font("".join(task.vocab[i] for i in ids))
    if font is None:
        pytest.skip("no installed font draws these Chinese characters (for example: apt-get install fonts-noto-cjk)")
    fig = attention_figure(tiny_model(task), task, ids)
    try:
        ax = [ax for ax in fig.axes if ax.get_images()][0]
        assert tick_texts(ax.get_yticklabels())[5] == "5 被"
        assert [label.get_fontfamily() for label in ax.get_yticklabels()][5] == [font]
    finally:
        plt.close(fig)


def test_heatmap_without_a_font_for_the_tokens_labels_positions(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(explain, "label_font", lambda text: None)
    task = make_task("sentences")
    ids = task.encode("我 吃 蘋果")
    fig = attention_figure(tiny_model(task), task, ids)
    try:
        ax = [ax for ax in fig.axes if ax.get_images()][0]
        assert tick_texts(ax.get_yticklabels()) == ["0", "1", "2"]  # not boxes in place of the characters
        assert "3 tokens" in fig.get_suptitle()
    finally:
        plt.close(fig)
    explain.draw_attention(tiny_model(task), task, ids, str(tmp_path / "a.png"))
    assert "tokens labelled by position" in capsys.readouterr().out and (tmp_path / "a.png").exists()


# ---- the layer's graph: --graph FILE ----

def dot_graph(source: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """{node: its label's lines joined by |}, [(from, to)] of the DOT text that --graph wrote."""
    labels = re.findall(r'^\s+(\w+) \[.*?label="(.*?)"\]$', source, re.M)
    nodes = {node: label.replace("\\n", "|") for node, label in labels}
    return nodes, re.findall(r"^\s+(\w+) -> (\w+)", source, re.M)


def test_graph_draws_the_layer_s_four_steps_with_the_trace_s_gradients(trained, tmp_path, capsys):
    out = trained[0]
    dot = tmp_path / "layer.dot"
    assert train.main(["explain", "--out", out, "--graph", str(dot)]) == 0
    printed = capsys.readouterr().out
    layer = int(re.search(r"Attention in layer (\d+)", printed)[1])  # explain's layer for its position
    task, model = restore(load_checkpoint(out), "cpu")
    model.eval()
    ids = default_ids(task)
    traced = trace_gradients(model, task, ids, None, None)
    assert (traced.position, traced.target) == (5, ids[6])  # 被, and the token after it: the subject
    assert f"wrote {dot}: layer {layer}'s attention, gradients of log p({task.vocab[ids[6]]} after position 5)" \
        in printed
    source = dot.read_text(encoding="utf-8")
    assert "batched as the engine computes them" in source and "more nodes not drawn" not in source
    nodes, edges = dot_graph(source)
    named = {label.split("|")[0]: node for node, label in nodes.items() if node.startswith("t")}
    op = {node: label.split("|")[0] for node, label in nodes.items() if node.startswith("n")}

    def inputs(node: str) -> list[str]:
        return sorted(a for a, b in edges if b == node)

    def feeds(node: str) -> list[str]:  # the ops a tensor goes into
        return sorted(op[b] for a, b in edges if a == node)

    # step 1: q and k's transpose into a MatMul, times 1/sqrt(hs): the scores
    mul = inputs(named["scores"])[0]
    matmul = inputs(inputs(mul)[0])[0]
    assert op[mul] == "Mul" and op[matmul] == "MatMul" and feeds(named["k"]) == ["Permute"]
    assert named["q"] in inputs(matmul) and feeds(named["q"]) == ["MatMul"]
    # step 2, the mask: a Where; step 3: a softmax gives the weights; step 4: weights and v into one MatMul
    assert feeds(named["scores"]) == ["Where"] and op[inputs(named["weights"])[0]] == "SoftmaxFunction"
    assert feeds(named["weights"]) == ["MatMul"] and feeds(named["v"]) == ["MatMul"]
    assert [b for a, b in edges if a == named["weights"]] == [b for a, b in edges if a == named["v"]]
    assert sorted(op.values()) == ["MatMul", "MatMul", "Mul", "Permute", "Permute", "Reshape", "SoftmaxFunction",
                                   "Where"]
    for name, tensor in traced.layers[layer].items():  # each named tensor's gradient, as the trace has it
        norm = np.linalg.norm(tensor.grad.numpy().astype(np.float64))
        assert f"grad norm {norm:.4g}" in nodes[named[name]], name
    assert sum("grad: not kept" in label for label in nodes.values()) == 5  # the results no name keeps


def test_the_gradients_are_of_the_target_and_flow_back_in_time_only():
    """Position 5's prediction reads nothing of the later positions: their gradients are exactly 0, in every layer;
    a masked score's gradient is exactly 0; and the traced gradients are linked by the steps' backward formulas
    (out = weights @ v: d weights = d out @ v^T, d v = weights^T @ d out; softmax: d s = w * (d w - sum(d w * w)))."""
    task = make_task("sentences")
    model = tiny_model(task)
    ids = default_ids(task)
    traced = trace_gradients(model, task, ids, None, None)
    other = trace_gradients(model, task, ids, None, task.vocab[ids[1]])
    for step in traced.layers:
        for name, tensor in step.items():
            grad = tensor.grad.numpy()
            later = grad[0, :, 6:] if grad.ndim == 4 else grad[0, 6:]  # positions after 5
            assert (later == 0).all() and np.abs(grad).max() > 0, name
        value, grad = ({name: by_head(t.numpy() if which == 0 else t.grad.numpy()) for name, t in step.items()}
                       for which in (0, 1))  # float64, (nh, T, n) each
        assert (grad["scores"][:, np.triu(np.ones((8, 8), bool), k=1)] == 0).all()  # key j after query i: masked
        np.testing.assert_allclose(grad["weights"], grad["out"] @ value["v"].transpose(0, 2, 1), rtol=1e-4, atol=1e-9)
        np.testing.assert_allclose(grad["v"], value["weights"].transpose(0, 2, 1) @ grad["out"], rtol=1e-4, atol=1e-9)
        w, dw = value["weights"], grad["weights"]
        np.testing.assert_allclose(grad["scores"], w * (dw - (dw * w).sum(-1, keepdims=True)), rtol=1e-4, atol=1e-9)
    assert not np.allclose(traced.layers[-1]["out"].grad.numpy(), other.layers[-1]["out"].grad.numpy())
    assert other.why_target == f"--target {task.vocab[ids[1]]}"


def by_head(a: np.ndarray) -> np.ndarray:
    """A traced array of one sequence as float64 (nh, T, n): out (1, T, nh*hs) cut into its two heads."""
    a = a[0].astype(np.float64)
    return a if a.ndim == 3 else a.reshape(a.shape[0], 2, -1).transpose(1, 0, 2)


def test_the_target_is_the_next_token_else_the_model_s_guess():
    task = make_task("sort")
    model, ids = tiny_model(task), task.encode("3 1 4 1 5 9 =")
    logits, _ = model(np.array([ids]))
    assert choose_target(task, ids, 2, None, logits)[0] == ids[3]
    token, why = choose_target(task, ids, 6, None, logits)
    assert token == int(logits.numpy()[0, 6].argmax()) and "most likely" in why
    assert choose_target(task, ids, 6, "7", logits)[0] == task.stoi["7"]
    with pytest.raises(UsageError, match="--target '3 1' is 2 tokens of this model; give one token"):
        choose_target(task, ids, 6, "3 1", logits)
    with pytest.raises(UsageError, match="--target: "):
        choose_target(task, ids, 6, "x", logits)


@pytest.mark.parametrize("flags, message", [
    (["--graph", "{tmp}/g.txt"], "--graph {tmp}/g.txt: the file's suffix picks the picture, one of .dot, .svg, .png"),
    (["--graph", "{tmp}/no/g.dot"], "does not exist"),
    (["--graph", ""], "--graph '': the file name is empty; give one, such as --graph attention.svg"),
    (["--html", ""], "--html '': the file name is empty; give one, such as --html attention.html"),
    (["--png", " "], "--png ' ': the file name is empty; give one, such as --png attention.png"),  # before matplotlib
    (["--target", "3"], "--target chooses what the gradients of --graph and --html are of; give one of them"),
    (["--graph", "{tmp}/g.dot", "--query", "9"], "--query 9 is out of range: this model/prompt has 0 to 7"),
    (["--graph", "{tmp}/g.dot", "--target", "小明 讀"], "is 2 tokens of this model; give one token"),
    (["--graph", "{tmp}/g.dot", "--target", "x"], "--target: "),
])
def test_graph_refuses_bad_arguments_in_one_line(trained, tmp_path, capsys, flags, message):
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    assert train.main(["explain", "--out", trained[0], *flags]) == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "Attention in layer" not in captured.out and not list(tmp_path.iterdir())  # nothing done, nothing written


def test_graph_says_what_to_install_for_a_picture(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(explain.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "graphviz", types.ModuleType("graphviz"))  # the package there, the program not
    assert train.main(["explain", "--out", trained[0], "--graph", str(tmp_path / "g.svg")]) == 2
    assert "needs Graphviz's dot program: apt-get install graphviz" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "graphviz", None)  # an import that fails
    assert train.main(["explain", "--out", trained[0], "--graph", str(tmp_path / "g.png")]) == 2
    assert "needs the graphviz package: pip install -e '.[draw]' (or give a .dot file)" in capsys.readouterr().err
    assert train.main(["explain", "--out", trained[0], "--graph", str(tmp_path / "g.dot")]) == 0  # needs nothing
    assert not list(tmp_path.glob("*.svg")) and not list(tmp_path.glob("*.png"))


def test_graph_renders_svg_and_png_where_graphviz_is_installed(trained, tmp_path, capsys):
    pytest.importorskip("graphviz", reason="rendering needs the graphviz package: pip install -e '.[draw]'")
    if shutil.which("dot") is None:
        pytest.skip("rendering needs Graphviz's dot program: apt-get install graphviz")
    svg, png = tmp_path / "layer.svg", tmp_path / "layer.png"
    assert train.main(["explain", "--out", trained[0], "--graph", str(svg)]) == 0
    picture = svg.read_text(encoding="utf-8")
    assert "<svg" in picture and all(f">{name}</text>" in picture for name in ("q", "k", "v", "scores", "weights"))
    assert "batched as the engine computes them" in picture and "SoftmaxFunction" in picture
    assert train.main(["explain", "--out", trained[0], "--graph", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["layer.png", "layer.svg"]  # no temporary file
