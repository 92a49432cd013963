#!/usr/bin/env python3
"""A hostile run of the rulebook command: hundreds of cases an attacker or a
careless user would try, generated from the classes of issue 25, each run
against the real binary in a scratch folder and judged by what the binary
did, not by what it printed:

  crash      a panic, a fatal runtime error, death by a signal it did not
             ask for, or running out of memory (every case runs under an
             address-space cap, so an allocation bomb fails);
  hang       still running 2 s after SIGINT (cases without SIGINT get
             SIGINT at their deadline, then 2 s);
  data loss  a file that existed before the case (models, bundles, the
             database and its -wal/-shm side files) changed or vanished,
             other than the outputs the case names;
  outside    a read(2) of the secret file that sits outside every named
             input, seen by strace, or the secret's marker in any output;
  unproved   a rule released although its proof was forged;
  wrong      a case that must be refused (an output that is an input, a
             number that is not finite and positive, a tag that reads as a
             hash, ...) exited 0.

Usage: scripts/hostile/hostile.py --bin ./rulebook --shared ../shared
       [--work DIR] [--only CLASS] [--list] [--report out.md]

How the cases are generated: each class is a cross product of the commands
that read (or write, or size) something with the hostile values of that
class; the lists below are the whole generator, and --list prints every
case with its class.
"""

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time

MARKER = "HOSTILE-SECRET-4f1c9a"
MEMORY_CAP = 8 << 30  # address space per case
DEADLINE = 40.0  # seconds before a case without SIGINT is interrupted
GRACE = 2.0  # seconds a command may take to stop after SIGINT


class Case:
    def __init__(self, cls, name, args, refuse=False, sigint=None, prep=None,
                 outputs=(), stdin=None, stdout=None, check=None, trace=False,
                 deadline=DEADLINE, names_secret=False):
        self.cls, self.name, self.args = cls, name, args
        self.refuse = refuse  # must exit non-zero
        self.sigint = sigint  # seconds before SIGINT, or None
        self.prep = prep  # callable(work dir) run before the case
        self.outputs = set(outputs)  # files the case may change
        self.stdin, self.stdout = stdin, stdout
        self.check = check  # callable(work, result) -> list of (kind, why)
        self.trace = trace  # watch reads of the secret with strace
        self.deadline = deadline
        self.names_secret = names_secret  # the user named the secret itself


# ---------------------------------------------------------------- fixtures

