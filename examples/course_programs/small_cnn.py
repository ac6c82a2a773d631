# A small convolutional classifier, as the MNIST example and course notebooks write one: conv, batch norm, pooling,
# a global average pool and a linear head, trained with SGD and a step schedule, then evaluated without gradients.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=1)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        x = torch.flatten(self.pool(x), 1)
        return F.log_softmax(self.fc(x), dim=1)


torch.manual_seed(0)
model = Net()
# ---- training ----
rng = np.random.default_rng(0)
images = torch.tensor(rng.standard_normal((12, 1, 8, 8)), dtype=torch.float32)
labels = torch.tensor(rng.integers(0, 3, 12))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
losses = []
model.train()
for epoch in range(6):
    for batch in range(2):
        data, target = images[batch * 6:(batch + 1) * 6], labels[batch * 6:(batch + 1) * 6]
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
model.eval()
with torch.no_grad():
    output = model(images)
    test_loss = F.nll_loss(output, labels, reduction="sum").item() / len(labels)
    correct = (output.argmax(dim=1) == labels).sum().item()
final_loss = test_loss
