"""Tests for models/: gradient checks of attention, the decoder block and a GPT; causality; KV-cache
generation; attention weights; configuration and input errors; the PyTorch reference
(models/torch_reference.py) as an oracle for logits, loss and gradients; overfitting one batch. The
tests of the cache / trace protocol run on both architectures (`arch`); the LLaMA-style model's own
parts (rotary positions, SwiGLU, RMSNorm) are tested at the end, and against its PyTorch reference with
the GPT's.
"""

import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim
from minigrad.array import backend
from minigrad.nn import functional as F
from models import GPT, IGNORE_INDEX, MLP, DecoderBlock, GPTConfig, KVCache, Llama, LlamaConfig, MultiHeadSelfAttention
from models.llama import LlamaBlock, RotaryEmbedding, SwiGLU

TINY = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, n_embd=8)
ARCHS = {"gpt": (GPT, GPTConfig), "llama": (Llama, LlamaConfig)}


def scramble(module, std=0.5, seed=0):
    """Redraw every parameter from N(0, std^2): GPT-2's init (std 0.02, biases 0, LayerNorm 1) makes
    attention nearly uniform and many gradients tiny, so a wrong backward could still pass a check."""
    rng = np.random.default_rng(seed)
    for p in module.parameters():
        p.data = backend.to_device(rng.standard_normal(p.shape).astype(p.dtype) * std, p.device)
    return module


def tiny_gpt(device="cpu", dtype=mg.float64, seed=0, arch="gpt", **overrides):
    model_class, config_class = ARCHS[arch]
    mg.manual_seed(seed)
    model = model_class(config_class(**{**TINY, **overrides})).to(device).to(dtype)
    return scramble(model, std=0.3, seed=seed)


def tokens(shape, vocab=TINY["vocab_size"], seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=shape)


# ---- gradient checks, float64, with respect to the input and every parameter ----

def test_gradcheck_attention(device):
    mg.manual_seed(0)
    attn = scramble(MultiHeadSelfAttention(8, 2).to(device).to(mg.float64))
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)), requires_grad=True, device=device)
    params = list(attn.parameters())
    assert len(params) == 8  # q_proj, k_proj, v_proj and proj, weight and bias each
    mg.gradcheck(lambda x, *params: attn(x), x, *params)


def test_gradcheck_decoder_block(device):
    mg.manual_seed(0)
    block = scramble(DecoderBlock(GPTConfig(n_embd=8, n_head=2)).to(device).to(mg.float64))
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)), requires_grad=True, device=device)
    params = list(block.parameters())
    assert len(params) == 16  # two LayerNorms, q/k/v_proj, attn proj, fc, mlp proj: weight and bias each
    mg.gradcheck(lambda x, *params: block(x), x, *params)


def test_gradcheck_gpt_loss(device):
    model = tiny_gpt(device)
    idx = tokens((2, 5))
    targets = tokens((2, 5), seed=1)
    targets[0, 0] = IGNORE_INDEX  # an ignored target takes part too
    params = list(model.parameters())
    assert len(params) == 2 + 16 * 2 + 2  # wte, wpe, two blocks, ln_f (the head is wte itself)
    mg.gradcheck(lambda *params: model(idx, targets)[1], *params)


# ---- causality and the attention weights ----

@pytest.mark.parametrize("arch", ARCHS)
def test_changing_a_future_token_leaves_earlier_logits_unchanged(device, arch):
    model = tiny_gpt(device, arch=arch).eval()
    idx = tokens((2, 6))
    logits = model(idx)[0].numpy()
    for t in range(idx.shape[1]):
        changed = idx.copy()
        changed[:, t] = (changed[:, t] + 1) % TINY["vocab_size"]
        new = model(changed)[0].numpy()
        np.testing.assert_array_equal(new[:, :t], logits[:, :t], err_msg=f"token {t} changed earlier logits")
        assert np.abs(new[:, t] - logits[:, t]).min() > 0, f"changing token {t} did not change its own logits"


