#!/usr/bin/python3
"""numpy reference forward of a model folder written by tools/make_genai_model.py (either style).

Reads genai_config.json and the decoder's initializers (model.onnx + external data, int4 tensors
included), dequantizes every weight as the ops do (float32(code - 8) * scale in float32; MatMulNBits
blobs or int4 DequantizeLinear), then runs the decoder in float64: a prefill over the prompt and greedy
decode steps (argmax of the last logits row, lowest id on ties), with a KV cache.

Writes to OUT:
  tokens.json            {"prompt": [...], "tokens": [...]}   (tokens[0] comes from the prefill)
  prefill_logits.npy     float32 [S, vocab], the prefill's logits
  step_logits.npy        float32 [N, vocab], the row each token was chosen from
  model.onnx, model.onnx.data (hard links, else copies) + test_data_set_0 (prefill) and test_data_set_1 (one decode
  step after it): input_K.pb / output_K.pb in graph order, so `nxrt test OUT` / `ort run` compare
  logits and presents. For the genai style the past is not shared (past length 0, then S); for the
  onnx style the cache capacity is S, then S + 1.

usage: genai_reference.py MODEL_DIR OUT [--prompt-ids 1,2,3 | --prompt-len N] [--max-new-tokens N]
The --prompt-len ids are drawn exactly as `ort generate` / `nxrt generate` draw them (mulberry32, seed 1234).

Every export style tools/make_genai_model.py writes is read: genai (MatMulNBits or, --dtype fp16, float16
MatMul), onnx (int4 DequantizeLinear), optimum and hybrid (float MatMul; hybrid adds the short-convolution
layers), gpt2 (its own forward).

Batches and beam search (onnxruntime-genai's semantics, as nxrt's Generator implements them):
  genai_reference.py MODEL_DIR OUT --batch "1,2,3;4,5" [--max-new-tokens N] [--stop-at-eos]
                     [--num-beams N --num-return-sequences K --length-penalty X --no-early-stopping]
writes OUT/batch.json {"sequences": [...]}: the prompts left-padded with pad_token_id to the longest, every
row continued from its own unpadded prompt (greedy: argmax per row, pad_token_id after an EOS with
--stop-at-eos; beam search: num_beams beams per prompt, log_softmax + beam score, the best 2 * num_beams
candidates, an EOS among the first num_beams ends a hypothesis scored sum_logprobs / length^length_penalty
with length = the padded sequence without the EOS; hypotheses best first), `num_sequences` rows in the
order Generator::get_sequence returns them. Logits come from a full recompute of each row's unpadded
tokens in float64.
"""
import argparse
import json
import os
import shutil

import numpy as np
import onnx
from onnx import numpy_helper

INT4 = 22
PROMPT_SEED = 1234


def mulberry32_ids(n, vocab, seed=PROMPT_SEED):
    a = seed & 0xFFFFFFFF
    out = []
    M = 0xFFFFFFFF

    def imul(x, y):
        return (x * y) & M

    for _ in range(n):
        a = (a + 0x6D2B79F5) & M
        t = a
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & M
        r = ((t ^ (t >> 14)) & M) / 4294967296.0
        out.append(int(r * vocab))
    return out


def load_initializers(model_path):
    m = onnx.load(model_path, load_external_data=False)
    base = os.path.dirname(model_path)
    maps = {}
    inits = {}
    for t in m.graph.initializer:
        dims = tuple(t.dims)
        if t.data_location == onnx.TensorProto.EXTERNAL:
            ext = {e.key: e.value for e in t.external_data}
            fn = os.path.join(base, ext["location"])
            if fn not in maps:
                maps[fn] = np.memmap(fn, dtype=np.uint8, mode="r")
            off = int(ext.get("offset", 0))
            raw = maps[fn][off:off + int(ext["length"])]
        else:
            raw = None
        if t.data_type == INT4:
            buf = np.frombuffer(raw if raw is not None else t.raw_data, dtype=np.uint8)
            n = int(np.prod(dims))
            lo = (buf & 0x0F).astype(np.int8)
            hi = (buf >> 4).astype(np.int8)
            v = np.empty(buf.size * 2, np.int8)
            v[0::2], v[1::2] = lo, hi
            v = v[:n]
            v = np.where(v >= 8, v - 16, v).astype(np.int8)
            inits[t.name] = v.reshape(dims)
        elif raw is not None:
            dt = {1: np.float32, 2: np.uint8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16}[t.data_type]
            inits[t.name] = np.frombuffer(raw, dtype=dt).reshape(dims)
        else:
            inits[t.name] = numpy_helper.to_array(t)
    return m, inits


