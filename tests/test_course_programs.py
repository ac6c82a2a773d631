"""Nine programs of the kinds a deep-learning course has people write (examples/course_programs/: an LSTM language
model, a small CNN, a BatchNorm MLP, a transformer-encoder classifier, an encoder-decoder transformer, an L-BFGS curve
fit, a sine-wave predictor of LSTMCells and L-BFGS, a policy gradient with Categorical, a VAE), each written once for
PyTorch and run as it is under torch, then with only its import lines changed to minigrad. At the line
"# ---- training ----" the test copies PyTorch's initial weights into minigrad's modules (the two libraries draw
different random numbers), so that the programs that draw no random numbers while training give PyTorch's losses
step by step; the two that sample (actions, the VAE's noise; each program seeds its library) reach PyTorch's result.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the programs' reference runs need it")

PROGRAMS_DIR = Path(__file__).resolve().parents[1] / "examples" / "course_programs"
DETERMINISTIC = ["lstm_language_model", "small_cnn", "batchnorm_mlp", "transformer_encoder", "lbfgs_fit",
                 "sequence_prediction", "seq2seq_transformer"]
MARKER = "# ---- training ----\n"


def as_minigrad(source: str) -> str:
    """`import torch` as `import minigrad as torch`; `import torch.x ...`, `from torch.x import ...` name minigrad."""
    source = re.sub(r"^import torch$", "import minigrad as torch", source, flags=re.M)
    return re.sub(r"^(import|from) torch\b", r"\1 minigrad", source, flags=re.M)


def run(name: str, library: str, weights: dict | None = None) -> dict:
    """The program's namespace after running it under `library`, with "initial weights": the state_dict of each of
    its torch modules at the marker (as arrays); with `weights`, its modules start from those instead."""
    source = (PROGRAMS_DIR / f"{name}.py").read_text()
    if library == "minigrad":
        source = as_minigrad(source)
    setup, training = source.split(MARKER)
    namespace = {"__name__": "__main__"}
    path = str(PROGRAMS_DIR / f"{name}.py")
    exec(compile(setup, path, "exec"), namespace)
    initial = {key: {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
               for key, module in namespace.items() if isinstance(module, torch.nn.Module)}
    for key, state in (weights or {}).items():
        namespace[key].load_state_dict(state)
    exec(compile("\n" * (setup.count("\n") + 1) + training, path, "exec"), namespace)
    return {**namespace, "initial weights": initial}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_program_gives_pytorch_losses_step_by_step(name):
    theirs = run(name, "torch")
    ours = run(name, "minigrad", weights=theirs["initial weights"])
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(ours["final_loss"], theirs["final_loss"], rtol=2e-4, atol=1e-5)
    if name == "batchnorm_mlp":  # the statistics BatchNorm kept are PyTorch's too
        np.testing.assert_allclose(ours["running_mean"].numpy(), theirs["running_mean"].numpy(), rtol=1e-4,
                                   atol=1e-6)
    if name == "small_cnn":
        assert ours["correct"] == theirs["correct"]
    if name == "sequence_prediction":  # its prediction of the future, from its own outputs
        np.testing.assert_allclose(ours["prediction"], theirs["prediction"], rtol=1e-6, atol=1e-8)


def test_policy_gradient_learns_the_best_arms_as_under_pytorch():
    theirs = run("policy_gradient", "torch")
    ours = run("policy_gradient", "minigrad", weights=theirs["initial weights"])
    assert theirs["final_loss"] < 0.3 and ours["final_loss"] < 0.3  # P(best arm) above 0.7 in every state
    assert np.mean(ours["rewards_seen"][-10:]) > 0.6


def test_vae_reaches_pytorch_loss():
    theirs = run("vae", "torch")
    ours = run("vae", "minigrad", weights=theirs["initial weights"])
    assert ours["losses"][-1] < 0.8 * ours["losses"][0]  # it learns
    assert abs(ours["final_loss"] - theirs["final_loss"]) < 0.1 * theirs["final_loss"]
