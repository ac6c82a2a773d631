"""Hugging Face folders load into minigrad's GPT and Llama and compute what transformers computes: tiny random GPT-2
and LLaMA models (grouped-query attention, tied and untied heads, other widths, head sizes, rope_theta, an old-style
config, a sharded checkpoint) are saved with save_pretrained and compared on the same input: logits, loss, every
parameter's gradient, greedy generation with and without the KV cache. Tokenizers trained here encode and decode as
AutoTokenizer does; the command line samples and explains those folders, and refuses bad ones in one line.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

# hf_folders skips this module, with the reason, where torch, transformers, tokenizers or safetensors is missing
from hf_folders import GPT2, MODELS, VOCAB, modeling_llama, reference_loss, torch, transformers

import minigrad as mg
import train
from gptlab.tokenizer import HFTokenizer, from_state
from minigrad.array import runtime
from models import GPT, IGNORE_INDEX, Llama
from models import pretrained as hf_load


def batch(seed: int = 1, T: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, VOCAB, (2, T))
    targets = rng.integers(0, VOCAB, (2, T))
    targets[0, :3] = IGNORE_INDEX  # ignored targets take part too
    return idx, targets


# ---- the numbers: logits, loss, gradients, generation ----

@pytest.mark.parametrize("name", list(MODELS))
def test_float64_logits_loss_and_every_gradient_match_transformers(folders, name, float64_reference):
    path, hf = folders[name]
    model = hf_load.load(str(path), "float64")
    assert type(model) is (GPT if name.startswith("gpt2") else Llama)
    idx, targets = batch()
    hf.zero_grad()
    ref_logits, ref_loss = reference_loss(hf, idx, targets)
    ref_loss.backward()
    logits, loss = model(idx, targets)
    loss.backward()
    np.testing.assert_allclose(logits.numpy(), ref_logits.detach().numpy(), rtol=0, atol=1e-10)
    assert abs(loss.item() - ref_loss.item()) < 1e-8

    ours = dict(model.named_parameters())
    plan, prefix = hf_load.plan_of(model.config), "transformer." if isinstance(model, GPT) else "model."
    compared = set()
    for theirs, p in hf.named_parameters():  # a tied head is one parameter there too
        targets_, conv1d = plan[theirs.removeprefix(prefix)]
        grad = p.grad.numpy().T if conv1d else p.grad.numpy()
        pieces = np.split(grad, np.cumsum([ours[t].shape[0] for t in targets_])[:-1])
        for target, piece in zip(targets_, pieces, strict=True):
            np.testing.assert_allclose(ours[target].grad, piece, rtol=0, atol=1e-8, err_msg=target)
            compared.add(target)
    assert compared == set(ours)  # every parameter of ours, each once


@pytest.mark.parametrize("name", ["gpt2", "gpt2-untied", "llama-gqa", "llama-head-dim"])
def test_float32_logits_match_transformers_as_it_is(folders, name):
    path, hf = folders[name]
    model = hf_load.load(str(path))
    assert all(p.dtype == np.float32 for p in model.parameters())
    idx, _ = batch(2)
    with torch.no_grad():
        ref = copy.deepcopy(hf).float()(torch.tensor(idx)).logits.numpy()
    np.testing.assert_allclose(model(idx)[0].numpy(), ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa", "llama-mqa-tied"])
def test_greedy_generation_matches_transformers_with_and_without_the_cache(folders, name, float64_reference):
    path, hf = folders[name]
    model = hf_load.load(str(path), "float64").eval()
    prompt = batch(3, T=5)[0][:1]
    with torch.no_grad():
        ref = hf.generate(torch.tensor(prompt), max_new_tokens=20, min_new_tokens=20, do_sample=False).numpy()
    cached = model.generate(prompt, 20, temperature=0)
    uncached = model.generate(prompt, 20, temperature=0, use_cache=False)
    assert ref.shape == (1, 25)
    np.testing.assert_array_equal(cached, ref)
    np.testing.assert_array_equal(uncached, ref)


def test_rotary_is_rotate_half_not_interleaved():
    """Llama's RotaryEmbedding pairs channel i with i + hs/2, as transformers' apply_rotary_pos_emb; the interleaved
    layout of Meta's original code (pairs 2i, 2i + 1) gives other numbers, so the comparison can tell them apart."""
    from models.llama import RotaryEmbedding

    hs, T, base = 8, 6, 500.0
    x = np.random.default_rng(0).standard_normal((1, 2, T, hs))
    ours = RotaryEmbedding(hs, base)(mg.tensor(x), 3).numpy()  # positions 3 .. 8
    angles = np.arange(3, 3 + T)[:, None] * base ** (-np.arange(0, hs, 2) / hs)
    angles = torch.tensor(np.concatenate([angles, angles], axis=-1))
    q = torch.tensor(x)
    theirs, _ = modeling_llama.apply_rotary_pos_emb(q, q, angles.cos()[None], angles.sin()[None])
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-12)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * angles.numpy()[:, :hs // 2])
    interleaved = np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
    assert np.abs(interleaved - ours).max() > 0.1


# ---- what a loaded model is ----

def test_a_tied_head_is_one_parameter_and_shared_key_value_heads_are_stored_once(folders):
    gpt = hf_load.load(str(folders["gpt2"][0]))
    assert gpt.lm_head is None and "lm_head.weight" not in dict(gpt.named_parameters())
    llama = hf_load.load(str(folders["llama-mqa-tied"][0]))
    params = dict(llama.named_parameters())
    assert "lm_head.weight" not in params
    hs = 32 // 4
    assert params["blocks.0.attn.k_proj.weight"].shape == (1 * hs, 32)  # one key head for the four query heads
    assert params["blocks.0.attn.q_proj.weight"].shape == (4 * hs, 32)
    assert dict(hf_load.load(str(folders["llama-gqa"][0])).named_parameters())["lm_head.weight"].shape == (VOCAB, 32)


def test_a_loaded_model_trains_saves_and_resumes(folders, tmp_path):
    model = Llama.from_pretrained(str(folders["llama-gqa"][0]))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    idx, targets = batch(4)
    losses = []
    for _ in range(3):
        _, loss = model(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    mg.save({"model": model.state_dict(), "optim": opt.state_dict()}, str(tmp_path / "w.npz"))
    saved = mg.load(str(tmp_path / "w.npz"))
    again = Llama.from_pretrained(str(folders["llama-gqa"][0]))
    again.load_state_dict(saved["model"])
    opt2 = mg.optim.AdamW(again.parameters(), lr=1e-2)
    opt2.load_state_dict(saved["optim"])
    for m, o in ((model, opt), (again, opt2)):  # one more step each: the resumed one takes the same
        _, loss = m(idx, targets)
        o.zero_grad()
        loss.backward()
        o.step()
    np.testing.assert_array_equal(again(idx)[0].numpy(), model(idx)[0].numpy())


def test_bfloat16_weights_are_read_exactly(folders, tmp_path):
    """NumPy has no bfloat16: the loader reads such tensors from the file's bytes."""
    hf = copy.deepcopy(folders["llama-gqa"][1]).to(torch.bfloat16)
    hf.save_pretrained(tmp_path)
    model = hf_load.load(str(tmp_path))
    expected = hf.model.layers[1].self_attn.k_proj.weight.detach().float().numpy()
    np.testing.assert_array_equal(model.blocks[1].attn.k_proj.weight.numpy(), expected)


def test_the_hub_s_gpt2_layout_loads_too(folders, tmp_path):
    """The hub's gpt2 file was written by GPT2Model: no "transformer." prefix, and each layer's causal-mask buffers
    (attn.bias, attn.masked_bias) stored beside the weights. They are not weights: skipped."""
    path = copy_folder(folders, "gpt2", tmp_path)
    tensors = {name.removeprefix("transformer."): value for name, value in weights_of(path).items()}
    for i in range(GPT2["n_layer"]):
        tensors[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 48, 48), np.float32))
        tensors[f"h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    write_weights(path, tensors)
    idx, _ = batch()
    np.testing.assert_array_equal(GPT.from_pretrained(str(path))(idx)[0].numpy(),
                                  GPT.from_pretrained(str(folders["gpt2"][0]))(idx)[0].numpy())


def test_from_pretrained_refuses_the_other_architecture_and_a_dtype_it_cannot_compute_in(folders):
    with pytest.raises(hf_load.PretrainedError, match="holds a llama model; load it with Llama.from_pretrained"):
        GPT.from_pretrained(str(folders["llama-gqa"][0]))
    with pytest.raises(hf_load.PretrainedError, match="dtype float16 is not one minigrad computes in"):
        Llama.from_pretrained(str(folders["llama-gqa"][0]), dtype="float16")


def test_memory_is_estimated_before_loading(folders, monkeypatch):
    monkeypatch.setattr(runtime, "available_memory", lambda device: 10_000)
    with pytest.raises(MemoryError, match=r"needs about .* GiB \([\d,]+ parameters in float64\), more than the "
                                          r"0.00 GiB available on cpu; float32 takes half"):
        hf_load.load(str(folders["gpt2"][0]), "float64")


# ---- tokenizers ----

@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_tokenizer_encodes_and_decodes_as_autotokenizer(folders, name):
    path = folders[name][0]
    ours, theirs = HFTokenizer.from_folder(str(path)), transformers.AutoTokenizer.from_pretrained(path)
    special = "<|endoftext|>" if name == "gpt2" else "</s>"
    for text in ["The lazy café", "Naïve — 你好, мир!\n  two  spaces", f"end {special} start", "🦙 unseen ǅ", ""]:
        ids = ours.encode(text)
        assert ids == theirs.encode(text)
        assert ours.decode(ids) == theirs.decode(ids)
    assert (ours.encode("x")[0] == 1) == (name != "gpt2")  # LLaMA's encode puts its BOS in front, GPT-2's does not
    assert (ours.bos_id, ours.eos_id) == ((0, 0) if name == "gpt2" else (1, 2))
    again = from_state(json.loads(json.dumps(ours.to_state())))
    assert again.encode("The lazy café 你好") == ours.encode("The lazy café 你好")
    assert (again.vocab_size, again.bos_id, again.eos_id) == (ours.vocab_size, ours.bos_id, ours.eos_id)
    pieces = [ours.token(i) for i in ours.encode("The lazy 你")]  # each token's text, for explain's tables
    assert "".join(pieces) == ("The lazy 你" if name == "gpt2" else "<s>The lazy 你")


def test_a_tokenizer_state_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="not a tokenizer state: kind 'bpe'"):
        from_state({"kind": "bpe"})


