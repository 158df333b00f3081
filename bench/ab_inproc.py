#!/usr/bin/python3
"""A/B of two kernel choices on one model inside one process, for machines whose speed drifts.

    PYTHONPATH=build/python bench/ab_inproc.py MODEL_DIR --a ENV=VALUE[;ENV=VALUE] --b ENV=VALUE[;...]
                                               [--threads 2] [--runs 200] [--warmup 3]

Why: on a shared VM the same binary's run time moves 15-80% from minute to minute, so two processes run
one after the other (even alternated for several rounds) often disagree by more than the change being
measured. Here both variants live in one process and their runs alternate (A B, B A, A B, ...), so a slow
stretch of the machine slows both alike; the paired ratio of neighbouring runs cancels it.

Each side's environment assignments (NXRT_KERNEL_OVERRIDES, NXRT_ISA: what kernels read when a session
is created and its variants specialize) are set while that side's session is created and warmed up,
then restored. MODEL_DIR holds model.onnx and test_data_set_0/input_K.pb (K-th file: K-th session input).
Each session has its own thread pool, so between its runs a session's workers may spin briefly while the
other runs: both sides pay it alike.

Prints each side's median and quartiles (ms per run) and the median of the paired B/A ratios with its
quartiles; B/A below 1: B is faster.
"""
import argparse
import contextlib
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

import nxrt


def parse_env(spec):
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(";"))):
        if "=" not in item:
            raise SystemExit(f"ab_inproc: '{item}' is not ENV=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


@contextlib.contextmanager
def environment(assignments):
    saved = {k: os.environ.get(k) for k in assignments}
    os.environ.update(assignments)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_inputs(model_dir, session):
    names = [i.name for i in session.get_inputs()]
    feeds = {}
    for k, name in enumerate(names):
        path = os.path.join(model_dir, "test_data_set_0", f"input_{k}.pb")
        if not os.path.exists(path):
            raise SystemExit(f"ab_inproc: {path} is missing (input '{name}')")
        feeds[name] = numpy_helper.to_array(onnx.load_tensor(path))
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--a", default="", help="side A's ENV=VALUE assignments, ';'-separated ('' = as is)")
    ap.add_argument("--b", default="", help="side B's assignments")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200, help="timed runs per side")
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if args.runs < 2 or args.threads < 1 or args.warmup < 1:
        raise SystemExit("ab_inproc: --runs >= 2, --threads >= 1, --warmup >= 1")

    model = os.path.join(args.model_dir, "model.onnx")
    sides = []
    for label, spec in (("A", args.a), ("B", args.b)):
        with environment(parse_env(spec)):
            so = nxrt.SessionOptions()
            so.intra_op_num_threads = args.threads
            sess = nxrt.InferenceSession(model, so)
            feeds = load_inputs(args.model_dir, sess)
            for _ in range(args.warmup):  # variants specialize on the first run, under this side's env
                sess.run(None, feeds)
        sides.append((label, spec, sess, feeds))

    times = {"A": [], "B": []}
    for i in range(args.runs):
        order = sides if i % 2 == 0 else sides[::-1]
        for label, _, sess, feeds in order:
            t0 = time.perf_counter()
            sess.run(None, feeds)
            times[label].append((time.perf_counter() - t0) * 1e3)
    a, b = np.array(times["A"]), np.array(times["B"])
    ratio = b / a
    print(f"model {args.model_dir}  threads {args.threads}  runs {args.runs} per side, alternated")
    for (label, spec, _, _), t in zip(sides, (a, b)):
        q1, med, q3 = np.percentile(t, [25, 50, 75])
        print(f"  {label} [{spec or 'as is'}]: median {med:.3f} ms (quartiles {q1:.3f} .. {q3:.3f})")
    q1, med, q3 = np.percentile(ratio, [25, 50, 75])
    print(f"  paired B/A: median {med:.3f} (quartiles {q1:.3f} .. {q3:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
