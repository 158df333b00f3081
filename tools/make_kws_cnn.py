#!/usr/bin/python3
"""Writes a small keyword-spotting CNN of the shape issue 21 measured (20 small 2-D convolutions with
LeakyRelu, Max of paired branches and MaxPool on a [1, 76, 32, 1] feature map: 76 frames x 32 mel bins,
channels last), with seeded random weights, in the ONNX backend-test layout: OUT/model.onnx,
OUT/test_data_set_0/input_0.pb and output_0.pb, where the expected output comes from a numpy forward pass
written independently of nxrt. A benchmark of the small-convolution path (few channels, small planes),
where per-call overhead and packing dominate rather than arithmetic.

    tools/make_kws_cnn.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_toy_cnn import conv2d, save_case  # noqa: E402  (the same float64 reference and file layout)

SLOPE = 0.1
CLASSES = 12


def leaky(x):
    return np.where(x >= 0, x, SLOPE * x)


def maxpool2(x):
    n, c, h, w = x.shape
    h2, w2 = h // 2, w // 2
    return x[:, :, :h2 * 2, :w2 * 2].reshape(n, c, h2, 2, w2, 2).max(axis=(3, 5))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/kws_cnn"
    rng = np.random.default_rng(2121)
    f = np.float32
    inits, nodes = [], []
    counter = [0]

    def add_conv(src, cin, cout, k):
        i = counter[0]
        counter[0] += 1
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(f)
        b = (rng.standard_normal(cout) * 0.05).astype(f)
        inits.extend([numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")])
        nodes.append(helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"conv{i}"], name=f"conv{i}",
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("LeakyRelu", [f"conv{i}"], [f"act{i}"], name=f"leaky{i}", alpha=SLOPE))
        return f"act{i}", (w, b, k // 2)

    ops = []  # the reference program: ("conv", src, dst, params) / ("max", a, b, dst) / ("pool", src, dst)
    nodes.append(helper.make_node("Transpose", ["features"], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]))
    cur, cin = "nchw", 1
    name, p = add_conv(cur, cin, 16, 3)
    ops.append(("conv", cur, name, p))
    cur, cin = name, 16
    for stage, ch in enumerate([16, 24, 32, 48]):
        if ch != cin:  # 1x1 transition to the stage's width
            name, p = add_conv(cur, cin, ch, 1)
            ops.append(("conv", cur, name, p))
            cur, cin = name, ch
        for blk in range(2):  # two max-feature-map blocks: Max of two 3x3 branches
            a, pa = add_conv(cur, ch, ch, 3)
            ops.append(("conv", cur, a, pa))
            b, pb = add_conv(cur, ch, ch, 3)
            ops.append(("conv", cur, b, pb))
            m = f"max{stage}_{blk}"
            nodes.append(helper.make_node("Max", [a, b], [m], name=m))
            ops.append(("max", a, b, m))
            cur = m
        if stage < 3:
            pname = f"pool{stage}"
            nodes.append(helper.make_node("MaxPool", [cur], [pname], name=pname, kernel_shape=[2, 2], strides=[2, 2]))
            ops.append(("pool", cur, pname))
            cur = pname
    assert counter[0] == 20, counter[0]
    wfc = (rng.standard_normal((CLASSES, cin)) * 0.2).astype(f)
    bfc = (rng.standard_normal(CLASSES) * 0.05).astype(f)
    inits.extend([numpy_helper.from_array(wfc, "wfc"), numpy_helper.from_array(bfc, "bfc")])
    nodes += [
        helper.make_node("GlobalMaxPool", [cur], ["gmp"], name="gmp"),
        helper.make_node("Flatten", ["gmp"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "wfc", "bfc"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "kws_cnn",
                              [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 76, 32, 1])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nxrt-kws-cnn")
    model.ir_version = 8
    onnx.checker.check_model(model)

    # Reference forward pass in float64.
    x = rng.standard_normal((1, 76, 32, 1)).astype(f)
    vals = {"nchw": x.astype(np.float64).transpose(0, 3, 1, 2)}
    for op in ops:
        if op[0] == "conv":
            _, src, dst, (w, b, pad) = op
            vals[dst] = leaky(conv2d(vals[src], w, b, pad))
        elif op[0] == "max":
            vals[op[3]] = np.maximum(vals[op[1]], vals[op[2]])
        else:
            vals[op[2]] = maxpool2(vals[op[1]])
    h = vals[cur].max(axis=(2, 3))
    logits = (h @ wfc.T.astype(np.float64) + bfc).astype(f)

    save_case(out, model, {"features": x}, {"logits": logits})
    print(f"wrote {out}/model.onnx and its test data (20 convs, reference top class {int(logits.argmax())})")


if __name__ == "__main__":
    main()