def make_models(d):
    """Small ONNX models written with the onnx package: one that runs, and
    the hostile ones of the size class."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    def model(name, nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        save(m, os.path.join(d, name + ".onnx"))

    f32 = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    model("relu", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", f32, [2, 3])], [vi("y", f32, [2, 3])])
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    model("mm", [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
          [vi("x", f32, [2, 4])], [vi("y", f32, [2, 4])], [w])
    # Allocation bombs: shapes a file declares.
    shape = numpy_helper.from_array(np.array([1 << 16, 1 << 17], np.int64), "s")
    model("bomb_constantofshape", [helper.make_node("ConstantOfShape", ["s"], ["y"])],
          [], [vi("y", f32, None)], [shape])
    model("bomb_input", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", f32, [65536, 65536])], [vi("y", f32, [65536, 65536])])
    model("bomb_input_rank", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", f32, [1 << 20] * 4)], [vi("y", f32, None)])
    big = TensorProto(name="w", data_type=f32, dims=[1 << 17, 1 << 16])
    big.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "absent.bin"), ("offset", "0")):
        e = big.external_data.add()
        e.key, e.value = k, v
    model("bomb_external", [helper.make_node("MatMul", ["x", "w"], ["y"])],
          [vi("x", f32, [1, 1 << 17])], [vi("y", f32, None)], [big])
    expand = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    model("bomb_expand", [helper.make_node("Expand", ["x", "s"], ["y"])],
          [vi("x", f32, [1, 1])], [vi("y", f32, None)], [expand])
    reps = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "r")
    model("bomb_tile", [helper.make_node("Tile", ["x", "r"], ["y"])],
          [vi("x", f32, [4, 4])], [vi("y", f32, None)], [reps])
    model("neg_dim", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", f32, [-5, 3])], [vi("y", f32, None)])
    model("huge_dim", [helper.make_node("Relu", ["x"], ["y"])],
          [vi("x", f32, [1 << 62, 1 << 62])], [vi("y", f32, None)])
    # Bad models that run and optimize refuse: plan must too.
    cw = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "cw")
    model("conv_stride0", [helper.make_node("Conv", ["x", "cw"], ["y"], strides=[0, 0])],
          [vi("x", f32, [1, 3, 8, 8])], [vi("y", f32, None)], [cw])
    rs = numpy_helper.from_array(np.array([-1, -1, 0], np.int64), "rs")
    model("reshape_two_minus", [helper.make_node("Reshape", ["x", "rs"], ["y"])],
          [vi("x", f32, [2, 3, 4])], [vi("y", f32, None)], [rs])
    model("concat_axis7", [helper.make_node("Concat", ["x", "x"], ["y"], axis=7)],
          [vi("x", f32, [2, 3])], [vi("y", f32, None)])
    model("cycle", [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
          [vi("x", f32, [2])], [vi("b", f32, None)])
    model("unknown_op", [helper.make_node("NoSuchOp", ["x"], ["y"])],
          [vi("x", f32, [2, 3])], [vi("y", f32, None)])
    # A weight behind a symlink that leaves the model's folder.
    os.makedirs(os.path.join(d, "h3"), exist_ok=True)
    t = TensorProto(name="w", data_type=f32, dims=[2, 2])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "h3",
                          [vi("x", f32, [2, 2])], [vi("y", f32, [2, 2])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    save(m, os.path.join(d, "h3", "m.onnx"))


def make_tensor_files(d):
    import numpy as np
    from onnx import numpy_helper
    for name, arr in (("x_f32", np.ones((2, 3), np.float32)), ("x_i64", np.ones((2, 3), np.int64)),
                      ("x_f64", np.ones((2, 3), np.float64)), ("x_wrong_shape", np.ones((7, 7), np.float32))):
        with open(os.path.join(d, name + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, "x").SerializeToString())


def setup(rb, shared, root, reuse):
    """The fixture every case copies: a released ≤2-operator rulebook (v1),
    its bundle, models, tensors, machine files and the secret."""
    base = os.path.join(root, "base")
    secret = os.path.join(root, "secret.txt")
    if reuse and os.path.exists(os.path.join(base, "v1.sexpr")):
        return base, secret, json.load(open(os.path.join(base, "machine.json")))
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(base)
    secret = os.path.join(root, "secret.txt")
    with open(secret, "w") as f:
        f.write(MARKER + "\n")
    def run(*a):
        r = subprocess.run([rb, "--db", "rb.db", *a], cwd=base, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            sys.exit(f"setup: rulebook {' '.join(a)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    run("build", "--max-ops", "3", "--tag", "v1", "--no-progress")
    run("export", "--version", "v1", "--format", "json", "-o", "v1.json")
    run("export", "--version", "v1", "--format", "sexpr", "-o", "v1.sexpr")
    make_models(base)
    make_tensor_files(base)
    os.symlink(secret, os.path.join(base, "h3", "w.bin"))
    shutil.copy(os.path.join(shared, "anchors", "flexflow-graph_subst_3_v2.json"), os.path.join(base, "ff.json"))
    machine = {"name": "m", "nodes": 1, "devices_per_node": 4,
               "device": {"name": "d", "peak_flops": 1e14, "memory_bandwidth": 1e12, "memory_bytes": 16e9},
               "intra_node": {"bandwidth": 1e11, "latency": 1e-6}, "inter_node": {"bandwidth": 1e10, "latency": 5e-6}}
    with open(os.path.join(base, "machine.json"), "w") as f:
        json.dump(machine, f)
    return base, secret, machine


# ------------------------------------------------------------------- cases

def hostile_files(secret):
    """Hostile things to name where a regular input file is expected: each
    a (name, prep) where prep makes it in the work folder and returns its
    path there."""
    def link_secret(w):
        os.symlink(secret, os.path.join(w, "in.x"))
        return "in.x"

    def fifo(w):
        os.mkfifo(os.path.join(w, "in.x"))
        return "in.x"

    def sock(w):
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(w, "in.x"))
        return "in.x"

    def write(data):
        def p(w):
            with open(os.path.join(w, "in.x"), "wb") as f:
                f.write(data)
            return "in.x"
        return p

    def sparse(w):
        with open(os.path.join(w, "in.x"), "wb") as f:
            f.truncate(100 << 30)
        return "in.x"

    def escaped(w):
        name = "in\x1b[31m\r.x"
        with open(os.path.join(w, name), "wb") as f:
            f.write(b"\x1b[2Jgarbage")
        return name

    return [
        ("symlink-to-secret", link_secret), ("fifo", fifo), ("socket", sock),
        ("dev-zero", lambda w: "/dev/zero"), ("dev-urandom", lambda w: "/dev/urandom"),
        ("directory", lambda w: "."), ("missing", lambda w: "nope.x"), ("empty", write(b"")),
        ("random-bytes", write(os.urandom(4096))), ("sparse-100G", sparse),
        ("escape-name", escaped), ("json-bomb", write(b"[" * 100000)),
    ]


def reader_cases(secret):
    """Every command that reads a named file, given each hostile file."""
    readers = {
        "run-model": lambda f: ["run", f],
        "optimize-model": lambda f: ["optimize", f, "--rules", "v1.json", "-o", "out.onnx", "--timeout", "3s"],
        "optimize-rules": lambda f: ["optimize", "relu.onnx", "--rules", f, "-o", "out.onnx", "--timeout", "3s"],
        "plan-model": lambda f: ["plan", f, "--machine", "cpu"],
        "plan-machine": lambda f: ["plan", "mlp", "--machine", f, "--batch", "64"],
        "import": lambda f: ["import", "--format", "json", f],
        "import-flexflow": lambda f: ["import", "--format", "flexflow-json", f],
        "compare": lambda f: ["compare", "--version", "v1", "--format", "sexpr", "--no-progress", f],
        "run-input": lambda f: ["run", "relu.onnx", "--input", f],
        "run-expect": lambda f: ["run", "relu.onnx", "--expect", f],
        "run-ort-lib": lambda f: ["run", "relu.onnx", "--backend", "ort", "--ort-lib", f],
        "axioms-check": lambda f: ["axioms", "check", f],
        "db": lambda f: ["--db", f, "stats"],
    }
    out = []
    for rname, argv in readers.items():
        for fname, prep in hostile_files(secret):
            if rname == "axioms-check" and fname not in ("symlink-to-secret", "fifo", "dev-zero", "missing", "empty", "random-bytes"):
                continue
            # Every hostile file is refused (a directory of axioms is the
            # one legitimate directory input). A symbolic link the user
            # names is the user's choice: reading through it is no outside
            # read, though what it reads must still be refused as garbage.
            refuse = not (rname == "axioms-check" and fname == "directory" or rname == "compare" and fname == "empty")
            out.append(Case("input", f"{rname} {fname}", argv, refuse=refuse, prep=prep, trace=True,
                            names_secret=fname == "symlink-to-secret"))
    # A model's external weight behind a symlink out of its folder.
    for cmd in (["run", "h3/m.onnx"], ["optimize", "h3/m.onnx", "--rules", "v1.json", "-o", "o.onnx", "--timeout", "3s"],
                ["plan", "h3/m.onnx", "--machine", "cpu"], ["run", "h3/m.onnx", "--weights", "file"]):
        out.append(Case("input", "external-symlink " + cmd[0] + " " + " ".join(cmd[2:3]), lambda f, c=cmd: c,
                        refuse=True, trace=True, outputs={"o.onnx", "o.json"}))
    return out


def output_cases():
    """Every command that writes a file, told to write over an input."""
    # Each writer with the targets that are its own inputs: those, and a
    # device, a folder or a FIFO, must be refused; another file the user
    # names as the output is the user's to replace.
    db = ("the-db", "the-db-wal", "symlink-to-db", "hardlink-to-db")
    model = ("the-model", "symlink-to-model", "hardlink-to-model")
    bundle = ("the-bundle", "hardlink-to-bundle")
    writers = {
        "export-o": (lambda f: ["export", "--version", "v1", "--format", "json", "-o", f], db),
        "optimize-o": (lambda f: ["optimize", "relu.onnx", "--rules", "v1.json", "--timeout", "3s", "-o", f], db + model + bundle),
        "optimize-report": (lambda f: ["optimize", "relu.onnx", "--rules", "v1.json", "--timeout", "3s", "-o", "fresh.onnx", "--report", f], db + model + bundle),
        "plan-o": (lambda f: ["plan", "relu.onnx", "--machine", "cpu", "--batch", "2", "-o", f], model),
        "show-svg": (lambda f: ["show", "1", "--svg", f], db),
    }
    targets = {
        "the-db": lambda w: "rb.db", "the-db-wal": lambda w: _touch(w, "rb.db-wal"), "the-model": lambda w: "relu.onnx",
        "the-bundle": lambda w: "v1.json", "symlink-to-model": lambda w: _link(w, "relu.onnx", "l.onnx", False),
        "hardlink-to-model": lambda w: _link(w, "relu.onnx", "h.onnx", True),
        "symlink-to-db": lambda w: _link(w, "rb.db", "l.db", False), "hardlink-to-db": lambda w: _link(w, "rb.db", "h.db", True),
        "hardlink-to-bundle": lambda w: _link(w, "v1.json", "h.json", True),
        "dev-full": lambda w: "/dev/full", "directory": lambda w: ".", "fifo": lambda w: _fifo(w, "out.fifo"),
    }
    special = ("dev-full", "directory", "fifo")
    out = []
    for wname, (argv, inputs) in writers.items():
        for tname, prep in targets.items():
            refuse = tname in inputs or tname in special
            out.append(Case("output", f"{wname} {tname}", argv, refuse=refuse, prep=prep,
                            outputs=set() if refuse else {"fresh.onnx", "fresh.json", "rb.db", "rb.db-wal", "rb.db-shm"} | {prep_name(tname)}))
    # Derived names: plan -o x.json writes x.sharded.onnx beside it.
    out.append(Case("output", "plan derived name equals model", lambda f: ["plan", "x.sharded.onnx", "--machine", "cpu", "-o", "x.json"],
                    refuse=True, prep=lambda w: _copy(w, "relu.onnx", "x.sharded.onnx")))
    out.append(Case("output", "optimize report equals rules bundle", lambda f: ["optimize", "relu.onnx", "--rules", "v1.json", "--timeout", "3s", "-o", "fresh.onnx", "--report", "v1.json"], refuse=True, outputs={"fresh.onnx"}))
    # Lost output: a closed or full standard output.
    for name, argv in (("export", ["export", "--version", "v1", "--format", "sexpr"]), ("list", ["list"]),
                       ("run", ["run", "relu.onnx"]), ("stats", ["stats"]), ("versions", ["versions"]),
                       ("plan", ["plan", "mlp", "--machine", "cpu", "--batch", "64"]), ("ops", ["ops"]), ("why", ["why", "1"])):
        out.append(Case("output", f"{name} stdout=/dev/full", lambda f, a=argv: a, refuse=True, stdout="full"))
        out.append(Case("output", f"{name} stdout closed", lambda f, a=argv: a, refuse=True, stdout="closed"))
    return out


def prep_name(tname):
    """The file an output target names, which a case may then replace."""
    return {"the-model": "relu.onnx", "the-bundle": "v1.json", "symlink-to-model": "relu.onnx", "hardlink-to-model": "relu.onnx",
            "hardlink-to-bundle": "v1.json"}.get(tname, "")


def _touch(w, name):
    open(os.path.join(w, name), "ab").close()
    return name


def _link(w, src, dst, hard):
    (os.link if hard else os.symlink)(os.path.join(w, src) if hard else src, os.path.join(w, dst))
    return dst


def _fifo(w, name):
    os.mkfifo(os.path.join(w, name))
    return name


def _copy(w, src, dst):
    shutil.copy(os.path.join(w, src), os.path.join(w, dst))
    return dst


def size_cases(machine):
    """Sizes a file or flag declares, far past memory, and numbers that
    are not finite and positive."""
    out = []
    for m in ("bomb_constantofshape", "bomb_input", "bomb_input_rank", "bomb_external", "bomb_expand", "bomb_tile",
              "neg_dim", "huge_dim", "conv_stride0", "reshape_two_minus", "concat_axis7", "cycle", "unknown_op"):
        for cmd in (["run", m + ".onnx"], ["optimize", m + ".onnx", "--rules", "v1.json", "-o", "o.onnx", "--timeout", "3s"],
                    ["plan", m + ".onnx", "--machine", "cpu"], ["bench-ops", m + ".onnx"]):
            out.append(Case("size", f"{cmd[0]} {m}", lambda f, c=cmd: c, refuse=True, outputs={"o.onnx", "o.json"}))
    for v in ("N=1073741824", "N=9223372036854775807", "N=-1", "N=0", "x=1"):
        out.append(Case("size", f"run --dim {v}", lambda f, v=v: ["run", "relu.onnx", "--dim", v], refuse=True))
    for flag, vals in (("--repeat", ["-1", "9223372036854775807"]), ("--threads", ["-1", "1000000"])):
        for v in vals:
            out.append(Case("size", f"run {flag} {v}", lambda f, fl=flag, v=v: ["run", "relu.onnx", fl, v], refuse=True, deadline=10))
    for deg in ("9", "64", "100", "1024", "4096"):
        text = f"(combine 1 {deg} (partition 1 {deg} ?a)) => ?a\n"
        out.append(Case("size", f"compare rule at degree {deg}",
                        lambda f: ["compare", "--version", "v1", "--format", "sexpr", "--no-progress", "r.sexpr"],
                        prep=lambda w, t=text: _write(w, "r.sexpr", t)))
    for deg in (7, 9, 16, 64):
        out.append(Case("size", f"compare FlexFlow rules at degree {deg}",
                        lambda f: ["compare", "--version", "v1", "--format", "flexflow-json", "--no-progress", "ffd.json"],
                        prep=lambda w, d=deg: _flexflow_at(w, d), deadline=60))
    for ext in ("4096x4096x4096", "1099511627776x2", "65536x65536x2"):
        text = f"(relu (relu ?a)) => (relu ?a) ; ?a:{ext}\n"
        out.append(Case("size", f"import+verify extent {ext}", lambda f: ["import", "--format", "sexpr", "r.sexpr"],
                        prep=lambda w, t=text: _write(w, "r.sexpr", t), outputs={"rb.db", "rb.db-wal", "rb.db-shm"}))
    for argv in (["generate", "--ops", "parallel", "--degrees", "1024", "--max-ops", "1"],
                 ["build", "--ops", "parallel", "--degrees", "64", "--max-ops", "2", "--tag", "big"],
                 ["generate", "--workers", "1000000", "--max-ops", "1"], ["generate", "--max-ops", "1000"],
                 ["generate", "--degrees", "0", "--ops", "parallel", "--max-ops", "1"],
                 ["generate", "--degrees", "-3", "--ops", "parallel", "--max-ops", "1"],
                 ["verify", "--budget", "18446744073709551615"], ["verify", "--workers", "1000000"],
                 ["compare", "--version", "v1", "--workers", "1000000", "v1.sexpr"], ["compare", "--version", "v1", "--steps", "1000000000", "v1.sexpr"]):
        out.append(Case("size", " ".join(argv[:5]), lambda f, a=argv: a, sigint=8, outputs={"rb.db", "rb.db-wal", "rb.db-shm"}))
    for flag, vals in (("--batch", ["4611686018427387904", "-1", "0x"]), ("--microbatches", ["9223372036854775807", "-5"]),
                       ("--memory-limit", ["NaN", "Inf", "-1", "1e-300"])):
        for v in vals:
            out.append(Case("size", f"plan bert-large {flag} {v}", lambda f, fl=flag, v=v: ["plan", "bert-large", "--machine", "summit:1", fl, v], refuse=True))
    fields = [("nodes",), ("devices_per_node",), ("device", "peak_flops"), ("device", "memory_bandwidth"), ("device", "memory_bytes"),
              ("intra_node", "bandwidth"), ("intra_node", "latency"), ("inter_node", "bandwidth"), ("inter_node", "latency")]
    for path in fields:
        for v in (0, -1, 1e-300, 1e300, "1e999", 2 ** 62, 2 ** 31, "\"x\"", None):
            if v == 2 ** 31 and len(path) > 1:
                continue
            numeric = len(path) > 1
            # A latency may be 0 (an ideal link) or tiny; a missing field
            # (null) reads as 0.
            latency_ok = path[-1] == "latency" and v in (0, 1e-300, None)
            out.append(Case("size", f"machine {'.'.join(path)}={v}", lambda f: ["plan", "mlp", "--machine", "hm.json", "--batch", "64"],
                            refuse=not (numeric and v == 1e300 or latency_ok),
                            prep=lambda w, p=path, v=v: _machine(w, machine, p, v), sigint=10))
    return out


def _flexflow_at(w, degree):
    """The first six parallel rules of FlexFlow's file, at another degree."""
    f = json.load(open(os.path.join(w, "ff.json")))
    picked = [r for r in f["rule"] if "PM_PARALLEL_DEGREE" in json.dumps(r)][:6]
    text = json.dumps(dict(f, rule=picked)).replace('"key": "PM_PARALLEL_DEGREE", "value": 2', f'"key": "PM_PARALLEL_DEGREE", "value": {degree}')
    return _write(w, "ffd.json", text)