def test_attention_weights_are_causal_and_normalised(device):
    mg.manual_seed(0)
    attn = scramble(MultiHeadSelfAttention(8, 2).to(device).to(mg.float64))
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)), device=device)
    trace = []
    out = attn(x, trace=trace)
    w = trace[0]["weights"].numpy()
    assert out.shape == (2, 4, 8) and w.shape == (2, 2, 4, 4)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert (np.triu(w, k=1) == 0).all(), "a query attends to a later position"
    assert (w[..., np.tril(np.ones((4, 4), dtype=bool))] > 0).all(), "a query gives no weight to an earlier position"
    np.testing.assert_array_equal(attn(x).numpy(), out.numpy())  # tracing changes nothing else


@pytest.mark.parametrize("arch", ARCHS)
def test_trace_attention_records_every_layer_s_steps(device, arch):
    """The trace is the attention's own numbers: scores = q k^T / sqrt(hs), weights = softmax of them masked,
    out = weights @ v; in grad mode too, where they are graph tensors."""
    model = tiny_gpt(device, arch=arch).eval()
    idx = tokens((2, 5))
    traces = []
    model(idx, trace=traces)
    assert len(traces) == TINY["n_layer"]
    for trace in traces:
        q, k, v, scores, weights, out = (trace[n].numpy() for n in ("q", "k", "v", "scores", "weights", "out"))
        assert q.shape == k.shape == v.shape == (2, 2, 5, 4) and weights.shape == scores.shape == (2, 2, 5, 5)
        raw = q @ k.swapaxes(-2, -1) / np.sqrt(4)
        future = np.triu(np.ones((5, 5), dtype=bool), k=1)
        np.testing.assert_allclose(scores, raw, rtol=0, atol=1e-12)
        assert trace["weights"].requires_grad
        expected = np.exp(np.where(future, -np.inf, raw - raw.max(axis=-1, keepdims=True)))
        np.testing.assert_allclose(weights, expected / expected.sum(axis=-1, keepdims=True), rtol=0, atol=1e-12)
        np.testing.assert_allclose(out, (weights @ v).transpose(0, 2, 1, 3).reshape(2, 5, 8), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(model(idx)[0].numpy(), model(idx)[0].numpy())  # nothing kept between calls


# ---- generation with and without the key/value cache ----

@pytest.mark.parametrize("arch", ARCHS)
def test_generate_with_cache_matches_without(device, arch):
    # large weights, and a draw whose greedy GPT says more than one token: tiny models tend to repeat one
    model = scramble(tiny_gpt(device, arch=arch).eval(), std=1.0, seed=10)
    generated = []
    for prompt_len, new in [(1, 5), (3, 8), (8, 3)]:  # within block_size, past it, a prompt beyond it
        prompt = tokens((2, prompt_len), seed=prompt_len)
        with_cache = model.generate(prompt, new, temperature=0)
        without = model.generate(prompt, new, temperature=0, use_cache=False)
        assert with_cache.shape == (2, prompt_len + new)
        np.testing.assert_array_equal(with_cache[:, :prompt_len], prompt)
        np.testing.assert_array_equal(with_cache, without, err_msg=f"prompt of {prompt_len}, {new} new tokens")
        generated.append(with_cache[:, prompt_len:].ravel())
    assert len(np.unique(np.concatenate(generated))) > 2  # a model that always says one token would prove little


def test_sampling_with_top_k_1_is_greedy_and_seeded_sampling_repeats():
    model = scramble(tiny_gpt().eval(), std=1.0)
    prompt = tokens((2, 2))
    greedy = model.generate(prompt, 6, temperature=0)
    np.testing.assert_array_equal(model.generate(prompt, 6, temperature=1.0, top_k=1), greedy)
    mg.manual_seed(3)
    first = model.generate(prompt, 6, temperature=2.0)
    mg.manual_seed(3)
    np.testing.assert_array_equal(model.generate(prompt, 6, temperature=2.0), first)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        model.generate(prompt, 1, temperature=-1.0)


@pytest.mark.parametrize("options, message", [
    ({"top_k": 0}, "top_k must be an integer >= 1"), ({"top_k": -1}, "top_k must be an integer >= 1"),
    ({"top_k": 2.5}, "top_k must be an integer"), ({"top_k": True}, "top_k must be an integer"),
    ({"temperature": float("nan")}, "temperature must be a finite number"),
    ({"temperature": float("inf")}, "temperature must be a finite number"),
    ({"temperature": "hot"}, "temperature must be a finite number"),
    ({"max_new_tokens": 2.0}, "max_new_tokens must be an integer"),
], ids=["top_k 0", "top_k -1", "top_k float", "top_k bool", "nan", "inf", "string", "float count"])
def test_generate_refuses_what_it_cannot_sample_with(options, message):
    """The library checks, not only train.py sample: top_k=0 ran as top_k=1, NaN reached NumPy's 'probabilities
    contain NaN'."""
    model = tiny_gpt().eval()
    with pytest.raises(ValueError, match=message):
        model.generate(tokens((1, 2)), **{"max_new_tokens": 2, **options})


def test_a_temperature_too_small_to_divide_by_is_greedy():
    """logits / 1e-320 overflows (it raised): such a temperature stands for the limit 0, the likeliest token."""
    model = scramble(tiny_gpt().eval(), std=1.0)
    prompt = tokens((2, 3))
    greedy = model.generate(prompt, 5, temperature=0)
    for tiny in (1e-320, 5e-324, 1e-300):
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # nor a warning (underflow is exact 0)
            np.testing.assert_array_equal(model.generate(prompt, 5, temperature=tiny), greedy)


def test_attention_with_cache_matches_full_sequence(device):
    """Feeding positions in pieces through a KVCache gives the outputs of one pass over them all."""
    mg.manual_seed(0)
    attn = scramble(MultiHeadSelfAttention(8, 2).to(device).to(mg.float64))
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 5, 8)), device=device)
    with mg.no_grad():
        full = attn(x).numpy()
        cache = KVCache()
        pieces = [attn(x[:, a:b], cache).numpy() for a, b in [(0, 2), (2, 3), (3, 4), (4, 5)]]
    assert len(cache) == 5
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match="no_grad"):
        KVCache().append(x, x)


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_with_cache_runs_one_position_per_token(monkeypatch, arch):
    model = tiny_gpt(arch=arch).eval()
    calls = []
    run = model.forward

    def counting(idx, *args, **kwargs):
        calls.append((np.shape(idx)[1], kwargs.get("start", 0)))  # positions the model runs on, and where
        return run(idx, *args, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    model.generate(tokens((1, 2)), 4, temperature=0)  # ends at length 6 = block_size
    assert calls == [(2, 0), (1, 2), (1, 3), (1, 4)]


@pytest.mark.parametrize("arch", ARCHS)
def test_forward_refuses_caches_that_do_not_match(arch):
    model = tiny_gpt(arch=arch).eval()
    with mg.no_grad():
        caches = [KVCache() for _ in range(TINY["n_layer"])]
        model(tokens((1, 3)), caches=caches)
        with pytest.raises(ValueError, match="one cache per block"):
            model(tokens((1, 1)), caches=caches[:1], start=3)
        with pytest.raises(ValueError, match="holding the `start`=2 positions"):
            model(tokens((1, 1)), caches=caches, start=2)  # would put the token at the wrong position
        assert model(tokens((1, 1)), caches=caches, start=3)[1] is None


# ---- configuration and input errors ----

def test_config_refuses_width_not_divisible_by_heads():
    with pytest.raises(ValueError, match="n_embd=10 is not divisible by n_head=3"):
        GPTConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadSelfAttention(10, 3)


@pytest.mark.parametrize("name", ["vocab_size", "block_size", "n_layer", "n_head", "n_embd"])
@pytest.mark.parametrize("value", [0, -2, 2.0])
def test_config_refuses_non_positive_or_non_integer_sizes(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
        GPTConfig(**{**TINY, name: value})


@pytest.mark.parametrize("dropout", [-0.1, 1.0])
def test_config_refuses_dropout_outside_unit_interval(dropout):
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(**TINY, dropout=dropout)


@pytest.mark.parametrize("arch", ARCHS)
def test_sequence_longer_than_block_size_is_refused(arch):
    model = tiny_gpt(arch=arch)
    with pytest.raises(ValueError, match="length 7 is longer than block_size=6"):
        model(tokens((1, 7)))
    with pytest.raises(ValueError, match="block_size"):
        model(tokens((1, 7)), tokens((1, 7)))
    assert model(tokens((1, 6)))[0].shape == (1, 6, TINY["vocab_size"])  # block_size itself is fine


@pytest.mark.parametrize("bad", [7, -1, 100])
def test_token_ids_out_of_range_are_refused(bad):
    model = tiny_gpt()
    idx = tokens((2, 4))
    idx[1, 2] = bad
    with pytest.raises(IndexError, match=f"{bad} at position \\(1, 2\\) is out of range \\[0, 7\\)"):
        model(idx)


def test_targets_out_of_range_are_refused_but_ignore_index_is_not():
    model = tiny_gpt()
    idx, targets = tokens((2, 4)), tokens((2, 4), seed=1)
    targets[0, 1] = IGNORE_INDEX
    assert np.isfinite(model(idx, targets)[1].item())
    targets[1, 3] = 7
    with pytest.raises(IndexError, match="target 7 at position"):
        model(idx, targets)


@pytest.mark.parametrize("idx", [np.zeros((2, 0), dtype=np.int64), np.zeros(3, dtype=np.int64),
                                 np.zeros((1, 3), dtype=np.float32)])
@pytest.mark.parametrize("arch", ARCHS)
def test_token_ids_of_wrong_shape_or_dtype_are_refused(idx, arch):
    with pytest.raises(ValueError, match="expected token ids of shape \\(B, T\\)"):
        tiny_gpt(arch=arch)(idx)


# ---- the PyTorch reference: same weights, same logits, loss and gradients ----

@pytest.mark.parametrize("arch, overrides", [("gpt", {"bias": True}), ("gpt", {"bias": False}),
                                             ("gpt", {"bias": False, "gelu": "none"}), ("llama", {})])
def test_torch_reference_matches_logits_loss_and_every_gradient(arch, overrides):
    """The LLaMA-style model's reference, TorchLlama, is written with PyTorch's own RMSNorm, complex-number
    rotations and fused attention: an independent check of RMSNorm, rotary positions and SwiGLU."""
    torch = pytest.importorskip("torch", reason="torch is not installed: the PyTorch oracle test is skipped")
    from models.torch_reference import from_minigrad

    model = tiny_gpt(arch=arch, **overrides)
    idx, targets = tokens((3, 6)), tokens((3, 6), seed=1)
    targets[:, :2] = IGNORE_INDEX  # as a prompt that is not scored
    ref = from_minigrad(model, dtype=torch.float64)

    logits, loss = model(idx, targets)
    loss.backward()
    ref_logits, ref_loss = ref(torch.from_numpy(idx), torch.from_numpy(targets))
    ref_loss.backward()

    np.testing.assert_allclose(logits.numpy(), ref_logits.detach().numpy(), rtol=0, atol=1e-8)
    assert abs(loss.item() - ref_loss.item()) <= 1e-8
    ref_params = dict(ref.named_parameters())
    assert sorted(ref_params) == sorted(name for name, _ in model.named_parameters())
    for name, p in model.named_parameters():
        if name.endswith("attn.k_proj.bias"):  # q . (k_j + b) shifts a query's every score alike: softmax ignores it
            assert np.abs(p.grad.numpy()).max() < 1e-12 and ref_params[name].grad.abs().max() < 1e-12
            continue
        assert np.abs(p.grad.numpy()).max() > 1e-6, f"{name}: gradient too small to compare"
        np.testing.assert_allclose(p.grad, ref_params[name].grad.numpy(), rtol=0, atol=1e-8, err_msg=name)


def test_torch_reference_in_float32_for_the_benchmark():
    torch = pytest.importorskip("torch", reason="torch is not installed: the PyTorch oracle test is skipped")
    from models.torch_reference import from_minigrad

    model = tiny_gpt(dtype=mg.float32)
    ref = from_minigrad(model, dtype=torch.float32)
    assert all(p.dtype == torch.float32 for p in ref.parameters()) and ref.training == model.training
    idx = tokens((2, 6))
    with torch.no_grad():
        expected = ref(torch.from_numpy(idx))[0].numpy()
    np.testing.assert_allclose(model(idx)[0].numpy(), expected, rtol=1e-4, atol=1e-5)


# ---- learning ----

def test_overfits_one_batch():
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=2, n_head=2, n_embd=32))
    idx = tokens((4, 8), vocab=16, seed=3)
    targets = tokens((4, 8), vocab=16, seed=4)
    opt = optim.AdamW(optim.decay_groups(model.named_parameters(), 0.01), lr=1e-2)
    losses = []
    for _ in range(50):
        loss = model(idx, targets)[1]
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[0] == pytest.approx(np.log(16), rel=0.05)  # random init: about uniform predictions
    assert losses[-1] < losses[0] / 10, f"loss went from {losses[0]:.3f} to only {losses[-1]:.3f}"


