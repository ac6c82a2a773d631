# Predicting a sine wave with two stacked LSTMCells and L-BFGS, in double precision, as the time-sequence-prediction
# example writes it: the cells stepped by hand over time, then run on past their input to predict the future.
import numpy as np
import torch
import torch.nn as nn


class Sequence(nn.Module):
    def __init__(self, hidden=12):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # predict the future from its own outputs
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.stack(outputs, 1).squeeze(2)


torch.manual_seed(0)
seq = Sequence()
seq.double()
# ---- training ----
rng = np.random.default_rng(0)
x = np.arange(20)[None, :] + rng.integers(-8, 8, (6, 1))
data = np.sin(x / 4.0)
input = torch.from_numpy(data[2:, :-1])
target = torch.from_numpy(data[2:, 1:])
test_input = torch.from_numpy(data[:2, :-1])
test_target = torch.from_numpy(data[:2, 1:])
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
losses = []
for i in range(3):
    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        pred = seq(test_input, future=5)
        losses.append(criterion(pred[:, :-5], test_target).item())
final_loss = losses[-1]
prediction = pred.detach().numpy()