class Weights:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "genai_config.json")) as fh:
            self.cfg = json.load(fh)
        d = self.cfg["model"]["decoder"]
        self.path = os.path.join(model_dir, d["filename"])
        self.graph, self.init = load_initializers(self.path)
        nx = self.cfg.get("nxrt", {})
        self.eps = nx.get("rms_norm_eps", 1e-6)
        self.L, self.NH, self.KVH, self.D = (d["num_hidden_layers"], d["num_attention_heads"],
                                             d["num_key_value_heads"], d["head_size"])
        self.ops = {n.op_type for n in self.graph.graph.node}
        self.style = nx.get("style") or ("genai" if "MatMulNBits" in self.ops else "onnx")
        self.layer_types = d.get("layer_types") or ["full_attention"] * self.L
        self.nodes = {}
        for n in self.graph.graph.node:
            self.nodes[n.name] = n
            for a in n.attribute:  # If branches (the optimum merged decoder)
                if a.type == onnx.AttributeProto.GRAPH:
                    for sn in a.g.node:
                        self.nodes.setdefault(sn.name, sn)

    def linear(self, prefix):
        """Dequantized weight [K, N] (float32, as the op computes it) and bias or None."""
        mm = self.nodes.get(prefix + "/MatMul")
        if mm is not None and mm.input[1] in self.init:  # plain float weights (optimum, hybrid, fp16 genai)
            w = self.init[self.nodes[prefix + "/MatMul"].input[1]].astype(np.float32)
        elif self.style == "genai":
            node = self.nodes[prefix + "/MatMulNBits"]
            attrs = {a.name: a.i for a in node.attribute}
            K, N, bs = attrs["K"], attrs["N"], attrs["block_size"]
            assert attrs["bits"] == 4 and len(node.input) <= 3 or node.input[3] == ""
            blob = self.init[node.input[1]].reshape(N, -1)
            codes = np.empty((N, blob.shape[1] * 2), np.uint8)
            codes[:, 0::2], codes[:, 1::2] = blob & 0x0F, blob >> 4
            nb = (K + bs - 1) // bs
            q = (codes[:, :nb * bs].astype(np.int8) - 8).astype(np.float32).reshape(N, nb, bs)
            sc = self.init[node.input[2]].reshape(N, nb).astype(np.float32)
            w = (q * sc[:, :, None]).reshape(N, nb * bs)[:, :K].T
        else:
            node = self.nodes[prefix + "/DequantizeLinear"]
            attrs = {a.name: a.i for a in node.attribute}
            assert attrs["axis"] == 0
            bs = attrs["block_size"]
            q = self.init[node.input[0]].astype(np.float32)  # [K, N]
            sc = self.init[node.input[1]].astype(np.float32)  # [K/bs, N]
            w = q * np.repeat(sc, bs, axis=0)[:q.shape[0]]
        b = self.init.get(prefix + ".bias")
        return np.asarray(w, np.float32), (None if b is None else np.asarray(b, np.float32))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotary(x, pos, cos, sin):
    """x [S, H, D] non-interleaved rotate-half; pos [S]."""
    half = x.shape[-1] // 2
    c = cos[pos][:, None, :]
    s = sin[pos][:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


class Reference:
    """The qwen2-like decoder of the genai / onnx / optimum / hybrid styles (RMSNorm, rotary, grouped KV
    heads, SwiGLU), float64, with a KV cache; hybrid conv layers keep their gated inputs as the state."""

    def __init__(self, model_dir):
        W = self.W = Weights(model_dir)
        f64 = np.float64
        # A quantized embedding (make_genai_model.py --quantized-embedding) is the lm_head's weights.
        self.embed = W.init.get("model.embed_tokens.weight")
        if self.embed is None:
            self.embed = W.linear("lm_head")[0].T
        self.cos = W.init["cos_cache"].astype(f64)
        self.sin = W.init["sin_cache"].astype(f64)
        self.layers = []
        for i in range(W.L):
            p = f"model.layers.{i}."
            lay = {"ln1": W.init[p + "input_layernorm.weight"].astype(f64),
                   "ln2": W.init[p + "post_attention_layernorm.weight"].astype(f64),
                   "conv": W.layer_types[i] == "conv"}
            names = (("bg", "conv.in_proj_b"), ("cg", "conv.in_proj_c"), ("xg", "conv.in_proj_x"), ("o", "conv.out_proj")) \
                if lay["conv"] else (("q", "attn.q_proj"), ("k", "attn.k_proj"), ("v", "attn.v_proj"), ("o", "attn.o_proj"))
            for nm, pre in names + (("gate", "mlp.gate_proj"), ("up", "mlp.up_proj"), ("down", "mlp.down_proj")):
                w, b = W.linear(p + pre)
                lay[nm] = (w.astype(f64), None if b is None else b.astype(f64))
            if lay["conv"]:
                lay["kernel"] = W.init[p + "conv.weight"].astype(f64).reshape(-1, W.init[p + "conv.weight"].shape[-1])
            self.layers.append(lay)
        self.norm = W.init["model.norm.weight"].astype(f64)
        w, _ = W.linear("lm_head")
        self.lm = w.astype(f64)
        self.reset()

    def reset(self):
        self.pos = 0
        self.k = [np.zeros((0, self.W.KVH, self.W.D)) for _ in self.layers]
        self.v = [np.zeros((0, self.W.KVH, self.W.D)) for _ in self.layers]
        self.bx = [np.zeros((0, self.embed.shape[1])) for _ in self.layers]  # conv layers: gated inputs so far

    @staticmethod
    def lin(x, wb):
        y = x @ wb[0]
        return y if wb[1] is None else y + wb[1]

    def forward(self, ids):
        W = self.W
        NH, KVH, D = W.NH, W.KVH, W.D
        S = len(ids)
        past = self.pos
        pos = np.arange(past, past + S)
        x = self.embed[np.asarray(ids)].astype(np.float64)
        grp = NH // KVH
        for li, lay in enumerate(self.layers):
            h = rmsnorm(x, lay["ln1"], W.eps)
            if lay["conv"]:
                # depthwise causal convolution over the gated inputs: y[t] = sum_j w[:, j] * bx[t - (K-1) + j]
                self.bx[li] = np.concatenate([self.bx[li], self.lin(h, lay["bg"]) * self.lin(h, lay["xg"])], axis=0)
                K = lay["kernel"].shape[1]
                hist = np.concatenate([np.zeros((K - 1, h.shape[1])), self.bx[li]], axis=0)
                n = self.bx[li].shape[0]
                # new row t (absolute) sees hist[t : t + K] = bx[t - (K-1) .. t]
                y = np.stack([np.sum(hist[t:t + K].T * lay["kernel"], axis=1) for t in range(n - S, n)])
                x = x + self.lin(self.lin(h, lay["cg"]) * y, lay["o"])
            else:
                q = rotary(self.lin(h, lay["q"]).reshape(S, NH, D), pos, self.cos, self.sin)
                k = rotary(self.lin(h, lay["k"]).reshape(S, KVH, D), pos, self.cos, self.sin)
                v = self.lin(h, lay["v"]).reshape(S, KVH, D)
                self.k[li] = np.concatenate([self.k[li], k], axis=0)
                self.v[li] = np.concatenate([self.v[li], v], axis=0)
                K, V = self.k[li], self.v[li]
                T = K.shape[0]
                out = np.empty((S, NH, D))
                causal = np.arange(T)[None, :] <= pos[:, None]  # [S, T]
                for hh in range(NH):
                    kv = hh // grp
                    sc = (q[:, hh, :] @ K[:, kv, :].T) / np.sqrt(D)
                    sc = np.where(causal, sc, -np.inf)
                    sc = np.exp(sc - sc.max(axis=1, keepdims=True))
                    sc /= sc.sum(axis=1, keepdims=True)
                    out[:, hh, :] = sc @ V[:, kv, :]
                x = x + self.lin(out.reshape(S, NH * D), lay["o"])
            h = rmsnorm(x, lay["ln2"], W.eps)
            g = self.lin(h, lay["gate"])
            u = self.lin(h, lay["up"])
            x = x + self.lin(g / (1.0 + np.exp(-g)) * u, lay["down"])
        self.pos += S
        return rmsnorm(x, self.norm, W.eps) @ self.lm  # [S, V]

    def logits(self, ids):
        """All positions' logits of `ids` from an empty cache."""
        self.reset()
        return self.forward(list(ids))

    def presents(self):
        """[(key, value)] per layer as [1, KVH, T, D] float32."""
        return [(k.transpose(1, 0, 2)[None].astype(np.float32), v.transpose(1, 0, 2)[None].astype(np.float32))
                for k, v in zip(self.k, self.v)]


def layernorm(x, w, b, eps):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


class Gpt2Reference:
    """GPT-2 (tools/make_genai_model.py --style gpt2): learned positions, LayerNorm, fused QKV, tanh GELU,
    tied lm_head; positions count the row's tokens (padding removed)."""

    def __init__(self, model_dir):
        W = self.W = Weights(model_dir)
        g = lambda n: W.init[n].astype(np.float64)
        self.wte, self.wpe = g("transformer.wte.weight"), g("transformer.wpe.weight")
        self.eps = W.cfg["nxrt"].get("layer_norm_eps", 1e-5)
        self.layers = []
        for i in range(W.L):
            p = f"transformer.h.{i}."
            self.layers.append({k: g(p + k) for k in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                                      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                                      "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                                                      "mlp.c_proj.bias")})
        self.lnf = (g("transformer.ln_f.weight"), g("transformer.ln_f.bias"))
        self.NH = W.NH
        self.lm = self.wte.T
        self.reset()

    def reset(self):
        self.hist = []

    def forward(self, ids):
        """Logits of the new positions after the tokens so far (recomputed: no cache)."""
        self.hist += list(ids)
        return self.logits(self.hist)[-len(ids):]

    def logits(self, ids):
        ids = list(ids)
        S = len(ids)
        H = self.wte.shape[1]
        NH = self.NH
        D = H // NH
        x = self.wte[np.asarray(ids)] + self.wpe[np.arange(S)]
        causal = np.tril(np.ones((S, S), bool))
        for lw in self.layers:
            h = layernorm(x, lw["ln_1.weight"], lw["ln_1.bias"], self.eps)
            qkv = h @ lw["attn.c_attn.weight"] + lw["attn.c_attn.bias"]
            q, k, v = (qkv[:, j * H:(j + 1) * H].reshape(S, NH, D) for j in range(3))
            out = np.empty((S, NH, D))
            for hh in range(NH):
                sc = np.where(causal, q[:, hh] @ k[:, hh].T / np.sqrt(D), -np.inf)
                sc = np.exp(sc - sc.max(axis=1, keepdims=True))
                out[:, hh] = (sc / sc.sum(axis=1, keepdims=True)) @ v[:, hh]
            x = x + out.reshape(S, H) @ lw["attn.c_proj.weight"] + lw["attn.c_proj.bias"]
            h = layernorm(x, lw["ln_2.weight"], lw["ln_2.bias"], self.eps)
            f = h @ lw["mlp.c_fc.weight"] + lw["mlp.c_fc.bias"]
            f = 0.5 * f * (1.0 + np.tanh(0.7978845608028654 * (f + 0.044715 * f ** 3)))
            x = x + f @ lw["mlp.c_proj.weight"] + lw["mlp.c_proj.bias"]
        return layernorm(x, *self.lnf, self.eps) @ self.wte.T


def make_reference(model_dir):
    with open(os.path.join(model_dir, "genai_config.json")) as fh:
        style = json.load(fh).get("nxrt", {}).get("style")
    return Gpt2Reference(model_dir) if style == "gpt2" else Reference(model_dir)


# ---------------------------------------------------------------- batches and beam search
def log_softmax(row):
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


def greedy_batch(logits_of, prompts, pad, eos, new_tokens, stop_at_eos):
    """Every row continues its own unpadded prompt; rows are left-padded to the longest prompt."""
    width = max(len(p) for p in prompts)
    rows = [[pad] * (width - len(p)) + list(p) for p in prompts]
    real = [list(p) for p in prompts]
    done = [False] * len(prompts)
    margins = []
    for _ in range(new_tokens):
        if stop_at_eos and all(done):
            break
        for r in range(len(rows)):
            if done[r]:
                rows[r].append(pad)
                continue
            row = logits_of(real[r])
            srt = np.sort(row)
            margins.append(float(srt[-1] - srt[-2]))
            tok = int(np.argmax(row))
            rows[r].append(tok)
            real[r].append(tok)
            done[r] = stop_at_eos and tok in eos
    return rows, margins


def beam_batch(logits_of, prompts, pad, eos, new_tokens, beams, num_return, length_penalty, early_stopping):
    """onnxruntime-genai's beam search (see nxrt's src/genai/beam_search.h), one prompt at a time."""
    width = max(len(p) for p in prompts)
    max_length = width + new_tokens
    top_k = beams + max(beams, len(eos))
    out = []
    gaps = []
    for p in prompts:
        padded = [pad] * (width - len(p)) + list(p)
        seqs = [list(padded) for _ in range(beams)]
        real = [list(p) for _ in range(beams)]
        scores = [0.0] + [-1e9] * (beams - 1)
        hyps = []  # (score, tokens), best first; equal scores keep arrival order
        done = False
        L = width

        def add(tokens, sum_logprobs):
            sc = sum_logprobs / (len(tokens) ** length_penalty)
            if len(hyps) == beams and sc <= hyps[-1][0]:
                return
            at = len(hyps) if len(hyps) < beams else beams - 1
            while at > 0 and sc > hyps[at - 1][0]:
                at -= 1
            hyps.insert(at, (sc, list(tokens)))
            del hyps[beams:]

        while L < max_length and not done:
            cand = []
            for k in range(beams):
                lp = log_softmax(logits_of(real[k])) + scores[k]
                V = lp.shape[0]
                cand += [(-lp[t], k * V + t) for t in range(V)]
            cand.sort()
            best = cand[:top_k]
            if len(cand) > top_k:
                gaps.append(float(cand[top_k][0] - cand[top_k - 1][0]))
            nseqs, nreal, nscores = [], [], []
            for j, (neg, flat) in enumerate(best):
                k, t = divmod(flat, V)
                if t in eos:
                    if j >= beams:
                        continue
                    add(seqs[k], -neg)
                    continue
                nseqs.append(seqs[k] + [t])
                nreal.append(real[k] + [t])
                nscores.append(-neg)
                if len(nseqs) == beams:
                    break
            if len(hyps) == beams:
                cur = -best[0][0] / (L ** length_penalty)
                done = early_stopping or not hyps[-1][0] < cur
            seqs, real, scores = nseqs, nreal, nscores
            L += 1
        if not done:
            for k in range(beams):
                add(seqs[k], scores[k])
        out += [h[1] for h in hyps[:num_return]]
    return out, gaps


def run_batch(a, ref):
    cfg = ref.W.cfg["model"]
    pad = cfg.get("pad_token_id", 0)
    eos = cfg.get("eos_token_id", [])
    eos = set(eos if isinstance(eos, list) else [eos])
    prompts = [[int(x) for x in p.split(",") if x.strip()] for p in a.batch.split(";") if p.strip()]
    cache = {}

    def logits_of(tokens):
        key = tuple(tokens)
        if key not in cache:
            cache[key] = ref.logits(tokens)[-1]
        return cache[key]

    if a.num_beams > 1:
        seqs, gaps = beam_batch(logits_of, prompts, pad, eos, a.max_new_tokens, a.num_beams, a.num_return_sequences,
                                a.length_penalty, not a.no_early_stopping)
        info = {"min_candidate_gap": round(min(gaps), 6) if gaps else None}
    else:
        seqs, margins = greedy_batch(logits_of, prompts, pad, eos, a.max_new_tokens, a.stop_at_eos)
        info = {"min_top2_margin": round(min(margins), 6) if margins else None}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "batch.json"), "w") as fh:
        json.dump(dict(sequences=seqs, **info), fh)
        fh.write("\n")
    print(json.dumps(dict(sequences=seqs, **info)))


def write_pb(path, arr, name=""):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name)
    with open(path, "wb") as fh:
        fh.write(t.SerializeToString())


