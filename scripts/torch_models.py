"""PyTorch modules matching rulebook's built-in workloads (training/builtin.go).

Module paths are the ones the Go builders write into ONNX node names, so a
plan keyed by module path (docs/torch-plan.md) applies to these modules:
MLP layers.{i}; encoder layers.{i}.q, k, v, o, f1, f2, ln1, ln2; PyTorch's
own encoder layer l.self_attn (its packed in_proj and out_proj), l.linear1,
l.linear2; the CNN conv1, conv2, pool, fc.
"""

import math

import torch
from torch import nn


class MLP(nn.Module):
    """Layers × Linear(width, width) with ReLU between (training.MLP)."""

    def __init__(self, layers: int, width: int):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


class Block(nn.Module):
    """A post-LN encoder layer like the shared bert_base export.

    The head count is read from q's local width, so column-sharded q, k and v
    (DTensor's ColwiseParallel with local outputs) hold whole heads. GELU is
    PyTorch's, which torch.onnx writes as Div, Erf, Add, Mul, Mul. With
    fused set, attention runs as scaled_dot_product_attention.
    """

    def __init__(self, hidden: int, heads: int, ffn: int, fused: bool = False):
        super().__init__()
        self.fused = fused
        self.head_dim = hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.f1, self.f2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):
            return t.view(b, s, t.shape[-1] // self.head_dim, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        if self.fused:
            ctx = nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            ctx = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(-1) @ v
        x = self.ln1(x + self.o(ctx.transpose(1, 2).reshape(b, s, -1)))
        f = nn.functional.gelu(self.f1(x))
        return self.ln2(x + self.f2(f))


class Encoder(nn.Module):
    """Layers encoder blocks (training.Transformer)."""

    def __init__(self, layers: int, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.layers = nn.ModuleList([Block(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class TorchLayer(nn.Module):
    """PyTorch's own nn.TransformerEncoderLayer (batch_first, no dropout),
    whose attention packs q, k and v into one in_proj; module path l, as
    plan/mha_test.go exports it."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.l = nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=ffn, dropout=0.0, batch_first=True)

    def forward(self, x):
        # tracing the layer with its default is_causal fails in torch 2.x
        return self.l(x, src_mask=None, is_causal=False)


class CNN(nn.Module):
    """Conv 3×3, ReLU, conv 3×3, ReLU, global average pool, Linear: a small
    image classifier (about 5,400 parameters on 3×16×16 inputs).

    No batch normalization: in training mode it normalizes by the batch's
    statistics, so data parallelism, which gives each process a slice of
    the batch, would change the outputs unless the statistics were summed
    over the processes (SyncBatchNorm), which the plan does not say.
    """

    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * channels, classes)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


# Small sizes for tests; the Go test builds the same configurations. Each
# maker takes the layer count, so that a plan of a deeper model (the
# built-in mlp has 16 layers) names modules the small one has.
SMALL = {
    "mlp": (lambda layers=4: MLP(layers=layers, width=64), lambda batch: torch.randn(batch, 64)),
    "block": (lambda layers=2: Encoder(layers=layers, hidden=64, heads=4, ffn=256), lambda batch: torch.randn(batch, 8, 64)),
    "torch_layer": (lambda layers=1: TorchLayer(hidden=64, heads=4, ffn=128), lambda batch: torch.randn(batch, 8, 64)),
    # no layers list: a plan of the CNN names no layers
    "cnn": (lambda: CNN(), lambda batch: torch.randn(batch, 3, 16, 16)),
}