# ---- the command line ----

def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = train.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["gpt2", "llama-gqa"])
def test_sample_init_from_prints_the_greedy_continuation(folders, capsys, name):
    path = folders[name][0]
    code, out, err = run_main(capsys, "sample", "--init-from", str(path), "--prompt", "The lazy fox",
                              "--max-new-tokens", "8", "--top-k", "1")
    assert code == 0 and err == "", err
    tokenizer, model = HFTokenizer.from_folder(str(path)), hf_load.load(str(path))
    ids = tokenizer.encode("The lazy fox")
    shown = f"[{tokenizer.decode(ids)}]"  # the prompt first, as the model read it (LLaMA's: after <s>), marked off
    assert out.startswith(shown)
    out = out.removeprefix(shown)
    new = [int(i) for i in model.eval().generate(np.array([ids]), 8, temperature=0)[0, len(ids):]]
    if tokenizer.eos_id in new:  # sampling stops at the end-of-text token and does not print it
        new = new[:new.index(tokenizer.eos_id)]
    text = tokenizer.decode(ids + new)[len(tokenizer.decode(ids)):]
    assert len(new) > 0 and len(out) == len(text) + 1 and out.endswith("\n")
    # printed as it came: where later byte tokens turned earlier valid bytes invalid (U+FFFD now), those stay as shown
    assert all(a == b for a, b in zip(out, text, strict=False) if b != "\ufffd")
    if name == "gpt2":  # byte-level BPE: the text only grows as tokens come
        assert out == text + "\n"


