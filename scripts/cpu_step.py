"""Time PyTorch's training step on this CPU, and export the same workloads
for `rulebook plan` (issue 27, Done-when 3: the simulated step held
against a measured one on the CPU).

    python3 scripts/cpu_step.py OUTDIR [--threads N] [--steps N] [--warmup N] [--clock wall|cpu]

Workloads (scripts/torch_models.py's modules, so the exported graphs are
the ones PyTorch runs):
- mlp: 4 × Linear(1024, 1024), ReLU between, batch 256;
- encoder: 2 post-LN encoder layers, hidden 256, 4 heads, feed-forward
  1024, sequence 128, batch 8, as users write them: attention by
  F.scaled_dot_product_attention and F.gelu, each one kernel (torch_models'
  Block spells both out, as separate kernels, for the bridge's tests).

A step is forward, loss = sum of the outputs, backward, and a fused Adam
step (torch.optim.Adam(fused=True)), in fp32 and in bf16 autocast
(products in bf16, weights, gradients and Adam in fp32). It prints the
median of --steps steps after --warmup, one line per workload and
precision, and writes OUTDIR/mlp.onnx and OUTDIR/encoder.onnx (opset 17,
the batch fixed) for:

    rulebook plan OUTDIR/mlp.onnx --machine cpu --batch 256 --profile CPU.csv --precision fp32
    rulebook plan OUTDIR/encoder.onnx --machine cpu --batch 8 --profile CPU.csv --precision fp32
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import MLP, Block  # noqa: E402


class FusedBlock(Block):
    """torch_models.Block with fused attention and one GELU kernel."""

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):
            return t.view(b, s, t.shape[-1] // self.head_dim, self.head_dim).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        x = self.ln1(x + self.o(ctx.transpose(1, 2).reshape(b, s, -1)))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class FusedEncoder(nn.Module):
    def __init__(self, layers, hidden, heads, ffn):
        super().__init__()
        self.layers = nn.ModuleList([FusedBlock(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}

WORKLOADS = {
    "mlp": (lambda: MLP(layers=4, width=1024), lambda: torch.randn(256, 1024)),
    "encoder": (lambda: FusedEncoder(layers=2, hidden=256, heads=4, ffn=1024), lambda: torch.randn(8, 128, 256)),
}


def step_ms(model, x, precision, warmup, steps, clock):
    """Median wall time of one training step, in ms."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(x).float().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = clock()
        step()
        times.append((clock() - start) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch (default: torch's own choice)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or the process's CPU time, which other work on a shared machine does not inflate "
                    "(as rulebook profile --clock cpu)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.outdir, exist_ok=True)
    torch.manual_seed(0)
    print(f"# PyTorch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.steps} steps after {args.warmup}, {args.clock} clock")
    for name, (make, inputs) in WORKLOADS.items():
        model, x = make(), inputs()
        path = os.path.join(args.outdir, name + ".onnx")
        torch.onnx.export(model.eval(), (x,), path, opset_version=17, dynamo=False, input_names=["x"], output_names=["y"])
        model.train()
        params = sum(p.numel() for p in model.parameters())
        for precision in ("fp32", "bf16"):
            ms = step_ms(model, x, precision, args.warmup, args.steps, CLOCKS[args.clock])
            print(f"{name}\t{precision}\t{ms:.1f} ms\t{params} parameters\t{path}", flush=True)


if __name__ == "__main__":
    main()
