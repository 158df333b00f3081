#!/usr/bin/python3
"""Writes a small transformer-style encoder with a dynamic sequence axis for the RSS-over-sequence-
lengths test (scripts/rss_seq_lengths.sh): input x float[1, seq, 256], output y float[1, seq, 256]
(with --dynamic-batch: x, y float[batch, seq, 256], for the shape-churn test).
Each of --blocks pre-norm blocks is
    h = LayerNormalization(x); Q,K,V = h @ Wq, h @ Wk, h @ Wv  (4 heads of 64: Reshape + Transpose)
    x = x + (Softmax(Q K^T / 8) V, heads merged) @ Wo
    x = x + Relu(LayerNormalization(x) @ W1 + b1) @ W2 + b2      (hidden 1024)
with seeded constant weights (initializers). Opset 17 (LayerNormalization).

  make_seqlen_model.py OUT.onnx [--blocks 2] [--seed 0] [--dynamic-batch]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, FF = 256, 4, 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dynamic-batch", action="store_true", help="a symbolic batch axis instead of 1")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def w(name, *shape):
        return const(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0]

    hd = D // HEADS
    split = const("split_heads", np.array([0, -1, HEADS, hd], np.int64))
    merge = const("merge_heads", np.array([0, -1, D], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    batch = "batch" if a.dynamic_batch else 1
    x = "x"
    for b in range(a.blocks):
        p = f"b{b}_"
        g1, be1 = const(p + "ln1_g", np.ones(D, np.float32)), const(p + "ln1_b", np.zeros(D, np.float32))
        h = node("LayerNormalization", [x, g1, be1], [p + "ln1"], axis=-1, epsilon=1e-5)
        heads = {}
        for t in "qkv":
            m = node("MatMul", [h, w(p + "w" + t, D, D)], [p + t])
            r = node("Reshape", [m, split], [p + t + "_r"])
            # (Reshape's 0 keeps the batch axis) q, v: [B, H, seq, hd]; k: [B, H, hd, seq] (already transposed for Q K^T)
            perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
            heads[t] = node("Transpose", [r], [p + t + "_t"], perm=perm)
        s = node("MatMul", [heads["q"], heads["k"]], [p + "scores"])
        s = node("Mul", [s, scale], [p + "scaled"])
        s = node("Softmax", [s], [p + "probs"], axis=-1)
        o = node("MatMul", [s, heads["v"]], [p + "ctx"])
        o = node("Transpose", [o], [p + "ctx_t"], perm=[0, 2, 1, 3])
        o = node("Reshape", [o, merge], [p + "ctx_m"])
        o = node("MatMul", [o, w(p + "wo", D, D)], [p + "attn"])
        x = node("Add", [x, o], [p + "res1"])
        g2, be2 = const(p + "ln2_g", np.ones(D, np.float32)), const(p + "ln2_b", np.zeros(D, np.float32))
        h = node("LayerNormalization", [x, g2, be2], [p + "ln2"], axis=-1, epsilon=1e-5)
        f = node("MatMul", [h, w(p + "w1", D, FF)], [p + "ff1"])
        f = node("Add", [f, const(p + "b1", np.zeros(FF, np.float32))], [p + "ff1b"])
        f = node("Relu", [f], [p + "ff1r"])
        f = node("MatMul", [f, w(p + "w2", FF, D)], [p + "ff2"])
        f = node("Add", [f, const(p + "b2", np.zeros(D, np.float32))], [p + "ff2b"])
        x = node("Add", [x, f], [p + "res2" if b + 1 < a.blocks else "y"])
    if x != "y":
        x = node("Identity", [x], ["y"])
    graph = helper.make_graph(
        nodes, "seqlen_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, "seq", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, "seq", D])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nxrt-make-seqlen")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    print(f"{a.out}: {len(nodes)} nodes, {sum(np.prod(i.dims) for i in inits) * 4 / 1e6:.1f} MB of weights")


if __name__ == "__main__":
    main()
