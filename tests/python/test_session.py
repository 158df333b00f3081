"""InferenceSession and friends: ONNX Runtime's Python API names and behaviour."""
import json
import os
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import nxrt
from builders import add_model, info, model_bytes


def test_version_providers_device():
    assert isinstance(nxrt.__version__, str) and nxrt.__version__.count(".") == 2
    assert nxrt.get_available_providers() == ["CPUExecutionProvider"]
    assert nxrt.get_device() == "CPU"


def test_load_from_path_pathlike_and_bytes(tmp_path):
    data = add_model()
    path = tmp_path / "add.onnx"
    path.write_bytes(data)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x + np.array([1, 2, 3], np.float32)
    for source in (str(path), path, data, bytearray(data)):
        sess = nxrt.InferenceSession(source)
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, want)
    with pytest.raises(TypeError, match="Unable to load from type"):
        nxrt.InferenceSession(42)
    with pytest.raises(TypeError, match="unexpected keyword"):
        nxrt.InferenceSession(data, no_such_argument=1)


def test_node_args_shapes_types_and_overridable_initializers():
    sess = nxrt.InferenceSession(add_model())
    (x,) = sess.get_inputs()
    assert (x.name, x.shape, x.type) == ("x", ["batch", 3], "tensor(float)")
    (y,) = sess.get_outputs()
    assert (y.name, y.shape, y.type) == ("y", ["batch", 3], "tensor(float)")
    (w,) = sess.get_overridable_initializers()
    assert (w.name, w.shape, w.type) == ("w", [3], "tensor(float)")
    assert repr(x) == "NodeArg(name='x', type='tensor(float)', shape=['batch', 3])"


def test_unknown_dims_and_unranked_values():
    data = model_bytes([helper.make_node("Identity", ["x"], ["y"])],
                       [info("x", TensorProto.INT64, [None, "seq", 4])], [info("y", TensorProto.INT64, None)])
    sess = nxrt.InferenceSession(data)
    assert sess.get_inputs()[0].shape == [None, "seq", 4]
    assert sess.get_inputs()[0].type == "tensor(int64)"
    assert sess.get_outputs()[0].shape == []


def test_overriding_an_initializer_replaces_it_for_that_run():
    sess = nxrt.InferenceSession(add_model())
    x = np.zeros((1, 3), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], [[1, 2, 3]])
    np.testing.assert_array_equal(sess.run(None, {"x": x, "w": np.full(3, 5, np.float32)})[0], [[5, 5, 5]])
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], [[1, 2, 3]])  # the default is back


