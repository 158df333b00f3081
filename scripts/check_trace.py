#!/usr/bin/python3
"""Checks the Chrome-trace / Perfetto JSON that nxrt writes with NXRT_TRACE=path.json.

Runs a real model (default: light_resnet50 from ../shared/models/light, with its test_data_set_0
inputs) once with `nxrt run` and once with `nxrt bench --warmup 0 --runs R` (1 + R runs in one
session), each with NXRT_TRACE set, and checks each trace:

  1. Well-formed JSON in trace-event format: an object with a `traceEvents` array, or a bare array.
     Every event has `ph`; complete events ('X') have a string name, numeric ts >= 0 and dur >= 0, pid
     and tid; metadata events ('M') have name, pid and an args object; B/E/i/C events have ts, pid, tid.
  2. Session phases, category `session`: `load`, `plan`, then one `first run` and, for bench, one
     `run` span per later run, in that order and not overlapping. `optimize` is expected too (between
     load and plan); while the runtime has no optimizer phase its absence is a warning, an error
     with --require-optimize.
  3. Per run: exactly one complete event of category `node` per executed top-level node, all inside
     that run's span; every `args.node_index` once. Events nested inside another node event (the
     bodies of If/Loop/Scan) are counted separately and not held to a count.
     The executed-node count is read from the trace itself when the runtime writes it (the first of:
     the run span's args.steps, the plan span's args.steps, the optimize span's args.nodes_after);
     otherwise from `nxrt info` (graph nodes as loaded), which is only right while no optimizer pass
     removes or fuses nodes: then the check also compares the op histogram with `nxrt info`'s, and
     says that it fell back.

  check_trace.py [--nxrt build/nxrt] [--model DIR_OR_NAME] [--bench-runs 2] [--require-optimize]
                 [--keep DIR]
  check_trace.py --model DIR_OR_NAME --trace FILE.json [--runs N]   (check an existing trace)
Exit 0 when every check passes.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 0.01  # us: ts/dur are written with 3 decimals; containment tests allow this much rounding.


class Checker:
    def __init__(self, label):
        self.label = label
        self.errors = []
        self.warnings = []
        self.notes = []

    def err(self, msg):
        self.errors.append(msg)

    def warn(self, msg):
        self.warnings.append(msg)

    def note(self, msg):
        self.notes.append(msg)


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load_events(path, c):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        c.err(f"trace is not well-formed JSON: {e}")
        return None
    if isinstance(doc, dict):
        if not isinstance(doc.get("traceEvents"), list):
            c.err("JSON object form without a traceEvents array")
            return None
        events = doc["traceEvents"]
        if "displayTimeUnit" in doc and doc["displayTimeUnit"] not in ("ms", "ns"):
            c.err(f"displayTimeUnit {doc['displayTimeUnit']!r} (must be 'ms' or 'ns')")
    elif isinstance(doc, list):
        events = doc
    else:
        c.err("top level is neither an object nor an array")
        return None
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            c.err(f"{where} is not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or not ph:
            c.err(f"{where} has no ph")
            continue
        where += f" ({ph} {e.get('name')!r})"
        if "pid" not in e:
            c.err(f"{where} has no pid")
        if not isinstance(e.get("name"), str):
            c.err(f"{where} has no string name")
        if "args" in e and not isinstance(e["args"], dict):
            c.err(f"{where}: args is not an object")
        if ph == "M":
            if not isinstance(e.get("args"), dict):
                c.err(f"{where}: metadata event without args")
            continue
        if "tid" not in e:
            c.err(f"{where} has no tid")
        if not num(e.get("ts")) or e["ts"] < 0:
            c.err(f"{where} has no numeric ts >= 0")
        if ph == "X" and (not num(e.get("dur")) or e["dur"] < 0):
            c.err(f"{where} has no numeric dur >= 0")
    return [e for e in events if isinstance(e, dict)]


def model_info(nxrt, model):
    out = subprocess.run([nxrt, "info", model], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"check_trace: nxrt info failed: {out.stderr.strip()}")
    m = re.search(r"^nodes: (\d+)", out.stdout, re.M)
    hist = collections.Counter()
    in_ops = False
    for line in out.stdout.splitlines():
        if line == "ops:":
            in_ops = True
        elif in_ops and line.startswith("  "):
            op, n = line.split()
            hist[op] = int(n)
    return int(m.group(1)) if m else None, hist


def check_trace(path, c, expect_runs, info_nodes, info_hist, require_optimize):
    events = load_events(path, c)
    if events is None:
        return
    X = [e for e in events if e.get("ph") == "X" and num(e.get("ts")) and num(e.get("dur"))]
    session = [e for e in X if e.get("cat") == "session"]
    nodes = [e for e in X if e.get("cat") == "node"]
    c.note(f"{len(events)} events: {len(session)} session, {len(nodes)} node, "
           f"{len(events) - len(session) - len(nodes)} other")

    # Phases.
    byname = collections.defaultdict(list)
    for e in session:
        byname[e["name"]].append(e)
    for ph in ("load", "plan", "first run"):
        if len(byname[ph]) != 1:
            c.err(f"session phase '{ph}': {len(byname[ph])} spans (want exactly 1)")
    if len(byname["optimize"]) > 1:
        c.err(f"session phase 'optimize': {len(byname['optimize'])} spans (want at most 1)")
    elif not byname["optimize"]:
        (c.err if require_optimize else c.warn)("no 'optimize' session span (load/optimize/plan/first run expected)")
    if len(byname["run"]) != expect_runs - 1:
        c.err(f"{len(byname['run'])} 'run' spans after the first run (want {expect_runs - 1})")
    seq = [byname[p][0] for p in ("load", "optimize", "plan") if len(byname[p]) == 1]
    runs = sorted(byname["first run"] + byname["run"], key=lambda e: e["ts"])
    if runs and runs[0]["name"] != "first run":
        c.err("a 'run' span starts before the 'first run' span")
    seq += runs
    for a, b in zip(seq, seq[1:]):
        if a["ts"] + a["dur"] > b["ts"] + EPS:
            c.err(f"session phases out of order or overlapping: '{a['name']}' [{a['ts']}, +{a['dur']}] "
                  f"then '{b['name']}' at {b['ts']}")
    phases = ", ".join(f"{e['name']} {e['dur'] / 1000:.1f} ms" for e in seq[:4])
    c.note(f"phases: {phases}" + (f", {len(runs) - 1} more run(s)" if len(runs) > 1 else ""))

    # Expected executed top-level nodes per run: from the trace when it says, else nxrt info.
    expected, source = None, None
    for e, key, what in ((runs[0] if runs else None, "steps", "first run span args.steps"),
                         (byname["plan"][0] if byname["plan"] else None, "steps", "plan span args.steps"),
                         (byname["optimize"][0] if byname["optimize"] else None, "nodes_after",
                          "optimize span args.nodes_after")):
        if e is not None and num(e.get("args", {}).get(key)):
            expected, source = int(e["args"][key]), what
            break
    fallback = expected is None
    if fallback and byname["optimize"]:
        c.err("the trace has an 'optimize' phase but no executed-node count, so the per-node check cannot "
              "know how many nodes a run executes: the plan span needs args.steps (top-level plan steps)")
    if fallback:
        expected, source = info_nodes, "`nxrt info` node count (the trace has no executed-node count)"
        c.warn("the trace does not say how many nodes a run executes; compared with the graph's node count "
               "from `nxrt info`, which is wrong once an optimizer pass fuses or removes nodes")

    # Top-level vs nested node events: a node event inside another node event's span (If/Loop/Scan
    # bodies run inside their parent's compute) is nested.
    nodes.sort(key=lambda e: (e["ts"], -e["dur"]))
    top, nested, stack = [], [], []
    for e in nodes:
        end = e["ts"] + e["dur"]
        while stack and not (stack[-1]["ts"] <= e["ts"] < stack[-1]["ts"] + stack[-1]["dur"]
                             and end <= stack[-1]["ts"] + stack[-1]["dur"]):
            stack.pop()
        (nested if stack else top).append(e)
        stack.append(e)
    for k, r in enumerate(runs):
        lo, hi = r["ts"] - EPS, r["ts"] + r["dur"] + EPS
        mine = [e for e in top if lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
        sub = [e for e in nested if lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
        label = f"run {k} ('{r['name']}')"
        if expected is not None and len(mine) != expected:
            c.err(f"{label}: {len(mine)} top-level node events, expected {expected} from {source}")
        idx = [e.get("args", {}).get("node_index") for e in mine]
        if any(not num(i) for i in idx):
            c.err(f"{label}: node event(s) without a numeric args.node_index")
        else:
            dup = [i for i, n in collections.Counter(idx).items() if n > 1]
            if dup:
                c.err(f"{label}: node_index repeated: {sorted(dup)[:10]}")
        for e in mine:
            if e.get("pid") != r.get("pid"):
                c.err(f"{label}: node event pid {e.get('pid')} differs from the run span's {r.get('pid')}")
                break
        if k == 0:
            c.note(f"first run: {len(mine)} top-level node events (expected {expected} from {source})"
                   + (f", {len(sub)} nested in control-flow nodes" if sub else ""))
            if fallback and info_hist:
                h = collections.Counter(
                    e["name"] if e.get("args", {}).get("domain", "ai.onnx") in ("ai.onnx", "")
                    else f"{e['args']['domain']}::{e['name']}" for e in mine)
                if h != info_hist:
                    diff = {op: (h.get(op, 0), info_hist.get(op, 0)) for op in set(h) | set(info_hist)
                            if h.get(op, 0) != info_hist.get(op, 0)}
                    c.err(f"{label}: op histogram differs from nxrt info (trace, info): {diff}")
    inside = sum(1 for e in top for r in runs
                 if r["ts"] - EPS <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + EPS)
    if inside != len(top):
        c.err(f"{len(top) - inside} top-level node event(s) outside every run span")


def resolve_model(arg):
    for d in (arg, os.path.join(ROOT, "..", "shared", "models", "light", arg),
              os.path.join(ROOT, "..", "..", "shared", "models", "light", arg),
              os.path.join(ROOT, "build", "bench-models", arg)):
        if os.path.isfile(os.path.join(d, "model.onnx")):
            return os.path.realpath(d)
    sys.exit(f"check_trace: model {arg} not found (a folder with model.onnx, or a light model name)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nxrt", default=os.path.join(ROOT, "build", "nxrt"))
    ap.add_argument("--model", default="light_resnet50")
    ap.add_argument("--bench-runs", type=int, default=2)
    ap.add_argument("--require-optimize", action="store_true")
    ap.add_argument("--keep", help="write the traces into this folder (default: a temporary one, removed)")
    ap.add_argument("--trace", help="check this existing trace of --model instead of running nxrt")
    ap.add_argument("--runs", type=int, default=1, help="with --trace: how many runs it holds")
    a = ap.parse_args()
    nxrt = os.path.realpath(a.nxrt)
    d = resolve_model(a.model)
    model = os.path.join(d, "model.onnx")
    if a.trace:
        info_nodes, info_hist = model_info(nxrt, model)
        c = Checker("trace")
        check_trace(a.trace, c, a.runs, info_nodes, info_hist, a.require_optimize)
        for tag, msgs in (("", c.notes), ("WARN ", c.warnings), ("FAIL ", c.errors)):
            for m in msgs:
                print(f"  {tag}{m}")
        print("check_trace: " + ("FAILED" if c.errors else "ok"))
        return 1 if c.errors else 0
    data = os.path.join(d, "test_data_set_0")
    files = sorted((f for f in os.listdir(data) if re.fullmatch(r"input_\d+\.pb", f)),
                   key=lambda f: int(f[6:-3])) if os.path.isdir(data) else []
    ins = [x for f in files for x in ("--input", os.path.join(data, f))]
    info_nodes, info_hist = model_info(nxrt, model)
    work = a.keep or tempfile.mkdtemp(prefix="nxrt_trace_")
    os.makedirs(work, exist_ok=True)
    cases = [("run", [nxrt, "run", model] + ins, 1)]
    if a.bench_runs > 0:
        cases.append(("bench", [nxrt, "bench", model] + ins + ["--warmup", "0", "--runs", str(a.bench_runs)],
                      1 + a.bench_runs))
    failed = False
    print(f"check_trace: {os.path.basename(d)} ({info_nodes} graph nodes per nxrt info)")
    for label, cmd, nruns in cases:
        path = os.path.join(work, f"trace_{label}.json")
        if os.path.exists(path):
            os.remove(path)
        env = dict(os.environ, NXRT_TRACE=path)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        c = Checker(label)
        if r.returncode != 0:
            c.err(f"`nxrt {label}` exited {r.returncode}: {r.stderr.strip()[:300]}")
        elif not os.path.exists(path):
            c.err(f"NXRT_TRACE={path} but no trace file was written")
        else:
            check_trace(path, c, nruns, info_nodes, info_hist, a.require_optimize)
        print(f"  nxrt {label} ({nruns} run(s)), trace {os.path.getsize(path) if os.path.exists(path) else 0} bytes:")
        for n in c.notes:
            print(f"    {n}")
        for w in c.warnings:
            print(f"    WARN {w}")
        for e in c.errors[:20]:
            print(f"    FAIL {e}")
        if len(c.errors) > 20:
            print(f"    ... {len(c.errors) - 20} more failures")
        failed |= bool(c.errors)
    if not a.keep:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    print("check_trace: " + ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
