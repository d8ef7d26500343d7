"""An unrolled two-layer LSTM language model for the plans corpus (bench/plans/make_corpus.sh).

`python3 -m placement.torch_export --model=lstm_model:lstm` traces it: the cells are unrolled over the
sequence (nn.LSTMCell per step), so the step has one op per gate computation and time step rather than
one fused aten::lstm, and a placement can split it in time and depth.
"""
import torch

BATCH = 64
SEQ = 24
VOCAB = 2000
HIDDEN = 256


class UnrolledLstm(torch.nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.cells = torch.nn.ModuleList(torch.nn.LSTMCell(HIDDEN, HIDDEN) for _ in range(layers))
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        batch = tokens.shape[0]
        states = [(x.new_zeros(batch, HIDDEN), x.new_zeros(batch, HIDDEN)) for _ in self.cells]
        outputs = []
        for t in range(tokens.shape[1]):
            h = x[:, t]
            for i, cell in enumerate(self.cells):
                states[i] = cell(h, states[i])
                h = states[i][0]
            outputs.append(h)
        return self.head(torch.stack(outputs, dim=1))


def lstm():
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
    targets = torch.randint(0, VOCAB, (BATCH, SEQ))

    def loss(output, target):
        return torch.nn.functional.cross_entropy(output.reshape(-1, VOCAB), target[0].reshape(-1))

    return UnrolledLstm(), (tokens,), loss, (targets,)
