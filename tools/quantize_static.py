#!/usr/bin/python3
"""Writes a statically quantized copy of a float32 model in QDQ form, laid out the way onnxruntime's
quantize_static (QuantFormat.QDQ, MinMax calibration) lays it out: each quantized activation passes
through QuantizeLinear -> DequantizeLinear (uint8, asymmetric, per tensor, range widened to hold 0),
constant weights of Conv / Gemm / MatMul are stored as int8 (symmetric, per tensor or per output
channel) behind a DequantizeLinear, biases as int32 with scale x_scale * w_scale, and a Relu / Clip
right after a Conv / Gemm / MatMul / Add is folded into the quantization of its input (as the
quantizer's removable activations are). A benchmark and test input for QDQ models: runtimes either
run the float ops between the DequantizeLinear and QuantizeLinear nodes or fuse the groups into 8-bit
kernels (onnxruntime does; so does nxrt's fuse_qdq pass).

    tools/quantize_static.py IN_DIR_OR_MODEL OUT_DIR [--per-channel] [--runner build/nxrt]

IN_DIR_OR_MODEL: a model.onnx, or a folder with model.onnx and test_data_set_*/ (copied as they are;
expected outputs are dropped: quantization moves the outputs). Calibration runs the float model on
those inputs with the runner (any binary with the nxrt CLI's `run MODEL --input F --output-dir D`
contract) and takes each tensor's min and max over them.

Before quantizing: ConstantOfShape nodes of constant shapes become initializers, BatchNormalization
after a Conv is folded into the Conv's weights (onnxruntime's quantization pre-processing does both
through its optimizer), and a two-input Sum becomes Add.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, helper, numpy_helper

# Ops whose float inputs and outputs are quantized (each input and output an activation of its own).
QUANTIZED = {"Conv", "Gemm", "MatMul", "Add", "Mul", "AveragePool", "GlobalAveragePool", "Concat", "Sigmoid",
             "LeakyRelu", "Softmax"}
# Ops whose output takes its input's quantization (8-bit in, the same 8-bit out).
SHARED = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"}
# Activations folded into the quantization of the op before them.
REMOVABLE = {"Relu", "Clip"}
WEIGHTED = {"Conv", "Gemm", "MatMul"}


def const_map(g):
    return {t.name: numpy_helper.to_array(t) for t in g.initializer}


def materialize_constants(model):
    """ConstantOfShape of constant shapes and Constant nodes -> initializers; two-input Sum -> Add."""
    g = model.graph
    consts = const_map(g)
    keep, new = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in consts:
            value = np.zeros(1, np.float32)
            for a in n.attribute:
                if a.name == "value":
                    value = numpy_helper.to_array(a.t)
            arr = np.full(consts[n.input[0]].astype(np.int64), value.reshape(-1)[0], dtype=value.dtype)
            consts[n.output[0]] = arr
            new.append(numpy_helper.from_array(arr, n.output[0]))
        elif n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            arr = numpy_helper.to_array(n.attribute[0].t)
            consts[n.output[0]] = arr
            new.append(numpy_helper.from_array(arr, n.output[0]))
        elif n.op_type == "Sum" and len(n.input) == 2:
            keep.append(helper.make_node("Add", list(n.input), list(n.output), name=n.name))
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(new)
    init_names = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in init_names]
    del g.input[:]
    g.input.extend(inputs)


def readers(g):
    r = {}
    for n in g.node:
        for i in n.input:
            r.setdefault(i, []).append(n)
    return r


def fold_batch_norms(model):
    g = model.graph
    consts = const_map(g)
    rd = readers(g)
    outputs = {o.name for o in g.output}
    producer = {o: n for n in g.node for o in n.output}
    drop, replace = set(), {}
    for bn in g.node:
        if bn.op_type != "BatchNormalization" or len(bn.input) != 5:
            continue
        conv = producer.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or len(rd.get(conv.output[0], [])) != 1 or conv.output[0] in outputs:
            continue
        if conv.input[1] not in consts or not all(i in consts for i in bn.input[1:]):
            continue
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        s, b, m, v = (consts[i].astype(np.float64) for i in bn.input[1:])
        f = s / np.sqrt(v + eps)
        W = consts[conv.input[1]].astype(np.float64)
        B = consts[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2] else np.zeros(W.shape[0])
        Wf = (W * f.reshape(-1, *([1] * (W.ndim - 1)))).astype(np.float32)
        Bf = ((B - m) * f + b).astype(np.float32)
        wn, bn_name = conv.input[1] + "_bnfold", conv.output[0] + "_bnfold_bias"
        g.initializer.extend([numpy_helper.from_array(Wf, wn), numpy_helper.from_array(Bf, bn_name)])
        replace[conv.name or id(conv)] = helper.make_node("Conv", [conv.input[0], wn, bn_name], [bn.output[0]],
                                                          name=conv.name, **{a.name: helper.get_attribute_value(a) for a in conv.attribute})
        drop.add(id(bn))
        replace[id(conv)] = replace.pop(conv.name or id(conv))
    nodes = [replace.get(id(n), n) for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(nodes)
    prune_initializers(g)


def prune_initializers(g):
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)


def float_activations(model):
    """Names of float32 tensors that nodes produce (shape inference gives the types)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    acts = [i.name for i in model.graph.input if types.get(i.name) == TensorProto.FLOAT]
    for n in model.graph.node:
        acts += [o for o in n.output if o and types.get(o) == TensorProto.FLOAT]
    return list(dict.fromkeys(acts))