def test_explain_init_from_shows_the_steps_for_the_prompt_s_tokens(folders, capsys, tmp_path):
    path = folders["gpt2"][0]
    code, out, err = run_main(capsys, "explain", "--init-from", str(path), "--prompt", "The quick brown fox",
                              "--layer", "1", "--head", "0", "--html", str(tmp_path / "page.html"))
    assert code == 0 and err == "", err
    tokenizer = HFTokenizer.from_folder(str(path))
    ids = tokenizer.encode("The quick brown fox")
    tokens = json.dumps([tokenizer.token(i) for i in ids], ensure_ascii=False, separators=(",", ":"))
    assert f'"tokens":{tokens}' in (tmp_path / "page.html").read_text()  # the page's data: the prompt's tokens
    assert f"Attention in layer 1, head 0, for position {len(ids) - 1}" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(len(ids)))
    assert rows[0][1] == tokenizer.token(ids[0])


def write_weights(path: Path, tensors: dict) -> None:
    from safetensors.numpy import save_file

    save_file(tensors, str(path / "model.safetensors"))


def weights_of(folder: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


def copy_folder(folders, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    shutil.copytree(folders[name][0], path)
    return path


def break_bin_only(path: Path) -> None:
    (path / "model.safetensors").unlink()
    (path / "pytorch_model.bin").write_bytes(b"not read")


def break_architecture(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": "mistral",
                                                  "architectures": ["MistralForCausalLM"]}))