def _write(w, name, text):
    with open(os.path.join(w, name), "w") as f:
        f.write(text)
    return name


def _machine(w, machine, path, v):
    m = json.loads(json.dumps(machine))
    obj = m
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = "__V__"
    text = json.dumps(m).replace('"__V__"', "null" if v is None else str(v))
    return _write(w, "hm.json", text)


def pin_cases(rb):
    """Tags that read as hashes, re-releases, forged proofs, tampered
    bundles."""
    out = []
    def tag_case(tag):
        return Case("pins", f"release tag {tag[:20]}", lambda f: ["release", tag], refuse=True, outputs={"rb.db", "rb.db-wal", "rb.db-shm"})
    for tag in ("1e27", "abcd", "ABCD", "deadbeef", "0000", "0" * 64, "{hash}", "{hash4}", "{hash12}"):
        c = tag_case(tag)
        if "{" in tag:
            c.args = lambda f, t=tag: ["release", _fill(t)]
        out.append(c)
    # The same rules again may be refused, or become an alias that names
    # the version they already are.
    out.append(Case("pins", "re-release of v1's rules as v2", lambda f: ["release", "v2"], outputs={"rb.db", "rb.db-wal", "rb.db-shm"},
                    check=lambda w, res: [] if res["rc"] != 0 or "v1" in res["out"] + res["err"] else [("wrong", "re-released without naming v1")]))
    # Forged proofs: a refuted rule, or an imported false one never
    # proved, set to proved with the documented claim recomputed, then
    # released; and a bundle with a rule changed and its hash recomputed.
    for kind in ("refuted", "refuted-latest-only", "imported-false", "imported-false-no-proof-row"):
        out.append(Case("pins", f"forge {kind} -> proved, release", lambda f: ["release", "forged"],
                        prep=lambda w, k=kind: _forge(w, k), outputs={"rb.db", "rb.db-wal", "rb.db-shm"},
                        check=_no_forged_released))
    for how in ("change-rule", "change-rule-rehash", "add-false-rule-rehash", "drop-rule-rehash", "swap-sides-rehash", "rename-input-rehash"):
        # A dropped rule leaves proved rules only: it may load.
        out.append(Case("pins", f"bundle {how}", lambda f: ["optimize", "relu.onnx", "--rules", "t.json", "-o", "o.onnx", "--timeout", "3s"],
                        refuse=not how.startswith("drop"), prep=lambda w, h=how: _tamper(w, h), outputs={"o.onnx", "o.json"}))
    return out


