#!/usr/bin/python3
"""Writes small one-node models for the com.microsoft contrib ops (several attribute combinations each)
into OUT_DIR/<case>.onnx. Float activations are graph inputs (tools/compare_ort.py feeds them seeded
uniform values); weights, quantized data, indices, sequence lengths and position ids are initializers,
so every case is self-contained. Used by scripts/check_contrib_ort.sh.

  make_contrib_cases.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
MS = "com.microsoft"
rng = np.random.default_rng(1234)
CASES = []


def case(name, op, inputs, outputs, inits=None, domain=MS, out_et=None, **attrs):
    """inputs: list of (name, elem_type, shape) graph inputs or '' (omitted optional input) or an
    initializer name; outputs: list of output names ('' = not requested)."""
    inits = inits or {}
    node_inputs, graph_inputs = [], []
    for i in inputs:
        if isinstance(i, tuple):
            node_inputs.append(i[0])
            graph_inputs.append(helper.make_tensor_value_info(i[0], i[1], i[2]))
        else:
            node_inputs.append(i)
    node = helper.make_node(op, node_inputs, outputs, domain=domain, **attrs)
    outs = [helper.make_tensor_value_info(o, 0, None) for o in outputs if o]
    # Output element types: let ORT infer; onnx 1.12 needs one, so take the first float input's type.
    et = out_et or next((i[1] for i in inputs if isinstance(i, tuple)), F32)
    outs = [helper.make_tensor_value_info(o, et if not o.startswith("i32_") else TensorProto.INT32, None) for o in outputs if o]
    g = helper.make_graph([node], name, graph_inputs, outs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    CASES.append((name, m))


def f(shape, scale=1.0, dt=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dt)


# ---- MatMulNBits -------------------------------------------------------------------------------
def mnb(name, M, K, N, bits, block, acc=0, zp=None, bias=False, dtype=F32, rank3=False):
    kb = (K + block - 1) // block
    blob = block * bits // 8
    npdt = np.float16 if dtype == F16 else np.float32
    inits = {"B": rng.integers(0, 256, (N, kb, blob), dtype=np.uint8),
             "scales": (rng.uniform(0.01, 0.1, N * kb)).astype(npdt)}
    ins = [("A", dtype, [1, M, K] if rank3 else [M, K]), "B", "scales"]
    if zp == "u8":
        inits["zp"] = rng.integers(0, 256, (N, (kb * bits + 7) // 8), dtype=np.uint8)
        ins.append("zp")
    elif zp == "float":
        inits["zp"] = rng.uniform(0, 2 ** bits - 1, N * kb).astype(npdt)
        ins.append("zp")
    elif bias:
        ins.append("")
    if bias:
        ins += ["", "bias"]
        inits["bias"] = f(N, 1.0, npdt)
    case(name, "MatMulNBits", ins, ["Y"], inits, K=K, N=N, bits=bits, block_size=block, accuracy_level=acc)


mnb("mnb_b4_k64_n16_bs32", 1, 64, 16, 4, 32)
mnb("mnb_b4_k100_n24_bs16_zp_bias_rank3", 3, 100, 24, 4, 16, zp="u8", bias=True, rank3=True)
mnb("mnb_b8_k256_n32_bs64_zp", 2, 256, 32, 8, 64, zp="u8")
mnb("mnb_b4_k128_n16_bs32_acc4", 1, 128, 16, 4, 32, acc=4)
mnb("mnb_b4_k192_n8_bs128_fzp_acc4", 4, 192, 8, 4, 128, acc=4, zp="float")
mnb("mnb_b4_k96_n12_bs32_fp16", 2, 96, 12, 4, 32, dtype=F16, bias=True)
mnb("mnb_b8_k512_n16_bs256_acc4", 2, 512, 16, 8, 256, acc=4)
mnb("mnb_b2_k64_n8_bs32", 2, 64, 8, 2, 32)
mnb("mnb_b2_k96_n8_bs16_acc4_zp", 3, 96, 8, 2, 16, acc=4, zp="u8")
mnb("mnb_b8_k80_n8_bs16_zp_bias", 2, 80, 8, 8, 16, zp="u8", bias=True)
mnb("mnb_b4_k100_n12_bs32_acc4_partial", 5, 100, 12, 4, 32, acc=4, zp="u8")
mnb("mnb_b4_k48_n8_bs16_acc4", 1, 48, 8, 4, 16, acc=4)
mnb("mnb_b4_k896_n64_bs32_m20", 20, 896, 64, 4, 32, zp="u8")


# ---- GroupQueryAttention -----------------------------------------------------------------------
def gqa(name, B, S, H, kvH, D, past=0, packed=False, rotary=False, interleaved=0, window=-1, softcap=0.0,
        dtype=F32, scale=None, pos_ids=False, bias=False):
    total = past + S
    npdt = np.float16 if dtype == F16 else np.float32
    inits = {"seqlens_k": np.full(B, total - 1, np.int32), "total_seq": np.array(total, np.int32)}
    if packed:
        ins = [("qkv", dtype, [B, S, (H + 2 * kvH) * D]), "", ""]
    else:
        ins = [("q", dtype, [B, S, H * D]), ("k", dtype, [B, S, kvH * D]), ("v", dtype, [B, S, kvH * D])]
    if past:
        ins += [("past_k", dtype, [B, kvH, past, D]), ("past_v", dtype, [B, kvH, past, D])]
    else:
        ins += ["", ""]
    ins += ["seqlens_k", "total_seq"]
    attrs = dict(num_heads=H, kv_num_heads=kvH)
    if rotary:
        maxs = 32
        ang = np.outer(np.arange(maxs), 1.0 / (10000 ** (np.arange(D // 2) * 2.0 / D)))
        inits["cos"] = np.cos(ang).astype(npdt)
        inits["sin"] = np.sin(ang).astype(npdt)
        ins += ["cos", "sin"]
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
    if pos_ids or bias:
        if not rotary:
            ins += ["", ""]
        if pos_ids:
            inits["pos"] = (past + np.arange(S)[None, :] + np.arange(B)[:, None]).astype(np.int64)
            ins.append("pos")
        else:
            ins.append("")
        if bias:
            ins.append(("ab", dtype, [B, H, S, total]))
    if window > 0:
        attrs["local_window_size"] = window
    if softcap:
        attrs["softcap"] = softcap
    if scale:
        attrs["scale"] = scale
    case(name, "GroupQueryAttention", ins, ["out", "present_k", "present_v"], inits, **attrs)


gqa("gqa_prompt_b1_s5_h4_kv2", 1, 5, 4, 2, 16)
gqa("gqa_prompt_packed_rotary", 1, 6, 4, 1, 16, packed=True, rotary=True)
gqa("gqa_decode_b2_past6_rotary_interleaved", 2, 1, 4, 2, 16, past=6, rotary=True, interleaved=1)
gqa("gqa_prompt_window2", 1, 7, 2, 2, 16, window=2)
gqa("gqa_prompt_b1_window3_softcap", 1, 8, 4, 2, 16, window=3, softcap=1.5)
gqa("gqa_decode_softcap_window", 1, 1, 4, 2, 16, past=9, softcap=2.0, window=4, scale=0.5)
gqa("gqa_prompt_fp16_rotary", 1, 4, 2, 1, 16, rotary=True, dtype=F16)
gqa("gqa_decode_fp16_rotary_window", 2, 1, 4, 2, 16, past=5, rotary=True, dtype=F16, window=3)
gqa("gqa_chunk_past3_s4", 1, 4, 4, 4, 16, past=3, rotary=True)
gqa("gqa_prompt_b2_posids", 2, 3, 2, 1, 16, rotary=True, pos_ids=True)
gqa("gqa_decode_attn_bias", 1, 1, 2, 2, 16, past=5, bias=True)
gqa("gqa_decode_b2_posids", 2, 1, 2, 1, 16, past=4, rotary=True, pos_ids=True)
gqa("gqa_chunk_b1_posids_bias", 1, 3, 2, 1, 16, past=4, rotary=True, pos_ids=True, bias=True)
gqa("gqa_prompt_b2_kv_eq_heads", 2, 4, 2, 2, 32)


# ---- Norms -------------------------------------------------------------------------------------
def skipln(name, simplified, B, S, Hd, beta=True, bias=True, skip_shape=None, dtype=F32, eps=None):
    npdt = np.float16 if dtype == F16 else np.float32
    inits = {"gamma": f(Hd, 1.0, npdt)}
    ins = [("x", dtype, [B, S, Hd]), ("skip", dtype, skip_shape or [B, S, Hd]), "gamma"]
    if not simplified:
        if beta:
            inits["beta"] = f(Hd, 1.0, npdt)
        ins.append("beta" if beta else "")
    if bias:
        inits["bias"] = f(Hd, 1.0, npdt)
        ins.append("bias")
    attrs = {} if eps is None else {"epsilon": eps}
    case(name, "SimplifiedLayerNormalization" if False else ("SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"),
         ins, ["y", "", "", "sum"], inits, **attrs)


skipln("skipln_beta_bias", False, 2, 3, 32)
skipln("skipln_skip2d_nobeta", False, 2, 3, 16, beta=False, bias=False, skip_shape=[3, 16], eps=1e-5)
skipln("skipln_fp16", False, 1, 4, 64, dtype=F16)
skipln("skipsimpln_bias", True, 2, 3, 32)
skipln("skipsimpln_nobias_eps", True, 1, 5, 48, bias=False, eps=1e-6)
case("simpln_axis_last", "SimplifiedLayerNormalization", [("x", F32, [2, 3, 32]), "scale"], ["y"],
     {"scale": f(32)}, domain="", axis=-1, epsilon=1e-6)
case("simpln_fp16_x_f32_scale", "SimplifiedLayerNormalization", [("x", F16, [2, 3, 32]), "scale"], ["y"],
     {"scale": f(32)}, domain="", out_et=F32, axis=-1, epsilon=1e-6)
case("simpln_axis1", "SimplifiedLayerNormalization", [("x", F32, [2, 3, 8]), "scale"], ["y"],
     {"scale": f((3, 8))}, domain="", axis=1, epsilon=1e-5)


# ---- RotaryEmbedding ---------------------------------------------------------------------------
def rope(name, shape, D, rot=0, num_heads=0, interleaved=0, pos_scalar=False):
    maxs = 16
    half = (rot or D) // 2
    ang = np.outer(np.arange(maxs), 1.0 / (10000 ** (np.arange(half) * 2.0 / (rot or D))))
    B, S = shape[0], (shape[1] if len(shape) == 3 else shape[2])
    pos = np.array([3], np.int64) if pos_scalar else rng.integers(0, maxs, (B, S)).astype(np.int64)
    inits = {"pos": pos, "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}
    attrs = dict(interleaved=interleaved)
    if rot:
        attrs.update(rotary_embedding_dim=rot, num_heads=num_heads)
    elif num_heads:
        attrs["num_heads"] = num_heads
    case(name, "RotaryEmbedding", [("x", F32, shape), "pos", "cos", "sin"], ["y"], inits, **attrs)


rope("rope_3d_derived_heads", [2, 3, 64], 16)
rope("rope_3d_interleaved_pos1", [1, 4, 32], 8, interleaved=1, pos_scalar=True)
rope("rope_4d", [1, 2, 5, 16], 16)
rope("rope_3d_partial_dim", [1, 3, 64], 32, rot=16, num_heads=2)


# ---- Gelu family ---------------------------------------------------------------------------------
case("gelu", "Gelu", [("x", F32, [3, 17])], ["y"])
case("fastgelu", "FastGelu", [("x", F32, [2, 3, 8])], ["y"])
case("fastgelu_bias", "FastGelu", [("x", F32, [2, 3, 8]), "b"], ["y"], {"b": f(8)})
case("biasgelu", "BiasGelu", [("x", F32, [2, 5]), "b"], ["y"], {"b": f(5)})
case("quickgelu", "QuickGelu", [("x", F32, [4, 6])], ["y"])
case("quickgelu_alpha", "QuickGelu", [("x", F32, [4, 6])], ["y"], alpha=1.2)
case("fastgelu_fp16", "FastGelu", [("x", F16, [2, 9])], ["y"])


# ---- FusedMatMul ---------------------------------------------------------------------------------
case("fusedmatmul_plain", "FusedMatMul", [("a", F32, [2, 3, 4]), ("b", F32, [2, 4, 5])], ["y"], alpha=0.5)
case("fusedmatmul_transA_transB", "FusedMatMul", [("a", F32, [2, 4, 3]), ("b", F32, [5, 4])], ["y"], transA=1, transB=1, alpha=2.0)
case("fusedmatmul_transBatchA", "FusedMatMul", [("a", F32, [3, 2, 4]), ("b", F32, [2, 4, 5])], ["y"], transBatchA=1)
case("fusedmatmul_transBatchB_transB", "FusedMatMul", [("a", F32, [2, 3, 4]), ("b", F32, [5, 2, 4])], ["y"], transBatchB=1, transB=1)


# ---- GatherBlockQuantized ------------------------------------------------------------------------
def gbq(name, rows, cols, block, bits, zp, idx, dtype=F32):
    npdt = np.float16 if dtype == F16 else np.float32
    per = 8 // bits
    inits = {"data": rng.integers(0, 256, (rows, cols // per), dtype=np.uint8),
             "idx": np.array(idx, np.int64),
             "scales": rng.uniform(0.01, 0.1, (rows, (cols + block - 1) // block)).astype(npdt)}
    ins = ["data", "idx", "scales"]
    if zp:
        nb = (cols + block - 1) // block
        inits["zp"] = rng.integers(0, 256, (rows, (nb + per - 1) // per), dtype=np.uint8)
        ins.append("zp")
    # One float graph input so compare_ort has something to feed: Y = dequant + 0 * x via a second node is
    # overkill; instead the model has no graph inputs.
    node = helper.make_node("GatherBlockQuantized", ins, ["y"], domain=MS, block_size=block, bits=bits,
                            gather_axis=0, quantize_axis=1)
    g = helper.make_graph([node], name, [], [helper.make_tensor_value_info("y", dtype, None)],
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    CASES.append((name, m))


gbq("gbq_u8_b4_bs16_zp", 6, 32, 16, 4, True, [[0, 5], [3, 3]])
gbq("gbq_u8_b4_bs32_nozp", 5, 64, 32, 4, False, [4, 0, 2])
gbq("gbq_u8_b8_bs16", 4, 32, 16, 8, True, [1, 3])
# 3 blocks per row: each row's zero points end in a half-used byte.
gbq("gbq_u8_b4_bs16_zp_odd_blocks", 5, 48, 16, 4, True, [4, 1, -1])


# ---- MultiHeadAttention / Attention --------------------------------------------------------------
def mha(name, B, S, L, N, H, bias=False, kpm=None, causal=0, past=0, ab=False, packed=None):
    hid = N * H
    inits = {}
    if packed == "qkv":
        ins = [("qkv", F32, [B, S, N, 3, H]), "", ""]
    elif packed == "kv":
        ins = [("q", F32, [B, S, hid]), ("kv", F32, [B, L, N, 2, H]), ""]
    else:
        ins = [("q", F32, [B, S, hid]), ("k", F32, [B, L, hid]), ("v", F32, [B, L, hid])]
    if bias:
        inits["bias"] = f(3 * hid)
        ins.append("bias")
    else:
        ins.append("")
    T = past + L
    if kpm == "2d":
        m = np.ones((B, T), np.int32)
        m[0, -2:] = 0
        inits["mask"] = m
        ins.append("mask")
    elif kpm == "1d":
        inits["mask"] = np.array([T - 1] + [T] * (B - 1), np.int32)
        ins.append("mask")
    else:
        ins.append("")
    if ab:
        ins.append(("ab", F32, [1, N, S, T]))
    else:
        ins.append("")
    outs = ["out"]
    if past:
        ins += [("pk", F32, [B, N, past, H]), ("pv", F32, [B, N, past, H])]
        outs += ["present_k", "present_v"]
    while ins and ins[-1] == "":
        ins.pop()
    case(name, "MultiHeadAttention", ins, outs, inits, num_heads=N, unidirectional=causal)


mha("mha_self_bias", 2, 4, 4, 2, 8, bias=True)
mha("mha_cross_mask2d", 2, 3, 5, 2, 4, kpm="2d")
mha("mha_causal_past", 1, 3, 3, 2, 8, causal=1, past=4)
mha("mha_self_ab_causal", 1, 4, 4, 2, 8, ab=True, causal=1)
mha("mha_cross_mask1d", 2, 2, 5, 2, 4, kpm="1d")
mha("mha_self_mask2d_causal_bias", 2, 3, 3, 2, 8, bias=True, kpm="2d", causal=1)


def bert_attn(name, B, S, Din, N, H, mask=None, causal=0, past=0, ab=False):
    hid = N * H
    inits = {"w": f((Din, 3 * hid), 0.3), "b": f(3 * hid, 0.3)}
    ins = [("x", F32, [B, S, Din]), "w", "b"]
    T = past + S
    if mask == "1d":
        inits["mask"] = np.array([S - 1] + [S] * (B - 1), np.int32) + past
        ins.append("mask")
    elif mask == "2d":
        m = np.ones((B, T), np.int32)
        m[-1, :2] = 0
        inits["mask"] = m
        ins.append("mask")
    elif mask == "3d":
        inits["mask"] = rng.integers(0, 2, (B, S, T)).astype(np.int32)
        inits["mask"][:, :, 0] = 1
        ins.append("mask")
    else:
        ins.append("")
    outs = ["out"]
    if past:
        ins.append(("past", F32, [2, B, N, past, H]))
        outs.append("present")
    else:
        ins.append("")
    if ab:
        ins.append(("ab", F32, [B, N, S, T]))
    while ins and ins[-1] == "":
        ins.pop()
    case(name, "Attention", ins, outs, inits, num_heads=N, unidirectional=causal)


bert_attn("attn_bert_mask1d", 2, 4, 16, 2, 8, mask="1d")
bert_attn("attn_bert_mask2d_ab", 2, 3, 8, 2, 4, mask="2d", ab=True)
bert_attn("attn_gpt2_causal_past", 1, 3, 16, 2, 8, causal=1, past=2)
bert_attn("attn_mask3d", 1, 3, 8, 1, 8, mask="3d")


# ---- MatMulIntegerToFloat / DynamicQuantizeMatMul ---------------------------------------------------
U8, I8 = TensorProto.UINT8, TensorProto.INT8


def q8(shape, signed):
    return rng.integers(-128, 128, shape).astype(np.int8) if signed else rng.integers(0, 256, shape).astype(np.uint8)


def mitf(name, M, K, N, a_signed, b_signed, per_col, bias, zp=True, rank3=False):
    inits = {"b": q8([K, N], b_signed), "as": np.array(0.013, np.float32),
             "bs": (rng.uniform(0.002, 0.02, [N]) if per_col else np.array(0.007)).astype(np.float32)}
    ins = [("a", I8 if a_signed else U8, [2, M, K] if rank3 else [M, K]), "b", "as", "bs"]
    if zp:
        inits["az"] = q8([], a_signed)
        inits["bz"] = q8([N] if per_col else [], b_signed)
        ins += ["az", "bz"]
    if bias:
        if not zp:
            ins += ["", ""]
        inits["bias"] = f(N)
        ins.append("bias")
    case(name, "MatMulIntegerToFloat", ins, ["y"], inits, out_et=F32)


mitf("matmulintegertofloat_u8s8", 7, 40, 24, False, True, False, False)
mitf("matmulintegertofloat_u8u8_percol_bias", 5, 33, 17, False, False, True, True)
mitf("matmulintegertofloat_s8s8_rank3", 3, 64, 40, True, True, True, True, rank3=True)
mitf("matmulintegertofloat_nozp_bias", 4, 16, 32, False, True, False, True, zp=False)


def dqmm(name, M, K, N, per_col, bias, b_signed=True):
    inits = {"b": q8([K, N], b_signed),
             "bs": (rng.uniform(0.002, 0.02, [N]) if per_col else np.array(0.007)).astype(np.float32),
             "bz": q8([N] if per_col else [], b_signed) if not b_signed else np.zeros([N] if per_col else [], np.int8)}
    ins = [("a", F32, [M, K]), "b", "bs", "bz"]
    if bias:
        inits["bias"] = f(N)
        ins.append("bias")
    case(name, "DynamicQuantizeMatMul", ins, ["y"], inits)


dqmm("dynamicquantizematmul", 6, 48, 20, False, False)
dqmm("dynamicquantizematmul_percol_bias", 9, 30, 33, True, True)
dqmm("dynamicquantizematmul_u8_weights", 5, 24, 16, True, False, b_signed=False)


# ---- QLinear* (QOperator-quantized models) ---------------------------------------------------------
def qscal(v):
    return np.array(v, np.float32)


def qlin_binary(name, op, sa, sb, signed):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"as": qscal(0.021), "az": np.array(-5 if signed else 121, npdt), "bs": qscal(0.017),
             "bz": np.array(3 if signed else 130, npdt), "cs": qscal(0.04 if op == "QLinearAdd" else 0.003),
             "cz": np.array(-2 if signed else 127, npdt)}
    case(name, op, [("a", et, sa), "as", "az", ("b", et, sb), "bs", "bz", "cs", "cz"], ["y"], inits, out_et=et)


qlin_binary("qlinearadd_u8", "QLinearAdd", [2, 3, 8], [2, 3, 8], False)
qlin_binary("qlinearadd_s8_bcast", "QLinearAdd", [2, 3, 8], [8], True)
qlin_binary("qlinearmul_u8_bcast", "QLinearMul", [4, 1, 6], [1, 5, 6], False)
qlin_binary("qlinearmul_s8", "QLinearMul", [3, 7], [3, 7], True)


def qlin_unary(name, op, signed, **attrs):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"xs": qscal(0.05), "xz": np.array(-10 if signed else 118, npdt), "ys": qscal(1.0 / 256 if op == "QLinearSigmoid" else 0.03),
             "yz": np.array(-128 if (signed and op == "QLinearSigmoid") else (0 if op == "QLinearSigmoid" else (5 if signed else 100)), npdt)}
    case(name, op, [("x", et, [2, 4, 9]), "xs", "xz", "ys", "yz"], ["y"], inits, out_et=et, **attrs)


qlin_unary("qlinearsigmoid_u8", "QLinearSigmoid", False)
qlin_unary("qlinearsigmoid_s8", "QLinearSigmoid", True)
qlin_unary("qlinearleakyrelu_u8", "QLinearLeakyRelu", False, alpha=0.1)
qlin_unary("qlinearleakyrelu_s8", "QLinearLeakyRelu", True, alpha=0.2)


def qlin_gap(name, shape, signed, channels_last=0):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"xs": qscal(0.03), "xz": np.array(4 if signed else 125, npdt), "ys": qscal(0.011), "yz": np.array(-3 if signed else 90, npdt)}
    case(name, "QLinearGlobalAveragePool", [("x", et, shape), "xs", "xz", "ys", "yz"], ["y"], inits, out_et=et,
         channels_last=channels_last)


qlin_gap("qlineargap_u8", [2, 5, 7, 7], False)
qlin_gap("qlineargap_s8_nhwc", [2, 6, 6, 8], True, channels_last=1)


def qlin_concat(name, shapes, axis, signed, same=False):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"ys": qscal(0.05), "yz": np.array(2 if signed else 128, npdt)}
    ins = ["ys", "yz"]
    for i, sh in enumerate(shapes):
        inits[f"s{i}"] = qscal(0.05 if same else 0.02 + 0.015 * i)
        inits[f"z{i}"] = np.array(2 if signed else 128, npdt) if same else np.array((-7 + 5 * i) if signed else (100 + 20 * i), npdt)
        ins += [(f"x{i}", et, sh), f"s{i}", f"z{i}"]
    case(name, "QLinearConcat", ins, ["y"], inits, out_et=et, axis=axis)


qlin_concat("qlinearconcat_u8", [[1, 3, 4, 4], [1, 5, 4, 4]], 1, False)
qlin_concat("qlinearconcat_s8_axis_last", [[2, 3, 2], [2, 3, 5], [2, 3, 1]], -1, True)
qlin_concat("qlinearconcat_u8_same_params", [[2, 4], [3, 4]], 0, False, same=True)


def qlin_pool(name, signed, shape=(1, 4, 9, 11), **attrs):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"xs": qscal(0.04), "xz": np.array(3 if signed else 120, npdt), "ys": qscal(0.02), "yz": np.array(-1 if signed else 110, npdt)}
    case(name, "QLinearAveragePool", [("x", et, list(shape)), "xs", "xz", "ys", "yz"], ["y"], inits, out_et=et, **attrs)


qlin_pool("qlinearavgpool_u8_3x3_pad", False, kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
qlin_pool("qlinearavgpool_s8_2x2_s2_ceil", True, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
qlin_pool("qlinearavgpool_u8_count_pad", False, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
qlin_pool("qlinearavgpool_s8_channels_last", True, shape=(2, 9, 11, 20), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2],
          channels_last=1)


def qlin_softmax(name, signed, **attrs):
    et = I8 if signed else U8
    npdt = np.int8 if signed else np.uint8
    inits = {"xs": qscal(0.08), "xz": np.array(0 if signed else 128, npdt), "ys": qscal(1.0 / 256),
             "yz": np.array(-128 if signed else 0, npdt)}
    case(name, "QLinearSoftmax", [("x", et, [3, 5, 16]), "xs", "xz", "ys", "yz"], ["y"], inits, out_et=et, **attrs)


qlin_softmax("qlinearsoftmax_u8", False, axis=-1, opset=13)
qlin_softmax("qlinearsoftmax_s8", True, axis=-1, opset=13)


def qgemm(name, M, K, N, trans_a, trans_b, per_col, bias, quant_out, a_signed=False, b_signed=True, y_signed=False):
    inits = {"as": qscal(0.02), "az": np.array(-3 if a_signed else 120, np.int8 if a_signed else np.uint8),
             "b": q8([N, K] if trans_b else [K, N], b_signed),
             "bs": (rng.uniform(0.002, 0.02, [N]) if per_col else np.array(0.008)).astype(np.float32),
             "bz": (q8([N] if per_col else [], b_signed) if not b_signed else np.zeros([N] if per_col else [], np.int8))}
    ins = [("a", I8 if a_signed else U8, [K, M] if trans_a else [M, K]), "as", "az", "b", "bs", "bz"]
    if bias or quant_out:
        if bias:
            inits["c"] = rng.integers(-2000, 2000, [N]).astype(np.int32)
        ins.append("c" if bias else "")
    et = F32
    if quant_out:
        inits["ys"] = qscal(0.05)
        inits["yz"] = np.array(-4 if y_signed else 128, np.int8 if y_signed else np.uint8)
        ins += ["ys", "yz"]
        et = I8 if y_signed else U8
    case(name, "QGemm", ins, ["y"], inits, out_et=et, transA=int(trans_a), transB=int(trans_b), alpha=1.0)


qgemm("qgemm_float_out", 5, 32, 20, False, True, False, True, False)
qgemm("qgemm_u8_out_percol", 4, 24, 17, False, True, True, True, True)
qgemm("qgemm_s8_out_transa", 3, 16, 9, True, False, False, False, True, a_signed=True, y_signed=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, m in CASES:
        onnx.save(m, os.path.join(out, name + ".onnx"))
    print(f"wrote {len(CASES)} cases to {out}")


if __name__ == "__main__":
    main()
