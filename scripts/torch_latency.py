#!/usr/bin/python3
"""Median CPU latency of PyTorch on the architectures of ../shared/models.

A reference for BENCHMARKS.md only: the project never depends on PyTorch.
Run with Debian's python3-torch and python3-torchvision:

    /usr/bin/python3 scripts/torch_latency.py --threads 2 --repeat 10

The models are built from the same definitions the ONNX files were exported
from (torchvision's resnet50, inception_v3 and squeezenet1_1; a BERT-base
encoder: 12 layers, hidden 768, 12 heads, feed-forward 3072, erf GELU) with
random weights, in eval mode, at batch 1 (BERT: sequence length 64).
"""
import argparse
import statistics
import time

import torch
import torchvision


class BertLayer(torch.nn.Module):
    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads = heads
        self.q = torch.nn.Linear(hidden, hidden)
        self.k = torch.nn.Linear(hidden, hidden)
        self.v = torch.nn.Linear(hidden, hidden)
        self.o = torch.nn.Linear(hidden, hidden)
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.ff1 = torch.nn.Linear(hidden, ffn)
        self.ff2 = torch.nn.Linear(ffn, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


def models():
    tv = torchvision.models
    yield "resnet50", tv.resnet50(), (1, 3, 224, 224)
    yield "inception_v3", tv.inception_v3(aux_logits=False, init_weights=True), (1, 3, 299, 299)
    yield "squeezenet1_1", tv.squeezenet1_1(), (1, 3, 224, 224)
    yield "bert_base", torch.nn.Sequential(*[BertLayer() for _ in range(12)]), (1, 64, 768)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--only", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for name, model, shape in models():
        if a.only and name != a.only:
            continue
        model.eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            model(x)  # warm-up
            times = []
            for _ in range(a.repeat):
                start = time.perf_counter()
                model(x)
                times.append(time.perf_counter() - start)
        print(f"{name}\t{statistics.median(times) * 1000:.1f} ms\t(threads {a.threads}, {a.repeat} runs, torch {torch.__version__})")


if __name__ == "__main__":
    main()