# ---- the LLaMA-style model: rotary positions, SwiGLU, RMSNorm ----

def rand_heads(shape=(2, 2, 5, 4), seed=1, device="cpu"):
    return mg.tensor(np.random.default_rng(seed).standard_normal(shape), device=device)


def test_rotary_turns_each_channel_pair_by_position_times_its_angle():
    """Pair (i, i + hs/2) at position p is the point (x_i, x_{i+hs/2}) turned by p * 10000^(-2i/hs)."""
    x = rand_heads()
    out = RotaryEmbedding(4)(x, start=3).numpy()
    xs = x.numpy()
    for p in range(5):
        for i in range(2):
            a = (3 + p) * 10000.0 ** (-2 * i / 4)
            turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])  # a rotation matrix
            point = np.stack([xs[..., p, i], xs[..., p, i + 2]], axis=-1)  # (B, nh, 2)
            np.testing.assert_allclose(np.stack([out[..., p, i], out[..., p, i + 2]], axis=-1), point @ turn.T,
                                       rtol=0, atol=1e-12)


def test_rotary_scores_depend_on_relative_position_only():
    q, k = rand_heads(seed=1), rand_heads(seed=2)
    rope = RotaryEmbedding(4)
    scores = (rope(q, 0) @ rope(k, 0).transpose(-2, -1)).numpy()
    shifted = (rope(q, 7) @ rope(k, 7).transpose(-2, -1)).numpy()  # every position 7 later
    np.testing.assert_allclose(shifted, scores, rtol=0, atol=1e-12)
    apart = (rope(q, 7) @ rope(k, 0).transpose(-2, -1)).numpy()  # queries 7 later than keys: differs
    assert np.abs(apart - scores).max() > 1e-3


