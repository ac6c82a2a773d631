# Follows a PyTorch tutorial closely: its BSD-3-Clause notice applies (NOTICE.md in this folder).
"""Generating names with a character-level RNN, in the style of PyTorch's tutorial char_rnn_generation_tutorial.py
(written anew for minigrad's tests): a category one-hot, letter one-hots, an RNN of three Linear layers with dropout
and LogSoftmax, NLLLoss summed over the letters, and a hand-written SGD step through p.data. On a short list of
names (names.txt: the first hundred are girls' names, the second hundred boys'), shrunk to train in seconds."""
import argparse
import os
import random
import string

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--n_iters', type=int, default=200)
args = parser.parse_args()
random.seed(args.seed)
torch.manual_seed(args.seed)

all_letters = string.ascii_letters + " .,;'-"
n_letters = len(all_letters) + 1  # plus EOS marker

# the names of each category
with open(os.path.join(os.path.dirname(__file__), 'names.txt'), encoding='utf-8') as f:
    names = [line.strip().capitalize() for line in f if line.strip()]
category_lines = {'Girl': names[:100], 'Boy': names[100:]}
all_categories = list(category_lines)
n_categories = len(all_categories)
print('# categories:', n_categories, all_categories)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size

        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.1)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output_combined = torch.cat((hidden, output), 1)
        output = self.o2o(output_combined)
        output = self.dropout(output)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


# random item from a list
def randomChoice(l):
    return l[random.randint(0, len(l) - 1)]

# a random category and a random line from that category
def randomTrainingPair():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    return category, line

# one-hot vector for category
def categoryTensor(category):
    li = all_categories.index(category)
    tensor = torch.zeros(1, n_categories)
    tensor[0][li] = 1
    return tensor

# one-hot matrix of first to last letters (not including EOS) for input
def inputTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li in range(len(line)):
        letter = line[li]
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor

# LongTensor of second letter to end (EOS) for target
def targetTensor(line):
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters - 1)  # EOS
    return torch.LongTensor(letter_indexes)

# category, input and target tensors from a random category, line pair
def randomTrainingExample():
    category, line = randomTrainingPair()
    category_tensor = categoryTensor(category)
    input_line_tensor = inputTensor(line)
    target_line_tensor = targetTensor(line)
    return category_tensor, input_line_tensor, target_line_tensor


criterion = nn.NLLLoss()

learning_rate = 0.005

def train(category_tensor, input_line_tensor, target_line_tensor):
    target_line_tensor.unsqueeze_(-1)
    hidden = rnn.initHidden()

    rnn.zero_grad()

    loss = torch.Tensor([0])  # you can also just simply use ``loss = 0``

    for i in range(input_line_tensor.size(0)):
        output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
        l = criterion(output, target_line_tensor[i])
        loss += l

    loss.backward()

    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)

    return output, loss.item() / input_line_tensor.size(0)


rnn = RNN(n_letters, 64, n_letters)

n_iters = args.n_iters
print_every = 100
all_losses = []

for iter in range(1, n_iters + 1):
    output, loss = train(*randomTrainingExample())
    all_losses.append(loss)

    if iter % print_every == 0:
        print('(%d %d%%) %.4f' % (iter, iter / n_iters * 100, sum(all_losses[-print_every:]) / print_every))

final_loss = sum(all_losses[-100:]) / 100
print(f'final loss {final_loss:.4f}')

max_length = 12

# sample from a category and starting letter
def sample(category, start_letter='A'):
    with torch.no_grad():  # no need to track history in sampling
        category_tensor = categoryTensor(category)
        input = inputTensor(start_letter)
        hidden = rnn.initHidden()

        output_name = start_letter

        for i in range(max_length):
            output, hidden = rnn(category_tensor, input[0], hidden)
            topv, topi = output.topk(1)
            topi = topi[0][0]
            if topi == n_letters - 1:
                break
            else:
                letter = all_letters[topi]
                output_name += letter
            input = inputTensor(letter)

        return output_name

# several samples from one category and several starting letters
def samples(category, start_letters='ABC'):
    for start_letter in start_letters:
        print(sample(category, start_letter))

samples('Girl', 'EMS')
samples('Boy', 'JAL')
