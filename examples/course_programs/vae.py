# A variational autoencoder step, as the PyTorch VAE example writes one: an encoder to mu and log-variance, the
# reparameterisation trick, a Bernoulli decoder scored by binary cross-entropy, and the Gaussian KL term.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class VAE(nn.Module):
    def __init__(self, n_in=16, n_hidden=12, n_latent=2):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc21 = nn.Linear(n_hidden, n_latent)
        self.fc22 = nn.Linear(n_hidden, n_latent)
        self.fc3 = nn.Linear(n_latent, n_hidden)
        self.fc4 = nn.Linear(n_hidden, n_in)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 16))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 16), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


torch.manual_seed(0)
model = VAE()
# ---- training ----
rng = np.random.default_rng(0)
data = torch.tensor((rng.random((32, 4, 4)) < 0.3).astype(np.float32))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for epoch in range(40):
    model.train()
    optimizer.zero_grad()
    recon_batch, mu, logvar = model(data)
    loss = loss_function(recon_batch, data, mu, logvar)
    loss.backward()
    optimizer.step()
    losses.append(loss.item() / len(data))
final_loss = losses[-1]
