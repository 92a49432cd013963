#!/usr/bin/python3
"""Median CPU latency of ONNX Runtime on one ONNX model.

A reference for BENCHMARKS.md only: the project never depends on ONNX
Runtime. The model must carry its weights inline; for the shared models,
whose weights rulebook generates, write such a copy first with

    go run ./scripts/embedweights ../shared/models/resnet50.onnx /tmp/resnet50.onnx
    python3 scripts/ort_latency.py /tmp/resnet50.onnx --threads 2 --repeat 20

Inputs are uniform in [-1, 1) (rulebook run's random inputs have the same
range, not the same values: latency does not depend on them). Like
rulebook run, one warm-up run precedes the timed ones; the median is
printed in milliseconds.
"""
import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feed[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    sess.run(None, feed)
    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t)
    print(f"{statistics.median(times) * 1e3:.2f}")


if __name__ == "__main__":
    main()