def break_missing(path: Path) -> None:
    tensors = weights_of(path)
    del tensors["transformer.h.1.mlp.c_fc.weight"]
    write_weights(path, tensors)


def break_shape(path: Path) -> None:
    tensors = weights_of(path)
    tensors["transformer.h.0.attn.c_attn.weight"] = tensors["transformer.h.0.attn.c_attn.weight"][:, :40]
    write_weights(path, tensors)


def break_shard(path: Path) -> None:
    shard = sorted(path.glob("model-*.safetensors"))[-1]
    shard.unlink()


def break_rope(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}
    (path / "config.json").write_text(json.dumps(config))


def break_extra(path: Path) -> None:
    write_weights(path, {**weights_of(path), "transformer.h.0.attn.q_norm.weight": np.ones(16, np.float32)})


def set_config(**fields):
    """A break: config.json with `fields` set."""
    def breaks(path: Path) -> None:
        config = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**config, **fields}))
    return breaks


def set_weight(name: str, *values: float):
    """A break: the first values of tensor `name` set to `values` (inf, NaN)."""
    def breaks(path: Path) -> None:
        tensors = weights_of(path)
        tensors[name].flat[:len(values)] = values
        write_weights(path, tensors)
    return breaks


def move_shard(name_it):
    """A break: the first shard moved to ../elsewhere, and named by name_it(its new path, the folder) in the index
    (None: left as it was, a link to where it went)."""
    def breaks(path: Path) -> None:
        shard = sorted(path.glob("model-*.safetensors"))[0]
        moved = path.parent / "elsewhere" / shard.name
        moved.parent.mkdir()
        shard.rename(moved)
        index = json.loads((path / "model.safetensors.index.json").read_text())
        named = name_it(moved, path)
        if named is None:
            shard.symlink_to(moved)
        index["weight_map"] = {k: named if v == shard.name and named else v for k, v in index["weight_map"].items()}
        (path / "model.safetensors.index.json").write_text(json.dumps(index))
    return breaks


