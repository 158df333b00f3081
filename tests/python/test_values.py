"""numpy dtypes, strings, the carriers of types numpy lacks, sequences / maps / optionals, and which
arrays are shared with nxrt (zero copy) and which are copied."""
import os

import numpy as np
import pytest
from onnx import TensorProto, TypeProto, helper

import nxrt
from backend_data import compare, read_feeds, run_test_dir, suite_roots
from builders import info, model_bytes, unary_model

NUMERIC = [
    (np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE), (np.float16, TensorProto.FLOAT16),
    (np.int8, TensorProto.INT8), (np.int16, TensorProto.INT16), (np.int32, TensorProto.INT32),
    (np.int64, TensorProto.INT64), (np.uint8, TensorProto.UINT8), (np.uint16, TensorProto.UINT16),
    (np.uint32, TensorProto.UINT32), (np.uint64, TensorProto.UINT64),
]


def session(data, threads=1):
    so = nxrt.SessionOptions()
    so.intra_op_num_threads = threads
    return nxrt.InferenceSession(data, so)


@pytest.mark.parametrize("np_type,onnx_type", NUMERIC)
def test_numeric_dtypes_round_trip(np_type, onnx_type):
    sess = session(unary_model("Identity", onnx_type))
    x = (np.arange(7) * 3 % 11).astype(np_type)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, x)
    # Computed outputs (a run buffer) too: Max(x, x) == x for every numeric type.
    data = model_bytes([helper.make_node("Max", ["x", "x"], ["y"])], [info("x", onnx_type, ["n"])],
                       [info("y", onnx_type, ["n"])], opset=13)
    (z,) = session(data).run(None, {"x": x})
    assert z.dtype == np_type
    np.testing.assert_array_equal(z, x)


def test_float16_arithmetic():
    data = model_bytes([helper.make_node("Add", ["x", "x"], ["y"])], [info("x", TensorProto.FLOAT16, [4])],
                       [info("y", TensorProto.FLOAT16, [4])])
    x = np.array([0.5, -1.25, 1000, 65504 / 4], np.float16)
    (y,) = session(data).run(None, {"x": x})
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, x + x)


def test_bool_and_complex():
    (y,) = session(unary_model("Not", TensorProto.BOOL)).run(None, {"x": np.array([True, False, True])})
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, [False, True, False])
    x = np.array([1 + 2j, -3.5j], np.complex64)
    (z,) = session(unary_model("Identity", TensorProto.COMPLEX64)).run(None, {"x": x})
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z, x)


def test_strings_in_every_numpy_spelling():
    sess = session(unary_model("Identity", TensorProto.STRING, shape=[2, 2]))
    want = [["a", "β"], ["", "long string " * 4]]
    for x in (np.array(want), np.array(want, dtype=object), [[s for s in row] for row in want]):
        (y,) = sess.run(None, {"x": x})
        assert y.dtype == object and y.shape == (2, 2)
        assert y.tolist() == want
    (b,) = sess.run(None, {"x": np.array([[b"x", b"y"], [b"", b"z"]])})
    assert b.tolist() == [["x", "y"], ["", "z"]]
    with pytest.raises(nxrt.capi.InvalidArgument, match="input 'x': string tensor element 1 is a int"):
        sess.run(None, {"x": np.array([["a", 3], ["b", "c"]], dtype=object)})
    upper = model_bytes([helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="UPPER")],
                        [info("x", TensorProto.STRING, [3])], [info("y", TensorProto.STRING, [3])], opset=10)
    (u,) = session(upper).run(None, {"x": np.array(["ab", "Cd", "é"])})
    assert u.tolist() == ["AB", "CD", "É"]


def test_lists_and_scalars_take_the_declared_dtype():
    sess = session(unary_model("Identity", TensorProto.FLOAT, shape=[3]))
    (y,) = sess.run(None, {"x": [1, 2, 3]})
    assert y.dtype == np.float32 and y.tolist() == [1, 2, 3]
    scalar = session(unary_model("Identity", TensorProto.INT64, shape=[]))
    (s,) = scalar.run(None, {"x": 5})
    assert s.shape == () and s.dtype == np.int64 and int(s) == 5


def test_bfloat16_travels_as_uint16_bits():
    to_bf16 = session(unary_model("Cast", TensorProto.FLOAT, TensorProto.BFLOAT16, opset=13, to=TensorProto.BFLOAT16))
    x = np.array([1.0, -2.5, 0.15625, 2.0**100], np.float32)  # exact in bfloat16
    (bits,) = to_bf16.run(None, {"x": x})
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, (x.view(np.uint32) >> 16).astype(np.uint16))
    assert to_bf16.get_outputs()[0].type == "tensor(bfloat16)"
    back = session(unary_model("Cast", TensorProto.BFLOAT16, TensorProto.FLOAT, opset=13, to=TensorProto.FLOAT))
    (f,) = back.run(None, {"x": bits})
    np.testing.assert_array_equal(f, x)


