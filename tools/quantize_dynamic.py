#!/usr/bin/python3
"""Rewrites a float32 model's MatMuls with constant 2-D weights the way onnxruntime's quantize_dynamic
writes them (QOperator form): the weights as int8 (symmetric, per tensor or per output column), each
activation quantized once at run time by DynamicQuantizeLinear (shared by the MatMuls that read it),
then MatMulInteger, Cast to float and a Mul by the product of the two scales. A benchmark and test
input for dynamically quantized models (a BERT encoder from tools/make_bert_encoder.py, say).

    tools/quantize_dynamic.py IN_DIR_OR_MODEL OUT_DIR [--per-channel]

IN_DIR_OR_MODEL: a model.onnx, or a folder with model.onnx and test_data_set_*/ (copied as they are;
expected outputs are dropped: quantization moves the outputs).
"""
import argparse
import glob
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def quantize(model, per_channel):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    nodes, new_inits = [], []
    quantized_input = {}  # activation -> (q, scale, zero point) names
    count = 0
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" and len(n.input) == 2 else None
        if w is None or w.data_type != TensorProto.FLOAT or len(w.dims) != 2:
            nodes.append(n)
            continue
        W = numpy_helper.to_array(w).astype(np.float32)
        amax = np.abs(W).max(axis=0) if per_channel else np.array(np.abs(W).max(), np.float32)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        Wq = np.clip(np.round(W / scale), -127, 127).astype(np.int8)
        p = f"{n.output[0]}_dq{count}"
        count += 1
        x = n.input[0]
        if x not in quantized_input:
            q = (f"{x}_quantized", f"{x}_scale", f"{x}_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(q), name=f"{x}_DynamicQuantizeLinear"))
            quantized_input[x] = q
        xq, xs, xz = quantized_input[x]
        new_inits += [numpy_helper.from_array(Wq, p + "_W_quantized"),
                      numpy_helper.from_array(scale, p + "_W_scale"),
                      numpy_helper.from_array(np.zeros(scale.shape, np.int8), p + "_W_zero_point")]
        nodes += [helper.make_node("MatMulInteger", [xq, p + "_W_quantized", xz, p + "_W_zero_point"], [p + "_int32"]),
                  helper.make_node("Cast", [p + "_int32"], [p + "_float"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [xs, p + "_W_scale"], [p + "_scale"]),
                  helper.make_node("Mul", [p + "_float", p + "_scale"], [n.output[0]])]
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    used = {i for nd in g.node for i in nd.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 11 for o in model.opset_import):
        raise SystemExit("quantize_dynamic: the model's ai.onnx opset must be 11 or newer (DynamicQuantizeLinear)")
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--per-channel", action="store_true", help="one weight scale per output column")
    a = ap.parse_args()
    src_model = a.src if a.src.endswith(".onnx") else os.path.join(a.src, "model.onnx")
    m = onnx.load(src_model)
    n = quantize(m, a.per_channel)
    os.makedirs(a.out, exist_ok=True)
    onnx.save(m, os.path.join(a.out, "model.onnx"))
    if not a.src.endswith(".onnx"):
        for case in sorted(glob.glob(os.path.join(a.src, "test_data_set_*"))):
            dst = os.path.join(a.out, os.path.basename(case))
            os.makedirs(dst, exist_ok=True)
            for f in sorted(glob.glob(os.path.join(case, "input_*.pb"))):
                shutil.copy(f, dst)
    print(f"quantize_dynamic: {n} MatMuls quantized")
    return 0


if __name__ == "__main__":
    sys.exit(main())
