"""Errors: ONNX Runtime's class names, one base class, nxrt's full messages."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import nxrt
from builders import add_model, info, model_bytes


def test_hierarchy():
    for cls in (nxrt.capi.InvalidArgument, nxrt.capi.Fail, nxrt.capi.NoSuchFile, nxrt.capi.InvalidGraph,
                nxrt.capi.NotImplemented):
        assert issubclass(cls, nxrt.NxrtError)
        assert cls.__module__ == "nxrt.capi"
    assert issubclass(nxrt.NxrtError, RuntimeError)
    assert nxrt.NxrtError.__module__ == "nxrt"
    assert nxrt.capi.NxrtError is nxrt.NxrtError


def test_no_such_file(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(nxrt.capi.NoSuchFile) as e:
        nxrt.InferenceSession(str(missing))
    assert str(missing) in str(e.value)


def test_invalid_graph_names_what_is_wrong():
    with pytest.raises(nxrt.capi.InvalidGraph):
        nxrt.InferenceSession(b"\x08\x07garbage that is not a model")
    dangling = model_bytes([helper.make_node("Relu", ["nowhere"], ["y"])], [info("x", TensorProto.FLOAT, [1])],
                           [info("y", TensorProto.FLOAT, [1])])
    with pytest.raises(nxrt.NxrtError) as e:
        nxrt.InferenceSession(dangling)
    assert "nowhere" in str(e.value)


def test_not_implemented_names_the_op():
    data = model_bytes([helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")],
                       [info("x", TensorProto.FLOAT, [1])], [info("y", TensorProto.FLOAT, [1])],
                       extra_opsets=[("com.example", 1)])
    with pytest.raises(nxrt.capi.NotImplemented) as e:
        nxrt.InferenceSession(data)
    assert "NoSuchOp" in str(e.value) and "com.example" in str(e.value)


def test_kernel_failure_carries_node_op_and_shapes():
    data = model_bytes([helper.make_node("Reshape", ["x", "s"], ["y"], name="the_reshape")],
                       [info("x", TensorProto.FLOAT, ["n"]), info("s", TensorProto.INT64, [2])],
                       [info("y", TensorProto.FLOAT, None)])
    sess = nxrt.InferenceSession(data)
    with pytest.raises(nxrt.NxrtError) as e:
        sess.run(None, {"x": np.zeros(6, np.float32), "s": np.array([4, 4], np.int64)})
    message = str(e.value)
    assert "the_reshape" in message and "Reshape" in message and "float32[6]" in message, message
    assert isinstance(e.value, RuntimeError)


def test_feed_errors():
    sess = nxrt.InferenceSession(add_model())
    with pytest.raises(nxrt.capi.InvalidArgument, match="input 'x' .* is required but was not fed"):
        sess.run(None, {})
    with pytest.raises(nxrt.capi.InvalidArgument, match="feed 'nope' is not an input of the model"):
        sess.run(None, {"x": np.zeros((1, 3), np.float32), "nope": np.zeros(1)})
    with pytest.raises(nxrt.capi.InvalidArgument, match="'z' is not an output of the model"):
        sess.run(["z"], {"x": np.zeros((1, 3), np.float32)})
    with pytest.raises(nxrt.capi.InvalidArgument, match="dimension 1 must be 3"):
        sess.run(None, {"x": np.zeros((1, 4), np.float32)})
    with pytest.raises(nxrt.capi.InvalidArgument, match="input names must be str"):
        sess.run(None, {1: np.zeros((1, 3), np.float32)})
    # `except Exception` code keeps working.
    try:
        sess.run(None, {})
    except Exception as e:  # noqa: BLE001
        assert isinstance(e, nxrt.capi.InvalidArgument)
