#!/usr/bin/python3
"""Time to a first result: what a one-shot `nxrt run` pays before steady state, against ORT.

Per round and model, fresh processes of each runtime run `bench MODEL --warmup 0 --runs 1` one after
another (the order rotating each round); each reports create_ms (load, optimize, plan, weight packing)
and first_run_ms (the first inference, where shape-specialized kernels are made: Winograd filter
transforms, packing per shape). The process's wall time and peak RSS come from /usr/bin/time. Medians
over rounds; ratios are taken within a round (ORT / nxrt: above 1, nxrt is faster).

  bench/first_result.py --models DIR,DIR,... [--rounds 5] [--threads 1] [--nxrt PATH]
                        [--base PATH] [--ort PATH] [--no-pin]

--base: a second nxrt build (e.g. an older commit's) run in the same rounds, for an A/B of a change.
1-thread rounds pin every process of the round to one CPU, cycling through the CPUs round by round
(as bench/isa_compare.sh does). Prints a markdown table; raw lines go to build/perf/first_result.jsonl.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inputs_of(model_dir):
    d = os.path.join(model_dir, "test_data_set_0")
    names = sorted((f for f in os.listdir(d) if f.startswith("input_") and f.endswith(".pb")),
                   key=lambda f: int(f[len("input_"):-len(".pb")]))
    out = []
    for f in names:
        out += ["--input", os.path.join(d, f)]
    return out


def one(exe, model_dir, threads, cpu):
    """One fresh process: (create_ms, first_run_ms, wall_s, max_rss_mb)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        cmd = ["/usr/bin/time", "-f", "%e %M", "-o", tf.name, exe, "bench",
               os.path.join(model_dir, "model.onnx"), *inputs_of(model_dir),
               "--threads", str(threads), "--warmup", "0", "--runs", "1"]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1]
        j = json.loads(line)
        wall, rss_kb = tf.read().split()[-2:]
    return float(j["create_ms"]), float(j["first_run_ms"]), float(wall), float(rss_kb) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--nxrt", default=os.path.join(ROOT, "build", "nxrt"))
    ap.add_argument("--base", default=None)
    ap.add_argument("--ort", default=os.environ.get("NXRT_ORT", os.path.join(ROOT, "build", "ort-tool", "ort")))
    ap.add_argument("--no-pin", action="store_true")
    a = ap.parse_args()
    runtimes = [("nxrt", a.nxrt)]
    if a.base:
        runtimes.append(("base", a.base))
    if a.ort and os.path.exists(a.ort):
        runtimes.append(("ort", a.ort))
    cpus = sorted(os.sched_getaffinity(0))
    pin = not a.no_pin and a.threads == 1
    models = [m for m in a.models.split(",") if m]
    rows = {}  # (model, runtime) -> list of (create, first, wall, rss)
    raw_path = os.path.join(ROOT, "build", "perf", "first_result.jsonl")
    os.makedirs(os.path.dirname(raw_path), exist_ok=True)
    with open(raw_path, "w") as raw:
        for r in range(a.rounds):
            cpu = cpus[r % len(cpus)] if pin else None
            for m in models:
                order = runtimes[r % len(runtimes):] + runtimes[:r % len(runtimes)]
                for name, exe in order:
                    res = one(exe, m, a.threads, cpu)
                    rows.setdefault((m, name), []).append(res)
                    raw.write(json.dumps({"round": r, "model": os.path.basename(m.rstrip("/")), "runtime": name,
                                          "cpu": cpu, "create_ms": res[0], "first_run_ms": res[1],
                                          "wall_s": res[2], "max_rss_mb": res[3]}) + "\n")
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    names = [n for n, _ in runtimes]
    med = statistics.median
    head = "| model | " + " | ".join(f"{n} create + first run ms" for n in names)
    head += " | " + " | ".join(f"{n} process s" for n in names) + " | " + " | ".join(f"{n} peak RSS MB" for n in names)
    ratio_names = [n for n in names if n != "nxrt"]
    head += "".join(f" | {n}/nxrt (create + first)" for n in ratio_names) + " |"
    print(head)
    print("|---|" + "---:|" * (3 * len(names) + len(ratio_names)))
    for m in models:
        cells = [os.path.basename(m.rstrip("/"))]
        for n in names:
            v = rows[(m, n)]
            cells.append(f"{med([c + f for c, f, _, _ in v]):.0f} ({med([c for c, _, _, _ in v]):.0f} + {med([f for _, f, _, _ in v]):.0f})")
        for n in names:
            cells.append(f"{med([w for _, _, w, _ in rows[(m, n)]]):.2f}")
        for n in names:
            cells.append(f"{med([s for _, _, _, s in rows[(m, n)]]):.0f}")
        for n in ratio_names:
            per_round = [(c2 + f2) / (c1 + f1) for (c1, f1, _, _), (c2, f2, _, _) in zip(rows[(m, "nxrt")], rows[(m, n)])]
            cells.append(f"{med(per_round):.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
