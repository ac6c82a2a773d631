"""Tiny random GPT-2 and LLaMA models made with transformers, saved as Hugging Face folders (safetensors weights, a
tokenizer.json trained here with tokenizers), and the float64 reference to compare minigrad with. Imported by
conftest.py's fixtures (`folders`, `float64_reference`) once torch, transformers, tokenizers and safetensors are found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models import IGNORE_INDEX

# importing this module skips the test module (or, from a fixture, the test) with the reason where one is missing
torch = pytest.importorskip("torch", reason="torch is the backend of the transformers reference")
transformers = pytest.importorskip("transformers", reason="transformers is the reference: pip install transformers")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizer.json needs tokenizers: pip install -e '.[hf]'")
pytest.importorskip("safetensors", reason="the weights are read with safetensors: pip install -e '.[hf]'")
from transformers.models.llama import modeling_llama  # noqa: E402  (after the skip: transformers may be absent)

VOCAB = 400  # the tokenizers trained below have this many tokens
TEXT = ["The quick brown fox jumps over the lazy dog. ", "Naïve café — 你好, мир! 123 + 456 = 579\n",
        "A learner reads attention.py, then runs the real thing. "] * 30
# (name, transformers config class, its fields, what to do to the saved folder)
GPT2 = {"vocab_size": VOCAB, "n_positions": 48, "n_embd": 16, "n_layer": 2, "n_head": 2, "bos_token_id": 0,
        "eos_token_id": 0}
LLAMA = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
         "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}, "bos_token_id": 1, "eos_token_id": 2}
MODELS = {
    "gpt2": ("GPT2", GPT2, None),  # tied head, tanh GELU (gelu_new)
    "gpt2-untied": ("GPT2", {**GPT2, "n_embd": 24, "n_head": 3, "n_inner": 40, "layer_norm_epsilon": 1e-3,
                             "activation_function": "gelu", "tie_word_embeddings": False}, None),
    "llama-gqa": ("Llama", LLAMA, None),  # 4 query heads share 2 key/value heads; untied
    "llama-mqa-tied": ("Llama", {**LLAMA, "num_key_value_heads": 1, "tie_word_embeddings": True,
                                 "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, None),
    "llama-head-dim": ("Llama", {**LLAMA, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 10}, None),
    "llama-old-config": ("Llama", {**LLAMA, "hidden_size": 48, "num_attention_heads": 6, "num_key_value_heads": 3},
                         "old-config"),
    "llama-sharded": ("Llama", LLAMA, "sharded"),
}


def scramble(model, seed: int = 0) -> None:
    """Redraw every weight: transformers' init (std 0.02, biases 0, norms 1) leaves attention nearly uniform and
    biases and norm weights untested. Norm weights around 1, everything else N(0, 0.3^2)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            p.copy_(1 + 0.2 * noise if ("ln" in name or "norm" in name) and name.endswith("weight") else 0.3 * noise)


def train_tokenizer(llama_style: bool):
    """A byte-level BPE as GPT-2's (no special token added by encode), or one laid out as LLaMA-2's tokenizer.json:
    spaces as U+2581, bytes of unseen characters as <0xNN> tokens, and <s> put in front by its post-processor."""
    tk = tokenizers
    if llama_style:
        tok = tk.Tokenizer(tk.models.BPE(byte_fallback=True, unk_token="<unk>"))
        tok.normalizer = tk.normalizers.Sequence([tk.normalizers.Prepend("\u2581"),
                                                  tk.normalizers.Replace(" ", "\u2581")])
        tok.decoder = tk.decoders.Sequence([tk.decoders.Replace("\u2581", " "), tk.decoders.ByteFallback(),
                                            tk.decoders.Fuse(), tk.decoders.Strip(" ", 1, 0)])
        specials = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
        trainer = tk.trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False)
    else:
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"], show_progress=False,
                                         initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, trainer)
    if llama_style:
        tok.post_processor = tk.processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


def save_folder(kind: str, fields: dict, change: str | None, path: Path) -> tuple:
    """A scrambled transformers model saved to `path` (safetensors, and a tokenizer); returns it in float64."""
    torch.manual_seed(0)
    config = getattr(transformers, f"{kind}Config")(**fields)
    model = getattr(transformers, f"{kind}LMHeadModel" if kind == "GPT2" else "LlamaForCausalLM")(config)
    scramble(model)
    model.save_pretrained(path, **({"max_shard_size": "20KB"} if change == "sharded" else {}))
    tok = train_tokenizer(kind == "Llama")
    assert tok.get_vocab_size() <= VOCAB
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(path)
    if change == "old-config":  # as configs were before rope_parameters: rope_theta at the top, no head_dim
        config = json.loads((path / "config.json").read_text())
        config["rope_theta"] = config.pop("rope_parameters")["rope_theta"]
        config["rope_scaling"] = None
        del config["head_dim"]
        (path / "config.json").write_text(json.dumps(config))
    return model.double().eval()




def build_folders(root: Path) -> dict[str, tuple[Path, object]]:
    """Every folder of MODELS under root: name -> (its path, the transformers model it holds, in float64)."""
    return {name: (root / name, save_folder(kind, fields, change, root / name))
            for name, (kind, fields, change) in MODELS.items()}


def use_float64_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' LLaMA computes RMSNorm and the rotary angles in float32 even in a float64 model (habits of
    bfloat16 training), which alone moves its logits by about 1e-8. For the float64 comparisons those two run the
    same formulas in the model's dtype; the float32 comparison runs transformers as it is."""
    def rms_norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = self.config.head_dim
        theta = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        angles = position_ids[..., None].to(torch.float64) * inv_freq  # (B, T, hs/2)
        angles = torch.cat([angles, angles], dim=-1)  # rotate-half: channel i pairs with i + hs/2
        return angles.cos().to(x.dtype), angles.sin().to(x.dtype)

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms_norm)
    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", rotary)


def reference_loss(hf, idx, targets):
    """transformers' logits for idx, and the mean cross-entropy over the targets that are not IGNORE_INDEX."""
    logits = hf(torch.tensor(idx)).logits
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(targets).flatten(),
                                             ignore_index=IGNORE_INDEX)
    return logits, loss