def test_float8_travels_as_uint8_bits():
    to_f8 = session(unary_model("Cast", TensorProto.FLOAT, 17, opset=19, ir_version=9, to=17))  # FLOAT8E4M3FN
    x = np.array([1.0, -2.0, 0.5, 448.0], np.float32)
    (bits,) = to_f8.run(None, {"x": x})
    assert bits.dtype == np.uint8
    np.testing.assert_array_equal(bits, [0x38, 0xC0, 0x30, 0x7E])
    back = session(unary_model("Cast", 17, TensorProto.FLOAT, opset=19, ir_version=9, to=TensorProto.FLOAT))
    np.testing.assert_array_equal(back.run(None, {"x": bits})[0], x)
    ov = nxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, 17)
    assert ov.data_type() == "tensor(float8e4m3fn)" and ov.element_type() == 17
    np.testing.assert_array_equal(back.run_with_ort_values(None, {"x": ov})[0].numpy(), x)


def test_int4_travels_as_one_int8_per_element():
    sess = session(unary_model("Identity", 22, opset=21, ir_version=10, shape=[5]))  # INT4
    x = np.array([-8, 7, 0, 3, -1], np.int8)  # odd count: the last byte is half used
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, x)
    with pytest.raises(nxrt.capi.InvalidArgument, match=r"element 1 is 9, which does not fit int4 \[-8, 7\]"):
        sess.run(None, {"x": np.array([1, 9, 0, 0, 0], np.int8)})
    cast = session(unary_model("Cast", TensorProto.FLOAT, 21, opset=21, ir_version=10, to=21))  # to UINT4
    (u,) = cast.run(None, {"x": np.array([0, 15, 3.0], np.float32)})
    assert u.dtype == np.uint8
    np.testing.assert_array_equal(u, [0, 15, 3])


def test_wrong_dtype_is_an_error_naming_input_and_types():
    sess = session(unary_model("Identity", TensorProto.FLOAT, shape=[2]))
    with pytest.raises(nxrt.capi.InvalidArgument) as e:
        sess.run(None, {"x": np.zeros(2, np.float64)})
    assert "input 'x' expects tensor(float32)[2] but was fed float64[2]: dtype differs" in str(e.value)
    with pytest.raises(nxrt.capi.InvalidArgument, match="numpy dtype datetime64"):
        sess.run(None, {"x": np.zeros(2, "datetime64[s]")})


def test_non_contiguous_and_foreign_byte_order_inputs_are_copied_correctly():
    sess = session(unary_model("Identity", TensorProto.FLOAT, shape=[2, 3]))
    base = np.arange(12, dtype=np.float32).reshape(2, 6)
    (y,) = sess.run(None, {"x": base[:, ::2]})
    np.testing.assert_array_equal(y, base[:, ::2])
    (t,) = sess.run(None, {"x": np.arange(6, dtype=np.float32).reshape(3, 2).T})
    np.testing.assert_array_equal(t, np.arange(6, dtype=np.float32).reshape(3, 2).T)
    big_endian = np.arange(6, dtype=">f4").reshape(2, 3)
    (b,) = sess.run(None, {"x": big_endian})
    np.testing.assert_array_equal(b, big_endian.astype(np.float32))
    unaligned = np.frombuffer(b"\0" + np.arange(6, dtype=np.float32).tobytes(), np.float32, count=6, offset=1)
    (u,) = sess.run(None, {"x": unaligned.reshape(2, 3)})
    np.testing.assert_array_equal(u, np.arange(6, dtype=np.float32).reshape(2, 3))


# --- zero copy -------------------------------------------------------------------------------------


def test_ortvalue_from_contiguous_numpy_reads_the_array_in_place():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ov = nxrt.OrtValue.ortvalue_from_numpy(a)
    assert ov.data_ptr() == a.ctypes.data
    view = ov.numpy()
    assert view.ctypes.data == a.ctypes.data
    a[0, 0] = 42
    assert view[0, 0] == 42
    strided = nxrt.OrtValue.ortvalue_from_numpy(a[:, ::2])
    assert strided.data_ptr() != a.ctypes.data  # copied: nxrt tensors are contiguous
    np.testing.assert_array_equal(strided.numpy(), a[:, ::2])


