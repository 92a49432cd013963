"""Time PyTorch's training step on this CPU, and export the same workloads
for `rulebook plan` (issue 27, Done-when 3: the simulated step held
against a measured one on the CPU).

    python3 scripts/cpu_step.py OUTDIR [--threads N] [--steps N] [--warmup N] [--clock wall|cpu]

Workloads (scripts/torch_models.py's modules, so the exported graphs are
the ones PyTorch runs):
- mlp: 4 × Linear(1024, 1024), ReLU between, batch 256;
- encoder: 2 post-LN encoder layers, hidden 256, 4 heads, feed-forward
  1024, sequence 128, batch 8.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import MLP, Encoder  # noqa: E402

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}

WORKLOADS = {
    "mlp": (lambda: MLP(layers=4, width=1024), lambda: torch.randn(256, 1024)),
    "encoder": (lambda: Encoder(layers=2, hidden=256, heads=4, ffn=1024), lambda: torch.randn(8, 128, 256)),
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