def test_rotary_at_an_offset_equals_the_same_positions_of_a_longer_sequence():
    x = rand_heads((2, 2, 9, 4))
    rope = RotaryEmbedding(4)
    full = rope(x, 0).numpy()
    for p in (1, 4, 8):
        np.testing.assert_allclose(rope(x[:, :, p:], start=p).numpy(), full[:, :, p:], rtol=0, atol=1e-12)
    assert np.abs(rope(x[:, :, 4:], start=0).numpy() - full[:, :, 4:]).max() > 1e-3  # the offset matters


def test_gradcheck_llama_block(device):
    mg.manual_seed(0)
    block = scramble(LlamaBlock(LlamaConfig(**TINY)).to(device).to(mg.float64))
    x = mg.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)), requires_grad=True, device=device)
    params = list(block.parameters())
    assert len(params) == 9  # two RMSNorm weights, q/k/v_proj and attention proj, w1 w2 w3: no biases
    mg.gradcheck(lambda x, *params: block(x), x, *params)


def test_llama_cached_steps_give_the_logits_of_the_full_sequence(device):
    """Prompt through fresh caches, then one token at a time at start = its position: each step's logits
    equal the last position's logits of one uncached pass over the whole sequence so far."""
    model = tiny_gpt(device, arch="llama").eval()
    idx = tokens((2, 6))
    with mg.no_grad():
        caches = [KVCache() for _ in model.blocks]
        model(idx[:, :2], caches=caches)
        for p in range(2, 6):  # positions 2, 3, 4, 5: rotary must turn them by p, not by 0
            step = model(idx[:, p:p + 1], caches=caches, start=p)[0].numpy()[:, -1]
            full = model(idx[:, :p + 1])[0].numpy()[:, -1]
            np.testing.assert_allclose(step, full, rtol=0, atol=1e-10, err_msg=f"position {p}")
        assert all(len(c) == 6 for c in caches)


