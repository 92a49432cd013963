"""Export torchvision's classification models to ONNX with PyTorch's output.

    python3 scripts/export_torchvision.py OUT_DIR [NAME ...] [--opset 17] [--batch 1] [--bert]

For each architecture (all of torchvision.models' classifiers by default),
with random weights (torch.manual_seed(0)) in eval mode, writes
OUT_DIR/NAME/model.onnx and OUT_DIR/NAME/test_data_set_0/{input_0,output_0}.pb,
ONNX's test-data layout, so that

    rulebook run OUT_DIR/NAME/model.onnx --input .../input_0.pb --expect .../output_0.pb

checks our runtime against PyTorch. The input is --batch images (one by
default; 299 × 299 for inception_v3, 224 × 224 otherwise), seeded; the
model's input has that fixed batch, and the reference output is PyTorch's
at that batch. --bert also exports bert_base, the BERT-base encoder of
scripts/torch_latency.py (12 layers, hidden 768, sequence length 64; input
[batch, 64, 768]), alone when no NAME is given. Weight matrices torchvision
initialises to zeros (the ViTs' heads) get seeded values, and a model whose
output is still constant is refused: a constant reference checks nothing.
The files are large and stay out of git; this script makes them. Prints one
line per model: exported, or why not.
"""

import argparse
import os
import sys
import time
import warnings

import torch
import torchvision
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_latency import BertLayer  # noqa: E402  (the encoder of ../shared/models/bert_base.onnx)


def side(name):
    return 299 if name == "inception_v3" else 224


def build(name, batch):
    """The model in eval mode and its seeded input of batch samples."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if name == "bert_base":
        model = torch.nn.Sequential(*[BertLayer() for _ in range(12)])
        return model.eval(), torch.randn(batch, 64, 768, generator=gen)
    kwargs = {"aux_logits": False, "init_weights": True} if name in ("inception_v3", "googlenet") else {}
    model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
    return model, torch.randn(batch, 3, side(name), side(name), generator=gen)


def export(name, out, opset, batch=1):
    model, x = build(name, batch)
    filled = fill_zero_weights(model)
    with torch.no_grad():
        y = model(x)
    if constant(y):
        raise ValueError(f"PyTorch's output is constant ({y.flatten()[0].item():g}): it checks nothing")
    folder = os.path.join(out, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"], dynamo=False)
    for kind, t in (("input", x), ("output", y)):
        with open(os.path.join(data, f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), kind).SerializeToString())
    return filled


def fill_zero_weights(model):
    """Give every weight matrix or kernel that torchvision initialises to
    zeros (the vision transformers' classification heads) seeded normal
    values (std 0.02), so that the output depends on the features before
    it. With a zero head every output is its bias, all zeros, and the
    check would compare zeros with zeros. Biases keep their values.
    Returns the names of the weights filled."""
    g = torch.Generator().manual_seed(2)
    filled = []
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                filled.append(pname)
    return filled


def constant(y):
    """Whether every element of an output is the same: no reference."""
    return y.numel() > 1 and bool((y == y.flatten()[0]).all())


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--batch", type=int, default=1, help="images per input (the model's fixed batch)")
    ap.add_argument("--bert", action="store_true", help="also export bert_base (scripts/torch_latency.py's encoder)")
    args = ap.parse_args()
    names = args.names or ([] if args.bert else torchvision.models.list_models(module=torchvision.models))
    if args.bert and "bert_base" not in names:
        names = names + ["bert_base"]
    failed = 0
    for name in names:
        start = time.monotonic()
        try:
            filled = export(name, args.out, args.opset, args.batch)
            note = f" (zero weights given seeded values: {', '.join(filled)})" if filled else ""
            print(f"{name}: exported in {time.monotonic() - start:.1f} s{note}")
        except Exception as e:  # one line per model, whatever went wrong
            failed += 1
            print(f"{name}: not exported: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
