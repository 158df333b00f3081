#!/usr/bin/python3
"""Compares greedy generation on one model folder: the numpy reference (tools/genai_reference.py),
`ort generate` (scripts/setup_ort_tool.sh sets it up in build/ort-tool) and `nxrt generate` (build/nxrt), same seeded prompt.

usage: genai_check.py MODEL_DIR [--prompt-len N] [--max-new-tokens N] [--nxrt build/nxrt] [--ort PATH]
                      [--skip-ref] [--skip-ort] [--skip-nxrt]
Prints one line per runtime: tokens matching the reference (or ORT when the reference is skipped), the
first mismatch, and the decode speed; exit 1 when a runtime failed to run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(line[-1]) if line else None), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--nxrt", default=os.path.join(HERE, "..", "build", "nxrt"))
    ap.add_argument("--ort", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "ort-tool", "ort"))
    ap.add_argument("--skip-ref", action="store_true")
    ap.add_argument("--skip-ort", action="store_true")
    ap.add_argument("--skip-nxrt", action="store_true")
    a = ap.parse_args()
    gen_args = [a.model_dir, "--prompt-len", str(a.prompt_len), "--max-new-tokens", str(a.max_new_tokens)]
    results = {}
    failed = False
    if not a.skip_ref:
        with tempfile.TemporaryDirectory() as out:
            r, err = run_json([sys.executable, os.path.join(HERE, "genai_reference.py"), a.model_dir, out,
                               "--prompt-len", str(a.prompt_len), "--max-new-tokens", str(a.max_new_tokens)])
        results["reference"] = (r, err)
    if not a.skip_ort:
        results["ort"] = run_json([a.ort, "generate"] + gen_args)
    if not a.skip_nxrt:
        results["nxrt"] = run_json([a.nxrt, "generate"] + gen_args + ["--json"])
    base_name = next((k for k in ("reference", "ort") if k in results and results[k][0]), None)
    base = results[base_name][0]["tokens"] if base_name else None
    for name, (r, err) in results.items():
        if r is None:
            failed = True
            print(f"{name:10s} FAILED: {err}")
            continue
        toks = r["tokens"]
        line = f"{name:10s} tokens {toks[:8]}..."
        if base is not None and name != base_name:
            same = sum(x == y for x, y in zip(toks, base))
            first = next((i for i, (x, y) in enumerate(zip(toks, base)) if x != y), None)
            line += f" match {base_name} {same}/{len(base)}" + ("" if first is None else f" (first diff at {first})")
        if "decode_tok_s" in r:
            line += f"  prefill {r['prefill_ms']} ms  decode {r['decode_tok_s']} tok/s"
        if "min_top2_margin" in r:
            line += f"  min top-2 logit margin {r['min_top2_margin']}"
        print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