def test_llama_cached_step_at_position_p_needs_the_rotary_offset(monkeypatch):
    """The cached step above would fail if rotary ignored the cache's length: turned as position 0, the
    token's logits differ from the uncached ones at p."""
    model = tiny_gpt(arch="llama").eval()
    idx = tokens((1, 4))
    full = model(idx)[0].numpy()[:, -1]
    rotary = RotaryEmbedding.forward
    monkeypatch.setattr(RotaryEmbedding, "forward", lambda self, x, start=0: rotary(self, x, 0))
    with mg.no_grad():
        caches = [KVCache() for _ in model.blocks]
        model(idx[:, :3], caches=caches)
        step = model(idx[:, 3:], caches=caches, start=3)[0].numpy()[:, -1]
    assert np.abs(step - full).max() > 1e-3


def test_llama_config_refuses_an_odd_head_size():
    with pytest.raises(ValueError, match="head size n_embd // n_head = 3 must be even"):
        LlamaConfig(**{**TINY, "n_embd": 6})
    with pytest.raises(ValueError, match="LlamaConfig: n_embd=10 is not divisible by n_head=3"):
        LlamaConfig(n_embd=10, n_head=3)


def test_llama_swiglu_width_and_untied_head():
    model = Llama(LlamaConfig(**{**TINY, "n_embd": 64, "n_head": 4}))
    params = dict(model.named_parameters())
    assert params["blocks.0.mlp.w1.weight"].shape == (176, 64)  # 2/3 of 4 * 64 = 170, rounded up to 16s
    assert params["lm_head.weight"].shape == (7, 64) and "wpe.weight" not in params
    assert not any(name.endswith("bias") for name in params)


