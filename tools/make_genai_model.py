#!/usr/bin/python3
"""Writes a Qwen2-like decoder-only LLM as a model folder of the kind onnxruntime-genai's model builder
writes: model.onnx + model.onnx.data (external weights), genai_config.json, tokenizer.json.

Weights are seeded random and defined directly in the int4 domain (int4 codes + float32 block scales,
block 32 along K, symmetric: zero point 8 / signed int4), so every runtime and tools/genai_reference.py
dequantize them to the very same float32 values. With a tied lm_head the float32 embedding table is the
dequantized lm_head weight.

Graph styles:
  --style genai  opset 21 + com.microsoft: Gather embedding, SimplifiedLayerNormalization /
                 SkipSimplifiedLayerNormalization, MatMulNBits (bits 4, block 32, accuracy_level 4) for every
                 linear layer and lm_head, GroupQueryAttention (do_rotary=1, cos/sin caches,
                 past/present shared buffer), seqlens_k = ReduceSum(attention_mask) - 1 (int32),
                 total_sequence_length = Shape(attention_mask)[1] (int32), as the genai builder derives them.
  --style onnx   pure ONNX opset 24: RMSNormalization, RotaryEmbedding (23), blocked int4
                 DequantizeLinear (axis 0, block_size 32) + MatMul, TensorScatter writing the new K/V rows
                 into a fixed-capacity cache at write_indices, Attention (24) with an explicit causal bool
                 mask and nonpad_kv_seqlen. Same IO as the genai style (see genai_config.json
                 "nxrt" section): the cache capacity is the past tensors' sequence length, the write index
                 is ReduceSum(attention_mask) - sequence_length, so a runtime feeds it exactly like a
                 GroupQueryAttention model with past_present_share_buffer.

usage: make_genai_model.py OUT_DIR [--style genai|onnx] [--size tiny|qwen2.5-0.5b] [--seed N]
                           [--tokenizer PATH/tokenizer.json | --tokenizer bytelevel] [--untied]
                           [--context-length N] [--accuracy-level N] [--fp16-scales]
                           [--quantized-embedding]

--tokenizer PATH copies a real tokenizer.json (and the tokenizer_config.json beside it). --tokenizer
bytelevel writes a small real byte-level BPE tokenizer (see write_bytelevel_tokenizer) with a ChatML
chat template, so text round-trips through `nxrt generate` / `nxrt chat` can be tested offline.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

SIZES = {
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, head=16, inter=128, vocab=512, context=2048),
    "qwen2.5-0.5b": dict(layers=24, hidden=896, heads=14, kv_heads=2, head=64, inter=4864, vocab=151936,
                         context=4096),
}
BLOCK = 32
ROPE_THETA = 1000000.0
RMS_EPS = 1e-6
INT4 = 22  # TensorProto.INT4 (onnx >= 1.16; python3-onnx 1.12 has no constant for it)


# ---------------------------------------------------------------- weights
class Linear:
    """A [K in, N out] linear layer in the int4 domain: codes uint8 [N, K] in 1..15 (value = code - 8),
    scales float32 [N, K/BLOCK]."""

    fp16_scales = False  # --fp16-scales: every scale a float16 value (see main)

    def __init__(self, rng, k, n, gain=1.0):
        assert k % BLOCK == 0
        self.k, self.n = k, n
        self.codes = rng.integers(1, 16, size=(n, k), dtype=np.uint8)
        base = gain / (np.sqrt(14.0 / 3.0 * 4.0) * np.sqrt(k))  # std of code-8 on 1..15 is sqrt(56/3)
        self.scales = (rng.uniform(0.5, 1.5, size=(n, k // BLOCK)) * base).astype(np.float32)
        if Linear.fp16_scales:
            self.scales = self.scales.astype(np.float16).astype(np.float32)

    def dequant_nk(self):
        w = (self.codes.astype(np.int8) - 8).astype(np.float32).reshape(self.n, self.k // BLOCK, BLOCK)
        return (w * self.scales[:, :, None]).reshape(self.n, self.k)

    def matmulnbits_b(self):
        """MatMulNBits B: uint8 [N, K/BLOCK, BLOCK/2], element k of row n in byte k/2, low nibble first."""
        c = self.codes.reshape(self.n, self.k // 2, 2)
        packed = (c[:, :, 0] | (c[:, :, 1] << 4)).astype(np.uint8)
        return packed.reshape(self.n, self.k // BLOCK, BLOCK // 2)

    def int4_kn(self):
        """int4 [K, N] (two's complement nibbles, element 2i in the low nibble of byte i, row-major),
        scales [K/BLOCK, N] for DequantizeLinear(axis=0, block_size=BLOCK)."""
        v = (self.codes.T.astype(np.int16) - 8).astype(np.uint8) & 0x0F  # [K, N]
        flat = np.ascontiguousarray(v).reshape(-1)
        if flat.size % 2:
            flat = np.concatenate([flat, np.zeros(1, np.uint8)])
        packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
        return packed, np.ascontiguousarray(self.scales.T)


def rope_caches(context, head):
    inv = 1.0 / (ROPE_THETA ** (np.arange(0, head, 2, dtype=np.float64) / head))
    ang = np.outer(np.arange(context, dtype=np.float64), inv)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


# ---------------------------------------------------------------- external data
class Store:
    """Collects initializers; big ones go to the external data file (4096-aligned offsets)."""

    def __init__(self, data_path, location):
        self.f = open(data_path, "wb")
        self.location = location
        self.inits = []

    def add(self, name, arr=None, dtype=None, dims=None, raw=None):
        if any(t.name == name for t in self.inits):
            return name  # added already (the lm_head weights a quantized embedding shares)
        t = TensorProto()
        t.name = name
        if arr is not None:
            arr = np.asarray(arr)
            if arr.ndim:  # (np.ascontiguousarray would turn a scalar into shape [1])
                arr = np.ascontiguousarray(arr)
            dims = arr.shape
            dtype = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
                     np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
                     np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float16): TensorProto.FLOAT16}[arr.dtype]
            raw = arr.tobytes()
        t.data_type = dtype
        t.dims.extend(int(d) for d in dims)
        if len(raw) < 1024:
            t.raw_data = raw
        else:
            off = self.f.tell()
            pad = (-off) % 4096
            if pad:
                self.f.write(b"\0" * pad)
                off += pad
            self.f.write(raw)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", self.location), ("offset", str(off)), ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = k, v
        self.inits.append(t)
        return name

    def close(self):
        self.f.close()


# ---------------------------------------------------------------- graph
class Builder:
    """Emits nodes; `plain` linear layers are MatMul over dequantized weights of dtype `fdt` (the int4
    values, so every style draws the same numbers)."""

    def __init__(self, cfg, style, store, accuracy_level, plain=False, fdt=np.float32):
        self.cfg, self.style, self.s = cfg, style, store
        self.acc = accuracy_level
        self.plain, self.fdt = plain, fdt
        self.nodes = []
        self.n = 0

    def node(self, op, inputs, outputs=None, domain=None, name=None, **attrs):
        self.n += 1
        name = name or f"/model/{op}_{self.n}"
        if outputs is None:
            outputs = [f"{name}/output_0"]
        elif isinstance(outputs, int):
            outputs = [f"{name}/output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, name, arr):
        return self.s.add(name, np.asarray(arr))

    def linear(self, x, lin, prefix, bias=None):
        if self.plain:
            w = self.s.add(prefix + ".weight", np.ascontiguousarray(lin.dequant_nk().T).astype(self.fdt))
            y = self.node("MatMul", [x, w], name=prefix + "/MatMul")
        elif self.style == "genai":
            b = self.s.add(prefix + ".weight.MatMulNBits.qweight", lin.matmulnbits_b())
            sc = self.s.add(prefix + ".weight.MatMulNBits.scales", lin.scales.reshape(-1))
            y = self.node("MatMulNBits", [x, b, sc], domain="com.microsoft", name=prefix + "/MatMulNBits",
                          K=lin.k, N=lin.n, bits=4, block_size=BLOCK, accuracy_level=self.acc)
        else:
            packed, sc = lin.int4_kn()
            w = self.s.add(prefix + ".weight.int4", dtype=INT4, dims=(lin.k, lin.n), raw=packed.tobytes())
            sc = self.s.add(prefix + ".weight.scales", sc)
            wd = self.node("DequantizeLinear", [w, sc], name=prefix + "/DequantizeLinear", axis=0,
                           block_size=BLOCK)
            y = self.node("MatMul", [x, wd], name=prefix + "/MatMul")
        if bias is not None:
            y = self.node("Add", [y, self.s.add(prefix + ".bias", bias.astype(self.fdt))], name=prefix + "/BiasAdd")
        return y


def build(args):
    cfg = dict(SIZES[args.size])
    if args.context_length:
        cfg["context"] = args.context_length
    tok_info = None
    if args.tokenizer == "bytelevel":
        os.makedirs(args.out, exist_ok=True)
        args.tokenizer = os.path.join(args.out, "tokenizer.json")
        write_bytelevel_tokenizer(args.out)
    if args.tokenizer:
        tok_info = read_tokenizer(args.tokenizer)
        if args.size == "tiny":
            cfg["vocab"] = tok_info["size"]
        elif tok_info["size"] > cfg["vocab"]:
            sys.exit(f"tokenizer has {tok_info['size']} ids, more than the model vocab {cfg['vocab']}")
    if args.dtype == "fp16" and args.style != "genai":
        sys.exit("--dtype fp16 is written for --style genai")
    os.makedirs(args.out, exist_ok=True)
    if args.style in ("optimum", "hybrid"):
        return build_plain(args, cfg, tok_info)
    if args.style == "gpt2":
        return build_gpt2(args, cfg, tok_info)
    L, H, NH, KVH, D, I, V = (cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "head", "inter", "vocab"))
    style = args.style
    fp16 = args.dtype == "fp16"
    fdt = np.float16 if fp16 else np.float32
    store = Store(os.path.join(args.out, "model.onnx.data"), "model.onnx.data")
    b = Builder(cfg, style, store, args.accuracy_level, plain=fp16, fdt=fdt)
    rng = np.random.default_rng(args.seed)
    f32 = np.float32

    # ---- weights, drawn in a fixed order
    lm = Linear(rng, H, V, gain=1.0)
    if args.untied:
        embed = (rng.standard_normal((V, H)) * 0.5).astype(f32)
    else:
        embed = lm.dequant_nk()
    layers = []
    for _ in range(L):
        layers.append(dict(
            ln1=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32),
            q=Linear(rng, H, NH * D), k=Linear(rng, H, KVH * D), v=Linear(rng, H, KVH * D),
            qb=(0.1 * rng.standard_normal(NH * D)).astype(f32),
            kb=(0.1 * rng.standard_normal(KVH * D)).astype(f32),
            vb=(0.1 * rng.standard_normal(KVH * D)).astype(f32),
            o=Linear(rng, NH * D, H),
            ln2=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32),
            gate=Linear(rng, H, I), up=Linear(rng, H, I), down=Linear(rng, I, H)))
    norm_w = (2.0 + 0.1 * rng.standard_normal(H)).astype(f32)
    cos, sin = rope_caches(cfg["context"], D)

    # ---- graph
    ids, mask = "input_ids", "attention_mask"
    if args.quantized_embedding:
        # The tied lm_head's int4 weights as the embedding table (what onnxruntime-genai's builder emits
        # for int4 tied embeddings): GatherBlockQuantized over [V, H/2] codes and [V, H/BLOCK] scales,
        # Reshape views of the lm_head MatMulNBits initializers, so the file holds them once.
        qw = store.add("lm_head.weight.MatMulNBits.qweight", lm.matmulnbits_b())
        qs = store.add("lm_head.weight.MatMulNBits.scales", lm.scales.reshape(-1))
        qw2 = b.node("Reshape", [qw, b.const("/model/constants/embed_qweight_shape", np.array([V, H // 2], np.int64))],
                     name="/model/embed_tokens/qweight/Reshape")
        qs2 = b.node("Reshape", [qs, b.const("/model/constants/embed_scales_shape", np.array([V, H // BLOCK], np.int64))],
                     name="/model/embed_tokens/scales/Reshape")
        emb = b.node("GatherBlockQuantized", [qw2, ids, qs2], domain="com.microsoft",
                     name="/model/embed_tokens/GatherBlockQuantized", bits=4, block_size=BLOCK, gather_axis=0,
                     quantize_axis=1)
    else:
        emb = b.node("Gather", [store.add("model.embed_tokens.weight", embed.astype(fdt)), ids],
                     name="/model/embed_tokens/Gather")
    cos_n = store.add("cos_cache", cos.astype(fdt))
    sin_n = store.add("sin_cache", sin.astype(fdt))
    one = b.const("/model/constants/INT64/1", np.array(1, np.int64))
    axes1 = b.const("/model/constants/INT64/[1]", np.array([1], np.int64))
    if style == "genai":
        rs = b.node("ReduceSum", [mask, axes1], name="/model/attn_mask_reformat/attn_mask_subgraph/ReduceSum",
                    keepdims=0)
        sub = b.node("Sub", [rs, one], name="/model/attn_mask_reformat/attn_mask_subgraph/Sub")
        seqlens_k = b.node("Cast", [sub], name="/model/attn_mask_reformat/attn_mask_subgraph/Sub/Cast",
                           to=TensorProto.INT32)
        shp = b.node("Shape", [mask], name="/model/attn_mask_reformat/attn_mask_subgraph/Shape")
        g = b.node("Gather", [shp, one], name="/model/attn_mask_reformat/attn_mask_subgraph/Gather", axis=0)
        total_len = b.node("Cast", [g], name="/model/attn_mask_reformat/attn_mask_subgraph/Gather/Cast",
                           to=TensorProto.INT32)
    else:
        zero = b.const("/model/constants/INT64/0", np.array(0, np.int64))
        total = b.node("ReduceSum", [mask, axes1], name="/model/cache/total_len", keepdims=0)  # [B]
        sshape = b.node("Shape", [ids], name="/model/cache/ids_shape")
        s_len = b.node("Gather", [sshape, one], name="/model/cache/seq_len", axis=0)  # scalar
        write_idx = b.node("Sub", [total, s_len], name="/model/cache/write_indices")  # [B]
        rng_s = b.node("Range", [zero, s_len, one], name="/model/cache/range_s")  # [S]
        pos = b.node("Add", [b.node("Unsqueeze", [write_idx, axes1], name="/model/cache/wi_unsq"), rng_s],
                     name="/model/cache/position_ids")  # [B, S]
        pshape = b.node("Shape", ["past_key_values.0.key"], name="/model/cache/past_shape")
        cap = b.node("Gather", [pshape, b.const("/model/constants/INT64/2", np.array(2, np.int64))],
                     name="/model/cache/capacity", axis=0)
        kpos = b.node("Range", [zero, cap, one], name="/model/cache/range_cap")  # [cap]
        axes2 = b.const("/model/constants/INT64/[2]", np.array([2], np.int64))
        le = b.node("LessOrEqual", [kpos, b.node("Unsqueeze", [pos, axes2], name="/model/cache/pos_unsq")],
                    name="/model/cache/causal")  # [B, S, cap]
        attn_mask = b.node("Unsqueeze", [le, axes1], name="/model/cache/attn_mask")  # [B, 1, S, cap]
        shape_q = b.const("/model/constants/shape_q", np.array([0, 0, NH, D], np.int64))
        shape_kv = b.const("/model/constants/shape_kv", np.array([0, 0, KVH, D], np.int64))
        shape_y = b.const("/model/constants/shape_y", np.array([0, 0, NH * D], np.int64))

    x = emb
    residual = None
    carry = None  # output of the previous sublayer, added to the residual by the next norm
    io_past, io_present = [], []

    def norm(x_in, w, pfx):
        nonlocal residual
        wn = store.add(pfx + ".weight", w.astype(fdt))
        if style == "genai":
            if carry_is_none[0]:
                y = b.node("SimplifiedLayerNormalization", [x_in, wn], name=pfx + "/SimplifiedLayerNorm",
                           axis=-1, epsilon=RMS_EPS, stash_type=1)
                residual = x_in
            else:
                outs = [pfx + "/output_0", "", "", pfx + "/output_3"]
                b.node("SkipSimplifiedLayerNormalization", [x_in, residual, wn], outputs=outs,
                       domain="com.microsoft", name=pfx + "/SkipLayerNorm", epsilon=RMS_EPS)
                y, residual = outs[0], outs[3]
        else:
            if not carry_is_none[0]:
                x_in = b.node("Add", [x_in, residual], name=pfx + "/ResidualAdd")
            residual = x_in
            y = b.node("RMSNormalization", [x_in, wn], name=pfx + "/RMSNorm", axis=-1, epsilon=RMS_EPS,
                       stash_type=1)
        carry_is_none[0] = False
        return y

    carry_is_none = [True]
    for i, lw in enumerate(layers):
        p = f"/model/layers.{i}"
        xn = norm(x, lw["ln1"], f"model.layers.{i}.input_layernorm")
        q = b.linear(xn, lw["q"], f"model.layers.{i}.attn.q_proj", lw["qb"])
        k = b.linear(xn, lw["k"], f"model.layers.{i}.attn.k_proj", lw["kb"])
        v = b.linear(xn, lw["v"], f"model.layers.{i}.attn.v_proj", lw["vb"])
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        ok, ov = f"present.{i}.key", f"present.{i}.value"
        io_past += [pk, pv]
        io_present += [ok, ov]
        if style == "genai":
            attn = b.node("GroupQueryAttention", [q, k, v, pk, pv, seqlens_k, total_len, cos_n, sin_n],
                          outputs=[f"{p}/attn/GroupQueryAttention/output_0", ok, ov], domain="com.microsoft",
                          name=f"{p}/attn/GroupQueryAttention", num_heads=NH, kv_num_heads=KVH, do_rotary=1,
                          rotary_interleaved=0, local_window_size=-1, softcap=0.0)[0]
        else:
            def heads(t, shape, nm):
                r = b.node("Reshape", [t, shape], name=f"{p}/attn/{nm}/Reshape")
                return b.node("Transpose", [r], name=f"{p}/attn/{nm}/Transpose", perm=[0, 2, 1, 3])
            q4 = b.node("RotaryEmbedding", [heads(q, shape_q, "q"), cos_n, sin_n, pos], name=f"{p}/attn/q_rotary",
                        interleaved=0)
            k4 = b.node("RotaryEmbedding", [heads(k, shape_kv, "k"), cos_n, sin_n, pos],
                        name=f"{p}/attn/k_rotary", interleaved=0)
            v4 = heads(v, shape_kv, "v")
            b.node("TensorScatter", [pk, k4, write_idx], outputs=[ok], name=f"{p}/attn/k_cache", axis=2,
                   mode="linear")
            b.node("TensorScatter", [pv, v4, write_idx], outputs=[ov], name=f"{p}/attn/v_cache", axis=2,
                   mode="linear")
            y4 = b.node("Attention", [q4, ok, ov, attn_mask, "", "", total], name=f"{p}/attn/Attention",
                        is_causal=0)
            yt = b.node("Transpose", [y4], name=f"{p}/attn/y/Transpose", perm=[0, 2, 1, 3])
            attn = b.node("Reshape", [yt, shape_y], name=f"{p}/attn/y/Reshape")
        o = b.linear(attn, lw["o"], f"model.layers.{i}.attn.o_proj")
        hn = norm(o, lw["ln2"], f"model.layers.{i}.post_attention_layernorm")
        gt = b.linear(hn, lw["gate"], f"model.layers.{i}.mlp.gate_proj")
        up = b.linear(hn, lw["up"], f"model.layers.{i}.mlp.up_proj")
        act = b.node("Mul", [gt, b.node("Sigmoid", [gt], name=f"{p}/mlp/act_fn/Sigmoid")],
                     name=f"{p}/mlp/act_fn/Mul")
        m = b.node("Mul", [act, up], name=f"{p}/mlp/Mul")
        x = b.linear(m, lw["down"], f"model.layers.{i}.mlp.down_proj")
    xf = norm(x, norm_w, "model.norm")
    logits = b.linear(xf, lm, "lm_head")
    b.nodes[-1].output[0] = "logits"
    store.close()

    # ---- IO
    kv_len = "past_sequence_length" if style == "genai" else "max_sequence_length"
    pres_len = "total_sequence_length" if style == "genai" else "max_sequence_length"
    inputs = [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    ft = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    inputs += [helper.make_tensor_value_info(n, ft, ["batch_size", KVH, kv_len, D]) for n in io_past]
    outputs = [helper.make_tensor_value_info("logits", ft, ["batch_size", "sequence_length", V])]
    outputs += [helper.make_tensor_value_info(n, ft, ["batch_size", KVH, pres_len, D]) for n in io_present]
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs, initializer=store.inits)
    if style == "genai":
        opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
        ir = 10
    else:
        opsets = [helper.make_opsetid("", 24)]
        ir = 11
    model = helper.make_model(graph, opset_imports=opsets, producer_name="nxrt make_genai_model.py")
    model.ir_version = ir
    with open(os.path.join(args.out, "model.onnx"), "wb") as fh:
        fh.write(model.SerializeToString())

    # ---- tokenizer + genai_config.json
    nxrt = {
        "builder": "tools/make_genai_model.py",
        "style": style,
        "dtype": args.dtype,
        "size": args.size,
        "seed": args.seed,
        "tied_lm_head": not args.untied,
        "quantized_embedding": args.quantized_embedding,
        "fp16_scales": args.fp16_scales,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "intermediate_size": I,
        "quant": {"bits": 4, "block_size": BLOCK, "symmetric": True,
                  "accuracy_level": args.accuracy_level if style == "genai" and not fp16 else None},
        "kv_cache": ("GroupQueryAttention past/present, [batch, kv_heads, seq, head_size]; with "
                     "past_present_share_buffer the past and present are one [batch, kv_heads, max_length, "
                     "head_size] buffer, new rows written at ReduceSum(attention_mask) - sequence_length"
                     if style == "genai" else
                     "static cache: past_key_values.%d.* and present.%d.* are [batch, kv_heads, capacity, "
                     "head_size] (capacity = the past tensors' length, at most context_length); present = "
                     "TensorScatter(past, new rows, write_indices = ReduceSum(attention_mask) - "
                     "sequence_length); attention covers keys j <= write_index + i (nonpad_kv_seqlen = "
                     "ReduceSum(attention_mask)); feed present back as past (or share one buffer)"),
    }
    write_folder_config(args, tok_info, V, cfg["context"], "qwen2", "model.onnx",
                        dict(head_size=D, hidden_size=H, num_attention_heads=NH, num_hidden_layers=L,
                             num_key_value_heads=KVH),
                        {"input_ids": "input_ids", "attention_mask": "attention_mask",
                         "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
                        {"logits": "logits", "present_key_names": "present.%d.key",
                         "present_value_names": "present.%d.value"},
                        share_buffer=not args.no_share_buffer, nxrt=nxrt)


def write_folder_config(args, tok_info, V, context, model_type, filename, decoder, inputs, outputs, share_buffer,
                        nxrt):
    """The tokenizer files and genai_config.json of a model folder (onnxruntime-genai's layout)."""
    if tok_info:
        dst = os.path.join(args.out, "tokenizer.json")
        if os.path.abspath(args.tokenizer) != os.path.abspath(dst):
            shutil.copyfile(args.tokenizer, dst)
            side = os.path.join(os.path.dirname(args.tokenizer), "tokenizer_config.json")
            if os.path.exists(side):
                shutil.copyfile(side, os.path.join(args.out, "tokenizer_config.json"))
        bos, eos, pad = tok_info["bos"], tok_info["eos"], tok_info["pad"]
    else:
        write_synthetic_tokenizer(os.path.join(args.out, "tokenizer.json"), V)
        bos, eos, pad = 1, 2, 0
    dec = {"session_options": {"log_id": "onnxruntime-genai", "provider_options": []}, "filename": filename}
    dec.update(decoder)
    dec["inputs"] = inputs
    dec["outputs"] = outputs
    gc = {
        "model": {
            "bos_token_id": bos,
            "context_length": context,
            "decoder": dec,
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": model_type,
            "vocab_size": V,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": False,
            "early_stopping": True,
            "length_penalty": 1.0,
            "max_length": context,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": share_buffer,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 1,
            "top_p": 1.0,
        },
        "nxrt": nxrt,
    }
    with open(os.path.join(args.out, "genai_config.json"), "w") as fh:
        json.dump(gc, fh, indent=4)
        fh.write("\n")


# ---------------------------------------------------------------- plain-op styles (optimum, hybrid)
MIN_F32 = float(np.finfo(np.float32).min)


class PlainOps:
    """Plain ai.onnx (opset 21) building blocks of a Hugging Face optimum style decoder."""

    def __init__(self, b, store):
        self.b, self.s = b, store
        self.c = {}

    def const(self, name, arr):
        if name not in self.c:
            self.c[name] = self.s.add("/model/constants/" + name, np.asarray(arr))
        return self.c[name]

    def i64(self, name, v):
        return self.const(name, np.array(v, np.int64))

    def rmsnorm(self, x, w, pfx):
        b = self.b
        sq = b.node("Mul", [x, x], name=pfx + "/Square")
        ms = b.node("ReduceMean", [sq, self.i64("axes_last", [-1])], name=pfx + "/ReduceMean", keepdims=1)
        den = b.node("Sqrt", [b.node("Add", [ms, self.const("eps", np.array(RMS_EPS, np.float32))],
                                     name=pfx + "/AddEps")], name=pfx + "/Sqrt")
        y = b.node("Div", [x, den], name=pfx + "/Div")
        return b.node("Mul", [y, self.s.add(pfx + ".weight", w)], name=pfx + "/MulWeight")

    def rotary(self, xh, cos4, sin4, D, pfx):
        """Rotate-half rotary over [B, heads, S, D] with cos/sin [B, 1, S, D]."""
        b = self.b
        half = D // 2
        x1 = b.node("Slice", [xh, self.i64("s0", [0]), self.i64(f"s{half}", [half]), self.i64("axes_last", [-1])],
                    name=pfx + "/x1")
        x2 = b.node("Slice", [xh, self.i64(f"s{half}", [half]), self.i64("smax", [2 ** 62]), self.i64("axes_last", [-1])],
                    name=pfx + "/x2")
        rot = b.node("Concat", [b.node("Neg", [x2], name=pfx + "/neg"), x1], name=pfx + "/rot", axis=-1)
        return b.node("Add", [b.node("Mul", [xh, cos4], name=pfx + "/xcos"),
                              b.node("Mul", [rot, sin4], name=pfx + "/rsin")], name=pfx + "/rotary")

    def heads(self, t, nh, D, pfx):
        b = self.b
        r = b.node("Reshape", [t, self.i64(f"shape_heads_{nh}", [0, 0, nh, D])], name=pfx + "/Reshape")
        return b.node("Transpose", [r], name=pfx + "/Transpose", perm=[0, 2, 1, 3])

    def repeat_kv(self, t, group, nh, D, pfx):
        """[B, kv, T, D] -> [B, kv * group, T, D] (each KV head serves `group` query heads)."""
        if group == 1:
            return t
        b = self.b
        u = b.node("Unsqueeze", [t, self.i64("axes2", [2])], name=pfx + "/Unsqueeze")
        e = b.node("Expand", [u, self.i64(f"expand_{group}", [1, 1, group, 1, 1])], name=pfx + "/Expand")
        return b.node("Reshape", [e, self.i64(f"shape_rep_{nh}", [0, nh, -1, D])], name=pfx + "/Reshape")


def build_plain(args, cfg, tok_info):
    """Hugging Face optimum style (plain ONNX ops, explicit mask, Concat KV) and the hybrid style (LFM2-like:
    short-convolution layers carrying a [batch, hidden, K] state, then attention layers)."""
    L, H, NH, KVH, D, I, V = (cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "head", "inter", "vocab"))
    hybrid = args.style == "hybrid"
    if hybrid:
        L = max(L, 4)  # conv, attention, conv, attention
    layer_types = ["conv" if (hybrid and i % 2 == 0) else "full_attention" for i in range(L)]
    K = 4  # conv kernel = state length
    G = NH // KVH
    merged = args.merged
    if merged and hybrid:
        sys.exit("--merged is written for --style optimum")
    filename = "decoder_model_merged.onnx" if merged else "model.onnx"
    store = Store(os.path.join(args.out, filename + ".data"), filename + ".data")
    b = Builder(cfg, args.style, store, 0, plain=True)
    ops = PlainOps(b, store)
    rng = np.random.default_rng(args.seed)
    f32 = np.float32
    lm = Linear(rng, H, V, gain=1.0)
    embed = lm.dequant_nk()
    layers = []
    for t in layer_types:
        lw = dict(ln1=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32),
                  ln2=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32),
                  gate=Linear(rng, H, I), up=Linear(rng, H, I), down=Linear(rng, I, H))
        if t == "conv":
            lw.update(bg=Linear(rng, H, H), cg=Linear(rng, H, H), xg=Linear(rng, H, H), o=Linear(rng, H, H),
                      conv=(rng.standard_normal((H, K)) * 0.5).astype(f32))
        else:
            lw.update(q=Linear(rng, H, NH * D), k=Linear(rng, H, KVH * D), v=Linear(rng, H, KVH * D),
                      qb=(0.1 * rng.standard_normal(NH * D)).astype(f32),
                      kb=(0.1 * rng.standard_normal(KVH * D)).astype(f32),
                      vb=(0.1 * rng.standard_normal(KVH * D)).astype(f32), o=Linear(rng, NH * D, H))
        layers.append(lw)
    norm_w = (2.0 + 0.1 * rng.standard_normal(H)).astype(f32)
    cos, sin = rope_caches(cfg["context"], D)
    embed_n = store.add("model.embed_tokens.weight", embed)
    cos_n, sin_n = store.add("cos_cache", cos), store.add("sin_cache", sin)
    attn_layers = [i for i, t in enumerate(layer_types) if t != "conv"]
    first_attn = attn_layers[0]

    def decoder(with_past, pfx0):
        """Emits one decoder into b.nodes; returns (logits, presents). Without past (merged decoder's
        first-run branch) the presents are the new rows alone."""
        ids, mask = "input_ids", "attention_mask"
        one = ops.i64("one", 1)
        zero = ops.i64("zero", 0)
        S = b.node("Gather", [b.node("Shape", [ids], name=pfx0 + "/ids_shape"), one], name=pfx0 + "/S", axis=0)
        T = b.node("Gather", [b.node("Shape", [mask], name=pfx0 + "/mask_shape"), one], name=pfx0 + "/T", axis=0)
        P = b.node("Sub", [T, S], name=pfx0 + "/P")  # past length
        S1 = b.node("Unsqueeze", [S, ops.i64("axes0", [0])], name=pfx0 + "/S1")
        negS1 = b.node("Neg", [S1], name=pfx0 + "/negS1")
        # position ids: the input, or the count of real tokens before each position (HF / genai)
        if args.no_position_ids:
            cs = b.node("CumSum", [mask, one], name=pfx0 + "/pos_cumsum")
            pall = b.node("Max", [b.node("Sub", [cs, one], name=pfx0 + "/pos_sub"), zero], name=pfx0 + "/pos_all")
            pos = b.node("Slice", [pall, negS1, ops.i64("smax", [2 ** 62]), ops.i64("axes1", [1])],
                         name=pfx0 + "/position_ids")
        else:
            pos = "position_ids"
        cg = b.node("Gather", [cos_n, pos], name=pfx0 + "/cos_gather", axis=0)  # [B, S, D/2]
        sg = b.node("Gather", [sin_n, pos], name=pfx0 + "/sin_gather", axis=0)
        cos4 = b.node("Unsqueeze", [b.node("Concat", [cg, cg], name=pfx0 + "/cos_cat", axis=-1), ops.i64("axes1", [1])],
                      name=pfx0 + "/cos4")
        sin4 = b.node("Unsqueeze", [b.node("Concat", [sg, sg], name=pfx0 + "/sin_cat", axis=-1), ops.i64("axes1", [1])],
                      name=pfx0 + "/sin4")
        # additive mask [B, 1, S, T]: padding (mask 0) or a key after the query (causal) -> float32 min
        pad = b.node("Unsqueeze", [b.node("Equal", [mask, zero], name=pfx0 + "/pad_eq"), ops.i64("axes12", [1, 2])],
                     name=pfx0 + "/pad")
        kpos = b.node("Range", [zero, T, one], name=pfx0 + "/kpos")
        qpos = b.node("Unsqueeze", [b.node("Add", [b.node("Range", [zero, S, one], name=pfx0 + "/srange"), P],
                                           name=pfx0 + "/qpos0"), ops.i64("axes1", [1])], name=pfx0 + "/qpos")
        causal = b.node("Greater", [kpos, qpos], name=pfx0 + "/causal")  # [S, T]
        masked = b.node("Or", [pad, causal], name=pfx0 + "/masked")
        bias = b.node("Where", [masked, ops.const("fmin", np.array(MIN_F32, f32)), ops.const("fzero", np.array(0, f32))],
                      name=pfx0 + "/mask_bias")
        mlast = None
        x = b.node("Gather", [embed_n, ids], name=pfx0 + "/embed", axis=0)
        presents = []
        for i, (t, lw) in enumerate(zip(layer_types, layers)):
            p = f"model.layers.{i}"
            q = f"{pfx0}/layers.{i}"
            h = ops.rmsnorm(x, lw["ln1"], f"{p}.input_layernorm") if pfx0 == "/model" else \
                ops_norm_again(x, f"{p}.input_layernorm", q)
            if t == "conv":
                if mlast is None:
                    mf = b.node("Cast", [b.node("Slice", [mask, negS1, ops.i64("smax", [2 ** 62]), ops.i64("axes1", [1])],
                                                name=pfx0 + "/mask_last")], name=pfx0 + "/mask_last_f", to=TensorProto.FLOAT)
                    mlast = b.node("Unsqueeze", [mf, ops.i64("axes_last", [-1])], name=pfx0 + "/mask_last3")
                bg = b.linear(h, lw["bg"], f"{p}.conv.in_proj_b") if pfx0 == "/model" else reuse(f"{p}.conv.in_proj_b", h, q)
                cgt = b.linear(h, lw["cg"], f"{p}.conv.in_proj_c") if pfx0 == "/model" else reuse(f"{p}.conv.in_proj_c", h, q)
                xg = b.linear(h, lw["xg"], f"{p}.conv.in_proj_x") if pfx0 == "/model" else reuse(f"{p}.conv.in_proj_x", h, q)
                bx = b.node("Mul", [b.node("Mul", [bg, xg], name=q + "/conv/bx"), mlast], name=q + "/conv/bx_masked")
                bxt = b.node("Transpose", [bx], name=q + "/conv/bx_t", perm=[0, 2, 1])  # [B, H, S]
                cat = b.node("Concat", [f"past_conv.{i}", bxt], name=q + "/conv/cat", axis=2)  # [B, H, K + S]
                presents.append(b.node("Slice", [cat, S1, ops.i64("smax", [2 ** 62]), ops.i64("axes2", [2])],
                                       outputs=[f"present_conv.{i}"], name=q + "/conv/state"))
                wconv = store.add(f"{p}.conv.weight", lw["conv"].reshape(H, 1, K)) if pfx0 == "/model" else f"{p}.conv.weight"
                cv = b.node("Conv", [cat, wconv], name=q + "/conv/Conv", group=H, kernel_shape=[K])  # [B, H, S + 1]
                cv = b.node("Slice", [cv, ops.i64("s1", [1]), ops.i64("smax", [2 ** 62]), ops.i64("axes2", [2])],
                            name=q + "/conv/new")
                y = b.node("Mul", [cgt, b.node("Transpose", [cv], name=q + "/conv/y_t", perm=[0, 2, 1])], name=q + "/conv/y")
                o = b.linear(y, lw["o"], f"{p}.conv.out_proj") if pfx0 == "/model" else reuse(f"{p}.conv.out_proj", y, q)
            else:
                lin = (lambda xx, key, nm, bias=None: b.linear(xx, lw[key], nm, bias)) if pfx0 == "/model" else \
                      (lambda xx, key, nm, bias=None: reuse(nm, xx, q, bias is not None))
                qh = ops.rotary(ops.heads(lin(h, "q", f"{p}.attn.q_proj", lw["qb"]), NH, D, q + "/q"), cos4, sin4, D, q + "/q")
                kh = ops.rotary(ops.heads(lin(h, "k", f"{p}.attn.k_proj", lw["kb"]), KVH, D, q + "/k"), cos4, sin4, D, q + "/k")
                vh = ops.heads(lin(h, "v", f"{p}.attn.v_proj", lw["vb"]), KVH, D, q + "/v")
                if with_past:
                    kc = b.node("Concat", [f"past_key_values.{i}.key", kh], outputs=[f"present.{i}.key"], name=q + "/k_cat", axis=2)
                    vc = b.node("Concat", [f"past_key_values.{i}.value", vh], outputs=[f"present.{i}.value"], name=q + "/v_cat", axis=2)
                else:
                    kc = b.node("Identity", [kh], outputs=[f"present.{i}.key"], name=q + "/k_new")
                    vc = b.node("Identity", [vh], outputs=[f"present.{i}.value"], name=q + "/v_new")
                presents += [kc, vc]
                kr = ops.repeat_kv(kc, G, NH, D, q + "/k_rep")
                vr = ops.repeat_kv(vc, G, NH, D, q + "/v_rep")
                sc = b.node("MatMul", [qh, b.node("Transpose", [kr], name=q + "/kT", perm=[0, 1, 3, 2])], name=q + "/scores")
                sc = b.node("Add", [b.node("Mul", [sc, ops.const("inv_sqrt_d", np.array(1 / np.sqrt(D), f32))],
                                           name=q + "/scale"), bias], name=q + "/masked_scores")
                pr = b.node("Softmax", [sc], name=q + "/Softmax", axis=-1)
                ao = b.node("MatMul", [pr, vr], name=q + "/attn")
                ao = b.node("Reshape", [b.node("Transpose", [ao], name=q + "/attn_t", perm=[0, 2, 1, 3]),
                                        ops.i64(f"shape_y", [0, 0, NH * D])], name=q + "/attn_flat")
                o = lin(ao, "o", f"{p}.attn.o_proj")
            x = b.node("Add", [x, o], name=q + "/residual1")
            h2 = ops.rmsnorm(x, lw["ln2"], f"{p}.post_attention_layernorm") if pfx0 == "/model" else \
                ops_norm_again(x, f"{p}.post_attention_layernorm", q + "/post")
            if pfx0 == "/model":
                gt = b.linear(h2, lw["gate"], f"{p}.mlp.gate_proj")
                up = b.linear(h2, lw["up"], f"{p}.mlp.up_proj")
            else:
                gt, up = reuse(f"{p}.mlp.gate_proj", h2, q), reuse(f"{p}.mlp.up_proj", h2, q)
            act = b.node("Mul", [gt, b.node("Sigmoid", [gt], name=q + "/mlp/Sigmoid")], name=q + "/mlp/silu")
            m = b.node("Mul", [act, up], name=q + "/mlp/Mul")
            dn = b.linear(m, lw["down"], f"{p}.mlp.down_proj") if pfx0 == "/model" else reuse(f"{p}.mlp.down_proj", m, q)
            x = b.node("Add", [x, dn], name=q + "/residual2")
        xf = ops.rmsnorm(x, norm_w, "model.norm") if pfx0 == "/model" else ops_norm_again(x, "model.norm", pfx0 + "/final")
        logits = b.linear(xf, lm, "lm_head") if pfx0 == "/model" else reuse("lm_head", xf, pfx0)
        return logits, presents

    def ops_norm_again(x, wname, pfx):
        """RMSNorm reusing an initializer the first decoder stored (merged decoder's second branch)."""
        sq = b.node("Mul", [x, x], name=pfx + "/sq")
        ms = b.node("ReduceMean", [sq, ops.i64("axes_last", [-1])], name=pfx + "/mean", keepdims=1)
        den = b.node("Sqrt", [b.node("Add", [ms, ops.const("eps", np.array(RMS_EPS, np.float32))], name=pfx + "/eps")],
                     name=pfx + "/sqrt")
        return b.node("Mul", [b.node("Div", [x, den], name=pfx + "/div"), wname + ".weight"], name=pfx + "/w")

    def reuse(prefix, x, pfx, bias=False):
        """A linear layer over the weight (and bias) the first decoder stored."""
        y = b.node("MatMul", [x, prefix + ".weight"], name=pfx + "/" + prefix + "/MatMul_b")
        if bias:
            y = b.node("Add", [y, prefix + ".bias"], name=pfx + "/" + prefix + "/BiasAdd_b")
        return y

    io_past = []
    for i, t in enumerate(layer_types):
        io_past += [f"past_conv.{i}"] if t == "conv" else [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    io_present = [n.replace("past_key_values", "present").replace("past_conv", "present_conv") for n in io_past]
    if merged:
        # then: the with-past decoder; else: the first-run decoder (the past inputs are not read)
        b.nodes = []
        logits_w, pres_w = decoder(True, "/model")
        with_past_nodes = b.nodes
        b.nodes = []
        logits_n, pres_n = decoder(False, "/model_nopast")
        no_past_nodes = b.nodes
        b.nodes = []
        def branch(name, nodes, logits_name, pres):
            outs = [helper.make_tensor_value_info(logits_name, TensorProto.FLOAT, None)]
            outs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in pres]
            return helper.make_graph(nodes, name, [], outs)
        # Each branch names its own outputs; the If's outputs are the graph outputs.
        then_g = branch("with_past", rename_outputs(with_past_nodes, "wp_"), "wp_" + logits_w, ["wp_" + n for n in pres_w])
        else_g = branch("no_past", rename_outputs(no_past_nodes, "np_"), "np_" + logits_n, ["np_" + n for n in pres_n])
        b.nodes.append(helper.make_node("If", ["use_cache_branch"], ["logits"] + io_present, name="/model/optimum::if",
                                        then_branch=then_g, else_branch=else_g))
    else:
        logits, _ = decoder(True, "/model")
        b.nodes[-1].output[0] = "logits"
    store.close()
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    if not args.no_position_ids:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]))
    for n in io_past:
        dims = ["batch_size", H, K] if "conv" in n else ["batch_size", KVH, "past_sequence_length", D]
        inputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, dims))
    if merged:
        inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", V])]
    for n in io_present:
        dims = ["batch_size", H, K] if "conv" in n else ["batch_size", KVH, "total_sequence_length", D]
        outputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, dims))
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs, initializer=store.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="nxrt make_genai_model.py")
    model.ir_version = 10
    with open(os.path.join(args.out, filename), "wb") as fh:
        fh.write(model.SerializeToString())
    decoder_cfg = dict(head_size=D, hidden_size=H, num_attention_heads=NH, num_hidden_layers=L, num_key_value_heads=KVH)
    ins = {"input_ids": "input_ids", "attention_mask": "attention_mask",
           "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    outs = {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"}
    if not args.no_position_ids:
        ins["position_ids"] = "position_ids"
    if hybrid:
        decoder_cfg.update(layer_types=layer_types, conv_cache_size=K)
        ins["past_conv_names"] = "past_conv.%d"
        outs["present_conv_names"] = "present_conv.%d"
    nxrt = {"builder": "tools/make_genai_model.py", "style": args.style, "dtype": "fp32", "size": args.size,
            "seed": args.seed, "tied_lm_head": True, "rms_norm_eps": RMS_EPS, "rope_theta": ROPE_THETA,
            "intermediate_size": I, "merged": merged, "position_ids_input": not args.no_position_ids,
            "kv_cache": "past_key_values.%d.key/value [batch, kv_heads, past, head_size] grown by Concat; "
                        "attention_mask [batch, total] masks padding (additive float32 min with the causal mask)"
                        + ("; conv layers carry past_conv.%d [batch, hidden, 4]: the last 4 gated inputs of a "
                           "depthwise causal convolution (padding masked to 0)" if hybrid else "")}
    write_folder_config(args, tok_info, V, cfg["context"], "lfm2" if hybrid else "llama", filename, decoder_cfg, ins,
                        outs, share_buffer=False, nxrt=nxrt)