def test_run_outputs_are_nxrts_buffers_not_copies():
    data = model_bytes([helper.make_node("Add", ["x", "x"], ["y"])], [info("x", TensorProto.FLOAT, [256])],
                       [info("y", TensorProto.FLOAT, [256])])
    sess = session(data)
    x = np.ones(256, np.float32)
    (y,) = sess.run(None, {"x": x})
    assert not y.flags.owndata and type(y.base).__name__ == "PyCapsule"
    address = y.ctypes.data
    del y
    # The block y lived in is the session's: once y is gone the next run computes into it again, and an
    # OrtValue result shows that address as nxrt's own buffer.
    (ov,) = sess.run_with_ort_values(None, {"x": nxrt.OrtValue.ortvalue_from_numpy(x)})
    assert ov.data_ptr() == address
    assert ov.numpy().ctypes.data == address


def test_held_outputs_are_never_overwritten_and_outlive_the_session():
    data = model_bytes([helper.make_node("Add", ["x", "x"], ["y"])], [info("x", TensorProto.FLOAT, [64])],
                       [info("y", TensorProto.FLOAT, [64])])
    sess = session(data)
    (y1,) = sess.run(None, {"x": np.ones(64, np.float32)})
    y1[:] = -7
    (y2,) = sess.run(None, {"x": np.ones(64, np.float32)})
    assert y1.ctypes.data != y2.ctypes.data
    assert (y1 == -7).all() and (y2 == 2).all()
    del sess
    import gc
    gc.collect()
    assert (y2 == 2).all()


def test_outputs_that_are_not_run_buffers_are_copies():
    # y = x: the output is the caller's array, returned as a copy.
    sess = session(unary_model("Identity", TensorProto.FLOAT, shape=[4]))
    x = np.arange(4, dtype=np.float32)
    (y,) = sess.run(None, {"x": x})
    assert not np.shares_memory(x, y)
    # c is a constant the session keeps: writing into the result must not change the next run.
    const = model_bytes([helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1, 2])),
                         helper.make_node("Identity", ["x"], ["y"])],
                        [info("x", TensorProto.FLOAT, [1])], [info("c", TensorProto.FLOAT, [2]), info("y", TensorProto.FLOAT, [1])])
    sess = session(const)
    c, _ = sess.run(None, {"x": np.zeros(1, np.float32)})
    c[:] = 99
    c2, _ = sess.run(None, {"x": np.zeros(1, np.float32)})
    np.testing.assert_array_equal(c2, [1, 2])
    # Two outputs viewing one run buffer: the second is a copy, so they do not alias.
    two = model_bytes([helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Identity", ["s"], ["a"]),
                       helper.make_node("Identity", ["s"], ["b"])],
                      [info("x", TensorProto.FLOAT, [8])], [info("a", TensorProto.FLOAT, [8]), info("b", TensorProto.FLOAT, [8])])
    a, b = session(two).run(None, {"x": np.ones(8, np.float32)})
    assert not np.shares_memory(a, b)
    a[:] = 0
    assert (b == 2).all()


# --- sequences, maps, optionals ------------------------------------------------------------------


def _map_type(key, value):
    t = TypeProto()
    t.map_type.key_type = key
    t.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(value, None))
    return t


def test_maps_in_and_out():
    ml = [("ai.onnx.ml", 1)]
    zipmap = model_bytes([helper.make_node("ZipMap", ["x"], ["y"], domain="ai.onnx.ml", classlabels_strings=["a", "b"])],
                         [info("x", TensorProto.FLOAT, [2, 2])],
                         [helper.make_value_info("y", helper.make_sequence_type_proto(_map_type(TensorProto.STRING, TensorProto.FLOAT)))],
                         extra_opsets=ml)
    sess = session(zipmap)
    assert sess.get_outputs()[0].type == "seq(map(string,tensor(float)))"
    (rows,) = sess.run(None, {"x": np.array([[0.25, 0.75], [1, 0]], np.float32)})
    assert rows == [{"a": 0.25, "b": 0.75}, {"a": 1.0, "b": 0.0}]
    vectorizer = model_bytes([helper.make_node("DictVectorizer", ["x"], ["y"], domain="ai.onnx.ml", int64_vocabulary=[3, 1, 2])],
                             [helper.make_value_info("x", _map_type(TensorProto.INT64, TensorProto.FLOAT))],
                             [info("y", TensorProto.FLOAT, [1, 3])], extra_opsets=ml)
    sess = session(vectorizer)
    assert sess.get_inputs()[0].type == "map(int64,tensor(float))"
    (y,) = sess.run(None, {"x": {1: 5.0, 3: 2.5}})
    np.testing.assert_array_equal(y, [[2.5, 5.0, 0.0]])
    with pytest.raises(nxrt.capi.InvalidArgument, match=r"input 'x': expects map\(int64,tensor\(float\)\) \(a dict\), got a list"):
        sess.run(None, {"x": [1, 2]})