CONFIG = r"config\.json: "
CRAFTED = [  # config values of the wrong type, shards outside the folder, non-finite weights: one line each
    ("gpt2", set_config(layer_norm_epsilon="1e-5"), CONFIG + r"layer_norm_epsilon must be a number, got '1e-5' "
                                                            r"\(str\)"),
    ("gpt2", set_config(activation_function=["gelu_new"]), CONFIG + r"activation_function must be a string, got "
                                                                    r"\['gelu_new'\] \(list\)"),
    ("gpt2", set_config(model_type=["gpt2"]), CONFIG + r"model_type must be a string, got \['gpt2'\]"),
    ("gpt2", set_config(n_layer=True), CONFIG + r"n_layer must be an integer, got True \(bool\)"),
    ("gpt2", set_config(n_layer=10**9), CONFIG + r"1,000,000,000 layers, more than the weights' 28 tensors could hold"),
    ("gpt2", set_config(tie_word_embeddings="false"), CONFIG + r"tie_word_embeddings must be true or false, got "
                                                              r"'false'"),
    ("gpt2", set_config(eos_token_id="0"), CONFIG + r"eos_token_id must be an integer or a list of integers"),
    ("gpt2", set_config(bos_token_id=VOCAB), CONFIG + rf"bos_token_id {VOCAB} is not a token of .*tokenizer\.json"),
    ("llama-gqa", set_config(rope_parameters={"rope_type": "default", "rope_theta": "500"}),
     CONFIG + r"rope_parameters: rope_theta must be a number, got '500'"),
    ("llama-sharded", move_shard(lambda moved, path: f"../elsewhere/{moved.name}"),
     r"index\.json names the shard '\.\./elsewhere/model-00001-of-0000\d\.safetensors', which is .*elsewhere.*, "
     r"outside .*: a shard must be a file of the folder"),
    ("llama-sharded", move_shard(lambda moved, path: str(moved)), r"index\.json names the shard '/.*', which is"),
    ("llama-sharded", move_shard(lambda moved, path: None),  # a link in the folder to a file outside it
     r"index\.json names the shard 'model-00001-of-0000\d\.safetensors', which is .*elsewhere.*, outside"),
    ("llama-sharded", move_shard(lambda moved, path: 7), r"index\.json: its weight_map names 7, not a file name"),
    ("gpt2", set_weight("transformer.h.1.mlp.c_proj.weight", np.inf, np.nan),
     r"tensor 'transformer\.h\.1\.mlp\.c_proj\.weight' has 2 non-finite values \(inf or NaN\) among its 1,024"),
    ("llama-gqa", set_weight("model.norm.weight", -np.inf), r"tensor 'model\.norm\.weight' has 1 non-finite value"),
]


@pytest.mark.parametrize("name, breaks, message", [
    ("gpt2", break_bin_only, r"has PyTorch \.bin weights only; minigrad reads safetensors, never pickle\. Convert "
                             r"once .*save_pretrained"),
    ("gpt2", break_architecture, r"model_type 'mistral' \(MistralForCausalLM\) is not one minigrad loads: gpt2, llama"),
    ("gpt2", break_missing, r"tensor 'h\.1\.mlp\.c_fc\.weight' is missing from the weights"),
    ("gpt2", break_shape, r"tensor 'transformer\.h\.0\.attn\.c_attn\.weight' has shape \(16, 40\), but config\.json "
                          r"makes it \(16, 48\)"),
    ("gpt2", break_extra, r"tensor 'transformer\.h\.0\.attn\.q_norm\.weight' is not part of a gpt2 model"),
    ("llama-sharded", break_shard, r"model\.safetensors\.index\.json lists .*model-0000\d-of-0000\d\.safetensors, "
                                   r"which is not there"),
    ("llama-gqa", break_rope, r"rope_type 'llama3' \(rescaled rotary angles\) is not supported"),
    *CRAFTED,
])
@pytest.mark.parametrize("command", ["sample", "explain"])
def test_a_folder_that_cannot_load_is_refused_in_one_line_with_exit_2(folders, tmp_path, capsys, name, breaks,
                                                                      message, command):
    path = copy_folder(folders, name, tmp_path)
    breaks(path)
    code, out, err = run_main(capsys, command, "--init-from", str(path), "--prompt", "The")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"train.py {command}: error: "), err
    assert re.search(message, err), err


@pytest.mark.parametrize("name, breaks, message", CRAFTED)
def test_the_library_refuses_a_crafted_folder_where_the_mistake_is(folders, tmp_path, name, breaks, message):
    """GPT.from_pretrained, Llama.from_pretrained and HFTokenizer.from_folder: a ValueError naming the field, shard or
    tensor (they ended in TypeError tracebacks, read files outside the folder, or loaded inf and NaN silently)."""
    path = copy_folder(folders, name, tmp_path)
    breaks(path)
    refusals = []
    for load in (HFTokenizer.from_folder, GPT.from_pretrained if name.startswith("gpt2") else Llama.from_pretrained):
        try:
            load(str(path))
        except ValueError as err:  # each that reads the mistake refuses it (a config's type: both)
            refusals.append(str(err))
    assert refusals and all(re.search(message, refusal) for refusal in refusals), refusals


