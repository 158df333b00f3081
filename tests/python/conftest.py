"""Shared setup for the nxrt Python tests: the package comes from the build tree (PYTHONPATH set by
ctest; `make test` runs these through ctest) and models are built in memory with onnx.helper."""
import os
import sys

import pytest

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _import_nxrt():
    try:
        import nxrt  # noqa: F401
    except ImportError:
        # Run by hand from the repository root: use the default build folder.
        sys.path.insert(0, os.path.join(REPO_ROOT, "build", "python"))
        import nxrt  # noqa: F401


_import_nxrt()


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT
