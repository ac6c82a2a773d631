"""The explain page (`train.py explain --html FILE`) is a view of the numbers explain prints: in headless Chromium,
after a click on a token and a head, its four steps read exactly as the text table for that layer, head and
position; its neuron view takes that score apart; it makes no network request, and it is one file under 2 MB.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import train
from gptlab.checkpoint import load_checkpoint, restore
from gptlab.explain import attention_steps, default_ids, layer_graph, trace_gradients
from gptlab.explain_page import CSS, JS, fill, page_data, page_html
from gptlab.settings import DEFAULTS, build_model, build_task, model_config, prompt_ids

SMALL = ["--n-embd", "16", "--n-head", "2", "--n-layer", "2", "--batch-size", "16", "--samples", "0",
         "--eval-interval", "20"]
# a row of the text table: pos, token, 1 score, 2 mask, 3 weight, 4 share (blank where masked)
ROW = re.compile(r"^\s+(\d+)\s+(\S+)\s+(-?[\d.]+)\s+(kept|-inf)\s+([\d.]+%)(?:\s+([\d.]+%))?$", flags=re.M)
BROWSER = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
DRIVER = shutil.which("chromedriver")
PROMPT = "我 吃 蘋果 ， 蘋果 被 我 吃"


def explain(out: str, *flags: str) -> str:
    """What `train.py explain --out OUT --prompt PROMPT FLAGS` prints."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert train.main(["explain", "--out", out, "--prompt", PROMPT, *flags]) == 0
    return printed.getvalue()


def text_table(printed: str) -> tuple[str, list[tuple[str, ...]]]:
    """(title, rows) of a printed table: rows as the page shows them, with step 2 the masked score."""
    title = re.search(r"Attention in layer \d+, head \d+, for position \d+ \(\S+\)", printed).group(0)
    rows = [(pos, token, score, score if mask == "kept" else "-inf", weight, share)
            for pos, token, score, mask, weight, share in ROW.findall(printed)]
    b_line = re.search(r"^  (b\d+ = .*)$", printed, flags=re.M).group(1)
    return title, rows + [(b_line,)]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[str, Path]:
    """A small model trained for 2 steps, and its page for the walkthrough's sentence."""
    out = tmp_path_factory.mktemp("run")
    with contextlib.redirect_stdout(io.StringIO()):
        assert train.main(["--steps", "2", "--out", str(out), *SMALL]) == 0
    page = out / "attention.html"
    assert f"wrote {page}" in explain(str(out), "--html", str(page))
    return str(out), page


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium: "
                                                                 "pip install -e '.[browser]'")
    if BROWSER is None or DRIVER is None:
        pytest.skip("no Chromium and chromedriver installed (on Debian: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1400"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # every request the page makes
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def open_page(driver, page: Path) -> None:
    driver.get(page.as_uri())
    assert driver.execute_script("return document.querySelectorAll('#steps-table tbody tr').length") > 0


def page_table(driver) -> tuple[str, list[tuple[str, ...]]]:
    """(title, rows) of the page's four steps, as the page shows them."""
    title, rows, b_line = driver.execute_script(
        "return [document.getElementById('steps-title').textContent,"
        " [...document.querySelectorAll('#steps-table tbody tr')].map(tr => [...tr.cells]"
        "   .filter(td => !td.classList.contains('barcell')).map(td => td.textContent)),"
        " document.getElementById('b-line').textContent]")
    return title.split(";")[0], [tuple(row) for row in rows] + [(b_line,)]


def click(driver, selector: str) -> None:
    driver.find_element("css selector", selector).click()


def test_page_opens_on_what_explain_prints(run, browser):
    out, page = run
    open_page(browser, page)
    assert page_table(browser) == text_table(explain(out))
    printed = explain(out)
    why_head = re.search(r"^  (why head .*)$", printed, flags=re.M).group(1)
    why_query = re.search(r"^  (why position .*)$", printed, flags=re.M).group(1)
    shown = browser.execute_script("return [document.getElementById('why-query').textContent,"
                                   " document.getElementById('why-head').textContent]")
    assert shown == [why_query, why_head]


@pytest.mark.parametrize("query, layer, head", [(3, 0, 1), (7, 1, 0), (0, 1, 1)])
def test_a_clicked_token_and_head_show_explain_s_table_for_them(run, browser, query, layer, head):
    out, page = run
    open_page(browser, page)
    click(browser, f"#tokens button[data-pos='{query}']")
    click(browser, f"#grid .head[data-layer='{layer}'][data-head='{head}']")
    printed = explain(out, "--query", str(query), "--layer", str(layer), "--head", str(head))
    assert page_table(browser) == text_table(printed)


def test_the_flags_open_the_page_on_their_layer_head_and_position(run, browser, tmp_path):
    out, _ = run
    page = tmp_path / "flags.html"
    printed = explain(out, "--query", "2", "--layer", "1", "--head", "0", "--html", str(page))
    open_page(browser, page)
    assert page_table(browser) == text_table(printed)
    assert "--layer 1 --head 0" in browser.find_element("id", "why-head").text


def test_the_neuron_view_takes_the_score_apart(run, browser):
    out, page = run
    open_page(browser, page)
    click(browser, "#tokens button[data-pos='6']")
    click(browser, "#grid .head[data-layer='1'][data-head='1']")
    click(browser, "#steps-table tbody tr[data-pos='2']")  # the key 蘋果
    title, products, total = browser.execute_script(
        "return [document.getElementById('neuron-title').textContent,"
        " [...document.querySelectorAll('#neuron-table tbody tr')].map(tr => tr.cells[3].textContent),"
        " document.getElementById('neuron-sum').textContent]")
    assert title == "Neuron view: layer 1, head 1, query 6 (我) · key 2 (蘋果)"
    task, model = restore(load_checkpoint(out), "cpu")
    steps = attention_steps(model, task, task.encode(PROMPT))
    expected = steps.products[1, 1, 6, 2]  # (hs,) q_n k_2,n
    assert products == [f"{p:.3f}" for p in expected]
    score = text_table(explain(out, "--query", "6", "--layer", "1", "--head", "1"))[1][2][2]
    assert total.endswith(f"/ √{len(expected)} = {score}, step 1's score of key 2")
    dot = float(re.match(r"q · k2 = (-?[\d.]+);", total).group(1))
    assert abs(dot / np.sqrt(len(expected)) - float(score)) <= 2e-3  # the products add up to step 1's score


def test_the_page_rounds_as_python_prints(run, browser):
    _, page = run
    open_page(browser, page)
    # exact ties (0.0625 at 3 digits) round to the even digit in Python; toFixed alone would round them up
    cases = [(x, d) for x in (0.0625, -0.0625, 0.1875, 2.5, -2.5, 0.125, 1 / 3, -1e-9, -0.0, 0.0, 123.4565, 0.99951)
             for d in (0, 1, 2, 3)]
    shown = browser.execute_script("return arguments[0].map(([x, d]) => fixed(x, d))", cases)
    assert shown == [f"{x:.{d}f}" for x, d in cases]
    weights = [0.0005, 0.00049999, 0.99951, 0.125, 1.0, 0.0]
    assert browser.execute_script("return arguments[0].map(percent)", weights) == [f"{w:.1%}" for w in weights]


def test_the_page_makes_no_network_request(run, browser):
    _, page = run
    browser.get_log("performance")  # drop what earlier tests logged
    open_page(browser, page)
    click(browser, "#tokens button[data-pos='4']")
    click(browser, "#grid .head[data-layer='1'][data-head='0']")
    click(browser, "#matrix tbody tr:nth-child(3) td.cell")
    requests = [message["params"]["request"]["url"] for entry in browser.get_log("performance")
                if (message := json.loads(entry["message"])["message"])["method"] == "Network.requestWillBeSent"]
    assert requests == [page.as_uri()]  # the page itself, nothing else


def test_the_default_page_is_one_file_under_2_mb():
    task = build_task(DEFAULTS)
    model = build_model(DEFAULTS, model_config(DEFAULTS, task), "cpu")
    traced = trace_gradients(model, task, default_ids(task), None, None)
    steps = attention_steps(model, task, default_ids(task), traced=traced)
    graph = layer_graph(task, steps, traced)
    page = page_html(steps, graph)
    assert len(page.encode("utf-8")) < 2_000_000
    assert not re.search(r"https?:|//[\w.]+/|@import|url\(|<link rel=\"stylesheet\"| src=", page), \
        "everything is inline: no address to fetch"
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert data == json.loads(json.dumps(page_data(steps, graph)))
    for name in ("scores", "weights", "shares", "q", "k"):  # each number the exact double the text table formats
        np.testing.assert_array_equal(np.array(data[name]), getattr(steps, name))
    assert data["tokens"] == steps.labels and data["heads"] == [list(h) for h in steps.heads]


def test_no_token_can_end_the_data_script(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("a</script><b>&c " * 20, encoding="utf-8")
    task = build_task({**DEFAULTS, "task": "text", "data": str(data), "block_size": 16})
    model = build_model(DEFAULTS, model_config({**DEFAULTS, "n_embd": 16, "n_head": 2, "n_layer": 1}, task), "cpu")
    page = page_html(attention_steps(model, task, default_ids(task)))
    assert page.count("</script") == 2  # the data's and the code's own
    tokens = json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))["tokens"]
    assert "<" in tokens and "'/'" not in tokens and "' '" in tokens  # a space shown as its repr


def test_a_page_of_non_finite_numbers_is_refused():
    task = build_task(DEFAULTS)
    model = build_model(DEFAULTS, model_config(DEFAULTS, task), "cpu")
    steps = attention_steps(model, task, default_ids(task))
    steps.scores[1, 2, 3, 0] = np.nan
    with pytest.raises(ValueError, match=r"attention scores \(2, 4, 8, 8\) has non-finite values"):
        page_html(steps)


