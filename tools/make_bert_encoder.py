#!/usr/bin/python3
"""Writes a BERT-base-shaped transformer encoder as torch.onnx exports it at opset 17 (hidden 768, 12 heads,
FFN 3072, the erf GELU written out as Div / Erf / Add / Mul / Mul, LayerNormalization, an additive
attention mask input), with seeded random weights, in the ONNX backend-test layout: OUT/model.onnx,
OUT/test_data_set_0/input_K.pb and output_0.pb, where the expected output comes from a numpy float64
forward pass written independently of nxrt. A benchmark of the encoder path: large GEMMs, and the
Softmax, LayerNormalization and GELU between them, which run at memory speed only when vectorized.

    tools/make_bert_encoder.py OUT_DIR [--layers 4] [--seq 128]
"""
import argparse
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_toy_cnn import save_case  # noqa: E402  (the same file layout)

HIDDEN, HEADS, FFN = 768, 12, 3072
EPS = 1e-12


def layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS) * g + b


def gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    rng = np.random.default_rng(768)
    f = np.float32
    S, D = a.seq, HIDDEN // HEADS
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        return outs[0]

    const("heads_shape", np.array([1, S, HEADS, D], np.int64))
    const("merged_shape", np.array([1, S, HIDDEN], np.int64))
    const("scale", np.array(math.sqrt(D), f))
    const("sqrt2", np.array(math.sqrt(2), f))
    const("one", np.array(1, f))
    const("half", np.array(0.5, f))

    x = rng.standard_normal((1, S, HIDDEN)).astype(f)
    mask = np.zeros((1, 1, 1, S), f)
    mask[..., S - S // 8:] = -10000.0  # the last eighth is padding
    ref = x.astype(np.float64)
    h = "hidden"
    for li in range(a.layers):
        p = f"l{li}."
        w = {k: (rng.standard_normal(s) * sd).astype(f) for k, s, sd in [
            ("q", (HIDDEN, HIDDEN), 0.03), ("k", (HIDDEN, HIDDEN), 0.03), ("v", (HIDDEN, HIDDEN), 0.03),
            ("o", (HIDDEN, HIDDEN), 0.03), ("f1", (HIDDEN, FFN), 0.03), ("f2", (FFN, HIDDEN), 0.02)]}
        bias = {k: (rng.standard_normal(n) * 0.02).astype(f) for k, n in [
            ("q", HIDDEN), ("k", HIDDEN), ("v", HIDDEN), ("o", HIDDEN), ("f1", FFN), ("f2", HIDDEN)]}
        g1, b1, g2, b2 = [(1 + 0.1 * rng.standard_normal(HIDDEN)).astype(f) if i % 2 == 0 else
                          (0.1 * rng.standard_normal(HIDDEN)).astype(f) for i in range(4)]
        for k in w:
            const(p + "w" + k, w[k])
            const(p + "b" + k, bias[k])
        for k, v in (("g1", g1), ("b1", b1), ("g2", g2), ("b2", b2)):
            const(p + k, v)

        def proj(src, k, name):
            t = node("MatMul", [src, p + "w" + k], [p + name + "_mm"])
            return node("Add", [t, p + "b" + k], [p + name])

        def heads(src, name, perm):
            t = node("Reshape", [src, "heads_shape"], [p + name + "_r"])
            return node("Transpose", [t], [p + name + "_t"], perm=perm)

        q = heads(proj(h, "q", "q"), "q", [0, 2, 1, 3])
        kt = heads(proj(h, "k", "k"), "k", [0, 2, 3, 1])
        v = heads(proj(h, "v", "v"), "v", [0, 2, 1, 3])
        s = node("MatMul", [q, kt], [p + "scores"])
        s = node("Div", [s, "scale"], [p + "scaled"])
        s = node("Add", [s, "mask"], [p + "masked"])
        s = node("Softmax", [s], [p + "probs"], axis=-1)
        c = node("MatMul", [s, v], [p + "ctx"])
        c = node("Transpose", [c], [p + "ctx_t"], perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "merged_shape"], [p + "ctx_m"])
        o = proj(c, "o", "attn_out")
        r1 = node("Add", [o, h], [p + "res1"])
        n1 = node("LayerNormalization", [r1, p + "g1", p + "b1"], [p + "ln1"], axis=-1, epsilon=EPS)
        f1 = proj(n1, "f1", "ffn1")
        t = node("Div", [f1, "sqrt2"], [p + "gelu_div"])
        t = node("Erf", [t], [p + "gelu_erf"])
        t = node("Add", [t, "one"], [p + "gelu_add"])
        t = node("Mul", [f1, t], [p + "gelu_mul"])
        t = node("Mul", [t, "half"], [p + "gelu"])
        f2 = proj(t, "f2", "ffn2")
        r2 = node("Add", [f2, n1], [p + "res2"])
        h = node("LayerNormalization", [r2, p + "g2", p + "b2"], [p + "out"], axis=-1, epsilon=EPS)

        # float64 reference
        def lin(z, k):
            return z @ w[k].astype(np.float64) + bias[k]
        qh = lin(ref, "q").reshape(1, S, HEADS, D).transpose(0, 2, 1, 3)
        kh = lin(ref, "k").reshape(1, S, HEADS, D).transpose(0, 2, 1, 3)
        vh = lin(ref, "v").reshape(1, S, HEADS, D).transpose(0, 2, 1, 3)
        sc = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(D) + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        ctx = (sc @ vh).transpose(0, 2, 1, 3).reshape(1, S, HIDDEN)
        r = layer_norm(lin(ctx, "o") + ref, g1, b1)
        ref = layer_norm(lin(gelu(lin(r, "f1")), "f2") + r, g2, b2)
    nodes.append(helper.make_node("Identity", [h], ["output"]))
    graph = helper.make_graph(
        nodes, "bert_encoder",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, S, HIDDEN]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, S])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, S, HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save_case(a.out, model, {"hidden": x, "mask": mask}, {"output": ref.astype(f)})
    print(f"wrote {a.out}: {a.layers} layers, seq {S}")


if __name__ == "__main__":
    main()
