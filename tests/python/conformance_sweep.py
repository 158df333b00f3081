"""Runs every ONNX backend test in FOLDERs of one suite through nxrt.InferenceSession and prints a
JSON object: {"passed": [ids], "failed": {id: reason}}, ids as in tests/conformance/expected_pass.txt
("node/test_abs"). Run in its own process by test_conformance.py (a crash fails that suite only).

usage: conformance_sweep.py SUITE_ROOT FOLDER..."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401  (finds the nxrt package)
from backend_data import run_test_dir, test_dirs  # noqa: E402


def main():
    root, folders = sys.argv[1], sys.argv[2:]
    passed, failed = [], {}
    for folder in folders:
        if not os.path.isdir(os.path.join(root, folder)):
            continue
        for d in test_dirs(os.path.join(root, folder)):
            test_id = f"{folder}/{os.path.basename(d)}"
            reason = run_test_dir(d)
            if reason is None:
                passed.append(test_id)
            else:
                failed[test_id] = reason
    json.dump({"passed": passed, "failed": failed}, sys.stdout)


if __name__ == "__main__":
    main()