def test_fine_tuning_a_crafted_folder_is_refused_before_anything_is_written(folders, tmp_path, capsys):
    path = copy_folder(folders, "gpt2", tmp_path)
    set_config(layer_norm_epsilon="1e-5")(path)
    data = tmp_path / "data.txt"
    data.write_text("The quick brown fox. " * 40, encoding="utf-8")
    code, out, err = run_main(capsys, "--init-from", str(path), "--task", "text", "--data", str(data), "--out",
                              str(tmp_path / "run"))
    assert code == 2 and out == "" and "layer_norm_epsilon must be a number, got '1e-5'" in err
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_explain_writes_over_no_file_of_the_folder(folders, tmp_path, capsys):
    path = copy_folder(folders, "llama-sharded", tmp_path)
    files = {f: f.read_bytes() for f in path.iterdir()}
    for flag, name in (("--html", "model-00002-of-00006.safetensors"), ("--html", "model.safetensors.index.json"),
                       ("--png", "config.json"), ("--png", "tokenizer.json")):
        if flag == "--png":
            pytest.importorskip("matplotlib", reason="the heatmap needs matplotlib (pip install -e '.[plot]')")
        code, _, err = run_main(capsys, "explain", "--init-from", str(path), "--prompt", "The", flag, str(path / name))
        assert code == 2 and err.count("\n") == 1
        assert f"{flag} {path / name} is a file of --init-from {path}; writing there would replace it" in err
    assert {f: f.read_bytes() for f in path.iterdir()} == files


def test_the_hub_s_cache_layout_loads_its_linked_shards(folders, tmp_path):
    """Deliberate: a snapshot of the hub's cache links each of its files to the cache's blobs folder. A shard beside
    the file the index links to is in the folder, as the index is."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    shutil.copytree(folders["llama-sharded"][0], blobs)
    snapshot.mkdir(parents=True)
    for file in blobs.iterdir():
        (snapshot / file.name).symlink_to(file)
    idx, _ = batch()
    np.testing.assert_array_equal(Llama.from_pretrained(str(snapshot))(idx)[0].numpy(),
                                  Llama.from_pretrained(str(blobs))(idx)[0].numpy())


@pytest.mark.parametrize("path", ["gpt2", "my models/it's \"$HOME\"", "a\\b;rm -rf x"])
def test_the_command_a_message_suggests_reads_any_path_as_a_path(path):
    """The .bin and slow-tokenizer messages quote a command with the folder in it, which a quote ended."""
    program, flag, code = shlex.split(hf_load.resave_command("AutoTokenizer", path))
    calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]
    assert (program, flag) == ("python", "-c") and [c.args[0].value for c in calls] == [path, path]


def test_a_tokenizer_larger_than_the_model_s_vocabulary_is_refused(folders, tmp_path, capsys):
    path = copy_folder(folders, "gpt2", tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "vocab_size": 200}))
    tensors = weights_of(path)
    tensors["transformer.wte.weight"] = tensors["transformer.wte.weight"][:200]
    write_weights(path, tensors)
    code, _, err = run_main(capsys, "sample", "--init-from", str(path), "--prompt", "The")
    assert code == 2 and "its tokenizer.json has" in err and "more than the model's vocab_size 200" in err


def test_init_from_needs_a_prompt_and_dtype_needs_init_from(folders, capsys, tmp_path):
    for command in ("sample", "explain"):
        code, _, err = run_main(capsys, command, "--init-from", str(folders["gpt2"][0]))
        assert code == 2 and "--init-from needs a --prompt" in err
    code, _, err = run_main(capsys, "sample", "--out", str(tmp_path), "--dtype", "float64")
    assert code == 2 and "--dtype is for --init-from" in err
