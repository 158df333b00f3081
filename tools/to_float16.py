#!/usr/bin/python3
"""Rewrites a float32 ONNX model as a float16 one, the way float16 exports look (every float32 tensor of
the graph, its initializers, Constant / ConstantOfShape values, Cast targets, inputs and outputs become
float16), and writes its test cases' inputs as float16: a benchmark and test input for float16 models.
Expected outputs are not converted (a float16 model's outputs differ from the float32 one's by its
roundings); the cases keep only their inputs.

    tools/to_float16.py IN_DIR_OR_MODEL OUT_DIR [--keep-io-float32]

IN_DIR_OR_MODEL: a model.onnx, or a folder with model.onnx and test_data_set_*/input_*.pb, or an
onnxruntime-genai model folder (its other files are copied; the weights go to model.onnx.data).
--keep-io-float32: graph inputs and outputs stay float32, with Casts at the boundary (onnxconverter-
common's keep_io_types).
"""
import argparse
import glob
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
# Ops whose float attributes or inputs keep float32 in every ONNX opset (the spec fixes their type).
FLOAT32_INPUTS = {
    "Resize": {1, 2},        # roi may follow T; scales is always float
    "Upsample": {1},
    "ConstantOfShape": set(),
}


def to_f16_tensor(t):
    if t.data_type != F32:
        return t
    a = numpy_helper.to_array(t).astype(np.float16)
    n = numpy_helper.from_array(a, t.name)
    return n


def convert_graph(g, keep_io):
    for i, t in enumerate(g.initializer):
        g.initializer[i].CopyFrom(to_f16_tensor(t))
    # Resize/Upsample scales are float32 by the spec: cast them back where they come from initializers.
    f32_names = set()
    for n in g.node:
        for idx in FLOAT32_INPUTS.get(n.op_type, ()):
            if idx < len(n.input) and n.input[idx]:
                f32_names.add(n.input[idx])
    for i, t in enumerate(g.initializer):
        if t.name in f32_names and t.data_type == F16:
            a = numpy_helper.to_array(t).astype(np.float32)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32 and a.t.name not in f32_names:
                if not (n.op_type == "Constant" and n.output[0] in f32_names):
                    a.t.CopyFrom(to_f16_tensor(a.t))
            if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = F16
            if a.type == onnx.AttributeProto.GRAPH:
                convert_graph(a.g, False)
            if a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    convert_graph(sg, False)
    for vi in list(g.value_info) + ([] if keep_io else list(g.input) + list(g.output)):
        tt = vi.type.tensor_type
        if tt.elem_type == F32 and vi.name not in f32_names:
            tt.elem_type = F16
    if keep_io:
        nodes = []
        for vi in g.input:
            if vi.type.tensor_type.elem_type == F32 and vi.name not in f32_names:
                inner = vi.name + "_f16"
                for n in g.node:
                    for k, x in enumerate(n.input):
                        if x == vi.name:
                            n.input[k] = inner
                nodes.append(helper.make_node("Cast", [vi.name], [inner], to=F16))
        tail = []
        for vi in g.output:
            if vi.type.tensor_type.elem_type == F32:
                inner = vi.name + "_f16"
                for n in g.node:
                    for k, x in enumerate(n.output):
                        if x == vi.name:
                            n.output[k] = inner
                tail.append(helper.make_node("Cast", [inner], [vi.name], to=F32))
        all_nodes = nodes + list(g.node) + tail
        del g.node[:]
        g.node.extend(all_nodes)
    # value_info of float32 scale tensors that became float16 by the blanket rule are dropped (they are
    # recomputed by shape inference).


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--keep-io-float32", action="store_true")
    a = ap.parse_args()
    src_model = a.src if a.src.endswith(".onnx") else os.path.join(a.src, "model.onnx")
    m = onnx.load(src_model)
    convert_graph(m.graph, a.keep_io_float32)
    os.makedirs(a.out, exist_ok=True)
    src_dir = os.path.dirname(os.path.abspath(src_model))
    if os.path.exists(os.path.join(src_dir, "model.onnx.data")) or m.ByteSize() > (1 << 30):
        onnx.save(m, os.path.join(a.out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=1024)
    else:
        onnx.save(m, os.path.join(a.out, "model.onnx"))
    if os.path.exists(os.path.join(src_dir, "genai_config.json")):
        for f in os.listdir(src_dir):
            if f not in ("model.onnx", "model.onnx.data") and os.path.isfile(os.path.join(src_dir, f)):
                shutil.copy(os.path.join(src_dir, f), os.path.join(a.out, f))
    if not a.src.endswith(".onnx"):
        for case in sorted(glob.glob(os.path.join(a.src, "test_data_set_*"))):
            dst = os.path.join(a.out, os.path.basename(case))
            os.makedirs(dst, exist_ok=True)
            for f in sorted(glob.glob(os.path.join(case, "input_*.pb"))):
                t = onnx.TensorProto()
                with open(f, "rb") as fh:
                    t.ParseFromString(fh.read())
                if not a.keep_io_float32:
                    t = to_f16_tensor(t)
                with open(os.path.join(dst, os.path.basename(f)), "wb") as fh:
                    fh.write(t.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