@pytest.mark.parametrize("text", ["{js} {data}", "{title}{css}", "\\g<0> {{js}}"])
def test_a_prompt_that_looks_like_a_placeholder_stays_itself(tmp_path, text):
    """The template was filled one placeholder after another: a prompt holding "{js}" put the page's script (9,864
    characters) into its <title>. Now one pass: the title is the prompt, and each part of the page is there once."""
    data = tmp_path / "data.txt"
    data.write_text(text * 40, encoding="utf-8")
    task = build_task({**DEFAULTS, "task": "text", "data": str(data), "block_size": 16})
    model = build_model(DEFAULTS, model_config({**DEFAULTS, "n_embd": 16, "n_head": 2, "n_layer": 1}, task), "cpu")
    steps = attention_steps(model, task, task.encode(text))
    page = page_html(steps)
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert title == html.escape(f"Attention of every head for {text!r}")
    assert page.count(JS) == 1 and page.count(CSS) == 1 and page.count('id="data"') == 1
    assert json.loads(re.search(r'id="data">(.*?)</script>', page, re.S).group(1))["text"] == text


def test_fill_reads_the_template_once():
    assert fill("<{a}|{b}|{c}>", a="{b}", b="{a}") == "<{b}|{a}|{c}>"  # {c}: not a value given, left as it is


# ---- the layer's graph beside the tables ----

def graph_node(driver, name: str) -> None:
    """Click the node of the page's graph whose first line is `name` (a tensor's name, or an op's)."""
    for node in driver.find_elements("css selector", "#graph-picture .gnode"):
        if node.find_element("css selector", "text").text == name:
            node.click()
            return
    raise AssertionError(f"no node {name} in the page's graph")


def node_numbers(driver) -> tuple[str, np.ndarray, list[str]]:
    """(title, values, gradients as shown) of the open node."""
    title, rows = driver.execute_script(
        "return [document.getElementById('node-title').textContent,"
        " [...document.querySelectorAll('#node-table tbody tr')].map(tr => [tr.cells[1].textContent,"
        "  tr.cells[2].textContent])]")
    return title, np.array([float(value) for value, _ in rows]), [grad for _, grad in rows]


def test_a_clicked_node_of_the_graph_shows_the_trace_s_values_and_gradient(run, browser):
    out, page = run
    task, model = restore(load_checkpoint(out), "cpu")
    model.eval()
    traced = trace_gradients(model, task, prompt_ids(task, PROMPT), None, None)  # position 5 (被), target 我
    open_page(browser, page)
    title = browser.find_element("id", "graph-title").text
    layer = int(re.fullmatch(r"The graph of layer (\d+)", title)[1])
    assert "all 2 heads at once, batched as the engine computes them" in browser.find_element("id", "graph-note").text
    assert "target: 我, the token after position 5" in browser.find_element("id", "why-target").text
    ops = [t.text for t in browser.find_elements("css selector", "#graph-picture .op text")]
    assert sorted(ops) == ["MatMul", "MatMul", "Mul", "Permute", "Permute", "Reshape", "SoftmaxFunction", "Where"]
    hs = traced.layers[layer]["q"].shape[-1]
    for query, head, name in ((5, 0, "scores"), (2, 1, "scores"), (6, 1, "weights"), (3, 0, "q"), (4, 1, "v"),
                              (5, 1, "out"), (1, 0, "k")):
        click(browser, f"#tokens button[data-pos='{query}']")
        click(browser, f"#grid .head[data-layer='{layer}'][data-head='{head}']")
        graph_node(browser, name)
        shown, values, grads = node_numbers(browser)
        tensor = traced.layers[layer][name]

        def pick(a: np.ndarray, name=name, query=query, head=head) -> np.ndarray:  # head and query's row
            return a[0, query, head * hs:(head + 1) * hs] if name == "out" else a[0, head, query]  # (1, T, nh*hs)

        assert shown.startswith(f"{name}: shape {tensor.shape}, layer {layer}, head {head}, "), shown
        np.testing.assert_allclose(values, pick(tensor.numpy()), rtol=0, atol=5.01e-5)  # shown to 4 decimals
        expected = pick(tensor.grad.numpy()).astype(np.float64)
        np.testing.assert_allclose([float(g) for g in grads], expected, rtol=6e-4, atol=0)  # to 4 digits
        if name == "scores":  # a masked key's gradient: exactly 0
            assert grads[query + 1:] == ["0"] * (7 - query) and (expected[query + 1:] == 0).all()
    graph_node(browser, "SoftmaxFunction")
    shape = traced.layers[layer]["weights"].shape
    assert node_numbers(browser)[0] == f"SoftmaxFunction: computes a tensor of shape {shape}"
