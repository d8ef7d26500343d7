"""Models of the tight-memory corpus that `placement.torch_export` has no built-in for.

Each factory returns (model, example inputs, loss function, targets), the `--model=module:factory`
contract of placement.torch_export.
"""
import torch


class LstmLanguageModel(torch.nn.Module):
    """Embedding, a stack of LSTM layers unrolled over the sequence by the tracer, a linear head."""

    def __init__(self, vocab, hidden, layers):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, hidden)
        self.lstm = torch.nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens):
        states, _ = self.lstm(self.embedding(tokens))
        return self.head(states)


def _cross_entropy(output, targets):
    return torch.nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), targets[0].reshape(-1))


def _language_model(model, vocab, batch, seq):
    torch.manual_seed(0)
    tokens = torch.randint(0, vocab, (batch, seq))
    targets = torch.randint(0, vocab, (batch, seq))
    return model, (tokens,), _cross_entropy, (targets,)


def lstm_4x1024():
    """A word-level LSTM language model: 4 layers of 1024 units, 24 steps, batch 32."""
    torch.manual_seed(0)
    return _language_model(LstmLanguageModel(vocab=8000, hidden=1024, layers=4), 8000, batch=32, seq=24)


def lstm_2x512():
    """A smaller, longer one: 2 layers of 512 units, 48 steps, batch 64."""
    torch.manual_seed(0)
    return _language_model(LstmLanguageModel(vocab=4000, hidden=512, layers=2), 4000, batch=64, seq=48)


def _image_classifier(model, batch, image_size, classes=1000):
    torch.manual_seed(0)
    images = torch.randn(batch, 3, image_size, image_size)
    labels = torch.randint(0, classes, (batch,))
    return model, (images,), _cross_entropy_2d, (labels,)


def _cross_entropy_2d(output, targets):
    return torch.nn.functional.cross_entropy(output, targets[0])


def inception_v3():
    """Inception-v3 without its auxiliary head (whose training-mode tuple output the exporter's
    built-in loss does not take), batch 8 at 299 x 299."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.inception_v3(aux_logits=False, init_weights=False, num_classes=1000)
    return _image_classifier(model, batch=8, image_size=299)
