#!/usr/bin/python3
"""Writes seeded input_K.pb files for a model, one per graph input that has no initializer default, in
graph order (the ONNX backend-test convention that `nxrt run|bench --input` and `ort run|bench --input`
both follow). The inputs, their dtypes and declared shapes are read from `nxrt info MODEL`.

  make_inputs.py --nxrt build/nxrt MODEL.onnx OUT_DIR [--shape NAME=D1,D2,...]... [--value NAME=V]...
                 [--low L --high H] [--seed S]

A symbolic or unknown dim must be given with --shape (the whole shape of that input); a scalar `[]`
input needs no shape. --value fills an input with one constant (e.g. a sample rate).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
from onnx import numpy_helper

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64, "int32": np.int32,
      "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
      "uint64": np.uint64, "bool": np.bool_}
LINE = re.compile(r"^  (.*): tensor\((\w+)\)(?:\[(.*)\])?( \(has initializer default\))?$")


def model_inputs(nxrt, model):
    """[(name, dtype string, [dim or None])] for inputs without an initializer default."""
    out = subprocess.run([nxrt, "info", model], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"make_inputs: nxrt info {model} failed: {out.stderr.strip()}")
    res, section = [], None
    for line in out.stdout.splitlines():
        if not line.startswith("  "):
            section = line.split(":")[0]
            continue
        if section != "inputs":
            continue
        m = LINE.match(line)
        if not m:
            sys.exit(f"make_inputs: cannot parse input line {line!r} (only tensor inputs are supported)")
        if m.group(4):
            continue
        dims = None
        if m.group(3) is not None:
            dims = [int(d) if re.fullmatch(r"-?\d+", d) and int(d) >= 0 else None
                    for d in (m.group(3).split(",") if m.group(3) else [])]
        res.append((m.group(1), m.group(2), dims))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--value", action="append", default=[])
    ap.add_argument("--low", type=float, default=-1.0)
    ap.add_argument("--high", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    shapes = {k: [int(x) for x in v.split(",") if x != ""] for k, v in (s.split("=", 1) for s in a.shape)}
    values = dict(s.split("=", 1) for s in a.value)
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    for k, (name, dtype, dims) in enumerate(model_inputs(a.nxrt, a.model)):
        if dtype not in NP:
            sys.exit(f"make_inputs: input '{name}' has dtype {dtype}, not supported here")
        if name in shapes:
            shape = shapes.pop(name)
        elif dims is not None and all(d is not None for d in dims):
            shape = dims
        else:
            sys.exit(f"make_inputs: input '{name}' has shape {dims} (symbolic/unknown dims): pass --shape {name}=...")
        if dims is not None and len(dims) != len(shape):
            sys.exit(f"make_inputs: --shape {name} has rank {len(shape)}, the model declares rank {len(dims)}")
        dt = NP[dtype]
        if name in values:
            arr = np.full(shape, float(values[name])).astype(dt)
        elif np.issubdtype(dt, np.floating):
            arr = rng.uniform(a.low, a.high, shape).astype(dt)
        elif dt == np.bool_:
            arr = rng.integers(0, 2, shape).astype(dt)
        else:
            arr = rng.integers(0, 10, shape).astype(dt)
        with open(os.path.join(a.out_dir, f"input_{k}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(arr, name).SerializeToString())
        print(f"  input_{k}.pb: {name} {dtype}{list(arr.shape)}")
    if shapes:
        sys.exit(f"make_inputs: --shape for unknown input(s) {sorted(shapes)}")


if __name__ == "__main__":
    main()
