"""Measure a device profile: the operators a training step is made of,
timed with PyTorch on this machine's GPU if it has one, else on its CPU.

    python3 profile/profile_ops.py [--sizes small|full] [--device cpu|cuda]
                                   [--reps N] [--warmup N] [--threads N]
                                   [--clock wall|cpu] > PROFILE.csv

`rulebook profile --out PROFILE.csv` runs this script (it carries a copy)
and checks what it writes. The CSV has the columns and timing of
../shared/devices/README.md (op,shape,mode,fwd_ms,bwd_ms,fwd_gflop,fwd_mb):

- fwd_ms: median of --reps forward calls after --warmup, under
  torch.no_grad(), each followed by a device synchronise;
- bwd_ms: median of --reps forward+backward calls (the gradients of every
  floating input, weights included) minus fwd_ms, and never below 0;
- fwd_gflop, fwd_mb: the forward's arithmetic and the least bytes it moves.

Sizes: "full" on a GPU is the shared H200 profile's set; on a CPU it is a
set scaled to run in minutes on a few cores. "small" is tiny, for CI on a
CPU, and runs in seconds. Precisions: fp32 (TF32 off) and bf16 everywhere;
tf32 on a CUDA GPU; fp16 instead of bf16 on a GPU without bf16.

Progress goes to standard error as lines "progress I/N OP SHAPE MODE".
Exit status 3 means torch cannot be imported; the one line on standard
error says so.
"""