def rename_outputs(nodes, prefix):
    """Prefixes every value a node list produces (and its uses inside the list): an If branch must not
    produce the names of the outer graph's outputs."""
    produced = {o for n in nodes for o in n.output if o}
    for n in nodes:
        for k, o in enumerate(n.output):
            if o:
                n.output[k] = prefix + o
        for k, i in enumerate(n.input):
            if i in produced:
                n.input[k] = prefix + i
    return nodes


# ---------------------------------------------------------------- GPT-2 style (ORT transformer optimizer)
def build_gpt2(args, cfg, tok_info):
    """GPT-2 as ORT's transformer optimizer leaves it: EmbedLayerNormalization (word + position embedding,
    first LayerNorm), com.microsoft Attention (fused QKV weight + bias, unidirectional, raw [batch, total]
    int32 mask, combined `past_%d` [2, batch, heads, past, head_size] -> `present_%d`),
    SkipLayerNormalization (residual + bias + LayerNorm), FastGelu; int32 input_ids / position_ids /
    attention_mask; tied lm_head."""
    L, H, NH, V = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["vocab"]
    D = H // NH
    P = min(cfg["context"], 512)
    store = Store(os.path.join(args.out, "model.onnx.data"), "model.onnx.data")
    b = Builder(cfg, "gpt2", store, 0)
    rng = np.random.default_rng(args.seed)
    f32 = np.float32
    wte = (rng.standard_normal((V, H)) * 0.5).astype(f32)
    wpe = (rng.standard_normal((P, H)) * 0.1).astype(f32)
    layers = []
    for _ in range(L):
        layers.append(dict(
            ln1w=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32), ln1b=(0.1 * rng.standard_normal(H)).astype(f32),
            attn_w=(rng.standard_normal((H, 3 * H)) / np.sqrt(H)).astype(f32),
            attn_b=(0.1 * rng.standard_normal(3 * H)).astype(f32),
            proj_w=(rng.standard_normal((H, H)) / np.sqrt(H)).astype(f32), proj_b=(0.1 * rng.standard_normal(H)).astype(f32),
            ln2w=(1.0 + 0.1 * rng.standard_normal(H)).astype(f32), ln2b=(0.1 * rng.standard_normal(H)).astype(f32),
            fc_w=(rng.standard_normal((H, 4 * H)) / np.sqrt(H)).astype(f32), fc_b=(0.1 * rng.standard_normal(4 * H)).astype(f32),
            fc2_w=(rng.standard_normal((4 * H, H)) / np.sqrt(4 * H)).astype(f32),
            fc2_b=(0.1 * rng.standard_normal(H)).astype(f32)))
    lnfw = (1.0 + 0.1 * rng.standard_normal(H)).astype(f32)
    lnfb = (0.1 * rng.standard_normal(H)).astype(f32)
    ms = "com.microsoft"
    a = lambda name, arr: store.add(name, arr)
    emb_out, _, emb_sum = b.node("EmbedLayerNormalization",
                                 ["input_ids", "", a("transformer.wte.weight", wte), a("transformer.wpe.weight", wpe), "",
                                  a("transformer.h.0.ln_1.weight", layers[0]["ln1w"]),
                                  a("transformer.h.0.ln_1.bias", layers[0]["ln1b"]), "", "position_ids"],
                                 outputs=3, domain=ms, name="EmbedLayerNormalization_0", epsilon=1e-5)
    x, residual = emb_out, emb_sum
    for i, lw in enumerate(layers):
        p = f"transformer.h.{i}"
        att = b.node("Attention", [x, a(p + ".attn.c_attn.weight", lw["attn_w"]), a(p + ".attn.c_attn.bias", lw["attn_b"]),
                                   "attention_mask", f"past_{i}"],
                     outputs=[f"GptAttention_{i}_output", f"present_{i}"], domain=ms, name=f"GptAttention_{i}",
                     num_heads=NH, unidirectional=1)[0]
        proj = b.node("MatMul", [att, a(p + ".attn.c_proj.weight", lw["proj_w"])], name=f"{p}/attn/c_proj")
        outs = [f"{p}/ln_2/out", "", "", f"{p}/residual_1"]
        b.node("SkipLayerNormalization", [proj, residual, a(p + ".ln_2.weight", lw["ln2w"]), a(p + ".ln_2.bias", lw["ln2b"]),
                                          a(p + ".attn.c_proj.bias", lw["proj_b"])],
               outputs=outs, domain=ms, name=f"{p}/SkipLayerNorm_1", epsilon=1e-5)
        h2, residual = outs[0], outs[3]
        fc = b.node("MatMul", [h2, a(p + ".mlp.c_fc.weight", lw["fc_w"])], name=f"{p}/mlp/c_fc")
        act = b.node("FastGelu", [fc, a(p + ".mlp.c_fc.bias", lw["fc_b"])], domain=ms, name=f"{p}/mlp/FastGelu")
        fc2 = b.node("MatMul", [act, a(p + ".mlp.c_proj.weight", lw["fc2_w"])], name=f"{p}/mlp/c_proj")
        last = i == L - 1
        nw, nb = (lnfw, lnfb) if last else (layers[i + 1]["ln1w"], layers[i + 1]["ln1b"])
        nname = "transformer.ln_f" if last else f"transformer.h.{i + 1}.ln_1"
        outs = [f"{p}/next_ln/out", "", "", f"{p}/residual_2"]
        b.node("SkipLayerNormalization", [fc2, residual, a(nname + ".weight", nw), a(nname + ".bias", nb),
                                          a(p + ".mlp.c_proj.bias", lw["fc2_b"])],
               outputs=outs if not last else outs[:1], domain=ms, name=f"{p}/SkipLayerNorm_2", epsilon=1e-5)
        x, residual = outs[0], outs[3]
    b.node("MatMul", [x, a("lm_head.weight", np.ascontiguousarray(wte.T))], outputs=["logits"], name="lm_head/MatMul")
    store.close()
    i32 = TensorProto.INT32
    inputs = [helper.make_tensor_value_info("input_ids", i32, ["batch_size", "seq_len"]),
              helper.make_tensor_value_info("position_ids", i32, ["batch_size", "seq_len"]),
              helper.make_tensor_value_info("attention_mask", i32, ["batch_size", "total_seq_len"])]
    inputs += [helper.make_tensor_value_info(f"past_{i}", TensorProto.FLOAT, [2, "batch_size", NH, "past_seq_len", D])
               for i in range(L)]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "seq_len", V])]
    outputs += [helper.make_tensor_value_info(f"present_{i}", TensorProto.FLOAT, [2, "batch_size", NH, "total_seq_len", D])
                for i in range(L)]
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs, initializer=store.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid(ms, 1)],
                              producer_name="nxrt make_genai_model.py")
    model.ir_version = 7
    with open(os.path.join(args.out, "model.onnx"), "wb") as fh:
        fh.write(model.SerializeToString())
    nxrt = {"builder": "tools/make_genai_model.py", "style": "gpt2", "dtype": "fp32", "size": args.size,
            "seed": args.seed, "layer_norm_eps": 1e-5, "n_positions": P,
            "kv_cache": "combined past_%d / present_%d [2, batch, heads, seq, head_size] (key then value), grown by "
                        "com.microsoft Attention; attention_mask [batch, total] int32 masks padding"}
    write_folder_config(args, tok_info, V, P, "gpt2", "model.onnx",
                        dict(head_size=D, hidden_size=H, num_attention_heads=NH, num_hidden_layers=L,
                             num_key_value_heads=NH),
                        {"input_ids": "input_ids", "position_ids": "position_ids", "attention_mask": "attention_mask",
                         "past_names": "past_%d"},
                        {"logits": "logits", "present_names": "present_%d"}, share_buffer=False, nxrt=nxrt)


