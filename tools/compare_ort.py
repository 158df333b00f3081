#!/usr/bin/python3
"""Runs one model through `nxrt run` and ORT's `ort run` on the same seeded inputs and compares every
output (|nxrt - ort| <= atol + rtol * |ort|). Exit 0 when all outputs match.

  compare_ort.py --nxrt build/nxrt --ort ORT_DIR/ort MODEL.onnx [--shape NAME=D1,D2,...]...
                 [--value NAME=V]... [--low L --high H] [--seed S] [--rtol R] [--atol A]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

NP = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
      11: np.float64}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ort", required=True)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--value", action="append", default=[])
    ap.add_argument("--low", type=float, default=-1.0)
    ap.add_argument("--high", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    shapes = {k: [int(x) for x in v.split(",") if x != ""] for k, v in (s.split("=", 1) for s in a.shape)}
    values = dict(s.split("=", 1) for s in a.value)
    m = onnx.load(a.model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(a.seed)
    work = tempfile.mkdtemp(prefix="nxrt_cmp_")
    files = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dt = NP[tt.elem_type]
        if vi.name in shapes:
            shape = shapes[vi.name]
        else:
            shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        if vi.name in values:
            arr = np.full(shape, float(values[vi.name])).astype(dt)
        elif np.issubdtype(dt, np.floating):
            arr = rng.uniform(a.low, a.high, shape).astype(dt)
        elif dt == np.bool_:
            arr = rng.integers(0, 2, shape).astype(dt)
        else:
            arr = rng.integers(0, 10, shape).astype(dt)
        f = os.path.join(work, f"input_{len(files)}.pb")
        with open(f, "wb") as fh:
            fh.write(numpy_helper.from_array(arr, vi.name).SerializeToString())
        files.append(f)
    outs = {}
    for name, exe in (("nxrt", a.nxrt), ("ort", a.ort)):
        d = os.path.join(work, name)
        cmd = [exe, "run", a.model, "--output-dir", d, "--threads", str(a.threads)]
        for f in files:
            cmd += ["--input", f]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{os.path.basename(a.model)}: {name} failed: {r.stderr.strip()}")
            return 1
        outs[name] = d
    ok = True
    for k, o in enumerate(m.graph.output):
        t = [numpy_helper.to_array(onnx.load_tensor(os.path.join(outs[n], f"output_{k}.pb"))) for n in ("nxrt", "ort")]
        got, want = t[0].astype(np.float64), t[1].astype(np.float64)
        if got.shape != want.shape:
            print(f"  output {k} '{o.name}': shape {got.shape} vs ORT {want.shape}")
            ok = False
            continue
        diff = np.abs(got - want)
        bad = diff > a.atol + a.rtol * np.abs(want)
        status = "ok" if not bad.any() else f"MISMATCH ({int(bad.sum())} of {bad.size})"
        print(f"  output {k} '{o.name}' {list(got.shape)}: max abs diff {diff.max() if diff.size else 0:.3g} {status}")
        ok &= not bad.any()
    print(f"{os.path.basename(a.model)}: {'match' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
