"""Median latency of PyTorch on a GPU, the reference of issue 29's table.

    python3 scripts/torch_gpu_latency.py MODEL [MODEL ...] [--batch 1]
        [--precision fp32,tf32,bf16] [--mode eager,graph] [--repeat 50]
        [--device cuda]

MODEL is a torchvision classifier by name (torchvision.models.get_model,
random weights, eval mode; inception_v3 without its auxiliary head, at
299 × 299, the others at 224 × 224: what scripts/export_torchvision.py
exports) or bert_base: the BERT-base encoder of scripts/torch_latency.py
(12 BertLayers, hidden 768, sequence length 64). Each runs on a seeded
random input of --batch samples, under torch.no_grad.

Precisions: fp32 turns TF32 off for matrix products and convolutions
(torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
False), tf32 turns both on, bf16 runs under torch.autocast with bfloat16
(TF32 off for what stays in fp32). Modes: eager calls the model; graph
captures one call as a torch.cuda.CUDAGraph after warm-up runs on a side
stream and times its replay. cuDNN's autotuner (torch.backends.cudnn.
benchmark) is on unless --no-cudnn-benchmark, as our runtime's cuDNN Find.

Each (model, batch, precision, mode) is timed --repeat times after
--warmup runs, wall clock from a synchronized GPU to the run's end
(torch.cuda.synchronize and time.perf_counter: launches count, as in the
median `rulebook run` prints), and printed as one JSON line: model, batch, precision, mode, median_ms,
min_ms, max_ms, repeat, device, torch. --device cpu is for dry runs: graph
mode is skipped there (a line with "skipped" says so) and bf16 autocasts
on the CPU. A model that fails prints a line with "error" and the others
still run; the exit status is then 1.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_latency import BertLayer  # noqa: E402  (the same encoder as the CPU reference)

PRECISIONS = ("fp32", "tf32", "bf16")
MODES = ("eager", "graph")


def build(name, batch):
    """The model in eval mode and its seeded input of batch samples."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if name == "bert_base":
        model = torch.nn.Sequential(*[BertLayer() for _ in range(12)])
        x = torch.randn(batch, 64, 768, generator=gen)
    else:
        kwargs = {"aux_logits": False, "init_weights": True} if name in ("inception_v3", "googlenet") else {}
        model = torchvision.models.get_model(name, weights=None, **kwargs)
        side = 299 if name == "inception_v3" else 224
        x = torch.randn(batch, 3, side, side, generator=gen)
    return model.eval(), x


def set_precision(precision):
    """TF32 on for tf32 only; bf16 is an autocast around each run."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def autocast(device, precision, cache=True):
    return torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16", cache_enabled=cache)


def timed(fn, device, repeat, warmup):
    """Wall-clock milliseconds of each of repeat calls of fn, after warmup
    calls, each from an idle GPU to its end (synchronize before and after):
    what `rulebook run` times of ours, launches included."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return times


def eager(model, x, device, precision):
    def run():
        with torch.no_grad(), autocast(device, precision):
            model(x)
    return run


def graph(model, x, device, precision, warmup):
    """A replay of one captured call. The warm-up runs on a side stream,
    as torch.cuda.graphs asks, so that lazy initialisation (cuDNN's
    autotuning, cuBLAS's workspace) happens before the capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad(), autocast(device, precision, cache=False):
        for _ in range(max(warmup, 3)):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), autocast(device, precision, cache=False), torch.cuda.graph(g):
        model(x)
    return g.replay


def measure(name, args):
    model, x = build(name, args.batch)
    model, x = model.to(args.device), x.to(args.device)
    for precision in args.precision:
        set_precision(precision)
        for mode in args.mode:
            row = {"model": name, "batch": args.batch, "precision": precision, "mode": mode}
            if mode == "graph" and args.device != "cuda":
                print(json.dumps({**row, "skipped": "CUDA graphs need --device cuda"}), flush=True)
                continue
            fn = graph(model, x, args.device, precision, args.warmup) if mode == "graph" else eager(model, x, args.device, precision)
            times = timed(fn, args.device, args.repeat, args.warmup)
            row.update(median_ms=round(statistics.median(times), 4), min_ms=round(min(times), 4),
                       max_ms=round(max(times), 4), repeat=args.repeat, device=device_name(args.device),
                       torch=torch.__version__, cudnn_benchmark=torch.backends.cudnn.benchmark)
            print(json.dumps(row), flush=True)


def device_name(device):
    return torch.cuda.get_device_name() if device == "cuda" else "cpu"


def choices(allowed):
    def parse(text):
        items = [s for s in text.split(",") if s]
        bad = [s for s in items if s not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"want a list of {', '.join(allowed)}, got {text!r}")
        return items
    return parse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="MODEL")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", type=choices(PRECISIONS), default=["fp32"], help="list, e.g. fp32,tf32,bf16")
    ap.add_argument("--mode", type=choices(MODES), default=list(MODES), help="list: eager,graph")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--no-cudnn-benchmark", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch.cuda.is_available() is False: use --device cpu for a dry run")
    failed = 0
    for name in args.models:
        try:
            measure(name, args)
        except Exception as e:  # one line per model, whatever went wrong
            failed += 1
            print(json.dumps({"model": name, "batch": args.batch, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
