# A transformer-encoder classifier, as the PyTorch tutorials write one: token and position embeddings, an
# nn.TransformerEncoder with a padding mask, mean pooling over the real tokens, a linear head, AdamW with OneCycleLR.
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, d_model, nhead, num_layers, num_classes, max_len=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, num_classes)
        self.d_model = d_model

    def forward(self, tokens, padding_mask):
        positions = torch.arange(tokens.size(1)).unsqueeze(0)
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos(positions)
        x = self.encoder(x, src_key_padding_mask=padding_mask)
        keep = 1 - padding_mask.unsqueeze(-1).float()  # 1 for a real token, 0 for padding
        return self.head((x * keep).sum(1) / keep.sum(1))


torch.manual_seed(0)
model = EncoderClassifier(vocab_size=10, d_model=16, nhead=2, num_layers=2, num_classes=2)
# ---- training ----
rng = np.random.default_rng(0)
tokens = torch.tensor(rng.integers(1, 10, (8, 7)))
lengths = rng.integers(3, 8, 8)
padding_mask = torch.tensor(np.arange(7)[None, :] >= lengths[:, None])
labels = torch.tensor(rng.integers(0, 2, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=10)
losses = []
for step in range(10):
    loss = F.cross_entropy(model(tokens, padding_mask), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    losses.append(loss.item())
final_loss = losses[-1]