def test_run_output_names_select_and_order():
    data = model_bytes([helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Abs", ["x"], ["b"])],
                       [info("x", TensorProto.FLOAT, [2])],
                       [info("a", TensorProto.FLOAT, [2]), info("b", TensorProto.FLOAT, [2])])
    sess = nxrt.InferenceSession(data)
    x = np.array([-1, 2], np.float32)
    a, b = sess.run(None, {"x": x})
    np.testing.assert_array_equal(a, [1, -2])
    np.testing.assert_array_equal(b, [1, 2])
    b2, a2 = sess.run(["b", "a"], {"x": x})
    np.testing.assert_array_equal(b2, b)
    np.testing.assert_array_equal(a2, a)
    (only_b,) = sess.run(["b"], {"x": x})
    np.testing.assert_array_equal(only_b, b)


def test_model_metadata():
    data = add_model(producer_name="unit-test", producer_version="3.1", domain="ai.test", model_version=7,
                     doc_string="adds w", graph_name="adder", graph_doc="the graph", metadata={"author": "me", "k": "v"})
    meta = nxrt.InferenceSession(data).get_modelmeta()
    assert meta.producer_name == "unit-test"
    assert meta.producer_version == "3.1"
    assert meta.graph_name == "adder"
    assert meta.graph_description == "the graph"
    assert meta.domain == "ai.test"
    assert meta.description == "adds w"
    assert meta.version == 7
    assert meta.custom_metadata_map == {"author": "me", "k": "v"}


def test_providers_cpu_accepted_others_warn_and_fall_back():
    data = add_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sess = nxrt.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert sess.get_provider_options() == {"CPUExecutionProvider": {}}
    with pytest.warns(RuntimeWarning, match="CUDAExecutionProvider"):
        sess = nxrt.InferenceSession(data, providers=[("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_array_equal(sess.run(None, {"x": np.zeros((1, 3), np.float32)})[0], [[1, 2, 3]])
    sess = nxrt.InferenceSession(data, providers=["CPUExecutionProvider"], provider_options=[{"arena_extend_strategy": 1}])
    assert sess.get_provider_options() == {"CPUExecutionProvider": {"arena_extend_strategy": "1"}}
    with pytest.raises(ValueError, match="same length"):
        nxrt.InferenceSession(data, providers=["CPUExecutionProvider"], provider_options=[{}, {}])
    with pytest.warns(RuntimeWarning):
        sess.set_providers(["TensorrtExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_session_options_levels_threads_and_config_entries():
    so = nxrt.SessionOptions()
    assert so.graph_optimization_level == nxrt.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert [int(v) for v in nxrt.GraphOptimizationLevel] == [0, 1, 2, 99]
    assert nxrt.ExecutionMode.ORT_SEQUENTIAL == 0
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for level in nxrt.GraphOptimizationLevel:
        for threads in (0, 1, 2):
            so = nxrt.SessionOptions()
            so.graph_optimization_level = level
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.execution_mode = nxrt.ExecutionMode.ORT_SEQUENTIAL
            so.log_severity_level = 3
            sess = nxrt.InferenceSession(add_model(), sess_options=so)
            assert sess.get_session_options() is so
            np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + [1, 2, 3])
    so = nxrt.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.raises(nxrt.capi.InvalidArgument, match="no config entry 'missing'"):
        so.get_session_config_entry("missing")
    so.graph_optimization_level = 5
    with pytest.raises(nxrt.capi.InvalidArgument, match="graph_optimization_level 5"):
        nxrt.InferenceSession(add_model(), so)
    so = nxrt.SessionOptions()
    so.intra_op_num_threads = -1
    with pytest.raises(nxrt.capi.InvalidArgument, match="intra_op_num_threads -1"):
        nxrt.InferenceSession(add_model(), so)


def test_run_options():
    sess = nxrt.InferenceSession(add_model())
    ro = nxrt.RunOptions()
    ro.run_tag = "tag"
    ro.log_severity_level = 0
    ro.add_run_config_entry("k", "v")
    assert ro.get_run_config_entry("k") == "v"
    x = np.zeros((1, 3), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x}, ro)[0], [[1, 2, 3]])
    ro.terminate = True
    with pytest.raises(nxrt.capi.Fail, match="terminate"):
        sess.run(None, {"x": x}, ro)
    with pytest.raises(nxrt.capi.Fail, match="terminate"):
        sess.run_with_ort_values(None, {"x": nxrt.OrtValue.ortvalue_from_numpy(x)}, ro)


def test_profiling_writes_a_chrome_trace(tmp_path):
    so = nxrt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = nxrt.InferenceSession(add_model(), so)
    sess.run(None, {"x": np.zeros((2, 3), np.float32)})
    path = sess.end_profiling()
    assert os.path.basename(path).startswith("prof_") and path.endswith(".json")
    with open(path) as f:
        trace = json.load(f)
    names = [e["name"] for e in trace["traceEvents"]]
    assert "load" in names and "Add" in names and "first run" in names
    assert sess.end_profiling() == ""  # profiling stopped
    assert nxrt.InferenceSession(add_model()).end_profiling() == ""


def test_optimized_model_filepath(tmp_path):
    so = nxrt.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    sess = nxrt.InferenceSession(add_model(), so)
    x = np.ones((1, 3), np.float32)
    again = nxrt.InferenceSession(so.optimized_model_filepath)
    np.testing.assert_array_equal(again.run(None, {"x": x})[0], sess.run(None, {"x": x})[0])


def test_disabled_optimizers_skip_nxrt_passes_and_warn_on_other_names(tmp_path):
    # y = x * Sigmoid(x): fuse_silu makes it one nxrt Swish node unless disabled by name.
    model = model_bytes([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
                        [info("x", TensorProto.FLOAT, [4])], [info("y", TensorProto.FLOAT, [4])])
    assert "fuse_silu" in nxrt._nxrt.optimizer_pass_names()
    x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)
    ops = {}
    for disabled in ([], ["fuse_silu"]):
        so = nxrt.SessionOptions()
        so.optimized_model_filepath = str(tmp_path / f"opt{len(disabled)}.onnx")
        sess = nxrt.InferenceSession(model, so, disabled_optimizers=disabled)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x / (1 + np.exp(-x)), rtol=1e-6)
        import onnx
        ops[len(disabled)] = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    assert ops[0] == ["Swish"]
    assert ops[1] == ["Sigmoid", "Mul"]
    # An ONNX Runtime pass name means nothing to nxrt: ignored, with a warning naming it.
    with pytest.warns(RuntimeWarning, match=r"\['EliminateDropout'\] are not nxrt optimizer passes"):
        sess = nxrt.InferenceSession(model, disabled_optimizers=["EliminateDropout", "fuse_silu"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], x / (1 + np.exp(-x)), rtol=1e-6)


def test_read_value_file_reads_backend_test_data(tmp_path):
    from onnx import numpy_helper
    sess = nxrt.InferenceSession(add_model())
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "input_0.pb").write_bytes(numpy_helper.from_array(arr, "x").SerializeToString())
    name, value = sess.read_value_file(str(tmp_path / "input_0.pb"), "x")
    assert name == "x"
    np.testing.assert_array_equal(value, arr)
    with pytest.raises(nxrt.capi.InvalidArgument, match="'z' is neither an input nor an output"):
        sess.read_value_file(str(tmp_path / "input_0.pb"), "z")
