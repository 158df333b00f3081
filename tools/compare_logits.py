#!/usr/bin/python3
"""Compares `nxrt generate --dump-logits` rows with tools/genai_reference.py's step_logits.npy.

Both are float32 [new_tokens, vocab]: row 0 is the prefill's last position, row i the decode step that
chose token i. A row passes when max |got - ref| <= TOL * max(1, max |ref row|): relative to the row's
largest |logit|, with an absolute floor of TOL for rows whose logits are all below 1 in magnitude.

usage: compare_logits.py GOT.npy REF.npy [--tol 1e-3] [--min-rows N]
Prints one JSON line (rows compared, worst absolute and relative diff, the worst row); exit 1 on a failing
row, a shape mismatch or fewer than N rows.
"""
import argparse
import json
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("got")
    ap.add_argument("ref")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--min-rows", type=int, default=1)
    a = ap.parse_args()
    got = np.load(a.got).astype(np.float64)
    ref = np.load(a.ref).astype(np.float64)
    if got.ndim != 2 or got.shape[1] != ref.shape[1]:
        print(f"shape mismatch: got {got.shape}, reference {ref.shape}")
        return 1
    n = min(got.shape[0], ref.shape[0])
    if n < a.min_rows:
        print(f"only {n} rows to compare (got {got.shape[0]}, reference {ref.shape[0]}), need {a.min_rows}")
        return 1
    diff = np.abs(got[:n] - ref[:n]).max(axis=1)
    scale = np.maximum(1.0, np.abs(ref[:n]).max(axis=1))
    rel = diff / scale
    worst = int(np.argmax(rel))
    ok = bool((rel <= a.tol).all()) and bool(np.isfinite(got[:n]).all())
    print(json.dumps({"rows": n, "max_abs_diff": float(diff.max()), "max_rel_diff": float(rel.max()),
                      "worst_row": worst, "max_abs_logit": float(np.abs(ref[:n]).max()), "tol": a.tol, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
