#!/usr/bin/python3
"""What calling nxrt from Python costs on top of the C++ call, on a tiny model (y = x + w, float32[1, 16]).

Each round times BATCH calls of: the C++ Session::run on pre-converted feeds (the anchor, same session,
same process, GIL released), InferenceSession.run (numpy in, numpy out), run_with_ort_values and
run_with_iobinding. Prints the median over ROUNDS of the per-call time, in microseconds, and the CPU.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--rounds 21] [--batch 5000]
"""
import argparse
import statistics
import subprocess
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import nxrt


def tiny_model():
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def per_call_us(fn, batch):
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    return (time.perf_counter() - t0) / batch * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--batch", type=int, default=5000)
    args = ap.parse_args()
    so = nxrt.SessionOptions()
    so.intra_op_num_threads = 1
    sess = nxrt.InferenceSession(tiny_model(), so)
    x = np.ones((1, 16), np.float32)
    feed = {"x": x}
    ov_feed = {"x": nxrt.OrtValue.ortvalue_from_numpy(x)}
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y")
    cases = {
        "C++ Session::run (anchor)": lambda: None,
        "InferenceSession.run": lambda: sess.run(None, feed),
        "run_with_ort_values": lambda: sess.run_with_ort_values(None, ov_feed),
        "run_with_iobinding": lambda: sess.run_with_iobinding(binding),
    }
    times = {name: [] for name in cases}
    for _ in range(args.rounds + 1):  # round 0 warms up
        for name, fn in cases.items():
            if name.startswith("C++"):
                t = sess._sess._cpp_run_seconds(feed, args.batch) / args.batch * 1e6
            else:
                t = per_call_us(fn, args.batch)
            times[name].append(t)
    anchor = statistics.median(times["C++ Session::run (anchor)"][1:])
    print(f"CPU: {cpu_name()}; nxrt {nxrt.__version__}; median of {args.rounds} rounds x {args.batch} calls, 1 thread")
    print("| call | us per call | over the C++ call |")
    print("|---|---:|---:|")
    for name, ts in times.items():
        med = statistics.median(ts[1:])
        extra = "" if name.startswith("C++") else f"+{med - anchor:.2f} us"
        print(f"| {name} | {med:.2f} | {extra} |")


if __name__ == "__main__":
    main()
