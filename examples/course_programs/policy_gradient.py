# REINFORCE on a contextual bandit, as the reinforcement-learning tutorials write a policy gradient: a policy network,
# torch.distributions.Categorical to sample actions and score them, a baseline, Adam.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self, n_states, n_actions):
        super().__init__()
        self.affine1 = nn.Linear(n_states, 16)
        self.affine2 = nn.Linear(16, n_actions)

    def forward(self, x):
        return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=-1)


torch.manual_seed(0)
policy = Policy(3, 4)
# ---- training ----
best_action = torch.tensor([2, 0, 3])  # the arm that pays 1 in each state; the others pay 0
states = torch.eye(3)
optimizer = torch.optim.Adam(policy.parameters(), lr=0.05)
rewards_seen = []
for episode in range(60):
    probs = policy(states)
    m = Categorical(probs)
    action = m.sample()
    reward = (action == best_action).float()
    baseline = reward.mean()
    loss = -(m.log_prob(action) * (reward - baseline)).sum() - 0.01 * m.entropy().sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    rewards_seen.append(reward.mean().item())
with torch.no_grad():
    final_probs = policy(states).gather(1, best_action.unsqueeze(1)).squeeze(1)
final_loss = 1 - final_probs.mean().item()
