"""The ONNX backend test layout (model.onnx + test_data_set_*/input_K.pb, output_K.pb) run through
nxrt.InferenceSession, compared as `nxrt test` compares: floats (float, double, float16, bfloat16,
complex) within rtol 1e-3 / atol 1e-5 with NaN equal to NaN, everything else exactly."""
import os

import numpy as np

import nxrt

RTOL, ATOL = 1e-3, 1e-5
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def suite_roots():
    """{suite name: root} for the conformance suites of scripts/suites.sh that exist here."""
    shared = os.environ.get("NXRT_SHARED", os.path.join(REPO_ROOT, "..", "shared"))
    roots = {"onnx123": os.path.join(shared, "onnx-tests"), "onnx112": "/usr/share/libonnx-testdata/data"}
    return {name: root for name, root in roots.items() if os.path.isdir(root)}


def test_dirs(folder):
    """Backend test folders directly under `folder`, sorted by name."""
    out = []
    for name in sorted(os.listdir(folder)):
        d = os.path.join(folder, name)
        if os.path.isfile(os.path.join(d, "model.onnx")) and data_sets(d):
            out.append(d)
    return out


def data_sets(test_dir):
    return sorted(n for n in os.listdir(test_dir) if n.startswith("test_data_set_") and os.path.isdir(os.path.join(test_dir, n)))


def _numbered(folder, prefix):
    files, k = [], 0
    while os.path.isfile(os.path.join(folder, f"{prefix}_{k}.pb")):
        files.append(os.path.join(folder, f"{prefix}_{k}.pb"))
        k += 1
    return files


def read_feeds(sess, data_set):
    """input_K.pb -> {input name: value}: in the order of the inputs that need feeding, unless the
    proto's name is another graph input's (as `nxrt test` binds them)."""
    positional = [a.name for a in sess.get_inputs()]
    every_input = positional + [a.name for a in sess.get_overridable_initializers()]
    feeds = {}
    for k, path in enumerate(_numbered(data_set, "input")):
        target = positional[k] if k < len(positional) else None
        proto_name, value = sess.read_value_file(path, target or every_input[0])
        if proto_name in every_input and proto_name != target:
            target = proto_name
            proto_name, value = sess.read_value_file(path, target)
        if target is None:
            raise ValueError(f"{path}: more input files than model inputs ({len(positional)} need feeding)")
        feeds[target] = value
    return feeds


def _bf16_to_float(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _inner(type_string, prefix):
    return type_string[len(prefix):-1]


def compare(got, want, type_string, what):
    """None when `got` matches `want` (values shaped like run()'s results), else the difference."""
    if type_string.startswith("seq("):
        if not isinstance(got, list) or not isinstance(want, list) or len(got) != len(want):
            return f"{what}: got {_describe(got)}, expected {_describe(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            r = compare(g, w, _inner(type_string, "seq("), f"{what}[{i}]")
            if r:
                return r
        return None
    if type_string.startswith("optional("):
        if got is None or want is None:
            return None if got is None and want is None else f"{what}: got {_describe(got)}, expected {_describe(want)}"
        return compare(got, want, _inner(type_string, "optional("), what)
    if type_string.startswith("map("):
        if not isinstance(got, dict) or got.keys() != want.keys():
            return f"{what}: got {_describe(got)}, expected {_describe(want)}"
        value_type = type_string[type_string.index(",") + 1:-1]
        for k in want:
            r = compare(np.asarray(got[k]), np.asarray(want[k]), value_type, f"{what}[{k!r}]")
            if r:
                return r
        return None
    if not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray):
        return f"{what}: got {_describe(got)}, expected {_describe(want)}"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if type_string == "tensor(bfloat16)":
        got, want = _bf16_to_float(got), _bf16_to_float(want)
    if got.dtype.kind in "fc":
        pairs = [(got.real, want.real), (got.imag, want.imag)] if got.dtype.kind == "c" else [(got, want)]
        for g, w in pairs:
            g, w = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):
                ok = np.where(np.isnan(w) | np.isnan(g), np.isnan(w) & np.isnan(g),
                              np.where(np.isinf(w) | np.isinf(g), g == w, np.abs(g - w) <= ATOL + RTOL * np.abs(w)))
            if not ok.all():
                first = int(np.argmin(ok.reshape(-1)))
                return (f"{what}: {int((~ok).sum())} of {ok.size} elements differ; first at {first}: "
                        f"got {g.reshape(-1)[first]!r}, expected {w.reshape(-1)[first]!r}")
        return None
    if not np.array_equal(got, want):
        return f"{what}: values differ ({type_string})"
    return None


def _describe(v):
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(v, list):
        return f"list of {len(v)}"
    return type(v).__name__ if v is not None else "None"


def run_test_dir(test_dir, threads=1):
    """None when every data set of the folder passes, else why it does not."""
    so = nxrt.SessionOptions()
    so.intra_op_num_threads = threads
    try:
        sess = nxrt.InferenceSession(os.path.join(test_dir, "model.onnx"), so)
    except nxrt.NxrtError as e:
        return f"{type(e).__name__}: {e}"
    outputs = sess.get_outputs()
    for ds in data_sets(test_dir):
        folder = os.path.join(test_dir, ds)
        try:
            feeds = read_feeds(sess, folder)
            got = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001  (a binding bug must fail this test, not the sweep)
            return f"{ds}: {type(e).__name__}: {e}"
        for k, arg in enumerate(outputs):
            path = os.path.join(folder, f"output_{k}.pb")
            if not os.path.isfile(path):
                continue
            _, want = sess.read_value_file(path, arg.name)
            r = compare(got[k], want, arg.type, f"{ds} output {k} '{arg.name}'")
            if r:
                return r
    return None