import argparse
import datetime
import math
import platform
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the caller turns status 3 into "torch is missing"
    print(f"python {platform.python_version()} cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)

BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# Per-element arithmetic of the row-wise operators, as the H200 profile
# counts it (layernorm: mean, variance, normalise, scale and shift).
ROW_FLOPS = {"layernorm": 8, "gelu": 10, "relu": 1, "softmax": 5, "add": 1}

# The optimizer step is measured over this many tensors, as the H200
# profile's was: a model's parameters come in many tensors.
ADAM_TENSORS = 100

# Each set: linear (tokens, in, out); attention (batch, heads, seq, dim);
# row-wise (rows, features); conv2d (input NCHW, weight OIHW, stride);
# the parameters of one Adam step.
SIZES = {
    "gpu-full": {
        "linear": [(t, k, n) for t in (512, 2048, 8192, 16384)
                   for k, n in ((1024, 1024), (1024, 4096), (4096, 1024), (768, 3072), (8192, 8192))],
        "attention": [(8, 16, 512, 64), (1, 16, 2048, 64), (32, 12, 128, 64)],
        "rows": [(4096, 1024), (16384, 1024), (4096, 768), (65536, 1024)],
        "conv2d": [((32, 64, 56, 56), (64, 64, 3, 3), 1), ((32, 256, 56, 56), (64, 256, 1, 1), 1),
                   ((32, 128, 28, 28), (128, 128, 3, 3), 1), ((32, 512, 7, 7), (512, 512, 3, 3), 1),
                   ((32, 3, 224, 224), (64, 3, 7, 7), 2), ((1, 64, 56, 56), (64, 64, 3, 3), 1)],
        "adam": 100_000_000,
    },
    "cpu-full": {
        "linear": [(t, k, n) for t in (64, 256, 1024)
                   for k, n in ((256, 256), (256, 1024), (1024, 256), (1024, 1024))],
        "attention": [(8, 4, 128, 64), (2, 4, 512, 64), (1, 8, 256, 32)],
        "rows": [(1024, 256), (4096, 256), (4096, 1024), (16384, 1024)],
        "conv2d": [((8, 64, 56, 56), (64, 64, 3, 3), 1), ((8, 256, 28, 28), (64, 256, 1, 1), 1),
                   ((8, 128, 28, 28), (128, 128, 3, 3), 1), ((8, 3, 224, 224), (64, 3, 7, 7), 2),
                   ((1, 64, 56, 56), (64, 64, 3, 3), 1)],
        "adam": 10_000_000,
    },
    "small": {
        "linear": [(t, k, n) for t in (32, 128) for k, n in ((64, 64), (64, 256), (256, 64))],
        "attention": [(2, 2, 32, 16), (1, 2, 64, 16)],
        "rows": [(256, 64), (1024, 64)],
        "conv2d": [((2, 8, 16, 16), (8, 8, 3, 3), 1), ((2, 16, 16, 16), (8, 16, 1, 1), 1),
                   ((2, 3, 32, 32), (8, 3, 7, 7), 2)],
        "adam": 100_000,
    },
}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# The clock: wall time, or on a CPU this process's CPU time (user and
# system), which a machine shared with other work does not inflate while
# the process waits for a core. With one thread the two agree on a quiet
# machine.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def median_ms(fn, device, warmup, reps):
    """Median time of fn in ms, each call followed by a synchronise."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(reps):
        start = clock()
        fn()
        sync(device)
        times.append((clock() - start) * 1e3)
    return statistics.median(times)


def linear_case(shape, dtype, device):
    t, k, n = shape
    x = torch.randn(t, k, dtype=dtype, device=device, requires_grad=True)
    w = torch.randn(n, k, dtype=dtype, device=device, requires_grad=True)
    return f"{t}x{k}->{n}", (x, w), F.linear, 2 * t * k * n, t * k + n * k + t * n


def attention_case(fused):
    def case(shape, dtype, device):
        b, h, s, d = shape
        q, k, v = (torch.randn(b, h, s, d, dtype=dtype, device=device, requires_grad=True) for _ in range(3))
        scale = 1 / math.sqrt(d)
        if fused:
            fn, elems = F.scaled_dot_product_attention, 4 * b * h * s * d
        else:
            def fn(q, k, v):
                return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v
            # the scores are written and read back once more than fused
            elems = 4 * b * h * s * d + 2 * b * h * s * s
        return f"b{b}h{h}s{s}d{d}", (q, k, v), fn, 4 * b * h * s * s * d, elems
    return case


def rows_case(op):
    def case(shape, dtype, device):
        r, c = shape
        x = torch.randn(r, c, dtype=dtype, device=device, requires_grad=True)
        args, elems = (x,), 2 * r * c
        if op == "layernorm":
            w = torch.ones(c, dtype=dtype, device=device, requires_grad=True)
            b = torch.zeros(c, dtype=dtype, device=device, requires_grad=True)
            args, fn = (x, w, b), lambda x, w, b: F.layer_norm(x, (c,), w, b)
        elif op == "gelu":
            fn = F.gelu
        elif op == "relu":
            fn = F.relu
        elif op == "softmax":
            fn = lambda x: torch.softmax(x, dim=-1)  # noqa: E731
        else:
            y = torch.randn(r, c, dtype=dtype, device=device, requires_grad=True)
            args, fn, elems = (x, y), torch.add, 3 * r * c
        return f"{r}x{c}", args, fn, ROW_FLOPS[op] * r * c, elems
    return case


def conv_case(shape, dtype, device):
    (n, c, h, w), (o, ci, kh, kw), stride = shape
    x = torch.randn(n, c, h, w, dtype=dtype, device=device, requires_grad=True)
    wt = torch.randn(o, ci, kh, kw, dtype=dtype, device=device, requires_grad=True)
    pad = kh // 2  # keeps the size for 3×3, 0 for 1×1, 3 for 7×7

    def fn(x, wt):
        return F.conv2d(x, wt, stride=stride, padding=pad)
    ho, wo = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    name = f"x{n}x{c}x{h}x{w}_w{o}x{ci}x{kh}x{kw}_s{stride}"
    return name, (x, wt), fn, 2 * n * o * ho * wo * ci * kh * kw, n * c * h * w + o * ci * kh * kw + n * o * ho * wo


def set_mode(mode, device):
    """TF32 on only in tf32 mode, for products and cuDNN alike."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"


def time_op(case, shape, mode, device, warmup, reps):
    """One profile row: forward and backward medians, GFLOP and MB."""
    set_mode(mode, device)
    name, args, fn, flops, elems = case(shape, DTYPES[mode], device)
    with torch.no_grad():
        out = fn(*args)
    grad_out = torch.ones_like(out)

    def forward():
        with torch.no_grad():
            fn(*args)

    def forward_backward():
        torch.autograd.grad(fn(*args), args, grad_out)
    fwd = median_ms(forward, device, warmup, reps)
    both = median_ms(forward_backward, device, warmup, reps)
    return name, fwd, max(both - fwd, 0.0), flops / 1e9, elems * BYTES[mode] / 1e6


def time_adam(fused, params, device, warmup, reps):
    """One Adam step over params fp32 parameters in ADAM_TENSORS tensors."""
    each = params // ADAM_TENSORS
    ps = [torch.zeros(each, device=device, requires_grad=True) for _ in range(ADAM_TENSORS)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(ps, lr=1e-3, fused=fused, foreach=None if fused else True)
    ms = median_ms(opt.step, device, warmup, reps)
    # reads parameter, gradient and both moments: 16 bytes a parameter
    return f"{each * ADAM_TENSORS} params", ms, 0.0, 0.0, each * ADAM_TENSORS * 16 / 1e6


def cases(sizes):
    """(op, case, shape) for every operator of the set, in file order."""
    out = [("linear", linear_case, s) for s in sizes["linear"]]
    for s in sizes["attention"]:
        out += [("attention_fused", attention_case(True), s), ("attention_unfused", attention_case(False), s)]
    for s in sizes["rows"]:
        out += [(op, rows_case(op), s) for op in ("layernorm", "gelu", "relu", "softmax", "add")]
    out += [("conv2d", conv_case, s) for s in sizes["conv2d"]]
    return out


def modes(device):
    if device.type != "cuda":
        return ["fp32", "bf16"]
    return ["fp32", "tf32", "bf16" if torch.cuda.is_bf16_supported() else "fp16"]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_line(device):
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (PyTorch {torch.__version__}, CUDA {torch.version.cuda})"
    n = torch.get_num_threads()
    return f"{cpu_name()}, {n} thread{'s' if n > 1 else ''} (PyTorch {torch.__version__}, CPU)"


def fmt(x):
    """A number as the profile writes it: short, and a time never 0."""
    s = f"{x:.4f}".rstrip("0").rstrip(".")
    return s if s not in ("0", "-0") or x == 0 else f"{x:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", choices=["small", "full"], default="full")
    ap.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda if present, else cpu")
    ap.add_argument("--reps", type=int, help="timed calls (default 20; 10 for --sizes small)")
    ap.add_argument("--warmup", type=int, help="untimed calls first (default 5; 3 for --sizes small)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch (default: torch's own choice)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or (CPU only) the process's CPU time, which other work on a shared machine does not inflate")
    args = ap.parse_args()
    small = args.sizes == "small"
    args.reps = args.reps if args.reps is not None else 10 if small else 20
    args.warmup = args.warmup if args.warmup is not None else 3 if small else 5
    if args.reps < 1 or args.warmup < 0 or args.threads < 0:
        ap.error("--reps must be at least 1, --warmup and --threads at least 0")
    if args.threads:
        torch.set_num_threads(args.threads)
    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    device = torch.device(name)
    if args.clock == "cpu" and name != "cpu":
        ap.error("--clock cpu times the CPU; a GPU is timed by the wall clock")
    global clock
    clock = CLOCKS[args.clock]
    torch.manual_seed(0)
    sizes = SIZES["small" if args.sizes == "small" else name.replace("cuda", "gpu") + "-full"]
    work = [(op, case, shape, mode) for mode in modes(device) for op, case, shape in cases(sizes)]
    total = len(work) + 2
    rows = []
    for i, (op, case, shape, mode) in enumerate(work, 1):
        print(f"progress {i}/{total} {op} {shape} {mode}", file=sys.stderr, flush=True)
        rows.append((op, mode) + time_op(case, shape, mode, device, args.warmup, args.reps))
    set_mode("fp32", device)
    for i, op in enumerate(("adam_foreach", "adam_fused"), len(work) + 1):
        print(f"progress {i}/{total} {op} {sizes['adam']} fp32", file=sys.stderr, flush=True)
        rows.append((op, "fp32") + time_adam(op == "adam_fused", sizes["adam"], device, args.warmup, args.reps))
    lines = [f"# device: {device_line(device)}",
             f"# measured by rulebook profile (profile_ops.py) on {datetime.date.today()}, sizes {args.sizes}, "
             f"median of {args.reps} after {args.warmup}, {args.clock} clock",
             "op,shape,mode,fwd_ms,bwd_ms,fwd_gflop,fwd_mb"]
    for op, mode, shape, fwd, bwd, gflop, mb in rows:
        lines.append(f"{op},{shape},{mode},{fmt(fwd)},{fmt(bwd) if bwd else '0'},{gflop:.6g},{mb:.6g}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
