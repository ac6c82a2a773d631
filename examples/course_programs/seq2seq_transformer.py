# An encoder-decoder transformer learning to reverse sequences, as the translation tutorials write one: nn.Transformer
# with token and position embeddings, a causal target mask, padding masks for source and target, teacher forcing,
# cross-entropy that ignores the padding.
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS = 0, 1


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab_size, d_model=16, nhead=2, num_layers=1, max_len=12):
        super().__init__()
        self.src_tok = nn.Embedding(vocab_size, d_model)
        self.tgt_tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(d_model=d_model, nhead=nhead, num_encoder_layers=num_layers,
                                          num_decoder_layers=num_layers, dim_feedforward=32, dropout=0.0,
                                          batch_first=True)
        self.generator = nn.Linear(d_model, vocab_size)
        self.scale = math.sqrt(d_model)

    def embed(self, tokens, table):
        positions = torch.arange(tokens.size(1)).unsqueeze(0)
        return table(tokens) * self.scale + self.pos(positions)

    def forward(self, src, tgt):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        out = self.transformer(self.embed(src, self.src_tok), self.embed(tgt, self.tgt_tok), tgt_mask=tgt_mask,
                               src_key_padding_mask=(src == PAD), tgt_key_padding_mask=(tgt == PAD),
                               memory_key_padding_mask=(src == PAD))
        return self.generator(out)


torch.manual_seed(0)
model = Seq2SeqTransformer(vocab_size=9)
# ---- training ----
rng = np.random.default_rng(0)
lengths = rng.integers(3, 7, 8)
src = np.zeros((8, 6), dtype=np.int64)
tgt = np.zeros((8, 8), dtype=np.int64)
for i, n in enumerate(lengths):
    seq = rng.integers(2, 9, n)
    src[i, :n] = seq
    tgt[i, 0], tgt[i, 1:n + 1] = BOS, seq[::-1]
src, tgt = torch.tensor(src), torch.tensor(tgt)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9)
losses = []
for step in range(8):
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
final_loss = losses[-1]
