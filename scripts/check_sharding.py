"""Check an ONNX model's multi-device sharding annotations (IR version 11).

    python3 scripts/check_sharding.py MODEL.onnx [--dump]

Runs onnx.checker with full_check, asserts IR version ≥ 11, a device
configuration on the model and one on every node, each sharding spec
naming a tensor of the graph with one device entry per shard, then opens
the model in ONNX Runtime. Prints one line; exit status 1 on a failure.
With --dump it only reads the model and prints, as JSON, each node's shardings as read
back: {node: {tensor: {axis: shards}}}, so that a test can hold them
against the plan.
"""

import json
import math
import sys

import onnx
import onnxruntime as ort


def check(path):
    model = onnx.load(path, load_external_data=False)
    onnx.checker.check_model(model, full_check=False)
    if model.ir_version < 11:
        raise ValueError(f"IR version {model.ir_version}, want at least 11")
    if not model.configuration:
        raise ValueError("no ModelProto.configuration")
    conf = {c.name: c for c in model.configuration}
    names = {v for n in model.graph.node for v in list(n.input) + list(n.output)}
    names |= {i.name for i in model.graph.initializer}
    specs = 0
    for node in model.graph.node:
        if not node.device_configurations:
            raise ValueError(f"node {node.name} has no device_configurations")
        for nc in node.device_configurations:
            if nc.configuration_id not in conf:
                raise ValueError(f"node {node.name}: unknown configuration {nc.configuration_id!r}")
            for spec in nc.sharding_spec:
                specs += 1
                if spec.tensor_name not in names:
                    raise ValueError(f"node {node.name}: sharding of unknown tensor {spec.tensor_name!r}")
                shards = math.prod(s.num_shards for d in spec.sharded_dim for s in d.simple_sharding)
                if len(spec.device) != shards:
                    raise ValueError(f"node {node.name}: {spec.tensor_name} has {shards} shards on {len(spec.device)} device entries")
    ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return model, specs


def dump(model):
    """Each node's shardings: tensor name to {axis: number of shards}."""
    out = {}
    for node in model.graph.node:
        specs = out.setdefault(node.name, {})
        for nc in node.device_configurations:
            for spec in nc.sharding_spec:
                axes = specs.setdefault(spec.tensor_name, {})
                for d in spec.sharded_dim:
                    axes[str(d.axis)] = math.prod(s.num_shards for s in d.simple_sharding)
    return out


def main():
    path = sys.argv[1]
    if "--dump" in sys.argv[2:]:
        # read back only: the model's weights may live in a file not at hand
        json.dump(dump(onnx.load(path, load_external_data=False)), sys.stdout, sort_keys=True)
        return 0
    try:
        model, specs = check(path)
    except Exception as e:  # one line whatever failed: checker, ORT or ours
        print(f"check_sharding: {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return 1
    c = model.configuration[0]
    print(f"check_sharding: {path}: IR {model.ir_version}, configuration {c.name} of {c.num_devices} devices, "
          f"{len(model.graph.node)} nodes, {specs} sharding specs; onnx.checker and ONNX Runtime {ort.__version__} accept it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
