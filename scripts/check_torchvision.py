"""Check our CPU runtime against PyTorch on exported torchvision models.

    python3 scripts/check_torchvision.py EXPORTS [--rulebook PATH] [--ort]

EXPORTS is scripts/export_torchvision.py's output folder. For each model,
runs `rulebook run MODEL --input … --expect … --rtol 1e-4 --atol 1e-5` and
prints one Markdown table row: the output's relative error against
PyTorch's, ‖got − want‖ / ‖want‖ (the pass criterion: at most 1e-4), and
how many elements miss the stricter element-wise tolerance. With --ort,
ONNX Runtime's relative error on the same file and input too. A constant
reference output is refused: it would pass whatever the runtime computes.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np
from onnx import numpy_helper

LIMIT = 1e-4


def ours(rulebook, folder):
    data = os.path.join(folder, "test_data_set_0")
    cmd = [rulebook, "run", os.path.join(folder, "model.onnx"), "--input", os.path.join(data, "input_0.pb"),
           "--expect", os.path.join(data, "output_0.pb"), "--rtol", "1e-4", "--atol", "1e-5", "--repeat", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    text = p.stdout + p.stderr
    m = re.search(r"relative error(?: of the output)? ([0-9.e+-]+)", text)
    if not m:
        return None, 0, text.strip().splitlines()[-1] if text.strip() else "no output"
    differ = re.search(r"(\d+) of \d+ elements differ", text)
    return float(m.group(1)), int(differ.group(1)) if differ else 0, ""


def ort(folder):
    import onnxruntime
    data = os.path.join(folder, "test_data_set_0")
    x = numpy_helper.to_array(load(os.path.join(data, "input_0.pb")))
    want = numpy_helper.to_array(load(os.path.join(data, "output_0.pb")))
    opts = onnxruntime.SessionOptions()
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = onnxruntime.InferenceSession(os.path.join(folder, "model.onnx"), opts, providers=["CPUExecutionProvider"])
    got = s.run(None, {s.get_inputs()[0].name: x})[0]
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want.astype(np.float64)))


def load(path):
    from onnx import TensorProto
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports")
    ap.add_argument("--rulebook", default="rulebook")
    ap.add_argument("--ort", action="store_true")
    args = ap.parse_args()
    print("| model | result | relative error | elements past rtol 1e-4 + atol 1e-5 |" + (" ONNX Runtime's relative error |" if args.ort else ""))
    print("|---|---|---:|---:|" + ("---:|" if args.ort else ""))
    failed = 0
    for name in sorted(os.listdir(args.exports)):
        folder = os.path.join(args.exports, name)
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            continue
        want = numpy_helper.to_array(load(os.path.join(folder, "test_data_set_0", "output_0.pb")))
        if want.size > 1 and (want == want.flat[0]).all():
            # A constant reference (a zero-initialised head) checks nothing.
            rel, differ, why = None, 0, f"the reference is constant ({want.flat[0]:g}); export again"
        else:
            rel, differ, why = ours(args.rulebook, folder)
        ok = rel is not None and rel <= LIMIT
        failed += not ok
        cells = [name, "pass" if ok else "fail: " + why, f"{rel:.1e}" if rel is not None else "—", str(differ)]
        if args.ort:
            try:
                cells.append(f"{ort(folder):.1e}")
            except Exception as e:  # noqa: BLE001 - reported in the table
                cells.append(f"fails: {str(e).splitlines()[0][:80]}")
        print("| " + " | ".join(cells) + " |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