# ---- one name per quantity (0.5): the names before it still work for one release, with a warning ----

def test_the_blocks_are_built_from_their_config_and_their_norms_are_named_alike():
    gpt_block, llama_block = DecoderBlock(GPTConfig(**TINY)), LlamaBlock(LlamaConfig(**TINY))
    for block in (gpt_block, llama_block):
        assert [name for name, _ in block.named_children()] == ["ln_1", "attn", "ln_2", "mlp"]
        assert (block.attn.n_head, block.attn.n_kv_head, block.attn.head_size) == (2, 2, 4)
    assert "ln_f.weight" in Llama(LlamaConfig(**TINY)).state_dict()


def test_the_names_before_0_5_build_the_same_modules_with_a_warning_naming_the_new_one():
    with pytest.warns(DeprecationWarning, match=r"DecoderBlock\(d_model, n_heads, dropout\).*use DecoderBlock\(GPT"):
        old = DecoderBlock(8, 2, 0.1)
    with pytest.warns(DeprecationWarning, match=r"DecoderBlock\(d_model, n_heads, bias, gelu\)"):
        DecoderBlock(d_model=8, n_heads=2, bias=False, gelu="none")
    new = DecoderBlock(GPTConfig(n_embd=8, n_head=2, dropout=0.1))
    assert {k: v.shape for k, v in old.state_dict().items()} == {k: v.shape for k, v in new.state_dict().items()}
    assert old.attn.attn_dropout.p == 0.1
    for call, new_name in ((lambda: MultiHeadSelfAttention(d_model=8, n_heads=2, n_kv_heads=1), "n_embd="),
                           (lambda: MLP(d_model=8), "n_embd="), (lambda: SwiGLU(d_model=8, multiple_of=4), "n_embd=")):
        with pytest.warns(DeprecationWarning, match=f"use {new_name}"):
            module = call()
        assert module.state_dict()
    with pytest.warns(DeprecationWarning, match=r"MultiHeadSelfAttention\(n_kv_heads=\).*use n_kv_head="):
        attn = MultiHeadSelfAttention(8, 2, n_kv_heads=1)
    assert (attn.n_head, attn.n_kv_head) == (2, 1)
    with pytest.raises(TypeError, match="got both n_heads= and n_head="):
        MultiHeadSelfAttention(8, n_heads=2, n_head=2)
    with pytest.warns(DeprecationWarning, match=r"MultiHeadSelfAttention.n_kv_heads is deprecated.*use .n_kv_head"):
        assert attn.n_kv_heads == 1
    llama = Llama(LlamaConfig(**TINY))
    with pytest.warns(DeprecationWarning, match=r"LlamaBlock.norm_2 is deprecated.*use .ln_2"):
        assert llama.blocks[0].norm_2 is llama.blocks[0].ln_2
    with pytest.warns(DeprecationWarning, match=r"Llama.norm_f is deprecated.*use .ln_f"):
        assert llama.norm_f is llama.ln_f
    with pytest.warns(DeprecationWarning, match=r"LlamaConfig\(head_dim=\).*use head_size="):
        config = LlamaConfig(**TINY, head_dim=6)
    assert config.head_size == 6 and LlamaConfig(**TINY).head_size == TINY["n_embd"] // TINY["n_head"]


