"""The ONNX backend suites through nxrt.InferenceSession: the tests that pass must be exactly the ones
tests/conformance/expected_pass.txt lists for `nxrt test` (same count, same tests), so the Python layer
loses nothing: sequences, optionals, strings, float16/bfloat16/float8/int4 all go through it."""
import json
import os
import subprocess
import sys

import pytest

from backend_data import REPO_ROOT, suite_roots

sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
from conformance_report import is_random_test  # noqa: E402  (the manifest's own rule for random tests)

FOLDERS = ["node", "simple", "pytorch-converted", "pytorch-operator"]
SWEEP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_sweep.py")


def manifest(suite):
    ids = set()
    with open(os.path.join(REPO_ROOT, "tests", "conformance", "expected_pass.txt")) as f:
        for line in f:
            line = line.strip()
            if line.startswith(suite + ":") and line.split(":", 1)[1].split("/")[0] in FOLDERS:
                ids.add(line.split(":", 1)[1])
    return ids


@pytest.fixture(scope="module")
def sweeps():
    """Every present suite swept in its own process, the suites side by side."""
    roots = suite_roots()
    if not roots:
        pytest.skip("no conformance suite present (../shared/onnx-tests, Debian libonnx-testdata)")
    procs = {name: subprocess.Popen([sys.executable, SWEEP, root] + FOLDERS, stdout=subprocess.PIPE, text=True)
             for name, root in roots.items()}
    results = {}
    for name, p in procs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, f"suite {name}: the sweep exited with {p.returncode}"
        results[name] = json.loads(out)
    return results


@pytest.mark.parametrize("suite", ["onnx123", "onnx112"])
def test_python_passes_exactly_what_nxrt_test_passes(sweeps, suite):
    if suite not in sweeps:
        pytest.skip(f"suite {suite} not present")
    got = set(sweeps[suite]["passed"])
    want = manifest(suite)
    newly_failing = {t: sweeps[suite]["failed"].get(t, "not found") for t in sorted(want - got)}
    assert not newly_failing, f"{len(newly_failing)} listed tests fail through Python: {newly_failing}"
    # A test whose expected outputs are random draws passes only when the draws happen to agree (test_bernoulli:
    # ten coin flips), so the manifest never lists one and a chance pass here is not a difference.
    root = suite_roots()[suite]
    extra = sorted(t for t in got - want if not is_random_test(root, t))
    assert not extra, f"passing through Python but not listed for nxrt test: {extra}"
    node = sum(1 for t in got if t.startswith("node/"))
    print(f"{suite}: {len(got)} passed ({node} node tests), {len(sweeps[suite]['failed'])} failed, as nxrt test")
