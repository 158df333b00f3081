#!/usr/bin/python3
"""Writes a small image classifier (Conv-BN-Relu-MaxPool-Conv-Relu-GlobalAveragePool-Gemm-Softmax)
with seeded random weights, in the ONNX backend-test layout: OUT/model.onnx,
OUT/test_data_set_0/input_0.pb and output_0.pb, where the expected output comes from a numpy
forward pass written independently of nxrt."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    oc, ic, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    cols = np.zeros((n, ic, kh, kw, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + oh, j:j + ow]
    out = np.einsum("ncijhw,ocij->nohw", cols, w.astype(np.float64))
    return out + b.reshape(1, -1, 1, 1)


def save_case(out, model, inputs, outputs):
    """OUT/model.onnx and OUT/test_data_set_0/{input,output}_K.pb from name -> array dicts, in order."""
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for k, (name, a) in enumerate(arrays.items()):
            with open(os.path.join(out, "test_data_set_0", f"{kind}_{k}.pb"), "wb") as fh:
                fh.write(numpy_helper.from_array(a, name).SerializeToString())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/toy_cnn"
    rng = np.random.default_rng(2026)
    f = np.float32
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(f)
    b1 = (rng.standard_normal(8) * 0.1).astype(f)
    scale = (1 + 0.1 * rng.standard_normal(8)).astype(f)
    bias = (0.1 * rng.standard_normal(8)).astype(f)
    mean = (0.1 * rng.standard_normal(8)).astype(f)
    var = (1 + 0.1 * rng.random(8)).astype(f)
    w2 = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(f)
    b2 = (rng.standard_normal(16) * 0.1).astype(f)
    wfc = (rng.standard_normal((10, 16)) * 0.3).astype(f)
    bfc = (rng.standard_normal(10) * 0.1).astype(f)
    x = rng.random((1, 3, 32, 32)).astype(f)

    inits = [numpy_helper.from_array(a, n) for a, n in [
        (w1, "w1"), (b1, "b1"), (scale, "bn_scale"), (bias, "bn_bias"), (mean, "bn_mean"), (var, "bn_var"),
        (w2, "w2"), (b2, "b2"), (wfc, "wfc"), (bfc, "bfc")]]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn1"],
                         name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "wfc", "bfc"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "tiny_cnn",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nxrt-toy-cnn")
    model.ir_version = 8
    onnx.checker.check_model(model)

    # Reference forward pass in float64.
    h = conv2d(x.astype(np.float64), w1, b1, 1)
    h = (h - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5) * scale.reshape(1, -1, 1, 1) \
        + bias.reshape(1, -1, 1, 1)
    h = np.maximum(h, 0)
    h = h.reshape(1, 8, 16, 2, 16, 2).max(axis=(3, 5))
    h = np.maximum(conv2d(h, w2, b2, 1), 0)
    h = h.mean(axis=(2, 3))
    logits = h @ wfc.T.astype(np.float64) + bfc
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = (e / e.sum(axis=1, keepdims=True)).astype(f)

    save_case(out, model, {"image": x}, {"probs": probs})
    print(f"wrote {out}/model.onnx and its test data (reference top class {int(probs.argmax())})")


if __name__ == "__main__":
    main()
