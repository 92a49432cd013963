"""Run rulebook DTensor plans (docs/torch-plan.md) on CPU processes.

    python3 scripts/torch_plan_run.py PLAN.json [PLAN.json ...] [--model mlp|block|torch_layer|cnn]

--model names the module every plan runs on; without it, each plan's own
"model" (mlp, block, torch_layer, cnn, or bert-large, whose twin is block). Plans of one
world size share one set of processes, which saves starting PyTorch again.
Each of a plan's world_size processes (gloo backend) builds the same
seeded module and input, runs the unsharded module as the reference, then
a copy parallelized by the plan: tensor parallelism through
parallelize_module on the mesh's "tp" dimension, data parallelism by
splitting the batch over "dp" and summing gradients. The "heads" style,
which DTensor lacks, cuts an nn.MultiheadAttention by heads here
(shard_heads). One forward and one
backward step (loss: the outputs weighted by a fixed random tensor and
summed) must match the reference
within 1e-4 (largest absolute difference over outputs and every parameter
gradient, relative to the reference's largest magnitude). One line per
plan; exit status 0 when every plan matches, else 1 (2 for a bad plan).
"""

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import SMALL  # noqa: E402

FORMAT = "rulebook.torch-plan/1"
STYLES = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
# nn.MultiheadAttention cut by heads: its packed in_proj by columns within
# each of q, k and v, its out_proj by rows (applied by shard_heads)
HEADS = "heads"
TOLERANCE = 1e-4
MAX_LAYERS = 1024
# one CPU process per device: a plan for a cluster would start hundreds
MAX_WORLD = 16
# built-in workloads whose PyTorch twin is another name's module
TWINS = {"bert-large": "block"}


def make_model(model, plan):
    """The model at the plan's depth (its "layers"), else the small default."""
    make = SMALL[model][0]
    layers = plan.get("layers")
    return make(layers) if layers else make()


def twin(path, plan, model):
    """The bridge module a plan runs on: --model, else the plan's own."""
    name = model or TWINS.get(plan.get("model"), plan.get("model"))
    if name not in SMALL:
        raise ValueError(f"{path}: model {name!r} has no PyTorch twin here (known: {', '.join(sorted(SMALL))}); pass --model")
    return name


def load_plan(path, model):
    """Read and check a plan; raise ValueError with one line on a bad one.
    Returns the plan and the name of the module it runs on."""
    with open(path) as f:
        plan = json.load(f)
    model = twin(path, plan, model)
    if plan.get("format") != FORMAT:
        raise ValueError(f"{path}: format {plan.get('format')!r}, want {FORMAT!r}")
    mesh = plan["mesh"]
    if mesh["dim_names"] != ["dp", "tp"] or len(mesh["shape"]) != 2:
        raise ValueError(f"{path}: mesh {mesh}, want dimensions dp and tp")
    if mesh["shape"][0] * mesh["shape"][1] != plan["world_size"]:
        raise ValueError(f"{path}: mesh {mesh['shape']} does not hold world_size {plan['world_size']}")
    if not 1 <= plan["world_size"] <= MAX_WORLD:
        raise ValueError(f"{path}: world_size {plan['world_size']}, want 1 to {MAX_WORLD} processes on this machine; plan for fewer devices")
    layers = plan.get("layers", 0)
    if type(layers) is not int or not 0 <= layers <= MAX_LAYERS:
        raise ValueError(f"{path}: layers {layers!r}, want a whole number from 0 to {MAX_LAYERS}")
    modules = dict(make_model(model, plan).named_modules())
    for path_, style in plan["modules"].items():
        if style not in STYLES and style != HEADS:
            raise ValueError(f"{path}: module {path_}: unknown style {style!r} (known: colwise, rowwise, {HEADS})")
        if path_ not in modules:
            raise ValueError(f"{path}: module {path_} is not in the {model} model")
        if style == HEADS and not isinstance(modules[path_], nn.MultiheadAttention):
            raise ValueError(f"{path}: module {path_} is cut by {HEADS}, but it is a {type(modules[path_]).__name__}, not an nn.MultiheadAttention")
    return plan, model


