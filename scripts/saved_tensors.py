"""Count what PyTorch's autograd saves for backward in one encoder layer.

Prints JSON: for attention as written ("unfused") and as
scaled_dot_product_attention ("fused"), the bytes of every distinct storage
the saved-tensor hooks see during one forward pass of
scripts/torch_models.py's Block (fp32, on the CPU), each storage counted
once, as the planner counts them.

    python3 scripts/saved_tensors.py --hidden 1024 --heads 16 --ffn 4096 \\
        --seq 512 --batch 1
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import Block  # noqa: E402


def saved_bytes(module, x):
    """Bytes of the distinct storages autograd saves in module(x)."""
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    # the input is kept by the first Linear; parameters are not activations
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in params)


def main():
    p = argparse.ArgumentParser()
    for name in ("hidden", "heads", "ffn", "seq", "batch"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--export", help="also write torch.onnx's export of the block (as written) here")
    a = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.batch, a.seq, a.hidden)
    out = {}
    for mode in ("unfused", "fused"):
        out[mode] = saved_bytes(Block(a.hidden, a.heads, a.ffn, fused=mode == "fused"), x)
    if a.export:
        block = Block(a.hidden, a.heads, a.ffn).eval()
        torch.onnx.export(block, (x,), a.export, opset_version=17, dynamo=False)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
