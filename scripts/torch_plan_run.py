"""Run rulebook DTensor plans (docs/torch-plan.md) on CPU processes.

    python3 scripts/torch_plan_run.py PLAN.json [PLAN.json ...] [--model mlp|block]

--model names the module every plan runs on; without it, each plan's own
"model" (mlp, block, or bert-large, whose twin is block). Plans of one
world size share one set of processes, which saves starting PyTorch again.
Each of a plan's world_size processes (gloo backend) builds the same
seeded module and input, runs the unsharded module as the reference, then
a copy parallelized by the plan: tensor parallelism through
parallelize_module on the mesh's "tp" dimension, data parallelism by
splitting the batch over "dp" and summing gradients. One forward and one
backward step (loss: the sum of the outputs) must match the reference
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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import SMALL  # noqa: E402

FORMAT = "rulebook.torch-plan/1"
STYLES = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
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
    names = {n for n, _ in make_model(model, plan).named_modules()}
    for path_, style in plan["modules"].items():
        if style not in STYLES:
            raise ValueError(f"{path}: module {path_}: unknown style {style!r} (known: colwise, rowwise)")
        if path_ not in names:
            raise ValueError(f"{path}: module {path_} is not in the {model} model")
    return plan, model


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
    want.sum().backward()

    plan_styles = {p: STYLES[s]() for p, s in plan["modules"].items()}
    if tp > 1 and plan_styles:
        parallelize_module(parallel, mesh["tp"], plan_styles)
    d = mesh.get_local_rank("dp")
    part = x.chunk(dp)[d]
    got = parallel(part)
    got.sum().backward()
    if dp > 1:
        group = mesh["dp"].get_group()
        for p in parallel.parameters():
            g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            dist.all_reduce(g, group=group)
    if isinstance(got, DTensor):
        got = got.full_tensor()
    pairs = [("output", got, want.chunk(dp)[d])]
    ref = dict(reference.named_parameters())
    for name, p in parallel.named_parameters():
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
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
