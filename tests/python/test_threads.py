"""The GIL is released while a model runs, so other Python threads make progress; runs on one session
from several threads are correct (they run at once inside nxrt, each with its own run context)."""
import sys
import threading
import time

import numpy as np
from onnx import TensorProto, helper

import nxrt
from builders import info, matmul_chain_model, model_bytes


def one_thread_session(data):
    so = nxrt.SessionOptions()
    so.intra_op_num_threads = 1
    return nxrt.InferenceSession(data, so)


def long_running_session(x, at_least_seconds=0.4):
    """A session whose run on x takes at least about that long on this machine (calibrated)."""
    steps = 50
    while True:
        sess = one_thread_session(matmul_chain_model(size=x.shape[-1], steps=steps))
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        seconds = time.perf_counter() - t0
        if seconds >= at_least_seconds or steps >= 5000:
            return sess
        steps = min(5000, int(steps * 1.5 * at_least_seconds / max(seconds, 1e-3)) + 1)


def test_other_threads_run_python_while_a_session_runs():
    x = np.random.default_rng(0).standard_normal((1, 512, 512)).astype(np.float32)
    sess = long_running_session(x)
    feed = {"x": x}
    base_refs = sys.getrefcount(x)
    running = threading.Event()
    result = {}

    def worker():
        running.set()
        t0 = time.perf_counter()
        result["y"] = sess.run(None, feed)[0]
        result["seconds"] = time.perf_counter() - t0
        running.clear()

    t = threading.Thread(target=worker)
    t.start()
    running.wait()
    ticks, refs_seen = [], []
    while t.is_alive():
        ticks.append(time.perf_counter())
        refs_seen.append(sys.getrefcount(x))
        for _ in range(200):  # pure Python work: needs the GIL
            pass
    t.join()
    run_seconds = result["seconds"]
    assert run_seconds > 0.2, f"the model ran {run_seconds:.3f} s: too short to observe"
    gaps = np.diff(ticks)
    # Holding the GIL for the run would stall this loop for the whole run.
    assert gaps.max() < run_seconds / 2, f"this thread stalled {gaps.max():.3f} s during a {run_seconds:.3f} s run"
    assert len(ticks) > 100
    # While it ran, nxrt read x in place: the run held a reference to the caller's array itself.
    assert max(refs_seen) == base_refs + 1
    assert sys.getrefcount(x) == base_refs  # and let go of it afterwards
    np.testing.assert_allclose(result["y"], x, rtol=1e-5, atol=1e-5)


def test_concurrent_runs_on_one_session_are_correct():
    data = model_bytes([helper.make_node("MatMul", ["x", "x"], ["y"])], [info("x", TensorProto.FLOAT, ["n", "n"])],
                       [info("y", TensorProto.FLOAT, ["n", "n"])])
    sess = one_thread_session(data)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((n, n)).astype(np.float32) for n in (64, 96, 128, 64)]
    errors = []

    def worker(i):
        try:
            for _ in range(25):
                x = inputs[i]
                (y,) = sess.run(None, {"x": x})
                np.testing.assert_allclose(y, x @ x, rtol=1e-4, atol=1e-3)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_input_copies_are_released_after_the_run():
    sess = one_thread_session(model_bytes([helper.make_node("Identity", ["x"], ["y"])], [info("x", TensorProto.FLOAT, [4])],
                                          [info("y", TensorProto.FLOAT, [4])]))
    x = np.arange(8, dtype=np.float32)[::2]  # strided: copied before the run
    before = sys.getrefcount(x)
    for _ in range(3):
        sess.run(None, {"x": x})
    assert sys.getrefcount(x) == before
