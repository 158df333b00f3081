"""nxrt: a C++20 ONNX inference runtime with ONNX Runtime's Python API.

Switching from onnxruntime is meant to be a change of import::

    import nxrt as ort
    sess = ort.InferenceSession("model.onnx")
    outputs = sess.run(None, {"x": x})

``nxrt.genai`` mirrors ``onnxruntime_genai``. docs/python.md lists what is supported, what differs
and what is not there yet.
"""
from nxrt._nxrt import (
    IOBinding,
    ModelMetadata,
    NodeArg,
    NxrtError,
    OrtValue,
    __version__,
)
from nxrt._session import (
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    RunOptions,
    SessionOptions,
    get_available_providers,
    get_device,
    set_default_logger_severity,
    set_default_logger_verbosity,
)
from nxrt import capi

__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "IOBinding",
    "ModelMetadata",
    "NodeArg",
    "NxrtError",
    "OrtValue",
    "RunOptions",
    "SessionOptions",
    "__version__",
    "capi",
    "get_available_providers",
    "get_device",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
]