def four_steps_as_in_0_4(self, q, k, v, trace=None):
    """MultiHeadSelfAttention.four_steps as 0.4 wrote it: the causal mask added, 0 or -inf."""
    T, T_k, hs = q.shape[2], k.shape[2], q.shape[3]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    masked = scores + mg.tensor(np.where(np.tril(np.ones((T, T_k), bool), T_k - T), 0.0, -np.inf), device=q.device)
    return self.attn_dropout(F.softmax(masked, dim=-1)) @ v


@pytest.mark.parametrize("arch", ["gpt", "llama"])
def test_the_boolean_causal_mask_gives_the_logits_and_gradients_of_the_additive_one(monkeypatch, arch):
    """Step 2 takes F.causal_mask's booleans (True: may attend) through mg.where, where 0.4 added 0 or -inf: the
    same logits and gradients, in float64, to 1e-12."""
    idx, targets = tokens((2, 6)), tokens((2, 6), seed=1)
    results = []
    for four_steps in (MultiHeadSelfAttention.four_steps, four_steps_as_in_0_4):
        monkeypatch.setattr(MultiHeadSelfAttention, "four_steps", four_steps)
        model = tiny_gpt(arch=arch)
        logits, loss = model(idx, targets)
        loss.backward()
        results.append([logits.numpy(), *(p.grad.numpy() for p in model.parameters())])
    for now, before in zip(*results, strict=True):
        np.testing.assert_allclose(now, before, rtol=1e-12, atol=1e-12)