def read_tokenizer(path):
    with open(path, encoding="utf-8") as fh:
        t = json.load(fh)
    ids = list(t.get("model", {}).get("vocab", {}).values()) + [a["id"] for a in t.get("added_tokens", [])]
    size = max(ids) + 1
    by_content = {a["content"]: a["id"] for a in t.get("added_tokens", [])}
    eos = [by_content[c] for c in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")
           if c in by_content]
    bos = next((by_content[c] for c in ("<|begin_of_text|>", "<s>", "<|endoftext|>") if c in by_content), 0)
    pad = next((by_content[c] for c in ("<|endoftext|>", "<pad>", "<|finetune_right_pad_id|>") if c in by_content),
               eos[0] if eos else 0)
    return dict(size=size, bos=bos, eos=eos if len(eos) > 1 else (eos[0] if eos else 0), pad=pad)


# ChatML, as Qwen models use it (written here, not copied from a model).
BYTELEVEL_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def byte_level_char(b):
    """GPT-2's byte -> printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in keep:
        return chr(b)
    extra = [x for x in range(256) if x not in keep]
    return chr(256 + extra.index(b))


def write_bytelevel_tokenizer(out_dir):
    """A byte-level BPE tokenizer.json (ByteLevel pre-tokenizer / decoder, the Qwen2 and GPT-2 layout) whose
    vocabulary is the printable ASCII bytes, tab and newline, plus <|endoftext|>, <|im_start|>, <|im_end|>,
    and no merges: every token sequence a random model can generate is then the encoding of its own text,
    so `encode(generated text) == generated ids` is a fair test, and no byte of an unfinished UTF-8
    character can be generated. tokenizer_config.json carries the special tokens and a ChatML template."""
    byte_values = [0x09, 0x0A] + list(range(0x20, 0x7F))
    vocab = {byte_level_char(b): i for i, b in enumerate(byte_values)}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = []
    for name in specials:
        added.append({"id": len(vocab) + len(added), "content": name, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    t = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(t, fh, ensure_ascii=False)
    cfg = {
        "add_bos_token": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "chat_template": BYTELEVEL_CHAT_TEMPLATE,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg, fh, indent=2)


def write_synthetic_tokenizer(path, vocab):
    """A WordLevel tokenizer over names tok<N> (ids 0..2 are <pad>, <s>, </s>): enough for a folder that
    looks complete; real text needs --tokenizer."""
    names = ["<pad>", "<s>", "</s>"] + [f"tok{i}" for i in range(3, vocab)]
    t = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": names[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in range(3)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {n: i for i, n in enumerate(names)}, "unk_token": "<pad>"},
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(t, fh)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--style", choices=["genai", "onnx", "optimum", "hybrid", "gpt2"], default="genai")
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32",
                    help="fp16 (genai style): float16 weights, KV cache and logits, plain MatMul")
    ap.add_argument("--no-share-buffer", action="store_true",
                    help="genai_config search.past_present_share_buffer false (genai / onnx styles)")
    ap.add_argument("--no-position-ids", action="store_true",
                    help="optimum / hybrid: no position_ids input (the graph counts attention_mask)")
    ap.add_argument("--merged", action="store_true",
                    help="optimum: decoder_model_merged.onnx, a use_cache_branch input selecting an If branch")
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--tokenizer", help="path of a real tokenizer.json to copy (vocab size follows it for tiny), "
                                        "or 'bytelevel' for a small generated byte-level BPE tokenizer")
    ap.add_argument("--untied", action="store_true", help="separate float32 embedding (default: tied lm_head)")
    ap.add_argument("--context-length", type=int, default=0)
    ap.add_argument("--accuracy-level", type=int, default=4, help="MatMulNBits accuracy_level (genai style)")
    ap.add_argument("--fp16-scales", action="store_true",
                    help="block scales that are float16 values (a model converted from float16 weights): "
                         "lossless in runtimes that keep scales in float16, e.g. llama.cpp's Q4_0")
    ap.add_argument("--quantized-embedding", action="store_true",
                    help="genai style, tied: the embedding is GatherBlockQuantized over the lm_head's int4 "
                         "weights instead of a float32 table (same values)")
    args = ap.parse_args()
    if args.quantized_embedding and (args.untied or args.style != "genai"):
        ap.error("--quantized-embedding needs --style genai and a tied lm_head")
    Linear.fp16_scales = args.fp16_scales
    build(args)


if __name__ == "__main__":
    main()