def test_optionals_in_and_out():
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    has = model_bytes([helper.make_node("OptionalHasElement", ["x"], ["h"]), helper.make_node("Identity", ["x"], ["y"])],
                      [helper.make_value_info("x", opt)],
                      [info("h", TensorProto.BOOL, []), helper.make_value_info("y", opt)], opset=18)
    sess = session(has)
    assert sess.get_inputs()[0].type == "optional(tensor(float))"
    h, y = sess.run(None, {"x": None})
    assert bool(h) is False and y is None
    h, y = sess.run(None, {"x": np.array([1, 2], np.float32)})
    assert bool(h) is True
    np.testing.assert_array_equal(y, [1, 2])


def test_sequences_in_and_out():
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, None))
    data = model_bytes([helper.make_node("SequenceInsert", ["s", "t"], ["out"]), helper.make_node("SequenceLength", ["out"], ["n"])],
                       [helper.make_value_info("s", seq), info("t", TensorProto.INT64, None)],
                       [helper.make_value_info("out", seq), info("n", TensorProto.INT64, [])], opset=17)
    sess = session(data)
    assert sess.get_inputs()[0].type == "seq(tensor(int64))"
    out, n = sess.run(None, {"s": [np.array([1, 2]), np.array([[3]])], "t": np.array([4, 5, 6])})
    assert int(n) == 3 and isinstance(out, list)
    for got, want in zip(out, [[1, 2], [[3]], [4, 5, 6]]):
        np.testing.assert_array_equal(got, want)
    out, n = sess.run(None, {"s": [], "t": np.array([7])})
    assert int(n) == 1 and out[0].tolist() == [7]
    with pytest.raises(nxrt.capi.InvalidArgument, match=r"input 's': expects seq\(tensor\(int64\)\) \(a list\)"):
        sess.run(None, {"s": np.array([1]), "t": np.array([1])})


# Backend tests with sequence / optional inputs and outputs, in both the ONNX 1.23 suite and Debian's.
CONFORMANCE_TESTS = ["node/test_sequence_insert_at_back", "node/test_identity_sequence", "node/test_identity_opt",
                     "node/test_if_seq", "node/test_if_opt", "node/test_loop16_seq_none", "node/test_loop13_seq",
                     "node/test_optional_get_element_sequence", "simple/test_sequence_model1", "simple/test_sequence_model8",
                     "simple/test_strnorm_model_monday_casesensintive_upper"]


@pytest.mark.parametrize("test_id", CONFORMANCE_TESTS)
def test_sequences_and_optionals_from_the_conformance_suites(test_id):
    roots = suite_roots()
    if not roots:
        pytest.skip("no conformance suite present")
    ran = 0
    for root in roots.values():
        d = os.path.join(root, test_id)
        if not os.path.isdir(d):
            continue
        assert run_test_dir(d) is None
        sess = session(os.path.join(d, "model.onnx"))
        feeds = read_feeds(sess, os.path.join(d, "test_data_set_0"))
        for arg in sess.get_inputs():
            v = feeds.get(arg.name)
            if arg.type.startswith("seq("):
                assert isinstance(v, list)
            elif arg.type.startswith("optional(") and v is not None:
                assert isinstance(v, (list, np.ndarray))
        outs = sess.run(None, feeds)
        for arg, out in zip(sess.get_outputs(), outs):
            if arg.type.startswith("seq("):
                assert isinstance(out, list) and all(isinstance(t, np.ndarray) for t in out)
        ran += 1
    if ran == 0:
        pytest.skip(f"{test_id} is in no suite present")


def test_compare_helper_catches_differences():
    # The sweep's comparison must be able to fail.
    assert compare(np.float32([1, 2]), np.float32([1, 2.1]), "tensor(float)", "o") is not None
    assert compare(np.float32([1, np.nan]), np.float32([1, np.nan]), "tensor(float)", "o") is None
    assert compare([np.int64([1])], [np.int64([2])], "seq(tensor(int64))", "o") is not None
    assert compare(None, np.float32([1]), "optional(tensor(float))", "o") is not None
    assert compare(np.uint16([0x3F80]), np.uint16([0x3F80]), "tensor(bfloat16)", "o") is None
    assert compare(np.uint16([0x3F80]), np.uint16([0x4000]), "tensor(bfloat16)", "o") is not None  # 1 vs 2
