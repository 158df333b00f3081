"""Small ONNX models for the tests, built with onnx.helper (Debian python3-onnx)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def info(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def model_bytes(nodes, inputs, outputs, initializers=(), opset=17, ir_version=8, extra_opsets=(), **fields):
    """Serialized ModelProto. fields: producer_name, doc_string, graph_name, metadata (dict), ..."""
    metadata = fields.pop("metadata", {})
    graph_name = fields.pop("graph_name", "g")
    graph_doc = fields.pop("graph_doc", "")
    graph = helper.make_graph(list(nodes), graph_name, list(inputs), list(outputs), list(initializers),
                              doc_string=graph_doc)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, **fields)
    m.ir_version = ir_version
    for k, v in metadata.items():
        m.metadata_props.add(key=k, value=v)
    return m.SerializeToString()


def add_model(**fields):
    """y = x + w, x float32[batch, 3] (symbolic batch), w an overridable initializer float32[3]."""
    w = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    return model_bytes([helper.make_node("Add", ["x", "w"], ["y"])],
                       [info("x", TensorProto.FLOAT, ["batch", 3]), info("w", TensorProto.FLOAT, [3])],
                       [info("y", TensorProto.FLOAT, ["batch", 3])], [w], **fields)


def unary_model(op, elem_type, out_type=None, opset=17, ir_version=8, shape=None, **attrs):
    """y = op(x) over one dtype (out_type: the output's, default the input's)."""
    shape = shape if shape is not None else ["n"]
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    return model_bytes([node], [info("x", elem_type, shape)],
                       [info("y", out_type if out_type is not None else elem_type, shape)],
                       opset=opset, ir_version=ir_version)


def matmul_chain_model(size=512, steps=100):
    """x float32[1, size, size] multiplied by the identity `steps` times: a run long enough to watch
    other threads while it goes (the result equals x)."""
    w = numpy_helper.from_array(np.eye(size, dtype=np.float32), "w")
    nodes, prev = [], "x"
    for i in range(steps):
        out = "y" if i == steps - 1 else f"t{i}"
        nodes.append(helper.make_node("MatMul", [prev, "w"], [out]))
        prev = out
    return model_bytes(nodes, [info("x", TensorProto.FLOAT, [1, size, size])],
                       [info("y", TensorProto.FLOAT, [1, size, size])], [w])
