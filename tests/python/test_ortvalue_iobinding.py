"""OrtValue, run_with_ort_values, IOBinding and run_with_iobinding."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import nxrt
from builders import add_model, info, model_bytes


def test_ortvalue_api():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    ov = nxrt.OrtValue.ortvalue_from_numpy(a, "cpu", 0)
    assert ov.is_tensor() and not ov.is_sparse_tensor() and not ov.is_tensor_sequence()
    assert ov.has_value()
    assert ov.shape() == [2, 3]
    assert ov.data_type() == "tensor(float)"
    assert ov.element_type() == TensorProto.FLOAT
    assert ov.device_name() == "cpu"
    np.testing.assert_array_equal(ov.numpy(), a)
    assert repr(ov) == "OrtValue(float32[2,3])"
    ov.update_inplace(np.full((2, 3), 4, np.float32))
    assert (a == 4).all()  # the OrtValue reads a's memory
    with pytest.raises(nxrt.capi.InvalidArgument, match="update_inplace"):
        ov.update_inplace(np.zeros(5, np.float32))
    z = nxrt.OrtValue.ortvalue_from_shape_and_type([2, 2], np.int64)
    assert z.data_type() == "tensor(int64)" and (z.numpy() == 0).all()
    assert nxrt.OrtValue.ortvalue_from_shape_and_type([3], TensorProto.FLOAT16).numpy().dtype == np.float16
    s = nxrt.OrtValue.ortvalue_from_numpy(np.array(["x", "yz"]))
    assert s.data_type() == "tensor(string)" and s.numpy().tolist() == ["x", "yz"]
    with pytest.raises(nxrt.capi.InvalidArgument, match="nxrt runs on the CPU only"):
        nxrt.OrtValue.ortvalue_from_numpy(a, "cuda", 0)
    with pytest.raises(nxrt.capi.InvalidArgument, match="negative dimension"):
        nxrt.OrtValue.ortvalue_from_shape_and_type([-1], np.float32)
    with pytest.raises(nxrt.capi.InvalidArgument, match="cannot hold float8e5m2"):
        nxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(np.zeros(2, np.float32), 19)


def test_run_with_ort_values():
    sess = nxrt.InferenceSession(add_model())
    x = nxrt.OrtValue.ortvalue_from_numpy(np.ones((2, 3), np.float32))
    (y,) = sess.run_with_ort_values(["y"], {"x": x})
    assert isinstance(y, nxrt.OrtValue)
    np.testing.assert_array_equal(y.numpy(), [[2, 3, 4]] * 2)
    (all_outputs,) = sess.run_with_ort_values(None, {"x": x})
    assert all_outputs.as_python().tolist() == [[2, 3, 4]] * 2
    # run() takes OrtValues as feeds too.
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], y.numpy())


def test_ort_value_sequences():
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    data = model_bytes([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)],
                       [info("x", TensorProto.FLOAT, [3, 2])], [helper.make_value_info("s", seq)], opset=17)
    sess = nxrt.InferenceSession(data)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    (s,) = sess.run_with_ort_values(None, {"x": nxrt.OrtValue.ortvalue_from_numpy(x)})
    assert s.is_tensor_sequence() and not s.is_tensor()
    assert s.data_type() == "seq(tensor(float))"
    items = s.as_python()
    assert [i.tolist() for i in items] == x.tolist()
    with pytest.raises(nxrt.capi.InvalidArgument, match=r"numpy\(\) needs a tensor; this OrtValue is seq"):
        s.numpy()


def test_iobinding_cpu_input_and_runtime_allocated_output():
    sess = nxrt.InferenceSession(add_model())
    binding = sess.io_binding()
    x = np.ones((2, 3), np.float32)
    binding.bind_cpu_input("x", x)
    binding.bind_output("y")
    sess.run_with_iobinding(binding)
    (out,) = binding.get_outputs()
    np.testing.assert_array_equal(out.numpy(), x + [1, 2, 3])
    assert out.numpy().ctypes.data == out.data_ptr()  # a view of nxrt's buffer
    (copied,) = binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(copied, out.numpy())
    assert copied.ctypes.data != out.data_ptr()
    assert binding.get_output_names() == ["y"]
    x[:] = 10  # bound in place: the next run reads the new values
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], [[11, 12, 13]] * 2)
    binding.synchronize_inputs()
    binding.synchronize_outputs()


def test_iobinding_outputs_into_caller_memory():
    sess = nxrt.InferenceSession(add_model())
    binding = nxrt.IOBinding(sess)
    x = np.ones((2, 3), np.float32)
    y = np.zeros((2, 3), np.float32)
    binding.bind_input("x", "cpu", 0, np.float32, [2, 3], x.ctypes.data)
    binding.bind_output("y", "cpu", 0, np.float32, [2, 3], y.ctypes.data)
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(y, [[2, 3, 4]] * 2)  # written in place
    assert binding.get_outputs()[0].data_ptr() == y.ctypes.data
    out_ov = nxrt.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    binding.clear_binding_outputs()
    binding.bind_ortvalue_output("y", out_ov)
    binding.clear_binding_inputs()
    binding.bind_ortvalue_input("x", nxrt.OrtValue.ortvalue_from_numpy(np.full((2, 3), 2, np.float32)))
    sess.run_with_iobinding(binding)
    np.testing.assert_array_equal(out_ov.numpy(), [[3, 4, 5]] * 2)


def test_iobinding_errors():
    sess = nxrt.InferenceSession(add_model())
    binding = sess.io_binding()
    binding.bind_output("y")
    with pytest.raises(nxrt.capi.InvalidArgument, match="input 'x' .* is required but was not bound"):
        sess.run_with_iobinding(binding)
    binding.bind_cpu_input("nope", np.zeros(1, np.float32))
    with pytest.raises(nxrt.capi.InvalidArgument, match="bound input 'nope' is not an input of the model"):
        sess.run_with_iobinding(binding)
    other = nxrt.InferenceSession(add_model())
    with pytest.raises(nxrt.capi.InvalidArgument, match="belongs to another session"):
        other.run_with_iobinding(binding)
    with pytest.raises(nxrt.capi.InvalidArgument, match="buffer_ptr is null"):
        binding.bind_input("x", "cpu", 0, np.float32, [1, 3], 0)
    with pytest.raises(nxrt.capi.InvalidArgument, match="needs element_type and shape"):
        binding.bind_output("y", "cpu", 0, None, None, 1234)