def calibrate(model, names, input_sets, runner):
    """min and max of each named tensor over the input sets (the float model run with them as outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for nm in names:
        if nm not in have:
            m.graph.output.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, None))
    order = [o.name for o in m.graph.output]
    lo, hi = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calib.onnx")
        onnx.save(m, path)
        for k, inputs in enumerate(input_sets):
            out = os.path.join(tmp, f"out{k}")
            cmd = [runner, "run", path, "--output-dir", out]
            for f in inputs:
                cmd += ["--input", f]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            for j, nm in enumerate(order):
                t = onnx.TensorProto()
                with open(os.path.join(out, f"output_{j}.pb"), "rb") as fh:
                    t.ParseFromString(fh.read())
                a = numpy_helper.to_array(t)
                if a.dtype != np.float32 or a.size == 0:
                    continue
                lo[nm] = min(lo.get(nm, np.inf), float(a.min()))
                hi[nm] = max(hi.get(nm, -np.inf), float(a.max()))
    return lo, hi


def uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def int8_weights(W, axis):
    """Symmetric int8 codes in [-127, 127]: per tensor (axis None) or per slice along axis."""
    if axis is None:
        amax = np.array(np.abs(W).max(), np.float32)
    else:
        amax = np.abs(np.moveaxis(W, axis, 0).reshape(W.shape[axis], -1)).max(axis=1).astype(np.float32)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shaped = scale if axis is None else scale.reshape([-1 if i == axis else 1 for i in range(W.ndim)])
    return np.clip(np.round(W / shaped), -127, 127).astype(np.int8), scale


def quantize(model, lo, hi, per_channel):
    g = model.graph
    consts = const_map(g)
    rd = readers(g)
    outputs = {o.name for o in g.output}
    producer = {o: n for n in g.node for o in n.output}
    # Removable activations: the op before writes the activation's output directly.
    rename, dropped = {}, set()
    for n in g.node:
        if n.op_type not in REMOVABLE or not n.input or n.input[0] not in producer:
            continue
        if n.op_type == "Clip" and (len(n.input) > 1 or any(a.name in ("min", "max") for a in n.attribute)):
            mn = next((helper.get_attribute_value(a) for a in n.attribute if a.name == "min"), None)
            if mn is None and len(n.input) > 1 and n.input[1] in consts:
                mn = float(consts[n.input[1]])
            if mn != 0.0:  # only Relu-like clips fold into a range that starts at 0 (a zero point of 0)
                continue
        p = producer[n.input[0]]
        if p.op_type not in WEIGHTED | {"Add"} or len(rd.get(n.input[0], [])) != 1 or n.input[0] in outputs:
            continue
        if n.output[0] not in lo:
            continue
        rename[n.input[0]] = n.output[0]
        dropped.add(id(n))
    nodes = []
    for n in g.node:
        if id(n) in dropped:
            continue
        for k, o in enumerate(n.output):
            if o in rename:
                n.output[k] = rename[o]
        nodes.append(n)
    # Quantization parameters per activation; SHARED ops' outputs take their input's.
    params = {}

    def act_params(name):
        if name not in params:
            params[name] = uint8_params(lo[name], hi[name])
        return params[name]

    quantized_nodes = []
    for n in nodes:
        if n.op_type in QUANTIZED or n.op_type in SHARED:
            ins = [i for i in n.input[:1 if n.op_type in SHARED else len(n.input)] if i and i in lo]
            if n.op_type in ("Add", "Mul", "Concat") and len(ins) != len([i for i in n.input if i]):
                continue  # a constant operand: left in float
            if not ins or not all(o in lo for o in n.output[:1]):
                continue
            quantized_nodes.append(n)
            for i in ins:
                act_params(i)
            if n.op_type in SHARED:
                params[n.output[0]] = act_params(n.input[0])
            elif n.op_type == "Softmax":
                params[n.output[0]] = (np.float32(1.0 / 256.0), np.uint8(0))  # the quantizer's fixed [0, 1) range
            else:
                act_params(n.output[0])
    qset = {id(n) for n in quantized_nodes}
    new_nodes, new_inits = [], []
    # Every quantized activation: its producer (or the graph input) is followed by Q -> DQ, and the DQ
    # writes the original name, so every reader (float or quantized) and a graph output see it.
    produced_by = {}
    for n in nodes:
        for k, o in enumerate(n.output):
            produced_by[o] = (n, k)
    graph_inputs = {i.name for i in g.input}
    qdq_of = {}
    for name, (s, z) in params.items():
        base = name.replace("/", "_").replace(":", "_")
        sn, zn = base + "_scale", base + "_zero_point"
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), sn), numpy_helper.from_array(np.array(z, np.uint8), zn)]
        qdq_of[name] = (sn, zn, base)
    pending = {}  # producer id -> list of QDQ nodes to emit after it
    renamed_input = {}
    for name, (sn, zn, base) in qdq_of.items():
        pre = base + "_prequant"
        q = helper.make_node("QuantizeLinear", [pre, sn, zn], [base + "_quantized"], name=base + "_QuantizeLinear")
        dq = helper.make_node("DequantizeLinear", [base + "_quantized", sn, zn], [name], name=base + "_DequantizeLinear")
        if name in graph_inputs:
            renamed_input[name] = pre
            pending.setdefault("input", []).extend([q, dq])
        else:
            n, k = produced_by[name]
            n.output[k] = pre
            pending.setdefault(id(n), []).extend([q, dq])
    for i in g.input:
        if i.name in renamed_input:
            i.name = renamed_input[i.name]
    new_nodes += pending.get("input", [])
    count = 0
    for n in nodes:
        if id(n) in qset and n.op_type in WEIGHTED:
            count += 1
            w_name = n.input[1]
            if w_name in consts and consts[w_name].dtype == np.float32 and n.input[0] in params:
                W = consts[w_name]
                if n.op_type == "Conv":
                    axis = 0
                elif n.op_type == "Gemm":
                    trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
                    axis = 0 if trans_b else 1
                else:
                    axis = W.ndim - 1 if W.ndim == 2 else None
                axis = axis if per_channel and axis is not None else None
                Wq, ws = int8_weights(W, axis)
                wb = f"{w_name}_q{count}"
                dq_inputs = [wb + "_quantized", wb + "_scale", wb + "_zero_point"]
                new_inits += [numpy_helper.from_array(Wq, dq_inputs[0]), numpy_helper.from_array(ws, dq_inputs[1]),
                              numpy_helper.from_array(np.zeros(ws.shape, np.int8), dq_inputs[2])]
                kw = {"axis": axis} if axis is not None else {}
                new_nodes.append(helper.make_node("DequantizeLinear", dq_inputs, [wb + "_dequantized"], name=wb + "_DequantizeLinear", **kw))
                n.input[1] = wb + "_dequantized"
                bias_idx = 2 if n.op_type in ("Conv", "Gemm") else None
                if bias_idx is not None and len(n.input) > bias_idx and n.input[bias_idx] in consts:
                    B = consts[n.input[bias_idx]]
                    xs = params[n.input[0]][0]
                    bscale = (np.float32(xs) * ws).astype(np.float32)
                    if B.ndim == 1 and (bscale.size == 1 or bscale.size == B.size):
                        # (int32 saturation for a bias far larger than x_scale * w_scale, as a tiny weight range gives)
                        Bq = np.clip(np.round(B.astype(np.float64) / bscale), -2**31, 2**31 - 1).astype(np.int32)
                        bb = f"{n.input[bias_idx]}_q{count}"
                        new_inits += [numpy_helper.from_array(Bq, bb + "_quantized"),
                                      numpy_helper.from_array(bscale.reshape(-1) if bscale.size > 1 else np.array(bscale.reshape(()), np.float32), bb + "_scale"),
                                      numpy_helper.from_array(np.zeros(bscale.shape, np.int32), bb + "_zero_point")]
                        new_nodes.append(helper.make_node("DequantizeLinear", [bb + "_quantized", bb + "_scale", bb + "_zero_point"],
                                                          [bb + "_dequantized"], name=bb + "_DequantizeLinear", **({"axis": 0} if bscale.size > 1 else {})))
                        n.input[bias_idx] = bb + "_dequantized"
        new_nodes.append(n)
        new_nodes += pending.get(id(n), [])
    del g.node[:]
    g.node.extend(new_nodes)
    g.initializer.extend(new_inits)
    prune_initializers(g)
    return len(quantized_nodes), len(params)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out_dir")
    ap.add_argument("--per-channel", action="store_true", help="per output channel weight scales")
    ap.add_argument("--runner", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "nxrt"))
    a = ap.parse_args()
    src_dir = a.src if os.path.isdir(a.src) else os.path.dirname(a.src)
    model_path = os.path.join(a.src, "model.onnx") if os.path.isdir(a.src) else a.src
    sets = sorted(glob.glob(os.path.join(src_dir, "test_data_set_*")))
    input_sets = [sorted(glob.glob(os.path.join(d, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3])) for d in sets]
    if not input_sets or not input_sets[0]:
        sys.exit(f"{src_dir}: no test_data_set_*/input_*.pb to calibrate with")
    model = onnx.load(model_path)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    per_channel = a.per_channel
    if opset < 13:  # per-axis DequantizeLinear needs opset 13
        try:
            # (the Softmax adapter needs its input's rank: shapes inferred first)
            model = onnx.version_converter.convert_version(onnx.shape_inference.infer_shapes(model), 13)
            model.ir_version = max(model.ir_version, 7)  # opset 13's; initializers need not be graph inputs
        except RuntimeError as e:
            if opset < 10:
                sys.exit(f"{model_path}: opset {opset}, and converting it to 13 failed: {e}")
            print(f"note: opset {opset} kept (converting to 13 failed: {str(e).splitlines()[-1]}); weights per tensor")
            per_channel = False
    materialize_constants(model)
    fold_batch_norms(model)
    names = float_activations(model)
    lo, hi = calibrate(model, names, input_sets, a.runner)
    nq, na = quantize(model, lo, hi, per_channel)
    onnx.checker.check_model(model)
    os.makedirs(a.out_dir, exist_ok=True)
    onnx.save(model, os.path.join(a.out_dir, "model.onnx"))
    for d in sets:
        dst = os.path.join(a.out_dir, os.path.basename(d))
        os.makedirs(dst, exist_ok=True)
        for f in glob.glob(os.path.join(d, "input_*.pb")):
            shutil.copy(f, dst)
    print(f"{a.out_dir}: {nq} ops quantized, {na} activations with QuantizeLinear -> DequantizeLinear")


if __name__ == "__main__":
    main()