class _CopyToGroup(torch.autograd.Function):
    """The input of a column cut: the same forward, its gradient summed over
    the tensor-parallel group backward (each device has its heads' part)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _SumOverGroup(torch.autograd.Function):
    """The output of a row cut: partial sums summed over the group forward,
    the whole gradient passed to every device backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def shard_heads(mha, path, mesh):
    """Cut nn.MultiheadAttention mha by heads over the 1-D mesh, as the
    plan's "heads" style says: device i runs heads i·h to (i+1)·h − 1 (h the
    heads over the mesh size). The packed in_proj ([3E, E]: q's rows, then
    k's, then v's) needs block i of each of q, k and v, a strided cut that
    DTensor's Shard cannot express, so its rows are permuted first to
    [q_0, k_0, v_0, q_1, k_1, v_1, ...], which makes the cut contiguous
    (Shard(0)); out_proj is cut by rows (its input features, Shard(1)) and
    its output summed over the mesh. The module calls F.linear on its
    weights, not Linear modules, so its forward is replaced. Returns, per
    parameter name, the row order its gradient comes back in."""
    t, E, H = mesh.size(), mha.embed_dim, mha.num_heads
    if not mha._qkv_same_embed_dim or not mha.batch_first or mha.in_proj_bias is None or H % t:
        raise ValueError(f"{path}: the heads style needs a batch_first self-attention with in_proj bias and heads divisible by {t}")
    w, head = E // t, E // H
    rows = torch.cat([torch.arange(b * E + i * w, b * E + (i + 1) * w) for i in range(t) for b in range(3)])
    mha.in_proj_weight = nn.Parameter(distribute_tensor(mha.in_proj_weight.detach()[rows], mesh, [Shard(0)]))
    mha.in_proj_bias = nn.Parameter(distribute_tensor(mha.in_proj_bias.detach()[rows], mesh, [Shard(0)]))
    mha.out_proj.weight = nn.Parameter(distribute_tensor(mha.out_proj.weight.detach(), mesh, [Shard(1)]))
    mha.out_proj.bias = nn.Parameter(distribute_tensor(mha.out_proj.bias.detach(), mesh, [Replicate()]))
    group = mesh.get_group()

    def forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if not (query is key is value) or key_padding_mask is not None or attn_mask is not None:
            raise ValueError(f"{path}: the heads style runs self-attention without masks only")
        x = _CopyToGroup.apply(query, group)
        q, k, v = F.linear(x, mha.in_proj_weight.to_local(), mha.in_proj_bias.to_local()).chunk(3, dim=-1)
        b, s, _ = q.shape

        def heads(z):
            return z.reshape(b, s, w // head, head).transpose(1, 2)

        o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), dropout_p=mha.dropout if mha.training else 0.0, is_causal=is_causal)
        y = F.linear(o.transpose(1, 2).reshape(b, s, w), mha.out_proj.weight.to_local())
        return _SumOverGroup.apply(y, group) + mha.out_proj.bias.to_local(), None

    mha.forward = forward
    return {f"{path}.in_proj_weight": rows, f"{path}.in_proj_bias": rows}


def worst_difference(pairs):
    worst = (0.0, "")
    for name, got, want in pairs:
        scale = max(want.abs().max().item(), 1.0)
        err = (got - want).abs().max().item() / scale
        if err > worst[0]:
            worst = (err, name)
    return worst


def run(rank, jobs, port, batch, result):
    """Run each (plan, model) of jobs, all of one world size, on this rank."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=jobs[0][0]["world_size"])
    try:
        for k, (plan, model) in enumerate(jobs):
            result[(k, rank)] = run_one(plan, model, batch)
    finally:
        dist.destroy_process_group()


def run_one(plan, model, batch):
    """One plan's step against the unsharded reference: (error, tensor)."""
    dp, tp = plan["mesh"]["shape"]
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    inputs = SMALL[model][1]
    torch.manual_seed(0)
    reference = make_model(model, plan)
    x = inputs(batch)
    parallel = make_model(model, plan)
    parallel.load_state_dict(reference.state_dict())
    want = reference(x)
    # a fixed random weighting of the outputs: a plain sum of a layer
    # norm's outputs does not depend on its input (the normalized values
    # sum to zero), so every gradient before a final post-LN norm would be
    # zero and prove nothing
    weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    (want * weights).sum().backward()

    plan_styles = {p: STYLES[s]() for p, s in plan["modules"].items() if s in STYLES}
    if tp > 1 and plan_styles:
        parallelize_module(parallel, mesh["tp"], plan_styles)
    permuted = {}
    for p, s in plan["modules"].items():
        if tp > 1 and s == HEADS:
            permuted.update(shard_heads(parallel.get_submodule(p), p, mesh["tp"]))
    d = mesh.get_local_rank("dp")
    part = x.chunk(dp)[d]
    got = parallel(part)
    if isinstance(got, DTensor):
        got = got.full_tensor()
    (got * weights.chunk(dp)[d]).sum().backward()
    if dp > 1:
        group = mesh["dp"].get_group()
        for p in parallel.parameters():
            g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            dist.all_reduce(g, group=group)
    pairs = [("output", got, want.chunk(dp)[d])]
    ref = dict(reference.named_parameters())
    for name, p in parallel.named_parameters():
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        if name in permuted:
            # back to the module's own row order
            g = torch.empty_like(g).index_copy_(0, permuted[name], g)
        pairs.append((name + ".grad", g, ref[name].grad))
    return worst_difference(pairs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="+", metavar="plan")
    ap.add_argument("--model", choices=sorted(SMALL))
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    sizes = {}
    try:
        for path in args.plans:
            plan, model = load_plan(path, args.model)
            sizes.setdefault(plan["world_size"], []).append((path, plan, model))
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"torch_plan_run: {e}", file=sys.stderr)
        return 2
    status = 0
    for world, jobs in sorted(sizes.items()):
        start = time.monotonic()
        result = mp.Manager().dict()
        mp.spawn(run, args=([(p, m) for _, p, m in jobs], free_port(), args.batch, result), nprocs=world)
        took = time.monotonic() - start
        for k, (path, plan, model) in enumerate(jobs):
            err, name = max(result[(k, r)] for r in range(world))
            if err > TOLERANCE:
                print(f"torch_plan_run: {path}: {model} on {world} processes: {name} differs by {err:.3g} (tolerance {TOLERANCE})")
                status = 1
                continue
            print(f"torch_plan_run: {model} on {world} processes (mesh {plan['mesh']['shape']}, "
                  f"{len(plan['modules'])} modules cut): outputs and gradients match within {err:.2g}"
                  f" ({len(jobs)} plans on these processes in {took:.1f} s)")
    return status


if __name__ == "__main__":
    sys.exit(main())
