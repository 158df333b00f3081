#!/usr/bin/python3
"""Bytes one decode step of an onnxruntime-genai style folder reads, as nxrt's kernels lay them out:
the packed MatMulNBits weights (column-panel records: 4-bit codes, block scales in fp16 when every
scale is a float16 value else fp32, zero-point bytes only when they differ), the KV cache rows attention
reads at the given position (K and V of every layer, float32 or, with --kv-dtype float16, as
`nxrt generate --kv-dtype float16` keeps them; with --weight-scales float16 the block scales as
`nxrt generate --weight-scales float16` packs them), the embedding row, and the remaining float
initializers (norm weights, biases; cos/sin: one row each). Divided by the read bandwidth of the moment,
this is the decode speed limit a memory-bound step cannot beat.

  llm_bytes_per_token.py MODEL_DIR [--cols 32] [--position P] [--kv-dtype float32|float16]
                         [--weight-scales model|float16]

--cols: 32 for the AVX-512 / AMX kernels, 16 for AVX2 and scalar (`nxrt info` prints the tier).
--position: tokens in the cache while decoding (default: the middle of a 512 + 32 generation, 528).
Prints one JSON line: {"bytes_per_token", "weights", "kv", "embedding_row", "other", "matmulnbits"}.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "genai_config.json")))
    path = os.path.join(model_dir, cfg["model"]["decoder"]["filename"])
    return cfg, onnx.load(path, load_external_data=True)


def panel_bytes(K, N, block, scales, zps, cols, round_scales):
    kb = (K + block - 1) // block
    panels = (N + cols - 1) // cols
    s = scales.astype(np.float32).reshape(-1)
    if round_scales:  # SessionOptions::matmulnbits_scale_dtype: kept when float16 cannot hold one as a normal
        a = np.abs(s)
        if np.all((a == 0) | ((a >= 2.0 ** -14) & (a <= 65504))):
            s = s.astype(np.float16).astype(np.float32)
    fp16 = bool(np.all(s.astype(np.float16).astype(np.float32).view(np.uint32) == s.view(np.uint32)))
    zp_table = zps is not None and len(np.unique(zps)) > 1
    rec = block // 4 * cols * 2 + cols * (2 if fp16 else 4) + (cols if zp_table else 0)
    align = 64 if cols >= 32 else 32  # pack_quant_panels: 64-byte records for 32 columns, 32 for 16
    rec = (rec + align - 1) // align * align
    return panels * kb * rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--cols", type=int, default=32, choices=[16, 32])
    ap.add_argument("--position", type=int, default=528)
    ap.add_argument("--kv-dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--weight-scales", default="model", choices=["model", "float16"])
    a = ap.parse_args()
    cfg, m = load(a.model_dir)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    arr = lambda n: numpy_helper.to_array(inits[n])
    used = set()
    weights = 0
    for node in g.node:
        if node.op_type != "MatMulNBits":
            continue
        at = {x.name: x for x in node.attribute}
        K, N, block = at["K"].i, at["N"].i, at["block_size"].i
        bits = at["bits"].i if "bits" in at else 4
        if bits != 4:
            sys.exit(f"{node.name}: only 4-bit weights are laid out here")
        zps = None
        if len(node.input) > 3 and node.input[3]:
            zps = arr(node.input[3])
        weights += panel_bytes(K, N, block, arr(node.input[2]), zps, a.cols, a.weight_scales == "float16")
        used.update(i for i in node.input[1:5] if i)
    mc = cfg["model"]
    layers, kv_heads = mc["decoder"]["num_hidden_layers"], mc["decoder"]["num_key_value_heads"]
    head, hidden = mc["decoder"]["head_size"], mc["decoder"]["hidden_size"]
    kv = 2 * layers * kv_heads * a.position * head * (2 if a.kv_dtype == "float16" else 4)
    emb = hidden * 4
    other = 0
    for name, t in inits.items():
        if name in used or name == "model.embed_tokens.weight" or t.data_type not in (1, 10, 16):
            continue
        n = int(np.prod(t.dims)) if t.dims else 1
        size = n * (4 if t.data_type == 1 else 2)
        if name in ("cos_cache", "sin_cache"):
            size //= max(1, t.dims[0])  # one row per step
        other += size
    total = weights + kv + emb + other
    print(json.dumps({"bytes_per_token": total, "weights": weights, "kv": kv, "embedding_row": emb, "other": other,
                      "matmulnbits": sum(1 for n in g.node if n.op_type == "MatMulNBits"), "cols": a.cols,
                      "position": a.position, "kv_dtype": a.kv_dtype, "weight_scales": a.weight_scales}))


if __name__ == "__main__":
    main()