_HASH = {}
# Commands that record their work in the database when they succeed.
DB_WRITERS = {"optimize", "release", "import", "generate", "verify", "build", "prune", "bench-ops", "compare"}
_RB = []


def _fill(t):
    h = _HASH["v1"]
    return {"{hash}": h, "{hash4}": h[:4], "{hash12}": h[:12]}[t]


FALSE_RULE = "(relu (ewadd ?a ?b)) => (ewadd (relu ?a) (relu ?b))"


def _claim(text, inputs, constants, axiom_set, solver, budget, status):
    t = (f"rulebook proof 1\nrule {text}\ninputs {inputs}\nconstants {constants}\n"
         f"axiom set {axiom_set}\nsolver {solver}\nbudget {budget}\nstatus {status}\n")
    return hashlib.sha256(t.encode()).hexdigest()


def _forge(w, kind):
    """Forges a proof exactly as a user with sqlite3 and the documented
    claim could: the rule's status and its latest proof set to proved, the
    claim recomputed."""
    if kind.startswith("imported-false"):
        _write(w, "false.sexpr", f"{FALSE_RULE} ; ?a:4x4 ?b:4x4\n")
        subprocess.run([_RB[0], "--db", "rb.db", "import", "--format", "sexpr", "false.sexpr"], cwd=w, check=True, capture_output=True)
    db = sqlite3.connect(os.path.join(w, "rb.db"))
    if kind.startswith("refuted"):
        row = db.execute("SELECT id FROM rules WHERE status = 'refuted' ORDER BY id LIMIT 1").fetchone()
    else:
        # The import's one rule, stored oriented and canonical: the newest.
        row = db.execute("SELECT id FROM rules ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        db.close()
        return "skip"
    rid = row[0]
    r = db.execute("SELECT src, dst, inputs, constants, cond FROM rules WHERE id = ?", (rid,)).fetchone()
    text = r[0] + " => " + r[1] + (" if " + r[4] if r[4] else "")
    a = db.execute("SELECT axiom_set, solver, budget FROM proofs ORDER BY id DESC LIMIT 1").fetchone()
    claim = _claim(text, r[2], r[3] or "", a[0], a[1], a[2], "proved")
    db.execute("UPDATE rules SET status = 'proved' WHERE id = ?", (rid,))
    p = db.execute("SELECT id FROM proofs WHERE rule_id = ? ORDER BY id DESC LIMIT 1", (rid,)).fetchone()
    if p and kind != "imported-false-no-proof-row":
        db.execute("UPDATE proofs SET status = 'proved', reason = '', claim = ? WHERE id = ?", (claim, p[0]))
    else:
        cols = [c[1] for c in db.execute("PRAGMA table_info(proofs)")]
        src = db.execute("SELECT * FROM proofs ORDER BY id DESC LIMIT 1").fetchone()
        vals = dict(zip(cols, src))
        vals.update(id=None, rule_id=rid, status="proved", reason="", claim=claim)
        db.execute(f"INSERT INTO proofs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [vals[c] for c in cols])
    db.commit()
    db.close()
    _write(w, "forged.id", str(rid))
    return None


def _no_forged_released(w, res):
    p = os.path.join(w, "forged.id")
    if not os.path.exists(p):
        return []
    rid = int(open(p).read())
    db = sqlite3.connect(os.path.join(w, "rb.db"))
    rows = db.execute("SELECT 1 FROM version_rules vr JOIN versions v ON v.id = vr.version_id "
                      "WHERE vr.rule_id = ? AND v.tag = 'forged'", (rid,)).fetchall()
    db.close()
    return [("unproved", f"forged rule {rid} released")] if rows else []


def _content_hash(rules):
    texts = sorted(r["src"] + " => " + r["dst"] + (" if " + r["cond"] if r.get("cond") else "") for r in rules)
    return hashlib.sha256("".join(t + "\n" for t in texts).encode()).hexdigest()


def _tamper(w, how):
    """A bundle changed by hand, its hash recomputed where the name says."""
    b = json.load(open(os.path.join(w, "v1.json")))
    rules = b["rules"]
    if how.startswith("change-rule"):
        rules[0]["dst"] = "(relu " + rules[0]["dst"] + ")"
    elif how.startswith("add-false-rule"):
        rules.append({"src": "(relu (ewadd ?a ?b))", "dst": "(ewadd (relu ?a) (relu ?b))", "inputs": "?a:4x4 ?b:4x4"})
    elif how.startswith("drop-rule"):
        rules.pop()
    elif how.startswith("swap-sides"):
        rules[0]["src"], rules[0]["dst"] = rules[0]["dst"], rules[0]["src"]
    elif how.startswith("rename-input"):
        rules[0]["dst"] = rules[0]["dst"].replace("?a", "?z", 1)
    if how.endswith("rehash"):
        b["hash"] = _content_hash(rules)
    return _write(w, "t.json", json.dumps(b, indent=2))


def signal_cases():
    """Long work interrupted with SIGINT at a few moments: it must stop
    within 2 s and leave the database whole."""
    out = []
    long = {
        "build": ["build", "--max-ops", "3", "--tag", "b", "--db", "big.db"],
        "generate": ["generate", "--max-ops", "3", "--db", "big.db"],
        "generate-parallel": ["generate", "--ops", "parallel", "--degrees", "2,3", "--max-ops", "3", "--db", "big.db"],
        "verify": ["verify"],
        "axioms-check": ["axioms", "check"],
        "compare-ff": ["compare", "--version", "v1", "--no-progress", "ff.json"],
        "import-ff": ["import", "--format", "flexflow-json", "ff.json"],
        "optimize": ["optimize", "mm.onnx", "--rules", "v1.json", "--cost", "measured", "-o", "o.onnx", "--compare", "50"],
        "plan-grid": ["plan", "bert-large", "--machine", "summit:64", "--batch", "4096"],
        "run-repeat": ["run", "mm.onnx", "--repeat", "100000000"],
        "bench-ops": ["bench-ops", "mm.onnx"],
    }
    for name, argv in long.items():
        for t in (0.3, 1.0, 3.0):
            out.append(Case("signal", f"{name} SIGINT at {t}s", lambda f, a=argv: a, sigint=t,
                            outputs={"rb.db", "rb.db-wal", "rb.db-shm", "big.db", "big.db-wal", "big.db-shm", "o.onnx", "o.json"},
                            check=_db_whole))
    # Stdin that never ends, a FIFO with no writer.
    for argv in (["run", "relu.onnx", "--input", "in.fifo"], ["plan", "mlp", "--machine", "in.fifo", "--batch", "64"],
                 ["import", "--format", "json", "in.fifo"], ["axioms", "check", "in.fifo"]):
        out.append(Case("signal", f"{argv[0]} fifo SIGINT", lambda f, a=argv: a, sigint=1.0, prep=lambda w: _fifo(w, "in.fifo")))
    return out


def _db_whole(w, res):
    bad = []
    for name in ("rb.db", "big.db"):
        p = os.path.join(w, name)
        if os.path.exists(p):
            r = subprocess.run(["sqlite3", p, "PRAGMA integrity_check;"], capture_output=True, text=True)
            if r.stdout.strip() != "ok":
                bad.append(("data loss", f"{name}: {r.stdout.strip()[:80]} {r.stderr.strip()[:80]}"))
    return bad


def escape_cases():
    """Names from input files printed to the terminal."""
    out = []
    esc = "\x1b[31mred\r\x1b[2J"
    ff = {"rules": [{"name": esc, "srcOp": [], "dstOp": [], "mappedOutput": []}]}
    out.append(Case("escape", "flexflow rule name", lambda f: ["compare", "--version", "v1", "--no-progress", "--format", "flexflow-json", "e.json"],
                    prep=lambda w: _write(w, "e.json", json.dumps(ff)), check=_no_raw_escape))
    out.append(Case("escape", "flexflow import name", lambda f: ["import", "--format", "flexflow-json", "e.json"],
                    prep=lambda w: _write(w, "e.json", json.dumps(ff)), check=_no_raw_escape, outputs={"rb.db", "rb.db-wal", "rb.db-shm"}))
    out.append(Case("escape", "machine name", lambda f: ["plan", "mlp", "--machine", "e.json", "--batch", "64"],
                    prep=lambda w: _write(w, "e.json", open(os.path.join(w, "machine.json")).read().replace('"name": "m"', '"name": ' + json.dumps(esc))),
                    check=_no_raw_escape))
    out.append(Case("escape", "model file name", lambda f: ["run", esc + ".onnx"],
                    prep=lambda w: _copy(w, "relu.onnx", esc + ".onnx"), check=_no_raw_escape))
    out.append(Case("escape", "tag name", lambda f: ["release", esc], check=_no_raw_escape, outputs={"rb.db", "rb.db-wal", "rb.db-shm"}))
    out.append(Case("escape", "version arg", lambda f: ["export", "--version", esc], check=_no_raw_escape))
    return out


def _no_raw_escape(w, res):
    if "\x1b" in res["out"] or "\x1b" in res["err"] or "\r" in res["out"] or "\r" in res["err"]:
        return [("wrong", "a raw terminal escape reached the terminal")]
    return []


def all_cases(rb, secret, machine):
    return reader_cases(secret) + output_cases() + size_cases(machine) + pin_cases(rb) + signal_cases() + escape_cases()


# ----------------------------------------------------------------- running

def snapshot(w):
    out = {}
    for dirpath, dirs, files in os.walk(w):
        for n in files:
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    if st.st_size > (256 << 20):
                        h.update(str(st.st_size).encode())
                    else:
                        h.update(f.read())
                out[os.path.relpath(p, w)] = h.hexdigest()
    return out


def limit():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    os.setsid()


def run_case(rb, base, secret, c, i, root):
    w = os.path.join(root, f"case{i:04d}")
    shutil.copytree(base, w, symlinks=True)
    named = None
    if c.prep:
        named = c.prep(w)
        if named == "skip":
            shutil.rmtree(w, ignore_errors=True)
            return {"verdicts": [], "skipped": True}
    args = c.args(named)
    if "--db" not in args:
        args = ["--db", "rb.db"] + args
    before = snapshot(w)
    trace = os.path.join(root, f"trace{i:04d}")
    cmd = [rb] + args
    if c.trace:
        cmd = ["strace", "-f", "-qq", "-y", "-e", "trace=read,pread64,readv,mmap", "-o", trace] + cmd
    stdout = subprocess.PIPE
    fullf = None
    if c.stdout == "full":
        fullf = open("/dev/full", "w")
        stdout = fullf
    elif c.stdout == "closed":
        stdout = subprocess.DEVNULL
    env = dict(os.environ, NO_COLOR="1", RULEBOOK_DB="rb.db")
    start = time.monotonic()
    pass_fds = ()
    if c.stdout == "closed":
        # Close fd 1 in the child: a shell does it best.
        cmd = ["bash", "-c", 'exec "$@" >&-', "_"] + cmd
        stdout = None
    p = subprocess.Popen(cmd, cwd=w, stdin=subprocess.DEVNULL, stdout=stdout if stdout is not None else None,
                         stderr=subprocess.PIPE, preexec_fn=limit, env=env)
    verdicts = []
    wait = c.sigint if c.sigint is not None else c.deadline
    try:
        out, err = p.communicate(timeout=wait)
        sent = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
        sent = True
        try:
            out, err = p.communicate(timeout=GRACE + (3 if c.trace else 0))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            verdicts.append(("hang", f"still running {GRACE:.0f} s after SIGINT"))
    elapsed = time.monotonic() - start
    if fullf:
        fullf.close()
    out = (out or b"").decode("utf-8", "replace")
    err = (err or b"").decode("utf-8", "replace")
    rc = p.returncode
    res = {"rc": rc, "out": out, "err": err, "elapsed": elapsed, "sigint": sent}
    text = out + err
    if re.search(r"^panic: |^fatal error: |goroutine \d+ \[running\]|SIGSEGV|SIGBUS|out of memory|cannot allocate memory", text, re.M):
        verdicts.append(("crash", _first_line(err) or _first_line(out)))
    elif rc is not None and rc < 0 and -rc not in (signal.SIGINT,) and not any(v[0] == "hang" for v in verdicts):
        verdicts.append(("crash", f"killed by signal {-rc}"))
    if MARKER in text and not c.names_secret:
        verdicts.append(("outside", "the secret's marker was printed"))
    after = snapshot(w)
    for name, h in after.items():
        if name not in before and not c.names_secret and MARKER.encode() in open(os.path.join(w, name), "rb").read(1 << 20):
            verdicts.append(("outside", f"the secret's marker was written to {name}"))
    writes_db = rc == 0 and _command(args) in DB_WRITERS
    for name, h in before.items():
        if name in c.outputs or name == named or writes_db and re.fullmatch(r"rb\.db(-wal|-shm)?", name):
            continue
        if after.get(name) != h:
            verdicts.append(("data loss", f"{name} {'changed' if name in after else 'vanished'}"))
    if rc != 0:
        for name in after:
            if name not in before and re.search(r"\.db-(wal|shm|journal)$", name):
                verdicts.append(("data loss", f"a refused command left {name}"))
    if c.trace and c.names_secret and os.path.exists(trace):
        os.remove(trace)
    if c.trace and os.path.exists(trace):
        for line in open(trace, errors="replace"):
            if "<" + os.path.realpath(secret) + ">" in line and not line.split("(")[0].strip().endswith("mmap"):
                verdicts.append(("outside", "read(2) of the secret: " + line.strip()[:100]))
                break
        os.remove(trace)
    if c.refuse and rc == 0 and not sent:
        verdicts.append(("wrong", "exited 0; it must be refused"))
    if c.check:
        verdicts.extend(c.check(w, res))
    shutil.rmtree(w, ignore_errors=True)
    res["verdicts"] = verdicts
    return res


def _command(args):
    """The subcommand of an argument list: the first word that is not a
    flag or a flag's value."""
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == "--db":
            skip = True
        elif not a.startswith("-"):
            return a
    return ""


def _first_line(s):
    for line in s.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", default="/tmp/rulebook-hostile")
    ap.add_argument("--only", default="")
    ap.add_argument("--match", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="reuse the fixture of an earlier run in --work")
    ap.add_argument("--report", default="")
    a = ap.parse_args()
    rb = os.path.abspath(a.bin)
    _RB.append(rb)
    if a.list:
        cases = all_cases(rb, "/secret", {})
        for c in cases:
            print(f"{c.cls}\t{c.name}")
        print(len(cases), "cases")
        return
    base, secret, machine = setup(rb, a.shared, a.work, a.reuse)
    hv = subprocess.run([rb, "--db", "rb.db", "versions"], cwd=base, capture_output=True, text=True).stdout
    m = re.search(r"\b([0-9a-f]{64})\b", hv)
    if not m:
        hv = subprocess.run(["sqlite3", os.path.join(base, "rb.db"), "SELECT hash FROM versions WHERE tag='v1'"], capture_output=True, text=True).stdout
        m = re.search(r"([0-9a-f]{64})", hv)
    _HASH["v1"] = m.group(1) if m else "0" * 64
    cases = [c for c in all_cases(rb, secret, machine) if (not a.only or c.cls == a.only) and a.match in c.name]
    table, bad = {}, []
    for i, c in enumerate(cases):
        res = run_case(rb, base, secret, c, i, a.work)
        if res.get("skipped"):
            continue
        row = table.setdefault(c.cls, {"cases": 0, "clean": 0, "crash": 0, "hang": 0, "data loss": 0, "outside": 0, "unproved": 0, "wrong": 0})
        row["cases"] += 1
        kinds = {k for k, _ in res["verdicts"]}
        if not kinds:
            row["clean"] += 1
        for k in kinds:
            row[k] += 1
        for k, why in res["verdicts"]:
            bad.append((c.cls, c.name, k, why, res["rc"], _first_line(res["err"])))
        mark = "ok " if not kinds else "BAD"
        print(f"{mark} {i:4d} {c.cls:7s} {res['elapsed']:5.1f}s rc={res['rc']} {c.name!r} {sorted(kinds) or ''} {_first_line(res['err'])[:100]!r}", flush=True)
    lines = ["| class | cases | clean | crash | hang | data loss | outside reads | unproved released | wrong |", "|---|---|---|---|---|---|---|---|---|"]
    total = {}
    for cls, r in table.items():
        lines.append(f"| {cls} | " + " | ".join(str(r[k]) for k in ("cases", "clean", "crash", "hang", "data loss", "outside", "unproved", "wrong")) + " |")
        for k, v in r.items():
            total[k] = total.get(k, 0) + v
    if total:
        lines.append("| **all** | " + " | ".join(str(total[k]) for k in ("cases", "clean", "crash", "hang", "data loss", "outside", "unproved", "wrong")) + " |")
    report = "\n".join(lines) + "\n\n" + "\n".join(f"- {c} `{n!r}`: {k}: {w} (rc {rc}; {e!r})" for c, n, k, w, rc, e in bad) + "\n"
    print(report)
    if a.report:
        with open(a.report, "w") as f:
            f.write(report)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