def write_case(out_dir, ref, ids, past_np, onnx_style, pad_past):
    """One backend-test data set: feeds = ids (+ past), expected = logits + presents after the run."""
    os.makedirs(out_dir, exist_ok=True)
    past_len = 0 if past_np is None else past_np[0][0].shape[2]
    S = len(ids)
    KVH, D = ref.W.KVH, ref.W.D
    cap = past_len + S if onnx_style else (past_len + S if pad_past else past_len)
    feeds = [np.asarray([ids], np.int64), np.ones((1, past_len + S), np.int64)]
    for li in range(len(ref.layers)):
        for j in range(2):
            buf = np.zeros((1, KVH, cap, D), np.float32)
            if past_np is not None:
                buf[:, :, :past_len] = past_np[li][j]
            feeds.append(buf)
    logits = ref.forward(ids).astype(np.float32)[None]
    outs = [logits] + [t for kv in ref.presents() for t in kv]
    for k, a in enumerate(feeds):
        write_pb(os.path.join(out_dir, f"input_{k}.pb"), a)
    for k, a in enumerate(outs):
        write_pb(os.path.join(out_dir, f"output_{k}.pb"), a)
    return logits[0]


def argmax_first(row):
    return int(np.argmax(row))  # numpy returns the first maximal index


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--prompt-ids")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch", help="prompts as ids 'a,b,c;d,e': writes OUT/batch.json (see the module doc)")
    ap.add_argument("--stop-at-eos", action="store_true")
    ap.add_argument("--num-beams", type=int, default=1)
    ap.add_argument("--num-return-sequences", type=int, default=1)
    ap.add_argument("--length-penalty", type=float, default=1.0)
    ap.add_argument("--no-early-stopping", action="store_true")
    a = ap.parse_args()
    ref = make_reference(a.model_dir)
    if a.batch:
        return run_batch(a, ref)
    vocab = ref.lm.shape[1]
    prompt = ([int(s) for s in a.prompt_ids.split(",") if s.strip()] if a.prompt_ids
              else mulberry32_ids(a.prompt_len, vocab))
    os.makedirs(a.out, exist_ok=True)
    # `nxrt test OUT` data sets (prefill, then one decode step fed from its presents): the fp32 genai and onnx
    # styles, whose IO the data sets follow.
    if ref.W.style in ("genai", "onnx") and ref.W.cfg.get("nxrt", {}).get("dtype", "fp32") == "fp32":
        same_dir = os.path.realpath(a.out) == os.path.realpath(a.model_dir)
        for fn in ("model.onnx", "model.onnx.data"):
            if same_dir:
                break  # writing the test data next to the model itself: nothing to link
            dst = os.path.join(a.out, fn)
            if os.path.lexists(dst):
                os.remove(dst)
            src = os.path.join(a.model_dir, fn)
            try:
                os.link(src, dst)  # a hard link: runtimes refuse external data resolving outside the model folder
            except OSError:
                shutil.copyfile(src, dst)
        onnx_style = ref.W.style == "onnx"
        ref.reset()
        pl = write_case(os.path.join(a.out, "test_data_set_0"), ref, prompt, None, onnx_style, False)
        t0 = argmax_first(pl[-1])
        pres = ref.presents()
        write_case(os.path.join(a.out, "test_data_set_1"), ref, [t0], pres, onnx_style, False)

    # greedy generation
    ref.reset()
    logits = ref.forward(prompt)
    np.save(os.path.join(a.out, "prefill_logits.npy"), logits.astype(np.float32))
    rows, toks = [], []
    row = logits[-1]
    for step in range(a.max_new_tokens):
        rows.append(row.astype(np.float32))
        tok = argmax_first(row)
        toks.append(tok)
        if step + 1 < a.max_new_tokens:
            row = ref.forward([tok])[-1]
    np.save(os.path.join(a.out, "step_logits.npy"), np.stack(rows))
    srt = np.sort(np.stack(rows), axis=1)
    margins = (srt[:, -1] - srt[:, -2]).tolist()
    with open(os.path.join(a.out, "tokens.json"), "w") as fh:
        json.dump({"prompt": prompt, "tokens": toks, "top2_margin": [round(m, 6) for m in margins]}, fh)
        fh.write("\n")
    print(json.dumps({"prompt": prompt, "tokens": toks, "min_top2_margin": round(min(margins), 6)}))


if __name__ == "__main__":
    main()
