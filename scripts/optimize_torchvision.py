"""Optimize exported torchvision models and tabulate what the optimizer saw.

    python3 scripts/optimize_torchvision.py EXPORTS RULES.json [--rulebook PATH] [--models a,b]

EXPORTS is scripts/export_torchvision.py's output folder (or any folder of
NAME/model.onnx). For each model, runs `rulebook optimize` with its default
search (budget 300, 45 s limit) and `--compare 1`, reads the JSON report and
prints one Markdown table row: nodes, opaque nodes and the share of refused
forms, the operators no rule family covers, the search (graphs expanded,
seconds, why it stopped), the modelled cost before and after, and the
rewritten model's largest output difference from the original's, relative
to the largest output.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def row(rulebook, rules, name, model, workdir):
    out = os.path.join(workdir, name + ".opt.onnx")
    report = os.path.join(workdir, name + ".opt.json")
    p = subprocess.run([rulebook, "optimize", model, "--rules", rules, "-o", out, "--report", report,
                        "--compare", "1", "--no-progress"], capture_output=True, text=True)
    if p.returncode != 0:
        return f"| {name} | fails: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]} |", False
    with open(report) as f:
        r = json.load(f)
    for path in (out, report):
        os.remove(path)
    share, search = r["opaque_share"], r["search"]
    diff = r.get("measured", {}).get("max_relative_difference", float("nan"))
    cells = [name, str(share["nodes"]), str(share["opaque"]), f"{100 * share['refused_share']:.1f}%",
             ", ".join(share["uncovered_operators"]) or "—",
             f"{search['explored']}", f"{search['seconds']:.1f}", search["stopped"],
             f"{r['cost_before_ms']:.3f} → {r['cost_after_ms']:.3f}", f"{diff:.1e}"]
    return "| " + " | ".join(cells) + " |", diff <= 1e-4 and search["seconds"] <= 10


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports")
    ap.add_argument("rules")
    ap.add_argument("--rulebook", default="rulebook")
    ap.add_argument("--models", default="")
    args = ap.parse_args()
    names = args.models.split(",") if args.models else sorted(os.listdir(args.exports))
    print("| model | nodes | opaque | refused | operators no rule family covers | expanded | search s | stopped | model ms before → after | output difference |")
    print("|---|---:|---:|---:|---|---:|---:|---|---|---:|")
    bad = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name in names:
            model = os.path.join(args.exports, name, "model.onnx")
            if not os.path.isfile(model):
                model = os.path.join(args.exports, name + ".onnx")
            if not os.path.isfile(model):
                continue
            line, ok = row(args.rulebook, args.rules, name, model, workdir)
            bad += not ok
            print(line, flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
