# A two-layer LSTM language model trained by truncated backpropagation through time, as the word_language_model
# example and course notebooks write one (carry the state, detach it between chunks, clip the gradient norm).
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab_size, emb_size, hidden_size, num_layers):
        super().__init__()
        self.encoder = nn.Embedding(vocab_size, emb_size)
        self.rnn = nn.LSTM(emb_size, hidden_size, num_layers, batch_first=True)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, hidden=None):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output), hidden


vocab_size, batch_size, bptt = 13, 4, 6
torch.manual_seed(0)
model = LSTMLanguageModel(vocab_size, 8, 16, num_layers=2)
# ---- training ----
rng = np.random.default_rng(0)
corpus = torch.tensor(rng.integers(0, vocab_size, (batch_size, 4 * bptt + 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
losses = []
for epoch in range(3):
    hidden = None
    for i in range(0, corpus.size(1) - 1, bptt):
        x, y = corpus[:, i:i + bptt], corpus[:, i + 1:i + 1 + bptt]
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)
        logits, hidden = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(-1, vocab_size), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
final_loss = losses[-1]
